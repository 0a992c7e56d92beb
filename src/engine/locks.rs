//! Per-path serialisation and the digest cache.
//!
//! [`PathLocks`] serialises every change to one path (striped: a fixed array of mutexes indexed
//! by the path's hash, so memory is bounded and no lock is ever created or removed). Two paths
//! may share a stripe; that only costs concurrency, never correctness.
//!
//! [`DigestCache`] remembers the sha256 of files rwfs wrote or hashed, keyed by inode identity
//! and validated by size, mtime and ctime, so an overwrite does not re-read the version it
//! replaces. The kernel sets ctime on every change to an inode and it cannot be set from user
//! space, so a stale entry requires an in-place edit by another process within one timestamp
//! tick of ours with an unchanged size; through the mount there are no such edits, and versions
//! restored from `objects/` are re-verified as they are read.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher as _};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::durable::{FileId, Stat, WorkspacePath};
use crate::sha::Sha256;

const STRIPES: usize = 1024;
const CACHE_CAPACITY: usize = 65_536;

pub struct PathLocks {
    stripes: Vec<Mutex<()>>,
}

impl PathLocks {
    pub fn new() -> PathLocks {
        PathLocks { stripes: (0..STRIPES).map(|_| Mutex::new(())).collect() }
    }

    /// Hold the lock of `path` for the guard's lifetime.
    pub fn lock(&self, path: &WorkspacePath) -> MutexGuard<'_, ()> {
        self.lock_stripe(Self::stripe(path))
    }

    /// Hold the locks of two paths (a rename). Stripes are taken in index order, and a stripe
    /// the two paths share is taken once: ordering by path instead would let two renames take
    /// the same two stripes in opposite orders, and locking a shared stripe twice would
    /// deadlock the caller on itself.
    pub fn lock_pair(&self, a: &WorkspacePath, b: &WorkspacePath) -> (MutexGuard<'_, ()>, Option<MutexGuard<'_, ()>>) {
        let (x, y) = (Self::stripe(a), Self::stripe(b));
        let (low, high) = (x.min(y), x.max(y));
        let first = self.lock_stripe(low);
        let second = (high != low).then(|| self.lock_stripe(high));
        (first, second)
    }

    fn stripe(path: &WorkspacePath) -> usize {
        let mut hasher = DefaultHasher::new();
        path.hash(&mut hasher);
        hasher.finish() as usize % STRIPES
    }

    fn lock_stripe(&self, stripe: usize) -> MutexGuard<'_, ()> {
        // The guarded data is `()`: a panic elsewhere cannot leave it inconsistent.
        self.stripes[stripe].lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Validity {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl From<&Stat> for Validity {
    fn from(s: &Stat) -> Validity {
        Validity { size: s.size, mtime_ns: s.mtime_ns, ctime_ns: s.ctime_ns }
    }
}

#[derive(Default)]
pub struct DigestCache {
    map: Mutex<HashMap<FileId, (Validity, Sha256)>>,
}

impl DigestCache {
    pub fn get(&self, stat: &Stat) -> Option<Sha256> {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(&stat.id) {
            Some((valid, sha)) if *valid == Validity::from(stat) => Some(*sha),
            _ => None,
        }
    }

    pub fn put(&self, stat: &Stat, sha: Sha256) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= CACHE_CAPACITY {
            map.clear();
        }
        map.insert(stat.id, (Validity::from(stat), sha));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_sharing_a_stripe_locks_it_once() {
        let locks = PathLocks::new();
        let a = WorkspacePath::unchecked("d/f0");
        let b = (1..)
            .map(|i| WorkspacePath::unchecked(&format!("d/f{i}")))
            .find(|b| PathLocks::stripe(b) == PathLocks::stripe(&a))
            .expect("some name shares a's stripe");
        // Would never return if the shared stripe were locked twice.
        let (first, second) = locks.lock_pair(&a, &b);
        assert!(second.is_none());
        drop(first);
        let _both = locks.lock_pair(&b, &a);
    }

    #[test]
    fn a_pair_takes_the_lower_stripe_first() {
        let locks = PathLocks::new();
        let a = WorkspacePath::unchecked("x");
        let b = (0..)
            .map(|i| WorkspacePath::unchecked(&format!("y{i}")))
            .find(|b| PathLocks::stripe(b) > PathLocks::stripe(&a))
            .expect("a higher stripe");
        // Named second, the path of the lower stripe is still the one held by the first guard.
        let (first, second) = locks.lock_pair(&b, &a);
        drop(second);
        assert!(locks.stripes[PathLocks::stripe(&a)].try_lock().is_err());
        assert!(locks.stripes[PathLocks::stripe(&b)].try_lock().is_ok());
        drop(first);
    }
}
