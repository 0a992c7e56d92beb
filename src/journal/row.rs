//! One journal row: its fields, their meaning, and their exact serialization.
//!
//! A row is one compact JSON object on one line with its keys in sorted order (the struct's
//! fields are declared alphabetically, which is the order serde writes them). The reference
//! server's keys (`bytes`, `caller`, `journal_id`, `mode`, `path`, `sha256`, `ts`) keep their
//! meaning; rwfs adds `seq`, `op`, `prev_sha256`, `pid`, `comm`, `uid`, `verdict`, `via`,
//! `reason`, `session`, `group`, `chain` and `mac`. Reference rows, which lack the additions, parse
//! unchanged.
//!
//! `sha256` and `prev_sha256` hold the state of the path after and before the change: a digest,
//! or `""` when the path is absent (after a delete, before a create). A `rename` row also names
//! the old path in `from`: the old path is absent after it, and everything that was under it
//! (a directory rename) is now under `path`. [`Ledger`] replays rows into that meaning.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::sha::Sha256;

/// What a row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// A new file.
    Create,
    /// A whole new version of an existing file.
    Write,
    /// Bytes appended to a file (a whole new version too; the old one is kept).
    Append,
    /// Find-and-replace inside a file.
    Replace,
    Delete,
    Rename,
    /// A previous version brought back.
    Restore,
    /// A write refused by policy; the draft is in `objects/` under `sha256`.
    Block,
    /// Recovery found the tree differing from the journal after a crash and recorded the truth.
    Recover,
    /// A commit whose row was written but which failed before the change became visible.
    Abort,
    /// Retention removed versions from `objects/`.
    Gc,
    /// rwfs found, when it opened the workspace, that the journal no longer matched its head
    /// (rows removed from its end, its last rows rewritten): the evidence, kept in the keyed
    /// chain once the head moves on (`reason` says what was found).
    Tamper,
    /// A rewind group's bracket: `mode` `begin` (its `sha256` is the digest of the plan kept
    /// in the state directory, named by `path`) or `end` (`reason` says how it ended).
    Rewind,
    /// A person's decision on a version parked for approval (`engine/approve.rs`): `mode`
    /// `approve` or `deny`, `sha256` the parked version, `reason` `approval=<id> by=<user>`.
    /// An approval's install is a `restore` row of its own, before this one.
    Approval,
    /// An agent harness started a tool call (`journal::tool_calls`; written by `rwfs hook`):
    /// `mode` `start`, `group` the call's id (the rows written while it runs carry the same
    /// `group`), `caller` the harness, `sha256` the digest of the prompt of the turn when known,
    /// `reason` `tool=NAME turn=N agent_session=ID label=FIRST WORDS` (each part only when
    /// known; the label last, never holding what the scanner finds).
    #[serde(rename = "tool_call")]
    ToolCall,
    /// An op from a newer rwfs.
    #[serde(other)]
    Other,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Write => "write",
            Op::Append => "append",
            Op::Replace => "replace",
            Op::Delete => "delete",
            Op::Rename => "rename",
            Op::Restore => "restore",
            Op::Block => "block",
            Op::Recover => "recover",
            Op::Abort => "abort",
            Op::Gc => "gc",
            Op::Tamper => "tamper",
            Op::Rewind => "rewind",
            Op::Approval => "approval",
            Op::ToolCall => "tool_call",
            Op::Other => "other",
        }
    }

    /// Does this row's `sha256` state the path's content after it? True for every change, for
    /// `abort` (the content the failed commit left in place) and for `recover` (what recovery
    /// found); false for `block` (its `sha256` names the refused draft), `gc`, `tamper`, `rewind`
    /// (a plan's digest), `approval` (the parked version's digest) and unknown ops.
    pub fn states_content(self) -> bool {
        !matches!(self, Op::Block | Op::Gc | Op::Tamper | Op::Rewind | Op::Approval | Op::ToolCall | Op::Other)
    }
}

/// Which front end made the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Fuse,
    Mcp,
    Cli,
    /// rwfs itself (recovery, retention).
    Engine,
    #[serde(other)]
    Other,
}

/// A journal row as stored. Fields are in alphabetical order: that is the key order on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    #[serde(default)]
    pub bytes: u64,
    #[serde(default)]
    pub caller: String,
    /// sha256 of the previous row's line (64 zeros before the first); absent on reference rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<Sha256>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// `rename`: the old path. `recover` of an orphan draft: the file it was being written as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The group of rows one command made together, so `rwfs rewind --undo GROUP` can take them
    /// back as one: a rewind and the changes it made, or an agent's tool call (its id, e.g.
    /// `toolu_…`) and the changes made while it ran (`journal::tool_calls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default)]
    pub journal_id: String,
    /// The keyed chain: HMAC-SHA256 of `chain` under the workspace's journal key (see
    /// `seal.rs`); absent on rows written before the key existed and on reference rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<Sha256>,
    /// The reference's write mode (`create|overwrite|append|replace`), or the op for other rows.
    #[serde(default)]
    pub mode: String,
    /// Absent on reference rows; see [`Row::op`].
    #[serde(default, rename = "op", skip_serializing_if = "Option::is_none")]
    pub op_field: Option<Op>,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The path's state before the change; `""` when absent (or, on reference rows, unknown).
    #[serde(default, with = "version")]
    pub prev_sha256: Option<Sha256>,
    /// Why a `recover`, `abort` or `block` row was written (a machine string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The session the change belongs to (see `journal::session` for the rule); absent on rows
    /// older than sessions and on the engine's own rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(with = "version")]
    pub sha256: Option<Sha256>,
    #[serde(default)]
    pub ts: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
}

impl Row {
    /// The op, inferred from the reference `mode` on rows that predate rwfs.
    pub fn op(&self) -> Op {
        self.op_field.unwrap_or(match self.mode.as_str() {
            "create" => Op::Create,
            "overwrite" => Op::Write,
            "append" => Op::Append,
            "replace" => Op::Replace,
            _ => Op::Other,
        })
    }

    /// The line as written to disk, without the newline.
    pub fn to_line(&self) -> String {
        // Serializing plain data to a String cannot fail.
        serde_json::to_string(self).expect("journal row serializes")
    }
}

/// What the journal says each path holds: rows replayed in order.
///
/// A row that states content sets its path; a `rename` moves its `from` path, and every path
/// below it, to `path` (the old names become absent); other rows change nothing. `verify`
/// compares the tree with the result, recovery compares the paths the unsettled rows touched.
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    paths: std::collections::BTreeMap<String, Option<Sha256>>,
}

impl Ledger {
    /// Apply one row; returns the paths whose state it set.
    pub fn apply(&mut self, row: &Row) -> Vec<String> {
        match (row.op(), &row.from) {
            (Op::Rename, Some(from)) if row.mode == "exchange" => self.exchange(from, &row.path),
            (Op::Rename, Some(from)) => self.rename(from, &row.path, row.sha256),
            (op, _) if op.states_content() => {
                self.paths.insert(row.path.clone(), row.sha256);
                vec![row.path.clone()]
            }
            _ => Vec::new(),
        }
    }

    fn rename(&mut self, from: &str, to: &str, sha256: Option<Sha256>) -> Vec<String> {
        let below = format!("{from}/");
        let moved: Vec<(String, Option<Sha256>)> = self
            .paths
            .range(from.to_string()..)
            .take_while(|(p, _)| p.as_str() == from || p.starts_with(&below))
            .map(|(p, sha)| (p.clone(), *sha))
            .collect();
        let mut touched = vec![from.to_string(), to.to_string()];
        for (old, sha) in moved {
            self.paths.insert(old.clone(), None);
            if old != from {
                let new = format!("{to}{}", &old[from.len()..]);
                self.paths.insert(new.clone(), sha);
                touched.push(new);
            }
            touched.push(old);
        }
        // A file rename states the file's content at its new name; a directory has none.
        match sha256 {
            Some(_) => {
                self.paths.insert(to.to_string(), sha256);
            }
            None => {
                self.paths.remove(to);
            }
        }
        touched.sort();
        touched.dedup();
        touched
    }

    /// `RENAME_EXCHANGE`: the two names (and everything below them) trade places.
    fn exchange(&mut self, a: &str, b: &str) -> Vec<String> {
        let mut take = |root: &str| {
            let below = format!("{root}/");
            let keys: Vec<String> = self
                .paths
                .range(root.to_string()..)
                .take_while(|(p, _)| p.as_str() == root || p.starts_with(&below))
                .map(|(p, _)| p.clone())
                .collect();
            keys.into_iter()
                .map(|k| {
                    let sha = self.paths.remove(&k).flatten();
                    (k[root.len()..].to_string(), sha)
                })
                .collect::<Vec<_>>()
        };
        let (under_a, under_b) = (take(a), take(b));
        let mut touched = vec![a.to_string(), b.to_string()];
        for (root, moved) in [(b, under_a), (a, under_b)] {
            for (rest, sha) in moved {
                let path = format!("{root}{rest}");
                self.paths.insert(path.clone(), sha);
                touched.push(path);
            }
        }
        touched.sort();
        touched.dedup();
        touched
    }

    /// The content the journal gives `path`: `None` if no row names it, `Some(None)` if absent.
    pub fn get(&self, path: &str) -> Option<Option<Sha256>> {
        self.paths.get(path).copied()
    }

    /// The paths below the directory `root` (not `root` itself), with their content.
    pub fn below(&self, root: &str) -> Vec<(String, Option<Sha256>)> {
        let prefix = format!("{root}/");
        self.paths
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .map(|(p, sha)| (p.clone(), *sha))
            .collect()
    }

    /// Every path a row has named, with the content the journal gives it.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<Sha256>)> {
        self.paths.iter().map(|(p, sha)| (p.as_str(), *sha))
    }

    pub fn len(&self) -> usize {
        self.paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

/// `Option<Sha256>` as `"<hex>"` or `""` (absent).
mod version {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<Sha256>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(sha) => sha.serialize(s),
            None => s.serialize_str(""),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Sha256>, D::Error> {
        crate::sha::deserialize_or_empty(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_stored_under_its_name() {
        for op in [
            Op::Create,
            Op::Write,
            Op::Append,
            Op::Replace,
            Op::Delete,
            Op::Rename,
            Op::Restore,
            Op::Block,
            Op::Recover,
            Op::Abort,
            Op::Gc,
            Op::Tamper,
            Op::Rewind,
            Op::Approval,
            Op::ToolCall,
        ] {
            assert_eq!(serde_json::to_value(op).unwrap(), op.as_str(), "{op:?}");
            assert_eq!(serde_json::from_value::<Op>(op.as_str().into()).unwrap(), op);
        }
    }

    fn row() -> Row {
        Row {
            bytes: 3,
            caller: "rwfs-cli".into(),
            chain: Some(Sha256::zero()),
            comm: Some("rwfs".into()),
            from: None,
            group: None,
            journal_id: "wj_0123456789ab00000001".into(),
            mac: None,
            mode: "overwrite".into(),
            op_field: Some(Op::Write),
            path: "a.txt".into(),
            pid: Some(7),
            prev_sha256: None,
            reason: None,
            seq: Some(1),
            session: None,
            sha256: Some(Sha256::of(b"abc")),
            ts: "2026-11-21T00:00:00Z".into(),
            uid: Some(0),
            verdict: None,
            via: Some(Via::Cli),
        }
    }

    #[test]
    fn keys_are_sorted_and_absent_versions_are_empty_strings() {
        let line = row().to_line();
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        // serde_json's map is sorted, so compare against the raw line's order instead.
        let positions: Vec<usize> = sorted.iter().map(|k| line.find(&format!("\"{k}\":")).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{line}");
        assert!(line.contains("\"prev_sha256\":\"\""), "{line}");
        assert_eq!(serde_json::from_str::<Row>(&line).unwrap(), row());
    }

    #[test]
    fn the_ledger_follows_file_and_directory_renames() {
        let (a, b) = (Sha256::of(b"a"), Sha256::of(b"b"));
        let rows = [
            Row { path: "d/x".into(), sha256: Some(a), op_field: Some(Op::Create), ..row() },
            Row { path: "d/e/y".into(), sha256: Some(b), op_field: Some(Op::Create), ..row() },
            Row { path: "top".into(), sha256: Some(b), op_field: Some(Op::Create), ..row() },
            Row { path: "n".into(), from: Some("d".into()), sha256: None, op_field: Some(Op::Rename), ..row() },
            Row { path: "t2".into(), from: Some("top".into()), sha256: Some(b), op_field: Some(Op::Rename), ..row() },
            Row { path: "t2".into(), sha256: None, op_field: Some(Op::Block), ..row() },
        ];
        let mut ledger = Ledger::default();
        let touched: Vec<Vec<String>> = rows.iter().map(|r| ledger.apply(r)).collect();
        assert_eq!(touched[3], ["d", "d/e/y", "d/x", "n", "n/e/y", "n/x"]);
        assert!(touched[5].is_empty(), "a block row states nothing");
        let state: Vec<(&str, Option<Sha256>)> = ledger.iter().collect();
        assert_eq!(
            state,
            [("d/e/y", None), ("d/x", None), ("n/e/y", Some(b)), ("n/x", Some(a)), ("t2", Some(b)), ("top", None)]
        );
        let swap = Row {
            path: "n/x".into(),
            from: Some("t2".into()),
            mode: "exchange".into(),
            op_field: Some(Op::Rename),
            ..row()
        };
        ledger.apply(&swap);
        assert_eq!((ledger.get("n/x"), ledger.get("t2")), (Some(Some(b)), Some(Some(a))));
    }

    #[test]
    fn reference_rows_parse_and_infer_their_op() {
        let reference = r#"{"bytes":5,"caller":"resilient-write","journal_id":"wj_0a1b2c3d4e5f01234567","mode":"append","path":"notes.md","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","ts":"2026-04-12T10:00:00Z"}"#;
        let row: Row = serde_json::from_str(reference).unwrap();
        assert_eq!(row.op(), Op::Append);
        assert_eq!(row.seq, None);
        assert_eq!(row.chain, None);
    }
}
