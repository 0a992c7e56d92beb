//! The reserve: disk space held back so that what must not fail for want of space does not.
//!
//! A file of the state directory ([`RESERVE`], hidden from the mount) keeps blocks allocated
//! for two kinds of need:
//!
//! - **Space-freeing operations** (deletes and renames): on a full disk a delete still needs a
//!   directory entry in `objects/`, a rename one in its target directory. [`FREEING_ROOM`]
//!   bytes are kept for them: a step of theirs that fails with `ENOSPC` gets a chunk back
//!   ([`Core::freeing`]) and is tried again. Nothing else may take that part, so what is
//!   written while the disk is full cannot use it up.
//! - **Versions acknowledged in `batch` durability** and not installed yet: before its row is
//!   written, a close is charged one block of the filesystem (the directory entry its install
//!   may need, or the one in `objects/` that keeps it if the install fails); a close the
//!   reserve cannot grow for gets `ENOSPC` instead of an acknowledgement. The group commit
//!   hands a version's block back to the disk to retry an install (or a keep) that failed with
//!   `ENOSPC`, and discharges the rest once the batch is done. So an acknowledged version never
//!   depends on space found later.
//!
//! The file grows in [`CHUNK`]s and shrinks only past a chunk of slack, so a stream of closes
//! costs one `fallocate` per chunk. Blocks freed by a truncate may be allocatable only once the
//! filesystem's journal committed (ext4), so handing back syncs the file. Where `fallocate` is
//! unsupported the blocks are written with zeros.
//!
//! What it does not do: reserve room for rows (the journal keeps its own reserve, whose last
//! half only space-freeing rows may use: `journal/writer.rs`), nor for `close`-mode commits,
//! which fail before they are acknowledged. Engines on a test's hooked disk have none
//! ([`Reserve::off`]): the crash and fault tests see exactly a commit's calls.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::durable::layout::RESERVE;
use crate::durable::{Dir, Disk, File};
use crate::error::{Error, Result};

use super::Core;

/// Bytes kept for space-freeing operations.
pub const FREEING_ROOM: u64 = 256 << 10;
/// The reserve grows and shrinks by this much.
const CHUNK: u64 = 64 << 10;

/// The reserve of one engine (see the module documentation).
pub(crate) struct Reserve {
    /// `None`: no reserve (a test's disk, or a state directory where the file cannot be made).
    file: Option<File>,
    /// What one acknowledged version is charged: the filesystem's block.
    block: u64,
    state: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    /// Bytes allocated in the file.
    held: u64,
    /// Bytes owed to versions staged and not installed.
    charged: u64,
}

impl Reserve {
    /// No reserve: charges always succeed, nothing is handed back.
    pub(crate) fn off() -> Reserve {
        Reserve { file: None, block: 0, state: Mutex::default() }
    }

    /// Open (or make) the reserve file in `state` and fill it as far as the disk allows. A
    /// file that cannot be made leaves the engine without a reserve, which is logged.
    pub(crate) fn open(disk: &dyn Disk, state: &Dir) -> Reserve {
        let file = match disk.open_write(state, RESERVE, true, 0o600) {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!(error = %e, "no disk reserve: deletes and renames on a full disk may fail");
                return Reserve::off();
            }
        };
        let block = disk.statfs(state).map_or(4096, |s| u64::from(s.block_size).clamp(512, 1 << 16));
        let held = disk.file_stat(&file).map_or(0, |s| s.size);
        let reserve = Reserve { file: Some(file), block, state: Mutex::new(Held { held, charged: 0 }) };
        reserve.refill(disk);
        reserve
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What one acknowledged version is charged (0 without a reserve).
    pub(crate) fn block(&self) -> u64 {
        self.block
    }

    /// Bring the file back to what it should hold, if the disk has room (after space was
    /// freed): its part for freeing operations and what is charged.
    pub(crate) fn refill(&self, disk: &dyn Disk) {
        let mut state = self.lock();
        let want = round_up(FREEING_ROOM + state.charged);
        if state.held < want
            && let Err(e) = self.resize(disk, &mut state, want)
        {
            tracing::debug!(error = %e, held = state.held, "disk reserve not refilled");
        }
    }

    /// Charge `n` bytes for a version about to be acknowledged: the reserve grows to cover
    /// them, and its part for freeing operations first. `Err` (`no_space`): the disk cannot.
    pub(crate) fn charge(&self, disk: &dyn Disk, n: u64) -> Result<()> {
        if self.file.is_none() {
            return Ok(());
        }
        let mut state = self.lock();
        let want = FREEING_ROOM + state.charged + n;
        if state.held < want {
            self.resize(disk, &mut state, round_up(want))?;
        }
        state.charged += n;
        Ok(())
    }

    /// `n` charged bytes are owed no more (their versions are installed or kept); the file
    /// shrinks once it holds more than a chunk past its need.
    pub(crate) fn discharge(&self, disk: &dyn Disk, n: u64) {
        if n == 0 {
            return;
        }
        let mut state = self.lock();
        state.charged = state.charged.saturating_sub(n);
        let want = round_up(FREEING_ROOM + state.charged);
        if state.held > want + CHUNK
            && let Err(e) = self.resize(disk, &mut state, want)
        {
            tracing::debug!(error = %e, "disk reserve not shrunk");
        }
    }

    /// Hand `n` charged bytes back to the disk, for the version they were charged for: its
    /// install (or its keep) failed with `ENOSPC` and is tried again. Whether they were.
    pub(crate) fn spend_charge(&self, disk: &dyn Disk, n: u64) -> bool {
        let mut state = self.lock();
        let n = n.min(state.charged);
        if n == 0 {
            return false;
        }
        let to = state.held.saturating_sub(n);
        let spent = self.resize(disk, &mut state, to).is_ok();
        if spent {
            state.charged -= n;
        }
        spent
    }

    /// Hand a chunk of the part kept for freeing operations back to the disk (never what is
    /// charged); whether anything was handed back.
    fn spend_for_freeing(&self, disk: &dyn Disk) -> bool {
        let mut state = self.lock();
        let to = state.held.saturating_sub(CHUNK).max(state.charged);
        to < state.held && self.resize(disk, &mut state, to).is_ok()
    }

    /// Make the file `to` bytes long, all of them allocated; on failure it keeps what it held.
    fn resize(&self, disk: &dyn Disk, state: &mut Held, to: u64) -> Result<()> {
        let Some(file) = &self.file else { return Ok(()) };
        if to < state.held {
            disk.set_len(file, to).map_err(|e| Error::io("shrink the disk reserve", e))?;
            state.held = to;
            // Freed blocks are allocatable once the filesystem's journal has committed.
            disk.sync(file).map_err(|e| Error::io("sync the disk reserve", e))?;
            return Ok(());
        }
        let from = state.held;
        let grown = (|| -> std::io::Result<()> {
            disk.set_len(file, to)?;
            disk.reserve(file, from, to - from)?;
            // `reserve` does nothing where fallocate is unsupported: write the blocks instead.
            if disk.file_stat(file)?.blocks * 512 < to {
                let zeros = vec![0u8; CHUNK as usize];
                let mut at = from;
                while at < to {
                    let n = (to - at).min(CHUNK) as usize;
                    disk.write_at(file, &zeros[..n], at)?;
                    at += n as u64;
                }
            }
            Ok(())
        })();
        match grown {
            Ok(()) => {
                state.held = to;
                Ok(())
            }
            Err(e) => {
                let _ = disk.set_len(file, from);
                Err(Error::io("grow the disk reserve", e))
            }
        }
    }
}

fn round_up(n: u64) -> u64 {
    n.div_ceil(CHUNK) * CHUNK
}

impl Core {
    /// Run a step of a space-freeing operation (a delete, a rename, their rows): while it fails
    /// for want of space and the reserve has room kept for such steps, a chunk of it goes back
    /// to the disk and the step is tried again.
    pub(crate) fn freeing<T>(&self, mut step: impl FnMut() -> Result<T>) -> Result<T> {
        loop {
            match step() {
                Err(e) if super::room::is_full(&e) && self.reserve.spend_for_freeing(self.disk()) => {
                    tracing::warn!(error = %e, "disk full: the reserve handed back room for a delete or a rename");
                }
                other => return other,
            }
        }
    }
}
