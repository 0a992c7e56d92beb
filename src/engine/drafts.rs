//! The draft table: the drafts the engine holds, keyed by a [`DraftId`], each in one of three
//! states:
//!
//! ```text
//!   Live     a file being written through the mount ([`Draft`]): started by the mount, ended
//!            by its commit, a refusal, a keep or a discard
//!   Staged   `batch` mode: committed by a close, its row written, waiting in the batch's queue
//!            (which owns its descriptor, `batch.rs`) for the group commit; ended by its install
//!            or its abandon (an `abort` row)
//!   Orphan   a draft left in drafts/ by a process that died, found at open and deferred
//!            (too much to hash before the mount was ready): ended once recovery keeps it in
//!            objects/ (`Engine::recover_deferred_drafts`)
//! ```
//!
//! The mount keeps ids, plain `Copy` data; the bytes, the descriptor and what the gate judged
//! of a draft stay here ([`Draft`], `draft.rs`), and never travel back up. Each engine call on a
//! live draft ([`Drafts::write`](super::Drafts::write),
//! [`Drafts::commit`](super::Drafts::commit), …) runs with that draft's entry
//! locked, through [`DraftTable::with`], on its slot (`&mut Option<Draft>`): an operation that
//! ends the draft (commits it, quarantines it, keeps it in `objects/`, discards it) empties
//! the slot, and the id is gone from the table with it; any other outcome, an error included,
//! leaves the draft where it was, in its slot, so the commit path returns errors with `?`.
//!
//! Invariants:
//! - Who may touch a draft: only the engine. A live draft only under its entry's lock (the
//!   mount calls in with the id while it holds its own lock of the file, so one file's
//!   operations on its draft never overlap); a staged one only through its batch entry, by
//!   the close that staged it and then the committer, which alone ends it; an orphan only by
//!   recovery (the mount never learns its id). The table's own lock is held only to find,
//!   change or drop an entry, never while a draft is worked on; a commit takes path locks and
//!   the batch's turn while it holds its entry's lock, so no engine code takes an entry's lock
//!   while it holds a path lock or the batch's (the committer never touches a live draft).
//! - What a failed commit leaves: the draft in its slot, in `drafts/`, with what the commit
//!   learnt of it forgotten (its running digest, what was judged: the next commit reads and
//!   judges it again), unless the failure came after its bytes left `drafts/` (quarantined,
//!   kept by a protection, installed) — then the id is gone.
//!   [`Drafts::has`](super::Drafts::has) (live drafts only) says which.
//! - What a crash leaves: the table is memory only; every draft it held is a file in `drafts/`.
//!   The next open installs a staged one whose row is durable (recovery's roll-forward) and
//!   keeps every other one in `objects/` with a `recover` row naming the file it was for (its
//!   note, `user.rwfs.target`), now or, past the hashing budget, as an orphan here.
//! - An id is never reused within an engine's life: a stale id finds nothing (`NotFound`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Reason, Result};

use super::draft::Draft;
use super::entry::DraftId;

/// A draft in the table, in its state.
enum Held {
    /// Locked while the engine works on it; empty once it ended (then dropped from the table).
    Live(Arc<Mutex<Option<Draft>>>),
    /// Its descriptor and name are its batch entry's.
    Staged,
    /// Its name in `drafts/`.
    Orphan(String),
}

/// The engine's drafts.
#[derive(Default)]
pub(crate) struct DraftTable {
    next: AtomicU64,
    entries: Mutex<HashMap<DraftId, Held>>,
}

impl DraftTable {
    fn hold(&self, held: Held) -> DraftId {
        let id = DraftId(self.next.fetch_add(1, Ordering::Relaxed));
        self.lock().insert(id, held);
        id
    }

    /// Hold the live `draft`; its id.
    pub(crate) fn insert(&self, draft: Draft) -> DraftId {
        self.hold(Held::Live(Arc::new(Mutex::new(Some(draft)))))
    }

    /// Hold an orphan found in `drafts/` under `name`; its id.
    pub(crate) fn insert_orphan(&self, name: String) -> DraftId {
        self.hold(Held::Orphan(name))
    }

    /// The orphans held, with their names in `drafts/`.
    pub(crate) fn orphans(&self) -> Vec<(DraftId, String)> {
        let entries = self.lock();
        let orphans = entries.iter().filter_map(|(id, held)| match held {
            Held::Orphan(name) => Some((*id, name.clone())),
            Held::Live(_) | Held::Staged => None,
        });
        orphans.collect()
    }

    /// Orphan `id` was kept (in `objects/`): it is no draft any more.
    pub(crate) fn forget_orphan(&self, id: DraftId) {
        let mut entries = self.lock();
        if matches!(entries.get(&id), Some(Held::Orphan(_))) {
            entries.remove(&id);
        }
    }

    /// Live draft `id` (its slot emptied by the caller, who holds it) is staged.
    pub(crate) fn stage(&self, id: DraftId) {
        if let Some(held) = self.lock().get_mut(&id) {
            *held = Held::Staged;
        }
    }

    /// Staged draft `id` is installed or abandoned: it is no draft any more.
    pub(crate) fn forget_staged(&self, id: DraftId) {
        let mut entries = self.lock();
        if matches!(entries.get(&id), Some(Held::Staged)) {
            entries.remove(&id);
        }
    }

    /// Whether `id` is a live draft the table holds.
    pub(crate) fn contains(&self, id: DraftId) -> bool {
        matches!(self.lock().get(&id), Some(Held::Live(_)))
    }

    /// Run `f` on live draft `id`'s slot, with its entry locked. A slot `f` leaves empty is
    /// dropped from the table (the draft ended), whatever `f` returns.
    pub(crate) fn with<T>(&self, id: DraftId, f: impl FnOnce(&mut Option<Draft>) -> Result<T>) -> Result<T> {
        let slot = match self.lock().get(&id) {
            Some(Held::Live(slot)) => slot.clone(),
            _ => return Err(Reason::NotFound.into()),
        };
        let mut held = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if held.is_none() {
            return Err(Reason::NotFound.into());
        }
        let result = f(&mut held);
        if held.is_none() {
            // Ended, unless it went on to another state (staged).
            let mut entries = self.lock();
            if matches!(entries.get(&id), Some(Held::Live(live)) if Arc::ptr_eq(live, &slot)) {
                entries.remove(&id);
            }
        }
        result
    }

    /// Run `f` on draft `id`, which it does not end.
    pub(crate) fn with_draft<T>(&self, id: DraftId, f: impl FnOnce(&mut Draft) -> Result<T>) -> Result<T> {
        self.with(id, |slot| match slot.as_mut() {
            Some(draft) => f(draft),
            None => Err(Reason::NotFound.into()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<DraftId, Held>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orphans_are_listed_until_kept_and_are_never_live() {
        let table = DraftTable::default();
        let a = table.insert_orphan("a".into());
        let b = table.insert_orphan("b".into());
        assert_ne!(a, b);
        let mut listed = table.orphans();
        listed.sort();
        assert_eq!(listed, vec![(a, "a".to_string()), (b, "b".to_string())]);
        assert!(!table.contains(a), "an orphan is no live draft");
        assert!(table.with(a, |_| Ok(())).is_err(), "the mount's calls find no orphan");
        table.forget_staged(a);
        assert_eq!(table.orphans().len(), 2, "only the committer's forget ends a staged draft");
        table.forget_orphan(a);
        assert_eq!(table.orphans(), vec![(b, "b".to_string())]);
    }
}
