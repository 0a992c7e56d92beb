//! Per-path serialisation and the digest cache.
//!
//! [`PathLocks`] serialises every change to one path (striped: a fixed array of mutexes indexed
//! by the path's hash, so memory is bounded and no lock is ever created or removed). Two paths
//! may share a stripe; that only costs concurrency, never correctness, as long as whoever needs
//! two paths takes them with [`PathLocks::lock_pair`] (one stripe once, two in stripe order).
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
        self.take(stripe_of(path.as_str()))
    }

    /// Hold the locks of two paths. Two paths on one stripe take it once (locking it twice
    /// would wait on itself), and two stripes are always taken in index order, so two callers
    /// locking pairs can never wait on each other (ordering by path would not do: paths in
    /// order can map to stripes in either order).
    pub fn lock_pair(&self, a: &WorkspacePath, b: &WorkspacePath) -> (MutexGuard<'_, ()>, Option<MutexGuard<'_, ()>>) {
        self.lock_stripes(stripe_of(a.as_str()), stripe_of(b.as_str()))
    }

    fn lock_stripes(&self, a: usize, b: usize) -> (MutexGuard<'_, ()>, Option<MutexGuard<'_, ()>>) {
        let (low, high) = (a.min(b), a.max(b));
        let first = self.take(low);
        (first, (high != low).then(|| self.take(high)))
    }

    fn take(&self, stripe: usize) -> MutexGuard<'_, ()> {
        // The guarded data is `()`: a panic elsewhere cannot leave it inconsistent.
        self.stripes[stripe].lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn stripe_of(path: &str) -> usize {
    let mut hasher = DefaultHasher::new();
    path.hash(&mut hasher);
    hasher.finish() as usize % STRIPES
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
    fn a_pair_on_one_stripe_is_locked_once_and_pairs_in_any_order_do_not_deadlock() {
        // Two names on one stripe exist (1024 stripes): a rename between them once waited on
        // itself forever.
        let names: Vec<String> = (0..5000).map(|i| format!("d/f{i}")).collect();
        let mut seen = HashMap::new();
        let (a, b) = names
            .iter()
            .find_map(|n| seen.insert(stripe_of(n), n.clone()).map(|other| (other, n.clone())))
            .expect("a shared stripe among 5000 names");
        assert_ne!(a, b);
        let locks = std::sync::Arc::new(PathLocks::new());
        let s = stripe_of(&a);
        assert_eq!(s, stripe_of(&b));
        let (_one, two) = locks.lock_stripes(s, s);
        assert!(two.is_none(), "one stripe, one lock");
        drop((_one, two));
        // Two threads locking the same two stripes in opposite argument order.
        let threads: Vec<_> = [(3, 700), (700, 3)]
            .into_iter()
            .map(|(x, y)| {
                let locks = locks.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let _held = locks.lock_stripes(x, y);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
