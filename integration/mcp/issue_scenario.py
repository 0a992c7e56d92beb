"""The issue's end-to-end scenario over stdio, as an agent would drive it (no LLM):

1. risk-score a draft that holds a secret: the finding names the rule, line and column, never
   the secret;
2. write the draft: refused with a typed envelope (isError true, envelope v1 in
   structuredContent: blocked / content_filter / redact), nothing written;
3. move the secret to the scratchpad (rw_scratch_put);
4. write the redacted draft (rw_safe_write): it lands, and scores clean;
5. a report in three chunks (rw_chunk_append ×3), rw_chunk_status, rw_chunk_compose;
6. rw_handoff_write naming the last good state (paths and hashes);
7. the file is edited after the handoff; a second client (a new process, another name) reads
   the handoff and is warned of the drift (hash_mismatch), finds the secret by label, and the
   journal holds the refusal and the write of the notes, by the first client.

    python issue_scenario.py --rwfs target/debug/rwfs -w /tmp/ws
"""

from __future__ import annotations

import os
import secrets
import string

from rwmcp import check, connect, main, parser, rwfs_server, say, sha256


def token() -> str:
    # Built at run time: no credential-shaped literal in the repository.
    alphabet = string.ascii_letters + string.digits
    return "sk_" + "live_" + "".join(secrets.choice(alphabet) for _ in range(32))


async def run(args) -> None:
    ws = args.workspace
    server = rwfs_server(args.rwfs, ws)
    secret = token()
    draft = (
        "# Payments service\n\n"
        "Configuration for the deploy:\n\n"
        f'STRIPE_KEY = "{secret}"\n'
        "RETRIES = 3\n"
    )
    report_parts = [f"## Part {i}\n\n" + f"Finding {i}: the service retried {i * 7} times.\n" * 40 for i in (1, 2, 3)]

    async with connect(server, name="agent-one") as agent:
        # 1. Score the draft.
        score = await agent.ok("rw_risk_score", {"content": draft, "target_path": "deploy/NOTES.md"})
        findings = score["detected_patterns"]
        check(findings, "risk_score finds the secret", score)
        check(all(secret not in str(f) for f in findings), "risk_score never echoes the secret", findings)
        check(findings[0].get("line") == 5, "the finding is on line 5", findings)
        say(f"risk_score: verdict {score['verdict']}, {len(findings)} finding(s), rule {findings[0].get('pattern')}")

        # 2. Write it: a typed envelope, nothing written.
        envelope = await agent.err("rw_safe_write", {"path": "deploy/NOTES.md", "content": draft})
        check(envelope["error"] == "blocked", "the draft is blocked", envelope)
        check(envelope["reason_hint"] == "content_filter", "reason_hint content_filter", envelope)
        check(envelope["suggested_action"] == "redact", "suggested_action redact", envelope)
        check(secret not in str(envelope), "the envelope never echoes the secret")
        check(not os.path.exists(os.path.join(ws, "deploy/NOTES.md")), "nothing was written")
        say(f"safe_write(draft): isError, {envelope['error']}/{envelope['reason_hint']} -> {envelope['suggested_action']}")

        # 3. The secret to the scratchpad.
        put = await agent.ok("rw_scratch_put", {"content": secret, "label": "stripe-key", "content_type": "text/plain"})
        check(put["sha256"] == sha256(secret), "the scratchpad names the secret by its sha256", put)
        say(f"scratch_put: {put['sha256'][:12]}…")

        # 4. The redacted draft.
        redacted = draft.replace(f'"{secret}"', 'os.environ["STRIPE_SECRET_KEY"]')
        wrote = await agent.ok("rw_safe_write", {"path": "deploy/NOTES.md", "content": redacted})
        check(wrote["sha256"] == sha256(redacted), "safe_write reports the file's sha256", wrote)
        with open(os.path.join(ws, "deploy/NOTES.md"), "rb") as f:
            check(f.read() == redacted.encode(), "the redacted file is on disk")
        rescore = await agent.ok("rw_risk_score", {"content": redacted})
        check(not rescore["detected_patterns"], "the redacted draft scores clean", rescore)
        say(f"safe_write(redacted): {wrote['bytes']} bytes, {wrote['journal_id']}")

        # 5. A report in three chunks.
        for i, part in enumerate(report_parts, start=1):
            appended = await agent.ok("rw_chunk_append", {"session": "report", "content": part, "total_expected": 3})
            check(appended["index"] == i, f"chunk_append #{i} gets index {i}", appended)
        status = await agent.ok("rw_chunk_status", {"session": "report"})
        check(status["exists"] is True and status["present_indices"] == [1, 2, 3], "chunk_status: parts 1..3", status)
        check(status["total_expected"] == 3, "chunk_status: total_expected 3", status)
        composed = await agent.ok("rw_chunk_compose", {"session": "report", "output_path": "REPORT.md"})
        whole = "".join(report_parts)
        check(composed["sha256"] == sha256(whole) and composed["chunk_count"] == 3, "chunk_compose joins the parts", composed)
        check(composed["chunk_hashes"] == [sha256(p) for p in report_parts], "chunk_compose lists each part's hash", composed)
        say(f"chunk_append x3, chunk_status {status['present_indices']}, chunk_compose {composed['bytes']} bytes")

        # 6. The handoff.
        handoff = {
            "task_id": "payments-deploy",
            "status": "partial",
            "agent": "agent-one",
            "summary": "Deploy notes redacted (key in the scratchpad as stripe-key); report composed.",
            "next_steps": ["review REPORT.md", "set STRIPE_SECRET_KEY in the deploy environment"],
            "last_good_state": [
                {"path": "deploy/NOTES.md", "sha256": wrote["sha256"]},
                {"path": "REPORT.md", "sha256": composed["sha256"]},
            ],
        }
        written = await agent.ok("rw_handoff_write", {"envelope": handoff, "body": "Notes for the next agent."})
        check(written["drift_warnings"] == [], "no drift when the handoff is written", written)
        say(f"handoff_write: {written['handoff_path']}")

    # 7. Someone edits the report; a second client reads the handoff.
    with open(os.path.join(ws, "REPORT.md"), "a") as f:
        f.write("An edit after the handoff.\n")
    async with connect(server, name="agent-two") as successor:
        read = await successor.ok("rw_handoff_read", {})
        got = read["envelope"]
        for key in ("task_id", "status", "agent", "summary", "next_steps", "last_good_state"):
            check(got.get(key) == handoff[key], f"handoff_read returns {key} as written", got)
        check(read["body"].strip() == "Notes for the next agent.", "handoff_read returns the body", read)
        drift = read["drift_warnings"]
        check(
            len(drift) == 1 and drift[0]["path"] == "REPORT.md" and drift[0]["reason"] == "hash_mismatch",
            "handoff_read warns that REPORT.md drifted (and only it)",
            drift,
        )
        check(drift[0]["expected_sha256"] == composed["sha256"], "the warning names the expected hash", drift)
        ref = await successor.ok("rw_scratch_ref", {"label": "stripe-key"})
        check(ref["entry"]["sha256"] == put["sha256"], "the successor finds the secret by label", ref)
        tail = await successor.ok("rw_journal_tail", {"n": 50, "filter_path": "deploy/NOTES.md"})
        history = [(e["mode"], e["caller"]) for e in tail["entries"]]
        check(history == [("block", "agent-one"), ("create", "agent-one")],
              "the journal has the refusal and the write of the notes, by the first client", history)
        say(f"handoff_read (second client): drift {[(d['path'], d['reason']) for d in drift]}")


if __name__ == "__main__":
    main("issue_scenario", run, parser(__doc__.splitlines()[0]))
