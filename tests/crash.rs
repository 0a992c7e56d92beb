//! Crash enumeration (ALICE-style): run a scenario on a recording disk, then rebuild every disk
//! image a crash after every prefix of the recorded changes may leave (see
//! `support/recorder.rs` for the persistence model), open an engine on each (recovery runs),
//! and check guarantees 1–3 of docs/architecture.md and journal ⇔ files consistency:
//!
//! 1. no torn files: every file holds a complete version that was written to that path;
//! 2. acknowledged means durable: each path holds its last acknowledged version, or the
//!    version of a commit that was in flight at the crash;
//! 3. nothing is lost: every version that was ever acknowledged (or present before) is the
//!    current content of its path or is in `objects/`, and every object is intact;
//! 4. after recovery `verify` finds no drift and an intact hash chain (a torn row from the
//!    crash is reported and skipped, nothing else).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use rwfs::durable::{Disk, Meta};
use rwfs::engine::{Engine, Rewind, WriteMode, WriteRequest};
use rwfs::history::{Options, RestoreTo, verify};
use rwfs::journal::Problem;
use rwfs::journal::query::Selection;
use rwfs::sha::Sha256;

use crate::support::hooked::Hooked;
use crate::support::recorder::{
    CrashState, Entry, Event, Image, Recorder, crash_states, process_crash_states, sampled_crash_states,
};
use crate::support::{Ws, actor};

/// The effect a commit has on its path: new content, or absent.
type Effect = Option<Vec<u8>>;

struct Intent {
    path: String,
    effect: Effect,
    seq: Option<u64>,
}

/// Drives the engine during a recorded scenario and remembers what each commit meant.
struct Run {
    rec: Arc<Hooked<Recorder>>,
    intents: Mutex<Vec<Intent>>,
    logical: Mutex<HashMap<String, Effect>>,
}

impl Run {
    fn begin(&self, path: &str, effect: Effect) -> usize {
        let mut intents = self.intents.lock().unwrap();
        intents.push(Intent { path: path.into(), effect, seq: None });
        let id = intents.len() - 1;
        self.rec.mark(Event::Intent { id });
        id
    }

    fn done(&self, id: usize, seq: u64) {
        self.rec.mark(Event::Ack { id });
        let mut intents = self.intents.lock().unwrap();
        intents[id].seq = Some(seq);
        self.logical.lock().unwrap().insert(intents[id].path.clone(), intents[id].effect.clone());
    }

    fn current(&self, path: &str) -> Effect {
        self.logical.lock().unwrap().get(path).cloned().flatten()
    }

    fn write(&self, engine: &Engine, path: &str, bytes: &[u8], mode: WriteMode) {
        let effect = match mode {
            WriteMode::Append => [self.current(path).unwrap_or_default(), bytes.to_vec()].concat(),
            _ => bytes.to_vec(),
        };
        let id = self.begin(path, Some(effect));
        let actor = actor();
        let c = engine.safe_write(&WriteRequest { path, content: bytes, mode, expect: None, actor: &actor }).unwrap();
        self.done(id, c.seq);
    }

    fn delete(&self, engine: &Engine, path: &str) {
        let id = self.begin(path, None);
        let c = engine.delete(path, None, &actor()).unwrap();
        self.done(id, c.seq);
    }

    /// A rename through the engine: `to` gets `from`'s content and `from` disappears, at once.
    fn rename(&self, engine: &Engine, from: &str, to: &str) {
        let moved = self.current(from);
        let gone = self.begin(from, None);
        let arrived = self.begin(to, moved);
        engine.rename(from, to, rwfs::engine::RenameHow::Replace, &actor()).unwrap();
        let mut seq = 0;
        engine.workspace().read_journal(|entry| seq = seq.max(entry.row.seq.unwrap_or(0))).unwrap();
        self.done(gone, seq);
        self.done(arrived, seq);
    }

    fn restore(&self, engine: &Engine, path: &str, bytes: &[u8]) {
        let id = self.begin(path, Some(bytes.to_vec()));
        let to = RestoreTo::Sha(Sha256::of(bytes).to_hex());
        match engine.restore(path, &to, &actor()).unwrap() {
            rwfs::engine::Restored::Committed(c) => self.done(id, c.seq),
            other => panic!("restore did nothing: {other:?}"),
        }
    }
}

impl Run {
    /// A rewind of every row after `cut`; `expect` lists each path it changes and what it
    /// leaves there. Every step is in flight from the start (the rewind is one call).
    fn rewind(&self, engine: &Engine, cut: u64, expect: &[(&str, Effect)]) {
        let ids: Vec<(usize, &str)> = expect.iter().map(|(p, e)| (self.begin(p, e.clone()), *p)).collect();
        let rewind = Rewind { selection: Selection::AfterSeq(cut), globs: vec![], force: false, dry_run: false };
        let done = engine.rewind(&rewind, &actor()).unwrap();
        assert_eq!(done.applied, expect.len(), "{done:?}");
        let group = done.group.unwrap();
        let rows = rwfs::history::Workspace::open(engine.workspace().path(), &Options::default()).unwrap();
        let mut seqs = HashMap::new();
        rows.read_journal(|e| {
            if e.row.group.as_deref() == Some(group.as_str()) {
                seqs.insert(e.row.path.clone(), e.row.seq.unwrap());
            }
        })
        .unwrap();
        for (id, path) in ids {
            self.done(id, seqs[path]);
        }
    }
}

/// Crash images in which recovery finished an interrupted rewind group.
static FINISHED_BY_RECOVERY: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// After recovery, a rewind group is whole: a `begin` row has its `end` row, and then every
/// step's path holds the step's `to`; without a `begin` row no step was taken (the paths hold
/// what they held, which `check` already verified).
fn rewind_groups_are_whole(root: &Path) -> Result<(), String> {
    let ws = rwfs::history::Workspace::open(root, &Options::default()).unwrap();
    let mut open: BTreeMap<String, String> = BTreeMap::new();
    let mut ended: Vec<(String, String)> = Vec::new();
    ws.read_journal(|e| {
        if e.row.op() == rwfs::journal::Op::Rewind {
            let group = e.row.group.clone().unwrap_or_default();
            match e.row.mode.as_str() {
                "begin" => {
                    open.insert(group, e.row.path.clone());
                }
                _ => {
                    if let Some(plan) = open.remove(&group) {
                        ended.push((plan, e.row.reason.clone().unwrap_or_default()));
                    }
                }
            }
        }
    })
    .unwrap();
    if let Some((group, _)) = open.into_iter().next() {
        return Err(format!("rewind group {group} begun and never ended after recovery"));
    }
    for (plan, reason) in ended {
        if reason.starts_with("finished_by_recovery") {
            FINISHED_BY_RECOVERY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if !reason.contains("failed=0") {
            return Err(format!("rewind {plan} ended with failures: {reason}"));
        }
        let plan: serde_json::Value = serde_json::from_slice(&std::fs::read(root.join(&plan)).unwrap()).unwrap();
        for step in plan["steps"].as_array().unwrap() {
            let path = step["path"].as_str().unwrap();
            let now = std::fs::read(root.join(path)).ok().map(|b| Sha256::of(&b).to_hex());
            if now.as_deref() != step["to"].as_str() {
                return Err(format!("rewind step {path}: holds {now:?}, the plan says {}", step["to"]));
            }
        }
    }
    Ok(())
}

struct Outcome {
    events: usize,
    enumerated: usize,
    images: usize,
}

fn scenario(name: &str, setup: impl Fn(&Engine), run: impl Fn(&Engine, &Run)) -> Outcome {
    let ws = Ws::new();
    let engine = ws.open();
    setup(&engine);
    engine.close().unwrap();
    let (base, inos) = Image::snapshot(ws.path());
    let initial: HashMap<String, Effect> = files_of(&base).into_iter().map(|(p, b)| (p, Some(b))).collect();

    let rec = Recorder::new(inos);
    let driver = Run { rec: rec.clone(), intents: Mutex::default(), logical: Mutex::new(initial.clone()) };
    let engine = ws.open_with(rec.clone()).unwrap();
    run(&engine, &driver);
    engine.close().unwrap();
    let events = rec.events();
    let intents = driver.intents.into_inner().unwrap();

    let (states, enumerated) = crash_states(&base, &events);
    let scratch = scratch_dir();
    for state in &states {
        let dir = tempfile::Builder::new().prefix("crash-").tempdir_in(&scratch).unwrap();
        state.image.materialize(dir.path());
        if let Err(failure) =
            check(dir.path(), state, &events, &intents, &initial).and_then(|()| rewind_groups_are_whole(dir.path()))
        {
            panic!(
                "scenario {name}: crash after {} of {} events violates a guarantee: {failure}\n\
                 events up to the crash:\n{}",
                state.prefix,
                events.len(),
                events[..state.prefix].iter().map(describe).collect::<Vec<_>>().join("\n")
            );
        }
    }
    println!(
        "crash scenario {name:<24} {:>4} events, {:>6} crash states, {:>5} distinct images checked",
        events.len(),
        enumerated,
        states.len()
    );
    Outcome { events: events.len(), enumerated, images: states.len() }
}

/// Check one rebuilt image after recovery.
fn check(
    root: &Path,
    state: &CrashState,
    events: &[Event],
    intents: &[Intent],
    initial: &HashMap<String, Effect>,
) -> Result<(), String> {
    let engine = Engine::open(root, &Default::default()).map_err(|e| format!("open (recovery) failed: {e}"))?;
    engine.close().map_err(|e| format!("close failed: {e}"))?;

    let started = |id: usize| events[..state.prefix].iter().any(|e| matches!(e, Event::Intent { id: i } if *i == id));
    let acked = |id: usize| events[..state.prefix].iter().any(|e| matches!(e, Event::Ack { id: i } if *i == id));

    // Known versions of every path, and what each path may hold now.
    let mut paths: BTreeMap<String, (Effect, Vec<Effect>)> = BTreeMap::new();
    for (path, effect) in initial {
        paths.entry(path.clone()).or_insert((effect.clone(), vec![effect.clone()]));
    }
    let mut last_acked: HashMap<&str, (u64, Effect)> = HashMap::new();
    for (id, intent) in intents.iter().enumerate() {
        let entry = paths.entry(intent.path.clone()).or_insert((None, vec![None]));
        if started(id) {
            entry.1.push(intent.effect.clone());
        }
        if acked(id) {
            let seq = intent.seq.unwrap();
            let newer = last_acked.get(intent.path.as_str()).is_none_or(|(s, _)| seq > *s);
            if newer {
                last_acked.insert(&intent.path, (seq, intent.effect.clone()));
            }
        }
    }
    let on_disk: HashMap<String, Vec<u8>> = files_on_disk(root);

    for (path, (initial_effect, _)) in &paths {
        let required = last_acked.get(path.as_str()).map_or(initial_effect.clone(), |(_, e)| e.clone());
        let mut allowed = vec![required.clone()];
        for (id, intent) in intents.iter().enumerate() {
            if intent.path == *path && started(id) && !acked(id) {
                allowed.push(intent.effect.clone());
            }
        }
        let now = on_disk.get(path).cloned();
        if !allowed.contains(&now) {
            return Err(format!(
                "{path} holds {} but must hold {} (acknowledged) or an in-flight version",
                show(&now),
                show(&required)
            ));
        }
    }
    for (path, bytes) in &on_disk {
        if path.starts_with(".resilient_write/") {
            continue;
        }
        let known = paths.get(path).map(|(_, k)| k.contains(&Some(bytes.clone()))).unwrap_or(false);
        if !known {
            return Err(format!(
                "{path} holds bytes that no commit wrote there (torn?): {}",
                show(&Some(bytes.clone()))
            ));
        }
    }

    // Nothing lost: every version that was present or acknowledged is current or stored.
    let objects: HashMap<Sha256, Vec<u8>> = on_disk
        .iter()
        .filter_map(|(p, b)| p.strip_prefix(".resilient_write/objects/").map(|rest| (rest, b)))
        .map(|(rest, b)| (rest.rsplit('/').next().unwrap().parse::<Sha256>().unwrap(), b.clone()))
        .collect();
    for (sha, bytes) in &objects {
        if Sha256::of(bytes) != *sha {
            return Err(format!("objects/{} holds other bytes (torn object)", sha.short(12)));
        }
    }
    let mut must_keep: Vec<(String, Vec<u8>)> =
        initial.iter().filter_map(|(p, e)| e.clone().map(|b| (p.clone(), b))).collect();
    for (id, intent) in intents.iter().enumerate() {
        if acked(id)
            && let Some(bytes) = &intent.effect
        {
            must_keep.push((intent.path.clone(), bytes.clone()));
        }
    }
    for (path, bytes) in must_keep {
        // Current at its path, or moved by a rename to another.
        let current = on_disk.get(&path) == Some(&bytes) || on_disk.values().any(|b| *b == bytes);
        if !current && !objects.contains_key(&Sha256::of(&bytes)) {
            return Err(format!("a version of {path} ({}) is lost", show(&Some(bytes))));
        }
    }

    // Journal ⇔ files.
    let report = verify(&rwfs::history::Workspace::open(root, &Options::default()).unwrap()).unwrap();
    if !report.drift.is_empty() {
        return Err(format!("after recovery the tree differs from the journal: {:?}", report.drift));
    }
    // Every change has a row: a path the journal never mentions still holds its initial bytes.
    let mut journaled = std::collections::HashSet::new();
    rwfs::history::Workspace::open(root, &Options::default())
        .unwrap()
        .read_journal(|entry| {
            journaled.insert(entry.row.path);
        })
        .unwrap();
    for (path, bytes) in &on_disk {
        if !path.starts_with(".resilient_write/")
            && !journaled.contains(path)
            && initial.get(path) != Some(&Some(bytes.clone()))
        {
            return Err(format!("{path} changed without a journal row"));
        }
    }
    for problem in &report.problems {
        if !matches!(problem, Problem::Torn { .. } | Problem::Unreadable { .. }) {
            return Err(format!("journal problem after recovery: {problem}"));
        }
    }
    if let Some(temp) = on_disk.keys().find(|p| p.rsplit('/').next().is_some_and(rwfs::durable::is_temp_name)) {
        return Err(format!("temp file {temp} left after recovery"));
    }
    Ok(())
}

/// Paths and their bytes.
type Files = Vec<(String, Vec<u8>)>;

fn files_of(image: &Image) -> Files {
    let mut out = Vec::new();
    for (dir, entries) in &image.dirs {
        for (name, entry) in entries {
            if let Entry::File(ino) = entry {
                let path = if dir.is_empty() { name.clone() } else { format!("{dir}/{name}") };
                if !path.starts_with(".resilient_write") {
                    out.push((path, image.inodes[ino].clone()));
                }
            }
        }
    }
    out
}

/// Every regular file below `root` (state directory included).
fn files_on_disk(root: &Path) -> HashMap<String, Vec<u8>> {
    let mut out = HashMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let ft = entry.file_type().unwrap();
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                let rel = entry.path().strip_prefix(root).unwrap().to_string_lossy().to_string();
                out.insert(rel, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

fn show(effect: &Effect) -> String {
    match effect {
        None => "nothing (absent)".into(),
        Some(b) => format!("{:?} ({} bytes)", String::from_utf8_lossy(&b[..b.len().min(40)]), b.len()),
    }
}

fn describe(e: &Event) -> String {
    match e {
        Event::Write { ino, offset, data } => format!("  write ino {ino} @{offset} ({} bytes)", data.len()),
        other => format!("  {other:?}"),
    }
}

/// tmpfs when available: thousands of small images are written and opened.
fn scratch_dir() -> std::path::PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() }
}

/// Every scenario of the issue (create, overwrite, append, delete, restore, two concurrent
/// writers) plus a mixed session, in one table with the total number of crash states checked.
#[test]
fn every_crash_state_keeps_the_guarantees() {
    let outcomes = [
        scenario(
            "create",
            |_| {},
            |e, run| {
                run.write(e, "new.txt", b"fresh content\n", WriteMode::Create);
                run.write(e, "deep/er/file.txt", b"in a new directory\n", WriteMode::Create);
            },
        ),
        scenario(
            "overwrite",
            |e| {
                crate::support::write(e, "doc.md", b"version one\n", WriteMode::Create).unwrap();
            },
            |e, run| {
                run.write(e, "doc.md", b"version two, longer than one\n", WriteMode::Overwrite);
                // Let the settle thread (every 2 s) advance the watermark (objects synced, lock
                // rewritten) so crashes around that are enumerated too.
                std::thread::sleep(std::time::Duration::from_millis(2200));
                run.write(e, "doc.md", b"v3\n", WriteMode::Overwrite);
            },
        ),
        scenario(
            "append",
            |e| {
                crate::support::write(e, "log.txt", b"line 1\n", WriteMode::Create).unwrap();
            },
            |e, run| {
                run.write(e, "log.txt", b"line 2\n", WriteMode::Append);
                run.write(e, "log.txt", b"line 3\n", WriteMode::Append);
                run.write(e, "new.log", b"first line\n", WriteMode::Append);
            },
        ),
        scenario(
            "delete",
            |e| {
                crate::support::write(e, "a/gone.txt", b"delete me\n", WriteMode::Create).unwrap();
                crate::support::write(e, "b.txt", b"me too\n", WriteMode::Create).unwrap();
            },
            |e, run| {
                run.delete(e, "a/gone.txt");
                run.delete(e, "b.txt");
            },
        ),
        scenario(
            "restore",
            |e| {
                crate::support::write(e, "cfg.toml", b"a = 1\n", WriteMode::Create).unwrap();
                crate::support::write(e, "cfg.toml", b"a = 2\n", WriteMode::Overwrite).unwrap();
                crate::support::write(e, "old.txt", b"deleted once\n", WriteMode::Create).unwrap();
                e.delete("old.txt", None, &actor()).unwrap();
            },
            |e, run| {
                run.restore(e, "cfg.toml", b"a = 1\n");
                run.restore(e, "old.txt", b"deleted once\n");
            },
        ),
        scenario(
            "two concurrent writers",
            |e| {
                crate::support::write(e, "shared.txt", b"base\n", WriteMode::Create).unwrap();
            },
            |e, run| {
                std::thread::scope(|s| {
                    for t in 0..2u8 {
                        s.spawn(move || {
                            let own = format!("w{t}.txt");
                            run.write(e, &own, format!("writer {t} first\n").as_bytes(), WriteMode::Create);
                            run.write(
                                e,
                                "shared.txt",
                                format!("writer {t} was here\n").as_bytes(),
                                WriteMode::Overwrite,
                            );
                            run.write(e, &own, format!("writer {t} second\n").as_bytes(), WriteMode::Append);
                        });
                    }
                });
            },
        ),
        scenario(
            "rename over a file",
            |e| {
                crate::support::write(e, "target.txt", b"the version replaced\n", WriteMode::Create).unwrap();
                crate::support::write(e, "d/moved.txt", b"the version moved\n", WriteMode::Create).unwrap();
                crate::support::write(e, "d/other.txt", b"same directory\n", WriteMode::Create).unwrap();
            },
            |e, run| {
                run.rename(e, "d/moved.txt", "target.txt");
                run.rename(e, "d/other.txt", "d/renamed.txt");
                run.write(e, "d/renamed.txt", b"replaced next\n", WriteMode::Overwrite);
                run.rename(e, "target.txt", "d/renamed.txt");
            },
        ),
        scenario(
            "rewind",
            |e| {
                crate::support::write(e, "kept.txt", b"kept one\n", WriteMode::Create).unwrap();
                crate::support::write(e, "gone.txt", b"to be deleted\n", WriteMode::Create).unwrap();
            },
            |e, run| {
                let mut cut = 0;
                e.workspace().read_journal(|entry| cut = entry.row.seq.unwrap()).unwrap();
                run.write(e, "kept.txt", b"kept two\n", WriteMode::Overwrite);
                run.delete(e, "gone.txt");
                run.write(e, "new/made.txt", b"made after the cut\n", WriteMode::Create);
                run.rewind(
                    e,
                    cut,
                    &[
                        ("new/made.txt", None),
                        ("gone.txt", Some(b"to be deleted\n".to_vec())),
                        ("kept.txt", Some(b"kept one\n".to_vec())),
                    ],
                );
            },
        ),
        scenario(
            "mixed session",
            |_| {},
            |e, run| {
                run.write(e, "src/main.rs", b"fn main() {}\n", WriteMode::Create);
                run.write(e, "src/main.rs", b"fn main() { println!(); }\n", WriteMode::Overwrite);
                run.write(e, "src/main.rs", b"// end\n", WriteMode::Append);
                run.delete(e, "src/main.rs");
                run.restore(e, "src/main.rs", b"fn main() {}\n");
            },
        ),
    ];
    let events: usize = outcomes.iter().map(|o| o.events).sum();
    let states: usize = outcomes.iter().map(|o| o.enumerated).sum();
    let images: usize = outcomes.iter().map(|o| o.images).sum();
    println!("crash enumeration total: {events} events, {states} crash states, {images} distinct images checked");
    let finished = FINISHED_BY_RECOVERY.load(std::sync::atomic::Ordering::Relaxed);
    println!("rewind groups a crash interrupted and recovery finished: {finished}");
    assert!(finished > 0, "the rewind scenario crashes inside a group");
    assert!(images > 0 && states >= images);
}

/// `batch` durability (docs/architecture.md, guarantee 2): the mount's closes are acknowledged once the draft is
/// judged, staged and its row written; a group commit makes them durable later, or at once at
/// an fsync. A crash at every prefix of the recorded disk changes — data syncs, journal,
/// renames across directories, directory syncs — must leave, after recovery, the tree of a
/// prefix of the acknowledged versions (some of the last window may be missing; none torn,
/// none out of order), every version made durable by an fsync present, and the journal and
/// the tree in agreement.
#[test]
fn batch_mode_crash_states_keep_a_prefix_of_the_acknowledged_versions() {
    let (ws, base, initial, rec) = batch_scenario(|_| {});
    let engine = Arc::new(ws.open_with(rec.clone()).unwrap());
    assert_eq!(engine.durability(), rwfs::policy::Durability::Batch);
    let ops: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let stage = |path: &str, bytes: &[u8]| stage_close(&engine, &rec, &ops, path, bytes);
    stage("a.txt", b"a v2, staged\n");
    stage("dir/c.txt", b"c v1, new in dir\n");
    stage("dir/b.txt", b"b v2\n");
    engine.make_durable("dir/b.txt");
    // Every change started so far is durable.
    rec.mark(Event::Durable { upto: NEXT_ID.load(std::sync::atomic::Ordering::SeqCst) });
    stage("new.txt", b"new at the root\n");
    stage("dir/b.txt", b"b v3 (its previous version was still staged? no: durable)\n");
    stage("a.txt", b"a v3\n");
    stage("a.txt", b"a v4, staged over a staged version\n");
    Arc::into_inner(engine).unwrap().close().unwrap();
    let ops = std::mem::take(&mut *ops.lock().unwrap());
    check_batch_crash_states("batch mode", &base, &rec.events(), &initial, ops);
}

/// Issue 25 item 1: a close staged while a rename (or an unlink) through the mount drains the
/// batch used to get a row *before* the rename's and stay uninstalled while the rename became
/// durable, so after a power cut the rename was there and the acknowledged close was not. Each
/// close here is staged at the very moment the drain syncs the staged drafts (a hook on the
/// recorder, on the committer's thread); it must come after the change in the journal's order,
/// and every crash state must recover to a prefix of the journal.
#[test]
fn batch_mode_closes_staged_while_a_rename_or_an_unlink_drains_keep_the_journal_s_prefix() {
    let (ws, base, initial, rec) = batch_scenario(|e| {
        crate::support::write(e, "gone.txt", b"unlinked while a close is staged\n", WriteMode::Create).unwrap();
    });
    let engine = Arc::new(ws.open_with(rec.clone()).unwrap());
    let ops: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let who = mount_actor();
    let mut racers = Vec::new();
    // `change` runs on this thread; the close `path` is staged from another, started when the
    // change's drain syncs its first draft. The hook waits (at most 1 s) for that close: before
    // the fix it was staged at once, inside the drain; now it waits for the change's turn.
    let mut race = |change: &dyn Fn() -> Acked, path: &'static str, bytes: &'static [u8]| {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (engine2, rec2, ops2) = (engine.clone(), rec.clone(), ops.clone());
        let (spawned_tx, spawned_rx) = std::sync::mpsc::channel();
        rec.on_next_sync(move || {
            let racer = std::thread::spawn(move || {
                stage_close(&engine2, &rec2, &ops2, path, bytes);
                let _ = done_tx.send(());
            });
            let _ = spawned_tx.send(racer);
            let _ = done_rx.recv_timeout(std::time::Duration::from_secs(1));
        });
        let op = change();
        ops.lock().unwrap().push(op);
        racers.push(spawned_rx.recv().expect("the drain synced a staged draft"));
    };
    stage_close(&engine, &rec, &ops, "a.txt", b"a v2, staged before the rename\n");
    race(
        &|| {
            let id = next_id(&rec);
            engine.rename("dir/b.txt", "moved.txt", rwfs::engine::RenameHow::Replace, &who).unwrap();
            rec.mark(Event::Ack { id });
            let seq = last_seq_of(&engine, rwfs::journal::Op::Rename, "moved.txt");
            let effects = vec![("dir/b.txt".into(), None), ("moved.txt".into(), Some(b"b v1\n".to_vec()))];
            Acked { id, seq, effects, durable_at_ack: true }
        },
        "c.txt",
        b"c, staged while the rename drained\n",
    );
    // The unlink's drain syncs c.txt's draft, staged after the rename.
    race(
        &|| {
            let id = next_id(&rec);
            engine.remove("gone.txt", &who).unwrap();
            rec.mark(Event::Ack { id });
            let seq = last_seq_of(&engine, rwfs::journal::Op::Delete, "gone.txt");
            Acked { id, seq, effects: vec![("gone.txt".into(), None)], durable_at_ack: true }
        },
        "d.txt",
        b"d, staged while the unlink drained\n",
    );
    for racer in racers {
        racer.join().unwrap();
    }
    Arc::into_inner(engine).unwrap().close().unwrap();
    let events = rec.events();
    let mut ops = std::mem::take(&mut *ops.lock().unwrap());
    ops.sort_by_key(|op| op.seq);
    // The race happened (each racing close started before its change returned), and each racing
    // close is after its change in the journal.
    let position = |event: &dyn Fn(&Event) -> bool| events.iter().position(event).unwrap();
    for (close, change) in [("c.txt", "moved.txt"), ("d.txt", "gone.txt")] {
        let racer = ops.iter().find(|op| op.effects[0].0 == close).unwrap();
        let change = ops.iter().find(|op| op.durable_at_ack && op.effects.iter().any(|(p, _)| p == change)).unwrap();
        let started = position(&|e| matches!(e, Event::Intent { id } if *id == racer.id));
        let returned = position(&|e| matches!(e, Event::Ack { id } if *id == change.id));
        assert!(started < returned, "{close} was staged while its change ran");
        assert!(racer.seq > change.seq, "{close} (seq {}) is after its change (seq {})", racer.seq, change.seq);
    }
    check_batch_crash_states("batch mode, closes racing changes", &base, &events, &initial, ops);
}

/// Issue 25's power-loss test, in both modes: a few hundred operations — closes from three
/// threads (each on its own files, rewritten over and over) racing a fourth that creates files
/// and renames or unlinks them — then power-loss images drawn at random from the whole run
/// (every image of so long a run is far too many to enumerate; `sampled_crash_states`). In
/// `batch` mode each image must recover to a prefix of the journal's acknowledged changes at
/// least as long as what a draining change made durable; in `close` mode nothing acknowledged
/// may be lost. It found closes staged at once queued out of row order (`Batch::row_order`).
#[test]
fn power_loss_over_hundreds_of_racing_closes_renames_and_unlinks() {
    for batch in [true, false] {
        let (ws, base, initial, rec) = racing_scenario(batch);
        let engine = Arc::new(ws.open_with(rec.clone()).unwrap());
        let ops: Arc<Mutex<Vec<Acked>>> = Arc::default();
        std::thread::scope(|s| {
            for t in 0..3 {
                let (engine, rec, ops) = (&engine, &rec, &ops);
                s.spawn(move || {
                    for i in 0..60 {
                        let path = format!("w{t}/{}.txt", i % 5);
                        stage_close(engine, rec, ops, &path, format!("writer {t}, version {i}\n").as_bytes());
                    }
                });
            }
            s.spawn(|| {
                let who = mount_actor();
                for i in 0..40 {
                    let (path, bytes) = (format!("r/{i}.txt"), format!("renamed or unlinked, {i}\n"));
                    stage_close(&engine, &rec, &ops, &path, bytes.as_bytes());
                    let id = next_id(&rec);
                    let (op, effects) = if i % 2 == 0 {
                        let to = format!("r/{i}.moved");
                        engine.rename(&path, &to, rwfs::engine::RenameHow::Replace, &who).unwrap();
                        (rwfs::journal::Op::Rename, vec![(path.clone(), None), (to, Some(bytes.into_bytes()))])
                    } else {
                        engine.remove(&path, &who).unwrap();
                        (rwfs::journal::Op::Delete, vec![(path.clone(), None)])
                    };
                    rec.mark(Event::Ack { id });
                    let at = effects.last().map(|(p, _)| p.clone()).unwrap();
                    let seq = last_seq_of(&engine, op, if op == rwfs::journal::Op::Delete { &path } else { &at });
                    ops.lock().unwrap().push(Acked { id, seq, effects, durable_at_ack: true });
                }
            });
        });
        Arc::into_inner(engine).unwrap().close().unwrap();
        let events = rec.events();
        let mut ops = std::mem::take(&mut *ops.lock().unwrap());
        ops.sort_by_key(|op| op.seq);
        assert_eq!(ops.len(), 260);
        let states = sampled_crash_states(&base, &events, 80, 0x25);
        let scratch = scratch_dir();
        let name = if batch { "batch" } else { "close" };
        for state in &states {
            let dir = tempfile::Builder::new().prefix("crash-racing-").tempdir_in(&scratch).unwrap();
            state.image.materialize(dir.path());
            let checked = if batch {
                check_prefix(dir.path(), &state.prefix, &events, &initial, &ops).map(|_| ())
            } else {
                check_no_loss(dir.path(), &events[..state.prefix], &ops)
            };
            if let Err(failure) = checked {
                panic!("{name} mode: power loss after {} of {} events: {failure}", state.prefix, events.len());
            }
        }
        println!(
            "power loss, {name} mode: 260 operations, {} events, {} sampled images checked",
            events.len(),
            states.len()
        );
        assert!(states.len() > 40, "{} distinct images", states.len());
    }
}

/// A workspace in `batch` (a 10 s window: batches are cut by the renames and unlinks) or
/// `close` durability with directories `w0`, `w1`, `w2` and `r`.
fn racing_scenario(batch: bool) -> (Ws, Image, Files, Arc<Hooked<Recorder>>) {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path().join(".resilient_write")).unwrap();
    let policy = if batch { "durability: batch\nbatch_window_ms: 10000\n" } else { "durability: close\n" };
    std::fs::write(ws.path().join(".resilient_write/policy.yaml"), policy).unwrap();
    for dir in ["w0", "w1", "w2", "r"] {
        std::fs::create_dir_all(ws.path().join(dir)).unwrap();
    }
    ws.open().close().unwrap();
    let (base, inos) = Image::snapshot(ws.path());
    let initial = files_of(&base);
    (ws, base, initial, Recorder::new(inos))
}

/// `close` durability after power loss: recovery leaves each path holding the version of its
/// last acknowledged change, or of a change started after it; every version acknowledged is in
/// the tree or in `objects/`; and `verify` finds the tree as journaled.
fn check_no_loss(root: &Path, before: &[Event], ops: &[Acked]) -> Result<(), String> {
    let engine = Engine::open(root, &Default::default()).map_err(|e| format!("open (recovery) failed: {e}"))?;
    engine.close().map_err(|e| format!("close failed: {e}"))?;
    let position = |event: &dyn Fn(&Event) -> bool| before.iter().position(event);
    let acked_at = |id: usize| position(&|e| matches!(e, Event::Ack { id: i } if *i == id));
    let started = |id: usize| position(&|e| matches!(e, Event::Intent { id: i } if *i == id)).is_some();
    let all = files_on_disk(root);
    let on_disk: BTreeMap<String, Vec<u8>> =
        all.iter().filter(|(p, _)| !p.starts_with(".resilient_write/")).map(|(p, b)| (p.clone(), b.clone())).collect();
    let mut paths: BTreeMap<&str, Vec<(&Acked, &Effect)>> = BTreeMap::new();
    for op in ops {
        for (path, effect) in &op.effects {
            paths.entry(path).or_default().push((op, effect));
        }
    }
    for (path, changes) in &paths {
        // The last acknowledged change of the path, and those in flight after it.
        let last = changes.iter().rposition(|(op, _)| acked_at(op.id).is_some());
        let allowed: Vec<&Effect> = changes
            .iter()
            .enumerate()
            .filter(|(k, (op, _))| Some(*k) == last || (last.is_none_or(|l| *k > l) && started(op.id)))
            .map(|(_, (_, effect))| *effect)
            .collect();
        let now = on_disk.get(*path).cloned();
        if last.is_some() && !allowed.contains(&&now) {
            return Err(format!("{path} holds {} after an acknowledged change", show(&now)));
        }
        for (op, effect) in changes {
            let (Some(_), Some(bytes)) = (acked_at(op.id), effect) else { continue };
            let stored = all
                .keys()
                .any(|p| p.starts_with(".resilient_write/objects/") && p.ends_with(&Sha256::of(bytes).to_hex()));
            if !stored && !on_disk.values().any(|b| b == bytes) {
                return Err(format!("an acknowledged version of {path} is lost: {}", show(&Some(bytes.clone()))));
            }
        }
    }
    let report = verify(&rwfs::history::Workspace::open(root, &Options::default()).unwrap()).unwrap();
    if !report.drift.is_empty() {
        return Err(format!("after recovery the tree differs from the journal: {:?}", report.drift));
    }
    if let Some(problem) =
        report.problems.iter().find(|p| matches!(p, Problem::ChainBroken { .. } | Problem::Unchained { .. }))
    {
        return Err(format!("journal problem after recovery: {problem}"));
    }
    Ok(())
}

/// A batch-mode workspace (a 10 s window: the batches are cut by the scenario's own fsyncs,
/// changes and close) holding `a.txt`, `dir/b.txt` and what `setup` writes; its durable image,
/// its files, and a recorder to open it with.
fn batch_scenario(setup: impl Fn(&Engine)) -> (Ws, Image, Files, Arc<Hooked<Recorder>>) {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path().join(".resilient_write")).unwrap();
    std::fs::write(ws.path().join(".resilient_write/policy.yaml"), "durability: batch\nbatch_window_ms: 10000\n")
        .unwrap();
    std::fs::create_dir_all(ws.path().join("dir")).unwrap();
    let engine = ws.open();
    crate::support::write(&engine, "a.txt", b"a v1\n", WriteMode::Create).unwrap();
    crate::support::write(&engine, "dir/b.txt", b"b v1\n", WriteMode::Create).unwrap();
    setup(&engine);
    engine.close().unwrap();
    let (base, inos) = Image::snapshot(ws.path());
    let initial = files_of(&base);
    (ws, base, initial, Recorder::new(inos))
}

/// The mount's actor: drafts are the mount's, and its rows say so (`via: fuse`), which is what
/// recovery rolls forward.
fn mount_actor() -> rwfs::journal::Actor {
    rwfs::journal::Actor::this_process(rwfs::journal::Via::Fuse, "rwfs-tests")
}

/// Marker ids of batch-mode changes (above the ids of `Run`'s intents), in the order they started.
static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1 << 20);

/// A marker id for the next change, its intent marked.
fn next_id(rec: &Recorder) -> usize {
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    rec.mark(Event::Intent { id });
    id
}

/// The seq of the last row with `op` at `path`.
fn last_seq_of(engine: &Engine, op: rwfs::journal::Op, path: &str) -> u64 {
    let mut seq = None;
    engine
        .workspace()
        .read_journal(|e| {
            if e.row.op() == op && e.row.path == path {
                seq = e.row.seq;
            }
        })
        .unwrap();
    seq.unwrap_or_else(|| panic!("no {op:?} row for {path}"))
}

/// A close through the mount's path in batch mode (draft started, written, committed), marked
/// and recorded in `ops`; visible at once through the engine.
fn stage_close(engine: &Engine, rec: &Recorder, ops: &Mutex<Vec<Acked>>, path: &str, bytes: &[u8]) {
    use rwfs::engine::DraftBase;
    let who = mount_actor();
    let exists = engine.stat(path).unwrap().is_some();
    let base = if exists {
        DraftBase::Truncated
    } else {
        DraftBase::New { perm: 0o644, owner: rwfs::engine::Owner { uid: 0, gid: 0, umask: 0 } }
    };
    let draft = engine.drafts().start(path, base).unwrap();
    engine.drafts().write(draft, path, 0, bytes, &who).unwrap();
    let id = next_id(rec);
    let committed = engine.drafts().commit(draft, path, &who, rwfs::engine::CommitAt::Close).unwrap();
    rec.mark(Event::Ack { id });
    ops.lock().unwrap().push(Acked::close(id, committed.seq, path, bytes));
    // Acknowledged means visible at once, through the engine's view of the path.
    let file = engine.files().open(path).unwrap();
    let mut seen = vec![0u8; bytes.len() + 16];
    let n = engine.files().read_at(&file, &mut seen, 0).unwrap();
    assert_eq!(&seen[..n], bytes, "{path} right after its close");
}

/// Every power-loss image of `events` must recover to a prefix of `ops` (see [`check_prefix`]),
/// and every process-crash image to a prefix holding every acknowledged change.
fn check_batch_crash_states(
    name: &str,
    base: &Image,
    events: &[Event],
    initial: &[(String, Vec<u8>)],
    mut ops: Vec<Acked>,
) {
    ops.sort_by_key(|op| op.seq);
    let (states, enumerated) = crash_states(base, events);
    let scratch = scratch_dir();
    for state in &states {
        let dir = tempfile::Builder::new().prefix("crash-batch-").tempdir_in(&scratch).unwrap();
        state.image.materialize(dir.path());
        if let Err(failure) = check_prefix(dir.path(), &state.prefix, events, initial, &ops) {
            panic!(
                "{name}: crash after {} of {} events violates a guarantee: {failure}\nevents up to the crash:\n{}",
                state.prefix,
                events.len(),
                events[..state.prefix].iter().map(describe).collect::<Vec<_>>().join("\n")
            );
        }
    }
    println!(
        "crash scenario {name}: {} events, {enumerated} crash states, {} distinct images checked",
        events.len(),
        states.len()
    );
    assert!(!states.is_empty());
    // A crash of the daemon alone loses nothing acknowledged: recovery installs what was staged.
    for state in process_crash_states(base, events) {
        let dir = tempfile::Builder::new().prefix("crash-batch-").tempdir_in(&scratch).unwrap();
        state.image.materialize(dir.path());
        let before = &events[..state.prefix];
        let acked = |id: usize| before.iter().any(|e| matches!(e, Event::Ack { id: i } if *i == id));
        let needed = ops.iter().rposition(|op| acked(op.id)).map_or(0, |k| k + 1);
        let survived = check_prefix(dir.path(), &state.prefix, events, initial, &ops)
            .unwrap_or_else(|failure| panic!("{name}: a process crash after {} events: {failure}", state.prefix));
        assert!(
            survived >= needed,
            "{name}: a process crash after {} of {} events kept the first {survived} changes; {needed} were acknowledged",
            state.prefix,
            events.len()
        );
    }
}

/// One acknowledged change of a batch-mode scenario, in the journal's order: its marker id
/// (`Event::Intent`/`Event::Ack`), what it does to which paths, and whether it is durable once
/// acknowledged (a rename or a delete; a close is not).
#[derive(Debug, Clone)]
struct Acked {
    id: usize,
    seq: u64,
    effects: Vec<(String, Effect)>,
    durable_at_ack: bool,
}

impl Acked {
    fn close(id: usize, seq: u64, path: &str, bytes: &[u8]) -> Acked {
        Acked { id, seq, effects: vec![(path.to_string(), Some(bytes.to_vec()))], durable_at_ack: false }
    }
}

/// After recovery the workspace is the initial tree plus the first `k` acknowledged changes in
/// the journal's order (`ops`, sorted by seq), for one `k` at least as large as what was
/// durable before the crash — an fsync (`Event::Durable`), or an acknowledged change that
/// drained the batch, makes everything before it durable — and no larger than what was
/// started. Returns `k`.
fn check_prefix(
    root: &Path,
    prefix: &usize,
    events: &[Event],
    initial: &[(String, Vec<u8>)],
    ops: &[Acked],
) -> Result<usize, String> {
    let lock = std::fs::read_to_string(root.join(".resilient_write/lock")).unwrap_or_default();
    let engine = Engine::open(root, &Default::default()).map_err(|e| format!("open (recovery) failed: {e}"))?;
    let recovery = engine.recovery().clone();
    engine.close().map_err(|e| format!("close failed: {e}"))?;
    let before = &events[..*prefix];
    let started = |id: usize| before.iter().any(|e| matches!(e, Event::Intent { id: i } if *i == id));
    let acked = |id: usize| before.iter().any(|e| matches!(e, Event::Ack { id: i } if *i == id));
    let fsynced = before.iter().filter_map(|e| if let Event::Durable { upto } = e { Some(*upto) } else { None }).max();
    let durable = ops
        .iter()
        .enumerate()
        .filter(|(_, op)| (op.durable_at_ack && acked(op.id)) || fsynced.is_some_and(|upto| op.id < upto))
        .map(|(k, _)| k + 1)
        .max()
        .unwrap_or(0);
    let on_disk: BTreeMap<String, Vec<u8>> =
        files_on_disk(root).into_iter().filter(|(p, _)| !p.starts_with(".resilient_write/")).collect();
    let mut state: BTreeMap<String, Vec<u8>> = initial.iter().cloned().collect();
    let mut matches = Vec::new();
    // The prefix closest to the tree, and how the tree differs from it.
    let mut closest: Option<(usize, usize, Vec<String>)> = None;
    for k in 0..=ops.len() {
        if k > 0 {
            if !started(ops[k - 1].id) {
                break;
            }
            for (path, effect) in &ops[k - 1].effects {
                match effect {
                    Some(bytes) => state.insert(path.clone(), bytes.clone()),
                    None => state.remove(path),
                };
            }
        }
        if state == on_disk {
            matches.push(k);
        }
        let differ: Vec<String> = state
            .keys()
            .chain(on_disk.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|p| state.get(*p) != on_disk.get(*p))
            .map(|p| format!("{p}: prefix {}, tree {}", show(&state.get(p).cloned()), show(&on_disk.get(p).cloned())))
            .collect();
        if closest.as_ref().is_none_or(|(_, n, _)| differ.len() <= *n) {
            closest = Some((k, differ.len(), differ));
        }
    }
    let Some(&k) = matches.iter().max() else {
        let (k, _, differ) = closest.unwrap_or_default();
        let tail: Vec<String> = ops[durable.saturating_sub(1)..k.min(ops.len())]
            .iter()
            .map(|op| {
                format!(
                    "seq {} id {} acked {} {:?}",
                    op.seq,
                    op.id,
                    acked(op.id),
                    op.effects.iter().map(|(p, e)| format!("{p}={}", show(e))).collect::<Vec<_>>()
                )
            })
            .collect();
        let drafts: Vec<String> = files_on_disk(root)
            .into_iter()
            .filter(|(p, _)| p.contains("drafts/") || p.contains("objects/"))
            .map(|(p, b)| format!("{p}: {}", show(&Some(b))))
            .collect();
        // The image's own record: the watermark recovery started from and the rows of the paths
        // that differ.
        let journal = std::fs::read_to_string(root.join(".resilient_write/journal.jsonl")).unwrap_or_default();
        let rows: Vec<&str> = journal
            .lines()
            .filter(|line| {
                differ.iter().any(|d| d.split(':').next().is_some_and(|p| line.contains(&format!("\"{p}\""))))
            })
            .collect();
        return Err(format!(
            "the tree is no prefix of the journal's acknowledged changes (of {} started; closest: the first {k}, \
             durable {durable}, which differs in {differ:#?}; ops from the durable one: {tail:#?}; recovery rolled \
             forward {:?} and stopped at {:?}; lock file before recovery {lock:?}; rows of those paths after it: \
             {rows:#?}; drafts and objects: {drafts:#?})",
            ops.iter().filter(|op| started(op.id)).count(),
            recovery.rolled_forward,
            recovery.roll_forward_stopped,
        ));
    };
    if k < durable {
        return Err(format!("only the first {k} changes survived, but {durable} were durable"));
    }
    let report = verify(&rwfs::history::Workspace::open(root, &Options::default()).unwrap()).unwrap();
    if !report.drift.is_empty() {
        return Err(format!("after recovery the tree differs from the journal: {:?}", report.drift));
    }
    for problem in &report.problems {
        if matches!(problem, Problem::ChainBroken { .. } | Problem::Unchained { .. }) {
            return Err(format!("journal problem after recovery: {problem}"));
        }
    }
    // Versions made durable and then replaced are kept.
    let all = files_on_disk(root);
    for op in &ops[..durable] {
        for (path, effect) in &op.effects {
            let Some(bytes) = effect else { continue };
            let sha = Sha256::of(bytes);
            let stored = all.keys().any(|p| p.starts_with(".resilient_write/objects/") && p.ends_with(&sha.to_hex()));
            if on_disk.get(path) != Some(bytes) && !stored && !on_disk.values().any(|b| b == bytes) {
                return Err(format!("a durable version of {path} is lost"));
            }
        }
    }
    Ok(k)
}

/// The changes of `Meta` that the image can hold reach the model: a crash after them may leave
/// exactly what the real disk holds (which needs every one of them modelled), or, before the
/// directory's sync, the old names.
#[test]
fn the_recorder_models_the_mount_s_namespace_changes() {
    let ws = Ws::new();
    std::fs::create_dir(ws.abs("d")).unwrap();
    std::fs::write(ws.abs("a"), b"bytes of a").unwrap();
    let (base, inos) = Image::snapshot(ws.path());
    let rec = Recorder::new(inos);
    let root = rec.open_root(ws.path()).unwrap();
    let a = rec.open_read(&root, "a").unwrap();
    let b = rec.create_new(&root, "b", 0o600).unwrap();
    rec.copy_range(&a, &b, 10).unwrap();
    rec.hard_link(&root, "a", &root, "c").unwrap();
    rec.rmdir(&root, "d").unwrap();
    // Not modelled (a symlink, metadata), but counted as changes.
    rec.symlink(std::ffi::OsStr::new("a"), &root, "s").unwrap();
    rec.set_perm(&root, "a", 0o640).unwrap();
    rec.sync(&b).unwrap();
    rec.sync_dir(&root).unwrap();
    assert_eq!(rec.changes(), 8);
    let events = rec.events();
    let shown = events.iter().map(describe).collect::<Vec<_>>().join("\n");
    let (states, _) = crash_states(&base, &events);
    let real = Image::snapshot(ws.path()).0.fingerprint();
    assert!(states.iter().any(|s| s.image.fingerprint() == real), "no crash state is the real disk:\n{shown}");
    let names = |image: &Image| image.dirs[""].keys().cloned().collect::<Vec<_>>();
    assert!(states.iter().any(|s| names(&s.image) == ["a", "d"]), "the old names are not a crash state:\n{shown}");
}

/// A draft is created under its name and noted right after (`new_draft_file`): a daemon killed
/// in between leaves an empty draft that names no file, made for a create nobody was answered.
/// Recovery removes exactly that one, and keeps (with a row) an empty draft that names its file
/// and a draft with bytes that names nothing.
#[test]
fn an_empty_draft_that_names_no_file_is_removed_and_every_other_orphan_kept() {
    use rwfs::durable::layout::DRAFT_TARGET_XATTR;
    let ws = Ws::new();
    let drafts = ws.drafts_for_orphans();
    std::fs::write(drafts.join(".rwfs.00000000000000a1.tmp"), b"").unwrap();
    std::fs::write(drafts.join(".rwfs.00000000000000a2.tmp"), b"").unwrap();
    std::fs::write(drafts.join(".rwfs.00000000000000a3.tmp"), b"bytes nobody named\n").unwrap();
    crate::support::set_xattr(&drafts.join(".rwfs.00000000000000a2.tmp"), DRAFT_TARGET_XATTR, b"notes/empty.txt");
    let engine = ws.open();
    let mut kept = engine.recovery().drafts_kept.clone();
    kept.sort();
    assert_eq!(
        kept,
        vec![
            ".resilient_write/drafts/.rwfs.00000000000000a2.tmp",
            ".resilient_write/drafts/.rwfs.00000000000000a3.tmp"
        ]
    );
    engine.close().unwrap();
    assert_eq!(std::fs::read_dir(&drafts).unwrap().count(), 0, "drafts/ is empty");
    let recovered: Vec<_> = ws.rows().into_iter().filter(|r| r.op() == rwfs::journal::Op::Recover).collect();
    assert_eq!(recovered.len(), 2, "a row for each kept draft, none for the removed one: {recovered:?}");
    assert!(recovered.iter().any(|r| r.from.as_deref() == Some("notes/empty.txt")), "{recovered:?}");
}
