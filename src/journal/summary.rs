//! The vocabulary the history questions share, below both ways of answering them (the index,
//! `index.rs`, and one scan of the journal, `query.rs`): a session's summary and how one row
//! counts in it ([`SessionSummary`], [`count_row`]), which rows a rewind or a diff takes back
//! ([`Selection`]), and whether a path is the state directory's ([`is_state`]).
//!
//! It reads nothing: the index and the scan feed it rows. (It exists so that `index.rs` and
//! `query.rs` need not import each other.)

use super::row::{Op, Row};

/// One session, as `rwfs sessions` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionSummary {
    /// The session's name (`""` for rows older than sessions).
    pub name: String,
    pub start: String,
    pub end: String,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// The process that started it: the first row's process name and pid (`claude[4242]`), or
    /// for an MCP session its client.
    pub root: String,
    pub rows: u64,
    /// Distinct workspace paths whose content it changed.
    pub files_changed: u64,
    /// Writes refused by policy.
    pub blocked: u64,
    /// Agent tool calls its harness's hooks reported (`tool_call` rows).
    #[serde(default)]
    pub tool_calls: u64,
}

/// The summary of a session whose first row is `row`, before counting it.
pub(crate) fn new_session(row: &Row) -> SessionSummary {
    let root = match (&row.comm, row.pid) {
        (Some(comm), Some(pid)) => format!("{comm}[{pid}]"),
        (Some(comm), None) => comm.clone(),
        (None, Some(pid)) => format!("[{pid}]"),
        (None, None) => row.caller.clone(),
    };
    let root = if row.via == Some(super::Via::Mcp) { format!("{} (mcp)", row.caller) } else { root };
    SessionSummary {
        name: row.session.clone().unwrap_or_default(),
        start: row.ts.clone(),
        end: row.ts.clone(),
        first_seq: row.seq,
        last_seq: row.seq,
        root,
        rows: 0,
        files_changed: 0,
        blocked: 0,
        tool_calls: 0,
    }
}

/// Count `row` in its session's summary; returns the workspace path whose content it changed
/// (the caller counts distinct paths into `files_changed`): not a temporary copy renamed over
/// its file nor an editor's swap or backup (`crate::temporary`) — one save is one file changed.
pub(crate) fn count_row<'r>(summary: &mut SessionSummary, row: &'r Row) -> Option<&'r str> {
    summary.rows += 1;
    summary.end = row.ts.clone();
    summary.last_seq = row.seq.or(summary.last_seq);
    match row.op() {
        Op::Block => {
            summary.blocked += 1;
            None
        }
        Op::ToolCall => {
            summary.tool_calls += 1;
            None
        }
        op if op.states_content()
            && op != Op::Recover
            && op != Op::Abort
            && !is_state(&row.path)
            && crate::temporary::of(&row.path).is_none() =>
        {
            Some(&row.path)
        }
        _ => None,
    }
}

/// Which rows a rewind (or a diff) takes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every row after this `seq`.
    AfterSeq(u64),
    /// Every row after this time (RFC 3339 seconds, as rows carry).
    AfterTime(std::time::SystemTime),
    /// The rows of one session.
    Session(String),
    /// The rows of one session after this `seq` (an agent's turn and everything after it).
    SessionAfter(String, u64),
    /// The rows of one group (a rewind, an agent's tool call).
    Group(String),
}

impl Selection {
    pub fn matches(&self, row: &Row) -> bool {
        match self {
            Selection::AfterSeq(seq) => row.seq.is_some_and(|s| s > *seq),
            Selection::AfterTime(t) => crate::time::parse(&row.ts).is_some_and(|ts| ts > *t),
            Selection::Session(name) => row.session.as_deref() == Some(name.as_str()),
            Selection::SessionAfter(name, seq) => {
                row.session.as_deref() == Some(name.as_str()) && row.seq.is_some_and(|s| s > *seq)
            }
            Selection::Group(group) => row.group.as_deref() == Some(group.as_str()),
        }
    }
}

/// Is `path` in the state directory?
pub fn is_state(path: &str) -> bool {
    path == crate::durable::STATE_DIR || path.starts_with(&format!("{}/", crate::durable::STATE_DIR))
}
