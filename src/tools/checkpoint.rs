//! v0.2 checkpoints: `rw_checkpoint`, `rw_checkpoint_read`, `rw_checkpoint_list`,
//! `rw_checkpoint_cleanup` — named intermediate data kept outside the model's context.
//!
//! A checkpoint is `.resilient_write/checkpoints/<name>.json`, the reference's document: JSON
//! with 2-space indentation, keys sorted at every level, non-ASCII kept as is, a trailing
//! newline: `{created_at, data, format, name, ttl, updated_at}`. `name` follows
//! `^[A-Za-z0-9_-]{1,64}$`; `ttl` is `session`, `permanent` or an ISO 8601 duration
//! `P[nY][nM][nD][T[nH][nM][nS]]` (Y = 365 days, M = 30 days; a bare `P` or `PT` never
//! expires); `format` (`json|yaml|markdown`) labels the data, and `markdown` requires a string.
//!
//! Differences from the reference (its bugs):
//! - every size is written whole by one durable state write, so there is no chunking and no
//!   character is lost at a chunk edge (bug 24), and no internal `_cp_<name>` session whose
//!   name could exceed 64 characters (bug 25); `chunked` is always `false`;
//! - `rw_checkpoint_read` compares the file with the digest its last journal row recorded
//!   (`verified`, `journal_sha256`) instead of claiming an integrity check it does not make;
//! - cleanup removes files through the engine (a journaled delete whose bytes stay in
//!   `objects/`, restorable), only if each still holds the version that was judged, and never
//!   removes a corrupt file unless asked (`remove_corrupt`): corrupt files are reported (bug 26).
//!
//! Invariants: `created_at` is the time of the first save of a name and survives every
//! overwrite (the first save is an exclusive create, so two first saves cannot both win); a
//! checkpoint is always a complete version of the document.

use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::durable::FileKind;
use crate::error::{ErrorKind, Reason, Result};
use crate::sha::Sha256;

use super::{Call, Failure, Outcome, Tools, is_valid_name, now_utc, ok, parse_time};

/// Checkpoints, relative to the state directory.
pub const CHECKPOINT_DIR: &str = crate::durable::layout::CHECKPOINTS;
/// How many times a first save retries after losing an exclusive create to another save.
const SAVE_TRIES: usize = 8;

/// What a checkpoint's data is (a label: the file is always JSON).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Json,
    Yaml,
    /// The data is a Markdown string.
    Markdown,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Yaml => "yaml",
            Format::Markdown => "markdown",
        }
    }
}

fn session() -> String {
    "session".to_string()
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointArgs {
    /// Checkpoint name: 1 to 64 of `A-Z a-z 0-9 _ -`. Saving an existing name replaces its data
    /// and keeps its `created_at`.
    pub name: String,
    /// The data to keep: any JSON value, any size.
    pub data: Value,
    /// What the data is: `json` (default), `yaml` or `markdown` (then `data` is a string). A
    /// label; the file is always JSON.
    #[serde(default)]
    pub format: Format,
    /// `session` (default: removed by rw_checkpoint_cleanup), `permanent`, or an ISO 8601
    /// duration after the last save (`PT1H`, `P7D`, `P1Y2M3DT4H5M6S`; Y = 365 days, M = 30 days).
    #[serde(default = "session")]
    pub ttl: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointReadArgs {
    /// Checkpoint name.
    pub name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointListArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointCleanupArgs {
    /// Also remove `session` checkpoints (default true); expired durations are always removed
    /// and `permanent` ones never.
    #[serde(default = "yes")]
    pub include_session: bool,
    /// Also remove checkpoints whose file is not a readable checkpoint (default false: they are
    /// kept and reported in `corrupt`). Removed files stay restorable.
    #[serde(default)]
    pub remove_corrupt: bool,
}

/// A checkpoint's lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ttl {
    Session,
    Permanent,
    /// Seconds after `updated_at`; 0 never expires (the reference's reading of `P`).
    After(u64),
}

impl Ttl {
    fn parse(s: &str) -> Option<Ttl> {
        match s {
            "session" => Some(Ttl::Session),
            "permanent" => Some(Ttl::Permanent),
            _ => duration(s).map(Ttl::After),
        }
    }
}

/// Seconds of `^P(\d+Y)?(\d+M)?(\d+D)?(T(\d+H)?(\d+M)?(\d+S)?)?$` (the reference's pattern),
/// saturating.
fn duration(s: &str) -> Option<u64> {
    const DAY: u64 = 86_400;
    let rest = s.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) => (date, time),
        None => (rest, ""),
    };
    Some(
        units(date, &[('Y', 365 * DAY), ('M', 30 * DAY), ('D', DAY)])?
            .saturating_add(units(time, &[('H', 3600), ('M', 60), ('S', 1)])?),
    )
}

/// `(\d+U1)?(\d+U2)?...` in this order, each unit at most once.
fn units(mut s: &str, order: &[(char, u64)]) -> Option<u64> {
    let mut total = 0u64;
    let mut next = 0;
    while !s.is_empty() {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let value = s[..digits].bytes().fold(0u64, |n, d| n.saturating_mul(10).saturating_add(u64::from(d - b'0')));
        let unit = s[digits..].chars().next()?;
        let at = order[next..].iter().position(|(u, _)| *u == unit)? + next;
        total = total.saturating_add(value.saturating_mul(order[at].1));
        next = at + 1;
        s = &s[digits + unit.len_utf8()..];
    }
    Some(total)
}

fn rel_of(name: &str) -> String {
    format!("{CHECKPOINT_DIR}/{name}.json")
}

fn path_of(name: &str) -> String {
    format!(".resilient_write/{}", rel_of(name))
}

/// A checkpoint file's document, or why it is not one.
fn parse_document(bytes: &[u8]) -> std::result::Result<Map<String, Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The reference's file: indent 2, keys sorted at every level, trailing newline.
fn document(name: &str, data: &Value, format: Format, ttl: &str, created_at: &str, updated_at: &str) -> String {
    let mut doc = json!({
        "created_at": created_at, "data": data, "format": format.as_str(), "name": name, "ttl": ttl,
        "updated_at": updated_at,
    });
    doc.sort_all_objects();
    let mut text = serde_json::to_string_pretty(&doc).expect("JSON values serialize");
    text.push('\n');
    text
}

/// What cleanup does with one checkpoint.
enum Fate {
    Keep,
    Remove { ttl: String, reason: &'static str },
}

impl Tools {
    pub fn checkpoint(&self, call: &Call, args: CheckpointArgs) -> Outcome {
        self.check_name(call, &args.name)?;
        if Ttl::parse(&args.ttl).is_none() {
            return Err(self
                .reject(
                    call,
                    ErrorKind::PolicyViolation,
                    "ttl_must_be_session|permanent|ISO_8601_duration",
                    "ttl is session, permanent or an ISO 8601 duration such as PT1H or P7D",
                    json!({"ttl": args.ttl}),
                    None,
                )
                .hint("encoding"));
        }
        if args.format == Format::Markdown && !args.data.is_string() {
            return Err(self
                .reject(
                    call,
                    ErrorKind::PolicyViolation,
                    "markdown_format_requires_string_data",
                    "format markdown needs data to be a string",
                    json!({"name": args.name, "format": "markdown"}),
                    None,
                )
                .hint("encoding"));
        }
        let rel = rel_of(&args.name);
        let now = now_utc();
        for _ in 0..SAVE_TRIES {
            let existing = self.engine().workspace().state_read(&rel).map_err(|e| self.fail(call, e, None))?;
            let created_at = existing
                .as_deref()
                .and_then(|bytes| parse_document(bytes).ok())
                .and_then(|doc| doc.get("created_at").and_then(Value::as_str).map(String::from))
                .unwrap_or_else(|| now.clone());
            let first = existing.is_none();
            let text = document(&args.name, &args.data, args.format, &args.ttl, &created_at, &now);
            match self.engine().state().write(&rel, text.as_bytes(), first, false, &call.actor) {
                Ok(committed) => {
                    return Ok(ok(json!({
                        "name": args.name, "format": args.format.as_str(), "ttl": args.ttl,
                        "checkpoint_path": committed.path.as_str(), "sha256": committed.sha256,
                        "bytes": committed.bytes, "journal_id": committed.journal_id, "created_at": created_at,
                        "updated_at": now, "chunked": false,
                    })));
                }
                // Another first save won: keep its created_at.
                Err(e) if first && matches!(e.reason(), Reason::AlreadyExists { .. }) => {}
                Err(e) => return Err(self.fail(call, e, None)),
            }
        }
        Err(self.reject(
            call,
            ErrorKind::StalePrecondition,
            "concurrent_saves",
            "other saves of this checkpoint kept winning; retry",
            json!({"name": args.name}),
            None,
        ))
    }

    pub fn checkpoint_read(&self, call: &Call, args: CheckpointReadArgs) -> Outcome {
        self.check_name(call, &args.name)?;
        let rel = rel_of(&args.name);
        let Some(bytes) = self.engine().workspace().state_read(&rel).map_err(|e| self.fail(call, e, None))? else {
            return Err(self.reject(
                call,
                ErrorKind::StalePrecondition,
                "checkpoint_not_found",
                "no checkpoint of that name",
                json!({"name": args.name}),
                None,
            ));
        };
        let corrupt = |reason: &str, message: String| {
            self.reject(call, ErrorKind::WriteCorruption, reason, message, json!({"name": args.name}), None)
                .hint("encoding")
        };
        let mut doc = parse_document(&bytes).map_err(|detail| corrupt("corrupt_checkpoint", detail))?;
        let Some(data) = doc.remove("data") else {
            return Err(corrupt("missing_data_field", "the checkpoint has no data field".into()));
        };
        let sha = Sha256::of(&bytes);
        let recorded = self.recorded_sha(&path_of(&args.name)).map_err(|e| self.fail(call, e, None))?;
        let field = |key: &str, default: Value| doc.get(key).cloned().unwrap_or(default);
        Ok(ok(json!({
            "name": field("name", json!(args.name)), "format": field("format", json!("json")),
            "ttl": field("ttl", json!("session")), "created_at": field("created_at", Value::Null),
            "updated_at": field("updated_at", Value::Null), "data": data, "sha256": sha, "bytes": bytes.len(),
            "checkpoint_path": path_of(&args.name), "journal_sha256": recorded, "verified": recorded == Some(sha),
        })))
    }

    pub fn checkpoint_list(&self, call: &Call, _args: CheckpointListArgs) -> Outcome {
        let names = self.checkpoint_names().map_err(|e| self.fail(call, e, None))?;
        let mut checkpoints = Vec::with_capacity(names.len());
        for name in names {
            let Some(bytes) =
                self.engine().workspace().state_read(&rel_of(&name)).map_err(|e| self.fail(call, e, None))?
            else {
                continue;
            };
            let mut entry = json!({
                "name": name, "bytes": bytes.len(), "checkpoint_path": path_of(&name), "sha256": Sha256::of(&bytes),
            });
            match parse_document(&bytes) {
                Ok(doc) => {
                    entry["format"] = doc.get("format").cloned().unwrap_or(json!("json"));
                    entry["ttl"] = doc.get("ttl").cloned().unwrap_or(json!("session"));
                    entry["created_at"] = doc.get("created_at").cloned().unwrap_or(Value::Null);
                    entry["updated_at"] = doc.get("updated_at").cloned().unwrap_or(Value::Null);
                }
                Err(detail) => {
                    entry["corrupt"] = json!(true);
                    entry["detail"] = json!(detail);
                }
            }
            checkpoints.push(entry);
        }
        Ok(ok(json!({"count": checkpoints.len(), "checkpoints": checkpoints})))
    }

    pub fn checkpoint_cleanup(&self, call: &Call, args: CheckpointCleanupArgs) -> Outcome {
        let names = self.checkpoint_names().map_err(|e| self.fail(call, e, None))?;
        let now = SystemTime::now();
        let (mut removed, mut corrupt, mut kept) = (Vec::new(), Vec::new(), 0u64);
        for name in names {
            let rel = rel_of(&name);
            let Some(bytes) = self.engine().workspace().state_read(&rel).map_err(|e| self.fail(call, e, None))? else {
                continue;
            };
            let sha = Sha256::of(&bytes);
            let fate = match parse_document(&bytes) {
                Ok(doc) => fate(&doc, args.include_session, now),
                Err(_) if args.remove_corrupt => Fate::Remove { ttl: "unknown".into(), reason: "corrupt" },
                Err(detail) => {
                    corrupt.push(json!({"name": name, "reason": "corrupt", "detail": detail, "sha256": sha}));
                    Fate::Keep
                }
            };
            let Fate::Remove { ttl, reason } = fate else {
                kept += 1;
                continue;
            };
            match self.engine().state().remove_if(&rel, sha, &call.actor) {
                Ok(true) => removed.push(json!({"name": name, "ttl": ttl, "reason": reason, "sha256": sha})),
                Ok(false) => {}
                // Saved again since it was judged: it is not the checkpoint that expired.
                Err(e) if matches!(e.reason(), Reason::PreconditionFailed { .. }) => kept += 1,
                Err(e) => return Err(self.fail(call, e, None)),
            }
        }
        Ok(ok(json!({"removed": removed, "kept": kept, "corrupt": corrupt})))
    }

    /// `[{name, sha256, bytes, path}]` of every checkpoint file (handoffs carry them).
    pub(super) fn checkpoint_refs(&self) -> Result<Vec<Value>> {
        let mut refs = Vec::new();
        for name in self.checkpoint_names()? {
            if let Some(bytes) = self.engine().workspace().state_read(&rel_of(&name))? {
                refs.push(
                    json!({"name": name, "sha256": Sha256::of(&bytes), "bytes": bytes.len(), "path": path_of(&name)}),
                );
            }
        }
        Ok(refs)
    }

    /// Names of the `*.json` files in the checkpoint directory, sorted.
    fn checkpoint_names(&self) -> Result<Vec<String>> {
        let files = self.engine().workspace().state_list(CHECKPOINT_DIR)?;
        Ok(files
            .into_iter()
            .filter(|(_, kind)| *kind == FileKind::File)
            .filter_map(|(file, _)| file.strip_suffix(".json").filter(|name| !name.is_empty()).map(String::from))
            .collect())
    }

    /// The digest the journal last recorded for `path` (`None`: no row, or deleted).
    fn recorded_sha(&self, path: &str) -> Result<Option<Sha256>> {
        let mut recorded = None;
        self.engine().workspace().read_journal(|entry| {
            if entry.row.path == path && entry.row.op().states_content() {
                recorded = entry.row.sha256;
            }
        })?;
        Ok(recorded)
    }

    fn check_name(&self, call: &Call, name: &str) -> std::result::Result<(), Failure> {
        if is_valid_name(name) {
            return Ok(());
        }
        Err(self
            .reject(
                call,
                ErrorKind::PolicyViolation,
                "name_must_match_^[A-Za-z0-9_-]{1,64}$",
                "a checkpoint name is 1 to 64 of A-Z a-z 0-9 _ -",
                json!({"name": name}),
                None,
            )
            .hint("encoding"))
    }
}

/// The reference's cleanup rules for one readable checkpoint.
fn fate(doc: &Map<String, Value>, include_session: bool, now: SystemTime) -> Fate {
    let ttl = match doc.get("ttl") {
        None => "session",
        Some(Value::String(ttl)) => ttl.as_str(),
        // Not a ttl rwfs understands: keep what it cannot judge.
        Some(_) => return Fate::Keep,
    };
    let remove = |reason| Fate::Remove { ttl: ttl.to_string(), reason };
    match Ttl::parse(ttl) {
        Some(Ttl::Session) if include_session => remove("session_cleanup"),
        Some(Ttl::After(seconds)) if seconds > 0 => {
            let updated = doc.get("updated_at").and_then(Value::as_str).and_then(parse_time);
            let age = updated.and_then(|at| now.duration_since(at).ok());
            match age {
                Some(age) if age.as_secs_f64() > seconds as f64 => remove("expired"),
                _ => Fate::Keep,
            }
        }
        _ => Fate::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_follows_the_reference_pattern() {
        assert_eq!(Ttl::parse("session"), Some(Ttl::Session));
        assert_eq!(Ttl::parse("permanent"), Some(Ttl::Permanent));
        assert_eq!(Ttl::parse("P"), Some(Ttl::After(0)));
        assert_eq!(Ttl::parse("PT"), Some(Ttl::After(0)));
        assert_eq!(Ttl::parse("PT1H"), Some(Ttl::After(3600)));
        assert_eq!(Ttl::parse("P365D"), Some(Ttl::After(365 * 86_400)));
        assert_eq!(Ttl::parse("P1M"), Some(Ttl::After(30 * 86_400)));
        assert_eq!(Ttl::parse("PT1M"), Some(Ttl::After(60)));
        assert_eq!(Ttl::parse("P1Y2M3DT4H5M6S"), Some(Ttl::After(((365 + 60 + 3) * 24 + 4) * 3600 + 5 * 60 + 6)));
        assert_eq!(Ttl::parse("P1YT"), Some(Ttl::After(365 * 86_400)));
        assert_eq!(Ttl::parse(&format!("P{}Y", "9".repeat(40))), Some(Ttl::After(u64::MAX)));
        for bad in [
            "", "forever", "1H", "P1W", "PT1.5H", "P1H", "PT1D", "P1D1Y", "P1Y1Y", "PYT", "pt1h", "P T1H", "P1",
            "PT1H2",
        ] {
            assert_eq!(Ttl::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_document_is_indented_sorted_and_ends_with_a_newline() {
        let text = document("n", &json!({"b": 1, "a": ["€", {"z": 0, "y": 1}]}), Format::Json, "session", "c", "u");
        assert_eq!(
            text,
            "{\n  \"created_at\": \"c\",\n  \"data\": {\n    \"a\": [\n      \"€\",\n      {\n        \"y\": 1,\n        \"z\": 0\n      }\n    ],\n    \"b\": 1\n  },\n  \"format\": \"json\",\n  \"name\": \"n\",\n  \"ttl\": \"session\",\n  \"updated_at\": \"u\"\n}\n"
        );
    }

    #[test]
    fn cleanup_rules_match_the_reference() {
        let now = humantime::parse_rfc3339("2026-04-16T12:00:00Z").unwrap();
        let doc = |ttl: Value, updated: &str| json!({"ttl": ttl, "updated_at": updated}).as_object().unwrap().clone();
        let removed = |f: Fate| matches!(f, Fate::Remove { .. });
        assert!(removed(fate(&doc(json!("session"), ""), true, now)));
        assert!(!removed(fate(&doc(json!("session"), ""), false, now)));
        assert!(removed(fate(&Map::new(), true, now)), "no ttl is session");
        assert!(!removed(fate(&doc(json!("permanent"), "2000-01-01T00:00:00Z"), true, now)));
        assert!(removed(fate(&doc(json!("PT1H"), "2026-04-16T10:59:59Z"), true, now)));
        assert!(!removed(fate(&doc(json!("PT1H"), "2026-04-16T11:00:00Z"), true, now)), "exactly the ttl is kept");
        assert!(!removed(fate(&doc(json!("P365D"), "2026-01-01T00:00:00Z"), true, now)));
        assert!(!removed(fate(&doc(json!("P"), "2000-01-01T00:00:00Z"), true, now)));
        assert!(!removed(fate(&doc(json!("PT1H"), "last tuesday"), true, now)));
        assert!(!removed(fate(&doc(json!("weekly"), "2000-01-01T00:00:00Z"), true, now)));
        assert!(!removed(fate(&doc(json!(3600), "2000-01-01T00:00:00Z"), true, now)));
    }
}
