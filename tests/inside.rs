//! Issue 29: inside a session everything tells the truth. Every read-only command answers the
//! same from inside a mount over the workspace (where `objects/`, the keys and the index are
//! hidden) as from the unmounted workspace; `rwfs log` shows a change made while mounted at
//! once.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::support::mount::Mounted;
use crate::support::{Ws, sha};

/// `rwfs ARGS` with `dir` as its working directory (found there, as a user runs it), with
/// `env` added.
fn rwfs_in(dir: &Path, args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
    use std::io::Write as _;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rwfs"));
    cmd.args(args).current_dir(dir).env_remove("RW_WORKSPACE").env_remove("RW_POLICY_FILE").env_remove("RWFS_LOG");
    cmd.env_remove("RWFS_SESSION").envs(env.iter().copied());
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

#[track_caller]
fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// A workspace with a history worth asking about: two named sessions, an overwrite, a delete
/// and its restore, a refused secret, a rewind.
fn workspace_with_history() -> Ws {
    let ws = Ws::new();
    let at = ws.path();
    let s1 = [("RWFS_SESSION", "first")];
    ok(rwfs_in(at, &["write", "doc.txt"], b"one\ntwo\nthree\nfour\n", &s1));
    ok(rwfs_in(at, &["write", "notes.md"], b"# notes\n", &s1));
    let s2 = [("RWFS_SESSION", "second")];
    ok(rwfs_in(at, &["write", "doc.txt"], b"one\n2\n3\n4\nfive\nsix\nseven\neight\nnine\nten\n", &s2));
    ok(rwfs_in(at, &["rm", "notes.md"], b"", &s2));
    ok(rwfs_in(at, &["write", "src/lib.rs"], b"fn main() {}\n", &s2));
    let refused = rwfs_in(at, &["write", "config.py"], crate::support::aws_secret_line(3).as_bytes(), &s2);
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
    ok(rwfs_in(at, &["restore", "notes.md", "--sha", &sha(b"# notes\n").short(8)], b"", &[]));
    ok(rwfs_in(at, &["rewind", "--seq", "4", "src/**"], b"", &[]));
    ws
}

/// Every read-only command, each with the exit code it must end with.
fn read_only_commands() -> Vec<(Vec<String>, i32)> {
    let one = sha(b"one\ntwo\nthree\nfour\n").short(8);
    let notes = sha(b"# notes\n").short(8);
    let case = |args: &[&str], code: i32| (args.iter().map(|a| a.to_string()).collect(), code);
    vec![
        case(&["log"], 0),
        case(&["log", "--json", "-n", "0"], 0),
        case(&["log", "--all", "--path", "doc.txt"], 0),
        case(&["log", "--session", "second", "--since", "1h"], 0),
        case(&["history", "doc.txt"], 0),
        case(&["history", "--json", "notes.md"], 0),
        case(&["history", "src/lib.rs"], 0),
        // After `--`: the owner's answer is asked with the same arguments, nothing added after it.
        case(&["history", "--", "doc.txt"], 0),
        case(&["show", &format!("doc.txt@{one}")], 0),
        case(&["show", &format!("notes.md@{notes}")], 0),
        case(&["show", "doc.txt@0000"], 2),
        case(&["show", "nowhere.txt@1h"], 2),
        case(&["sessions"], 0),
        case(&["sessions", "--json"], 0),
        case(&["diff", "doc.txt"], 0),
        case(&["diff", "--json", "doc.txt", "--from", &one], 0),
        case(&["diff", "--session", "first"], 0),
        case(&["diff", "--session", "second"], 0),
        case(&["diff", "--json", "--since", "1h"], 0),
        case(&["status"], 0),
        case(&["status", "--json"], 0),
        case(&["verify"], 0),
        case(&["verify", "--json"], 0),
        case(&["rewind", "--session", "second", "--dry-run"], 0),
        case(&["rewind", "--json", "--seq", "1", "--dry-run"], 0),
        case(&["scan", "doc.txt"], 0),
        case(&["agent-rules", "--for", "claude"], 0),
    ]
}

/// What legitimately differs between a mounted and an unmounted workspace: who owns it, its
/// mounts, and the store's limit (free space of the moment).
fn comparable(args: &[String], out: &[u8]) -> String {
    let text = String::from_utf8_lossy(out);
    if args.first().map(String::as_str) != Some("status") {
        return text.into_owned();
    }
    text.lines()
        .filter(|l| !["owner", "mount", "requests", "retention"].iter().any(|w| l.starts_with(w)))
        .map(|l| match serde_json::from_str::<serde_json::Value>(l) {
            Ok(serde_json::Value::Object(mut map)) => {
                for key in ["owner", "mounts", "retention"] {
                    map.remove(key);
                }
                serde_json::Value::Object(map).to_string()
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each command's transcript, run with `dir` as the working directory.
fn transcript(dir: &Path) -> Vec<String> {
    read_only_commands()
        .iter()
        .map(|(args, code)| {
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = rwfs_in(dir, &argv, b"", &[]);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(out.status.code(), Some(*code), "rwfs {argv:?}: {stderr}");
            format!("$ rwfs {}\n{}\n{}", args.join(" "), comparable(args, &out.stdout), stderr.trim_end())
        })
        .collect()
}

#[test]
fn every_read_only_command_answers_the_same_inside_a_mount_over_the_workspace() {
    let ws = workspace_with_history();
    let unmounted = transcript(ws.path());
    let mut mounted = Mounted::with(ws, true, &[]);
    // Inside the mount, as a program under `rwfs run` is.
    let inside = transcript(mounted.mountpoint());
    mounted.unmount();
    let after = transcript(mounted.ws.path());
    for ((before, inside), after) in unmounted.iter().zip(&inside).zip(&after) {
        assert_eq!(before, inside, "unmounted (left) and inside the mount (right) differ");
        assert_eq!(before, after, "before (left) and after (right) the mount differ");
    }
    // And the answers are the truth, not merely the same.
    let all = unmounted.join("\n");
    assert!(all.contains("one\ntwo\nthree\nfour\n"), "show printed the first version:\n{all}");
    for history in unmounted.iter().filter(|t| t.starts_with("$ rwfs history")) {
        assert!(!history.contains("missing"), "kept versions are not called missing:\n{history}");
    }
    let doc = unmounted.iter().find(|t| t.starts_with("$ rwfs history doc.txt")).unwrap();
    assert!(doc.contains(" stored "), "the first version is kept:\n{doc}");
    let second = unmounted.iter().find(|t| t.starts_with("$ rwfs diff --session second")).unwrap();
    assert!(second.contains("insertions(+)") && !second.contains(" 0 insertions(+)"), "{second}");
}

#[test]
fn log_shows_a_change_made_while_mounted_at_once() {
    let mounted = Mounted::with(Ws::new(), true, &[]);
    let at = mounted.mountpoint();
    for round in 0..5 {
        let body = format!("round {round}\n");
        std::fs::write(at.join("a.txt"), &body).unwrap();
        let log = ok(rwfs_in(at, &["log", "--json", "-n", "1"], b"", &[]));
        let row: serde_json::Value = serde_json::from_slice(&log.stdout).unwrap();
        assert_eq!(row["sha256"], sha(body.as_bytes()).to_hex(), "round {round}: the newest row is the write");
        ok(rwfs_in(at, &["restore", "a.txt", "--sha", &sha(b"round 0\n").short(8)], b"", &[]));
        let log = ok(rwfs_in(at, &["log", "-n", "1"], b"", &[]));
        let text = String::from_utf8_lossy(&log.stdout);
        if round > 0 {
            assert!(text.contains(" restore "), "round {round}: the newest row is the restore:\n{text}");
        }
    }
}

/// The session `rwfs run` printed at its start.
fn session_said(stderr: &str) -> String {
    let line = stderr.lines().find(|l| l.starts_with("rwfs: session ")).unwrap_or_else(|| panic!("{stderr}"));
    line["rwfs: session ".len()..].split(':').next().unwrap().to_string()
}

#[test]
fn run_in_a_subdirectory_mounts_the_workspace_root_as_its_own_named_session() {
    let ws = Ws::new();
    ok(rwfs_in(ws.path(), &["write", "top.txt"], b"before\n", &[]));
    std::fs::create_dir(ws.abs("app")).unwrap();
    let app = ws.abs("app");
    // A read-only command in the subdirectory reads the parent's journal, and says so.
    let log = ok(rwfs_in(&app, &["log", "--json"], b"", &[]));
    assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 1);
    let said = String::from_utf8_lossy(&log.stderr);
    assert!(said.contains(&format!("workspace {}", ws.path().display())), "{said}");
    // `run` there mounts the root: a write to ../top.txt goes through the gate.
    let script = "pwd; echo after > ../top.txt; echo new > here.txt";
    let run = ok(rwfs_in(&app, &["run", "--", "sh", "-c", script], b"", &[]));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(String::from_utf8_lossy(&run.stdout), format!("{}\n", app.display()), "$PWD, no trailing slash");
    assert!(!app.join(".resilient_write").exists(), "no nested workspace");
    let session = session_said(&stderr);
    assert!(stderr.contains(&format!("undo it with `rwfs rewind --session {session}`")), "{stderr}");
    let rows = ws.rows();
    let of = |path: &str| rows.iter().rev().find(|r| r.path == path).unwrap_or_else(|| panic!("no row of {path}"));
    assert_eq!(of("top.txt").session.as_deref(), Some(session.as_str()));
    assert_eq!(of("app/here.txt").session.as_deref(), Some(session.as_str()));
    // The one command it printed undoes exactly that run.
    ok(rwfs_in(ws.path(), &["rewind", "--session", &session], b"", &[]));
    assert_eq!(ws.read("top.txt").unwrap(), b"before\n");
    assert_eq!(ws.read("app/here.txt"), None);
    // Another run is another session.
    let again = ok(rwfs_in(&app, &["run", "--", "true"], b"", &[]));
    assert_ne!(session_said(&String::from_utf8_lossy(&again.stderr)), session);
}

#[test]
fn run_of_a_program_that_is_not_there_is_127_and_mounts_nothing() {
    let ws = Ws::new();
    let out = rwfs_in(ws.path(), &["run", "--", "rwfs-no-such-program"], b"", &[]);
    assert_eq!(out.status.code(), Some(127));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("command not found") && !said.contains("rwfs log") && !said.contains("mounted "), "{said}");
    assert!(!ws.abs(".resilient_write").exists(), "nothing was set up");
}

/// `rwfs ARGS` in `dir` as a normal user: uid 65534 when the tests run as root (who may write
/// anywhere and mount with any option), else as the user running them.
fn rwfs_as_user(dir: &Path, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let bin = env!("CARGO_BIN_EXE_rwfs");
    let mut cmd = Command::new(bin);
    cmd.args(args).current_dir(dir).env_remove("RW_WORKSPACE").env_remove("RWFS_SESSION");
    if nix::unistd::geteuid().is_root() {
        cmd.uid(65534).gid(65534).env("HOME", "/nonexistent");
    }
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{bin} as uid 65534: {e} (the checkout and $TMPDIR must be reachable by others)"))
}

/// Make `dir` owned by the user [`rwfs_as_user`] runs as.
fn own(dir: &Path) {
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    }
}

#[test]
fn a_missing_mountpoint_says_so_and_what_to_do_not_rwfs_log() {
    let ws = Ws::new();
    let nowhere = ws.abs("no-such-dir");
    let out = rwfs_in(ws.path(), &["mount", ".", nowhere.to_str().unwrap(), "--daemon"], b"", &[]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no such directory") && said.contains("mkdir -p"), "{said}");
    assert!(!said.contains("rwfs log") && !said.contains("rwfs restore"), "{said}");
}

#[test]
fn a_dry_run_rewind_of_a_directory_rwfs_never_wrote_sets_nothing_up() {
    let ws = Ws::new();
    let out = rwfs_in(ws.path(), &["rewind", "--to", "1h", "--dry-run"], b"", &[]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("not_a_workspace"), "{said}");
    assert!(!ws.abs(".resilient_write").exists(), "the dry run made a workspace");
}

#[test]
fn a_directory_the_user_may_not_write_is_named_in_full_with_what_to_do() {
    let ws = Ws::new();
    let closed = ws.abs("closed");
    std::fs::create_dir(&closed).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o555)).unwrap();
    let out = rwfs_as_user(&closed, &["rm", "a.txt"]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    let state = closed.join(".resilient_write");
    assert!(said.contains(&format!("{}: create directory: permission denied", state.display())), "{said}");
    assert!(said.contains("use a directory this user owns"), "{said}");
    // A state directory there whose lock this user may not open: the lock, in full.
    std::fs::create_dir(&state).unwrap();
    let out = rwfs_as_user(&closed, &["rm", "a.txt"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("{}: open lock file: permission denied", state.join("lock").display())), "{said}");
}

#[test]
fn allow_other_without_user_allow_other_says_where_to_allow_it() {
    let ws = Ws::new();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    own(ws.path());
    let conf = std::fs::read_to_string("/etc/fuse.conf").unwrap_or_default();
    let allowed = conf.lines().any(|l| l.trim() == "user_allow_other");
    let out = rwfs_as_user(ws.path(), &["mount", ".", "--allow-other", "--daemon"]);
    let said = String::from_utf8_lossy(&out.stderr);
    // Where /dev/fuse is not open to other users (mode 0600 on some VMs; `scripts/test` opens it
    // only for its unprivileged step), no normal user may mount at all, and is told that first.
    let open_to_users = std::fs::metadata("/dev/fuse").is_ok_and(|m| m.permissions().mode() & 0o006 == 0o006);
    if !open_to_users {
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(said.contains("fuse_unavailable") && said.contains("chmod 0666 /dev/fuse"), "{said}");
        return;
    }
    if allowed {
        // This machine allows it: the mount works, and is taken down again.
        assert!(out.status.success(), "{said}");
        ok(rwfs_as_user(ws.path(), &["unmount", "."]));
    } else {
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(said.contains("user_allow_other") && said.contains("/etc/fuse.conf"), "{said}");
        assert!(!said.contains("io_error"), "{said}");
    }
}

#[test]
fn write_from_a_terminal_says_it_is_reading_it() {
    let ws = Ws::new();
    // `script` (util-linux) gives rwfs a terminal as stdin: a line, then Ctrl-D.
    let line = format!("{} write t.txt", env!("CARGO_BIN_EXE_rwfs"));
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(ws.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(b"hello\n\x04")?;
            child.wait_with_output()
        })
        .expect("script (util-linux) runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("reading the new content of t.txt from the terminal: end it with Ctrl-D"), "{said}");
    assert_eq!(ws.read("t.txt").unwrap(), b"hello\n");
    // Not on a pipe: nothing is said there.
    let piped = ok(rwfs_in(ws.path(), &["write", "u.txt"], b"x\n", &[]));
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("terminal"));
}

#[test]
fn unmount_with_a_process_inside_says_it_served_it_and_when_it_really_stopped() {
    let ws = Ws::new();
    ok(rwfs_in(ws.path(), &["mount", ".", "--daemon"], b"", &[]));
    // This process stays inside: a directory of the mount held open.
    let inside = std::fs::File::open(ws.path()).unwrap();
    let fd = std::os::fd::AsFd::as_fd(&inside);
    let before = nix::sys::stat::fstat(fd).unwrap();
    let out = ok(rwfs_in(ws.path(), &["unmount", "."], b"", &[]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("processes still inside it") && said.contains("its daemon stopped at"), "{said}");
    assert!(said.contains("now get ENOTCONN"), "{said}");
    // And that is what this process now gets; the daemon is gone, the lock free.
    let create = nix::fcntl::openat(
        fd,
        "late.txt",
        nix::fcntl::OFlag::O_CREAT | nix::fcntl::OFlag::O_WRONLY,
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    );
    assert_eq!(create.err(), Some(nix::errno::Errno::ENOTCONN), "inode {} of the detached mount", before.st_ino);
    let lock = std::fs::File::open(ws.abs(".resilient_write/lock")).unwrap();
    lock.try_lock().expect("the workspace lock is free");
    drop(lock);
    // Without a process inside, the plain message.
    ok(rwfs_in(ws.path(), &["mount", ".", "--daemon"], b"", &[]));
    let out = ok(rwfs_in(Path::new("/"), &["unmount", ws.path().to_str().unwrap()], b"", &[]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("committed or quarantined every draft and stopped") && !said.contains("still inside"),
        "{said}"
    );
}

/// `rwfs ARGS` in `dir` on a terminal (`script`), with `env`: what the terminal showed.
fn on_terminal(dir: &Path, args: &str, env: &[(&str, &str)]) -> String {
    let line = format!("{} {args}", env!("CARGO_BIN_EXE_rwfs"));
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]).current_dir(dir).env_remove("NO_COLOR").envs(env.iter().copied());
    let out = cmd.stdin(Stdio::null()).output().expect("script (util-linux) runs");
    String::from_utf8_lossy(&out.stdout).replace('\r', "")
}

#[test]
fn the_polish_people_notice() {
    let ws = Ws::new();
    let at = ws.path();
    ok(rwfs_in(at, &["write", "a.txt"], b"one\n", &[]));
    ok(rwfs_in(at, &["write", "a.txt"], b"two\n", &[]));
    // The TIME column holds a whole timestamp: the columns after it start where their headers do.
    let log = String::from_utf8(ok(rwfs_in(at, &["log"], b"", &[])).stdout).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    for column in ["OP", "SHA256", "PATH", "WHO"] {
        let header = lines[0].find(&format!(" {column}")).unwrap() + 1;
        let value = if column == "OP" {
            "write"
        } else if column == "PATH" {
            "a.txt"
        } else {
            ""
        };
        if !value.is_empty() {
            assert_eq!(lines[2].find(&format!(" {value} ")).map(|i| i + 1), Some(header), "{column}:\n{log}");
        }
    }
    // One version, in a size a person reads.
    let status = String::from_utf8(ok(rwfs_in(at, &["status"], b"", &[])).stdout).unwrap();
    assert!(status.contains("objects    1 version kept, 4 B"), "{status}");
    assert!(status.contains("journal    2 rows, 0 problems"), "{status}");
    assert!(status.contains(" GiB") || status.contains(" MiB"), "the store's limit in binary units:\n{status}");
    // Colour on a terminal, not with NO_COLOR, not into a pipe; `--color` decides otherwise.
    let escape = "\u{1b}[";
    assert!(on_terminal(at, "diff a.txt", &[]).contains(&format!("{escape}32m+two")), "green insertions");
    assert!(!on_terminal(at, "diff a.txt", &[("NO_COLOR", "1")]).contains(escape), "NO_COLOR");
    assert!(!String::from_utf8_lossy(&ok(rwfs_in(at, &["diff", "a.txt"], b"", &[])).stdout).contains(escape));
    let always = ok(rwfs_in(at, &["log", "--color", "always"], b"", &[]));
    assert!(String::from_utf8_lossy(&always.stdout).contains(&format!("{escape}32mcreate")), "--color always");
    assert!(!on_terminal(at, "log --color never", &[]).contains(escape), "--color never");
    // -h is short, --help long with the examples.
    let short = ok(rwfs_in(at, &["-h"], b"", &[])).stdout;
    let long = String::from_utf8(ok(rwfs_in(at, &["--help"], b"", &[])).stdout).unwrap();
    assert!(long.contains("Examples:") && !String::from_utf8_lossy(&short).contains("Examples:"));
    assert!(short.len() < long.len(), "-h ({} bytes) is the short help", short.len());
    // The man page's links to a page per command lead to pages `rwfs man --dir` writes.
    let pages = tempfile::tempdir().unwrap();
    ok(rwfs_in(at, &["man", "--dir", pages.path().to_str().unwrap()], b"", &[]));
    let top = std::fs::read_to_string(pages.path().join("rwfs.1")).unwrap();
    let linked: Vec<&str> = top.lines().filter_map(|l| l.strip_prefix("rwfs\\-")?.strip_suffix("(1)")).collect();
    assert!(linked.len() > 20, "{top}");
    for page in linked {
        let page = page.replace("\\-", "-");
        assert!(pages.path().join(format!("rwfs-{page}.1")).exists(), "rwfs-{page}.1");
    }
    // A refusal's envelope file ends with a newline.
    let refused = rwfs_in(at, &["write", "s.py"], crate::support::aws_secret_line(9).as_bytes(), &[]);
    assert_eq!(refused.status.code(), Some(2));
    let latest = std::fs::read_to_string(ws.abs(".resilient_write/rejections/latest.json")).unwrap();
    assert!(latest.ends_with("}\n"), "{latest}");
    // $PWD under run at the workspace's root: no trailing slash.
    let run = ok(rwfs_in(at, &["run", "--", "sh", "-c", "printf %s \"$PWD\""], b"", &[]));
    assert_eq!(String::from_utf8_lossy(&run.stdout), at.display().to_string());
    // Inside the mount, the relayed answer is coloured as this terminal asks.
    let mut mounted = Mounted::with(ws, true, &[]);
    let inside = on_terminal(mounted.mountpoint(), "log", &[]);
    assert!(inside.contains(&format!("{escape}32mcreate")), "{inside}");
    mounted.unmount();
}
