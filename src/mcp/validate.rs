//! `rw_validate`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};

use crate::tools::validate::ValidateArgs;

use super::Server;

#[tool_router(router = validate_router, vis = "pub(super)")]
impl Server {
    #[tool(
        name = "rw_validate",
        description = "Check a draft's syntax before writing it (nothing is written): LaTeX (braces, environments, \
structure, typos, bare underscores, macros used but never defined), JSON, Python, YAML, TOML, or Markdown front matter. The format comes from \
format_hint, else target_path's extension, else the content. Always ok:true; valid is false only on severity \
'error'; errors[] hold {line, col, message, severity} with 1-based lines and columns.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn validate(
        &self,
        Parameters(args): Parameters<ValidateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rw_validate", &ctx, move |t, c| t.validate(c, args)).await
    }
}
