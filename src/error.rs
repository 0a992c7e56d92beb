//! The engine's one error type.
//!
//! Every refusal and failure below the front ends is an [`Error`]: an opaque value with a
//! [`kind`](Error::kind) in the reference server's vocabulary (`blocked`, `stale_precondition`,
//! `write_corruption`, `quota_exceeded`, `policy_violation`, plus `io` for the unexpected), a
//! [`Reason`] that carries the context as data, the workspace path when there is one, and the
//! underlying `io::Error` when the OS said no. Front ends translate *kinds* (the mount to an
//! errno, MCP to an envelope, the CLI to an exit code) and may show the reason's stable
//! [`code`](Reason::code); none of them parses the message.
//!
//! The kind is derived from the reason in exactly one place ([`Reason::kind`]) and the errno to
//! reason mapping lives in exactly one place ([`Reason::from_io`]).
//!
//! Messages never contain file content: a reason names digests, sizes and paths only.

use std::fmt;
use std::io;

use crate::sha::Sha256;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The class of a failure, as front ends see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The content was refused by policy (secrets).
    Blocked,
    /// The world is not as the caller assumed: the file exists, changed, or is gone.
    StalePrecondition,
    /// Bytes read back differ from the bytes meant to be written.
    WriteCorruption,
    /// The disk or quota is full.
    QuotaExceeded,
    /// The request is not allowed: a hostile path, a protected location, bad input.
    PolicyViolation,
    /// An unexpected I/O failure (EIO and friends).
    Io,
}

impl ErrorKind {
    /// The reference envelope's `error` string (`io` is rwfs's own).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Blocked => "blocked",
            ErrorKind::StalePrecondition => "stale_precondition",
            ErrorKind::WriteCorruption => "write_corruption",
            ErrorKind::QuotaExceeded => "quota_exceeded",
            ErrorKind::PolicyViolation => "policy_violation",
            ErrorKind::Io => "io",
        }
    }
}

impl ErrorKind {
    /// The kind named by [`ErrorKind::as_str`].
    pub fn parse(s: &str) -> Option<ErrorKind> {
        Some(match s {
            "blocked" => ErrorKind::Blocked,
            "stale_precondition" => ErrorKind::StalePrecondition,
            "write_corruption" => ErrorKind::WriteCorruption,
            "quota_exceeded" => ErrorKind::QuotaExceeded,
            "policy_violation" => ErrorKind::PolicyViolation,
            "io" => ErrorKind::Io,
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an operation failed, with its context.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    // The path was refused before anything was touched.
    EmptyPath,
    AbsolutePath,
    /// `..`, an absolute or outward symlink, or a rename race would leave the workspace.
    EscapesWorkspace,
    NulByte,
    /// A single component is longer than 255 bytes.
    NameTooLong,
    /// The whole path is longer than 4096 bytes.
    PathTooLong,
    NotUtf8,
    /// The path is inside `.resilient_write/`, which only the engine writes.
    StateDir,
    IsDirectory,
    /// A component of the path is not a directory.
    NotADirectory,
    /// A fifo, socket or device.
    NotRegularFile,
    TooManySymlinks,

    // Preconditions.
    /// Create mode and the file exists.
    AlreadyExists {
        existing: Sha256,
    },
    /// `expected_prev_sha256` did not match; `None` means "absent".
    PreconditionFailed {
        expected: Option<Sha256>,
        actual: Option<Sha256>,
    },
    NotFound,
    /// No journal row names this version of the path.
    VersionNotFound,
    /// Several versions match an abbreviated digest.
    AmbiguousVersion,
    /// The path did not exist at the requested time.
    AbsentAtTime,
    /// The version is known but its bytes are no longer in `objects/` (retention removed them).
    ObjectMissing {
        sha: Sha256,
    },

    // Integrity.
    ReadBackMismatch {
        expected: Sha256,
        actual: Sha256,
    },
    ObjectCorrupt {
        sha: Sha256,
        actual: Sha256,
    },
    /// A version stored encrypted does not open with the workspace's key (a wrong key, or its
    /// bytes changed).
    Unsealable {
        sha: Sha256,
    },
    /// The key that encrypts the workspace's credential-bearing versions cannot be had.
    KeyUnavailable {
        path: String,
        problem: String,
    },
    /// The key file would be inside the workspace, where the mount shows it.
    KeyInsideWorkspace {
        path: String,
    },

    // The operating system.
    NoSpace,
    /// A gated version larger than the policy's `max_gated_bytes` (its bytes are kept in
    /// `objects/`, named by a `block` row with reason `too_big`).
    TooBig {
        bytes: u64,
        max: u64,
    },
    PermissionDenied,
    /// The workspace policy's `read_guard:` keeps this file from an agent run: refused outright
    /// (`redacted` false), or opened for reading and writing where only a redacted view may be
    /// read (`redacted` true).
    ReadGuarded {
        rule: String,
        redacted: bool,
    },
    ReadOnlyFilesystem,
    /// Any other errno; the `io::Error` is the source.
    Io,

    // Policy.
    /// The content was refused by the workspace policy (secrets); it is quarantined.
    Blocked(Box<Rejection>),
    /// The same content was refused at the same path before and its retry budget is spent:
    /// refused outright, and still quarantined, journaled and explained like every refusal.
    RetryBudgetSpent(Box<Rejection>),
    /// The operation was refused by a protect rule or the bulk damage limit of the workspace
    /// policy, whatever the content (`engine/protect.rs`); nothing changed.
    Protected(Box<Protection>),
    /// A file whose new content was refused takes no more writes until it is rewritten from
    /// the start (truncated) or closed.
    StillBlocked,
    /// `rwfs approve` / `rwfs deny` of a version parked for approval (`engine/approve.rs`) that
    /// cannot be decided: none has that id, it is decided already, or its file changed since.
    /// `code` is the machine string, `message` says what to do.
    Approval {
        code: &'static str,
        message: String,
    },

    // The workspace.
    UnsafeRoot,
    WorkspaceLocked {
        pid: Option<u32>,
    },
    /// The workspace directory does not exist.
    NoSuchWorkspace,
    /// A read-only command on a directory without `.resilient_write/`.
    NotAWorkspace,

    // The mount's lifecycle (what `rwfs mount`, `rwfs unmount` and every command meet).
    /// An rwfs mount already serves this workspace or mountpoint.
    AlreadyMounted {
        pid: Option<u32>,
        mountpoint: String,
    },
    /// The mount's daemon is gone: the kernel answers `ENOTCONN` for the mountpoint.
    DeadMount {
        mountpoint: String,
    },
    /// `rwfs unmount` of a path no rwfs mount serves.
    NotMounted,
    /// The daemon took a CLI request and closed the connection without a whole answer: it
    /// stopped or died meanwhile.
    DaemonGone,
    /// The kernel refused the mount (no `/dev/fuse`, no permission, no `fusermount3`).
    FuseUnavailable,
    /// A malformed argument (a digest, a time, a mode).
    InvalidArgument {
        what: &'static str,
    },
    /// The policy file cannot be used; nothing of it was applied.
    BadPolicy {
        line: u64,
        column: u64,
        key: String,
        message: String,
    },
    /// An error the daemon owning the workspace reported (the CLI relays to it).
    Remote {
        kind: ErrorKind,
        code: String,
        message: String,
        /// The daemon's typed envelope of the error (JSON), when it sent one.
        envelope: Option<String>,
    },
}

impl Reason {
    /// The one place that decides the kind of every reason.
    pub fn kind(&self) -> ErrorKind {
        use Reason::*;
        match self {
            EmptyPath
            | AbsolutePath
            | EscapesWorkspace
            | NulByte
            | NameTooLong
            | PathTooLong
            | NotUtf8
            | StateDir
            | IsDirectory
            | NotADirectory
            | NotRegularFile
            | TooManySymlinks
            | PermissionDenied
            | ReadGuarded { .. }
            | ReadOnlyFilesystem
            | UnsafeRoot
            | NoSuchWorkspace
            | NotAWorkspace
            | NotMounted
            | FuseUnavailable
            | InvalidArgument { .. }
            | BadPolicy { .. } => ErrorKind::PolicyViolation,
            AlreadyExists { .. }
            | PreconditionFailed { .. }
            | NotFound
            | VersionNotFound
            | AmbiguousVersion
            | AbsentAtTime
            | ObjectMissing { .. }
            | KeyUnavailable { .. }
            | WorkspaceLocked { .. }
            | AlreadyMounted { .. }
            | DeadMount { .. }
            | DaemonGone
            | Approval { .. } => ErrorKind::StalePrecondition,
            ReadBackMismatch { .. } | ObjectCorrupt { .. } | Unsealable { .. } => ErrorKind::WriteCorruption,
            KeyInsideWorkspace { .. } => ErrorKind::PolicyViolation,
            NoSpace | TooBig { .. } => ErrorKind::QuotaExceeded,
            Io => ErrorKind::Io,
            Blocked(_) | RetryBudgetSpent(_) | StillBlocked | Protected(_) => ErrorKind::Blocked,
            Remote { kind, .. } => *kind,
        }
    }

    /// A stable machine string (the envelope's `context.reason`).
    pub fn code(&self) -> &'static str {
        use Reason::*;
        match self {
            EmptyPath => "empty_path",
            AbsolutePath => "absolute_path_rejected",
            EscapesWorkspace => "escapes_workspace",
            NulByte => "nul_byte_in_path",
            NameTooLong => "name_too_long",
            PathTooLong => "path_too_long",
            NotUtf8 => "path_not_utf8",
            StateDir => "state_dir_is_read_only",
            IsDirectory => "is_a_directory",
            NotADirectory => "not_a_directory",
            NotRegularFile => "not_a_regular_file",
            TooManySymlinks => "too_many_symlinks",
            AlreadyExists { .. } => "file_already_exists",
            PreconditionFailed { .. } => "expected_prev_sha256_mismatch",
            NotFound => "not_found",
            VersionNotFound => "version_not_found",
            AmbiguousVersion => "ambiguous_version",
            AbsentAtTime => "absent_at_time",
            ObjectMissing { .. } => "object_missing",
            ReadBackMismatch { .. } => "read_back_mismatch",
            ObjectCorrupt { .. } => "object_corrupt",
            Unsealable { .. } => "object_unsealable",
            KeyUnavailable { .. } => "key_unavailable",
            KeyInsideWorkspace { .. } => "key_inside_workspace",
            NoSpace => "no_space",
            TooBig { .. } => "too_big",
            PermissionDenied => "permission_denied",
            ReadGuarded { .. } => "read_guarded",
            ReadOnlyFilesystem => "read_only_filesystem",
            Io => "io_error",
            UnsafeRoot => "unsafe_workspace_root",
            WorkspaceLocked { .. } => "workspace_locked",
            NoSuchWorkspace => "no_such_workspace",
            NotAWorkspace => "not_a_workspace",
            AlreadyMounted { .. } => "already_mounted",
            DeadMount { .. } => "dead_mount",
            NotMounted => "not_mounted",
            DaemonGone => "daemon_gone",
            FuseUnavailable => "fuse_unavailable",
            InvalidArgument { .. } => "invalid_argument",
            BadPolicy { .. } => "bad_policy",
            Blocked(_) => "content_blocked",
            RetryBudgetSpent(_) => "retry_budget_exhausted",
            StillBlocked => "content_blocked",
            Protected(p) => p.reason,
            Approval { code, .. } => code,
            Remote { .. } => "remote",
        }
    }

    /// The one place that turns an errno into a reason.
    pub fn from_io(err: &io::Error) -> Reason {
        use nix::libc;
        match err.raw_os_error() {
            Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG) => Reason::NoSpace,
            Some(libc::EACCES | libc::EPERM) => Reason::PermissionDenied,
            Some(libc::EROFS) => Reason::ReadOnlyFilesystem,
            Some(libc::ENOENT) => Reason::NotFound,
            Some(libc::EISDIR) => Reason::IsDirectory,
            Some(libc::ENOTDIR) => Reason::NotADirectory,
            Some(libc::ELOOP) => Reason::TooManySymlinks,
            Some(libc::ENAMETOOLONG) => Reason::NameTooLong,
            _ => Reason::Io,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Reason::*;
        let absent = |s: &Option<Sha256>| s.map_or_else(|| "absent".to_string(), |s| s.short(12));
        match self {
            EmptyPath => f.write_str("the path is empty"),
            AbsolutePath => f.write_str("absolute paths are refused; give a path relative to the workspace"),
            EscapesWorkspace => f.write_str("the path leads outside the workspace"),
            NulByte => f.write_str("the path contains a NUL byte"),
            NameTooLong => f.write_str("a path component is longer than 255 bytes"),
            PathTooLong => f.write_str("the path is longer than 4096 bytes"),
            NotUtf8 => f.write_str("the path is not valid UTF-8"),
            StateDir => f.write_str(".resilient_write/ is written only by rwfs itself"),
            IsDirectory => f.write_str("the path is a directory"),
            NotADirectory => f.write_str("a component of the path is not a directory"),
            NotRegularFile => f.write_str("the path is not a regular file"),
            TooManySymlinks => f.write_str("too many levels of symbolic links"),
            AlreadyExists { existing } => {
                write!(f, "the file already exists (sha256 {})", existing.short(12))
            }
            PreconditionFailed { expected, actual } => {
                write!(f, "expected previous version {} but found {}", absent(expected), absent(actual))
            }
            NotFound => f.write_str("no such file in the workspace (`rwfs log` lists what existed; `rwfs restore` brings back a deleted file)"),
            NoSuchWorkspace => f.write_str("no such directory: give an existing workspace with -w DIR, or cd into one"),
            NotAWorkspace => f.write_str(
                "not an rwfs workspace (no .resilient_write/ here): give one with -w DIR, or start one with \
                 `rwfs mount DIR` or `rwfs write`",
            ),
            AlreadyMounted { pid: Some(pid), mountpoint } => write!(
                f,
                "already mounted on {mountpoint} by rwfs pid {pid}; `rwfs unmount {mountpoint}` stops it"
            ),
            AlreadyMounted { pid: None, mountpoint } => write!(
                f,
                "already mounted on {mountpoint} (no daemon answers); `rwfs unmount {mountpoint}` removes it"
            ),
            DeadMount { mountpoint } => write!(
                f,
                "the rwfs mount on {mountpoint} has lost its daemon (Transport endpoint is not connected); \
                 `rwfs unmount {mountpoint}` removes it (nothing acknowledged is lost), `rwfs mount` again to resume"
            ),
            NotMounted => f.write_str("not mounted: no rwfs mount there (`rwfs status` lists this workspace's mounts)"),
            DaemonGone => f.write_str(
                "the daemon serving this workspace stopped or died before it answered, so whether the request \
                 took effect is unknown: `rwfs log` shows the rows it wrote; `rwfs status` shows whether a daemon \
                 still runs (if its mount is dead, `rwfs unmount DIR` removes it); then run the command again",
            ),
            FuseUnavailable => f.write_str(
                "the kernel refused the FUSE mount: mounting needs /dev/fuse (modprobe fuse) and, as a normal \
                 user, /dev/fuse open to that user (most distributions make it 0666; root can `chmod 0666 \
                 /dev/fuse`) and fusermount3 (package fuse3) on PATH; or run as root",
            ),
            VersionNotFound => f.write_str("the journal has no such version of this path"),
            AmbiguousVersion => f.write_str("several versions match; give more digits"),
            AbsentAtTime => f.write_str("the path did not exist at that time"),
            ObjectMissing { sha } => {
                write!(f, "version {} is no longer in objects/ (removed by retention or lost)", sha.short(12))
            }
            ReadBackMismatch { expected, actual } => {
                write!(f, "bytes read back hash to {} instead of {}", actual.short(12), expected.short(12))
            }
            ObjectCorrupt { sha, actual } => {
                write!(f, "objects/{} holds bytes that hash to {}", sha.short(12), actual.short(12))
            }
            Unsealable { sha } => write!(
                f,
                "version {} is stored encrypted and does not open with this workspace's key (another key, or its \
                 bytes changed): put the key it was sealed with back (its file, or RWFS_KEY_FILE); `rwfs verify` \
                 lists every version that does not open; other versions are unaffected",
                sha.short(12)
            ),
            KeyUnavailable { path, problem } => write!(
                f,
                "the key that encrypts this workspace's refused drafts and credential-bearing versions is {problem} \
                 ({path}): those versions cannot be read (`rwfs verify` lists them) until the key file is put back \
                 from a backup or RWFS_KEY_FILE names it; every other version, the mount and new writes work without it"
            ),
            KeyInsideWorkspace { path } => write!(
                f,
                "the key file {path} would be inside the workspace, where the mount shows it: set RWFS_KEY_FILE (or \
                 XDG_CONFIG_HOME) to a place outside the workspace"
            ),
            NoSpace => f.write_str("no space left on the device (or quota exceeded)"),
            TooBig { bytes, max } => write!(
                f,
                "{bytes} bytes is over the policy's max_gated_bytes ({max}): refused, its bytes kept in objects/; write such files on a pass_through path"
            ),
            PermissionDenied => f.write_str(
                "permission denied: this user may not change it (`ls -ld` shows its owner and mode); \
                 use a directory this user owns, or run as its owner",
            ),
            ReadGuarded { rule, redacted: false } => write!(
                f,
                "the workspace policy keeps this file out of an agent's reach (read_guard rule `{rule}`): \
                 do not read it another way; ask the user for what you need from it, or to run the \
                 program that needs it with RWFS_READ_REAL=1"
            ),
            ReadGuarded { rule, redacted: true } => write!(
                f,
                "the workspace policy shows this file to an agent redacted (read_guard rule `{rule}`), so it \
                 cannot be opened for reading and writing: open it read-only to read the redacted view, or \
                 write-only (e.g. `>>`) to add to it; ask the user to change its secret values"
            ),
            ReadOnlyFilesystem => f.write_str("the backing filesystem is read-only"),
            Io => f.write_str("I/O error"),
            UnsafeRoot => f.write_str(
                "refusing a system directory or the home directory as workspace root \
                 (--allow-unsafe-root overrides)",
            ),
            WorkspaceLocked { pid: Some(pid) } => {
                write!(f, "the workspace is owned by another rwfs process (pid {pid})")
            }
            WorkspaceLocked { pid: None } => f.write_str("the workspace is owned by another rwfs process"),
            InvalidArgument { what } => write!(f, "invalid {what}"),
            Blocked(rejection) => {
                f.write_str("blocked by the workspace policy: ")?;
                for (i, (rule, line)) in rejection.rules.iter().enumerate() {
                    write!(f, "{}{rule} (line {line})", if i == 0 { "" } else { ", " })?;
                }
                write!(
                    f,
                    "; nothing was written, the content is quarantined (see .resilient_write/rejections/{}.json)",
                    rejection.id
                )
            }
            Remote { message, .. } => f.write_str(message),
            Protected(p) => write!(f, "{} (see .resilient_write/rejections/{}.json)", p.message, p.id),
            Approval { message, .. } => f.write_str(message),
            StillBlocked => f.write_str(
                "this file's new content was blocked by the workspace policy; rewrite it from the start \
                 (see .resilient_write/rejections/latest.json)",
            ),
            RetryBudgetSpent(rejection) => write!(
                f,
                "this exact content (sha256 {}) was refused here before and its retry budget is spent: \
                 change the content or the approach instead of retrying (see .resilient_write/rejections/{}.json)",
                rejection.sha256.short(12),
                rejection.id
            ),
            BadPolicy { line, column, key, message } => {
                write!(f, "policy line {line}, column {column}")?;
                if !key.is_empty() {
                    write!(f, ", key `{key}`")?;
                }
                write!(f, ": {message}")
            }
        }
    }
}

/// A write refused by policy, as the engine recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Name of the envelope file: `.resilient_write/rejections/<id>.json`.
    pub id: String,
    /// The blocking rules, each with the line of its first finding.
    pub rules: Vec<(String, usize)>,
    /// The refused content, quarantined in `objects/`.
    pub sha256: Sha256,
    /// The envelope written to the rejection file, as JSON.
    pub envelope: String,
}

/// An operation refused by a protect rule or the bulk damage limit, as the engine recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protection {
    /// Name of the envelope file: `.resilient_write/rejections/<id>.json`.
    pub id: String,
    /// `protected_path`, `approval_required` or `bulk_damage` (the envelope's `context.reason`).
    pub reason: &'static str,
    /// What was refused and what to do next, in words.
    pub message: String,
    /// The envelope written to the rejection file, as JSON.
    pub envelope: String,
}

/// An engine error: a [`Reason`], the path it concerns, the step that failed and the OS error.
pub struct Error(Box<Inner>);

struct Inner {
    reason: Reason,
    path: Option<String>,
    step: Option<&'static str>,
    source: Option<io::Error>,
}

impl Error {
    pub fn new(reason: Reason) -> Error {
        Error(Box::new(Inner { reason, path: None, step: None, source: None }))
    }

    /// An OS error during `step` (a short verb phrase such as `"fsync temp file"`).
    pub fn io(step: &'static str, source: io::Error) -> Error {
        Error(Box::new(Inner { reason: Reason::from_io(&source), path: None, step: Some(step), source: Some(source) }))
    }

    /// Attach the workspace path, unless one is already set.
    pub fn at(mut self, path: impl Into<String>) -> Error {
        if self.0.path.is_none() {
            self.0.path = Some(path.into());
        }
        self
    }

    /// Name the path from `root` down (an absolute path where it was relative to the workspace):
    /// for an error about the workspace itself, which a user may not know the root of.
    pub fn within(mut self, root: &std::path::Path) -> Error {
        let path = self.0.path.take().unwrap_or_default();
        self.0.path = Some(root.join(path).display().to_string());
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.0.reason.kind()
    }

    pub fn reason(&self) -> &Reason {
        &self.0.reason
    }

    /// The reason's code; for an error relayed from the daemon, the daemon's code.
    pub fn code(&self) -> &str {
        match &self.0.reason {
            Reason::Remote { code, .. } => code,
            reason => reason.code(),
        }
    }

    pub fn path(&self) -> Option<&str> {
        self.0.path.as_deref()
    }

    pub fn step(&self) -> Option<&'static str> {
        self.0.step
    }

    /// The errno, when the OS produced this error.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.0.source.as_ref().and_then(io::Error::raw_os_error)
    }
}

impl From<Reason> for Error {
    fn from(reason: Reason) -> Error {
        Error::new(reason)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.0.path {
            write!(f, "{path}: ")?;
        }
        if let Some(step) = self.0.step {
            write!(f, "{step}: ")?;
        }
        write!(f, "{}", self.0.reason)?;
        if let Some(source) = &self.0.source
            && (!matches!(self.0.reason, Reason::Io) || self.0.step.is_some())
        {
            write!(f, " ({source})")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind())
            .field("reason", &self.0.reason)
            .field("path", &self.0.path)
            .field("step", &self.0.step)
            .field("source", &self.0.source)
            .finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source.as_ref().map(|e| e as _)
    }
}

/// `result.step("fsync temp file")?` turns an `io::Error` into an [`Error`].
pub trait IoContext<T> {
    fn step(self, step: &'static str) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn step(self, step: &'static str) -> Result<T> {
        self.map_err(|e| Error::io(step, e))
    }
}
