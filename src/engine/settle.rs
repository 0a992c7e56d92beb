//! Which journal rows are known to be fully applied: the settle watermark and the owner lock.
//!
//! A commit's row becomes durable *before* its change is installed (see `commit.rs`), so after
//! a crash the tail of the journal may describe changes that never reached the tree, and old
//! versions may still sit under temp names instead of in `objects/`. Recovery must look at those
//! rows, but only those: the **settled watermark** `W` promises that every row with `seq <= W`
//! is applied durably and its displaced version is durably in `objects/`.
//!
//! How `W` stays true: each commit takes a [`Token`] before submitting its row, recording the
//! journal's durable `seq` at that moment (its *floor*; the commit's own row will get a larger
//! `seq`). A token ends when the commit is completely settled (its directory synced, its
//! displaced version adopted) or its failure was journaled. `W` is the smallest floor of the
//! tokens still open, or the durable `seq` when none is. Before `W` is recorded, the store's
//! pending adoptions are synced.
//!
//! `W` lives in `.resilient_write/lock` (`{"pid":…,"settled_seq":…}`), the file whose `flock`
//! makes one engine the owner of a workspace. It is rewritten without `fsync` while running:
//! whichever value survives a crash was true when written, and a torn or unreadable one only
//! makes recovery check more rows. On a clean close it is synced.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::durable::{Dir, Disk, File};
use crate::error::{IoContext, Reason, Result};
use crate::history::owner::{LOCK_FILE, LockInfo, read_info};

/// The lock file inside the state directory.
const LOCK_ATTEMPTS: u32 = 25;
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// Open commits and their floors.
#[derive(Default)]
pub struct Tracker {
    inner: Mutex<TrackerState>,
}

#[derive(Default)]
struct TrackerState {
    next_id: u64,
    floors: BTreeMap<u64, u64>,
}

/// An open commit. Dropping it without [`Tracker::end`] keeps the watermark below it for the
/// rest of the session, which is the safe outcome when a failure could not be journaled.
#[must_use]
pub struct Token(u64);

impl Tracker {
    pub fn begin(&self, durable_seq: u64) -> Token {
        let mut state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let id = state.next_id;
        state.next_id += 1;
        state.floors.insert(id, durable_seq);
        Token(id)
    }

    pub fn end(&self, token: Token) {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).floors.remove(&token.0);
    }

    /// The watermark, given the journal's durable `seq` read just before.
    pub fn watermark(&self, durable_seq: u64) -> u64 {
        let state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        state.floors.values().copied().min().unwrap_or(durable_seq).min(durable_seq)
    }

    pub fn open_commits(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).floors.len()
    }
}

/// The previous owner's record, as found when taking the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Previous {
    /// No lock file: a new workspace, or one made by the reference server.
    None,
    Settled(u64),
    /// Unreadable content (a torn write or damage): recovery checks every row.
    Unreadable,
}

/// The owner's lock on a workspace.
pub struct OwnerLock {
    disk: Arc<dyn Disk>,
    file: File,
}

impl OwnerLock {
    /// Take the workspace; fails with `workspace_locked` when another process owns it.
    pub fn acquire(disk: Arc<dyn Disk>, state: &Dir) -> Result<(OwnerLock, Previous)> {
        let existed = disk.stat(state, LOCK_FILE).step("stat lock file")?.is_some();
        let file = disk.open_write(state, LOCK_FILE, true, 0o644).step("open lock file")?;
        // A lock released a moment ago can still be held by a child process of its former owner
        // between fork and exec (descriptors are shared until exec closes them): retry briefly.
        let mut attempts = 0;
        while !disk.try_lock(&file, true).step("lock workspace")? {
            attempts += 1;
            if attempts == LOCK_ATTEMPTS {
                let pid = read_info(&*disk, &file).ok().flatten().map(|i| i.pid);
                return Err(Reason::WorkspaceLocked { pid }.into());
            }
            std::thread::sleep(LOCK_RETRY);
        }
        let previous = match read_info(&*disk, &file) {
            _ if !existed => Previous::None,
            Ok(Some(info)) => Previous::Settled(info.settled_seq),
            Ok(None) => Previous::None,
            Err(_) => Previous::Unreadable,
        };
        if !existed {
            disk.sync_dir(state).step("fsync state directory")?;
        }
        Ok((OwnerLock { disk, file }, previous))
    }

    /// Record the watermark; `sync` makes it durable (clean shutdown).
    pub fn record(&self, settled_seq: u64, sync: bool) -> Result<()> {
        let info = LockInfo { pid: std::process::id(), settled_seq };
        let mut line = serde_json::to_vec(&info).expect("lock info serializes");
        line.push(b'\n');
        self.disk.write_at(&self.file, &line, 0).step("write lock file")?;
        self.disk.set_len(&self.file, line.len() as u64).step("write lock file")?;
        if sync {
            self.disk.sync_data(&self.file).step("fsync lock file")?;
        }
        Ok(())
    }
}
