//! One regular file as the mount sees it: the state machine of its next version.
//!
//! ```text
//!              write / truncate / O_TRUNC              commit ok
//!   ┌───────┐ ─────────────────────────────► ┌──────────┐ ──────────► Clean
//!   │ Clean │                                │ Drafting │
//!   └───────┘ ◄───────────────────────────── └──────────┘
//!       ▲         last close, nothing to commit    │  gate refuses (at write or commit)
//!       │                                          ▼
//!       │      truncate to 0 / O_TRUNC       ┌─────────┐
//!       │      (a rewrite) → Drafting        │ Refused │
//!       └─────────────────────────────────── └─────────┘
//!                     last close
//! ```
//!
//! What a writer sees in each state:
//! - [`Phase::Clean`]: reads see the committed version (opened lazily, dropped at the last
//!   close); a close or an fsync has nothing to commit.
//! - [`Phase::Drafting`]: every handle of the file reads and writes one draft; the tree keeps the
//!   committed version until a commit; a close by a process that changed the draft commits it
//!   (its errno is that close's), an fsync on any handle commits it, the last close commits
//!   what is left.
//! - [`Phase::Refused`]: the gate refused the draft, which is quarantined; every write, close
//!   and fsync fails with the blocked errno until the file is truncated to nothing (a rewrite,
//!   which starts a new draft) or its last handle closes (which forgets the refusal). A file
//!   that was never committed keeps an empty placeholder draft until then, so its name stays
//!   visible to its handles and then disappears.
//!
//! Counters that are not states: `handles` (open handles of the file) and `closing` (last
//! closes whose commit is still running; a `stat` waits for them, see [`FileNode::lock_closed`]).
//!
//! The kernel's pages: `pages` is the committed [`Version`] the kernel's page cache of the file
//! was filled from, recorded at an open in [`Phase::Clean`]. Starting a draft (a write, a
//! truncation, `O_TRUNC`), a refusal and a change the engine made behind the kernel's back
//! forget it; an open that finds the same version again lets the kernel keep its pages
//! (`Vfs::open`), any other open has them dropped.
//!
//! Whether the file has a name, and whether that name exists only in the mount (a file created
//! and not committed yet), is the namespace's (`table.rs`).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use nix::libc;

use crate::durable::{File, FileId, Stat};
use crate::engine::DraftId;
use crate::error::Result;
use crate::journal::Actor;

/// What the next version of a file is.
#[derive(Debug, Default)]
pub enum Phase {
    /// No draft: the committed version is the file.
    #[default]
    Clean,
    /// A draft holds the next version.
    Drafting(Drafting),
    /// The gate refused the last draft; `placeholder` keeps a never-committed file's name.
    Refused { placeholder: Option<DraftId> },
}

/// A draft (the engine's, known by its id) and who changed it.
#[derive(Debug)]
pub struct Drafting {
    pub draft: DraftId,
    pub authors: Authors,
    /// Written or truncated since it was started.
    dirty: bool,
    /// Started empty (a new file, or `O_TRUNC`): a version even if nothing is written.
    fresh: bool,
    /// Its commit failed at a close or fsync that returned the error, and nothing was written
    /// since: the writer was told it is not a version, so a later commit point (the last close,
    /// shutdown) keeps its bytes in `objects/` instead of committing it behind the writer's back.
    pub reported_failure: bool,
    /// The last write into it failed with this errno (`ENOSPC`, `EIO`): the writer's intended
    /// version is not what the draft holds, so the next commit point of a writer (its close,
    /// an fsync) returns this error and commits nothing, and the last close keeps the bytes
    /// instead of committing them — unless a write succeeds after it (the writer went on).
    pub failed_write: Option<i32>,
}

/// Who changed a draft.
#[derive(Debug, Default)]
pub struct Authors {
    /// The author of the row the commit writes: who changed the draft last (or started it).
    pub writer: Option<Actor>,
    /// The processes that changed the draft since it was started. A close by any other
    /// process does not commit it: that is a copy of a writer's descriptor inherited by a
    /// child (closed at its `exec` or exit), and committing there would install whatever half
    /// of the file the writer had written so far.
    writers: Vec<u32>,
}

/// Which committed version a backing file holds: a commit installs a new inode, a write in
/// place (pass-through paths) changes the size or the times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    id: FileId,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl From<&Stat> for Version {
    fn from(stat: &Stat) -> Version {
        Version { id: stat.id, size: stat.size, mtime_ns: stat.mtime_ns, ctime_ns: stat.ctime_ns }
    }
}

/// A regular file's shared state (see the module docs).
#[derive(Debug, Default)]
pub struct FileState {
    /// Open handles on this file.
    pub handles: u32,
    /// Releases of the last handle whose last close is still to run.
    pub closing: u32,
    /// Threads waiting in [`FileNode::lock_closed`] for `closing` to reach 0.
    waiting_for_close: u32,
    /// The committed version, open for reads while there is no draft (and for the handles of
    /// a file that lost its name).
    pub backing: Option<Arc<File>>,
    /// The version the kernel's pages were read from, while nothing changed it since.
    pages: Option<Version>,
    phase: Phase,
}

impl FileState {
    /// The draft reads see: the next version, or a refused new file's empty placeholder.
    pub fn draft(&self) -> Option<DraftId> {
        match &self.phase {
            Phase::Drafting(d) => Some(d.draft),
            Phase::Refused { placeholder } => *placeholder,
            Phase::Clean => None,
        }
    }

    /// The draft being written, if any (not a placeholder: a refused file takes no bytes).
    pub fn drafting(&self) -> Option<DraftId> {
        match &self.phase {
            Phase::Drafting(d) => Some(d.draft),
            _ => None,
        }
    }

    /// An open found the committed file at `version` (`None`: gone): may the kernel keep the
    /// pages it has of this file? Only when the file is Clean and they were read from that very
    /// version. Either way the pages the kernel reads from now on are of `version`.
    pub fn open_pages(&mut self, version: Option<Version>) -> bool {
        let clean = matches!(self.phase, Phase::Clean);
        let keep = clean && version.is_some() && self.pages == version;
        self.pages = if clean { version } else { None };
        keep
    }

    /// The content changed in a way the kernel's pages may not show: the next open drops them.
    pub fn forget_pages(&mut self) {
        self.pages = None;
    }

    pub fn is_refused(&self) -> bool {
        matches!(self.phase, Phase::Refused { .. })
    }

    /// Written or truncated since its draft started (what a writer's close commits).
    pub fn is_dirty(&self) -> bool {
        matches!(&self.phase, Phase::Drafting(d) if d.dirty)
    }

    /// Differs from the committed version: dirty, or a draft started empty (what an fsync and
    /// the last close commit).
    pub fn needs_commit(&self) -> bool {
        matches!(&self.phase, Phase::Drafting(d) if d.dirty || d.fresh)
    }

    /// Clean or Refused → Drafting with `draft`, started by `writer`; `fresh` when it started
    /// empty (a new file, `O_TRUNC`). A refusal is forgotten: this is a rewrite. Returns the
    /// placeholder a refusal held, for the caller to discard.
    pub fn start(&mut self, draft: DraftId, fresh: bool, writer: Option<Actor>) -> Option<DraftId> {
        let old = std::mem::replace(&mut self.phase, Phase::Clean);
        self.pages = None;
        let writers = writer.as_ref().and_then(|w| w.pid).into_iter().collect();
        self.phase = Phase::Drafting(Drafting {
            draft,
            authors: Authors { writer, writers },
            dirty: false,
            fresh,
            reported_failure: false,
            failed_write: None,
        });
        match old {
            Phase::Refused { placeholder } => placeholder,
            Phase::Drafting(d) => Some(d.draft),
            Phase::Clean => None,
        }
    }

    /// The draft's bytes changed (written, truncated, grown), by whoever.
    pub fn changed(&mut self) {
        if let Phase::Drafting(d) = &mut self.phase {
            d.dirty = true;
        }
    }

    /// Record a change to the draft by `actor` (whose pid is a process id, not a thread's).
    pub fn changed_by(&mut self, actor: Actor) {
        if let Phase::Drafting(d) = &mut self.phase {
            d.dirty = true;
            let authors = &mut d.authors;
            if let Some(pid) = actor.pid
                && !authors.writers.contains(&pid)
            {
                authors.writers.push(pid);
            }
            authors.writer = Some(actor);
        }
    }

    /// Name `actor` the draft's author if nobody changed it (a draft settled at shutdown).
    pub fn author_unless_known(&mut self, actor: Actor) {
        if let Phase::Drafting(d) = &mut self.phase
            && d.authors.writer.is_none()
        {
            d.authors.writer = Some(actor);
        }
    }

    /// Does a close by process `pid` (`None`: unknown) commit the draft? Only when it is dirty,
    /// and the closer is not known to be someone other than its writers.
    pub fn commits_at_close_by(&self, pid: Option<u32>) -> bool {
        match (&self.phase, pid) {
            (Phase::Drafting(d), Some(pid)) => {
                let writers = &d.authors.writers;
                d.dirty && (writers.is_empty() || writers.contains(&pid))
            }
            (Phase::Drafting(d), None) => d.dirty,
            _ => false,
        }
    }

    /// The draft to commit, and the author of its row (who changed it last), when Drafting.
    pub fn to_commit(&self) -> Option<(DraftId, Option<Actor>)> {
        match &self.phase {
            Phase::Drafting(d) => Some((d.draft, d.authors.writer.clone())),
            _ => None,
        }
    }

    /// The commit is done (or the draft is gone with a failed one): Drafting → Clean.
    pub fn committed(&mut self) {
        if matches!(self.phase, Phase::Drafting(_)) {
            self.phase = Phase::Clean;
        }
    }

    /// A commit failed and left the draft where it was: Drafting still, with no failure
    /// reported yet.
    pub fn commit_failed(&mut self) {
        if let Phase::Drafting(d) = &mut self.phase {
            d.reported_failure = false;
            d.failed_write = None;
        }
    }

    /// The failed commit's error reached the closer (see `Drafting::reported_failure`).
    pub fn failure_reported(&mut self) {
        if let Phase::Drafting(d) = &mut self.phase {
            d.reported_failure = true;
        }
    }

    /// Is the draft one whose failure a close reported, or whose last write failed, unchanged
    /// since? Its bytes are not a version the writer meant: kept, never committed.
    pub fn has_reported_failure(&self) -> bool {
        matches!(&self.phase, Phase::Drafting(d) if d.reported_failure || d.failed_write.is_some())
    }

    /// The errno of the draft's failed last write, when a commit point by process `pid`
    /// (`None`: unknown; `sync`: an fsync, on any handle) must return it instead of committing:
    /// the same closers [`FileState::commits_at_close_by`] lets commit.
    pub fn failed_write_for(&self, pid: Option<u32>, sync: bool) -> Option<i32> {
        let Phase::Drafting(d) = &self.phase else { return None };
        let errno = d.failed_write?;
        let writers = &d.authors.writers;
        let writer = match pid {
            Some(pid) => writers.is_empty() || writers.contains(&pid),
            None => true,
        };
        (sync || writer).then_some(errno)
    }

    /// Write into the draft through `write`, which may end it (the engine quarantines a
    /// draft whose bytes are certainly refused; `exists` says whether it did): Drafting stays
    /// Drafting, or becomes Clean when the draft is gone (the caller then records the refusal,
    /// see [`FileState::refuse`]). Clean or Refused: `StillBlocked`, nothing to write into.
    pub fn write_with(
        &mut self,
        write: impl FnOnce(DraftId) -> Result<()>,
        exists: impl FnOnce(DraftId) -> bool,
    ) -> Result<()> {
        let Some(draft) = self.drafting() else {
            return Err(crate::error::Reason::StillBlocked.into());
        };
        let written = write(draft);
        if written.is_err() && !exists(draft) {
            self.phase = Phase::Clean;
        } else if let Phase::Drafting(d) = &mut self.phase {
            // Written again: the writer knows of the failure and goes on; a close commits it.
            // A write that failed is remembered until the next one succeeds.
            d.reported_failure = false;
            d.failed_write = written.as_ref().err().map(|e| e.raw_os_error().unwrap_or(libc::EIO));
        }
        written
    }

    /// Refused with a placeholder → Clean, handing the placeholder over (a rewrite of a refused
    /// new file makes it the file's draft again).
    pub fn take_placeholder(&mut self) -> Option<DraftId> {
        match &mut self.phase {
            Phase::Refused { placeholder } => {
                let taken = placeholder.take();
                if taken.is_some() {
                    self.phase = Phase::Clean;
                }
                taken
            }
            _ => None,
        }
    }

    /// → Refused: the gate refused the draft (already quarantined by the engine). Returns
    /// whatever draft the state still held, for the caller to discard.
    pub fn refuse(&mut self, placeholder: Option<DraftId>) -> Option<DraftId> {
        self.pages = None;
        match std::mem::replace(&mut self.phase, Phase::Refused { placeholder }) {
            Phase::Drafting(d) => Some(d.draft),
            Phase::Refused { placeholder } => placeholder,
            Phase::Clean => None,
        }
    }

    /// → Clean, dropping the draft or placeholder (returned for the caller to discard): the
    /// last close of a refused or nameless file, or of one with nothing to commit.
    pub fn discard(&mut self) -> Option<DraftId> {
        match std::mem::take(&mut self.phase) {
            Phase::Drafting(d) => Some(d.draft),
            Phase::Refused { placeholder } => placeholder,
            Phase::Clean => None,
        }
    }
}

/// A regular file's shared state, and the signal of its last closes.
#[derive(Default)]
pub struct FileNode {
    state: Mutex<FileState>,
    /// Signalled when a last close is done.
    closed: Condvar,
}

impl FileNode {
    pub fn lock(&self) -> MutexGuard<'_, FileState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state once no last close is pending: the kernel answers `close()` before it sends
    /// the release, so a `stat` right after `close()` can overtake the commit the release
    /// makes; it waits for it here and sees the committed version.
    pub fn lock_closed(&self) -> MutexGuard<'_, FileState> {
        let mut state = self.lock();
        while state.closing > 0 {
            state.waiting_for_close += 1;
            state = self.closed.wait(state).unwrap_or_else(PoisonError::into_inner);
            state.waiting_for_close -= 1;
        }
        state
    }

    /// Like [`FileNode::lock`], but `None` instead of waiting while another thread holds the
    /// state (a commit may hold it across an `fsync`).
    pub fn try_lock(&self) -> Option<MutexGuard<'_, FileState>> {
        match self.state.try_lock() {
            Ok(state) => Some(state),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// A last close is done: wake whoever waits in [`FileNode::lock_closed`] (a futex call
    /// only when someone does).
    pub fn closed(&self, state: &mut FileState) {
        state.closing = state.closing.saturating_sub(1);
        if state.closing == 0 && state.waiting_for_close > 0 {
            self.closed.notify_all();
        }
    }
}
