//! `rw_chunk_write`, `rw_chunk_append`, `rw_chunk_compose`, `rw_chunk_reset`,
//! `rw_chunk_status`, `rw_chunk_preview`.

use serde_json::{Value, json};

use rwfs::journal::Op;

use crate::support::mcp::Mcp;
use crate::support::{aws_secret_line, sha};

const DIR: &str = ".resilient_write/chunks";

fn write(mcp: &Mcp, session: &str, index: i64, content: &str) -> Value {
    mcp.call("rw_chunk_write", json!({"session": session, "index": index, "content": content})).ok()
}

fn manifest(mcp: &Mcp, session: &str) -> Value {
    let bytes = mcp.ws.read(&format!("{DIR}/{session}/manifest.json")).expect("manifest");
    serde_json::from_slice(&bytes).unwrap()
}

/// The refusal's envelope, checked to be the reference's bad-input kind with this reason.
#[track_caller]
fn refused_as_bad_input(mcp: &Mcp, tool: &str, args: Value, reason: &str) -> Value {
    let env = mcp.call(tool, args).err();
    assert_eq!(env["error"], "policy_violation", "{env}");
    assert_eq!(env["reason_hint"], "encoding", "{env}");
    assert_eq!(env["context"]["reason"], reason, "{env}");
    assert_eq!(env["context"]["tool"], tool, "{env}");
    env
}

#[test]
fn chunk_write_creates_the_part_the_manifest_and_a_journal_row() {
    let mcp = Mcp::start();
    let out = mcp
        .call("rw_chunk_write", json!({"session": "s1", "index": 1, "content": "alpha\n", "total_expected": 2}))
        .ok();
    assert_eq!(out["session"], "s1");
    assert_eq!(out["index"], 1);
    assert_eq!(out["chunk_path"], ".resilient_write/chunks/s1/part-001.txt");
    assert_eq!(out["sha256"], sha(b"alpha\n").to_hex());
    assert_eq!(out["bytes"], 6);
    assert!(out["journal_id"].as_str().unwrap().starts_with("wj_"));
    assert_eq!(mcp.ws.read(".resilient_write/chunks/s1/part-001.txt").unwrap(), b"alpha\n");

    let text = String::from_utf8(mcp.ws.read(".resilient_write/chunks/s1/manifest.json").unwrap()).unwrap();
    assert!(text.starts_with("{\n  \"created_at\": ") && text.ends_with("}\n"), "pretty, sorted, newline: {text}");
    let m: Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&String> = m.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["created_at", "session", "total_expected", "updated_at"]);
    assert_eq!(m["session"], "s1");
    assert_eq!(m["total_expected"], 2);
    assert!(m["created_at"].as_str().unwrap().ends_with('Z'));

    let rows = mcp.ws.rows();
    assert!(
        rows.iter().any(|r| r.path == ".resilient_write/chunks/s1/part-001.txt" && r.journal_id == out["journal_id"])
    );
}

#[test]
fn chunk_write_retries_replace_the_part_and_total_expected_is_sticky() {
    let mcp = Mcp::start();
    mcp.call("rw_chunk_write", json!({"session": "s", "index": 1, "content": "v1", "total_expected": 3})).ok();
    let created = manifest(&mcp, "s")["created_at"].clone();
    let out = write(&mcp, "s", 1, "v2");
    assert_eq!(out["sha256"], sha(b"v2").to_hex());
    assert_eq!(mcp.ws.read(&format!("{DIR}/s/part-001.txt")).unwrap(), b"v2");
    let m = manifest(&mcp, "s");
    assert_eq!(m["total_expected"], 3, "a write without total_expected keeps the previous one");
    assert_eq!(m["created_at"], created);
    mcp.call("rw_chunk_write", json!({"session": "s", "index": 2, "content": "x", "total_expected": 2})).ok();
    assert_eq!(manifest(&mcp, "s")["total_expected"], 2, "the latest value given wins");
    // The replaced chunk stays restorable.
    assert!(mcp.ws.object(&sha(b"v1")).is_some());
}

#[test]
fn bad_session_names_and_indices_are_refused_with_the_reference_reasons() {
    let mcp = Mcp::start();
    let session_reason = "session_must_match_^[A-Za-z0-9_-]{1,64}$";
    for bad in ["", "a b", "a/b", "..", "../x", &"x".repeat(65)] {
        let env = refused_as_bad_input(
            &mcp,
            "rw_chunk_write",
            json!({"session": bad, "index": 1, "content": "x"}),
            session_reason,
        );
        assert_eq!(env["context"]["session"], bad);
    }
    for tool in ["rw_chunk_append", "rw_chunk_reset", "rw_chunk_status", "rw_chunk_preview"] {
        let mut args = json!({"session": "no good"});
        if tool == "rw_chunk_append" {
            args["content"] = json!("x");
        }
        refused_as_bad_input(&mcp, tool, args, session_reason);
    }
    refused_as_bad_input(&mcp, "rw_chunk_compose", json!({"session": "a/b", "output_path": "o.txt"}), session_reason);
    for index in [0, -1, 1000] {
        let env = refused_as_bad_input(
            &mcp,
            "rw_chunk_write",
            json!({"session": "s", "index": index, "content": "x"}),
            "index_must_be_int_in_1..999",
        );
        assert_eq!(env["context"]["index"], index);
    }
    for total in [0, 1000] {
        refused_as_bad_input(
            &mcp,
            "rw_chunk_write",
            json!({"session": "s", "index": 1, "content": "x", "total_expected": total}),
            "total_expected_must_be_int_in_1..999",
        );
    }
    let env = refused_as_bad_input(
        &mcp,
        "rw_chunk_write",
        json!({"session": "s", "index": 3, "content": "x", "total_expected": 2}),
        "index_exceeds_total_expected",
    );
    assert_eq!(env["context"]["total_expected"], 2);
    assert!(!mcp.ws.abs(DIR).exists(), "nothing was written");
}

#[test]
fn compose_joins_the_chunks_in_order_and_reports_their_hashes() {
    let mcp = Mcp::start();
    for (i, text) in [(3, "three\n"), (1, "one\n"), (2, "two\n")] {
        write(&mcp, "doc", i, text);
    }
    let out = mcp.call("rw_chunk_compose", json!({"session": "doc", "output_path": "out/report.md"})).ok();
    assert_eq!(mcp.ws.read("out/report.md").unwrap(), b"one\ntwo\nthree\n");
    assert_eq!(out["session"], "doc");
    assert_eq!(out["output_path"], "out/report.md");
    assert_eq!(out["sha256"], sha(b"one\ntwo\nthree\n").to_hex());
    assert_eq!(out["bytes"], 14);
    assert_eq!(out["chunk_count"], 3);
    let hashes: Vec<String> = ["one\n", "two\n", "three\n"].iter().map(|t| sha(t.as_bytes()).to_hex()).collect();
    assert_eq!(out["chunk_hashes"], json!(hashes));
    assert_eq!(out["cleaned_up"], false);
    assert_eq!(out["mode_applied"], "create");
    let row = mcp.ws.rows().into_iter().find(|r| r.journal_id == out["journal_id"]).expect("journal row");
    assert_eq!(row.path, "out/report.md");
    // Without cleanup the session stays.
    assert_eq!(mcp.call("rw_chunk_status", json!({"session": "doc"})).ok()["present_indices"], json!([1, 2, 3]));

    let out = mcp
        .call("rw_chunk_compose", json!({"session": "doc", "output_path": "out/report.md", "separator": "--\n"}))
        .ok();
    assert_eq!(mcp.ws.read("out/report.md").unwrap(), b"one\n--\ntwo\n--\nthree\n");
    assert_eq!(out["mode_applied"], "overwrite");
    assert_eq!(out["bytes"], 20);
    // The first composed version stays restorable.
    assert!(mcp.ws.object(&sha(b"one\ntwo\nthree\n")).is_some());
}

#[test]
fn compose_refuses_gaps_with_have_missing_and_unexpected_until_the_chunk_arrives() {
    let mcp = Mcp::start();
    write(&mcp, "s", 1, "a");
    write(&mcp, "s", 3, "c");
    let env = mcp.call("rw_chunk_compose", json!({"session": "s", "output_path": "o.txt"})).err();
    assert_eq!(env["error"], "stale_precondition");
    assert_eq!(env["context"]["reason"], "non_contiguous_chunks");
    assert_eq!(env["context"]["session"], "s");
    assert_eq!(env["context"]["have"], json!([1, 3]));
    assert_eq!(env["context"]["missing"], json!([2]));
    assert_eq!(env["context"]["unexpected"], json!([3]));
    assert_eq!(env["context"]["tool"], "rw_chunk_compose");
    assert!(mcp.ws.read("o.txt").is_none());
    write(&mcp, "s", 2, "b");
    mcp.call("rw_chunk_compose", json!({"session": "s", "output_path": "o.txt"})).ok();
    assert_eq!(mcp.ws.read("o.txt").unwrap(), b"abc");
}

#[test]
fn compose_refuses_fewer_chunks_than_total_expected() {
    let mcp = Mcp::start();
    mcp.call("rw_chunk_write", json!({"session": "s", "index": 1, "content": "a", "total_expected": 3})).ok();
    write(&mcp, "s", 2, "b");
    let compose = json!({"session": "s", "output_path": "o.txt"});
    let preview = json!({"session": "s"});
    for (tool, args) in [("rw_chunk_compose", compose), ("rw_chunk_preview", preview)] {
        let env = mcp.call(tool, args).err();
        assert_eq!(env["error"], "stale_precondition");
        assert_eq!(env["context"]["reason"], "chunk_count_mismatch", "{tool}");
        assert_eq!(env["context"]["have"], 2);
        assert_eq!(env["context"]["total_expected"], 3);
    }
}

#[test]
fn compose_of_a_missing_or_empty_session_is_refused() {
    let mcp = Mcp::start();
    let env = mcp.call("rw_chunk_compose", json!({"session": "nope", "output_path": "o.txt"})).err();
    assert_eq!(env["error"], "stale_precondition");
    assert_eq!(env["context"]["reason"], "session_not_found");
    assert_eq!(env["context"]["session"], "nope");
    let env = mcp.call("rw_chunk_preview", json!({"session": "nope"})).err();
    assert_eq!(env["context"]["reason"], "session_not_found");
    // A session directory holding no part files (only files that are not parts).
    mcp.ws.put(&format!("{DIR}/empty/notes.txt"), b"not a part");
    let env = mcp.call("rw_chunk_compose", json!({"session": "empty", "output_path": "o.txt"})).err();
    assert_eq!(env["context"]["reason"], "no_chunks_found");
    assert!(mcp.ws.read("o.txt").is_none());
}

#[test]
fn compose_with_cleanup_removes_the_session_and_keeps_its_chunks_restorable() {
    let mcp = Mcp::start();
    write(&mcp, "s", 1, "first chunk ");
    write(&mcp, "s", 2, "second chunk");
    let out = mcp.call("rw_chunk_compose", json!({"session": "s", "output_path": "o.txt", "cleanup": true})).ok();
    assert_eq!(out["cleaned_up"], true);
    assert_eq!(mcp.ws.read("o.txt").unwrap(), b"first chunk second chunk");
    assert!(!mcp.ws.abs(&format!("{DIR}/s")).exists());
    assert_eq!(mcp.call("rw_chunk_status", json!({"session": "s"})).ok()["exists"], false);
    let deleted: Vec<String> = mcp.ws.rows().into_iter().filter(|r| r.op() == Op::Delete).map(|r| r.path).collect();
    assert!(deleted.contains(&format!("{DIR}/s/part-001.txt")), "{deleted:?}");
    assert!(deleted.contains(&format!("{DIR}/s/manifest.json")), "{deleted:?}");
    assert!(mcp.ws.object(&sha(b"first chunk ")).is_some());
}

#[test]
fn a_composed_secret_is_refused_with_the_gate_envelope() {
    let mcp = Mcp::start();
    let line = aws_secret_line(7);
    let (head, tail) = line.split_at(line.len() / 2);
    write(&mcp, "cfg", 1, head);
    write(&mcp, "cfg", 2, tail);
    let env = mcp.call("rw_chunk_compose", json!({"session": "cfg", "output_path": "config.py"})).err();
    assert_eq!(env["error"], "blocked", "{env}");
    assert_eq!(env["reason_hint"], "content_filter");
    assert_eq!(env["suggested_action"], "redact");
    assert_eq!(env["context"]["reason"], "content_blocked");
    assert_eq!(env["context"]["tool"], "rw_chunk_compose");
    assert!(!env.to_string().contains(line.trim().split('"').nth(1).unwrap()), "the envelope never echoes the secret");
    assert!(mcp.ws.read("config.py").is_none());
}

#[test]
fn compose_output_inside_the_state_dir_is_refused_reference_bug_29() {
    let mcp = Mcp::start();
    for i in 1..=3 {
        write(&mcp, "s", i, "x");
    }
    for output in [
        ".resilient_write/chunks/s/part-004.txt",
        ".resilient_write/policy.yaml",
        "a/../.resilient_write/journal.jsonl",
    ] {
        let env = mcp.call("rw_chunk_compose", json!({"session": "s", "output_path": output})).err();
        assert_eq!(env["error"], "policy_violation", "{output}: {env}");
        assert_eq!(env["context"]["reason"], "state_dir_is_read_only", "{output}: {env}");
    }
    assert!(mcp.ws.read(&format!("{DIR}/s/part-004.txt")).is_none());
    assert_eq!(mcp.call("rw_chunk_status", json!({"session": "s"})).ok()["present_indices"], json!([1, 2, 3]));
    for output in ["../escape.txt", "/etc/passwd", ""] {
        let env = mcp.call("rw_chunk_compose", json!({"session": "s", "output_path": output})).err();
        assert_eq!(env["error"], "policy_violation", "{output}: {env}");
    }
}

#[test]
fn compose_creates_or_overwrites_without_toctou_reference_bug_10() {
    let mcp = Mcp::start();
    write(&mcp, "s", 1, "same ");
    write(&mcp, "s", 2, "content");
    // Concurrent composes into one new output: whichever lands first creates it, the others
    // replace it; none is refused because the file appeared after an `exists()` check.
    let outs: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| mcp.call("rw_chunk_compose", json!({"session": "s", "output_path": "new.txt"}))))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap().ok()).collect()
    });
    assert_eq!(outs.iter().filter(|o| o["mode_applied"] == "create").count(), 1);
    assert_eq!(mcp.ws.read("new.txt").unwrap(), b"same content");
}

#[test]
fn chunk_append_numbers_after_the_highest_index() {
    let mcp = Mcp::start();
    let append = |content: &str| mcp.call("rw_chunk_append", json!({"session": "s", "content": content})).ok();
    let first = append("a");
    assert_eq!(first["index"], 1);
    assert_eq!(first["chunk_path"], ".resilient_write/chunks/s/part-001.txt");
    assert_eq!(first["sha256"], sha(b"a").to_hex());
    assert_eq!(append("b")["index"], 2);
    write(&mcp, "s", 4, "d");
    assert_eq!(append("e")["index"], 5, "gaps are not filled, as the reference");
    write(&mcp, "s", 3, "c");
    let out = mcp.call("rw_chunk_compose", json!({"session": "s", "output_path": "o.txt"})).ok();
    assert_eq!(mcp.ws.read("o.txt").unwrap(), b"abcde");
    assert_eq!(out["chunk_count"], 5);
}

#[test]
fn chunk_append_respects_total_expected_and_the_index_limit() {
    let mcp = Mcp::start();
    let out = mcp.call("rw_chunk_append", json!({"session": "t", "content": "a", "total_expected": 2})).ok();
    assert_eq!(out["index"], 1);
    assert_eq!(manifest(&mcp, "t")["total_expected"], 2);
    mcp.call("rw_chunk_append", json!({"session": "t", "content": "b"})).ok();
    mcp.call("rw_chunk_compose", json!({"session": "t", "output_path": "t.txt"})).ok();
    refused_as_bad_input(
        &mcp,
        "rw_chunk_append",
        json!({"session": "t", "content": "c", "total_expected": 2}),
        "index_exceeds_total_expected",
    );
    refused_as_bad_input(
        &mcp,
        "rw_chunk_append",
        json!({"session": "t", "content": "c", "total_expected": 0}),
        "total_expected_must_be_int_in_1..999",
    );
    mcp.ws.put(&format!("{DIR}/full/part-999.txt"), b"last");
    refused_as_bad_input(
        &mcp,
        "rw_chunk_append",
        json!({"session": "full", "content": "x"}),
        "index_must_be_int_in_1..999",
    );
}

#[test]
fn chunk_append_is_race_free_reference_bug_9() {
    let mcp = Mcp::start();
    let outs: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|t| {
                let mcp = &mcp;
                scope
                    .spawn(move || mcp.call("rw_chunk_append", json!({"session": "race", "content": format!("<{t}>")})))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap().ok()).collect()
    });
    let mut indices: Vec<i64> = outs.iter().map(|o| o["index"].as_i64().unwrap()).collect();
    indices.sort();
    assert_eq!(indices, (1..=16).collect::<Vec<_>>(), "16 appends, 16 distinct parts");
    let status = mcp.call("rw_chunk_status", json!({"session": "race"})).ok();
    assert_eq!(status["present_indices"], json!((1..=16).collect::<Vec<_>>()));
    let preview = mcp.call("rw_chunk_preview", json!({"session": "race"})).ok();
    let content = preview["content"].as_str().unwrap();
    for t in 0..16 {
        assert!(content.contains(&format!("<{t}>")), "append {t} was lost: {content}");
    }
    // Each part holds what its append reported.
    for out in &outs {
        let part = mcp.ws.read(&format!("{DIR}/race/part-{:03}.txt", out["index"].as_i64().unwrap())).unwrap();
        assert_eq!(out["sha256"], sha(&part).to_hex());
    }
}

#[test]
fn manifest_read_modify_write_is_serialised_reference_bug_9() {
    let mcp = Mcp::start();
    write(&mcp, "m", 1, "seed");
    let created = manifest(&mcp, "m")["created_at"].clone();
    // One writer sets total_expected; the others do not give it. Unserialised, a writer that
    // read the manifest before the update and wrote after it would erase the value.
    std::thread::scope(|scope| {
        for t in 2..=16 {
            let mcp = &mcp;
            scope.spawn(move || {
                let mut args = json!({"session": "m", "index": t, "content": format!("{t}")});
                if t == 9 {
                    args["total_expected"] = json!(16);
                }
                mcp.call("rw_chunk_write", args).ok();
            });
        }
    });
    let m = manifest(&mcp, "m");
    assert_eq!(m["total_expected"], 16);
    assert_eq!(m["created_at"], created);
    mcp.call("rw_chunk_compose", json!({"session": "m", "output_path": "m.txt"})).ok();
}

#[test]
fn reset_removes_the_session_and_a_missing_one_is_not_an_error() {
    let mcp = Mcp::start();
    write(&mcp, "s", 1, "a");
    write(&mcp, "s", 2, "b");
    let out = mcp.call("rw_chunk_reset", json!({"session": "s"})).ok();
    assert_eq!(out["session"], "s");
    assert_eq!(out["existed"], true);
    assert_eq!(out["removed"], 3, "two parts and the manifest");
    assert!(!mcp.ws.abs(&format!("{DIR}/s")).exists());
    assert!(mcp.ws.object(&sha(b"a")).is_some(), "reset chunks stay restorable");
    let out = mcp.call("rw_chunk_reset", json!({"session": "s"})).ok();
    assert_eq!(out, json!({"ok": true, "session": "s", "removed": 0, "existed": false}));
    // A fresh session of the same name starts over.
    assert_eq!(mcp.call("rw_chunk_append", json!({"session": "s", "content": "z"})).ok()["index"], 1);
}

#[test]
fn status_reports_present_indices_and_total_expected() {
    let mcp = Mcp::start();
    let out = mcp.call("rw_chunk_status", json!({"session": "s"})).ok();
    assert_eq!(out, json!({"ok": true, "session": "s", "exists": false}));
    mcp.call("rw_chunk_write", json!({"session": "s", "index": 1, "content": "a", "total_expected": 4})).ok();
    write(&mcp, "s", 3, "c");
    let out = mcp.call("rw_chunk_status", json!({"session": "s"})).ok();
    assert_eq!(out["exists"], true);
    assert_eq!(out["present_indices"], json!([1, 3]));
    assert_eq!(out["total_expected"], 4);
    assert_eq!(out["chunk_dir"], ".resilient_write/chunks/s");
}

#[test]
fn preview_returns_the_joined_content_and_writes_nothing() {
    let mcp = Mcp::start();
    write(&mcp, "p", 1, "héllo");
    write(&mcp, "p", 2, "wörld");
    let rows = mcp.ws.rows().len();
    let out = mcp.call("rw_chunk_preview", json!({"session": "p", "separator": ", "})).ok();
    assert_eq!(out["content"], "héllo, wörld");
    assert_eq!(out["total_bytes"], "héllo, wörld".len(), "bytes, not characters");
    assert_eq!(out["chunk_count"], 2);
    assert_eq!(out["chunk_hashes"], json!([sha("héllo".as_bytes()).to_hex(), sha("wörld".as_bytes()).to_hex()]));
    assert_eq!(out["preview"], true);
    assert_eq!(mcp.ws.rows().len(), rows, "no journal row");
    write(&mcp, "p", 4, "gap");
    let env = mcp.call("rw_chunk_preview", json!({"session": "p"})).err();
    assert_eq!(env["context"]["reason"], "non_contiguous_chunks");
    assert_eq!(env["context"]["missing"], json!([3]));
}

#[test]
fn a_corrupt_manifest_or_non_utf8_chunks_are_write_corruption() {
    let mcp = Mcp::start();
    write(&mcp, "s", 1, "a");
    mcp.ws.put(&format!("{DIR}/s/manifest.json"), b"{ torn");
    let env = mcp.call("rw_chunk_status", json!({"session": "s"})).err();
    assert_eq!(env["error"], "write_corruption");
    assert_eq!(env["reason_hint"], "encoding");
    assert_eq!(env["context"]["reason"], "bad_manifest");
    assert_eq!(env["context"]["manifest"], ".resilient_write/chunks/s/manifest.json");
    // Refused before the chunk is written.
    let env = mcp.call("rw_chunk_write", json!({"session": "s", "index": 2, "content": "b"})).err();
    assert_eq!(env["context"]["reason"], "bad_manifest");
    assert!(mcp.ws.read(&format!("{DIR}/s/part-002.txt")).is_none());
    mcp.ws.put(&format!("{DIR}/s/manifest.json"), b"[1, 2]");
    let env = mcp.call("rw_chunk_compose", json!({"session": "s", "output_path": "o.txt"})).err();
    assert_eq!(env["context"]["reason"], "not_mapping");

    mcp.call("rw_chunk_reset", json!({"session": "s"})).ok();
    write(&mcp, "s", 1, "ok");
    mcp.ws.put(&format!("{DIR}/s/part-002.txt"), b"\xff\xfe");
    let env = mcp.call("rw_chunk_compose", json!({"session": "s", "output_path": "o.txt"})).err();
    assert_eq!(env["error"], "write_corruption");
    assert_eq!(env["reason_hint"], "encoding");
    assert_eq!(env["context"]["reason"], "composed_not_utf8");
    assert!(mcp.ws.read("o.txt").is_none());
}

#[test]
fn compose_of_a_full_session_reads_each_chunk_once() {
    let mcp = Mcp::start();
    let chunk = "0123456789abcdef".repeat(256); // 4 KiB
    for i in 1..=999 {
        mcp.ws.put(&format!("{DIR}/big/part-{i:03}.txt"), chunk.as_bytes());
    }
    let started = std::time::Instant::now();
    let out = mcp.call("rw_chunk_compose", json!({"session": "big", "output_path": "big.txt", "cleanup": true})).ok();
    assert_eq!(out["chunk_count"], 999);
    assert_eq!(out["bytes"], 999 * 4096);
    assert_eq!(out["chunk_hashes"].as_array().unwrap().len(), 999);
    assert_eq!(mcp.ws.read("big.txt").unwrap().len(), 999 * 4096);
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "compose took {:?}", started.elapsed());
}
