//! `batch` durability: the mount's closes acknowledged before they are durable (docs/architecture.md, guarantee 2).
//!
//! ```text
//!   close    the draft judged (a refusal is that close's errno), its row *written* (in the
//!            page cache, not synced), the draft left in drafts/ and registered here: from now
//!            on every engine query of the path sees that version (`view`), and a crash of any
//!            process keeps it (recovery installs it: `recovery.rs`)
//!   window   at most `window` later, or at once when someone waits (an fsync, a barrier):
//!            1. one `syncfs` of the drafts' filesystem: every staged draft's bytes durable
//!               (and the rows, where the journal is on it too)
//!            2. the journal synced: every row of the batch durable
//!            3. the drafts installed in row order (RENAME_NOREPLACE / RENAME_EXCHANGE)
//!            4. one `syncfs` again: every install's directory entry durable
//!            5. displaced versions moved into objects/, tokens ended, waiters released
//! ```
//!
//! Someone waiting for one path (an fsync, a new draft of a staged file: [`Core::settle_path`])
//! does not wait for the window nor for the other paths' installs: the committer makes every
//! staged draft and row durable (steps 1–2, for all of them), installs only that path's versions
//! (steps 3–5) and puts the others back at the head of the queue, durable and still staged.
//!
//! A window costs two filesystem syncs whatever its number of files (issue 27 item 3: one
//! `fsync` per staged file and per directory moved the work off `close()` but not off the
//! disk). Where a `syncfs` fails, that filesystem's files fall back to one `fsync` each, so an
//! error (a full disk found at writeback) is charged to the files it belongs to.
//!
//! Invariants:
//! - A staged version's bytes and row are durable before its name is (steps 1–2 before 3):
//!   after power loss a path holds a complete version, never a torn one.
//! - Installs follow row order (a close is queued in the order of its row:
//!   [`Batch::row_order`]), but for a path installed ahead for its waiter, and then every
//!   earlier row and staged draft is durable first (recovery installs those), and a change that does not go through the batch (MCP and CLI
//!   writes, deletes, renames, links: everything else that is journaled) first drains it and
//!   is durable before another close is staged ([`Core::barrier`]: closes being staged and such
//!   changes never overlap, `order.rs`); so after power loss and recovery the tree is the state
//!   after a prefix of the journal: some acknowledged versions of the last window may be
//!   missing, none is torn, none is out of order. (Recovery stops rolling forward at the first
//!   mount row it cannot install.)
//! - A staged version's draft keeps its id in the engine's draft table (state Staged,
//!   `drafts.rs`) from its row until its install or its abandon, which end it there.
//! - A path is in `views` from its row until its install is done; its token keeps the settle
//!   watermark below its row until the install is durable, so recovery looks at it.
//! - An install by exchange leaves the version it replaced under the staged name in drafts/: a
//!   reader there would see the path go back a version. So every use of a staged name is a
//!   [`Reading`], and the committer marks the view installing, waits for the readings under
//!   way to end, installs, and ends the view at once (before the directory syncs); a reading
//!   that starts meanwhile waits for that and then goes to the tree.
//! - A staged path is never staged again, re-drafted, renamed, linked or deleted before its
//!   install ([`Core::settle_path`] first): the committer is the only writer of its name.
//! - The committer takes path locks one at a time and never holds the batch's own lock while
//!   it does; nobody waits for the committer while holding a path lock.
//! - At most [`MAX_STAGED`] versions are staged: a close beyond that waits for the committer
//!   (before it takes any lock), so a fast writer cannot exhaust the daemon's descriptors.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::durable::{Disk, Displaced, File, Install, Staged, Target};
use crate::error::{Error, Result};
use crate::journal::Actor;
use crate::sha::Sha256;

use super::Core;
use super::commit::Held;
use super::entry::DraftId;
use super::order::{Kind, Order, Turn};
use super::room::is_full;
use super::settle::Token;

/// Versions staged and not yet installed, at most: each holds descriptors (its draft, its
/// directory) until its install, so a writer faster than the committer (10,000 files created
/// under load ran the daemon out of descriptors: `EMFILE`) waits for room at its next close.
pub(crate) const MAX_STAGED: u64 = 1024;

/// A version acknowledged at close, waiting for the group commit.
pub(crate) struct Entry {
    /// Its id in the draft table (state Staged, `drafts.rs`) until it is installed or abandoned.
    draft: Option<DraftId>,
    pub(crate) target: Target,
    pub(crate) staged: Staged,
    /// The row's claim of what it replaces.
    pub(crate) prev: Option<Sha256>,
    pub(crate) seq: u64,
    pub(crate) token: Token,
    pub(crate) actor: Actor,
    /// Bytes of the reserve held for it until it is installed or kept (`reserve.rs`).
    charge: u64,
    since: Instant,
    ticket: u64,
}

impl Entry {
    pub(crate) fn new(
        target: Target,
        staged: Staged,
        prev: Option<Sha256>,
        seq: u64,
        token: Token,
        actor: Actor,
        charge: u64,
    ) -> Entry {
        Entry { draft: None, target, staged, prev, seq, token, actor, charge, since: Instant::now(), ticket: 0 }
    }

    /// Spend the reserve held for this version, to retry a step that failed for want of
    /// space; whether there was any left.
    fn spend_charge(&mut self, core: &Core) -> bool {
        let charge = std::mem::take(&mut self.charge);
        charge > 0 && core.reserve.spend_charge(core.disk(), charge)
    }
}

/// The staged versions of one engine and the committer's state.
pub(crate) struct Batch {
    window: Duration,
    state: Mutex<State>,
    /// The committer sleeps here.
    work: Condvar,
    /// Callers of [`Batch::drain`] sleep here.
    done: Condvar,
    /// Readings waiting for an install, and the committer waiting for readings, sleep here.
    views_changed: Condvar,
    /// Closes being staged and changes that drain the batch take turns (`order.rs`).
    order: Order,
    /// Held by a close from before its row is written until it is queued ([`Batch::row_order`]).
    row_order: Mutex<()>,
}

/// A staged version as readers find it.
struct View {
    /// Its name in drafts/.
    name: String,
    /// Readings of that name under way.
    readers: u32,
    /// The committer is installing it: new readings wait.
    installing: bool,
    /// Its entry's ticket.
    ticket: u64,
}

/// A use of a staged version's name in drafts/ (see [`Batch::read`]): while it lasts, the
/// name holds that version.
pub(crate) struct Reading<'b> {
    batch: &'b Batch,
    path: String,
    name: String,
}

impl Reading<'_> {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        let mut state = self.batch.lock();
        if let Some(view) = state.views.get_mut(&self.path)
            && view.name == self.name
        {
            view.readers -= 1;
        }
        drop(state);
        self.batch.views_changed.notify_all();
    }
}

#[derive(Default)]
struct State {
    /// Staged and not yet taken by the committer, in row order.
    queue: Vec<Entry>,
    /// Path → its staged version, until the install.
    views: HashMap<String, View>,
    /// Paths installed (or abandoned) and not finished yet, with their tickets: a settle waits
    /// for them too. A settle that found only the views returned between an install and its
    /// sync, and the version it was for could then be written after a staged one not yet
    /// durable (`crash::power_loss_over_hundreds_of_racing_closes_…`, about one run in ten).
    landing: Vec<(String, u64)>,
    /// Tickets handed out so far.
    issued: u64,
    /// Every ticket below this one is installed (or failed and journaled as aborted).
    finished: u64,
    /// Tickets at or above `finished` installed ahead of an earlier one ([`Batch::settle`]).
    finished_ahead: BTreeSet<u64>,
    /// Someone waits: commit without waiting for the window.
    hurry: bool,
    /// Paths (each with everything beneath it) whose staged versions someone waits for: commit
    /// those now, and only those ([`Batch::settle`]).
    urgent: Vec<String>,
    closed: bool,
}

impl Batch {
    pub(crate) fn new(window: Duration) -> Batch {
        Batch {
            window,
            state: Mutex::default(),
            work: Condvar::new(),
            done: Condvar::new(),
            views_changed: Condvar::new(),
            order: Order::default(),
            row_order: Mutex::new(()),
        }
    }

    /// Held from before a close's row is written until it is queued ([`Batch::push`]): the
    /// queue is then in row order. Closes staged at once used to queue in any order, and a
    /// batch could install a later row's version while an earlier row, written before the
    /// journal's sync and so durable with it, waited for the next batch with its draft not
    /// synced: after a power loss its draft was torn, recovery stopped there, and the tree held
    /// the later version without the earlier one (issue 25's power-loss test).
    pub(crate) fn row_order(&self) -> MutexGuard<'_, ()> {
        self.row_order.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A turn to stage closes (see `order.rs`): taken before any path lock.
    pub(crate) fn stage_turn(&self) -> Turn<'_> {
        self.order.enter(Kind::Stage)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Register an acknowledged version, draft `draft` (its row is written; the caller holds
    /// [`Batch::row_order`]).
    pub(crate) fn push(&self, draft: DraftId, mut entry: Entry) {
        entry.draft = Some(draft);
        let mut state = self.lock();
        entry.ticket = state.issued;
        state.issued += 1;
        let name = entry.staged.temp_name().unwrap_or_default().to_string();
        let view = View { name, readers: 0, installing: false, ticket: entry.ticket };
        state.views.insert(entry.target.path.to_string(), view);
        // A committer waiting for the window of an older entry needs no wake-up (one futex
        // call and one context switch per close saved); one with nothing queued waits untimed.
        let wake = state.queue.is_empty();
        state.queue.push(entry);
        drop(state);
        if wake {
            self.work.notify_one();
        }
    }

    /// Wait, hurrying the committer, while [`MAX_STAGED`] versions or more are staged and not
    /// installed. Called before a close takes any lock, so the committer is never waited for
    /// by someone holding one.
    pub(crate) fn wait_for_room(&self) {
        self.hurry_until(|state| state.issued - state.finished < MAX_STAGED || state.closed);
    }

    /// Whether a close may stage now without waiting for room (see [`Batch::wait_for_room`]),
    /// with a margin for the closes already on their way.
    pub(crate) fn has_room(&self) -> bool {
        let state = self.lock();
        state.issued - state.finished < MAX_STAGED / 2
    }

    /// Whether a version is staged for `path`.
    pub(crate) fn has_view(&self, path: &str) -> bool {
        self.lock().views.contains_key(path)
    }

    /// Start using the name in drafts/ of the version staged for `path`, if any; `None` also
    /// once its install began (waiting for it to end): the tree has it then.
    pub(crate) fn read(&self, path: &str) -> Option<Reading<'_>> {
        let mut state = self.lock();
        loop {
            let view = state.views.get_mut(path)?;
            if !view.installing {
                view.readers += 1;
                let name = view.name.clone();
                return Some(Reading { batch: self, path: path.to_string(), name });
            }
            state = self.views_changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The committer is about to install the staged version of `path`: no new reading of its
    /// name, and the ones under way ended.
    fn begin_install(&self, path: &str) {
        let mut state = self.lock();
        let Some(view) = state.views.get_mut(path) else { return };
        view.installing = true;
        while state.views.get(path).is_some_and(|v| v.readers > 0) {
            state = self.views_changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Staged new names directly inside directory `dir` (`""`: the root).
    pub(crate) fn names_in(&self, dir: &str) -> Vec<String> {
        let state = self.lock();
        state
            .views
            .keys()
            .filter_map(|path| match path.rsplit_once('/') {
                Some((parent, name)) if parent == dir => Some(name.to_string()),
                None if dir.is_empty() => Some(path.clone()),
                _ => None,
            })
            .collect()
    }

    /// Commit the staged versions of `path` and beneath it now, and return once each is
    /// installed and durable (or abandoned: journaled as aborted); the rest of the window stays
    /// staged.
    pub(crate) fn settle(&self, path: &str) {
        let mut state = self.lock();
        // Staged, and installed but not durable yet (its view is gone from the install on).
        let staged = state.views.iter().map(|(p, view)| (p, view.ticket));
        let landing = state.landing.iter().map(|(p, ticket)| (p, *ticket));
        let waited: Vec<u64> = staged.chain(landing).filter(|(p, _)| at_or_under(p, path)).map(|(_, t)| t).collect();
        if waited.is_empty() {
            return;
        }
        state.urgent.push(path.to_string());
        self.work.notify_one();
        while !waited.iter().all(|&t| t < state.finished || state.finished_ahead.contains(&t)) {
            state = self.done.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        let state = self.lock();
        state.issued == state.finished
    }

    /// Commit everything staged so far now, and return once it is installed and durable.
    pub(crate) fn drain(&self) {
        let target = self.lock().issued;
        self.hurry_until(|state| state.finished >= target);
    }

    /// Hurry the committer and wait until `done` holds (checked first: no hurry if it does).
    fn hurry_until(&self, done: impl Fn(&State) -> bool) {
        let mut state = self.lock();
        while !done(&state) {
            state.hurry = true;
            self.work.notify_one();
            state = self.done.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Stop taking entries: the committer installs what is queued and returns.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.work.notify_one();
    }

    /// The committer's next batch, once the window of its oldest entry has passed or someone
    /// waits, with the paths to install if not all (someone waits for those only); `None` once
    /// closed and empty.
    fn next(&self) -> Option<(Vec<Entry>, Option<Vec<String>>)> {
        let mut state = self.lock();
        loop {
            let Some(oldest) = state.queue.first().map(|e| e.since) else {
                state.urgent.clear();
                if state.closed {
                    return None;
                }
                state = self.work.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            let age = oldest.elapsed();
            if state.hurry || state.closed || age >= self.window {
                state.hurry = false;
                state.urgent.clear();
                return Some((std::mem::take(&mut state.queue), None));
            }
            // A path no longer queued was installed meanwhile (the committer is idle here).
            let urgent = std::mem::take(&mut state.urgent);
            if state.queue.iter().any(|e| urgent.iter().any(|u| at_or_under(e.target.path.as_str(), u))) {
                return Some((std::mem::take(&mut state.queue), Some(urgent)));
            }
            state = self.work.wait_timeout(state, self.window - age).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// The path's staged version is installed (or abandoned): reads go to the tree again.
    fn unview(&self, path: &str, name: Option<&str>, ticket: u64) {
        let mut state = self.lock();
        if state.views.get(path).map(|v| v.name.as_str()) == name {
            state.views.remove(path);
        }
        state.landing.push((path.to_string(), ticket));
        drop(state);
        self.views_changed.notify_all();
    }

    /// Staged versions made durable but not installed ([`Batch::settle`]): back at the head of
    /// the queue, before what was staged meanwhile.
    fn requeue(&self, entries: Vec<Entry>) {
        self.lock().queue.splice(0..0, entries);
    }

    /// These tickets are installed (or abandoned).
    fn finish(&self, tickets: impl IntoIterator<Item = u64>) {
        let mut state = self.lock();
        state.finished_ahead.extend(tickets);
        loop {
            let next = state.finished;
            if !state.finished_ahead.remove(&next) {
                break;
            }
            state.finished += 1;
        }
        let State { landing, finished, finished_ahead, .. } = &mut *state;
        landing.retain(|(_, t)| *t >= *finished && !finished_ahead.contains(t));
        drop(state);
        self.done.notify_all();
    }
}

/// Whether `path` is `top` or beneath it.
fn at_or_under(path: &str, top: &str) -> bool {
    path == top || (path.starts_with(top) && path.as_bytes().get(top.len()) == Some(&b'/'))
}

/// One `syncfs` for each filesystem `files` are on; the devices where it failed (logged).
fn sync_each_fs<'a>(disk: &dyn Disk, files: impl IntoIterator<Item = &'a File>) -> HashSet<u64> {
    let mut tried = HashSet::new();
    let mut failed = HashSet::new();
    for file in files {
        let dev = file.id().dev;
        if tried.insert(dev)
            && let Err(e) = disk.sync_fs(file)
        {
            tracing::warn!(dev, error = %e, "syncfs in a batch window; syncing its files one by one");
            failed.insert(dev);
        }
    }
    failed
}

impl Core {
    /// The committer thread's loop (see the module documentation).
    pub(crate) fn run_batches(&self, batch: &Batch) {
        while let Some((entries, only)) = batch.next() {
            let tickets: Vec<u64> = entries.iter().map(|e| e.ticket).collect();
            let rest = match only {
                None => self.commit_batch(batch, entries, |_| true),
                Some(paths) => self.commit_batch(batch, entries, |p| paths.iter().any(|u| at_or_under(p, u))),
            };
            let staged: HashSet<u64> = rest.iter().map(|e| e.ticket).collect();
            batch.requeue(rest);
            batch.finish(tickets.into_iter().filter(|t| !staged.contains(t)));
        }
    }

    /// Make every entry's bytes and row durable, install those whose path `install` selects,
    /// and return the others (durable, still staged).
    fn commit_batch(&self, batch: &Batch, entries: Vec<Entry>, install: impl Fn(&str) -> bool) -> Vec<Entry> {
        let disk = self.disk();
        // 1. Data, 2. rows.
        let unsynced = sync_each_fs(disk, entries.iter().map(|e| e.staged.file()));
        let mut ready = Vec::with_capacity(entries.len());
        let mut failed = Vec::new();
        for entry in entries {
            let synced = match unsynced.contains(&entry.staged.file().id().dev) {
                true => entry.staged.sync(disk),
                false => Ok(()),
            };
            match synced {
                Ok(()) => ready.push(entry),
                Err(e) => failed.push((entry, e)),
            }
        }
        if let Err(e) = self.journal.sync() {
            for entry in ready.drain(..) {
                failed.push((entry, Error::io("journal sync", std::io::Error::other(e.to_string()))));
            }
        }
        // 3. Installs, in row order; each path read from the tree from its install on (an
        //    exchange leaves the replaced version under the staged name).
        let (ready, rest): (Vec<Entry>, Vec<Entry>) = ready.into_iter().partition(|e| install(e.target.path.as_str()));
        let mut installed: Vec<(Entry, Option<Displaced>, Option<Held>)> = Vec::with_capacity(ready.len());
        for mut entry in ready {
            let _guard = self.locks.lock(&entry.target.path);
            batch.begin_install(entry.target.path.as_str());
            let put = self.install_staged(&mut entry);
            batch.unview(entry.target.path.as_str(), entry.staged.temp_name(), entry.ticket);
            match put {
                Ok((displaced, current)) => installed.push((entry, displaced, current)),
                Err(e) => failed.push((entry, e)),
            }
        }
        // 4. The new names: one sync per filesystem (else one per directory).
        let unsynced = sync_each_fs(disk, installed.iter().map(|(e, _, _)| e.staged.file()));
        let mut synced = HashSet::new();
        let mut dir_failed = HashSet::new();
        for (entry, _, _) in &installed {
            let dir = entry.target.parent.rel().to_string();
            if unsynced.contains(&entry.staged.file().id().dev)
                && synced.insert(dir.clone())
                && let Err(e) = disk.sync_dir(&entry.target.parent)
            {
                tracing::error!(dir, error = %e, "fsync directory after a batch install");
                dir_failed.insert(dir);
            }
        }
        // 5. Settle; the reserve held for the batch is owed no more.
        let mut owed = 0;
        for (entry, displaced, current) in installed {
            let Entry { draft, target, staged, token, charge, .. } = entry;
            self.forget_staged(draft);
            owed += charge;
            if dir_failed.contains(target.parent.rel()) {
                // Visible but maybe not durable: only the next start can tell.
                drop(token);
                continue;
            }
            self.installed(&target, staged.file().id(), staged.sha256(), displaced.zip(current.as_ref()), token);
        }
        for (entry, error) in failed {
            owed += self.abandon_staged(batch, entry, error);
        }
        self.reserve.discharge(disk, owed);
        rest
    }

    /// Install a staged version (the caller holds its path's lock). On a full disk it is tried
    /// again with the reserve held for it handed back, then after an emergency retention run:
    /// an acknowledged version must not depend on space found later.
    fn install_staged(&self, entry: &mut Entry) -> Result<(Option<Displaced>, Option<Held>)> {
        let new = entry.prev.is_none();
        let mut put = self.put_in_place(&entry.target, &entry.staged, new);
        if matches!(&put, Err(e) if is_full(e)) && entry.spend_charge(self) {
            put = self.put_in_place(&entry.target, &entry.staged, new);
        }
        if let Err(e) = &put
            && self.make_room(e, self.reserve.block().max(1), &Actor::engine())
        {
            put = self.put_in_place(&entry.target, &entry.staged, new);
        }
        put
    }

    /// An acknowledged version that could not be made durable or installed: an `abort` row
    /// says so, and its bytes are kept in objects/ (the writer was told the close succeeded;
    /// on a full disk with the reserve held for it), or left in drafts/ for the next start to
    /// keep. Returns the reserve it still holds.
    fn abandon_staged(&self, batch: &Batch, mut entry: Entry, error: Error) -> u64 {
        tracing::error!(path = %entry.target.path, seq = entry.seq, error = %error, "a version acknowledged in batch mode was not installed");
        let sha = entry.staged.sha256();
        // The row first: from the moment the bytes are in objects/, a retention run finds the
        // `abort` row that keeps them (it lists objects/ before it reads the journal). Kept
        // first, an emergency run in between removed them as an old version (issue 25 item 2).
        let journaled = self.abort_row(&entry.target.path, entry.prev, Some(sha), &entry.actor, &error);
        let name = entry.staged.temp_name().map(str::to_string);
        if let (Some(name), Ok(dir)) = (&name, self.drafts_home()) {
            let mut kept = self.objects.adopt(&dir, name, sha);
            if matches!(&kept, Err(e) if is_full(e)) && entry.spend_charge(self) {
                kept = self.objects.adopt(&dir, name, sha);
            }
            if let Err(e) = kept {
                tracing::error!(draft = name, error = %e, "the draft stays in drafts/ for the next start");
            }
        }
        let Entry { draft, target, token, charge, ticket, .. } = entry;
        self.forget_staged(draft);
        batch.unview(target.path.as_str(), name.as_deref(), ticket);
        if journaled {
            self.tracker.end(token);
        }
        charge
    }

    /// A staged version is installed or abandoned: its draft is gone from the table.
    fn forget_staged(&self, draft: Option<DraftId>) {
        if let Some(draft) = draft {
            self.draft_table.forget_staged(draft);
        }
    }

    /// Install a staged version at `target` over whatever is there now (the caller holds the
    /// path's lock); the displaced previous version, and what it was. `new`: it was staged
    /// where no file was; then the rename itself looks (`RENAME_NOREPLACE`), and only a name
    /// that appeared since (`EEXIST`) is read and exchanged.
    pub(crate) fn put_in_place(
        &self,
        target: &Target,
        staged: &Staged,
        new: bool,
    ) -> Result<(Option<Displaced>, Option<Held>)> {
        if new {
            match staged.install(self.disk(), &target.parent, &target.name, Install::Create, None) {
                Err(e) if e.raw_os_error() == Some(nix::libc::EEXIST) => {}
                placed => return placed.map(|displaced| (displaced, None)),
            }
        }
        let current = self.held(target)?;
        let how = if current.is_some() { Install::Exchange } else { Install::Create };
        let file = current.as_ref().and_then(|c| c.file.as_ref());
        let displaced = staged.install(self.disk(), &target.parent, &target.name, how, file)?;
        Ok((displaced, current))
    }

    /// Before a journaled change that does not go through the batch (an MCP or CLI write, a
    /// delete, a rename, a link): in `batch` mode, wait until no close is being staged, drain the
    /// batch, and keep further closes from being staged until the returned turn is dropped —
    /// once the change is durable — so the tree keeps the journal's order (`order.rs`). Taken
    /// before any path lock. `None` in `close` mode.
    pub(crate) fn barrier(&self) -> Option<Turn<'_>> {
        let batch = self.batch.as_ref()?;
        let turn = batch.order.enter(Kind::Change);
        if !batch.is_empty() {
            batch.drain();
        }
        Some(turn)
    }

    /// Install everything staged so far and return once it is durable (no-op in `close` mode).
    pub(crate) fn drain_batch(&self) {
        if let Some(batch) = &self.batch
            && !batch.is_empty()
        {
            batch.drain();
        }
    }

    /// Install the versions of `path` and beneath it that are staged, if any, and return once
    /// they are durable (an fsync; before a path is drafted, staged again or removed as a
    /// directory): the rest of the window is made durable but stays staged.
    pub(crate) fn settle_path(&self, path: &str) {
        if let Some(batch) = &self.batch {
            batch.settle(path);
        }
    }
}
