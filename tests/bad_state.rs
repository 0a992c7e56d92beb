//! Bad state: a torn or garbled journal, missing objects, a corrupt lock file, a state directory
//! that is not a directory, a backing filesystem that is read-only or full. Each gives a clear
//! typed error or is tolerated, and loses nothing.
//!
//! The filesystem tests mount for real (tmpfs, and ext4 on a loop device for a filesystem that
//! turns read-only under a running engine). A mount that fails fails the test: they never skip.

use std::ffi::OsStr;
use std::io::{self, Write as _};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use nix::sys::stat::Mode;
use rwfs::durable::{Dir, Disk, OsDisk, Temp, is_temp_name};
use rwfs::engine::{Engine, Restored, WriteMode};
use rwfs::history::{Availability, Options, Report, RestoreTo, Workspace, verify};
use rwfs::journal::Problem;

use crate::support::hooked::{Hooked, Intercept};
use crate::support::{Ws, actor, assert_reason, sha, write};

const JOURNAL: &str = ".resilient_write/journal.jsonl";

// ---------------------------------------------------------------------------------------------
// Helpers.

fn rwfs(ws: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rwfs")).arg("--workspace").arg(ws).args(args).output().expect("run rwfs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn report(ws: &Ws) -> Report {
    verify(&ws.workspace()).expect("verify runs")
}

fn problems(ws: &Ws) -> Vec<Problem> {
    ws.workspace().read_journal(|_| {}).expect("read journal").problems
}

fn journal_lines(ws: &Ws) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(ws.abs(JOURNAL)).unwrap();
    assert!(bytes.ends_with(b"\n"));
    bytes[..bytes.len() - 1].split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn set_journal(ws: &Ws, lines: &[Vec<u8>]) {
    let mut bytes = lines.join(&b'\n');
    bytes.push(b'\n');
    std::fs::write(ws.abs(JOURNAL), bytes).unwrap();
}

/// Every name below `dir` (the state directory included) with its kind and content.
fn listing(dir: &Path) -> Vec<(PathBuf, String)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let rel = path.strip_prefix(base).unwrap().to_path_buf();
            let ft = std::fs::symlink_metadata(&path).unwrap().file_type();
            if ft.is_dir() {
                out.push((rel, "dir".into()));
                walk(base, &path, out);
            } else if ft.is_symlink() {
                out.push((rel, format!("-> {}", std::fs::read_link(&path).unwrap().display())));
            } else if ft.is_file() {
                out.push((rel, format!("file {}", sha(&std::fs::read(&path).unwrap()).short(16))));
            } else {
                out.push((rel, format!("{:?}", ft.is_fifo())));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

/// Names of rwfs temp files anywhere below `dir`, the state directory included.
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    listing(dir)
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.file_name().and_then(OsStr::to_str).is_some_and(is_temp_name))
        .collect()
}

/// Run a command; a failure fails the test with its stderr.
fn run(program: &str, args: &[&OsStr]) -> String {
    match try_run(program, args) {
        Ok(stdout) => stdout,
        Err(e) => panic!("{e}"),
    }
}

fn try_run(program: &str, args: &[&OsStr]) -> Result<String, String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(text(&out.stdout))
    } else {
        Err(format!("{program} {args:?} failed ({}): {}", out.status, text(&out.stderr)))
    }
}

/// A mount, lazily unmounted on drop (also when the test panics).
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount(args: &[&str], source: &OsStr, target: &Path) -> Mounted {
    let mut all: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    all.extend([source, target.as_os_str()]);
    run("mount", &all);
    Mounted(target.to_path_buf())
}

fn remount(target: &Path, options: &str) -> Result<String, String> {
    try_run("mount", &[OsStr::new("-o"), OsStr::new(options), target.as_os_str()])
}

/// A tmpfs of a given size on a fresh temp directory. Field order is drop order.
struct Tmpfs {
    mount: Mounted,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn new(size: &str) -> Tmpfs {
        let dir = tempfile::Builder::new().prefix("rwfs-tmpfs-").tempdir().unwrap();
        let mount = mount(&["-t", "tmpfs", "-o", &format!("size={size}")], OsStr::new("tmpfs"), dir.path());
        Tmpfs { mount, _dir: dir }
    }

    fn path(&self) -> &Path {
        &self.mount.0
    }

    /// Free bytes, as the filesystem counts them.
    fn free(&self) -> u64 {
        let st = nix::sys::statvfs::statvfs(self.path()).unwrap();
        st.blocks_available() as u64 * st.fragment_size() as u64
    }
}

// ---------------------------------------------------------------------------------------------
// The journal.

#[test]
fn a_torn_last_line_is_reported_skipped_and_the_next_row_starts_on_a_fresh_line() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "a.txt", b"a", WriteMode::Create).unwrap();
    write(&engine, "b.txt", b"b", WriteMode::Create).unwrap();
    engine.close().unwrap();
    // A crash in the middle of an append: half a row, no newline.
    let lines = journal_lines(&ws);
    let half = &lines[1][..lines[1].len() / 2];
    std::fs::OpenOptions::new().append(true).open(ws.abs(JOURNAL)).unwrap().write_all(half).unwrap();
    let torn = Problem::Torn { line: 3, bytes: half.len() as u64 };
    assert_eq!(problems(&ws), vec![torn.clone()]);
    let before = report(&ws);
    assert!(before.is_clean(), "a torn last line loses no row: {before:?}");
    assert_eq!((before.rows, before.problems, before.drift), (2, vec![torn], vec![]));

    let engine = ws.open();
    let c = write(&engine, "c.txt", b"c", WriteMode::Create).unwrap();
    engine.close().unwrap();
    // The torn bytes stay (nothing is destroyed), terminated; the new row has a line of its own.
    let after = journal_lines(&ws);
    assert_eq!(after.len(), 4);
    assert_eq!(after[2], half);
    let row: rwfs::journal::Row = serde_json::from_slice(&after[3]).unwrap();
    assert_eq!((row.path.as_str(), row.seq), ("c.txt", Some(c.seq)));
    assert_eq!(c.seq, 3);
    // Exactly the torn line is reported (now terminated, so "unreadable"); the chain holds.
    let report = report(&ws);
    assert_eq!(report.rows, 3);
    assert!(
        matches!(report.problems.as_slice(), [Problem::Unreadable { line: 3, bytes, .. }] if *bytes == half.len() as u64),
        "{:?}",
        report.problems
    );
    assert!(report.drift.is_empty(), "{:?}", report.drift);

    let log = rwfs(ws.path(), &["log", "-n", "0", "--json"]);
    assert!(log.status.success(), "{}", text(&log.stderr));
    let paths: Vec<String> =
        text(&log.stdout).lines().map(|l| serde_json::from_str::<rwfs::journal::Row>(l).unwrap().path).collect();
    assert_eq!(paths, ["a.txt", "b.txt", "c.txt"]);
    assert!(text(&log.stderr).contains("line 3"), "{}", text(&log.stderr));
    // What a crash leaves loses no row: verify lists the line and answers yes (a CI job gating
    // on it after a power cut is not failed by the crash itself).
    assert!(report.is_clean(), "{report:?}");
    let verify = rwfs(ws.path(), &["verify"]);
    let out = text(&verify.stdout);
    assert_eq!(verify.status.code(), Some(0), "{out}");
    assert!(out.contains("journal: 3 rows, 0 problems"), "{out}");
    assert!(out.contains("line 3: not a journal row") && out.contains("a torn append"), "{out}");
    let json: serde_json::Value = serde_json::from_slice(&rwfs(ws.path(), &["verify", "--json"]).stdout).unwrap();
    assert_eq!((&json["ok"], json["problems"].as_array().map(Vec::len)), (&serde_json::json!(true), Some(0)), "{json}");
    assert!(json["skipped_lines"][0].as_str().is_some_and(|l| l.starts_with("line 3: ")), "{json}");
}

#[test]
fn garbage_lines_in_the_middle_are_reported_by_line_and_skipped() {
    let ws = Ws::new();
    let engine = ws.open();
    for name in ["f1", "f2", "f3"] {
        write(&engine, name, name.as_bytes(), WriteMode::Create).unwrap();
    }
    engine.close().unwrap();
    let lines = journal_lines(&ws);
    let junk: Vec<Vec<u8>> = vec![
        b"\x00\x01\x02\x7f binary \xfe\xff\x00".to_vec(),
        b"{}".to_vec(),
        lines[0][..lines[0].len() / 3].to_vec(),
        b"\xff\xfe not utf-8 \xc3\x28".to_vec(),
        Vec::new(), // an empty line: skipped without a report, but it counts
        br#"{"path": 5, "sha256": ""}"#.to_vec(),
        b"[1, 2, 3]".to_vec(),
    ];
    let mut garbled = lines[..2].to_vec();
    garbled.extend(junk.iter().cloned());
    garbled.push(lines[2].clone());
    set_journal(&ws, &garbled);

    let expected_lines: Vec<(u64, u64)> = [(3, 0), (4, 1), (5, 2), (6, 3), (8, 5), (9, 6)]
        .iter()
        .map(|&(line, j)| (line, junk[j].len() as u64))
        .collect();
    // Lines inserted before the head's row move it: the head says so (first as a mismatch, after
    // the next open as the `tamper` row that recorded it).
    let check = |problems: &[Problem]| {
        let got: Vec<(u64, u64)> = problems
            .iter()
            .filter_map(|p| match p {
                Problem::Unreadable { line, bytes, .. } => Some((*line, *bytes)),
                Problem::HeadMismatch { head_seq: 3, .. } | Problem::Tampered { line: 11, .. } => None,
                other => panic!("unexpected problem {other:?}"),
            })
            .collect();
        assert_eq!(got, expected_lines);
        assert_eq!(problems.len(), expected_lines.len() + 1, "{problems:?}");
    };
    check(&problems(&ws));
    let rows: Vec<String> = ws.rows().into_iter().map(|r| r.path).collect();
    assert_eq!(rows, ["f1", "f2", "f3"]);
    // The engine opens over it and keeps writing; nothing is fatal and the chain still holds.
    let engine = ws.open();
    assert!(engine.recovery().corrected.is_empty());
    write(&engine, "f4", b"f4", WriteMode::Create).unwrap();
    write(&engine, "f1", b"f1 again", WriteMode::Overwrite).unwrap();
    engine.close().unwrap();
    let report = report(&ws);
    check(&report.problems);
    assert_eq!((report.rows, report.drift.len()), (6, 0), "three rows, the tamper row, two more");
    assert_eq!(ws.workspace().history("f1").unwrap().versions.len(), 2);
    let log = rwfs(ws.path(), &["log", "-n", "0"]);
    assert!(log.status.success(), "{}", text(&log.stderr));
    for line in [3, 4, 5, 6, 8, 9] {
        assert!(text(&log.stderr).contains(&format!("line {line}: not a journal row")), "{}", text(&log.stderr));
    }
}

#[test]
fn editing_a_byte_of_an_earlier_row_is_reported_as_a_broken_chain() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"12345", WriteMode::Create).unwrap();
    write(&engine, "g", b"g", WriteMode::Create).unwrap();
    write(&engine, "h", b"h", WriteMode::Create).unwrap();
    engine.close().unwrap();
    assert!(report(&ws).is_clean());
    // `"bytes":5` → `"bytes":9` in the first row: still a valid row, but not the one chained.
    let mut lines = journal_lines(&ws);
    let at = lines[0].windows(9).position(|w| w == br#""bytes":5"#).expect("bytes field") + 8;
    lines[0][at] = b'9';
    set_journal(&ws, &lines);
    assert_eq!(ws.rows()[0].bytes, 9, "the edited row still parses");
    assert_eq!(problems(&ws), vec![Problem::ChainBroken { line: 2 }, Problem::MacBroken { line: 2 }]);
    let out = rwfs(ws.path(), &["verify", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert!(json["problems"][0].as_str().unwrap().contains("line 2: hash chain broken"), "{json}");
    // The engine still opens; the damage stays reported, new rows chain on normally.
    let engine = ws.open();
    write(&engine, "i", b"i", WriteMode::Create).unwrap();
    engine.close().unwrap();
    assert_eq!(problems(&ws), vec![Problem::ChainBroken { line: 2 }, Problem::MacBroken { line: 2 }]);
    // Removing a row is caught the same way (and the head no longer ends where it did).
    let mut lines = journal_lines(&ws);
    lines.remove(2);
    set_journal(&ws, &lines);
    let found = problems(&ws);
    assert_eq!(
        found[..4],
        [
            Problem::ChainBroken { line: 2 },
            Problem::MacBroken { line: 2 },
            Problem::ChainBroken { line: 3 },
            Problem::MacBroken { line: 3 }
        ]
    );
    assert!(matches!(found[4..], [Problem::Truncated { .. }]), "{found:?}");
}

// ---------------------------------------------------------------------------------------------
// The store.

fn object_path(ws: &Ws, bytes: &[u8]) -> PathBuf {
    let hex = sha(bytes).to_hex();
    ws.abs(&format!(".resilient_write/objects/{}/{hex}", &hex[..2]))
}

#[test]
fn missing_objects_show_in_history_and_restore_says_object_missing() {
    let ws = Ws::new();
    let engine = ws.open();
    for v in ["v1", "v2", "v3"] {
        write(&engine, "f", v.as_bytes(), WriteMode::Overwrite).unwrap();
    }
    std::fs::remove_file(object_path(&ws, b"v1")).unwrap();
    let wheres: Vec<_> = ws.workspace().history("f").unwrap().versions.iter().map(|v| v.availability).collect();
    assert_eq!(wheres, [Availability::Missing, Availability::Stored, Availability::Current]);
    let err = assert_reason(engine.restore("f", &RestoreTo::Sha(sha(b"v1").to_hex()), &actor()), "object_missing");
    assert_eq!(err.kind().as_str(), "stale_precondition");
    assert_eq!(ws.read("f").unwrap(), b"v3", "a failed restore changes nothing");
    // The other kept version still comes back, and the tree verifies.
    assert!(matches!(
        engine.restore("f", &RestoreTo::Sha(sha(b"v2").to_hex()), &actor()).unwrap(),
        Restored::Committed(_)
    ));
    assert_eq!(ws.read("f").unwrap(), b"v2");
    assert!(report(&ws).is_clean(), "{:?}", report(&ws));
    engine.close().unwrap();

    // The whole store gone: history says so, the engine recreates it and carries on.
    std::fs::remove_dir_all(ws.abs(".resilient_write/objects")).unwrap();
    let history = ws.workspace().history("f").unwrap();
    let wheres: Vec<_> = history.versions.iter().map(|v| v.availability).collect();
    // v1, v2, v3, then v2 restored (current).
    assert_eq!(wheres, [Availability::Missing, Availability::Current, Availability::Missing, Availability::Current]);
    let out = rwfs(ws.path(), &["history", "f"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).matches("missing").count(), 2, "{}", text(&out.stdout));
    assert!(report(&ws).is_clean());
    let engine = ws.open();
    assert_reason(engine.restore("f", &RestoreTo::Sha(sha(b"v3").to_hex()), &actor()), "object_missing");
    assert_reason(engine.restore("f", &RestoreTo::Sha(sha(b"v1").to_hex()), &actor()), "object_missing");
    write(&engine, "f", b"v4", WriteMode::Overwrite).unwrap();
    assert_eq!(std::fs::read(object_path(&ws, b"v2")).unwrap(), b"v2", "the replaced version is kept again");
    engine.close().unwrap();
    assert!(report(&ws).is_clean());
}

// ---------------------------------------------------------------------------------------------
// The lock file and the state directory.

#[test]
fn a_corrupt_lock_file_makes_recovery_check_every_row_and_the_engine_works() {
    let garbage: Vec<Vec<u8>> = vec![
        (0..=255u8).rev().cycle().take(300).collect(), // longer than the reader's buffer, not UTF-8
        b"\x00\x00\x00\x00".to_vec(),
        br#"{"pid":12,"settled_seq":"#.to_vec(), // torn
        br#"{"pid":12}"#.to_vec(),               // a field missing
        b"   \n".to_vec(),                       // blank: as if new
    ];
    for lock in garbage {
        let ws = Ws::new();
        let engine = ws.open();
        write(&engine, "a", b"a", WriteMode::Create).unwrap();
        write(&engine, "d/b", b"b", WriteMode::Create).unwrap();
        write(&engine, "a", b"a2", WriteMode::Overwrite).unwrap();
        engine.close().unwrap();
        // Control: a clean close leaves nothing to check.
        let engine = ws.open();
        assert_eq!(engine.recovery().checked, 0);
        engine.close().unwrap();

        std::fs::write(ws.abs(".resilient_write/lock"), &lock).unwrap();
        let engine = ws.open();
        assert_eq!(engine.recovery().checked, 2, "every journaled path is checked with lock {lock:?}");
        assert!(engine.recovery().corrected.is_empty());
        write(&engine, "a", b"a3", WriteMode::Overwrite).unwrap();
        engine.close().unwrap();
        let info: rwfs::history::LockInfo =
            serde_json::from_slice(&std::fs::read(ws.abs(".resilient_write/lock")).unwrap()).unwrap();
        assert_eq!(info.settled_seq, 4);
        assert!(report(&ws).is_clean());
        assert_eq!(ws.read("a").unwrap(), b"a3");
    }
}

#[test]
fn a_lock_file_or_journal_that_is_a_directory_is_a_typed_error() {
    for (name, code) in [("lock", "is_a_directory"), ("journal.jsonl", "is_a_directory")] {
        let ws = Ws::new();
        ws.open().close().unwrap();
        let path = ws.abs(&format!(".resilient_write/{name}"));
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let before = listing(ws.path());
        let err = assert_reason(Engine::open(ws.path(), &Default::default()), code);
        assert_eq!(err.kind().as_str(), "policy_violation");
        assert_eq!(listing(ws.path()), before, "{name}");
    }
}

#[test]
fn a_directory_where_a_journal_key_file_should_be_is_named_as_such() {
    for (name, step) in [("journal.head", "journal head"), ("journal.key", "journal key")] {
        let ws = Ws::new();
        let engine = ws.open();
        write(&engine, "a.txt", b"a", WriteMode::Create).unwrap();
        engine.close().unwrap();
        let path = ws.abs(&format!(".resilient_write/keys/{name}"));
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let out = rwfs(ws.path(), &["write", "b.txt"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        let stderr = stderr.lines().find(|l| l.starts_with("rwfs: ")).unwrap_or_else(|| panic!("{name}: {stderr}"));
        assert!(stderr.contains(&format!(".resilient_write/keys/{name}: ")), "{name}: {stderr}");
        assert!(stderr.contains(step), "{name}: {stderr}");
        let other = if name == "journal.head" { "journal key" } else { "journal head" };
        assert!(!stderr.contains(other), "{name}: {stderr}");
        if name == "journal.head" {
            // Reading needs no head: the commands that only read work, and verify reports it.
            assert_eq!(rwfs(ws.path(), &["log"]).status.code(), Some(0), "{name}: log");
            let verify = rwfs(ws.path(), &["verify", "--json"]);
            assert_eq!(verify.status.code(), Some(1), "{name}: {}", text(&verify.stderr));
            let report: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
            assert!(report["problems"].to_string().contains("journal head"), "{report}");
        }
    }
}

#[test]
fn a_journal_symlinked_outside_is_not_followed() {
    let parent = tempfile::tempdir().unwrap();
    let outside = parent.path().join("outside.jsonl");
    std::fs::write(&outside, b"outside").unwrap();
    let ws = parent.path().join("ws");
    std::fs::create_dir_all(ws.join(".resilient_write")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join(JOURNAL)).unwrap();
    let err = assert_reason(Engine::open(&ws, &Default::default()), "too_many_symlinks");
    assert_eq!(err.kind().as_str(), "policy_violation");
    let err =
        assert_reason(Workspace::open(&ws, &Options::default()).unwrap().read_journal(|_| {}), "too_many_symlinks");
    assert_eq!(err.step(), Some("open journal"));
    assert_eq!(std::fs::read(&outside).unwrap(), b"outside");
}

#[test]
fn a_state_dir_that_is_a_file_or_a_symlink_is_refused_and_nothing_is_created() {
    let parent = tempfile::tempdir().unwrap();
    let elsewhere = parent.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    type Setup = Box<dyn Fn(&Path)>;
    let setups: Vec<(&str, Setup)> = vec![
        (
            "a regular file",
            Box::new(|ws: &Path| std::fs::write(ws.join(".resilient_write"), b"not a directory").unwrap()),
        ),
        (
            "a symlink outside",
            Box::new(move |ws: &Path| std::os::unix::fs::symlink(&elsewhere, ws.join(".resilient_write")).unwrap()),
        ),
        (
            "a symlink inside",
            Box::new(|ws: &Path| {
                std::fs::create_dir(ws.join("real_state")).unwrap();
                std::os::unix::fs::symlink("real_state", ws.join(".resilient_write")).unwrap();
            }),
        ),
        (
            "a dangling symlink",
            Box::new(|ws: &Path| std::os::unix::fs::symlink("nowhere", ws.join(".resilient_write")).unwrap()),
        ),
        (
            "a fifo",
            Box::new(|ws: &Path| {
                nix::unistd::mkfifo(&ws.join(".resilient_write"), Mode::from_bits_truncate(0o644)).unwrap()
            }),
        ),
    ];
    for (i, (what, setup)) in setups.iter().enumerate() {
        let ws = parent.path().join(format!("ws{i}"));
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("kept.txt"), b"kept").unwrap();
        setup(&ws);
        let before = (listing(parent.path()), listing(&ws));
        let err = assert_reason(Engine::open(&ws, &Default::default()), "not_a_directory");
        assert_eq!(err.kind().as_str(), "policy_violation", "{what}");
        assert_eq!(err.path(), Some(".resilient_write"), "{what}: {err}");
        assert_reason(Workspace::open(&ws, &Options::default()).map(|_| ()), "not_a_directory");
        let out = rwfs(&ws, &["write", "x.txt"]);
        assert_eq!(out.status.code(), Some(2), "{what}");
        assert!(text(&out.stderr).contains("policy_violation/not_a_directory"), "{what}: {}", text(&out.stderr));
        assert_eq!((listing(parent.path()), listing(&ws)), before, "{what}: something was created");
    }
    assert!(std::fs::read_dir(parent.path().join("elsewhere")).unwrap().next().is_none());
}

// ---------------------------------------------------------------------------------------------
// A read-only backing filesystem.

#[test]
fn a_read_only_tmpfs_refuses_to_open_with_a_typed_error_and_reads_still_work() {
    let fs = Tmpfs::new("4m");
    let ws = Ws::new_in(fs.path());
    let engine = ws.open();
    write(&engine, "a.txt", b"committed a", WriteMode::Create).unwrap();
    write(&engine, "dir/b.txt", b"committed b", WriteMode::Create).unwrap();
    write(&engine, "a.txt", b"committed a2", WriteMode::Overwrite).unwrap();
    // While an engine holds its journal open for writing the kernel refuses the remount.
    let busy = remount(fs.path(), "remount,ro").expect_err("remount with writers open");
    assert!(busy.contains("busy"), "{busy}");
    engine.close().unwrap();
    remount(fs.path(), "remount,ro").unwrap();
    let tree = listing(ws.path());

    let err = assert_reason(Engine::open(ws.path(), &Default::default()), "read_only_filesystem");
    assert_eq!(err.kind().as_str(), "policy_violation");
    assert_eq!(err.raw_os_error(), Some(nix::libc::EROFS));
    println!("read-only tmpfs: Engine::open -> {}/{} at step {:?}: {err}", err.kind(), err.reason().code(), err.step());
    // The read-only side keeps working.
    assert!(report(&ws).is_clean());
    assert_eq!(ws.workspace().history("a.txt").unwrap().versions.len(), 2);
    let log = rwfs(ws.path(), &["log"]);
    assert!(log.status.success(), "{}", text(&log.stderr));
    let out = rwfs(ws.path(), &["write", "a.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("policy_violation/read_only_filesystem"), "{}", text(&out.stderr));
    assert_eq!(listing(ws.path()), tree);
    assert_eq!(ws.read("a.txt").unwrap(), b"committed a2");

    // Writable again: the engine opens and nothing needed recovering.
    remount(fs.path(), "remount,rw").unwrap();
    let engine = ws.open();
    assert!(engine.recovery().corrected.is_empty() && engine.recovery().temps_kept.is_empty());
    engine.close().unwrap();
}

/// ext4 on a loop device mounted `errors=remount-ro`, so a filesystem error turns it read-only
/// under open files (tmpfs cannot be remounted read-only while the engine has files open).
struct Ext4 {
    mount: Mounted,
    device: String,
    _dir: tempfile::TempDir,
}

impl Ext4 {
    fn new() -> Ext4 {
        let dir = tempfile::Builder::new().prefix("rwfs-ext4-").tempdir().unwrap();
        let image = dir.path().join("image");
        std::fs::File::create(&image).unwrap().set_len(32 << 20).unwrap();
        run("mkfs.ext4", &[OsStr::new("-q"), OsStr::new("-F"), image.as_os_str()]);
        let target = dir.path().join("mnt");
        std::fs::create_dir(&target).unwrap();
        let mount = mount(&["-o", "loop,errors=remount-ro"], image.as_os_str(), &target);
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let device = mounts
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(target.to_str().unwrap()))
            .and_then(|l| l.split(' ').next())
            .and_then(|d| d.strip_prefix("/dev/"))
            .unwrap_or_else(|| panic!("{} not in /proc/self/mounts", target.display()))
            .to_string();
        Ext4 { mount, device, _dir: dir }
    }

    fn path(&self) -> &Path {
        &self.mount.0
    }

    /// What a real filesystem error does: ext4 aborts its journal and turns read-only.
    fn fail(&self) {
        std::fs::write(format!("/sys/fs/ext4/{}/trigger_fs_error", self.device), b"rwfs bad_state test\n")
            .expect("trigger an ext4 error");
        let probe = std::fs::write(self.path().join("probe"), b"x").unwrap_err();
        assert_eq!(probe.raw_os_error(), Some(nix::libc::EROFS), "{probe}");
    }
}

#[test]
fn a_filesystem_turning_read_only_under_the_engine_refuses_writes_typed_and_keeps_files() {
    let fs = Ext4::new();
    let ws = Ws::new_in(fs.path());
    let engine = ws.open();
    write(&engine, "a.txt", b"committed a", WriteMode::Create).unwrap();
    write(&engine, "dir/b.txt", b"committed b", WriteMode::Create).unwrap();
    let rows = ws.rows().len();
    fs.fail();
    let tree = listing(ws.path());

    let mut outcomes = Vec::new();
    for (what, result) in [
        ("overwrite", write(&engine, "a.txt", b"new a", WriteMode::Overwrite)),
        ("append", write(&engine, "a.txt", b"+", WriteMode::Append)),
        ("create", write(&engine, "c.txt", b"c", WriteMode::Create)),
        ("create in a new directory", write(&engine, "new/c.txt", b"c", WriteMode::Create)),
        ("delete", engine.delete("dir/b.txt", None, &actor())),
    ] {
        let err = assert_reason(result, "read_only_filesystem");
        assert_eq!(err.kind().as_str(), "policy_violation", "{what}");
        outcomes.push(format!("{what}: {}/{} at {:?}", err.kind(), err.reason().code(), err.step()));
    }
    println!("read-only ext4 under a running engine:\n  {}", outcomes.join("\n  "));
    assert_eq!(ws.read("a.txt").unwrap(), b"committed a");
    assert_eq!(ws.read("dir/b.txt").unwrap(), b"committed b");
    assert_eq!(listing(ws.path()), tree);
    assert_eq!(ws.rows().len(), rows, "no row for a change that did not happen");
    assert!(report(&ws).is_clean());
    // Closing cannot record the watermark any more: a typed error, not a panic.
    match engine.close() {
        Ok(()) => outcomes.push("close: ok".into()),
        Err(e) => {
            assert_eq!(e.reason().code(), "read_only_filesystem", "{e:?}");
            println!("close: {}/{} at {:?}", e.kind(), e.reason().code(), e.step());
        }
    }
    let err = assert_reason(Engine::open(ws.path(), &Default::default()), "read_only_filesystem");
    println!("reopen: {}/{} at {:?}", err.kind(), err.reason().code(), err.step());
    assert_eq!(listing(ws.path()), tree);
}

// ---------------------------------------------------------------------------------------------
// A full disk.

/// [`OsDisk`] as on a filesystem without `O_TMPFILE`: temp files have names, so a temp file
/// left behind would show.
struct NamedTemps;

impl Intercept for NamedTemps {
    fn create_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp> {
        OsDisk.create_named_temp(dir, perm)
    }
}

/// Both kinds of temp file: anonymous (`O_TMPFILE`, what tmpfs offers) and named.
fn disks() -> [(&'static str, Arc<dyn Disk>); 2] {
    [("O_TMPFILE temps", Arc::new(OsDisk)), ("named temps", Arc::new(Hooked(NamedTemps)))]
}

/// The guarantees after a failed commit: old bytes, no temp file, no new row, a clean verify.
#[track_caller]
fn assert_nothing_changed(ws: &Ws, context: &str, files: &[(&str, Option<&[u8]>)], journal: &[u8]) {
    for (path, bytes) in files {
        assert_eq!(ws.read(path).as_deref(), *bytes, "{context}: {path}");
    }
    assert_eq!(temp_files(ws.path()), Vec::<PathBuf>::new(), "{context}: temp files left");
    assert_eq!(std::fs::read(ws.abs(JOURNAL)).unwrap(), journal, "{context}: the journal changed");
    let report = report(ws);
    assert!(report.is_clean(), "{context}: {report:?}");
}

#[test]
fn enospc_while_staging_keeps_the_old_version_and_leaves_nothing_behind() {
    for (label, disk) in disks() {
        let fs = Tmpfs::new("1m");
        let ws = Ws::new_in(fs.path());
        let engine = ws.open_with(disk).unwrap();
        write(&engine, "f.txt", b"old version", WriteMode::Create).unwrap();
        let journal = std::fs::read(ws.abs(JOURNAL)).unwrap();
        let big = vec![b'x'; 2 << 20];
        assert!(fs.free() < big.len() as u64);
        for (what, path, mode) in [
            ("overwrite", "f.txt", WriteMode::Overwrite),
            ("append", "f.txt", WriteMode::Append),
            ("create", "g.txt", WriteMode::Create),
        ] {
            let context = format!("{label}, {what}");
            let err = assert_reason(write(&engine, path, &big, mode), "no_space");
            assert_eq!(err.kind().as_str(), "quota_exceeded", "{context}");
            assert_eq!(err.step(), Some("write temp file"), "{context}: {err}");
            assert_eq!(err.path(), Some(path), "{context}");
            println!(
                "ENOSPC while staging ({context}): {}/{} at {:?}: {err}",
                err.kind(),
                err.reason().code(),
                err.step()
            );
            assert_nothing_changed(&ws, &context, &[("f.txt", Some(b"old version")), ("g.txt", None)], &journal);
        }
        // Something that fits still goes through, once the failed temp file's pages are freed
        // (a process spawned by a concurrent test can hold its descriptor until its exec).
        let mut fits = write(&engine, "f.txt", b"new version", WriteMode::Overwrite);
        for _ in 0..50 {
            if fits.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            fits = write(&engine, "f.txt", b"new version", WriteMode::Overwrite);
        }
        fits.unwrap();
        assert_eq!(ws.object(&sha(b"old version")).unwrap(), b"old version");
        engine.close().unwrap();
        assert!(report(&ws).is_clean());
    }
}

/// A full disk (issue: a user could not free space through the mount, since `unlink` and
/// `rename` failed with ENOSPC): the journal keeps space allocated past its end and `objects/`
/// has its subdirectories from the start, so deletes and renames still work when nothing is
/// left, and a write that needs new data fails cleanly at staging. (A journal append that fails
/// anyway writes no half row: `tests/faults.rs` fails every step of a commit with ENOSPC.)
#[test]
fn on_a_full_disk_deletes_and_renames_still_work_and_a_write_fails_cleanly() {
    for (label, disk) in disks() {
        let fs = Tmpfs::new("1m");
        let ws = Ws::new_in(fs.path());
        let engine = ws.open_with(disk).unwrap();
        write(&engine, "f.txt", b"old version", WriteMode::Create).unwrap();
        write(&engine, "g.txt", b"delete me", WriteMode::Create).unwrap();
        write(&engine, "h.txt", b"rename me", WriteMode::Create).unwrap();
        write(&engine, "i.txt", b"replaced by the rename", WriteMode::Create).unwrap();
        // Rows of empty files until the journal's last page has no room for the delete's row:
        // without a reserve, its append must allocate a page the full disk does not have.
        const PAGE: u64 = 4096;
        let journal_len = || std::fs::metadata(ws.abs(JOURNAL)).unwrap().len();
        let mut pads = 0;
        while (PAGE - journal_len() % PAGE) % PAGE >= 250 {
            write(&engine, &format!("pad{pads:03}"), b"", WriteMode::Create).unwrap();
            pads += 1;
        }
        let filler_path = fs.path().join("filler");
        let mut filler = std::fs::File::create(&filler_path).unwrap();
        let chunk = vec![0u8; 4096];
        loop {
            match filler.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
                Err(e) => panic!("fill: {e}"),
            }
        }
        assert_eq!(fs.free(), 0, "{label}: the disk is full");

        let err = assert_reason(write(&engine, "f.txt", &vec![b'n'; 16 << 10], WriteMode::Overwrite), "no_space");
        assert_eq!(err.kind().as_str(), "quota_exceeded", "{label}");
        assert_eq!(ws.read("f.txt").unwrap(), b"old version", "{label}: the old version stays");
        assert_eq!(temp_files(ws.path()), Vec::<PathBuf>::new(), "{label}: temp files left");

        engine.delete("g.txt", None, &actor()).unwrap_or_else(|e| panic!("{label}: delete on a full disk: {e}"));
        engine
            .rename("h.txt", "i.txt", rwfs::engine::RenameHow::Replace, &actor())
            .unwrap_or_else(|e| panic!("{label}: rename over a file on a full disk: {e}"));
        assert_eq!((ws.read("g.txt"), ws.read("h.txt")), (None, None), "{label}");
        assert_eq!(ws.read("i.txt").unwrap(), b"rename me", "{label}");
        for kept in [&b"delete me"[..], b"replaced by the rename"] {
            assert_eq!(ws.object(&sha(kept)).as_deref(), Some(kept), "{label}: kept in objects/");
        }
        engine.close().unwrap();
        let report = report(&ws);
        assert!(report.is_clean(), "{label}: {report:?}");
        assert_eq!(report.rows, 6 + pads, "{label}: four writes, the padding, the delete and the rename");
        drop(filler);
        std::fs::remove_file(&filler_path).unwrap();
    }
}

#[test]
fn a_user_file_named_like_an_rwfs_temp_survives_recovery() {
    let ws = Ws::new();
    let name = ".rwfs.0123456789abcdef.tmp";
    let nested = format!("d/{name}");
    let engine = ws.open();
    write(&engine, name, b"mine\n", WriteMode::Create).unwrap();
    write(&engine, &nested, b"mine too\n", WriteMode::Create).unwrap();
    write(&engine, "d/other", b"other\n", WriteMode::Create).unwrap();
    engine.close().unwrap();
    // A staged version no row names, as a crash leaves it: still kept in objects/.
    let stray = "d/.rwfs.fedcba9876543210.tmp";
    ws.put(stray, b"staged\n");
    // As after a crash: the lock's record is gone, so every journaled path is checked.
    std::fs::write(ws.abs(".resilient_write/lock"), b"   \n").unwrap();
    let engine = ws.open();
    assert_eq!(engine.recovery().temps_kept, [stray.to_string()], "only the file rwfs never acknowledged");
    assert_eq!(ws.read(name).unwrap(), b"mine\n");
    assert_eq!(ws.read(&nested).unwrap(), b"mine too\n");
    assert_eq!(ws.read(stray), None);
    engine.close().unwrap();
    assert!(report(&ws).is_clean(), "{:?}", problems(&ws));
}
