//! [`OsDisk`]'s [`Meta`]: the namespace and metadata calls made through the mount, on the real
//! disk. Beside `os.rs` (which implements [`Disk`](super::Disk)) at the top of `durable/`'s seam,
//! over `types.rs` and `sys.rs`.
//!
//! Each acts on a name inside an open directory and never follows a symlink in that last
//! component: `*at` calls with `AT_SYMLINK_NOFOLLOW` where the kernel has them, otherwise the
//! entry is opened with `O_PATH | O_NOFOLLOW` and the call goes through `/proc/self/fd/N`, which
//! names exactly that inode. Linux-only pieces are marked with their macOS equivalents.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::libc;
use nix::sys::stat::{Mode, SFlag};

use super::disk::Meta;
use super::os::OsDisk;
use super::sys;
use super::types::{Dir, File, FileId, FileKind, FsStats, SetTime};

impl Meta for OsDisk {
    fn create_new(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<File> {
        let fd = nix::fcntl::openat(
            dir,
            name,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(perm),
        )?;
        let st = nix::sys::stat::fstat(&fd)?;
        Ok(File::new(fd, FileId { dev: st.st_dev, ino: st.st_ino }))
    }

    fn symlink(&self, target: &OsStr, dir: &Dir, name: &str) -> io::Result<()> {
        Ok(nix::unistd::symlinkat(target, dir, name)?)
    }

    fn mknod(&self, dir: &Dir, name: &str, kind: FileKind, perm: u32, rdev: u64) -> io::Result<()> {
        let kind = match kind {
            FileKind::Fifo => SFlag::S_IFIFO,
            FileKind::Socket => SFlag::S_IFSOCK,
            FileKind::CharDevice => SFlag::S_IFCHR,
            FileKind::BlockDevice => SFlag::S_IFBLK,
            FileKind::File => SFlag::S_IFREG,
            FileKind::Dir | FileKind::Symlink => return Err(io::Error::from(Errno::EINVAL)),
        };
        Ok(nix::sys::stat::mknodat(dir, name, kind, Mode::from_bits_truncate(perm), rdev as libc::dev_t)?)
    }

    fn hard_link(&self, from: &Dir, from_name: &str, to: &Dir, to_name: &str) -> io::Result<()> {
        Ok(nix::unistd::linkat(from, from_name, to, to_name, AtFlags::empty())?)
    }

    fn rmdir(&self, dir: &Dir, name: &str) -> io::Result<()> {
        let removed = nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::RemoveDir);
        dir.forget(name);
        Ok(removed?)
    }

    fn set_perm(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<()> {
        if let Some(changed) = sys::chmod_nofollow(dir.as_fd(), name, perm) {
            dir.forget(name);
            return changed;
        }
        let fd = open_entry(dir, name)?;
        if entry_kind(&fd)? == FileKind::Symlink {
            // Linux has no permission bits on symlinks (lchmod does not exist).
            return Err(io::Error::from(Errno::EOPNOTSUPP));
        }
        let path = proc_path(&fd)?;
        // SAFETY: a valid C string; chmod follows the /proc magic link to the opened inode.
        let rc = unsafe { libc::chmod(path.as_ptr(), perm as libc::mode_t) };
        dir.forget(name);
        if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }

    fn set_owner(&self, dir: &Dir, name: &str, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        let changed = nix::unistd::fchownat(
            dir,
            name,
            uid.map(nix::unistd::Uid::from_raw),
            gid.map(nix::unistd::Gid::from_raw),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        );
        dir.forget(name);
        Ok(changed?)
    }

    fn set_times(&self, dir: &Dir, name: &str, atime: SetTime, mtime: SetTime) -> io::Result<()> {
        let spec = |t: SetTime| match t {
            SetTime::Keep => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
            SetTime::Now => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
            SetTime::At(ns) => {
                libc::timespec { tv_sec: ns.div_euclid(1_000_000_000), tv_nsec: ns.rem_euclid(1_000_000_000) }
            }
        };
        let times = [spec(atime), spec(mtime)];
        let name = CString::new(name).map_err(|_| io::Error::from(Errno::EINVAL))?;
        // SAFETY: valid descriptor, C string and a two-element timespec array.
        let rc = unsafe {
            libc::utimensat(dir.as_fd().as_raw_fd(), name.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW)
        };
        if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }

    fn set_xattr(&self, dir: &Dir, name: &str, attr: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
        let attr = sys::c_name(attr)?;
        let changed = with_entry(dir, name, |at| {
            let (path, value_ptr) = (at.path.as_ptr(), value.as_ptr().cast());
            // SAFETY: valid C strings and buffer.
            let rc = unsafe {
                if at.link {
                    libc::lsetxattr(path, attr.as_ptr(), value_ptr, value.len(), flags)
                } else {
                    libc::setxattr(path, attr.as_ptr(), value_ptr, value.len(), flags)
                }
            };
            if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
        });
        dir.forget(name);
        changed
    }

    fn remove_xattr(&self, dir: &Dir, name: &str, attr: &OsStr) -> io::Result<()> {
        let attr = sys::c_name(attr)?;
        let changed = with_entry(dir, name, |at| {
            // SAFETY: valid C strings.
            let rc = unsafe {
                if at.link {
                    libc::lremovexattr(at.path.as_ptr(), attr.as_ptr())
                } else {
                    libc::removexattr(at.path.as_ptr(), attr.as_ptr())
                }
            };
            if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
        });
        dir.forget(name);
        changed
    }

    fn remove_file_xattr(&self, file: &File, attr: &OsStr) -> io::Result<()> {
        let attr = sys::c_name(attr)?;
        // SAFETY: valid descriptor and C string.
        let rc = unsafe { libc::fremovexattr(file.as_fd().as_raw_fd(), attr.as_ptr()) };
        if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }

    fn get_xattr(&self, dir: &Dir, name: &str, attr: &OsStr) -> io::Result<Vec<u8>> {
        let attr = sys::c_name(attr)?;
        let got = with_entry(dir, name, |at| {
            let path = at.path.as_ptr();
            // SAFETY: size query with a null buffer, then a fill into a buffer of that size.
            sys::read_sized(|ptr, len| unsafe {
                if at.link {
                    libc::lgetxattr(path, attr.as_ptr(), ptr.cast(), len)
                } else {
                    libc::getxattr(path, attr.as_ptr(), ptr.cast(), len)
                }
            })
        });
        match got {
            // A symlink: none that a user can have.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(io::Error::from(Errno::ENODATA)),
            other => other,
        }
    }

    fn file_xattr(&self, file: &File, attr: &OsStr) -> io::Result<Vec<u8>> {
        sys::get_xattr(file.as_fd(), attr)
    }

    fn list_xattrs(&self, dir: &Dir, name: &str) -> io::Result<Vec<OsString>> {
        let list = with_entry(dir, name, |at| {
            let path = at.path.as_ptr();
            // SAFETY: as in get_xattr.
            sys::read_sized(|ptr, len| unsafe {
                if at.link { libc::llistxattr(path, ptr.cast(), len) } else { libc::listxattr(path, ptr.cast(), len) }
            })
        });
        let buf = match list {
            Ok(buf) => buf,
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(sys::xattr_names(&buf))
    }

    fn statfs(&self, dir: &Dir) -> io::Result<FsStats> {
        let st = nix::sys::statvfs::fstatvfs(dir)?;
        Ok(FsStats {
            blocks: st.blocks(),
            blocks_free: st.blocks_free(),
            blocks_available: st.blocks_available(),
            files: st.files(),
            files_free: st.files_free(),
            block_size: st.block_size() as u32,
            fragment_size: st.fragment_size() as u32,
            name_max: st.name_max() as u32,
        })
    }

    fn copy_range(&self, from: &File, to: &File, len: u64) -> io::Result<()> {
        // Holes stay holes: a 1 TiB sparse file with a few bytes is a few bytes to copy.
        for (start, end) in self.data_extents(from, len)? {
            copy_extent(from, to, start, end)?;
        }
        Ok(nix::unistd::ftruncate(to, len as libc::off_t)?)
    }

    fn data_extents(&self, file: &File, len: u64) -> io::Result<Vec<(u64, u64)>> {
        use nix::unistd::{Whence, lseek};
        let mut out = Vec::new();
        let mut at = 0u64;
        while at < len {
            let start = match lseek(file, at as libc::off_t, Whence::SeekData) {
                Ok(start) => start as u64,
                // No data after `at`.
                Err(Errno::ENXIO) => break,
                // A filesystem without SEEK_DATA: everything is data.
                Err(Errno::EINVAL | Errno::EOPNOTSUPP) if out.is_empty() => return Ok(vec![(0, len)]),
                Err(e) => return Err(e.into()),
            };
            if start >= len {
                break;
            }
            let end = match lseek(file, start as libc::off_t, Whence::SeekHole) {
                Ok(end) => (end as u64).min(len),
                Err(Errno::ENXIO) => len,
                Err(e) => return Err(e.into()),
            };
            if end <= start {
                break;
            }
            out.push((start, end));
            at = end;
        }
        Ok(out)
    }
}

/// Copy bytes `start..end` of `from` to the same offsets of `to` (in the kernel where it can).
fn copy_extent(from: &File, to: &File, start: u64, end: u64) -> io::Result<()> {
    let mut done = start;
    while done < end {
        let mut off_in = done as i64;
        let mut off_out = done as i64;
        let want = (end - done).min(1 << 30) as usize;
        match nix::fcntl::copy_file_range(from, Some(&mut off_in), to, Some(&mut off_out), want) {
            Ok(0) => return Err(io::Error::from(Errno::EIO)),
            Ok(n) => done += n as u64,
            Err(Errno::EINTR) => {}
            // Across filesystems on old kernels, or a filesystem without it: copy by hand.
            Err(Errno::EXDEV | Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::EINVAL) => {
                return copy_by_hand(from, to, done, end);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The entry itself, not what a symlink there points to.
fn open_entry(dir: &Dir, name: &str) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::openat(dir, name, OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())?)
}

/// The `/proc` name of an open descriptor: path-based calls on it act on that very inode.
/// (macOS: `fcntl(F_GETPATH)` gives a path, but not a race-free one; use the `f*` calls there.)
fn proc_path(fd: &OwnedFd) -> io::Result<CString> {
    sys::c_name(sys::proc_fd_path(fd.as_fd()).as_os_str())
}

fn entry_kind(fd: &OwnedFd) -> io::Result<FileKind> {
    Ok(FileKind::of_mode(nix::sys::stat::fstat(fd)?.st_mode))
}

/// Where a path-based extended-attribute call acts on an entry.
struct XattrAt {
    path: CString,
    /// The entry is a symlink: `path` is its name under its directory's /proc name and the
    /// call must be the `l*xattr` one, which does not follow it (a path through the symlink's
    /// own /proc name would be followed to its target). Linux allows only `trusted.*` and
    /// `security.*` there, to privileged callers.
    link: bool,
}

/// Run `call` on the /proc path of `name`'s inode (or, for a symlink, on its name under its
/// directory's /proc path, not followed), closing the descriptor afterwards. `.` is the
/// directory itself: its own descriptor's /proc path, with nothing to open (a directory is never
/// a symlink).
fn with_entry<T>(dir: &Dir, name: &str, call: impl FnOnce(&XattrAt) -> io::Result<T>) -> io::Result<T> {
    if name == "." {
        return call(&XattrAt { path: sys::c_name(sys::proc_fd_path(dir.as_fd()).as_os_str())?, link: false });
    }
    let fd = open_entry(dir, name)?;
    let at = if entry_kind(&fd)? == FileKind::Symlink {
        let mut path = sys::proc_fd_path(dir.as_fd()).into_os_string();
        path.push("/");
        path.push(name);
        XattrAt { path: sys::c_name(&path)?, link: true }
    } else {
        XattrAt { path: proc_path(&fd)?, link: false }
    };
    let out = call(&at);
    drop(fd);
    out
}

fn copy_by_hand(from: &File, to: &File, mut done: u64, len: u64) -> io::Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    while done < len {
        let want = buf.len().min((len - done) as usize);
        let n = nix::sys::uio::pread(from, &mut buf[..want], done as libc::off_t)?;
        if n == 0 {
            return Err(io::Error::from(Errno::EIO));
        }
        let mut written = 0;
        while written < n {
            written += nix::sys::uio::pwrite(to, &buf[written..n], (done + written as u64) as libc::off_t)?;
        }
        done += n as u64;
    }
    Ok(())
}
