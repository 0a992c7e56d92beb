//! `fuser::Filesystem`: each request decoded, handed to [`Vfs`], and answered. Requests that
//! may commit (flush, fsync, release, truncate, rename) run on the commit pool, which owns the
//! reply; everything else is answered on the request thread.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use super::failure::{Call, Failures};
use super::passthrough::{Answer, Passthrough};
use super::pool::Pool;
use super::process::Processes;
use super::{TTL, absent, attr_ttl, file_attr, file_type, no_node};
use crate::durable::SetTime;
use crate::error::Reason;
use crate::vfs::{Attr, Caller, SetAttr, Vfs};

/// The filesystem handed to fuser.
pub(crate) struct Glue {
    pub vfs: Arc<Vfs>,
    /// Where requests that may commit run (they own their reply).
    pub commits: Arc<Pool>,
    pub processes: Processes,
    /// Where failed requests are logged and counted (and the errno of a blocked write).
    pub failures: Arc<Failures>,
    /// Kernel passthrough for files written in place (asked for at `init` when `true`).
    pub want_passthrough: bool,
    pub passthrough: Arc<Passthrough>,
    /// The kernel keeps shared mappings of direct-I/O files coherent (set at `init`, see
    /// [`Glue::direct_draft`]).
    pub direct_drafts: bool,
}

/// An open's reply with the handle and flags it answers.
struct Open(ReplyOpen, FileHandle, FopenFlags);

impl Answer for Open {
    fn register(&self, file: &crate::durable::File) -> std::io::Result<fuser::BackingId> {
        self.0.open_backing(file)
    }
    fn passthrough(self, backing: &fuser::BackingId) {
        // The kernel takes only FOPEN_NOFLUSH (and direct-I/O flags) beside passthrough: any
        // other flag fails the open with EIO. The pages are the backing file's own anyway.
        self.0.opened_passthrough(self.1, self.2 & FopenFlags::FOPEN_NOFLUSH, backing)
    }
    fn plain(self) {
        self.0.opened(self.1, self.2)
    }
}

/// A create's reply with what it answers, and how long the kernel may keep the new file's
/// attributes. They are its draft's until its first commit, and they are kept as any file's:
/// a write through the mount makes the kernel ask again (it drops size and times itself), and
/// every commit drops them ([`crate::vfs::Kernel::forget_attr`], before the committing
/// close returns). The one thing a stat can then see stale is a file created and closed with
/// nothing written, whose commit runs at its release, which the kernel does not wait for: its
/// ctime, until that commit drops it (the bytes, none, the size, the mode and the inode number
/// are the committed version's). A program that `fstat`s what it just created (Python's
/// `open`, `cp`) is answered by the kernel, one round trip fewer per file.
///
/// A created file written through its draft is opened for direct I/O: see [`Glue::direct_draft`].
struct Create(ReplyCreate, Attr, FileHandle, Duration, FopenFlags);

impl Answer for Create {
    fn register(&self, file: &crate::durable::File) -> std::io::Result<fuser::BackingId> {
        self.0.open_backing(file)
    }
    fn passthrough(self, backing: &fuser::BackingId) {
        let Create(reply, attr, fh, ttl, _) = self;
        let (node, attr) = (INodeNo(attr.ino), file_attr(&attr));
        reply.created_passthrough_node(node, &ttl, &attr, Generation(0), fh, FopenFlags::empty(), backing)
    }
    fn plain(self) {
        let Create(reply, attr, fh, ttl, flags) = self;
        reply.created_node(INodeNo(attr.ino), &ttl, &file_attr(&attr), Generation(0), fh, flags)
    }
}

/// An entry reply: the attributes with their TTL, the name with the entry TTL.
fn entry(vfs: &Vfs, reply: ReplyEntry, attr: &Attr) {
    reply.entry_node(INodeNo(attr.ino), &attr_ttl(vfs, attr), &TTL, &file_attr(attr), Generation(0))
}

fn set_time(t: Option<TimeOrNow>) -> Option<SetTime> {
    t.map(|t| match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(at) => SetTime::At(match at.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i64,
            Err(e) => -(e.duration().as_nanos() as i64),
        }),
    })
}

impl Glue {
    /// The span and failure path of request `req` for operation `op` on node `ino`.
    fn call(&self, op: &'static str, req: &Request, ino: u64, fh: Option<u64>) -> Call {
        Call::new(&self.failures, op, req.unique().0, ino, fh)
    }

    fn caller(&self, req: &Request) -> Caller {
        self.processes.caller(req.pid(), req.uid(), req.gid())
    }

    /// The caller of a request that may set the setgid bit (`setgid`: a chmod asking for it,
    /// an access ACL), with its supplementary groups, which `Caller::may_set_setgid` needs:
    /// read from `/proc` only for those requests, and not for root.
    fn caller_for_setgid(&self, req: &Request, setgid: bool) -> Caller {
        let mut caller = self.caller(req);
        if setgid && caller.uid != 0 {
            caller.groups = crate::process::groups(req.pid());
        }
        caller
    }

    /// The caller of a request that creates an entry, with the umask the kernel left to us
    /// (`FUSE_DONT_MASK`).
    fn creator(&self, req: &Request, umask: u32) -> Caller {
        Caller { umask, ..self.caller(req) }
    }

    /// Whether handle `fh` (a created file's, or a rewrite's: an `O_TRUNC` open) is opened for
    /// direct I/O (`FOPEN_DIRECT_IO`): when it writes through a draft and the kernel keeps
    /// shared mappings of such files coherent (`FUSE_DIRECT_IO_ALLOW_MMAP`, Linux 6.6).
    ///
    /// The kernel then does not ask for `security.capability` before each write
    /// (`file_remove_privs`: one `GETXATTR` round trip per written file), and flags the write
    /// instead (`FUSE_WRITE_KILL_SUIDGID`, for a writer without `CAP_FSETID`), which
    /// [`Vfs::drop_privileges_for_write`] honours. A direct write drops the pages other openers
    /// cached of its range, so they read it from the daemon, which serves the draft to every
    /// handle of the node until it is committed: a reader sees a rewrite as on a plain
    /// filesystem (`tests/mount.rs`). Other writable opens keep the page cache (but a
    /// read-guarded file's: [`crate::vfs::Opened::direct_io`]): a handle that reads back what
    /// it wrote (a database, an editor's swap file) would otherwise send every read here.
    fn direct_draft(&self, fh: u64) -> bool {
        self.direct_drafts && self.vfs.draft_handle_node(fh).is_some()
    }

    /// Run `job` on the commit pool, in the request's span, with what it needs to answer.
    fn later(&self, call: Call, job: impl FnOnce(&Vfs, &Call) + Send + 'static) {
        let vfs = self.vfs.clone();
        self.commits.run(move || call.in_span(|| job(&vfs, &call)));
    }

    /// Run `job` here when it is `quick` (no hand-off to the pool: two thread switches fewer
    /// per close), else on the commit pool.
    fn now_or_later(&self, quick: bool, call: Call, job: impl FnOnce(&Vfs, &Call) + Send + 'static) {
        if quick { call.in_span(|| job(&self.vfs, &call)) } else { self.later(call, job) }
    }
}

impl Filesystem for Glue {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // O_TRUNC arrives with the open (one empty draft instead of a copy then a truncate);
        // lookups and listings of one directory may run in parallel; symlinks are cached;
        // listings carry their entries' attributes when the kernel expects a stat of each
        // (`ls -l`, `find`, git's untracked scan).
        let wanted = InitFlags::FUSE_ATOMIC_O_TRUNC
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_CACHE_SYMLINKS
            | InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            // The umask is applied by rwfs, which knows whether a default ACL rules it out;
            // the kernel checks access with the entries' ACLs (read from the backing tree), not
            // only their modes.
            | InitFlags::FUSE_DONT_MASK
            | InitFlags::FUSE_POSIX_ACL;
        let _ = config.add_capabilities(wanted & config.capabilities());
        let _ = config.set_max_write(1 << 20);
        // The kernel does the I/O of files written in place (see `passthrough.rs`). Stack depth
        // 1: the backing tree is a plain filesystem, and this mount may sit under an overlay.
        if self.want_passthrough
            && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
            && config.set_max_stack_depth(1).is_ok()
        {
            self.passthrough.enable();
        }
        self.direct_drafts = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP).is_ok();
        Ok(())
    }

    fn destroy(&mut self) {
        self.vfs.settle_drafts();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let call = self.call("lookup", req, parent.0, None);
        let _in = call.enter();
        let caller = self.caller(req);
        match self.vfs.lookup_as(parent.0, name, &caller) {
            Ok(attr) => entry(&self.vfs, reply, &attr),
            // Absent, and the kernel may remember it: `lstat` then `open(O_CREAT)` (git
            // checkout), or a build probing for files, asks once.
            Err(e) if *e.reason() == Reason::NotFound && self.vfs.absence_cacheable_for(parent.0, name, &caller) => {
                reply.entry(&TTL, &absent(), Generation(0))
            }
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        let call = self.call("forget", req, ino.0, None);
        let _in = call.enter();
        self.vfs.forget(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let call = self.call("getattr", req, ino.0, fh.map(|f| f.0));
        let _in = call.enter();
        match self.vfs.getattr(ino.0) {
            Ok(attr) => reply.attr(&attr_ttl(&self.vfs, &attr), &file_attr(&attr)),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let call = self.call("setattr", req, ino.0, fh.map(|f| f.0));
        let (atime, mtime, by_path) = (set_time(atime), set_time(mtime), fh.is_none());
        let set = SetAttr { mode, uid, gid, size, atime, mtime, by_path };
        let caller = self.caller_for_setgid(req, mode.is_some_and(|m| m & crate::vfs::SETGID != 0));
        let job = move |vfs: &Vfs, call: &Call| match vfs.setattr(ino.0, set, &caller) {
            Ok(attr) => reply.attr(&attr_ttl(vfs, &attr), &file_attr(&attr)),
            Err(e) => reply.error(call.fail(&e)),
        };
        // A truncation commits when no handle is open: off the request thread.
        if size.is_some() { self.later(call, job) } else { call.in_span(|| job(&self.vfs, &call)) }
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let call = self.call("readlink", req, ino.0, None);
        let _in = call.enter();
        match self.vfs.readlink(ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let call = self.call("mknod", req, parent.0, None);
        let _in = call.enter();
        match self.vfs.mknod(parent.0, name, mode, rdev, &self.creator(req, umask)) {
            Ok(attr) => entry(&self.vfs, reply, &attr),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let call = self.call("mkdir", req, parent.0, None);
        let _in = call.enter();
        match self.vfs.mkdir(parent.0, name, mode, &self.creator(req, umask)) {
            Ok(attr) => entry(&self.vfs, reply, &attr),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let call = self.call("unlink", req, parent.0, None);
        let _in = call.enter();
        match self.vfs.unlink(parent.0, name, &self.caller(req)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let call = self.call("rmdir", req, parent.0, None);
        let _in = call.enter();
        match self.vfs.rmdir(parent.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let call = self.call("symlink", req, parent.0, None);
        let _in = call.enter();
        match self.vfs.symlink(parent.0, link_name, target.as_os_str(), &self.caller(req)) {
            Ok(attr) => entry(&self.vfs, reply, &attr),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let call = self.call("rename", req, parent.0, None);
        if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        }
        let caller = self.caller(req);
        let (name, newname) = (name.to_os_string(), newname.to_os_string());
        // A rename may commit a pending file first and syncs directories: off the request thread.
        self.later(call, move |vfs, call| {
            match vfs.rename(parent.0, &name, newparent.0, &newname, flags.bits(), &caller) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(call.fail(&e)),
            }
        });
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let call = self.call("link", req, ino.0, None);
        let _in = call.enter();
        match self.vfs.link(ino.0, newparent.0, newname, &self.caller(req)) {
            Ok(attr) => entry(&self.vfs, reply, &attr),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let call = self.call("open", req, ino.0, None);
        let _in = call.enter();
        // An O_TRUNC open of an existing file may start a draft: cheap enough for this thread.
        let truncates = flags.0 & nix::libc::O_TRUNC != 0;
        match self.vfs.open(ino.0, flags.0, &self.caller(req)) {
            Ok(opened) => {
                let mut flags = FopenFlags::empty();
                flags.set(FopenFlags::FOPEN_KEEP_CACHE, opened.keep_cache);
                flags.set(FopenFlags::FOPEN_NOFLUSH, !opened.flush_at_close);
                flags.set(FopenFlags::FOPEN_DIRECT_IO, opened.direct_io || (truncates && self.direct_draft(opened.fh)));
                self.passthrough.answer(&self.vfs, opened.fh, Open(reply, FileHandle(opened.fh), flags))
            }
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let call = self.call("read", req, ino.0, Some(fh.0));
        let _in = call.enter();
        self.passthrough.counts().reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.vfs.read(fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let call = self.call("write", req, ino.0, Some(fh.0));
        let _in = call.enter();
        self.passthrough.counts().writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let caller = self.caller(req);
        if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID)
            && let Err(e) = self.vfs.drop_privileges_for_write(fh.0, &caller)
        {
            return reply.error(call.fail(&e));
        }
        match self.vfs.write(fh.0, offset, data, &caller) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn flush(&self, req: &Request, ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        let call = self.call("flush", req, ino.0, Some(fh.0));
        // Most closes are readers' (a build, git): nothing to commit, no commit thread; a
        // writer's close runs here too when its commit is quick (`Vfs::flushes_quickly`).
        let ino = match self.vfs.flush_target(fh.0, false) {
            Ok(Some(ino)) => ino,
            Ok(None) => return reply.ok(),
            Err(e) => return reply.error(call.fail(&e)),
        };
        let caller = self.caller(req);
        let quick = self.vfs.flushes_quickly(ino);
        self.now_or_later(quick, call, move |vfs, call| match vfs.flush_file(ino, false, &caller) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(call.fail(&e)),
        });
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let call = self.call("release", req, ino.0, Some(fh.0));
        let caller = self.caller(req);
        // The handle goes now (a stat that overtakes the commit waits for it), the last close
        // on the pool.
        self.passthrough.release(fh.0);
        let closing = self.vfs.release_handle(fh.0);
        let quick = closing.as_ref().is_none_or(|closing| self.vfs.finishes_quickly(closing));
        self.now_or_later(quick, call, move |vfs, _| {
            if let Some(closing) = closing {
                vfs.finish_release(closing, &caller);
            }
            reply.ok();
        });
    }

    fn fsync(&self, req: &Request, ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let call = self.call("fsync", req, ino.0, Some(fh.0));
        let caller = self.caller(req);
        self.later(call, move |vfs, call| match vfs.flush(fh.0, true, &caller) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(call.fail(&e)),
        });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let call = self.call("opendir", req, ino.0, None);
        let _in = call.enter();
        match self.vfs.opendir(ino.0) {
            Ok(fh) => {
                let mut flags = FopenFlags::empty();
                if self.vfs.listing_cacheable(ino.0) {
                    flags |= FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE;
                }
                reply.opened(FileHandle(fh), flags)
            }
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn readdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let call = self.call("readdir", req, ino.0, Some(fh.0));
        let _in = call.enter();
        let filled =
            self.vfs.readdir(fh.0, offset, |e, next| reply.add(INodeNo(e.ino), next, file_type(e.kind), &e.name));
        match filled {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn readdirplus(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectoryPlus) {
        let call = self.call("readdirplus", req, ino.0, Some(fh.0));
        let _in = call.enter();
        let filled = self.vfs.readdirplus(fh.0, offset, |e, attr, next| match attr {
            Some(attr) => {
                reply.add(INodeNo(attr.ino), next, &e.name, &attr_ttl(&self.vfs, attr), &file_attr(attr), Generation(0))
            }
            // Node 0: the name only, no entry for the kernel to keep (and no lookup counted).
            None => reply.add(INodeNo(0), next, &e.name, &Duration::ZERO, &no_node(file_type(e.kind)), Generation(0)),
        });
        match filled {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn releasedir(&self, req: &Request, ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        let call = self.call("releasedir", req, ino.0, Some(fh.0));
        let _in = call.enter();
        self.vfs.release(fh.0, &self.caller(req));
        reply.ok();
    }

    fn fsyncdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let call = self.call("fsyncdir", req, ino.0, Some(fh.0));
        let _in = call.enter();
        // Every namespace change through the mount is already durable when it returns.
        reply.ok();
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let call = self.call("statfs", req, ino.0, None);
        let _in = call.enter();
        match self.vfs.statfs() {
            Ok(s) => reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_available,
                s.files,
                s.files_free,
                s.block_size,
                s.name_max,
                s.fragment_size,
            ),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let call = self.call("setxattr", req, ino.0, None);
        let _in = call.enter();
        let caller = self.caller_for_setgid(req, name == crate::engine::ACL_ACCESS);
        match self.vfs.setxattr(ino.0, name, value, flags, &caller) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let call = self.call("getxattr", req, ino.0, None);
        let _in = call.enter();
        match self.vfs.getxattr(ino.0, name) {
            Ok(value) => sized(reply, size, &value),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let call = self.call("listxattr", req, ino.0, None);
        let _in = call.enter();
        match self.vfs.listxattr(ino.0) {
            Ok(list) => sized(reply, size, &list),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let call = self.call("removexattr", req, ino.0, None);
        let _in = call.enter();
        match self.vfs.removexattr(ino.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let call = self.call("access", req, ino.0, None);
        let _in = call.enter();
        // default_permissions: the kernel checks the mode bits; only read-only is ours to say.
        if self.vfs.read_only() && mask.contains(AccessFlags::W_OK) {
            return reply.error(Errno::EROFS);
        }
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let call = self.call("create", req, parent.0, None);
        let _in = call.enter();
        match self.vfs.create(parent.0, name, mode, flags, &self.creator(req, umask)) {
            Ok((attr, fh)) => {
                let ttl = attr_ttl(&self.vfs, &attr);
                let mut flags = FopenFlags::empty();
                flags.set(FopenFlags::FOPEN_DIRECT_IO, self.direct_draft(fh));
                self.passthrough.answer(&self.vfs, fh, Create(reply, attr, FileHandle(fh), ttl, flags))
            }
            Err(e) => reply.error(call.fail(&e)),
        }
    }

    /// rwfs implements no ioctl, and a file is not a terminal: Python's `open()` asks
    /// `isatty()` (`TCGETS`) of every file it opens, so this is answered at once and quietly
    /// (fuser's default logs a warning for each and answers `ENOSYS`, which the kernel turns
    /// into `ENOTTY` anyway).
    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        let call = self.call("ioctl", req, ino.0, Some(fh.0));
        let _in = call.enter();
        reply.error(Errno::ENOTTY);
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let call = self.call("fallocate", req, ino.0, Some(fh.0));
        let _in = call.enter();
        match self.vfs.fallocate(fh.0, offset, length, mode, &self.caller(req)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(call.fail(&e)),
        }
    }
}

/// An xattr reply: the size when asked for it, else the value or `ERANGE`.
fn sized(reply: ReplyXattr, size: u32, value: &[u8]) {
    if size == 0 {
        reply.size(value.len() as u32);
    } else if value.len() > size as usize {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(value);
    }
}
