//! An in-process MCP client: the rwfs server and an rmcp client joined by `tokio::io::duplex`,
//! driven synchronously so tests read as calls and answers.

use std::sync::Arc;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use rwfs::engine::Engine;
use rwfs::mcp::{Peer, Server};
use rwfs::tools::{Settings, Tools};

use super::Ws;

/// One tool result: `isError` and the structured content.
#[derive(Debug, Clone)]
pub struct Answer {
    pub is_error: bool,
    pub value: Value,
    /// The first text content (the JSON copy of `value`).
    pub text: String,
}

impl Answer {
    /// The success payload; fails the test with the envelope otherwise.
    #[track_caller]
    pub fn ok(self) -> Value {
        assert!(!self.is_error, "expected success, got {}", self.value);
        assert_eq!(self.value["ok"], Value::Bool(true), "{}", self.value);
        self.value
    }

    /// The envelope of a failure; fails the test on success.
    #[track_caller]
    pub fn err(self) -> Value {
        assert!(self.is_error, "expected an envelope, got {}", self.value);
        assert_eq!(self.value["ok"], Value::Bool(false));
        assert_eq!(self.value["schema_version"], "1");
        self.value
    }
}

/// A workspace served over MCP in-process.
pub struct Mcp {
    pub ws: Ws,
    pub engine: Arc<Engine>,
    tools: Arc<Tools>,
    runtime: tokio::runtime::Runtime,
    client: Option<RunningService<RoleClient, ()>>,
    /// Further sessions over the same engine ([`Mcp::open_session`]).
    others: Vec<RunningService<RoleClient, ()>>,
}

impl Mcp {
    pub fn start() -> Mcp {
        Mcp::start_with(Ws::new(), Settings::default())
    }

    pub fn start_with(ws: Ws, settings: Settings) -> Mcp {
        let engine = Arc::new(ws.open());
        let tools = Arc::new(Tools::new(engine.clone(), settings));
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let client = runtime.block_on(connect(tools.clone()));
        Mcp { ws, engine, tools, runtime, client: Some(client), others: Vec::new() }
    }

    /// Connect another client (a second agent) to the same engine: a new MCP session. Its
    /// number, for [`Mcp::call_in`].
    pub fn open_session(&mut self) -> usize {
        let client = self.runtime.block_on(connect(self.tools.clone()));
        self.others.push(client);
        self.others.len()
    }

    /// [`Mcp::call`] in session `session` (0 is the first one).
    #[track_caller]
    pub fn call_in(&self, session: usize, tool: &str, args: Value) -> Answer {
        let client = match session {
            0 => self.client.as_ref().unwrap(),
            n => &self.others[n - 1],
        };
        call(&self.runtime, client, tool, args)
    }

    /// Stop the server and close the engine, then serve the same workspace again (a daemon
    /// restart).
    pub fn restart(mut self) -> Mcp {
        let ws = std::mem::replace(&mut self.ws, Ws::new());
        drop(self);
        Mcp::start_with(ws, Settings::default())
    }

    /// Call `tool` with `args` (a JSON object).
    #[track_caller]
    pub fn call(&self, tool: &str, args: Value) -> Answer {
        self.call_in(0, tool, args)
    }

    /// A JSON-RPC level failure (unknown tool, malformed request): its message.
    pub fn call_protocol_error(&self, tool: &str, args: Value) -> String {
        let client = self.client.as_ref().unwrap();
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap());
        match self.runtime.block_on(client.call_tool(params)) {
            Ok(result) => panic!("expected a protocol error, got {result:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// The names of the listed tools, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        let client = self.client.as_ref().unwrap();
        let tools = self.runtime.block_on(client.list_all_tools()).expect("list tools");
        let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        names
    }

    /// The listed tools as JSON.
    pub fn tools_json(&self) -> Vec<Value> {
        let client = self.client.as_ref().unwrap();
        let tools = self.runtime.block_on(client.list_all_tools()).expect("list tools");
        tools.iter().map(|t| serde_json::to_value(t).unwrap()).collect()
    }
}

/// A new session of `tools`: the server and an rmcp client joined in memory.
async fn connect(tools: Arc<Tools>) -> RunningService<RoleClient, ()> {
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let service = Server::new(tools, Peer::default()).serve(server_end).await.expect("serve");
        let _ = service.waiting().await;
    });
    ().serve(client_end).await.expect("client")
}

#[track_caller]
fn call(runtime: &tokio::runtime::Runtime, client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Answer {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().expect("arguments are an object"));
    let result = runtime.block_on(client.call_tool(params)).unwrap_or_else(|e| panic!("call {tool}: {e}"));
    let text = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    Answer {
        is_error: result.is_error == Some(true),
        value: result.structured_content.clone().unwrap_or(Value::Null),
        text,
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        for client in self.client.take().into_iter().chain(self.others.drain(..)) {
            let _ = self.runtime.block_on(client.cancel());
        }
    }
}

/// `rwfs mcp` as a child process, spoken to in JSON-RPC lines (what an agent host does).
pub struct Stdio {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    out: std::io::BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl Stdio {
    /// `rwfs mcp -w root`, initialized (legacy handshake) as client `name`.
    pub fn start(root: &std::path::Path, name: &str) -> Stdio {
        let mut command = super::mount::rwfs();
        command.args(["mcp", "-w"]).arg(root);
        Stdio::spawn(command, name)
    }

    /// `command` (which runs `rwfs mcp` on its stdio, itself or as a child: an agent harness),
    /// initialized (legacy handshake) as client `name`.
    pub fn spawn(mut command: std::process::Command, name: &str) -> Stdio {
        use std::process::Stdio as Pipe;
        let mut child =
            command.stdin(Pipe::piped()).stdout(Pipe::piped()).stderr(Pipe::inherit()).spawn().expect("spawn rwfs mcp");
        let stdin = child.stdin.take();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut s = Stdio { child, stdin, out, next_id: 1 };
        let init = s.request(
            "initialize",
            serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": name, "version": "0"}}),
        );
        assert!(init["result"]["serverInfo"]["name"] == "rwfs", "{init}");
        s.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write request");
        stdin.flush().unwrap();
    }

    /// Send a request; its response (the whole JSON-RPC message).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        use std::io::BufRead;
        let id = self.next_id;
        self.next_id += 1;
        self.send(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let n = self.out.read_line(&mut line).expect("read response");
            assert!(n > 0, "rwfs mcp closed stdout before answering {method}");
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if message["id"] == serde_json::json!(id) {
                return message;
            }
        }
    }

    /// `tools/call`; the result's structured content and `isError`.
    pub fn call(&mut self, tool: &str, args: Value) -> Answer {
        self.call_with(serde_json::json!({"name": tool, "arguments": args}))
    }

    /// `tools/call` as a 2026-07-28 client sends it: no session, its name in the request's
    /// `_meta`.
    pub fn call_stateless(&mut self, client: &str, tool: &str, args: Value) -> Answer {
        let meta = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        self.call_with(serde_json::json!({"name": tool, "arguments": args, "_meta": meta}))
    }

    fn call_with(&mut self, params: Value) -> Answer {
        let response = self.request("tools/call", params);
        let result = &response["result"];
        assert!(result.is_object(), "{response}");
        Answer {
            is_error: result["isError"] == Value::Bool(true),
            value: result["structuredContent"].clone(),
            text: result["content"][0]["text"].as_str().unwrap_or_default().to_string(),
        }
    }

    /// The process spawned (`rwfs mcp`, or the harness that runs it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Close stdin (end of session) and wait for the exit status.
    pub fn finish(mut self) -> std::process::ExitStatus {
        self.stdin.take();
        wait_timeout(&mut self.child, std::time::Duration::from_secs(30)).expect("rwfs mcp exits after EOF")
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        self.stdin.take();
        if wait_timeout(&mut self.child, std::time::Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Wait for `child` at most `limit`.
pub fn wait_timeout(child: &mut std::process::Child, limit: std::time::Duration) -> Option<std::process::ExitStatus> {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
