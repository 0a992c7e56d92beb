//! `rr_stat`, `rr_read_bytes`, `rr_read_lines`, `rr_read_tail`, `rr_search_then_page`,
//! `rr_make_cursor`, `rr_read_next`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};

use crate::tools::read::{
    MakeCursorArgs, ReadBytesArgs, ReadLinesArgs, ReadNextArgs, ReadTailArgs, SearchArgs, StatArgs,
};

use super::Server;

#[tool_router(router = read_router, vis = "pub(super)")]
impl Server {
    #[tool(
        name = "rr_stat",
        description = "Size and mtime_ns of a workspace file (and its sha256 with include_sha256), without reading it.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn rr_stat(
        &self,
        Parameters(args): Parameters<StatArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rr_stat", &ctx, move |t, c| t.rr_stat(c, args)).await
    }

    #[tool(
        name = "rr_read_bytes",
        description = "Read up to max_bytes (default 64 KiB) of a file from a byte offset. One call returns at most \
the policy's read_cap_bytes (default 65536, so one answer fits a tool-output budget): page a large file with \
next_offset, or rr_make_cursor and rr_read_next. A UTF-8 window never ends inside a character; continue at \
next_offset until eof.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn rr_read_bytes(
        &self,
        Parameters(args): Parameters<ReadBytesArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rr_read_bytes", &ctx, move |t, c| t.rr_read_bytes(c, args)).await
    }

    #[tool(
        name = "rr_read_lines",
        description = "Read a window of lines (default 400, cap 5000) from start_line, as \"N|line\" rows; eof says \
whether any line follows.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn rr_read_lines(
        &self,
        Parameters(args): Parameters<ReadLinesArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rr_read_lines", &ctx, move |t, c| t.rr_read_lines(c, args)).await
    }

    #[tool(
        name = "rr_read_tail",
        description = "The last max_lines lines (default 200, cap 5000) of a file, as \"N|line\" rows, with the total \
line count; streams, so it suits large logs.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn rr_read_tail(
        &self,
        Parameters(args): Parameters<ReadTailArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rr_read_tail", &ctx, move |t, c| t.rr_read_tail(c, args)).await
    }

    #[tool(
        name = "rr_search_then_page",
        description = "Find lines containing query (plain text; ASCII case folded unless case_sensitive) from \
from_line, with context excerpts; page on with next_from_line while has_more.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn rr_search_then_page(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rr_search_then_page", &ctx, move |t, c| t.rr_search_then_page(c, args)).await
    }

    #[tool(
        name = "rr_make_cursor",
        description = "A signed cursor for reading a file in windows with rr_read_next; it pins the file's version, \
so a change in between is reported (file_changed) instead of mixing versions.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn rr_make_cursor(
        &self,
        Parameters(args): Parameters<MakeCursorArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rr_make_cursor", &ctx, move |t, c| t.rr_make_cursor(c, args)).await
    }

    #[tool(
        name = "rr_read_next",
        description = "Read the next window of a cursor's file (rr_read_bytes output plus the next cursor). If the \
file changed: stale_precondition file_changed; make a new cursor at the offset you reached.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn rr_read_next(
        &self,
        Parameters(args): Parameters<ReadNextArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.run("rr_read_next", &ctx, move |t, c| t.rr_read_next(c, args)).await
    }
}
