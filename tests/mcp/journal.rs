//! `rw_journal_tail`, `rw_analytics`, `rw_history`, `rw_restore`, `rw_rejections`.

use std::io::Write as _;

use rwfs::engine::WriteMode;
use serde_json::{Value, json};

use crate::support::mcp::Mcp;
use crate::support::{actor, aws_secret_line, write};

fn put(mcp: &Mcp, path: &str, content: &str, mode: &str) -> Value {
    mcp.call("rw_safe_write", json!({"path": path, "content": content, "mode": mode})).ok()
}

/// A chunk part as the chunk tools write it.
fn chunk(mcp: &Mcp, session: &str, index: u32, content: &str) {
    let rel = format!("chunks/{session}/part-{index:03}.txt");
    mcp.engine.state().write(&rel, content.as_bytes(), false, false, &actor()).unwrap();
}

#[test]
fn journal_tail_returns_the_newest_rows_with_the_reference_keys() {
    let mcp = Mcp::start();
    put(&mcp, "a.txt", "one", "create");
    put(&mcp, "b.txt", "two", "create");
    put(&mcp, "a.txt", "three", "overwrite");
    let out = mcp.call("rw_journal_tail", json!({"n": 2})).ok();
    let entries = out["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        (entries[0]["path"].as_str(), entries[1]["path"].as_str()),
        (Some("b.txt"), Some("a.txt")),
        "oldest first"
    );
    for key in ["bytes", "caller", "journal_id", "mode", "path", "sha256", "ts", "seq", "op", "prev_sha256", "via"] {
        assert!(entries[1].get(key).is_some(), "{key} missing: {}", entries[1]);
    }
    assert_eq!(entries[1]["mode"], "overwrite");
    assert_eq!(entries[1]["bytes"], 5);
    let out = mcp.call("rw_journal_tail", json!({"filter_path": "a.txt"})).ok();
    assert_eq!(out["count"], 2);
    let out = mcp.call("rw_journal_tail", json!({"filter_path": "./sub/../a.txt", "filter_mode": "create"})).ok();
    assert_eq!((out["count"].as_u64(), out["entries"][0]["bytes"].as_u64()), (Some(1), Some(3)));
    for n in [0, -5] {
        let out = mcp.call("rw_journal_tail", json!({"n": n})).ok();
        assert_eq!(out["entries"], json!([]));
    }
    let env = mcp.call("rw_journal_tail", json!({"filter_mode": 3})).err();
    assert_eq!(env["context"]["reason"], "invalid_arguments");
}

#[test]
fn journal_tail_and_analytics_tolerate_a_torn_last_line_reference_bug_3() {
    let mcp = Mcp::start();
    put(&mcp, "a.txt", "one", "create");
    put(&mcp, "b.txt", "two", "create");
    let mut journal =
        std::fs::OpenOptions::new().append(true).open(mcp.ws.abs(".resilient_write/journal.jsonl")).unwrap();
    journal.write_all(br#"{"bytes":3,"caller":"x","journal_id":"wj_"#).unwrap();
    drop(journal);
    let out = mcp.call("rw_journal_tail", json!({})).ok();
    let paths: Vec<&str> = out["entries"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["a.txt", "b.txt"]);
    let problems = out["journal_problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1);
    assert!(problems[0].as_str().unwrap().contains("torn"), "{problems:?}");
    let out = mcp.call("rw_analytics", json!({})).ok();
    assert_eq!((out["total_writes"].as_u64(), out["journal_problems"].as_u64()), (Some(2), Some(1)));
}

#[test]
fn analytics_reports_the_reference_shape() {
    let mcp = Mcp::start();
    let out = mcp.call("rw_analytics", json!({})).ok();
    assert_eq!((out["total_writes"].as_u64(), out["unique_paths"].as_u64()), (Some(0), Some(0)));
    assert_eq!(out["period"]["first_entry"], Value::Null);
    assert_eq!(out["write_velocity"]["writes_per_minute"], 0.0);
    put(&mcp, "a.txt", "12345", "create");
    put(&mcp, "a.txt", "123", "append");
    put(&mcp, "b.txt", "1", "create");
    mcp.engine.state().write("checkpoints/plan.json", b"{}", false, false, &actor()).unwrap();
    mcp.engine.state().write("checkpoints/plan.json", b"{\"a\":1}", false, false, &actor()).unwrap();
    let out = mcp.call("rw_analytics", json!({})).ok();
    assert_eq!(out["total_writes"], 5);
    assert_eq!(out["unique_paths"], 3);
    assert_eq!(out["total_bytes_written"], 5 + 8 + 1 + 2 + 7);
    // The engine writes state files as overwrites (create-only is for exclusive creates).
    assert_eq!(out["by_mode"], json!({"create": 2, "append": 1, "overwrite": 2}));
    assert_eq!(out["hot_paths"][0]["path"], "a.txt");
    assert_eq!(out["hot_paths"][0]["write_count"], 2);
    assert_eq!(out["hot_paths"][0]["total_bytes"], 13);
    assert_eq!(out["timeline"].as_array().unwrap().len(), 5);
    assert_eq!(out["timeline"][4]["path"], ".resilient_write/checkpoints/plan.json");
    let cp = &out["checkpoints"];
    assert_eq!((cp["total_saves"].as_u64(), cp["overwrites"].as_u64()), (Some(2), Some(1)));
    assert_eq!(cp["by_name"]["plan"]["saves"], 2);
    assert_eq!(cp["by_name"]["plan"]["total_bytes"], 9);
    let peak = out["write_velocity"]["peak_minute"].as_str().unwrap();
    assert!(peak.len() == 17 && peak.ends_with('Z'), "{peak}");
    assert_eq!(out["write_velocity"]["avg_bytes_per_write"], 4.6);
    assert!(out["period"]["first_entry"].is_string());
    assert!(out["by_caller"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum::<u64>() == 5);
}

#[test]
fn analytics_counts_composes_from_the_rows_reference_bug_27() {
    let mcp = Mcp::start();
    chunk(&mcp, "s1", 1, "hello ");
    chunk(&mcp, "s1", 2, "world!");
    put(&mcp, "notes.txt", "an unrelated write, longer than any join of the parts", "create");
    mcp.engine.state().write("scratch/abc.bin", b"scratch bytes", false, true, &actor()).unwrap();
    // The compose: the parts joined with a one-byte separator.
    write(&mcp.engine, "out.txt", b"hello \nworld!", WriteMode::Create).unwrap();
    put(&mcp, "HANDOFF.md", "# handoff written after the compose\n", "create");
    put(&mcp, "same-size.txt", "hello \nworld!", "create");
    chunk(&mcp, "s2", 1, "abc");
    put(&mcp, "later.txt", "unrelated, written after s2 started", "create");
    write(&mcp.engine, "s2.txt", b"abc", WriteMode::Create).unwrap();
    let out = mcp.call("rw_analytics", json!({})).ok();
    let sessions = &out["sessions"];
    assert_eq!(sessions["s1"]["chunk_writes"], 2);
    assert_eq!(sessions["s1"]["composes"], 1, "reference bug 27: every later write counted as a compose");
    assert_eq!(sessions["s2"]["chunk_writes"], 1);
    assert_eq!(sessions["s2"]["composes"], 1);
    assert!(sessions["s1"]["first_write"].is_string() && sessions["s1"]["duration_seconds"].is_number());
    let out = mcp.call("rw_analytics", json!({"session_filter": "s2"})).ok();
    assert_eq!(out["sessions"].as_object().unwrap().keys().collect::<Vec<_>>(), ["s2"]);
    assert_eq!(out["total_writes"], 10, "session_filter limits only sessions");
}

#[test]
fn one_chunk_session_journals_its_parts_and_compose_not_its_manifest_issue_16_item_7() {
    let mcp = Mcp::start();
    for (index, text) in [(1, "one "), (2, "two "), (3, "three")] {
        mcp.call("rw_chunk_write", json!({"session": "l2", "index": index, "content": text, "total_expected": 3})).ok();
    }
    mcp.call("rw_chunk_compose", json!({"session": "l2", "output_path": "out.txt"})).ok();
    let tail = mcp.call("rw_journal_tail", json!({"n": 100})).ok();
    let paths: Vec<&str> = tail["entries"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            ".resilient_write/chunks/l2/part-001.txt",
            ".resilient_write/chunks/l2/part-002.txt",
            ".resilient_write/chunks/l2/part-003.txt",
            "out.txt",
        ],
        "{tail}"
    );
    assert_eq!(tail["count"], 4);
    // The manifest's rows are durable all the same, shown on request.
    let manifest = ".resilient_write/chunks/l2/manifest.json";
    let all = mcp.call("rw_journal_tail", json!({"n": 100, "include_derived": true})).ok();
    assert!(all["entries"].as_array().unwrap().iter().any(|e| e["path"] == manifest), "{all}");
    let only = mcp.call("rw_journal_tail", json!({"filter_path": manifest})).ok();
    assert!(only["count"].as_u64().unwrap() >= 1, "{only}");
    // Analytics counts the three parts and the compose.
    let out = mcp.call("rw_analytics", json!({})).ok();
    assert_eq!(out["total_writes"], 4, "{out}");
    assert_eq!(out["sessions"]["l2"]["chunk_writes"], 3);
    assert_eq!(out["sessions"]["l2"]["composes"], 1);
    assert!(out["hot_paths"].as_array().unwrap().iter().all(|p| p["path"] != manifest), "{out}");
}

#[test]
fn analytics_since_accepts_zones_and_refuses_bad_input_reference_bug_12() {
    let mcp = Mcp::start();
    put(&mcp, "a.txt", "x", "create");
    for since in ["2000-01-01T00:00:00Z", "2000-01-01T00:00:00+02:00", "2000-01-01T00:00:00", "2000-01-01"] {
        let out = mcp.call("rw_analytics", json!({"since": since})).ok();
        assert_eq!(out["total_writes"], 1, "{since}");
    }
    let out = mcp.call("rw_analytics", json!({"since": "2999-01-01T00:00:00-05:00"})).ok();
    assert_eq!(out["total_writes"], 0);
    assert_eq!(out["since"], "2999-01-01T05:00:00Z");
    for bad in ["yesterday", "2026-02-30T00:00:00Z", "2026-04-12T10:00:00+99:00", ""] {
        let env = mcp.call("rw_analytics", json!({"since": bad})).err();
        assert_eq!(env["error"], "policy_violation", "{bad}: {env}");
        assert_eq!(env["context"]["reason"], "invalid_argument");
        assert_eq!(env["context"]["argument"], "since");
        assert_eq!(env["context"]["tool"], "rw_analytics");
    }
}

#[test]
fn history_lists_every_version_and_restore_brings_one_back() {
    let mcp = Mcp::start();
    let v1 = put(&mcp, "doc.md", "version one\n", "create");
    put(&mcp, "doc.md", "version two\n", "overwrite");
    let v3 = put(&mcp, "doc.md", "version three\n", "overwrite");
    let out = mcp.call("rw_history", json!({"path": "doc.md"})).ok();
    assert_eq!(out["path"], "doc.md");
    assert_eq!(out["total"], 3);
    assert_eq!(out["current_sha256"], v3["sha256"]);
    let versions = out["versions"].as_array().unwrap();
    assert_eq!(versions[0]["sha256"], v1["sha256"]);
    assert_eq!(versions[0]["op"], "create");
    assert_eq!(versions[0]["availability"], "stored");
    assert_eq!(versions[0]["restorable"], true);
    assert_eq!(versions[2]["availability"], "current");
    let out = mcp.call("rw_history", json!({"path": "doc.md", "limit": 1})).ok();
    assert_eq!((out["count"].as_u64(), out["total"].as_u64()), (Some(1), Some(3)));
    assert_eq!(out["versions"][0]["sha256"], v3["sha256"]);

    let prefix = &v1["sha256"].as_str().unwrap()[..8];
    let out = mcp.call("rw_restore", json!({"path": "doc.md", "sha256": prefix})).ok();
    assert_eq!((out["restored"].as_bool(), out["sha256"].as_str()), (Some(true), v1["sha256"].as_str()));
    assert_eq!(out["prev_sha256"], v3["sha256"]);
    assert_eq!(mcp.ws.read("doc.md").unwrap(), b"version one\n");
    let out = mcp.call("rw_restore", json!({"path": "doc.md", "sha256": prefix})).ok();
    assert_eq!(out["already_current"], true);
    assert_eq!(mcp.call("rw_history", json!({"path": "doc.md"})).ok()["versions"][3]["op"], "restore");

    // By time: now is the current content; before any write the path was absent.
    let now =
        humantime::format_rfc3339_seconds(std::time::SystemTime::now() + std::time::Duration::from_secs(2)).to_string();
    assert_eq!(mcp.call("rw_restore", json!({"path": "doc.md", "at": now})).ok()["already_current"], true);
    let env = mcp.call("rw_restore", json!({"path": "doc.md", "at": "2000-01-01T00:00:00+01:00"})).err();
    assert_eq!(
        (env["error"].as_str(), env["context"]["reason"].as_str()),
        (Some("stale_precondition"), Some("absent_at_time"))
    );

    for (args, reason) in [
        (json!({"path": "doc.md"}), "invalid_argument"),
        (json!({"path": "doc.md", "sha256": prefix, "at": now}), "invalid_argument"),
        (json!({"path": "doc.md", "at": "noon"}), "invalid_argument"),
        (json!({"path": "doc.md", "sha256": "ab"}), "invalid_argument"),
        (json!({"path": "doc.md", "sha256": "0000000000"}), "version_not_found"),
        (json!({"path": "../doc.md", "sha256": prefix}), "escapes_workspace"),
        (json!({"path": ".resilient_write/journal.jsonl", "sha256": prefix}), "state_dir_is_read_only"),
    ] {
        let env = mcp.call("rw_restore", args.clone()).err();
        assert_eq!(env["context"]["reason"], reason, "{args}: {env}");
        assert_eq!(env["context"]["tool"], "rw_restore");
    }
    let env = mcp.call("rw_history", json!({"path": "../x"})).err();
    assert_eq!(env["error"], "policy_violation");
    let out = mcp.call("rw_history", json!({"path": "never.txt"})).ok();
    assert_eq!((out["total"].as_u64(), out["exists"].as_bool()), (Some(0), Some(false)));
}

/// An answer with the path it names replaced by `PATH` (so that answers for two paths compare).
fn about_any_path(answer: &crate::support::mcp::Answer, path: &str) -> (bool, String) {
    (answer.is_error, answer.value.to_string().replace(path, "PATH"))
}

#[test]
fn history_and_diff_answer_for_a_file_the_mount_hides_as_for_one_that_never_existed() {
    let mcp = Mcp::start();
    put(&mcp, "doc.md", "version one\n", "create");
    put(&mcp, "doc.md", "version two\n", "overwrite");
    mcp.call("rw_safe_write", json!({"path": "one.py", "content": aws_secret_line(1)})).err();
    let object = std::fs::read_dir(mcp.ws.abs(".resilient_write/objects")).unwrap().find_map(|d| {
        let d = d.unwrap().path();
        std::fs::read_dir(d).unwrap().next().map(|f| f.unwrap().path())
    });
    let object = object.expect("a kept version").strip_prefix(mcp.ws.path()).unwrap().to_string_lossy().into_owned();
    let never = "never.txt";
    for tool in ["rw_history", "rw_diff", "rw_blame"] {
        let expected = about_any_path(&mcp.call(tool, json!({"path": never})), never);
        for hidden in [".resilient_write/keys/journal.key", ".resilient_write/keys/journal.head", object.as_str()] {
            assert!(mcp.ws.abs(hidden).exists(), "{hidden}");
            let answer = mcp.call(tool, json!({"path": hidden}));
            assert_eq!(about_any_path(&answer, hidden), expected, "{tool} {hidden}");
        }
        // What the mount shows read-only is answered as for any file.
        let journal = mcp.call(tool, json!({"path": ".resilient_write/journal.jsonl"}));
        assert_ne!(about_any_path(&journal, ".resilient_write/journal.jsonl"), expected, "{tool}");
    }
    assert_eq!(mcp.call("rw_history", json!({"path": ".resilient_write/journal.jsonl"})).ok()["exists"], true);
    // Nor does a summary of changes list them.
    let files = mcp.call("rw_diff", json!({"since": "2000-01-01T00:00:00Z"})).ok()["files"].to_string();
    assert!(!files.contains("keys/") && !files.contains("objects/"), "{files}");
}

#[test]
fn blame_names_each_line_s_row_and_pages() {
    let mcp = Mcp::start();
    put(&mcp, "doc.md", "one\ntwo\n", "create");
    put(&mcp, "doc.md", "one\n2\nthree\n", "overwrite");
    let out = mcp.call("rw_blame", json!({"path": "doc.md"})).ok();
    assert_eq!(out["total_lines"], 3, "{out}");
    assert_eq!(out["next_from_line"], Value::Null);
    let seqs: Vec<(String, u64)> = out["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["text"].as_str().unwrap().to_string(), l["origin"]["seq"].as_u64().unwrap()))
        .collect();
    let (first, second) = (seqs[0].1, seqs[1].1);
    assert!(first < second, "{seqs:?}");
    assert_eq!(seqs, [("one".into(), first), ("2".into(), second), ("three".into(), second)]);
    let page = mcp.call("rw_blame", json!({"path": "doc.md", "from_line": 2, "max_lines": 1})).ok();
    assert_eq!(page["lines"][0]["text"], "2", "{page}");
    assert_eq!((page["lines"].as_array().unwrap().len(), page["next_from_line"].as_u64()), (1, Some(3)));
    let env = mcp.call("rw_blame", json!({"path": "doc.md", "from_line": 0})).err();
    assert_eq!(env["context"]["reason"], "invalid_argument", "{env}");
}

#[test]
fn rejections_list_newest_first_and_read_by_id_or_latest() {
    let mcp = Mcp::start();
    assert_eq!(mcp.call("rw_rejections", json!({})).ok()["rejections"], json!([]));
    mcp.call("rw_safe_write", json!({"path": "one.py", "content": aws_secret_line(1)})).err();
    mcp.call("rw_safe_write", json!({"path": "two.py", "content": aws_secret_line(2)})).err();
    let out = mcp.call("rw_rejections", json!({})).ok();
    assert_eq!((out["count"].as_u64(), out["total"].as_u64()), (Some(2), Some(2)));
    let listed = out["rejections"].as_array().unwrap();
    assert_eq!(
        (listed[0]["path"].as_str(), listed[1]["path"].as_str()),
        (Some("two.py"), Some("one.py")),
        "newest first"
    );
    assert!(!listed[0]["rules"].as_array().unwrap().is_empty(), "{}", listed[0]);
    assert!(listed[0]["ts"].is_string());
    let id = listed[1]["id"].as_str().unwrap();
    let one = mcp.call("rw_rejections", json!({"id": id})).ok();
    assert_eq!(one["id"], id);
    assert_eq!(one["envelope"]["error"], "blocked");
    assert_eq!(one["envelope"]["context"]["path"], "one.py");
    let latest = mcp.call("rw_rejections", json!({"id": "latest"})).ok();
    assert_eq!(latest["id"], listed[0]["id"]);
    let out = mcp.call("rw_rejections", json!({"limit": 1})).ok();
    assert_eq!((out["count"].as_u64(), out["total"].as_u64()), (Some(1), Some(2)));
    let env = mcp.call("rw_rejections", json!({"id": "rj_nope"})).err();
    assert_eq!(
        (env["error"].as_str(), env["context"]["reason"].as_str()),
        (Some("stale_precondition"), Some("not_found"))
    );
    let env = mcp.call("rw_rejections", json!({"id": "../journal"})).err();
    assert_eq!(
        (env["error"].as_str(), env["context"]["reason"].as_str()),
        (Some("policy_violation"), Some("invalid_argument"))
    );
}

#[test]
fn journal_tools_declare_what_they_change() {
    let mcp = Mcp::start();
    let tools = mcp.tools_json();
    for (name, read_only) in [
        ("rw_journal_tail", true),
        ("rw_analytics", true),
        ("rw_history", true),
        ("rw_rejections", true),
        ("rw_restore", false),
    ] {
        let tool = tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} not listed"));
        assert_eq!(tool["annotations"]["readOnlyHint"], read_only, "{name}");
    }
}
