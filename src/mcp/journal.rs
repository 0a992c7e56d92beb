//! `rw_journal_tail`, `rw_analytics`, `rw_history`, `rw_restore`, `rw_rejections`, `rw_approval_status`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};

use crate::tools::journal::{
    AnalyticsArgs, ApprovalStatusArgs, HistoryArgs, JournalTailArgs, RejectionsArgs, RestoreArgs,
};

use super::Server;

#[tool_router(router = journal_router, vis = "pub(super)")]
impl Server {
    #[tool(
        name = "rw_journal_tail",
        description = "The newest journal rows (default 20), oldest first, optionally only for one path or mode: \
who wrote what, when, with which sha256. Chunk manifests (derived state) are left out unless include_derived.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn journal_tail(
        &self,
        Parameters(args): Parameters<JournalTailArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_journal_tail", &ctx, move |t, c| t.journal_tail(c, args)).await
    }

    #[tool(
        name = "rw_analytics",
        description = "Statistics over the journal (optionally since a time): writes by mode and caller, hot paths, \
timeline, chunk sessions, checkpoints, write velocity.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn analytics(
        &self,
        Parameters(args): Parameters<AnalyticsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_analytics", &ctx, move |t, c| t.analytics(c, args)).await
    }

    #[tool(
        name = "rw_history",
        description = "Every version of a path the journal knows (also of deleted files): when, by whom, its sha256 \
and whether it can still be restored.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn history(
        &self,
        Parameters(args): Parameters<HistoryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_history", &ctx, move |t, c| t.history(c, args)).await
    }

    #[tool(
        name = "rw_restore",
        description = "Bring back a previous version of a file (by sha256 or a prefix of it, or by time with at) as \
a new journaled version; the current one stays restorable.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn restore(
        &self,
        Parameters(args): Parameters<RestoreArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_restore", &ctx, move |t, c| t.restore(c, args)).await
    }

    #[tool(
        name = "rw_rejections",
        description = "Writes the policy refused, newest first (id, path, time, rules); with id (or \"latest\") one \
rejection's full envelope: why, which lines, what to do instead.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn rejections(
        &self,
        Parameters(args): Parameters<RejectionsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_rejections", &ctx, move |t, c| t.rejections(c, args)).await
    }

    #[tool(
        name = "rw_approval_status",
        description = "Where a write the policy parked for a person's approval stands (id: the refusal's \
context.approval.id): pending, approved (installed), denied or superseded, with what to do. A pending one waits for \
the user: ask them; do not retry the write.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn approval_status(
        &self,
        Parameters(args): Parameters<ApprovalStatusArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_approval_status", &ctx, move |t, c| t.approval_status(c, args)).await
    }
}
