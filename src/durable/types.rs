//! The plain data of the disk seam: handles, metadata and temp names.
//!
//! Handles carry identity, not only descriptors: a [`Dir`] knows its canonical path relative to
//! the workspace root and a [`File`] knows its `(dev, ino)`. Recorders use them to name what
//! changed; the engine uses them in messages.
//!
//! This is the bottom of `durable/` but for `sys.rs`: it makes no system call that changes the
//! disk, and knows nothing of the [`Disk`](super::Disk) trait that passes these values around.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use nix::sys::stat::SFlag;

use super::dirs::{Inheritable, KeptDirs};

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
    /// The kind an `st_mode` names.
    pub fn of_mode(mode: u32) -> FileKind {
        match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
            f if f == SFlag::S_IFREG => FileKind::File,
            f if f == SFlag::S_IFDIR => FileKind::Dir,
            f if f == SFlag::S_IFLNK => FileKind::Symlink,
            f if f == SFlag::S_IFIFO => FileKind::Fifo,
            f if f == SFlag::S_IFSOCK => FileKind::Socket,
            f if f == SFlag::S_IFCHR => FileKind::CharDevice,
            _ => FileKind::BlockDevice,
        }
    }

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

/// A timestamp to set ([`Meta::set_times`](super::Meta::set_times)).
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

impl Attrs {
    /// What of these a file `made` as it is still needs: the mode and the owner only where they
    /// differ (the mode too once the owner changes: `chown` clears setuid and setgid bits),
    /// every extended attribute. Applying the result makes the file what applying `self` would,
    /// without the `fstat` that compares them.
    pub fn beyond(self, made: &Stat) -> Attrs {
        let owner = self.owner.filter(|owner| *owner != (made.uid, made.gid));
        let perm = self.perm.filter(|perm| owner.is_some() || *perm != made.perm);
        Attrs { perm, owner, xattrs: self.xattrs }
    }
}

/// How [`Disk::rename`](super::Disk::rename) treats an existing destination.
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
///
/// Its descriptor is shared by its copies ([`Dir::try_clone`] costs no system call): nothing
/// rwfs does with a directory depends on the descriptor's own state (a listing opens `.`
/// afresh), so one open serves every holder, and the root's descriptor serves every top-level
/// name without being opened again. A root opened with [`Dir::keeping`] keeps the directories
/// opened beneath it open for a while (`KeptDirs`); they share its table.
pub struct Dir {
    fd: Arc<OwnedFd>,
    rel: String,
    kept: Option<Arc<KeptDirs>>,
}

impl Dir {
    /// The root (`rel` `""`), whose directories beneath are kept open by path (see `dirs.rs`).
    pub fn keeping(fd: OwnedFd) -> Dir {
        Dir { fd: Arc::new(fd), rel: String::new(), kept: Some(Arc::default()) }
    }

    /// A directory opened beneath this one (`fd`, at `rel`: its canonical path relative to the
    /// root), sharing its kept table.
    pub(super) fn below(&self, fd: Arc<OwnedFd>, rel: String) -> Dir {
        Dir { fd, rel, kept: self.kept.clone() }
    }

    /// The directories kept open beneath this one's root, if it keeps any.
    pub(super) fn kept(&self) -> Option<&KeptDirs> {
        self.kept.as_deref()
    }

    /// The shared descriptor, to be kept.
    pub(super) fn shared_fd(&self) -> Arc<OwnedFd> {
        self.fd.clone()
    }

    /// `name` in this directory (`.`: the directory itself) was renamed, replaced or removed,
    /// or its mode, owner or extended attributes changed: what is kept of it goes.
    pub(super) fn forget(&self, name: &str) {
        if let Some(kept) = &self.kept {
            kept.forget(&if name == "." { self.rel.clone() } else { self.join(name) });
        }
    }

    /// What this directory gives a new entry, as read the last time while it is kept open; else
    /// `read` it (and keep it, when the directory is kept).
    pub fn inheritable(&self, read: impl FnOnce() -> io::Result<Inheritable>) -> io::Result<Inheritable> {
        let Some(kept) = &self.kept else { return read() };
        match kept.inheritable(&self.rel) {
            Ok(known) => Ok(known),
            Err(generation) => {
                let read = read()?;
                kept.keep_inheritable(&self.rel, read.clone(), generation);
                Ok(read)
            }
        }
    }

    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The workspace path of `name` inside this directory.
    pub fn join(&self, name: &str) -> String {
        if self.rel.is_empty() { name.to_string() } else { format!("{}/{}", self.rel, name) }
    }

    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir { fd: self.fd.clone(), rel: self.rel.clone(), kept: self.kept.clone() })
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

    /// A second descriptor of the same open file.
    pub fn try_clone(&self) -> io::Result<File> {
        Ok(File { fd: self.fd.try_clone()?, id: self.id })
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
    /// The file as its create made it (mode, owner), when the maker read it: what
    /// [`Attrs::beyond`] leaves out.
    pub made: Option<Stat>,
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

/// A fresh unpredictable temporary name: a counter under a keyed hash whose keys are drawn
/// from the OS's randomness once per process (std's `RandomState`, SipHash), so a name costs
/// no system call and still cannot be guessed from outside. Every caller creates with
/// `O_EXCL`/`RENAME_NOREPLACE` semantics and draws again on `EEXIST` (a forked child shares
/// the keys and the count).
pub fn temp_name() -> String {
    use std::hash::BuildHasher;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static KEYS: OnceLock<std::hash::RandomState> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let bytes = KEYS.get_or_init(std::hash::RandomState::new).hash_one(n).to_le_bytes();
    format!("{TEMP_PREFIX}{}{TEMP_SUFFIX}", hex::encode(bytes))
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

    #[test]
    fn attrs_beyond_what_a_file_was_made_with_leave_out_only_what_it_has() {
        let made = Stat {
            id: FileId { dev: 1, ino: 2 },
            kind: FileKind::File,
            perm: 0o644,
            uid: 0,
            gid: 0,
            size: 0,
            nlink: 1,
            blocks: 0,
            rdev: 0,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        };
        let xattrs = vec![(OsString::from("user.a"), b"1".to_vec())];
        let attrs = |perm, owner| Attrs { perm, owner, xattrs: xattrs.clone() };
        // Both as made: only the xattrs are left.
        assert_eq!(attrs(Some(0o644), Some((0, 0))).beyond(&made), attrs(None, None));
        // Another mode: the mode.
        assert_eq!(attrs(Some(0o600), Some((0, 0))).beyond(&made), attrs(Some(0o600), None));
        // Another owner: the owner, and the mode again (chown clears setuid and setgid).
        assert_eq!(attrs(Some(0o644), Some((1000, 0))).beyond(&made), attrs(Some(0o644), Some((1000, 0))));
        assert_eq!(attrs(None, None).beyond(&made), attrs(None, None));
    }
}
