//! `rw_diff`, `rw_blame`, `rw_rewind`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};

use crate::tools::history::{BlameArgs, DiffArgs, RewindArgs};

use super::Server;

#[tool_router(router = history_router, vis = "pub(super)")]
impl Server {
    #[tool(
        name = "rw_diff",
        description = "What changed: with path, a unified diff between two versions of a file (default: before and \
after its last change; binary: sizes and digests); with since or session (\"self\": this session), a per-file \
summary (created, deleted, renamed, lines added and removed).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn diff(
        &self,
        Parameters(args): Parameters<DiffArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_diff", &ctx, move |t, c| t.diff(c, args)).await
    }

    #[tool(
        name = "rw_blame",
        description = "Who wrote each line: every line of a file's current version with the journal row that \
introduced it (seq, time, session, process, uid), paged by from_line/max_lines (total_lines, next_from_line). A \
line without an origin was written outside rwfs or in a version no longer kept; note says which.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn blame(
        &self,
        Parameters(args): Parameters<BlameArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_blame", &ctx, move |t, c| t.blame(c, args)).await
    }

    #[tool(
        name = "rw_rewind",
        description = "Undo work: the files a session changed (\"self\": this session's, its shell commands' too if \
they ran with its RWFS_SESSION), or the workspace since a time or seq, back to what they held before; optional path \
globs. Returns the plan (restore, recreate, remove; skipped paths with the reason, such as changed_outside_rwfs) and \
changes nothing unless confirm: true. Applied steps share a group id: undo_group takes the rewind back.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn rewind(
        &self,
        Parameters(args): Parameters<RewindArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_rewind", &ctx, move |t, c| t.rewind(c, args)).await
    }
}
