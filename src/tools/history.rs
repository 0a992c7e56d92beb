//! `rw_diff`, `rw_blame` and `rw_rewind`: an agent inspects and undoes work — its own (its MCP session, or
//! the session its shell commands ran in), or everything since a time — with the envelopes of
//! every other tool. `rw_rewind` only plans unless `confirm` is true.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::engine::Rewind;
use crate::history::{RestoreTo, Rev, SHOWN_MAX};
use crate::journal::query::Selection;

use super::{Call, Failure, Outcome, Tools, ok};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// One file: a unified diff between two of its versions (binary content: sizes and
    /// digests; a version over 4 MiB is not compared, and the answer's `note` says so). Without
    /// it, give `since` or `session` for a per-file summary.
    #[serde(default)]
    pub path: Option<String>,
    /// With `path`: the older version, a sha256 prefix (4+ hex digits), `seq:N` or a time
    /// (RFC 3339). Default: the version before the last change.
    #[serde(default)]
    pub from: Option<String>,
    /// With `path`: the newer version (default: the current one).
    #[serde(default)]
    pub to: Option<String>,
    /// Summarise every file changed since this time (RFC 3339).
    #[serde(default)]
    pub since: Option<String>,
    /// Summarise every file this session changed (`rw_journal_tail` rows name it); `"self"`:
    /// your own agent run (its edit tool, shell commands and these MCP calls alike).
    #[serde(default)]
    pub session: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlameArgs {
    /// The file: each line of its current version with the journal row that wrote it.
    pub path: String,
    /// The first line returned (1-based; default 1).
    #[serde(default)]
    pub from_line: Option<usize>,
    /// At most this many lines (default and cap: 1,000); `total_lines` says how many there are.
    #[serde(default)]
    pub max_lines: Option<usize>,
}

/// The most lines one `rw_blame` answer carries.
const BLAME_MAX_LINES: usize = 1000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RewindArgs {
    /// Undo this session's changes (`"self"`: your own agent run — its edit tool, shell
    /// commands and these MCP calls alike); others' changes stay.
    #[serde(default)]
    pub session: Option<String>,
    /// Or: the workspace as it was at this time (RFC 3339).
    #[serde(default)]
    pub to_time: Option<String>,
    /// Or: as it was right after the journal row with this seq.
    #[serde(default)]
    pub to_seq: Option<u64>,
    /// Or: take back an earlier rewind (its `group`).
    #[serde(default)]
    pub undo_group: Option<String>,
    /// Or: undo exactly one tool call of an agent (its id, `toolu_…`: the `group` of the rows
    /// written while it ran).
    #[serde(default)]
    pub tool_call: Option<String>,
    /// Only paths matching these globs (`src/**`).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Perform the plan. Without it (the default) only the plan is returned and nothing changes.
    #[serde(default)]
    pub confirm: bool,
    /// Also overwrite files changed outside rwfs since their last journal row.
    #[serde(default)]
    pub force: bool,
}

impl Tools {
    /// `rw_blame`: a window of the file's lines, each with the row (seq, time, session,
    /// process) that introduced it; `rwfs blame`'s answer, paged.
    pub fn blame(&self, call: &Call, args: BlameArgs) -> Outcome {
        if args.from_line == Some(0) || args.max_lines == Some(0) {
            return Err(self.bad_argument(call, "from_line", "from_line and max_lines start at 1", json!({})));
        }
        let b = self.engine().workspace().blame(&args.path).map_err(|e| self.fail(call, e, None))?;
        let total = b.lines.len();
        let from = args.from_line.unwrap_or(1) - 1;
        let take = args.max_lines.unwrap_or(BLAME_MAX_LINES).min(BLAME_MAX_LINES);
        let lines: Vec<_> = b.lines.iter().skip(from).take(take).collect();
        let next = (from + lines.len() < total).then_some(from + lines.len() + 1);
        let mut answer = json!({
            "path": b.path, "current_sha256": b.current, "binary": b.binary, "total_lines": total,
            "lines": lines, "next_from_line": next,
        });
        if let Some(note) = b.note {
            answer["note"] = json!(note);
        }
        Ok(ok(answer))
    }

    pub fn diff(&self, call: &Call, args: DiffArgs) -> Outcome {
        let ws = self.engine().workspace();
        if let Some(path) = &args.path {
            let rev = |name: &str, s: &Option<String>| -> Result<Option<Rev>, Failure> {
                s.as_deref().map(|s| self.time_or_version(call, name, s)).transpose()
            };
            let (from, to) = (rev("from", &args.from)?, rev("to", &args.to)?);
            let d = ws.diff(path, from.as_ref(), to.as_ref(), Some(SHOWN_MAX)).map_err(|e| self.fail(call, e, None))?;
            let mut answer = json!({
                "path": d.path, "from": d.from, "to": d.to, "from_bytes": d.from_bytes, "to_bytes": d.to_bytes,
                "binary": d.binary, "added": d.added, "removed": d.removed, "diff": d.unified,
            });
            if let Some(note) = d.note {
                answer["note"] = json!(note);
            }
            return Ok(ok(answer));
        }
        let selection = match (&args.since, &args.session) {
            (Some(since), None) => Selection::AfterTime(self.time_arg(call, "since", since)?),
            (None, Some(session)) => Selection::Session(self.session_name(call, session)),
            _ => {
                return Err(self.bad_argument(
                    call,
                    "path",
                    "give path, or exactly one of since and session",
                    json!({}),
                ));
            }
        };
        let files = ws.diff_stat(&selection, Some(SHOWN_MAX)).map_err(|e| self.fail(call, e, None))?;
        let (added, removed) = files.iter().fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
        Ok(ok(json!({"files": files, "files_changed": files.len(), "insertions": added, "deletions": removed})))
    }

    pub fn rewind(&self, call: &Call, args: RewindArgs) -> Outcome {
        let group = match (&args.undo_group, &args.tool_call) {
            (Some(_), Some(_)) => None,
            (group, call) => Some(group.as_ref().or(call.as_ref())),
        };
        let selection = match (&args.session, &args.to_time, args.to_seq, group) {
            (Some(s), None, None, Some(None)) => Selection::Session(self.session_name(call, s)),
            (None, Some(t), None, Some(None)) => Selection::AfterTime(self.time_arg(call, "to_time", t)?),
            (None, None, Some(seq), Some(None)) => Selection::AfterSeq(seq),
            (None, None, None, Some(Some(g))) => Selection::Group(g.clone()),
            _ => {
                return Err(self.bad_argument(
                    call,
                    "session",
                    "give exactly one of session, to_time, to_seq, undo_group and tool_call",
                    json!({}),
                ));
            }
        };
        let rewind = Rewind { selection, globs: args.paths, force: args.force, dry_run: !args.confirm };
        let r = self.engine().rewind(&rewind, &call.actor).map_err(|e| self.fail(call, e, None))?;
        let mut value = serde_json::to_value(&r).unwrap_or_default();
        if !args.confirm {
            value["next"] = json!("nothing changed: call again with confirm: true to apply the steps not skipped");
        }
        Ok(ok(value))
    }

    /// `"self"` is the caller's own session: the agent run that launched the MCP client (every
    /// way that agent wrote), else this MCP connection.
    fn session_name(&self, call: &Call, name: &str) -> String {
        match (name, &call.actor.session_label) {
            ("self", Some(own)) => own.clone(),
            _ => name.to_string(),
        }
    }

    /// A `seq:N` or a digest prefix, else a time as every tool reads it.
    fn time_or_version(&self, call: &Call, argument: &str, text: &str) -> Result<Rev, Failure> {
        let not_a_time = |_: &str| Err(crate::error::Reason::InvalidArgument { what: "time" }.into());
        match Rev::parse(text, not_a_time) {
            Ok(rev) => Ok(rev),
            Err(_) => Ok(Rev::Version(RestoreTo::At(self.time_arg(call, argument, text)?))),
        }
    }
}
