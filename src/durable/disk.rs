//! The I/O seam: every operation rwfs performs on the backing filesystem, as two traits.
//!
//! [`Disk`] is deliberately small and low level, one method per system call that matters for
//! durability, so that a test can wrap it: record every change and rebuild the disk image a crash
//! at any point would leave (`tests/crash.rs`), or fail the n-th call (`tests/faults.rs`).
//! [`Meta`], which `Disk` requires, holds the namespace and metadata operations the mount passes
//! through (symlinks, device nodes, hard links, `rmdir`, mode, owner, times, extended attributes,
//! `statfs`) and the two the mount's drafts need (`create_new`, `copy_range`). The production
//! implementation of both is [`OsDisk`](super::OsDisk).
//!
//! No method but [`Disk::data_extents`] has a default body: a wrapper states what it does with
//! every call (forwards it, records it, fails it), so one that forgets a call does not compile
//! instead of silently reaching the real disk. That includes the two hints
//! ([`Disk::start_writeback`], [`Disk::drop_cache`]), which have no semantics but do make system
//! calls. `data_extents` only reads, and its default (all data, no holes) is always correct: a
//! wrapper that keeps it makes copies dense, never wrong.
//!
//! Persistence model the rest of rwfs assumes (and the crash tests enforce):
//! - written data is durable only after [`Disk::sync`] or [`Disk::sync_data`] of that file;
//! - a directory change (`mkdir`, `link`, `rename`, `unlink`, a named create, and of [`Meta`]'s
//!   `create_new`, `symlink`, `mknod`, `hard_link`, `rmdir`) is durable only after
//!   [`Disk::sync_dir`] of that directory; a rename is atomic, and a rename between two
//!   directories becomes durable with the sync of either;
//! - [`Disk::sync_fs`] makes every earlier change on its filesystem durable, data and entries;
//! - nothing else is ordered: unsynced data and unsynced directory changes may vanish or
//!   survive independently of each other.
//!
//! This file only declares; the data it passes around is in `types.rs`, the system calls in
//! `os.rs`, `meta.rs` and `sys.rs`, none of which this file uses.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;

use super::types::{Attrs, Dir, File, FileKind, FsStats, Rename, SetTime, Stat, Temp};

/// The operations the crash model covers: opening and reading, and every change a commit makes.
///
/// Methods that take a `name` expect a single path component (no `/`); resolution of longer
/// paths happens only in [`Disk::open_dir`], beneath the root.
pub trait Disk: Meta + Send + Sync {
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
    /// supports it, else a new file under an unpredictable [`temp_name`](super::temp_name) (`O_EXCL`).
    /// Its reads are quiet from the start (as [`Disk::quiet_reads`]).
    fn create_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp>;
    /// A new private file in `dir` under an unpredictable [`temp_name`](super::temp_name)
    /// (`O_EXCL`) from the start: one call where an anonymous file and its `linkat` take two,
    /// for files whose name may show at once (a draft in the state directory). Quiet reads, as
    /// [`Disk::create_temp`]'s.
    fn create_named_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp>;
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
    /// `syncfs` of the filesystem holding `file`: every change made on it so far (every file's
    /// data, every directory's entries) durable. It also waits for other processes' unwritten
    /// data on that filesystem, so it is for many changes at once (a batch window), not one.
    fn sync_fs(&self, file: &File) -> io::Result<()>;
    /// Give an anonymous temp file a name (`linkat`); `EEXIST` if the name is taken.
    fn link(&self, file: &File, dir: &Dir, name: &str) -> io::Result<()>;
    fn rename(&self, from: &Dir, from_name: &str, to: &Dir, to_name: &str, how: Rename) -> io::Result<()>;
    fn unlink(&self, dir: &Dir, name: &str) -> io::Result<()>;

    // ---- Hints: no semantics, but system calls all the same (no defaults, see the module doc).

    /// Start writing `file`'s dirty pages back now, so a later `sync` waits less.
    fn start_writeback(&self, file: &File);
    /// `file` will rarely be read again (a version that left the tree): drop its clean pages
    /// from the cache, so new versions reuse warm memory instead of growing the cache.
    fn drop_cache(&self, file: &File);
    /// Reads through this descriptor no longer change the file's access time (`O_NOATIME`,
    /// allowed to the file's owner and to root; otherwise nothing changes): rwfs's own reads
    /// of a draft (scanning, hashing, copying) are not a user's access.
    fn quiet_reads(&self, file: &File);
    /// Allocate `len` bytes of `file` from `offset` without changing its size, so writes there
    /// succeed on a full disk (the journal's reserve). Unsupported filesystems succeed.
    fn reserve(&self, file: &File, offset: u64, len: u64) -> io::Result<()>;
}

/// Namespace and metadata operations made through the mount, and the two the mount's drafts
/// need ([`Meta::create_new`], [`Meta::copy_range`]). A supertrait of [`Disk`] rather than part
/// of it because the crash model covers them only in part: the crash tests record the namespace
/// changes (`create_new`, `hard_link`, `rmdir`; the entries `symlink` and `mknod` make are not
/// modelled) and `copy_range`'s bytes, while mode, owner, times and extended attributes carry no
/// content rwfs versions and are not modelled at all.
///
/// Those that take a `name` act on it in `dir` without following a symlink there.
pub trait Meta {
    // ---- Namespace changes.

    /// Create `name` exclusively (`O_CREAT | O_EXCL`) and open it for reading and writing.
    fn create_new(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<File>;
    fn symlink(&self, target: &OsStr, dir: &Dir, name: &str) -> io::Result<()>;
    /// A fifo, socket or device node.
    fn mknod(&self, dir: &Dir, name: &str, kind: FileKind, perm: u32, rdev: u64) -> io::Result<()>;
    /// A second name for the inode at `from/from_name` (`linkat` without following).
    fn hard_link(&self, from: &Dir, from_name: &str, to: &Dir, to_name: &str) -> io::Result<()>;
    fn rmdir(&self, dir: &Dir, name: &str) -> io::Result<()>;

    // ---- Metadata changes.

    /// Permission bits (refused on a symlink).
    fn set_perm(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<()>;
    fn set_owner(&self, dir: &Dir, name: &str, uid: Option<u32>, gid: Option<u32>) -> io::Result<()>;
    fn set_times(&self, dir: &Dir, name: &str, atime: SetTime, mtime: SetTime) -> io::Result<()>;
    /// `flags`: 0, `XATTR_CREATE` or `XATTR_REPLACE`.
    fn set_xattr(&self, dir: &Dir, name: &str, attr: &OsStr, value: &[u8], flags: i32) -> io::Result<()>;
    fn remove_xattr(&self, dir: &Dir, name: &str, attr: &OsStr) -> io::Result<()>;
    /// Remove an extended attribute of an open file (one call: no path to resolve).
    fn remove_file_xattr(&self, file: &File, attr: &OsStr) -> io::Result<()>;

    // ---- Metadata reads.

    fn get_xattr(&self, dir: &Dir, name: &str, attr: &OsStr) -> io::Result<Vec<u8>>;
    /// One extended attribute of an open regular file.
    fn file_xattr(&self, file: &File, attr: &OsStr) -> io::Result<Vec<u8>>;
    fn list_xattrs(&self, dir: &Dir, name: &str) -> io::Result<Vec<OsString>>;
    fn statfs(&self, dir: &Dir) -> io::Result<FsStats>;

    // ---- Data: a draft's first bytes.

    /// Copy the first `len` bytes of `from` to the start of `to` (in the kernel where it can);
    /// holes stay holes: only the data extents are copied.
    fn copy_range(&self, from: &File, to: &File, len: u64) -> io::Result<()>;

    /// Where `file`'s data is in its first `len` bytes: sorted, disjoint `(start, end)` ranges;
    /// the rest are holes, which read as zeros (`SEEK_DATA`/`SEEK_HOLE`). A disk that cannot
    /// tell reports one range over everything, which is always correct.
    fn data_extents(&self, _file: &File, len: u64) -> io::Result<Vec<(u64, u64)>> {
        Ok(if len == 0 { Vec::new() } else { vec![(0, len)] })
    }
}
