//! The engine: one owner per workspace, turning requests from every front end into durable,
//! journaled, reversible changes.
//!
//! [`Engine::open`] refuses unsafe roots, takes the workspace's lock, reads the journal, runs
//! recovery on the unsettled tail, and starts the journal writer and the settle thread. Then:
//!
//! - [`Engine::safe_write`]: create / overwrite / append with an optional `expected_prev_sha256`,
//!   serialised per path (the protocol is in `commit.rs`);
//! - [`Engine::delete`]: removes a file, keeping its bytes in `objects/`;
//! - [`Engine::restore`]: brings back any kept version, by digest or by time, as a new commit;
//! - [`Engine::rewind`]: many paths back to what they held before a selection of rows, as one
//!   journaled group that recovery finishes after a crash (`rewind.rs`);
//! - [`Engine::gc`] applies retention;
//! - [`Engine::class`]: which class a path is in (gated, written in place, readable or hidden
//!   state), the one decision the mount and the namespace operations ask (`class.rs`);
//! - read-only queries live on the read side, [`crate::history`] (usable without owning the
//!   workspace; it never imports the engine), and are reachable through [`Engine::workspace`].
//!
//! Invariants (each defended by tests): a path holds only complete versions that were durable
//! before they became visible; an acknowledged change, its directory entry and its row are on
//! stable storage; every version that leaves the tree is in `objects/` until retention removes
//! it; every change has a hash-chained row carrying who made it; no path outside the root and
//! nothing inside `.resilient_write/` is reachable through a workspace path.
//!
//! This module never imports `fuser`, `rmcp`, `tokio` or `clap`.

mod admit;
mod approve;
mod batch;
mod class;
mod commit;
mod draft;
mod drafts;
mod encrypt;
mod entry;
mod events;
mod gate;
mod inherit;
mod locks;
mod merge;
mod options;
mod order;
mod protect;
mod read_guard;
mod recovery;
mod reserve;
mod retention;
mod rewind;
mod room;
mod settle;
mod spares;
mod state;
mod told;
mod tool_call;
mod tree;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::durable::resolve::lookup;
use crate::durable::{Displaced, STATE_DIR, Scope, WorkspacePath};
use crate::error::{Error, IoContext, Reason, Result};
use crate::history::{LOCK_FILE, RestoreTo, Workspace, open_root, pick_version};
use crate::journal::{self, Actor, Journal};
use crate::policy::Durability;
use crate::sha::Sha256;
use crate::store::{Objects, open_or_create};

pub use admit::{MAX_BYTES as MOVE_MAX_BYTES, MAX_FILES as MOVE_MAX_FILES, MAX_WALK as MOVE_MAX_WALK};
pub use approve::Decided;
pub use class::PathClass;
pub use commit::{Committed, Expect, WriteMode, WriteRequest};
pub use draft::{CommitAt, DRAFTS_DIR, DraftBase, Drafts};
pub use encrypt::Encrypted;
pub use entry::{DraftId, Entry};
pub use events::{Changed, Subscriber};
pub use inherit::ACL_ACCESS;
pub use options::{CommandLine, Options};
pub use read_guard::{MAX_REDACTED_BYTES, READ_REAL_ENV, ReadView};
pub use recovery::{RECOVERY_HASH_BUDGET, Recovery};
pub use retention::{Gc, Kept, Plan, Why, plan as retention_plan};
pub use rewind::{Action, Rewind, Rewound, Step, describe as describe_selection};
pub use state::{State, StateLock};
pub use tool_call::{HookEvent, HookOutcome};
pub use tree::{Files, Owner, RenameHow, Xattrs};

use batch::Batch;
use class::Classes;
use events::Subscribers;
use gate::Gate;
pub use gate::{Judgement, SCAN_MAX, scannable};
use locks::{DigestCache, PathLocks};
use recovery::Claims;
use reserve::Reserve;
use settle::{OwnerLock, Previous, Token, Tracker};
use spares::Spares;

/// How often the settle thread advances the watermark.
const SETTLE_INTERVAL: Duration = Duration::from_secs(2);

/// The owner of one workspace.
pub struct Engine {
    core: Arc<Core>,
    settler: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
    /// The `batch` mode's group committer.
    committer: Mutex<Option<JoinHandle<()>>>,
    recovery: Recovery,
    pub(crate) subscribers: Subscribers,
}

pub(crate) struct Core {
    pub(crate) ws: Workspace,
    pub(crate) journal: Journal,
    pub(crate) objects: Objects,
    owner: OwnerLock,
    pub(crate) tracker: Tracker,
    pub(crate) locks: PathLocks,
    /// The locks [`State::lock`] hands out: a set apart from `locks`, so a holder can
    /// write state files (which take `locks`) without waiting on itself.
    pub(crate) state_locks: PathLocks,
    pub(crate) cache: DigestCache,
    pub(crate) gate: Gate,
    /// Which class each path is in (see `class.rs`).
    classes: Classes,
    /// Displaced versions whose move into `objects/` failed, with their commits' tokens.
    pub(crate) unsettled: Mutex<Vec<(Displaced, Sha256, Token)>>,
    /// `drafts/`, kept open (see [`Core::drafts_dir`]).
    drafts: Mutex<Option<Arc<crate::durable::Dir>>>,
    /// The drafts the mount writes (`drafts.rs`).
    pub(crate) draft_table: drafts::DraftTable,
    /// The watermark last written to the lock file.
    recorded: AtomicU64,
    /// Temp files made ahead of small commits (see `spares.rs`).
    pub(crate) spares: Spares,
    /// Disk space held back for deletes and renames on a full disk and for versions
    /// acknowledged in `batch` durability (see `reserve.rs`).
    pub(crate) reserve: Reserve,
    /// The mount's versions acknowledged in `batch` durability and not installed yet
    /// (`batch.rs`); `None` in `close` mode.
    pub(crate) batch: Option<Batch>,
    /// Deletes and truncations per session, for the bulk damage limit (`protect.rs`).
    bulk: protect::Bulk,
}

/// The outcome of a restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    Committed(Committed),
    /// The path already holds that version; nothing was written.
    AlreadyCurrent {
        path: WorkspacePath,
        sha256: Sha256,
    },
}

impl Engine {
    /// Open and own the workspace at `path`.
    pub fn open(path: &Path, options: &Options) -> Result<Engine> {
        let (disk, path, root) = open_root(path, &options.workspace)?;
        // Where this user may not write the state directory or its lock, say which, in full.
        let in_full = |e: Error, what: String| match e.reason() {
            Reason::PermissionDenied | Reason::ReadOnlyFilesystem => e.at(what).within(&path),
            _ => e,
        };
        let state = open_or_create(&*disk, &root, STATE_DIR).map_err(|e| in_full(e, STATE_DIR.into()))?;
        let (owner, previous) =
            OwnerLock::acquire(disk.clone(), &state).map_err(|e| in_full(e, format!("{STATE_DIR}/{LOCK_FILE}")))?;
        state::ensure_gitignore(&*disk, &state)?;
        let settled = match previous {
            Previous::Settled(seq) => Some(seq),
            Previous::None => None,
            Previous::Unreadable => {
                tracing::warn!("the lock file is unreadable; recovery checks every journaled path");
                None
            }
        };
        let objects = Objects::open(disk.clone(), &state, &path)?;
        let mut claims = Claims::default();
        let mut rewinds = rewind::OpenRewinds::default();
        let (journal, _scan) = journal::open(disk.clone(), &state, |entry| {
            claims.observe(&entry.row, settled);
            rewinds.observe(&entry.row);
        })?;
        // Spares only on the real disk: hooked test disks see exactly a commit's calls.
        let spares = if options.workspace.disk.is_none() { Spares::start(disk.clone()) } else { Spares::off() };
        let reserve = if options.workspace.disk.is_none() { Reserve::open(&*disk, &state) } else { Reserve::off() };
        let ws = Workspace::from_parts(disk, path, root, state);
        let gate =
            Gate::new(ws.policy(options.policy_file.as_deref())?).with_command_line(options.command_line.clone());
        if let Some(hosts) = gate.policy().session_hosts() {
            journal.sessions().set_hosts(hosts.to_vec());
        }
        let classes = Classes::new(gate.policy(), &options.pass_through)?;
        let durability = options.durability.unwrap_or(gate.policy().durability());
        let batch = (durability == Durability::Batch).then(|| Batch::new(gate.policy().batch_window()));
        let core = Arc::new(Core {
            ws,
            journal,
            objects,
            owner,
            tracker: Tracker::default(),
            locks: PathLocks::new(),
            state_locks: PathLocks::new(),
            cache: DigestCache::default(),
            gate,
            classes,
            unsettled: Mutex::default(),
            drafts: Mutex::default(),
            draft_table: drafts::DraftTable::default(),
            recorded: AtomicU64::new(settled.unwrap_or(0)),
            spares,
            reserve,
            batch,
            bulk: Default::default(),
        });
        let weak = Arc::downgrade(&core);
        core.gate.read_committed_with(Box::new(move |path| weak.upgrade().and_then(|core| core.committed_text(path))));
        let mut recovery = core.recover(&claims)?;
        let budget = Some(recovery::RECOVERY_HASH_BUDGET);
        (recovery.drafts_kept, recovery.drafts_deferred) =
            core.recover_drafts(&claims, &journal::Actor::engine(), budget, None)?;
        for path in &recovery.drafts_deferred {
            if let Some((_, name)) = path.rsplit_once('/') {
                core.draft_table.insert_orphan(name.to_string());
            }
        }
        recovery.rewinds_finished = core.finish_rewinds(&rewinds.0)?;
        if !recovery.corrected.is_empty()
            || !recovery.temps_kept.is_empty()
            || !recovery.drafts_kept.is_empty()
            || !recovery.rolled_forward.is_empty()
            || recovery.roll_forward_stopped.is_some()
            || !recovery.rewinds_finished.is_empty()
        {
            tracing::warn!(?recovery, "recovered from an interrupted session");
        }
        core.record_watermark(true)?;
        let settler = start_settler(core.clone())?;
        let committer = match core.batch {
            Some(_) => Some(start_committer(core.clone())?),
            None => None,
        };
        Ok(Engine {
            core,
            settler: Mutex::new(Some(settler)),
            committer: Mutex::new(committer),
            recovery,
            subscribers: Subscribers::default(),
        })
    }

    /// When the mount's closes are acknowledged.
    pub fn durability(&self) -> Durability {
        if self.core.batch.is_some() { Durability::Batch } else { Durability::Close }
    }

    /// Return once the version of `path` acknowledged in `batch` mode is durable in the tree
    /// (and every version staged before it durable in drafts/ and the journal, installed later
    /// or by recovery): the mount's `fsync`. Nothing to wait for otherwise.
    pub fn make_durable(&self, path: &str) {
        self.core.settle_path(path);
    }

    /// Make every version acknowledged in `batch` mode durable (`syncfs`, unmount).
    pub fn make_all_durable(&self) {
        self.core.drain_batch();
    }

    /// The read-only view of this workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.core.ws
    }

    /// What recovery did when this engine opened.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Keep the orphan drafts recovery deferred at open (see [`Recovery::drafts_deferred`];
    /// the draft table holds them as orphans) in `objects/`, with their `recover` rows; the
    /// daemon calls it once the mount is ready. Only those names are touched: the drafts of
    /// the live mount are not. A failure leaves the rest in the table, and in `drafts/`.
    pub fn recover_deferred_drafts(&self) -> Result<Vec<String>> {
        let orphans = self.core.draft_table.orphans();
        if orphans.is_empty() {
            return Ok(Vec::new());
        }
        let names: BTreeSet<String> = orphans.iter().map(|(_, name)| name.clone()).collect();
        let claims = recovery::Claims::default();
        let (kept, _) = self.core.recover_drafts(&claims, &journal::Actor::engine(), None, Some(&names))?;
        for (id, name) in &orphans {
            if kept.iter().any(|path| path.rsplit_once('/').is_some_and(|(_, kept)| kept == name)) {
                self.core.draft_table.forget_orphan(*id);
            }
        }
        Ok(kept)
    }

    /// Be told of every path the engine changes through its own API (see `events.rs`).
    pub fn subscribe(&self, subscriber: Subscriber) {
        self.subscribers.add(subscriber);
    }

    /// Tell the subscribers about a change that is durable now.
    fn publish(&self, committed: &Committed, actor: &Actor) {
        self.subscribers.publish(&Changed { path: committed.path.to_string(), via: actor.via });
    }

    /// Write a new version of a file (see [`WriteRequest`]).
    pub fn safe_write(&self, req: &WriteRequest<'_>) -> Result<Committed> {
        let need = req.content.len() as u64;
        let committed = self.core.with_room(need, req.actor, || self.core.safe_write(req))?;
        self.publish(&committed, req.actor);
        Ok(committed)
    }

    /// Delete a file; its content stays restorable.
    pub fn delete(&self, path: &str, expect: Option<Expect>, actor: &Actor) -> Result<Committed> {
        let committed = self.core.delete(path, expect, Scope::Workspace, actor)?;
        self.publish(&committed, actor);
        Ok(committed)
    }

    /// Bring back a previous version of `path` as a new, journaled commit.
    pub fn restore(&self, path: &str, to: &RestoreTo, actor: &Actor) -> Result<Restored> {
        // Workspace scope: `.resilient_write/` is refused by any spelling, as for a write.
        let path = lookup(self.core.ws.disk(), &self.core.ws.root, path, Scope::Workspace)?;
        let history = self.core.ws.history_of(path)?;
        let at = history.path.to_string();
        let sha = pick_version(&history, to).map_err(|e| e.at(&at))?;
        if history.current == Some(sha) {
            return Ok(Restored::AlreadyCurrent { path: history.path, sha256: sha });
        }
        let file =
            self.core.objects.open_object(&sha)?.ok_or_else(|| Error::from(Reason::ObjectMissing { sha }).at(&at))?;
        let committed = self.core.restore_version(&history.path, &file, sha, actor)?;
        self.publish(&committed, actor);
        Ok(Restored::Committed(committed))
    }

    /// Commits started and not yet settled.
    pub fn open_commits(&self) -> usize {
        self.core.tracker.open_commits()
    }

    /// Finish queued work, make the watermark durable and release the workspace.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        // Every version acknowledged in batch mode is installed before the journal closes.
        let committer = self.committer.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let (Some(batch), Some(thread)) = (&self.core.batch, committer) {
            batch.close();
            let _ = thread.join();
        }
        let settler = self.settler.lock().unwrap_or_else(PoisonError::into_inner).take();
        let Some((stop, thread)) = settler else {
            return Ok(());
        };
        drop(stop);
        let _ = thread.join();
        self.core.journal.close();
        self.core.record_watermark(true)
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("root", &self.core.ws.path()).finish_non_exhaustive()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "closing the workspace");
        }
    }
}

impl Core {
    /// Sync pending adoptions, then record the settle watermark (see `settle.rs`).
    fn record_watermark(&self, sync: bool) -> Result<()> {
        self.retry_unsettled();
        let durable = self.journal.durable_seq();
        let watermark = self.tracker.watermark(durable);
        if !sync && watermark == self.recorded.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.objects.sync()?;
        self.owner.record(watermark, sync)?;
        self.recorded.store(watermark, Ordering::Relaxed);
        Ok(())
    }
}

fn start_committer(core: Arc<Core>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("rwfs-batch".into())
        .spawn(move || {
            if let Some(batch) = &core.batch {
                core.run_batches(batch);
            }
        })
        .step("start batch committer")
}

fn start_settler(core: Arc<Core>) -> Result<(Sender<()>, JoinHandle<()>)> {
    let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
    let thread = std::thread::Builder::new()
        .name("rwfs-settle".into())
        .spawn(move || {
            while let Err(crossbeam_channel::RecvTimeoutError::Timeout) = stopped.recv_timeout(SETTLE_INTERVAL) {
                if let Err(e) = core.record_watermark(false) {
                    tracing::warn!(error = %e, "cannot advance the settle watermark");
                }
            }
        })
        .step("start settle thread")?;
    Ok((stop, thread))
}
