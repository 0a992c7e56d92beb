//! `rw_checkpoint`, `rw_checkpoint_read`, `rw_checkpoint_list`, `rw_checkpoint_cleanup`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};

use crate::tools::checkpoint::{CheckpointArgs, CheckpointCleanupArgs, CheckpointListArgs, CheckpointReadArgs};

use super::Server;

#[tool_router(router = checkpoint_router, vis = "pub(super)")]
impl Server {
    #[tool(
        name = "rw_checkpoint",
        description = "Save intermediate data (any JSON, any size) under a name, durably, outside your context: \
.resilient_write/checkpoints/<name>.json. Saving a name again replaces the data and keeps created_at. ttl: \
session (default, removed by rw_checkpoint_cleanup), permanent, or an ISO 8601 duration (PT1H, P7D).",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn checkpoint(
        &self,
        Parameters(args): Parameters<CheckpointArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_checkpoint", &ctx, move |t, c| t.checkpoint(c, args)).await
    }

    #[tool(
        name = "rw_checkpoint_read",
        description = "Read a checkpoint's data and metadata; verified says whether the file is the version the \
journal recorded.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn checkpoint_read(
        &self,
        Parameters(args): Parameters<CheckpointReadArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_checkpoint_read", &ctx, move |t, c| t.checkpoint_read(c, args)).await
    }

    #[tool(
        name = "rw_checkpoint_list",
        description = "List checkpoints (name, bytes, format, ttl, created_at, updated_at, sha256; corrupt:true \
for unreadable files).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn checkpoint_list(
        &self,
        Parameters(args): Parameters<CheckpointListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_checkpoint_list", &ctx, move |t, c| t.checkpoint_list(c, args)).await
    }

    #[tool(
        name = "rw_checkpoint_cleanup",
        description = "Remove expired checkpoints (duration ttl past since the last save) and, unless \
include_session=false, session ones; permanent ones stay. Removals are journaled and restorable. Corrupt files \
are reported, not removed, unless remove_corrupt=true.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn checkpoint_cleanup(
        &self,
        Parameters(args): Parameters<CheckpointCleanupArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_checkpoint_cleanup", &ctx, move |t, c| t.checkpoint_cleanup(c, args)).await
    }
}
