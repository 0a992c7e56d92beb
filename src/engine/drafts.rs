//! The draft table: the drafts the engine holds, keyed by a [`DraftId`], in one of two states:
//!
//! ```text
//!   Live     a file being written through the mount ([`Draft`]): started by the mount, ended
//!            by its commit, a refusal, a keep or a discard
//!   Orphan   a draft left in drafts/ by a process that died, found at open and deferred
//!            (too much to hash before the mount was ready): ended once recovery keeps it in
//!            objects/ (`Engine::recover_deferred_drafts`)
//! ```
//!
//! The mount keeps ids, plain `Copy` data; the bytes, the descriptor and what the gate judged
//! of a draft stay here ([`Draft`], `draft.rs`), and never travel back up. Each engine call on a
//! draft ([`Engine::write_draft`](super::Engine::write_draft), [`Engine::commit_draft`](super::Engine::commit_draft), …) runs with that draft's entry
//! locked, through [`DraftTable::with`], on its slot (`&mut Option<Draft>`): an operation that
//! ends the draft (commits it, quarantines it, keeps it in `objects/`, discards it) empties
//! the slot, and the id is gone from the table with it; any other outcome, an error included,
//! leaves the draft where it was, in its slot, so the commit path returns errors with `?`.
//!
//! Invariants:
//! - Who may touch a draft: only the engine, and only under its entry's lock; the mount calls
//!   in with the id while it holds its own lock of the file, so one file's operations on its
//!   draft never overlap. The table's own lock is held only to find or drop an entry, never
//!   while a draft is worked on, and an entry's lock is never taken while a path lock or the
//!   batch's lock is held by someone who waits for it.
//! - What a failed commit leaves: the draft in its slot, in `drafts/`, with what the commit
//!   learnt of it forgotten (its running digest, what was judged: the next commit reads and
//!   judges it again), unless the failure came after its bytes left `drafts/` (quarantined,
//!   kept by a protection, installed) — then the id is gone. [`Engine::has_draft`](super::Engine::has_draft) says which.
//! - What a crash leaves: the table is memory only. Every draft it held is a file in `drafts/`
//!   carrying its recovery note (`user.rwfs.target`), so the next open finds it as an orphan
//!   and keeps it in `objects/` with a `recover` row (`recovery.rs`, `Core::recover_drafts`).
//! - An id is never reused within an engine's life: a stale id finds nothing (`NotFound`).
//!
//! - Orphans are recovery's alone: the mount never learns their ids, and a live draft is never
//!   an orphan (recovery keeps only the names it deferred at open, before any draft was live).
//!
//! Not here: versions staged in `batch` mode (the batch's queue holds them from their row to
//! their install, `batch.rs`); the orphans recovery keeps at open within its budget (they are
//! kept before the table serves anyone).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Reason, Result};

use super::draft::Draft;

/// A draft in the engine's table (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DraftId(u64);

/// A draft in the table, in its state.
enum Held {
    /// Locked while the engine works on it; empty once it ended (then dropped from the table).
    Live(Arc<Mutex<Option<Draft>>>),
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
            Held::Live(_) => None,
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
            self.lock().remove(&id);
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
