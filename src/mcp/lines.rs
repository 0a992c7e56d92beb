//! The line checker in front of rmcp on stdio and the daemon's socket (not the engine's write
//! gate: this one judges only the shape of JSON-RPC lines).
//!
//! rmcp drops a line that is not JSON without a word, and answers some ill-shaped messages
//! without their id; a client then waits forever. [`check_lines`] reads the client's lines itself
//! (bounded at [`MAX_LINE`]), answers every line that is not one JSON-RPC 2.0 message with a
//! JSON-RPC error — parse error (-32700) or invalid request (-32600), invalid params (-32602)
//! for non-object params, with the message's id when one can be read, else `id: null` — and
//! hands only the rest to rmcp. Replies of both are written whole lines at a time, so they
//! never interleave. It does not judge methods or params beyond their shape: that stays rmcp's.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest line read, newline included: rmcp's own bound, so no line handed on is one it
/// would drop. Longer ones are skipped and answered.
pub const MAX_LINE: usize = 16 << 20;

/// Put the checker between a client (`read`, `write`) and rmcp: the pair rmcp serves on, and the
/// task that writes to the client, which ends once rmcp has closed its side and every reply
/// is written.
pub fn check_lines<R, W>(read: R, write: W) -> ((DuplexStream, DuplexStream), JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_read, feed) = tokio::io::duplex(64 << 10);
    let (rmcp_write, answers) = tokio::io::duplex(64 << 10);
    let (out, mut lines) = mpsc::channel::<Vec<u8>>(16);
    // The reader's errors only matter while rmcp is serving: it holds a weak sender, so the
    // writer stops with rmcp.
    tokio::spawn(read_client(read, feed, out.downgrade()));
    tokio::spawn(async move {
        let mut answers = BufReader::new(answers);
        loop {
            let mut line = Vec::new();
            match answers.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if out.send(line).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let writer = tokio::spawn(async move {
        let mut write = write;
        while let Some(line) = lines.recv().await {
            if write.write_all(&line).await.is_err() || write.flush().await.is_err() {
                break;
            }
        }
    });
    ((rmcp_read, rmcp_write), writer)
}

/// Copy the client's valid lines to rmcp and answer the others, until the client or rmcp ends.
async fn read_client<R: AsyncRead + Unpin>(read: R, mut feed: DuplexStream, out: mpsc::WeakSender<Vec<u8>>) {
    let mut read = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let Some(whole) = read_line(&mut read, &mut line).await else { break };
        let verdict = if whole { check(&line) } else { Err(too_long()) };
        match verdict {
            Ok(()) => {
                line.push(b'\n');
                if feed.write_all(&line).await.is_err() {
                    break;
                }
            }
            Err(Some(reply)) => {
                let Some(out) = out.upgrade() else { break };
                let mut reply = reply.to_string().into_bytes();
                reply.push(b'\n');
                if out.send(reply).await.is_err() {
                    break;
                }
            }
            Err(None) => {}
        }
    }
}

/// Read one line (without its `\n` or `\r\n`) into `line`: `Some(true)` when it was whole,
/// `Some(false)` when it was over [`MAX_LINE`] (its bytes are skipped, not kept), `None` at the
/// end of input or on an error. A last line without a newline is dropped, as rmcp does.
async fn read_line<R: AsyncRead + Unpin>(read: &mut BufReader<R>, line: &mut Vec<u8>) -> Option<bool> {
    let mut whole = true;
    loop {
        let available = read.fill_buf().await.ok()?;
        if available.is_empty() {
            return None;
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        if whole && line.len() + take <= MAX_LINE {
            line.extend_from_slice(&available[..take]);
        } else {
            whole = false;
            line.clear();
        }
        read.consume(take);
        if newline.is_some() {
            if line.ends_with(b"\n") {
                line.pop();
            }
            if line.ends_with(b"\r") {
                line.pop();
            }
            return Some(whole);
        }
    }
}

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// Whether `line` may go to rmcp: `Ok`, or the error to answer (`None`: drop it unanswered,
/// for an ill-formed response, which must never be answered — two peers would echo errors
/// forever).
pub fn check(line: &[u8]) -> Result<(), Option<Value>> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let message: Value = serde_json::from_slice(line)
        .map_err(|e| Some(error(Value::Null, PARSE_ERROR, &format!("Parse error: {e}"))))?;
    let Value::Object(fields) = &message else {
        let what = if message.is_array() { "a batch (not supported by MCP)" } else { "not an object" };
        return Err(Some(error(Value::Null, INVALID_REQUEST, &format!("Invalid request: {what}"))));
    };
    let id = match fields.get("id") {
        None => Value::Null,
        Some(id @ Value::String(_)) => id.clone(),
        Some(id @ Value::Number(n)) if n.is_i64() || n.is_u64() => id.clone(),
        Some(_) => return Err(invalid(Value::Null, "id must be a string or an integer")),
    };
    let response = fields.contains_key("result") || fields.contains_key("error");
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(if response { None } else { invalid(id, "jsonrpc must be \"2.0\"") });
    }
    match fields.get("method") {
        Some(Value::String(_)) => match fields.get("params") {
            None | Some(Value::Object(_)) => Ok(()),
            Some(_) => Err(Some(error(id, INVALID_PARAMS, "Invalid params: params must be an object"))),
        },
        Some(_) => Err(invalid(id, "method must be a string")),
        None if response && !id.is_null() => Ok(()),
        None if response => Err(None),
        None => Err(invalid(id, "no method, result or error")),
    }
}

fn too_long() -> Option<Value> {
    invalid(Value::Null, &format!("message longer than {} MiB", MAX_LINE >> 20))
}

fn invalid(id: Value, why: &str) -> Option<Value> {
    Some(error(id, INVALID_REQUEST, &format!("Invalid request: {why}")))
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}
