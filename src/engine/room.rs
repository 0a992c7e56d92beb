//! Room on a full disk: a write never fails for want of space while `objects/` holds old
//! versions retention may drop.
//!
//! A draft write, a commit of a draft or an engine write that fails with `ENOSPC` or `EDQUOT`
//! runs retention once with an emergency limit (`retention::emergency_plan`): the normal order
//! (the oldest versions of the busiest paths first) until the bytes the failed step needed are
//! free, and [`MIN_ROOM`] at least when other versions allow it; the newest version of a
//! deleted file goes only when the others together do not free what the step needs. The run is a `gc` row (`reason: no_space
//! wanted=…`), and the failed step is tried once more; its second error, if any, is the one
//! the caller sees. With nothing to drop, the first error stands.

use crate::error::{Error, Reason, Result};
use crate::journal::Actor;

use super::Core;

/// The least an emergency run frees: one small write after another on a full disk should not
/// each pay a scan of the journal.
pub const MIN_ROOM: u64 = 16 << 20;

/// Did this fail for want of space (not `EFBIG`, a size refused by rule)?
pub(crate) fn is_full(error: &Error) -> bool {
    match error.raw_os_error() {
        Some(errno) => matches!(errno, nix::libc::ENOSPC | nix::libc::EDQUOT),
        None => *error.reason() == Reason::NoSpace,
    }
}

impl Core {
    /// After `error`, free room for `need` bytes by dropping old versions; whether anything
    /// was dropped (so a retry can succeed).
    pub(crate) fn make_room(&self, error: &Error, need: u64, actor: &Actor) -> bool {
        if !is_full(error) {
            return false;
        }
        match self.retain_emergency(need.max(MIN_ROOM), need, actor) {
            Ok(gc) if gc.objects > 0 => {
                tracing::warn!(removed = gc.objects, bytes = gc.bytes, "disk full: old versions dropped to make room");
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(error = %e, "disk full and the version store could not be trimmed");
                false
            }
        }
    }

    /// Run `step`; when it fails for want of space and room could be made, once more.
    pub(crate) fn with_room<T>(&self, need: u64, actor: &Actor, mut step: impl FnMut() -> Result<T>) -> Result<T> {
        match step() {
            Err(e) if self.make_room(&e, need, actor) => step(),
            other => other,
        }
    }
}
