//! Deciding an approval: [`Engine::approve`] installs a version parked for approval as a
//! normal commit (a `restore` row, through the content gate: a parked version holding a secret
//! is still refused), [`Engine::deny`] leaves it in the store. Each decision is an `approval`
//! row (`mode` `approve` or `deny`, `reason` `approval=<id> by=<user>`).
//!
//! What an approval is and which state it is in is read from the journal by the read side
//! (`history/approvals.rs`); parking a version is `protect.rs`'s. Not here: the front ends' words.

use crate::durable::Scope;
use crate::durable::resolve::lookup;
use crate::error::{Error, Reason, Result};
use crate::history::approvals::{Approval, ApprovalState};
use crate::journal::{Actor, Change, Op};
use crate::sha::Sha256;

use super::Committed;
use super::Engine;
use super::commit::Expect;

/// Who decides: the user name of the actor's uid, else `uid N`.
fn who(actor: &Actor) -> String {
    let name = actor.uid.and_then(|uid| nix::unistd::User::from_uid(uid.into()).ok().flatten()).map(|u| u.name);
    match (name, actor.uid) {
        (Some(name), Some(uid)) => format!("{name} (uid {uid})"),
        (None, Some(uid)) => format!("uid {uid}"),
        _ => "unknown".to_string(),
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
