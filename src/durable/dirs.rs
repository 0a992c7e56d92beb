//! Directories kept open by their path beneath the root, so a burst of requests in one
//! directory (a `cp -r`, a `git clone`, a formatter's rewrite) opens it once, not once per
//! lookup, create and commit — and what a new entry inherits from each of them
//! ([`Inheritable`]: its device, mode, group and default ACL), read once per burst, not once per entry.
//!
//! [`KeptDirs`] belongs to a root [`Dir`](super::Dir) and is shared by every directory opened
//! beneath it; [`OsDisk`](super::OsDisk) consults it in `open_dir` and tells it of every
//! change it makes to the namespace (renames, exchanges, unlinks, rmdirs) and to an entry's
//! mode, owner or extended attributes.
//!
//! Invariants:
//! - Only paths that resolved without a symlink are kept, under their canonical path, so a
//!   path means the same directory as long as no component of it is renamed, removed or
//!   replaced.
//! - Every such change made through the disk forgets what is kept for the entry it touched
//!   and everything below it before it returns; a lookup that began before the change cannot
//!   keep what it read (the generation check in [`KeptDirs::keep`] and
//!   [`KeptDirs::keep_inheritable`]).
//! - A change made behind rwfs's back (another process renaming a directory in the backing
//!   tree itself, not through the mount, or `setfacl` there) is not seen: what is kept is
//!   trusted for at most [`KEEP_FOR`], then read again. The kernel's own view of the mount
//!   (its entry cache) is older than that.
//! - At most [`MAX_KEPT`] directories are kept (all are dropped when the table is full), and
//!   an expired one's descriptor is closed at the next miss. So an idle daemon may still hold
//!   the directories of its last burst open: a file system mounted on one of them reports busy
//!   to a plain `umount` until then, as it does for a shell whose working directory it is.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long an opened directory is trusted to still be at its path.
pub const KEEP_FOR: Duration = Duration::from_secs(1);
/// Most directories kept open at once.
pub const MAX_KEPT: usize = 256;

/// What a directory gives a new entry made in it (see `engine/inherit.rs`): read from its
/// `lstat` and its `system.posix_acl_default`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inheritable {
    /// The filesystem the directory is on, where a new entry is made (a draft made elsewhere
    /// is copied in, not renamed).
    pub dev: u64,
    /// The directory's permission bits (its setgid bit is what matters).
    pub perm: u32,
    pub gid: u32,
    /// Its default ACL, as the extended attribute's bytes.
    pub default_acl: Option<Vec<u8>>,
}

/// The directories kept open beneath one root (see the module documentation).
#[derive(Default)]
pub struct KeptDirs {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    kept: BTreeMap<String, Entry>,
    /// How many forgets were made; a lookup that missed under an older generation may keep
    /// what it read only if none of the forgets since covers its path.
    generation: u64,
    /// The paths of the last [`RECENT`] forgets, oldest first.
    recent: VecDeque<String>,
}

/// Forgets remembered for the race check (a lookup racing with more keeps nothing).
const RECENT: usize = 16;

struct Entry {
    fd: Arc<OwnedFd>,
    at: Instant,
    inheritable: Option<Inheritable>,
}

/// A lookup: the descriptor kept for the path, or the generation a miss saw.
pub enum Kept {
    Hit(Arc<OwnedFd>),
    Miss(u64),
}

impl KeptDirs {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The directory kept for `rel` if it is still fresh.
    pub fn get(&self, rel: &str) -> Kept {
        let mut table = self.table();
        match table.fresh(rel) {
            Some(entry) => Kept::Hit(entry.fd.clone()),
            None => Kept::Miss(table.generation),
        }
    }

    /// Keep `fd`, just opened at `rel`, unless a change was made since the miss of `generation`.
    pub fn keep(&self, rel: String, fd: Arc<OwnedFd>, generation: u64) {
        let mut table = self.table();
        if table.raced(&rel, generation) {
            return;
        }
        // Expired descriptors are closed here, at the next miss (a directory is held open no
        // longer than the burst that used it, and this one).
        table.kept.retain(|_, entry| entry.at.elapsed() < KEEP_FOR);
        if table.kept.len() >= MAX_KEPT {
            table.kept.clear();
        }
        table.kept.insert(rel, Entry { fd, at: Instant::now(), inheritable: None });
    }

    /// What the directory kept at `rel` gives new entries, if it was read while kept; else the
    /// generation to read it under.
    pub fn inheritable(&self, rel: &str) -> Result<Inheritable, u64> {
        let mut table = self.table();
        match table.fresh(rel).and_then(|entry| entry.inheritable.clone()) {
            Some(known) => Ok(known),
            None => Err(table.generation),
        }
    }

    /// Remember what the directory kept at `rel` gives new entries, read under `generation`.
    pub fn keep_inheritable(&self, rel: &str, inheritable: Inheritable, generation: u64) {
        let mut table = self.table();
        if table.raced(rel, generation) {
            return;
        }
        if let Some(entry) = table.kept.get_mut(rel) {
            entry.inheritable = Some(inheritable);
        }
    }

    /// `rel` was renamed, replaced or removed, or its mode, owner or extended attributes
    /// changed: forget it and everything below it.
    pub fn forget(&self, rel: &str) {
        let mut table = self.table();
        table.generation += 1;
        if table.recent.len() == RECENT {
            table.recent.pop_front();
        }
        table.recent.push_back(rel.to_string());
        if table.kept.is_empty() {
            return;
        }
        let gone: Vec<String> = table
            .kept
            .range::<str, _>((Bound::Included(rel), Bound::Unbounded))
            .map(|(path, _)| path)
            .take_while(|path| path.starts_with(rel))
            .filter(|path| covers(rel, path))
            .cloned()
            .collect();
        for path in gone {
            table.kept.remove(&path);
        }
    }
}

/// Is `path` at or below `above`?
fn covers(above: &str, path: &str) -> bool {
    above.is_empty() || path == above || path.strip_prefix(above).is_some_and(|rest| rest.starts_with('/'))
}

impl Table {
    /// Was something at or above `rel` forgotten since `generation`?
    fn raced(&self, rel: &str, generation: u64) -> bool {
        let since = usize::try_from(self.generation - generation).unwrap_or(usize::MAX);
        since > self.recent.len() || self.recent.iter().rev().take(since).any(|above| covers(above, rel))
    }

    /// The entry kept at `rel` while it is fresh (a stale one is dropped).
    fn fresh(&mut self, rel: &str) -> Option<&Entry> {
        if self.kept.get(rel).is_some_and(|entry| entry.at.elapsed() >= KEEP_FOR) {
            self.kept.remove(rel);
        }
        self.kept.get(rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd() -> Arc<OwnedFd> {
        Arc::new(std::fs::File::open("/").unwrap().into())
    }

    fn hit(dirs: &KeptDirs, rel: &str) -> bool {
        matches!(dirs.get(rel), Kept::Hit(_))
    }

    fn keep(dirs: &KeptDirs, rel: &str) {
        let Kept::Miss(generation) = dirs.get(rel) else { panic!("{rel} already kept") };
        dirs.keep(rel.to_string(), fd(), generation);
    }

    #[test]
    fn a_change_forgets_the_path_and_what_is_below_it_and_nothing_else() {
        let dirs = KeptDirs::default();
        for rel in ["a", "a/b", "a/b/c", "a-b", "a.b", "ab", "b"] {
            keep(&dirs, rel);
        }
        dirs.forget("a");
        for (rel, kept) in
            [("a", false), ("a/b", false), ("a/b/c", false), ("a-b", true), ("a.b", true), ("ab", true), ("b", true)]
        {
            assert_eq!(hit(&dirs, rel), kept, "{rel}");
        }
        dirs.forget("a.b/x");
        assert!(hit(&dirs, "a.b"));
    }

    #[test]
    fn a_lookup_that_raced_with_a_change_above_it_keeps_nothing() {
        let dirs = KeptDirs::default();
        let Kept::Miss(generation) = dirs.get("a/b") else { panic!() };
        dirs.forget("a");
        dirs.keep("a/b".into(), fd(), generation);
        assert!(!hit(&dirs, "a/b"));
        // A change elsewhere does not stop it.
        let Kept::Miss(generation) = dirs.get("a/b") else { panic!() };
        dirs.forget("a/c");
        dirs.forget("ab");
        dirs.keep("a/b".into(), fd(), generation);
        assert!(hit(&dirs, "a/b"));
        // Not knowing does: more changes than are remembered.
        let Kept::Miss(generation) = dirs.get("c") else { panic!() };
        for i in 0..=RECENT {
            dirs.forget(&format!("x{i}"));
        }
        dirs.keep("c".into(), fd(), generation);
        assert!(!hit(&dirs, "c"));
    }

    #[test]
    fn what_a_directory_gives_is_kept_with_it_and_forgotten_with_it() {
        let dirs = KeptDirs::default();
        let given = Inheritable { dev: 1, perm: 0o2775, gid: 7, default_acl: None };
        // Not kept: nowhere to remember it.
        let Err(generation) = dirs.inheritable("a") else { panic!() };
        dirs.keep_inheritable("a", given.clone(), generation);
        assert!(dirs.inheritable("a").is_err());
        keep(&dirs, "a");
        let Err(generation) = dirs.inheritable("a") else { panic!() };
        dirs.keep_inheritable("a", given.clone(), generation);
        assert_eq!(dirs.inheritable("a"), Ok(given.clone()));
        // A chmod of `a` (or of anything above it) forgets it; one that raced with the read
        // keeps nothing.
        dirs.forget("a");
        assert!(dirs.inheritable("a").is_err());
        keep(&dirs, "a");
        let Err(generation) = dirs.inheritable("a") else { panic!() };
        dirs.forget("a/x");
        dirs.forget("");
        keep(&dirs, "a");
        dirs.keep_inheritable("a", given, generation);
        assert!(dirs.inheritable("a").is_err());
    }

    #[test]
    fn a_full_table_starts_again() {
        let dirs = KeptDirs::default();
        for i in 0..MAX_KEPT {
            keep(&dirs, &format!("d{i}"));
        }
        keep(&dirs, "last");
        assert!(hit(&dirs, "last"));
        assert!(!hit(&dirs, "d0"));
    }
}
