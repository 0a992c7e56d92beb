//! A disk [`Intercept`] that records every change the engine makes, and a model that rebuilds the
//! disk images a crash after any prefix of those changes may leave (ALICE-style).
//!
//! Events are recorded after each call returns. Calls of one thread keep their order; a call on
//! another thread may be recorded slightly after it happened, which only makes the model treat
//! it as less durable than it was (more crash states, never fewer).
//!
//! Persistence model (the contract `durable/disk.rs` states):
//! - file data is durable after `sync`/`sync_data` of that inode; unsynced writes to an inode
//!   survive as a prefix of themselves, and the last surviving write may be torn in half;
//! - a directory's changes are durable after `sync_dir` of that directory; unsynced ones survive
//!   as a prefix per directory (each directory's changes are ordered), independently of other
//!   directories and of file data;
//! - a rename between two directories is atomic (in both or in neither), and durable once either
//!   directory is synced after it;
//! - after `sync_fs` every earlier change is durable (a test's workspace is on one filesystem).
//!
//! What the image holds is names, regular files' bytes and directories, so of [`Meta`]'s changes
//! it models `create_new` (a named create), `hard_link` of a regular file (a link), `rmdir` and
//! `copy_range` (a write of the copied bytes at offset 0). Entries made by `symlink` and `mknod`,
//! and mode, owner, times and extended attributes (`set_attrs` and [`Meta`]'s setters), are not
//! modelled: they are counted as changes (so they can be failed) but leave no event.
//!
//! [`Meta`]: rwfs::durable::Meta

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rwfs::durable::{Disk, File, FileId, FileKind, OsDisk, Rename};

use super::hooked::{Call, Created, Hooked, Intercept};

/// A model inode number (real inode numbers can be reused during a run).
pub type Ino = u64;

#[derive(Debug, Clone)]
pub enum Event {
    Mkdir {
        dir: String,
        name: String,
    },
    /// A new inode; `name` is set for a named temp file (a directory change too).
    Create {
        ino: Ino,
        dir: String,
        name: Option<String>,
    },
    Write {
        ino: Ino,
        offset: u64,
        data: Vec<u8>,
    },
    SetLen {
        ino: Ino,
        len: u64,
    },
    Sync {
        ino: Ino,
    },
    SyncDir {
        dir: String,
    },
    /// `syncfs`: every earlier change durable (the tests use one filesystem).
    SyncFs,
    /// A name for an existing inode: an anonymous temp file's first, or a hard link.
    Link {
        ino: Ino,
        dir: String,
        name: String,
    },
    Rename {
        from: String,
        from_name: String,
        to: String,
        to_name: String,
        how: Rename,
    },
    Unlink {
        dir: String,
        name: String,
    },
    Rmdir {
        dir: String,
        name: String,
    },
    /// Test marker: a commit with this effect started.
    Intent {
        id: usize,
    },
    /// Test marker: that commit was acknowledged.
    Ack {
        id: usize,
    },
    /// Test marker: the first `upto` acknowledged commits are durable (an fsync returned).
    Durable {
        upto: usize,
    },
}

impl Event {
    /// Directories whose entries this event changes.
    fn dirs(&self) -> Vec<&str> {
        match self {
            Event::Mkdir { dir, .. }
            | Event::Link { dir, .. }
            | Event::Unlink { dir, .. }
            | Event::Rmdir { dir, .. } => vec![dir],
            Event::Create { dir, name: Some(_), .. } => vec![dir],
            Event::Rename { from, to, .. } if from == to => vec![from],
            Event::Rename { from, to, .. } => vec![from, to],
            _ => vec![],
        }
    }
}

/// The initial durable image of a workspace.
#[derive(Debug, Clone, Default)]
pub struct Image {
    /// Directory path ("" = root) → entries.
    pub dirs: BTreeMap<String, BTreeMap<String, Entry>>,
    pub inodes: HashMap<Ino, Vec<u8>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    File(Ino),
    Dir,
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

impl Image {
    /// The inodes some directory entry of the image names (the files a crash state shows).
    fn visible_files(&self) -> BTreeSet<Ino> {
        self.dirs
            .values()
            .flat_map(|m| m.values())
            .filter_map(|e| if let Entry::File(ino) = e { Some(*ino) } else { None })
            .collect()
    }

    /// Snapshot a real directory tree (regular files and directories only).
    pub fn snapshot(root: &Path) -> (Image, HashMap<FileId, Ino>) {
        let mut image = Image::default();
        let mut inos: HashMap<FileId, Ino> = HashMap::new();
        fn walk(base: &Path, rel: &str, image: &mut Image, inos: &mut HashMap<FileId, Ino>) {
            let mut entries = BTreeMap::new();
            for entry in std::fs::read_dir(base.join(rel)).unwrap() {
                let entry = entry.unwrap();
                let name = entry.file_name().into_string().unwrap();
                let meta = std::fs::symlink_metadata(entry.path()).unwrap();
                if meta.is_dir() {
                    entries.insert(name.clone(), Entry::Dir);
                    walk(base, &join(rel, &name), image, inos);
                } else if meta.is_file() {
                    let id = FileId { dev: meta.dev(), ino: meta.ino() };
                    let next = inos.len() as Ino + 1;
                    let ino = *inos.entry(id).or_insert(next);
                    image.inodes.insert(ino, std::fs::read(entry.path()).unwrap());
                    entries.insert(name, Entry::File(ino));
                }
            }
            image.dirs.insert(rel.to_string(), entries);
        }
        walk(root, "", &mut image, &mut inos);
        (image, inos)
    }

    /// Write the image to `root` (which must exist and be empty); hard links are preserved.
    pub fn materialize(&self, root: &Path) {
        let mut placed: HashMap<Ino, std::path::PathBuf> = HashMap::new();
        self.materialize_dir(root, "", &mut placed);
    }

    fn materialize_dir(&self, root: &Path, rel: &str, placed: &mut HashMap<Ino, std::path::PathBuf>) {
        let Some(entries) = self.dirs.get(rel) else { return };
        for (name, entry) in entries {
            let path = root.join(join(rel, name));
            match entry {
                Entry::Dir => {
                    std::fs::create_dir(&path).unwrap();
                    self.materialize_dir(root, &join(rel, name), placed);
                }
                Entry::File(ino) => match placed.get(ino) {
                    Some(first) => std::fs::hard_link(first, &path).unwrap(),
                    None => {
                        std::fs::write(&path, &self.inodes[ino]).unwrap();
                        placed.insert(*ino, path);
                    }
                },
            }
        }
    }

    /// A fingerprint of the visible image (names, kinds, bytes, hard-link groups).
    pub fn fingerprint(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut groups: HashMap<Ino, usize> = HashMap::new();
        self.fingerprint_dir("", &mut out, &mut groups);
        out
    }

    fn fingerprint_dir(&self, rel: &str, out: &mut Vec<u8>, groups: &mut HashMap<Ino, usize>) {
        let Some(entries) = self.dirs.get(rel) else { return };
        for (name, entry) in entries {
            out.extend_from_slice(join(rel, name).as_bytes());
            match entry {
                Entry::Dir => {
                    out.extend_from_slice(b"/\0");
                    self.fingerprint_dir(&join(rel, name), out, groups);
                }
                Entry::File(ino) => {
                    let next = groups.len();
                    let group = *groups.entry(*ino).or_insert(next);
                    out.extend_from_slice(format!("\0{group}\0").as_bytes());
                    out.extend_from_slice(rwfs::sha::Sha256::of(&self.inodes[ino]).as_bytes());
                }
            }
        }
    }
}

/// Records every change the engine makes (use as `Arc<Hooked<Recorder>>`), and can fail the
/// n-th change instead of performing it.
pub struct Recorder {
    state: Mutex<State>,
    /// Run once, on the thread making it, before the next file sync (see [`Recorder::on_next_sync`]).
    on_sync: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

struct State {
    events: Vec<Event>,
    inos: HashMap<FileId, Ino>,
    next_ino: Ino,
    /// Changes performed so far, and the one to fail instead (with this errno).
    changes: usize,
    fail: Option<(usize, i32)>,
}

impl Recorder {
    /// Start recording on top of a workspace whose durable state was snapshot as `inos`.
    pub fn new(inos: HashMap<FileId, Ino>) -> Arc<Hooked<Recorder>> {
        let next_ino = inos.values().copied().max().unwrap_or(0) + 1;
        let state = State { events: Vec::new(), inos, next_ino, changes: 0, fail: None };
        Arc::new(Hooked(Recorder { state: Mutex::new(state), on_sync: Mutex::new(None) }))
    }

    pub fn events(&self) -> Vec<Event> {
        self.state.lock().unwrap().events.clone()
    }

    pub fn mark(&self, event: Event) {
        self.state.lock().unwrap().events.push(event);
    }

    /// Fail the `n`-th change from now (0-based) with `errno` instead of performing it.
    pub fn fail_change(&self, n: usize, errno: i32) {
        let mut state = self.state.lock().unwrap();
        state.fail = Some((state.changes + n, errno));
    }

    /// Run `hook` before the next file sync, on the thread about to make it (a test's way to act
    /// at a chosen instant of a commit, e.g. while a drain syncs the staged drafts).
    pub fn on_next_sync(&self, hook: impl FnOnce() + Send + 'static) {
        *self.on_sync.lock().unwrap() = Some(Box::new(hook));
    }

    /// Stop failing.
    pub fn clear_failure(&self) {
        self.state.lock().unwrap().fail = None;
    }

    /// Changes performed (or refused) so far.
    pub fn changes(&self) -> usize {
        self.state.lock().unwrap().changes
    }
}

impl State {
    fn ino(&self, file: &File) -> Ino {
        self.ino_of(file.id())
    }

    fn ino_of(&self, id: FileId) -> Ino {
        *self.inos.get(&id).unwrap_or_else(|| panic!("inode {id:?} not known to the model"))
    }

    fn fresh(&mut self, file: &File) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inos.insert(file.id(), ino);
        ino
    }
}

impl Intercept for Recorder {
    fn before(&self, call: &Call<'_>) -> io::Result<()> {
        if matches!(call, Call::Sync { .. } | Call::SyncFs { .. })
            && let Some(hook) = self.on_sync.lock().unwrap().take()
        {
            hook();
        }
        if !call.is_change() {
            return Ok(());
        }
        let mut state = self.state.lock().unwrap();
        let n = state.changes;
        state.changes += 1;
        match state.fail {
            Some((at, errno)) if at == n => Err(io::Error::from_raw_os_error(errno)),
            _ => Ok(()),
        }
    }

    fn after(&self, call: &Call<'_>, created: Option<Created<'_>>) {
        let mut state = self.state.lock().unwrap();
        let event = match *call {
            Call::Stat { .. } | Call::SetAttrs { .. } | Call::SetMeta { .. } => return,
            Call::Symlink { .. } | Call::Mknod { .. } => return,
            Call::Mkdir { dir, name } => Event::Mkdir { dir: dir.rel().into(), name: name.into() },
            Call::CreateTemp { dir } | Call::OpenWrite { dir, .. } | Call::CreateNew { dir, .. } => {
                let Some(created) = created else { return };
                let ino = state.fresh(created.file);
                Event::Create { ino, dir: dir.rel().into(), name: created.name.map(Into::into) }
            }
            Call::Write { file, data, offset } => Event::Write { ino: state.ino(file), offset, data: data.to_vec() },
            Call::SetLen { file, len } => Event::SetLen { ino: state.ino(file), len },
            Call::Sync { file } => Event::Sync { ino: state.ino(file) },
            Call::SyncDir { dir } => Event::SyncDir { dir: dir.rel().into() },
            Call::SyncFs { .. } => Event::SyncFs,
            Call::Link { file, dir, name } => {
                Event::Link { ino: state.ino(file), dir: dir.rel().into(), name: name.into() }
            }
            Call::Rename { from, from_name, to, to_name, how } => Event::Rename {
                from: from.rel().into(),
                from_name: from_name.into(),
                to: to.rel().into(),
                to_name: to_name.into(),
                how,
            },
            Call::Unlink { dir, name } => Event::Unlink { dir: dir.rel().into(), name: name.into() },
            Call::Rmdir { dir, name } => Event::Rmdir { dir: dir.rel().into(), name: name.into() },
            Call::HardLink { to, to_name, .. } => {
                // The new name holds the linked inode now; only regular files are in the image.
                let st = OsDisk.stat(to, to_name).ok().flatten().expect("a hard link just made");
                if st.kind != FileKind::File {
                    return;
                }
                Event::Link { ino: state.ino_of(st.id), dir: to.rel().into(), name: to_name.into() }
            }
            Call::CopyRange { to, len, .. } => {
                let mut data = vec![0; len as usize];
                let mut got = 0;
                while got < data.len() {
                    match OsDisk.read_at(to, &mut data[got..], got as u64).expect("read back a copy") {
                        0 => break,
                        n => got += n,
                    }
                }
                data.truncate(got);
                Event::Write { ino: state.ino(to), offset: 0, data }
            }
        };
        state.events.push(event);
    }
}

/// One way a crash after `prefix` events could have left the disk.
pub struct CrashState {
    pub prefix: usize,
    pub image: Image,
}

/// Every distinct image a crash after each prefix of `events` may leave, starting from `base`.
/// Returns the images (deduplicated by fingerprint) and the number of crash states enumerated.
pub fn crash_states(base: &Image, events: &[Event]) -> (Vec<CrashState>, usize) {
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut out = Vec::new();
    let mut enumerated = 0;
    for prefix in 0..=events.len() {
        let events = &events[..prefix];
        let (per_dir, durable_upto) = dir_changes(events);
        let dirs: Vec<&str> = per_dir.keys().copied().collect();
        let choices: Vec<Vec<usize>> = dirs.iter().map(|d| (durable_upto[d]..=per_dir[d].len()).collect()).collect();
        for cuts in product(&choices) {
            let mut included: BTreeSet<usize> = BTreeSet::new();
            for (d, cut) in dirs.iter().zip(&cuts) {
                included.extend(per_dir[d][..*cut].iter().copied());
            }
            // Cross-directory renames must be in both directories' cuts or in neither.
            let consistent = events.iter().enumerate().all(|(i, e)| {
                let ds = e.dirs();
                if ds.len() < 2 {
                    return true;
                }
                let ins: Vec<bool> = ds
                    .iter()
                    .map(|d| {
                        let k = dirs.iter().position(|x| x == d).unwrap();
                        per_dir[d][..cuts[k]].contains(&i)
                    })
                    .collect();
                ins.iter().all(|&b| b) || ins.iter().all(|&b| !b)
            });
            if !consistent {
                continue;
            }
            let names = apply_names(base, events, &included);
            // File data: only inodes visible in this image matter.
            let visible = names.visible_files();
            let data_choices: Vec<(Ino, Vec<DataChoice>)> =
                visible.iter().map(|&ino| (ino, data_choices(events, ino))).collect();
            let lists: Vec<Vec<usize>> = data_choices.iter().map(|(_, c)| (0..c.len()).collect()).collect();
            for pick in product(&lists) {
                enumerated += 1;
                let mut image = names.clone();
                for ((ino, choices), k) in data_choices.iter().zip(&pick) {
                    let bytes =
                        apply_data(base.inodes.get(ino).cloned().unwrap_or_default(), events, *ino, choices[*k]);
                    image.inodes.insert(*ino, bytes);
                }
                if seen.insert(image.fingerprint()) {
                    out.push(CrashState { prefix, image });
                }
            }
        }
    }
    (out, enumerated)
}

/// `n` power-loss images drawn at random where enumerating every one is too many (a run of
/// hundreds of operations): a crash point, a surviving prefix of each directory's changes at
/// least as long as what was synced (a rename between two directories in both or in neither),
/// and a surviving prefix of each visible inode's unsynced writes, the last maybe torn.
/// Reproducible from `seed`; duplicate images are dropped.
pub fn sampled_crash_states(base: &Image, events: &[Event], n: usize, seed: u64) -> Vec<CrashState> {
    let mut rng = super::Rng(seed | 1);
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut out = Vec::new();
    for _ in 0..n {
        let prefix = rng.below(events.len() as u64 + 1) as usize;
        let events = &events[..prefix];
        let (per_dir, durable_upto) = dir_changes(events);
        let dirs: Vec<&str> = per_dir.keys().copied().collect();
        let mut cuts: Vec<usize> = dirs
            .iter()
            .map(|d| durable_upto[d] + rng.below((per_dir[d].len() - durable_upto[d]) as u64 + 1) as usize)
            .collect();
        if !make_consistent(events, &dirs, &per_dir, &durable_upto, &mut cuts) {
            cuts = dirs.iter().map(|d| per_dir[d].len()).collect();
        }
        let mut included: BTreeSet<usize> = BTreeSet::new();
        for (d, cut) in dirs.iter().zip(&cuts) {
            included.extend(per_dir[d][..*cut].iter().copied());
        }
        let mut image = apply_names(base, events, &included);
        let visible = image.visible_files();
        for ino in visible {
            let choices = data_choices(events, ino);
            let choice = choices[rng.below(choices.len() as u64) as usize];
            let bytes = apply_data(base.inodes.get(&ino).cloned().unwrap_or_default(), events, ino, choice);
            image.inodes.insert(ino, bytes);
        }
        if seen.insert(image.fingerprint()) {
            out.push(CrashState { prefix, image });
        }
    }
    out
}

/// Per directory, the ordered indices of the events that change it, and how many of them are
/// durable: every change before a sync of the directory or of the filesystem, and anything before a change made
/// durable through the other directory of a rename (a directory's changes are ordered).
fn dir_changes(events: &[Event]) -> (BTreeMap<&str, Vec<usize>>, BTreeMap<&str, usize>) {
    let mut per_dir: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        for d in e.dirs() {
            per_dir.entry(d).or_default().push(i);
        }
    }
    let mut durable_events: BTreeSet<usize> = BTreeSet::new();
    for (i, e) in events.iter().enumerate() {
        match e {
            Event::SyncDir { dir } => {
                if let Some(list) = per_dir.get(dir.as_str()) {
                    durable_events.extend(list.iter().copied().filter(|&j| j < i));
                }
            }
            Event::SyncFs => durable_events.extend(per_dir.values().flatten().copied().filter(|&j| j < i)),
            _ => {}
        }
    }
    let mut durable_upto: BTreeMap<&str, usize> = BTreeMap::new();
    for (dir, list) in &per_dir {
        let cut = list.iter().rposition(|j| durable_events.contains(j)).map_or(0, |p| p + 1);
        durable_upto.insert(dir, cut);
    }
    (per_dir, durable_upto)
}

/// Move `cuts` until every rename between two directories is in both cuts or in neither: a
/// rename in one cut only leaves it (that cut shrinks) unless it is durable there, then enters
/// the other. False if that does not settle (the caller takes every change).
fn make_consistent(
    events: &[Event],
    dirs: &[&str],
    per_dir: &BTreeMap<&str, Vec<usize>>,
    durable_upto: &BTreeMap<&str, usize>,
    cuts: &mut [usize],
) -> bool {
    let index: HashMap<(&str, usize), usize> =
        per_dir.iter().flat_map(|(d, list)| list.iter().enumerate().map(move |(k, &i)| ((*d, i), k))).collect();
    let at = |d: &str, i: usize| index[&(d, i)];
    for _ in 0..10_000 {
        let mut settled = true;
        for (i, e) in events.iter().enumerate() {
            let ds = e.dirs();
            if ds.len() < 2 {
                continue;
            }
            let k: Vec<usize> = ds.iter().map(|d| dirs.iter().position(|x| x == d).unwrap()).collect();
            let inside: Vec<bool> = ds.iter().zip(&k).map(|(d, &k)| at(d, i) < cuts[k]).collect();
            if inside.iter().all(|&b| b) || inside.iter().all(|&b| !b) {
                continue;
            }
            settled = false;
            let pos = inside.iter().position(|&b| b).unwrap();
            let (d, kk) = (ds[pos], k[pos]);
            if at(d, i) >= durable_upto[d] {
                cuts[kk] = at(d, i);
            } else {
                for (d, &k) in ds.iter().zip(&k) {
                    cuts[k] = cuts[k].max(at(d, i) + 1);
                }
            }
        }
        if settled {
            return true;
        }
    }
    false
}

/// The image a crash of the writing process alone (not of the machine) leaves after each prefix
/// of `events`: the kernel keeps every change, synced or not.
pub fn process_crash_states(base: &Image, events: &[Event]) -> Vec<CrashState> {
    (0..=events.len())
        .map(|prefix| {
            let events = &events[..prefix];
            let included: BTreeSet<usize> = (0..events.len()).collect();
            let mut image = apply_names(base, events, &included);
            let visible = image.visible_files();
            for ino in visible {
                let all = DataChoice { ops: data_ops(events, ino).0.len(), torn: false };
                let bytes = apply_data(base.inodes.get(&ino).cloned().unwrap_or_default(), events, ino, all);
                image.inodes.insert(ino, bytes);
            }
            CrashState { prefix, image }
        })
        .collect()
}

/// How many of an inode's unsynced writes survive, and whether the next one is torn.
#[derive(Debug, Clone, Copy)]
struct DataChoice {
    ops: usize,
    torn: bool,
}

fn data_ops(events: &[Event], ino: Ino) -> (Vec<usize>, usize) {
    let mut ops = Vec::new();
    let mut synced = 0;
    for (i, e) in events.iter().enumerate() {
        match e {
            Event::Write { ino: x, .. } | Event::SetLen { ino: x, .. } if *x == ino => ops.push(i),
            Event::Sync { ino: x } if *x == ino => synced = ops.len(),
            Event::SyncFs => synced = ops.len(),
            _ => {}
        }
    }
    (ops, synced)
}

fn data_choices(events: &[Event], ino: Ino) -> Vec<DataChoice> {
    let (ops, synced) = data_ops(events, ino);
    let mut out = Vec::new();
    for n in synced..=ops.len() {
        out.push(DataChoice { ops: n, torn: false });
        if n < ops.len() && matches!(events[ops[n]], Event::Write { ref data, .. } if data.len() > 1) {
            out.push(DataChoice { ops: n, torn: true });
        }
    }
    out
}

fn apply_data(mut bytes: Vec<u8>, events: &[Event], ino: Ino, choice: DataChoice) -> Vec<u8> {
    let (ops, _) = data_ops(events, ino);
    for (k, &i) in ops.iter().enumerate().take(choice.ops + usize::from(choice.torn)) {
        let torn = choice.torn && k == choice.ops;
        match &events[i] {
            Event::Write { offset, data, .. } => {
                let data = if torn { &data[..data.len() / 2] } else { &data[..] };
                let end = *offset as usize + data.len();
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                bytes[*offset as usize..end].copy_from_slice(data);
            }
            Event::SetLen { len, .. } => bytes.resize(*len as usize, 0),
            _ => unreachable!(),
        }
    }
    bytes
}

/// The names of `base` after the included directory changes (in event order).
fn apply_names(base: &Image, events: &[Event], included: &BTreeSet<usize>) -> Image {
    let mut image = Image { dirs: base.dirs.clone(), inodes: base.inodes.clone() };
    for &i in included {
        match &events[i] {
            Event::Mkdir { dir, name } => {
                if let Some(entries) = image.dirs.get_mut(dir) {
                    entries.insert(name.clone(), Entry::Dir);
                    image.dirs.entry(join(dir, name)).or_default();
                }
            }
            Event::Create { ino, dir, name: Some(name) } | Event::Link { ino, dir, name } => {
                if let Some(entries) = image.dirs.get_mut(dir) {
                    entries.insert(name.clone(), Entry::File(*ino));
                }
            }
            Event::Unlink { dir, name } | Event::Rmdir { dir, name } => {
                if let Some(entries) = image.dirs.get_mut(dir) {
                    entries.remove(name);
                }
            }
            Event::Rename { from, from_name, to, to_name, how } => {
                let source = image.dirs.get(from).and_then(|m| m.get(from_name)).copied();
                let Some(source) = source else { continue };
                let dest = image.dirs.get(to).and_then(|m| m.get(to_name)).copied();
                if let Some(entries) = image.dirs.get_mut(from) {
                    match (how, dest) {
                        (Rename::Exchange, Some(dest)) => {
                            entries.insert(from_name.clone(), dest);
                        }
                        _ => {
                            entries.remove(from_name);
                        }
                    }
                }
                if let Some(entries) = image.dirs.get_mut(to) {
                    entries.insert(to_name.clone(), source);
                }
            }
            _ => {}
        }
    }
    // Drop directories that are no longer reachable, and inodes nobody names.
    let mut reachable: BTreeSet<String> = BTreeSet::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        if let Some(entries) = image.dirs.get(&dir) {
            for (name, entry) in entries {
                if *entry == Entry::Dir {
                    stack.push(join(&dir, name));
                }
            }
        }
        reachable.insert(dir);
    }
    image.dirs.retain(|d, _| reachable.contains(d));
    image
}

/// Cartesian product of index lists.
fn product(lists: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for list in lists {
        let mut next = Vec::with_capacity(out.len() * list.len());
        for prefix in &out {
            for &x in list {
                let mut v = prefix.clone();
                v.push(x);
                next.push(v);
            }
        }
        out = next;
    }
    out
}
