//! Who owns a workspace, asked without taking it: the record in `.resilient_write/lock`
//! ([`LockInfo`]: the owner's pid and its settle watermark) and whether an engine holds the
//! lock now ([`current_owner`]).
//!
//! Only the reading is here. Taking the lock and writing the record is the engine's
//! (`engine/settle.rs`, which reads an old record with `read_info`).

use serde::{Deserialize, Serialize};

use crate::durable::{Dir, Disk, File};
use crate::error::{Error, IoContext, Result};

/// The lock file's name inside the state directory.
pub const LOCK_FILE: &str = crate::durable::layout::LOCK;

/// What the lock file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    pub pid: u32,
    pub settled_seq: u64,
}

/// Who owns the workspace of `state` right now, without taking it.
pub fn current_owner(disk: &dyn Disk, state: &Dir) -> Result<Option<LockInfo>> {
    let file = match disk.open_read(state, LOCK_FILE) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open lock file", e)),
    };
    // A shared lock succeeds only when no engine holds the exclusive one; closing `file`
    // releases it again at once.
    if disk.try_lock(&file, false).step("probe workspace lock")? {
        return Ok(None);
    }
    // Held, but the record is unreadable: pid 0 stands for "unknown".
    Ok(read_info(disk, &file).ok().flatten().or(Some(LockInfo { pid: 0, settled_seq: 0 })))
}

/// `Ok(None)` for an empty file, `Err` for unreadable content.
pub(crate) fn read_info(disk: &dyn Disk, file: &File) -> std::result::Result<Option<LockInfo>, ()> {
    let mut buf = [0u8; 256];
    let n = disk.read_at(file, &mut buf, 0).map_err(|_| ())?;
    let text = std::str::from_utf8(&buf[..n]).map_err(|_| ())?.trim();
    if text.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(text).map(Some).map_err(|_| ())
}
