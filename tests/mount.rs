//! The mount's contract (docs/architecture.md, The mount), on a real FUSE mount: what a writer sees at `write()`,
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

/// Run a Python script with `args`; its stdout (it must succeed).
fn python<A: AsRef<std::ffi::OsStr>>(script: &str, args: &[A]) -> String {
    String::from_utf8_lossy(&run_ok(Command::new("python3").arg("-c").arg(script).args(args)).stdout).into_owned()
}

/// Wait until `done` holds, or `secs` seconds have passed (what follows asserts it), looking
/// every 20 ms: for what the daemon does after the call that caused it has returned.
fn wait_for(secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The rows of `path`, in order.
fn rows_of(m: &Mounted, path: &str) -> Vec<rwfs::journal::Row> {
    m.ws.rows().into_iter().filter(|r| r.path == path).collect()
}

#[test]
fn a_write_is_committed_at_close_with_its_writer_in_the_row() {
    let m = Mounted::new();
    let out = python(
        "import os, sys\nwith open(sys.argv[1], 'w') as f: f.write('hello\\n')\nprint(os.getpid())",
        &[m.path("notes.txt")],
    );
    let pid: u32 = out.trim().parse().unwrap();
    assert_eq!(m.backing("notes.txt").unwrap(), b"hello\n");
    let rows = rows_of(&m, "notes.txt");
    assert_eq!(rows.len(), 1, "one open-write-close is one version: {rows:?}");
    let row = &rows[0];
    assert_eq!(row.op(), Op::Create);
    assert_eq!(row.sha256, Some(sha(b"hello\n")));
    assert_eq!(row.via, Some(Via::Fuse));
    assert_eq!(row.pid, Some(pid));
    assert_eq!(row.comm.as_deref(), Some("python3"));
    assert_eq!(row.uid, Some(nix::unistd::getuid().as_raw()));
}

#[test]
fn a_forked_childs_close_does_not_commit_its_parents_half_written_file() {
    // A child inherits the writer's descriptor and exits (or execs) while the parent is still
    // writing: its close is a FUSE flush, but not the writer's, so nothing is committed until
    // the parent's own close, which commits the whole file as one version.
    let m = Mounted::new();
    let script = r#"
import os, sys
path, backing = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"first half\n")
child = os.fork()
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
print("after child:", os.path.exists(backing) and open(backing, "rb").read() == b"first half\n")
os.write(fd, b"second half\n")
os.close(fd)
print(os.getpid())
"#;
    let stdout = python(script, &[m.path("two.txt"), m.ws.path().join("two.txt")]);
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("after child: False"), "the child's close committed the first half:\n{}", m.log());
    let pid: u32 = lines.next().unwrap().parse().unwrap();
    assert_eq!(m.backing("two.txt").unwrap(), b"first half\nsecond half\n");
    let rows = rows_of(&m, "two.txt");
    assert_eq!(rows.len(), 1, "one version: {rows:?}");
    assert_eq!(rows[0].pid, Some(pid));
}

#[test]
fn a_file_written_by_one_thread_and_closed_by_another_is_judged_at_that_close() {
    // FUSE names the thread, not the process: a write from a worker thread (Node's libuv pool,
    // Python threads) and the close from the main thread are one writer, so the close commits
    // and a refusal reaches it. The row names the process.
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", b"rules:\n  - family: pii\n    action: block\n");
    let m = Mounted::with(ws, false, &[]);
    let script = r#"
import os, sys, threading
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
def write(data):
    os.write(fd, data)
for data in (b"contact: jane", b".doe@acme-logistics.io\n"):
    t = threading.Thread(target=write, args=(data,))
    t.start()
    t.join()
try:
    os.close(fd)
    print("closed")
except PermissionError:
    print("refused")
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
t = threading.Thread(target=write, args=(b"plain text\n",))
t.start()
t.join()
os.close(fd)
print(os.getpid())
"#;
    let stdout = python(script, &[m.path("contact.txt"), m.path("plain.txt")]);
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("refused"), "{}", m.log());
    let pid: u32 = lines.next().unwrap().parse().unwrap();
    assert_eq!(m.backing("contact.txt").map(|b| b.len()), None);
    assert_eq!(m.backing("plain.txt").unwrap(), b"plain text\n");
    let rows = rows_of(&m, "plain.txt");
    assert_eq!(rows.iter().map(|r| r.pid).collect::<Vec<_>>(), vec![Some(pid)], "{rows:?}");
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
fn a_file_too_big_to_scan_whole_is_still_judged_at_commit() {
    // The policy blocks personal data; the address is split across two writes made out of
    // order, so no single write shows it, and the file is larger than the whole-draft scan:
    // only the commit, judging the draft in windows, can see it. (Python writes: a descriptor
    // of this multi-threaded test process would be copied into every child another test
    // forks, and would be released only when the last of them closes it.)
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", b"rules:\n  - family: pii\n    action: block\n");
    let m = Mounted::with(ws, false, &[]);
    let script = r#"
import os, sys
path, blocks = sys.argv[1], int(sys.argv[2])
email = b"contact: jane.doe@acme-logistics.io\n"
head, tail = email[:20], email[20:]
line = b"log line: nothing to see here\n"
base = (line * ((1 << 20) // len(line) + 1))[: 1 << 20]
def block(i):
    if i == 9:
        return base[: len(base) - len(head)] + head
    if i == 10:
        return (tail + base)[: 1 << 20]
    return base
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in [i for i in range(blocks) if i != 10] + [10]:
    os.pwrite(fd, block(i), i << 20)
try:
    os.fsync(fd)
    print("fsync ok")
except PermissionError:
    print("fsync refused")
try:
    os.close(fd)
except PermissionError:
    pass
"#;
    let blocks = ((rwfs::engine::SCAN_MAX >> 20) + 2).to_string();
    let out = Command::new("python3").arg("-c").arg(script).arg(m.path("big.txt")).arg(&blocks).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "fsync refused",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(m.backing("big.txt").map(|b| b.len()), None, "never reached the tree:\n{}", m.log());
    let latest = m.read(".resilient_write/rejections/latest.json").unwrap();
    assert!(String::from_utf8_lossy(&latest).contains("pii"), "{}", String::from_utf8_lossy(&latest));
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
fn an_open_file_keeps_reading_its_version_after_another_is_renamed_over_it() {
    let ws = Ws::new();
    ws.put("f.txt", b"before the mount\n");
    let m = Mounted::with(ws, false, &[]);
    m.write("g.txt", b"committed\n").unwrap();
    let mut untouched = std::fs::File::open(m.path("f.txt")).unwrap();
    let mut committed = std::fs::File::open(m.path("g.txt")).unwrap();
    for name in ["f.txt", "g.txt"] {
        m.write("new.txt", b"replacement\n").unwrap();
        std::fs::rename(m.path("new.txt"), m.path(name)).unwrap();
        assert_eq!(m.read(name).unwrap(), b"replacement\n");
    }
    let mut buf = String::new();
    untouched.read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "before the mount\n");
    buf.clear();
    committed.read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "committed\n");
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
    let ws = Ws::new();
    // What a workspace served over HTTP before keeps there: the bearer token.
    ws.put(".resilient_write/mcp-http.token", format!("{}\n", "7".repeat(64)).as_bytes());
    let m = Mounted::with(ws, false, &[]);
    std::fs::write(m.path("x.txt"), b"x").unwrap();
    let err = std::fs::write(m.path(".resilient_write/journal.jsonl"), b"forged\n").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EROFS));
    let err = std::fs::write(m.path(".resilient_write/new"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EROFS));
    assert!(m.read(".resilient_write/journal.jsonl").unwrap().starts_with(b"{"));
    // Hidden entries are neither listed nor found (issue 14, item 10): kept versions, drafts,
    // out-of-band blobs, keys, the token, and names the state directory's table does not know.
    m.write("x.txt", b"y").unwrap();
    let hex = sha(b"x").to_hex();
    assert!(m.ws.abs(&format!(".resilient_write/objects/{}/{hex}", &hex[..2])).exists(), "kept in the backing tree");
    m.ws.put(".resilient_write/unknown", b"x");
    m.ws.put(".resilient_write/keys/cursor.key", &[7u8; 32]);
    m.ws.put(".resilient_write/scratch/index.jsonl", b"{}\n");
    for hidden in [
        format!(".resilient_write/objects/{}/{hex}", &hex[..2]),
        format!(".resilient_write/objects/{}", &hex[..2]),
        ".resilient_write/objects".to_string(),
        ".resilient_write/drafts".to_string(),
        ".resilient_write/scratch/index.jsonl".to_string(),
        ".resilient_write/keys/cursor.key".to_string(),
        ".resilient_write/keys".to_string(),
        ".resilient_write/mcp-http.token".to_string(),
        ".resilient_write/unknown".to_string(),
    ] {
        let err = std::fs::symlink_metadata(m.path(&hidden)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(nix::libc::ENOENT), "stat {hidden}");
        let err = std::fs::read(m.path(&hidden)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(nix::libc::ENOENT), "read {hidden}");
    }
    let mut listed: Vec<String> = std::fs::read_dir(m.path(".resilient_write"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    listed.sort();
    for name in &listed {
        let entry = rwfs::durable::layout::state_entry(name).unwrap_or_else(|| panic!("{name} listed"));
        assert_eq!(entry.visibility, rwfs::durable::layout::Visibility::ReadOnly, "{name} listed");
    }
    assert!(listed.contains(&"journal.jsonl".to_string()), "{listed:?}");
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

/// The daemon's request counters and whether the kernel passes I/O through, from `rwfs status`.
fn requests(m: &Mounted) -> (u64, u64, u64, bool) {
    let out = rwfs().args(["status", "--json", "-w"]).arg(m.ws.path()).output().unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mount = &status["mounts"][0];
    let n = |k: &str| mount["requests"][k].as_u64().unwrap_or_else(|| panic!("requests.{k} in {status}"));
    (n("read"), n("write"), n("passthrough_opens"), mount["kernel_passthrough"].as_bool().unwrap())
}

/// Pass-through I/O: 4 MiB written in pieces, appended to, read back whole and mapped.
fn pass_through_io(m: &Mounted) -> Vec<u8> {
    std::fs::create_dir_all(m.path("target/release")).unwrap();
    let mut rng = Rng(7);
    let data: Vec<u8> = (0..4 << 20).map(|_| rng.next() as u8).collect();
    let mut f = std::fs::File::create(m.path("target/release/blob")).unwrap();
    for piece in data.chunks(100_000) {
        f.write_all(piece).unwrap();
    }
    drop(f);
    let mut log = OpenOptions::new().append(true).create(true).open(m.path("target/build.log")).unwrap();
    log.write_all(b"built\n").unwrap();
    drop(log);
    assert_eq!(std::fs::read(m.path("target/release/blob")).unwrap(), data, "read back through the mount");
    assert_eq!(m.backing("target/release/blob").unwrap(), data, "byte-identical in the backing tree");
    let out = python(
        "import mmap,sys\nf=open(sys.argv[1],'r+b')\nm=mmap.mmap(f.fileno(),0)\nm[0:4]=b'MAPD'\nm.flush()\nprint(len(m))",
        &[m.path("target/release/blob")],
    );
    assert_eq!(out.trim(), (4 << 20).to_string());
    assert_eq!(&m.backing("target/release/blob").unwrap()[..4], b"MAPD", "a mapped write lands in place");
    data
}

#[test]
fn kernel_passthrough_serves_pass_through_files_and_never_a_gated_one() {
    let m = Mounted::new();
    let (reads, writes, ..) = requests(&m);
    pass_through_io(&m);
    let (r, w, opens, on) = requests(&m);
    if !nix::unistd::getuid().is_root() {
        // The backing ioctl needs CAP_SYS_ADMIN: a normal user's mount serves every file itself.
        assert!(!on && opens == 0 && r > reads && w > writes, "as a normal user: ({r}, {w}, {opens}, {on})");
        return;
    }
    assert!(on, "FUSE passthrough on this kernel (≥ 6.9) as root: the CI machine has it");
    // Opens of one file racing: the kernel fails an open that mixes passthrough with caching
    // (EIO), so every one of them must get the same kind of answer.
    let blob = m.path("target/release/blob");
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..40 {
                    let mut head = [0u8; 4];
                    std::fs::File::open(&blob).and_then(|mut f| f.read_exact(&mut head)).expect("no EIO");
                    assert_eq!(&head, b"MAPD");
                }
            });
        }
    });
    assert_eq!((r - reads, w - writes), (0, 0), "no READ or WRITE of a pass-through file reached the daemon");
    assert!(opens >= 4, "{opens} opens passed through");

    // A gated file beside an open pass-through one: every byte of it reaches the gate.
    let held = std::fs::File::open(m.path("target/release/blob")).unwrap();
    m.write("notes.txt", b"gated\n").unwrap();
    assert_eq!(std::fs::read(m.path("notes.txt")).unwrap(), b"gated\n");
    let (r, w, ..) = requests(&m);
    assert!(r > 0 && w > 0, "the gated file's reads and writes came to the daemon ({r}, {w})");
    assert_eq!(rows_of(&m, "notes.txt").len(), 1);
    let blocked = m.write("config.py", aws_secret_line(46).as_bytes()).unwrap_err();
    assert_eq!(blocked.raw_os_error(), Some(nix::libc::EACCES), "the gate still refuses beside passthrough");

    // An open pass-through file never takes a gated name (its I/O would skip the gate).
    let err = std::fs::rename(m.path("target/release/blob"), m.path("blob.bin")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EXDEV), "renamed while open");
    let out = m.run("mv", &["target/release/blob", "blob.bin"]);
    assert!(out.status.success(), "mv copies across EXDEV: {}", String::from_utf8_lossy(&out.stderr));
    drop(held);
    assert_eq!(rows_of(&m, "blob.bin").len(), 1, "the copy went through the gate");
    assert_eq!(m.backing("blob.bin").unwrap().len(), 4 << 20);

    // Without kernel passthrough the same I/O comes to the daemon: the counters are real.
    drop(m);
    let m = Mounted::with(Ws::new(), false, &["--no-kernel-passthrough"]);
    pass_through_io(&m);
    let (r, w, opens, on) = requests(&m);
    assert!(!on && opens == 0);
    assert!(r > 0 && w > 0, "served by the daemon: {r} reads, {w} writes");
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
    python(script, &[m.path("m.bin")]);
    assert_eq!(&m.read("m.bin").unwrap()[100..105], b"HELLO");
    // The last pages may arrive with the release, just after close returns.
    wait_for(5, || m.backing("m.bin").unwrap()[100..105] == *b"HELLO");
    assert_eq!(&m.backing("m.bin").unwrap()[100..105], b"HELLO");
    assert!(rows_of(&m, "m.bin").iter().any(|r| { r.sha256.is_some_and(|s| s == sha(&m.read("m.bin").unwrap())) }));
}

/// A created file's draft is opened for direct I/O: its writes and a shared mapping of it still
/// see each other, as on a plain filesystem (the kernel keeps the mapping's pages coherent,
/// `FUSE_DIRECT_IO_ALLOW_MMAP`).
#[test]
fn a_created_files_writes_and_its_shared_mapping_see_each_other() {
    let m = Mounted::new();
    let script = r#"
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"a" * 8192)
mm = mmap.mmap(fd, 8192)
seen = [mm[0:1]]
os.pwrite(fd, b"B", 10); seen.append(mm[10:11])
mm[20:21] = b"C"; mm.flush(); seen.append(os.pread(fd, 1, 20))
os.pwrite(fd, b"D", 4100); seen.append(mm[4100:4101])
mm[30:31] = b"E"; seen.append(os.pread(fd, 1, 30))
mm.close(); os.close(fd)
print(b"".join(seen).decode())
"#;
    assert_eq!(python(script, &[m.path("mixed.bin")]).trim(), "aBCDE");
    let mut want = vec![b'a'; 8192];
    for (at, byte) in [(10, b'B'), (20, b'C'), (4100, b'D'), (30, b'E')] {
        want[at] = byte;
    }
    assert_eq!(m.read("mixed.bin").unwrap(), want);
    wait_for(5, || m.backing("mixed.bin").as_deref() == Some(&want[..]));
    assert_eq!(m.backing("mixed.bin").unwrap(), want);
}

/// A rewrite (`O_TRUNC`) of a file that a reader has open, cached and mapped: the reader sees the
/// truncation, then the new bytes, through `pread` and through its mapping, at each step what it
/// sees on a plain filesystem. (The rewrite's handle is opened for direct I/O: its writes never
/// pass through the page cache, where the reader's pages of the old content are.)
#[test]
fn a_reader_of_a_file_being_rewritten_sees_what_it_sees_on_a_plain_filesystem() {
    let m = Mounted::new();
    m.ws.put("shared.txt", b"old contents\n");
    let plain = tempfile::tempdir().unwrap();
    std::fs::write(plain.path().join("shared.txt"), b"old contents\n").unwrap();
    let script = r#"
import mmap, os, sys
p = sys.argv[1]
r = os.open(p, os.O_RDONLY)
mm = mmap.mmap(r, 0, prot=mmap.PROT_READ)
seen = [os.pread(r, 64, 0), mm[0:13]]
w = os.open(p, os.O_WRONLY | os.O_TRUNC)
seen += [os.pread(r, 64, 0), str(os.fstat(r).st_size).encode()]
os.write(w, b"NEW CONTENTS\n")
seen += [os.pread(r, 64, 0), mm[0:13], str(os.fstat(r).st_size).encode()]
os.pwrite(w, b"n", 0)
seen += [os.pread(r, 64, 0), mm[0:13]]
os.close(w)
seen += [os.pread(r, 64, 0), mm[0:13]]
r2 = os.open(p, os.O_RDONLY)
seen.append(os.pread(r2, 64, 0))
print(repr(seen))
"#;
    let on_plain = python(script, &[plain.path().join("shared.txt")]);
    assert!(on_plain.contains("NEW CONTENTS"), "{on_plain}");
    assert_eq!(python(script, &[m.path("shared.txt")]), on_plain);
    assert_eq!(m.read("shared.txt").unwrap(), b"nEW CONTENTS\n");
}

/// A command run as uid and gid 65534 with no supplementary groups: its program and arguments
/// follow.
fn as_nobody() -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    cmd
}

/// A mount open to all (`--allow-other`, a world-writable sticky root, as `/tmp`), and a plain
/// directory alike on the same filesystem, for what a normal user does on both.
fn open_to_all_and_a_plain_dir() -> (Mounted, tempfile::TempDir) {
    let ws = Ws::new();
    std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let m = Mounted::with(ws, false, &["--allow-other"]);
    let parent = m.ws.path().parent().unwrap();
    let plain = tempfile::Builder::new().prefix("rwfs-plain-").tempdir_in(parent).unwrap();
    std::fs::set_permissions(plain.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    (m, plain)
}

/// A write by a process without `CAP_FSETID` drops the setuid bit and the setgid bit of a
/// group-executable file, on the mount as on the backing filesystem. For a file created through
/// the mount the kernel leaves this to rwfs (`FUSE_WRITE_KILL_SUIDGID` on a direct-I/O write),
/// which writes the backing file with its own credentials: the backing filesystem would keep them.
#[test]
fn a_normal_users_write_drops_setuid_and_setgid_as_the_backing_filesystem_does() {
    let (m, plain) = open_to_all_and_a_plain_dir();
    // Created with fd 3 held open, made setuid and setgid by name, then written through fd 3.
    let modes = |dir: &std::path::Path| {
        let out = run_ok(
            as_nobody()
                .args(["sh", "-c"])
                .arg("exec 3>f && chmod 6755 f && stat -c %a f && echo x >&3 && stat -c %a f && exec 3>&-")
                .current_dir(dir),
        );
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect::<Vec<_>>()
    };
    let native = modes(plain.path());
    assert_eq!(native, ["6755", "755"], "the backing filesystem");
    assert_eq!(modes(m.mountpoint()), native, "the mount");
    assert_eq!(m.read("f").unwrap(), b"x\n");
    assert_eq!(m.ws.abs("f").metadata().unwrap().mode() & 0o7777, 0o755, "the committed file");
}

/// A file capability (`security.capability`) goes with such a write too, on the mount as on the
/// backing filesystem (whose write of the draft drops it, whoever writes): root gives one to a
/// file a normal user is writing, the user writes.
#[test]
fn a_normal_users_write_drops_a_file_capability_as_the_backing_filesystem_does() {
    let (m, plain) = open_to_all_and_a_plain_dir();
    // cap_net_raw, permitted and effective (struct vfs_cap_data, revision 2).
    let capability = r#"
import os, struct, sys
path, what = sys.argv[1], sys.argv[2]
if what == "set":
    os.setxattr(path, "security.capability", struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0))
try:
    print(os.getxattr(path, "security.capability").hex())
except OSError as e:
    print("none" if e.errno == 61 else e)
"#;
    let dropped = |dir: &std::path::Path| {
        let mut writer = as_nobody()
            .args(["sh", "-c"])
            .arg("exec 3>f && while [ ! -e go ]; do sleep 0.02; done && echo x >&3 && exec 3>&-")
            .current_dir(dir)
            .spawn()
            .unwrap();
        wait_for(10, || dir.join("f").exists());
        let set = python(capability, &[dir.join("f").as_os_str(), "set".as_ref()]);
        std::fs::write(dir.join("go"), b"").unwrap();
        assert!(writer.wait().unwrap().success());
        (set.trim().to_string(), python(capability, &[dir.join("f").as_os_str(), "get".as_ref()]).trim().to_string())
    };
    let native = dropped(plain.path());
    assert_eq!(native, ("0100000200200000000000000000000000000000".to_string(), "none".to_string()), "the backing fs");
    assert_eq!(dropped(m.mountpoint()), native, "the mount");
    assert_eq!(python(capability, &[m.ws.abs("f").as_os_str(), "get".as_ref()]).trim(), "none", "the committed file");
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

/// A writer that loops over four shared files until the mount dies under it. Every version
/// is self-checking: a header `LEN SHA256\n` of the body that follows, so a torn or mixed
/// file is recognisable. It alternates three ways of saving: one write at close, 4 KiB
/// writes with fsync (both under `flock`, as writers sharing a file must be on any
/// filesystem), and temp + fsync + rename over.
const CRASH_WRITER: &str = r#"
import fcntl, hashlib, os, random, sys
root, w = sys.argv[1], int(sys.argv[2])
rng = random.Random(w)
i = 0
while True:
    path = os.path.join(root, "shared", "f%d.txt" % rng.randrange(4))
    body = ("writer %d iteration %d " % (w, i)).encode() * rng.randrange(1, 3000)
    data = b"%d %s\n" % (len(body), hashlib.sha256(body).hexdigest().encode()) + body
    try:
        how = i % 3
        if how < 2:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            step = len(data) if how == 0 else 4096
            for at in range(0, len(data), step):
                os.write(fd, data[at:at + step])
            if how == 1:
                os.fsync(fd)
            os.close(fd)
        else:
            tmp = os.path.join(root, "shared", ".w%d.tmp" % w)
            with open(tmp, "wb") as f:
                f.write(data)
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except OSError:
        sys.exit(0)
    i += 1
"#;

/// Is `bytes` one whole version written by `CRASH_WRITER`?
fn is_whole_version(bytes: &[u8]) -> bool {
    let Some(newline) = bytes.iter().position(|b| *b == b'\n') else { return false };
    let header = String::from_utf8_lossy(&bytes[..newline]).to_string();
    let body = &bytes[newline + 1..];
    let Some((len, digest)) = header.split_once(' ') else { return false };
    len.parse::<usize>() == Ok(body.len()) && sha(body).to_hex() == digest
}

/// SIGKILL the daemon with the writers still writing, then stop the writers.
fn kill_mid_stream(m: &mut Mounted, writers: impl IntoIterator<Item = std::process::Child>) {
    m.kill();
    for mut writer in writers {
        let _ = writer.kill();
        writer.wait().unwrap();
    }
}

/// A writer process in the background: `python3 -c script args…`, its output discarded.
fn writer(script: &str, args: &[&std::ffi::OsStr]) -> std::process::Child {
    Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn killing_the_daemon_mid_write_loses_nothing_and_tears_nothing() {
    let mut m = Mounted::new();
    std::fs::create_dir(m.path("shared")).unwrap();
    let writers: Vec<_> =
        (0..8).map(|w| writer(CRASH_WRITER, &[m.mountpoint().as_os_str(), w.to_string().as_ref()])).collect();
    // A writer that holds its draft open when the daemon dies: an orphan draft for certain.
    let held = b"a draft nobody closed\n".repeat(100);
    let mut holder = Command::new("python3")
        .arg("-c")
        .arg("import sys, time\nf = open(sys.argv[1], 'wb')\nf.write(sys.stdin.buffer.read())\nf.flush()\nprint('ready', flush=True)\ntime.sleep(600)")
        .arg(m.path("shared/held.txt"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    holder.stdin.take().unwrap().write_all(&held).unwrap();
    let mut ready = [0u8; 6];
    holder.stdout.take().unwrap().read_exact(&mut ready).unwrap();
    assert_eq!(&ready, b"ready\n");

    // Let the writers commit a good number of versions, then kill the daemon mid-stream.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while m.ws.rows().iter().filter(|r| r.path.starts_with("shared/f")).count() < 60 {
        assert!(std::time::Instant::now() < deadline, "the writers made no progress:\n{}", m.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    kill_mid_stream(&mut m, writers.into_iter().chain([holder]));

    // What the dead daemon left: drafts that nobody committed.
    let drafts_dir = m.ws.abs(".resilient_write/drafts");
    let orphans = orphans_in(&drafts_dir);
    assert!(orphans.iter().any(|o| o.bytes == held), "the held draft is on disk at the crash");
    let rows_before = m.ws.rows().len();

    m.remount();
    let recovered = assert_orphans_kept_and_named(&m, rows_before, &orphans);
    let held_row = recovered.iter().find(|r| r.prev_sha256 == Some(sha(&held))).unwrap();
    assert_eq!(held_row.from.as_deref(), Some("shared/held.txt"), "the row names the draft's file");
    let files = assert_whole_and_journaled(&m, "shared");
    assert!(files >= 4, "the shared files exist");
    println!(
        "crash: {rows_before} rows before the kill, {} orphan drafts recovered, {files} files whole and journaled",
        orphans.len()
    );

    // And the remounted workspace takes writes again.
    m.write("shared/after.txt", b"after the crash\n").unwrap();
    assert_eq!(m.backing("shared/after.txt").unwrap(), b"after the crash\n");
    m.unmount();
}

/// A draft a dead daemon left in `drafts/`: its bytes, and whether it names the file it is for
/// (recovery's note, an extended attribute).
struct Orphan {
    bytes: Vec<u8>,
    noted: bool,
}

fn orphans_in(drafts_dir: &std::path::Path) -> Vec<Orphan> {
    let Ok(dir) = std::fs::read_dir(drafts_dir) else { return Vec::new() };
    dir.map(|e| {
        let path = e.unwrap().path();
        let noted = get_xattr(&path, rwfs::durable::layout::DRAFT_TARGET_XATTR).is_some();
        Orphan { bytes: std::fs::read(&path).unwrap(), noted }
    })
    .collect()
}

/// After a remount: each draft the dead daemon left (`orphans`) is either kept in `objects/`
/// and journaled by a `recover` row naming the file it was for, or was a version whose row was
/// already durable, which recovery installed (rolled forward), or — empty and naming nothing,
/// killed between its create and its note — removed; `drafts/` is empty. Returns the
/// `recover` rows.
fn assert_orphans_kept_and_named(m: &Mounted, rows_before: usize, orphans: &[Orphan]) -> Vec<rwfs::journal::Row> {
    let rows = m.ws.rows();
    let recovered: Vec<_> =
        rows[rows_before..].iter().filter(|r| r.op() == Op::Recover && r.path.contains("/drafts/")).cloned().collect();
    for Orphan { bytes, noted } in orphans {
        let kept = recovered.iter().any(|r| r.prev_sha256 == Some(sha(bytes)));
        let acknowledged = rows[..rows_before].iter().any(|r| r.sha256 == Some(sha(bytes)));
        let nothing = bytes.is_empty() && !noted;
        assert!(
            kept || acknowledged || nothing,
            "a draft left by the crash is neither kept nor installed:\n{}",
            m.log()
        );
        if kept {
            assert_eq!(m.ws.object(&sha(bytes)).as_ref(), Some(bytes), "a kept draft is in objects/");
        }
    }
    let nameless: Vec<_> = recovered.iter().filter(|r| r.from.is_none()).map(|r| r.path.as_str()).collect();
    assert!(
        nameless.is_empty(),
        "every recovered draft names its file: {} of {} do not",
        nameless.len(),
        recovered.len()
    );
    assert_eq!(std::fs::read_dir(m.ws.abs(".resilient_write/drafts")).unwrap().count(), 0, "no draft left behind");
    recovered
}

/// Every file of `dir` (written by `CRASH_WRITER`s) holds one whole version, the last one the
/// journal gives it, and the mount shows it; verify finds no drift, no bad object and no journal
/// problem but rows torn by the kills (a daemon killed inside a journal append, whose `pwrite`
/// the kernel cut at a page, leaves the bytes it wrote: a row nobody was told was written,
/// reported and skipped and kept, as in `crash.rs`'s guarantee 4). Returns the files checked.
fn assert_whole_and_journaled(m: &Mounted, dir: &str) -> usize {
    let report = rwfs::history::verify(&m.ws.workspace()).unwrap();
    let torn = |p: &rwfs::journal::Problem| {
        matches!(p, rwfs::journal::Problem::Torn { .. } | rwfs::journal::Problem::Unreadable { .. })
    };
    assert!(
        report.problems.iter().all(torn) && report.drift.is_empty() && report.bad_objects.is_empty(),
        "verify: problems {:?}, drift {:?}, bad objects {:?}",
        report.problems,
        report.drift,
        report.bad_objects
    );
    let rows = m.ws.rows();
    let mut files = 0;
    for entry in std::fs::read_dir(m.ws.abs(dir)).unwrap() {
        let entry = entry.unwrap();
        let name = format!("{dir}/{}", entry.file_name().to_string_lossy());
        let bytes = std::fs::read(entry.path()).unwrap();
        // Empty is a version too: the writer's `os.fsync` before Python flushed its buffer
        // commits the empty new file (`.wN.tmp`), and the kill may come before its close.
        assert!(bytes.is_empty() || is_whole_version(&bytes), "{name} is torn");
        let last = rows.iter().rfind(|r| r.path == name && (r.sha256.is_some() || r.op() == Op::Delete));
        assert_eq!(last.and_then(|r| r.sha256), Some(sha(&bytes)), "{name} is its last journaled version");
        assert_eq!(m.read(&name).unwrap(), bytes, "the new mount shows it");
        files += 1;
    }
    files
}

#[test]
fn fifty_kills_under_six_writers_tear_nothing_and_every_kept_draft_names_its_file() {
    let mut m = Mounted::new();
    std::fs::create_dir(m.path("shared")).unwrap();
    let (mut orphans_total, mut rows_total) = (0, 0);
    for kill in 1..=50 {
        let start = m.ws.rows().len();
        let writers: Vec<_> = (0..6)
            .map(|w| writer(CRASH_WRITER, &[m.mountpoint().as_os_str(), (kill * 10 + w).to_string().as_ref()]))
            .collect();
        // Some commits, then the kill lands wherever the writers are.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while m.ws.rows().len() < start + 8 {
            assert!(std::time::Instant::now() < deadline, "kill {kill}: the writers made no progress:\n{}", m.log());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        kill_mid_stream(&mut m, writers);
        let drafts_dir = m.ws.abs(".resilient_write/drafts");
        let orphans = orphans_in(&drafts_dir);
        let rows_before = m.ws.rows().len();
        m.remount();
        assert_orphans_kept_and_named(&m, rows_before, &orphans);
        assert_whole_and_journaled(&m, "shared");
        orphans_total += orphans.len();
        rows_total = rows_before;
    }
    println!(
        "50 kills under 6 writers: {rows_total} rows, {orphans_total} drafts left by the kills, each kept and named or installed"
    );
    m.unmount();
}

/// A writer for the batch-mode kill: its own four files, saved whole at close (by writer 0,
/// every fifth time, as a temp renamed over), and after every save that returned a line
/// `FILE ITERATION` in its log, which is what it was told was acknowledged.
const ACK_WRITER: &str = r#"
import hashlib, os, sys
root, w, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = os.path.join(root, "w%d" % w)
os.makedirs(d, exist_ok=True)
out = open(log, "a", buffering=1)
i = 0
while True:
    name = "f%d.txt" % (i % 4)
    body = ("writer %d iteration %d " % (w, i)).encode() * (1 + i % 50)
    data = b"%d %s\n" % (len(body), hashlib.sha256(body).hexdigest().encode()) + body
    try:
        if w == 0 and i % 5 == 4:
            tmp = os.path.join(d, ".tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(d, name))
        else:
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
    except OSError:
        sys.exit(0)
    out.write("%s %d\n" % (name, i))
    i += 1
"#;

#[test]
fn killing_the_daemon_in_batch_mode_loses_no_acknowledged_close() {
    // A rename drains the batch, so only writer 0 renames (the others save in place), and a
    // kill can still find it empty by chance (more likely on a loaded machine): each attempt
    // checks that nothing acknowledged was lost, and at least one must have found versions
    // staged, so recovery's roll-forward was tested.
    let mut rolled_total = 0;
    for attempt in 1..=3 {
        rolled_total += batch_kill_attempt(attempt);
        if rolled_total > 0 {
            break;
        }
    }
    assert!(rolled_total > 0, "three kills found nothing staged: the test did not test recovery");
}

/// One mount in batch mode under 8 writers, killed mid-stream; returns the versions recovery
/// installed.
fn batch_kill_attempt(attempt: u32) -> usize {
    // A window long enough that the kill finds versions acknowledged and not installed.
    let ws = Ws::new();
    std::fs::create_dir_all(ws.abs(".resilient_write")).unwrap();
    std::fs::write(ws.abs(".resilient_write/policy.yaml"), "batch_window_ms: 2000\n").unwrap();
    let mut m = Mounted::with(ws, false, &["--durability", "batch"]);
    let logs = tempfile::tempdir().unwrap();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let log = logs.path().join(format!("w{w}.log"));
            writer(ACK_WRITER, &[m.mountpoint().as_os_str(), w.to_string().as_ref(), log.as_os_str()])
        })
        .collect();
    let acked_lines = || -> usize {
        (0..8)
            .map(|w| std::fs::read_to_string(logs.path().join(format!("w{w}.log"))).unwrap_or_default().lines().count())
            .sum()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while acked_lines() < 400 {
        assert!(std::time::Instant::now() < deadline, "the writers made no progress:\n{}", m.log());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    kill_mid_stream(&mut m, writers);
    // What each writer was told: the last acknowledged iteration of each of its files.
    let mut acked: std::collections::BTreeMap<String, u64> = Default::default();
    for w in 0..8 {
        for line in std::fs::read_to_string(logs.path().join(format!("w{w}.log"))).unwrap().lines() {
            let (name, i) = line.split_once(' ').unwrap();
            acked.insert(format!("w{w}/{name}"), i.parse().unwrap());
        }
    }
    m.remount();
    let rolled = m.log().matches("installed a version the mount had acknowledged").count();
    for (path, &iteration) in &acked {
        let bytes = m.read(path).unwrap_or_else(|e| panic!("{path} is missing after the crash: {e}"));
        assert!(is_whole_version(&bytes), "{path} is torn");
        let body = &bytes[bytes.iter().position(|b| *b == b'\n').unwrap() + 1..];
        let words: Vec<&str> = std::str::from_utf8(&body[..40.min(body.len())]).unwrap().split(' ').collect();
        let found: u64 = words[3].parse().unwrap();
        assert!(
            found >= iteration,
            "{path}: the close of iteration {iteration} was acknowledged, the file holds {found}"
        );
        assert_eq!(m.backing(path).unwrap(), bytes, "{path} is installed in the tree");
    }
    let verify = rwfs().arg("verify").arg("--workspace").arg(m.ws.path()).output().unwrap();
    assert!(verify.status.success(), "rwfs verify: {}", String::from_utf8_lossy(&verify.stdout));
    println!(
        "batch kill, attempt {attempt}: {} acknowledged closes by 8 writers, {} files checked, {rolled} versions installed by recovery",
        acked_lines(),
        acked.len()
    );
    m.unmount();
    rolled
}

#[test]
fn an_open_file_keeps_working_after_unlink_and_is_never_committed() {
    use std::os::unix::fs::FileExt;
    let m = Mounted::new();
    // A new file, unlinked before its first commit.
    let new = OpenOptions::new().read(true).write(true).create_new(true).open(m.path("new.txt")).unwrap();
    std::fs::remove_file(m.path("new.txt")).unwrap();
    assert_eq!(new.metadata().unwrap().nlink(), 0, "fstat of an unlinked file");
    new.write_all_at(b"still writable\n", 0).unwrap();
    let mut buf = [0u8; 15];
    new.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"still writable\n");
    new.set_len(5).unwrap();
    assert_eq!(new.metadata().unwrap().len(), 5);
    new.sync_all().unwrap();
    // A committed file, unlinked while open, then written for the first time.
    m.write("old.txt", b"committed\n").unwrap();
    let old = OpenOptions::new().read(true).write(true).open(m.path("old.txt")).unwrap();
    std::fs::remove_file(m.path("old.txt")).unwrap();
    old.write_all_at(b"C", 0).unwrap();
    let mut buf = [0u8; 10];
    old.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"Committed\n");
    // close() succeeds and nothing reaches the tree.
    assert_eq!(nix::unistd::close(std::os::fd::IntoRawFd::into_raw_fd(new)), Ok(()));
    assert_eq!(nix::unistd::close(std::os::fd::IntoRawFd::into_raw_fd(old)), Ok(()));
    assert_eq!(m.backing("new.txt"), None);
    assert_eq!(m.backing("old.txt"), None);
    let ops: Vec<(String, Op)> = m.ws.rows().into_iter().map(|r| (r.path.clone(), r.op())).collect();
    assert_eq!(ops, [("old.txt".to_string(), Op::Create), ("old.txt".to_string(), Op::Delete)]);
}

#[test]
fn a_directory_holding_only_uncommitted_files_is_not_empty() {
    let m = Mounted::new();
    std::fs::create_dir(m.path("from")).unwrap();
    std::fs::create_dir(m.path("to")).unwrap();
    // In a child process: a descriptor of this multi-threaded test process is copied into the
    // children other tests fork, and its last close (the commit) would wait for theirs.
    let script = r#"
import errno, os, sys
fd = os.open(sys.argv[1] + "/to/pending.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
try:
    os.rename(sys.argv[1] + "/from", sys.argv[1] + "/to")
    print("renamed")
except OSError as e:
    print(errno.errorcode[e.errno])
os.close(fd)
"#;
    let out = Command::new("python3").arg("-c").arg(script).arg(m.mountpoint()).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ENOTEMPTY", "{}", String::from_utf8_lossy(&out.stderr));
    // A stat waits for the commit the last close makes.
    assert_eq!(std::fs::metadata(m.path("to/pending.txt")).unwrap().len(), 0);
    assert_eq!(m.backing("to/pending.txt").unwrap(), b"");
}

#[test]
fn every_name_of_a_hard_linked_file_shows_its_link_count_and_ctime() {
    let m = Mounted::new();
    m.write("a.txt", b"x").unwrap();
    let before = std::fs::metadata(m.path("a.txt")).unwrap();
    assert_eq!(before.nlink(), 1);
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::hard_link(m.path("a.txt"), m.path("b.txt")).unwrap();
    let a = std::fs::metadata(m.path("a.txt")).unwrap();
    assert_eq!(a.nlink(), 2, "the old name sees the new link");
    assert!((a.ctime(), a.ctime_nsec()) > (before.ctime(), before.ctime_nsec()), "link changes ctime");
    std::fs::hard_link(m.path("b.txt"), m.path("c.txt")).unwrap();
    std::fs::remove_file(m.path("b.txt")).unwrap();
    assert_eq!(std::fs::metadata(m.path("a.txt")).unwrap().nlink(), 2);
    assert_eq!(std::fs::metadata(m.path("c.txt")).unwrap().nlink(), 2);
    std::fs::remove_file(m.path("c.txt")).unwrap();
    assert_eq!(std::fs::metadata(m.path("a.txt")).unwrap().nlink(), 1);
}

#[test]
fn after_a_commit_the_kernel_shows_the_committed_attributes() {
    let m = Mounted::new();
    std::fs::create_dir(m.path("d")).unwrap();
    let dir_before = std::fs::metadata(m.path("d")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // Created and closed without a write: committed at the release, just after close().
    drop(std::fs::File::create(m.path("d/empty")).unwrap());
    // Rewritten and closed: committed at close(), by renaming the draft (its ctime changes
    // then), after the kernel cached the draft's attributes.
    m.write("d/full", b"x").unwrap();
    let mut f = OpenOptions::new().write(true).open(m.path("d/full")).unwrap();
    f.write_all(b"y").unwrap();
    f.metadata().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    drop(f);
    std::thread::sleep(std::time::Duration::from_millis(100));
    for name in ["d/empty", "d/full"] {
        let cached = std::fs::metadata(m.path(name)).unwrap();
        assert_eq!((cached.ctime(), cached.ctime_nsec() as u32), fresh_ctime(&m.path(name)), "{name}");
    }
    let dir_after = std::fs::metadata(m.path("d")).unwrap();
    assert!((dir_after.mtime(), dir_after.mtime_nsec()) > (dir_before.mtime(), dir_before.mtime_nsec()));
    assert_eq!(m.backing("d/empty").unwrap(), b"");
}

/// The ctime of `path` asked of the filesystem, not of the kernel's cache.
fn fresh_ctime(path: &std::path::Path) -> (i64, u32) {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let mut stx = std::mem::MaybeUninit::<nix::libc::statx>::zeroed();
    // SAFETY: a valid path and a buffer of the right type.
    let rc = unsafe {
        nix::libc::statx(
            nix::libc::AT_FDCWD,
            path.as_ptr(),
            nix::libc::AT_STATX_FORCE_SYNC,
            nix::libc::STATX_CTIME,
            stx.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "statx: {}", std::io::Error::last_os_error());
    // SAFETY: statx filled it.
    let stx = unsafe { stx.assume_init() };
    (stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec)
}

/// Is the workspace at `path` served by an rwfs mount now?
fn is_mounted(path: &std::path::Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let path = path.canonicalize().unwrap();
    info.lines().any(|l| l.contains(" fuse.rwfs ") && l.split(' ').nth(4) == Some(path.to_str().unwrap()))
}

#[test]
fn rwfs_run_starts_the_program_on_the_mount_gates_its_writes_and_unmounts_after() {
    let ws = Ws::new();
    std::fs::create_dir(ws.abs("app")).unwrap();
    // What a new user does: stand in the project (here a directory of it), run the agent
    // through rwfs.
    let out = rwfs()
        .arg("-w")
        .arg(ws.path())
        .args(["run", "--", "sh", "-c", "stat -f -c %T .; printf '%s' \"$LEAK\" > settings.py; echo wrote=$?"])
        .env("LEAK", aws_secret_line(7))
        .current_dir(ws.abs("app"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.starts_with("fuse"), "the program's working directory is on the mount: {stdout}{stderr}");
    assert!(stdout.contains("wrote=1"), "the redirect failed (EACCES): {stdout}{stderr}");
    assert_eq!(ws.read("app/settings.py"), None, "the secret never reached the tree");
    let rows: Vec<_> = ws.rows().iter().map(|r| (r.op(), r.path.clone())).collect();
    assert!(rows.contains(&(Op::Block, "app/settings.py".into())), "and was journaled: {rows:?}");
    assert!(out.status.success(), "rwfs run exits with the program's status: {stderr}");
    assert!(!is_mounted(ws.path()), "it unmounted what it mounted: {stderr}");

    // The program's exit status is rwfs run's.
    let out = rwfs().args(["run", "--", "sh", "-c", "exit 7"]).current_dir(ws.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(7));

    // Ctrl-C is the program's: rwfs run outlives it, waits, and still unmounts.
    let out = rwfs()
        .args(["run", "--", "sh", "-c", "kill -INT $PPID; sleep 0.3; echo survived"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(String::from_utf8_lossy(&out.stdout).contains("survived") && out.status.success(), "{stderr}");
    assert!(!is_mounted(ws.path()), "unmounted after an interrupt: {stderr}");
}

#[test]
fn a_shell_left_under_the_mount_is_told_to_cd_back_in() {
    let ws = Ws::new();
    let script = format!("{0} mount --daemon . && {0} status; {0} unmount \"$PWD\"", env!("CARGO_BIN_EXE_rwfs"));
    let out = Command::new("sh").arg("-c").arg(script).current_dir(ws.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bypass the gate") && stderr.contains("cd "), "{stderr}");
    assert!(!is_mounted(ws.path()));
    // In the mounted view itself there is nothing to say.
    let m = Mounted::over_itself();
    let out = rwfs().arg("status").current_dir(m.mountpoint()).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("bypass the gate"));
}

#[test]
fn an_unchanged_file_keeps_its_pages_and_a_changed_one_is_read_fresh() {
    // The kernel keeps a file's pages across opens (FOPEN_KEEP_CACHE) only while nothing
    // changed it: each way of changing it is read fresh through the mount at the next open.
    let m = Mounted::new();
    let cli_write = |rel: &str, bytes: &[u8]| {
        let mut child =
            rwfs().args(["write", rel, "-w"]).arg(m.ws.path()).stdin(std::process::Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(bytes).unwrap();
        assert!(child.wait().unwrap().success());
    };
    let read_twice = |rel: &str, expect: &[u8], what: &str| {
        for round in ["first", "second"] {
            assert_eq!(m.read(rel).unwrap(), expect, "{round} read after {what}:\n{}", m.log());
        }
    };
    m.write("f.txt", b"version one\n").unwrap();
    read_twice("f.txt", b"version one\n", "a write through the mount");
    // An engine write while mounted (MCP and the CLI reach the daemon's engine).
    cli_write("f.txt", b"version two\n");
    read_twice("f.txt", b"version two\n", "a CLI write");
    // Another name of the same file, then a rename over it.
    std::fs::hard_link(m.path("f.txt"), m.path("g.txt")).unwrap();
    m.write("g.txt", b"version 3 (g)\n").unwrap();
    read_twice("f.txt", b"version 3 (g)\n", "a write through a hard link");
    m.write("h.txt", b"version 4 (h)\n").unwrap();
    std::fs::rename(m.path("h.txt"), m.path("f.txt")).unwrap();
    read_twice("f.txt", b"version 4 (h)\n", "a rename over it");
    // A refused rewrite leaves the committed version, and the kernel shows that one.
    let mut f = OpenOptions::new().write(true).truncate(true).open(m.path("f.txt")).unwrap();
    assert!(f.write_all(aws_secret_line(12).as_bytes()).is_err());
    drop(f);
    read_twice("f.txt", b"version 4 (h)\n", "a refusal");
    // A change made outside the mount, in the workspace itself (same length: the kernel keeps
    // the attributes for their TTL).
    std::fs::write(m.ws.path().join("f.txt"), b"version 5 (x)\n").unwrap();
    read_twice("f.txt", b"version 5 (x)\n", "a change outside the mount");
}

#[test]
fn listings_carry_each_entrys_attributes() {
    // READDIRPLUS: `ls -l` and `find` get names and attributes in one request; the sizes and
    // kinds are right, a pending file is listed, and entries the listing handed to the kernel
    // stay usable (lookup counts kept) after the files change.
    let m = Mounted::new();
    std::fs::create_dir(m.path("d")).unwrap();
    for i in 0..50 {
        m.write(&format!("d/f{i:02}"), &vec![b'x'; i]).unwrap();
    }
    std::fs::create_dir(m.path("d/sub")).unwrap();
    let held = std::fs::File::create(m.path("d/pending")).unwrap();
    for round in 0..2 {
        let out =
            String::from_utf8(run_ok(Command::new("find").arg(m.path("d")).args(["-printf", "%P %y %s\n"])).stdout)
                .unwrap();
        let mut lines: Vec<&str> = out.lines().filter(|l| !l.starts_with(' ')).collect();
        lines.sort();
        assert_eq!(lines.len(), 52, "round {round}: {out}");
        let has = |line: &str| lines.contains(&line);
        assert!(has("f07 f 7") && has("f49 f 49") && has("pending f 0"), "{out}");
        assert!(lines.iter().any(|l| l.starts_with("sub d ")), "{out}");
        // Rewrite and remove some of what the kernel was told about.
        m.write("d/f07", b"seven\n").unwrap();
        std::fs::remove_file(m.path("d/f48")).unwrap();
        m.write("d/f48", b"again\n").unwrap();
        assert_eq!(m.read("d/f07").unwrap(), b"seven\n");
        assert_eq!(std::fs::metadata(m.path("d/f48")).unwrap().len(), 6);
        m.write("d/f07", &[b'x'; 7]).unwrap();
        m.write("d/f48", &[b'x'; 48]).unwrap();
    }
    drop(held);
}

#[test]
fn git_add_all_in_a_mounted_repository_leaves_the_state_directory_alone() {
    let m = Mounted::over_itself();
    let git = |args: &[&str]| m.run("git", &[&["-c", "user.email=t@t", "-c", "user.name=t"], args].concat());
    git(&["init", "-q"]);
    m.write("app.py", b"print('hi')\n").unwrap();
    git(&["add", "-A"]);
    let staged = String::from_utf8(git(&["status", "--porcelain"]).stdout).unwrap();
    assert_eq!(staged.trim(), "A  app.py", "only the project's files are staged");
    assert_eq!(m.read(".resilient_write/.gitignore").unwrap(), rwfs::durable::layout::GITIGNORE_CONTENT);
}

#[test]
fn status_names_the_daemon_as_owner_and_lists_only_this_workspaces_mount() {
    let m = Mounted::over_itself();
    let _other = Mounted::new();
    let out = run_ok(rwfs().args(["status", "--json"]).current_dir(m.mountpoint()).env_remove("RW_WORKSPACE"));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pid = status["owner"]["pid"].as_u64().unwrap_or_else(|| panic!("no owner while mounted: {status}"));
    assert_eq!(std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim(), "rwfs");
    let mounts = status["mounts"].as_array().unwrap();
    assert_eq!(mounts.len(), 1, "only this workspace's mount: {status}");
    assert_eq!(mounts[0]["mountpoint"], m.mountpoint().to_str().unwrap());
    assert_eq!(mounts[0]["pid"], pid);
    let text = run_ok(rwfs().arg("status").current_dir(m.mountpoint()).env_remove("RW_WORKSPACE")).stdout;
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains(&format!("owner      rwfs pid {pid}")), "{text}");
}

/// `rwfs mount --daemon WS MNT`, logging at info.
fn mount_daemon(ws: &Ws, mnt: &std::path::Path) -> Command {
    let mut cmd = rwfs();
    cmd.arg("mount").arg(ws.path()).arg(mnt).arg("--daemon").env("RWFS_LOG", "info");
    cmd
}

#[test]
fn mount_and_unmount_say_what_happened_and_logs_to_files_are_plain_text() {
    let ws = Ws::new();
    let mnt = tempfile::tempdir().unwrap();
    let log = ws.path().with_extension("log");
    let out = run_ok(mount_daemon(&ws, mnt.path()).env("RWFS_LOG_FILE", &log));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("rwfs: mounted") && said.contains("rwfs unmount"), "{said}");
    std::fs::write(mnt.path().join("a.txt"), b"x").unwrap();
    let out = run_ok(rwfs().arg("unmount").arg(mnt.path()));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("rwfs: unmounted"), "{said}");
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("mounted") && !log.contains('\x1b'), "plain text: {log:?}");
}

#[test]
fn a_clean_foreground_stop_says_so_without_warnings() {
    let ws = Ws::new();
    let mnt = tempfile::tempdir().unwrap();
    let child = rwfs()
        .arg("mount")
        .arg(ws.path())
        .arg(mnt.path())
        .env_remove("RWFS_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let point = mnt.path().to_string_lossy().to_string();
    let mounted = || {
        std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().any(|l| l.split(' ').nth(4) == Some(&point))
    };
    while !mounted() {
        assert!(std::time::Instant::now() < deadline, "not mounted");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(mnt.path().join("a.txt"), b"x").unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("rwfs: mounted") && said.contains("rwfs: unmounted"), "{said}");
    assert!(!said.contains("WARN") && !said.contains("failed"), "{said}");
    assert!(!mounted());
}

#[test]
fn a_draft_of_a_file_replaced_while_open_names_its_old_path_after_a_crash() {
    let mut m = Mounted::new();
    m.write("kept.txt", b"first version\n").unwrap();
    m.write("new.txt", b"replacement\n").unwrap();
    // Opened, replaced by a rename, then written: a draft of a file with no name.
    let mut holder = Command::new("python3")
        .arg("-c")
        .arg(
            "import os, sys, time\nf = open(sys.argv[1], 'r+b')\nos.replace(sys.argv[2], sys.argv[1])\n\
             f.write(b'written after the replace\\n')\nf.flush()\nprint('ready', flush=True)\ntime.sleep(600)",
        )
        .arg(m.path("kept.txt"))
        .arg(m.path("new.txt"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = [0u8; 6];
    holder.stdout.take().unwrap().read_exact(&mut ready).unwrap();
    assert_eq!(&ready, b"ready\n");
    let rows_before = m.ws.rows().len();
    m.kill();
    let _ = holder.kill();
    holder.wait().unwrap();
    m.remount();
    let rows = m.ws.rows();
    let recovered: Vec<_> =
        rows[rows_before..].iter().filter(|r| r.op() == Op::Recover && r.path.contains("/drafts/")).collect();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0].from.as_deref(), Some("kept.txt"), "the row names the file the draft was for");
    assert_eq!(m.read("kept.txt").unwrap(), b"replacement\n");
}

/// `rwfs ARGS` in `dir`, expected to fail with exit 2: its stderr.
#[track_caller]
fn fails_in(dir: &std::path::Path, args: &[&str]) -> String {
    let out = rwfs().args(args).current_dir(dir).env_remove("RW_WORKSPACE").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "rwfs {args:?}: {stderr}");
    stderr
}

#[test]
fn lifecycle_errors_say_what_happened_and_what_to_do() {
    let mut m = Mounted::over_itself();
    let pid = m.daemon_pid();
    let dir = m.mountpoint().to_path_buf();
    let shown = dir.display().to_string();

    // Mounting twice names the mount, its pid and the way out.
    let again = fails_in(&dir, &["mount", "--daemon", "."]);
    assert!(
        again.contains("already_mounted") && again.contains(&format!("pid {pid}")) && again.contains("rwfs unmount"),
        "{again}"
    );

    // A crashed daemon: every command says so and how to fix it; `rwfs mount` cleans up.
    m.lose_daemon();
    let dead = fails_in(std::path::Path::new("/"), &["status", "-w", &shown]);
    assert!(dead.contains("dead_mount") && dead.contains(&format!("rwfs unmount {shown}")), "{dead}");
    let out = run_ok(rwfs().args(["mount", "--daemon"]).arg(&dir).env("RWFS_LOG", "info"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("removed the dead mount") && said.contains("rwfs: mounted"), "{said}");
    std::fs::write(dir.join("after.txt"), b"resumed").unwrap();
    run_ok(rwfs().arg("unmount").arg(&dir));
    assert_eq!(m.ws.read("after.txt").unwrap(), b"resumed");

    // Not mounted any more.
    let not = fails_in(std::path::Path::new("/"), &["unmount", &shown]);
    assert!(not.contains("not_mounted") && !not.contains("no such file"), "{not}");
}

#[test]
fn a_mount_the_kernel_refuses_names_fuse3_and_dev_fuse() {
    let ws = Ws::new();
    nix::unistd::chown(ws.path(), Some(nix::unistd::Uid::from_raw(65534)), Some(nix::unistd::Gid::from_raw(65534)))
        .unwrap();
    // A normal user on a machine without fusermount3 (scripts/test installs it, so its absence
    // is simulated): the kernel refuses the mount, and the error names the way out. `--daemon`,
    // so that a mount that did succeed ends the test instead of serving forever.
    let out = as_nobody()
        .arg(env!("CARGO_BIN_EXE_rwfs"))
        .arg("mount")
        .arg(ws.path())
        .arg("--daemon")
        .env_remove("RWFS_LOG")
        .env("FUSERMOUNT_PATH", "/nonexistent/fusermount3")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("fuse_unavailable") && stderr.contains("fusermount3") && stderr.contains("/dev/fuse"),
        "{stderr}"
    );
}

#[test]
fn a_daemon_logs_to_the_state_directory_by_default_rotating_a_big_log() {
    let ws = Ws::new();
    ws.put(".resilient_write/rwfs.log", &vec![b'x'; (1 << 20) + 1]);
    let mnt = tempfile::tempdir().unwrap();
    run_ok(mount_daemon(&ws, mnt.path()).env_remove("RWFS_LOG_FILE"));
    std::fs::write(mnt.path().join("a.txt"), b"x").unwrap();
    let through_mount = std::fs::read_to_string(mnt.path().join(".resilient_write/rwfs.log")).unwrap();
    run_ok(rwfs().arg("unmount").arg(mnt.path()));
    assert!(through_mount.contains("mounted") && !through_mount.contains('\x1b'), "{through_mount}");
    // RWFS_LOG=info shows each commit.
    assert!(through_mount.lines().any(|l| l.contains("committed") && l.contains("a.txt")), "{through_mount}");
    assert_eq!(ws.read(".resilient_write/rwfs.log.1").unwrap().len(), (1 << 20) + 1, "the old log is kept once");
    assert!(ws.read(".resilient_write/rwfs.log").unwrap().len() < 1 << 20);
}

/// The names in `dir` through the mount, sorted.
fn names_in(m: &Mounted, dir: &str) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(m.path(dir)).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[test]
fn a_listing_kept_by_the_kernel_is_right_after_every_change() {
    // The kernel keeps listings across opens: each change, through the mount or behind the
    // kernel's back (the daemon's CLI writes and restores, a refused new file dropped), shows
    // in the next listing. Each step lists twice: the first listing fills the kernel's cache.
    let m = Mounted::new();
    m.write("d/a.txt", b"a\n").unwrap();
    m.write("d/b.txt", b"b\n").unwrap();
    let step = |expect: &[&str], what: &str| {
        for _ in 0..2 {
            assert_eq!(names_in(&m, "d"), expect, "after {what}");
        }
    };
    step(&["a.txt", "b.txt"], "two creates");
    m.write("d/c.txt", b"c\n").unwrap();
    step(&["a.txt", "b.txt", "c.txt"], "a create");
    std::fs::remove_file(m.path("d/a.txt")).unwrap();
    step(&["b.txt", "c.txt"], "an unlink");
    std::fs::rename(m.path("d/b.txt"), m.path("d/e.txt")).unwrap();
    step(&["c.txt", "e.txt"], "a rename within");
    std::fs::rename(m.path("d/e.txt"), m.path("e.txt")).unwrap();
    std::fs::create_dir(m.path("d/sub")).unwrap();
    step(&["c.txt", "sub"], "a rename out and a mkdir");
    let cli = |args: &[&str], stdin: &[u8]| {
        let mut child = rwfs()
            .args(args)
            .arg("-w")
            .arg(m.ws.path())
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "rwfs {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    cli(&["write", "d/cli.txt"], b"from the daemon\n");
    step(&["c.txt", "cli.txt", "sub"], "a CLI write through the daemon");
    cli(&["restore", "d/a.txt", "--sha", &sha(b"a\n").to_hex()], b"");
    step(&["a.txt", "c.txt", "cli.txt", "sub"], "a restore through the daemon");
    // A new file refused at close never reaches the tree: gone from the listing too, once its
    // name goes at the last release, which the kernel sends after close() returns (a listing
    // read before it shows the name and is dropped from the kernel's cache when it goes).
    let err = std::fs::write(m.path("d/leak.py"), aws_secret_line(48)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES));
    wait_for(5, || !names_in(&m, "d").iter().any(|n| n == "leak.py"));
    step(&["a.txt", "c.txt", "cli.txt", "sub"], "a refused create");
    // The state directory's listings change behind the kernel's back all the time.
    assert!(names_in(&m, ".resilient_write/rejections").contains(&"latest.json".to_string()));
    std::fs::remove_dir(m.path("d/sub")).unwrap();
    step(&["a.txt", "c.txt", "cli.txt"], "an rmdir");
}

#[test]
fn stat_reports_the_backing_files_inode_number() {
    // git's index (and any stat cache) built on the plain tree records st_ino: the mount
    // reports the backing file's, as a passthrough filesystem does, and so after a remount.
    let ws = Ws::new();
    ws.put("src/deep/native.rs", b"fn native() {}\n");
    std::os::unix::fs::symlink("deep/native.rs", ws.abs("src/link")).unwrap();
    let mut m = Mounted::with(ws, false, &[]);
    m.write("b.txt", b"b\n").unwrap();
    let names = ["", "src", "src/deep", "src/deep/native.rs", "src/link", "b.txt"];
    let pairs = |m: &Mounted| {
        names.map(|n| {
            let through = std::fs::symlink_metadata(m.path(n)).unwrap().ino();
            (n, through, std::fs::symlink_metadata(m.ws.abs(n)).unwrap().ino())
        })
    };
    for (name, through, backing) in pairs(&m) {
        assert_eq!(through, backing, "{name:?}");
    }
    // A commit installs a new version (a new inode, as a save by rename natively): the mount
    // reports that one; so does a listing with attributes.
    m.write("b.txt", b"b, again\n").unwrap();
    m.write("src/deep/native.rs", b"fn native() { 1 }\n").unwrap();
    for (name, through, backing) in pairs(&m) {
        assert_eq!(through, backing, "after commits: {name:?}");
    }
    let listed: Vec<(String, u64)> = std::fs::read_dir(m.path("src/deep"))
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().into_string().unwrap(), e.metadata().unwrap().ino()))
        .collect();
    assert_eq!(listed, [("native.rs".to_string(), std::fs::metadata(m.ws.abs("src/deep/native.rs")).unwrap().ino())]);
    let before = pairs(&m);
    m.unmount();
    m.remount();
    assert_eq!(pairs(&m), before, "{}", m.log());
}

/// `git` in `dir` with an identity, its output (it must succeed).
fn git_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    run_ok(Command::new("git").args(["-c", "user.email=t@t", "-c", "user.name=t"]).args(args).current_dir(dir))
}

#[test]
fn a_repository_indexed_natively_is_clean_through_the_mount_and_back_without_rehashing() {
    // Every file is older than the index, so none is "racily clean": a file git would look at
    // again is one whose stat data (inode, times, size) differs from what the index recorded.
    let ws = Ws::new();
    for i in 0..40 {
        ws.put(&format!("src/m{}/f{i}.rs", i % 4), format!("fn f{i}() {{}}\n").as_bytes());
    }
    git_in(ws.path(), &["init", "-q"]);
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for entry in walk(ws.path()) {
        std::fs::File::options().write(true).open(&entry).unwrap().set_modified(old).unwrap();
    }
    git_in(ws.path(), &["add", "-A"]);
    git_in(ws.path(), &["commit", "-qm", "native"]);
    git_in(ws.path(), &["status", "--porcelain"]);
    let index = ws.read(".git/index").unwrap();
    let mut m = Mounted::with(ws, true, &[]);
    // diff-files compares stat data with the index and refreshes nothing: a file whose stat
    // differs is listed (as modified, with no hash), so an empty answer means nothing would
    // be re-hashed.
    let stale = git_in(m.mountpoint(), &["diff-files", "--name-only"]).stdout;
    assert_eq!(String::from_utf8_lossy(&stale), "", "stat data differs through the mount");
    let status = git_in(m.mountpoint(), &["status", "--porcelain", "--untracked-files=no"]).stdout;
    assert_eq!(String::from_utf8_lossy(&status), "");
    assert!(m.read(".git/index").unwrap() == index, "git status rewrote the index (it re-hashed something)");
    // An edit through the mount, indexed there, is clean natively afterwards.
    m.write("src/m1/f1.rs", b"fn f1() { 1 }\n").unwrap();
    git_in(m.mountpoint(), &["add", "src/m1/f1.rs"]);
    m.unmount();
    let stale = git_in(m.ws.path(), &["diff-files", "--name-only"]).stdout;
    assert_eq!(String::from_utf8_lossy(&stale), "", "stat data differs natively after the mount");
}

/// The regular files under `dir`, outside `.git`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n == ".git") {
            continue;
        }
        if path.is_dir() { out.extend(walk(&path)) } else { out.push(path) }
    }
    out
}

#[test]
fn listing_the_journal_from_inside_the_mount_reports_no_problem_for_the_hidden_key() {
    let m = Mounted::over_itself();
    m.write("a.txt", b"one\n").unwrap();
    for args in [&["log"][..], &["status"], &["history", "a.txt"]] {
        let out = rwfs().args(args).current_dir(m.mountpoint()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !stderr.contains("journal"), "rwfs {args:?}: {stderr}");
    }
    let out = rwfs().args(["status", "--json"]).current_dir(m.mountpoint()).output().unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["journal_problems"], 0, "{status}");
    // verify, from outside, still checks the keyed chain.
    let out = rwfs().arg("-w").arg(m.ws.path()).arg("verify").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn setgid_directories_and_default_acls_rule_new_entries_as_on_ext4() {
    let m = Mounted::new();
    let script = r#"set -e
umask 0
mkdir acl
setfacl -d -m u::r,g::r,o::- acl
echo x > acl/file
mkdir acl/sub
umask 077
: > acl/umasked
umask 022
: > plain
mkdir sg
chgrp 4242 sg
chmod 2775 sg
mkdir sg/dir
: > sg/file
ln -s file sg/link
stat -c '%n %a %g' acl/file acl/sub acl/umasked plain sg/dir sg/file
stat -c '%n %g' sg/link
getfacl -n -d -c acl/sub
"#;
    let out = m.run("sh", &["-c", script]);
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "acl/file 440 ",
        "acl/sub 440 ",
        "acl/umasked 440 ",
        "plain 644 ",
        "sg/dir 2755 4242",
        "sg/file 644 4242",
        "sg/link 4242",
        "user::r--",
        "other::---",
    ] {
        assert!(text.contains(line), "expected {line:?} in:\n{text}");
    }
    let backing = std::fs::metadata(m.ws.abs("acl/file")).unwrap();
    assert_eq!(backing.mode() & 0o7777, 0o440, "the committed file");
}

#[test]
fn a_mount_right_after_umount_waits_for_the_departing_daemon() {
    // xfstests 097/128: `umount` returns once the kernel detached the mount, before the daemon
    // released the workspace; the next mount must not fail with workspace_locked. The old
    // daemon is held stopped for a moment (as a busy shutdown would be) to make the window wide.
    let mut m = Mounted::new();
    m.write("f", b"x").unwrap();
    let old = nix::unistd::Pid::from_raw(m.daemon_pid());
    let out = Command::new("umount").arg(m.mountpoint()).output().unwrap();
    assert!(out.status.success(), "umount: {}", String::from_utf8_lossy(&out.stderr));
    nix::sys::signal::kill(old, nix::sys::signal::Signal::SIGSTOP).unwrap();
    m.forget();
    let resume = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        nix::sys::signal::kill(old, nix::sys::signal::Signal::SIGCONT).unwrap();
    });
    m.remount();
    resume.join().unwrap();
    assert_eq!(m.read("f").unwrap(), b"x");
    assert_ne!(m.daemon_pid(), old.as_raw());
}

#[test]
fn fstat_of_an_open_directory_renamed_over_or_removed_has_no_link() {
    let m = Mounted::new();
    let script = r#"
import os, sys
root = sys.argv[1]
for a in ("d1", "d2", "d3"):
    os.mkdir(os.path.join(root, a))
fd = os.open(os.path.join(root, "d2"), os.O_RDONLY)
os.rename(os.path.join(root, "d1"), os.path.join(root, "d2"))
print("renamed-over", os.fstat(fd).st_nlink)
fd = os.open(os.path.join(root, "d3"), os.O_RDONLY)
os.rmdir(os.path.join(root, "d3"))
print("removed", os.fstat(fd).st_nlink)
"#;
    let out = python(script, &[m.mountpoint()]);
    assert_eq!(out, "renamed-over 0\nremoved 0\n");
}

#[test]
fn trusted_xattrs_on_a_symlink_are_the_links_own() {
    // xfstests 062: root sets trusted.* on the symlink itself (not its target), as on ext4.
    let m = Mounted::new();
    let script = r#"
import os, sys
root = sys.argv[1]
open(os.path.join(root, "target"), "w").close()
link = os.path.join(root, "link")
os.symlink("target", link)
os.setxattr(link, "trusted.colour", b"marone", follow_symlinks=False)
print(os.getxattr(link, "trusted.colour", follow_symlinks=False).decode())
print("trusted.colour" in os.listxattr(link, follow_symlinks=False))
print("trusted.colour" in os.listxattr(os.path.join(root, "target")))
os.removexattr(link, "trusted.colour", follow_symlinks=False)
print(os.listxattr(link, follow_symlinks=False))
"#;
    let out = python(script, &[m.mountpoint()]);
    assert_eq!(out, "marone\nTrue\nFalse\n[]\n");
}

#[test]
fn the_mount_helper_remounts_read_only_and_back() {
    // xfstests 452 and others: `mount -o remount,ro` reaches the helper, which changes the
    // kernel's flags of the live mount (the daemon keeps serving).
    let m = Mounted::new();
    m.write("f", b"1").unwrap();
    let helper = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mount/mount.fuse.rwfs");
    let remount = |opts: &str| {
        run_ok(Command::new(&helper).arg(m.ws.path()).arg(m.mountpoint()).args(["-o", opts]));
    };
    remount("remount,ro,strictatime,nodiratime");
    let e = m.write("f", b"2").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::libc::EROFS), "{e}");
    assert_eq!(m.read("f").unwrap(), b"1");
    remount("remount,rw,relatime");
    m.write("f", b"3").unwrap();
    assert_eq!(m.backing("f").unwrap(), b"3");
}

#[test]
fn committing_and_remounting_keep_the_access_time_a_writer_set() {
    // xfstests 258: rwfs's own reads of a file (the commit's scan and hash) are no access.
    let mut m = Mounted::new();
    m.run("touch", &["-t", "196001010101", "old"]);
    // A file written and given its times before the close that commits it (the commit reads it).
    let script = r#"
import os, sys
fd = os.open(os.path.join(sys.argv[1], "written"), os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"some content")
os.utime(fd, (-315619140, -315619140))
os.close(fd)
print(os.stat(os.path.join(sys.argv[1], "written")).st_atime < 0)
"#;
    assert_eq!(python(script, &[m.mountpoint()]), "True\n", "after the commit");
    let atime = |m: &Mounted| std::fs::metadata(m.path("old")).unwrap().atime();
    assert!(atime(&m) < 0, "a time before the epoch: {}", atime(&m));
    m.unmount();
    m.remount();
    assert!(atime(&m) < 0, "after a remount: {}", atime(&m));
    for name in ["old", "written"] {
        let backing = std::fs::metadata(m.ws.abs(name)).unwrap();
        assert!(backing.atime() < 0, "{name} in the backing tree: {}", backing.atime());
    }
}

/// The files of a state directory's subdirectory in the backing tree.
fn state_files(m: &Mounted, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(m.ws.abs(&format!(".resilient_write/{dir}")))
        .map(|entries| entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn every_refused_retry_has_its_row_and_envelope_and_leaves_no_draft_once_the_budget_is_spent() {
    let mut m = Mounted::new();
    let secret = format!("import os\n{}", aws_secret_line(44));
    for attempt in 0..7 {
        let err = std::fs::write(m.path("config.py"), &secret).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES), "attempt {attempt}");
    }
    let blocks = rows_of(&m, "config.py").into_iter().filter(|r| r.op() == Op::Block).count();
    assert_eq!(blocks, 7, "one block row per refusal");
    let envelopes = state_files(&m, "rejections").into_iter().filter(|n| n != "latest.json").count();
    assert_eq!(envelopes, 7, "one envelope per refusal");
    // A refused new file keeps an empty placeholder until its release; no draft holds a byte.
    for draft in state_files(&m, "drafts") {
        assert_eq!(std::fs::metadata(m.ws.abs(&format!(".resilient_write/drafts/{draft}"))).unwrap().len(), 0);
    }
    let latest: Value = serde_json::from_slice(&m.read(".resilient_write/rejections/latest.json").unwrap()).unwrap();
    assert_eq!(latest["retry_budget"], 0);
    assert_eq!(latest["suggested_action"], "abort");
    assert_eq!(latest["context"]["reason"], "retry_budget_exhausted");
    assert_eq!(latest["context"]["blocking_rules"][0], "aws-secret-access-key");
    assert_eq!(m.backing("config.py"), None);
    m.unmount();
    assert_eq!(state_files(&m, "drafts"), Vec::<String>::new(), "no draft is left");
}

#[test]
fn a_refused_new_file_created_again_at_once_is_refused_again_never_missing() {
    // FUSE's release is asynchronous: the last close of a refused new file drops its
    // placeholder name while the kernel may already have resolved that name for the writer's
    // next open(O_CREAT). That writer must be refused again with the refusal's errno (and be
    // able to learn why), never told the file it is creating does not exist. Several writers
    // retrying at once, with and without O_TRUNC, make the race likely.
    let m = Mounted::new();
    let secret = format!("import os\n{}", aws_secret_line(45));
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let (m, secret) = (&m, &secret);
            scope.spawn(move || {
                let path = m.path(&format!("retry{writer}.py"));
                for attempt in 0..40 {
                    let result = if attempt % 2 == 0 {
                        std::fs::write(&path, secret)
                    } else {
                        OpenOptions::new()
                            .write(true)
                            .create(true)
                            .truncate(false)
                            .open(&path)
                            .and_then(|mut f| f.write_all(secret.as_bytes()).and_then(|()| f.sync_all()))
                    };
                    let err = result.expect_err("a credential is refused");
                    assert_eq!(
                        err.raw_os_error(),
                        Some(nix::libc::EACCES),
                        "writer {writer}, attempt {attempt}: {err}"
                    );
                }
            });
        }
    });
    for writer in 0..4 {
        assert_eq!(m.backing(&format!("retry{writer}.py")), None, "nothing reached the tree");
    }
}

#[test]
fn a_terminal_ioctl_is_answered_enotty_quietly() {
    // Python's open() asks isatty() of every file it opens (ioctl TCGETS).
    let m = Mounted::new();
    m.write("a.txt", b"x\n").unwrap();
    let out = python(
        r#"
import errno, fcntl, os, sys, termios
path = sys.argv[1]
for _ in range(50):
    with open(path) as f:
        f.read()
fd = os.open(path, os.O_RDONLY)
try:
    fcntl.ioctl(fd, termios.TCGETS, bytes(64))
    print("answered")
except OSError as e:
    print(errno.errorcode[e.errno], os.isatty(fd))
"#,
        &[m.path("a.txt")],
    );
    assert_eq!(out.trim(), "ENOTTY False");
    let log = m.log();
    assert!(!log.to_lowercase().contains("ioctl"), "the daemon logs nothing about ioctls:\n{log}");
}

#[test]
fn rwfs_run_leaves_its_children_no_way_under_the_mount() {
    // `rwfs run` stands in the workspace when it mounts over it: its own working directory and
    // descriptors must not lead to the shadowed backing directory (`/proc/$PPID/cwd/x` would
    // write past the gate).
    let ws = Ws::new();
    std::fs::create_dir(ws.abs("app")).unwrap();
    let script = r#"stat -c 'mount %d' .; for p in /proc/$PPID/cwd /proc/$PPID/root /proc/$PPID/fd/*; do printf '%s %s\n' "$(stat -L -c %d "$p")" "$(readlink "$p")"; done"#;
    let out = rwfs()
        .arg("-w")
        .arg(ws.path())
        .args(["run", "--", "sh", "-c", script])
        .current_dir(ws.abs("app"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let mut lines = stdout.lines();
    let mount_dev = lines.next().unwrap().strip_prefix("mount ").unwrap().to_string();
    let workspace = ws.path().to_string_lossy().into_owned();
    let reached: Vec<&str> = lines.collect();
    assert!(reached.len() >= 3, "{stdout}");
    for line in &reached {
        let (dev, target) = line.split_once(' ').unwrap();
        assert!(
            !target.starts_with(&workspace) || dev == mount_dev,
            "rwfs run leads under the mount: {line}\n{stdout}"
        );
    }
}

#[test]
fn rwfs_run_says_the_daemon_stopped_only_once_it_has() {
    let ws = Ws::new();
    let script = format!("{} status --json", env!("CARGO_BIN_EXE_rwfs"));
    let out = rwfs()
        .arg("-w")
        .arg(ws.path())
        .args(["run", "--", "sh", "-c", &script])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pid = status["owner"]["pid"].as_u64().expect("the daemon owns the workspace");
    assert!(stderr.contains("stopped"), "{stderr}");
    // Gone, or a zombie its new parent has not reaped yet: it has finished, lock released.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let alive = state.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z'));
    assert!(!alive, "rwfs run said the daemon stopped while it still ran: {state}");
    let lock = std::fs::File::open(ws.abs(".resilient_write/lock")).unwrap();
    lock.try_lock().expect("the workspace lock is free");
}

#[test]
fn a_state_file_the_daemon_rewrites_reads_whole_through_the_mount_at_once() {
    // rejections/latest.json is replaced by the engine behind the kernel's back, each time by a
    // longer envelope here; a reader that sizes its buffer from a stat (what the kernel cached)
    // and reads that many bytes must get each new version whole, not the old length of it.
    let m = Mounted::new();
    let node = |rel: &str| {
        let script = "const fs = require('fs'); const p = process.argv[1]; const buf = Buffer.alloc(fs.statSync(p).size); \
                      const fd = fs.openSync(p); const n = fs.readSync(fd, buf, 0, buf.length, 0); \
                      process.stdout.write(buf.subarray(0, n))";
        run_ok(Command::new("node").args(["-e", script]).arg(m.path(rel))).stdout
    };
    let latest = ".resilient_write/rejections/latest.json";
    let mut sizes = Vec::new();
    for i in 0..4u64 {
        let secrets: Vec<String> = (60..62 + i).map(aws_secret_line).collect();
        let err = std::fs::write(m.path(&format!("settings{i}.py")), secrets.join("\n")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES));
        // What `ls -l` shows (and the kernel keeps), then what a reader gets: each at once.
        let backing = m.backing(latest).unwrap();
        let stat = std::fs::metadata(m.path(latest)).unwrap().len();
        assert_eq!(stat, backing.len() as u64, "refusal {i}: the size the mount shows is the new one");
        sizes.push(backing.len());
    }
    assert!(sizes.windows(2).all(|w| w[0] < w[1]), "each envelope longer than the last: {sizes:?}");
    let _ = std::fs::write(m.path("last.py"), (60..66).map(aws_secret_line).collect::<Vec<_>>().join("\n"));
    let read = node(latest);
    let backing = m.backing(latest).unwrap();
    assert_eq!(String::from_utf8_lossy(&read), String::from_utf8_lossy(&backing), "read whole, at once");
    let envelope: Value = serde_json::from_slice(&read).unwrap();
    assert_eq!(envelope["context"]["path"], "last.py");
    // The journal grows with every row, behind the kernel's back too.
    let journal = ".resilient_write/journal.jsonl";
    let before = node(journal);
    m.write("b.txt", b"b\n").unwrap();
    let after = node(journal);
    assert!(after.len() > before.len() && after == m.backing(journal).unwrap(), "the journal reads whole");
}

#[test]
fn a_failed_request_is_logged_once_in_its_span_and_counted_for_its_operation() {
    let mut m = Mounted::with_env(Ws::new(), false, &[], &[("RWFS_LOG", "info,rwfs::fuse=debug")]);
    std::fs::create_dir(m.path("full")).unwrap();
    std::fs::write(m.path("full/f"), b"x\n").unwrap();
    let refused = std::fs::remove_dir(m.path("full")).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(nix::libc::ENOTEMPTY));
    m.unmount();
    let log = m.log();
    // The failure, once, inside the span of its request (operation, request id, node).
    let failed: Vec<&str> =
        log.lines().filter(|l| l.contains("request failed") && l.contains("op=\"rmdir\"")).collect();
    assert_eq!(failed.len(), 1, "{log}");
    assert!(failed[0].contains("fuse{op=\"rmdir\" req="), "{}", failed[0]);
    assert!(failed[0].contains(&format!("errno={}", nix::libc::ENOTEMPTY)), "{}", failed[0]);
    // A plain answer is debug: nothing at info or above says the rmdir failed.
    assert!(!failed[0].contains("INFO") && !failed[0].contains("WARN"), "{}", failed[0]);
    // The counts per operation, at unmount.
    let counts = log.lines().find(|l| l.contains("failed requests per operation")).unwrap_or_else(|| panic!("{log}"));
    assert!(counts.contains("(\"rmdir\", 1)"), "{counts}");
}

#[test]
fn a_file_holding_an_old_credential_is_editable_through_the_mount_and_a_new_one_is_refused() {
    // The file held the key before the mount. `sed -i` writes a temporary copy and renames it
    // over the file; Python rewrites it in place; both leave the old key where it was.
    let ws = Ws::new();
    let old = aws_secret_line(102);
    ws.put("settings.py", format!("REGION = \"eu-west-1\"\n{old}").as_bytes());
    let m = Mounted::with(ws, false, &[]);
    m.run("sed", &["-i", "s/eu-west-1/us-east-2/", "settings.py"]);
    let now = String::from_utf8(m.read("settings.py").unwrap()).unwrap();
    assert!(now.starts_with("REGION = \"us-east-2\"") && now.contains(&old), "{now}");
    python("import sys; open(sys.argv[1], 'a').write('DEBUG = False\\n')", &[m.path("settings.py")]);
    assert!(m.backing("settings.py").unwrap().ends_with(b"DEBUG = False\n"));
    // A new credential is refused, and the envelope names the old one, still there.
    let new = aws_secret_line(103);
    let err = OpenOptions::new().append(true).open(m.path("settings.py")).unwrap().write_all(new.as_bytes());
    assert_eq!(err.unwrap_err().raw_os_error(), Some(nix::libc::EACCES));
    let latest: Value = serde_json::from_slice(&m.read(".resilient_write/rejections/latest.json").unwrap()).unwrap();
    assert!(
        latest["context"]["message"].as_str().unwrap().contains("already holds aws-secret-access-key at line 2"),
        "{latest}"
    );
    assert!(!m.backing("settings.py").unwrap().windows(new.len()).any(|w| w == new.as_bytes()));
}

#[test]
fn rwfs_run_takes_the_mounts_options() {
    let ws = Ws::new();
    let script = format!(
        "printf '%s' \"$LEAK\" > settings.py; mkdir -p scratch && echo x > scratch/a.txt; \
         {} status --json > status.json.out 2>/dev/null; cat /proc/$({} status --json | sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p' | head -1)/cmdline | tr '\\0' ' '",
        env!("CARGO_BIN_EXE_rwfs"),
        env!("CARGO_BIN_EXE_rwfs")
    );
    let out = rwfs()
        .arg("-w")
        .arg(ws.path())
        .args(["run", "--durability", "batch", "--blocked-errno", "EPERM", "--pass-through", "scratch/**", "--"])
        .args(["bash", "-c", &script])
        .env("LEAK", aws_secret_line(104))
        .current_dir(ws.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Operation not permitted"), "the refusal's errno is EPERM: {stderr}");
    assert!(stdout.contains("--durability batch"), "the daemon runs in batch durability: {stdout}");
    assert_eq!(ws.read("scratch/a.txt").unwrap(), b"x\n");
    assert!(ws.rows().iter().all(|r| !r.path.starts_with("scratch/")), "scratch/ passes through: no row");
    assert_eq!(ws.read("settings.py"), None);
}
