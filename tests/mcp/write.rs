//! `rw_risk_score`, `rw_safe_write`, `rw_safe_replace`, envelopes, retry budgets, aliases.

use serde_json::json;

use crate::support::mcp::Mcp;

const AWS_LINE: &str = "aws_secret_access_key = \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq3xAmPLe9\"\n";

#[test]
fn safe_write_creates_durably_and_journals_the_client() {
    let mcp = Mcp::start();
    let out = mcp.call("rw_safe_write", json!({"path": "notes/a.txt", "content": "hello\n"})).ok();
    assert_eq!(out["path"], "notes/a.txt");
    assert_eq!(out["bytes"], 6);
    assert_eq!(out["mode_applied"], "create");
    assert!(out["journal_id"].as_str().unwrap().starts_with("wj_"));
    assert_eq!(mcp.ws.read("notes/a.txt").unwrap(), b"hello\n");
    let rows = mcp.ws.rows();
    let row = rows.last().unwrap();
    assert_eq!(row.path, "notes/a.txt");
    assert_eq!(row.mode, "create");
}

#[test]
fn create_is_exclusive_and_the_envelope_names_the_existing_version() {
    let mcp = Mcp::start();
    mcp.call("rw_safe_write", json!({"path": "a.txt", "content": "one"})).ok();
    let env = mcp.call("rw_safe_write", json!({"path": "a.txt", "content": "two"})).err();
    assert_eq!(env["error"], "stale_precondition");
    assert_eq!(env["context"]["reason"], "file_already_exists");
    assert_eq!(env["context"]["tool"], "rw_safe_write");
    assert_eq!(mcp.ws.read("a.txt").unwrap(), b"one");
}

#[test]
fn overwrite_keeps_the_mode_and_append_appends_reference_bugs_5_6() {
    use std::os::unix::fs::PermissionsExt;
    let mcp = Mcp::start();
    mcp.call("rw_safe_write", json!({"path": "run.sh", "content": "#!/bin/sh\n"})).ok();
    std::fs::set_permissions(mcp.ws.abs("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    mcp.call("rw_safe_write", json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n", "mode": "overwrite"})).ok();
    let mode = std::fs::metadata(mcp.ws.abs("run.sh")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "reference bug: overwrite reset the mode to 0644");
    let out = mcp.call("rw_safe_write", json!({"path": "run.sh", "content": "echo bye\n", "mode": "append"})).ok();
    assert_eq!(out["mode_applied"], "append");
    assert_eq!(mcp.ws.read("run.sh").unwrap(), b"#!/bin/sh\necho hi\necho bye\n");
}

#[test]
fn expected_prev_sha256_is_a_compare_and_swap() {
    let mcp = Mcp::start();
    let first = mcp.call("rw_safe_write", json!({"path": "a.txt", "content": "one"})).ok();
    let env = mcp
        .call(
            "rw_safe_write",
            json!({"path": "a.txt", "content": "two", "mode": "overwrite", "expected_prev_sha256": "0".repeat(64)}),
        )
        .err();
    assert_eq!(env["error"], "stale_precondition");
    mcp.call(
        "rw_safe_write",
        json!({"path": "a.txt", "content": "two", "mode": "overwrite", "expected_prev_sha256": first["sha256"]}),
    )
    .ok();
    // "" means: must not exist.
    let env = mcp
        .call(
            "rw_safe_write",
            json!({"path": "a.txt", "content": "x", "mode": "overwrite", "expected_prev_sha256": ""}),
        )
        .err();
    assert_eq!(env["error"], "stale_precondition");
}

#[test]
fn hostile_paths_and_the_state_dir_are_refused_reference_bug_20() {
    let mcp = Mcp::start();
    for path in ["../escape.txt", "/etc/passwd", "", ".resilient_write/policy.yaml", "a/../../b"] {
        let env = mcp.call("rw_safe_write", json!({"path": path, "content": "x"})).err();
        assert_eq!(env["error"], "policy_violation", "{path}: {env}");
    }
}

#[test]
fn a_blocked_write_returns_the_gate_envelope_and_identical_retries_spend_the_budget_reference_bug_11() {
    let mcp = Mcp::start();
    let args = json!({"path": "config.py", "content": AWS_LINE});
    let env = mcp.call("rw_safe_write", args.clone()).err();
    assert_eq!(env["error"], "blocked");
    assert_eq!(env["reason_hint"], "content_filter");
    assert_eq!(env["suggested_action"], "redact");
    assert_eq!(env["context"]["tool"], "rw_safe_write");
    assert_eq!(env["retriable"], false, "the same bytes are refused again (issue 16, item 9)");
    let first = env["retry_budget"].as_u64().unwrap();
    assert!(first >= 1);
    assert!(mcp.ws.read("config.py").is_none());
    let mut last = first;
    loop {
        let env = mcp.call("rw_safe_write", args.clone()).err();
        if env["context"]["reason"] == "retry_budget_exhausted" {
            assert_eq!(env["suggested_action"], "abort");
            assert!(env["context"]["hint"].as_str().unwrap().contains("change strategy"));
            break;
        }
        let now = env["retry_budget"].as_u64().unwrap();
        assert_eq!(now, last - 1, "each identical retry takes one");
        last = now;
    }
    // A different content is a different attempt.
    mcp.call(
        "rw_safe_write",
        json!({"path": "config.py", "content": "import os\nkey = os.environ['AWS_SECRET_ACCESS_KEY']\n"}),
    )
    .ok();
}

#[test]
fn retry_budget_scope_is_the_session_issue_16_item_1() {
    let mut mcp = Mcp::start();
    let budget = u64::from(mcp.engine.policy().retry_budget());
    let args = json!({"path": "config.py", "content": AWS_LINE});
    // The first agent spends its whole budget on one refused content.
    let mut refusals = 0;
    while mcp.call("rw_safe_write", args.clone()).err()["context"]["reason"] != "retry_budget_exhausted" {
        refusals += 1;
        assert!(refusals <= budget + 1, "the budget is bounded");
    }
    assert_eq!(refusals, budget + 1, "the first refusal and `budget` retries");
    // A second agent on the same engine starts fresh with that very content.
    let second = mcp.open_session();
    let env = mcp.call_in(second, "rw_safe_write", args.clone()).err();
    assert_eq!(env["error"], "blocked", "{env}");
    assert_eq!(env["context"]["reason"], "content_blocked", "{env}");
    assert_eq!(env["retry_budget"], budget, "{env}");
    // ... and its own retries are bounded as before; the first agent stays exhausted.
    assert_eq!(mcp.call_in(second, "rw_safe_write", args.clone()).err()["retry_budget"], budget - 1);
    assert_eq!(mcp.call("rw_safe_write", args).err()["context"]["reason"], "retry_budget_exhausted");
    // Failures that are no write attempt report the whole budget, not 0 ("exhausted").
    let missing = mcp.call_in(second, "rr_read_bytes", json!({"path": "nope.txt"})).err();
    assert_eq!(missing["retry_budget"], budget, "{missing}");
    let bad = mcp.call_in(second, "rw_safe_write", json!({"path": "a.txt"})).err();
    assert_eq!(bad["context"]["reason"], "invalid_arguments", "{bad}");
    assert_eq!(bad["retry_budget"], budget, "{bad}");
    let bad = mcp.call_in(second, "rw_safe_write", json!({"path": "a.txt", "content": "x", "mode": "sideways"})).err();
    assert_eq!(bad["retry_budget"], budget, "{bad}");
}

#[test]
fn classify_refuses_at_the_threshold_with_the_reference_envelope() {
    let mcp = Mcp::start();
    let env = mcp
        .call("rw_safe_write", json!({"path": "c.txt", "content": "contact: robert.smith@acme-logistics.io\n", "classify": true, "classify_reject_at": "low"}))
        .err();
    assert_eq!(env["error"], "blocked");
    assert_eq!(env["context"]["classify_reject_at"], "low");
    assert!(env["detected_patterns"].as_array().unwrap().iter().any(|p| p == "pii"), "{env}");
    assert!(mcp.ws.read("c.txt").is_none());
}

#[test]
fn risk_score_reports_without_echoing_the_secret() {
    let mcp = Mcp::start();
    let out = mcp.call("rw_risk_score", json!({"content": AWS_LINE, "target_path": "x.py"})).ok();
    assert_ne!(out["verdict"], "safe");
    assert!(!out.to_string().contains("wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq3xAmPLe9"));
    assert_eq!(out["target_path"], "x.py");
    let safe = mcp.call("rw_risk_score", json!({"content": "just prose\n"})).ok();
    assert_eq!(safe["verdict"], "safe");
    assert_eq!(safe["score"], 0.0);
}

#[test]
fn safe_replace_needs_exactly_the_asked_number_of_matches() {
    let mcp = Mcp::start();
    mcp.call("rw_safe_write", json!({"path": "s.txt", "content": "a b a c"})).ok();
    let env = mcp.call("rw_safe_replace", json!({"path": "s.txt", "old_string": "a", "new_string": "x"})).err();
    assert_eq!(env["context"]["reason"], "ambiguous_match");
    assert_eq!(env["context"]["found"], 2);
    let env = mcp.call("rw_safe_replace", json!({"path": "s.txt", "old_string": "zz", "new_string": "x"})).err();
    assert_eq!(env["context"]["reason"], "old_string_not_found");
    let env = mcp.call("rw_safe_replace", json!({"path": "s.txt", "old_string": "", "new_string": "x"})).err();
    assert_eq!(env["context"]["reason"], "empty_old_string");
    let env =
        mcp.call("rw_safe_replace", json!({"path": "s.txt", "old_string": "a", "new_string": "x", "count": 3})).err();
    assert_eq!(env["context"]["reason"], "insufficient_matches");
    let out =
        mcp.call("rw_safe_replace", json!({"path": "s.txt", "old_string": "a", "new_string": "x", "count": -1})).ok();
    assert_eq!(out["replacements"], 2);
    assert_eq!(mcp.ws.read("s.txt").unwrap(), b"x b x c");
    let env = mcp.call("rw_safe_replace", json!({"path": "missing.txt", "old_string": "a", "new_string": "x"})).err();
    assert_eq!(env["error"], "stale_precondition");
}

#[test]
fn dotted_names_are_aliases_and_unknown_tools_are_protocol_errors_reference_bug_31() {
    let mcp = Mcp::start();
    mcp.call("rw.safe_write", json!({"path": "a.txt", "content": "x"})).ok();
    let message = mcp.call_protocol_error("rw_no_such_tool", json!({}));
    assert!(message.contains("not found"), "{message}");
}

#[test]
fn bad_arguments_come_back_as_an_envelope() {
    let mcp = Mcp::start();
    let env = mcp.call("rw_safe_write", json!({"path": "a.txt"})).err();
    assert_eq!(env["error"], "policy_violation");
    assert_eq!(env["context"]["reason"], "invalid_arguments");
    let env = mcp.call("rw_safe_write", json!({"path": "a.txt", "content": "x", "bogus": 1})).err();
    assert_eq!(env["context"]["reason"], "invalid_arguments");
    let env = mcp.call("rw_safe_write", json!({"path": "a.txt", "content": "x", "mode": "sideways"})).err();
    assert_eq!(env["context"]["reason"], "invalid_arguments");
}

#[test]
fn every_tool_declares_all_four_annotations() {
    let mcp = Mcp::start();
    for tool in mcp.tools_json() {
        let a = &tool["annotations"];
        for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
            assert!(a[hint].is_boolean(), "{} lacks {hint}: {tool}", tool["name"]);
        }
        assert_eq!(a["openWorldHint"], false);
        assert_eq!(tool["inputSchema"]["type"], "object");
    }
}

#[test]
fn create_is_exclusive_under_concurrency_reference_bug_7() {
    let mcp = Mcp::start();
    let wins = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..16)
            .map(|i| {
                let mcp = &mcp;
                scope.spawn(move || {
                    mcp.call("rw_safe_write", json!({"path": "race.txt", "content": format!("writer {i}\n")}))
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).filter(|a| !a.is_error).count()
    });
    assert_eq!(wins, 1, "exactly one create succeeds (the reference let 11 of 16 'succeed')");
    assert_eq!(mcp.ws.rows().iter().filter(|r| r.path == "race.txt").count(), 1);
}

#[test]
fn expected_prev_sha256_holds_under_concurrency_reference_bug_8() {
    let mcp = Mcp::start();
    let base = mcp.call("rw_safe_write", json!({"path": "cas.txt", "content": "v0\n"})).ok();
    let wins = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let (mcp, prev) = (&mcp, base["sha256"].clone());
                scope.spawn(move || {
                    mcp.call(
                        "rw_safe_write",
                        json!({"path": "cas.txt", "content": format!("v1 by {i}\n"), "mode": "overwrite", "expected_prev_sha256": prev}),
                    )
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).filter(|a| !a.is_error).count()
    });
    assert_eq!(wins, 1, "one compare-and-swap wins; the others see stale_precondition");
}

/// Issue 16, item 5: the paper's incident header scores "low" by Eq. 1 (one api_key hit,
/// 0.35), yet every verdict an agent acts on steers it to redact: the filter risk explains it.
#[test]
fn the_incident_header_steers_the_agent_to_redact() {
    let rule = rwfs::score::rules::RULES.iter().find(|r| r.id == "anthropic-oauth-token").unwrap();
    let token = rwfs::score::sample::generate(rule.sample, &mut rwfs::score::sample::Rng::new(16));
    let header = format!("curl -H 'Authorization: Bearer {token}' https://api.anthropic.com/v1/messages\n");
    let mcp = Mcp::start();
    let out = mcp.call("rw_risk_score", json!({"content": header, "target_path": "run.sh"})).ok();
    assert_eq!((out["score"].as_f64(), &out["verdict"]), (Some(0.35), &json!("low")), "{out:#}");
    assert_eq!(out["filter_risk"]["level"], "high");
    assert_eq!(out["policy_action"], "block");
    let redact = &out["suggested_actions"][0];
    assert_eq!((&redact["action"], &redact["reason"]), (&json!("redact"), &json!("filter_risk_high")), "{out:#}");
    assert_eq!(redact["targets"], json!(["api_key"]));
    assert!(!out.to_string().contains(&token));

    // Classifying at the default `high` lets a "low" verdict through; the policy still refuses it.
    let env = mcp.call("rw_safe_write", json!({"path": "run.sh", "content": header, "classify": true})).err();
    assert_eq!((&env["error"], &env["reason_hint"]), (&json!("blocked"), &json!("content_filter")), "{env:#}");
    assert_eq!(env["suggested_action"], "redact");
    assert_eq!(env["context"]["action"], "block");
    assert_eq!(env["context"]["risk_score"]["verdict"], "low");
    assert_eq!(env["context"]["suggested_actions"][0]["reason"], "filter_risk_high");
    assert!(!env.to_string().contains(&token));
}
