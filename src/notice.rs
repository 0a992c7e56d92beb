//! What a refusal says to the agent that caused it, in words a model acts on: one line for the
//! writer's standard error (`vfs/stderr.rs`) and a paragraph for a harness hook (`rwfs hook`).
//!
//! An errno cannot carry the reason (docs/architecture.md, The mount), so the reason travels beside it. Both texts are
//! made here from the refusal's envelope, in one order: the action (a refused write, nothing
//! written), the file (the target, never a temporary name: `crate::temporary`), each blocking
//! rule with its line, the replacement in the file's own language (the finding's
//! `replacement`), what to do next, and where the envelope is. They never hold a character of
//! the secret: only rule ids, line numbers, the replacement (which names an environment
//! variable) and paths.
//!
//! Pure: text in, text out. Deciding where the line may be written is `vfs/stderr.rs`'s.

use serde_json::Value;

/// Most findings a text names (the envelope has them all).
const MAX_FINDINGS: usize = 3;

/// A refusal as the agent is told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The workspace path of the file the write was for.
    pub path: String,
    /// Blocking findings: rule id, line, suggested replacement.
    pub findings: Vec<Finding>,
    /// Identical retries left (`None`: spent, this was a retry of refused content).
    pub retries_left: Option<u64>,
    /// The envelope's workspace path (`.resilient_write/rejections/<id>.json`), if there is one.
    pub envelope: Option<String>,
    /// An operation refused by place, not content (a protect rule, the bulk damage limit):
    /// the operation and the envelope's message, which names the rule and what to do next.
    pub protected: Option<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: String,
    pub line: u64,
    pub replacement: Option<String>,
}

impl Notice {
    /// The notice of a refusal whose envelope (rwfs's envelope v1, as written to
    /// `rejections/`) is `envelope`; `None` when it is not a content refusal's.
    pub fn of_envelope(envelope: &Value) -> Option<Notice> {
        let context = envelope.get("context")?;
        let path = context.get("path")?.as_str()?.to_string();
        let findings = context
            .get("findings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|f| f.get("action").and_then(Value::as_str) == Some("block"))
            .filter_map(|f| {
                Some(Finding {
                    rule: f.get("rule")?.as_str()?.to_string(),
                    line: f.get("line").and_then(Value::as_u64).unwrap_or(0),
                    replacement: f.get("replacement").and_then(Value::as_str).map(str::to_string),
                })
            })
            .take(MAX_FINDINGS)
            .collect();
        let envelope_path = context
            .get("rejection_id")
            .and_then(Value::as_str)
            .map(|id| format!("{}/{}/{id}.json", crate::durable::STATE_DIR, crate::durable::layout::REJECTIONS));
        // A refusal past the budget still has its envelope (retry budget 0, like the last
        // refusal within it): its reason says the budget is spent.
        let spent = context.get("reason").and_then(Value::as_str) == Some("retry_budget_exhausted");
        let retries_left = envelope.get("retry_budget").and_then(Value::as_u64).filter(|_| !spent);
        let protected = context
            .get("operation")
            .and_then(Value::as_str)
            .map(|op| (op.to_string(), context.get("message").and_then(Value::as_str).unwrap_or_default().to_string()));
        Some(Notice { path, findings, retries_left, envelope: envelope_path, protected })
    }

    /// An identical retry of content refused before, once its budget is spent (no envelope).
    pub fn spent(path: &str) -> Notice {
        Notice { path: path.to_string(), findings: Vec::new(), retries_left: None, envelope: None, protected: None }
    }

    /// `aws-secret-access-key at line 3, github-token at line 7`.
    fn rules(&self) -> String {
        let named: Vec<String> = self
            .findings
            .iter()
            .map(|f| if f.line > 0 { format!("{} at line {}", f.rule, f.line) } else { f.rule.clone() })
            .collect();
        if named.is_empty() { "a secret".to_string() } else { named.join(", ") }
    }

    /// What to put instead, in the file's language: `os.environ["X"]`.
    fn instead(&self) -> Option<String> {
        let mut replacements: Vec<&str> = self.findings.iter().filter_map(|f| f.replacement.as_deref()).collect();
        replacements.dedup();
        (!replacements.is_empty()).then(|| replacements.join(", "))
    }

    /// The line for the writer's standard error (no newline).
    pub fn line(&self) -> String {
        if let Some((op, message)) = &self.protected {
            let why = self.envelope.as_ref().map(|e| format!(" (why: {e})")).unwrap_or_default();
            return format!("rwfs: refused {op} of {}: {message}{why}", self.path);
        }
        if self.retries_left.is_none() && self.findings.is_empty() {
            return format!(
                "rwfs: refused write to {} again: the same content was refused before and its retry budget is spent; \
                 nothing was written — remove the secret and write different content (rwfs log shows the refusal)",
                self.path
            );
        }
        let next = match self.instead() {
            Some(instead) => format!("use {instead} in place of the value, then write the file again"),
            None => "remove the secret, then write the file again".to_string(),
        };
        let again = if self.retries_left.is_none() { " again (its retry budget is spent)" } else { "" };
        let mut line =
            format!("rwfs: refused write to {}{again}: {} — nothing was written; {next}", self.path, self.rules());
        if let Some(envelope) = &self.envelope {
            line.push_str(&format!(" (why: {envelope})"));
        }
        line
    }

    /// The paragraph a harness hook adds to the model's context.
    pub fn paragraph(&self) -> String {
        if let Some((op, message)) = &self.protected {
            let mut text = format!(
                "rwfs refused a {op} of {} and nothing changed: {message}. Do not retry it and do not work around \
                 it through another path, tool or permission change; tell the user what you wanted to do and why.",
                self.path
            );
            if let Some(envelope) = &self.envelope {
                text.push_str(&format!(" Details: {envelope}."));
            }
            return text;
        }
        if self.retries_left.is_none() && self.findings.is_empty() {
            return format!(
                "rwfs refused a write to {} and nothing was written: the same content was refused before and its \
                 retry budget is spent. Do not retry it; remove the secret from the content and write the file again.",
                self.path
            );
        }
        let mut text = format!(
            "rwfs refused a write to {} and nothing was written (the file keeps its previous content): {}.",
            self.path,
            self.rules()
        );
        match self.instead() {
            Some(instead) => text.push_str(&format!(
                " Put {instead} in place of the secret value (read it from the environment), then write {} again.",
                self.path
            )),
            None => text.push_str(&format!(" Remove the secret, then write {} again.", self.path)),
        }
        text.push_str(" Do not retry the same content");
        match self.retries_left {
            Some(left) => text.push_str(&format!(" ({left} identical retries left)")),
            None => text.push_str(" (it was refused before and its retry budget is spent)"),
        }
        text.push_str(", and do not change permissions or write through another path: the content is the problem.");
        if let Some(envelope) = &self.envelope {
            text.push_str(&format!(" Details: {envelope}."));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope() -> Value {
        json!({
            "ok": false, "error": "blocked", "retry_budget": 2,
            "context": {
                "path": "app/config.py", "temporary_for": "app/config.py",
                "written_as": "app/config.py.tmp.12.0123456789ab", "rejection_id": "rj_20261128T061900Z_7",
                "findings": [
                    {"rule": "aws-secret-access-key", "line": 3, "action": "block",
                     "replacement": "os.environ[\"AWS_SECRET_ACCESS_KEY\"]", "snippet": "AKIA…"},
                    {"rule": "email-address", "line": 4, "action": "warn", "replacement": "user@example.com"},
                ],
            },
        })
    }

    #[test]
    fn a_protected_path_refusal_names_the_operation_and_says_to_ask_the_user() {
        let envelope = json!({
            "ok": false, "error": "blocked", "retry_budget": 0,
            "context": {"path": ".env", "operation": "rename", "reason": "protected_path",
                        "message": "the workspace policy protects .env (rule `env files`: rename: deny) — nothing changed; ask the user",
                        "rejection_id": "rj_1"},
        });
        let notice = Notice::of_envelope(&envelope).unwrap();
        assert!(notice.line().starts_with("rwfs: refused rename of .env: the workspace policy protects .env"));
        assert!(notice.line().contains("(why: .resilient_write/rejections/rj_1.json)"));
        let paragraph = notice.paragraph();
        assert!(paragraph.contains("refused a rename of .env and nothing changed"), "{paragraph}");
        assert!(paragraph.contains("tell the user") && !paragraph.contains("secret"), "{paragraph}");
    }

    #[test]
    fn the_line_leads_with_the_action_and_names_file_rule_line_replacement_and_envelope() {
        let notice = Notice::of_envelope(&envelope()).unwrap();
        let line = notice.line();
        assert!(line.starts_with("rwfs: refused write to app/config.py: aws-secret-access-key at line 3 — "), "{line}");
        assert!(line.contains("use os.environ[\"AWS_SECRET_ACCESS_KEY\"] in place of the value"), "{line}");
        assert!(line.ends_with("(why: .resilient_write/rejections/rj_20261128T061900Z_7.json)"), "{line}");
        assert!(!line.contains("email") && !line.contains("tmp.12") && !line.contains("AKIA"), "{line}");
        assert!(line.len() < 512 && !line.contains('\n'));
    }

    #[test]
    fn the_paragraph_says_what_to_do_next_and_how_many_retries_are_left() {
        let text = Notice::of_envelope(&envelope()).unwrap().paragraph();
        assert!(text.starts_with("rwfs refused a write to app/config.py and nothing was written"), "{text}");
        for part in
            ["aws-secret-access-key at line 3", "os.environ[\"AWS_SECRET_ACCESS_KEY\"]", "2 identical retries left"]
        {
            assert!(text.contains(part), "{part}: {text}");
        }
        assert!(!text.contains("AKIA"));
    }

    #[test]
    fn a_refusal_past_the_budget_says_it_is_spent_and_still_names_rule_and_line() {
        let mut spent = envelope();
        spent["retry_budget"] = json!(0);
        spent["context"]["reason"] = json!("retry_budget_exhausted");
        let notice = Notice::of_envelope(&spent).unwrap();
        let text = notice.paragraph();
        assert!(text.contains("aws-secret-access-key at line 3"), "{text}");
        assert!(text.contains("its retry budget is spent") && !text.contains("retries left"), "{text}");
        let line = notice.line();
        assert!(line.starts_with("rwfs: refused write to app/config.py again (its retry budget is spent): "), "{line}");
        // The last refusal within the budget: none left, not spent yet.
        let mut last = envelope();
        last["retry_budget"] = json!(0);
        assert!(Notice::of_envelope(&last).unwrap().paragraph().contains("(0 identical retries left)"));
    }

    #[test]
    fn a_spent_retry_still_names_the_file_and_what_to_do() {
        let line = Notice::spent("notes.txt").line();
        assert!(line.starts_with("rwfs: refused write to notes.txt again"), "{line}");
        assert!(Notice::spent("notes.txt").paragraph().contains("Do not retry it"));
    }
}
