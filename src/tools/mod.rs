//! The Resilient Write tools over the engine, independent of any transport.
//!
//! Each tool family is one module: its argument structs (field doc comments become the MCP
//! input schema's descriptions) and functions that take a [`Call`] and return an [`Outcome`]:
//! the success payload (`{"ok": true, ...}`, the reference's fields) or a [`Failure`] carrying
//! the reference's envelope v1. `mcp/` only routes calls here; nothing here knows MCP.
//!
//! | module | tools |
//! |---|---|
//! | `write` | `rw_risk_score`, `rw_safe_write`, `rw_safe_replace` |
//! | `chunks` | `rw_chunk_write`, `rw_chunk_append`, `rw_chunk_compose`, `rw_chunk_reset`, `rw_chunk_status`, `rw_chunk_preview` |
//! | `scratch` | `rw_scratch_put`, `rw_scratch_ref`, `rw_scratch_get` |
//! | `handoff` | `rw_handoff_write`, `rw_handoff_read` |
//! | `checkpoint` | `rw_checkpoint`, `rw_checkpoint_read`, `rw_checkpoint_list`, `rw_checkpoint_cleanup` |
//! | `validate` | `rw_validate` |
//! | `read` | `rr_stat`, `rr_read_bytes`, `rr_read_lines`, `rr_read_tail`, `rr_search_then_page`, `rr_make_cursor`, `rr_read_next` |
//! | `journal` | `rw_journal_tail`, `rw_analytics`, `rw_history`, `rw_restore`, `rw_rejections`, `rw_approval_status` |
//!
//! Invariants:
//! - every failure is an envelope with `context.tool` set; an engine error becomes one through
//!   [`Tools::fail`] only, which also spends the retry budget of the attempt;
//! - an identical refused attempt (same agent session — the agent run that launched the MCP
//!   client, whichever way it writes, else the MCP connection —, same path, same content
//!   digest) spends the budget; once it is spent the attempt is refused as
//!   `retry_budget_exhausted` with `suggested_action: "abort"` and a hint to change strategy.
//!   Another session starts with the whole budget, and a failure that is no write attempt (bad arguments, a missing file)
//!   reports the whole budget: only `retry_budget_exhausted` reads 0 as spent;
//! - nothing here writes except through the engine, so every change is durable, journaled and
//!   attributed to the MCP client that asked for it;
//! - no path inside `.resilient_write/` is reachable through a tool's path argument.

pub mod checkpoint;
pub mod chunks;
pub mod handoff;
pub mod history;
pub mod journal;
pub mod read;
pub mod scratch;
pub mod validate;
pub mod write;

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::engine::Engine;
use crate::envelope::Envelope;
use crate::error::{Error, ErrorKind, Reason};
use crate::journal::Actor;
use crate::sha::Sha256;

/// What a tool returns: the success payload, or the envelope of its failure.
pub type Outcome = std::result::Result<Value, Failure>;

/// A failed call: the reference's envelope v1.
#[derive(Debug, Clone)]
pub struct Failure(pub Box<Envelope>);

impl Failure {
    /// The envelope as JSON.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(&*self.0).expect("envelope serializes")
    }

    /// The reference's `reason_hint` where it is not the kind's usual one (`encoding` for bad
    /// input). Only for refusals that spend no retry budget.
    pub(crate) fn hint(mut self, reason_hint: &str) -> Failure {
        self.0.reason_hint = reason_hint.to_string();
        self
    }

    /// The reference's `suggested_action` where it is not the kind's usual one. Only for
    /// refusals that spend no retry budget.
    pub(crate) fn action(mut self, suggested_action: &str) -> Failure {
        self.0.suggested_action = suggested_action.to_string();
        self
    }
}

/// One call of a tool: who asked, and which tool (`actor.tool`).
#[derive(Debug, Clone)]
pub struct Call {
    pub actor: Actor,
}

impl Call {
    pub fn tool(&self) -> &'static str {
        self.actor.tool.unwrap_or("rwfs")
    }
}

/// Settings of the tool layer.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `RW_SCRATCH_DISABLE_GET`: the scratchpad is write-only.
    pub scratch_get_disabled: bool,
}

/// The tools of one workspace.
pub struct Tools {
    engine: Arc<Engine>,
    settings: Settings,
}

impl Tools {
    pub fn new(engine: Arc<Engine>, settings: Settings) -> Tools {
        Tools { engine, settings }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The envelope of an engine error. `attempt` is the (path, content) a refused write
    /// tried: its retry budget is spent here, except for gate refusals, which the engine
    /// counts itself.
    pub fn fail(&self, call: &Call, error: Error, attempt: Option<(&str, &[u8])>) -> Failure {
        let kept = match error.reason() {
            Reason::Blocked(rejection) | Reason::RetryBudgetSpent(rejection) => Some(&rejection.envelope),
            Reason::Protected(protection) => Some(&protection.envelope),
            _ => None,
        };
        match kept {
            Some(kept) => {
                let mut envelope =
                    serde_json::from_str::<Envelope>(kept).unwrap_or_else(|_| Envelope::of_error(&error, 0));
                envelope.context.insert("tool".into(), json!(call.tool()));
                Failure(Box::new(envelope))
            }
            None => self.envelope(call, error.kind(), Envelope::of_error(&error, 0), attempt),
        }
    }

    /// A refusal decided by a tool itself: `reason` is the stable code (`context.reason`),
    /// `context` adds fields. `attempt` as for [`Tools::fail`].
    pub fn reject(
        &self,
        call: &Call,
        kind: ErrorKind,
        reason: &str,
        message: impl Into<String>,
        context: Value,
        attempt: Option<(&str, &[u8])>,
    ) -> Failure {
        let mut envelope = Envelope::new(kind, 0);
        envelope.context.insert("reason".into(), json!(reason));
        envelope.context.insert("message".into(), json!(message.into()));
        if let Value::Object(extra) = context {
            envelope.context.extend(extra);
        }
        self.envelope(call, kind, envelope, attempt)
    }

    /// Bad input, refused as the reference refuses it: `policy_violation` with `reason_hint:
    /// "encoding"`. Spends no retry budget (the call itself has to change).
    pub fn invalid(&self, call: &Call, reason: &str, message: impl Into<String>, context: Value) -> Failure {
        self.reject(call, ErrorKind::PolicyViolation, reason, message, context, None).hint("encoding")
    }

    /// A malformed or out-of-range argument: [`Tools::invalid`] with reason `invalid_argument`
    /// and `context.argument` naming it.
    pub(crate) fn bad_argument(
        &self,
        call: &Call,
        argument: &str,
        message: impl Into<String>,
        context: Value,
    ) -> Failure {
        let mut failure = self.invalid(call, "invalid_argument", message, context);
        failure.0.context.insert("argument".into(), json!(argument));
        failure
    }

    fn envelope(
        &self,
        call: &Call,
        kind: ErrorKind,
        mut envelope: Envelope,
        attempt: Option<(&str, &[u8])>,
    ) -> Failure {
        envelope.retry_budget = self.engine.policy().retry_budget();
        if let Some((path, content)) = attempt
            && counts_against_budget(kind)
        {
            let sha = Sha256::of(content);
            match self.engine.spend_retry(&call.actor, path, sha) {
                Some(left) => envelope.retry_budget = left,
                None => return exhausted(call, path, sha),
            }
        }
        envelope.context.insert("tool".into(), json!(call.tool()));
        Failure(Box::new(envelope))
    }
}

/// Refusals an identical retry cannot fix by itself.
fn counts_against_budget(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Blocked | ErrorKind::StalePrecondition | ErrorKind::PolicyViolation | ErrorKind::QuotaExceeded
    )
}

/// The envelope once an identical attempt has been refused too often.
fn exhausted(call: &Call, path: &str, sha: Sha256) -> Failure {
    let mut envelope = Envelope::new(ErrorKind::Blocked, 0);
    envelope.suggested_action = "abort".into();
    envelope.reason_hint = "unknown".into();
    let mut context = Map::new();
    context.insert("tool".into(), json!(call.tool()));
    context.insert("path".into(), json!(path));
    context.insert("reason".into(), json!("retry_budget_exhausted"));
    context.insert("content_sha256".into(), json!(sha));
    context.insert(
        "message".into(),
        json!("this exact call was refused before and its retry budget is spent; it will be refused again"),
    );
    context.insert(
        "hint".into(),
        json!("change strategy: alter the content (redact, move secrets to rw_scratch_put), the path, or ask the user"),
    );
    envelope.context = context;
    Failure(Box::new(envelope))
}

/// `{"ok": true, ...fields}`.
pub fn ok(fields: Value) -> Value {
    let mut out = match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    out.insert("ok".into(), json!(true));
    Value::Object(out)
}

/// The reference's rule for chunk session and checkpoint names: `^[A-Za-z0-9_-]{1,64}$`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Now, as the reference's tools write their timestamps: UTC, whole seconds,
/// `%Y-%m-%dT%H:%M:%SZ` (journal rows have sub-second stamps: `crate::time`).
pub fn now_utc() -> String {
    crate::time::seconds(SystemTime::now())
}

/// A time argument or field: RFC 3339 with `Z`, a numeric offset or no zone (UTC), or a bare
/// date (`crate::time::parse`).
pub fn parse_time(input: &str) -> Option<SystemTime> {
    crate::time::parse(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_reference_rule() {
        assert!(is_valid_name("a"));
        assert!(is_valid_name(&"x".repeat(64)));
        assert!(is_valid_name("run_2-b"));
        for bad in ["", "a b", "a/b", "..", "é", &"x".repeat(65)] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }
}
