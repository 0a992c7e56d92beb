"""What the scripted MCP clients here share: launching a server on stdio, calling tools, and
checking answers, with the Python `mcp` SDK (2.3.0, the client venv of setup.sh).

A script is a list of steps; each check that fails raises `Failed`, which `main()` turns into a
message on stderr and exit status 1. Every script prints one line per outcome so that the Rust
test (tests/mcp/clients.rs) shows what happened, and ends with `PASS <name>` on success.

Servers:
- rwfs:      `<rwfs> mcp -w <workspace>` (tool names `rw_safe_write`; the engine in-process, or
             relayed to the workspace's mount daemon)
- reference: `resilient-write` with RW_WORKSPACE and its working directory set to the workspace
             (tool names `rw.safe_write`)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import string
import sys
import traceback
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import Implementation

# The eight fields of envelope v1, all required (docs/architecture.md, The reference).
ENVELOPE_FIELDS = {
    "ok",
    "schema_version",
    "error",
    "reason_hint",
    "detected_patterns",
    "suggested_action",
    "retry_budget",
    "context",
}


class Failed(Exception):
    """A check of a script did not hold."""


def check(condition: Any, message: str, *detail: Any) -> None:
    if not condition:
        extra = "".join(f"\n  {json.dumps(d, default=str)[:2000]}" for d in detail)
        raise Failed(f"{message}{extra}")


def say(*parts: Any) -> None:
    print(*parts, flush=True)


def sha256(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()


ALNUM = string.ascii_letters + string.digits


def random_text(n: int, alphabet: str = ALNUM) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def put_file(ws: str, rel: str, data: bytes) -> None:
    """A file already in the workspace (made outside rwfs, as a repository's files are)."""
    path = os.path.join(ws, rel)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read_file(ws: str, rel: str) -> bytes:
    path = os.path.join(ws, rel)
    check(os.path.isfile(path), f"{rel} is a file in the workspace")
    with open(path, "rb") as f:
        return f.read()


@dataclass
class Answer:
    tool: str
    is_error: bool
    value: dict[str, Any]


def rwfs_server(rwfs: str, workspace: str) -> StdioServerParameters:
    return StdioServerParameters(command=rwfs, args=["mcp", "-w", workspace], env=dict(os.environ))


def reference_server(binary: str, workspace: str) -> StdioServerParameters:
    env = dict(os.environ)
    env["RW_WORKSPACE"] = workspace
    env["RW_STATE_DIR"] = workspace
    return StdioServerParameters(command=binary, args=[], env=env, cwd=workspace)


class Session:
    """One connected client; tool names are given in rwfs's form (`rw_safe_write`) and sent
    dotted when `dotted` (the reference)."""

    def __init__(self, client: Client, dotted: bool):
        self.client = client
        self.dotted = dotted

    def wire(self, tool: str) -> str:
        if self.dotted and "_" in tool:
            prefix, rest = tool.split("_", 1)
            return f"{prefix}.{rest}"
        return tool

    async def tools(self) -> list[str]:
        listed = await self.client.list_tools()
        return sorted(t.name for t in listed.tools)

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> Answer:
        try:
            result = await self.client.call_tool(self.wire(tool), args or {})
        except MCPError as error:
            raise Failed(f"{self.wire(tool)}: JSON-RPC error {error.code}: {error}") from None
        value = result.structured_content
        if value is None:
            # The reference answers with JSON text only.
            text = result.content[0].text if result.content else ""
            try:
                value = json.loads(text)
            except ValueError:
                value = {"text": text}
        return Answer(tool, bool(result.is_error), value)

    async def ok(self, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call `tool`; it must succeed. Its payload."""
        answer = await self.call(tool, args)
        check(
            not answer.is_error and answer.value.get("ok") is True,
            f"{tool} should succeed but failed (isError={answer.is_error})",
            answer.value,
        )
        return answer.value

    async def err(self, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call `tool`; it must fail with a typed envelope: isError true, the envelope v1 in
        structuredContent. The envelope."""
        answer = await self.call(tool, args)
        check(answer.is_error, f"{tool} should fail with isError true", answer.value)
        check(answer.value.get("ok") is False, f"{tool}: the envelope has ok:false", answer.value)
        missing = ENVELOPE_FIELDS - answer.value.keys()
        check(not missing, f"{tool}: envelope v1 lacks {sorted(missing)}", answer.value)
        check(answer.value["schema_version"] == "1", f"{tool}: schema_version 1", answer.value)
        check(answer.value["context"].get("tool") == self.wire(tool), f"{tool}: context.tool names the tool", answer.value)
        return answer.value


@contextlib.asynccontextmanager
async def connect(
    params: StdioServerParameters, *, name: str = "rwfs-it", dotted: bool = False, mode: str = "auto"
) -> AsyncIterator[Session]:
    """A client session with the server `params` describes (started now, stopped at the end)."""
    info = Implementation(name=name, version="1")
    async with Client(params, mode=mode, client_info=info, read_timeout_seconds=120) as client:
        yield Session(client, dotted)


def main(name: str, run: Callable[[argparse.Namespace], Awaitable[None]], parser: argparse.ArgumentParser) -> None:
    """Parse arguments, run the script (at most `--timeout` seconds), exit 0 (`PASS name`) or
    1 (`FAIL name: why`)."""
    parser.add_argument("--timeout", type=float, default=300, help="give up after this many seconds")
    args = parser.parse_args()

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args)

    try:
        anyio.run(bounded)
    except BaseException as error:  # noqa: BLE001 - every way out is reported
        failed = _failed_in(error)
        if failed is None:
            traceback.print_exc()
            failed = f"{type(error).__name__}: {error}"
        print(f"FAIL {name}: {failed}", file=sys.stderr, flush=True)
        sys.exit(1)
    say(f"PASS {name}")


def _failed_in(error: BaseException) -> Failed | None:
    """The `Failed` inside `error` (anyio wraps what a task group's body raises)."""
    if isinstance(error, Failed):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _failed_in(inner)
            if found is not None:
                return found
    return None


def parser(description: str) -> argparse.ArgumentParser:
    """The arguments every rwfs script takes: the binary and the workspace."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--rwfs", required=True, help="the rwfs binary")
    p.add_argument("-w", "--workspace", required=True, help="the workspace directory (it exists)")
    return p
