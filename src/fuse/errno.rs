//! Engine errors as the errnos a process sees through the mount: one exhaustive `match`.
//!
//! An error that came from the operating system keeps its own errno (`ENOTEMPTY`, `EXDEV`,
//! `EEXIST`, ...): it is the most precise answer. Otherwise the reason decides; a blocked write
//! gets the policy's errno (`EACCES` unless configured), a stale precondition `EAGAIN`, the state
//! directory `EROFS` (it is read-only through the mount).

use fuser::Errno;
use nix::libc;

use crate::error::{Error, Reason};

/// The errno for `error`; `blocked` is the errno of a write the policy refused.
pub fn errno(error: &Error, blocked: i32) -> Errno {
    Errno::from_i32(raw(error, blocked))
}

fn raw(error: &Error, blocked: i32) -> i32 {
    use Reason::*;
    if let Some(os) = error.raw_os_error() {
        return os;
    }
    match error.reason() {
        Blocked(_) | RetryBudgetSpent(_) | StillBlocked | Protected(_) => blocked,
        EmptyPath | AbsolutePath | NulByte | InvalidArgument { .. } | BadPolicy { .. } => libc::EINVAL,
        EscapesWorkspace => libc::EXDEV,
        NameTooLong | PathTooLong => libc::ENAMETOOLONG,
        NotUtf8 => libc::EILSEQ,
        StateDir | ReadOnlyFilesystem => libc::EROFS,
        IsDirectory => libc::EISDIR,
        NotADirectory => libc::ENOTDIR,
        NotRegularFile => libc::EINVAL,
        TooManySymlinks => libc::ELOOP,
        AlreadyExists { .. } => libc::EEXIST,
        PreconditionFailed { .. } | WorkspaceLocked { .. } | AlreadyMounted { .. } => libc::EAGAIN,
        NoSuchWorkspace => libc::ENOENT,
        NotAWorkspace | NotMounted => libc::EINVAL,
        DeadMount { .. } | DaemonGone => libc::ENOTCONN,
        FuseUnavailable => libc::EPERM,
        NotFound | VersionNotFound | AbsentAtTime => libc::ENOENT,
        AmbiguousVersion | Approval { .. } => libc::EINVAL,
        ObjectMissing { .. } | ReadBackMismatch { .. } | ObjectCorrupt { .. } | Unsealable { .. } | Io => libc::EIO,
        // Refused content that could not be sealed is still refused.
        KeyUnavailable { .. } | KeyInsideWorkspace { .. } => libc::EACCES,
        NoSpace => libc::ENOSPC,
        TooBig { .. } => libc::EFBIG,
        PermissionDenied | UnsafeRoot | ReadGuarded { .. } => libc::EACCES,
        Remote { .. } => libc::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_keep_their_errno_and_reasons_map_once() {
        let os = Error::io("rmdir", std::io::Error::from_raw_os_error(libc::ENOTEMPTY));
        assert_eq!(raw(&os, libc::EACCES), libc::ENOTEMPTY);
        assert_eq!(raw(&Error::from(Reason::StateDir), libc::EACCES), libc::EROFS);
        let stale = Reason::PreconditionFailed { expected: None, actual: None };
        assert_eq!(raw(&Error::from(stale), libc::EACCES), libc::EAGAIN);
        let spent = Reason::RetryBudgetSpent(Box::new(crate::error::Rejection {
            id: "rj_1".into(),
            rules: vec![],
            sha256: crate::sha::Sha256::zero(),
            envelope: "{}".into(),
        }));
        assert_eq!(raw(&Error::from(spent), libc::EPERM), libc::EPERM);
    }
}
