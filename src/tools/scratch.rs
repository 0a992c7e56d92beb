//! L4 scratchpad: `rw_scratch_put`, `rw_scratch_ref`, `rw_scratch_get`.
//!
//! Raw material that must exist but does not belong in the tree (credentials, binaries, PII)
//! is kept content-addressed in `.resilient_write/scratch/<sha256>.bin`; every put appends a
//! row `{bytes, content_type, created_at, encoding, label, notes, sha256}` to
//! `scratch/index.jsonl`, so labels are aliases and a second put of the same bytes is free
//! (docs/architecture.md, The reference).
//!
//! Invariants:
//! - a blob is created exclusively, mode 0600, durably and journaled (the reference left
//!   secrets world-readable, bug 6); its name is the sha256 of its bytes, and a blob found not
//!   to match its name is rewritten by the next put of those bytes and refused by gets
//!   (`write_corruption`, `hash_drift_on_read`), never returned;
//! - the index only grows by whole lines (the engine closes a torn last line before the next
//!   one) and its readers skip lines that do not parse, so a crash mid-append never breaks
//!   `rw_scratch_ref`, `rw_scratch_get` or the next put (reference bug 3);
//! - blobs are not gated: holding secrets out of the tree is the scratchpad's purpose;
//! - `rw_scratch_get` is refused outright when the workspace runs the scratchpad write-only
//!   (`RW_SCRATCH_DISABLE_GET`).

use std::io::BufRead;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::durable::STATE_DIR;
use crate::error::{ErrorKind, Reason};
use crate::sha::Sha256;

use super::{Call, Failure, Outcome, Tools, now_utc, ok};

const INDEX: &str = "scratch/index.jsonl";
const DISABLE_GET_ENV: &str = "RW_SCRATCH_DISABLE_GET";
const ENCODINGS: [&str; 2] = ["utf-8", "base64"];

/// Lines of the state directory's own `.gitignore` that name every entry in it: ignored, or
/// (negated) not.
const EVERYTHING: [(&str, bool); 6] =
    [("*", true), ("/*", true), ("**", true), ("!*", false), ("!/*", false), ("!**", false)];

/// `.gitignore` lines the reference accepts as covering the state directory.
const GITIGNORE_FORMS: [&str; 6] = [
    ".resilient_write",
    ".resilient_write/",
    "/.resilient_write",
    "/.resilient_write/",
    "**/.resilient_write",
    "**/.resilient_write/",
];

/// How `content` is encoded (the schema's enum; unknown values are refused with the
/// reference's `unsupported_encoding`).
#[derive(Debug, Deserialize, JsonSchema)]
pub enum Encoding {
    #[serde(rename = "utf-8")]
    Utf8,
    #[serde(rename = "base64")]
    Base64,
}

fn utf8() -> String {
    "utf-8".to_string()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScratchPutArgs {
    /// The material to keep out of the tree: text, or base64 when `encoding` is `base64`.
    pub content: String,
    /// A name to find it again with `rw_scratch_ref` (several puts may share one).
    #[serde(default)]
    pub label: Option<String>,
    /// Free-form MIME type, kept in the index.
    #[serde(default)]
    pub content_type: Option<String>,
    /// Free-form notes, kept in the index.
    #[serde(default)]
    pub notes: Option<String>,
    /// `utf-8` (default) or `base64` (binary material).
    #[serde(default = "utf8")]
    #[schemars(with = "Encoding")]
    pub encoding: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScratchRefArgs {
    /// The sha256 a put returned (64 lowercase hex digits).
    #[serde(default)]
    pub sha256: Option<String>,
    /// The label given to a put. With `sha256` too, both must match.
    #[serde(default)]
    pub label: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScratchGetArgs {
    /// The sha256 a put returned (64 lowercase hex digits).
    pub sha256: String,
    /// `utf-8` (default) or `base64` (for material that is not UTF-8 text).
    #[serde(default = "utf8")]
    #[schemars(with = "Encoding")]
    pub encoding: String,
}

fn blob(sha: &str) -> String {
    format!("{}/{sha}.bin", crate::durable::layout::SCRATCH)
}

impl Tools {
    pub fn scratch_put(&self, call: &Call, args: ScratchPutArgs) -> Outcome {
        let payload = match args.encoding.as_str() {
            "utf-8" => args.content.into_bytes(),
            "base64" => BASE64.decode(args.content.as_bytes()).map_err(|e| {
                self.invalid(call, "bad_base64", format!("content is not valid base64: {e}"), json!({}))
            })?,
            other => return Err(unsupported_encoding(self, call, other)),
        };
        let sha = Sha256::of(&payload);
        let rel = blob(&sha.to_hex());
        let engine = self.engine();
        let journal_id = match engine.state().write(&rel, &payload, true, true, &call.actor) {
            Ok(committed) => Some(committed.journal_id),
            Err(e) => match *e.reason() {
                Reason::AlreadyExists { existing } if existing == sha => None,
                // The blob does not hold what its name says: put the right bytes back.
                Reason::AlreadyExists { .. } => Some(
                    engine
                        .state()
                        .write(&rel, &payload, false, true, &call.actor)
                        .map_err(|e| self.fail(call, e, None))?
                        .journal_id,
                ),
                _ => return Err(self.fail(call, e, None)),
            },
        };
        let row = json!({
            "bytes": payload.len(),
            "content_type": args.content_type,
            "created_at": now_utc(),
            "encoding": args.encoding,
            "label": args.label,
            "notes": args.notes,
            "sha256": sha,
        });
        let line = serde_json::to_vec(&row).expect("index row serializes");
        engine.state().append_line(INDEX, &line).map_err(|e| self.fail(call, e, None))?;
        Ok(ok(json!({
            "sha256": sha,
            "scratch_path": format!("{STATE_DIR}/{rel}"),
            "bytes": payload.len(),
            "deduped": journal_id.is_none(),
            "journal_id": journal_id,
            "warnings": gitignore_warnings(self),
        })))
    }

    pub fn scratch_ref(&self, call: &Call, args: ScratchRefArgs) -> Outcome {
        if args.sha256.is_none() && args.label.is_none() {
            return Err(self.invalid(call, "must_provide_sha256_or_label", "give sha256, label or both", json!({})));
        }
        if let Some(sha) = &args.sha256 {
            sha_arg(self, call, sha)?;
        }
        let wanted = |row: &Map<String, Value>| {
            args.sha256.as_deref().is_none_or(|sha| row.get("sha256").and_then(Value::as_str) == Some(sha))
                && args.label.as_deref().is_none_or(|label| row.get("label").and_then(Value::as_str) == Some(label))
        };
        let mut last = None;
        let mut count = 0u64;
        index_rows(self, call, |row| {
            if wanted(&row) {
                count += 1;
                last = Some(row);
            }
        })?;
        let Some(entry) = last else {
            return Err(self.reject(
                call,
                ErrorKind::StalePrecondition,
                "not_found",
                "no scratch entry matches",
                json!({"sha256": args.sha256, "label": args.label}),
                None,
            ));
        };
        let sha = entry.get("sha256").and_then(Value::as_str).unwrap_or_default().to_string();
        let rel = blob(&sha);
        let bin_exists = match self.engine().workspace().state_open(&rel) {
            Ok(_) => true,
            Err(e) if *e.reason() == Reason::NotFound => false,
            Err(e) => return Err(self.fail(call, e, None)),
        };
        Ok(ok(json!({
            "entry": entry,
            "scratch_path": format!("{STATE_DIR}/{rel}"),
            "bin_exists": bin_exists,
            "alias_count": count,
        })))
    }

    pub fn scratch_get(&self, call: &Call, args: ScratchGetArgs) -> Outcome {
        if self.settings().scratch_get_disabled {
            return Err(self.reject(
                call,
                ErrorKind::PolicyViolation,
                "scratch_get_disabled",
                "this workspace keeps the scratchpad write-only",
                json!({"env": DISABLE_GET_ENV}),
                None,
            ));
        }
        let sha = sha_arg(self, call, &args.sha256)?;
        if !ENCODINGS.contains(&args.encoding.as_str()) {
            return Err(unsupported_encoding(self, call, &args.encoding));
        }
        let rel = blob(&args.sha256);
        let Some(payload) = self.engine().workspace().state_read(&rel).map_err(|e| self.fail(call, e, None))? else {
            return Err(self.reject(
                call,
                ErrorKind::StalePrecondition,
                "not_found",
                "no scratch blob has this sha256",
                json!({"sha256": args.sha256}),
                None,
            ));
        };
        let actual = Sha256::of(&payload);
        if actual != sha {
            return Err(self
                .reject(
                    call,
                    ErrorKind::WriteCorruption,
                    "hash_drift_on_read",
                    "the blob's bytes no longer match its sha256",
                    json!({"sha256": args.sha256, "actual_sha256": actual}),
                    None,
                )
                .action("abort"));
        }
        let bytes = payload.len();
        let content = if args.encoding == "base64" {
            BASE64.encode(&payload)
        } else {
            String::from_utf8(payload).map_err(|e| {
                self.invalid(
                    call,
                    "not_valid_utf8",
                    format!("the blob is not UTF-8 text ({e}); ask for encoding base64"),
                    json!({"hint": "retry_with_encoding_base64"}),
                )
                .action("retry_later")
            })?
        };
        let mut metadata = Map::new();
        index_rows(self, call, |row| {
            if row.get("sha256").and_then(Value::as_str) == Some(args.sha256.as_str()) {
                metadata = row;
            }
        })?;
        Ok(ok(json!({
            "sha256": sha,
            "content": content,
            "encoding": args.encoding,
            "bytes": bytes,
            "content_type": metadata.get("content_type").cloned().unwrap_or(Value::Null),
            "label": metadata.get("label").cloned().unwrap_or(Value::Null),
        })))
    }
}

/// The sha256 argument, which must be 64 lowercase hex digits.
fn sha_arg(tools: &Tools, call: &Call, sha: &str) -> Result<Sha256, Failure> {
    sha.parse().map_err(|_| {
        tools.invalid(
            call,
            "not_a_lowercase_sha256_hex",
            "sha256 must be 64 lowercase hex digits",
            json!({"sha256": sha}),
        )
    })
}

fn unsupported_encoding(tools: &Tools, call: &Call, encoding: &str) -> Failure {
    tools.invalid(
        call,
        "unsupported_encoding",
        format!("encoding must be one of {ENCODINGS:?}"),
        json!({"encoding": encoding, "valid": ENCODINGS}),
    )
}

/// Every index row that parses as a JSON object, oldest first. Lines that do not (a line
/// torn by a crash) are skipped.
fn index_rows(tools: &Tools, call: &Call, mut each: impl FnMut(Map<String, Value>)) -> Result<(), Failure> {
    let opened = match tools.engine().workspace().state_open(INDEX) {
        Ok(opened) => opened,
        Err(e) if *e.reason() == Reason::NotFound => return Ok(()),
        Err(e) => return Err(tools.fail(call, e, None)),
    };
    let mut reader = std::io::BufReader::new(opened.file);
    let mut line = Vec::new();
    let mut skipped = 0u64;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(|e| {
            tools.fail(call, crate::error::Error::io("read scratch index", e).at(format!("{STATE_DIR}/{INDEX}")), None)
        })?;
        if n == 0 {
            break;
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(Value::Object(row)) => each(row),
            _ => skipped += 1,
        }
    }
    if skipped > 0 {
        tracing::warn!(skipped, "scratch index: skipped lines that do not parse (torn by a crash?)");
    }
    Ok(())
}

/// The reference's warning when no `.gitignore` covers the state directory: the workspace's
/// does not list it, and its own (rwfs writes one holding `*` when it first opens it) does not
/// ignore everything in it.
fn gitignore_warnings(tools: &Tools) -> Vec<Value> {
    let listed = match tools.engine().workspace().read_file(".gitignore") {
        Ok((_, bytes, _)) => {
            String::from_utf8_lossy(&bytes).lines().map(str::trim).any(|l| GITIGNORE_FORMS.contains(&l))
        }
        Err(_) => false,
    };
    let ignores_itself =
        tools.engine().workspace().state_read(crate::durable::layout::GITIGNORE).ok().flatten().is_some_and(|b| {
            // The last pattern naming every entry decides, as in git.
            let text = String::from_utf8_lossy(&b).into_owned();
            text.lines()
                .rev()
                .map(str::trim)
                .find_map(|l| EVERYTHING.iter().find(|(p, _)| *p == l))
                .is_some_and(|(_, on)| *on)
        });
    if listed || ignores_itself {
        return Vec::new();
    }
    vec![json!({
        "reason": "state_dir_not_gitignored",
        "hint": "add '.resilient_write/' to .gitignore to keep scratched material out of git",
    })]
}
