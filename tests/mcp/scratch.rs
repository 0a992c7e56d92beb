//! `rw_scratch_put`, `rw_scratch_ref`, `rw_scratch_get`.

use std::io::Write as _;

use serde_json::{Value, json};

use rwfs::tools::Settings;

use crate::support::mcp::Mcp;
use crate::support::{Ws, sha};

const INDEX: &str = ".resilient_write/scratch/index.jsonl";

fn put(mcp: &Mcp, args: Value) -> Value {
    mcp.call("rw_scratch_put", args).ok()
}

fn bin(sha_hex: &str) -> String {
    format!(".resilient_write/scratch/{sha_hex}.bin")
}

/// The index lines as written (raw text).
fn index_lines(mcp: &Mcp) -> Vec<String> {
    String::from_utf8(mcp.ws.read(INDEX).unwrap()).unwrap().lines().map(String::from).collect()
}

#[track_caller]
fn refused(mcp: &Mcp, tool: &str, args: Value, error: &str, reason: &str) -> Value {
    let env = mcp.call(tool, args).err();
    assert_eq!(env["error"], error, "{env}");
    assert_eq!(env["context"]["reason"], reason, "{env}");
    assert_eq!(env["context"]["tool"], tool, "{env}");
    env
}

#[test]
fn put_keeps_a_private_blob_and_appends_an_index_row() {
    let mcp = Mcp::start();
    let secret = "sk-live-material that must not reach the tree";
    let out = put(&mcp, json!({"content": secret, "label": "api", "content_type": "text/plain", "notes": "from env"}));
    let hex = sha(secret.as_bytes()).to_hex();
    assert_eq!(out["sha256"], hex);
    assert_eq!(out["scratch_path"], bin(&hex));
    assert_eq!(out["bytes"], secret.len());
    assert_eq!(out["deduped"], false);
    assert!(out["journal_id"].as_str().unwrap().starts_with("wj_"));
    assert_eq!(mcp.ws.read(&bin(&hex)).unwrap(), secret.as_bytes());
    let lines = index_lines(&mcp);
    assert_eq!(lines.len(), 1);
    let row: Value = serde_json::from_str(&lines[0]).unwrap();
    let keys: Vec<&String> = row.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["bytes", "content_type", "created_at", "encoding", "label", "notes", "sha256"]);
    assert_eq!(lines[0], serde_json::to_string(&row).unwrap(), "compact, sorted keys");
    assert_eq!(row["label"], "api");
    assert_eq!(row["encoding"], "utf-8");
    assert!(row["created_at"].as_str().unwrap().ends_with('Z'));
    let rows = mcp.ws.rows();
    assert!(rows.iter().any(|r| r.path == bin(&hex) && r.journal_id == out["journal_id"]));
    // Unset metadata is kept as null.
    put(&mcp, json!({"content": "bare"}));
    let row: Value = serde_json::from_str(&index_lines(&mcp)[1]).unwrap();
    assert_eq!(row["label"], Value::Null);
    assert_eq!(row["notes"], Value::Null);
}

#[test]
fn scratch_files_are_private_reference_bug_6() {
    use std::os::unix::fs::PermissionsExt;
    let mcp = Mcp::start();
    let out = put(&mcp, json!({"content": "password=hunter2"}));
    let mode = |rel: &str| std::fs::metadata(mcp.ws.abs(rel)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(out["scratch_path"].as_str().unwrap()), 0o600);
    assert_eq!(mode(INDEX), 0o600);
}

#[test]
fn a_second_put_of_the_same_bytes_is_deduped_but_indexed() {
    let mcp = Mcp::start();
    let first = put(&mcp, json!({"content": "same", "label": "one"}));
    let second = put(&mcp, json!({"content": "same", "label": "two"}));
    assert_eq!(second["sha256"], first["sha256"]);
    assert_eq!(second["deduped"], true);
    assert_eq!(second["journal_id"], Value::Null);
    assert_eq!(index_lines(&mcp).len(), 2);
    let blob_rows = mcp.ws.rows().into_iter().filter(|r| r.path == bin(first["sha256"].as_str().unwrap())).count();
    assert_eq!(blob_rows, 1, "one write for two puts");
}

#[test]
fn base64_round_trips_binary_and_bad_input_is_refused() {
    let mcp = Mcp::start();
    let bytes = [0u8, 159, 146, 150, 255];
    let out =
        put(&mcp, json!({"content": "AJ+Slv8=", "encoding": "base64", "content_type": "application/octet-stream"}));
    assert_eq!(out["sha256"], sha(&bytes).to_hex());
    assert_eq!(out["bytes"], 5);
    assert_eq!(mcp.ws.read(out["scratch_path"].as_str().unwrap()).unwrap(), bytes);
    let got = mcp.call("rw_scratch_get", json!({"sha256": out["sha256"], "encoding": "base64"})).ok();
    assert_eq!(got["content"], "AJ+Slv8=");
    assert_eq!(got["encoding"], "base64");
    assert_eq!(got["content_type"], "application/octet-stream");

    let env = refused(
        &mcp,
        "rw_scratch_put",
        json!({"content": "not base64!", "encoding": "base64"}),
        "policy_violation",
        "bad_base64",
    );
    assert_eq!(env["reason_hint"], "encoding");
    let env = refused(
        &mcp,
        "rw_scratch_put",
        json!({"content": "x", "encoding": "latin-1"}),
        "policy_violation",
        "unsupported_encoding",
    );
    assert_eq!(env["reason_hint"], "encoding");
    assert_eq!(env["context"]["encoding"], "latin-1");
    assert_eq!(env["context"]["valid"], json!(["utf-8", "base64"]));
}

#[test]
fn put_warns_when_gitignore_does_not_cover_the_state_dir() {
    let mcp = Mcp::start();
    let warnings = |mcp: &Mcp| put(mcp, json!({"content": "w"}))["warnings"].clone();
    // The state directory's own .gitignore (`*`, written when rwfs first opened it) covers it.
    assert_eq!(warnings(&mcp), json!([]), "the state directory ignores itself");
    mcp.ws.put(
        ".resilient_write/.gitignore",
        b"# kept by hand
!*
",
    );
    let w = warnings(&mcp);
    assert_eq!(w.as_array().unwrap().len(), 1, "no .gitignore covers it: {w}");
    assert_eq!(w[0]["reason"], "state_dir_not_gitignored");
    assert!(w[0]["hint"].as_str().unwrap().contains(".gitignore"));
    mcp.ws.put(".gitignore", b"target/\n# .resilient_write/\n");
    assert_eq!(warnings(&mcp).as_array().unwrap().len(), 1, "a comment does not count");
    for form in
        [".resilient_write/", ".resilient_write", "/.resilient_write/", "**/.resilient_write", "  /.resilient_write  "]
    {
        mcp.ws.put(".gitignore", format!("target/\n{form}\n").as_bytes());
        assert_eq!(warnings(&mcp), json!([]), "{form:?}");
    }
}

#[test]
fn ref_finds_the_latest_row_by_sha_or_label() {
    let mcp = Mcp::start();
    let a = put(&mcp, json!({"content": "alpha", "label": "key"}));
    let b = put(&mcp, json!({"content": "beta", "label": "key", "notes": "rotated"}));
    let out = mcp.call("rw_scratch_ref", json!({"label": "key"})).ok();
    assert_eq!(out["alias_count"], 2);
    assert_eq!(out["entry"]["sha256"], b["sha256"]);
    assert_eq!(out["entry"]["notes"], "rotated");
    assert_eq!(out["scratch_path"], b["scratch_path"]);
    assert_eq!(out["bin_exists"], true);
    let out = mcp.call("rw_scratch_ref", json!({"sha256": a["sha256"]})).ok();
    assert_eq!(out["alias_count"], 1);
    assert_eq!(out["entry"]["label"], "key");
    assert!(out.to_string().find("alpha").is_none(), "ref never returns content");
    // Both filters must match (as the reference's code does).
    refused(
        &mcp,
        "rw_scratch_ref",
        json!({"sha256": a["sha256"], "label": "other"}),
        "stale_precondition",
        "not_found",
    );
    let env = refused(&mcp, "rw_scratch_ref", json!({"label": "nobody"}), "stale_precondition", "not_found");
    assert_eq!(env["context"]["label"], "nobody");
    let env = refused(&mcp, "rw_scratch_ref", json!({}), "policy_violation", "must_provide_sha256_or_label");
    assert_eq!(env["reason_hint"], "encoding");
    for bad in ["ABC", &"A".repeat(64), &"g".repeat(64), &"a".repeat(63)] {
        refused(&mcp, "rw_scratch_ref", json!({"sha256": bad}), "policy_violation", "not_a_lowercase_sha256_hex");
    }
    // The blob removed behind rwfs's back.
    std::fs::remove_file(mcp.ws.abs(a["scratch_path"].as_str().unwrap())).unwrap();
    let out = mcp.call("rw_scratch_ref", json!({"sha256": a["sha256"]})).ok();
    assert_eq!(out["bin_exists"], false);
}

#[test]
fn get_returns_the_content_with_its_latest_metadata() {
    let mcp = Mcp::start();
    let out = put(&mcp, json!({"content": "token: tøp sécret", "label": "first", "content_type": "text/plain"}));
    put(&mcp, json!({"content": "token: tøp sécret", "label": "second"}));
    let got = mcp.call("rw_scratch_get", json!({"sha256": out["sha256"]})).ok();
    assert_eq!(got["sha256"], out["sha256"]);
    assert_eq!(got["content"], "token: tøp sécret");
    assert_eq!(got["encoding"], "utf-8");
    assert_eq!(got["bytes"], "token: tøp sécret".len());
    assert_eq!(got["label"], "second");
    assert_eq!(got["content_type"], Value::Null, "metadata of the latest row");
}

#[test]
fn get_of_binary_as_utf8_hints_base64() {
    let mcp = Mcp::start();
    let out = put(&mcp, json!({"content": "/wA=", "encoding": "base64"}));
    let env = refused(&mcp, "rw_scratch_get", json!({"sha256": out["sha256"]}), "policy_violation", "not_valid_utf8");
    assert_eq!(env["reason_hint"], "encoding");
    assert_eq!(env["suggested_action"], "retry_later");
    assert_eq!(env["context"]["hint"], "retry_with_encoding_base64");
    let got = mcp.call("rw_scratch_get", json!({"sha256": out["sha256"], "encoding": "base64"})).ok();
    assert_eq!(got["content"], "/wA=");
}

#[test]
fn get_refuses_unknown_hashes_bad_shapes_and_encodings() {
    let mcp = Mcp::start();
    let missing = sha(b"never put").to_hex();
    let env = refused(&mcp, "rw_scratch_get", json!({"sha256": missing}), "stale_precondition", "not_found");
    assert_eq!(env["context"]["sha256"], missing);
    refused(
        &mcp,
        "rw_scratch_get",
        json!({"sha256": "../../etc/passwd"}),
        "policy_violation",
        "not_a_lowercase_sha256_hex",
    );
    let env = refused(
        &mcp,
        "rw_scratch_get",
        json!({"sha256": missing, "encoding": "hex"}),
        "policy_violation",
        "unsupported_encoding",
    );
    assert_eq!(env["context"]["valid"], json!(["utf-8", "base64"]));
}

#[test]
fn scratch_get_is_refused_when_the_scratchpad_is_write_only() {
    let mcp = Mcp::start_with(Ws::new(), Settings { scratch_get_disabled: true });
    let out = put(&mcp, json!({"content": "kept, never read back"}));
    mcp.call("rw_scratch_ref", json!({"sha256": out["sha256"]})).ok();
    let env =
        refused(&mcp, "rw_scratch_get", json!({"sha256": out["sha256"]}), "policy_violation", "scratch_get_disabled");
    assert_eq!(env["reason_hint"], "permission");
    assert_eq!(env["suggested_action"], "abort");
    assert_eq!(env["context"]["env"], "RW_SCRATCH_DISABLE_GET");
    assert!(!env.to_string().contains("never read back"));
    // Checked before anything else, as the reference.
    refused(&mcp, "rw_scratch_get", json!({"sha256": "bad"}), "policy_violation", "scratch_get_disabled");
}

#[test]
fn a_tampered_blob_is_never_returned_and_the_next_put_heals_it() {
    let mcp = Mcp::start();
    let out = put(&mcp, json!({"content": "original"}));
    let hex = out["sha256"].as_str().unwrap().to_string();
    mcp.ws.put(&bin(&hex), b"tampered");
    let env = refused(&mcp, "rw_scratch_get", json!({"sha256": hex}), "write_corruption", "hash_drift_on_read");
    assert_eq!(env["suggested_action"], "abort");
    assert_eq!(env["context"]["actual_sha256"], sha(b"tampered").to_hex());
    assert!(!env.to_string().contains("tampered\""));
    let again = put(&mcp, json!({"content": "original"}));
    assert_eq!(again["deduped"], false, "the drifted blob was rewritten");
    assert_eq!(mcp.call("rw_scratch_get", json!({"sha256": hex})).ok()["content"], "original");
}

#[test]
fn a_torn_index_line_is_skipped_and_the_next_put_works_reference_bug_3() {
    let mcp = Mcp::start();
    let a = put(&mcp, json!({"content": "alpha", "label": "a"}));
    // A crash in the middle of an index append.
    let mut index = std::fs::OpenOptions::new().append(true).open(mcp.ws.abs(INDEX)).unwrap();
    index.write_all(br#"{"bytes":4,"content_type":null,"created_at":"2026-"#).unwrap();
    drop(index);
    assert_eq!(mcp.call("rw_scratch_ref", json!({"label": "a"})).ok()["entry"]["sha256"], a["sha256"]);
    assert_eq!(mcp.call("rw_scratch_get", json!({"sha256": a["sha256"]})).ok()["label"], "a");
    let b = put(&mcp, json!({"content": "beta", "label": "b"}));
    let out = mcp.call("rw_scratch_ref", json!({"label": "b"})).ok();
    assert_eq!(out["entry"]["sha256"], b["sha256"]);
    assert_eq!(out["alias_count"], 1);
    let lines = index_lines(&mcp);
    assert_eq!(lines.len(), 3, "the torn line was closed, not joined to the next: {lines:?}");
    assert!(serde_json::from_str::<Value>(&lines[2]).is_ok());
}

#[test]
fn every_chunk_and_scratch_tool_is_listed() {
    let mcp = Mcp::start();
    let names = mcp.tool_names();
    for tool in [
        "rw_chunk_append",
        "rw_chunk_compose",
        "rw_chunk_preview",
        "rw_chunk_reset",
        "rw_chunk_status",
        "rw_chunk_write",
        "rw_scratch_get",
        "rw_scratch_put",
        "rw_scratch_ref",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} missing from {names:?}");
    }
    let tools = mcp.tools_json();
    let schema = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap()["inputSchema"].to_string();
    assert!(schema("rw_scratch_get").contains(r#"["utf-8","base64"]"#), "{}", schema("rw_scratch_get"));
    assert!(schema("rw_chunk_write").contains(r#""maximum":999"#), "{}", schema("rw_chunk_write"));
    // The dotted reference names are aliases.
    mcp.call("rw.scratch_put", json!({"content": "dotted"})).ok();
    mcp.call("rw.chunk_status", json!({"session": "s"})).ok();
}
