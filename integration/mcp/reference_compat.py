"""The same calls against the reference server (`resilient-write` 0.3.0) and rwfs, from the same
client: rwfs answers with every field the reference answers with (extra fields are fine), and
the reference itself starts and works with the pinned environment (the benchmark needs it).

    python reference_compat.py --rwfs target/debug/rwfs --reference .../bin/resilient-write -w DIR

DIR gets two fresh workspaces, `rwfs/` and `reference/`.
"""

from __future__ import annotations

import os
from typing import Any

from rwmcp import check, connect, main, parser, reference_server, rwfs_server, say, sha256

SCRATCH = "a scratch value\n"
HANDOFF = {
    "task_id": "compat",
    "status": "partial",
    "agent": "compat",
    "summary": "checking field names",
    "next_steps": ["none"],
    "last_good_state": [{"path": "docs/a.md", "sha256": "0" * 64}],
}

# (tool, arguments): run in this order on both servers; each must succeed on both.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("rw_risk_score", {"content": "plain prose, nothing secret\n", "language_hint": "markdown"}),
    ("rw_risk_score", {"content": "contact: someone@example.org\n", "target_path": "a.md"}),
    ("rw_safe_write", {"path": "docs/a.md", "content": "one\n"}),
    ("rw_safe_write", {"path": "docs/a.md", "content": "two\n", "mode": "overwrite"}),
    ("rw_safe_write", {"path": "docs/a.md", "content": "three\n", "mode": "append"}),
    ("rw_safe_replace", {"path": "docs/a.md", "old_string": "three", "new_string": "four"}),
    ("rw_chunk_write", {"session": "s1", "index": 1, "content": "part one\n", "total_expected": 2}),
    ("rw_chunk_append", {"session": "s1", "content": "part two\n"}),
    ("rw_chunk_status", {"session": "s1"}),
    ("rw_chunk_preview", {"session": "s1"}),
    ("rw_chunk_compose", {"session": "s1", "output_path": "docs/c.md"}),
    ("rw_chunk_reset", {"session": "s1"}),
    ("rw_scratch_put", {"content": SCRATCH, "label": "note", "content_type": "text/plain"}),
    ("rw_scratch_ref", {"label": "note"}),
    ("rw_scratch_get", {"sha256": sha256(SCRATCH)}),
    ("rw_checkpoint", {"name": "progress", "data": {"step": 3, "done": ["a", "b"]}}),
    ("rw_checkpoint_read", {"name": "progress"}),
    ("rw_checkpoint_list", {}),
    ("rw_handoff_write", {"envelope": HANDOFF, "body": "body text"}),
    ("rw_handoff_read", {}),
    ("rw_checkpoint_cleanup", {"include_session": False}),
    ("rw_journal_tail", {"n": 5}),
    ("rw_journal_tail", {"n": 5, "filter_path": "docs/a.md", "filter_mode": "overwrite"}),
    ("rw_analytics", {}),
    ("rw_validate", {"content": '{"a": 1}', "format_hint": "json"}),
    ("rw_validate", {"content": "def f(:\n", "target_path": "x.py"}),
]

# (tool, arguments): refused by both, rwfs with isError and the envelope in structuredContent,
# the reference with a JSON text `ok: false` (its convention).
REFUSALS: list[tuple[str, dict[str, Any]]] = [
    ("rw_safe_write", {"path": "docs/a.md", "content": "again\n"}),  # create over an existing file
    ("rw_safe_replace", {"path": "docs/a.md", "old_string": "absent", "new_string": "x"}),
]


# Maps keyed by data, not by field name (rw_analytics): their keys are not compared.
DATA_MAPS = {"by_caller", "by_mode", "sessions", "checkpoints.by_name"}


def missing(theirs: Any, mine: Any, prefix: str = "") -> list[str]:
    """The field paths of `theirs` that `mine` lacks (lists: compared by their first elements
    when both have one; the findings themselves may differ)."""
    out: list[str] = []
    if prefix.rstrip(".") in DATA_MAPS:
        return out
    if isinstance(theirs, dict) and isinstance(mine, dict):
        for k, v in theirs.items():
            if k not in mine:
                out.append(prefix + k)
            else:
                out += missing(v, mine[k], prefix + k + ".")
    elif isinstance(theirs, list) and isinstance(mine, list) and theirs and mine:
        out += missing(theirs[0], mine[0], prefix + "[].")
    return out


def count(value: Any) -> int:
    return len(value) if isinstance(value, dict) else 0


async def run(args) -> None:
    ws_rwfs = os.path.join(args.workspace, "rwfs")
    ws_ref = os.path.join(args.workspace, "reference")
    os.makedirs(ws_rwfs)
    os.makedirs(ws_ref)
    async with connect(reference_server(args.reference, ws_ref), name="compat", dotted=True, mode="legacy") as ref, \
            connect(rwfs_server(args.rwfs, ws_rwfs), name="compat") as rw:
        listed = await ref.tools()
        check("rw.safe_replace" in listed and len(listed) == 21, "the reference 0.3.0 lists 21 tools", listed)
        ours = set(await rw.tools())
        for tool, call in CALLS:
            theirs = await ref.call(tool, call)
            check(not theirs.is_error and theirs.value.get("ok") is True, f"reference {tool} succeeds", theirs.value)
            mine = await rw.ok(tool, call)
            lacking = missing(theirs.value, mine)
            check(not lacking, f"rwfs {tool} answers with every field of the reference's", lacking)
            say(f"{tool}: the reference's {count(theirs.value)} fields all in rwfs's {count(mine)}")
        # Both journal a find-and-replace as the mode `replace`, attributed to the client.
        for server, session in (("reference", ref), ("rwfs", rw)):
            tail = await session.call("rw_journal_tail", {"n": 50, "filter_mode": "replace"})
            entries = tail.value.get("entries", [])
            check(len(entries) == 1 and entries[0]["path"] == "docs/a.md", f"{server} journals safe_replace as replace", tail.value)
        rows = (await rw.ok("rw_journal_tail", {"n": 50}))["entries"]
        callers = {row.get("caller") for row in rows}
        check(callers == {"compat"}, "rwfs's journal names the client (from initialize or the request _meta)", callers)
        say("journal: safe_replace is mode replace on both; rwfs attributes every row to the client")
        for tool, call in REFUSALS:
            theirs = await ref.call(tool, call)
            check(not theirs.is_error and theirs.value.get("ok") is False, f"reference refuses {tool} in-band", theirs.value)
            mine = await rw.err(tool, call)
            check(mine["error"] == theirs.value["error"], f"{tool}: the same error kind", mine, theirs.value)
            say(f"{tool} refused: reference isError=false, rwfs isError=true, both {mine['error']}")
        say(f"rwfs offers {len(ours)} tools; the reference {len(listed)}")


if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--reference", required=True, help="the reference server's resilient-write executable")
    main("reference_compat", run, p)
