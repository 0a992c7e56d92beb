//! `rwfs agent-rules --for AGENT` (paper §7.2's agent conventions): each generated file names
//! only tools the server lists, and carries the workspace policy's numbers.

use std::collections::BTreeSet;

use crate::support::mcp::Mcp;
use crate::support::mount::rwfs;

/// The `rw_*` / `rr_*` names a text mentions.
fn tool_names_in(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices('r') {
        let rest = &text[i..];
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if boundary && (rest.starts_with("rw_") || rest.starts_with("rr_")) {
            let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            out.insert(name);
        }
    }
    out
}

#[test]
fn generated_rules_name_only_listed_tools_and_the_policy_s_numbers_for_every_agent() {
    let mcp = Mcp::start();
    let listed: BTreeSet<String> = mcp.tool_names().into_iter().collect();
    std::fs::create_dir_all(mcp.ws.abs(".resilient_write")).unwrap();
    mcp.ws.put(
        ".resilient_write/policy.yaml",
        b"retry_budget: {default: 5}\nthresholds: {high: 0.8, medium: 0.5, low: 0.2}\n",
    );
    for (agent, file) in [
        ("claude", "CLAUDE.md"),
        ("codex", "AGENTS.md"),
        ("aider", "CONVENTIONS.md"),
        ("cursor", ".cursorrules"),
        ("copilot", ".github/copilot-instructions.md"),
        ("generic", "AGENTS.md"),
    ] {
        let out = rwfs().arg("-w").arg(mcp.ws.path()).args(["agent-rules", "--for", agent]).output().unwrap();
        assert!(out.status.success(), "{agent}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.lines().next().unwrap().contains(file), "{agent}: the header names {file}");
        let named = tool_names_in(&text);
        let unknown: Vec<_> = named.difference(&listed).collect();
        assert!(unknown.is_empty(), "{agent}: names tools the server does not list: {unknown:?}");
        for needed in ["rw_safe_write", "rw_chunk_append", "rw_chunk_compose", "rw_risk_score", "rw_handoff_write"] {
            assert!(named.contains(needed), "{agent}: the decision table names {needed}");
        }
        assert!(text.contains("allows 5") && text.contains("high ≥ 0.8"), "{agent}: the policy's numbers");
        assert!(text.contains("Permission denied"), "{agent}: the mount's section");
        for failure in
            ["EACCES: permission denied, write", "I/O error", "Failed to write file", "rwfs hooks --for claude"]
        {
            assert!(text.contains(failure), "{agent}: names each harness's failure text and the hook: {failure}");
        }
    }
    let mount_only = rwfs().arg("-w").arg(mcp.ws.path()).args(["agent-rules", "--mount-only"]).output().unwrap();
    let mount_only = String::from_utf8(mount_only.stdout).unwrap();
    assert!(mount_only.contains("Permission denied") && !mount_only.contains("The rwfs MCP tools"));
}
