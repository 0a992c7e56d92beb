"""The paper's scenarios as scripted MCP clients (no LLM), against `rwfs mcp -w WORKSPACE`:

  S0        read a 550 KB, 10,000-line log by cursor and by search pages; the error counts agree
  S1        content-filter recovery: a write blocked for a credential, redacted from the
            envelope's own findings (line, column, length), then accepted
  S2        a chunked report: appended in parts, refused while incomplete, composed
  S3        cursor drift: the file changes between reads → stale_precondition (file_changed);
            a new cursor from the current offset reads the rest
  S4        handoff across two clients (two processes): the second resumes from the first's
            last good state, verified by hash
  S5        a hard-coded Stripe `sk_live_` key moved to the scratchpad, replaced by an
            environment read, the fixed file written over the old one (compare-and-swap)
  incident  the paper's motivating incident (its Table 3: write attempts, content lost,
            structured error): a draft holding an `sk-ant-oat01-` token is refused with a typed
            envelope; nothing is lost (the draft's bytes are quarantined in objects/, the token
            goes to the scratchpad); identical retries spend the retry budget until refused

Each scenario prints its outcome and exits non-zero on failure:

    python scenarios.py S0 --rwfs target/debug/rwfs -w /tmp/ws
"""

from __future__ import annotations

import os
import string
import subprocess

from rwmcp import ALNUM, check, connect, main, parser, put_file, random_text, read_file, rwfs_server, say, sha256


# --- S0 --------------------------------------------------------------------------------------

LOG_LINES = 10_000
LINE_BYTES = 55  # 10,000 lines of 55 bytes: 550,000 bytes


def log_line(i: int) -> str:
    level = "ERROR" if i % 37 == 0 else "WARN " if i % 11 == 0 else "INFO "
    head = f"2026-11-21T{i // 3600 % 24:02}:{i // 60 % 60:02}:{i % 60:02}Z {level} worker-{i % 16:02} req {i:05}"
    return head.ljust(LINE_BYTES - 1, ".") + "\n"


async def s0(args) -> None:
    ws = args.workspace
    log = "".join(log_line(i) for i in range(LOG_LINES)).encode()
    check(len(log) == 550_000, "the log is 550,000 bytes")
    errors = [i + 1 for i in range(LOG_LINES) if i % 37 == 0]  # 1-based line numbers
    put_file(ws, "logs/service.log", log)
    async with connect(rwfs_server(args.rwfs, ws), name="s0-reader") as c:
        stat = await c.ok("rr_stat", {"path": "logs/service.log", "include_sha256": True})
        check(stat["size"] == len(log) and stat["sha256"] == sha256(log), "rr_stat: size and sha256", stat)

        # By cursor, 64 KiB at a time.
        made = await c.ok("rr_make_cursor", {"path": "logs/service.log", "max_bytes": 65536})
        cursor, got, reads = made["cursor"], [], 0
        while True:
            page = await c.ok("rr_read_next", {"cursor": cursor})
            reads += 1
            check(page["offset"] == sum(len(g) for g in got), "each page starts where the last ended", page["offset"])
            got.append(page["content"].encode())
            cursor = page["cursor"]
            if page["eof"]:
                break
            check(reads < 20, "the cursor reaches the end in fewer than 20 pages")
        whole = b"".join(got)
        check(whole == log, "the pages put together are the log, byte for byte")
        by_cursor = sum(1 for line in whole.decode().splitlines() if " ERROR " in line)
        check(by_cursor == len(errors), f"by cursor: {len(errors)} ERROR lines", by_cursor)
        say(f"S0 cursor: {reads} pages of <= 64 KiB, {len(whole)} bytes, {by_cursor} ERROR lines")

        # By search pages, 100 matches at a time.
        from_line, matches, pages = 1, [], 0
        while True:
            page = await c.ok(
                "rr_search_then_page",
                {"path": "logs/service.log", "query": "ERROR", "from_line": from_line, "max_matches": 100,
                 "context_before": 0, "context_after": 0},
            )
            pages += 1
            matches += page["matches"]
            check(page["matches_returned"] == len(page["matches"]), "matches_returned counts the page", page["matches_returned"])
            if not page["has_more"]:
                break
            check(page["next_from_line"] > from_line, "next_from_line moves forward", page["next_from_line"])
            from_line = page["next_from_line"]
            check(pages < 10, "the search ends in fewer than 10 pages")
        lines = [m["match_line"] for m in matches]
        check(lines == errors, f"by search: the {len(errors)} ERROR lines, in order, once each", lines[:5], lines[-5:])
        check(all("ERROR" in m["excerpt"] for m in matches), "every excerpt holds its match")
        say(f"S0 search: {pages} pages, {len(lines)} ERROR lines (expected {len(errors)})")


# --- S1 --------------------------------------------------------------------------------------


async def s1(args) -> None:
    ws = args.workspace
    key_id = "AKIA" + random_text(16, string.ascii_uppercase + "234567")
    secret = random_text(40, ALNUM + "/+")
    draft = (
        "[default]\n"
        "region = eu-west-1\n"
        f"aws_access_key_id = {key_id}\n"
        f"aws_secret_access_key = {secret}\n"
    )
    async with connect(rwfs_server(args.rwfs, ws), name="s1-agent") as c:
        envelope = await c.err("rw_safe_write", {"path": "config/aws.ini", "content": draft})
        check(envelope["error"] == "blocked" and envelope["reason_hint"] == "content_filter", "blocked by the content filter", envelope)
        check(envelope["suggested_action"] == "redact", "the envelope says: redact", envelope)
        check(envelope["detected_patterns"], "the envelope names what it found", envelope)
        check(secret not in str(envelope) and key_id not in str(envelope), "the envelope never echoes the credential")
        check(not os.path.exists(os.path.join(ws, "config/aws.ini")), "nothing was written")
        findings = envelope["context"].get("findings", [])
        check(findings, "the envelope's context lists the findings (line, column, length)", envelope["context"])
        say(f"S1 blocked: {envelope['error']}/{envelope['reason_hint']}, rules {envelope['context'].get('blocking_rules')}")

        # Redact from the findings alone: the agent never needs the envelope to repeat the secret.
        lines = draft.splitlines(keepends=True)
        for f in sorted(findings, key=lambda f: (f["line"], f["column"]), reverse=True):
            line = lines[f["line"] - 1]
            start = f["column"] - 1
            replacement = f.get("replacement") or "${REDACTED}"
            lines[f["line"] - 1] = line[:start] + replacement + line[start + f["length"]:]
        redacted = "".join(lines)
        check(secret not in redacted, "the redaction removed the secret", redacted)
        wrote = await c.ok("rw_safe_write", {"path": "config/aws.ini", "content": redacted})
        check(read_file(ws, "config/aws.ini") == redacted.encode(), "the redacted file is on disk")
        say(f"S1 recovered: {len(findings)} finding(s) redacted, written {wrote['bytes']} bytes on the 2nd attempt")


# --- S2 --------------------------------------------------------------------------------------


async def s2(args) -> None:
    ws = args.workspace
    sections = [
        f"## {i}. Section {i}\n\n" + "".join(f"- item {i}.{j}: measured {i * j} ms\n" for j in range(1, 120)) + "\n"
        for i in range(1, 6)
    ]
    async with connect(rwfs_server(args.rwfs, ws), name="s2-agent") as c:
        for i, section in enumerate(sections[:3], start=1):
            part = await c.ok("rw_chunk_append", {"session": "q3-report", "content": section, "total_expected": 5})
            check(part["index"] == i and part["sha256"] == sha256(section), f"part {i} stored", part)
        early = await c.err("rw_chunk_compose", {"session": "q3-report", "output_path": "reports/q3.md"})
        check(early["error"] == "stale_precondition", "composing 3 of 5 parts is refused", early)
        check(not os.path.exists(os.path.join(ws, "reports/q3.md")), "nothing composed yet")
        say(f"S2 compose with 3/5 parts: {early['error']} ({early['context'].get('reason')})")
        for i, section in enumerate(sections[3:], start=4):
            part = await c.ok("rw_chunk_append", {"session": "q3-report", "content": section})
            check(part["index"] == i, f"part {i} stored", part)
        status = await c.ok("rw_chunk_status", {"session": "q3-report"})
        check(status["present_indices"] == [1, 2, 3, 4, 5] and status["total_expected"] == 5, "all five parts", status)
        preview = await c.ok("rw_chunk_preview", {"session": "q3-report"})
        whole = "".join(sections)
        check(preview["content"] == whole and preview["chunk_count"] == 5, "the preview is the report", preview["chunk_count"])
        composed = await c.ok("rw_chunk_compose", {"session": "q3-report", "output_path": "reports/q3.md", "cleanup": True})
        check(composed["sha256"] == sha256(whole) and composed["bytes"] == len(whole.encode()), "composed report", composed)
        check(read_file(ws, "reports/q3.md") == whole.encode(), "the report on disk is the parts in order")
        after = await c.ok("rw_chunk_status", {"session": "q3-report"})
        check(after["exists"] is False, "cleanup removed the session", after)
        say(f"S2 composed: 5 parts, {composed['bytes']} bytes, session cleaned up")


# --- S3 --------------------------------------------------------------------------------------


async def s3(args) -> None:
    ws = args.workspace
    first = "".join(f"line {i:05} of the first run\n" for i in range(1, 6001)).encode()
    put_file(ws, "logs/run.log", first)
    added = "".join(f"line {i:05} appended later\n" for i in range(6001, 6501))
    async with connect(rwfs_server(args.rwfs, ws), name="s3-reader") as c:
        made = await c.ok("rr_make_cursor", {"path": "logs/run.log", "max_bytes": 65536})
        page = await c.ok("rr_read_next", {"cursor": made["cursor"]})
        check(page["content"].encode() == first[:65536] and not page["eof"], "the first page", page["bytes_read"])
        offset, cursor = page["next_offset"], page["cursor"]

        # The file changes between two reads.
        await c.ok("rw_safe_write", {"path": "logs/run.log", "content": added, "mode": "append"})
        stale = await c.err("rr_read_next", {"cursor": cursor})
        check(stale["error"] == "stale_precondition", "a read with the old cursor is refused", stale)
        reason = (stale["context"].get("reason"), stale["reason_hint"])
        check("file_changed" in reason, "the refusal says file_changed", stale)
        say(f"S3 drift: {stale['error']} ({stale['context'].get('reason')}) at offset {offset}")

        # Re-create the cursor from the current offset and read on.
        made = await c.ok("rr_make_cursor", {"path": "logs/run.log", "offset": offset, "max_bytes": 65536})
        check(made["size"] == len(first) + len(added), "the new cursor sees the new size", made)
        cursor, rest, reads = made["cursor"], [], 0
        while True:
            page = await c.ok("rr_read_next", {"cursor": cursor})
            rest.append(page["content"].encode())
            cursor, reads = page["cursor"], reads + 1
            if page["eof"]:
                break
            check(reads < 20, "the new cursor reaches the end")
        check(first[:offset] + b"".join(rest) == first + added.encode(), "old page + new pages = the file now")
        say(f"S3 resumed: {reads} more page(s), {sum(map(len, rest))} bytes, nothing missed or repeated")


# --- S4 --------------------------------------------------------------------------------------


async def s4(args) -> None:
    ws = args.workspace
    server = rwfs_server(args.rwfs, ws)
    plan = "# Migration plan\n\n1. add column\n2. backfill\n3. switch reads\n"
    code = "def backfill(rows):\n    return [dict(r, migrated=True) for r in rows]\n"
    async with connect(server, name="s4-first-agent") as first:
        a = await first.ok("rw_safe_write", {"path": "docs/plan.md", "content": plan})
        b = await first.ok("rw_safe_write", {"path": "src/backfill.py", "content": code})
        envelope = {
            "task_id": "db-migration",
            "status": "handed_off",
            "agent": "s4-first-agent",
            "summary": "Plan written, backfill drafted; reads not switched yet.",
            "next_steps": ["write the backfill test", "switch reads"],
            "last_good_state": [
                {"path": "docs/plan.md", "sha256": a["sha256"], "bytes": a["bytes"]},
                {"path": "src/backfill.py", "sha256": b["sha256"], "bytes": b["bytes"]},
            ],
            "open_questions": ["batch size?"],
        }
        wrote = await first.ok("rw_handoff_write", {"envelope": envelope, "body": "Context: see docs/plan.md."})
        check(wrote["drift_warnings"] == [], "no drift at handoff", wrote)
    say(f"S4 first agent: 2 files, handoff {wrote['handoff_path']} ({wrote['sha256'][:12]}…)")

    async with connect(server, name="s4-second-agent") as second:
        read = await second.ok("rw_handoff_read", {})
        got = read["envelope"]
        for key, value in envelope.items():
            check(got.get(key) == value, f"the second agent reads {key} as written", got)
        check(read["drift_warnings"] == [], "nothing drifted in between", read)
        for entry in got["last_good_state"]:
            on_disk = read_file(ws, entry["path"])
            check(sha256(on_disk) == entry["sha256"], f"{entry['path']} is the version handed over")
        test = "from backfill import backfill\n\ndef test_backfill():\n    assert backfill([{}]) == [{'migrated': True}]\n"
        t = await second.ok("rw_safe_write", {"path": "tests/test_backfill.py", "content": test})
        done = dict(envelope, status="complete", agent="s4-second-agent", next_steps=["switch reads"])
        done["last_good_state"] = envelope["last_good_state"] + [{"path": "tests/test_backfill.py", "sha256": t["sha256"]}]
        again = await second.ok("rw_handoff_write", {"envelope": done, "archive": True})
        check(again["drift_warnings"] == [], "the second handoff has no drift", again)
        final = await second.ok("rw_handoff_read", {})
        check(final["envelope"]["status"] == "complete", "the handoff now says complete", final["envelope"])
    say("S4 second agent: resumed from the handoff (hashes verified), wrote the test, handed back")


# --- S5 --------------------------------------------------------------------------------------


async def s5(args) -> None:
    ws = args.workspace
    key = "sk_" + "live_" + random_text(24)
    original = (
        "import stripe\n\n"
        f'stripe.api_key = "{key}"\n\n\n'
        "def charge(customer, cents):\n"
        '    return stripe.PaymentIntent.create(customer=customer, amount=cents, currency="eur")\n'
    )
    put_file(ws, "app/billing.py", original.encode())
    async with connect(rwfs_server(args.rwfs, ws), name="s5-agent") as c:
        score = await c.ok("rw_risk_score", {"content": original, "target_path": "app/billing.py"})
        findings = score["detected_patterns"]
        check(findings and findings[0]["line"] == 3, "risk_score finds the key on line 3", findings)
        check(key not in str(score), "risk_score never echoes the key")
        say(f"S5 risk_score: {findings[0].get('pattern')} on line {findings[0]['line']}, verdict {score['verdict']}")

        put = await c.ok("rw_scratch_put", {"content": key, "label": "stripe-live-key", "notes": "from app/billing.py"})
        check(put["sha256"] == sha256(key), "the key is in the scratchpad", put)

        fixed = original.replace("import stripe\n", "import os\n\nimport stripe\n").replace(
            f'"{key}"', 'os.environ["STRIPE_SECRET_KEY"]'
        )
        check("sk_live_" not in fixed, "the fixed file has no key")
        rescore = await c.ok("rw_risk_score", {"content": fixed, "target_path": "app/billing.py"})
        check(not rescore["detected_patterns"], "the fixed file scores clean", rescore)
        wrote = await c.ok(
            "rw_safe_write",
            {"path": "app/billing.py", "content": fixed, "mode": "overwrite", "expected_prev_sha256": sha256(original)},
        )
        check(read_file(ws, "app/billing.py") == fixed.encode(), "the fixed file is on disk")
        back = await c.ok("rw_scratch_get", {"sha256": put["sha256"]})
        check(back["content"] == key, "the key is still there, in the scratchpad")
        say(f"S5 fixed: key -> scratchpad {put['sha256'][:12]}…, env read in its place, {wrote['bytes']} bytes written")


# --- the incident ----------------------------------------------------------------------------


async def incident(args) -> None:
    ws = args.workspace
    token = "sk-ant-oat01-" + random_text(95, ALNUM + "-_") + "AA"
    draft = (
        "# Debugging the CI auth failure\n\n"
        + "".join(f"Step {i}: checked the runner's environment, nothing unusual.\n" for i in range(1, 80))
        + "\nThe failing request sent:\n\n"
        f"    Authorization: Bearer {token}\n\n"
        "Next: rotate the token and move it out of the workflow file.\n"
    )
    async with connect(rwfs_server(args.rwfs, ws), name="incident-agent") as c:
        call = {"path": "notes/ci-auth.md", "content": draft}
        attempts = 1
        envelope = await c.err("rw_safe_write", call)
        check(envelope["error"] == "blocked" and envelope["reason_hint"] == "content_filter", "the draft is refused", envelope)
        check(token not in str(envelope), "the envelope never echoes the token")
        budget = envelope["retry_budget"]
        check(budget >= 1, "the first refusal leaves a retry budget", envelope)

        # Nothing is lost: the refused draft is quarantined in objects/, sealed at rest (the
        # token is in no file of the state directory), and `rwfs show` gives it back byte for byte.
        ctx = envelope["context"]
        check(ctx.get("quarantined_sha256") == sha256(draft), "the quarantined sha256 is the draft's", ctx)
        check(token.encode() not in read_file(ws, ctx["quarantined_in"]), "objects/ holds the draft sealed",
              ctx["quarantined_in"])
        shown = subprocess.run([args.rwfs, "-w", ws, "show", f"notes/ci-auth.md@{ctx['quarantined_sha256'][:12]}"],
                               capture_output=True)
        check(shown.returncode == 0 and shown.stdout == draft.encode(), "rwfs show gives the draft back byte for byte",
              shown.stderr.decode(errors="replace") + shown.stdout[:200].decode(errors="replace"))
        check(not os.path.exists(os.path.join(ws, "notes/ci-auth.md")), "nothing reached the tree")
        say(f"incident attempt 1: {envelope['error']}/{envelope['reason_hint']}, retry_budget {budget}, "
            f"draft quarantined in {ctx['quarantined_in']}")

        # Identical retries spend the budget, then are refused outright.
        budgets = [budget]
        while True:
            attempts += 1
            check(attempts <= budgets[0] + 2, "the retries end within the budget")
            again = await c.err("rw_safe_write", call)
            if again["context"].get("reason") == "retry_budget_exhausted":
                check(again["suggested_action"] == "abort", "an exhausted budget says abort", again)
                break
            budgets.append(again["retry_budget"])
            check(budgets[-1] == budgets[-2] - 1, "each identical retry spends one", budgets)
        check(budgets[-1] == 0, "the budget reached 0 before the refusal", budgets)
        say(f"incident retries: budgets {budgets}, attempt {attempts} refused: retry_budget_exhausted -> abort")

        # The way out: the token to the scratchpad, the draft redacted.
        put = await c.ok("rw_scratch_put", {"content": token, "label": "ci-oauth-token"})
        redacted = draft.replace(token, "${CLAUDE_CODE_OAUTH_TOKEN}")
        wrote = await c.ok("rw_safe_write", dict(call, content=redacted))
        attempts += 1
        check(read_file(ws, "notes/ci-auth.md") == redacted.encode(), "the redacted draft is written")
        back = await c.ok("rw_scratch_get", {"sha256": put["sha256"]})
        check(redacted.replace("${CLAUDE_CODE_OAUTH_TOKEN}", back["content"]) == draft,
              "the written file and the scratchpad together give back the draft")
        say(f"incident recovered: token -> scratchpad {put['sha256'][:12]}…, redacted draft written ({wrote['bytes']} bytes)")
        say(f"TABLE3 write_attempts={attempts} content_lost_bytes=0 structured_error=yes")


SCENARIOS = {"S0": s0, "S1": s1, "S2": s2, "S3": s3, "S4": s4, "S5": s5, "incident": incident}


if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0])
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    name = p.parse_known_args()[0].scenario
    main(f"scenario {name}", lambda args: SCENARIOS[args.scenario](args), p)
