//! L0 and L1: `rw_risk_score`, `rw_safe_write`, `rw_safe_replace`.
//!
//! Differences from the reference (its bugs, fixed here): `create` is
//! exclusive (the engine installs with link/`RENAME_NOREPLACE`), `expected_prev_sha256` is
//! checked under the engine's per-path lock, append is a real append, the mode, owner and
//! xattrs of an overwritten file are kept, the directory and the journal are fsynced, and
//! `.resilient_write/` is not writable. The policy gate judges every write whatever `classify`
//! says; `classify` adds the reference's verdict threshold on top.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::{Committed, Expect, WriteMode, WriteRequest};
use crate::error::ErrorKind;
use crate::score::Verdict;

use super::{Call, Outcome, Tools, ok};

/// The reference's write modes.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The file must not exist yet.
    #[default]
    Create,
    /// Replace the whole content (creating the file if needed).
    Overwrite,
    /// Add to the end (creating the file if needed).
    Append,
}

/// The verdict at which `classify` refuses.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RejectAt {
    Low,
    Medium,
    #[default]
    High,
}

impl RejectAt {
    fn verdict(self) -> Verdict {
        match self {
            RejectAt::Low => Verdict::Low,
            RejectAt::Medium => Verdict::Medium,
            RejectAt::High => Verdict::High,
        }
    }

    fn as_str(self) -> &'static str {
        self.verdict().as_str()
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RiskScoreArgs {
    /// The draft to score (nothing is written).
    pub content: String,
    /// Echoed back; does not change the score.
    #[serde(default)]
    #[schemars(with = "String")]
    pub language_hint: Option<String>,
    /// Where the content is meant to go: path-specific policy rules apply to it.
    #[serde(default)]
    #[schemars(with = "String")]
    pub target_path: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SafeWriteArgs {
    /// Workspace-relative path of the file.
    pub path: String,
    /// The new content (UTF-8).
    pub content: String,
    /// `create` (default; refused if the file exists), `overwrite` or `append`.
    #[serde(default)]
    pub mode: Mode,
    /// Refuse unless the file's current sha256 is this; `""` means the file must not exist.
    #[serde(default)]
    #[schemars(with = "String")]
    pub expected_prev_sha256: Option<String>,
    /// Also refuse when the risk verdict reaches `classify_reject_at` (the policy gate runs
    /// regardless).
    #[serde(default)]
    pub classify: bool,
    /// `low`, `medium` or `high` (default).
    #[serde(default)]
    pub classify_reject_at: RejectAt,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SafeReplaceArgs {
    /// Workspace-relative path of an existing UTF-8 file.
    pub path: String,
    /// The exact text to find (not empty).
    pub old_string: String,
    /// Its replacement.
    pub new_string: String,
    /// How many occurrences must match: 1 (default: exactly one), N (exactly N), -1 (all, at
    /// least one).
    #[serde(default = "one")]
    pub count: i64,
    /// Refuse unless the file's current sha256 is this.
    #[serde(default)]
    #[schemars(with = "String")]
    pub expected_prev_sha256: Option<String>,
    /// Also refuse when the risk verdict of `new_string` reaches `classify_reject_at`.
    #[serde(default)]
    pub classify: bool,
    /// `low`, `medium` or `high` (default).
    #[serde(default)]
    pub classify_reject_at: RejectAt,
}

fn one() -> i64 {
    1
}

impl Tools {
    pub fn risk_score(&self, _call: &Call, args: RiskScoreArgs) -> Outcome {
        let judgement = self.engine().score(args.content.as_bytes(), args.target_path.as_deref());
        let report = &judgement.report;
        Ok(ok(json!({
            "score": report.score,
            "verdict": report.verdict.as_str(),
            "bytes": report.bytes,
            "line_count": report.line_count,
            "max_line_len": report.max_line_len,
            "detected_patterns": report.detected_patterns(),
            "suggested_actions": report.suggested_actions(),
            "language_hint": args.language_hint,
            "target_path": args.target_path,
            "leak_risk": report.leak_risk,
            "filter_risk": report.filter_risk,
            "policy_action": judgement.decision.action.as_str(),
        })))
    }

    pub fn safe_write(&self, call: &Call, args: SafeWriteArgs) -> Outcome {
        let attempt = Some((args.path.as_str(), args.content.as_bytes()));
        if args.classify {
            self.classify(call, &args.path, &args.content, args.classify_reject_at)?;
        }
        let expect = self.expectation(call, args.expected_prev_sha256.as_deref(), attempt)?;
        let mode = match args.mode {
            Mode::Create => WriteMode::Create,
            Mode::Overwrite => WriteMode::Overwrite,
            Mode::Append => WriteMode::Append,
        };
        let request =
            WriteRequest { path: &args.path, content: args.content.as_bytes(), mode, expect, actor: &call.actor };
        let committed = self.engine().safe_write(&request).map_err(|e| self.fail(call, e, attempt))?;
        Ok(self.written(&committed, mode.as_str(), json!({})))
    }

    pub fn safe_replace(&self, call: &Call, args: SafeReplaceArgs) -> Outcome {
        let path = args.path.as_str();
        let attempt = Some((path, args.new_string.as_bytes()));
        if args.old_string.is_empty() {
            return Err(self.reject(
                call,
                ErrorKind::PolicyViolation,
                "empty_old_string",
                "old_string must not be empty",
                json!({"path": path}),
                None,
            ));
        }
        if args.count == 0 || args.count < -1 {
            return Err(self.reject(
                call,
                ErrorKind::PolicyViolation,
                "count_cannot_be_zero",
                "count is 1 (exactly one match), N (exactly N) or -1 (all)",
                json!({"path": path, "count": args.count}),
                None,
            ));
        }
        if args.classify {
            self.classify(call, path, &args.new_string, args.classify_reject_at)?;
        }
        let expect = self.expectation(call, args.expected_prev_sha256.as_deref(), attempt)?;
        let (_, bytes, sha) = self.engine().workspace().read_file(path).map_err(|e| self.fail(call, e, None))?;
        if let Some(Expect::Sha(expected)) = expect
            && expected != sha
        {
            return Err(self.reject(
                call,
                ErrorKind::StalePrecondition,
                "expected_prev_sha256_mismatch",
                "the file changed since you read it",
                json!({"path": path, "expected_prev_sha256": expected, "actual_prev_sha256": sha}),
                attempt,
            ));
        }
        let Ok(text) = String::from_utf8(bytes) else {
            return Err(self.reject(
                call,
                ErrorKind::PolicyViolation,
                "not_utf8",
                "the file is not UTF-8 text",
                json!({"path": path}),
                None,
            ));
        };
        let found = text.matches(args.old_string.as_str()).count();
        let refusal = match (found, args.count) {
            (0, _) => Some(("old_string_not_found", "old_string does not occur in the file")),
            (n, -1) if n >= 1 => None,
            (n, want) if (n as i64) < want => Some(("insufficient_matches", "fewer occurrences than count")),
            (n, want) if (n as i64) > want => {
                Some(("ambiguous_match", "more occurrences than count: add context to old_string or set count"))
            }
            _ => None,
        };
        if let Some((reason, message)) = refusal {
            return Err(self.reject(
                call,
                ErrorKind::StalePrecondition,
                reason,
                message,
                json!({"path": path, "found": found, "count": args.count}),
                attempt,
            ));
        }
        let replaced = text.replace(args.old_string.as_str(), &args.new_string);
        let request = WriteRequest {
            path,
            content: replaced.as_bytes(),
            mode: WriteMode::Replace,
            // The file must still be what was read: the replacement is computed from it.
            expect: Some(Expect::Sha(sha)),
            actor: &call.actor,
        };
        let committed = self.engine().safe_write(&request).map_err(|e| self.fail(call, e, attempt))?;
        Ok(self.written(&committed, "replace", json!({"replacements": found})))
    }

    /// The reference's `classify`: refuse when the verdict reaches `reject_at`.
    fn classify(&self, call: &Call, path: &str, content: &str, reject_at: RejectAt) -> Result<(), super::Failure> {
        let judgement = self.engine().score(content.as_bytes(), Some(path));
        let report = &judgement.report;
        if report.verdict < reject_at.verdict() {
            return Ok(());
        }
        let mut kinds: Vec<String> =
            report.detected_patterns().iter().filter_map(|p| p["kind"].as_str().map(String::from)).collect();
        kinds.sort();
        kinds.dedup();
        let mut failure = self.reject(
            call,
            ErrorKind::Blocked,
            "classified_risky",
            format!("risk verdict {} reaches classify_reject_at={}", report.verdict.as_str(), reject_at.as_str()),
            json!({
                "path": path, "score": report.score, "verdict": report.verdict.as_str(),
                "classify_reject_at": reject_at.as_str(), "detected": report.detected_patterns(),
                "suggested_actions": report.suggested_actions(),
            }),
            Some((path, content.as_bytes())),
        );
        if failure.0.error == ErrorKind::Blocked.as_str()
            && failure.0.context.get("reason") != Some(&json!("retry_budget_exhausted"))
        {
            failure.0.detected_patterns = kinds;
        }
        Err(failure)
    }

    fn expectation(
        &self,
        call: &Call,
        expected: Option<&str>,
        attempt: Option<(&str, &[u8])>,
    ) -> Result<Option<Expect>, super::Failure> {
        expected.map(Expect::parse).transpose().map_err(|e| self.fail(call, e, attempt))
    }

    /// The reference's success fields for a write, plus rwfs's.
    fn written(&self, c: &Committed, mode: &str, extra: Value) -> Value {
        let abs = self.engine().workspace().path().join(c.path.as_str());
        let mut out = ok(json!({
            "path": c.path.as_str(), "abs_path": abs.display().to_string(), "sha256": c.sha256, "bytes": c.bytes,
            "mode_applied": mode, "journal_id": c.journal_id, "wrote_at": c.ts, "prev_sha256": c.prev_sha256,
            "seq": c.seq, "op": c.op.as_str(),
        }));
        if let (Value::Object(out), Value::Object(extra)) = (&mut out, extra) {
            out.extend(extra);
        }
        out
    }
}
