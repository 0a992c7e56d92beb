//! The FUSE adapter: a kernel session serving [`crate::vfs::Vfs`] through fuser. It decodes
//! requests, maps thread ids to processes, converts [`crate::vfs::Attr`] to fuser's
//! `FileAttr` and engine errors to errnos (`errno.rs`, one exhaustive `match`), runs the
//! requests that may commit on a small pool of threads that own the reply, and turns the
//! filesystem's "forget this" calls ([`crate::vfs::Kernel`]) into kernel notifications. It makes
//! no decision about what a request means: that is `vfs/`. Each request runs in a `fuse` span
//! (operation, request id, node, handle), and every failure goes one way (`failure.rs`): logged
//! at a level its error's kind decides, and counted per operation ([`Mount::failures`], logged at unmount).
//!
//! Kernel caches: entries and attributes have long TTLs (every change goes through the
//! filesystem, or through the engine, which tells it), and so do absent names (negative
//! entries) where [`Vfs::absence_cacheable`] allows; attributes that are not
//! [`crate::vfs::Attr::cacheable`] are not cached, and a commit drops the kernel's copy of the
//! file's (a just-created file's are its draft's until then: `ops.rs`'s `Create`). File pages
//! are kept across opens (`FOPEN_KEEP_CACHE`) while the file has not changed since they were
//! read ([`crate::vfs::Opened`]), and dropped otherwise; a created or rewritten file's draft
//! is written with direct I/O (`ops.rs`'s `Glue::direct_draft`);
//! a read-only open asks for no flush at close (`FOPEN_NOFLUSH`: a reader's close commits
//! nothing), one round trip fewer per file a `grep` or a build reads. Directory listings are
//! kept across opens (`FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE`) where
//! [`Vfs::listing_cacheable`] allows: the kernel drops a listing itself when a request through
//! it changes the directory, and is told when a name appears or goes behind its back. A change
//! the engine made behind the kernel's back is announced to inotify watchers by doing, through
//! the mount, the harmless operation that raises its events (`vfs::Announce`).

mod errno;
mod failure;
mod ops;
mod passthrough;
mod pool;
mod process;

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo, Notifier};

use crate::durable::{FileKind, Stat};
use crate::engine::Engine;
use crate::error::{Error, Reason, Result};
use crate::vfs::{self, Attr, Kernel, Vfs};
use nix::libc;

pub use errno::errno;
use passthrough::Passthrough;
pub use passthrough::Requests;
use pool::Pool;

/// Entry and attribute TTL: long, because every change is seen (see the module docs).
const TTL: Duration = Duration::from_secs(60);
/// Threads reading requests from the kernel.
const REQUEST_THREADS: usize = 4;
/// Threads running commits (more than request threads: concurrent commits share fsyncs).
const COMMIT_THREADS: usize = 8;
/// How long [`Kernel::settle`] waits for the invalidation thread.
const SETTLE_WAIT: Duration = Duration::from_secs(1);

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// Where; the workspace itself to mount over it (its descriptor was opened first).
    pub mountpoint: PathBuf,
    pub read_only: bool,
    /// `allow_other` (with `default_permissions`, always on).
    pub allow_other: bool,
    /// Errno of a blocked write; the policy's `blocked_errno` when `None`.
    pub blocked_errno: Option<i32>,
    /// Let the kernel read and write files on pass-through paths itself (FUSE passthrough)
    /// where it and the daemon's privileges allow.
    pub kernel_passthrough: bool,
    /// Tell a refused writer why on its standard error; the policy's `stderr_notice` (else
    /// off) when `None`.
    pub stderr_notice: Option<bool>,
}

/// A live mount.
pub struct Mount {
    vfs: Arc<Vfs>,
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
    passthrough: Arc<Passthrough>,
    failures: Arc<failure::Failures>,
}

/// The kernel's caches, reached through the session's notifier: asynchronous forgets run in
/// order on one thread of their own, never inside a request handler (the kernel may hold the
/// inode's lock while it waits for that handler's reply).
struct Notifications {
    notifier: OnceLock<Notifier>,
    thread: Pool,
    /// Where the mount is: announcements go through it.
    mountpoint: PathBuf,
    /// The mount's device, once it serves: an announcement goes only where it is.
    device: OnceLock<u64>,
}

impl Notifications {
    fn later(&self, job: impl FnOnce(&Notifier) + Send + 'static) {
        if let Some(notifier) = self.notifier.get() {
            let notifier = notifier.clone();
            self.thread.run(move || job(&notifier));
        }
    }
}

impl Kernel for Notifications {
    fn forget_node(&self, ino: u64) {
        self.later(move |n| {
            let _ = n.inval_inode(INodeNo(ino), 0, -1);
        });
    }

    fn forget_attr(&self, ino: u64) {
        if let Some(notifier) = self.notifier.get() {
            let _ = notifier.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    fn forget_name(&self, parent: u64, name: &OsStr) {
        let name = name.to_os_string();
        self.later(move |n| {
            let _ = n.inval_entry(INodeNo(parent), &name);
            // The directory's cached listing is its page cache; its attributes go too, so the
            // kernel checks its mtime before it serves a listing again.
            let _ = n.inval_inode(INodeNo(parent), 0, -1);
        });
    }

    fn settle(&self) {
        let (done, wait) = crossbeam_channel::bounded(1);
        self.thread.run(move || {
            let _ = done.send(());
        });
        let _ = wait.recv_timeout(SETTLE_WAIT);
    }

    /// The operation, through the mount, from the calling thread (never a request thread: the
    /// engine publishes its changes from the thread that made them, an MCP or control one).
    /// Only through this mount: the parent directory is opened by path and then checked to be
    /// on the mount's device, so that once it is unmounted (a stop under way, an external
    /// `umount`) nothing is made or removed in the directory underneath.
    fn announce(&self, path: &str, what: vfs::Announce) -> bool {
        use nix::fcntl::{OFlag, openat};
        use nix::sys::stat::{Mode, mkdirat};
        use nix::unistd::{UnlinkatFlags, unlinkat};
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let Some(&device) = self.device.get() else { return false };
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        let done = (|| -> std::io::Result<()> {
            let dir = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
                .open(self.mountpoint.join(parent))?;
            if dir.metadata()?.dev() != device {
                return Err(std::io::Error::from_raw_os_error(libc::EXDEV));
            }
            let rewrite = |create: OFlag| -> std::io::Result<()> {
                let flags = OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | create;
                let file = std::fs::File::from(openat(&dir, name, flags, Mode::from_bits_truncate(0o644))?);
                file.set_len(file.metadata()?.len())
            };
            match what {
                vfs::Announce::Dir => Ok(mkdirat(&dir, name, Mode::from_bits_truncate(0o755))?),
                vfs::Announce::Created => rewrite(OFlag::O_CREAT),
                vfs::Announce::Modified => rewrite(OFlag::empty()),
                vfs::Announce::Deleted => Ok(unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir)?),
            }
        })();
        if let Err(e) = &done {
            tracing::debug!(path, ?what, error = %e, "the change could not be announced to file watchers");
        }
        done.is_ok()
    }
}

impl Mount {
    /// Mount `engine`'s workspace at `options.mountpoint` and serve it on background threads.
    pub fn start(engine: Arc<Engine>, options: MountOptions) -> Result<Mount> {
        let spawn = |e: std::io::Error| Error::io("start mount threads", e);
        let kernel = Arc::new(Notifications {
            notifier: OnceLock::new(),
            thread: Pool::new(1, "rwfs-inval").map_err(spawn)?,
            mountpoint: options.mountpoint.clone(),
            device: OnceLock::new(),
        });
        let blocked = options.blocked_errno.unwrap_or_else(|| engine.blocked_errno());
        let fsname = engine.workspace().path().display().to_string();
        let stderr_notice = options.stderr_notice.or_else(|| engine.stderr_notice()).unwrap_or(false);
        let vfs = Vfs::new(engine, vfs::Options { read_only: options.read_only, stderr_notice }, kernel.clone());
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName(fsname),
            fuser::MountOption::CUSTOM("subtype=rwfs".into()),
            fuser::MountOption::DefaultPermissions,
            fuser::MountOption::NoDev,
            fuser::MountOption::NoSuid,
            if options.read_only { fuser::MountOption::RO } else { fuser::MountOption::RW },
        ];
        config.acl = if options.allow_other { fuser::SessionACL::All } else { fuser::SessionACL::Owner };
        config.n_threads = Some(REQUEST_THREADS);
        config.clone_fd = true;
        let passthrough = Arc::new(Passthrough::default());
        let failures = Arc::new(failure::Failures::new(blocked));
        let glue = ops::Glue {
            vfs: vfs.clone(),
            commits: Arc::new(Pool::new(COMMIT_THREADS, "rwfs-commit").map_err(spawn)?),
            processes: process::Processes::default(),
            failures: failures.clone(),
            want_passthrough: options.kernel_passthrough,
            direct_drafts: false,
            passthrough: passthrough.clone(),
        };
        let session = fuser::Session::new(glue, &options.mountpoint, &config).map_err(|e| {
            let at = options.mountpoint.display().to_string();
            // fusermount3's own refusal, in its words on the error.
            if options.allow_other && e.to_string().contains("user_allow_other") {
                return Error::from(Reason::InvalidArgument {
                    what: "--allow-other: as a normal user it needs `user_allow_other` in /etc/fuse.conf \
                           (root adds that line), or mount without --allow-other",
                })
                .at(at);
            }
            match e.raw_os_error() {
                Some(libc::EPERM | libc::EACCES | libc::ENODEV) => Error::from(Reason::FuseUnavailable).at(at),
                // No /dev/fuse, or no fusermount3 to mount as a normal user.
                Some(libc::ENOENT) if !options.mountpoint.exists() => Error::io("mount", e).at(at),
                Some(libc::ENOENT) => Error::from(Reason::FuseUnavailable).at(at),
                _ => Error::io("mount", e).at(at),
            }
        })?;
        let _ = kernel.notifier.set(session.notifier());
        let session = session.spawn().map_err(|e| Error::io("start mount session", e))?;
        if let Ok(meta) = std::fs::metadata(&options.mountpoint) {
            let _ = kernel.device.set(std::os::unix::fs::MetadataExt::dev(&meta));
        }
        Ok(Mount { vfs, session: Some(session), mountpoint: options.mountpoint, passthrough, failures })
    }

    pub fn mountpoint(&self) -> &std::path::Path {
        &self.mountpoint
    }

    /// Has the kernel ended the session (an external `umount`)?
    pub fn is_finished(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.guard.is_finished())
    }

    /// Open drafts and the time of the last commit.
    pub fn status(&self) -> (usize, Option<SystemTime>) {
        self.vfs.status()
    }

    /// The data requests that reached the daemon, and the opens the kernel served itself.
    pub fn requests(&self) -> Requests {
        self.passthrough.requests()
    }

    /// The operations whose requests failed, with how many did (since the mount started).
    pub fn failures(&self) -> Vec<(&'static str, u64)> {
        self.failures.counts()
    }

    /// Commit (or, if refused, quarantine) every open draft; how many were settled.
    pub fn settle_drafts(&self) -> usize {
        self.vfs.settle_drafts()
    }

    /// Settle drafts, unmount lazily, and wait up to `wait` for processes still using the
    /// mount before cutting the connection.
    pub fn unmount(mut self, wait: Duration) -> Result<()> {
        self.vfs.settle_drafts();
        let detached = nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH);
        if let Err(e) = detached
            && e != nix::errno::Errno::EINVAL
        {
            return Err(Error::io("unmount", e.into()).at(self.mountpoint.display().to_string()));
        }
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let deadline = std::time::Instant::now() + wait;
        while !session.guard.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Whatever arrived after the first pass (a process that kept writing).
        self.vfs.settle_drafts();
        let failed = self.failures.counts();
        if !failed.is_empty() {
            tracing::info!(?failed, "failed requests per operation while mounted");
        }
        if session.guard.is_finished() {
            let _ = session.join();
        } else {
            // Processes still hold files of the detached mount: the kernel ends the session
            // when they close them, or when this process exits.
            tracing::warn!(mountpoint = %self.mountpoint.display(), "the detached mount is still in use");
        }
        Ok(())
    }
}

/// A FUSE attribute from the filesystem's: what `stat` reports, the backing inode number
/// included; replies that hand the kernel a node give it [`Attr::ino`] beside it.
fn file_attr(attr: &Attr) -> FileAttr {
    let stat: &Stat = &attr.stat;
    let time = |ns: i64| {
        if ns >= 0 {
            UNIX_EPOCH + Duration::from_nanos(ns as u64)
        } else {
            UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
        }
    };
    FileAttr {
        ino: INodeNo(attr.st_ino()),
        size: stat.size,
        blocks: stat.blocks,
        atime: time(stat.atime_ns),
        mtime: time(stat.mtime_ns),
        ctime: time(stat.ctime_ns),
        crtime: time(stat.mtime_ns),
        kind: file_type(stat.kind),
        perm: stat.perm as u16,
        nlink: stat.nlink as u32,
        uid: stat.uid,
        gid: stat.gid,
        rdev: stat.rdev as u32,
        blksize: 4096,
        flags: 0,
    }
}

/// How long the kernel may keep `attr` of `vfs`.
fn attr_ttl(vfs: &Vfs, attr: &Attr) -> Duration {
    if vfs.attr_cacheable(attr) { TTL } else { Duration::ZERO }
}

/// A negative entry: node 0, which the kernel keeps as "absent" for the entry TTL.
fn absent() -> FileAttr {
    no_node(FileType::RegularFile)
}

/// Attributes of no node (node 0) of `kind`: a negative entry, or a listed name without
/// attributes.
fn no_node(kind: FileType) -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
    }
}
