//! Approvals: a new version the policy marks `approve` (`protect:` rules, `protect.rs`) is
//! parked — kept in `objects/`, named by its `block` row (reason `approval_required`, `sha256`
//! the parked version, `prev_sha256` the version it was written over) — and waits for a person:
//! [`Engine::approve`] installs it as a normal commit (a `restore` row, through the content gate:
//! a parked version holding a secret is still refused), [`Engine::deny`] leaves it in the store.
//! Each decision is an `approval` row (`mode` `approve` or `deny`, `reason` `approval=<id>
//! by=<user>`), so the state lives in the journal and survives a daemon's death.
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
//! Only new versions are parked (a write or a create, through the mount, MCP or the CLI);
//! deletes, renames, chmods and files written in place under `approve` are refused with a
//! message saying a person has to make the change. Not here: the refusal itself (`protect.rs`)
//! and the front ends' words.

use serde::Serialize;

use crate::durable::Scope;
use crate::durable::resolve::lookup;
use crate::error::{Error, Reason, Result};
use crate::journal::{Actor, Change, Op, Row};
use crate::sha::Sha256;

use super::commit::Expect;
use super::{Committed, Engine, FileDiff, Limit, Workspace};

/// The `block` row's reason prefix of a refusal that waits for a person.
pub(crate) const APPROVAL_REQUIRED: &str = "approval_required";

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
        id: super::rejection_id(&row.ts, seq),
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

/// Who decides: the user name of the actor's uid, else `uid N`.
fn who(actor: &Actor) -> String {
    let name = actor.uid.and_then(|uid| nix::unistd::User::from_uid(uid.into()).ok().flatten()).map(|u| u.name);
    match (name, actor.uid) {
        (Some(name), Some(uid)) => format!("{name} (uid {uid})"),
        (None, Some(uid)) => format!("uid {uid}"),
        _ => "unknown".to_string(),
    }
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

/// What a decision did.
#[derive(Debug, Clone)]
pub struct Decided {
    pub approval: Approval,
    /// The install, for an approval.
    pub committed: Option<Committed>,
}

impl Engine {
    /// Install the version parked as `id` (see the module docs): refused when it is not
    /// pending, or when its file changed since it was parked (without a row: an edit while
    /// unmounted) unless `force`. The content gate judges it like any new version.
    pub fn approve(&self, id: &str, force: bool, actor: &Actor) -> Result<Decided> {
        let _turn = self.core.state_locks.lock(&self.approvals_lock()?);
        let mut approval = self.pending(id)?;
        let path = lookup(self.core.ws.disk(), &self.core.ws.root, &approval.path, Scope::Workspace)?;
        let current = self.core.ws.current_sha(&path)?;
        if current != approval.base && !force {
            let shown = |s: Option<Sha256>| s.map_or_else(|| "absent".to_string(), |s| s.short(12));
            return Err(Error::from(Reason::Approval {
                code: "approval_base_changed",
                message: format!(
                    "{} changed since this version was parked (it was {}, it is {} now, with no journaled change: \
                     edited while unmounted?); approving would overwrite that change — look at both (`rwfs show \
                     {}@{}`), then `rwfs approve {id} --force` installs the parked version anyway, or `rwfs deny {id}`",
                    approval.path,
                    shown(approval.base),
                    shown(current),
                    approval.path,
                    approval.sha256.short(12),
                ),
            })
            .at(&approval.path));
        }
        let sha = approval.sha256;
        let file = self
            .core
            .objects
            .open_object(&sha)?
            .ok_or_else(|| Error::from(Reason::ObjectMissing { sha }).at(&approval.path))?;
        let expect = (!force).then_some(approval.base.map_or(Expect::Absent, Expect::Sha));
        let committed = self.core.install_approved(&path, &file, sha, expect, actor)?;
        self.publish(&committed, actor);
        self.decide(&mut approval, "approve", actor)?;
        approval.state = ApprovalState::Approved;
        approval.settled_by_seq = Some(committed.seq);
        Ok(Decided { approval, committed: Some(committed) })
    }

    /// Refuse the version parked as `id`: it stays in `objects/`, marked denied.
    pub fn deny(&self, id: &str, actor: &Actor) -> Result<Decided> {
        let _turn = self.core.state_locks.lock(&self.approvals_lock()?);
        let mut approval = self.pending(id)?;
        self.decide(&mut approval, "deny", actor)?;
        approval.state = ApprovalState::Denied;
        Ok(Decided { approval, committed: None })
    }

    /// One decision at a time (two people approving at once install once).
    fn approvals_lock(&self) -> Result<crate::durable::WorkspacePath> {
        lookup(self.core.ws.disk(), &self.core.ws.root, ".resilient_write/approvals", Scope::State)
    }

    fn pending(&self, id: &str) -> Result<Approval> {
        let approval = self.core.ws.approval(id)?;
        if approval.state != ApprovalState::Pending {
            return Err(Error::from(Reason::Approval {
                code: "approval_not_pending",
                message: format!(
                    "approval {id} of {} is {} already; only a pending one can be approved or denied (`rwfs approvals \
                     --all` shows each with its state)",
                    approval.path,
                    approval.state.as_str()
                ),
            })
            .at(&approval.path));
        }
        Ok(approval)
    }

    /// Journal `mode` (`approve` or `deny`) of `approval` by `actor`.
    fn decide(&self, approval: &mut Approval, mode: &str, actor: &Actor) -> Result<()> {
        let by = who(actor);
        let appended = self.core.journal.append(Change {
            op: Op::Approval,
            path: approval.path.clone(),
            from: None,
            sha256: Some(approval.sha256),
            prev_sha256: approval.base,
            bytes: approval.bytes,
            mode: mode.to_string(),
            actor: actor.clone(),
            verdict: None,
            reason: Some(format!("approval={} by={by}", approval.id)),
        })?;
        tracing::info!(path = approval.path, id = approval.id, mode, by, "approval decided");
        approval.decided_by = Some(by);
        approval.decided_at = Some(appended.ts);
        Ok(())
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
        let id = |seq: u64| super::super::rejection_id(&format!("2026-11-28T10:00:0{seq}.000000Z"), seq);
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
