//! The mount: a FUSE filesystem that mirrors the workspace and sends every write through the
//! engine's gate and commit protocol (DESIGN §5). Glue only: what a write *is* — drafts,
//! scoring, the commit protocol, journaling — is the engine's; this module maps FUSE inodes and
//! handles onto it and decides *when* to commit.
//!
//! ```text
//!   open(O_TRUNC) / first write / truncate   → one draft per inode (engine::Draft), shared by
//!                                              every handle; reads see it
//!   write                                    → into the draft; a certain secret → errno now
//!   flush (every close) if dirty, fsync      → commit: errno reaches close()/fsync()
//!   release (last handle) if still dirty     → commit (late mmap pages); errno is lost, so the
//!                                              outcome is journaled (a block row, quarantine)
//!   create                                   → a pending file: only in the inode table and its
//!                                              draft until the first commit
//!   pass-through paths (.git/**, target/**…) → opened and written in place, no draft
//! ```
//!
//! Which of these a path is (gated, written in place, inside the state directory) is the
//! engine's decision (`Engine::class`); this module asks it before every open, create and
//! namespace change.
//!
//! Semantics a writer sees:
//! - `write()` succeeds unless the written bytes alone are certainly refused (then the
//!   policy's errno, `EACCES` by default, and the draft is quarantined);
//! - `close()` and `fsync()` return only once the new version, its directory entry and its
//!   journal row are durable, or fail with the errno of what went wrong (blocked: `EACCES`);
//!   the tree keeps the previous version until then;
//! - after a refusal every write and close of that file fails the same way, until the file is
//!   truncated to nothing (a rewrite) or its last handle closes;
//! - `unlink` and rename-over keep the old version in `objects/`; open files keep reading the
//!   version they opened after an unlink or a rename over them;
//! - names linked through the mount are one node (one inode number): a commit through any of
//!   them installs the new version and links it over the others (`relink`), so every name shows
//!   it; links made outside the mount are separate nodes, and a commit splits them;
//! - `.resilient_write/` is read-only, and its hidden entries (`objects/`, `drafts/`,
//!   `scratch/`, `keys/`, the MCP HTTP token: refused and quarantined content, out-of-band
//!   secrets, keys; see `durable::layout`) cannot be opened through the mount;
//! - an open file that loses its name (unlink, rename over it) keeps being read and written
//!   through its handles, into a draft that is never committed (POSIX's unlinked open file).
//!
//! Kernel caches: entries and attributes have long TTLs (every change goes through this
//! module, or through the engine, which tells us), and so do absent names (negative entries),
//! except in the state directory; not cached are the attributes of a file with several names
//! (a change through one name cannot reach the others' cache) and of a file just created (its
//! attributes are its draft's until the first commit); a commit drops the kernel's copy of the
//! file's attributes (installing the draft changed its ctime), and a stat that arrives while a
//! last close is still committing waits for it. File pages are dropped at each open and
//! invalidated when a draft is refused.

mod errno;
mod files;
mod inodes;
mod names;
mod ops;
mod pool;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo, Notifier};

use crate::durable::{FileKind, Stat};
use crate::engine::Engine;
use crate::error::{Error, Reason, Result};
use crate::journal::{Actor, Via, process_name};

pub use errno::errno;
use inodes::Table;
use pool::Pool;

/// Entry and attribute TTL: long, because every change is seen here (see the module docs).
const TTL: Duration = Duration::from_secs(60);

/// The attribute TTL of a reply: none for a file with several names. Each name is a node of
/// its own here (inodes are synthetic), so a change made through one name (a link, an unlink,
/// a chmod) cannot reach what the kernel caches for the others: it asks every time instead.
fn attr_ttl(attr: &FileAttr) -> Duration {
    if attr.kind != FileType::Directory && attr.nlink > 1 { Duration::ZERO } else { TTL }
}
/// Threads reading requests from the kernel.
const REQUEST_THREADS: usize = 4;
/// Threads running commits (more than request threads: concurrent commits share fsyncs).
const COMMIT_THREADS: usize = 8;

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
}

/// A live mount.
pub struct Mount {
    fs: Arc<Fs>,
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
}

/// The state every request handler shares.
pub(crate) struct Fs {
    engine: Arc<Engine>,
    table: Mutex<Table>,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_handle: AtomicU64,
    /// Last closes whose commit is still to run (see `Fs::release_handle`).
    closing: AtomicUsize,
    commits: Pool,
    invalidations: Pool,
    notifier: OnceLock<Notifier>,
    blocked: i32,
    read_only: bool,
    /// What requests' thread ids stand for (a writer writes many times).
    processes: Mutex<HashMap<u32, Process>>,
    /// Time of the last commit through the mount (for status).
    last_commit: Mutex<Option<SystemTime>>,
}

/// A process that sent requests.
#[derive(Clone)]
struct Process {
    pid: u32,
    comm: Option<String>,
}

/// The process (thread group) of thread `tid`.
fn thread_group(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// An open file or directory.
pub(crate) enum Handle {
    /// A regular file through the gate: its state is the inode's. `opener` opened it.
    File { ino: u64, writable: bool, opener: files::Caller },
    /// A file written in place (pass-through): its own descriptor.
    InPlace { ino: u64, file: crate::durable::File },
    /// A directory: its entries, read at the first `readdir`.
    Dir { ino: u64, entries: Mutex<Option<Vec<(u64, FileType, std::ffi::OsString)>>> },
}

impl Mount {
    /// Mount `engine`'s workspace at `options.mountpoint` and serve it on background threads.
    pub fn start(engine: Arc<Engine>, options: MountOptions) -> Result<Mount> {
        let spawn = |e: std::io::Error| Error::io("start mount threads", e);
        let fs = Arc::new(Fs {
            blocked: options.blocked_errno.unwrap_or_else(|| engine.blocked_errno()),
            engine,
            table: Mutex::default(),
            handles: Mutex::default(),
            next_handle: AtomicU64::new(1),
            closing: AtomicUsize::new(0),
            commits: Pool::new(COMMIT_THREADS, "rwfs-commit").map_err(spawn)?,
            invalidations: Pool::new(1, "rwfs-inval").map_err(spawn)?,
            notifier: OnceLock::new(),
            read_only: options.read_only,
            processes: Mutex::default(),
            last_commit: Mutex::default(),
        });
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName(fs.engine.workspace().path().display().to_string()),
            fuser::MountOption::CUSTOM("subtype=rwfs".into()),
            fuser::MountOption::DefaultPermissions,
            fuser::MountOption::NoDev,
            fuser::MountOption::NoSuid,
            if options.read_only { fuser::MountOption::RO } else { fuser::MountOption::RW },
        ];
        config.acl = if options.allow_other { fuser::SessionACL::All } else { fuser::SessionACL::Owner };
        config.n_threads = Some(REQUEST_THREADS);
        config.clone_fd = true;
        let session = fuser::Session::new(ops::Glue(fs.clone()), &options.mountpoint, &config)
            .map_err(|e| Error::io("mount", e).at(options.mountpoint.display().to_string()))?;
        let _ = fs.notifier.set(session.notifier());
        let session = session.spawn().map_err(|e| Error::io("start mount session", e))?;
        Ok(Mount { fs, session: Some(session), mountpoint: options.mountpoint })
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
        (self.fs.open_drafts(), *self.fs.last_commit.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The engine changed `path` behind the kernel's back (a write, delete or restore from the
    /// CLI or MCP): forget what the mount and the kernel cached about it.
    pub fn changed(&self, path: &str) {
        self.fs.changed(path);
        // Return once the kernel has forgotten it (the invalidation thread runs its jobs in
        // order), so that whoever is told "written" then finds the name; bounded, in case the
        // kernel is slow to take the invalidation.
        let (done, wait) = crossbeam_channel::bounded(1);
        self.fs.invalidations.run(move || {
            let _ = done.send(());
        });
        let _ = wait.recv_timeout(Duration::from_secs(1));
    }

    /// Commit (or, if refused, quarantine) every open draft; how many were settled.
    pub fn settle_drafts(&self) -> usize {
        self.fs.settle_drafts()
    }

    /// Settle drafts, unmount lazily, and wait up to `wait` for processes still using the
    /// mount before cutting the connection.
    pub fn unmount(mut self, wait: Duration) -> Result<()> {
        self.fs.settle_drafts();
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
        self.fs.settle_drafts();
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

impl Fs {
    /// The actor of a request: the writer's process id, process name and uid.
    fn actor(&self, tid: u32, uid: u32) -> Actor {
        let (pid, comm) = match self.process(tid) {
            Some(p) => (Some(p.pid), p.comm),
            None => (None, None),
        };
        Actor { via: Via::Fuse, caller: "rwfs-mount".into(), pid, comm, uid: Some(uid), tool: None }
    }

    /// The process of the thread `tid` that sent a request (FUSE names threads), `None` for the
    /// kernel's own requests (tid 0). A process gone before we look keeps its thread id.
    fn process(&self, tid: u32) -> Option<Process> {
        if tid == 0 {
            return None;
        }
        let mut processes = self.processes.lock().unwrap_or_else(PoisonError::into_inner);
        if processes.len() > 4096 {
            processes.clear();
        }
        let found = processes.entry(tid).or_insert_with(|| {
            let pid = thread_group(tid).unwrap_or(tid);
            Process { pid, comm: process_name(pid) }
        });
        Some(found.clone())
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The path of a node, or `ENOENT` (detached) / `EILSEQ` (a name that is not UTF-8).
    fn path(&self, ino: u64) -> Result<String> {
        self.table().path(ino).ok_or_else(|| Reason::NotFound.into())
    }

    fn child_path(&self, parent: u64, name: &std::ffi::OsStr) -> Result<String> {
        if name.to_str().is_none() {
            return Err(Reason::NotUtf8.into());
        }
        self.table().child_path(parent, name).ok_or_else(|| Reason::NotFound.into())
    }

    /// Refuse to open what the mount never lets a process read: the state directory's hidden
    /// entries (refused and quarantined content, out-of-band secrets, keys and tokens). Their
    /// names and attributes are listed, which reveals digests and sizes only.
    fn check_readable(&self, path: &str) -> Result<()> {
        if !self.engine.class(path).readable() {
            return Err(Reason::PermissionDenied.into());
        }
        Ok(())
    }

    /// Refuse changes on a read-only mount and inside the state directory.
    fn check_writable(&self, path: &str) -> Result<()> {
        if self.read_only || self.engine.class(path).is_state() {
            return Err(Reason::ReadOnlyFilesystem.into());
        }
        Ok(())
    }

    fn new_handle(&self, handle: Handle) -> u64 {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().unwrap_or_else(PoisonError::into_inner).insert(fh, Arc::new(handle));
        fh
    }

    /// Drop the kernel's cached pages and attributes of `ino` (after a refused draft), on the
    /// invalidation thread.
    fn invalidate(&self, ino: u64) {
        if let Some(notifier) = self.notifier.get() {
            let notifier = notifier.clone();
            self.invalidations.run(move || {
                let _ = notifier.inval_inode(INodeNo(ino), 0, -1);
            });
        }
    }

    /// Drop the kernel's cached attributes of `ino` now, before the reply of the request that
    /// changed them (attributes only: no page is touched, so no lock the request holds is
    /// needed).
    fn invalidate_attr_now(&self, ino: u64) {
        if let Some(notifier) = self.notifier.get() {
            let _ = notifier.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    /// The kernel may still have `parent/name` cached: drop it (on the invalidation thread).
    fn forget_name(&self, parent: u64, name: std::ffi::OsString) {
        if let Some(notifier) = self.notifier.get() {
            let notifier = notifier.clone();
            self.invalidations.run(move || {
                let _ = notifier.inval_entry(INodeNo(parent), &name);
            });
        }
    }

    fn changed(&self, path: &str) {
        // The node at `path`, and the name the kernel may hold an entry for (positive, or
        // negative: "absent"): the last one, or the first one on the way that the table does
        // not know (a directory the engine just created for the change).
        let (node, parent) = {
            let table = self.table();
            let (mut at, mut entry, mut known) = (inodes::ROOT, None, true);
            for name in path.split('/').filter(|c| !c.is_empty()) {
                entry = Some((at, std::ffi::OsString::from(name)));
                match table.child(at, std::ffi::OsStr::new(name)) {
                    Some(child) => at = child,
                    None => {
                        known = false;
                        break;
                    }
                }
            }
            (known.then_some(at).filter(|&ino| ino != inodes::ROOT), entry)
        };
        if let Some(ino) = node {
            if let Some(file_node) = self.file_of(ino) {
                file_node.lock().backing = None;
            }
            self.invalidate(ino);
        }
        if let Some((dir, name)) = parent {
            self.forget_name(dir, name);
        }
    }

    /// May the kernel remember that a name in `parent` is absent? Not inside the state
    /// directory, whose files the engine creates behind the kernel's back (rejection
    /// envelopes, objects); everywhere else a name appears through this module, or through
    /// the engine, which says so (`changed`).
    fn absence_cacheable(&self, parent: u64) -> bool {
        self.table().path(parent).is_some_and(|p| !self.engine.class(&p).is_state())
    }

    fn committed(&self) {
        *self.last_commit.lock().unwrap_or_else(PoisonError::into_inner) = Some(SystemTime::now());
    }
}

/// A FUSE attribute from a backing stat, under our inode number.
fn attr(ino: u64, stat: &Stat) -> FileAttr {
    let time = |ns: i64| {
        if ns >= 0 {
            UNIX_EPOCH + Duration::from_nanos(ns as u64)
        } else {
            UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
        }
    };
    FileAttr {
        ino: INodeNo(ino),
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

/// A negative entry: node 0, which the kernel keeps as "absent" for the entry TTL.
fn absent() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
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
