//! The reference server's typed error envelope, v1: what an agent gets when a write fails.
//!
//! ```json
//! {"ok": false, "schema_version": "1", "error": "blocked", "reason_hint": "content_filter",
//!  "detected_patterns": ["api_key"], "suggested_action": "redact", "retry_budget": 3,
//!  "context": {"path": "config.py", "reason": "content_blocked", ...}}
//! ```
//!
//! All eight fields are always present (the reference schema requires them); rwfs adds a ninth,
//! `retriable`: whether the very same call may succeed if repeated (`false` for a content
//! filter refusal — the same bytes are refused again — a stale precondition, a quota or a policy
//! violation; `true` for a transient I/O failure or a read-back mismatch). Readers of schema v1
//! that do not know it ignore it; an envelope without it reads as not retriable. `error` is the
//! [`ErrorKind`]; `reason_hint`, `suggested_action` and `retriable` follow from it here, in one place;
//! `context.reason` is the [`Reason`]'s stable code. Front ends serialise it:
//! the mount writes it to `.resilient_write/rejections/`, MCP returns it as a tool result.
//!
//! A refusal's envelope is named here too ([`rejection_id`], from its row) and so is what of it
//! a person looking at the history may see ([`shown_envelope`]): the engine that writes it and
//! the read side that shows it both ask this one place.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Error, ErrorKind, Reason};

/// Envelope schema version.
pub const SCHEMA_VERSION: &str = "1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub ok: bool,
    pub schema_version: String,
    pub error: String,
    pub reason_hint: String,
    pub detected_patterns: Vec<String>,
    pub suggested_action: String,
    pub retry_budget: u32,
    /// May the very same call succeed if repeated? (rwfs's addition; see the module docs.)
    #[serde(default)]
    pub retriable: bool,
    pub context: Map<String, Value>,
}

/// The reference's `reason_hint` and `suggested_action` for a kind.
pub fn hint_and_action(kind: ErrorKind) -> (&'static str, &'static str) {
    match kind {
        ErrorKind::Blocked => ("content_filter", "redact"),
        ErrorKind::StalePrecondition => ("unknown", "ask_user"),
        ErrorKind::WriteCorruption => ("unknown", "retry_later"),
        ErrorKind::QuotaExceeded => ("size_limit", "split"),
        ErrorKind::PolicyViolation => ("permission", "abort"),
        ErrorKind::Io => ("unknown", "retry_later"),
    }
}

/// May a call that failed with `kind` succeed if repeated unchanged?
pub fn retriable(kind: ErrorKind) -> bool {
    match kind {
        ErrorKind::WriteCorruption | ErrorKind::Io => true,
        ErrorKind::Blocked | ErrorKind::StalePrecondition | ErrorKind::QuotaExceeded | ErrorKind::PolicyViolation => {
            false
        }
    }
}

impl Envelope {
    /// An envelope for `kind` with an empty context.
    pub fn new(kind: ErrorKind, retry_budget: u32) -> Envelope {
        let (hint, action) = hint_and_action(kind);
        Envelope {
            ok: false,
            schema_version: SCHEMA_VERSION.to_string(),
            error: kind.as_str().to_string(),
            reason_hint: hint.to_string(),
            detected_patterns: Vec::new(),
            suggested_action: action.to_string(),
            retry_budget,
            retriable: retriable(kind),
            context: Map::new(),
        }
    }

    /// The envelope of an engine error: kind, reason code, message, path.
    pub fn of_error(error: &Error, retry_budget: u32) -> Envelope {
        let mut envelope = Envelope::new(error.kind(), retry_budget);
        envelope.context.insert("reason".into(), json!(error.code()));
        envelope.context.insert("message".into(), json!(error.reason().to_string()));
        if let Some(path) = error.path() {
            envelope.context.insert("path".into(), json!(path));
        }
        match error.reason() {
            Reason::AlreadyExists { existing } => {
                envelope.context.insert("existing_sha256".into(), json!(existing));
            }
            Reason::PreconditionFailed { expected, actual } => {
                // The reference's spelling: "" for "absent".
                let hex = |s: &Option<crate::sha::Sha256>| s.map(|s| s.to_hex()).unwrap_or_default();
                envelope.context.insert("expected_prev_sha256".into(), json!(hex(expected)));
                envelope.context.insert("actual_prev_sha256".into(), json!(hex(actual)));
            }
            _ => {}
        }
        if let Some(errno) = error.raw_os_error() {
            envelope.context.insert("errno".into(), json!(errno));
            envelope.context.insert("strerror".into(), json!(std::io::Error::from_raw_os_error(errno).to_string()));
        }
        envelope
    }

    /// The envelope a front end shows for `error`: a refusal's own (the one written to
    /// `rejections/`), the daemon's for an error it reported, else [`Envelope::of_error`].
    pub fn json_of(error: &Error) -> Value {
        let kept = match error.reason() {
            Reason::Blocked(rejection) => Some(rejection.envelope.as_str()),
            Reason::Protected(protection) => Some(protection.envelope.as_str()),
            Reason::Remote { envelope: Some(envelope), .. } => Some(envelope.as_str()),
            _ => None,
        };
        kept.and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_else(|| serde_json::to_value(Envelope::of_error(error, 0)).expect("envelope serializes"))
    }

    pub fn to_json(&self) -> String {
        // Plain data: serialisation cannot fail.
        serde_json::to_string_pretty(self).expect("envelope serializes")
    }
}

/// The id of the envelope of the refusal journaled at `ts` with `seq`: its file is
/// `rejections/<id>.json`. Letters, digits and `_` only (`rj_20261124T100211123456Z_17`).
pub fn rejection_id(ts: &str, seq: u64) -> String {
    format!("rj_{}_{}", ts.replace([':', '-', '.'], ""), seq)
}

/// What of a refusal's envelope may be shown to a person looking at the history (the page of
/// `rwfs ui`): the rules, where they matched and what to do — never the matched text, its
/// snippet or its hash.
pub fn shown_envelope(envelope: &serde_json::Value) -> serde_json::Value {
    // The refusal's fields are the envelope's `context` (schema v1); at the top level only in
    // a bare context.
    let envelope = if envelope["context"].is_object() { &envelope["context"] } else { envelope };
    let findings: Vec<serde_json::Value> = envelope["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            json!({
                "rule": f["rule"], "family": f["family"], "line": f["line"], "column": f["column"],
                "severity": f["severity"], "action": f["action"],
            })
        })
        .collect();
    json!({
        "rejection_id": envelope["rejection_id"],
        "path": envelope["path"],
        "message": envelope["message"],
        "blocking_rules": envelope["blocking_rules"],
        "findings": findings,
        "suggested_actions": envelope["suggested_actions"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_failures_are_retriable_and_old_envelopes_read_as_not() {
        assert!(!Envelope::new(ErrorKind::Blocked, 3).retriable, "content_filter: not with the same bytes");
        assert!(!Envelope::new(ErrorKind::StalePrecondition, 3).retriable);
        assert!(Envelope::new(ErrorKind::Io, 3).retriable);
        let v1 = json!({"ok": false, "schema_version": "1", "error": "blocked", "reason_hint": "content_filter",
            "detected_patterns": [], "suggested_action": "redact", "retry_budget": 2, "context": {}});
        let read: Envelope = serde_json::from_value(v1).unwrap();
        assert!(!read.retriable);
    }
}
