//! L5: `rw_handoff_write`, `rw_handoff_read` — the task-continuity envelope an agent leaves for
//! the next one.
//!
//! The file (default `HANDOFF.md`) is the reference's format: `---\n`, the envelope as a YAML
//! mapping, `\n---\n`, then, when there is a body, a blank line and the body with trailing
//! whitespace stripped plus `\n`. Required envelope keys: `task_id`, `status`
//! (`complete|partial|blocked|handed_off`), `agent`, `summary`, `next_steps` (a list) and
//! `last_good_state` (a list of `{path, sha256, bytes?}`); every other key passes through, and
//! `updated_at` is filled when absent.
//!
//! Beyond the reference:
//! - `last_good_state` may be omitted on write: rwfs fills it from the journal, so the envelope
//!   states what was written, not what the agent believes it wrote. The window of rows is: from
//!   the envelope's `started_at` (inclusive, whole seconds) when it parses as a time; otherwise
//!   the rows after the previous handoff written to the same path; otherwise the whole journal.
//!   Every workspace file a row in the window created, wrote, appended, replaced, restored or
//!   renamed to, that still exists, is listed with its current `sha256` and `bytes`, sorted by
//!   path; the handoff file itself and `.resilient_write/` are left out. A file read without
//!   `last_good_state` is accepted too (no drift to check).
//! - YAML is written by serde-saphyr with YAML 1.1 quoting, so a PyYAML reader gets strings
//!   back as strings (a timestamp stays a string, `yes` is not a bool); and it is read by
//!   serde-saphyr (YAML 1.2 core schema), so a hand-written unquoted timestamp is a string, not
//!   a datetime that cannot be returned (reference bug 12). A non-UTF-8 file is an envelope.
//! - `archive=true` copies the file being replaced to
//!   `.resilient_write/handoffs/<UTC %Y%m%dT%H%M%SZ>_<task_id>.md` with the engine's durable,
//!   journaled state write, created exclusively (`-2`, `-3`, ... on a name already taken, so
//!   archives made in one second never overwrite each other); `<task_id>` is the archived
//!   envelope's (the new one's when the old file cannot be parsed), with every character outside
//!   `[A-Za-z0-9_-]` replaced by `_` (reference bug 22: `/` and `..` neither escape nor fail).
//!
//! Invariants:
//! - the handoff file is written only through [`Engine::safe_write`](crate::engine::Engine):
//!   gated, durable, journaled, its previous version kept; with `archive`, the write expects
//!   exactly the version that was archived, so the archive always holds what was replaced;
//! - what is written parses back to the same envelope and body (checked before writing);
//! - drift is reported as warnings (`missing`, `hash_mismatch`, `invalid_path`), never refused.

use std::io::Read;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::engine::{Expect, WriteMode, WriteRequest};
use crate::error::{ErrorKind, Reason, Result};
use crate::history::Opened;
use crate::journal::Op;
use crate::sha::{Hasher, Sha256};

use super::{Call, Failure, Outcome, Tools, now_utc, ok, parse_time};

/// Where the handoff lives unless told otherwise.
pub const DEFAULT_PATH: &str = "HANDOFF.md";
/// Archives, relative to the state directory.
pub const ARCHIVE_DIR: &str = crate::durable::layout::HANDOFFS;
const STATE_PREFIX: &str = ".resilient_write/";

/// The reference's required keys but `last_good_state`, which rwfs fills on write and does
/// without on read.
const REQUIRED: [&str; 5] = ["task_id", "status", "agent", "summary", "next_steps"];
const STATUSES: [&str; 4] = ["complete", "partial", "blocked", "handed_off"];
/// Longest task id kept in an archive name.
const STEM_MAX: usize = 64;
/// Names tried per archive second before giving up.
const ARCHIVE_TRIES: u32 = 1000;

fn default_path() -> String {
    DEFAULT_PATH.to_string()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffWriteArgs {
    /// The envelope: `task_id`, `status` (complete|partial|blocked|handed_off), `agent`,
    /// `summary`, `next_steps` (list) and `last_good_state` (list of {path, sha256, bytes?};
    /// omit it and rwfs fills it from the journal: every file written since `started_at`, or
    /// since the previous handoff). Optional: `started_at`, `updated_at` (filled when absent),
    /// `context_hints`, `open_questions`, `blockers`, `artifacts`, and any other keys.
    pub envelope: Map<String, Value>,
    /// Markdown after the front matter.
    #[serde(default)]
    pub body: String,
    /// Workspace-relative path of the handoff file (default `HANDOFF.md`).
    #[serde(default = "default_path")]
    pub path: String,
    /// First copy the current handoff file to `.resilient_write/handoffs/<time>_<task_id>.md`.
    #[serde(default)]
    pub archive: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffReadArgs {
    /// Workspace-relative path of the handoff file (default `HANDOFF.md`).
    #[serde(default = "default_path")]
    pub path: String,
}

/// Why a handoff file does not parse (the reference's reason codes).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Malformed {
    NoDelimiter,
    Unterminated,
    Yaml(String),
    NotMapping,
}

impl Malformed {
    fn reason(&self) -> &'static str {
        match self {
            Malformed::NoDelimiter => "missing_front_matter_delimiter",
            Malformed::Unterminated => "unterminated_front_matter",
            Malformed::Yaml(_) => "yaml_error",
            Malformed::NotMapping => "front_matter_not_mapping",
        }
    }

    fn message(&self) -> String {
        match self {
            Malformed::NoDelimiter => "the file must start with a --- line".into(),
            Malformed::Unterminated => "the front matter has no closing --- line".into(),
            Malformed::Yaml(e) => format!("the front matter is not valid YAML: {e}"),
            Malformed::NotMapping => "the front matter is not a YAML mapping".into(),
        }
    }
}

/// The file's text for an envelope and a body.
fn render(envelope: &Map<String, Value>, body: &str) -> std::result::Result<String, String> {
    let front = serde_saphyr::to_string(envelope).map_err(|e| e.to_string())?;
    let mut text = String::with_capacity(front.len() + body.len() + 16);
    text.push_str("---\n");
    text.push_str(front.trim_end());
    text.push_str("\n---\n");
    if !body.is_empty() {
        text.push('\n');
        text.push_str(body.trim_end());
        text.push('\n');
    }
    Ok(text)
}

/// Envelope and body of a handoff file's text.
fn parse(text: &str) -> std::result::Result<(Map<String, Value>, String), Malformed> {
    let rest = text.strip_prefix("---").ok_or(Malformed::NoDelimiter)?.trim_start_matches('\n');
    let (front, tail) = match rest.strip_prefix("---") {
        // Empty front matter.
        Some(tail) => ("", tail),
        None => {
            let end = rest.find("\n---").ok_or(Malformed::Unterminated)?;
            (&rest[..end], &rest[end + 4..])
        }
    };
    let value: Value = if front.trim().is_empty() {
        Value::Null
    } else {
        serde_saphyr::from_str(front).map_err(|e| Malformed::Yaml(e.to_string()))?
    };
    let envelope = match value {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        _ => return Err(Malformed::NotMapping),
    };
    let body = tail.trim_start_matches(['\r', '\n']).to_string();
    Ok((envelope, body))
}

/// An archive's file name: `<UTC %Y%m%dT%H%M%SZ>_<sanitised task_id>[-n].md`.
fn archive_name(at: SystemTime, task_id: Option<&Value>, n: u32) -> String {
    let stamp: String =
        humantime::format_rfc3339_seconds(at).to_string().chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let raw = match task_id {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let mut stem: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(STEM_MAX)
        .collect();
    if stem.is_empty() {
        stem.push_str("task");
    }
    if n <= 1 { format!("{stamp}_{stem}.md") } else { format!("{stamp}_{stem}-{n}.md") }
}

/// Does a row of this op leave content the agent wrote at its path?
fn writes(op: Op) -> bool {
    matches!(op, Op::Create | Op::Write | Op::Append | Op::Replace | Op::Restore | Op::Rename)
}

/// sha256 and size of an opened file, from one read.
fn digest(opened: Opened) -> Result<(Sha256, u64)> {
    let mut hasher = Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    let mut file = &opened.file;
    loop {
        let n = file.read(&mut buf).map_err(|e| crate::error::Error::io("read file", e).at(opened.path.as_str()))?;
        if n == 0 {
            return Ok((hasher.finish(), total));
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
}

impl Tools {
    pub fn handoff_write(&self, call: &Call, args: HandoffWriteArgs) -> Outcome {
        let mut envelope = args.envelope;
        self.check_envelope(call, &envelope, true)?;
        if !envelope.contains_key("updated_at") {
            envelope.insert("updated_at".into(), json!(now_utc()));
        }
        let handoff = self.engine().workspace().lookup(&args.path).map_err(|e| self.fail(call, e, None))?;
        let source = match envelope.get("last_good_state") {
            Some(_) => json!({"rule": "agent"}),
            None => {
                let (state, source) =
                    self.state_from_journal(&envelope, handoff.as_str()).map_err(|e| self.fail(call, e, None))?;
                envelope.insert("last_good_state".into(), Value::Array(state));
                source
            }
        };
        let body = args.body;
        let text = render(&envelope, &body).map_err(|e| self.unrepresentable(call, handoff.as_str(), e))?;
        if parse(&text).ok().as_ref() != Some(&(envelope.clone(), rendered_body(&body))) {
            return Err(self.unrepresentable(
                call,
                handoff.as_str(),
                "the envelope does not read back identically".into(),
            ));
        }
        let attempt = Some((handoff.as_str(), text.as_bytes()));
        let (expect, archived_to) =
            if args.archive { self.archive(call, handoff.as_str(), &envelope)? } else { (None, None) };
        let request = WriteRequest {
            path: handoff.as_str(),
            content: text.as_bytes(),
            mode: WriteMode::Overwrite,
            expect,
            actor: &call.actor,
        };
        let committed = self.engine().safe_write(&request).map_err(|e| self.fail(call, e, attempt))?;
        let state = envelope["last_good_state"].clone();
        let mut out = json!({
            "handoff_path": committed.path.as_str(),
            "sha256": committed.sha256,
            "bytes": committed.bytes,
            "journal_id": committed.journal_id,
            "mode_applied": if committed.op == Op::Create { "create" } else { "overwrite" },
            "wrote_at": committed.ts,
            "drift_warnings": self.drift(&state),
            "archived_to": archived_to,
            "last_good_state": state,
            "last_good_state_source": source,
        });
        self.add_checkpoint_refs(call, &mut out)?;
        Ok(ok(out))
    }

    pub fn handoff_read(&self, call: &Call, args: HandoffReadArgs) -> Outcome {
        let (path, bytes, sha) =
            self.engine().workspace().read_file(&args.path).map_err(|e| self.fail(call, e, None))?;
        let Ok(text) = String::from_utf8(bytes) else {
            return Err(self
                .reject(
                    call,
                    ErrorKind::PolicyViolation,
                    "not_utf8",
                    "the handoff file is not UTF-8 text",
                    json!({"path": path.as_str(), "sha256": sha}),
                    None,
                )
                .hint("encoding"));
        };
        let (envelope, body) = parse(&text).map_err(|m| {
            self.reject(call, ErrorKind::PolicyViolation, m.reason(), m.message(), json!({"path": path.as_str()}), None)
                .hint("encoding")
        })?;
        self.check_envelope(call, &envelope, false)?;
        let state = envelope.get("last_good_state").cloned().unwrap_or(json!([]));
        let mut out = json!({
            "handoff_path": path.as_str(),
            "sha256": sha,
            "drift_warnings": self.drift(&state),
            "envelope": envelope,
            "body": body,
        });
        self.add_checkpoint_refs(call, &mut out)?;
        Ok(ok(out))
    }

    /// The reference's validation; `last_good_state` may be absent (filled on write, nothing
    /// to check on read).
    fn check_envelope(
        &self,
        call: &Call,
        envelope: &Map<String, Value>,
        writing: bool,
    ) -> std::result::Result<(), Failure> {
        let refuse = |reason: &str, message: &str, context: Value| {
            self.reject(call, ErrorKind::PolicyViolation, reason, message, context, None).hint("encoding")
        };
        let missing: Vec<&str> = REQUIRED.iter().copied().filter(|f| !envelope.contains_key(*f)).collect();
        if !missing.is_empty() {
            let message =
                if writing { "the envelope lacks required fields" } else { "the handoff file lacks required fields" };
            return Err(refuse("missing_fields", message, json!({"missing_fields": missing})));
        }
        let status = &envelope["status"];
        if !status.as_str().is_some_and(|s| STATUSES.contains(&s)) {
            return Err(refuse(
                "invalid_status",
                "status must be complete, partial, blocked or handed_off",
                json!({"status": status, "valid": STATUSES}),
            ));
        }
        if !envelope["next_steps"].is_array() {
            return Err(refuse("must_be_list", "next_steps must be a list", json!({"field": "next_steps"})));
        }
        let Some(state) = envelope.get("last_good_state") else {
            return Ok(());
        };
        let Some(entries) = state.as_array() else {
            return Err(refuse("must_be_list", "last_good_state must be a list", json!({"field": "last_good_state"})));
        };
        for (index, entry) in entries.iter().enumerate() {
            if !(entry["path"].is_string() && entry["sha256"].is_string()) {
                return Err(refuse(
                    "each_entry_needs_path_and_sha256",
                    "every last_good_state entry is an object with string path and sha256",
                    json!({"field": "last_good_state", "index": index}),
                ));
            }
        }
        Ok(())
    }

    /// `last_good_state` from the journal (see the module doc), and which rule chose the rows.
    fn state_from_journal(&self, envelope: &Map<String, Value>, handoff: &str) -> Result<(Vec<Value>, Value)> {
        let started_at = envelope.get("started_at").and_then(Value::as_str);
        let since = started_at.and_then(parse_time);
        let mut written = std::collections::BTreeSet::new();
        let mut previous: Option<String> = None;
        self.engine().workspace().read_journal(|entry| {
            let row = entry.row;
            if !writes(row.op()) {
                return;
            }
            if row.path == handoff {
                if since.is_none() {
                    written.clear();
                    previous = Some(row.ts);
                }
                return;
            }
            if row.path.starts_with(STATE_PREFIX) {
                return;
            }
            if let Some(since) = since
                && parse_time(&row.ts).is_none_or(|ts| ts < since)
            {
                return;
            }
            written.insert(row.path);
        })?;
        let mut state = Vec::with_capacity(written.len());
        for path in written {
            match self.current(&path) {
                Ok(Some((sha, bytes))) => state.push(json!({"path": path, "sha256": sha, "bytes": bytes})),
                // Gone, or no longer a file (renamed away, replaced by a directory).
                Ok(None) => {}
                Err(e) if e.kind() != ErrorKind::Io => {}
                Err(e) => return Err(e),
            }
        }
        let (rule, from) = match (since, previous) {
            (Some(_), _) => ("started_at", started_at.map(String::from)),
            (None, Some(ts)) => ("previous_handoff", Some(ts)),
            (None, None) => ("whole_journal", None),
        };
        let mut source = json!({"rule": rule, "since": from});
        if since.is_none()
            && let Some(raw) = started_at
        {
            source["note"] = json!(format!("started_at {raw:?} is not a time rwfs understands; used the {rule} rule"));
        }
        Ok((state, source))
    }

    /// Digest and size of a file named the way `last_good_state` names it: workspace-relative,
    /// or under `.resilient_write/` (a checkpoint); `None` when absent.
    fn current(&self, path: &str) -> Result<Option<(Sha256, u64)>> {
        let opened = match path.strip_prefix(STATE_PREFIX) {
            Some(rel) => self.engine().workspace().state_open(rel),
            None => self.engine().workspace().open_file(path),
        };
        match opened {
            Ok(opened) => digest(opened).map(Some),
            Err(e) if *e.reason() == Reason::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One warning per `last_good_state` entry that no longer matches the tree.
    fn drift(&self, state: &Value) -> Vec<Value> {
        let mut warnings = Vec::new();
        for entry in state.as_array().into_iter().flatten() {
            let (Some(path), Some(expected)) = (entry["path"].as_str(), entry["sha256"].as_str()) else {
                continue;
            };
            match self.current(path) {
                Ok(Some((actual, _))) if actual.to_hex() == expected => {}
                Ok(Some((actual, _))) => warnings.push(json!({
                    "path": path, "reason": "hash_mismatch", "expected_sha256": expected, "actual_sha256": actual,
                })),
                Ok(None) => warnings.push(json!({"path": path, "reason": "missing"})),
                Err(e) if e.kind() == ErrorKind::PolicyViolation => {
                    warnings.push(json!({"path": path, "reason": "invalid_path", "detail": e.code()}))
                }
                Err(e) => warnings.push(json!({"path": path, "reason": "unreadable", "detail": e.code()})),
            }
        }
        warnings
    }

    /// Archive the current handoff file, if there is one: the precondition for replacing it
    /// (exactly the archived version, or absent) and the archive's path.
    fn archive(
        &self,
        call: &Call,
        handoff: &str,
        envelope: &Map<String, Value>,
    ) -> std::result::Result<(Option<Expect>, Option<String>), Failure> {
        let (bytes, sha) = match self.engine().workspace().read_file(handoff) {
            Ok((_, bytes, sha)) => (bytes, sha),
            Err(e) if *e.reason() == Reason::NotFound => return Ok((Some(Expect::Absent), None)),
            Err(e) => return Err(self.fail(call, e, None)),
        };
        let old = std::str::from_utf8(&bytes).ok().and_then(|text| parse(text).ok()).map(|(env, _)| env);
        let task_id = old.as_ref().and_then(|env| env.get("task_id")).or_else(|| envelope.get("task_id"));
        let now = SystemTime::now();
        for n in 1..=ARCHIVE_TRIES {
            let rel = format!("{ARCHIVE_DIR}/{}", archive_name(now, task_id, n));
            match self.engine().state().write(&rel, &bytes, true, false, &call.actor) {
                Ok(committed) => return Ok((Some(Expect::Sha(sha)), Some(committed.path.to_string()))),
                Err(e) if matches!(e.reason(), Reason::AlreadyExists { .. }) => continue,
                Err(e) => return Err(self.fail(call, e, None)),
            }
        }
        Err(self.reject(
            call,
            ErrorKind::StalePrecondition,
            "archive_names_exhausted",
            "every archive name for this second and task is taken; retry in a second",
            json!({"path": handoff}),
            None,
        ))
    }

    fn unrepresentable(&self, call: &Call, path: &str, detail: String) -> Failure {
        self.reject(
            call,
            ErrorKind::PolicyViolation,
            "unrepresentable_envelope",
            format!("the envelope cannot be written as YAML front matter: {detail}"),
            json!({"path": path}),
            None,
        )
        .hint("encoding")
    }

    /// `checkpoint_refs`, present only when checkpoints exist (as in the reference).
    fn add_checkpoint_refs(&self, call: &Call, out: &mut Value) -> std::result::Result<(), Failure> {
        let refs = self.checkpoint_refs().map_err(|e| self.fail(call, e, None))?;
        if !refs.is_empty() {
            out["checkpoint_refs"] = Value::Array(refs);
        }
        Ok(())
    }
}

/// The body as [`parse`] returns it after [`render`].
fn rendered_body(body: &str) -> String {
    let body = body.trim_end();
    body.trim_start_matches(['\r', '\n']).to_string() + if body.is_empty() { "" } else { "\n" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(extra: Value) -> Map<String, Value> {
        let mut base = json!({
            "task_id": "t1", "status": "partial", "agent": "claude", "summary": "did things",
            "next_steps": ["one", "two"], "last_good_state": [{"path": "a.txt", "sha256": "00"}],
        });
        base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        base.as_object().unwrap().clone()
    }

    #[test]
    fn the_format_is_the_references() {
        let env = envelope(json!({}));
        let text = render(&env, "# Notes\n\nmore  \n\n").unwrap();
        assert!(text.starts_with("---\n"), "{text}");
        assert!(text.ends_with("\n---\n\n# Notes\n\nmore\n"), "{text}");
        assert!(text.contains("\ntask_id: t1\n"), "{text}");
        let (back, body) = parse(&text).unwrap();
        assert_eq!(back, env);
        assert_eq!(body, "# Notes\n\nmore\n");
        let bare = render(&env, "").unwrap();
        assert!(bare.ends_with("\n---\n"), "{bare}");
        assert_eq!(parse(&bare).unwrap().1, "");
    }

    #[test]
    fn strings_a_yaml_1_1_reader_would_retype_are_quoted_and_everything_reads_back() {
        let tricky = json!({
            "updated_at": "2026-04-16T10:00:00Z", "day": "2026-04-16", "yes": "yes", "on": "on", "n": "n",
            "num": "123", "float": "1.5", "exp": "1e3", "oct": "0o17", "sexa": "1:30", "null": "null", "tilde": "~",
            "empty": "", "dashes": "---", "doc": "a\n---\nb", "hash": "# not a comment", "colon": "key: value",
            "lead": " spaced ", "unicode": "€ — ü", "ints": [0, -1, 18446744073709551615u64], "floats": [1.5, -0.25, 1e300],
            "bools": [true, false], "nothing": null, "nested": {"deep": [{"x": "y"}], "empty_list": [], "empty_map": {}},
            "multi": "line one\nline two\n", "tabs": "a\tb", "quote": "it's \"quoted\"", "bang": "!tag", "star": "*alias",
        });
        let env = envelope(tricky);
        let text = render(&env, "").unwrap();
        let (back, _) = parse(&text).unwrap();
        assert_eq!(Value::Object(back), Value::Object(env.clone()), "{text}");
        for value in ["2026-04-16T10:00:00Z", "2026-04-16", "yes", "on", "123", "1e3", "0o17", "1:30", "null", "~"] {
            assert!(
                text.contains(&format!(": '{value}'\n")) || text.contains(&format!(": \"{value}\"\n")),
                "{value}: {text}"
            );
        }
        // The first `\n---` a reader finds is the closing delimiter.
        assert_eq!(text.find("\n---"), Some(text.len() - "\n---\n".len()), "{text}");
    }

    #[test]
    fn hand_written_files_parse_like_the_reference_reader() {
        let text = "---\ntask_id: t\nstarted_at: 2026-04-16T10:00:00Z\n---\n\n\nbody\n";
        let (env, body) = parse(text).unwrap();
        assert_eq!(env["started_at"], "2026-04-16T10:00:00Z");
        assert_eq!(body, "body\n");
        assert_eq!(parse("no front matter"), Err(Malformed::NoDelimiter));
        assert_eq!(parse("---\ntask_id: t\n"), Err(Malformed::Unterminated));
        assert_eq!(parse("---\n- a\n- b\n---\n"), Err(Malformed::NotMapping));
        assert!(matches!(parse("---\nkey: [unclosed\n---\n"), Err(Malformed::Yaml(_))));
        assert_eq!(parse("---\n---\nbody"), Ok((Map::new(), "body".into())));
        let crlf = "---\r\ntask_id: t\r\n---\r\n\r\nbody\r\n";
        let (env, body) = parse(crlf).unwrap();
        assert_eq!(env["task_id"], "t");
        assert_eq!(body, "body\r\n");
    }

    #[test]
    fn archive_names_cannot_escape_and_are_distinct() {
        let at = humantime::parse_rfc3339("2026-04-16T10:20:30Z").unwrap();
        assert_eq!(archive_name(at, Some(&json!("t-1")), 1), "20260416T102030Z_t-1.md");
        assert_eq!(archive_name(at, Some(&json!("../../etc/passwd")), 1), "20260416T102030Z_______etc_passwd.md");
        assert_eq!(archive_name(at, Some(&json!("a/b")), 2), "20260416T102030Z_a_b-2.md");
        assert_eq!(archive_name(at, Some(&json!(42)), 1), "20260416T102030Z_42.md");
        assert_eq!(archive_name(at, None, 1), "20260416T102030Z_task.md");
        assert_eq!(archive_name(at, Some(&json!("..")), 1), "20260416T102030Z___.md");
        let long = archive_name(at, Some(&json!("x".repeat(300))), 1);
        assert!(long.len() < 100, "{long}");
    }
}
