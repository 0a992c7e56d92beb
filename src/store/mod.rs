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

use std::collections::{BTreeSet, HashMap};
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
}

/// What [`Objects::remove`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    pub objects: u64,
    pub bytes: u64,
}

impl Objects {
    /// Open (creating durably) `objects/` inside `state`.
    pub fn open(disk: Arc<dyn Disk>, state: &Dir) -> Result<Objects> {
        let dir = open_or_create(&*disk, state, OBJECTS_DIR)?;
        let objects = Objects { disk, dir, subdirs: Mutex::default(), dirty: Mutex::default() };
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

    /// Take the inode at `from/name` into the store as `sha` (lazily durable).
    pub fn adopt(&self, from: &Dir, name: &str, sha: Sha256) -> Result<()> {
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

    fn put(&self, source: Source<'_>, sha: Sha256) -> Result<()> {
        let sub = self.subdir(&sha)?;
        let staged = stage(&*self.disk, &sub, source, &Default::default())?;
        if staged.sha256() != sha {
            let actual = staged.sha256();
            staged.abandon(&*self.disk, &sub);
            return Err(Reason::ObjectCorrupt { sha, actual }.into());
        }
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

    /// Open an object for reading; `None` when it is not (or no longer) stored.
    pub fn open_object(&self, sha: &Sha256) -> Result<Option<File>> {
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
    /// What its bytes hash to; `None` when it could not be read.
    pub actual: Option<Sha256>,
}

/// Hash every object of the store in `state` (read-only: a missing store is an empty one), and
/// return those whose bytes do not match their names, with the number checked. This is what
/// `rwfs verify` adds to the journal's checks: `restore` refuses a damaged object, this finds
/// it before anyone needs it.
pub fn check_objects(disk: &dyn Disk, state: &Dir) -> Result<(u64, Vec<BadObject>)> {
    let dir = match disk.open_dir(state, OBJECTS_DIR) {
        Ok(dir) => dir,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok((0, Vec::new())),
        Err(e) => return Err(Error::io("open objects directory", e)),
    };
    let mut checked = 0;
    let mut bad = Vec::new();
    for (sub_name, kind) in disk.list(&dir).step("list objects")? {
        let Some(sub_name) = sub_name.to_str().filter(|n| n.len() == 2 && kind == FileKind::Dir) else {
            continue;
        };
        let sub = disk.open_dir(&dir, sub_name).step("open objects directory")?;
        for (name, kind) in disk.list(&sub).step("list objects")? {
            let Some((text, sha)) = name.to_str().and_then(|n| Some((n, n.parse::<Sha256>().ok()?))) else {
                continue;
            };
            if kind != FileKind::File {
                continue;
            }
            checked += 1;
            let actual = disk.open_read(&sub, text).and_then(|file| crate::durable::hash_file(disk, &file)).ok();
            if actual.map(|(a, _)| a) != Some(sha) {
                let path = format!("{OBJECTS_DIR}/{sub_name}/{text}");
                bad.push(BadObject { path, name: sha, actual: actual.map(|(a, _)| a) });
            }
        }
    }
    Ok((checked, bad))
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
