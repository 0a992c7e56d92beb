"""The harness's place between an agent and its MCP server (stdio): it relays every JSON-RPC
line unchanged, writes each tool call and its answer to the trial's transcript, and makes the
two things happen that the paper's scenarios need the harness to make happen:

  S2  the second `chunk_append` call fails with a typed envelope (the spec warns the agent that
      one will); the call never reaches the server (a `chunk_status` goes in its place)
  S3  right after the server answers the first `rr_make_cursor`, and before the agent sees the
      answer, one record is appended to `data.jsonl` directly on disk (a change made outside
      the server), so the next `rr_read_next` reads a file that changed under its cursor

    python proxy.py --transcript T.jsonl --scenario S3 --workspace WS --label agent -- rwfs mcp -w WS

Standard library only: an agent host may start it with any Python 3.11+. Newline-delimited
JSON-RPC, as MCP's stdio transport is; a line that is not JSON passes through untouched.
It does not interpret anything else: initialization, notifications, pings go through as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

# The record S3 appends from outside the server (the paper's drift trigger: one more id).
DRIFT_RECORD = '{"id": 1000, "value": "injected_after_cursor"}\n'

# What the failing S2 call answers: envelope v1 (docs/architecture.md, The reference). A read-back mismatch
# is a failure a durable write surface reports and an agent can retry.
def injected_envelope(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "ok": False,
        "schema_version": "1",
        "error": "write_corruption",
        "reason_hint": "unknown",
        "detected_patterns": [],
        "suggested_action": "retry_later",
        "retry_budget": 1,
        "context": {
            "tool": tool,
            "session": arguments.get("session"),
            "reason": "read_back_mismatch",
            "simulated_by": "rab harness",
        },
    }


def normal(tool: str) -> str:
    """`rw.safe_write` (the reference) and `rw_safe_write` (rwfs) are one tool to the judge."""
    return tool.replace(".", "_", 1)


class Proxy:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.out_lock = threading.Lock()
        self.log_lock = threading.Lock()
        self.pending: dict[Any, tuple[str, dict[str, Any]]] = {}
        self.appends = 0
        self.drifted = False
        # Probe id -> the agent's call the injected answer is for (see inject).
        self.probes: dict[str, tuple[Any, str, dict[str, Any]]] = {}
        self.child = subprocess.Popen(args.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def record(self, entry: dict[str, Any]) -> None:
        entry = {"t": round(time.time(), 3), "label": self.args.label, **entry}
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self.log_lock, open(self.args.transcript, "a", encoding="utf-8") as f:
            f.write(line)

    def send(self, line: bytes) -> None:
        with self.out_lock:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

    def from_agent(self) -> None:
        assert self.child.stdin is not None
        for line in sys.stdin.buffer:
            message = parse(line)
            if message is not None and message.get("method") == "initialize":
                client = (message.get("params") or {}).get("clientInfo") or {}
                self.record({"role": "session", "client": client.get("name")})
            if message is not None and message.get("method") == "tools/call":
                params = message.get("params") or {}
                wire, arguments = params.get("name", ""), params.get("arguments") or {}
                self.record({"role": "tool_call", "name": normal(wire), "wire": wire, "arguments": arguments})
                if self.inject(message, wire, arguments):
                    continue
                self.pending[message.get("id")] = (wire, arguments)
            self.child.stdin.write(line)
            self.child.stdin.flush()
        self.child.stdin.close()

    def inject(self, message: dict[str, Any], wire: str, arguments: dict[str, Any]) -> bool:
        """S2: the second chunk_append fails here, as a failed write. So that the answer has
        every key a tool result of this server and protocol revision has (2026-07-28's
        resultType, say), a read-only rw_chunk_status of the same session goes to the server in
        its place, and the answer is made from that one's (see answer_probe)."""
        if self.args.scenario != "S2" or normal(wire) != "rw_chunk_append":
            return False
        self.appends += 1
        if self.appends != 2:
            return False
        probe = f"rab-probe-{len(self.probes) + 1}"
        self.probes[probe] = (message.get("id"), wire, arguments)
        params = dict(message.get("params") or {})
        params["name"] = wire.replace("chunk_append", "chunk_status")
        params["arguments"] = {"session": arguments.get("session")}
        request = {"jsonrpc": "2.0", "id": probe, "method": "tools/call", "params": params}
        assert self.child.stdin is not None
        self.child.stdin.write(json.dumps(request).encode() + b"\n")
        self.child.stdin.flush()
        return True

    def answer_probe(self, message: dict[str, Any]) -> None:
        id, wire, arguments = self.probes.pop(message["id"])
        envelope = injected_envelope(wire, arguments)
        text = json.dumps(envelope, separators=(",", ":"), sort_keys=True)
        if "." in wire:  # the reference's convention: a normal result whose JSON says ok:false
            answer = {"content": [{"type": "text", "text": text}], "isError": False}
        else:
            answer = {"content": [{"type": "text", "text": text}], "structuredContent": envelope, "isError": True}
        probed = message.get("result") if isinstance(message.get("result"), dict) else {}
        result = {**{k: v for k, v in probed.items() if k not in ("content", "structuredContent", "isError")}, **answer}
        self.record({"role": "tool_result", "name": normal(wire), "is_error": True, "value": envelope, "injected": True})
        self.send(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}).encode() + b"\n")

    def from_server(self) -> None:
        assert self.child.stdout is not None
        for line in self.child.stdout:
            message = parse(line)
            if message is not None and "method" not in message and message.get("id") in self.probes:
                self.answer_probe(message)
                continue
            if message is not None and "method" not in message and message.get("id") in self.pending:
                wire, _ = self.pending.pop(message.get("id"))
                value, is_error = payload(message)
                self.record({"role": "tool_result", "name": normal(wire), "is_error": is_error, "value": value})
                if self.args.scenario == "S3" and normal(wire) == "rr_make_cursor" and not self.drifted and value.get("ok"):
                    self.drifted = True
                    with open(os.path.join(self.args.workspace, "data.jsonl"), "a", encoding="utf-8") as f:
                        f.write(DRIFT_RECORD)
                    self.record({"role": "harness", "event": "drift", "path": "data.jsonl", "appended": DRIFT_RECORD})
            self.send(line)

    def run(self) -> int:
        server = threading.Thread(target=self.from_server, daemon=True)
        server.start()
        self.from_agent()
        code = self.child.wait()
        server.join(timeout=5)
        return code


def parse(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def payload(message: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A tool answer's JSON and whether it is a failure, whichever convention the server uses
    (rwfs: isError + structuredContent; the reference: JSON text with ok:false)."""
    if "error" in message:
        return {"ok": False, "jsonrpc_error": message["error"]}, True
    result = message.get("result") or {}
    value = result.get("structuredContent")
    if value is None:
        texts = [c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text"]
        try:
            value = json.loads(texts[0]) if texts else {}
        except ValueError:
            value = {"text": texts[0]}
    if not isinstance(value, dict):
        value = {"value": value}
    return value, bool(result.get("isError")) or value.get("ok") is False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transcript", required=True, help="JSON lines file the calls are appended to")
    p.add_argument("--scenario", required=True, help="S0..S5: which fault or drift to make happen")
    p.add_argument("--workspace", required=True, help="the trial's workspace (S3 changes data.jsonl in it)")
    p.add_argument("--label", default="agent", help="names this session in the transcript (S4: agent-a, agent-b)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the MCP server command")
    args = p.parse_args()
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("the server command is missing (after --)")
    sys.exit(Proxy(args).run())


if __name__ == "__main__":
    main()
