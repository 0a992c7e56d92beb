//! The `rwfs` binary as a script uses it: stdin in, JSON out, documented exit codes.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::support::{Ws, run_ok, sha};

fn rwfs(ws: &Ws, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rwfs"));
    cmd.args(args).env("RW_WORKSPACE", ws.path()).env_remove("RWFS_LOG");
    run_with_stdin(cmd, stdin)
}

/// Run `cmd` with `stdin` as its input, collecting its output.
fn run_with_stdin(mut cmd: Command, stdin: &[u8]) -> Output {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // A command that fails before reading stdin closes the pipe early; that is not a test failure.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

#[track_caller]
fn ok(out: &Output) -> serde_json::Value {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

#[test]
fn write_log_history_restore_rm_round_trip() {
    let ws = Ws::new();
    let first = ok(&rwfs(&ws, &["write", "--json", "--mode", "create", "notes.txt"], b"one\n"));
    assert_eq!(first["op"], "create");
    assert_eq!(first["sha256"], sha(b"one\n").to_hex());
    ok(&rwfs(&ws, &["write", "--json", "notes.txt"], b"two\n"));
    ok(&rwfs(&ws, &["write", "--json", "--mode", "append", "notes.txt"], b"three\n"));
    assert_eq!(ws.read("notes.txt").unwrap(), b"two\nthree\n");

    let log = rwfs(&ws, &["log", "--json", "-n", "0"], b"");
    assert_eq!(log.status.code(), Some(0));
    let rows: Vec<serde_json::Value> =
        String::from_utf8(log.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ops: Vec<&str> = rows.iter().map(|r| r["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["create", "write", "append"]);
    assert_eq!(rows[0]["via"], "cli");
    assert_eq!(rows[0]["comm"], "rwfs");

    let history = ok(&rwfs(&ws, &["history", "--json", "notes.txt"], b""));
    let wheres: Vec<&str> =
        history["versions"].as_array().unwrap().iter().map(|v| v["where"].as_str().unwrap()).collect();
    assert_eq!(wheres, ["stored", "stored", "current"]);

    let prefix = sha(b"one\n").short(10);
    let restored = ok(&rwfs(&ws, &["restore", "--json", "notes.txt", "--sha", &prefix], b""));
    assert_eq!(restored["op"], "restore");
    assert_eq!(ws.read("notes.txt").unwrap(), b"one\n");

    ok(&rwfs(&ws, &["rm", "--json", "notes.txt"], b""));
    assert_eq!(ws.read("notes.txt"), None);
    ok(&rwfs(&ws, &["restore", "--json", "notes.txt", "--sha", &sha(b"one\n").to_hex()], b""));
    assert_eq!(ws.read("notes.txt").unwrap(), b"one\n");

    let human = rwfs(&ws, &["log"], b"");
    let text = String::from_utf8(human.stdout).unwrap();
    assert!(text.lines().count() == 7 && text.contains("notes.txt") && text.contains("restore"), "{text}");
}

#[test]
fn errors_exit_2_with_kind_and_reason() {
    let ws = Ws::new();
    ok(&rwfs(&ws, &["write", "f"], b"x"));
    let out = rwfs(&ws, &["write", "--mode", "create", "f"], b"y");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stale_precondition/file_already_exists"), "{stderr}");
    for (args, reason) in [
        (vec!["write", "../escape"], "policy_violation/escapes_workspace"),
        (vec!["write", "/etc/passwd"], "policy_violation/absolute_path_rejected"),
        (vec!["write", ".resilient_write/journal.jsonl"], "policy_violation/state_dir_is_read_only"),
        (vec!["write", "--expect", "nothex", "f"], "policy_violation/invalid_argument"),
        (vec!["rm", "missing"], "stale_precondition/not_found"),
        (vec!["restore", "f", "--at", "not a time"], "policy_violation/invalid_argument"),
    ] {
        let out = rwfs(&ws, &args, b"z");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
    assert_eq!(ws.read("f").unwrap(), b"x");
    // Usage errors are clap's (exit 2 too).
    assert_eq!(rwfs(&ws, &["restore", "f"], b"").status.code(), Some(2));
}

#[test]
fn verify_exits_1_on_drift_and_status_reports() {
    let ws = Ws::new();
    ok(&rwfs(&ws, &["write", "a.txt"], b"journaled"));
    let clean = ok(&rwfs(&ws, &["verify", "--json"], b""));
    assert_eq!(clean["ok"], true);
    ws.put("a.txt", b"changed behind rwfs's back");
    let out = rwfs(&ws, &["verify", "--json"], b"");
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["drift"][0]["path"], "a.txt");
    let status = ok(&rwfs(&ws, &["status", "--json"], b""));
    assert_eq!(status["rows"], 1);
    assert_eq!(status["owner"], serde_json::Value::Null);
    assert_eq!(status["last"]["path"], "a.txt");
}

#[test]
fn restore_by_time_then_gc() {
    let ws = Ws::new();
    ok(&rwfs(&ws, &["write", "f"], b"v1"));
    // Rows carry whole seconds: make "between" fall strictly between the two versions.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let between = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    ok(&rwfs(&ws, &["write", "f"], b"v2"));
    let restored = ok(&rwfs(&ws, &["restore", "--json", "f", "--at", &between], b""));
    assert_eq!(restored["sha256"], sha(b"v1").to_hex());
    assert_eq!(ws.read("f").unwrap(), b"v1");
    let early = rwfs(&ws, &["restore", "f", "--at", "2020-01-01T00:00:00Z"], b"");
    assert_eq!(early.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&early.stderr).contains("absent_at_time"));

    let kept = ok(&rwfs(&ws, &["gc", "--json", "--keep-days", "1"], b""));
    assert_eq!(kept["removed"], 0);
    let gc = ok(&rwfs(&ws, &["gc", "--json", "--keep-days", "0"], b""));
    // Both objects go: v2 left the tree, and v1's copy is redundant with the current file.
    assert_eq!(gc["removed"], 2);
    let history = ok(&rwfs(&ws, &["history", "--json", "f"], b""));
    let wheres: Vec<&str> =
        history["versions"].as_array().unwrap().iter().map(|v| v["where"].as_str().unwrap()).collect();
    assert_eq!(wheres, ["current", "missing", "current"]);
}

#[test]
fn unsafe_roots_are_refused_unless_allowed() {
    let out = Command::new(env!("CARGO_BIN_EXE_rwfs")).args(["status", "--workspace", "/"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsafe_workspace_root"));
    let out =
        Command::new(env!("CARGO_BIN_EXE_rwfs")).args(["write", "x", "--workspace", "/usr/../etc/."]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsafe_workspace_root"));
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let out = Command::new(env!("CARGO_BIN_EXE_rwfs")).args(["status", "--workspace", &home]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsafe_workspace_root"), "{home}");
}

fn rwfs_in(dir: &std::path::Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rwfs"));
    cmd.args(args).current_dir(dir).env_remove("RW_WORKSPACE").env_remove("RW_POLICY_FILE");
    run_with_stdin(cmd, stdin)
}

#[test]
fn scan_is_a_pre_commit_hook() {
    use rwfs::score::rules::RULES;
    use rwfs::score::sample::{Rng, generate};
    let ws = Ws::new();
    let token = generate(RULES.iter().find(|r| r.id == "stripe-secret-key").unwrap().sample, &mut Rng::new(11));
    ws.put(".gitignore", b"ignored.py\n");
    ws.put("src/app.py", format!("import os\nKEY = \"{token}\"\n").as_bytes());
    ws.put("ignored.py", format!("KEY = \"{token}\"\n").as_bytes());
    ws.put(".env", format!("STRIPE_SECRET_KEY={token}\n").as_bytes());
    ws.put("docs/contact.md", b"mail jane.doe@acme-corp.io\n");
    ws.put("logo.bin", b"\x00\x01binary");

    let out = rwfs_in(ws.path(), &["scan"], b"");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            ".env:1:19 stripe-secret-key block",
            "docs/contact.md:1:6 email-address warn",
            "src/app.py:2:8 stripe-secret-key block"
        ],
        "{text}"
    );
    assert!(!text.contains(&token), "the report never shows the secret");

    let json = rwfs_in(ws.path(), &["scan", "--json", "src"], b"");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["blocked"], 1);
    assert_eq!(v["files"][0]["findings"][0]["replacement"], "os.environ[\"STRIPE_SECRET_KEY\"]");

    let sarif = rwfs_in(ws.path(), &["scan", "--sarif"], b"");
    let v: serde_json::Value = serde_json::from_slice(&sarif.stdout).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["level"], "error");
    assert_eq!(results[0]["locations"][0]["physicalLocation"]["region"]["startLine"], 1);

    // stdin, and a clean file exits 0.
    let out = rwfs_in(ws.path(), &["scan", "-"], b"Authorization: Bearer sk-ant-oat01-{REDACTED}\n");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), "-:1:23 anthropic-oauth-token warn");

    // The workspace policy applies; a broken one is an error naming line and key.
    ws.put(".resilient_write/policy.yaml", b"rules:\n  - paths: [\"src/**\", \".env\"]\n    action: allow\n");
    assert_eq!(rwfs_in(ws.path(), &["scan"], b"").status.code(), Some(0));
    ws.put(".resilient_write/policy.yaml", b"rules:\n  - pathz: [x]\n    action: allow\n");
    let out = rwfs_in(ws.path(), &["scan"], b"");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad_policy") && stderr.contains("line 2") && stderr.contains("pathz"), "{stderr}");
}

#[test]
fn control_characters_in_names_are_escaped_in_every_text_output() {
    let ws = Ws::new();
    let name = "two\nlines\tand\x1b[31mred\\.txt";
    let escaped = "two\\nlines\\tand\\u{1b}[31mred\\\\.txt";
    ok(&rwfs(&ws, &["write", "--json", name], b"v1\n"));
    let written = rwfs(&ws, &["write", name], b"v2\n");
    assert_eq!(written.status.code(), Some(0));
    ws.put(name, b"drifted");
    let outputs = [
        ("write", written),
        ("log", rwfs(&ws, &["log"], b"")),
        ("history", rwfs(&ws, &["history", name], b"")),
        ("status", rwfs(&ws, &["status"], b"")),
        ("verify", rwfs(&ws, &["verify"], b"")),
    ];
    for (command, out) in outputs {
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains('\x1b') && !text.contains('\t'), "{command}: a raw control character: {text:?}");
        let line = text.lines().find(|l| l.contains("two")).unwrap_or_else(|| panic!("{command}: no path in {text:?}"));
        assert!(line.contains(escaped), "{command}: {line:?} does not hold {escaped:?}");
    }
    // JSON keeps the name as it is.
    let rows = rwfs(&ws, &["log", "--json"], b"");
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8(rows.stdout).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(row["path"], name);
}

#[test]
fn the_state_directory_ignores_itself_for_git_and_older_workspaces_get_that_at_open() {
    let ws = Ws::new();
    ok(&rwfs(&ws, &["write", "a.txt"], b"one"));
    let ignore = ".resilient_write/.gitignore";
    assert_eq!(ws.read(ignore).unwrap(), rwfs::durable::layout::GITIGNORE_CONTENT);
    // A workspace made before the file existed gets it at the next open.
    std::fs::remove_file(ws.abs(ignore)).unwrap();
    ok(&rwfs(&ws, &["write", "a.txt"], b"two"));
    assert_eq!(ws.read(ignore).unwrap(), rwfs::durable::layout::GITIGNORE_CONTENT);
    run_ok(Command::new("git").args(["init", "-q"]).current_dir(ws.path()));
    let checked = Command::new("git")
        .args(["check-ignore", "-q"])
        .arg(ws.abs(".resilient_write/journal.jsonl"))
        .current_dir(ws.path())
        .status()
        .unwrap();
    assert!(checked.success(), "git ignores the journal");
}

/// Where a command runs: on an engine the command opens itself, or through the control socket
/// of the daemon that mounts the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Through {
    OwnEngine,
    Daemon,
}

/// Each command, its stdin and its exit code; run in order on one fresh workspace.
fn every_command() -> Vec<(Vec<String>, Vec<u8>, i32)> {
    let v1 = sha(b"v1\n").short(8);
    let case =
        |args: &[&str], stdin: &[u8], code: i32| (args.iter().map(|a| a.to_string()).collect(), stdin.to_vec(), code);
    vec![
        case(&["write", "--json", "--mode", "create", "f.txt"], b"v1\n", 0),
        case(&["write", "f.txt"], b"v2\n", 0),
        case(&["write", "--json", "--mode", "append", "f.txt"], b"more\n", 0),
        case(&["write", "--mode", "create", "f.txt"], b"x", 2),
        case(&["write", "--expect", "", "f.txt"], b"x", 2),
        case(&["write", "--json", "../out"], b"x", 2),
        case(&["restore", "--json", "f.txt", "--sha", &v1], b"", 0),
        case(&["restore", "f.txt", "--sha", &v1], b"", 0),
        case(&["restore", "--json", "f.txt", "--at", "0s"], b"", 0),
        case(&["restore", "f.txt", "--at", "2020-01-01T00:00:00Z"], b"", 2),
        case(&["restore", "f.txt", "--sha", "0000"], b"", 2),
        case(&["rm", "--json", "f.txt"], b"", 0),
        case(&["rm", "f.txt"], b"", 2),
        case(&["restore", "f.txt", "--sha", &v1], b"", 0),
        case(&["log", "--json", "-n", "0"], b"", 0),
        case(&["log", "--json", "--path", "f.txt", "-n", "2"], b"", 0),
        case(&["history", "--json", "f.txt"], b"", 0),
        case(&["show", &format!("f.txt@{v1}")], b"", 0),
        case(&["log", "--json", "--since", "1h"], b"", 0),
        case(&["sessions", "--json"], b"", 0),
        case(&["diff", "--json", "f.txt"], b"", 0),
        case(&["diff", "--since", "1h"], b"", 0),
        case(&["write", "--json", "g.txt"], b"later\n", 0),
        case(&["rewind", "--json", "--seq", "1", "--dry-run"], b"", 0),
        case(&["rewind", "--json", "--seq", "9", "g.*"], b"", 0),
        case(&["rewind", "--session", "nobody"], b"", 0),
        case(&["rewind", "--to", "not a time"], b"", 2),
        case(&["verify", "--json"], b"", 0),
        case(&["verify"], b"", 0),
        case(&["gc", "--json", "--keep-days", "1"], b"", 0),
        case(&["gc", "--keep-days", "1"], b"", 0),
        case(&["status", "--json"], b"", 0),
        case(&["scan", "-"], b"mail jane.doe@acme-corp.io\n", 0),
        // A refusal: the typed envelope on stdout with --json, the reason on stderr.
        case(&["write", "--json", "config.py"], crate::support::aws_secret_line(5).as_bytes(), 2),
        case(&["write", "config.py"], crate::support::aws_secret_line(5).as_bytes(), 2),
    ]
}

/// `out` with what differs between two runs of the same commands (times, ids, pids, the
/// chain over them, who owns the workspace) replaced by `*`.
fn comparable(out: &[u8]) -> String {
    const VOLATILE: &[&str] = &[
        "ts",
        "wrote_at",
        "journal_id",
        "pid",
        "chain",
        "mac",
        "limit",
        "reason",
        "workspace",
        "owner",
        "mounts",
        "uid",
        "rejection_id",
        "hash",
        "group",
        "session",
        "name",
        "root",
        "start",
        "end",
    ];
    fn scrub(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (key, value) in map.iter_mut() {
                    if VOLATILE.contains(&key.as_str()) {
                        *value = serde_json::Value::from("*");
                    } else {
                        scrub(value);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(scrub),
            _ => {}
        }
    }
    String::from_utf8_lossy(out)
        .lines()
        .map(|line| match serde_json::from_str::<serde_json::Value>(line) {
            Ok(mut v) => {
                scrub(&mut v);
                v.to_string()
            }
            // The store's limit depends on the free space of the moment.
            Err(_) => match line.split_once("its limit is ") {
                Some((head, _)) => format!("{head}its limit is *"),
                None => line.to_string(),
            },
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_command_answers_the_same_unmounted_and_through_the_daemon() {
    let mut transcripts = Vec::new();
    for through in [Through::OwnEngine, Through::Daemon] {
        let mounted = (through == Through::Daemon).then(crate::support::mount::Mounted::new);
        let own = (through == Through::OwnEngine).then(Ws::new);
        let ws = mounted.as_ref().map_or_else(|| own.as_ref().unwrap(), |m| &m.ws);
        let mut transcript = Vec::new();
        for (args, stdin, code) in every_command() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = rwfs(ws, &args, &stdin);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(out.status.code(), Some(code), "{through:?} rwfs {args:?}: {stderr}");
            if args.contains(&"--json") {
                assert!(!out.stdout.is_empty(), "{through:?} rwfs {args:?} printed nothing on stdout");
            }
            let stderr = stderr.split("rj_").next().unwrap_or_default();
            transcript.push(format!("$ rwfs {}\n{}\n{}", args.join(" "), comparable(&out.stdout), stderr.trim_end()));
        }
        transcripts.push(transcript);
    }
    for (own, daemon) in transcripts[0].iter().zip(&transcripts[1]) {
        assert_eq!(own, daemon, "unmounted (left) and through the daemon (right) differ");
    }
}

/// `rwfs verify` and `verify --json` on `ws`: the transcript and both exit codes.
fn verify_transcript(ws: &std::path::Path) -> String {
    let mut transcript = String::new();
    for args in [&["verify"][..], &["verify", "--json"]] {
        let out = rwfs_in(ws, args, b"");
        let stderr = String::from_utf8_lossy(&out.stderr);
        transcript +=
            &format!("$ rwfs {} -> {:?}\n{}\n{stderr}", args.join(" "), out.status.code(), comparable(&out.stdout));
    }
    transcript
}

#[test]
fn verify_reports_the_same_through_the_daemon_and_right_after_unmount() {
    let mut transcripts = Vec::new();
    for through in [Through::OwnEngine, Through::Daemon] {
        let mut mounted = (through == Through::Daemon).then(crate::support::mount::Mounted::new);
        let own = (through == Through::OwnEngine).then(Ws::new);
        let ws = mounted.as_ref().map_or_else(|| own.as_ref().unwrap(), |m| &m.ws);
        let (root, journal) = (ws.path().to_path_buf(), ws.abs(".resilient_write/journal.jsonl"));
        let mut transcript = Vec::new();
        ok(&rwfs(ws, &["write", "f.txt"], b"v1\n"));
        ok(&rwfs(ws, &["write", "g.txt"], b"g\n"));
        ok(&rwfs(ws, &["write", "h.txt"], b"h\n"));
        transcript.push(verify_transcript(&root));
        // A file edited behind rwfs (the backing tree: the mount is elsewhere).
        ws.put("f.txt", b"edited behind rwfs\n");
        transcript.push(verify_transcript(&root));
        // A tampered row: the second row's size changed in place.
        let text = std::fs::read_to_string(&journal).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        assert!(lines[1].contains("\"bytes\":2,"), "{}", lines[1]);
        lines[1] = lines[1].replace("\"bytes\":2,", "\"bytes\":9,");
        std::fs::write(&journal, lines.join("\n") + "\n").unwrap();
        transcript.push(verify_transcript(&root));
        // Right after `rwfs unmount` returns (its daemon may still be on its way out).
        if let Some(m) = mounted.as_mut() {
            m.unmount();
        }
        transcript.push(verify_transcript(&root));
        transcripts.push(transcript);
    }
    for (i, (own, daemon)) in transcripts[0].iter().zip(&transcripts[1]).enumerate() {
        let code = if i == 0 { "Some(0)" } else { "Some(1)" };
        assert!(own.contains(&format!("-> {code}")) && !own.contains("Some(2)"), "{own}");
        assert_eq!(own, daemon, "unmounted (left) and through the daemon (right) differ");
    }
}

#[test]
fn a_daemon_that_dies_mid_answer_is_reported_as_gone_with_what_to_do() {
    let ws = Ws::new();
    std::fs::create_dir(ws.abs(".resilient_write")).unwrap();
    // A daemon that reads the request and dies after half an answer line.
    let listener = std::os::unix::net::UnixListener::bind(ws.abs(".resilient_write/rwfs.sock")).unwrap();
    let served = std::thread::spawn(move || {
        use std::io::BufRead;
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut line = String::new();
            std::io::BufReader::new(&stream).read_line(&mut line).unwrap();
            if line.contains("rwfs_control") {
                stream.write_all(b"{\"ok\": tr").unwrap();
                return;
            }
        }
    });
    let out = rwfs(&ws, &["rm", "f.txt"], b"");
    served.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("daemon_gone"), "{stderr}");
    assert!(stderr.contains("stopped or died"), "{stderr}");
    assert!(stderr.contains("rwfs status"), "{stderr}");
    assert!(!stderr.contains("not JSON"), "{stderr}");
}

#[test]
fn a_closed_stdout_ends_the_output_not_the_process() {
    let ws = Ws::new();
    for i in 0..2000 {
        ws.put(&format!("docs/{i:04}.md"), b"mail jane.doe@acme-corp.io\n");
    }
    for args in [&["scan"][..], &["scan", "--json"], &["agent-rules"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rwfs"))
            .args(args)
            .current_dir(ws.path())
            .env_remove("RW_WORKSPACE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `| head -0`: the reader goes away before the first line.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "rwfs {args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_missing_workspace_or_a_plain_directory_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["log"][..], &["history", "f"], &["verify"], &["status"]] {
        let out = rwfs_in(dir.path(), args, b"");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("not_a_workspace") && stderr.contains("-w DIR"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "no empty results");
    }
    let gone = dir.path().join("gone");
    let out = rwfs_in(dir.path(), &["log", "-w", gone.to_str().unwrap()], b"");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such_workspace"));
    let out = rwfs_in(dir.path(), &["write", "-w", gone.to_str().unwrap(), "f"], b"x");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such_workspace"));
    let out = rwfs_in(dir.path(), &["rm", "missing"], b"");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no such file in the workspace") && stderr.contains("rwfs restore"), "{stderr}");
}

#[test]
fn recovery_from_normal_output_history_show_and_log_since() {
    let ws = Ws::new();
    ok(&rwfs(&ws, &["write", "f.txt"], b"first\n"));
    ok(&rwfs(&ws, &["write", "f.txt"], b"second\n"));
    ok(&rwfs(&ws, &["rm", "f.txt"], b""));
    // The delete row shows what was deleted, ready to be shown or restored.
    let text = String::from_utf8(ok_raw(&rwfs(&ws, &["history", "f.txt"], b""))).unwrap();
    let delete = text.lines().find(|l| l.contains("delete")).unwrap_or_else(|| panic!("{text}"));
    let second = sha(b"second\n").short(12);
    assert!(delete.contains(&second), "{text}");
    // Any version, printed without restoring it (the file stays deleted).
    let shown = ok_raw(&rwfs(&ws, &["show", &format!("f.txt@{}", sha(b"first\n").short(6))], b""));
    assert_eq!(shown, b"first\n");
    assert_eq!(ok_raw(&rwfs(&ws, &["show", &format!("f.txt@{second}")], b"")), b"second\n");
    assert_eq!(ws.read("f.txt"), None);
    assert_eq!(rwfs(&ws, &["show", "f.txt@ffffff"], b"").status.code(), Some(2));
    // --since: everything from an hour ago, nothing from a future second.
    let since = |t: &str| String::from_utf8(ok_raw(&rwfs(&ws, &["log", "--json", "--since", t], b""))).unwrap();
    assert_eq!(since("1h").lines().count(), 3);
    let later = humantime::format_rfc3339_seconds(std::time::SystemTime::now() + std::time::Duration::from_secs(5));
    assert_eq!(since(&later.to_string()).lines().count(), 0);
    // Completions for the usual shells.
    for shell in ["bash", "zsh", "fish"] {
        let script = String::from_utf8(ok_raw(&rwfs(&ws, &["completions", shell], b""))).unwrap();
        assert!(script.contains("restore") && script.contains("show"), "{shell}");
    }
    let man = String::from_utf8(ok_raw(&rwfs(&ws, &["man"], b""))).unwrap();
    assert!(man.starts_with(".ie") || man.contains(".TH rwfs"), "{man}");
    assert!(man.contains("restore"), "{man}");
}

#[track_caller]
fn ok_raw(out: &Output) -> Vec<u8> {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout.clone()
}

#[test]
fn a_refusal_leads_with_the_action_and_never_echoes_a_character_of_the_secret() {
    let ws = Ws::new();
    let line = crate::support::aws_secret_line(9);
    let secret = line.split('"').nth(1).unwrap().to_string();
    let out = rwfs(&ws, &["write", "--json", "config.py"], line.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    let envelope: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let context = &envelope["context"];
    assert_eq!(context["action"], "block");
    assert!(context["risk_score"]["score"].is_number() && context.get("verdict").is_none(), "{context}");
    ws.put("scan/config.py", line.as_bytes());
    let scanned = rwfs_in(ws.path(), &["scan", "--json", "scan"], b"");
    let sarif = rwfs_in(ws.path(), &["scan", "--sarif", "scan"], b"");
    let latest = ws.read(".resilient_write/rejections/latest.json").unwrap();
    for (name, shown) in [
        ("stdout", out.stdout.as_slice()),
        ("stderr", &out.stderr),
        ("latest.json", &latest),
        ("scan --json", &scanned.stdout),
        ("scan --sarif", &sarif.stdout),
    ] {
        let shown = String::from_utf8_lossy(shown);
        let leaked: Vec<&str> =
            (0..=secret.len() - 4).map(|i| &secret[i..i + 4]).filter(|w| shown.contains(w)).collect();
        assert!(leaked.is_empty(), "{name} echoes {leaked:?} of the secret: {shown}");
    }
}
