//! Linux-only system calls, in one place.
//!
//! The bottom of `durable/`: descriptors and plain values in, bytes and `io::Error`s out. It uses
//! none of rwfs's own types, so everything else in the module may use it and it uses nothing.
//!
//! Everything here has a named macOS equivalent so that a port is a contained change to this
//! file (macFUSE mounts use the same engine):
//!
//! | Linux | macOS |
//! |---|---|
//! | `openat2(RESOLVE_BENEATH \| RESOLVE_NO_MAGICLINKS)` | `openat(O_RESOLVE_BENEATH)` (macOS 14+; component walk with `O_NOFOLLOW_ANY` before) |
//! | `O_TMPFILE` + `linkat(/proc/self/fd/N)` | none: named temp file with `O_CREAT \| O_EXCL` (the fallback below) |
//! | `renameat2(RENAME_NOREPLACE / RENAME_EXCHANGE)` | `renameatx_np(RENAME_EXCL / RENAME_SWAP)` |
//! | `readlink(/proc/self/fd/N)` | `fcntl(F_GETPATH)` |
//! | `sync_file_range(SYNC_FILE_RANGE_WRITE)` | none (no-op) |
//! | `posix_fadvise(POSIX_FADV_DONTNEED)` | none (no-op; `F_NOCACHE` only affects later I/O) |
//! | `fdatasync` / `fsync` | `fcntl(F_FULLFSYNC)`: plain `fsync` on macOS does not flush the drive cache |
//! | `flistxattr` / `fgetxattr` / `fsetxattr` | same names with an extra `position`/`options` argument |

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, RenameFlags, ResolveFlag};
use nix::libc;
use nix::sys::stat::Mode;

/// Open `rel` beneath `root`: `..`, absolute paths and symlinks that would leave `root` fail
/// with `EXDEV`; `/proc` magic links are refused (`ELOOP`).
pub fn open_beneath(root: BorrowedFd<'_>, rel: &str, flags: OFlag) -> io::Result<OwnedFd> {
    openat2(root, rel, flags, ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS)
}

/// [`open_beneath`] refusing every symlink on the way (`ELOOP`).
pub fn open_beneath_no_symlinks(root: BorrowedFd<'_>, rel: &str, flags: OFlag) -> io::Result<OwnedFd> {
    openat2(root, rel, flags, ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS)
}

fn openat2(root: BorrowedFd<'_>, rel: &str, flags: OFlag, resolve: ResolveFlag) -> io::Result<OwnedFd> {
    let how = OpenHow::new().flags(flags | OFlag::O_CLOEXEC).resolve(resolve);
    let rel = if rel.is_empty() { "." } else { rel };
    // EAGAIN: a rename anywhere on the system raced with a `..` component, so the kernel could
    // not prove it stayed beneath; it asks the caller to retry.
    for _ in 0..OPENAT2_RETRIES {
        match nix::fcntl::openat2(root, rel, how) {
            Err(Errno::EAGAIN) => continue,
            other => return Ok(other?),
        }
    }
    Ok(nix::fcntl::openat2(root, rel, how)?)
}

const OPENAT2_RETRIES: usize = 64;

/// How a temp file rwfs makes is opened: read and written by rwfs only, it becomes a version
/// whose access time is the writer's business, so rwfs's own reads (hashing at commit) never
/// touch it: `O_NOATIME` from the start, rather than an `fcntl` pair after. (`O_NOATIME` needs
/// the file's owner or `CAP_FOWNER`, which rwfs is for a file it just made; `EPERM` is retried
/// without it.)
pub const TEMP_FLAGS: OFlag = OFlag::O_RDWR.union(OFlag::O_CLOEXEC).union(OFlag::O_NOATIME);

/// An anonymous file in `dir`, or `None` where the filesystem has no `O_TMPFILE`. Opened
/// `O_NOATIME` (see [`TEMP_FLAGS`]).
pub fn open_tmpfile(dir: BorrowedFd<'_>, perm: u32) -> io::Result<Option<OwnedFd>> {
    let open = |flags| nix::fcntl::openat(dir, ".", OFlag::O_TMPFILE | flags, Mode::from_bits_truncate(perm));
    match open(TEMP_FLAGS).or_else(|e| if e == Errno::EPERM { open(TEMP_FLAGS - OFlag::O_NOATIME) } else { Err(e) }) {
        Ok(fd) => Ok(Some(fd)),
        // EOPNOTSUPP: the filesystem lacks it; EISDIR/EINVAL: the kernel lacks it.
        Err(Errno::EOPNOTSUPP | Errno::EISDIR | Errno::EINVAL) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Give the file behind `fd` (an `O_TMPFILE` inode) the name `name` in `dir`.
pub fn link_fd(fd: BorrowedFd<'_>, dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc form works for every user.
    let proc = proc_fd_path(fd);
    nix::unistd::linkat(nix::fcntl::AT_FDCWD, proc.as_path(), dir, name, nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW)?;
    Ok(())
}

/// `renameat2` with `flags` (`RENAME_NOREPLACE`, `RENAME_EXCHANGE` or none).
pub fn rename(
    from_dir: BorrowedFd<'_>,
    from: &str,
    to_dir: BorrowedFd<'_>,
    to: &str,
    flags: RenameFlags,
) -> io::Result<()> {
    nix::fcntl::renameat2(from_dir, from, to_dir, to, flags)?;
    Ok(())
}

/// Whether the kernel was found without `fchmodat2` (Linux before 6.6): not asked again.
static NO_FCHMODAT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `chmod` of `name` in `dir` without following a symlink there, in one call: `fchmodat2` with
/// `AT_SYMLINK_NOFOLLOW` (Linux 6.6; a symlink gives `EOPNOTSUPP`). `None` where the kernel
/// lacks it, or refused it (`EPERM`): the caller goes through the entry's `O_PATH` descriptor
/// instead. (macOS:
/// `fchmodat(AT_SYMLINK_NOFOLLOW)`.)
pub fn chmod_nofollow(dir: BorrowedFd<'_>, name: &str, perm: u32) -> Option<io::Result<()>> {
    use std::sync::atomic::Ordering;
    if NO_FCHMODAT2.load(Ordering::Relaxed) {
        return None;
    }
    let Ok(name) = CString::new(name) else { return Some(Err(io::Error::from(Errno::EINVAL))) };
    // SAFETY: a valid descriptor and C string; the syscall takes no pointer it keeps.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            dir.as_raw_fd(),
            name.as_ptr(),
            perm as libc::mode_t,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        return Some(Ok(()));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSYS) => {
            NO_FCHMODAT2.store(true, Ordering::Relaxed);
            None
        }
        // Refused: a chmod its caller may not make, or a seccomp filter that does not know the
        // call (Docker's default answers `EPERM` to what it does not list). The caller's route
        // answers which, for this call.
        Some(libc::EPERM) => None,
        _ => Some(Err(e)),
    }
}

/// `/proc/self/fd/N`: a name for the open descriptor itself (macOS: `/dev/fd/N`).
pub fn proc_fd_path(fd: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The absolute path the kernel knows for an open descriptor.
pub fn fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    std::fs::read_link(proc_fd_path(fd))
}

/// Ask the kernel to start writing back `fd`'s dirty pages without waiting.
pub fn start_writeback(fd: BorrowedFd<'_>) {
    // SAFETY: plain syscall on a valid descriptor; failure only loses the hint.
    unsafe {
        libc::sync_file_range(fd.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
    }
}

/// Allocate `len` bytes of `fd` from `offset` without changing its size
/// (`fallocate(FALLOC_FL_KEEP_SIZE)`; macOS: `fcntl(F_PREALLOCATE)`), so later writes there
/// cannot fail for lack of space. A filesystem that cannot preallocate is not an error.
pub fn reserve(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    };
    match nix::fcntl::fallocate(fd, nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE, offset, len) {
        Ok(()) | Err(nix::errno::Errno::EOPNOTSUPP) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Drop `fd`'s clean pages from the page cache (a hint; dirty pages are unaffected).
pub fn drop_cache(fd: BorrowedFd<'_>) {
    // Failure only loses the hint.
    let _ = nix::fcntl::posix_fadvise(fd, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED);
}

/// Non-blocking `flock`; `Ok(false)` when another open file description holds a conflicting one.
pub fn try_flock(fd: BorrowedFd<'_>, exclusive: bool) -> io::Result<bool> {
    let how = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH };
    // SAFETY: plain syscall on a valid descriptor.
    let rc = unsafe { libc::flock(fd.as_raw_fd(), how | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) { Ok(false) } else { Err(err) }
}

/// Names of the extended attributes of `fd`.
pub fn list_xattrs(fd: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let raw = fd.as_raw_fd();
    // SAFETY: size query with a null buffer, then a fill into a buffer of that size.
    let buf = match read_sized(|ptr, len| unsafe { libc::flistxattr(raw, ptr.cast(), len) }) {
        Ok(buf) => buf,
        // A filesystem without extended attributes has none to carry over.
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(xattr_names(&buf))
}

/// The names in a `listxattr` buffer (each NUL-terminated).
pub(super) fn xattr_names(buf: &[u8]) -> Vec<OsString> {
    buf.split(|&b| b == 0).filter(|n| !n.is_empty()).map(|n| OsString::from_vec(n.to_vec())).collect()
}

pub fn get_xattr(fd: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<u8>> {
    let raw = fd.as_raw_fd();
    let name = c_name(name)?;
    // SAFETY: as in list_xattrs; `name` is a valid C string for the duration of the calls.
    read_sized(|ptr, len| unsafe { libc::fgetxattr(raw, name.as_ptr(), ptr.cast(), len) })
}

pub fn set_xattr(fd: BorrowedFd<'_>, name: &OsStr, value: &[u8]) -> io::Result<()> {
    let name = c_name(name)?;
    // SAFETY: valid descriptor, C string and buffer.
    let rc = unsafe { libc::fsetxattr(fd.as_raw_fd(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// `name` as a C string; `EINVAL` if it holds a NUL.
pub(super) fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The size-query-then-fill dance of the xattr calls, retried if the value grows in between.
pub(super) fn read_sized(call: impl Fn(*mut u8, usize) -> isize) -> io::Result<Vec<u8>> {
    for _ in 0..8 {
        let size = call(std::ptr::null_mut(), 0);
        if size < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; size as usize];
        let got = call(buf.as_mut_ptr(), buf.len());
        if got >= 0 {
            buf.truncate(got as usize);
            return Ok(buf);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ERANGE) {
            return Err(err);
        }
    }
    Err(io::Error::from_raw_os_error(libc::ERANGE))
}
