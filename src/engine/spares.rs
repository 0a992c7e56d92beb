//! Spare temp files: the inode of a small commit allocated before the commit asks for it.
//!
//! Allocating an inode can be the slowest step of a small commit: ext4 without a journal (the
//! CI machines' root filesystem) skips recently deleted inodes one by one, 0.1–0.9 ms per
//! allocation measured there after a tree was removed. So after a commit of bytes into a
//! directory, a background thread creates one anonymous temp file (`O_TMPFILE`) in that same
//! directory, and the next commit there stages into it instead of allocating on its own time.
//!
//! Invariants:
//! - A spare is created in the directory it will be linked into, by the same call a commit
//!   makes ([`Disk::create_temp`]), so it has what a create there gets: owner, setgid group,
//!   default ACL, security label, mode under the process's umask.
//! - A spare holds a descriptor of its directory. While it does, that directory's inode cannot
//!   be freed, so no other directory can have its (device, inode): matching by them is exact.
//! - Only anonymous temps are kept: a named one would show in the user's tree. A filesystem
//!   without `O_TMPFILE` turns spares off for good.
//! - Nothing is durable about a spare (an unlinked inode, freed by a crash or by dropping it),
//!   so the commit protocol and its crash guarantees are unchanged.
//! - At most [`MAX_DIRS`] spares, each dropped after [`MAX_AGE`] unused. Only engines on the
//!   real disk have spares ([`Options::disk`](crate::history::Options::disk) unset): the fault and crash tests'
//!   hooked disks see exactly the calls a commit makes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::durable::{Dir, Disk, FileId, Temp};
use crate::wake::{Popped, Queue};

/// Directories with a spare at once.
const MAX_DIRS: usize = 16;
/// A spare unused this long is dropped.
const MAX_AGE: Duration = Duration::from_secs(10);

/// The spares of one engine (or none: [`Spares::off`]).
pub(crate) struct Spares {
    shelf: Arc<Mutex<Shelf>>,
    requests: Option<Arc<Queue<Dir>>>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shelf {
    by_dir: HashMap<FileId, Spare>,
    unsupported: bool,
}

struct Spare {
    /// Keeps the directory's inode (and so its number) alive.
    _dir: Dir,
    temp: Temp,
    made: Instant,
}

impl Spares {
    /// No spares: every commit allocates its own temp file.
    pub(crate) fn off() -> Spares {
        Spares { shelf: Arc::default(), requests: None, thread: None }
    }

    /// Spares made by a thread of their own; `off()` if it cannot start.
    pub(crate) fn start(disk: Arc<dyn Disk>) -> Spares {
        let shelf = Arc::<Mutex<Shelf>>::default();
        let requests = Arc::new(Queue::bounded(MAX_DIRS));
        let (worker, rx) = (shelf.clone(), requests.clone());
        match std::thread::Builder::new().name("rwfs-spares".into()).spawn(move || make(&*disk, &worker, &rx)) {
            Ok(thread) => Spares { shelf, requests: Some(requests), thread: Some(thread) },
            Err(e) => {
                tracing::warn!(error = %e, "no spare temp files: could not start their thread");
                Spares::off()
            }
        }
    }

    /// The spare temp file of `dir`, if there is one.
    pub(crate) fn take(&self, disk: &dyn Disk, dir: &Dir) -> Option<Temp> {
        if self.requests.is_none() || lock(&self.shelf).by_dir.is_empty() {
            return None;
        }
        let key = identity(disk, dir)?;
        lock(&self.shelf).by_dir.remove(&key).map(|spare| spare.temp)
    }

    /// Ask for a spare in `dir` (a commit just happened there). Never waits.
    pub(crate) fn prepare(&self, dir: &Dir) {
        let Some(requests) = &self.requests else { return };
        if lock(&self.shelf).unsupported {
            return;
        }
        if let Ok(dir) = dir.try_clone() {
            // A full queue means the thread is busy enough: skip this one.
            let _ = requests.push(dir);
        }
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        if let Some(requests) = self.requests.take() {
            requests.close();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: one spare per requested directory that has none, until the engine goes.
fn make(disk: &dyn Disk, shelf: &Mutex<Shelf>, requests: &Queue<Dir>) {
    loop {
        let dir = match requests.pop(Some(MAX_AGE)) {
            Popped::Item(dir) => Some(dir),
            Popped::TimedOut => None,
            Popped::Closed => return,
        };
        lock(shelf).by_dir.retain(|_, spare| spare.made.elapsed() < MAX_AGE);
        let Some(dir) = dir else { continue };
        let Some(key) = identity(disk, &dir) else { continue };
        if lock(shelf).by_dir.contains_key(&key) {
            continue;
        }
        let temp = match disk.create_temp(&dir, 0o666) {
            Ok(temp) => temp,
            Err(e) => {
                tracing::debug!(dir = dir.rel(), error = %e, "no spare temp file");
                continue;
            }
        };
        if let Some(name) = &temp.name {
            // No O_TMPFILE here: a named spare would be visible. Give up on spares.
            let _ = disk.unlink(&dir, name);
            lock(shelf).unsupported = true;
            return;
        }
        let mut shelf = lock(shelf);
        if shelf.by_dir.len() >= MAX_DIRS
            && let Some(oldest) = shelf.by_dir.iter().min_by_key(|(_, s)| s.made).map(|(k, _)| *k)
        {
            shelf.by_dir.remove(&oldest);
        }
        shelf.by_dir.insert(key, Spare { _dir: dir, temp, made: Instant::now() });
    }
}

/// Which directory `dir` is.
fn identity(disk: &dyn Disk, dir: &Dir) -> Option<FileId> {
    disk.stat(dir, ".").ok().flatten().map(|s| s.id)
}

fn lock(shelf: &Mutex<Shelf>) -> std::sync::MutexGuard<'_, Shelf> {
    shelf.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;
    use crate::durable::OsDisk;

    /// The spare of `dir`, once the thread has made it.
    fn spare_of(spares: &Spares, disk: &dyn Disk, dir: &Dir) -> Temp {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(temp) = spares.take(disk, dir) {
                return temp;
            }
            assert!(Instant::now() < deadline, "no spare made");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_spare_is_anonymous_made_in_its_directory_and_taken_once() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("shared")).unwrap();
        std::fs::create_dir(tmp.path().join("other")).unwrap();
        // A setgid directory of another group: a create there takes the directory's group.
        std::os::unix::fs::chown(tmp.path().join("shared"), None, Some(4242)).unwrap();
        std::fs::set_permissions(tmp.path().join("shared"), std::fs::Permissions::from_mode(0o2775)).unwrap();
        let disk: Arc<dyn Disk> = Arc::new(OsDisk);
        let root = disk.open_root(tmp.path()).unwrap();
        let shared = disk.open_dir(&root, "shared").unwrap();
        let other = disk.open_dir(&root, "other").unwrap();
        let spares = Spares::start(disk.clone());

        assert!(spares.take(&*disk, &shared).is_none(), "nothing asked for yet");
        spares.prepare(&shared);
        let temp = spare_of(&spares, &*disk, &shared);
        assert!(temp.name.is_none(), "anonymous: nothing shows in the tree");
        assert!(spares.take(&*disk, &shared).is_none(), "taken once");
        assert!(spares.take(&*disk, &other).is_none(), "another directory's is not this one's");
        let made = disk.file_stat(&temp.file).unwrap();
        assert_eq!(made.gid, 4242, "what a create in that directory gets");
        disk.link(&temp.file, &shared, "linked").unwrap();
        let meta = std::fs::metadata(tmp.path().join("shared/linked")).unwrap();
        assert_eq!((meta.gid(), meta.len()), (4242, 0));
        assert_eq!(std::fs::read_dir(tmp.path().join("shared")).unwrap().count(), 1);
    }

    #[test]
    fn spares_off_never_make_one() {
        let tmp = tempfile::tempdir().unwrap();
        let disk: Arc<dyn Disk> = Arc::new(OsDisk);
        let root = disk.open_root(tmp.path()).unwrap();
        let spares = Spares::off();
        spares.prepare(&root);
        std::thread::sleep(Duration::from_millis(50));
        assert!(spares.take(&*disk, &root).is_none());
    }
}
