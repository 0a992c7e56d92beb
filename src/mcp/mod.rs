//! MCP glue: the tools of `tools/` served with rmcp, over stdio, the daemon's socket and
//! streamable HTTP (`serve.rs`).
//!
//! Every tool method is one line: run the tool on a blocking thread (the engine fsyncs) with a
//! [`Call`] naming the client and the tool, and turn its [`Outcome`] into a result: success →
//! `structuredContent` plus its JSON text; failure → the envelope v1, the same way, with
//! `isError: true`. JSON-RPC errors are left to rmcp for unknown tools and malformed requests.
//! Arguments that do not fit a tool's schema come back as an envelope too
//! (`policy_violation`, `context.reason: "invalid_arguments"`), and dotted names
//! (`rw.safe_write`) are accepted as aliases of the wire names (`rw_safe_write`).

mod checkpoint;
mod chunks;
mod handoff;
mod history;
mod http;
mod journal;
mod lines;
mod read;
mod scratch;
mod serve;
mod validate;
mod write;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool_handler};
use serde_json::json;

use crate::envelope::Envelope;
use crate::error::ErrorKind;
use crate::journal::{Actor, Via};
use crate::tools::{Call, Outcome, Tools};

pub use serve::{TOKEN_FILE, http_token, relay, serve_connection, serve_http, serve_stdio, settings_from_env};

/// The process on the other end of a connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct Peer {
    pub pid: Option<u32>,
    pub uid: Option<u32>,
}

/// The MCP server of one workspace.
#[derive(Clone)]
pub struct Server {
    tools: Arc<Tools>,
    peer: Peer,
    /// The peer's process name, read once: the agent host of a session does not change.
    comm: Option<String>,
    /// This session's id, unique within the process.
    session: u64,
    /// The agent run the client belongs to (`journal::session`: `RWFS_SESSION`, or the agent
    /// host that launched it), when one names it.
    agent: Option<String>,
    tool_router: ToolRouter<Server>,
}

/// The id of the next session.
static SESSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A new session id, unique within this process.
fn next_session() -> u64 {
    SESSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The session of the HTTP connection a request came on: a client without MCP sessions (the
/// 2026-07-28 protocol) is served one request at a time, so its session is its connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionSession(pub u64);

impl ConnectionSession {
    pub(crate) fn new() -> ConnectionSession {
        ConnectionSession(next_session())
    }
}

impl Server {
    pub fn new(tools: Arc<Tools>, peer: Peer) -> Server {
        // One router per tool family (one file each).
        let tool_router = Self::write_router()
            + Self::chunks_router()
            + Self::scratch_router()
            + Self::handoff_router()
            + Self::checkpoint_router()
            + Self::validate_router()
            + Self::read_router()
            + Self::journal_router()
            + Self::history_router();
        let comm = peer.pid.and_then(crate::process::comm);
        let agent = peer.pid.and_then(|pid| tools.engine().agent_session(pid));
        Server { tools, peer, comm, session: next_session(), agent, tool_router: portable(tool_router) }
    }

    /// Run `tool` on a blocking thread and shape its outcome.
    pub(super) async fn run<F>(
        &self,
        tool: &'static str,
        ctx: &RequestContext<RoleServer>,
        f: F,
    ) -> Result<CallToolResult, McpError>
    where
        F: FnOnce(&Tools, &Call) -> Outcome + Send + 'static,
    {
        let call = Call { actor: self.actor(tool, ctx) };
        let tools = self.tools.clone();
        let outcome = tokio::task::spawn_blocking(move || f(&tools, &call))
            .await
            .map_err(|e| McpError::internal_error(format!("tool {tool} panicked: {e}"), None))?;
        Ok(match outcome {
            Ok(value) => CallToolResult::structured(value),
            Err(failure) => CallToolResult::structured_error(failure.to_value()),
        })
    }

    fn actor(&self, tool: &'static str, ctx: &RequestContext<RoleServer>) -> Actor {
        // A 2026-07-28 client names itself in every request's `_meta` and has no session: over
        // HTTP each of its requests is served statelessly, with a stand-in `peer_info` whose
        // name is rmcp's own. A legacy client named itself in `initialize`.
        let per_request = ctx.meta.client_info().map(|info| info.name).filter(|name| !name.is_empty());
        let caller = per_request
            .or_else(|| ctx.peer.peer_info().map(|info| info.client_info.name.clone()))
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "mcp".to_string());
        // The journal's session (which also keys retry budgets): the agent run that launched the
        // client, else this connection — never the client's name, which every run of one agent
        // shares. A request served statelessly over HTTP belongs to its connection.
        let connection = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<ConnectionSession>())
            .map_or(self.session, |c| c.0);
        let label = self.agent.clone().unwrap_or_else(|| format!("mcp-{}-{connection}", std::process::id()));
        // The rows of this request: the agent's open tool call that runs it (the harness's
        // hook reported it), else this request of this connection.
        let tool_call = self
            .peer
            .pid
            .and_then(|pid| self.tools.engine().tool_call_of_pid(pid))
            .unwrap_or_else(|| format!("mcp-{}-{connection}-{}", std::process::id(), ctx.id));
        Actor {
            via: Via::Mcp,
            caller,
            pid: self.peer.pid,
            comm: self.comm.clone(),
            uid: self.peer.uid,
            tool: Some(tool),
            session_label: Some(label),
            group: None,
            tool_call: Some(tool_call),
        }
    }
}

#[tool_handler(
    router = self.tool_router,
    name = "rwfs",
    instructions = "rwfs: durable, scanned, journaled and reversible writes. Prefer rw_safe_write over \
raw file writes; for files over ~5 KB use rw_chunk_append then rw_chunk_compose; run rw_risk_score before \
content that may hold credentials and move secrets to rw_scratch_put; use rw_checkpoint for big intermediate \
data; call rw_handoff_write at the end of a session or when blocked. A failed call returns an envelope \
{ok:false, error, reason_hint, suggested_action, retry_budget, retriable, context}: follow suggested_action \
(retriable: false means the same call fails again: change it first); an \
identical retry of a refused call spends retry_budget."
)]
impl ServerHandler for Server {
    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name.contains('.') {
            request.name = request.name.replace('.', "_").into();
        }
        let tool = request.name.to_string();
        let tcc = ToolCallContext::new(self, request, context);
        let response = self.tool_router.call(tcc).await?;
        Ok(match response {
            CallToolResponse::Complete(result) if is_argument_error(&result) => CallToolResponse::Complete(
                argument_envelope(&tool, &result, self.tools.engine().policy().retry_budget()),
            ),
            other => other,
        })
    }
}

/// rmcp's in-band error for arguments that do not deserialize (text only, no envelope).
fn is_argument_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true) && result.structured_content.is_none() && first_text(result).is_some()
}

fn first_text(result: &CallToolResult) -> Option<&str> {
    result.content.first().and_then(|c| c.as_text()).map(|t| t.text.as_str())
}

/// The envelope of arguments that do not fit the tool's schema. Not a write attempt: the whole
/// `retry_budget` is left.
fn argument_envelope(tool: &str, result: &CallToolResult, retry_budget: u32) -> CallToolResult {
    let message = first_text(result).unwrap_or("invalid arguments");
    let mut envelope = Envelope::new(ErrorKind::PolicyViolation, retry_budget);
    envelope.reason_hint = "encoding".into();
    envelope.context.insert("tool".into(), json!(tool));
    envelope.context.insert("reason".into(), json!("invalid_arguments"));
    envelope.context.insert("message".into(), json!(message));
    envelope.context.insert("hint".into(), json!("fix the arguments to match the tool's input schema"));
    let value = serde_json::to_value(&envelope).expect("envelope serializes");
    CallToolResult::structured_error(value)
}

/// The routes with portable input schemas: an optional field's `"type": [T, "null"]` (and its
/// `"default": null`) becomes `"type": T`. Leaving the field out already means "none" (every such
/// field is `#[serde(default)]`, and `null` is still accepted), and clients that map schemas
/// onto a single-`type` dialect (Gemini's OpenAPI subset; the Inspector's `--strict` lint) reject
/// type arrays.
fn portable(mut router: ToolRouter<Server>) -> ToolRouter<Server> {
    for route in router.map.values_mut() {
        let mut schema = (*route.attr.input_schema).clone();
        drop_null_types(&mut schema);
        route.attr.input_schema = Arc::new(schema);
    }
    router
}

fn drop_null_types(schema: &mut serde_json::Map<String, serde_json::Value>) {
    use serde_json::Value;
    if let Some(Value::Array(types)) = schema.get("type")
        && types.len() == 2
        && let Some(null) = types.iter().position(|t| t == "null")
    {
        let single = types[1 - null].clone();
        schema.insert("type".into(), single);
        if schema.get("default") == Some(&Value::Null) {
            schema.remove("default");
        }
    }
    for value in schema.values_mut() {
        match value {
            Value::Object(inner) => drop_null_types(inner),
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(inner) = item {
                        drop_null_types(inner);
                    }
                }
            }
            _ => {}
        }
    }
}
