//! `rw_checkpoint`, `rw_checkpoint_read`, `rw_checkpoint_list`, `rw_checkpoint_cleanup`.

use serde_json::{Value, json};

use crate::support::mcp::Mcp;
use crate::support::{actor, sha};

const DIR: &str = ".resilient_write/checkpoints";

fn file(name: &str) -> String {
    format!("{DIR}/{name}.json")
}

/// A checkpoint file written behind rwfs's back (an old save, a hand edit).
fn put_doc(mcp: &Mcp, name: &str, doc: Value) {
    let mut text = serde_json::to_string_pretty(&doc).unwrap();
    text.push('\n');
    mcp.ws.put(&file(name), text.as_bytes());
}

#[test]
fn a_checkpoint_round_trips_as_the_references_document_and_is_journaled() {
    let mcp = Mcp::start();
    let data = json!({"z": [1, 2.5, "€"], "a": {"nested": true}, "n": null});
    let out = mcp.call("rw_checkpoint", json!({"name": "plan-1", "data": data})).ok();
    assert_eq!(out["name"], "plan-1");
    assert_eq!(out["format"], "json");
    assert_eq!(out["ttl"], "session");
    assert_eq!(out["checkpoint_path"], file("plan-1"));
    assert_eq!(out["chunked"], false);
    assert_eq!(out["created_at"], out["updated_at"]);
    assert!(out["journal_id"].as_str().unwrap().starts_with("wj_"));
    let bytes = mcp.ws.read(&file("plan-1")).unwrap();
    assert_eq!(out["sha256"], sha(&bytes).to_hex());
    assert_eq!(out["bytes"], bytes.len());
    let text = String::from_utf8(bytes).unwrap();
    let expected = format!(
        "{{\n  \"created_at\": {c},\n  \"data\": {{\n    \"a\": {{\n      \"nested\": true\n    }},\n    \"n\": null,\n    \
\"z\": [\n      1,\n      2.5,\n      \"€\"\n    ]\n  }},\n  \"format\": \"json\",\n  \"name\": \"plan-1\",\n  \
\"ttl\": \"session\",\n  \"updated_at\": {c}\n}}\n",
        c = out["created_at"]
    );
    assert_eq!(text, expected);
    let row = mcp.ws.rows().into_iter().last().unwrap();
    assert_eq!(row.path, file("plan-1"));

    let read = mcp.call("rw.checkpoint_read", json!({"name": "plan-1"})).ok();
    assert_eq!(read["data"], data);
    assert_eq!(read["sha256"], out["sha256"]);
    assert_eq!(read["bytes"], out["bytes"]);
    assert_eq!(read["created_at"], out["created_at"]);
    assert_eq!(read["verified"], true);
    assert_eq!(read["journal_sha256"], out["sha256"]);
    // Any JSON value is data, null included.
    mcp.call("rw_checkpoint", json!({"name": "nothing", "data": null})).ok();
    assert_eq!(mcp.call("rw_checkpoint_read", json!({"name": "nothing"})).ok()["data"], Value::Null);
    let e = mcp.call("rw_checkpoint", json!({"name": "nodata"})).err();
    assert_eq!(e["context"]["reason"], "invalid_arguments");
}

#[test]
fn saving_again_replaces_the_data_and_keeps_created_at() {
    let mcp = Mcp::start();
    put_doc(
        &mcp,
        "cp",
        json!({"created_at": "2001-01-01T00:00:00Z", "data": 1, "format": "json", "name": "cp", "ttl": "session", "updated_at": "2001-01-01T00:00:00Z"}),
    );
    let out = mcp.call("rw_checkpoint", json!({"name": "cp", "data": 2, "ttl": "permanent"})).ok();
    assert_eq!(out["created_at"], "2001-01-01T00:00:00Z");
    assert_ne!(out["updated_at"], "2001-01-01T00:00:00Z");
    let read = mcp.call("rw_checkpoint_read", json!({"name": "cp"})).ok();
    assert_eq!((read["data"].clone(), read["ttl"].clone()), (json!(2), json!("permanent")));
    assert_eq!(read["created_at"], "2001-01-01T00:00:00Z");
    // The replaced version stays restorable.
    let old = mcp.ws.rows().into_iter().last().unwrap().prev_sha256.unwrap();
    assert!(mcp.ws.object(&old).is_some());
}

#[test]
fn reading_a_missing_checkpoint_is_a_stale_precondition() {
    let mcp = Mcp::start();
    let e = mcp.call("rw_checkpoint_read", json!({"name": "nope"})).err();
    assert_eq!(e["error"], "stale_precondition");
    assert_eq!(e["context"]["reason"], "checkpoint_not_found");
    assert_eq!(e["context"]["name"], "nope");
    assert_eq!(e["context"]["tool"], "rw_checkpoint_read");
}

#[test]
fn names_of_61_to_64_characters_work_and_others_outside_the_pattern_are_refused_reference_bug_25() {
    let mcp = Mcp::start();
    for len in 61..=64 {
        let name = "n".repeat(len);
        mcp.call("rw_checkpoint", json!({"name": name, "data": "€".repeat(1000)})).ok();
        assert_eq!(mcp.call("rw_checkpoint_read", json!({"name": name})).ok()["data"], "€".repeat(1000));
    }
    for bad in ["", "a b", "a/b", "..", "../x", "é", &"n".repeat(65)] {
        for (tool, args) in
            [("rw_checkpoint", json!({"name": bad, "data": 1})), ("rw_checkpoint_read", json!({"name": bad}))]
        {
            let e = mcp.call(tool, args).err();
            assert_eq!(e["error"], "policy_violation", "{bad:?}");
            assert_eq!(e["reason_hint"], "encoding");
            assert_eq!(e["context"]["reason"], "name_must_match_^[A-Za-z0-9_-]{1,64}$", "{bad:?}");
        }
    }
}

#[test]
fn ttl_is_session_permanent_or_an_iso_duration() {
    let mcp = Mcp::start();
    for ttl in ["session", "permanent", "PT1H", "P7D", "P1Y2M3DT4H5M6S", "P", "PT"] {
        let out = mcp.call("rw_checkpoint", json!({"name": "t", "data": 1, "ttl": ttl})).ok();
        assert_eq!(out["ttl"], ttl);
    }
    for ttl in ["forever", "P1W", "PT1.5H", "1H", "", "pt1h"] {
        let e = mcp.call("rw_checkpoint", json!({"name": "t", "data": 1, "ttl": ttl})).err();
        assert_eq!(e["error"], "policy_violation", "{ttl}");
        assert_eq!(e["context"]["reason"], "ttl_must_be_session|permanent|ISO_8601_duration", "{ttl}");
        assert_eq!(e["context"]["ttl"], ttl);
    }
}

#[test]
fn format_labels_the_data_and_markdown_needs_a_string() {
    let mcp = Mcp::start();
    mcp.call("rw_checkpoint", json!({"name": "y", "data": {"k": "v"}, "format": "yaml"})).ok();
    let read = mcp.call("rw_checkpoint_read", json!({"name": "y"})).ok();
    assert_eq!((read["format"].clone(), read["data"].clone()), (json!("yaml"), json!({"k": "v"})));
    mcp.call("rw_checkpoint", json!({"name": "m", "data": "# Title\n", "format": "markdown"})).ok();
    let e = mcp.call("rw_checkpoint", json!({"name": "m", "data": {"k": 1}, "format": "markdown"})).err();
    assert_eq!(e["context"]["reason"], "markdown_format_requires_string_data");
    let e = mcp.call("rw_checkpoint", json!({"name": "x", "data": 1, "format": "toml"})).err();
    assert_eq!(e["context"]["reason"], "invalid_arguments");
}

#[test]
fn large_checkpoints_round_trip_every_character_reference_bug_24() {
    let mcp = Mcp::start();
    let data = "€".repeat(400_000);
    let out = mcp.call("rw_checkpoint", json!({"name": "big", "data": data})).ok();
    assert_eq!(out["chunked"], false);
    assert!(out["bytes"].as_u64().unwrap() > 1_200_000);
    let read = mcp.call("rw_checkpoint_read", json!({"name": "big"})).ok();
    let back = read["data"].as_str().unwrap();
    assert_eq!(back.chars().count(), 400_000);
    assert!(back == data);
    assert_eq!(read["verified"], true);
}

#[test]
fn list_reports_every_checkpoint_and_flags_corrupt_files() {
    let mcp = Mcp::start();
    let empty = mcp.call("rw_checkpoint_list", json!({})).ok();
    assert_eq!((empty["count"].clone(), empty["checkpoints"].clone()), (json!(0), json!([])));
    let b = mcp.call("rw_checkpoint", json!({"name": "b", "data": 1, "ttl": "PT1H", "format": "yaml"})).ok();
    mcp.call("rw_checkpoint", json!({"name": "a", "data": 2})).ok();
    mcp.ws.put(&file("c"), b"{not json");
    mcp.ws.put(&format!("{DIR}/notes.txt"), b"ignored");
    let list = mcp.call("rw_checkpoint_list", json!({})).ok();
    assert_eq!(list["count"], 3);
    let entries = list["checkpoints"].as_array().unwrap();
    let names: Vec<&str> = entries.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let e = &entries[1];
    assert_eq!(e["bytes"], b["bytes"]);
    assert_eq!(e["checkpoint_path"], file("b"));
    assert_eq!((e["format"].as_str(), e["ttl"].as_str()), (Some("yaml"), Some("PT1H")));
    assert_eq!(e["created_at"], b["created_at"]);
    assert_eq!(e["updated_at"], b["updated_at"]);
    assert_eq!(e["sha256"], b["sha256"]);
    assert!(e.get("corrupt").is_none());
    assert_eq!(entries[2]["corrupt"], true);
    assert_eq!(entries[2]["bytes"], 9);
}

#[test]
fn a_corrupt_or_dataless_checkpoint_reads_as_write_corruption() {
    let mcp = Mcp::start();
    mcp.ws.put(&file("bad"), b"{not json");
    mcp.ws.put(&file("latin"), b"{\"data\": \"\xe9\"}");
    put_doc(&mcp, "nodata", json!({"name": "nodata", "ttl": "session"}));
    for (name, reason) in
        [("bad", "corrupt_checkpoint"), ("latin", "corrupt_checkpoint"), ("nodata", "missing_data_field")]
    {
        let e = mcp.call("rw_checkpoint_read", json!({"name": name})).err();
        assert_eq!(e["error"], "write_corruption", "{name}");
        assert_eq!(e["reason_hint"], "encoding");
        assert_eq!(e["context"]["reason"], reason, "{name}");
    }
    // A corrupt file is replaced by the next save (created_at starts again).
    mcp.call("rw_checkpoint", json!({"name": "bad", "data": 1})).ok();
    assert_eq!(mcp.call("rw_checkpoint_read", json!({"name": "bad"})).ok()["data"], 1);
}

#[test]
fn read_compares_the_file_with_the_journals_digest_reference_bug_26() {
    let mcp = Mcp::start();
    let out = mcp.call("rw_checkpoint", json!({"name": "cp", "data": "saved"})).ok();
    assert_eq!(mcp.call("rw_checkpoint_read", json!({"name": "cp"})).ok()["verified"], true);
    put_doc(
        &mcp,
        "cp",
        json!({"created_at": "x", "data": "edited behind rwfs", "format": "json", "name": "cp", "ttl": "session", "updated_at": "x"}),
    );
    let read = mcp.call("rw_checkpoint_read", json!({"name": "cp"})).ok();
    assert_eq!(read["data"], "edited behind rwfs");
    assert_eq!(read["verified"], false);
    assert_eq!(read["journal_sha256"], out["sha256"]);
    // A file the journal never saw is not verified either.
    put_doc(&mcp, "stray", json!({"data": 1}));
    let read = mcp.call("rw_checkpoint_read", json!({"name": "stray"})).ok();
    assert_eq!((read["verified"].clone(), read["journal_sha256"].clone()), (json!(false), Value::Null));
}

#[test]
fn cleanup_removes_session_and_expired_checkpoints_journaled_and_restorable() {
    let mcp = Mcp::start();
    assert_eq!(
        mcp.call("rw_checkpoint_cleanup", json!({})).ok(),
        json!({"ok": true, "removed": [], "kept": 0, "corrupt": []})
    );
    let s = mcp.call("rw_checkpoint", json!({"name": "s", "data": 1})).ok();
    mcp.call("rw_checkpoint", json!({"name": "p", "data": 1, "ttl": "permanent"})).ok();
    mcp.call("rw_checkpoint", json!({"name": "fresh", "data": 1, "ttl": "PT1H"})).ok();
    mcp.call("rw_checkpoint", json!({"name": "year", "data": 1, "ttl": "P365D"})).ok();
    let old = |ttl: &str| json!({"created_at": "2000-01-01T00:00:00Z", "data": 1, "format": "json", "ttl": ttl, "updated_at": "2000-01-01T00:00:00Z"});
    put_doc(&mcp, "stale", old("PT1H"));
    put_doc(&mcp, "zero", old("P"));
    put_doc(&mcp, "undated", json!({"data": 1, "ttl": "PT1H", "updated_at": "some day"}));

    let kept_session = mcp.call("rw_checkpoint_cleanup", json!({"include_session": false})).ok();
    assert_eq!(kept_session["removed"].as_array().unwrap().len(), 1);
    assert_eq!(kept_session["removed"][0]["name"], "stale");
    assert_eq!(kept_session["removed"][0]["ttl"], "PT1H");
    assert_eq!(kept_session["removed"][0]["reason"], "expired");
    assert_eq!(kept_session["kept"], 6);
    assert!(mcp.ws.read(&file("s")).is_some());

    let out = mcp.call("rw_checkpoint_cleanup", json!({})).ok();
    assert_eq!(
        out["removed"],
        json!([{"name": "s", "ttl": "session", "reason": "session_cleanup", "sha256": s["sha256"]}])
    );
    assert_eq!(out["kept"], 5, "permanent, fresh, year, zero and undated stay");
    assert!(mcp.ws.read(&file("s")).is_none());
    let row = mcp.ws.rows().into_iter().last().unwrap();
    assert_eq!((row.path.as_str(), row.op().as_str()), (file("s").as_str(), "delete"));
    let sha_s: rwfs::sha::Sha256 = s["sha256"].as_str().unwrap().parse().unwrap();
    assert!(mcp.ws.object(&sha_s).is_some(), "the removed checkpoint stays restorable");
}

#[test]
fn cleanup_reports_corrupt_checkpoints_instead_of_deleting_them_reference_bug_26() {
    let mcp = Mcp::start();
    mcp.ws.put(&file("broken"), b"{\"data\": ");
    let out = mcp.call("rw_checkpoint_cleanup", json!({})).ok();
    assert_eq!(out["removed"], json!([]));
    assert_eq!(out["kept"], 1);
    assert_eq!(out["corrupt"][0]["name"], "broken");
    assert_eq!(out["corrupt"][0]["sha256"], sha(b"{\"data\": ").to_hex());
    assert_eq!(mcp.ws.read(&file("broken")).unwrap(), b"{\"data\": ");
    // Asked explicitly, it goes, journaled and restorable.
    let out = mcp.call("rw_checkpoint_cleanup", json!({"remove_corrupt": true})).ok();
    assert_eq!(
        out["removed"],
        json!([{"name": "broken", "ttl": "unknown", "reason": "corrupt", "sha256": sha(b"{\"data\": ").to_hex()}])
    );
    assert!(mcp.ws.read(&file("broken")).is_none());
    assert!(mcp.ws.object(&sha(b"{\"data\": ")).is_some());
    assert_eq!(mcp.ws.rows().into_iter().last().unwrap().path, file("broken"));
}

#[test]
fn cleanup_removes_only_the_version_it_judged() {
    let mcp = Mcp::start();
    mcp.call("rw_checkpoint", json!({"name": "s", "data": 1})).ok();
    // A save between cleanup's read and its delete: the delete is refused, the new save stays.
    let e = mcp.engine.state().remove_if("checkpoints/s.json", sha(b"what cleanup judged"), &actor()).unwrap_err();
    assert_eq!(e.kind(), rwfs::ErrorKind::StalePrecondition);
    assert!(mcp.ws.read(&file("s")).is_some());
    let current = sha(&mcp.ws.read(&file("s")).unwrap());
    assert!(mcp.engine.state().remove_if("checkpoints/s.json", current, &actor()).unwrap());
    assert!(!mcp.engine.state().remove_if("checkpoints/s.json", current, &actor()).unwrap(), "already gone");
}
