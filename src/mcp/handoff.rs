//! `rw_handoff_write`, `rw_handoff_read`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};

use crate::tools::handoff::{HandoffReadArgs, HandoffWriteArgs};

use super::Server;

#[tool_router(router = handoff_router, vis = "pub(super)")]
impl Server {
    #[tool(
        name = "rw_handoff_write",
        description = "Leave a handoff for the next agent: HANDOFF.md (YAML front matter + Markdown body), written \
durably. Required envelope keys: task_id, status (complete|partial|blocked|handed_off), agent, summary, next_steps. \
Omit last_good_state and rwfs fills it from the journal (every file written since started_at or the previous \
handoff, with its sha256). archive=true keeps the previous handoff under .resilient_write/handoffs/. Returns \
drift_warnings and checkpoint_refs.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn handoff_write(
        &self,
        Parameters(args): Parameters<HandoffWriteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_handoff_write", &ctx, move |t, c| t.handoff_write(c, args)).await
    }

    #[tool(
        name = "rw_handoff_read",
        description = "Read a handoff (default HANDOFF.md): its envelope, body, drift_warnings (files of \
last_good_state that are missing or changed since) and checkpoint_refs. Call it first when resuming a task.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn handoff_read(
        &self,
        Parameters(args): Parameters<HandoffReadArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_handoff_read", &ctx, move |t, c| t.handoff_read(c, args)).await
    }
}
