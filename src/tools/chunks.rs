//! L2 chunk sessions: `rw_chunk_write`, `rw_chunk_append`, `rw_chunk_compose`,
//! `rw_chunk_reset`, `rw_chunk_status`, `rw_chunk_preview`.
//!
//! A session is `.resilient_write/chunks/<session>/`: parts `part-NNN.txt` (001..999) and a
//! `manifest.json` (`{created_at, session, total_expected, updated_at}`, pretty, sorted keys),
//! laid out as the reference lays them out (docs/architecture.md, The reference). Compose checks that the
//! parts are exactly 1..N (and N = `total_expected` when the manifest has one), joins them and
//! writes the result through the engine like `rw_safe_write`.
//!
//! Invariants:
//! - the part files are the truth; the manifest is a cache of `total_expected` and times;
//! - every part, manifest and removal goes through the engine's state API: durable, journaled,
//!   and each removed file stays restorable from `objects/`. The manifest is derived state (the
//!   paper keeps it out of the journal): its rows are durable like any, but `rw_journal_tail`
//!   hides them by default and `rw_analytics` does not count them;
//! - `rw_chunk_append` never overwrites a part: it creates the next index exclusively and, when
//!   another append took that index first, looks again and takes the next one (reference bug 9
//!   lost 14 of 16 concurrent appends);
//! - the manifest's read-modify-write happens under the engine's state lock of the manifest,
//!   so concurrent chunk writes never lose a `total_expected` update;
//! - the composed output is an ordinary gated workspace write in `overwrite` mode (create or
//!   replace decided by the engine under its path lock, not by an `exists()` check first: bug
//!   10), so a composed secret is refused with the gate's envelope, and an output inside
//!   `.resilient_write/` (its own session directory included: bug 29) is refused like any
//!   write there;
//! - compose reads each part once and builds the output in one buffer: linear in the session.
//!
//! Chunks themselves are not gated (as in the reference, they are drafts); what the policy
//! judges is the file they become.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::durable::layout::CHUNKS;
use crate::durable::{FileKind, STATE_DIR};
use crate::engine::{WriteMode, WriteRequest};
use crate::error::{ErrorKind, Reason};
use crate::sha::Sha256;

use super::{Call, Failure, Outcome, Tools, now_utc, ok};

pub(crate) const MANIFEST: &str = "manifest.json";
const MAX_INDEX: i64 = 999;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChunkWriteArgs {
    /// Session name: 1-64 of `A-Z a-z 0-9 _ -`.
    pub session: String,
    /// Position of this chunk, 1..999. Writing an index again replaces that chunk (retries are
    /// safe).
    #[schemars(range(min = 1, max = 999))]
    pub index: i64,
    /// The chunk's text.
    pub content: String,
    /// How many chunks the session will have (1..999); compose refuses until exactly that many
    /// are present. The latest value given wins.
    #[serde(default)]
    #[schemars(range(min = 1, max = 999))]
    pub total_expected: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChunkAppendArgs {
    /// Session name: 1-64 of `A-Z a-z 0-9 _ -`.
    pub session: String,
    /// The chunk's text; it becomes the chunk after the highest present index (1 for a new
    /// session).
    pub content: String,
    /// How many chunks the session will have (1..999). The latest value given wins.
    #[serde(default)]
    #[schemars(range(min = 1, max = 999))]
    pub total_expected: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChunkComposeArgs {
    /// Session name.
    pub session: String,
    /// Workspace-relative path of the file to create or replace with the joined chunks.
    pub output_path: String,
    /// Text put between consecutive chunks (default none).
    #[serde(default)]
    pub separator: String,
    /// Remove the session after a successful compose (its files stay restorable).
    #[serde(default)]
    pub cleanup: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChunkSessionArgs {
    /// Session name.
    pub session: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChunkPreviewArgs {
    /// Session name.
    pub session: String,
    /// Text put between consecutive chunks (default none).
    #[serde(default)]
    pub separator: String,
}

/// A validated session name and the state names derived from it.
struct Session<'a>(&'a str);

impl Session<'_> {
    fn dir(&self) -> String {
        format!("{CHUNKS}/{}", self.0)
    }

    fn part(&self, index: i64) -> String {
        format!("{CHUNKS}/{}/part-{index:03}.txt", self.0)
    }

    fn manifest(&self) -> String {
        format!("{CHUNKS}/{}/{MANIFEST}", self.0)
    }
}

/// The index of a part file name `part-NNN.txt`.
fn part_index(name: &str) -> Option<i64> {
    let digits = name.strip_prefix("part-")?.strip_suffix(".txt")?;
    if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A session's chunks joined, with what the reference reports about them.
struct Joined {
    content: Vec<u8>,
    hashes: Vec<Sha256>,
}

impl Tools {
    pub fn chunk_write(&self, call: &Call, args: ChunkWriteArgs) -> Outcome {
        let chunks = Chunks { tools: self, call };
        let session = chunks.session(&args.session)?;
        chunks.check_index(args.index, args.total_expected)?;
        chunks.manifest(&session)?;
        let committed = self
            .engine()
            .state()
            .write(&session.part(args.index), args.content.as_bytes(), false, false, &call.actor)
            .map_err(|e| self.fail(call, e, None))?;
        chunks.record(&session, args.total_expected)?;
        Ok(chunk_written(&session, args.index, &committed))
    }

    pub fn chunk_append(&self, call: &Call, args: ChunkAppendArgs) -> Outcome {
        let chunks = Chunks { tools: self, call };
        let session = chunks.session(&args.session)?;
        chunks.manifest(&session)?;
        let mut index = 0;
        let committed = loop {
            let highest = chunks.parts(&session)?.last().map_or(0, |&(i, _)| i);
            // Another append may have taken `index` without it being listed yet.
            index = (highest + 1).max(index + 1);
            chunks.check_index(index, args.total_expected)?;
            match self.engine().state().write(&session.part(index), args.content.as_bytes(), true, false, &call.actor) {
                Ok(committed) => break committed,
                Err(e) if matches!(e.reason(), Reason::AlreadyExists { .. }) => continue,
                Err(e) => return Err(self.fail(call, e, None)),
            }
        };
        chunks.record(&session, args.total_expected)?;
        Ok(chunk_written(&session, index, &committed))
    }

    pub fn chunk_compose(&self, call: &Call, args: ChunkComposeArgs) -> Outcome {
        let chunks = Chunks { tools: self, call };
        let session = chunks.session(&args.session)?;
        let joined = chunks.join(&session, &args.separator)?;
        let path = args.output_path.as_str();
        let request = WriteRequest {
            path,
            content: &joined.content,
            mode: WriteMode::Overwrite,
            expect: None,
            actor: &call.actor,
        };
        let attempt = Some((path, joined.content.as_slice()));
        let committed = self.engine().safe_write(&request).map_err(|e| self.fail(call, e, attempt))?;
        // The output is written: a failed cleanup is reported, not turned into a failure.
        let cleaned_up = args.cleanup && chunks.reset(&session).is_ok();
        Ok(ok(json!({
            "session": session.0,
            "output_path": committed.path.as_str(),
            "sha256": committed.sha256,
            "bytes": committed.bytes,
            "chunk_count": joined.hashes.len(),
            "chunk_hashes": joined.hashes,
            "journal_id": committed.journal_id,
            "cleaned_up": cleaned_up,
            "mode_applied": if committed.prev_sha256.is_some() { "overwrite" } else { "create" },
            "prev_sha256": committed.prev_sha256,
        })))
    }

    pub fn chunk_reset(&self, call: &Call, args: ChunkSessionArgs) -> Outcome {
        let chunks = Chunks { tools: self, call };
        let session = chunks.session(&args.session)?;
        if !chunks.session_exists(&session)? {
            return Ok(ok(json!({"session": session.0, "removed": 0, "existed": false})));
        }
        let removed = chunks.reset(&session)?;
        Ok(ok(json!({"session": session.0, "removed": removed, "existed": true})))
    }

    pub fn chunk_status(&self, call: &Call, args: ChunkSessionArgs) -> Outcome {
        let chunks = Chunks { tools: self, call };
        let session = chunks.session(&args.session)?;
        if !chunks.session_exists(&session)? {
            return Ok(ok(json!({"session": session.0, "exists": false})));
        }
        let manifest = chunks.manifest(&session)?.unwrap_or_default();
        let present: Vec<i64> = chunks.parts(&session)?.into_iter().map(|(i, _)| i).collect();
        Ok(ok(json!({
            "session": session.0,
            "exists": true,
            "total_expected": manifest.get("total_expected").cloned().unwrap_or(Value::Null),
            "present_indices": present,
            "chunk_dir": format!("{STATE_DIR}/{}", session.dir()),
        })))
    }

    pub fn chunk_preview(&self, call: &Call, args: ChunkPreviewArgs) -> Outcome {
        let chunks = Chunks { tools: self, call };
        let session = chunks.session(&args.session)?;
        let joined = chunks.join(&session, &args.separator)?;
        let total_bytes = joined.content.len();
        // `join` checked it is UTF-8.
        let content = String::from_utf8(joined.content).unwrap_or_default();
        Ok(ok(json!({
            "session": session.0,
            "content": content,
            "chunk_count": joined.hashes.len(),
            "chunk_hashes": joined.hashes,
            "total_bytes": total_bytes,
            "preview": true,
        })))
    }
}

/// One call's view of the chunk sessions.
struct Chunks<'a> {
    tools: &'a Tools,
    call: &'a Call,
}

impl Chunks<'_> {
    fn session<'a>(&self, name: &'a str) -> Result<Session<'a>, Failure> {
        if super::is_valid_name(name) {
            return Ok(Session(name));
        }
        Err(self.tools.invalid(
            self.call,
            "session_must_match_^[A-Za-z0-9_-]{1,64}$",
            "bad session name",
            json!({"session": name}),
        ))
    }

    /// The reference's index checks, in its order.
    fn check_index(&self, index: i64, total_expected: Option<i64>) -> Result<(), Failure> {
        if !(1..=MAX_INDEX).contains(&index) {
            return Err(self.tools.invalid(
                self.call,
                "index_must_be_int_in_1..999",
                "index must be an integer in 1..999",
                json!({"index": index}),
            ));
        }
        let Some(total) = total_expected else { return Ok(()) };
        if !(1..=MAX_INDEX).contains(&total) {
            return Err(self.tools.invalid(
                self.call,
                "total_expected_must_be_int_in_1..999",
                "total_expected must be an integer in 1..999",
                json!({"total_expected": total}),
            ));
        }
        if index > total {
            return Err(self.tools.invalid(
                self.call,
                "index_exceeds_total_expected",
                "index is larger than total_expected",
                json!({"index": index, "total_expected": total}),
            ));
        }
        Ok(())
    }

    fn session_exists(&self, session: &Session<'_>) -> Result<bool, Failure> {
        let sessions =
            self.tools.engine().workspace().state_list(CHUNKS).map_err(|e| self.tools.fail(self.call, e, None))?;
        Ok(sessions.iter().any(|(name, kind)| name == session.0 && *kind == FileKind::Dir))
    }

    /// The session's parts, `(index, state name)` in index order.
    fn parts(&self, session: &Session<'_>) -> Result<Vec<(i64, String)>, Failure> {
        let names = self
            .tools
            .engine()
            .workspace()
            .state_list(&session.dir())
            .map_err(|e| self.tools.fail(self.call, e, None))?;
        // Sorted by name, and three-digit names sort by index.
        Ok(names
            .into_iter()
            .filter(|(_, kind)| *kind == FileKind::File)
            .filter_map(|(name, _)| part_index(&name).map(|i| (i, format!("{}/{name}", session.dir()))))
            .collect())
    }

    /// The manifest as a map; `None` when there is none.
    fn manifest(&self, session: &Session<'_>) -> Result<Option<Map<String, Value>>, Failure> {
        let rel = session.manifest();
        let Some(bytes) =
            self.tools.engine().workspace().state_read(&rel).map_err(|e| self.tools.fail(self.call, e, None))?
        else {
            return Ok(None);
        };
        let corrupt = |reason: &str, message: String| {
            self.tools
                .reject(
                    self.call,
                    ErrorKind::WriteCorruption,
                    reason,
                    message,
                    json!({"session": session.0, "manifest": format!("{STATE_DIR}/{rel}")}),
                    None,
                )
                .hint("encoding")
                .action("abort")
        };
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(map)) => Ok(Some(map)),
            Ok(_) => Err(corrupt("not_mapping", "the manifest is not a JSON object".into())),
            Err(e) => Err(corrupt("bad_manifest", format!("the manifest is not JSON: {e}"))),
        }
    }

    /// Update the manifest after a chunk write: `created_at` kept, the latest `total_expected`
    /// given wins, `updated_at` now.
    fn record(&self, session: &Session<'_>, total_expected: Option<i64>) -> Result<(), Failure> {
        let rel = session.manifest();
        let _lock = self.tools.engine().state().lock(&rel).map_err(|e| self.tools.fail(self.call, e, None))?;
        let existing = self.manifest(session)?.unwrap_or_default();
        let now = now_utc();
        let manifest = json!({
            "session": session.0,
            "created_at": existing.get("created_at").cloned().unwrap_or_else(|| json!(now)),
            "updated_at": now,
            "total_expected": total_expected.map_or_else(
                || existing.get("total_expected").cloned().unwrap_or(Value::Null),
                |t| json!(t),
            ),
        });
        let mut text = serde_json::to_string_pretty(&manifest).expect("manifest serializes");
        text.push('\n');
        self.tools
            .engine()
            .state()
            .write(&rel, text.as_bytes(), false, false, &self.call.actor)
            .map_err(|e| self.tools.fail(self.call, e, None))?;
        Ok(())
    }

    /// The session's chunks, checked (exactly 1..N, N = `total_expected` if set) and joined.
    fn join(&self, session: &Session<'_>, separator: &str) -> Result<Joined, Failure> {
        let stale = |reason: &str, message: &str, context: Value| {
            let mut context = context;
            context["session"] = json!(session.0);
            self.tools.reject(self.call, ErrorKind::StalePrecondition, reason, message, context, None)
        };
        if !self.session_exists(session)? {
            return Err(stale("session_not_found", "no such chunk session", json!({})));
        }
        let parts = self.parts(session)?;
        if parts.is_empty() {
            return Err(stale("no_chunks_found", "the session has no chunks", json!({})));
        }
        let have: Vec<i64> = parts.iter().map(|&(i, _)| i).collect();
        let n = have.len() as i64;
        if have.iter().zip(1..).any(|(&i, want)| i != want) {
            let missing: Vec<i64> = (1..=n).filter(|i| have.binary_search(i).is_err()).collect();
            let unexpected: Vec<i64> = have.iter().copied().filter(|&i| !(1..=n).contains(&i)).collect();
            return Err(stale(
                "non_contiguous_chunks",
                "the chunks are not exactly 1..N",
                json!({"have": have, "missing": missing, "unexpected": unexpected}),
            ));
        }
        let manifest = self.manifest(session)?.unwrap_or_default();
        if let Some(total) = manifest.get("total_expected").and_then(Value::as_i64)
            && total != n
        {
            return Err(stale(
                "chunk_count_mismatch",
                "the number of chunks differs from total_expected",
                json!({"have": n, "total_expected": total}),
            ));
        }
        let mut content = Vec::new();
        let mut hashes = Vec::with_capacity(parts.len());
        for (k, (_, rel)) in parts.iter().enumerate() {
            let bytes = self
                .tools
                .engine()
                .workspace()
                .state_read(rel)
                .map_err(|e| self.tools.fail(self.call, e, None))?
                .ok_or_else(|| {
                    stale("non_contiguous_chunks", "a chunk vanished while composing", json!({"have": have}))
                })?;
            if k > 0 {
                content.extend_from_slice(separator.as_bytes());
            }
            content.extend_from_slice(&bytes);
            hashes.push(Sha256::of(&bytes));
        }
        if let Err(e) = std::str::from_utf8(&content) {
            return Err(self
                .tools
                .reject(
                    self.call,
                    ErrorKind::WriteCorruption,
                    "composed_not_utf8",
                    format!("the joined chunks are not UTF-8: {e}"),
                    json!({"session": session.0}),
                    None,
                )
                .hint("encoding")
                .action("abort"));
        }
        Ok(Joined { content, hashes })
    }

    /// Remove the session, under its manifest's lock: how many files were removed.
    fn reset(&self, session: &Session<'_>) -> Result<u64, Failure> {
        let _lock =
            self.tools.engine().state().lock(&session.manifest()).map_err(|e| self.tools.fail(self.call, e, None))?;
        self.wipe(&session.dir())
    }

    /// Remove the state directory `dir` and everything in it (journaled; contents stay
    /// restorable): how many files were removed.
    fn wipe(&self, dir: &str) -> Result<u64, Failure> {
        let fail = |e| self.tools.fail(self.call, e, None);
        let mut removed = 0;
        for (name, kind) in self.tools.engine().workspace().state_list(dir).map_err(fail)? {
            let rel = format!("{dir}/{name}");
            if kind == FileKind::Dir {
                removed += self.wipe(&rel)?;
            } else if self.tools.engine().state().remove(&rel, &self.call.actor).map_err(fail)? {
                removed += 1;
            }
        }
        self.tools.engine().state().remove_dir(dir).map_err(fail)?;
        Ok(removed)
    }
}

fn chunk_written(session: &Session<'_>, index: i64, c: &crate::engine::Committed) -> Value {
    ok(json!({
        "session": session.0,
        "index": index,
        "chunk_path": c.path.as_str(),
        "sha256": c.sha256,
        "bytes": c.bytes,
        "journal_id": c.journal_id,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_three_digit_part_names_are_parts() {
        assert_eq!(part_index("part-001.txt"), Some(1));
        assert_eq!(part_index("part-999.txt"), Some(999));
        assert_eq!(part_index("part-000.txt"), Some(0));
        for other in ["part-1.txt", "part-0001.txt", "part-001.txt.tmp", "manifest.json", "part-+01.txt"] {
            assert_eq!(part_index(other), None, "{other}");
        }
    }
}
