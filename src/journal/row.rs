//! One journal row: its fields, their meaning, and their exact serialization.
//!
//! A row is one compact JSON object on one line with its keys in sorted order (the struct's
//! fields are declared alphabetically, which is the order serde writes them). The reference
//! server's keys (`bytes`, `caller`, `journal_id`, `mode`, `path`, `sha256`, `ts`) keep their
//! meaning; rwfs adds `seq`, `op`, `prev_sha256`, `pid`, `comm`, `uid`, `verdict`, `via`,
//! `reason` and `chain`. Reference rows, which lack the additions, parse unchanged.
//!
//! `sha256` and `prev_sha256` hold the state of the path after and before the change: a digest,
//! or `""` when the path is absent (after a delete, before a create).

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
            Op::Other => "other",
        }
    }

    /// Does this row's `sha256` state the path's content after it? True for every change, for
    /// `abort` (the content the failed commit left in place) and for `recover` (what recovery
    /// found); false for `block` (its `sha256` names the refused draft), `gc` and unknown ops.
    pub fn states_content(self) -> bool {
        !matches!(self, Op::Block | Op::Gc | Op::Other)
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
    #[serde(default)]
    pub journal_id: String,
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
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if s.is_empty() { Ok(None) } else { s.parse().map(Some).map_err(serde::de::Error::custom) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row {
            bytes: 3,
            caller: "rwfs-cli".into(),
            chain: Some(Sha256::zero()),
            comm: Some("rwfs".into()),
            journal_id: "wj_0123456789ab00000001".into(),
            mode: "overwrite".into(),
            op_field: Some(Op::Write),
            path: "a.txt".into(),
            pid: Some(7),
            prev_sha256: None,
            reason: None,
            seq: Some(1),
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
    fn reference_rows_parse_and_infer_their_op() {
        let reference = r#"{"bytes":5,"caller":"resilient-write","journal_id":"wj_0a1b2c3d4e5f01234567","mode":"append","path":"notes.md","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","ts":"2026-04-12T10:00:00Z"}"#;
        let row: Row = serde_json::from_str(reference).unwrap();
        assert_eq!(row.op(), Op::Append);
        assert_eq!(row.seq, None);
        assert_eq!(row.chain, None);
    }
}
