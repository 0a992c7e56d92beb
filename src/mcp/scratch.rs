//! `rw_scratch_put`, `rw_scratch_ref`, `rw_scratch_get`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};

use crate::tools::scratch::{ScratchGetArgs, ScratchPutArgs, ScratchRefArgs};

use super::Server;

#[tool_router(router = scratch_router, vis = "pub(super)")]
impl Server {
    #[tool(
        name = "rw_scratch_put",
        description = "Keep material that must not go into the tree (credentials, binaries, personal data) in \
the private scratchpad, named by its sha256 (0600, journaled, deduplicated), with an optional label. Write \
a reference to the sha256 in your files instead of the secret.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn scratch_put(
        &self,
        Parameters(args): Parameters<ScratchPutArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_scratch_put", &ctx, move |t, c| t.scratch_put(c, args)).await
    }

    #[tool(
        name = "rw_scratch_ref",
        description = "Look up a scratchpad entry by sha256 and/or label without its content: the latest \
matching index row, how many rows match (alias_count) and whether the blob is still there.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn scratch_ref(
        &self,
        Parameters(args): Parameters<ScratchRefArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_scratch_ref", &ctx, move |t, c| t.scratch_ref(c, args)).await
    }

    #[tool(
        name = "rw_scratch_get",
        description = "Return a scratchpad blob's content by sha256 (verified against it), as utf-8 or base64. \
Refused when the workspace keeps the scratchpad write-only (RW_SCRATCH_DISABLE_GET).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn scratch_get(
        &self,
        Parameters(args): Parameters<ScratchGetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_scratch_get", &ctx, move |t, c| t.scratch_get(c, args)).await
    }
}
