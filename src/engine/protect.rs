//! Protected paths: operations the workspace policy refuses by place, whatever the content
//! (policy `protect:`), and the bulk damage limit (policy `bulk_damage:`). [`Core::guard`] is
//! the one decision; each operation's entry in the engine asks it before it changes anything —
//! a version at commit (`commit.rs`, `draft.rs`) and at the mount's first write into a draft, a
//! delete (`commit.rs`), a rename's two names, a hard link's new name, a chmod and a file opened
//! in place for writing (`tree.rs`).
//!
//! A refusal is an rwfs refusal like a blocked secret: the policy's errno through the mount, a
//! `block` row naming the rule and the operation (what a refused write would have written is
//! kept in `objects/` and named by the row), the envelope in `rejections/<id>.json` naming the
//! rule and what to do next (ask the user, or change the policy), and the notice for the
//! writer's stderr and `rwfs hook` (`told.rs`). `approve` refuses too and parks the new version
//! for a person's decision (`approve.rs`): its row has reason `approval_required` and the
//! version it was written over as `prev_sha256`, and its envelope gives the approval's id and
//! the commands; an operation that is not a new version (delete, rename, chmod, a file written
//! in place) cannot be parked and is refused saying a person has to make it.
//!
//! The bulk damage limit counts, per agent session ([`Core::attempter`]), the files deleted and
//! truncated (a new version less than half the size of the one it replaces; the bytes it
//! removes) within a sliding window; the operation that would pass the limit is refused, and
//! its envelope says that `rwfs rewind --session` undoes what the session already did.
//!
//! Not guarded: the engine's own work (recovery) and a rewind's rows (its group), which are the
//! way back. Directories, symlinks and special files are not guarded (only regular files).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use serde_json::json;

use crate::envelope::{Envelope, rejection_id};
use crate::error::{Error, ErrorKind, Protection, Reason, Result};
use crate::history::approvals::APPROVAL_REQUIRED;
use crate::journal::{Actor, Change, Op, Via};
use crate::policy::{BulkDamage, Guard, Operation};
use crate::sha::Sha256;

use super::Core;
use super::gate::{Quarantine, tool_of};

/// What a refused operation would have brought to the tree, kept in `objects/`.
pub(crate) struct Kept<'a> {
    pub content: Quarantine<'a>,
    pub sha: Sha256,
    pub bytes: u64,
    /// The whole new version (else only the bytes sent: not parked for approval).
    pub whole: bool,
}

/// A refusal's message, given the refusal's id (its approval's, for a parked version).
type Message<'a> = Box<dyn FnOnce(&str) -> String + 'a>;

/// One session's deletes and truncations within the window: (when, bytes removed).
type Damage = VecDeque<(Instant, u64)>;

/// Deletes and truncations per session (`None`: a writer without one).
#[derive(Default)]
pub(crate) struct Bulk(Mutex<HashMap<Option<String>, Damage>>);

impl Bulk {
    /// Count one more file of `bytes` for `who`, unless it passes `limit`: then the files and
    /// bytes counted so far, and nothing is counted.
    fn admit(&self, who: Option<String>, bytes: u64, limit: BulkDamage) -> Result<(), (u64, u64)> {
        let now = Instant::now();
        let mut sessions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let events = sessions.entry(who).or_default();
        while events.front().is_some_and(|(at, _)| now.duration_since(*at) > limit.window) {
            events.pop_front();
        }
        let files = events.len() as u64;
        let removed: u64 = events.iter().map(|(_, b)| b).sum();
        if files + 1 > limit.max_files || removed.saturating_add(bytes) > limit.max_bytes {
            return Err((files, removed));
        }
        events.push_back((now, bytes));
        Ok(())
    }
}

/// The bytes a new version of `new` bytes removes from one of `prev` bytes, when that makes it
/// a truncation for the bulk damage limit: it keeps less than half.
pub(crate) fn truncation(prev: Option<u64>, new: u64) -> Option<u64> {
    prev.filter(|prev| new.saturating_mul(2) < *prev).map(|prev| prev - new)
}

/// A new version of `path`: a create when it holds none.
pub(crate) fn version_op(exists: bool) -> Operation {
    if exists { Operation::Write } else { Operation::Create }
}

impl Core {
    /// May `actor` do `op` on `path`? `damage`: the bytes a delete or truncation removes (the
    /// bulk damage limit counts it); `kept`: what a refused write would have written. A refusal
    /// is journaled, explained and returned as [`Reason::Protected`]. `kept` is only called for
    /// a refusal (it may hash).
    pub(crate) fn guard<'a>(
        &self,
        op: Operation,
        path: &str,
        actor: &Actor,
        damage: Option<u64>,
        kept: impl FnOnce() -> Option<Kept<'a>>,
    ) -> Result<()> {
        if actor.via == Via::Engine || actor.group.is_some() {
            return Ok(());
        }
        let policy = self.gate.policy();
        if let Some((rule, guard)) = policy.protection(op, path)
            && guard != Guard::Allow
        {
            let op_name = op.as_str();
            let rule_name = rule.name.clone();
            let kept = kept();
            let (reason, message): (&str, Message) = match guard {
                Guard::Approve if kept.as_ref().is_some_and(|k| k.whole) => (
                    "approval_required",
                    Box::new(move |id: &str| {
                        format!(
                            "the workspace policy needs a person's approval to {op_name} {path} (rule `{rule_name}`: \
                             {op_name}: approve) — nothing changed yet: the new version is kept, waiting as approval \
                             {id}; ask the user to review it (`rwfs approvals`, or the history page) and to run \
                             `rwfs approve {id}` (or `rwfs deny {id}`); do not retry the write or work around it"
                        )
                    }),
                ),
                Guard::Approve => (
                    "approval_required",
                    Box::new(move |_: &str| {
                        format!(
                            "the workspace policy needs a person's approval to {op_name} {path} (rule `{rule_name}`: \
                             {op_name}: approve), and only a new version of a file can wait for approval — nothing \
                             changed; ask the user to make this change (or to change the rule in \
                             .resilient_write/policy.yaml)"
                        )
                    }),
                ),
                _ => (
                    "protected_path",
                    Box::new(move |_: &str| {
                        format!(
                            "the workspace policy protects {path} (rule `{rule_name}`: {op_name}: deny) — nothing \
                             changed; ask the user to make this change (or to change the rule in \
                             .resilient_write/policy.yaml)"
                        )
                    }),
                ),
            };
            let rule = json!({"rule": rule.name, "action": guard.as_str()});
            return Err(self.refuse_protected(op, path, actor, reason, message, rule, kept));
        }
        if let (Some(bytes), Some(limit)) = (damage, policy.bulk_damage())
            && let Err((files, removed)) = self.bulk.admit(self.attempter(actor), bytes, limit)
        {
            let session = self.attempter(actor).unwrap_or_else(|| "SESSION".into());
            let limits = match (limit.max_files, limit.max_bytes) {
                (files, u64::MAX) => format!("{files} files"),
                (u64::MAX, bytes) => format!("{bytes} bytes"),
                (files, bytes) => format!("{files} files or {bytes} bytes"),
            };
            let message = format!(
                "this session already deleted or truncated {files} files ({removed} bytes) in the last {} s, and this \
                 {op} would pass the policy's bulk_damage limit ({limits} per {} s) — nothing changed; if the user \
                 wants it, ask the user to do it (or to raise bulk_damage in .resilient_write/policy.yaml); what this \
                 session removed is kept: `rwfs rewind --session {session}` brings it back",
                limit.window.as_secs(),
                limit.window.as_secs(),
                op = op.as_str(),
            );
            let rule = json!({
                "rule": "bulk_damage", "action": "deny", "files": files, "bytes": removed,
                "max_files": limit.max_files, "max_bytes": limit.max_bytes, "window_seconds": limit.window.as_secs(),
                "rewind": format!("rwfs rewind --session {session}"),
            });
            return Err(self.refuse_protected(
                op,
                path,
                actor,
                "bulk_damage",
                Box::new(move |_: &str| message),
                rule,
                kept(),
            ));
        }
        Ok(())
    }

    /// Keep what was refused, journal the refusal, write its envelope, remember it for the
    /// agent's hook, and return the error the front end reports.
    #[allow(clippy::too_many_arguments)]
    fn refuse_protected(
        &self,
        op: Operation,
        path: &str,
        actor: &Actor,
        reason: &'static str,
        message: Message<'_>,
        rule: serde_json::Value,
        kept: Option<Kept<'_>>,
    ) -> Error {
        tracing::info!(path, operation = op.as_str(), reason, pid = actor.pid, "refused by the policy's protect rules");
        let refused = (|| -> Result<Error> {
            // Parked for a person's decision: the row names the version it was written over.
            let parked = reason == APPROVAL_REQUIRED && kept.as_ref().is_some_and(|k| k.whole);
            let kept = match kept {
                None => None,
                Some(Kept { content, sha, bytes, .. }) => {
                    self.quarantine(content, sha)?;
                    Some((sha, bytes))
                }
            };
            let base = match parked {
                true => self.ws.current_sha(&self.ws.lookup(path)?)?,
                false => None,
            };
            let rule_name = rule["rule"].as_str().unwrap_or_default().to_string();
            let appended = self.journal.append(Change {
                op: Op::Block,
                path: path.to_string(),
                from: None,
                sha256: kept.map(|k| k.0),
                prev_sha256: base,
                bytes: kept.map_or(0, |k| k.1),
                mode: op.as_str().to_string(),
                actor: actor.clone(),
                verdict: None,
                reason: Some(format!("{reason} operation={} rule={rule_name}", op.as_str())),
            })?;
            let id = rejection_id(&appended.ts, appended.seq);
            let message = message(&id);
            let lineage = match (actor.via, actor.pid) {
                (Via::Fuse, Some(pid)) => Some(crate::journal::session::lineage(pid)),
                _ => None,
            };
            let mut envelope = Envelope::new(ErrorKind::Blocked, 0);
            envelope.reason_hint = "permission".into();
            envelope.suggested_action = "ask_user".into();
            envelope.context = json!({
                "tool": tool_of(actor),
                "path": path,
                "operation": op.as_str(),
                "reason": reason,
                "message": message,
                "protect": rule,
                "rejection_id": id,
                "ts": appended.ts,
                "journal_seq": appended.seq,
                "quarantined_sha256": kept.map(|k| k.0),
                "pid": actor.pid,
                "comm": actor.comm,
                "via": actor.via,
                "writer": lineage.as_ref().map(|l| json!({"lineage": l})),
            })
            .as_object()
            .cloned()
            .unwrap_or_default();
            if parked {
                envelope.context.insert(
                    "approval".into(),
                    json!({
                        "id": id, "state": "pending", "list": "rwfs approvals", "approve": format!("rwfs approve {id}"),
                        "deny": format!("rwfs deny {id}"), "status_tool": "rw_approval_status",
                        "hint": "a person decides: ask the user to approve or deny it; do not retry the write",
                    }),
                );
            }
            let text = envelope.to_json();
            if let Err(e) = self.write_rejection(&id, text.as_bytes()) {
                tracing::warn!(path, error = %e, "the refusal's envelope file was not written");
            }
            if let Some(lineage) = lineage
                && let Ok(value) = serde_json::to_value(&envelope)
                && let Some(notice) = crate::notice::Notice::of_envelope(&value)
            {
                self.gate.told.record(path, kept.map(|k| k.0), lineage, notice);
            }
            Ok(Reason::Protected(Box::new(Protection { id, reason, message, envelope: text })).into())
        })();
        match refused {
            Ok(e) | Err(e) => e.at(path),
        }
    }

    /// Does `path` hold an entry in the tree?
    pub(crate) fn exists(&self, path: &str) -> bool {
        let disk = self.disk();
        let found =
            self.on(super::Entry::Path(path), crate::durable::Scope::Workspace, |dir, name| disk.stat(dir, name));
        matches!(found, Ok(Ok(Some(_))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bulk_damage_counts_files_and_bytes_per_session_and_refuses_what_would_pass_it() {
        let bulk = Bulk::default();
        let limit = BulkDamage { max_files: 2, max_bytes: 100, window: Duration::from_secs(60) };
        let a = Some("a".to_string());
        assert!(bulk.admit(a.clone(), 10, limit).is_ok());
        assert!(bulk.admit(a.clone(), 10, limit).is_ok());
        assert_eq!(bulk.admit(a.clone(), 10, limit), Err((2, 20)), "a third file");
        assert!(bulk.admit(Some("b".into()), 100, limit).is_ok(), "another session has its own count");
        assert_eq!(bulk.admit(Some("b".into()), 1, limit), Err((1, 100)), "past the bytes");
    }

    #[test]
    fn a_truncation_keeps_less_than_half() {
        assert_eq!(truncation(Some(1000), 70), Some(930));
        assert_eq!(truncation(Some(1000), 500), None);
        assert_eq!(truncation(None, 0), None);
        assert_eq!(truncation(Some(10), 0), Some(10));
    }
}
