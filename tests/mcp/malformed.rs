//! Malformed input on MCP stdio: every line that is not one valid JSON-RPC 2.0 message gets a
//! JSON-RPC error (parse error or invalid request, `id: null` where no id can be read), and the
//! session goes on serving the next line.

use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Ws;
use crate::support::mount::rwfs;

/// `rwfs mcp` spoken to in raw lines; its stdout read on a thread so every wait is bounded.
struct Raw {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Raw {
    fn start(root: &std::path::Path) -> Raw {
        use std::process::Stdio;
        let mut child = rwfs()
            .args(["mcp", "-w"])
            .arg(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn rwfs mcp");
        let stdin = child.stdin.take();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut raw = Raw { child, stdin, lines };
        raw.send(
            json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}})
            .to_string()
            .as_bytes(),
        );
        let init = raw.next().expect("initialize answered");
        assert_eq!(init["id"], "init", "{init}");
        raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        raw
    }

    /// Write `line` and its newline.
    fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message on stdout, within 20 s.
    fn next(&mut self) -> Option<Value> {
        let line = self.lines.recv_timeout(Duration::from_secs(20)).ok()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        self.stdin.take();
        if crate::support::mcp::wait_timeout(&mut self.child, Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The malformed lines, each with the error codes it may get and the id the error must carry.
fn cases() -> Vec<(&'static str, Vec<u8>, &'static [i64], Value)> {
    let ping = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"ping"}}"#);
    let mut huge = br#"{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"pad":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', 17 << 20));
    huge.extend(br#""}}"#);
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes();
    let parse: &[i64] = &[-32700];
    let invalid: &[i64] = &[-32600];
    let params: &[i64] = &[-32600, -32602];
    vec![
        ("over 16 MiB", huge, &[-32700, -32600], Value::Null),
        ("100k-deep nesting", deep, parse, Value::Null),
        (
            "invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"u\",\"method\":\"ping\",\"x\":\"\xff\xfe\"}".to_vec(),
            parse,
            Value::Null,
        ),
        (
            "lone surrogate",
            br#"{"jsonrpc":"2.0","id":"s","method":"ping","params":{"s":"\ud800"}}"#.to_vec(),
            parse,
            Value::Null,
        ),
        (
            "raw NUL in a string",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"n\",\"method\":\"pi\0ng\"}".to_vec(),
            parse,
            Value::Null,
        ),
        (
            "raw NUL between tokens",
            b"{\"jsonrpc\":\"2.0\",\0\"id\":\"n\",\"method\":\"ping\"}".to_vec(),
            parse,
            Value::Null,
        ),
        ("jsonrpc 1.0", br#"{"jsonrpc":"1.0","id":"v1","method":"ping"}"#.to_vec(), invalid, json!("v1")),
        ("jsonrpc missing", br#"{"id":"v0","method":"ping"}"#.to_vec(), invalid, json!("v0")),
        ("jsonrpc a number", br#"{"jsonrpc":2.0,"id":"vn","method":"ping"}"#.to_vec(), invalid, json!("vn")),
        ("numeric method", br#"{"jsonrpc":"2.0","id":"m","method":42}"#.to_vec(), invalid, json!("m")),
        ("float id", br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.to_vec(), invalid, Value::Null),
        ("object id", br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_vec(), invalid, Value::Null),
        (
            "params an array",
            br#"{"jsonrpc":"2.0","id":"p","method":"tools/list","params":[1,2]}"#.to_vec(),
            params,
            json!("p"),
        ),
        ("a batch", format!("[{}]", ping("batched")).into_bytes(), invalid, Value::Null),
        ("two messages on one line", format!("{}{}", ping("two-a"), ping("two-b")).into_bytes(), parse, Value::Null),
        ("truncated", br#"{"jsonrpc":"2.0","id":"t","method":"pi"#.to_vec(), parse, Value::Null),
        ("a bare string", br#""ping""#.to_vec(), invalid, Value::Null),
        ("an empty object", b"{}".to_vec(), invalid, Value::Null),
        ("no method, no result", br#"{"jsonrpc":"2.0","id":"nm"}"#.to_vec(), invalid, json!("nm")),
    ]
}

#[test]
fn every_malformed_line_gets_a_json_rpc_error_and_the_session_goes_on() {
    let ws = Ws::new();
    check_every_case(Raw::start(ws.path()));
}

#[test]
fn relayed_to_the_daemons_socket_too() {
    let mnt = crate::support::mount::Mounted::new();
    check_every_case(Raw::start(mnt.ws.path()));
}

/// Send every case, each followed by a ping, and check the answers.
fn check_every_case(mut raw: Raw) {
    let mut unanswered = Vec::new();
    for (i, (name, line, codes, id)) in cases().into_iter().enumerate() {
        raw.send(&line);
        let after = format!("after-{i}");
        raw.send(json!({"jsonrpc": "2.0", "id": after, "method": "ping"}).to_string().as_bytes());
        let mut error = None;
        loop {
            let Some(message) = raw.next() else {
                panic!("{name}: no answer to the ping that followed it (the server stopped serving)")
            };
            if message["id"] == json!(after) {
                assert!(message["result"].is_object(), "{name}: {message}");
                break;
            }
            assert!(error.is_none(), "{name}: two answers: {error:?} and {message}");
            error = Some(message);
        }
        let Some(error) = error else {
            unanswered.push(name);
            continue;
        };
        assert_eq!(error["jsonrpc"], "2.0", "{name}: {error}");
        let code = error["error"]["code"].as_i64().unwrap_or_else(|| panic!("{name}: not an error: {error}"));
        assert!(codes.contains(&code), "{name}: code {code}, expected one of {codes:?}: {error}");
        assert_eq!(error["id"], id, "{name}: {error}");
    }
    assert!(unanswered.is_empty(), "left unanswered: {unanswered:?}");
    let tools = {
        raw.send(br#"{"jsonrpc":"2.0","id":"last","method":"tools/list"}"#);
        raw.next().expect("tools/list answered")
    };
    assert!(tools["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{tools}");
}
