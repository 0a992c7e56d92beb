//! `rw_risk_score`, `rw_safe_write`, `rw_safe_replace`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};

use crate::tools::write::{RiskScoreArgs, SafeReplaceArgs, SafeWriteArgs};

use super::Server;

#[tool_router(router = write_router, vis = "pub(super)")]
impl Server {
    #[tool(
        name = "rw_risk_score",
        description = "Score a draft for secrets, personal data and size before writing it (nothing is written). \
Returns score, verdict (safe|low|medium|high), detected_patterns (never the secret itself) and suggested_actions. \
Act on suggested_actions and policy_action, not on the verdict alone: one vendor token scores \"low\" yet is \
refused by content filters (redact reason filter_risk_high).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn risk_score(
        &self,
        Parameters(args): Parameters<RiskScoreArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_risk_score", &ctx, move |t, c| t.risk_score(c, args)).await
    }

    #[tool(
        name = "rw_safe_write",
        description = "Write a file durably and atomically (temp, fsync, rename, fsync dir, journal row); the old \
version stays restorable. Modes create (default, refused if the file exists), overwrite, append. Content the \
workspace policy blocks (live credentials, private keys) is refused with an envelope and never written.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn safe_write(
        &self,
        Parameters(args): Parameters<SafeWriteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_safe_write", &ctx, move |t, c| t.safe_write(c, args)).await
    }

    #[tool(
        name = "rw_safe_replace",
        description = "Replace old_string with new_string in a UTF-8 file, durably: exactly one match by default \
(count N for exactly N, -1 for all); an ambiguous or missing match is refused and nothing is written.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn safe_replace(
        &self,
        Parameters(args): Parameters<SafeReplaceArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_safe_replace", &ctx, move |t, c| t.safe_replace(c, args)).await
    }
}
