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
        let mut hasher = DefaultHasher::new();
        path.hash(&mut hasher);
        let stripe = &self.stripes[hasher.finish() as usize % STRIPES];
        // The guarded data is `()`: a panic elsewhere cannot leave it inconsistent.
        stripe.lock().unwrap_or_else(PoisonError::into_inner)
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
