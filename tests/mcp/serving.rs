//! Where MCP is served: `rwfs mcp` on stdio (owning the engine, or relayed to the owner), the
//! mount daemon's socket, and streamable HTTP with a bearer token.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::Ws;
use crate::support::mcp::Stdio;
use crate::support::mount::{Mounted, rwfs};

#[test]
fn rwfs_mcp_serves_stdio_and_exits_at_eof() {
    let ws = Ws::new();
    let mut client = Stdio::start(ws.path(), "stdio-test");
    let tools = client.request("tools/list", json!({}));
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"rw_safe_write"), "{names:?}");
    client.call("rw_safe_write", json!({"path": "a.txt", "content": "hi\n"})).ok();
    assert!(client.finish().success());
    assert_eq!(ws.read("a.txt").unwrap(), b"hi\n");
    let rows = ws.rows();
    assert_eq!(rows.last().unwrap().caller, "stdio-test", "the row names the MCP client");
}

#[test]
fn unsafe_roots_are_refused_at_startup_reference_bug_root_check_per_call() {
    let start = Instant::now();
    let out = rwfs().args(["mcp", "-w", "/"]).stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsafe_workspace_root"));
    assert!(out.stdout.is_empty(), "nothing spoken on stdout before the refusal");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_second_session_relays_to_the_first_and_shares_its_engine() {
    let ws = Ws::new();
    let mut first = Stdio::start(ws.path(), "first");
    let mut second = Stdio::start(ws.path(), "second");
    second.call("rw_safe_write", json!({"path": "shared.txt", "content": "from second\n"})).ok();
    // One engine: the first sees the second's file at once (create is refused, naming it).
    let env = first.call("rw_safe_write", json!({"path": "shared.txt", "content": "from first\n"})).err();
    assert_eq!(env["context"]["reason"], "file_already_exists");
    // And a CLI write reaches the same engine through the socket instead of failing on the lock.
    let mut cli =
        rwfs().args(["write", "-w"]).arg(ws.path()).arg("cli.txt").stdin(std::process::Stdio::piped()).spawn().unwrap();
    cli.stdin.take().unwrap().write_all(b"cli\n").unwrap();
    assert!(cli.wait().unwrap().success());
    assert!(second.finish().success());
    assert!(first.finish().success());
    let rows = ws.rows();
    let callers: Vec<&str> = rows.iter().map(|r| r.caller.as_str()).collect();
    assert!(callers.contains(&"second") && callers.contains(&"rwfs-cli"), "{callers:?}");
}

#[test]
fn with_a_mount_mcp_writes_are_visible_through_it_and_mount_writes_through_mcp() {
    let mnt = Mounted::new();
    let mut client = Stdio::start(mnt.ws.path(), "relay-test");
    client.call("rw_safe_write", json!({"path": "from_mcp.txt", "content": "via mcp\n"})).ok();
    assert_eq!(mnt.read("from_mcp.txt").unwrap(), b"via mcp\n", "visible through the mount at once");
    client.call("rw_safe_write", json!({"path": "from_mcp.txt", "content": "again\n", "mode": "overwrite"})).ok();
    assert_eq!(mnt.read("from_mcp.txt").unwrap(), b"again\n", "the mount's caches were invalidated");
    mnt.write("from_mount.txt", b"via mount\n").unwrap();
    let env = client.call("rw_safe_write", json!({"path": "from_mount.txt", "content": "x"})).err();
    let sha = rwfs::sha::Sha256::of(b"via mount\n").to_hex();
    assert_eq!(env["context"]["existing_sha256"], sha, "the daemon's engine sees the mount's commit");
    assert!(client.finish().success());
    let row = mnt.ws.rows().into_iter().find(|r| r.path == "from_mcp.txt").unwrap();
    assert_eq!(row.caller, "relay-test");
}

/// A raw HTTP/1.1 POST of one JSON-RPC message; status line and body.
fn post(port: u16, host: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    post_with(port, host, &auth, body)
}

/// [`post`] with `headers` (each line ending in CRLF) added.
fn post_with(port: u16, host: &str, headers: &str, body: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer)
}

#[test]
fn http_needs_the_bearer_token_and_a_loopback_host_reference_bug_21() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let mnt = Mounted::with(Ws::new(), false, &["--mcp-http", &addr]);
    let token_file = mnt.ws.abs(".resilient_write/mcp-http.token");
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_string();
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let err = std::fs::read(mnt.path(".resilient_write/mcp-http.token")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::ENOENT), "the token is hidden from the mount");
    // The daemon's own names (its lock, socket link, token) are the layout table's.
    for dirent in std::fs::read_dir(mnt.ws.abs(".resilient_write")).unwrap() {
        let name = dirent.unwrap().file_name().into_string().unwrap();
        assert!(rwfs::durable::layout::state_entry(&name).is_some(), "{name} is not in durable::layout");
    }
    assert!(mnt.ws.abs(".resilient_write/rwfs.sock").symlink_metadata().is_ok());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "http-test", "version": "0"}}})
    .to_string();
    let (status, _) = post(port, &addr, None, &init);
    assert_eq!(status, 401, "no token");
    let (status, _) = post(port, &addr, Some("wrong"), &init);
    assert_eq!(status, 401, "wrong token");
    let (status, _) = post(port, "evil.example:80", Some(&token), &init);
    assert_eq!(status, 403, "a non-loopback Host is refused (DNS rebinding)");
    let (status, body) = post(port, &addr, Some(&token), &init);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"serverInfo\""), "{body}");
}

/// `rwfs mcp --http 127.0.0.1:0` on `ws`: the child and the address it reports on stderr.
fn mcp_http(ws: &Ws) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = rwfs()
        .args(["mcp", "-w"])
        .arg(ws.path())
        .args(["--http", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|rest| rest.split('/').next()).map(str::to_string);
    let addr = addr.unwrap_or_else(|| panic!("no address on stderr: {line}"));
    // Keep draining stderr so the child never blocks on it.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, addr)
}

#[test]
fn http_callers_are_the_clients_names_and_rwfs_mcp_serves_http_without_a_mount_issue_16_item_8() {
    let ws = Ws::new();
    let start = Instant::now();
    let (mut child, addr) = mcp_http(&ws);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let token = std::fs::read_to_string(ws.abs(".resilient_write/mcp-http.token")).unwrap().trim().to_string();
    let auth = format!("Authorization: Bearer {token}\r\n");
    assert_eq!(post_with(port, &addr, "", "{}").0, 401, "the token is required here too");
    // A legacy client: initialize, then a call in its session.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "legacy-agent", "version": "0"}}});
    let (status, answer) = post_with(port, &addr, &auth, &init.to_string());
    assert_eq!(status, 200, "{answer}");
    let session = answer
        .lines()
        .find_map(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:").then(|| l[15..].trim().to_string()))
        .unwrap_or_else(|| panic!("no session id: {answer}"));
    let in_session = format!("{auth}Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post_with(port, &addr, &in_session, &initialized.to_string()).0, 202);
    let call = |id: u64, path: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "rw_safe_write", "arguments": {"path": path, "content": "hi\n"}}})
    };
    let (status, answer) = post_with(port, &addr, &in_session, &call(2, "legacy.txt").to_string());
    assert!(status == 200 && answer.contains("\\\"ok\\\":true"), "{answer}");
    // A 2026-07-28 client: no session, its name in every request's `_meta`.
    let mut stateless = call(3, "stateless.txt");
    stateless["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "stateless-agent", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let headers =
        format!("{auth}MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: rw_safe_write\r\n");
    let (status, answer) = post_with(port, &addr, &headers, &stateless.to_string());
    assert!(status == 200 && answer.contains("\\\"ok\\\":true"), "{answer}");
    // The same client again, on another connection (another run of it, say).
    let mut again = call(4, "stateless-again.txt");
    again["params"]["_meta"] = stateless["params"]["_meta"].clone();
    let (status, answer) = post_with(port, &addr, &headers, &again.to_string());
    assert!(status == 200 && answer.contains("\\\"ok\\\":true"), "{answer}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "stops cleanly on SIGTERM: {status}");
    assert!(start.elapsed() < Duration::from_secs(30));
    let rows = ws.rows();
    let caller = |path: &str| rows.iter().find(|r| r.path == path).map(|r| r.caller.clone());
    assert_eq!(caller("legacy.txt").as_deref(), Some("legacy-agent"));
    assert_eq!(caller("stateless.txt").as_deref(), Some("stateless-agent"), "not rmcp's own name");
    // A stateless client's session is its connection, never its name (which every run shares).
    let session = |path: &str| rows.iter().find(|r| r.path == path).and_then(|r| r.session.clone()).unwrap();
    let (one, two) = (session("stateless.txt"), session("stateless-again.txt"));
    assert!(one.starts_with("mcp-") && !one.contains("stateless-agent"), "{one}");
    assert_ne!(one, two, "two connections, two sessions");
    assert_ne!(one, session("legacy.txt"));
}

#[test]
fn the_catalogue_has_every_reference_tool_and_rwfs_own() {
    let mcp = crate::support::mcp::Mcp::start();
    let names = mcp.tool_names();
    let expected = [
        // resilient-write 0.3.0, wire names.
        "rw_risk_score",
        "rw_safe_write",
        "rw_safe_replace",
        "rw_chunk_write",
        "rw_chunk_append",
        "rw_chunk_compose",
        "rw_chunk_reset",
        "rw_chunk_status",
        "rw_chunk_preview",
        "rw_scratch_put",
        "rw_scratch_ref",
        "rw_scratch_get",
        "rw_handoff_write",
        "rw_handoff_read",
        "rw_journal_tail",
        "rw_validate",
        "rw_analytics",
        "rw_checkpoint",
        "rw_checkpoint_read",
        "rw_checkpoint_list",
        "rw_checkpoint_cleanup",
        // resilient-read.
        "rr_stat",
        "rr_read_bytes",
        "rr_read_lines",
        "rr_read_tail",
        "rr_search_then_page",
        "rr_make_cursor",
        "rr_read_next",
        // rwfs.
        "rw_history",
        "rw_restore",
        "rw_rejections",
        "rw_diff",
        "rw_rewind",
        "rw_approval_status",
        "rw_blame",
    ];
    let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(names, expected);
    // Every dotted reference name is an alias.
    mcp.call("rw.chunk_status", json!({"session": "s1"})).ok();
    mcp.call("rr.stat", json!({"path": "nothing-here"})).err();
}
