//! Hostile paths: every spelling of "outside the workspace", "inside `.resilient_write/`",
//! "not a regular file" and "too long" gets its exact typed refusal from every entry point
//! (`safe_write` in each mode, `delete`, `restore`, `history`), and leaves every byte, name and
//! timestamp of the workspace *and of a sentinel directory next to it* as it was.
//!
//! A symlink race gets its own tests: a wrapping [`Disk`] swaps a parent directory for a symlink
//! to the sentinel at the worst moments (after resolution opened the parent), and the write must
//! land in the directory that was opened, or fail typed.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rwfs::engine::{Engine, WriteMode};
use rwfs::history::{Options, RestoreTo};
use rwfs::sha::Sha256;

use crate::support::hooked::{Call, Created, Hooked, Intercept};
use crate::support::{actor, sha, write};

const MODES: [WriteMode; 3] = [WriteMode::Create, WriteMode::Overwrite, WriteMode::Append];

// ---------------------------------------------------------------------------------------------
// Snapshots: everything observable about a directory tree, without following symlinks.

#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    kind: &'static str,
    mode: u32,
    ino: u64,
    nlink: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    rdev: u64,
    /// sha256 of a regular file's bytes.
    content: Option<Sha256>,
    /// A symlink's target.
    link: Option<OsString>,
}

type Snapshot = BTreeMap<PathBuf, Node>;

/// Every entry below `root` (and `root` itself). Directories in `opaque` are recorded by kind
/// only and not entered (a procfs mount changes constantly). The engine's lock file is rewritten in place by
/// the settle thread, so only its identity is compared.
fn snapshot(root: &Path, opaque: &[PathBuf]) -> Snapshot {
    fn walk(base: &Path, path: &Path, opaque: &[PathBuf], out: &mut Snapshot) {
        let meta = std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()));
        let ft = meta.file_type();
        let kind = if ft.is_file() {
            "file"
        } else if ft.is_dir() {
            "dir"
        } else if ft.is_symlink() {
            "symlink"
        } else if ft.is_fifo() {
            "fifo"
        } else if ft.is_socket() {
            "socket"
        } else if ft.is_char_device() {
            "chardev"
        } else {
            "blockdev"
        };
        let rel = path.strip_prefix(base).unwrap().to_path_buf();
        if opaque.iter().any(|o| o == path) {
            out.insert(
                rel,
                Node {
                    kind,
                    mode: 0,
                    ino: 0,
                    nlink: 0,
                    size: 0,
                    mtime: (0, 0),
                    ctime: (0, 0),
                    rdev: 0,
                    content: None,
                    link: None,
                },
            );
            return;
        }
        let is_lock = rel.ends_with(".resilient_write/lock");
        let mut node = Node {
            kind,
            mode: meta.mode(),
            ino: meta.ino(),
            nlink: meta.nlink(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            rdev: meta.rdev(),
            content: ft.is_file().then(|| sha(&std::fs::read(path).unwrap())),
            link: ft.is_symlink().then(|| std::fs::read_link(path).unwrap().into_os_string()),
        };
        if is_lock {
            (node.size, node.mtime, node.ctime, node.content) = (0, (0, 0), (0, 0), None);
        }
        out.insert(rel, node);
        if ft.is_dir() {
            for entry in std::fs::read_dir(path).unwrap() {
                walk(base, &entry.unwrap().path(), opaque, out);
            }
        }
    }
    let mut out = Snapshot::new();
    walk(root, root, opaque, &mut out);
    out
}

/// The differences between two snapshots, one line each (empty: identical).
fn diff(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, node) in before {
        match after.get(path) {
            None => lines.push(format!("removed {}: {node:?}", path.display())),
            Some(now) if now != node => {
                lines.push(format!("changed {}:\n    before {node:?}\n    after  {now:?}", path.display()))
            }
            Some(_) => {}
        }
    }
    for (path, node) in after {
        if !before.contains_key(path) {
            lines.push(format!("created {}: {node:?}", path.display()));
        }
    }
    lines
}

// ---------------------------------------------------------------------------------------------
// The fixture: `<tmp>/ws` (the workspace, with traps) next to `<tmp>/sentinel`.

/// Runs `mount`/`umount`; a failure fails the test (mount tests never skip).
fn run(program: &str, args: &[&OsStr]) {
    crate::support::run_ok(std::process::Command::new(program).args(args));
}

/// A mount that is lazily unmounted when dropped.
struct Mounted(PathBuf);

impl Mounted {
    fn new(args: &[&str], target: &Path) -> Mounted {
        let mut all: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        all.push(target.as_os_str());
        run("mount", &all);
        Mounted(target.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

struct Fixture {
    // Field order is drop order: engine, then the mount, then the directories.
    engine: Engine,
    _proc: Mounted,
    ws: PathBuf,
    sentinel: PathBuf,
    /// A version of `file` that is in `objects/` (restore target).
    stored: Sha256,
    parent: tempfile::TempDir,
}

fn symlink(target: impl AsRef<OsStr>, link: &Path) {
    std::os::unix::fs::symlink(target.as_ref(), link).unwrap_or_else(|e| panic!("symlink {}: {e}", link.display()));
}

fn mknod(path: &Path, kind: nix::sys::stat::SFlag, dev: u64) {
    nix::sys::stat::mknod(path, kind, nix::sys::stat::Mode::from_bits_truncate(0o644), dev)
        .unwrap_or_else(|e| panic!("mknod {}: {e}", path.display()));
}

/// A sentinel directory full of files a redirected operation would change.
fn make_sentinel(sentinel: &Path) {
    std::fs::create_dir_all(sentinel.join("sub")).unwrap();
    for (name, body) in [
        ("x", "sentinel x"),
        ("passwd", "root:x:0:0"),
        ("target", "sentinel target"),
        ("file", "sentinel file"),
        ("journal.jsonl", "sentinel journal"),
        ("sub/y", "sentinel y"),
    ] {
        std::fs::write(sentinel.join(name), body).unwrap();
    }
}

impl Fixture {
    fn new() -> Fixture {
        let parent = tempfile::Builder::new().prefix("rwfs-hostile-").tempdir().unwrap();
        let ws = parent.path().join("ws");
        let sentinel = parent.path().join("sentinel");
        std::fs::create_dir(&ws).unwrap();
        make_sentinel(&sentinel);

        let engine = Engine::open(&ws, &Default::default()).expect("open engine");
        write(&engine, "file", b"file v1", WriteMode::Create).unwrap();
        write(&engine, "file", b"file v2", WriteMode::Overwrite).unwrap();
        write(&engine, "dir/inner.txt", b"inner", WriteMode::Create).unwrap();
        let w = |rel: &str| ws.join(rel);

        // Symlinks that leave the workspace, absolutely and relatively.
        symlink(&sentinel, &w("out_abs_dir"));
        symlink("../sentinel", &w("out_rel_dir"));
        symlink(sentinel.join("x"), &w("out_abs_file"));
        symlink("../sentinel/x", &w("out_rel_file"));
        symlink("../sentinel/new", &w("out_rel_new"));
        symlink("../../sentinel", &w("dir/out_deep"));
        symlink("dir/hop2", &w("hop1"));
        symlink("../out_rel_file", &w("dir/hop2"));
        symlink("dir/../../sentinel/x", &w("out_via_dotdot"));
        symlink("/proc/self/root", &w("magic_root"));
        symlink("/proc/self/cwd", &w("magic_cwd"));
        symlink("/proc/self/fd/1", &w("magic_fd"));
        symlink("procfs/self/root", &w("to_magic"));
        // Loops and over-long chains (41 links: one more than either limit).
        symlink("loop_b", &w("loop_a"));
        symlink("loop_a", &w("loop_b"));
        symlink("self_loop", &w("self_loop"));
        for i in 0..41 {
            let next = if i == 40 { "file".to_string() } else { format!("chain{:02}", i + 1) };
            symlink(&next, &w(&format!("chain{i:02}")));
            let next = if i == 40 { "dir".to_string() } else { format!("dchain{:02}", i + 1) };
            symlink(&next, &w(&format!("dchain{i:02}")));
        }
        // Names that are not UTF-8, and targets that are too long.
        let bad = OsStr::from_bytes(b"bad\xffname");
        std::fs::create_dir(ws.join(bad)).unwrap();
        symlink(bad, &w("nonutf_dir"));
        symlink(OsStr::from_bytes(b"bad\xffname/f"), &w("nonutf_link"));
        symlink("z".repeat(256), &w("longname_link"));
        symlink("d/".repeat(2046) + "ff", &w("dir/longpath_link"));
        // Every way into the state directory.
        symlink(".resilient_write", &w("st"));
        symlink("../.resilient_write", &w("dir/st2"));
        symlink(".resilient_write/journal.jsonl", &w("jl"));
        // Things that are not regular files.
        symlink("dir", &w("dirlink"));
        symlink("file", &w("filelink"));
        nix::unistd::mkfifo(&w("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        nix::unistd::mkfifo(&w("dir/fifo2"), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        drop(std::os::unix::net::UnixListener::bind(w("sock")).unwrap());
        mknod(&w("cdev"), nix::sys::stat::SFlag::S_IFCHR, nix::sys::stat::makedev(1, 3));
        mknod(&w("bdev"), nix::sys::stat::SFlag::S_IFBLK, nix::sys::stat::makedev(7, 0));
        symlink("fifo", &w("fifolink"));
        symlink("cdev", &w("devlink"));
        // A real procfs inside the workspace: its magic links must not be followed.
        std::fs::create_dir(w("procfs")).unwrap();
        let proc = Mounted::new(&["-t", "proc", "proc"], &w("procfs"));

        // The journal index is a cache a read builds (and catches up): made now, and opaque to
        // the snapshots, so that a refused operation is judged by what it does to everything else.
        engine.workspace().history("file").unwrap();
        assert!(ws.join(".resilient_write/index").is_dir(), "a read built the index");

        Fixture { engine, _proc: proc, ws, sentinel, stored: sha(b"file v1"), parent }
    }

    fn snapshot(&self) -> Snapshot {
        snapshot(self.parent.path(), &[self.ws.join("procfs"), self.ws.join(".resilient_write/index")])
    }
}

// ---------------------------------------------------------------------------------------------
// The check: one hostile input through every entry point.

/// Expected reason codes per entry point; `None` for history means the read-only query may
/// answer (it covers the state directory on purpose: `gc` rows name `.resilient_write/objects`).
struct Case {
    input: String,
    write: &'static str,
    delete: &'static str,
    restore: &'static str,
    history: Option<&'static str>,
}

fn case(input: impl Into<String>, code: &'static str) -> Case {
    Case { input: input.into(), write: code, delete: code, restore: code, history: Some(code) }
}

/// Inside `.resilient_write/`: refused by every operation that changes something.
fn state(input: impl Into<String>) -> Case {
    Case { history: None, ..case(input, "state_dir_is_read_only") }
}

impl Case {
    /// `history` is a read-only query and may look into the state directory; it refuses
    /// what it cannot look up.
    fn looked_up_as(self, code: &'static str) -> Case {
        Case { history: Some(code), ..self }
    }
}

impl Fixture {
    /// Run `case` through every entry point; return the failures (empty: all good).
    fn check(&self, case: &Case) -> Vec<String> {
        let mut failures = Vec::new();
        let shown = format!("{:?}", case.input.chars().take(60).collect::<String>());
        let mut before = self.snapshot();
        let mut expect = |op: &str, got: Result<String, String>, want: Option<&str>| {
            match (got, want) {
                (Err(code), Some(want)) if code == want => {}
                (Ok(_), None) => {}
                (got, want) => failures.push(format!("{shown} {op}: expected {want:?}, got {got:?}")),
            }
            let after = self.snapshot();
            let changes = diff(&before, &after);
            if !changes.is_empty() {
                failures.push(format!("{shown} {op} touched the disk:\n  {}", changes.join("\n  ")));
                before = after;
            }
        };
        let code = |e: rwfs::Error| {
            // A refusal must be typed and never an unexpected I/O failure.
            assert_ne!(e.kind(), rwfs::ErrorKind::Io, "{shown}: untyped error {e:?}");
            e.reason().code().to_string()
        };
        let engine = &self.engine;
        for mode in MODES {
            let got = write(engine, &case.input, b"hostile bytes", mode).map(|c| format!("{c:?}")).map_err(code);
            expect(&format!("write({})", mode.as_str()), got, Some(case.write));
        }
        let got = engine.delete(&case.input, None, &actor()).map(|c| format!("{c:?}")).map_err(code);
        expect("delete", got, Some(case.delete));
        let got = engine
            .restore(&case.input, &RestoreTo::Sha(self.stored.to_hex()), &actor())
            .map(|r| format!("{r:?}"))
            .map_err(code);
        expect("restore(sha)", got, Some(case.restore));
        let got = engine
            .restore(&case.input, &RestoreTo::At(SystemTime::now()), &actor())
            .map(|r| format!("{r:?}"))
            .map_err(code);
        expect("restore(at)", got, Some(case.restore));
        let got = engine.workspace().history(&case.input).map(|h| format!("{:?}", h.path)).map_err(code);
        expect("history", got, case.history);
        failures
    }
}

fn hostile_cases(fx: &Fixture) -> Vec<Case> {
    let sentinel = fx.sentinel.display().to_string();
    let ws = fx.ws.display().to_string();
    vec![
        // Absolute paths, whatever they name.
        case("/etc/passwd", "absolute_path_rejected"),
        case("/tmp/..", "absolute_path_rejected"),
        case("//x", "absolute_path_rejected"),
        case("/", "absolute_path_rejected"),
        case(format!("{sentinel}/x"), "absolute_path_rejected"),
        case(format!("{ws}/file"), "absolute_path_rejected"),
        // Refusals that need no disk access.
        case("", "empty_path"),
        case("a\0b", "nul_byte_in_path"),
        case("\0", "nul_byte_in_path"),
        case("file\0/../../sentinel/x", "nul_byte_in_path"),
        case("/etc/passwd\0", "nul_byte_in_path"),
        case("x".repeat(256), "name_too_long"),
        case(format!("dir/{}", "y".repeat(256)), "name_too_long"),
        case(format!("{}x", "a/".repeat(2048)), "path_too_long"),
        case(format!("{}etc/passwd", "../".repeat(1366)), "path_too_long"),
        // `..` chains.
        case("../x", "escapes_workspace"),
        case("../sentinel/x", "escapes_workspace"),
        case("a/../../x", "escapes_workspace"),
        case("a/b/../../../x", "escapes_workspace"),
        case("dir/../../sentinel/x", "escapes_workspace"),
        case("./../x", "escapes_workspace"),
        case("dir/./.././../sentinel/target", "escapes_workspace"),
        case(format!("{}etc/passwd", "../".repeat(12)), "escapes_workspace"),
        case("../ws/file", "escapes_workspace"),
        case("dir/../../ws/dir/inner.txt", "escapes_workspace"),
        // Symlinks that point outside, as a parent and as the final component.
        case("out_abs_dir/x", "escapes_workspace"),
        case("out_rel_dir/x", "escapes_workspace"),
        case("out_abs_dir/newsub/x", "escapes_workspace"),
        case("out_rel_dir/sub/y", "escapes_workspace"),
        case("out_abs_file", "escapes_workspace"),
        case("out_rel_file", "escapes_workspace"),
        case("out_rel_new", "escapes_workspace"),
        case("dir/out_deep/x", "escapes_workspace"),
        case("hop1", "escapes_workspace"),
        case("out_via_dotdot", "escapes_workspace"),
        case("dir/../out_rel_dir/target", "escapes_workspace"),
        // Magic links: absolute ones escape; through a procfs inside the tree they are refused.
        case("magic_root/etc/passwd", "escapes_workspace"),
        case("magic_cwd", "escapes_workspace"),
        case("magic_fd", "escapes_workspace"),
        case("procfs/self/root/etc/passwd", "too_many_symlinks"),
        case("procfs/self/cwd/x", "too_many_symlinks"),
        case("procfs/thread-self/root/tmp/x", "too_many_symlinks"),
        case("to_magic/etc/passwd", "too_many_symlinks"),
        case("procfs/self/exe", "escapes_workspace"),
        case("procfs/self/root", "escapes_workspace"),
        // Loops and chains longer than the limits.
        case("loop_a", "too_many_symlinks"),
        case("loop_a/x", "too_many_symlinks"),
        case("self_loop", "too_many_symlinks"),
        case("chain00", "too_many_symlinks"),
        case("dchain00/x", "too_many_symlinks"),
        // Not UTF-8 on disk; too long after following a symlink.
        case("nonutf_dir/x", "path_not_utf8"),
        case("nonutf_link", "path_not_utf8"),
        case("longname_link", "name_too_long"),
        case("dir/longpath_link", "path_too_long"),
        // The state directory, by every spelling.
        state(".resilient_write/journal.jsonl"),
        state(".resilient_write/lock"),
        state("./.resilient_write/x"),
        state("a/../.resilient_write/x"),
        state("dir/../.resilient_write/journal.jsonl"),
        state(".//.resilient_write//lock"),
        state(".resilient_write").looked_up_as("is_a_directory"),
        state(".resilient_write/objects/newsub/x"),
        state("st").looked_up_as("is_a_directory"),
        state("st/x"),
        state("st/journal.jsonl"),
        state("st/newsub/x"),
        state("dir/st2/lock"),
        state("dir/../st/x"),
        state("jl"),
        // Directories.
        case("dir", "is_a_directory"),
        case("dir/", "is_a_directory"),
        case(".", "is_a_directory"),
        case("./", "is_a_directory"),
        case("dir/.", "is_a_directory"),
        case("dir/..", "is_a_directory"),
        case("dirlink", "is_a_directory"),
        case("procfs", "is_a_directory"),
        case(".resilient_write/", "is_a_directory"),
        // A final `..` names a directory: refused as one before anything is resolved.
        case("..", "is_a_directory"),
        case("../..", "is_a_directory"),
        // A regular file used as a directory.
        case("file/x", "not_a_directory"),
        case("file/x/y", "not_a_directory"),
        case("filelink/x", "not_a_directory"),
        case("dir/inner.txt/x", "not_a_directory"),
        // Fifos, sockets and devices.
        case("fifo", "not_a_regular_file"),
        case("dir/fifo2", "not_a_regular_file"),
        case("sock", "not_a_regular_file"),
        case("cdev", "not_a_regular_file"),
        case("bdev", "not_a_regular_file"),
        case("fifolink", "not_a_regular_file"),
        case("devlink", "not_a_regular_file"),
    ]
}

#[test]
fn every_hostile_path_is_refused_typed_and_touches_nothing() {
    let fx = Fixture::new();
    let cases = hostile_cases(&fx);
    let distinct: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.input.as_str()).collect();
    assert_eq!(distinct.len(), cases.len(), "duplicate inputs in the table");
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let journal_before = std::fs::read(fx.ws.join(".resilient_write/journal.jsonl")).unwrap();
    let mut failures = Vec::new();
    for case in &cases {
        failures.extend(fx.check(case));
    }
    let refused: usize = cases.iter().map(|c| MODES.len() + 3 + usize::from(c.history.is_some())).sum();
    println!("hostile_paths: {} distinct hostile inputs checked ({refused} refused operations)", cases.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    // Not one row for all those refusals, and the traps are still in place.
    assert_eq!(std::fs::read(fx.ws.join(".resilient_write/journal.jsonl")).unwrap(), journal_before);
    assert_eq!(std::fs::read(fx.sentinel.join("x")).unwrap(), b"sentinel x");
    // The fixture's own files still work normally.
    write(&fx.engine, "file", b"file v3", WriteMode::Overwrite).unwrap();
    assert_eq!(std::fs::read(fx.ws.join("file")).unwrap(), b"file v3");
}

#[test]
fn a_chain_of_forty_symlinks_is_still_followed() {
    // The control for `chain00`: one link fewer is within the limit.
    let fx = Fixture::new();
    let committed = write(&fx.engine, "chain01", b"via forty links", WriteMode::Overwrite).unwrap();
    assert_eq!(committed.path.as_str(), "file");
    assert_eq!(std::fs::read(fx.ws.join("file")).unwrap(), b"via forty links");
    let committed = write(&fx.engine, "dchain01/new.txt", b"x", WriteMode::Create).unwrap();
    assert_eq!(committed.path.as_str(), "dir/new.txt");
}

#[test]
fn dotdot_is_resolved_exactly_while_renames_happen_elsewhere() {
    // openat2 answers EAGAIN when any rename on the system races with a `..` component; that
    // must be retried, never surface as an I/O error (nor let an escape through).
    let fx = Fixture::new();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let storm = {
        let (stop, dir) = (stop.clone(), fx.parent.path().join("storm"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a"), b"x").unwrap();
        std::thread::spawn(move || {
            let mut renames = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // (Stops by itself if the fixture goes away under a failed test.)
                if std::fs::rename(dir.join("a"), dir.join("b"))
                    .and_then(|_| std::fs::rename(dir.join("b"), dir.join("a")))
                    .is_err()
                {
                    break;
                }
                renames += 2;
            }
            renames
        })
    };
    let ws = fx.engine.workspace();
    let started = std::time::Instant::now();
    let mut lookups = 0;
    while started.elapsed() < std::time::Duration::from_secs(1) {
        assert_eq!(
            ws.lookup("dir/../dir/./../file").map(|p| p.to_string()).map_err(|e| format!("{e:?}")),
            Ok("file".into())
        );
        let escape = ws.lookup("dir/../../sentinel/x").map(|p| p.to_string()).map_err(|e| e.reason().code());
        assert_eq!(escape, Err("escapes_workspace"));
        lookups += 2;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let renames = storm.join().unwrap();
    println!("{lookups} `..` lookups during {renames} renames");
    write(&fx.engine, "dir/../file", b"via dotdot", WriteMode::Overwrite).unwrap();
    assert_eq!(std::fs::read(fx.ws.join("file")).unwrap(), b"via dotdot");
}

// ---------------------------------------------------------------------------------------------
// Races: a symlink swapped in while an operation is under way.

/// When the swap happens.
#[derive(Debug, Clone, PartialEq, Eq)]
enum At {
    /// Just before the `nth` (from 1) `stat(dir, name)`: the first is resolution's look at the
    /// final name, right after it opened `dir`.
    Stat { dir: String, name: String, nth: usize },
    /// Just before a temp file is created in `dir` (the content is about to be staged).
    CreateTemp { dir: String },
    /// Just after `mkdir(dir, name)` created a missing parent.
    AfterMkdir { dir: String, name: String },
}

type Hook = Box<dyn FnOnce() + Send>;

/// [`OsDisk`] with one hook, run once at a chosen moment.
struct SwapDisk {
    at: At,
    hook: Mutex<Option<Hook>>,
    fired: Mutex<bool>,
    stats: Mutex<usize>,
}

impl SwapDisk {
    fn new(at: At, hook: impl FnOnce() + Send + 'static) -> Arc<Hooked<SwapDisk>> {
        let disk =
            SwapDisk { at, hook: Mutex::new(Some(Box::new(hook))), fired: Mutex::new(false), stats: Mutex::new(0) };
        Arc::new(Hooked(disk))
    }

    fn fire_if(&self, now: impl Fn(&At) -> bool) {
        if now(&self.at)
            && let Some(hook) = self.hook.lock().unwrap().take()
        {
            hook();
            *self.fired.lock().unwrap() = true;
        }
    }

    fn fired(&self) -> bool {
        *self.fired.lock().unwrap()
    }
}

impl Intercept for SwapDisk {
    fn before(&self, call: &Call<'_>) -> io::Result<()> {
        match *call {
            Call::Stat { dir, name } => self.fire_if(|at| match at {
                At::Stat { dir: d, name: n, nth } if d == dir.rel() && n == name => {
                    let mut seen = self.stats.lock().unwrap();
                    *seen += 1;
                    *seen == *nth
                }
                _ => false,
            }),
            Call::CreateTemp { dir } => self.fire_if(|at| matches!(at, At::CreateTemp { dir: d } if d == dir.rel())),
            _ => {}
        }
        Ok(())
    }

    fn after(&self, call: &Call<'_>, _created: Option<Created<'_>>) {
        if let Call::Mkdir { dir, name } = *call {
            self.fire_if(|at| matches!(at, At::AfterMkdir { dir: d, name: n } if d == dir.rel() && n == name));
        }
    }
}

/// A workspace next to a sentinel, for one race.
struct RaceFixture {
    parent: tempfile::TempDir,
    ws: PathBuf,
    sentinel: PathBuf,
}

impl RaceFixture {
    fn new() -> RaceFixture {
        let parent = tempfile::Builder::new().prefix("rwfs-race-").tempdir().unwrap();
        let ws = parent.path().join("ws");
        let sentinel = parent.path().join("sentinel");
        std::fs::create_dir(&ws).unwrap();
        make_sentinel(&sentinel);
        // Seed through a plain engine so the files have rows.
        let engine = Engine::open(&ws, &Default::default()).unwrap();
        write(&engine, "sub/target", b"old target", WriteMode::Create).unwrap();
        write(&engine, "a/b/target", b"old deep target", WriteMode::Create).unwrap();
        engine.close().unwrap();
        RaceFixture { parent, ws, sentinel }
    }

    fn sentinel_snapshot(&self) -> Snapshot {
        snapshot(&self.sentinel, &[])
    }

    /// Rename `rel` aside to `<rel>.moved` and put a symlink to `to` in its place.
    fn swapper(&self, rel: &str, to: PathBuf) -> impl FnOnce() + Send + 'static {
        let path = self.ws.join(rel);
        move || {
            let moved = PathBuf::from(format!("{}.moved", path.display()));
            std::fs::rename(&path, &moved).unwrap();
            symlink(&to, &path);
        }
    }

    fn engine(&self, disk: Arc<Hooked<SwapDisk>>) -> Engine {
        Engine::open(&self.ws, &Options { disk: Some(disk), ..Options::default() }.into()).expect("open engine")
    }

    fn read(&self, rel: &str) -> Option<Vec<u8>> {
        std::fs::read(self.ws.join(rel)).ok()
    }
}

/// Every file in objects/ is a regular file whose bytes hash to its name.
fn assert_objects_sound(ws: &Path) {
    let objects = ws.join(".resilient_write/objects");
    for sub in std::fs::read_dir(&objects).unwrap() {
        for entry in std::fs::read_dir(sub.unwrap().path()).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            assert!(meta.is_file(), "objects/ holds a {:?}: {}", meta.file_type(), entry.path().display());
            let bytes = std::fs::read(entry.path()).unwrap();
            assert_eq!(sha(&bytes).to_hex(), entry.file_name().to_str().unwrap(), "{}", entry.path().display());
        }
    }
}

#[test]
fn parent_swapped_for_an_absolute_symlink_after_resolution() {
    let fx = RaceFixture::new();
    let before = fx.sentinel_snapshot();
    let disk = SwapDisk::new(
        At::Stat { dir: "sub".into(), name: "target".into(), nth: 1 },
        fx.swapper("sub", fx.sentinel.clone()),
    );
    let engine = fx.engine(disk.clone());
    let committed =
        write(&engine, "sub/target", b"new target", WriteMode::Overwrite).expect("write lands in the opened directory");
    assert!(disk.fired());
    // The bytes went to the directory resolution opened (now called sub.moved), not through the link.
    assert_eq!(committed.path.as_str(), "sub/target");
    assert_eq!(fx.read("sub.moved/target").unwrap(), b"new target");
    assert!(std::fs::symlink_metadata(fx.ws.join("sub")).unwrap().file_type().is_symlink());
    assert_eq!(diff(&before, &fx.sentinel_snapshot()), Vec::<String>::new());
    assert_eq!(std::fs::read(fx.sentinel.join("target")).unwrap(), b"sentinel target");
    drop(engine);
    // The replaced version was kept, and objects/ holds only what it should.
    assert_eq!(
        std::fs::read(fx.ws.join(format!(
            ".resilient_write/objects/{}/{}",
            &sha(b"old target").to_hex()[..2],
            sha(b"old target")
        )))
        .unwrap(),
        b"old target"
    );
    assert_objects_sound(&fx.ws);
    assert!(fx.parent.path().exists());
}

#[test]
fn parent_swapped_for_a_relative_symlink_before_staging_each_mode() {
    for (mode, name) in [(WriteMode::Create, "new"), (WriteMode::Overwrite, "target"), (WriteMode::Append, "target")] {
        let fx = RaceFixture::new();
        let before = fx.sentinel_snapshot();
        let disk = SwapDisk::new(At::CreateTemp { dir: "sub".into() }, fx.swapper("sub", PathBuf::from("../sentinel")));
        let engine = fx.engine(disk.clone());
        let path = format!("sub/{name}");
        let result = write(&engine, &path, b"+raced", mode);
        assert!(disk.fired(), "{mode:?}");
        let committed = result.unwrap_or_else(|e| panic!("{mode:?}: {e:?}"));
        let expected: &[u8] = match mode {
            WriteMode::Append => b"old target+raced",
            _ => b"+raced",
        };
        assert_eq!(committed.path.as_str(), path);
        assert_eq!(fx.read(&format!("sub.moved/{name}")).unwrap(), expected, "{mode:?}");
        assert_eq!(diff(&before, &fx.sentinel_snapshot()), Vec::<String>::new(), "{mode:?}");
        assert!(!fx.sentinel.join("new").exists());
        drop(engine);
        assert_objects_sound(&fx.ws);
    }
}

#[test]
fn grandparent_swapped_while_the_deep_target_is_examined() {
    let fx = RaceFixture::new();
    let before = fx.sentinel_snapshot();
    let disk = SwapDisk::new(
        At::Stat { dir: "a/b".into(), name: "target".into(), nth: 1 },
        fx.swapper("a", fx.sentinel.clone()),
    );
    let engine = fx.engine(disk.clone());
    write(&engine, "a/b/target", b"new deep", WriteMode::Overwrite).unwrap();
    assert!(disk.fired());
    assert_eq!(fx.read("a.moved/b/target").unwrap(), b"new deep");
    assert_eq!(diff(&before, &fx.sentinel_snapshot()), Vec::<String>::new());
    assert!(!fx.sentinel.join("b").exists());
}

#[test]
fn delete_with_the_parent_swapped_removes_only_the_opened_file() {
    let fx = RaceFixture::new();
    let before = fx.sentinel_snapshot();
    let disk = SwapDisk::new(
        At::Stat { dir: "sub".into(), name: "target".into(), nth: 1 },
        fx.swapper("sub", fx.sentinel.clone()),
    );
    let engine = fx.engine(disk.clone());
    let deleted = engine.delete("sub/target", None, &actor()).unwrap();
    assert!(disk.fired());
    assert_eq!(deleted.prev_sha256, Some(sha(b"old target")));
    assert_eq!(fx.read("sub.moved/target"), None);
    assert_eq!(diff(&before, &fx.sentinel_snapshot()), Vec::<String>::new());
    assert_eq!(std::fs::read(fx.sentinel.join("target")).unwrap(), b"sentinel target");
    drop(engine);
    assert_objects_sound(&fx.ws);
}

#[test]
fn a_symlink_swapped_onto_a_name_being_deleted_is_not_kept_as_its_version() {
    let fx = RaceFixture::new();
    let before = fx.sentinel_snapshot();
    // stat #1 is resolution, #2 reads the current version, #3 is the move into objects/.
    let at = At::Stat { dir: "sub".into(), name: "target".into(), nth: 3 };
    let disk = SwapDisk::new(at, fx.swapper("sub/target", fx.sentinel.join("target")));
    let engine = fx.engine(disk.clone());
    let err = engine.delete("sub/target", None, &actor()).unwrap_err();
    assert!(disk.fired());
    assert_eq!(err.reason().code(), "not_a_regular_file", "{err:?}");
    assert_eq!(diff(&before, &fx.sentinel_snapshot()), Vec::<String>::new());
    // The link is left where it was; the file the attacker moved aside is intact.
    assert_eq!(std::fs::read_link(fx.ws.join("sub/target")).unwrap(), fx.sentinel.join("target"));
    assert_eq!(fx.read("sub/target.moved").unwrap(), b"old target");
    assert_objects_sound(&fx.ws);
    // The journal says the delete did not happen.
    drop(engine);
    let mut ops = Vec::new();
    rwfs::history::Workspace::open(&fx.ws, &Options::default())
        .unwrap()
        .read_journal(|e| ops.push(e.row.op()))
        .unwrap();
    assert_eq!(ops[ops.len() - 2..], [rwfs::journal::Op::Delete, rwfs::journal::Op::Abort]);
}

#[test]
fn a_new_directory_swapped_for_a_symlink_is_refused() {
    let fx = RaceFixture::new();
    let before = fx.sentinel_snapshot();
    let disk = SwapDisk::new(
        At::AfterMkdir { dir: String::new(), name: "fresh".into() },
        fx.swapper("fresh", fx.sentinel.clone()),
    );
    let engine = fx.engine(disk.clone());
    let err = write(&engine, "fresh/deeper/f", b"x", WriteMode::Create).unwrap_err();
    assert!(disk.fired());
    assert_eq!(err.reason().code(), "escapes_workspace", "{err:?}");
    assert_eq!(diff(&before, &fx.sentinel_snapshot()), Vec::<String>::new());
    assert!(!fx.sentinel.join("deeper").exists());
    // What was created stayed inside the workspace (the directory, moved aside by the attacker).
    assert!(fx.ws.join("fresh.moved").is_dir());
    assert!(!fx.ws.join("fresh.moved/deeper").exists());
}

#[test]
fn a_symlink_swapped_onto_the_final_name_is_not_written_through() {
    let fx = RaceFixture::new();
    let before = fx.sentinel_snapshot();
    let disk =
        SwapDisk::new(At::CreateTemp { dir: "sub".into() }, fx.swapper("sub/target", fx.sentinel.join("target")));
    let engine = fx.engine(disk.clone());
    let committed = write(&engine, "sub/target", b"new target", WriteMode::Overwrite).expect("the name is replaced");
    assert!(disk.fired());
    assert_eq!(diff(&before, &fx.sentinel_snapshot()), Vec::<String>::new());
    assert_eq!(std::fs::read(fx.sentinel.join("target")).unwrap(), b"sentinel target");
    // The new version replaced the *name*; the link was not followed.
    assert_eq!(committed.path.as_str(), "sub/target");
    assert!(std::fs::symlink_metadata(fx.ws.join("sub/target")).unwrap().is_file());
    assert_eq!(fx.read("sub/target").unwrap(), b"new target");
    // The file the attacker moved aside is untouched.
    assert_eq!(fx.read("sub/target.moved").unwrap(), b"old target");
    // The displaced link is not filed in objects/ as the old version (it is not one): it stays
    // in the directory under a temp name, still pointing where the attacker aimed it.
    let temps: Vec<_> = std::fs::read_dir(fx.ws.join("sub"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| rwfs::durable::is_temp_name(e.file_name().to_str().unwrap()))
        .collect();
    assert_eq!(temps.len(), 1, "{temps:?}");
    assert_eq!(std::fs::read_link(temps[0].path()).unwrap(), fx.sentinel.join("target"));
    assert_objects_sound(&fx.ws);
    // History still answers, and a restart (recovery) leaves the sentinel alone too.
    let history = engine.workspace().history("sub/target").unwrap();
    assert_eq!(history.current, Some(sha(b"new target")));
    drop(engine);
    Engine::open(&fx.ws, &Default::default()).unwrap().close().unwrap();
    assert_eq!(diff(&before, &fx.sentinel_snapshot()), Vec::<String>::new());
    assert_objects_sound(&fx.ws);
}

#[test]
fn a_chmod_of_a_name_never_follows_a_symlink_there() {
    use rwfs::durable::{Disk, Meta, OsDisk};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    symlink("f", &dir.path().join("l"));
    let root = OsDisk.open_root(dir.path()).unwrap();
    let mode = || std::fs::metadata(dir.path().join("f")).unwrap().mode() & 0o7777;
    OsDisk.set_perm(&root, "f", 0o600).unwrap();
    assert_eq!(mode(), 0o600);
    // Linux has no mode on a symlink: refused, and its target is untouched.
    let e = OsDisk.set_perm(&root, "l", 0o777).expect_err("a symlink has no mode to set");
    assert_eq!(e.raw_os_error(), Some(nix::libc::EOPNOTSUPP), "{e}");
    assert_eq!(mode(), 0o600, "the target keeps its mode");
    let e = OsDisk.set_perm(&root, "missing", 0o600).expect_err("nothing to chmod");
    assert_eq!(e.raw_os_error(), Some(nix::libc::ENOENT), "{e}");
}
