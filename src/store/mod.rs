//! The version store: content-addressed blobs in `.resilient_write/objects/ab/<sha256>`.
//!
//! Every version that stops being current (overwritten, deleted, restored over) and every
//! quarantined draft lands here, named by the sha256 of its bytes, until retention removes it.
//!
//! Invariants:
//! - An object's bytes hash to its name. Objects are never written in place: a version enters
//!   by `rename` of the displaced inode (no copy), or by a copy staged and synced like any commit.
//! - No object shares an inode with a live file of the tree: a displaced inode that still has
//!   other hard links in the tree is copied instead of moved.
//! - Storing bytes that are already present replaces the object by an identical one, which
//!   refreshes its ctime: the ctime of an object is the last time that content left the tree,
//!   which is what retention (`engine/retention.rs`) measures.
//! - [`Objects::adopt`] is lazily durable: until [`Objects::sync`] the displaced inode may still be
//!   found under its temp name after a crash, which recovery handles. Copies are durable at once.
//! - Refused drafts and versions marked sensitive (a credential found in them) are stored sealed
//!   (`seal.rs`): still named by the plaintext's digest, their bytes encrypted; every read here
//!   ([`Objects::open_object`]) gives the plaintext, so callers never see the difference.

pub mod seal;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use nix::libc;

use crate::durable::{Dir, Disk, File, FileKind, Install, Rename, Source, Stat, stage};
use crate::error::{Error, IoContext, Reason, Result};
use crate::sha::Sha256;

/// The store's directory inside the state directory.
pub const OBJECTS_DIR: &str = crate::durable::layout::OBJECTS;

/// The object store of one workspace.
pub struct Objects {
    disk: Arc<dyn Disk>,
    dir: Dir,
    subdirs: Mutex<HashMap<u8, Arc<Dir>>>,
    /// Subdirectories with entries not yet synced.
    dirty: Mutex<BTreeSet<u8>>,
    keys: seal::Keyring,
    /// Versions in which the gate found a credential: stored sealed when they leave the tree.
    sensitive: Mutex<HashSet<Sha256>>,
}

/// What [`Objects::remove`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    pub objects: u64,
    pub bytes: u64,
}

impl Objects {
    /// Open (creating durably) `objects/` inside `state` of the workspace at `root`.
    pub fn open(disk: Arc<dyn Disk>, state: &Dir, root: &Path) -> Result<Objects> {
        let dir = open_or_create(&*disk, state, OBJECTS_DIR)?;
        let keys = seal::Keyring::new(disk.clone(), state, root)?;
        let objects = Objects {
            disk,
            dir,
            subdirs: Mutex::default(),
            dirty: Mutex::default(),
            keys,
            sensitive: Mutex::default(),
        };
        objects.make_subdirs()?;
        Ok(objects)
    }

    /// Make the 256 subdirectories up front (once per workspace), so that keeping a deleted
    /// file needs no new directory block: a delete frees space even on a full disk.
    fn make_subdirs(&self) -> Result<()> {
        if self.disk.stat(&self.dir, "ff").step("stat objects/ff")?.is_some() {
            return Ok(());
        }
        for byte in 0..=255u8 {
            match self.disk.mkdir(&self.dir, &format!("{byte:02x}"), 0o755) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => return Err(Error::io("create objects/ subdirectories", e)),
            }
        }
        self.disk.sync_dir(&self.dir).step("fsync objects/")
    }

    /// Path of an object relative to the workspace root.
    pub fn path_of(&self, sha: &Sha256) -> String {
        let hex = sha.to_hex();
        format!("{}/{}/{}", self.dir.rel(), &hex[..2], hex)
    }

    /// Store version `sha` sealed when it leaves the tree (the gate found a credential in it).
    pub fn mark_sensitive(&self, sha: Sha256) {
        self.sensitive.lock().unwrap_or_else(PoisonError::into_inner).insert(sha);
    }

    fn is_sensitive(&self, sha: &Sha256) -> bool {
        self.sensitive.lock().unwrap_or_else(PoisonError::into_inner).contains(sha)
    }

    /// Take the inode at `from/name` into the store as `sha` (lazily durable); sealed, durably,
    /// when `sha` is sensitive.
    pub fn adopt(&self, from: &Dir, name: &str, sha: Sha256) -> Result<()> {
        if self.is_sensitive(&sha) {
            match self.adopt_sealed(from, name, sha) {
                // Without the key the version is still kept, in plaintext: losing it would be
                // worse, and `rwfs gc --encrypt` seals it once the key is back.
                Err(e) if matches!(e.reason(), Reason::KeyUnavailable { .. } | Reason::KeyInsideWorkspace { .. }) => {
                    tracing::warn!(sha = %sha.short(12), error = %e, "a version holding a credential is kept unencrypted");
                }
                done => return done,
            }
        }
        let stat = self.disk.stat(from, name).step("stat displaced version")?;
        // Only a regular file is a version: a symlink or a fifo swapped in by another process
        // must not be filed under a digest it does not have.
        if stat.is_some_and(|s| s.kind != FileKind::File) {
            return Err(Error::from(Reason::NotRegularFile).at(from.join(name)));
        }
        let shared = stat.is_some_and(|s| s.nlink > 1);
        let sub = self.subdir(&sha)?;
        if !shared {
            match self.disk.rename(from, name, &sub, &sha.to_hex(), Rename::Replace) {
                Ok(()) => {
                    self.mark_dirty(&sha);
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {}
                Err(e) => return Err(Error::io("move version into objects", e)),
            }
        }
        // Another hard link still shows this inode in the tree, or objects/ is on another
        // filesystem: store a copy, durably, before dropping the name.
        let file = self.disk.open_read(from, name).step("open displaced version")?;
        self.put_file(&file, sha)?;
        self.disk.unlink(from, name).step("remove displaced version")
    }

    /// Store a copy of `file` as `sha`, durably. The bytes are verified against `sha`.
    pub fn put_file(&self, file: &File, sha: Sha256) -> Result<()> {
        let len = self.disk.file_stat(file).step("stat version")?.size;
        self.put(Source::File { file, len }, sha)
    }

    /// Store `bytes` as `sha`, durably. The bytes are verified against `sha`.
    pub fn put_bytes(&self, bytes: &[u8], sha: Sha256) -> Result<()> {
        self.put(Source::Bytes(bytes), sha)
    }

    /// Take the file at `from/name` into the store as `sha`, sealed and durably: its bytes are
    /// read, checked, sealed and written as a new object; then the file is removed.
    pub fn adopt_sealed(&self, from: &Dir, name: &str, sha: Sha256) -> Result<()> {
        let file = self.disk.open_read(from, name).step("open version to seal")?;
        self.put_sealed_file(&file, sha)?;
        self.disk.unlink(from, name).step("remove sealed version's plaintext")?;
        self.disk.sync_dir(from).step("fsync directory of sealed version")
    }

    /// Store a sealed copy of `file` as `sha`, durably.
    pub fn put_sealed_file(&self, file: &File, sha: Sha256) -> Result<()> {
        let bytes = read_all(&*self.disk, file)?;
        self.put_sealed_bytes(&bytes, sha)
    }

    /// Store `bytes` sealed as `sha`, durably (the key is made on first need). The bytes are
    /// verified against `sha`.
    pub fn put_sealed_bytes(&self, bytes: &[u8], sha: Sha256) -> Result<()> {
        let actual = Sha256::of(bytes);
        if actual != sha {
            return Err(Reason::ObjectCorrupt { sha, actual }.into());
        }
        let sealed = self.keys.key(true)?.seal(bytes, &sha)?;
        self.write(Source::Bytes(&sealed), sha)
    }

    /// Seal object `sha` in place if it is stored in plaintext (`rwfs gc --encrypt`): the sealed
    /// copy is written, synced and renamed over it. `false` when it was sealed already or is
    /// not stored; a plaintext object that does not hash to its name is left alone (an error).
    pub fn seal(&self, sha: &Sha256) -> Result<bool> {
        let Some(file) = self.open_raw(sha)? else { return Ok(false) };
        let bytes = read_all(&*self.disk, &file)?;
        if seal::looks_sealed(&bytes) && Sha256::of(&bytes) != *sha {
            return Ok(false);
        }
        self.put_sealed_bytes(&bytes, *sha)?;
        Ok(true)
    }

    /// Is object `sha` stored sealed? `None` when it is not stored.
    pub fn is_sealed(&self, sha: &Sha256) -> Result<Option<bool>> {
        let Some(file) = self.open_raw(sha)? else { return Ok(None) };
        let mut head = [0u8; seal::HEADER + 16];
        let got = self.disk.read_at(&file, &mut head, 0).step("read object")?;
        Ok(Some(
            seal::looks_sealed(&head[..got]) && {
                let bytes = read_all(&*self.disk, &file)?;
                Sha256::of(&bytes) != *sha
            },
        ))
    }

    fn put(&self, source: Source<'_>, sha: Sha256) -> Result<()> {
        if self.is_sensitive(&sha) {
            let file = match source {
                Source::Bytes(bytes) => return self.put_sealed_bytes(bytes, sha),
                Source::File { file, .. } => file,
                Source::Append { .. } => return Err(Reason::InvalidArgument { what: "an appended object" }.into()),
            };
            return self.put_sealed_file(file, sha);
        }
        let sub = self.subdir(&sha)?;
        let staged = stage(&*self.disk, &sub, source, &Default::default())?;
        if staged.sha256() != sha {
            let actual = staged.sha256();
            staged.abandon(&*self.disk, &sub);
            return Err(Reason::ObjectCorrupt { sha, actual }.into());
        }
        self.install(staged, sha)
    }

    /// Write `source` (sealed bytes) as object `sha`: staged, synced, renamed, directory synced.
    fn write(&self, source: Source<'_>, sha: Sha256) -> Result<()> {
        let sub = self.subdir(&sha)?;
        let staged = stage(&*self.disk, &sub, source, &Default::default())?;
        self.install(staged, sha)
    }

    fn install(&self, staged: crate::durable::Staged, sha: Sha256) -> Result<()> {
        let sub = self.subdir(&sha)?;
        staged.sync(&*self.disk)?;
        staged.install(&*self.disk, &sub, &sha.to_hex(), Install::Replace, None)?;
        self.disk.sync_dir(&sub).step("fsync objects directory")
    }

    /// Is `sha` in the store? (A `stat`: it works where the objects may be listed but not
    /// read, as through the mount.)
    pub fn contains(&self, sha: &Sha256) -> Result<bool> {
        let hex = sha.to_hex();
        match self.disk.open_dir(&self.dir, &hex[..2]) {
            Ok(sub) => Ok(self.disk.stat(&sub, &hex).step("stat object")?.is_some_and(|s| s.kind == FileKind::File)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(Error::io("open objects directory", e)),
        }
    }

    /// Open an object for reading; `None` when it is not (or no longer) stored. A sealed object
    /// is opened with the workspace's key into an anonymous in-memory file (`memfd`, with the
    /// object's mode): callers read plaintext either way. A missing key is `KeyUnavailable`, a
    /// wrong key or changed bytes `Unsealable`, both naming the version.
    pub fn open_object(&self, sha: &Sha256) -> Result<Option<File>> {
        let Some(file) = self.open_raw(sha)? else { return Ok(None) };
        let mut head = [0u8; seal::HEADER + 16];
        let got = self.disk.read_at(&file, &mut head, 0).step("read object")?;
        if !seal::looks_sealed(&head[..got]) {
            return Ok(Some(file));
        }
        let bytes = read_all(&*self.disk, &file)?;
        if Sha256::of(&bytes) == *sha {
            return Ok(Some(file));
        }
        let plain = self.keys.key(false).map_err(|e| e.at(self.path_of(sha)))?.open(&bytes, sha)?;
        let perm = self.disk.file_stat(&file).step("stat object")?.perm;
        Ok(Some(in_memory(&plain, perm)?))
    }

    /// The plaintext of object `sha`, checked against its name, or why not (`rwfs verify`).
    pub fn check(&self, sha: &Sha256) -> std::result::Result<(), (Option<Sha256>, String)> {
        let file = match self.open_object(sha) {
            Ok(Some(file)) => file,
            Ok(None) => return Err((None, "not stored".into())),
            Err(e) => return Err((None, e.to_string())),
        };
        match crate::durable::hash_file(&*self.disk, &file) {
            Ok((actual, _)) if actual == *sha => Ok(()),
            Ok((actual, _)) => Err((Some(actual), "does not hash to its name".into())),
            Err(e) => Err((None, e.to_string())),
        }
    }

    fn open_raw(&self, sha: &Sha256) -> Result<Option<File>> {
        let hex = sha.to_hex();
        match self.disk.open_dir(&self.dir, &hex[..2]) {
            Ok(sub) => match self.disk.open_read(&sub, &hex) {
                Ok(file) => Ok(Some(file)),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
                Err(e) => Err(Error::io("open object", e)),
            },
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(Error::io("open objects directory", e)),
        }
    }

    /// Make every adoption so far durable.
    pub fn sync(&self) -> Result<()> {
        let dirty = std::mem::take(&mut *self.dirty.lock().unwrap_or_else(PoisonError::into_inner));
        for byte in &dirty {
            let sub = self.subdir_by_byte(*byte)?;
            if let Err(e) = self.disk.sync_dir(&sub) {
                // Put the rest back so a later sync retries them.
                self.dirty.lock().unwrap_or_else(PoisonError::into_inner).extend(dirty.iter());
                return Err(Error::io("fsync objects directory", e));
            }
        }
        Ok(())
    }

    /// Every stored object with its metadata (names that are not digests are skipped).
    pub fn list(&self) -> Result<Vec<(Sha256, Stat)>> {
        let mut out = Vec::new();
        for (sub_name, kind) in self.disk.list(&self.dir).step("list objects")? {
            let Some(sub_name) = sub_name.to_str() else {
                continue;
            };
            if kind != FileKind::Dir || sub_name.len() != 2 {
                continue;
            }
            let sub = self.disk.open_dir(&self.dir, sub_name).step("open objects directory")?;
            for (name, kind) in self.disk.list(&sub).step("list objects")? {
                let Some(sha) = name.to_str().and_then(|n| n.parse::<Sha256>().ok()) else {
                    continue;
                };
                if kind != FileKind::File {
                    continue;
                }
                if let Some(stat) = self.disk.stat(&sub, name.to_str().unwrap_or_default()).step("stat object")? {
                    out.push((sha, stat));
                }
            }
        }
        Ok(out)
    }

    /// Remove the objects `shas` (retention decides which; see `engine/retention.rs`), durably.
    pub fn remove(&self, shas: &[Sha256]) -> Result<Removed> {
        let mut removed = Removed::default();
        for sha in shas {
            let sub = self.subdir(sha)?;
            let size = self.disk.stat(&sub, &sha.to_hex()).step("stat object")?.map_or(0, |s| s.size);
            match self.disk.unlink(&sub, &sha.to_hex()) {
                Ok(()) => {
                    self.mark_dirty(sha);
                    removed.objects += 1;
                    removed.bytes += size;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => return Err(Error::io("remove object", e)),
            }
        }
        self.sync()?;
        Ok(removed)
    }

    /// Bytes still available to unprivileged writers on the store's filesystem.
    pub fn available(&self) -> Result<u64> {
        let stats = self.disk.statfs(&self.dir).step("statfs objects directory")?;
        let unit = if stats.fragment_size > 0 { stats.fragment_size } else { stats.block_size };
        Ok(stats.blocks_available.saturating_mul(u64::from(unit)))
    }

    fn mark_dirty(&self, sha: &Sha256) {
        self.dirty.lock().unwrap_or_else(PoisonError::into_inner).insert(sha.as_bytes()[0]);
    }

    fn subdir(&self, sha: &Sha256) -> Result<Arc<Dir>> {
        self.subdir_by_byte(sha.as_bytes()[0])
    }

    fn subdir_by_byte(&self, byte: u8) -> Result<Arc<Dir>> {
        let mut subdirs = self.subdirs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dir) = subdirs.get(&byte) {
            return Ok(dir.clone());
        }
        let dir = Arc::new(open_or_create(&*self.disk, &self.dir, &format!("{byte:02x}"))?);
        subdirs.insert(byte, dir.clone());
        Ok(dir)
    }
}

/// An object whose bytes do not hash to its name (damaged, or tampered with), or that cannot be
/// read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadObject {
    /// Relative to the state directory: `objects/ab/<sha256>`.
    pub path: String,
    pub name: Sha256,
    /// What its bytes hash to; `None` when it could not be read (or, sealed, opened).
    pub actual: Option<Sha256>,
    /// What is wrong, and for an unreadable one what to do.
    pub why: String,
}

/// An object's bytes into an anonymous in-memory file with mode `perm` (a sealed object's
/// plaintext: never written to a disk).
pub(crate) fn in_memory(bytes: &[u8], perm: u32) -> Result<File> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let fd = memfd_create(c"rwfs-object", MFdFlags::MFD_CLOEXEC).map_err(|e| Error::io("create memfd", e.into()))?;
    let mut written = 0;
    while written < bytes.len() {
        written += nix::sys::uio::pwrite(&fd, &bytes[written..], written as libc::off_t)
            .map_err(|e| Error::io("write memfd", e.into()))?;
    }
    nix::sys::stat::fchmod(&fd, nix::sys::stat::Mode::from_bits_truncate(perm))
        .map_err(|e| Error::io("chmod memfd", e.into()))?;
    let stat = nix::sys::stat::fstat(&fd).map_err(|e| Error::io("stat memfd", e.into()))?;
    Ok(File::new(fd, crate::durable::FileId { dev: stat.st_dev, ino: stat.st_ino }))
}

/// All of `file`'s bytes.
pub fn read_all(disk: &dyn Disk, file: &File) -> Result<Vec<u8>> {
    let len = disk.file_stat(file).step("stat object")?.size;
    let mut buf = vec![0u8; usize::try_from(len).map_err(|_| Error::from(Reason::NoSpace))?];
    let mut at = 0;
    while at < buf.len() {
        match disk.read_at(file, &mut buf[at..], at as u64).step("read object")? {
            0 => break,
            n => at += n,
        }
    }
    buf.truncate(at);
    Ok(buf)
}

impl Objects {
    /// Check every object of the store: its plaintext (a sealed one opened with the key) hashed
    /// against its name. Those that do not match or cannot be read, with the number checked.
    /// This is what `rwfs verify` adds to the journal's checks: `restore` refuses a damaged
    /// object, this finds it before anyone needs it.
    pub fn check_all(&self) -> Result<(u64, Vec<BadObject>)> {
        let mut checked = 0;
        let mut bad = Vec::new();
        for (sha, _) in self.list()? {
            checked += 1;
            if let Err((actual, why)) = self.check(&sha) {
                let hex = sha.to_hex();
                let path = format!("{OBJECTS_DIR}/{}/{hex}", &hex[..2]);
                bad.push(BadObject { path, name: sha, actual, why });
            }
        }
        Ok((checked, bad))
    }
}

/// Open directory `name` inside `parent`, creating it (durably) if missing.
pub fn open_or_create(disk: &dyn Disk, parent: &Dir, name: &str) -> Result<Dir> {
    match disk.stat(parent, name).step("stat directory")? {
        Some(stat) if stat.kind == FileKind::Dir => {}
        Some(_) => return Err(Error::from(Reason::NotADirectory).at(parent.join(name))),
        None => match disk.mkdir(parent, name, 0o755) {
            Ok(()) => disk.sync_dir(parent).step("fsync parent of new directory")?,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(e) => return Err(Error::io("create directory", e).at(parent.join(name))),
        },
    }
    disk.open_dir(parent, name).map_err(|e| Error::io("open directory", e).at(parent.join(name)))
}
