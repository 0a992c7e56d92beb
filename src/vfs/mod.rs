//! The mount's filesystem without a kernel: nodes, handles, the draft state machine and the
//! commit points (docs/architecture.md, The mount). [`Vfs`] answers every request the kernel can send — lookup,
//! open, read, write, flush, fsync, release, rename, unlink, link … — with plain types ([`Attr`]:
//! a node number and a backing [`Stat`]; typed [`crate::Error`]s), so its semantics are tested without
//! root or `/dev/fuse` (`tests/vfs.rs`). `fuse/` is the adapter that speaks fuser; this module
//! never imports it.
//!
//! ```text
//!   open(O_TRUNC) / first write / truncate   → one draft per file (the engine's, known here
//!                                              by its engine::DraftId), shared by every
//!                                              handle; reads see it
//!   write                                    → into the draft; a certain secret → errno now
//!   flush (every close) if dirty, fsync      → commit: errno reaches close()/fsync()
//!   release (last handle) if still dirty     → commit (late mmap pages); errno is lost, so the
//!                                              outcome is journaled (a block row, quarantine)
//!   create                                   → a pending file: only in the node table and its
//!                                              draft until the first commit
//!   pass-through paths (.git/**, target/**…) → opened and written in place, no draft
//! ```
//!
//! Semantics a writer sees (each defended in `tests/vfs.rs`, then through a kernel in
//! `tests/mount.rs`):
//! - `write()` succeeds unless the written bytes alone are certainly refused (then the
//!   policy's errno, `EACCES` by default, and the draft is quarantined);
//! - `close()` and `fsync()` return only once the new version, its directory entry and its
//!   journal row are durable, or fail with the errno of what went wrong (blocked: `EACCES`);
//!   the tree keeps the previous version until then; a close commits only when the closing
//!   process changed the draft (see [`file`]);
//! - after a refusal every write and close of that file fails the same way, until the file is
//!   truncated to nothing (a rewrite) or its last handle closes (the state machine in [`file`]);
//! - `unlink` and rename-over keep the old version in `objects/`; open files keep reading the
//!   version they opened after an unlink or a rename over them;
//! - names linked through the mount are one node (one inode number): a commit through any of
//!   them installs the new version and links it over the others, so every name shows it; links
//!   made outside the mount are separate nodes, and a commit splits them;
//! - `.resilient_write/` is read-only, and its hidden entries (`objects/`, `drafts/`,
//!   `scratch/`, `keys/`, the MCP HTTP token: refused and quarantined content, out-of-band
//!   secrets, keys) cannot be opened through the mount; which class a path is in (gated,
//!   written in place, state read-only, state hidden) is the engine's decision
//!   (`Engine::class`, from one table of the state directory's layout);
//! - an open file that loses its name (unlink, rename over it) keeps being read and written
//!   through its handles, into a draft that is never committed (POSIX's unlinked open file).
//!
//! Kernel caches are the adapter's, but when to drop them is decided here and said through the
//! [`Kernel`] trait and the answer to `open` ([`Opened::keep_cache`]: the kernel keeps a file's
//! pages across opens while nothing changed the file): a refused draft drops the file's pages, a commit drops its attributes, a
//! change the engine made behind the kernel's back (an MCP or CLI write, a restore — published
//! by the engine as a [`crate::engine::Changed`] event, to which a `Vfs` subscribes) drops the
//! node and the name, and is announced to inotify watchers by replaying it through the mount
//! ([`Kernel::announce`], [`Announce`]): this process's own requests for a path it announces are
//! answered from what the engine did, and change nothing. [`Attr::cacheable`] and [`Vfs::absence_cacheable`] say which answers the
//! kernel may keep.
//!
//! Threads: any method may be called from several threads at once. Locks: a file's state, then
//! the node table, then the handle table; never the other way round.

mod data;
mod file;
mod names;
mod stderr;
mod table;

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use crate::durable::{FileKind, Stat};
use crate::engine::Engine;
use crate::error::{Reason, Result};
use crate::journal::{Actor, Via};

pub use data::{Closing, InPlaceOpen, Opened};
pub use file::{FileState, Phase};
pub use names::SetAttr;
pub use table::ROOT;

use table::Table;

/// What the filesystem is asked to be.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub read_only: bool,
    /// Tell a refused writer why, one line on its standard error (`stderr.rs`).
    pub stderr_notice: bool,
}

/// The setgid bit of a mode.
pub const SETGID: u32 = 0o2000;

/// Who sends a request: the process (not the thread: FUSE names threads, the adapter maps
/// them) and its credentials. `pid` 0 is the kernel itself (writeback of mapped pages).
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    /// The process name, for the journal.
    pub comm: Option<String>,
    /// The process's umask, sent with the requests that create an entry (0 in others): rwfs
    /// applies it unless the directory has a default ACL (`engine/inherit.rs`).
    pub umask: u32,
    /// The process's supplementary groups, read only for the requests that need them (a
    /// `chmod` asking for the setgid bit); empty otherwise.
    pub groups: Vec<u32>,
}

impl Caller {
    /// The kernel's own requests, and the daemon's (shutdown).
    pub fn kernel() -> Caller {
        Caller::default()
    }

    /// May the caller give a file of group `gid` the setgid bit (with `chmod`, or an ACL that
    /// sets the mode)? Root may (`CAP_FSETID`), and so may a member of the group (its own group
    /// or a supplementary one); for anyone else the bit is dropped, as ext4 drops it.
    pub fn may_set_setgid(&self, gid: u32) -> bool {
        self.uid == 0 || self.gid == gid || self.groups.contains(&gid)
    }

    /// The caller as the asker of a new entry.
    pub fn owner(&self) -> crate::engine::Owner {
        crate::engine::Owner { uid: self.uid, gid: self.gid, umask: self.umask }
    }
}

/// The attributes of a node: its number and what the backing tree (or its draft) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub stat: Stat,
}

impl Attr {
    /// May the kernel keep these attributes for a while? Not for a file with several names:
    /// each name is a node of its own here (node numbers are rwfs's), so a change made through
    /// one name (a link, an unlink, a chmod) cannot reach what the kernel caches for the
    /// others: it asks every time instead.
    pub fn cacheable(&self) -> bool {
        self.stat.kind == FileKind::Dir || self.stat.nlink <= 1
    }

    /// The inode number `stat` reports (`st_ino`, and `d_ino` in a listing with attributes):
    /// the backing file's, as a passthrough filesystem reports it, so that what was built on
    /// the plain tree and keys on it — git's index above all — stays valid through the mount
    /// and back. The node number ([`Attr::ino`]) stays rwfs's: a commit gives the file a new
    /// backing inode (as a save by rename does natively) while the node lives on. Where there
    /// is no backing file (an unlinked file nothing holds open) the node number stands in.
    pub fn st_ino(&self) -> u64 {
        if self.stat.id.ino != 0 { self.stat.id.ino } else { self.ino }
    }
}

/// The kernel's caches, as far as the filesystem needs to drop entries from them. The FUSE
/// adapter implements it with notifications; tests record the calls.
pub trait Kernel: Send + Sync {
    /// Drop the node's cached pages and attributes (asynchronously: never inside a request
    /// the kernel may be waiting on with the inode locked).
    fn forget_node(&self, ino: u64);
    /// Drop the node's cached attributes now (no page is touched, so no lock a request holds
    /// is needed), before the reply of the request that changed them.
    fn forget_attr(&self, ino: u64);
    /// Drop the kernel's entry for `name` in `parent` (positive or negative) and its listing
    /// of `parent` (the kernel keeps listings across opens, see [`Vfs::listing_cacheable`]),
    /// asynchronously. Called for every name that appears or goes behind the kernel's back.
    fn forget_name(&self, parent: u64, name: &OsStr);
    /// Wait (bounded) until the asynchronous forgets asked for so far are done.
    fn settle(&self);
    /// Make a change the engine made behind the kernel's back look to file watchers as the
    /// same change made through the mount does: perform, through the mount, the harmless
    /// operation that raises its inotify events (`Announce`), from this process, whose
    /// requests the filesystem answers from what is already there. Whether it was raised.
    fn announce(&self, path: &str, what: Announce) -> bool;
}

/// A change the engine made behind the kernel's back, as the daemon replays it through its
/// own mount so that inotify watchers see it ([`Kernel::announce`]). The kernel raises
/// inotify events only for operations that pass through it; invalidating its caches raises
/// none (`FUSE_NOTIFY_INVAL_ENTRY`/`_INODE`, and `FUSE_NOTIFY_DELETE`, whose `d_delete` tells
/// no watcher of the directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announce {
    /// A directory the engine made (on the way to a file): `mkdir` → `IN_CREATE|IN_ISDIR`.
    Dir,
    /// A file the kernel did not know: `open(O_CREAT)`, `ftruncate` to its size, `close` →
    /// `IN_CREATE`, `IN_OPEN`, `IN_MODIFY`, `IN_CLOSE_WRITE`.
    Created,
    /// A file the kernel knows, with new content: `open`, `ftruncate` to its size, `close` →
    /// `IN_OPEN`, `IN_MODIFY`, `IN_CLOSE_WRITE`.
    Modified,
    /// A file that is gone: `unlink` → `IN_DELETE` (and the file's `IN_ATTRIB`,
    /// `IN_DELETE_SELF`).
    Deleted,
}

/// An open file or directory.
pub(crate) enum Handle {
    /// A regular file through the gate: its state is the file's. `opener` opened it.
    File { ino: u64, writable: bool, opener: Caller },
    /// A file written in place (pass-through): its own descriptor.
    InPlace { ino: u64, file: crate::durable::File },
    /// A directory: its entries, read at the first `readdir`.
    Dir { ino: u64, entries: Mutex<Option<Vec<DirEntry>>> },
    /// A read-only open of a read-guarded file by an agent run: the redacted view made at open
    /// (`engine/read_guard.rs`), served from memory, never from the page cache.
    Redacted { ino: u64, view: Vec<u8> },
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The node's number when the table knows it (`u64::MAX` otherwise: `d_ino` is advisory,
    /// `stat` gives the node's).
    pub ino: u64,
    pub kind: FileKind,
    pub name: OsString,
}

/// The mount's filesystem (see the module docs).
pub struct Vfs {
    engine: Arc<Engine>,
    kernel: Arc<dyn Kernel>,
    table: Mutex<Table>,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_handle: AtomicU64,
    /// Files whose last close's commit is still to run (see [`Vfs::release_handle`]), with
    /// how many such closes each has: what a directory's stat waits for, found without a scan
    /// of the node table.
    closing: Mutex<HashMap<u64, (Arc<file::FileNode>, usize)>>,
    read_only: bool,
    stderr_notice: bool,
    /// Time of the last commit through the mount (for status).
    last_commit: Mutex<Option<SystemTime>>,
    /// The announcements in progress ([`Kernel::announce`]), by path: this process's requests
    /// for them are answered from what the engine already did, and change nothing.
    heralds: Mutex<HashMap<String, Announce>>,
    /// This process's id, read once: [`Vfs::heralded`] compares every lookup's caller with it,
    /// and `getpid()` is a system call each time (glibc does not cache it).
    own_pid: u32,
}

impl Vfs {
    /// The filesystem of `engine`'s workspace; `kernel` is told what to forget. Starts no
    /// session and no thread. It follows the engine's changes (see the module docs) for as
    /// long as it lives.
    pub fn new(engine: Arc<Engine>, options: Options, kernel: Arc<dyn Kernel>) -> Arc<Vfs> {
        let vfs = Arc::new(Vfs {
            engine,
            kernel,
            table: Mutex::default(),
            handles: Mutex::default(),
            next_handle: AtomicU64::new(1),
            closing: Mutex::default(),
            read_only: options.read_only,
            stderr_notice: options.stderr_notice,
            last_commit: Mutex::default(),
            heralds: Mutex::default(),
            own_pid: std::process::id(),
        });
        let weak = Arc::downgrade(&vfs);
        vfs.engine.subscribe(Box::new(move |changed| match weak.upgrade() {
            Some(vfs) => {
                if changed.via != Via::Fuse {
                    vfs.changed(&changed.path);
                }
                true
            }
            None => false,
        }));
        vfs
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Open drafts and the time of the last commit.
    pub fn status(&self) -> (usize, Option<SystemTime>) {
        (self.open_drafts(), *self.last_commit.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The journal's actor for a request of `caller`.
    fn actor(&self, caller: &Caller) -> Actor {
        let pid = (caller.pid != 0).then_some(caller.pid);
        Actor {
            via: Via::Fuse,
            caller: "rwfs-mount".into(),
            pid,
            comm: caller.comm.clone(),
            uid: Some(caller.uid),
            tool: None,
            session_label: None,
            group: None,
            tool_call: None,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The path of a node, or `ENOENT` (detached) / `EILSEQ` (a name that is not UTF-8).
    fn path(&self, ino: u64) -> Result<String> {
        self.table().path(ino).ok_or_else(|| Reason::NotFound.into())
    }

    fn child_path(&self, parent: u64, name: &OsStr) -> Result<String> {
        if name.to_str().is_none() {
            return Err(Reason::NotUtf8.into());
        }
        self.table().child_path(parent, name).ok_or_else(|| Reason::NotFound.into())
    }

    /// Is `path` written in place (no draft, no scan, no journal)? The engine's class decides.
    fn in_place(&self, path: &str) -> bool {
        self.engine.class(path).in_place()
    }

    /// Does the mount show `path` at all? The state directory's hidden entries (refused and
    /// quarantined content, kept versions, live drafts, out-of-band secrets, keys and tokens;
    /// see `durable::layout`) are neither listed nor found: their names are digests and their
    /// sizes tell what a process wrote, so a process under the mount learns nothing of them.
    fn listed(&self, path: &str) -> bool {
        self.engine.class(path).readable()
    }

    /// [`Vfs::listed`] as an error: a hidden entry does not exist (`ENOENT`).
    fn check_listed(&self, path: &str) -> Result<()> {
        if !self.listed(path) {
            return Err(Reason::NotFound.into());
        }
        Ok(())
    }

    /// Refuse to open what the mount never lets a process read (the hidden entries above, in
    /// case a node for one exists anyway).
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

    /// The engine changed `path` behind the kernel's back (a write, delete or restore from the
    /// CLI or MCP): forget what this filesystem and the kernel cached about it, announce the
    /// change to file watchers, and return once the kernel has seen both (so that whoever is
    /// told "written" then finds the name, and a watcher has its event).
    pub fn changed(&self, path: &str) {
        // The node at `path`, and the name the kernel may hold an entry for (positive, or
        // negative: "absent"): the last one, or the first one on the way that the table does
        // not know (a directory the engine just created for the change).
        let (node, parent) = {
            let table = self.table();
            let (mut at, mut entry, mut known) = (ROOT, None, true);
            for name in path.split('/').filter(|c| !c.is_empty()) {
                entry = Some((at, OsString::from(name)));
                match table.child(at, OsStr::new(name)) {
                    Some(child) => at = child,
                    None => {
                        known = false;
                        break;
                    }
                }
            }
            (known.then_some(at).filter(|&ino| ino != ROOT), entry)
        };
        if let Some(ino) = node {
            if let Some(file_node) = self.file_of(ino) {
                let mut state = file_node.lock();
                state.backing = None;
                state.forget_pages();
            }
            self.kernel.forget_node(ino);
        }
        let now = self.engine.stat(path).ok().flatten();
        // A file that is gone keeps the kernel's entry for the announcement's `unlink`, which
        // removes it; if that cannot run, the entry is forgotten after all.
        let deleting = node.is_some() && now.is_none();
        if let Some((dir, name)) = &parent
            && !deleting
        {
            self.kernel.forget_name(*dir, name);
        }
        self.kernel.settle();
        let mut raised = true;
        for (at, what) in self.announcements(path, node.is_some(), now.as_ref()) {
            self.heralds.lock().unwrap_or_else(PoisonError::into_inner).insert(at.clone(), what);
            raised &= self.kernel.announce(&at, what);
            self.heralds.lock().unwrap_or_else(PoisonError::into_inner).remove(&at);
        }
        if deleting
            && !raised
            && let Some((dir, name)) = parent
        {
            self.kernel.forget_name(dir, &name);
            self.kernel.settle();
        }
    }

    /// What to announce of a change at `path` ([`Announce`]), given whether the node table
    /// knew the path and what is there now.
    fn announcements(&self, path: &str, known: bool, now: Option<&Stat>) -> Vec<(String, Announce)> {
        match now.map(|s| s.kind) {
            None => vec![(path.to_string(), Announce::Deleted)],
            Some(FileKind::File) if known => vec![(path.to_string(), Announce::Modified)],
            Some(FileKind::File) => {
                // From the first component the table does not know: directories made on the
                // way, then the file.
                let mut out = Vec::new();
                let (mut at, mut prefix) = (Some(ROOT), String::new());
                for name in path.split('/').filter(|c| !c.is_empty()) {
                    prefix = if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") };
                    at = at.and_then(|dir| self.table().child(dir, OsStr::new(name)));
                    if at.is_some() {
                        continue;
                    }
                    let kind = self.engine.stat(&prefix).ok().flatten().map(|s| s.kind);
                    match kind {
                        Some(FileKind::Dir) => out.push((prefix.clone(), Announce::Dir)),
                        Some(FileKind::File) if prefix == path => out.push((prefix.clone(), Announce::Created)),
                        _ => return Vec::new(),
                    }
                }
                out
            }
            Some(_) => Vec::new(),
        }
    }

    /// The announcement this process is making of `path`, when `caller` is this process.
    pub(crate) fn heralded(&self, path: &str, caller: &Caller) -> Option<Announce> {
        if caller.pid != self.own_pid {
            return None;
        }
        self.heralds.lock().unwrap_or_else(PoisonError::into_inner).get(path).copied()
    }

    /// May the kernel keep `attr` for a while? Not when [`Attr::cacheable`] says no, and not for
    /// anything in the state directory: the engine changes its files behind the kernel's back
    /// all the time (a row appended to `journal.jsonl`, `rejections/latest.json` replaced by a
    /// longer envelope), so the kernel asks each time and never reads a stale size. Files there
    /// are not kept in the page cache across opens either ([`Vfs::open`]).
    pub fn attr_cacheable(&self, attr: &Attr) -> bool {
        attr.cacheable() && !self.in_state_dir(attr.ino)
    }

    /// Is node `ino` the state directory or inside it?
    fn in_state_dir(&self, ino: u64) -> bool {
        self.table().top(ino).is_some_and(|top| top == crate::durable::STATE_DIR)
    }

    /// May the kernel remember that a name in `parent` is absent? Not inside the state
    /// directory, whose files the engine creates behind the kernel's back (rejection
    /// envelopes, objects); everywhere else a name appears through this module, or through
    /// the engine, which says so ([`Vfs::changed`]).
    pub fn absence_cacheable(&self, parent: u64) -> bool {
        self.table().path(parent).is_some_and(|p| !self.engine.class(&p).is_state())
    }

    fn committed(&self) {
        *self.last_commit.lock().unwrap_or_else(PoisonError::into_inner) = Some(SystemTime::now());
    }
}
