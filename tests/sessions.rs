//! Issue 24 item 4: one agent run is one session, whichever way it writes — its own file tool
//! and its shell commands through the mount, and the MCP server it launched as a child — so
//! `rwfs rewind --session`, `rw_rewind {session: "self"}` and retry budgets cover exactly one
//! run; stateless MCP clients get a session per server process or connection, never one per
//! client name.
//!
//! A harness here is a shell script named `claude` (its process name is the script's), an agent
//! host by the default `session_hosts`: it writes itself, runs commands each in a new POSIX
//! session (as Claude Code runs every Bash call), and runs `rwfs mcp` as its child on its
//! stdio.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::mcp::Stdio;
use crate::support::mount::{Mounted, rwfs};
use crate::support::{Ws, aws_secret_line, five_refusals_counted_down, refusals, run_ok};

/// A directory holding the harness script `claude`.
struct Harness {
    dir: tempfile::TempDir,
}

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::Builder::new().prefix("rwfs-harness-").tempdir().unwrap();
        // Runs its arguments as a child (never `exec`: the harness stays the parent).
        let script = "#!/bin/bash\n\"$@\"\nstatus=$?\nexit $status\n";
        let path = dir.path().join("claude");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        Harness { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("claude")
    }

    /// `claude bash -c SCRIPT`: the harness runs a command; its output.
    fn run(&self, script: &str, env: &[(&str, &Path)]) -> std::process::Output {
        let mut command = Command::new(self.path());
        command.args(["bash", "-c", script]).envs(env.iter().map(|(k, v)| (*k, *v)));
        command.output().unwrap()
    }

    /// A harness that first runs `script` (its own writes and its shell commands), then `rwfs
    /// mcp -w WS` as its child on its stdio, and the MCP client connected to it.
    fn with_mcp(&self, ws: &Path, script: &str, env: &[(&str, &Path)], client: &str) -> Stdio {
        let mut command = Command::new(self.path());
        let both = format!("{script} >&2\nexec \"$RWFS\" mcp -w \"$WS\"");
        command.args(["bash", "-c", &both]).env("RWFS", env!("CARGO_BIN_EXE_rwfs")).env("WS", ws);
        command.envs(env.iter().map(|(k, v)| (*k, *v)));
        Stdio::spawn(command, client)
    }
}

fn sessions_of(ws: &Ws, paths: &[&str]) -> Vec<Option<String>> {
    let rows = ws.rows();
    paths.iter().map(|p| rows.iter().rfind(|r| r.path == *p).and_then(|r| r.session.clone())).collect()
}

fn plan_paths(plan: &Value) -> Vec<String> {
    let mut paths: Vec<String> =
        plan["steps"].as_array().unwrap().iter().map(|s| s["path"].as_str().unwrap().to_string()).collect();
    paths.sort();
    paths
}

#[test]
fn one_agent_run_is_one_session_through_its_write_tool_its_shell_and_its_mcp_server() {
    let m = Mounted::new();
    let harness = Harness::new();
    let mnt = m.mountpoint().to_path_buf();
    // Its own write (the harness process itself), a shell command in a POSIX session of its
    // own (every Bash call of Claude Code is one), then its MCP server.
    let writes = r#"echo tool > "$MNT/tool.txt" && setsid bash -c 'echo shell > "$MNT/shell.txt"'"#;
    let mut run = harness.with_mcp(m.ws.path(), writes, &[("MNT", &mnt)], "claude-code");
    run.call_stateless("claude-code", "rw_safe_write", json!({"path": "mcp.txt", "content": "mcp\n"})).ok();
    let session = format!("claude-{}", run.pid());
    let own = sessions_of(&m.ws, &["tool.txt", "shell.txt", "mcp.txt"]);
    assert_eq!(own, vec![Some(session.clone()); 3], "one session, whichever way the run wrote");
    // rw_rewind {session: "self"} plans exactly this run's files.
    let plan = run.call("rw_rewind", json!({"session": "self"})).ok();
    assert_eq!(plan_paths(&plan), ["mcp.txt", "shell.txt", "tool.txt"], "{plan}");
    assert!(run.finish().success());

    // A second run of the same agent on the same workspace: a session of its own.
    let mut second = harness.with_mcp(m.ws.path(), "true", &[], "claude-code");
    second.call_stateless("claude-code", "rw_safe_write", json!({"path": "second.txt", "content": "2\n"})).ok();
    let plan = second.call("rw_rewind", json!({"session": "self"})).ok();
    assert_eq!(plan_paths(&plan), ["second.txt"], "only this run's files: {plan}");
    assert!(second.finish().success());

    // rwfs rewind --session of the first run takes back all three, and nothing else.
    let out = run_ok(rwfs().args(["rewind", "--session", &session, "--workspace"]).arg(m.ws.path()));
    assert!(out.status.success());
    for gone in ["tool.txt", "shell.txt", "mcp.txt"] {
        assert!(m.read(gone).is_err(), "{gone} is rewound");
    }
    assert_eq!(m.read("second.txt").unwrap(), b"2\n");
}

#[test]
fn stateless_clients_get_a_session_per_server_process_never_one_per_client_name() {
    let ws = Ws::new();
    // Two runs of one client (same name, the 2026-07-28 protocol), launched by no agent: the
    // first owns the engine, the second relays to it.
    let mut first = Stdio::start(ws.path(), "claude-code");
    let mut second = Stdio::start(ws.path(), "claude-code");
    first.call_stateless("claude-code", "rw_safe_write", json!({"path": "one.txt", "content": "1\n"})).ok();
    first.call_stateless("claude-code", "rw_safe_write", json!({"path": "one-b.txt", "content": "1\n"})).ok();
    second.call_stateless("claude-code", "rw_safe_write", json!({"path": "two.txt", "content": "2\n"})).ok();
    let plan = second.call_stateless("claude-code", "rw_rewind", json!({"session": "self"})).ok();
    assert_eq!(plan_paths(&plan), ["two.txt"], "{plan}");
    assert!(second.finish().success());
    assert!(first.finish().success());
    let sessions = sessions_of(&ws, &["one.txt", "one-b.txt", "two.txt"]);
    assert_eq!(sessions[0], sessions[1], "one server process, one session: {sessions:?}");
    assert_ne!(sessions[0], sessions[2], "two processes, two sessions: {sessions:?}");
    assert!(sessions.iter().flatten().all(|s| !s.contains("claude-code")), "never the client's name: {sessions:?}");
}

#[test]
fn retries_count_down_across_one_harness_s_shell_calls_and_its_mcp_calls_and_a_new_run_starts_fresh() {
    let m = Mounted::new();
    let harness = Harness::new();
    let mnt = m.mountpoint().to_path_buf();
    let secret = format!("import os\n{}\n", aws_secret_line(90));
    let secret_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret_file.path(), &secret).unwrap();
    // Three attempts, each a shell command in a POSIX session of its own.
    let attempt = r#"for i in 1 2 3; do setsid bash -c 'cat "$SECRET" > "$MNT/config.py"'; done; true"#;
    let env = [("MNT", mnt.as_path()), ("SECRET", secret_file.path())];
    let mut run = harness.with_mcp(m.ws.path(), attempt, &env, "claude-code");
    // A fourth through MCP, then a fifth: the same agent, the same file, the same content.
    let args = json!({"path": "config.py", "content": secret, "mode": "overwrite"});
    let fourth = run.call_stateless("claude-code", "rw_safe_write", args.clone()).err();
    let fifth = run.call_stateless("claude-code", "rw_safe_write", args.clone()).err();
    assert!(run.finish().success());
    assert_eq!(
        refusals(&m.ws, "config.py"),
        five_refusals_counted_down(),
        "one budget counted down across the run's shell calls and MCP calls"
    );
    assert_eq!(fourth["retry_budget"], 0);
    assert_eq!(fifth["context"]["reason"], "retry_budget_exhausted");

    // Another run of the agent starts with the whole budget.
    let out = harness.run(r#"cat "$SECRET" > "$MNT/config.py"; echo $?"#, &env);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    let latest: Value = serde_json::from_slice(&m.read(".resilient_write/rejections/latest.json").unwrap()).unwrap();
    assert_eq!(latest["retry_budget"], 3, "{latest}");
}
