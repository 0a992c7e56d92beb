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
    runtime: tokio::runtime::Runtime,
    client: Option<RunningService<RoleClient, ()>>,
}

impl Mcp {
    pub fn start() -> Mcp {
        Mcp::start_with(Ws::new(), Settings::default())
    }

    pub fn start_with(ws: Ws, settings: Settings) -> Mcp {
        let engine = Arc::new(ws.open());
        let tools = Arc::new(Tools::new(engine.clone(), settings, Arc::new(|_: &str| {})));
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let client = runtime.block_on(async move {
            let (server_end, client_end) = tokio::io::duplex(1 << 20);
            tokio::spawn(async move {
                let service = Server::new(tools, Peer::default()).serve(server_end).await.expect("serve");
                let _ = service.waiting().await;
            });
            ().serve(client_end).await.expect("client")
        });
        Mcp { ws, engine, runtime, client: Some(client) }
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
        let client = self.client.as_ref().unwrap();
        let params = CallToolRequestParams::new(tool.to_string())
            .with_arguments(args.as_object().cloned().expect("arguments are an object"));
        let result = self.runtime.block_on(client.call_tool(params)).unwrap_or_else(|e| panic!("call {tool}: {e}"));
        let text = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
        Answer {
            is_error: result.is_error == Some(true),
            value: result.structured_content.clone().unwrap_or(Value::Null),
            text,
        }
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

impl Drop for Mcp {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.cancel());
        }
    }
}
