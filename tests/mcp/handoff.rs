//! `rw_handoff_write`, `rw_handoff_read`: the reference's HANDOFF.md, drift warnings,
//! `last_good_state` from the journal, archives.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::support::mcp::Mcp;
use crate::support::sha;

/// A complete envelope (without `last_good_state`) plus `extra`.
fn envelope(extra: Value) -> Value {
    let mut env = json!({
        "task_id": "t-1", "status": "partial", "agent": "claude", "summary": "halfway", "next_steps": ["finish"],
    });
    env.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    env
}

fn put(mcp: &Mcp, path: &str, content: &str) -> Value {
    mcp.call("rw_safe_write", json!({"path": path, "content": content, "mode": "overwrite"})).ok()
}

fn paths(state: &Value) -> Vec<&str> {
    state.as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect()
}

fn archives(mcp: &Mcp) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(mcp.ws.abs(".resilient_write/handoffs")) {
        Ok(dir) => dir.map(|e| e.unwrap().file_name().into_string().unwrap()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[test]
fn a_handoff_round_trips_in_the_reference_format_and_is_journaled() {
    let mcp = Mcp::start();
    let a = put(&mcp, "src/a.rs", "fn a() {}\n");
    let env = envelope(json!({
        "last_good_state": [{"path": "src/a.rs", "sha256": a["sha256"], "bytes": 10}],
        "blockers": ["none"], "custom_key": {"kept": true},
    }));
    let out = mcp.call("rw_handoff_write", json!({"envelope": env, "body": "# Notes\n\nDone half.\n\n\n"})).ok();
    assert_eq!(out["handoff_path"], "HANDOFF.md");
    assert_eq!(out["drift_warnings"], json!([]));
    assert_eq!(out["mode_applied"], "create");
    assert!(out["journal_id"].as_str().unwrap().starts_with("wj_"));
    assert!(out.get("checkpoint_refs").is_none(), "no checkpoints, no key: {out}");
    let text = String::from_utf8(mcp.ws.read("HANDOFF.md").unwrap()).unwrap();
    assert!(text.starts_with("---\n"), "{text}");
    assert!(text.ends_with("\n---\n\n# Notes\n\nDone half.\n"), "{text}");
    assert_eq!(out["sha256"], sha(text.as_bytes()).to_hex());
    assert_eq!(out["bytes"], text.len());
    assert_eq!(mcp.ws.rows().last().unwrap().path, "HANDOFF.md");

    let read = mcp.call("rw.handoff_read", json!({})).ok();
    assert_eq!(read["handoff_path"], "HANDOFF.md");
    assert_eq!(read["body"], "# Notes\n\nDone half.\n");
    assert_eq!(read["drift_warnings"], json!([]));
    let back = &read["envelope"];
    for key in ["task_id", "status", "agent", "summary", "next_steps", "last_good_state", "blockers", "custom_key"] {
        assert_eq!(back[key], env[key], "{key}");
    }
    // A second write replaces the file.
    let again = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"status": "complete"}))})).ok();
    assert_eq!(again["mode_applied"], "overwrite");
    assert_eq!(mcp.call("rw_handoff_read", json!({})).ok()["envelope"]["status"], "complete");
}

#[test]
fn updated_at_is_filled_when_absent_and_kept_when_given() {
    let mcp = Mcp::start();
    mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({}))})).ok();
    let read = mcp.call("rw_handoff_read", json!({})).ok();
    let filled = read["envelope"]["updated_at"].as_str().unwrap();
    assert!(humantime::parse_rfc3339(filled).is_ok(), "{filled}");
    assert_eq!(filled.len(), "2026-04-16T10:00:00Z".len());
    mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"updated_at": "2020-01-01T00:00:00Z"}))})).ok();
    let read = mcp.call("rw_handoff_read", json!({})).ok();
    assert_eq!(read["envelope"]["updated_at"], "2020-01-01T00:00:00Z");
    // Written as a quoted string: a YAML 1.1 reader (the reference's PyYAML) keeps it a string.
    let text = String::from_utf8(mcp.ws.read("HANDOFF.md").unwrap()).unwrap();
    assert!(
        text.contains("updated_at: \"2020-01-01T00:00:00Z\"\n")
            || text.contains("updated_at: '2020-01-01T00:00:00Z'\n"),
        "{text}"
    );
}

#[test]
fn an_invalid_envelope_is_refused_with_the_references_reasons() {
    let mcp = Mcp::start();
    let refused = |env: Value| {
        let e = mcp.call("rw_handoff_write", json!({"envelope": env})).err();
        assert_eq!(e["error"], "policy_violation", "{e}");
        assert_eq!(e["reason_hint"], "encoding", "{e}");
        assert_eq!(e["context"]["tool"], "rw_handoff_write");
        e
    };
    let e = refused(json!({"task_id": "t", "status": "partial"}));
    assert_eq!(e["context"]["reason"], "missing_fields");
    assert_eq!(e["context"]["missing_fields"], json!(["agent", "summary", "next_steps"]));
    let e = refused(envelope(json!({"status": "done"})));
    assert_eq!(e["context"]["reason"], "invalid_status");
    assert_eq!(e["context"]["status"], "done");
    assert_eq!(e["context"]["valid"], json!(["complete", "partial", "blocked", "handed_off"]));
    let e = refused(envelope(json!({"next_steps": "finish"})));
    assert_eq!(
        (e["context"]["reason"].as_str(), e["context"]["field"].as_str()),
        (Some("must_be_list"), Some("next_steps"))
    );
    let e = refused(envelope(json!({"last_good_state": {"path": "a"}})));
    assert_eq!(
        (e["context"]["reason"].as_str(), e["context"]["field"].as_str()),
        (Some("must_be_list"), Some("last_good_state"))
    );
    let e = refused(envelope(json!({"last_good_state": [{"path": "a", "sha256": "x"}, {"path": "b"}]})));
    assert_eq!(e["context"]["reason"], "each_entry_needs_path_and_sha256");
    assert_eq!(e["context"]["index"], 1);
    assert!(mcp.ws.read("HANDOFF.md").is_none());
    // The envelope must be an object (schema): an argument envelope.
    let e = mcp.call("rw_handoff_write", json!({"envelope": ["not", "an", "object"]})).err();
    assert_eq!(e["context"]["reason"], "invalid_arguments");
}

#[test]
fn last_good_state_is_filled_from_the_journal_when_omitted() {
    let mcp = Mcp::start();
    put(&mcp, "a.txt", "one");
    put(&mcp, "b.txt", "bee");
    let a = put(&mcp, "a.txt", "two");
    put(&mcp, "gone.txt", "soon deleted");
    std::fs::remove_file(mcp.ws.abs("gone.txt")).unwrap();
    mcp.call("rw_checkpoint", json!({"name": "cp", "data": 1})).ok();
    let out = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({}))})).ok();
    let state = &out["last_good_state"];
    assert_eq!(paths(state), ["a.txt", "b.txt"], "current files only; not the state dir nor the handoff: {state}");
    assert_eq!(state[0], json!({"path": "a.txt", "sha256": a["sha256"], "bytes": 3}));
    assert_eq!(state[1]["sha256"], sha(b"bee").to_hex());
    assert_eq!(out["last_good_state_source"]["rule"], "whole_journal");
    assert_eq!(out["drift_warnings"], json!([]));
    let read = mcp.call("rw_handoff_read", json!({})).ok();
    assert_eq!(&read["envelope"]["last_good_state"], state);
}

#[test]
fn started_at_bounds_the_journal_window() {
    let mcp = Mcp::start();
    put(&mcp, "a.txt", "one");
    let all =
        mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"started_at": "2000-01-01T00:00:00Z"}))})).ok();
    assert_eq!(paths(&all["last_good_state"]), ["a.txt"]);
    assert_eq!(all["last_good_state_source"], json!({"rule": "started_at", "since": "2000-01-01T00:00:00Z"}));
    for future in ["2999-01-01T00:00:00Z", "2999-01-01T02:00:00+02:00", "2999-01-01"] {
        let none = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"started_at": future}))})).ok();
        assert_eq!(none["last_good_state"], json!([]), "{future}");
    }
    // A started_at that is not a time falls back to the previous-handoff rule, and says so.
    let fallback =
        mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"started_at": "this morning"}))})).ok();
    assert_eq!(fallback["last_good_state_source"]["rule"], "previous_handoff");
    assert!(fallback["last_good_state_source"]["note"].as_str().unwrap().contains("this morning"));
}

#[test]
fn without_started_at_the_window_starts_after_the_previous_handoff() {
    let mcp = Mcp::start();
    put(&mcp, "before.txt", "1");
    let first = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({}))})).ok();
    assert_eq!(paths(&first["last_good_state"]), ["before.txt"]);
    put(&mcp, "after.txt", "2");
    let second = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({}))})).ok();
    assert_eq!(paths(&second["last_good_state"]), ["after.txt"]);
    assert_eq!(second["last_good_state_source"]["rule"], "previous_handoff");
    assert_eq!(second["last_good_state_source"]["since"], first["wrote_at"]);
    // Another handoff path has its own window.
    let other = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({})), "path": "docs/HANDOFF.md"})).ok();
    assert_eq!(other["handoff_path"], "docs/HANDOFF.md");
    assert_eq!(paths(&other["last_good_state"]), ["HANDOFF.md", "after.txt", "before.txt"]);
}

#[test]
fn drift_warnings_name_missing_changed_and_invalid_paths() {
    let mcp = Mcp::start();
    put(&mcp, "a.txt", "now");
    let state = json!([
        {"path": "a.txt", "sha256": sha(b"then").to_hex()},
        {"path": "missing.txt", "sha256": sha(b"x").to_hex()},
        {"path": "../outside.txt", "sha256": sha(b"x").to_hex()},
        {"path": "/etc/passwd", "sha256": sha(b"x").to_hex()},
    ]);
    let out = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"last_good_state": state}))})).ok();
    let warnings = out["drift_warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 4, "{warnings:?}");
    assert_eq!(warnings[0]["reason"], "hash_mismatch");
    assert_eq!(warnings[0]["expected_sha256"], sha(b"then").to_hex());
    assert_eq!(warnings[0]["actual_sha256"], sha(b"now").to_hex());
    assert_eq!(warnings[1], json!({"path": "missing.txt", "reason": "missing"}));
    assert_eq!(warnings[2]["reason"], "invalid_path");
    assert_eq!(warnings[3]["reason"], "invalid_path");
    assert_eq!(out["last_good_state_source"]["rule"], "agent");
    // Drift is a warning: the handoff was written.
    assert!(mcp.ws.read("HANDOFF.md").is_some());
}

#[test]
fn a_later_call_reads_the_drift_of_an_edit_made_after_the_handoff() {
    let mcp = Mcp::start();
    let a = put(&mcp, "a.txt", "handed over");
    mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({}))})).ok();
    assert_eq!(mcp.call("rw_handoff_read", json!({})).ok()["drift_warnings"], json!([]));
    // Another agent edits the file, then the next session resumes.
    put(&mcp, "a.txt", "edited since");
    let read = mcp.call("rw_handoff_read", json!({})).ok();
    assert_eq!(
        read["drift_warnings"],
        json!([{"path": "a.txt", "reason": "hash_mismatch", "expected_sha256": a["sha256"], "actual_sha256": sha(b"edited since").to_hex()}])
    );
    std::fs::remove_file(mcp.ws.abs("a.txt")).unwrap();
    let read = mcp.call("rw_handoff_read", json!({})).ok();
    assert_eq!(read["drift_warnings"], json!([{"path": "a.txt", "reason": "missing"}]));
}

#[test]
fn archive_keeps_the_replaced_handoff_journaled_under_its_own_task_id() {
    let mcp = Mcp::start();
    let none =
        mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"task_id": "old"})), "archive": true})).ok();
    assert_eq!(none["archived_to"], Value::Null, "nothing to archive yet");
    assert!(archives(&mcp).is_empty());
    let old = mcp.ws.read("HANDOFF.md").unwrap();
    let out =
        mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"task_id": "new"})), "archive": true})).ok();
    let archived = out["archived_to"].as_str().unwrap();
    assert!(archived.starts_with(".resilient_write/handoffs/"), "{archived}");
    assert!(archived.ends_with("Z_old.md"), "the archived envelope's task_id names it: {archived}");
    assert_eq!(mcp.ws.read(archived).unwrap(), old);
    assert!(mcp.ws.rows().iter().any(|r| r.path == archived && r.sha256 == Some(sha(&old))), "journaled");
    let stamp = &archived[".resilient_write/handoffs/".len()..][..16];
    assert!(
        humantime::parse_rfc3339(&format!(
            "{}-{}-{}T{}:{}:{}Z",
            &stamp[..4],
            &stamp[4..6],
            &stamp[6..8],
            &stamp[9..11],
            &stamp[11..13],
            &stamp[13..15]
        ))
        .is_ok(),
        "{stamp}"
    );
    // Without archive, nothing more is archived.
    mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({}))})).ok();
    assert_eq!(archives(&mcp).len(), 1);
}

#[test]
fn archive_names_are_sanitised_and_never_overwrite_reference_bug_22() {
    let mcp = Mcp::start();
    let evil = "../../evil/x";
    mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"task_id": evil}))})).ok();
    // Names this second (and the next few) already taken: the archive must not replace them.
    let now = SystemTime::now();
    let taken: Vec<String> = (0..6)
        .map(|s| {
            let stamp: String = humantime::format_rfc3339_seconds(now + Duration::from_secs(s))
                .to_string()
                .chars()
                .filter(|c| !matches!(c, '-' | ':'))
                .collect();
            let name = format!("{stamp}_______evil_x.md");
            mcp.ws.put(&format!(".resilient_write/handoffs/{name}"), b"taken");
            name
        })
        .collect();
    let mut versions = vec![mcp.ws.read("HANDOFF.md").unwrap()];
    for i in 0..3 {
        let out = mcp
            .call(
                "rw_handoff_write",
                json!({"envelope": envelope(json!({"task_id": evil, "summary": format!("v{i}")})), "archive": true}),
            )
            .ok();
        let archived = out["archived_to"].as_str().unwrap();
        let name = archived.strip_prefix(".resilient_write/handoffs/").unwrap();
        assert!(!name.contains('/') && !name.contains(".."), "{archived}");
        assert!(name.ends_with(".md") && name.contains("_______evil_x-"), "suffixed, not overwriting: {name}");
        assert_eq!(mcp.ws.read(archived).unwrap(), versions[i], "archive {i} holds the version it replaced");
        versions.push(mcp.ws.read("HANDOFF.md").unwrap());
    }
    for name in &taken {
        assert_eq!(mcp.ws.read(&format!(".resilient_write/handoffs/{name}")).unwrap(), b"taken");
    }
    assert_eq!(archives(&mcp).len(), taken.len() + 3);
    assert!(!mcp.ws.abs("evil").exists() && !mcp.ws.path().parent().unwrap().join("evil").exists());
}

#[test]
fn unquoted_timestamps_in_a_hand_written_handoff_read_as_strings_reference_bug_12() {
    let mcp = Mcp::start();
    // The reference's own documented template: unquoted timestamps.
    let text = "---\ntask_id: t-9\nstatus: blocked\nagent: human\nsummary: waiting\nstarted_at: 2026-04-16T10:00:00Z\n\
updated_at: 2026-04-16 11:30:00\nday: 2026-04-16\nnext_steps:\n  - ask\nlast_good_state: []\n---\n\nBody.\n";
    mcp.ws.put("HANDOFF.md", text.as_bytes());
    let read = mcp.call("rw_handoff_read", json!({})).ok();
    assert_eq!(read["envelope"]["started_at"], "2026-04-16T10:00:00Z");
    assert_eq!(read["envelope"]["updated_at"], "2026-04-16 11:30:00");
    assert_eq!(read["envelope"]["day"], "2026-04-16");
    assert_eq!(read["body"], "Body.\n");
    // And it works as the window of the next handoff.
    let out = mcp.call("rw_handoff_write", json!({"envelope": read["envelope"].clone()})).ok();
    assert_eq!(out["last_good_state_source"]["rule"], "agent");
}

#[test]
fn a_non_utf8_handoff_is_an_envelope_reference_bug_12() {
    let mcp = Mcp::start();
    mcp.ws.put("HANDOFF.md", b"---\ntask_id: \xff\xfe\n---\n");
    let e = mcp.call("rw_handoff_read", json!({})).err();
    assert_eq!(e["error"], "policy_violation");
    assert_eq!(e["reason_hint"], "encoding");
    assert_eq!(e["context"]["reason"], "not_utf8");
    assert_eq!(e["context"]["path"], "HANDOFF.md");
    // Archiving it still works: its bytes are kept, named after the new task.
    let out =
        mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({"task_id": "fresh"})), "archive": true})).ok();
    let archived = out["archived_to"].as_str().unwrap();
    assert!(archived.ends_with("_fresh.md"), "{archived}");
    assert_eq!(mcp.ws.read(archived).unwrap(), b"---\ntask_id: \xff\xfe\n---\n");
}

#[test]
fn malformed_handoff_files_are_typed_envelopes() {
    let mcp = Mcp::start();
    let e = mcp.call("rw_handoff_read", json!({})).err();
    assert_eq!((e["error"].as_str(), e["context"]["reason"].as_str()), (Some("stale_precondition"), Some("not_found")));
    for (text, reason) in [
        ("no front matter\n", "missing_front_matter_delimiter"),
        ("---\ntask_id: t\n", "unterminated_front_matter"),
        ("---\ntask_id: [unclosed\n---\n", "yaml_error"),
        ("---\n- a\n- b\n---\n", "front_matter_not_mapping"),
        ("---\ntask_id: t\n---\n", "missing_fields"),
        (
            "---\ntask_id: t\nstatus: partial\nagent: a\nsummary: s\nnext_steps: []\nlast_good_state: [{path: a}]\n---\n",
            "each_entry_needs_path_and_sha256",
        ),
    ] {
        mcp.ws.put("notes/H.md", text.as_bytes());
        let e = mcp.call("rw_handoff_read", json!({"path": "notes/H.md"})).err();
        assert_eq!(e["error"], "policy_violation", "{text}: {e}");
        assert_eq!(e["reason_hint"], "encoding", "{text}");
        assert_eq!(e["context"]["reason"], reason, "{text}: {e}");
    }
    // A hand-written file without last_good_state reads (nothing to check).
    mcp.ws.put("notes/H.md", b"---\ntask_id: t\nstatus: partial\nagent: a\nsummary: s\nnext_steps: []\n---\n");
    let read = mcp.call("rw_handoff_read", json!({"path": "notes/H.md"})).ok();
    assert_eq!(read["drift_warnings"], json!([]));
}

#[test]
fn handoff_paths_outside_the_workspace_or_in_the_state_dir_are_refused() {
    let mcp = Mcp::start();
    for path in ["../HANDOFF.md", "/tmp/HANDOFF.md", ".resilient_write/HANDOFF.md", ""] {
        let e = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({})), "path": path})).err();
        assert_eq!(e["error"], "policy_violation", "{path}: {e}");
        let e = mcp.call("rw_handoff_read", json!({"path": path})).err();
        assert_eq!(e["error"], "policy_violation", "{path}: {e}");
    }
}

#[test]
fn a_handoff_holding_a_live_secret_is_blocked_and_not_written() {
    let mcp = Mcp::start();
    let secret = "aws_secret_access_key = \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq3xAmPLe9\"";
    let e = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({})), "body": secret})).err();
    assert_eq!(e["error"], "blocked", "{e}");
    assert_eq!(e["context"]["tool"], "rw_handoff_write");
    assert!(mcp.ws.read("HANDOFF.md").is_none());
}

#[test]
fn checkpoint_refs_appear_only_when_checkpoints_exist() {
    let mcp = Mcp::start();
    let out = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({}))})).ok();
    assert!(out.get("checkpoint_refs").is_none());
    assert!(mcp.call("rw_handoff_read", json!({})).ok().get("checkpoint_refs").is_none());
    let b = mcp.call("rw_checkpoint", json!({"name": "b", "data": [1, 2]})).ok();
    let a = mcp.call("rw_checkpoint", json!({"name": "a", "data": "x"})).ok();
    let refs = json!([
        {"name": "a", "sha256": a["sha256"], "bytes": a["bytes"], "path": ".resilient_write/checkpoints/a.json"},
        {"name": "b", "sha256": b["sha256"], "bytes": b["bytes"], "path": ".resilient_write/checkpoints/b.json"},
    ]);
    let out = mcp.call("rw_handoff_write", json!({"envelope": envelope(json!({}))})).ok();
    assert_eq!(out["checkpoint_refs"], refs);
    assert_eq!(mcp.call("rw_handoff_read", json!({})).ok()["checkpoint_refs"], refs);
}

#[test]
fn envelope_values_survive_the_yaml_round_trip() {
    let mcp = Mcp::start();
    let extra = json!({
        "open_questions": ["yes", "no", "on", "off", "null", "~", "123", "1.5", "1e3", "0x1F", "1:30", "2026-04-16"],
        "context_hints": {"multi": "line one\n---\nline three\n", "quote": "it's \"x\"", "hash": "# c", "colon": "a: b"},
        "numbers": [0, -7, 2.5, 18446744073709551615u64], "flags": [true, false, null], "unicode": "€ ✓ 漢字",
        "artifacts": [], "empty": {},
    });
    let env = envelope(extra.clone());
    mcp.call("rw_handoff_write", json!({"envelope": env, "body": "---\nnot front matter\n"})).ok();
    let read = mcp.call("rw_handoff_read", json!({})).ok();
    for (key, value) in extra.as_object().unwrap() {
        assert_eq!(&read["envelope"][key], value, "{key}");
    }
    assert_eq!(read["body"], "---\nnot front matter\n");
}
