//! `fuser::Filesystem`: each request decoded, handed to [`Fs`], and answered. Commits (flush,
//! fsync, release, truncate) run on the commit pool, which owns the reply; everything else is
//! answered on the request thread.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use nix::libc;

use super::files::Caller;
use super::names::SetAttr;
use super::{Fs, TTL, absent, attr_ttl, errno};
use crate::durable::SetTime;
use crate::error::{Error, Reason};

/// The filesystem handed to fuser.
pub(crate) struct Glue(pub Arc<Fs>);

fn caller(req: &Request) -> Caller {
    Caller { pid: req.pid(), uid: req.uid(), gid: req.gid() }
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
    fn err(&self, e: &Error) -> Errno {
        if e.kind() != crate::error::ErrorKind::StalePrecondition || e.raw_os_error().is_some() {
            tracing::debug!(error = %e, "request failed");
        }
        errno(e, self.0.blocked)
    }
}

impl Filesystem for Glue {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // O_TRUNC arrives with the open (one empty draft instead of a copy then a truncate);
        // lookups and listings of one directory may run in parallel; symlinks are cached.
        let wanted = InitFlags::FUSE_ATOMIC_O_TRUNC | InitFlags::FUSE_PARALLEL_DIROPS | InitFlags::FUSE_CACHE_SYMLINKS;
        let _ = config.add_capabilities(wanted & config.capabilities());
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn destroy(&mut self) {
        self.0.settle_drafts();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.0.lookup(parent.0, name) {
            Ok(attr) => reply.entry_with_ttls(&attr_ttl(&attr), &TTL, &attr, Generation(0)),
            // Absent, and the kernel may remember it: `lstat` then `open(O_CREAT)` (git
            // checkout), or a build probing for files, asks once.
            Err(e) if *e.reason() == Reason::NotFound && self.0.absence_cacheable(parent.0) => {
                reply.entry(&TTL, &absent(), Generation(0))
            }
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.0.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.0.getattr(ino.0) {
            Ok(attr) => reply.attr(&attr_ttl(&attr), &attr),
            Err(e) => reply.error(self.err(&e)),
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
        let (atime, mtime, by_path) = (set_time(atime), set_time(mtime), fh.is_none());
        let set = SetAttr { mode, uid, gid, size, atime, mtime, by_path };
        let (fs, caller) = (self.0.clone(), caller(req));
        let blocked = self.0.blocked;
        // A truncation commits when no handle is open: off the request thread.
        let job = move || match fs.setattr(ino.0, set, caller) {
            Ok(attr) => reply.attr(&attr_ttl(&attr), &attr),
            Err(e) => reply.error(errno(&e, blocked)),
        };
        if size.is_some() { self.0.commits.run(job) } else { job() }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.0.readlink(ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        match self.0.mknod(parent.0, name, mode, rdev, caller(req)) {
            Ok(attr) => reply.entry_with_ttls(&attr_ttl(&attr), &TTL, &attr, Generation(0)),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        match self.0.mkdir(parent.0, name, mode, caller(req)) {
            Ok(attr) => reply.entry_with_ttls(&attr_ttl(&attr), &TTL, &attr, Generation(0)),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.0.unlink(parent.0, name, caller(req)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.0.rmdir(parent.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        match self.0.symlink(parent.0, link_name, target.as_os_str(), caller(req)) {
            Ok(attr) => reply.entry_with_ttls(&attr_ttl(&attr), &TTL, &attr, Generation(0)),
            Err(e) => reply.error(self.err(&e)),
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
        if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        }
        let (fs, caller) = (self.0.clone(), caller(req));
        let (name, newname) = (name.to_os_string(), newname.to_os_string());
        // A rename may commit a pending file first and syncs directories: off the request thread.
        self.0.commits.run(move || match fs.rename(parent.0, &name, newparent.0, &newname, flags.bits(), caller) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e, fs.blocked)),
        });
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        match self.0.link(ino.0, newparent.0, newname, caller(req)) {
            Ok(attr) => reply.entry_with_ttls(&attr_ttl(&attr), &TTL, &attr, Generation(0)),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let (fs, caller) = (self.0.clone(), caller(req));
        // An O_TRUNC open of an existing file may start a draft: cheap, but keep it uniform.
        match fs.open(ino.0, flags.0, caller) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.0.read(fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.0.write(fh.0, offset, data, caller(req)) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn flush(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // Most closes are readers' (a build, git): nothing to commit, no commit thread.
        let ino = match self.0.flush_target(fh.0, false) {
            Ok(Some(ino)) => ino,
            Ok(None) => return reply.ok(),
            Err(e) => return reply.error(self.err(&e)),
        };
        let (fs, caller) = (self.0.clone(), caller(req));
        self.0.commits.run(move || match fs.flush_file(ino, false, caller) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e, fs.blocked)),
        });
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let (fs, caller) = (self.0.clone(), caller(req));
        // The handle goes now (a stat that overtakes the commit waits for it), the last close
        // on the pool.
        let closing = self.0.release_handle(fh.0);
        self.0.commits.run(move || {
            if let Some(closing) = closing {
                fs.finish_release(closing, caller);
            }
            reply.ok();
        });
    }

    fn fsync(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let (fs, caller) = (self.0.clone(), caller(req));
        self.0.commits.run(move || match fs.flush(fh.0, true, caller) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e, fs.blocked)),
        });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.0.opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let filled = self.0.readdir(fh.0, offset, |ino, next, kind, name| reply.add(INodeNo(ino), next, kind, name));
        match filled {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn releasedir(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.0.release(fh.0, caller(req));
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // Every namespace change through the mount is already durable when it returns.
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.0.statfs() {
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
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        match self.0.setxattr(ino.0, name, value, flags) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.0.getxattr(ino.0, name) {
            Ok(value) => sized(reply, size, &value),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.0.listxattr(ino.0) {
            Ok(list) => sized(reply, size, &list),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.0.removexattr(ino.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        // default_permissions: the kernel checks the mode bits; only read-only is ours to say.
        if self.0.read_only && mask.contains(AccessFlags::W_OK) {
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
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.0.create(parent.0, name, mode, flags, caller(req)) {
            // The new file's attributes are its draft's until its first commit (at a close after
            // a write, an fsync, or its last close, which the kernel does not wait for): no TTL,
            // so a stat after close() asks, and waits for that commit.
            Ok((attr, fh)) => reply.created(&Duration::ZERO, &attr, Generation(0), FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(self.err(&e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        // posix_fallocate falls back to writing the range, which goes through the draft.
        reply.error(Errno::from_i32(libc::EOPNOTSUPP));
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
