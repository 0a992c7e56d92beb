//! Issue 25, item 7: no side door past the gate. Every operation that makes bytes appear at a
//! gated path without a write — a rename of a file or of a directory tree, a hard link, a
//! `RENAME_EXCHANGE` — judges them there, from a pass-through path (the default policy's
//! `node_modules/`) and from a path the policy judges otherwise (an allow-listed
//! `tests/fixtures/`). Through real mounts; the bound on big trees (`EXDEV`, and `mv` copying
//! file by file through the gate) on the engine and through the mount.

use std::path::Path;

use rwfs::engine::{Engine, RenameHow};
use rwfs::journal::{Op, Row};

use crate::support::mount::{Mounted, rwfs};
use crate::support::{Ws, actor, aws_secret_line, sha};

const ALLOW_FIXTURES: &str = "rules:\n  - paths: [\"tests/fixtures/**\"]\n    action: allow\n";

/// A fresh workspace mounted elsewhere (the backing tree stays visible), with `policy` if any.
fn mounted(policy: Option<&str>) -> Mounted {
    let ws = Ws::new();
    if let Some(policy) = policy {
        ws.put(".resilient_write/policy.yaml", policy.as_bytes());
    }
    Mounted::with(ws, false, &[])
}

/// Run `program args` in the mount's root, whatever its exit status.
fn run_in(m: &Mounted, program: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(program).args(args).current_dir(m.mountpoint()).output().unwrap()
}

fn rows_of(m: &Mounted, path: &str) -> Vec<Row> {
    m.ws.rows().into_iter().filter(|r| r.path == path).collect()
}

/// The secret of seed `seed`, as a Python settings file.
fn secret(seed: u64) -> Vec<u8> {
    format!("# settings\n{}", aws_secret_line(seed)).into_bytes()
}

/// `RENAME_EXCHANGE` of two paths through the mount.
fn exchange(m: &Mounted, a: &str, b: &str) -> nix::Result<()> {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        &m.path(a),
        nix::fcntl::AT_FDCWD,
        &m.path(b),
        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
    )
}

/// `to` was refused as a write there would be: the policy's errno (`err`), nothing of the
/// bytes at `to`, a `block` row of `to` naming them, and its envelope as the latest refusal.
#[track_caller]
fn refused_at(m: &Mounted, err: Option<i32>, to: &str, bytes: &[u8], context: &str) {
    assert_eq!(err, Some(nix::libc::EACCES), "{context}: the policy's errno");
    assert_ne!(m.backing(to).as_deref(), Some(bytes), "{context}: the secret is not at {to}");
    let blocks: Vec<Row> = rows_of(m, to).into_iter().filter(|r| r.op() == Op::Block).collect();
    assert!(blocks.iter().any(|r| r.sha256 == Some(sha(bytes))), "{context}: a block row of {to}: {blocks:?}");
    let latest = std::fs::read_to_string(m.path(".resilient_write/rejections/latest.json")).unwrap();
    let envelope: serde_json::Value = serde_json::from_str(&latest).unwrap();
    assert_eq!(envelope["error"], "blocked", "{context}: {envelope}");
    assert!(latest.contains(to), "{context}: the envelope names {to}: {latest}");
}

/// `rwfs verify` of the mounted workspace: clean.
#[track_caller]
fn verify_clean(m: &Mounted) {
    let out = rwfs().arg("-w").arg(m.ws.path()).args(["verify", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn default_policy_a_tree_file_link_or_exchange_from_a_pass_through_path_is_judged_at_its_new_path() {
    let m = mounted(None);
    let (s1, s2, s3, s4) = (secret(1), secret(2), secret(3), secret(4));
    // Pass-through: written in place, unscanned, unjournaled.
    m.write("node_modules/pkg/settings.py", &s1).unwrap();
    m.write("node_modules/pkg/index.js", b"module.exports = 1;\n").unwrap();
    m.write("node_modules/pkg/lib/util.js", b"exports.u = 2;\n").unwrap();
    assert!(rows_of(&m, "node_modules/pkg/settings.py").is_empty());
    std::fs::create_dir(m.path("src")).unwrap();

    // A directory rename (the issue's `mv node_modules/pkg src/pkg`).
    let err = std::fs::rename(m.path("node_modules/pkg"), m.path("src/pkg")).unwrap_err();
    refused_at(&m, err.raw_os_error(), "src/pkg/settings.py", &s1, "directory rename");
    let out = run_in(&m, "mv", &["node_modules/pkg", "src/pkg"]);
    assert!(!out.status.success(), "mv reports the refusal");
    assert!(!m.path("src/pkg").exists(), "nothing moved");
    assert_eq!(m.read("node_modules/pkg/settings.py").unwrap(), s1, "the source is untouched");

    // A file rename, a hard link, an exchange.
    m.write("node_modules/a.py", &s2).unwrap();
    let err = std::fs::rename(m.path("node_modules/a.py"), m.path("src/a.py")).unwrap_err();
    refused_at(&m, err.raw_os_error(), "src/a.py", &s2, "file rename");
    // A hard link across the gate's boundary, either way: EXDEV, whatever the content (one
    // inode with a name written in place and a gated one: writes through the first would
    // change the second unjudged).
    let err = std::fs::hard_link(m.path("node_modules/a.py"), m.path("src/linked.py")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EXDEV), "link into the gate: {err}");
    m.write("node_modules/clean.py", b"CLEAN = 1\n").unwrap();
    let err = std::fs::hard_link(m.path("node_modules/clean.py"), m.path("src/clean.py")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EXDEV), "a clean link into the gate: {err}");
    m.write("src/out.py", b"OUT = 1\n").unwrap();
    let err = std::fs::hard_link(m.path("src/out.py"), m.path("node_modules/out.py")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EXDEV), "a link out of the gate: {err}");
    for path in ["src/linked.py", "src/clean.py", "node_modules/out.py"] {
        assert!(m.backing(path).is_none(), "{path}: no name made");
        assert!(rows_of(&m, path).is_empty(), "{path}: no row");
    }
    let out = run_in(&m, "ln", &["node_modules/a.py", "src/linked.py"]);
    assert!(!out.status.success(), "ln reports it");
    m.write("node_modules/b.py", &s3).unwrap();
    m.write("src/b.py", b"B = 1\n").unwrap();
    let err = exchange(&m, "node_modules/b.py", "src/b.py").unwrap_err();
    refused_at(&m, Some(err as i32), "src/b.py", &s3, "exchange");
    assert_eq!(m.read("src/b.py").unwrap(), b"B = 1\n");
    assert_eq!(m.read("node_modules/b.py").unwrap(), s3);
    // An exchange of directories, the secret on the pass-through side.
    m.write("node_modules/dir/c.py", &s4).unwrap();
    m.write("src/dir/c.py", b"C = 1\n").unwrap();
    let err = exchange(&m, "node_modules/dir", "src/dir").unwrap_err();
    refused_at(&m, Some(err as i32), "src/dir/c.py", &s4, "exchange of directories");

    // A file with another name written in place moves by no rename, alone or in a tree, into
    // the gate or out of it: EXDEV, and `mv` copies it (a new inode, judged).
    m.write("node_modules/one.py", b"ONE = 1\n").unwrap();
    std::fs::hard_link(m.path("node_modules/one.py"), m.path("node_modules/two.py")).expect("a link in place");
    let err = std::fs::rename(m.path("node_modules/one.py"), m.path("src/one.py")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EXDEV), "{err}");
    std::fs::create_dir(m.path("node_modules/tree")).unwrap();
    std::fs::hard_link(m.path("node_modules/two.py"), m.path("node_modules/tree/three.py")).unwrap();
    let err = std::fs::rename(m.path("node_modules/tree"), m.path("src/tree")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EXDEV), "a tree holding it: {err}");
    assert!(run_in(&m, "mv", &["node_modules/one.py", "src/one.py"]).status.success());
    assert_eq!(rows_of(&m, "src/one.py").iter().map(Row::op).collect::<Vec<_>>(), [Op::Create]);
    m.write("node_modules/two.py", &s2).unwrap();
    assert_eq!(m.read("src/one.py").unwrap(), b"ONE = 1\n", "the copy is its own file");
    std::fs::hard_link(m.path("src/out.py"), m.path("src/out2.py")).expect("a link in the gate");
    let err = std::fs::rename(m.path("src/out.py"), m.path("node_modules/out.py")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EXDEV), "out of the gate: {err}");

    // Without the secret the tree moves, and each file that became gated has a row of its own.
    std::fs::remove_file(m.path("node_modules/pkg/settings.py")).unwrap();
    std::fs::rename(m.path("node_modules/pkg"), m.path("src/pkg")).expect("a clean tree moves");
    for (path, bytes) in
        [("src/pkg/index.js", &b"module.exports = 1;\n"[..]), ("src/pkg/lib/util.js", b"exports.u = 2;\n")]
    {
        let rows = rows_of(&m, path);
        assert_eq!(rows.len(), 1, "{path}: {rows:?}");
        assert_eq!((rows[0].op(), rows[0].sha256, rows[0].mode.as_str()), (Op::Create, Some(sha(bytes)), "rename"));
        let from = path.replace("src/", "node_modules/");
        assert_eq!(rows[0].from.as_deref(), Some(from.as_str()));
        assert_eq!(m.read(path).unwrap(), bytes);
    }
    let history = rwfs().arg("-w").arg(m.ws.path()).args(["history", "src/pkg/index.js"]).output().unwrap();
    assert!(String::from_utf8_lossy(&history.stdout).contains("create"), "history sees it");
    // And the clean exchange of directories: the file now gated gets its row too.
    std::fs::write(m.path("node_modules/dir/c.py"), b"C = 2\n").unwrap();
    exchange(&m, "node_modules/dir", "src/dir").expect("a clean exchange");
    assert_eq!(rows_of(&m, "src/dir/c.py").last().unwrap().sha256, Some(sha(b"C = 2\n")));
    verify_clean(&m);
}

#[test]
fn allow_listed_path_a_file_rename_link_tree_rename_or_exchange_into_a_blocking_path_is_judged() {
    let m = mounted(Some(ALLOW_FIXTURES));
    let s = secret(11);
    // Allowed where it is: written, journaled, in the tree.
    m.write("tests/fixtures/settings.py", &s).expect("the fixture path allows it");
    m.write("tests/fixtures/creds/aws.py", &s).unwrap();
    assert_eq!(m.backing("tests/fixtures/settings.py").unwrap(), s);
    std::fs::create_dir(m.path("src")).unwrap();
    m.write("src/settings.py", b"DEBUG = False\n").unwrap();

    let err = std::fs::rename(m.path("tests/fixtures/settings.py"), m.path("src/moved.py")).unwrap_err();
    refused_at(&m, err.raw_os_error(), "src/moved.py", &s, "file rename");
    let err = std::fs::rename(m.path("tests/fixtures/settings.py"), m.path("src/settings.py")).unwrap_err();
    refused_at(&m, err.raw_os_error(), "src/settings.py", &s, "file rename over a file");
    assert_eq!(m.read("src/settings.py").unwrap(), b"DEBUG = False\n");
    let err = std::fs::hard_link(m.path("tests/fixtures/settings.py"), m.path("src/linked.py")).unwrap_err();
    refused_at(&m, err.raw_os_error(), "src/linked.py", &s, "link");
    let err = std::fs::rename(m.path("tests/fixtures/creds"), m.path("src/creds")).unwrap_err();
    refused_at(&m, err.raw_os_error(), "src/creds/aws.py", &s, "directory rename");
    let err = exchange(&m, "tests/fixtures/settings.py", "src/settings.py").unwrap_err();
    refused_at(&m, Some(err as i32), "src/settings.py", &s, "exchange");
    assert_eq!(m.read("src/settings.py").unwrap(), b"DEBUG = False\n");
    assert_eq!(m.read("tests/fixtures/settings.py").unwrap(), s, "every source untouched");
    assert_eq!(m.read("tests/fixtures/creds/aws.py").unwrap(), s);

    // Within the allowed path, or with clean content, nothing is refused.
    std::fs::rename(m.path("tests/fixtures/settings.py"), m.path("tests/fixtures/other.py")).expect("same judgement");
    m.write("tests/fixtures/clean.py", b"X = 1\n").unwrap();
    std::fs::rename(m.path("tests/fixtures/clean.py"), m.path("src/clean.py")).expect("clean content moves");
    verify_clean(&m);
}

/// `n` small pass-through files under `dir` of the backing tree (made directly: faster).
fn many_files(root: &Path, dir: &str, n: usize) {
    for i in 0..n {
        let path = root.join(format!("{dir}/d{:03}/f{i:05}.js", i / 100));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("exports.n = {i};\n")).unwrap();
    }
}

#[test]
fn a_tree_past_the_bound_is_refused_with_exdev_and_mv_copies_it_through_the_gate() {
    // On the engine: one file past the bound of files judged in place.
    let ws = Ws::new();
    let engine = Engine::open(ws.path(), &rwfs::engine::Options::default()).unwrap();
    many_files(ws.path(), "node_modules/big", rwfs::engine::MOVE_MAX_FILES + 1);
    std::fs::create_dir(ws.abs("src")).unwrap();
    let err = engine.rename("node_modules/big", "src/big", RenameHow::NoReplace, &actor()).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EXDEV), "{err}");
    // At the bound it is judged in place, one row per file.
    std::fs::remove_file(ws.abs("node_modules/big/d100/f10000.js")).unwrap();
    let rows = ws.rows().len();
    engine.rename("node_modules/big", "src/big", RenameHow::NoReplace, &actor()).unwrap();
    assert_eq!(ws.rows().len(), rows + 1 + rwfs::engine::MOVE_MAX_FILES, "the rename's row and one per file");
    engine.close().unwrap();

    // Through the mount: `mv` takes EXDEV as "another filesystem" and copies file by file, each
    // copy a write through the gate; a secret among them is refused there.
    let m = Mounted::with(Ws::new(), false, &["--durability", "batch"]);
    many_files(m.ws.path(), "node_modules/big", rwfs::engine::MOVE_MAX_FILES + 1);
    m.write("node_modules/big/settings.py", &secret(21)).unwrap();
    std::fs::create_dir(m.path("src")).unwrap();
    let err = std::fs::rename(m.path("node_modules/big"), m.path("src/big")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EXDEV));
    let out = run_in(&m, "mv", &["node_modules/big", "src/big"]);
    assert!(!out.status.success(), "the secret's copy is refused");
    assert!(String::from_utf8_lossy(&out.stderr).contains("settings.py"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(m.backing("src/big/settings.py").is_none());
    assert_eq!(m.backing("src/big/d042/f04242.js").unwrap(), b"exports.n = 4242;\n", "the rest was copied");
    assert_eq!(rows_of(&m, "src/big/d042/f04242.js").len(), 1, "each copy journaled");
    assert_eq!(m.read("node_modules/big/settings.py").unwrap(), secret(21), "mv keeps a source it could not copy");
}

#[test]
fn what_was_judged_alike_is_not_read_again_and_what_was_not_is() {
    let ws = Ws::new();
    let engine = Engine::open(ws.path(), &rwfs::engine::Options::default()).unwrap();
    for i in 0..20 {
        crate::support::write(&engine, &format!("src/a/m{i}.py"), b"X = 1\n", rwfs::engine::WriteMode::Create).unwrap();
    }
    crate::support::write(&engine, "notes", b"X = 1\n", rwfs::engine::WriteMode::Create).unwrap();
    let scanned = engine.scanned_bytes();
    // Same globs, kind, language and names: nothing is read.
    engine.rename("src/a", "src/b", RenameHow::NoReplace, &actor()).unwrap();
    assert_eq!(engine.scanned_bytes(), scanned, "a tree moved alike is not judged again");
    // Another name (another kind and language): judged at the new one.
    engine.rename("notes", "notes.py", RenameHow::NoReplace, &actor()).unwrap();
    assert_eq!(engine.scanned_bytes(), scanned + 6, "a file renamed to another kind is judged again");
    // Into a test directory (another kind): every file judged.
    std::fs::create_dir(ws.abs("tests")).unwrap();
    engine.rename("src/b", "tests/b", RenameHow::NoReplace, &actor()).unwrap();
    assert_eq!(engine.scanned_bytes(), scanned + 6 + 20 * 6);
    engine.close().unwrap();
    assert!(rwfs::history::verify(&ws.workspace()).unwrap().is_clean());
}
