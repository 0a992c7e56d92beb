//! `approve` (policy `protect:`): a new version waits for a person. Through a real mount and the
//! CLI, mounted and not: the writer's refusal names the approval; `rwfs approvals` lists it;
//! `rwfs approve` installs it as a journaled change with who approved (and the content gate
//! still judges it); `rwfs deny` keeps it in the store; a later write supersedes a pending one;
//! a parked version survives the daemon's death; a file changed since needs `--force`. Over
//! MCP: the envelope says to wait for the user, and `rw_approval_status` follows the decision.

use std::process::{Command, Output};

use serde_json::{Value, json};

use rwfs::journal::Op;

use crate::support::mcp::Mcp;
use crate::support::mount::{Mounted, rwfs};
use crate::support::*;

const POLICY: &str = r#"
stderr_notice: true
protect:
  - name: docs
    paths: ["docs/**"]
    write: approve
    create: approve
    delete: approve
"#;

fn prepared() -> Ws {
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", POLICY.as_bytes());
    ws.put("docs/a.md", b"# A\n");
    ws
}

/// `rwfs ARGS -w WS`.
fn cli(ws: &Ws, args: &[&str]) -> Output {
    rwfs().args(args).arg("-w").arg(ws.path()).output().expect("run rwfs")
}

/// `rwfs approvals --json [--all]`.
fn approvals(ws: &Ws, all: bool) -> Vec<Value> {
    let mut args = vec!["approvals", "--json"];
    if all {
        args.push("--all");
    }
    let out = cli(ws, &args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).unwrap().as_array().unwrap().clone()
}

/// The one pending approval: its id, after checking its file and content.
#[track_caller]
fn pending(ws: &Ws, path: &str, content: &[u8]) -> String {
    let list = approvals(ws, false);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["path"], path);
    assert_eq!(list[0]["state"], "pending");
    assert_eq!(list[0]["rule"], "docs");
    assert_eq!(list[0]["sha256"], sha(content).to_hex());
    assert_eq!(ws.object(&sha(content)).unwrap(), content, "the parked version is in the store");
    list[0]["id"].as_str().unwrap().to_string()
}

#[track_caller]
fn failed(out: &Output, code: &str) -> String {
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let stdout: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(stdout["context"]["reason"], code, "{stdout}");
    stdout["context"]["message"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_write_through_the_mount_waits_for_a_person_who_approves_it_after_a_daemon_kill() {
    let mut m = Mounted::with(prepared(), false, &[]);
    // The writer is refused with the policy's errno, told the approval's id and to ask the user.
    let out = Command::new("sh")
        .args(["-c", "printf '# B\\n' | cat > docs/a.md"])
        .current_dir(m.mountpoint())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(m.backing("docs/a.md").unwrap(), b"# A\n", "nothing installed");
    let id = pending(&m.ws, "docs/a.md", b"# B\n");
    assert!(stderr.contains(&format!("rwfs approve {id}")) && stderr.contains("ask the user"), "{stderr}");
    let envelope: Value =
        serde_json::from_slice(&m.ws.read(&format!(".resilient_write/rejections/{id}.json")).unwrap()).unwrap();
    assert_eq!(envelope["suggested_action"], "ask_user");
    assert_eq!(envelope["context"]["reason"], "approval_required");
    assert_eq!(envelope["context"]["approval"]["id"], id.as_str());
    assert_eq!(envelope["context"]["approval"]["state"], "pending");

    // A later write supersedes it: the newest attempt is the one a person decides on.
    assert!(write_closed(&m.path("docs/a.md"), b"# C\n").is_err());
    let newer = pending(&m.ws, "docs/a.md", b"# C\n");
    let all = approvals(&m.ws, true);
    assert_eq!(all.len(), 2);
    assert_eq!((all[0]["id"].as_str(), all[0]["state"].as_str()), (Some(id.as_str()), Some("superseded")));
    let out = cli(&m.ws, &["approve", &id, "--json"]);
    assert!(failed(&out, "approval_not_pending").contains("superseded"));

    // The state is the journal's: it survives the daemon's death.
    m.kill();
    m.remount();
    assert_eq!(pending(&m.ws, "docs/a.md", b"# C\n"), newer);
    let out = cli(&m.ws, &["approve", &newer, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let decided: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decided["approval"]["state"], "approved");
    assert_eq!(m.read("docs/a.md").unwrap(), b"# C\n", "installed, seen through the mount");
    assert_eq!(m.backing("docs/a.md").unwrap(), b"# C\n");
    // Journaled: the install as a normal change, then who approved it.
    let rows = m.ws.rows();
    let install = rows.iter().rev().find(|r| r.path == "docs/a.md" && r.op() == Op::Restore).unwrap();
    assert_eq!(install.sha256, Some(sha(b"# C\n")));
    assert_eq!(install.prev_sha256, Some(sha(b"# A\n")));
    let decision = rows.last().unwrap();
    assert_eq!((decision.op(), decision.mode.as_str()), (Op::Approval, "approve"));
    let uid = nix::unistd::getuid().as_raw();
    assert_eq!(decision.uid, Some(uid));
    assert!(decision.reason.as_deref().unwrap().contains(&format!("approval={newer} by=")), "{decision:?}");
    assert!(decision.reason.as_deref().unwrap().contains(&format!("(uid {uid})")), "{decision:?}");
    assert!(approvals(&m.ws, false).is_empty());
    assert_eq!(approvals(&m.ws, true)[1]["state"], "approved");
    let out = cli(&m.ws, &["approve", &newer, "--json"]);
    failed(&out, "approval_not_pending");
    let verify = cli(&m.ws, &["verify"]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
}

#[test]
fn cli_writes_are_parked_and_decided_without_a_mount_and_the_gate_still_judges_an_approval() {
    let ws = prepared();
    // A new file through the CLI (no mount): parked, the refusal's envelope on stdout.
    let mut write = rwfs();
    write.args(["write", "docs/new.md", "--json", "-w"]).arg(ws.path()).stdin(std::process::Stdio::piped());
    let out = pipe(write, b"new\n");
    assert!(failed(&out, "approval_required").contains("rwfs approve rj_"));
    assert_eq!(ws.read("docs/new.md"), None);
    let id = pending(&ws, "docs/new.md", b"new\n");
    let out = cli(&ws, &["deny", &id, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(ws.read("docs/new.md"), None, "denied: nothing installed");
    assert_eq!(ws.object(&sha(b"new\n")).unwrap(), b"new\n", "denied: still in the store");
    let all = approvals(&ws, true);
    assert_eq!((all[0]["state"].as_str(), all[0]["decided_by"].is_string()), (Some("denied"), true));
    assert_eq!(ws.rows().last().unwrap().mode, "deny");

    // A parked version holding a credential is refused by the content gate when approved.
    let secret = aws_secret_line(7);
    let mut write = rwfs();
    write.args(["write", "docs/a.md", "--json", "-w"]).arg(ws.path()).stdin(std::process::Stdio::piped());
    failed(&pipe(write, secret.as_bytes()), "approval_required");
    let id = pending(&ws, "docs/a.md", secret.as_bytes());
    let out = cli(&ws, &["approve", &id, "--json"]);
    failed(&out, "content_blocked");
    assert_eq!(ws.read("docs/a.md").unwrap(), b"# A\n");
    assert_eq!(pending(&ws, "docs/a.md", secret.as_bytes()), id, "still pending: a person may deny it");

    // A file changed since it was parked (no journaled change: edited behind rwfs's back).
    cli(&ws, &["deny", &id]);
    let mut write = rwfs();
    write.args(["write", "docs/a.md", "--json", "-w"]).arg(ws.path()).stdin(std::process::Stdio::piped());
    failed(&pipe(write, b"# D\n"), "approval_required");
    let id = pending(&ws, "docs/a.md", b"# D\n");
    std::fs::write(ws.abs("docs/a.md"), b"# edited by hand\n").unwrap();
    let message = failed(&cli(&ws, &["approve", &id, "--json"]), "approval_base_changed");
    assert!(message.contains(&format!("rwfs approve {id} --force")), "{message}");
    assert_eq!(ws.read("docs/a.md").unwrap(), b"# edited by hand\n");
    run_ok(rwfs().args(["approve", &id, "--force", "-w"]).arg(ws.path()));
    assert_eq!(ws.read("docs/a.md").unwrap(), b"# D\n");

    // Not a new version: a delete cannot wait for approval, and says so.
    let out = cli(&ws, &["rm", "docs/a.md", "--json"]);
    assert!(failed(&out, "approval_required").contains("only a new version of a file can wait for approval"));
    assert!(approvals(&ws, false).is_empty());
    let out = cli(&ws, &["approve", "rj_nothing_1", "--json"]);
    failed(&out, "no_such_approval");
}

/// Run `cmd` with `input` on its stdin.
fn pipe(mut cmd: Command, input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn an_mcp_write_is_told_to_wait_for_the_user_and_rw_approval_status_follows_the_decision() {
    let mcp = Mcp::start_with(prepared(), Default::default());
    let env = mcp.call("rw_safe_write", json!({"path": "docs/a.md", "content": "# M\n", "mode": "overwrite"})).err();
    assert_eq!((env["error"].as_str(), env["suggested_action"].as_str()), (Some("blocked"), Some("ask_user")));
    assert_eq!(env["retriable"], false);
    assert_eq!(env["context"]["reason"], "approval_required");
    assert_eq!(env["context"]["tool"], "rw_safe_write");
    let message = env["context"]["message"].as_str().unwrap();
    assert!(message.contains("ask the user") && message.contains("do not retry"), "{message}");
    let id = env["context"]["approval"]["id"].as_str().unwrap().to_string();
    assert_eq!(env["context"]["approval"]["status_tool"], "rw_approval_status");

    let status = mcp.call("rw_approval_status", json!({"id": id})).ok();
    assert_eq!((status["state"].as_str(), status["path"].as_str()), (Some("pending"), Some("docs/a.md")));
    assert!(status["next"].as_str().unwrap().contains("ask the user"));
    assert_eq!(mcp.ws.read("docs/a.md").unwrap(), b"# A\n");
    let decided = mcp.engine.approve(&id, false, &actor()).unwrap();
    assert_eq!(decided.approval.state, rwfs::history::ApprovalState::Approved);
    assert_eq!(mcp.ws.read("docs/a.md").unwrap(), b"# M\n");
    assert_eq!(mcp.call("rw_approval_status", json!({"id": id})).ok()["state"], "approved");

    // A second attempt parked and then superseded by a third.
    let first = mcp.call("rw_safe_write", json!({"path": "docs/a.md", "content": "# N\n", "mode": "overwrite"})).err();
    let first = first["context"]["approval"]["id"].as_str().unwrap().to_string();
    mcp.call("rw_safe_write", json!({"path": "docs/a.md", "content": "# O\n", "mode": "overwrite"})).err();
    assert_eq!(mcp.call("rw_approval_status", json!({"id": first})).ok()["state"], "superseded");
    let env = mcp.call("rw_approval_status", json!({"id": "rj_none_1"})).err();
    assert_eq!(env["context"]["reason"], "no_such_approval");
}
