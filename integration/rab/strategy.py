"""The scripted reference strategy: what a careful agent does with each scenario's spec, as a
program (no LLM). It is the same program against every server: it calls the tools the spec
names, takes what it needs from their answers (sizes, offsets, hashes, findings, envelopes),
and handles a failure the way the spec says. Where a server does not offer a tool the spec
names (the reference server has no `rr_*` tools: they are a separate package, resilient-read),
it reads with the host's own file read instead, as an agent falls back to its built-in Read;
such reads are written to the transcript as `host_read`, so the judge sees them.

Each strategy writes its final answer to the trial's answer file.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from rwmcp import Session, sha256

from tasks import ERROR_TYPES

TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-]+")


class Agent:
    """One agent session: tool calls through the harness's proxy, host reads on the side."""

    def __init__(self, session: Session, tools: list[str], workspace: Path, transcript: Path, label: str):
        self.session = session
        self.tools = {t.replace(".", "_", 1) for t in tools}
        self.workspace = workspace
        self.transcript = transcript
        self.label = label

    def has(self, tool: str) -> bool:
        return tool in self.tools

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """(succeeded, the answer's JSON: a payload or an envelope)."""
        answer = await self.session.call(tool, args)
        return (not answer.is_error and answer.value.get("ok") is True), answer.value

    async def need(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """The answer of a call the strategy cannot go on without."""
        ok, value = await self.call(tool, args)
        if not ok:
            raise GaveUp(f"{tool}: {value.get('error')} ({(value.get('context') or {}).get('reason')})")
        return value

    def host_read(self, rel: str) -> str:
        data = (self.workspace / rel).read_bytes()
        entry = {"t": round(time.time(), 3), "label": self.label, "role": "host_call", "name": "host_read",
                 "arguments": {"path": rel}, "bytes": len(data)}
        with open(self.transcript, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
        return data.decode()

    async def scan(self, rel: str, page: int) -> str:
        """The whole of a large file: rr_stat, then cursor pages; else a host read."""
        if not self.has("rr_make_cursor"):
            return self.host_read(rel)
        await self.need("rr_stat", {"path": rel})
        return await paged(self, rel, page)

    async def read(self, rel: str) -> str:
        """The whole of a small file: rr_read_bytes pages, else a host read."""
        if not self.has("rr_read_bytes"):
            return self.host_read(rel)
        parts, offset = [], 0
        while True:
            page = await self.need("rr_read_bytes", {"path": rel, "offset": offset, "max_bytes": 65536})
            parts.append(page["content"])
            offset = page["next_offset"]
            if page["eof"]:
                return "".join(parts)


class GaveUp(Exception):
    """The strategy cannot go on; the trial ends with what is done."""


def locate(content: str, findings: list[dict[str, Any]], pointer: re.Pattern[str]) -> tuple[int, int, str]:
    """Where the secret is in `content`: (start, end, from where). From the risk report when it
    found something on the line the spec points at (rwfs: line, column, length; the reference:
    line and a snippet of the start), else from the spec's own words (`pointer`, whose group 1
    is the secret), as an agent reading the spec would find it."""
    spec = pointer.search(content)
    if spec is None:
        raise GaveUp("the spec's secret is not in the file")
    lines = content.splitlines(keepends=True)
    line_no = content.count("\n", 0, spec.start()) + 1
    line_start = sum(len(line) for line in lines[: line_no - 1])
    for f in findings:
        if f.get("line") != line_no:
            continue
        if isinstance(f.get("column"), int) and isinstance(f.get("length"), int):
            start = line_start + f["column"] - 1
            return start, start + f["length"], "risk report (line, column, length)"
        snippet = str(f.get("match") or "").rstrip("…")
        at = lines[line_no - 1].find(snippet) if snippet else -1
        if at >= 0:
            token = TOKEN_CHARS.match(lines[line_no - 1], at)
            if token:
                return line_start + token.start(), line_start + token.end(), "risk report (line, snippet)"
    return spec.start(1), spec.end(1), "the spec (no finding on that line)"


# --- the scenarios ---------------------------------------------------------------------------


async def s0(agent: Agent) -> str:
    text = await agent.scan("server.log", 65536)
    counts = {name: 0 for name in ERROR_TYPES}
    for m in re.finditer(r"ERROR (\S+):", text):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    lines = [f"Error type: {name} — count: {n}" for name, n in counts.items()]
    return "\n".join(lines + [f"Total ERROR lines: {sum(counts.values())}"]) + "\n"


async def paged(agent: Agent, rel: str, page: int) -> str:
    """A file read by cursor to its end; a cursor refused as stale (the file changed) is made
    again at the offset it had reached, never from the start."""
    made = await agent.need("rr_make_cursor", {"path": rel, "max_bytes": page})
    cursor, offset, parts = made["cursor"], made.get("offset", 0), []
    for _ in range(1000):
        ok, got = await agent.call("rr_read_next", {"cursor": cursor})
        if not ok:
            if got.get("error") != "stale_precondition":
                raise GaveUp(f"rr_read_next: {got.get('error')}")
            made = await agent.need("rr_make_cursor", {"path": rel, "offset": offset, "max_bytes": page})
            cursor = made["cursor"]
            continue
        parts.append(got["content"])
        cursor, offset = got["cursor"], got["next_offset"]
        if got["eof"]:
            return "".join(parts)
    raise GaveUp("no end of file after 1000 pages")


async def s1(agent: Agent) -> str:
    template = await agent.read("config.template.yaml")
    ok, risk = await agent.call("rw_risk_score", {"content": template, "target_path": "config.yaml"})
    findings = risk.get("detected_patterns", []) if ok else []
    start, end, source = locate(template, findings, re.compile(r'auth_token:\s*"([^"]+)"'))
    config = template[:start] + "${AUTH_TOKEN}" + template[end:]
    wrote = await agent.need("rw_safe_write", {"path": "config.yaml", "content": config})
    detected = sorted({str(f.get("pattern") or f.get("kind")) for f in findings}) or ["nothing"]
    return (
        f"Risk score: verdict {risk.get('verdict')}, detected {', '.join(detected)}.\n"
        f"Redacted: the auth_token value ({end - start} characters, located from {source}) -> ${{AUTH_TOKEN}}.\n"
        f"Wrote config.yaml: sha256 {wrote['sha256']}\n"
    )


S2_SECTIONS = [
    "## Introduction\n\n"
    "Coding agents write files through tools that can fail halfway: a content filter rejects a "
    "draft, a process dies between write and rename, a long answer is cut off.\n\n"
    "Resilient file I/O makes each of those failures visible and recoverable instead of silent.\n\n",
    "## Architecture\n\n"
    "The design stacks six layers: risk scoring before a write, an atomic journaled write, "
    "chunked sessions for large outputs, typed error envelopes, a scratchpad for secrets, and "
    "a handoff file for the next session.\n\n"
    "Each layer handles one failure mode and reports through the same envelope.\n\n",
    "## Conclusion\n\n"
    "With durable, chunked and typed writes an agent loses no work to a failed call and knows "
    "what to do next.\n",
]


async def s2(agent: Agent) -> str:
    for section in S2_SECTIONS:
        ok, _ = await agent.call("rw_chunk_append", {"session": "report", "content": section, "total_expected": 3})
        if not ok:
            # The envelope says the chunk did not land: look at what is stored, send it again.
            ok, status = await agent.call("rw_chunk_status", {"session": "report"})
            stored = len(status.get("present_indices", [])) if ok else 0
            if stored != S2_SECTIONS.index(section):
                raise GaveUp(f"after the failure {stored} chunks are stored")
            await agent.need("rw_chunk_append", {"session": "report", "content": section, "total_expected": 3})
    status = await agent.need("rw_chunk_status", {"session": "report"})
    if status.get("present_indices") != [1, 2, 3]:
        raise GaveUp(f"rw_chunk_status: {status}")
    preview = await agent.need("rw_chunk_preview", {"session": "report"})
    if preview.get("content") != "".join(S2_SECTIONS):
        raise GaveUp("the preview is not the three sections in order")
    composed = await agent.need("rw_chunk_compose", {"session": "report", "output_path": "report.md"})
    return f"report.md composed from 3 chunks: sha256 {composed['sha256']}\n"


async def s3(agent: Agent) -> str:
    text = await agent.scan("data.jsonl", 16384)
    ids = [json.loads(line)["id"] for line in text.splitlines() if line.strip()]
    return f"Total records: {len(ids)}\nEven ID count: {sum(1 for i in ids if i % 2 == 0)}\n"


async def s4_a(agent: Agent) -> str:
    draft = await agent.read("draft.tex")
    if agent.has("rr_stat"):
        digest = (await agent.need("rr_stat", {"path": "draft.tex", "include_sha256": True}))["sha256"]
    else:
        digest = sha256(draft)  # what the host read, hashed by the agent itself
    envelope = {
        "task_id": "paper-draft",
        "status": "partial",
        "agent": "agent-a",
        "summary": "Started the Methods section. Still need Results and Conclusion.",
        "next_steps": ["Add Results section", "Add Conclusion section", "Fix any drift"],
        "last_good_state": [{"path": "draft.tex", "sha256": digest}],
    }
    body = "Methods is drafted in draft.tex. Remaining: a Results section and a Conclusion section."
    wrote = await agent.need("rw_handoff_write", {"envelope": envelope, "body": body})
    return f"handoff_path {wrote['handoff_path']}, sha256 {wrote['sha256']}\n"


async def s4_b(agent: Agent) -> str:
    handoff = await agent.need("rw_handoff_read", {})
    envelope, drift = handoff["envelope"], handoff.get("drift_warnings", [])
    draft = await agent.read("draft.tex")
    added = (
        "\\section{Results}\n"
        "Across the six scenarios every failure was reported with a typed envelope and no write was lost.\n\n"
        "\\section{Conclusion}\n"
        "A layered write surface turns silent failures into recoverable ones.\n\n"
    )
    end = draft.rindex("\\end{document}")
    new = draft[:end] + added + draft[end:]
    expected = next((e["sha256"] for e in envelope.get("last_good_state", []) if e.get("path") == "draft.tex"), None)
    args: dict[str, Any] = {"path": "draft.tex", "content": new, "mode": "overwrite"}
    if expected and not drift:
        args["expected_prev_sha256"] = expected
    wrote = await agent.need("rw_safe_write", args)
    done = dict(envelope, status="complete", agent="agent-b", summary="Results and Conclusion added.",
                next_steps=[], last_good_state=[{"path": "draft.tex", "sha256": wrote["sha256"]}])
    again = await agent.need("rw_handoff_write", {"envelope": done, "body": "The draft is complete."})
    seen = "; ".join(f"{w.get('path')}: {w.get('reason')}" for w in drift) or "none"
    return (
        f"The handoff (task {envelope.get('task_id')}, status {envelope.get('status')}) said: {envelope.get('summary')}\n"
        f"Drift warnings: {seen}\n"
        f"Final draft.tex: sha256 {wrote['sha256']}\n"
    )


async def s5(agent: Agent) -> str:
    app = await agent.read("src/app.py")
    ok, risk = await agent.call("rw_risk_score", {"content": app, "target_path": "src/app.py"})
    findings = risk.get("detected_patterns", []) if ok else []
    start, end, source = locate(app, findings, re.compile(r'STRIPE_SECRET_KEY\s*=\s*"([^"]+)"'))
    key = app[start:end]
    put = await agent.need("rw_scratch_put", {"content": key, "label": "stripe-secret-key"})
    line_start = app.rfind("\n", 0, start) + 1
    fixed = (
        app[:line_start]
        + f"# The key is in the rw scratchpad: sha256 {put['sha256']}\n"
        + app[line_start : start - 1]
        + 'os.environ.get("STRIPE_SECRET_KEY")'
        + app[end + 1 :]
    )
    wrote = await agent.need(
        "rw_safe_write",
        {"path": "src/app.py", "content": fixed, "mode": "overwrite", "expected_prev_sha256": sha256(app)},
    )
    return (
        f"Stored secret (located from {source}): sha256 {put['sha256']}\n"
        f"Fixed src/app.py: sha256 {wrote['sha256']}\n"
        f"The raw key appears in the fixed file: {'yes' if key in fixed else 'no'}\n"
    )


STRATEGIES: dict[str, list[Callable[[Agent], Awaitable[str]]]] = {
    "S0": [s0],
    "S1": [s1],
    "S2": [s2],
    "S3": [s3],
    "S4": [s4_a, s4_b],
    "S5": [s5],
}
