//! Approvals, as the journal tells them: a new version the policy marks `approve` (`protect:`
//! rules) is parked — kept in `objects/`, named by its `block` row (reason `approval_required`,
//! `sha256` the parked version, `prev_sha256` the version it was written over) — and waits for a
//! person; each decision is an `approval` row (`mode` `approve` or `deny`, `reason`
//! `approval=<id> by=<user>`), so the state lives in the journal and survives a daemon's death.
//!
//! An approval's id is its refusal's id (`rj_<ts>_<seq>`, the envelope's `rejection_id`). Its
//! state ([`ApprovalState`]) is read from the rows after the parked one ([`approvals`]):
//! `approved` after an `approval` row saying so, or a later version of the path with the parked
//! digest (an install whose decision row a crash cut off); `denied` after a `deny` row;
//! `superseded` after any later change of the path (a version, a delete, a rename to or from
//! it; not a row that states the content it had when parked, as recovery's may) or a later
//! version parked for it — a person approves the newest attempt, never an old
//! one over it; else `pending`.
//!
//! Only the reading is here: parking a version (`engine/protect.rs`) and deciding
//! (`Engine::approve`, `Engine::deny` in `engine/approve.rs`) are the engine's.

use serde::Serialize;

use crate::error::{Reason, Result};
use crate::journal::{Op, Row};
use crate::sha::Sha256;

use super::{FileDiff, Limit, Workspace};

/// The `block` row's reason prefix of a refusal that waits for a person.
pub const APPROVAL_REQUIRED: &str = "approval_required";

/// Where a parked version stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalState {
    Pending,
    Approved,
    Denied,
    Superseded,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Superseded => "superseded",
        }
    }
}

/// A version parked for approval, as the journal tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approval {
    /// `rj_<ts>_<seq>`: what `rwfs approve` takes.
    pub id: String,
    pub seq: u64,
    pub ts: String,
    pub path: String,
    /// `write` or `create`.
    pub operation: String,
    /// The protect rule that asked for approval.
    pub rule: String,
    /// The parked version (in `objects/`).
    pub sha256: Sha256,
    pub bytes: u64,
    /// The version it was written over (`None`: a new file).
    pub base: Option<Sha256>,
    /// Who wrote it.
    pub comm: Option<String>,
    pub pid: Option<u32>,
    pub session: Option<String>,
    pub state: ApprovalState,
    /// Who decided, and when (`approved` or `denied` by a decision row).
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    /// The seq of the row that superseded or installed it.
    pub settled_by_seq: Option<u64>,
}

/// Every parked version in the journal `rows` (oldest first), with its state.
pub fn approvals(rows: impl IntoIterator<Item = Row>) -> Vec<Approval> {
    let mut found: Vec<Approval> = Vec::new();
    for row in rows {
        let op = row.op();
        if op == Op::Approval {
            let id = row.reason.as_deref().and_then(|r| field(r, "approval"));
            // Pending, or approved already by its install's row just before.
            if let Some(a) = found.iter_mut().find(|a| Some(a.id.as_str()) == id && a.decided_by.is_none()) {
                a.state = if row.mode == "approve" { ApprovalState::Approved } else { ApprovalState::Denied };
                a.decided_by = row.reason.as_deref().and_then(|r| field(r, "by")).map(str::to_string);
                a.decided_at = Some(row.ts.clone());
            }
            continue;
        }
        let parked = parked(&row);
        let changes = op.states_content() || op == Op::Delete;
        if parked.is_some() || changes {
            for a in found.iter_mut().filter(|a| a.state == ApprovalState::Pending) {
                let here = a.path == row.path || (op == Op::Rename && row.from.as_deref() == Some(&a.path));
                // A row that states what the file held when it was parked (recovery recording
                // the tree as it is) changes nothing the person looks at.
                let unchanged = parked.is_none() && op != Op::Rename && row.sha256 == a.base;
                if !here || unchanged {
                    continue;
                }
                if parked.is_none() && op != Op::Rename && row.sha256 == Some(a.sha256) {
                    a.state = ApprovalState::Approved;
                } else {
                    a.state = ApprovalState::Superseded;
                }
                a.settled_by_seq = row.seq;
            }
        }
        if let Some(approval) = parked {
            found.push(approval);
        }
    }
    found
}

/// The approval a `block` row parks, if it does.
fn parked(row: &Row) -> Option<Approval> {
    let reason = row.reason.as_deref()?;
    if row.op() != Op::Block || !reason.starts_with(APPROVAL_REQUIRED) {
        return None;
    }
    let (sha256, seq) = (row.sha256?, row.seq?);
    Some(Approval {
        id: crate::envelope::rejection_id(&row.ts, seq),
        seq,
        ts: row.ts.clone(),
        path: row.path.clone(),
        operation: row.mode.clone(),
        rule: reason.split_once(" rule=").map(|(_, r)| r.to_string()).unwrap_or_default(),
        sha256,
        bytes: row.bytes,
        base: row.prev_sha256,
        comm: row.comm.clone(),
        pid: row.pid,
        session: row.session.clone(),
        state: ApprovalState::Pending,
        decided_by: None,
        decided_at: None,
        settled_by_seq: None,
    })
}

/// `key=value` from a row's reason (values hold no spaces, except `by`, which comes last).
fn field<'r>(reason: &'r str, key: &str) -> Option<&'r str> {
    let start = reason.find(&format!("{key}="))? + key.len() + 1;
    let rest = &reason[start..];
    Some(if key == "by" { rest } else { rest.split(' ').next().unwrap_or(rest) })
}

impl Workspace {
    /// Every version parked for approval, oldest first.
    pub fn approvals(&self) -> Result<Vec<Approval>> {
        let mut rows = Vec::new();
        self.read_journal(|entry| {
            let op = entry.row.op();
            if op == Op::Block || op == Op::Approval || op.states_content() || op == Op::Delete {
                rows.push(entry.row);
            }
        })?;
        Ok(approvals(rows))
    }

    /// The approval `id` names.
    pub fn approval(&self, id: &str) -> Result<Approval> {
        self.approvals()?.into_iter().find(|a| a.id == id).ok_or_else(|| {
            Reason::Approval {
                code: "no_such_approval",
                message: format!(
                    "no version parked for approval has the id {id}: `rwfs approvals --all` lists them (ids look like \
                     rj_20261128T101500123456Z_42)"
                ),
            }
            .into()
        })
    }
}

impl Workspace {
    /// The version parked as `id` against its file's current version (each read only when
    /// within `limit`): what a person looks at before deciding.
    pub fn approval_diff(&self, id: &str, limit: Limit) -> Result<FileDiff> {
        let approval = self.approval(id)?;
        let current = self.current_sha(&self.lookup(&approval.path)?)?;
        self.diff_versions(&approval.path, current, Some(approval.sha256), limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, op: Op, path: &str, sha: Option<Sha256>, mode: &str, reason: Option<&str>) -> Row {
        Row {
            bytes: 0,
            caller: String::new(),
            chain: None,
            comm: None,
            from: None,
            group: None,
            journal_id: String::new(),
            mac: None,
            mode: mode.into(),
            op_field: Some(op),
            path: path.into(),
            pid: None,
            prev_sha256: None,
            reason: reason.map(str::to_string),
            seq: Some(seq),
            session: None,
            sha256: sha,
            ts: format!("2026-11-28T10:00:0{seq}.000000Z"),
            uid: None,
            verdict: None,
            via: None,
        }
    }

    fn park(seq: u64, path: &str, sha: Sha256) -> Row {
        row(seq, Op::Block, path, Some(sha), "write", Some("approval_required operation=write rule=docs"))
    }

    #[test]
    fn the_state_of_a_parked_version_is_read_from_the_rows_after_it() {
        let (a, b, c) = (Sha256::of(b"a"), Sha256::of(b"b"), Sha256::of(b"c"));
        let rows = vec![
            park(1, "x.md", a),
            // A refusal of the content, not a parking: changes nothing.
            row(2, Op::Block, "x.md", Some(c), "", Some("content_blocked rules=aws")),
            park(3, "y.md", b),
            park(4, "y.md", c),
            park(5, "z.md", a),
            row(6, Op::Restore, "z.md", Some(a), "restore", None),
            park(7, "w.md", b),
            row(8, Op::Write, "other.md", Some(b), "overwrite", None),
            // Recovery recording what x.md held when it was parked.
            row(9, Op::Recover, "x.md", None, "recover", None),
        ];
        let id = |seq: u64| crate::envelope::rejection_id(&format!("2026-11-28T10:00:0{seq}.000000Z"), seq);
        let mut rows = rows;
        rows.push(row(10, Op::Approval, "w.md", Some(b), "deny", Some(&format!("approval={} by=ann (uid 1)", id(7)))));
        let found = approvals(rows);
        let states: Vec<(&str, ApprovalState)> = found.iter().map(|a| (a.path.as_str(), a.state)).collect();
        assert_eq!(
            states,
            [
                ("x.md", ApprovalState::Pending),
                ("y.md", ApprovalState::Superseded),
                ("y.md", ApprovalState::Pending),
                ("z.md", ApprovalState::Approved),
                ("w.md", ApprovalState::Denied),
            ]
        );
        assert_eq!(found[4].decided_by.as_deref(), Some("ann (uid 1)"));
        assert_eq!(found[0].rule, "docs");
        assert_eq!(found[1].settled_by_seq, Some(4));
    }

    #[test]
    fn a_later_version_or_a_rename_away_supersedes_a_pending_one() {
        let a = Sha256::of(b"a");
        let mut rename = row(3, Op::Rename, "elsewhere.md", Some(a), "rename", None);
        rename.from = Some("y.md".into());
        let rows = vec![
            park(1, "x.md", a),
            park(2, "y.md", a),
            row(3, Op::Write, "x.md", Some(Sha256::of(b"other")), "overwrite", None),
            rename,
        ];
        let found = approvals(rows);
        assert!(found.iter().all(|a| a.state == ApprovalState::Superseded), "{found:?}");
    }
}
