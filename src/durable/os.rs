//! [`OsDisk`]: the [`Disk`] that talks to the kernel (its [`Meta`](super::Meta) is in `meta.rs`).
//!
//! The top of `durable/`'s seam: it implements the trait of `disk.rs` over the values of
//! `types.rs` with the system calls of `sys.rs`.
//!
//! Every path argument below the root is either resolved by `openat2(RESOLVE_BENEATH)` or is a
//! single component used with an `*at` call on a directory descriptor, with `O_NOFOLLOW` wherever
//! a symlink could be substituted. So no call made here can reach outside the workspace, whatever
//! the names contain and whatever another process renames concurrently.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, RenameFlags};
use nix::libc;
use nix::sys::stat::{FileStat, Mode};

use super::dirs::Kept;
use super::disk::Disk;
use super::sys;
use super::types::{Attrs, Dir, File, FileId, FileKind, Rename, Stat, Temp, temp_name};

/// The production [`Disk`] and [`Meta`](super::Meta).
#[derive(Debug, Default, Clone, Copy)]
pub struct OsDisk;

fn to_stat(st: &FileStat) -> Stat {
    Stat {
        id: FileId { dev: st.st_dev, ino: st.st_ino },
        kind: FileKind::of_mode(st.st_mode),
        perm: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        size: st.st_size as u64,
        nlink: st.st_nlink,
        blocks: st.st_blocks as u64,
        rdev: st.st_rdev,
        atime_ns: st.st_atime * 1_000_000_000 + st.st_atime_nsec,
        mtime_ns: st.st_mtime * 1_000_000_000 + st.st_mtime_nsec,
        ctime_ns: st.st_ctime * 1_000_000_000 + st.st_ctime_nsec,
    }
}

fn file_from(fd: OwnedFd) -> io::Result<File> {
    Ok(file_and_stat(fd)?.0)
}

/// [`file_from`], with the stat it reads.
fn file_and_stat(fd: OwnedFd) -> io::Result<(File, Stat)> {
    let st = nix::sys::stat::fstat(&fd)?;
    Ok((File::new(fd, FileId { dev: st.st_dev, ino: st.st_ino }), to_stat(&st)))
}

/// A temp file just made, as its create made it.
fn temp_from(fd: OwnedFd, name: Option<String>) -> io::Result<Temp> {
    let (file, made) = file_and_stat(fd)?;
    Ok(Temp { file, name, made: Some(made) })
}

/// The canonical root-relative path of `fd`, a directory beneath `base`, as the kernel sees it.
fn rel_path(base: &Dir, fd: &OwnedFd) -> io::Result<String> {
    let base_abs = sys::fd_path(base.as_fd())?;
    let abs = sys::fd_path(fd.as_fd())?;
    let below = abs.strip_prefix(&base_abs).map_err(|_| io::Error::from(Errno::EXDEV))?;
    let below = below.to_str().ok_or_else(|| io::Error::from(Errno::EILSEQ))?;
    Ok(match (base.rel(), below) {
        (rel, "") => rel.to_string(),
        ("", below) => below.to_string(),
        (rel, below) => format!("{rel}/{below}"),
    })
}

/// No `.`, `..` or empty components, not empty.
fn is_plain(rel: &str) -> bool {
    !rel.is_empty() && rel.split('/').all(|c| !matches!(c, "" | "." | ".."))
}

impl Disk for OsDisk {
    fn open_root(&self, path: &Path) -> io::Result<Dir> {
        let fd = nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
        Ok(Dir::keeping(fd))
    }

    fn open_dir(&self, base: &Dir, rel: &str) -> io::Result<Dir> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
        // The base itself (the parent of every top-level name): already open.
        if rel.is_empty() {
            return base.try_clone();
        }
        // A plain path (no `.`, `..` or empty components) that resolves without following any
        // symlink is its own canonical form: no need to ask the kernel for the path.
        // Such a path is also what the root's kept directories are keyed on (see `dirs.rs`).
        if is_plain(rel) {
            let path = base.join(rel);
            let generation = match base.kept().map(|kept| kept.get(&path)) {
                Some(Kept::Hit(fd)) => return Ok(base.below(fd, path)),
                Some(Kept::Miss(generation)) => Some(generation),
                None => None,
            };
            match sys::open_beneath_no_symlinks(base.as_fd(), rel, flags) {
                Ok(fd) => {
                    let dir = base.below(Arc::new(fd), path);
                    if let (Some(kept), Some(generation)) = (base.kept(), generation) {
                        kept.keep(dir.rel().to_string(), dir.shared_fd(), generation);
                    }
                    return Ok(dir);
                }
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {}
                Err(e) => return Err(e),
            }
        }
        let fd = sys::open_beneath(base.as_fd(), rel, flags)?;
        let rel = rel_path(base, &fd)?;
        Ok(base.below(Arc::new(fd), rel))
    }

    fn stat(&self, dir: &Dir, name: &str) -> io::Result<Option<Stat>> {
        match nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(to_stat(&st))),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn file_stat(&self, file: &File) -> io::Result<Stat> {
        Ok(to_stat(&nix::sys::stat::fstat(file)?))
    }

    fn open_read(&self, dir: &Dir, name: &str) -> io::Result<File> {
        // O_NONBLOCK: if a fifo was swapped in after the type check, do not hang on it.
        let fd = nix::fcntl::openat(
            dir,
            name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
            Mode::empty(),
        )?;
        file_from(fd)
    }

    fn read_at(&self, file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        loop {
            match nix::sys::uio::pread(file, buf, offset as libc::off_t) {
                Err(Errno::EINTR) => continue,
                other => return Ok(other?),
            }
        }
    }

    fn read_link(&self, dir: &Dir, name: &str) -> io::Result<OsString> {
        Ok(nix::fcntl::readlinkat(dir, name)?)
    }

    fn list(&self, dir: &Dir) -> io::Result<Vec<(OsString, FileKind)>> {
        let mut handle =
            nix::dir::Dir::openat(dir, ".", OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
        let mut out = Vec::new();
        for entry in handle.iter() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsString::from(OsStr::from_bytes(name));
            let kind = match entry.file_type() {
                Some(nix::dir::Type::File) => FileKind::File,
                Some(nix::dir::Type::Directory) => FileKind::Dir,
                Some(nix::dir::Type::Symlink) => FileKind::Symlink,
                Some(nix::dir::Type::Fifo) => FileKind::Fifo,
                Some(nix::dir::Type::Socket) => FileKind::Socket,
                Some(nix::dir::Type::CharacterDevice) => FileKind::CharDevice,
                Some(nix::dir::Type::BlockDevice) => FileKind::BlockDevice,
                None => match self.stat(dir, &name.to_string_lossy())? {
                    Some(st) => st.kind,
                    None => continue,
                },
            };
            out.push((name, kind));
        }
        Ok(out)
    }

    fn xattrs(&self, file: &File) -> io::Result<Vec<(OsString, Vec<u8>)>> {
        let mut xattrs = Vec::new();
        for name in sys::list_xattrs(file.as_fd())? {
            match sys::get_xattr(file.as_fd(), &name) {
                Ok(value) => xattrs.push((name, value)),
                // Removed in between, or not readable by us: nothing to carry.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EPERM)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(xattrs)
    }

    fn try_lock(&self, file: &File, exclusive: bool) -> io::Result<bool> {
        sys::try_flock(file.as_fd(), exclusive)
    }

    fn mkdir(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<()> {
        Ok(nix::sys::stat::mkdirat(dir, name, Mode::from_bits_truncate(perm))?)
    }

    fn create_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp> {
        if let Some(fd) = sys::open_tmpfile(dir.as_fd(), perm)? {
            return temp_from(fd, None);
        }
        self.create_named_temp(dir, perm)
    }

    fn create_named_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp> {
        let mut flags = sys::TEMP_FLAGS | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
        loop {
            let name = temp_name();
            match nix::fcntl::openat(dir, name.as_str(), flags, Mode::from_bits_truncate(perm)) {
                Ok(fd) => return temp_from(fd, Some(name)),
                Err(Errno::EEXIST) => continue,
                Err(Errno::EPERM) if flags.contains(OFlag::O_NOATIME) => flags.remove(OFlag::O_NOATIME),
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn open_write(&self, dir: &Dir, name: &str, create: bool, perm: u32) -> io::Result<File> {
        let mut flags = OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        if create {
            flags |= OFlag::O_CREAT;
        }
        file_from(nix::fcntl::openat(dir, name, flags, Mode::from_bits_truncate(perm))?)
    }

    fn write_at(&self, file: &File, mut data: &[u8], mut offset: u64) -> io::Result<()> {
        while !data.is_empty() {
            match nix::sys::uio::pwrite(file, data, offset as libc::off_t) {
                Ok(0) => return Err(io::Error::from(Errno::EIO)),
                Ok(n) => {
                    data = &data[n..];
                    offset += n as u64;
                }
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        Ok(nix::unistd::ftruncate(file, len as libc::off_t)?)
    }

    fn set_attrs(&self, file: &File, attrs: &Attrs) -> io::Result<Vec<String>> {
        let mut skipped = Vec::new();
        if attrs.perm.is_none() && attrs.owner.is_none() && attrs.xattrs.is_empty() {
            return Ok(skipped);
        }
        // Only the mode and the owner are compared with what the file has.
        let st = if attrs.perm.is_some() || attrs.owner.is_some() { Some(self.file_stat(file)?) } else { None };
        // Owner first: chown clears setuid/setgid bits, which the chmod then restores.
        let mut chowned = false;
        if let (Some((uid, gid)), Some(st)) = (attrs.owner, &st)
            && (st.uid, st.gid) != (uid, gid)
        {
            let owner = Some(nix::unistd::Uid::from_raw(uid));
            let group = Some(nix::unistd::Gid::from_raw(gid));
            match nix::unistd::fchown(file, owner, group) {
                Ok(()) => chowned = true,
                Err(e) => skipped.push(format!("owner {uid}:{gid} ({e})")),
            }
        }
        if let (Some(perm), Some(st)) = (attrs.perm, &st)
            && (chowned || perm != st.perm)
        {
            nix::sys::stat::fchmod(file, Mode::from_bits_truncate(perm))?;
        }
        for (name, value) in &attrs.xattrs {
            if let Err(e) = sys::set_xattr(file.as_fd(), name, value) {
                skipped.push(format!("xattr {} ({e})", name.to_string_lossy()));
            }
        }
        Ok(skipped)
    }

    fn sync(&self, file: &File) -> io::Result<()> {
        Ok(nix::unistd::fsync(file)?)
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        Ok(nix::unistd::fdatasync(file)?)
    }

    fn sync_dir(&self, dir: &Dir) -> io::Result<()> {
        Ok(nix::unistd::fsync(dir)?)
    }

    fn sync_fs(&self, file: &File) -> io::Result<()> {
        Ok(nix::unistd::syncfs(file)?)
    }

    fn link(&self, file: &File, dir: &Dir, name: &str) -> io::Result<()> {
        sys::link_fd(file.as_fd(), dir.as_fd(), name)
    }

    fn rename(&self, from: &Dir, from_name: &str, to: &Dir, to_name: &str, how: Rename) -> io::Result<()> {
        let flags = match how {
            Rename::Replace => RenameFlags::empty(),
            Rename::NoReplace => RenameFlags::RENAME_NOREPLACE,
            Rename::Exchange => RenameFlags::RENAME_EXCHANGE,
        };
        let renamed = sys::rename(from.as_fd(), from_name, to.as_fd(), to_name, flags);
        from.forget(from_name);
        to.forget(to_name);
        renamed
    }

    fn unlink(&self, dir: &Dir, name: &str) -> io::Result<()> {
        let unlinked = nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::NoRemoveDir);
        dir.forget(name);
        Ok(unlinked?)
    }

    fn start_writeback(&self, file: &File) {
        sys::start_writeback(file.as_fd());
    }

    fn drop_cache(&self, file: &File) {
        sys::drop_cache(file.as_fd());
    }

    fn quiet_reads(&self, file: &File) {
        let flags = nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_GETFL).map(OFlag::from_bits_truncate);
        if let Ok(flags) = flags {
            let _ = nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_SETFL(flags | OFlag::O_NOATIME));
        }
    }

    fn reserve(&self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        sys::reserve(file.as_fd(), offset, len)
    }
}
