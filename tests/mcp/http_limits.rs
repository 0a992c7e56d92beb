//! The HTTP listener under hostile clients (127.0.0.1 only, bounded counts and times): idle
//! connections beyond the cap starve neither the mount nor a valid request, a half-sent request
//! is closed after the read timeout, and sessions are capped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::Ws;
use crate::support::mount::Mounted;

/// A mount serving HTTP on a free port, with `env` for the daemon; its port and token.
fn mount_http(env: &[(&str, &str)]) -> (Mounted, u16, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mnt = Mounted::with_env(Ws::new(), false, &["--mcp-http", &format!("127.0.0.1:{port}")], env);
    let token = std::fs::read_to_string(mnt.ws.abs(".resilient_write/mcp-http.token")).unwrap().trim().to_string();
    (mnt, port, token)
}

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "limits", "version": "0"}}})
    .to_string()
}

/// One POST of `body` on a fresh connection (with `session` if given): the status and the whole
/// answer (head and body), read within 10 s.
fn post(port: u16, token: &str, session: Option<&str>, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let session =
        session.map(|s| format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-06-18\r\n")).unwrap_or_default();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n{session}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).to_string();
    let status = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer)
}

/// How long until the server closes `stream` (reading whatever it answers), at most `limit`.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(start.elapsed()),
            Err(_) => return None,
        }
        if start.elapsed() > limit {
            return None;
        }
    }
}

#[test]
fn idle_connections_beyond_the_cap_starve_neither_the_mount_nor_a_valid_request() {
    let (mnt, port, token) = mount_http(&[("RWFS_MCP_HTTP_MAX_CONNECTIONS", "64")]);
    // A small descriptor limit, so that a bounded number of connections would exhaust it.
    let pid = mnt.daemon_pid();
    let limit = nix::libc::rlimit { rlim_cur: 256, rlim_max: 256 };
    // SAFETY: plain syscall on a pid, with a valid rlimit and no old-value pointer.
    let set = unsafe { nix::libc::prlimit(pid, nix::libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) };
    assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
    // Until one connect is not even taken off the backlog (the daemon stopped accepting).
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let idle: Vec<TcpStream> =
        (0..600).map_while(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()).collect();
    std::thread::sleep(Duration::from_millis(500));
    for i in 0..20 {
        let name = format!("f{i}.txt");
        mnt.write(&name, b"still served\n").unwrap_or_else(|e| panic!("write through the mount: {e}"));
        assert_eq!(mnt.read(&name).unwrap(), b"still served\n");
    }
    let (status, answer) = post(port, &token, None, &initialize());
    assert_eq!(status, 200, "a valid request is served beside {} idle connections: {answer}", idle.len());
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    assert!(fds < 200, "the daemon holds {fds} descriptors");
}

#[test]
fn a_half_sent_request_is_closed_after_the_read_timeout_and_sessions_are_capped() {
    let (_mnt, port, token) =
        mount_http(&[("RWFS_MCP_HTTP_READ_TIMEOUT_MS", "1000"), ("RWFS_MCP_HTTP_MAX_SESSIONS", "2")]);
    // Headers never finished.
    let mut head = TcpStream::connect(("127.0.0.1", port)).unwrap();
    head.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    // Headers whole, the body never finished.
    let mut body = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        body,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    )
    .unwrap();
    // Nothing sent at all.
    let mut silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    for (name, stream) in [("headers", &mut head), ("body", &mut body), ("nothing", &mut silent)] {
        let after = closed_within(stream, Duration::from_secs(8));
        assert!(after.is_some(), "a half-sent request ({name}) was not closed within 8 s");
    }
    // Three sessions with a cap of two: the oldest is gone, the newest works.
    let session = |answer: &str| {
        answer
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: ").or_else(|| l.strip_prefix("Mcp-Session-Id: ")))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| panic!("no session id in {answer}"))
    };
    let ids: Vec<String> = (0..3)
        .map(|_| {
            let (status, answer) = post(port, &token, None, &initialize());
            assert_eq!(status, 200, "{answer}");
            session(&answer)
        })
        .collect();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let (status, answer) = post(port, &token, Some(&ids[0]), &list);
    assert_eq!(status, 404, "the oldest session was evicted: {answer}");
    let (status, answer) = post(port, &token, Some(&ids[2]), &list);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("rw_safe_write"), "{answer}");
}
