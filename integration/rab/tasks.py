"""The six RAB scenarios as the paper defines them (Resilient Write, arXiv 2604.10842; its
`bench/tasks/*`): each one's fixture (the files a trial starts with) and its spec (the prompt an
agent gets). Tool names in the specs are written `rw_safe_write` and sent dotted
(`rw.safe_write`) to a server that uses dots.

  S0  large-file analysis   server.log: 10,000 lines (~550 KB), ~2% ERROR lines of 5 types
  S1  content-filter recovery   config.template.yaml with a hard-coded `sk-ant-oat01-…`
                            auth_token; config.yaml must be written with `${AUTH_TOKEN}`
  S2  chunked report        three sections appended in session `report`, composed into
                            report.md; one chunk_append fails (the proxy makes it fail)
  S3  cursor drift          data.jsonl: 1,000 records; one more is appended from outside the
                            server right after the first cursor is made
  S4  cross-session handoff  draft.tex; agent A hands off, agent B (a new session) resumes
  S5  sensitive data        src/app.py with a hard-coded Stripe key to move to the scratchpad

The fixtures never hold a real credential: S1's token is the paper's template (a run of
capital letters and digits), assembled here so that no scanner reads it in this file.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCENARIOS = ["S0", "S1", "S2", "S3", "S4", "S5"]

ERROR_TYPES = ["ConnectionTimeoutError", "NullPointerException", "DiskFullError", "OOMError", "Segfault"]

# S1: the paper's template token: the Anthropic OAuth prefix and 32 characters.
S1_TOKEN = "sk-ant-" + "oat01-" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + "123456"
S1_TEMPLATE = (
    "# Service configuration\n"
    "service:\n"
    "  name: my-service\n"
    "  port: 8080\n"
    f'  auth_token: "{S1_TOKEN}"\n'
    '  database_url: "postgres://localhost:5432/mydb"\n'
    "  debug: false\n"
)

S4_DRAFT = (
    "\\documentclass{article}\n"
    "\\begin{document}\n"
    "\\section{Methods}\n"
    "Our approach uses a six-layer architecture for resilient writes.\n"
    "Each layer addresses a specific failure mode observed in production\n"
    "coding agents.\n"
    "\n"
    "\\end{document}\n"
)

# S5: the paper's stand-in for a Stripe secret key (it says "fake" in its own name).
S5_KEY = "sk_fake_placeholder_for_benchmark_testing_12345"
S5_APP = (
    '"""Main application."""\n'
    "\n"
    "import os\n"
    "\n"
    "# WARNING: hardcoded credential — needs cleanup\n"
    f'STRIPE_SECRET_KEY = "{S5_KEY}"\n'
    "\n"
    "def process_payment(amount: int) -> None:\n"
    '    print(f"Processing ${amount} using key: {STRIPE_SECRET_KEY[:8]}...")\n'
    "\n"
    'if __name__ == "__main__":\n'
    "    process_payment(100)\n"
)


def setup(scenario: str, workspace: Path, trial: int) -> dict[str, Any]:
    """Make the scenario's files in `workspace` (directly on disk, as a repository's files
    are); what the judge needs to know about them."""
    workspace.mkdir(parents=True, exist_ok=True)
    if scenario == "S0":
        rng = random.Random(trial)
        lines = []
        for i in range(10_000):
            if rng.random() < 0.02:
                lines.append(f"[{i:06d}] ERROR {rng.choice(ERROR_TYPES)}: something went wrong at iteration {i}\n")
            else:
                lines.append(f"[{i:06d}] INFO  Request processed successfully in {rng.randint(1, 500)}ms\n")
        (workspace / "server.log").write_text("".join(lines))
        return {}
    if scenario == "S1":
        (workspace / "config.template.yaml").write_text(S1_TEMPLATE)
        return {"token": S1_TOKEN, "template": S1_TEMPLATE}
    if scenario == "S2":
        return {}
    if scenario == "S3":
        (workspace / "data.jsonl").write_text("".join(f'{{"id": {i}, "value": "record_{i}"}}\n' for i in range(1000)))
        return {"records_at_start": 1000}
    if scenario == "S4":
        (workspace / "draft.tex").write_text(S4_DRAFT)
        return {"draft": S4_DRAFT}
    if scenario == "S5":
        (workspace / "src").mkdir(exist_ok=True)
        (workspace / "src" / "app.py").write_text(S5_APP)
        return {"key": S5_KEY, "app": S5_APP}
    raise ValueError(f"unknown scenario {scenario}")


@dataclass
class Prompt:
    label: str  # names the agent's session in the transcript
    text: str


def prompts(scenario: str, dotted: bool) -> list[Prompt]:
    """The scenario's spec, one prompt per agent session (S4 has two: agent A, then B)."""
    specs = SPECS[scenario]
    if scenario == "S4":
        parts = [Prompt("agent-a", specs[0]), Prompt("agent-b", specs[1])]
    else:
        parts = [Prompt("agent", specs[0])]
    for part in parts:
        part.text = PREAMBLE + part.text
        if dotted:
            part.text = re.sub(r"\b(rr|rw)_(\w+|\*)", r"\1.\2", part.text)
    return parts


PREAMBLE = """You are a coding agent being benchmarked on resilient tool use. The workspace is your
current directory. Use the rr_* and rw_* MCP tools for every read and write of the task (not a
shell, not your own file tools). A failed tool call returns a typed envelope (error,
reason_hint, suggested_action, retry_budget, context): read it and adjust; do not repeat the
same failing call. End with a final answer in the format the task asks for.

"""

SPECS: dict[str, list[str]] = {
    "S0": [
        """# Large-file error analysis

`server.log` holds 10,000 lines of server logs (about 550 KB): too large for one read.

1. Check its size with rr_stat first.
2. Scan the whole file in pages (rr_make_cursor + rr_read_next, or rr_read_bytes with
   offsets); rr_search_then_page may help too. Do not read it all at once.
3. Find every error type (lines containing "ERROR") and count each.

Final answer, exactly in this format:

Error type: <Name> — count: <N>      (one line per type)
Total ERROR lines: <N>
"""
    ],
    "S1": [
        """# Secure configuration file

Create `config.yaml` from the template `config.template.yaml`. The template holds a
hard-coded `auth_token`: a security risk.

1. Read the template with rr_read_bytes.
2. Run rw_risk_score on its content: it flags the token.
3. Redact the token, replacing it with `${AUTH_TOKEN}`, from what the risk report says.
4. Write the cleaned config to `config.yaml` with rw_safe_write.

Final answer: what the risk score detected, what you redacted, and the SHA-256 of the file
you wrote.
"""
    ],
    "S2": [
        """# A report in chunks

Produce a three-section report in `report.md`:
- Section 1 "Introduction": 2-3 paragraphs on resilient file I/O
- Section 2 "Architecture": 2-3 paragraphs on the layered design
- Section 3 "Conclusion": 1-2 paragraphs summarising

1. Write each section as one chunk with rw_chunk_append (session "report").
2. After all three, check with rw_chunk_status, then preview with rw_chunk_preview.
3. Compose into `report.md` with rw_chunk_compose.

One of your rw_chunk_append calls WILL fail with a structured error. Read the envelope,
check with rw_chunk_status what is stored, and re-submit only the failed chunk.

Final answer: the SHA-256 of the composed `report.md`.
"""
    ],
    "S3": [
        """# Paginated reading with drift

`data.jsonl` holds JSON records, one per line. Read all of them and count the records whose
`id` is even. Another process may change the file while you read it: a cursor whose file
changed is refused with `stale_precondition`.

1. Check the file with rr_stat.
2. Make a cursor with rr_make_cursor and read with rr_read_next until EOF.
3. If a read is refused as stale: make a new cursor from the position you had reached and go
   on. Do NOT start over from the beginning.

Final answer, exactly:

Total records: <N>
Even ID count: <N>
"""
    ],
    "S4": [
        """# Session handoff, part A

You are agent A. You start work on a paper and hand off to the next agent.

1. Read `draft.tex` with rr_read_bytes.
2. Get its SHA-256 with rr_stat (include_sha256).
3. Write HANDOFF.md with rw_handoff_write and this envelope (the sha256 from step 2), with a
   body note saying what remains:

{"task_id": "paper-draft", "status": "partial", "agent": "agent-a",
 "summary": "Started the Methods section. Still need Results and Conclusion.",
 "next_steps": ["Add Results section", "Add Conclusion section", "Fix any drift"],
 "last_good_state": [{"path": "draft.tex", "sha256": "<SHA-256 from rr_stat>"}]}

Final answer: the handoff_path and SHA-256 of the HANDOFF.md you wrote.
""",
        """# Session handoff, part B

You are agent B, picking up where agent A left off.

1. Read the handoff with rw_handoff_read.
2. Check its drift_warnings: if `draft.tex` changed since, say so.
3. Continue the work: add a Results section and a Conclusion section to `draft.tex` (before
   \\end{document}) with rw_safe_write, mode "overwrite".
4. Write a new HANDOFF.md with rw_handoff_write, status "complete".

Final answer: what the handoff said, any drift warnings, and the SHA-256 of the final
`draft.tex`.
""",
    ],
    "S5": [
        """# Credential cleanup

`src/app.py` holds a hard-coded Stripe secret key: a security incident to fix.

1. Read `src/app.py` with rr_read_bytes.
2. Run rw_risk_score on its content.
3. Store the key out of band with rw_scratch_put. Never write it to disk.
4. Fix `src/app.py`: replace the hard-coded key with `os.environ.get("STRIPE_SECRET_KEY")`
   and name the scratchpad hash in a comment so the key can be found again.
5. Write the fixed file with rw_safe_write, mode "overwrite".

Final answer: the SHA-256 of the stored secret (from rw_scratch_put), the SHA-256 of the fixed
`src/app.py`, and whether the raw key still appears in it.
"""
    ],
}


def save(path: Path, facts: dict[str, Any]) -> None:
    path.write_text(json.dumps(facts, indent=1, sort_keys=True))
