//! The adapter's one failure path, and the span each request runs in.
//!
//! Every callback opens a [`Call`]: a `fuse` span (debug level) with the operation, the kernel's
//! request id, the node and the handle, which follows the request onto the commit pool; any
//! event logged while serving it — the engine's included — carries those fields. A callback
//! that fails answers with [`Call::fail`], which logs the error once at a level its kind decides
//! ([`level`]: an answer the caller asked for is debug, a refused write info, a full disk or an
//! unexpected I/O error warn, corruption error), counts it against the operation
//! ([`Failures::counts`]) and gives the errno. It decides no errno itself (`errno.rs` does).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fuser::Errno;
use nix::libc;
use tracing::Level;

use super::errno::errno;
use crate::error::{Error, ErrorKind};

/// The operations counted, in the order [`Failures::counts`] lists them; anything else counts
/// as `other`.
const OPS: [&str; 29] = [
    "lookup",
    "getattr",
    "setattr",
    "readlink",
    "mknod",
    "mkdir",
    "unlink",
    "rmdir",
    "symlink",
    "rename",
    "link",
    "open",
    "read",
    "write",
    "flush",
    "release",
    "fsync",
    "opendir",
    "readdir",
    "readdirplus",
    "releasedir",
    "statfs",
    "setxattr",
    "getxattr",
    "listxattr",
    "removexattr",
    "create",
    "fallocate",
    "other",
];

/// Failed requests per operation, and the errno of a refused write.
#[derive(Debug)]
pub struct Failures {
    blocked: i32,
    counts: [AtomicU64; OPS.len()],
}

impl Failures {
    pub fn new(blocked: i32) -> Failures {
        Failures { blocked, counts: std::array::from_fn(|_| AtomicU64::new(0)) }
    }

    /// The operations that failed at least once, with how often, in [`OPS`] order.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        OPS.iter().zip(&self.counts).map(|(op, n)| (*op, n.load(Ordering::Relaxed))).filter(|(_, n)| *n > 0).collect()
    }

    fn record(&self, op: &'static str, error: &Error) -> Errno {
        let slot = OPS.iter().position(|o| *o == op).unwrap_or(OPS.len() - 1);
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        let errno = errno(error, self.blocked);
        let code = errno.code();
        match level(error) {
            Level::ERROR => tracing::error!(op, errno = code, error = %error, "request failed"),
            Level::WARN => tracing::warn!(op, errno = code, error = %error, "request failed"),
            Level::INFO => tracing::info!(op, errno = code, error = %error, "request failed"),
            _ => tracing::debug!(op, errno = code, error = %error, "request failed"),
        }
        errno
    }
}

/// One request being served: its span, and where its failure goes.
pub struct Call {
    op: &'static str,
    span: tracing::Span,
    failures: Arc<Failures>,
}

impl Call {
    /// Open the span of request `id` for operation `op` on node `ino` (and handle `fh`).
    pub fn new(failures: &Arc<Failures>, op: &'static str, id: u64, ino: u64, fh: Option<u64>) -> Call {
        let span = tracing::debug_span!("fuse", op, req = id, ino, fh);
        Call { op, span, failures: failures.clone() }
    }

    /// Run `f` inside the request's span.
    pub fn in_span<R>(&self, f: impl FnOnce() -> R) -> R {
        self.span.in_scope(f)
    }

    /// Enter the request's span until the guard drops.
    pub fn enter(&self) -> tracing::span::Entered<'_> {
        self.span.enter()
    }

    /// Log and count `error` as this request's failure; the errno to answer with.
    pub fn fail(&self, error: &Error) -> Errno {
        self.span.in_scope(|| self.failures.record(self.op, error))
    }
}

/// How loud a failed request is, from its error's kind: what a caller asked for and got a plain
/// "no" to (an absent name, a non-empty directory, a read-only state directory) is debug, so a
/// build probing for files logs nothing by default; a refused write is info (its row and
/// envelope already say the rest); a full disk and an unexpected I/O error are warnings; bytes
/// that did not read back as written are an error.
pub fn level(error: &Error) -> Level {
    match error.kind() {
        ErrorKind::StalePrecondition | ErrorKind::PolicyViolation => Level::DEBUG,
        ErrorKind::Io if error.raw_os_error().is_some_and(is_an_answer) => Level::DEBUG,
        ErrorKind::Blocked => Level::INFO,
        ErrorKind::QuotaExceeded | ErrorKind::Io => Level::WARN,
        ErrorKind::WriteCorruption => Level::ERROR,
    }
}

/// An errno the backing filesystem gives for a request that cannot be done as asked, not for a
/// fault of the filesystem.
fn is_an_answer(errno: i32) -> bool {
    [
        libc::ENOTEMPTY,
        libc::EXDEV,
        libc::ENODATA,
        libc::ERANGE,
        libc::EOPNOTSUPP,
        libc::EPERM,
        libc::EACCES,
        libc::EEXIST,
        libc::ENOENT,
        libc::EINVAL,
        libc::EBUSY,
        libc::EMLINK,
        libc::ENOTDIR,
        libc::EISDIR,
        libc::ENAMETOOLONG,
        libc::ELOOP,
        libc::EFBIG,
        libc::ETXTBSY,
        libc::ESTALE,
    ]
    .contains(&errno)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Reason;

    fn os(errno: i32) -> Error {
        Error::io("test", std::io::Error::from_raw_os_error(errno))
    }

    #[test]
    fn the_level_follows_the_kind_and_plain_answers_stay_quiet() {
        let cases = [
            (Error::from(Reason::NotFound), Level::DEBUG),
            (Error::from(Reason::StateDir), Level::DEBUG),
            (os(libc::ENOTEMPTY), Level::DEBUG),
            (Error::from(Reason::StillBlocked), Level::INFO),
            (Error::from(Reason::NoSpace), Level::WARN),
            (os(libc::EIO), Level::WARN),
            (Error::from(Reason::Io), Level::WARN),
            (
                Error::from(Reason::ObjectCorrupt {
                    sha: crate::sha::Sha256::zero(),
                    actual: crate::sha::Sha256::zero(),
                }),
                Level::ERROR,
            ),
        ];
        for (error, want) in cases {
            assert_eq!(level(&error), want, "{error}");
        }
    }

    #[test]
    fn failures_are_counted_per_operation_and_answered_with_the_errno_table() {
        let failures = Arc::new(Failures::new(libc::EACCES));
        let lookup = Call::new(&failures, "lookup", 7, 1, None);
        assert_eq!(lookup.fail(&Error::from(Reason::NotFound)), Errno::ENOENT);
        assert_eq!(lookup.fail(&Error::from(Reason::NotFound)), Errno::ENOENT);
        let write = Call::new(&failures, "write", 8, 2, Some(3));
        assert_eq!(write.fail(&Error::from(Reason::StillBlocked)), Errno::EACCES);
        let odd = Call::new(&failures, "bmap", 9, 2, None);
        assert_eq!(odd.fail(&os(libc::EIO)), Errno::EIO);
        assert_eq!(failures.counts(), [("lookup", 2), ("write", 1), ("other", 1)]);
    }
}
