//! The read guard (issue 30 item 3, `engine/read_guard.rs`) through a real mount: what a process
//! of an agent run reads of a guarded file, what an exempt reader and everyone else read, and
//! that nothing a guarded reader does through a redacted view reaches the file.

use std::process::{Command, Output};

use crate::support::mount::{Mounted, rwfs};
use crate::support::{Ws, aws_secret_line};

const POLICY: &str = "\
read_guard:
  - paths: [\".env*\"]
    action: redact
    exempt_programs: [exempt-reader]
  - paths: [\"*.pem\"]
    action: refuse
";

/// A workspace with the policy, a `.env` holding a credential among plain settings, and a key.
fn guarded() -> (Ws, String, Vec<u8>) {
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", POLICY.as_bytes());
    let line = aws_secret_line(301);
    let secret = line.split('"').nth(1).unwrap().to_string();
    let env = format!("# settings\nREGION=eu-west-1\n{line}DB_PASSWORD=hunter2\nDEBUG=false\n").into_bytes();
    ws.put(".env", &env);
    ws.put("deploy.pem", b"not really a key, but guarded by name\n");
    (ws, secret, env)
}

/// `sh -c script` in `dir`, in agent run `session` when given (`RWFS_SESSION`, as `rwfs run`
/// sets it), with `env` added.
fn sh(dir: &std::path::Path, session: Option<&str>, env: &[(&str, &str)], script: &str) -> Output {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]).current_dir(dir).env_remove("RWFS_SESSION").env_remove("RWFS_READ_REAL");
    if let Some(session) = session {
        cmd.env("RWFS_SESSION", session);
    }
    cmd.envs(env.iter().copied()).output().unwrap()
}

#[test]
fn an_agent_run_reads_a_redacted_view_of_the_real_length_and_others_read_the_real_bytes() {
    let (ws, secret, real) = guarded();
    let m = Mounted::with(ws, false, &[]);
    let dir = m.mountpoint();

    // Outside any agent run: the real bytes, through the page cache as usual.
    assert_eq!(m.read(".env").unwrap(), real);

    let out = sh(dir, Some("agent-1"), &[], "cat .env; printf '|%s' \"$(wc -c < .env)\"");
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    let (view, size) = shown.rsplit_once('|').unwrap();
    assert!(!view.contains(&secret), "the agent read the secret:\n{view}");
    assert!(view.contains("AWS_SECRET_ACCESS_KEY = \"[rwfs read guard: AWS_SECRET_ACCESS_KEY"), "{view}");
    assert!(view.contains("REGION=eu-west-1\n") && view.contains("DEBUG=false\n"), "the rest is intact:\n{view}");
    assert!(view.contains("DB_PASSWORD=*******\n"), "a weak password named as one is hidden too:\n{view}");
    assert_eq!(view.len(), real.len(), "the view has the file's length");
    assert_eq!(size.trim(), real.len().to_string(), "st_size agrees");
    // grep and a private mapping see the view too.
    let out = sh(dir, Some("agent-1"), &[], "grep -c AWS_SECRET .env");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    let out = sh(
        dir,
        Some("agent-1"),
        &[],
        "python3 -c \"import mmap,sys; f=open('.env','rb'); m=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ,flags=mmap.MAP_PRIVATE); sys.stdout.buffer.write(m[:])\"",
    );
    assert!(out.status.success(), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&secret), "a private mapping showed the secret");

    // Exempt: the environment flag, and a program the rule names.
    let out = sh(dir, Some("agent-1"), &[], "env RWFS_READ_REAL=1 cat .env");
    assert_eq!(out.stdout, real, "RWFS_READ_REAL=1 reads the real bytes");
    let bin = tempfile::tempdir().unwrap();
    std::fs::copy("/bin/cat", bin.path().join("exempt-reader")).unwrap();
    let out = sh(dir, Some("agent-1"), &[], &format!("{}/exempt-reader .env", bin.path().display()));
    assert_eq!(out.stdout, real, "an exempt program reads the real bytes");

    // Everyone else still reads the real bytes, after the agent's reads.
    assert_eq!(m.read(".env").unwrap(), real);
    assert_eq!(sh(dir, None, &[], "cat .env").stdout, real);
}

/// A real reader reading the file over and over while an agent run maps it: every mapping shows
/// the redacted view and every read the real bytes. A mapping is filled through the node's page
/// cache, shared by all its handles; when a real reader's handle was cached, its reads left real
/// pages there, and a third of the mappings showed the secret (6,487 of 18,121 in five seconds).
#[test]
fn an_agent_runs_mapping_never_shows_what_a_real_reader_reads_at_that_moment() {
    let (ws, secret, real) = guarded();
    let m = Mounted::with(ws, false, &[]);
    let dir = m.mountpoint();
    let reader = Command::new("python3")
        .args(["-c", "import os, sys, time\nend = time.time() + 3\nreal = bad = 0\nwhile time.time() < end:\n    fd = os.open('.env', os.O_RDONLY)\n    got = os.read(fd, 65536)\n    os.close(fd)\n    real += 1\n    bad += got != open(sys.argv[1], 'rb').read()\nprint(real, bad)"])
        .arg(m.ws.abs(".env"))
        .current_dir(dir)
        .env_remove("RWFS_SESSION")
        .env_remove("RWFS_READ_REAL")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mapper = format!(
        "python3 -c \"import mmap, os, time\nend = time.time() + 2\nn = seen = 0\nwhile time.time() < end:\n    fd = os.open('.env', os.O_RDONLY)\n    m = mmap.mmap(fd, 0, prot=mmap.PROT_READ, flags=mmap.MAP_PRIVATE)\n    seen += b'{secret}' in m[:]\n    n += 1\n    m.close()\n    os.close(fd)\nprint(n, seen)\""
    );
    let out = sh(dir, Some("agent-1"), &[], &mapper);
    assert!(out.status.success(), "{out:?}");
    let mapped = String::from_utf8_lossy(&out.stdout).to_string();
    let (maps, seen) = mapped.trim().split_once(' ').unwrap();
    assert!(maps.parse::<u32>().unwrap() > 100, "too few mappings to race: {mapped}");
    assert_eq!(seen, "0", "mappings that showed the secret, of {maps}");
    let read = reader.wait_with_output().unwrap();
    assert!(read.status.success(), "{read:?}");
    let read = String::from_utf8_lossy(&read.stdout).to_string();
    let (reads, wrong) = read.trim().split_once(' ').unwrap();
    assert!(reads.parse::<u32>().unwrap() > 100, "too few reads to race: {read}");
    assert_eq!(wrong, "0", "real reads that were not the real bytes, of {reads}");
    assert_eq!(m.read(".env").unwrap(), real);
}

#[test]
fn a_refuse_rule_refuses_and_says_why_and_a_redacted_file_is_never_written_back() {
    let (ws, secret, real) = guarded();
    // `rwfs run`: an agent run of its own, with the notice on its stderr.
    let script = "cat .env; cat deploy.pem; echo \"cat=$?\"; \
                  python3 -c \"open('.env','r+')\" 2>/dev/null; echo \"rw=$?\"; \
                  echo 'EXTRA=1' >> .env; echo \"append=$?\"";
    let out = rwfs()
        .arg("-w")
        .arg(ws.path())
        .args(["run", "--", "sh", "-c", script])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("AWS_SECRET_ACCESS_KEY = \"[rwfs read guard: ") && !stdout.contains(&secret), "{stdout}");
    assert!(stdout.contains("cat=1") && !stdout.contains("not really a key"), "{stdout}");
    assert!(stderr.contains("deploy.pem") && stderr.contains("read_guard rule"), "the reader is told why:\n{stderr}");
    assert!(stderr.contains("RWFS_READ_REAL=1"), "and what to do:\n{stderr}");
    assert!(stdout.contains("rw=1"), "a read-write open of a redacted file is refused: {stdout}");
    assert!(stdout.contains("append=0"), "an append reads nothing and works: {stdout}");
    // The file holds its secret and the appended line: no placeholder was written back.
    let now = ws.read(".env").unwrap();
    let mut expected = real.clone();
    expected.extend_from_slice(b"EXTRA=1\n");
    assert_eq!(now, expected, "{}", String::from_utf8_lossy(&now));
    assert!(String::from_utf8_lossy(&now).contains(&secret));
}

#[test]
fn mcp_read_tools_of_an_agent_run_read_the_redacted_view_too() {
    let (ws, secret, real) = guarded();
    let m = Mounted::with(ws, true, &[]);
    // An agent host (here a shell in agent run `agent-m`) launching `rwfs mcp`: relayed to the
    // daemon, which sees the host as the caller.
    let mut host = Command::new("sh");
    host.args(["-c", "\"$0\" mcp -w \"$1\"; true"])
        .arg(env!("CARGO_BIN_EXE_rwfs"))
        .arg(m.ws.path())
        .env("RWFS_SESSION", "agent-m")
        .env_remove("RWFS_READ_REAL");
    let mut mcp = crate::support::mcp::Stdio::spawn(host, "guarded-agent");
    let lines = mcp.call("rr_read_lines", serde_json::json!({"path": ".env"}));
    let text = lines.value.to_string();
    assert!(!lines.is_error && !text.contains(&secret), "{text}");
    assert!(text.contains("[rwfs read guard: AWS_SECRET_ACCESS_KEY"), "{text}");
    let stat = mcp.call("rr_stat", serde_json::json!({"path": ".env"}));
    assert_eq!(stat.value["size"], real.len(), "{:?}", stat.value);
    let refused = mcp.call("rr_read_bytes", serde_json::json!({"path": "deploy.pem"}));
    assert!(refused.is_error, "{:?}", refused.value);
    assert_eq!(refused.value["context"]["reason"], "read_guarded", "{:?}", refused.value);
    drop(mcp);
    assert_eq!(m.read(".env").unwrap(), real);
}

#[test]
fn a_file_with_more_findings_than_the_scanner_lists_is_hidden_whole_keeping_its_lines() {
    let ws = Ws::new();
    let engine = ws.open();
    let lines: Vec<String> = (0..250).map(|i| aws_secret_line(1000 + i)).collect();
    let content = lines.concat().into_bytes();
    let view = engine.redacted(".env", &content);
    assert_eq!(view.len(), content.len());
    let text = String::from_utf8(view).unwrap();
    assert!(lines.iter().all(|l| !text.contains(l.split('"').nth(1).unwrap())), "a secret past the scanner's cap");
    assert_eq!(text.lines().count(), 250, "the lines are kept");
    // Below the cap, each value is replaced and the rest kept.
    let few = lines[..3].concat().into_bytes();
    let text = String::from_utf8(engine.redacted(".env", &few)).unwrap();
    assert_eq!(
        text.matches("AWS_SECRET_ACCESS_KEY = \"[rwfs read guard: AWS_SECRET_ACCESS_KEY]\"").count(),
        3,
        "{text}"
    );
}
