//! The resilient-read companion: `rr_stat`, `rr_read_bytes`, `rr_read_lines`, `rr_read_tail`,
//! `rr_search_then_page`, `rr_make_cursor`, `rr_read_next`; signed cursors, drift, hostile paths.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::support::mcp::Mcp;
use crate::support::sha;

const READ_TOOLS: [&str; 7] = [
    "rr_stat",
    "rr_read_bytes",
    "rr_read_lines",
    "rr_read_tail",
    "rr_search_then_page",
    "rr_make_cursor",
    "rr_read_next",
];

/// The arguments of a read tool that takes a path, aimed at `path`.
fn path_args(tool: &str, path: &str) -> Value {
    match tool {
        "rr_search_then_page" => json!({"path": path, "query": "secret"}),
        _ => json!({"path": path}),
    }
}

/// `count` numbered lines: `line 1`, `line 2`, ...
fn numbered(count: usize) -> String {
    (1..=count).map(|i| format!("line {i}\n")).collect()
}

/// Read a whole file through cursors, checking each window; the text and the last answer.
fn read_all_by_cursor(mcp: &Mcp, mut cursor: Value) -> (String, Value) {
    let mut text = String::new();
    loop {
        let out = mcp.call("rr_read_next", json!({"cursor": cursor})).ok();
        text.push_str(out["content"].as_str().unwrap());
        cursor = out["cursor"].clone();
        if out["eof"] == true {
            return (text, out);
        }
    }
}

#[test]
fn stat_reports_size_mtime_and_the_digest_on_request() {
    let mcp = Mcp::start();
    mcp.ws.put("src/a.txt", b"hello\n");
    let out = mcp.call("rr_stat", json!({"path": "src/a.txt"})).ok();
    assert_eq!(out["path"], "src/a.txt");
    assert_eq!(out["size"], 6);
    assert!(out["mtime_ns"].as_i64().unwrap() > 0);
    assert!(out.get("sha256").is_none());
    let out = mcp.call("rr_stat", json!({"path": "./src/../src/a.txt", "include_sha256": true})).ok();
    assert_eq!(out["sha256"], sha(b"hello\n").to_hex());
    assert_eq!(out["path"], "src/a.txt", "the canonical workspace path");
}

#[test]
fn read_bytes_pages_a_file_to_eof() {
    let mcp = Mcp::start();
    let text = numbered(100);
    mcp.ws.put("log.txt", text.as_bytes());
    let mut offset = 0;
    let mut got = String::new();
    loop {
        let out = mcp.call("rr_read_bytes", json!({"path": "log.txt", "offset": offset, "max_bytes": 97})).ok();
        assert_eq!(out["offset"], offset);
        assert_eq!(out["size"], text.len());
        assert_eq!(out["encoding"], "utf-8");
        let read = out["bytes_read"].as_u64().unwrap();
        assert!(read <= 97);
        assert_eq!(out["next_offset"], offset + read);
        got.push_str(out["content"].as_str().unwrap());
        offset += read;
        if out["eof"] == true {
            break;
        }
    }
    assert_eq!(got, text);
    // Defaults: the whole small file at once.
    let out = mcp.call("rr_read_bytes", json!({"path": "log.txt"})).ok();
    assert_eq!((out["bytes_read"].as_u64(), out["eof"].as_bool()), (Some(text.len() as u64), Some(true)));
    // Reading at the end is an empty window, not an error.
    let out = mcp.call("rr_read_bytes", json!({"path": "log.txt", "offset": text.len()})).ok();
    assert_eq!((out["bytes_read"].as_u64(), out["content"].as_str()), (Some(0), Some("")));
}

#[test]
fn one_byte_read_returns_at_most_the_policy_s_read_cap_issue_16_item_10() {
    // S0's premise: a 550 KB log is paged, not returned whole, by default.
    let mcp = Mcp::start();
    let log = numbered(60_000);
    assert!(log.len() > 550_000);
    mcp.ws.put("big.log", log.as_bytes());
    let out = mcp.call("rr_read_bytes", json!({"path": "big.log", "max_bytes": 2 << 20})).ok();
    assert_eq!(out["bytes_read"], 65536, "the default cap");
    assert_eq!((out["next_offset"].as_u64(), out["eof"].as_bool()), (Some(65536), Some(false)));
    let cursor = mcp.call("rr_make_cursor", json!({"path": "big.log", "max_bytes": 1 << 20})).ok();
    assert_eq!(cursor["max_bytes"], 65536);
    let next = mcp.call("rr_read_next", json!({"cursor": cursor["cursor"], "max_bytes": 1 << 20})).ok();
    assert_eq!(next["bytes_read"], 65536);
    let listed = mcp.tools_json();
    let description = listed.iter().find(|t| t["name"] == "rr_read_bytes").unwrap()["description"].to_string();
    assert!(description.contains("read_cap_bytes"), "{description}");
    drop(mcp);
    // A policy sets it (and a smaller max_bytes still wins).
    let ws = crate::support::Ws::new();
    ws.put(".resilient_write/policy.yaml", b"read_cap_bytes: 1000\n");
    ws.put("big.log", log.as_bytes());
    let mcp = Mcp::start_with(ws, Default::default());
    assert_eq!(mcp.call("rr_read_bytes", json!({"path": "big.log"})).ok()["bytes_read"], 1000);
    assert_eq!(mcp.call("rr_read_bytes", json!({"path": "big.log", "max_bytes": 10})).ok()["bytes_read"], 10);
    let cursor = mcp.call("rr_make_cursor", json!({"path": "big.log"})).ok();
    assert_eq!(mcp.call("rr_read_next", json!({"cursor": cursor["cursor"]})).ok()["bytes_read"], 1000);
    for bad in ["read_cap_bytes: 0\n", "read_cap_bytes: 4194304\n", "read_cap_bytes: lots\n"] {
        let err = rwfs::policy::Policy::parse(bad).expect_err(bad);
        assert_eq!(err.reason().code(), "bad_policy", "{bad}");
    }
}

#[test]
fn read_bytes_never_splits_a_utf8_character() {
    let mcp = Mcp::start();
    mcp.ws.put("euro.txt", "€€€".as_bytes());
    let out = mcp.call("rr_read_bytes", json!({"path": "euro.txt", "max_bytes": 4})).ok();
    assert_eq!(out["content"], "€", "reference bug: the window's end became U+FFFD");
    assert_eq!(out["bytes_read"], 3);
    assert_eq!(out["next_offset"], 3);
    assert_eq!(out["eof"], false);
    // A window smaller than one character grows to hold it.
    let out = mcp.call("rr_read_bytes", json!({"path": "euro.txt", "offset": 3, "max_bytes": 1})).ok();
    assert_eq!((out["content"].as_str(), out["next_offset"].as_u64()), (Some("€"), Some(6)));
    // Other encodings and error modes.
    mcp.ws.put("bin.dat", b"a\xffb");
    let out = mcp.call("rr_read_bytes", json!({"path": "bin.dat"})).ok();
    assert_eq!(out["content"], "a\u{FFFD}b");
    let out = mcp.call("rr_read_bytes", json!({"path": "bin.dat", "errors": "ignore"})).ok();
    assert_eq!(out["content"], "ab");
    let out = mcp.call("rr_read_bytes", json!({"path": "bin.dat", "encoding": "latin-1"})).ok();
    assert_eq!((out["content"].as_str(), out["encoding"].as_str()), (Some("a\u{ff}b"), Some("latin-1")));
    let env = mcp.call("rr_read_bytes", json!({"path": "bin.dat", "errors": "strict"})).err();
    assert_eq!(
        (env["error"].as_str(), env["context"]["reason"].as_str()),
        (Some("policy_violation"), Some("decode_error"))
    );
    assert_eq!(env["context"]["offset"], 1);
}

#[test]
fn out_of_range_arguments_are_invalid_argument_envelopes() {
    let mcp = Mcp::start();
    mcp.ws.put("a.txt", b"abc");
    for (tool, args, argument) in [
        ("rr_read_bytes", json!({"path": "a.txt", "offset": 4}), "offset"),
        ("rr_read_bytes", json!({"path": "a.txt", "max_bytes": 0}), "max_bytes"),
        ("rr_read_bytes", json!({"path": "a.txt", "encoding": "ebcdic"}), "encoding"),
        ("rr_read_lines", json!({"path": "a.txt", "start_line": 0}), "start_line"),
        ("rr_read_lines", json!({"path": "a.txt", "max_lines": 0}), "max_lines"),
        ("rr_read_tail", json!({"path": "a.txt", "max_lines": 0}), "max_lines"),
        ("rr_search_then_page", json!({"path": "a.txt", "query": ""}), "query"),
        ("rr_search_then_page", json!({"path": "a.txt", "query": "a\nb"}), "query"),
        ("rr_search_then_page", json!({"path": "a.txt", "query": "a", "max_matches": 0}), "max_matches"),
        ("rr_search_then_page", json!({"path": "a.txt", "query": "a", "from_line": 0}), "from_line"),
        ("rr_make_cursor", json!({"path": "a.txt", "offset": 9}), "offset"),
    ] {
        let env = mcp.call(tool, args.clone()).err();
        assert_eq!(env["error"], "policy_violation", "{tool} {args}: {env}");
        assert_eq!(env["context"]["reason"], "invalid_argument", "{tool} {args}: {env}");
        assert_eq!(env["context"]["argument"], argument, "{tool} {args}: {env}");
        assert_eq!(env["context"]["tool"], tool);
    }
    // Above the caps is capped, not refused.
    let out = mcp.call("rr_make_cursor", json!({"path": "a.txt", "max_bytes": 1u64 << 40})).ok();
    assert_eq!(out["max_bytes"], rwfs::policy::DEFAULT_READ_CAP_BYTES);
    // Negative numbers do not fit the schema.
    let env = mcp.call("rr_read_bytes", json!({"path": "a.txt", "offset": -1})).err();
    assert_eq!(env["context"]["reason"], "invalid_arguments");
}

#[test]
fn missing_files_are_stale_precondition_not_found() {
    let mcp = Mcp::start();
    for tool in READ_TOOLS.iter().filter(|t| **t != "rr_read_next") {
        let env = mcp.call(tool, path_args(tool, "nope.txt")).err();
        assert_eq!(env["error"], "stale_precondition", "{tool}: {env}");
        assert_eq!(env["context"]["reason"], "not_found", "{tool}: {env}");
    }
}

#[test]
fn read_lines_windows_and_eof_when_exactly_max_lines_remain() {
    let mcp = Mcp::start();
    mcp.ws.put("ten.txt", numbered(10).as_bytes());
    let out = mcp.call("rr_read_lines", json!({"path": "ten.txt", "start_line": 3, "max_lines": 4})).ok();
    assert_eq!(out["content"], "3|line 3\n4|line 4\n5|line 5\n6|line 6");
    assert_eq!((out["start_line"].as_u64(), out["end_line"].as_u64()), (Some(3), Some(6)));
    assert_eq!((out["lines_returned"].as_u64(), out["eof"].as_bool()), (Some(4), Some(false)));
    let out = mcp.call("rr_read_lines", json!({"path": "ten.txt", "start_line": 7, "max_lines": 4})).ok();
    assert_eq!(out["lines_returned"], 4);
    assert_eq!(out["eof"], true, "reference bug: eof false when exactly max_lines remain");
    let out = mcp.call("rr_read_lines", json!({"path": "ten.txt"})).ok();
    assert_eq!((out["lines_returned"].as_u64(), out["eof"].as_bool()), (Some(10), Some(true)));
    let out = mcp.call("rr_read_lines", json!({"path": "ten.txt", "start_line": 50})).ok();
    assert_eq!(
        (out["lines_returned"].as_u64(), out["eof"].as_bool(), out["content"].as_str()),
        (Some(0), Some(true), Some(""))
    );
}

#[test]
fn long_lines_are_cut_and_counted() {
    let mcp = Mcp::start();
    let long = "x".repeat(100_000);
    mcp.ws.put("min.js", format!("{long}\nshort\n").as_bytes());
    let out = mcp.call("rr_read_lines", json!({"path": "min.js"})).ok();
    assert_eq!(out["truncated_lines"], 1);
    let content = out["content"].as_str().unwrap();
    assert!(content.len() < 20_000, "{}", content.len());
    assert!(content.contains("more bytes]\n2|short"), "{}", &content[content.len() - 40..]);
}

#[test]
fn read_tail_returns_the_last_lines_and_the_total() {
    let mcp = Mcp::start();
    mcp.ws.put("app.log", numbered(1000).as_bytes());
    let out = mcp.call("rr_read_tail", json!({"path": "app.log", "max_lines": 3})).ok();
    assert_eq!(out["content"], "998|line 998\n999|line 999\n1000|line 1000");
    assert_eq!(out["total_lines"], 1000);
    assert_eq!((out["start_line"].as_u64(), out["end_line"].as_u64()), (Some(998), Some(1000)));
    assert_eq!((out["lines_returned"].as_u64(), out["eof"].as_bool()), (Some(3), Some(true)));
    let out = mcp.call("rr_read_tail", json!({"path": "app.log"})).ok();
    assert_eq!((out["lines_returned"].as_u64(), out["start_line"].as_u64()), (Some(200), Some(801)));
    mcp.ws.put("empty.log", b"");
    let out = mcp.call("rr_read_tail", json!({"path": "empty.log"})).ok();
    assert_eq!((out["total_lines"].as_u64(), out["lines_returned"].as_u64()), (Some(0), Some(0)));
}

#[test]
fn search_then_page_pages_through_matches_with_context() {
    let mcp = Mcp::start();
    let mut text = String::new();
    for i in 1..=60 {
        text.push_str(&if i % 10 == 0 { format!("{i}: Error in step\n") } else { format!("{i}: ok\n") });
    }
    mcp.ws.put("run.log", text.as_bytes());
    let out = mcp.call("rr_search_then_page", json!({"path": "run.log", "query": "error", "max_matches": 2})).ok();
    assert_eq!(out["query"], "error");
    assert_eq!((out["matches_returned"].as_u64(), out["has_more"].as_bool()), (Some(2), Some(true)));
    assert_eq!(out["from_line"], 1);
    assert_eq!(out["next_from_line"], 21);
    let first = &out["matches"][0];
    assert_eq!(
        (first["match_line"].as_u64(), first["start_line"].as_u64(), first["end_line"].as_u64()),
        (Some(10), Some(8), Some(16))
    );
    assert_eq!(first["excerpt"].as_str().unwrap().lines().nth(2), Some("10|10: Error in step"));
    let mut lines = vec![10, 20];
    let mut from = 21;
    loop {
        let out = mcp
            .call(
                "rr_search_then_page",
                json!({"path": "run.log", "query": "ERROR", "from_line": from, "max_matches": 2}),
            )
            .ok();
        lines.extend(out["matches"].as_array().unwrap().iter().map(|m| m["match_line"].as_u64().unwrap()));
        from = out["next_from_line"].as_u64().unwrap();
        if out["has_more"] == false {
            break;
        }
    }
    assert_eq!(lines, [10, 20, 30, 40, 50, 60]);
    let last = mcp
        .call("rr_search_then_page", json!({"path": "run.log", "query": "error", "from_line": 60, "context_after": 6}))
        .ok();
    assert_eq!((last["matches"][0]["end_line"].as_u64(), last["has_more"].as_bool()), (Some(60), Some(false)));
    // Case-sensitive, and no match.
    let out =
        mcp.call("rr_search_then_page", json!({"path": "run.log", "query": "error", "case_sensitive": true})).ok();
    assert_eq!((out["matches_returned"].as_u64(), out["next_from_line"].as_u64()), (Some(0), Some(1)));
    assert_eq!(out["has_more"], false);
}

#[test]
fn relative_paths_cannot_leave_the_workspace_reference_read_bug() {
    let mcp = Mcp::start();
    // A file right next to the workspace, and a symlink to it inside.
    let outside = mcp
        .ws
        .path()
        .parent()
        .unwrap()
        .join(format!("{}-outside.txt", mcp.ws.path().file_name().unwrap().to_str().unwrap()));
    std::fs::write(&outside, b"outside secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, mcp.ws.abs("link.txt")).unwrap();
    let sneaky = format!("../{}", outside.file_name().unwrap().to_str().unwrap());
    let hostile = [
        sneaky.as_str(),
        "../../../etc/hostname",
        "a/../../etc/passwd",
        "/etc/passwd",
        outside.to_str().unwrap(),
        "link.txt",
        ".resilient_write/journal.jsonl",
        ".resilient_write/keys/cursor.key",
        "",
    ];
    for path in hostile {
        for tool in READ_TOOLS.iter().filter(|t| **t != "rr_read_next") {
            let env = mcp.call(tool, path_args(tool, path)).err();
            assert_eq!(env["error"], "policy_violation", "{tool} {path:?}: {env}");
            assert!(!env.to_string().contains("outside secret"));
        }
    }
    std::fs::remove_file(outside).unwrap();
}

#[test]
fn cursors_read_to_eof_and_survive_a_daemon_restart() {
    let mcp = Mcp::start();
    let text = format!("{}ünïcödé\n", numbered(500));
    mcp.ws.put("big.txt", text.as_bytes());
    let made = mcp.call("rr_make_cursor", json!({"path": "big.txt", "max_bytes": 1000})).ok();
    assert_eq!((made["offset"].as_u64(), made["max_bytes"].as_u64()), (Some(0), Some(1000)));
    assert_eq!(made["size"], text.len());
    assert_eq!(made["path"], "big.txt");
    let (read, last) = read_all_by_cursor(&mcp, made["cursor"].clone());
    assert_eq!(read, text);
    assert_eq!(last["next_offset"], text.len());
    // max_bytes overrides the cursor's window.
    let out = mcp.call("rr_read_next", json!({"cursor": made["cursor"], "max_bytes": 10})).ok();
    assert_eq!(out["bytes_read"], 10);
    // The key is private, made once, and hidden from the workspace tools.
    use std::os::unix::fs::PermissionsExt;
    let key = mcp.ws.abs(".resilient_write/keys/cursor.key");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(&key).unwrap().len(), 32);
    let cursor = out["cursor"].clone();
    let mcp = mcp.restart();
    let out = mcp.call("rr_read_next", json!({"cursor": cursor})).ok();
    assert_eq!((out["offset"].as_u64(), out["bytes_read"].as_u64()), (Some(10), Some(10)));
    assert_eq!(out["content"], &text[10..20]);
}

#[test]
fn forged_cursor_cannot_read_outside_reference_read_bug() {
    let mcp = Mcp::start();
    mcp.ws.put("a.txt", b"workspace text\n");
    let genuine = mcp.call("rr_make_cursor", json!({"path": "a.txt"})).ok()["cursor"].as_str().unwrap().to_string();
    let (payload, mac) = genuine.split_once('.').unwrap();
    // The reference's unsigned format, aimed outside.
    let reference = URL_SAFE_NO_PAD.encode(
        json!({"path": "../../../etc/passwd", "offset": 0, "max_bytes": 65536, "size": 0, "mtime_ns": 0}).to_string(),
    );
    // A genuine cursor whose payload was edited (path, then offset), the signature kept.
    let mut state: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    state["path"] = json!("../../../etc/passwd");
    let retargeted = format!("{}.{mac}", URL_SAFE_NO_PAD.encode(state.to_string()));
    let mut state: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    state["offset"] = json!(3);
    let moved = format!("{}.{mac}", URL_SAFE_NO_PAD.encode(state.to_string()));
    // A cursor signed by another workspace's key.
    let other = Mcp::start();
    other.ws.put("a.txt", b"workspace text\n");
    let foreign = other.call("rr_make_cursor", json!({"path": "a.txt"})).ok()["cursor"].clone();
    let flipped = format!("{payload}.{}", URL_SAFE_NO_PAD.encode([0u8; 32]));
    for forged in
        [json!(reference), json!(retargeted), json!(moved), foreign, json!(flipped), json!("not a cursor"), json!("")]
    {
        let env = mcp.call("rr_read_next", json!({"cursor": forged})).err();
        assert_eq!(env["error"], "policy_violation", "{forged}: {env}");
        assert_eq!(env["context"]["reason"], "cursor_invalid", "{forged}: {env}");
        assert_eq!(env["context"]["tool"], "rr_read_next");
    }
    // The genuine one still works.
    let out = mcp.call("rr_read_next", json!({"cursor": genuine})).ok();
    assert_eq!(out["content"], "workspace text\n");
}

#[test]
fn drift_is_file_changed_and_a_new_cursor_goes_on_paper_s3() {
    let mcp = Mcp::start();
    let text = numbered(200);
    mcp.ws.put("data.txt", text.as_bytes());
    let made = mcp.call("rr_make_cursor", json!({"path": "data.txt", "max_bytes": 100})).ok();
    let first = mcp.call("rr_read_next", json!({"cursor": made["cursor"]})).ok();
    let reached = first["next_offset"].as_u64().unwrap();
    // A same-size rewrite that keeps the mtime: only the ctime tells.
    let path = mcp.ws.abs("data.txt");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let rewritten = text.replace("line 150", "LINE 150");
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&path, rewritten.as_bytes()).unwrap();
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
    let env = mcp.call("rr_read_next", json!({"cursor": first["cursor"]})).err();
    assert_eq!(env["error"], "stale_precondition");
    assert_eq!(env["context"]["reason"], "file_changed", "reference bug: a same-size rewrite went unnoticed");
    let c = &env["context"];
    assert_eq!(
        (c["expected_size"].as_u64(), c["actual_size"].as_u64()),
        (Some(text.len() as u64), Some(text.len() as u64))
    );
    assert_eq!(c["expected_mtime_ns"], c["actual_mtime_ns"]);
    assert_ne!(c["expected_ctime_ns"], c["actual_ctime_ns"]);
    assert_eq!(c["path"], "data.txt");
    // S3: make a new cursor where reading stopped, and go on with the new content.
    let again = mcp.call("rr_make_cursor", json!({"path": "data.txt", "offset": reached, "max_bytes": 100})).ok();
    let (rest, _) = read_all_by_cursor(&mcp, again["cursor"].clone());
    assert_eq!(rest, rewritten[reached as usize..]);
    // A write through rwfs (a new inode) is drift too.
    let cursor = mcp.call("rr_make_cursor", json!({"path": "data.txt"})).ok()["cursor"].clone();
    mcp.call("rw_safe_write", json!({"path": "data.txt", "content": "more\n", "mode": "append"})).ok();
    let env = mcp.call("rr_read_next", json!({"cursor": cursor})).err();
    assert_eq!(env["context"]["reason"], "file_changed");
    assert_eq!(env["context"]["actual_size"], rewritten.len() + 5);
    // A deleted file is not found.
    let cursor = mcp.call("rr_make_cursor", json!({"path": "data.txt"})).ok()["cursor"].clone();
    std::fs::remove_file(&path).unwrap();
    let env = mcp.call("rr_read_next", json!({"cursor": cursor})).err();
    assert_eq!(
        (env["error"].as_str(), env["context"]["reason"].as_str()),
        (Some("stale_precondition"), Some("not_found"))
    );
}

#[test]
fn read_tools_are_listed_read_only() {
    let mcp = Mcp::start();
    let tools = mcp.tools_json();
    for name in READ_TOOLS {
        let tool = tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} not listed"));
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{name}");
        assert_eq!(tool["annotations"]["destructiveHint"], false, "{name}");
    }
    // Dotted aliases work for the companion's names too.
    mcp.ws.put("a.txt", b"x");
    mcp.call("rr.stat", json!({"path": "a.txt"})).ok();
}
