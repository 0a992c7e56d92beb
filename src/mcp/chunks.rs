//! `rw_chunk_write`, `rw_chunk_append`, `rw_chunk_compose`, `rw_chunk_reset`,
//! `rw_chunk_status`, `rw_chunk_preview`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};

use crate::tools::chunks::{ChunkAppendArgs, ChunkComposeArgs, ChunkPreviewArgs, ChunkSessionArgs, ChunkWriteArgs};

use super::Server;

#[tool_router(router = chunks_router, vis = "pub(super)")]
impl Server {
    #[tool(
        name = "rw_chunk_write",
        description = "Write chunk `index` (1..999) of a chunk session, durably; writing an index again replaces \
that chunk, so retries are safe. Use it to build a large file piece by piece, then rw_chunk_compose.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn chunk_write(
        &self,
        Parameters(args): Parameters<ChunkWriteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_chunk_write", &ctx, move |t, c| t.chunk_write(c, args)).await
    }

    #[tool(
        name = "rw_chunk_append",
        description = "Add a chunk after the highest index of a chunk session (1 for a new session) and return \
its index; concurrent appends each get their own index. For files over ~5 KB: append pieces, then rw_chunk_compose.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn chunk_append(
        &self,
        Parameters(args): Parameters<ChunkAppendArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_chunk_append", &ctx, move |t, c| t.chunk_append(c, args)).await
    }

    #[tool(
        name = "rw_chunk_compose",
        description = "Join a session's chunks 1..N (with `separator`) into `output_path`, created or replaced \
like rw_safe_write (the policy gate judges the result). Refused while chunks are missing (context.missing) \
or fewer than total_expected; cleanup=true removes the session afterwards.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn chunk_compose(
        &self,
        Parameters(args): Parameters<ChunkComposeArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_chunk_compose", &ctx, move |t, c| t.chunk_compose(c, args)).await
    }

    #[tool(
        name = "rw_chunk_reset",
        description = "Remove a chunk session and all its chunks (they stay restorable from the journal). \
A missing session is not an error (existed=false).",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn chunk_reset(
        &self,
        Parameters(args): Parameters<ChunkSessionArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_chunk_reset", &ctx, move |t, c| t.chunk_reset(c, args)).await
    }

    #[tool(
        name = "rw_chunk_status",
        description = "Report a chunk session: whether it exists, total_expected and the indices present, so you \
can tell which chunk to (re)write.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn chunk_status(
        &self,
        Parameters(args): Parameters<ChunkSessionArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_chunk_status", &ctx, move |t, c| t.chunk_status(c, args)).await
    }

    #[tool(
        name = "rw_chunk_preview",
        description = "Dry-run rw_chunk_compose: the same checks, and the joined content returned instead of \
written (nothing changes on disk).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn chunk_preview(
        &self,
        Parameters(args): Parameters<ChunkPreviewArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_chunk_preview", &ctx, move |t, c| t.chunk_preview(c, args)).await
    }
}
