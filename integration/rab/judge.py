"""The RAB judge: a score out of 100 for one trial, from what the trial left behind — the files
in its workspace, the server's journal (`.resilient_write/journal.jsonl`, which rwfs and the
reference both keep), the transcript the harness's proxy recorded (every tool call, the answer
or envelope it got, what the harness injected) and the agent's final answer. It never takes the
strategy's word for anything: a number counts when it matches the file on disk.

The paper's four components, and what each checks per scenario (pass: score >= 70):

    completion (40)        the task's outcome: right counts, the right file with the right bytes
    tool selection (25)    the tools the spec calls for were used, and answered
    error recovery (25)    the scenario's failure was met and recovered from as the spec says
    efficiency (10)        calls made (and, for S0, the size of each answer) within a budget,
                           counted once completion has at least 20 (doing nothing is not
                           efficient)

S0  completion: 6 per error type whose count in the answer equals the log's (5 types), 10 for
      the right total.  tool selection: 10 rr_stat of server.log; 15 the whole file read in
      pages (byte pages that cover its size), 8 if only by search pages.  recovery: 25 when
      every failed call was followed by a good call of the same tool and an answer came, or
      nothing failed.  efficiency: 10 if every answer fit 64 KiB and <= 15 calls, 5 if it fit
      and <= 30 calls, 0 once one answer (or host read) was larger: S0 is about that budget.
S1  completion: 10 config.yaml exists; 15 the token is not in it; 15 it is the template with
      exactly the token replaced by `${AUTH_TOKEN}`.  tool selection: 5 the template read with
      rr_read_bytes; 10 rw_risk_score run on the template; 10 config.yaml written by
      rw_safe_write and journaled with the file's sha256.  recovery: 10 the agent was warned:
      the risk report (or a refused write's envelope) named something on the token's line; 15
      config.yaml written and no write carrying the raw token succeeded.  efficiency: 10 if <= 6
      calls, 5 if <= 12.
S2  completion: 10 report.md exists; 10 its sections Introduction, Architecture, Conclusion,
      once each, in order; 15 it is exactly the accepted chunks in order (nothing lost or
      doubled) and journaled with its sha256; 5 the answer names that sha256.  tool
      selection: 10 three accepted rw_chunk_append in session `report`; 5 rw_chunk_status; 5
      rw_chunk_preview; 5 rw_chunk_compose into report.md.  recovery (the injected failure):
      10 rw_chunk_status after the failed append and before the next append; 15 the failed
      chunk's content sent again and accepted.  efficiency: 10 if <= 10 calls, 5 if <= 16.
S3  completion: 20 the answer's total and 20 its even-id count equal data.jsonl's at the end.
      tool selection: 5 rr_stat, 10 rr_make_cursor, 10 rr_read_next (answered).  recovery: 10
      a read refused as stale_precondition after the change from outside; 15 the next cursor
      made at the offset the stale one had reached (not from the start) and read to EOF (with
      the paper's trigger, the change right after the first cursor is made, that offset is 0).
      efficiency: 10 if <= 8 calls, 5 if <= 16.
S4  completion: 15 draft.tex has Results and Conclusion sections before \\end{document} and
      keeps the Methods text; 10 HANDOFF.md says status complete; 10 agent A's handoff named
      draft.tex with the sha256 the draft had; 5 the answer names the final draft's sha256.
      tool selection: 5 A's rr_stat with sha256; 5 A's rw_handoff_write; 5 B's
      rw_handoff_read; 5 B's rw_safe_write (overwrite) of draft.tex; 5 B's rw_handoff_write.
      recovery (resuming across sessions): 10 B read the handoff, in its own session, before
      writing; 10 B's write was of the version A handed over (its expected_prev_sha256, or the
      journal's previous sha256, is A's; or the new draft begins with A's up to \\end{document});
      5 drift warnings, if any, reported.  efficiency:
      10 if <= 10 calls, 5 if <= 20.
S5  completion: 15 the key is not in src/app.py; 10 it reads
      os.environ.get("STRIPE_SECRET_KEY"); 10 a comment names the key's sha256; 5 the fixed file (no key) parses as Python.  tool
      selection: 5 rw_risk_score on app.py's content; 10 rw_scratch_put of exactly the key; 10
      app.py written by rw_safe_write (overwrite) and journaled with its sha256.  recovery: 15
      app.py written and no write carrying the key succeeded; 10 the key is recoverable: a
      scratchpad file holds it.
      efficiency: 10 if <= 8 calls, 5 if <= 16.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PASS = 70
BUDGET = 65536  # S0: one tool answer's share of an agent's context
WRITES = {"rw_safe_write", "rw_safe_replace", "rw_chunk_write", "rw_chunk_append", "rw_chunk_compose"}


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


@dataclass
class Call:
    label: str
    name: str
    arguments: dict[str, Any]
    value: dict[str, Any] = field(default_factory=dict)
    failed: bool = True  # until an answer says otherwise (no answer: failed)
    injected: bool = False
    host: bool = False

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass
class Trial:
    scenario: str
    workspace: Path
    calls: list[Call]
    journal: list[dict[str, Any]]
    answer: str
    facts: dict[str, Any]

    @classmethod
    def load(cls, scenario: str, directory: Path) -> "Trial":
        workspace = directory / "ws"
        return cls(
            scenario,
            workspace,
            calls(directory / "transcript.jsonl"),
            rows(workspace / ".resilient_write" / "journal.jsonl"),
            text(directory / "answer.md") or "",
            json.loads(text(directory / "facts.json") or "{}"),
        )

    def file(self, rel: str) -> bytes | None:
        path = self.workspace / rel
        return path.read_bytes() if path.is_file() else None

    def used(self, name: str, label: str | None = None) -> list[Call]:
        return [c for c in self.calls if c.name == name and (label is None or c.label == label)]

    def good(self, name: str, label: str | None = None) -> list[Call]:
        return [c for c in self.used(name, label) if c.ok]

    def journaled(self, rel: str, data: bytes | None) -> bool:
        return data is not None and any(r.get("path") == rel and r.get("sha256") == sha256(data) for r in self.journal)


def text(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None


def calls(transcript: Path) -> list[Call]:
    """Tool calls paired with their answers (per session, first unanswered call of that name)."""
    out: list[Call] = []
    waiting: list[Call] = []
    for line in (text(transcript) or "").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        role, label, name = entry.get("role"), entry.get("label", ""), entry.get("name", "")
        if role == "tool_call":
            call = Call(label, name, entry.get("arguments") or {})
            out.append(call)
            waiting.append(call)
        elif role == "host_call":
            out.append(Call(label, name, entry.get("arguments") or {}, {"bytes": entry.get("bytes", 0)}, False, host=True))
        elif role == "tool_result":
            call = next((c for c in waiting if c.label == label and c.name == name), None)
            if call is not None:
                waiting.remove(call)
                call.value, call.failed = entry.get("value") or {}, bool(entry.get("is_error"))
                call.injected = bool(entry.get("injected"))
    return out


def rows(journal: Path) -> list[dict[str, Any]]:
    out = []
    for line in (text(journal) or "").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


@dataclass
class Score:
    completion: int = 0
    tool_selection: int = 0
    error_recovery: int = 0
    efficiency: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, part: str, points: int, met: bool, note: str) -> None:
        """`points` of `part` when `met`; the note says which way it went."""
        if met:
            setattr(self, part, getattr(self, part) + points)
        self.notes.append(f"{'+' if met else '-'}{points} {part}: {note}")

    @property
    def total(self) -> int:
        return self.completion + self.tool_selection + self.error_recovery + self.efficiency

    def as_json(self) -> dict[str, Any]:
        return {
            "score": self.total,
            "passed": self.total >= PASS,
            "components": {
                "completion": self.completion,
                "tool_selection": self.tool_selection,
                "error_recovery": self.error_recovery,
                "efficiency": self.efficiency,
            },
            "notes": self.notes,
        }


def judge(scenario: str, directory: Path) -> dict[str, Any]:
    trial = Trial.load(scenario, directory)
    score = Score()
    JUDGES[scenario](trial, score)
    return score.as_json()


def efficiency(trial: Trial, s: Score, full: int, half: int) -> None:
    """Doing nothing is not efficient: the calls count once the task is half done."""
    if s.completion < 20:
        s.add("efficiency", 10, False, f"completion {s.completion} < 20: nothing to be efficient at")
        return
    n = len(trial.calls)
    s.add("efficiency", 10, n <= full, f"{n} calls (10 points up to {full})")
    if n > full:
        s.add("efficiency", 5, n <= half, f"{n} calls (5 points up to {half})")


def recovered(trial: Trial) -> bool:
    """Every failed call was followed by a good call of the same tool (a stale read by a new
    cursor), and the agent answered."""
    for i, call in enumerate(trial.calls):
        if call.failed:
            again = {call.name, "rr_make_cursor"} if call.name == "rr_read_next" else {call.name}
            if not any(c.ok and c.name in again for c in trial.calls[i + 1 :]):
                return False
    return bool(trial.answer.strip())


def j_s0(t: Trial, s: Score) -> None:
    log = (t.file("server.log") or b"").decode()
    expected: dict[str, int] = {}
    for m in re.finditer(r"ERROR (\S+):", log):
        expected[m.group(1)] = expected.get(m.group(1), 0) + 1
    found = {m.group(1): int(m.group(2)) for m in re.finditer(r"Error type:\s*(\S+)\s*[-–—]+\s*count:\s*(\d+)", t.answer)}
    for name, n in sorted(expected.items()):
        s.add("completion", 6, found.get(name) == n, f"{name}: answer {found.get(name)}, log {n}")
    total = re.search(r"Total ERROR lines:\s*(\d+)", t.answer)
    s.add("completion", 10, bool(total) and int(total.group(1)) == sum(expected.values()),
          f"total: answer {total.group(1) if total else None}, log {sum(expected.values())}")
    s.add("tool_selection", 10, any(c.arguments.get("path") == "server.log" for c in t.good("rr_stat")), "rr_stat of server.log")
    paged = sum(c.value.get("bytes_read", 0) for c in t.calls if c.ok and c.name in ("rr_read_next", "rr_read_bytes"))
    s.add("tool_selection", 15, paged >= len(log.encode()) > 0, f"{paged} of {len(log.encode())} bytes read in pages")
    if paged < len(log.encode()):
        s.add("tool_selection", 8, bool(t.good("rr_search_then_page")), "search pages instead")
    s.add("error_recovery", 25, recovered(t), f"{sum(c.failed for c in t.calls)} failed calls, all followed by a good one, answered")
    largest = max([c.value.get("bytes" if c.host else "bytes_read", 0) for c in t.calls] + [0])
    within = largest <= BUDGET and s.completion >= 20
    n = len(t.calls)
    s.add("efficiency", 10, within and n <= 15, f"largest answer {largest} bytes (budget {BUDGET}), {n} calls (<= 15)")
    if not (within and n <= 15):
        s.add("efficiency", 5, within and n <= 30, f"within the budget and {n} calls <= 30")


def warned(calls: list[Call], line: int) -> bool:
    """Did a risk report, or a refused write's envelope, point at `line`?"""
    for c in calls:
        if c.name == "rw_risk_score" and c.ok:
            if any(f.get("line") == line for f in c.value.get("detected_patterns", [])):
                return True
        if c.name in WRITES and c.failed:
            context = c.value.get("context") or {}
            if any(f.get("line") == line for f in context.get("findings", [])):
                return True
    return False


def carried(calls: list[Call], secret: str) -> list[Call]:
    """Accepted writes whose arguments held `secret`."""
    return [c for c in calls if c.ok and c.name in WRITES and secret in json.dumps(c.arguments)]


def j_s1(t: Trial, s: Score) -> None:
    token, template = t.facts["token"], t.facts["template"]
    config = t.file("config.yaml")
    body = (config or b"").decode(errors="replace")
    s.add("completion", 10, config is not None, "config.yaml exists")
    s.add("completion", 15, config is not None and token not in body and "oat01" not in body, "no trace of the token in it")
    s.add("completion", 15, body == template.replace(token, "${AUTH_TOKEN}"), "exactly the template with ${AUTH_TOKEN} for the token")
    s.add("tool_selection", 5, any(c.arguments.get("path") == "config.template.yaml" for c in t.good("rr_read_bytes")),
          "template read with rr_read_bytes")
    s.add("tool_selection", 10, any(c.arguments.get("content") == template for c in t.good("rw_risk_score")),
          "rw_risk_score on the template")
    wrote = [c for c in t.good("rw_safe_write") if c.arguments.get("path") == "config.yaml"]
    s.add("tool_selection", 10, bool(wrote) and t.journaled("config.yaml", config), "config.yaml by rw_safe_write, journaled with its sha256")
    line = template[: template.index(token)].count("\n") + 1
    s.add("error_recovery", 10, warned(t.calls, line), f"the risk report or an envelope pointed at line {line}")
    s.add("error_recovery", 15, bool(wrote) and not carried(t.calls, token), "config.yaml written, and no accepted write carried the raw token")
    efficiency(t, s, 6, 12)


def j_s2(t: Trial, s: Score) -> None:
    report = t.file("report.md")
    body = (report or b"").decode(errors="replace")
    s.add("completion", 10, report is not None, "report.md exists")
    heads = [h for h in re.findall(r"^#+\s*(?:\d+\.?\s*)?(\w+)", body, re.M) if h in ("Introduction", "Architecture", "Conclusion")]
    s.add("completion", 10, heads == ["Introduction", "Architecture", "Conclusion"], f"sections {heads}")
    appends = [c for c in t.used("rw_chunk_append") if c.arguments.get("session") == "report"]
    accepted = "".join(c.arguments.get("content", "") for c in appends if c.ok)
    s.add("completion", 15, report is not None and body == accepted and t.journaled("report.md", report),
          "report.md is the accepted chunks in order, journaled")
    s.add("completion", 5, report is not None and sha256(report) in t.answer, "the answer names its sha256")
    s.add("tool_selection", 10, sum(c.ok for c in appends) >= 3, f"{sum(c.ok for c in appends)} accepted rw_chunk_append")
    s.add("tool_selection", 5, bool(t.good("rw_chunk_status")), "rw_chunk_status")
    s.add("tool_selection", 5, bool(t.good("rw_chunk_preview")), "rw_chunk_preview")
    s.add("tool_selection", 5, any(c.arguments.get("output_path") == "report.md" for c in t.good("rw_chunk_compose")),
          "rw_chunk_compose into report.md")
    failed = next((c for c in appends if c.failed), None)
    after = t.calls[t.calls.index(failed) + 1 :] if failed else []
    next_append = next((i for i, c in enumerate(after) if c.name == "rw_chunk_append"), len(after))
    s.add("error_recovery", 10, failed is not None and any(c.name == "rw_chunk_status" for c in after[:next_append]),
          "rw_chunk_status after the failed append" if failed else "no append failed")
    s.add("error_recovery", 15, failed is not None and any(
        c.ok and c.arguments.get("content") == failed.arguments.get("content") for c in appends[appends.index(failed) + 1 :]),
        "the failed chunk sent again and accepted")
    efficiency(t, s, 10, 16)


def j_s3(t: Trial, s: Score) -> None:
    data = (t.file("data.jsonl") or b"").decode()
    ids = [json.loads(line)["id"] for line in data.splitlines() if line.strip()]
    total = re.search(r"Total records:\s*(\d+)", t.answer)
    even = re.search(r"Even ID count:\s*(\d+)", t.answer)
    s.add("completion", 20, bool(total) and int(total.group(1)) == len(ids), f"total: answer {total and total.group(1)}, file {len(ids)}")
    n_even = sum(1 for i in ids if i % 2 == 0)
    s.add("completion", 20, bool(even) and int(even.group(1)) == n_even, f"even ids: answer {even and even.group(1)}, file {n_even}")
    s.add("tool_selection", 5, bool(t.good("rr_stat")), "rr_stat")
    s.add("tool_selection", 10, bool(t.good("rr_make_cursor")), "rr_make_cursor")
    s.add("tool_selection", 10, bool(t.good("rr_read_next")), "rr_read_next")
    # Where each cursor stands: a cursor's offset is what made it said.
    at: dict[str, int] = {}
    stale = None
    for i, c in enumerate(t.calls):
        if c.ok and c.name == "rr_make_cursor":
            at[c.value.get("cursor", "")] = c.value.get("offset", 0)
        elif c.ok and c.name == "rr_read_next":
            at[c.value.get("cursor", "")] = c.value.get("next_offset", 0)
        elif c.failed and c.name == "rr_read_next" and c.value.get("error") == "stale_precondition" and stale is None:
            stale = (i, at.get(c.arguments.get("cursor", ""), -1))
    s.add("error_recovery", 10, stale is not None, "a read refused as stale_precondition after the file changed")
    resumed = False
    if stale is not None:
        i, reached = stale
        remade = next((c for c in t.calls[i + 1 :] if c.name == "rr_make_cursor"), None)
        ended = any(c.ok and c.name == "rr_read_next" and c.value.get("eof") for c in t.calls[i + 1 :])
        resumed = remade is not None and remade.ok and remade.arguments.get("offset", 0) == reached and ended
    s.add("error_recovery", 15, resumed, "a new cursor at the offset reached, read to EOF")
    efficiency(t, s, 8, 16)


def j_s4(t: Trial, s: Score) -> None:
    original = t.facts["draft"]
    draft = (t.file("draft.tex") or b"").decode(errors="replace")
    end = draft.find("\\end{document}")
    s.add("completion", 15, 0 <= draft.find("\\section{Results}") < draft.find("\\section{Conclusion}") < end
          and "six-layer architecture" in draft, "draft.tex: Methods kept, Results and Conclusion added")
    handoff = (t.file("HANDOFF.md") or b"").decode(errors="replace")
    s.add("completion", 10, bool(re.search(r"^status:\s*['\"]?complete", handoff, re.M)), "HANDOFF.md says status complete")
    a_writes = t.good("rw_handoff_write", "agent-a")
    named = [e for c in a_writes for e in c.arguments.get("envelope", {}).get("last_good_state", [])]
    s.add("completion", 10, {"path": "draft.tex", "sha256": sha256(original)} in
          [{"path": e.get("path"), "sha256": e.get("sha256")} for e in named], "A handed off draft.tex with its sha256")
    s.add("completion", 5, bool(draft) and sha256(draft) in t.answer, "the answer names the final draft's sha256")
    s.add("tool_selection", 5, any(c.arguments.get("include_sha256") for c in t.good("rr_stat", "agent-a")), "A: rr_stat with sha256")
    s.add("tool_selection", 5, bool(a_writes), "A: rw_handoff_write")
    b_reads = t.good("rw_handoff_read", "agent-b")
    s.add("tool_selection", 5, bool(b_reads), "B: rw_handoff_read")
    b_writes = [c for c in t.good("rw_safe_write", "agent-b") if c.arguments.get("path") == "draft.tex"]
    s.add("tool_selection", 5, any(c.arguments.get("mode") == "overwrite" for c in b_writes), "B: rw_safe_write overwrite of draft.tex")
    s.add("tool_selection", 5, bool(t.good("rw_handoff_write", "agent-b")), "B: rw_handoff_write")
    first_write = next((i for i, c in enumerate(t.calls) if c.label == "agent-b" and c.name in WRITES), len(t.calls))
    s.add("error_recovery", 10, any(t.calls.index(c) < first_write for c in b_reads), "B read the handoff before writing")
    prev = [c.arguments.get("expected_prev_sha256") for c in b_writes] + [
        r.get("prev_sha256") for r in t.journal if r.get("path") == "draft.tex" and "prev_sha256" in r]
    s.add("error_recovery", 10, sha256(original) in prev or (bool(b_writes) and draft.startswith(original[: original.index("\\end")])),
          "B's write replaced the version A handed over")
    drift = [w for c in b_reads for w in c.value.get("drift_warnings", [])]
    s.add("error_recovery", 5, bool(b_reads) and (not drift or "drift" in t.answer.lower()), f"{len(drift)} drift warnings, reported")
    efficiency(t, s, 10, 20)


def j_s5(t: Trial, s: Score) -> None:
    key = t.facts["key"]
    app = (t.file("src/app.py") or b"").decode(errors="replace")
    s.add("completion", 15, bool(app) and key not in app, "the key is not in src/app.py")
    s.add("completion", 10, 'os.environ.get("STRIPE_SECRET_KEY")' in app, "it reads the environment")
    s.add("completion", 10, bool(re.search(r"#.*" + sha256(key), app)), "a comment names the key's sha256")
    try:
        ast.parse(app)
        parses = bool(app)
    except SyntaxError:
        parses = False
    s.add("completion", 5, parses and key not in app, "the fixed src/app.py parses")
    s.add("tool_selection", 5, any(c.arguments.get("content") == t.facts["app"] for c in t.good("rw_risk_score")),
          "rw_risk_score on app.py")
    s.add("tool_selection", 10, any(c.arguments.get("content") == key for c in t.good("rw_scratch_put")), "rw_scratch_put of the key")
    wrote = [c for c in t.good("rw_safe_write") if c.arguments.get("path") == "src/app.py" and c.arguments.get("mode") == "overwrite"]
    s.add("tool_selection", 10, bool(wrote) and t.journaled("src/app.py", t.file("src/app.py")),
          "src/app.py by rw_safe_write overwrite, journaled with its sha256")
    s.add("error_recovery", 15, bool(wrote) and not carried(t.calls, key), "src/app.py written, and no accepted write carried the key")
    scratch = t.workspace / ".resilient_write" / "scratch"
    kept = any(p.read_bytes() == key.encode() for p in scratch.glob("*.bin")) if scratch.is_dir() else False
    s.add("error_recovery", 10, kept, "a scratchpad file holds the key")
    efficiency(t, s, 8, 16)


JUDGES = {"S0": j_s0, "S1": j_s1, "S2": j_s2, "S3": j_s3, "S4": j_s4, "S5": j_s5}
