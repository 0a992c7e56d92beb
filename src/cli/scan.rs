//! `rwfs scan`: the scorer over files, trees and stdin, for people, scripts and code scanning.
//!
//! Trees are walked with the `ignore` crate, so `.gitignore` (and `.ignore`) rules apply, hidden
//! files (`.env`!) are included, and `.git/` and `.resilient_write/` are skipped. Binary files
//! (a NUL byte in the first 8 KiB) and files over `--max-size` are skipped and counted.
//! Output: `path:line:col rule action` per blocked or warned finding (default), one JSON
//! document (`--json`), or SARIF 2.1.0 (`--sarif`). Exit 1 when anything is blocked.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Escaped, Exit, ScanArgs};
use super::{errln, outln};
use crate::engine::Options;
use crate::error::{IoContext, Reason, Result};
use crate::history::Workspace;
use crate::policy::{Action, Decision, Policy};
use crate::score::{Report, Scanner};

/// One scanned input.
struct Scanned {
    /// As shown to the user.
    display: String,
    report: Report,
    decision: Decision,
}

pub fn scan(root: &Path, options: &Options, args: ScanArgs) -> Result<Exit> {
    let policy = load_policy(root, options, args.policy.as_deref())?;
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|_| Reason::Io)?;
    let scanner = policy.scanner(salt);
    let root_abs = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let inputs = if args.paths.is_empty() { vec![".".to_string()] } else { args.paths.clone() };
    let mut results = Vec::new();
    let mut skipped = 0usize;
    for input in &inputs {
        if input == "-" {
            let mut bytes = Vec::new();
            std::io::stdin().read_to_end(&mut bytes).step("read stdin")?;
            results.push(check(&scanner, &policy, "-".into(), "-", &bytes));
            continue;
        }
        for file in walk(Path::new(input))? {
            match read_text(&file, args.max_size)? {
                Some(bytes) => {
                    let display = file.strip_prefix("./").unwrap_or(&file).display().to_string();
                    let policy_path = policy_path(&root_abs, &file).unwrap_or_else(|| display.clone());
                    results.push(check(&scanner, &policy, display, &policy_path, &bytes));
                }
                None => skipped += 1,
            }
        }
    }
    let blocked = results.iter().filter(|r| r.decision.action == Action::Block).count();
    if args.sarif {
        outln!("{}", serde_json::to_string_pretty(&sarif(&results)).unwrap_or_default());
    } else if args.json {
        outln!("{}", json_report(&results, skipped));
    } else {
        for r in &results {
            for (f, action) in r.report.findings.iter().zip(&r.decision.findings) {
                if *action != Action::Allow {
                    outln!("{}:{}:{} {} {}", Escaped(&r.display), f.line, f.column, f.rule, action.as_str());
                }
            }
        }
        let warned = results.iter().filter(|r| r.decision.action == Action::Warn).count();
        errln!(
            "{} scanned, {blocked} blocked, {warned} with warnings, {skipped} skipped (binary or too large)",
            results.len()
        );
    }
    Ok(if blocked > 0 { Exit::Negative } else { Exit::Ok })
}

fn check(scanner: &Scanner, policy: &Policy, display: String, policy_path: &str, bytes: &[u8]) -> Scanned {
    let report = scanner.scan(bytes, Some(policy_path));
    let decision = policy.decide(&report, policy_path);
    Scanned { display, report, decision }
}

/// The workspace's policy; an unsafe root (running from `/`) only means "no workspace policy".
fn load_policy(root: &Path, options: &Options, file: Option<&Path>) -> Result<Policy> {
    match Workspace::open(root, &options.workspace) {
        Ok(ws) => ws.policy(file),
        Err(e) if *e.reason() == Reason::UnsafeRoot => match file {
            Some(path) if path.is_absolute() => {
                Policy::parse(&std::fs::read_to_string(path).map_err(|e| crate::Error::io("read policy file", e))?)
            }
            _ => Ok(Policy::default()),
        },
        Err(e) => Err(e),
    }
}

/// Files under `start` (or `start` itself), `.gitignore` respected, hidden files included.
fn walk(start: &Path) -> Result<Vec<PathBuf>> {
    if start.is_file() {
        return Ok(vec![start.to_path_buf()]);
    }
    if !start.exists() {
        return Err(crate::Error::from(Reason::NotFound).at(start.display().to_string()));
    }
    let mut files = Vec::new();
    let walker = ignore::WalkBuilder::new(start)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| !matches!(e.file_name().to_str(), Some(".git" | ".resilient_write")))
        .build();
    for entry in walker {
        let entry = entry.map_err(|e| crate::Error::io("walk", std::io::Error::other(e.to_string())))?;
        if entry.file_type().is_some_and(|t| t.is_file()) {
            files.push(entry.into_path());
        }
    }
    files.sort();
    Ok(files)
}

/// The file's bytes, or `None` when it is binary or too large.
fn read_text(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    let meta = std::fs::metadata(path).map_err(|e| crate::Error::io("stat", e).at(path.display().to_string()))?;
    if meta.len() > max {
        return Ok(None);
    }
    let bytes = std::fs::read(path).map_err(|e| crate::Error::io("read", e).at(path.display().to_string()))?;
    let head = &bytes[..bytes.len().min(8192)];
    Ok(if memchr::memchr(0, head).is_some() { None } else { Some(bytes) })
}

/// `file` relative to the workspace root, for the policy's path globs.
fn policy_path(root: &Path, file: &Path) -> Option<String> {
    let abs = std::fs::canonicalize(file).ok()?;
    Some(abs.strip_prefix(root).ok()?.to_str()?.to_string())
}

fn json_report(results: &[Scanned], skipped: usize) -> Value {
    let files: Vec<Value> = results
        .iter()
        .map(|r| {
            let findings: Vec<Value> = r
                .report
                .findings
                .iter()
                .zip(&r.decision.findings)
                .map(|(f, a)| {
                    let mut v = serde_json::to_value(f).unwrap_or(Value::Null);
                    v["action"] = json!(a.as_str());
                    v
                })
                .collect();
            json!({
                "path": r.display, "action": r.decision.action.as_str(), "verdict": r.report.verdict.as_str(),
                "score": r.report.score, "leak_risk": r.report.leak_risk, "filter_risk": r.report.filter_risk,
                "findings": findings,
            })
        })
        .collect();
    let blocked = results.iter().filter(|r| r.decision.action == Action::Block).count();
    json!({"files": files, "scanned": results.len(), "blocked": blocked, "skipped": skipped})
}

/// SARIF 2.1.0: one run, the rules that fired, one result per blocked or warned finding.
fn sarif(results: &[Scanned]) -> Value {
    let mut rule_ids: Vec<&str> =
        results.iter().flat_map(|r| r.report.findings.iter().map(|f| f.rule.as_str())).collect();
    rule_ids.sort_unstable();
    rule_ids.dedup();
    let rules: Vec<Value> = rule_ids
        .iter()
        .map(|id| {
            let family =
                results.iter().flat_map(|r| &r.report.findings).find(|f| f.rule == *id).map(|f| f.family.as_str());
            json!({
                "id": id, "name": id,
                "shortDescription": {"text": format!("Possible secret or personal data ({id})")},
                "properties": {"family": family},
            })
        })
        .collect();
    let mut out = Vec::new();
    for r in results {
        for (f, action) in r.report.findings.iter().zip(&r.decision.findings) {
            if *action == Action::Allow {
                continue;
            }
            out.push(json!({
                "ruleId": f.rule,
                "level": if *action == Action::Block { "error" } else { "warning" },
                "message": {"text": format!(
                    "{} ({}, {} chars): replace with {}", f.rule, match f.kind { crate::score::Kind::Leak => "looks live", crate::score::Kind::Filter => "token-shaped" }, f.length, f.replacement
                )},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": r.display},
                    "region": {"startLine": f.line, "startColumn": f.column},
                }}],
                "partialFingerprints": {"rwfsSecretHash/v1": f.hash},
            }));
        }
    }
    json!({
        "version": "2.1.0",
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "runs": [{
            "tool": {"driver": {
                "name": "rwfs", "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/rwfs/rwfs", "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "results": out,
        }],
    })
}
