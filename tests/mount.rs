//! The mount's contract (DESIGN §5), on a real FUSE mount: what a writer sees at `write()`,
//! `close()` and `fsync()`, what the tree and the journal hold afterwards, the state
//! directory's protection, pass-through paths, and the CLI reaching the mounted engine.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

use rwfs::journal::{Op, Via};
use serde_json::Value;

use crate::support::mount::{Mounted, rwfs};
use crate::support::*;

/// The rows of `path`, in order.
fn rows_of(m: &Mounted, path: &str) -> Vec<rwfs::journal::Row> {
    m.ws.rows().into_iter().filter(|r| r.path == path).collect()
}

#[test]
fn a_write_is_committed_at_close_with_its_writer_in_the_row() {
    let m = Mounted::new();
    let out = Command::new("python3")
        .arg("-c")
        .arg("import os, sys\nwith open(sys.argv[1], 'w') as f: f.write('hello\\n')\nprint(os.getpid())")
        .arg(m.path("notes.txt"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(m.backing("notes.txt").unwrap(), b"hello\n");
    let rows = rows_of(&m, "notes.txt");
    assert_eq!(rows.len(), 1, "one open-write-close is one version: {rows:?}");
    let row = &rows[0];
    assert_eq!(row.op(), Op::Create);
    assert_eq!(row.sha256, Some(sha(b"hello\n")));
    assert_eq!(row.via, Some(Via::Fuse));
    assert_eq!(row.pid, Some(pid));
    assert_eq!(row.comm.as_deref(), Some("python3"));
    assert_eq!(row.uid, Some(0));
}

#[test]
fn readers_see_the_draft_and_the_tree_keeps_the_old_version_until_close() {
    let m = Mounted::new();
    m.write("f.txt", b"old\n").unwrap();
    let mut writer = OpenOptions::new().write(true).truncate(true).open(m.path("f.txt")).unwrap();
    writer.write_all(b"new content\n").unwrap();
    assert_eq!(m.read("f.txt").unwrap(), b"new content\n", "another handle reads the draft");
    assert_eq!(m.backing("f.txt").unwrap(), b"old\n", "the tree keeps the committed version");
    writer.sync_all().unwrap();
    assert_eq!(m.backing("f.txt").unwrap(), b"new content\n", "fsync commits while the file is open");
    writer.write_all(b"more\n").unwrap();
    assert_eq!(m.backing("f.txt").unwrap(), b"new content\n");
    drop(writer);
    assert_eq!(m.backing("f.txt").unwrap(), b"new content\nmore\n");
    let ops: Vec<Op> = rows_of(&m, "f.txt").iter().map(|r| r.op()).collect();
    assert_eq!(ops, [Op::Create, Op::Write, Op::Write]);
}

#[test]
fn partial_writes_truncation_and_appends_land_exactly() {
    let m = Mounted::new();
    m.write("data.bin", &[7u8; 10_000]).unwrap();
    let mut f = OpenOptions::new().read(true).write(true).open(m.path("data.bin")).unwrap();
    f.seek(SeekFrom::Start(5_000)).unwrap();
    f.write_all(b"middle").unwrap();
    f.set_len(6_000).unwrap();
    drop(f);
    let mut expected = vec![7u8; 6_000];
    expected[5_000..5_006].copy_from_slice(b"middle");
    assert_eq!(m.backing("data.bin").unwrap(), expected);
    let mut f = OpenOptions::new().append(true).open(m.path("data.bin")).unwrap();
    f.write_all(b"tail").unwrap();
    drop(f);
    expected.extend_from_slice(b"tail");
    assert_eq!(m.read("data.bin").unwrap(), expected);
    assert_eq!(m.backing("data.bin").unwrap(), expected);
    // truncate(2) by path, with no open handle, is a version of its own.
    nix::unistd::truncate(&m.path("data.bin"), 3).unwrap();
    assert_eq!(m.backing("data.bin").unwrap(), [7, 7, 7]);
}

#[test]
fn a_shell_redirect_is_one_version() {
    let m = Mounted::new();
    m.run("sh", &["-c", "echo one > f.txt; echo two > f.txt; echo three >> f.txt"]);
    assert_eq!(m.backing("f.txt").unwrap(), b"two\nthree\n");
    let shas: Vec<_> = rows_of(&m, "f.txt").iter().map(|r| r.sha256).collect();
    assert_eq!(
        shas,
        [Some(sha(b"one\n")), Some(sha(b"two\n")), Some(sha(b"two\nthree\n"))],
        "no empty intermediate versions"
    );
}

#[test]
fn a_blocked_write_end_to_end() {
    let mut m = Mounted::new();
    m.write("app/config.py", b"REGION = \"eu-west-1\"\n").unwrap();
    let before = m.backing("app/config.py").unwrap();
    let secret_line = aws_secret_line(42);
    let script = r#"
import os, sys
path, line = sys.argv[1], sys.argv[2]
try:
    with open(path, "w") as f:
        f.write("import os\n" + line)
    print("written")
except PermissionError as e:
    print("refused", e.errno, os.getpid())
"#;
    let out =
        Command::new("python3").arg("-c").arg(script).arg(m.path("app/config.py")).arg(&secret_line).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let fields: Vec<&str> = said.split_whitespace().collect();
    assert_eq!(fields[..2], ["refused", "13"], "PermissionError (EACCES) at write() or close(): {said}");
    let pid: u32 = fields[2].parse().unwrap();

    assert_eq!(m.backing("app/config.py").unwrap(), before, "the tree is byte-identical");
    assert_eq!(m.read("app/config.py").unwrap(), before, "and so is what the mount shows");

    let latest = m.read(".resilient_write/rejections/latest.json").expect("the envelope is readable through the mount");
    let envelope: Value = serde_json::from_slice(&latest).unwrap();
    assert_eq!(envelope["error"], "blocked");
    assert_eq!(envelope["context"]["path"], "app/config.py");
    assert_eq!(envelope["context"]["blocking_rules"][0], "aws-secret-access-key");
    assert_eq!(envelope["context"]["findings"][0]["line"], 2);
    assert_eq!(envelope["context"]["comm"], "python3");
    let quarantined: rwfs::sha::Sha256 = envelope["context"]["quarantined_sha256"].as_str().unwrap().parse().unwrap();
    let draft = m.ws.object(&quarantined).expect("the draft's bytes are in objects/");
    assert_eq!(draft, format!("import os\n{secret_line}").into_bytes());

    let block = rows_of(&m, "app/config.py").into_iter().find(|r| r.op() == Op::Block).expect("a block row");
    assert_eq!(block.sha256, Some(quarantined));
    assert_eq!(block.pid, Some(pid));
    assert_eq!(block.comm.as_deref(), Some("python3"));

    let fixed = "import os\nAWS_SECRET_ACCESS_KEY = os.environ[\"AWS_SECRET_ACCESS_KEY\"]\n";
    let out =
        Command::new("python3").arg("-c").arg(script).arg(m.path("app/config.py")).arg(&fixed[10..]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "written");
    assert_eq!(m.backing("app/config.py").unwrap(), fixed.as_bytes());
    m.unmount();
}

#[test]
fn a_refused_new_file_never_appears_and_can_be_written_again() {
    let m = Mounted::new();
    let secret = aws_secret_line(43);
    let err = std::fs::write(m.path("new.env"), &secret).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES));
    assert_eq!(m.backing("new.env"), None);
    // The name is free again at once, for a rewrite or a new create.
    std::fs::write(m.path("new.env"), "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}\n").unwrap();
    assert_eq!(m.backing("new.env").unwrap(), b"AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}\n");
}

#[test]
fn names_seen_absent_appear_when_the_engine_creates_them() {
    // The kernel may remember absent names: whatever the engine creates behind its back must
    // still appear at once (a CLI write, also into a new directory; a rejection envelope).
    let m = Mounted::new();
    for rel in ["cli.txt", "new/dir/deep.txt", ".resilient_write/rejections/latest.json"] {
        assert_eq!(std::fs::metadata(m.path(rel)).unwrap_err().raw_os_error(), Some(nix::libc::ENOENT), "{rel}");
    }
    for rel in ["cli.txt", "new/dir/deep.txt"] {
        let mut child =
            rwfs().args(["write", rel, "-w"]).arg(m.ws.path()).stdin(std::process::Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(b"from the cli\n").unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(m.read(rel).unwrap(), b"from the cli\n", "{rel}");
    }
    let err = std::fs::write(m.path("leak.py"), aws_secret_line(47)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES));
    assert!(m.read(".resilient_write/rejections/latest.json").is_ok());
    // A name removed through the mount is absent at once, and can be created again.
    std::fs::remove_file(m.path("cli.txt")).unwrap();
    assert!(std::fs::metadata(m.path("cli.txt")).is_err());
    m.write("cli.txt", b"again\n").unwrap();
    assert_eq!(m.backing("cli.txt").unwrap(), b"again\n");
}

#[test]
fn the_blocked_errno_is_configurable() {
    let ws = Ws::new();
    let m = Mounted::with(ws, false, &["--blocked-errno", "EPERM"]);
    let err = std::fs::write(m.path("k.py"), aws_secret_line(44)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EPERM));
}

#[test]
fn unlink_and_rename_over_keep_the_old_versions() {
    let m = Mounted::new();
    m.write("a.txt", b"version a\n").unwrap();
    m.write("b.txt", b"version b\n").unwrap();
    std::fs::rename(m.path("a.txt"), m.path("b.txt")).unwrap();
    assert_eq!(m.backing("b.txt").unwrap(), b"version a\n");
    assert_eq!(m.backing("a.txt"), None);
    assert_eq!(m.ws.object(&sha(b"version b\n")).unwrap(), b"version b\n", "the replaced file is kept");
    std::fs::remove_file(m.path("b.txt")).unwrap();
    assert_eq!(m.ws.object(&sha(b"version a\n")).unwrap(), b"version a\n", "the deleted file is kept");
    let rename = m.ws.rows().into_iter().find(|r| r.op() == Op::Rename).unwrap();
    assert_eq!((rename.path.as_str(), rename.from.as_deref()), ("b.txt", Some("a.txt")));
    assert_eq!(rename.prev_sha256, Some(sha(b"version b\n")));
    // Restore through the CLI reaches the daemon and shows through the mount at once.
    let out = rwfs()
        .args(["restore", "b.txt", "--sha"])
        .arg(sha(b"version a\n").to_hex())
        .arg("-w")
        .arg(m.ws.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(m.read("b.txt").unwrap(), b"version a\n");
}

#[test]
fn directories_symlinks_links_and_fifos() {
    let m = Mounted::new();
    std::fs::create_dir_all(m.path("d/e")).unwrap();
    m.write("d/e/f.txt", b"x").unwrap();
    std::fs::rename(m.path("d"), m.path("moved")).unwrap();
    assert_eq!(m.backing("moved/e/f.txt").unwrap(), b"x");
    std::os::unix::fs::symlink("e/f.txt", m.path("moved/link")).unwrap();
    assert_eq!(std::fs::read_link(m.path("moved/link")).unwrap().to_str(), Some("e/f.txt"));
    assert_eq!(m.read("moved/link").unwrap(), b"x");
    std::fs::hard_link(m.path("moved/e/f.txt"), m.path("hard.txt")).unwrap();
    assert_eq!(std::fs::metadata(m.path("hard.txt")).unwrap().nlink(), 2);
    nix::unistd::mkfifo(&m.path("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    assert!(std::fs::symlink_metadata(m.path("fifo")).unwrap().file_type().is_fifo_like());
    assert!(std::fs::remove_dir(m.path("moved")).is_err(), "not empty");
    std::fs::remove_dir_all(m.path("moved")).unwrap();
    assert!(!m.ws.abs("moved").exists());
    let mut names: Vec<String> =
        std::fs::read_dir(m.mountpoint()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, [".resilient_write", "fifo", "hard.txt"]);
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}

impl FifoLike for std::fs::FileType {
    fn is_fifo_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_fifo()
    }
}

#[test]
fn modes_owners_and_times_are_kept_across_commits() {
    let m = Mounted::new();
    m.write("run.sh", b"#!/bin/sh\necho 1\n").unwrap();
    std::fs::set_permissions(m.path("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    nix::unistd::chown(
        &m.path("run.sh"),
        Some(nix::unistd::Uid::from_raw(1234)),
        Some(nix::unistd::Gid::from_raw(5678)),
    )
    .unwrap();
    m.write("run.sh", b"#!/bin/sh\necho 2\n").unwrap();
    let meta = std::fs::metadata(m.ws.abs("run.sh")).unwrap();
    assert_eq!((meta.mode() & 0o7777, meta.uid(), meta.gid()), (0o750, 1234, 5678));
    let when = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    let f = std::fs::File::options().write(true).open(m.path("run.sh")).unwrap();
    f.set_modified(when).unwrap();
    drop(f);
    assert_eq!(std::fs::metadata(m.ws.abs("run.sh")).unwrap().modified().unwrap(), when);
}

#[test]
fn the_state_directory_is_read_only_and_its_secrets_unreadable() {
    let m = Mounted::new();
    std::fs::write(m.path("x.txt"), b"x").unwrap();
    let err = std::fs::write(m.path(".resilient_write/journal.jsonl"), b"forged\n").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EROFS));
    let err = std::fs::write(m.path(".resilient_write/new"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EROFS));
    assert!(m.read(".resilient_write/journal.jsonl").unwrap().starts_with(b"{"));
    // Objects are listed (digests and sizes), never read.
    m.write("x.txt", b"y").unwrap();
    let hex = sha(b"x").to_hex();
    assert!(std::fs::metadata(m.path(&format!(".resilient_write/objects/{}/{hex}", &hex[..2]))).is_ok());
    let err = std::fs::read(m.path(&format!(".resilient_write/objects/{}/{hex}", &hex[..2]))).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES));
}

#[test]
fn pass_through_paths_are_written_in_place_without_rows() {
    let m = Mounted::new();
    std::fs::create_dir_all(m.path("target/debug")).unwrap();
    m.write("target/debug/out.o", b"object").unwrap();
    m.write("build.log", b"line 1\n").unwrap();
    let mut log = OpenOptions::new().append(true).open(m.path("build.log")).unwrap();
    log.write_all(b"line 2\n").unwrap();
    assert_eq!(m.backing("build.log").unwrap(), b"line 1\nline 2\n", "in place: visible before close");
    drop(log);
    assert_eq!(m.backing("target/debug/out.o").unwrap(), b"object");
    assert!(m.ws.rows().iter().all(|r| !r.path.starts_with("target/") && r.path != "build.log"));
    // A secret written in place cannot be renamed into the gated tree.
    m.write("secret.log", aws_secret_line(45).as_bytes()).unwrap();
    let err = std::fs::rename(m.path("secret.log"), m.path("config.py")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES));
    assert_eq!(m.backing("config.py"), None);
    // sqlite on a pass-through database.
    m.run("sqlite3", &["app.db", "create table t(x); insert into t values (1),(2),(3);"]);
    let out = m.run("sqlite3", &["app.db", "select sum(x) from t;"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "6");
}

#[test]
fn mmap_writes_are_committed() {
    let m = Mounted::new();
    m.write("m.bin", &[0u8; 8192]).unwrap();
    let script = r#"
import mmap, sys
with open(sys.argv[1], "r+b") as f:
    mm = mmap.mmap(f.fileno(), 8192)
    mm[100:105] = b"HELLO"
    mm.flush()
    mm.close()
"#;
    let out = Command::new("python3").arg("-c").arg(script).arg(m.path("m.bin")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(&m.read("m.bin").unwrap()[100..105], b"HELLO");
    // The last pages may arrive with the release, just after close returns.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while m.backing("m.bin").unwrap()[100..105] != *b"HELLO" && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(&m.backing("m.bin").unwrap()[100..105], b"HELLO");
    assert!(rows_of(&m, "m.bin").iter().any(|r| { r.sha256.is_some_and(|s| s == sha(&m.read("m.bin").unwrap())) }));
}

#[test]
fn mounted_over_itself_every_write_goes_through_the_gate() {
    let ws = Ws::new();
    ws.put("kept.txt", b"before\n");
    let mut m = Mounted::with(ws, true, &[]);
    assert_eq!(m.read("kept.txt").unwrap(), b"before\n");
    m.write("new.txt", b"through the mount\n").unwrap();
    let err = std::fs::write(m.path("leak.py"), aws_secret_line(46)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES));
    // The CLI reaches the daemon that owns the workspace.
    let mut child =
        rwfs().args(["write", "cli.txt", "-w"]).arg(m.ws.path()).stdin(std::process::Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"from the cli\n").unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(m.read("cli.txt").unwrap(), b"from the cli\n");
    let status = rwfs().args(["status", "--json", "-w"]).arg(m.ws.path()).output().unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let mounts = status["mounts"].as_array().unwrap();
    assert!(
        mounts.iter().any(|mt| mt["mountpoint"] == m.ws.path().to_str().unwrap() && mt["pid"].is_u64()),
        "{status}"
    );
    m.unmount();
    assert_eq!(m.ws.read("new.txt").unwrap(), b"through the mount\n");
    assert_eq!(m.ws.read("leak.py"), None);
    let ops: Vec<(String, Op)> = m.ws.rows().into_iter().map(|r| (r.path.clone(), r.op())).collect();
    assert!(ops.contains(&("new.txt".to_string(), Op::Create)));
    assert!(ops.contains(&("leak.py".to_string(), Op::Block)));
    assert!(ops.contains(&("cli.txt".to_string(), Op::Create)));
    let mut buf = String::new();
    std::fs::File::open(m.ws.abs("kept.txt")).unwrap().read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "before\n");
}

#[test]
fn agent_rules_explain_the_errno_and_where_to_read_why() {
    let out = rwfs().arg("agent-rules").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["EACCES", ".resilient_write/rejections/latest.json", "rwfs scan"] {
        assert!(text.contains(needle), "agent rules mention {needle}:\n{text}");
    }
}
