//! The I/O seam: every operation rwfs performs on the backing filesystem.
//!
//! [`Disk`] is deliberately small and low level, one method per system call that matters for
//! durability, so that a test can wrap it: record every change and rebuild the disk image a crash
//! at any point would leave (`tests/crash.rs`), or fail the n-th call (`tests/faults.rs`). The
//! production implementation is [`OsDisk`](super::OsDisk).
//!
//! Handles carry identity, not only descriptors: a [`Dir`] knows its canonical path relative to
//! the workspace root and a [`File`] knows its `(dev, ino)`. Recorders use them to name what
//! changed; the engine uses them in messages.
//!
//! Persistence model the rest of rwfs assumes (and the crash tests enforce):
//! - written data is durable only after [`Disk::sync`] or [`Disk::sync_data`] of that file;
//! - a directory change (`mkdir`, `link`, `rename`, `unlink`, a named create) is durable only
//!   after [`Disk::sync_dir`] of that directory; a rename is atomic, and a rename between two
//!   directories becomes durable with the sync of either;
//! - nothing else is ordered: unsynced data and unsynced directory changes may vanish or
//!   survive independently of each other.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// Identity of an inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl FileKind {
    /// A fifo, socket or device node: no content rwfs versions.
    pub fn is_special(self) -> bool {
        matches!(self, FileKind::Fifo | FileKind::Socket | FileKind::CharDevice | FileKind::BlockDevice)
    }
}

/// The metadata rwfs looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub id: FileId,
    pub kind: FileKind,
    /// Permission bits including setuid, setgid and sticky (`st_mode & 0o7777`).
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub nlink: u64,
    /// Allocated size in 512-byte blocks.
    pub blocks: u64,
    /// Device number of a device node.
    pub rdev: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// A timestamp to set ([`Disk::set_times`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    /// Leave it as it is.
    Keep,
    Now,
    /// Nanoseconds since the epoch.
    At(i64),
}

/// What `statvfs` says about the filesystem holding a directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsStats {
    pub blocks: u64,
    pub blocks_free: u64,
    pub blocks_available: u64,
    pub files: u64,
    pub files_free: u64,
    pub block_size: u32,
    pub fragment_size: u32,
    pub name_max: u32,
}

/// Attributes carried from the version a commit replaces to the new one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs {
    /// Permission bits; `None` keeps what the temp file was created with.
    pub perm: Option<u32>,
    /// Owner and group; `None` keeps the engine's own.
    pub owner: Option<(u32, u32)>,
    /// Extended attributes (ACLs live here too), as raw names and values.
    pub xattrs: Vec<(OsString, Vec<u8>)>,
}

/// How [`Disk::rename`] treats an existing destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rename {
    /// Replace it atomically (plain `rename`).
    Replace,
    /// Fail with `EEXIST` (`RENAME_NOREPLACE`).
    NoReplace,
    /// Swap the two names atomically (`RENAME_EXCHANGE`); both must exist.
    Exchange,
}

/// An open directory beneath the workspace root.
pub struct Dir {
    fd: OwnedFd,
    rel: String,
}

impl Dir {
    /// Wrap a descriptor; `rel` is the canonical path relative to the root (`""` for the root).
    pub fn new(fd: OwnedFd, rel: String) -> Dir {
        Dir { fd, rel }
    }

    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The workspace path of `name` inside this directory.
    pub fn join(&self, name: &str) -> String {
        if self.rel.is_empty() { name.to_string() } else { format!("{}/{}", self.rel, name) }
    }

    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir { fd: self.fd.try_clone()?, rel: self.rel.clone() })
    }

    /// A path naming this very directory through its descriptor (`/proc/self/fd/N`): it
    /// reaches the directory even where its own path is covered by a mount.
    pub fn fd_path(&self) -> std::path::PathBuf {
        super::sys::proc_fd_path(self.fd.as_fd())
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl fmt::Debug for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dir({:?})", self.rel)
    }
}

/// An open regular file.
pub struct File {
    fd: OwnedFd,
    id: FileId,
}

impl File {
    pub fn new(fd: OwnedFd, id: FileId) -> File {
        File { fd, id }
    }

    pub fn id(&self) -> FileId {
        self.id
    }

    /// The descriptor, for plain reads.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "File({}:{})", self.id.dev, self.id.ino)
    }
}

/// A new, private file to stage a version in.
#[derive(Debug)]
pub struct Temp {
    pub file: File,
    /// `None` for an anonymous `O_TMPFILE` inode; otherwise the name it was created under.
    pub name: Option<String>,
}

/// Prefix and suffix of every name rwfs creates in the backing tree for its own use. Such
/// names exist only while a commit is in flight or until recovery moves them to `objects/`.
pub const TEMP_PREFIX: &str = ".rwfs.";
pub const TEMP_SUFFIX: &str = ".tmp";

/// Is `name` one of rwfs's temporary names?
pub fn is_temp_name(name: &str) -> bool {
    name.len() == TEMP_PREFIX.len() + 16 + TEMP_SUFFIX.len()
        && name.starts_with(TEMP_PREFIX)
        && name.ends_with(TEMP_SUFFIX)
        && name[TEMP_PREFIX.len()..TEMP_PREFIX.len() + 16].bytes().all(|b| b.is_ascii_hexdigit())
}

/// A fresh unpredictable temporary name.
pub fn temp_name() -> String {
    let mut bytes = [0u8; 8];
    // getrandom only fails where the OS has no entropy source at all; fall back to the clock
    // mixed with the address of a local, which is still unique within this process.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let local = &bytes as *const _ as u64;
        bytes = (nanos ^ local.rotate_left(32)).to_le_bytes();
    }
    format!("{TEMP_PREFIX}{}{TEMP_SUFFIX}", hex::encode(bytes))
}

/// Every operation rwfs performs on the backing filesystem.
///
/// Methods that take a `name` expect a single path component (no `/`); resolution of longer
/// paths happens only in [`Disk::open_dir`], beneath the root.
pub trait Disk: Send + Sync {
    // ---- Opening and reading: no effect on what a crash leaves behind.

    /// Open the workspace root itself by absolute path.
    fn open_root(&self, path: &Path) -> io::Result<Dir>;
    /// Open directory `rel` beneath `base`, refusing any resolution that leaves `base`
    /// (`EXDEV`). Symlinks beneath it are followed; the result's path is canonical and relative
    /// to the workspace root (`base`'s path joined with the part below `base`).
    fn open_dir(&self, base: &Dir, rel: &str) -> io::Result<Dir>;
    /// `lstat` of `name` in `dir`; `None` when it does not exist.
    fn stat(&self, dir: &Dir, name: &str) -> io::Result<Option<Stat>>;
    fn file_stat(&self, file: &File) -> io::Result<Stat>;
    /// Open a regular file for reading without following a symlink.
    fn open_read(&self, dir: &Dir, name: &str) -> io::Result<File>;
    /// Read at `offset`; returns 0 at end of file.
    fn read_at(&self, file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn read_link(&self, dir: &Dir, name: &str) -> io::Result<OsString>;
    fn list(&self, dir: &Dir) -> io::Result<Vec<(OsString, FileKind)>>;
    /// The extended attributes of `file` (ACLs included), names and values.
    fn xattrs(&self, file: &File) -> io::Result<Vec<(OsString, Vec<u8>)>>;
    /// Take a non-blocking `flock` (exclusive or shared); `false` when a conflicting lock is
    /// held through another open file description.
    fn try_lock(&self, file: &File, exclusive: bool) -> io::Result<bool>;

    // ---- Changes: what crash tests record.

    fn mkdir(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<()>;
    /// A new private file in `dir`: an anonymous `O_TMPFILE` inode where the filesystem
    /// supports it, else a new file under an unpredictable [`temp_name`] (`O_EXCL`).
    fn create_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp>;
    /// Open `name` for reading and writing, creating it when `create` (never following a symlink).
    fn open_write(&self, dir: &Dir, name: &str, create: bool, perm: u32) -> io::Result<File>;
    /// Write all of `data` at `offset`.
    fn write_at(&self, file: &File, data: &[u8], offset: u64) -> io::Result<()>;
    fn set_len(&self, file: &File, len: u64) -> io::Result<()>;
    /// Apply attributes; owner and extended attributes are best effort and the names of those
    /// that could not be applied are returned.
    fn set_attrs(&self, file: &File, attrs: &Attrs) -> io::Result<Vec<String>>;
    /// `fsync`.
    fn sync(&self, file: &File) -> io::Result<()>;
    /// `fdatasync`.
    fn sync_data(&self, file: &File) -> io::Result<()>;
    /// `fsync` of a directory: its entries become durable.
    fn sync_dir(&self, dir: &Dir) -> io::Result<()>;
    /// Give an anonymous temp file a name (`linkat`); `EEXIST` if the name is taken.
    fn link(&self, file: &File, dir: &Dir, name: &str) -> io::Result<()>;
    fn rename(&self, from: &Dir, from_name: &str, to: &Dir, to_name: &str, how: Rename) -> io::Result<()>;
    fn unlink(&self, dir: &Dir, name: &str) -> io::Result<()>;

    // ---- Namespace and metadata changes made through the mount. The crash model does not
    // cover them (they carry no content rwfs versions), so the defaults act on the real disk
    // and a wrapper overrides only what it watches. Every one acts on `name` in `dir` without
    // following a symlink there.

    /// Create `name` exclusively (`O_CREAT | O_EXCL`) and open it for reading and writing.
    fn create_new(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<File> {
        super::meta::create_new(dir, name, perm)
    }
    fn symlink(&self, target: &std::ffi::OsStr, dir: &Dir, name: &str) -> io::Result<()> {
        super::meta::symlink(target, dir, name)
    }
    /// A fifo, socket or device node.
    fn mknod(&self, dir: &Dir, name: &str, kind: FileKind, perm: u32, rdev: u64) -> io::Result<()> {
        super::meta::mknod(dir, name, kind, perm, rdev)
    }
    /// A second name for the inode at `from/from_name` (`linkat` without following).
    fn hard_link(&self, from: &Dir, from_name: &str, to: &Dir, to_name: &str) -> io::Result<()> {
        super::meta::hard_link(from, from_name, to, to_name)
    }
    fn rmdir(&self, dir: &Dir, name: &str) -> io::Result<()> {
        super::meta::rmdir(dir, name)
    }
    /// Permission bits (refused on a symlink).
    fn set_perm(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<()> {
        super::meta::set_perm(dir, name, perm)
    }
    fn set_owner(&self, dir: &Dir, name: &str, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        super::meta::set_owner(dir, name, uid, gid)
    }
    fn set_times(&self, dir: &Dir, name: &str, atime: SetTime, mtime: SetTime) -> io::Result<()> {
        super::meta::set_times(dir, name, atime, mtime)
    }
    /// `flags`: 0, `XATTR_CREATE` or `XATTR_REPLACE`.
    fn set_xattr(&self, dir: &Dir, name: &str, attr: &std::ffi::OsStr, value: &[u8], flags: i32) -> io::Result<()> {
        super::meta::set_xattr(dir, name, attr, value, flags)
    }
    fn remove_xattr(&self, dir: &Dir, name: &str, attr: &std::ffi::OsStr) -> io::Result<()> {
        super::meta::remove_xattr(dir, name, attr)
    }
    fn get_xattr(&self, dir: &Dir, name: &str, attr: &std::ffi::OsStr) -> io::Result<Vec<u8>> {
        super::meta::get_xattr(dir, name, attr)
    }
    /// One extended attribute of an open regular file.
    fn file_xattr(&self, file: &File, attr: &std::ffi::OsStr) -> io::Result<Vec<u8>> {
        super::sys::get_xattr(file.as_fd(), attr)
    }
    fn list_xattrs(&self, dir: &Dir, name: &str) -> io::Result<Vec<OsString>> {
        super::meta::list_xattrs(dir, name)
    }
    fn statfs(&self, dir: &Dir) -> io::Result<FsStats> {
        super::meta::statfs(dir)
    }
    /// Copy the first `len` bytes of `from` to the start of `to` (in the kernel where it can).
    fn copy_range(&self, from: &File, to: &File, len: u64) -> io::Result<()> {
        super::meta::copy_range(from, to, len)
    }

    // ---- Hints: no semantics.

    /// Start writing `file`'s dirty pages back now, so a later `sync` waits less.
    fn start_writeback(&self, _file: &File) {}
    /// `file` will rarely be read again (a version that left the tree): drop its clean pages
    /// from the cache, so new versions reuse warm memory instead of growing the cache.
    fn drop_cache(&self, _file: &File) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised_and_unique() {
        let a = temp_name();
        let b = temp_name();
        assert!(is_temp_name(&a), "{a}");
        assert_ne!(a, b);
        for not in [".rwfs.tmp", "rwfs.0123456789abcdef.tmp", ".rwfs.0123456789abcdeg.tmp", "a"] {
            assert!(!is_temp_name(not), "{not}");
        }
    }
}
