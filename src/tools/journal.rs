//! The journal and history tools: `rw_journal_tail`, `rw_analytics` (the reference's),
//! and rwfs's `rw_history`, `rw_restore`, `rw_rejections`, `rw_approval_status`.
//!
//! Everything but `rw_restore` only reads: the journal through the tolerant reader (a torn or
//! unreadable line is reported in `journal_problems` and skipped, never fatal — the reference
//! failed every read after one torn line, bug 3), the rejection envelopes through the engine's
//! state-file API. `rw_restore` brings a kept version back as a new, journaled commit.
//!
//! Differences from the reference:
//! - times (`since`, `at`) are RFC 3339 with `Z`, an offset (`+02:00`, `-0500`) or none (UTC), or
//!   a bare date; anything else is an envelope (`invalid_argument`), not a crash (bug 12);
//! - `composes` is inferred from the rows, not from "any later write" (bug 27): after a
//!   session's chunks change, the first create or overwrite of a workspace file (outside
//!   `.resilient_write/`) whose size is exactly the session's live parts joined with a separator
//!   of at most [`MAX_SEPARATOR`] bytes counts as one compose of that session (of the most
//!   recently written one if several fit); the next compose of it needs a chunk write first. The
//!   journal does not record which tool wrote a row, so this is evidence, not proof: unrelated
//!   writes of another size, and repeated writes, no longer count;
//! - a checkpoint save is an overwrite when the checkpoint existed before it (`prev_sha256`, or
//!   an earlier save in the journal), whatever mode the row carries;
//! - analytics counts writes (`create`, `overwrite`, `append`, `replace`, `restore` rows); rwfs's
//!   other rows (`delete`, `rename`, `block`, `recover`, …) appear in the extra `by_op` map;
//! - a chunk session's `manifest.json` is derived state (its parts are the truth): its rows are
//!   left out of analytics, and out of `rw_journal_tail` unless `include_derived` is set or
//!   `filter_path` names it, so one chunk session reads as its parts and its compose.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::durable::layout::{LATEST_REJECTION, REJECTIONS};
use crate::durable::{FileKind, STATE_DIR};
use crate::engine::Restored;
use crate::error::ErrorKind;
use crate::history::{ApprovalState, Availability, RestoreTo};
use crate::journal::{Op, Row};

use super::{Call, Failure, Outcome, Tools, ok, parse_time};

/// The most rows `rw_journal_tail` returns.
pub const TAIL_CAP: i64 = 10_000;
/// The longest separator a compose is assumed to have used.
pub const MAX_SEPARATOR: u64 = 16;
/// Rows in the analytics timeline.
const TIMELINE: usize = 50;
/// Paths in `hot_paths`.
const HOT_PATHS: usize = 5;

fn twenty() -> i64 {
    20
}
fn hundred() -> u64 {
    100
}
fn twenty_u() -> u64 {
    20
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JournalTailArgs {
    /// How many of the newest matching rows to return (default 20, at most 10000; 0 or less
    /// returns none).
    #[serde(default = "twenty")]
    pub n: i64,
    /// Only rows for this path.
    #[serde(default)]
    pub filter_path: Option<String>,
    /// Only rows with this mode (`create`, `overwrite`, `append`, `replace`, `restore`,
    /// `delete`, `rename`, `block`, ...).
    #[serde(default)]
    pub filter_mode: Option<String>,
    /// Also rows of derived state (chunk sessions' `manifest.json`), left out by default.
    #[serde(default)]
    pub include_derived: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalyticsArgs {
    /// Only rows at or after this time: RFC 3339 (`2026-04-12T10:00:00Z`, `+02:00` offsets, no
    /// zone = UTC) or a date (`2026-04-12`).
    #[serde(default)]
    pub since: Option<String>,
    /// Only this chunk session in `sessions`.
    #[serde(default)]
    pub session_filter: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    /// Workspace-relative path (it need not exist any more).
    pub path: String,
    /// The newest versions to list (default 100).
    #[serde(default = "hundred")]
    pub limit: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreArgs {
    /// Workspace-relative path to restore.
    pub path: String,
    /// The version's sha256, or an unambiguous prefix of it (at least 4 hex digits).
    #[serde(default)]
    pub sha256: Option<String>,
    /// Or: bring back what the path held at this time (RFC 3339).
    #[serde(default)]
    pub at: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalStatusArgs {
    /// The approval's id: the refusal's `context.approval.id` (`rj_…`).
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RejectionsArgs {
    /// One rejection's id (`rj_…`, or `latest`): its whole envelope. Without it, the newest
    /// rejections are listed.
    #[serde(default)]
    pub id: Option<String>,
    /// How many to list (default 20).
    #[serde(default = "twenty_u")]
    pub limit: u64,
}

impl Tools {
    pub fn journal_tail(&self, call: &Call, args: JournalTailArgs) -> Outcome {
        let n = args.n.clamp(0, TAIL_CAP) as usize;
        let path = args.filter_path.as_deref().map(|p| match self.engine().workspace().lookup(p) {
            Ok(canonical) => canonical.to_string(),
            Err(_) => p.to_string(),
        });
        let derived_shown = args.include_derived || path.as_deref().is_some_and(chunk_manifest);
        let mut entries: VecDeque<Row> = VecDeque::with_capacity(n.min(1024));
        let scan = self
            .engine()
            .workspace()
            .read_journal(|entry| {
                let row = entry.row;
                if n == 0
                    || path.as_deref().is_some_and(|p| row.path != p)
                    || args.filter_mode.as_deref().is_some_and(|m| row.mode != m)
                    || (!derived_shown && chunk_manifest(&row.path))
                {
                    return;
                }
                if entries.len() == n {
                    entries.pop_front();
                }
                entries.push_back(row);
            })
            .map_err(|e| self.fail(call, e, None))?;
        let entries: Vec<Value> =
            entries.iter().map(|row| serde_json::to_value(row).expect("row serializes")).collect();
        Ok(ok(json!({
            "count": entries.len(),
            "entries": entries,
            "journal_problems": scan.problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        })))
    }

    pub fn analytics(&self, call: &Call, args: AnalyticsArgs) -> Outcome {
        let since = match args.since.as_deref() {
            Some(text) => Some(self.time_arg(call, "since", text)?),
            None => None,
        };
        let mut tally = Tally::new(since);
        let scan = self
            .engine()
            .workspace()
            .read_journal(|entry| tally.row(&entry.row))
            .map_err(|e| self.fail(call, e, None))?;
        let mut out = tally.report(args.session_filter.as_deref());
        out["journal_problems"] = json!(scan.problems.len());
        out["since"] = json!(since.map(format_time));
        Ok(ok(out))
    }

    pub fn history(&self, call: &Call, args: HistoryArgs) -> Outcome {
        let history = self.engine().workspace().history(&args.path).map_err(|e| self.fail(call, e, None))?;
        let total = history.versions.len();
        let skip = total.saturating_sub(args.limit as usize);
        let versions: Vec<Value> = history.versions[skip..]
            .iter()
            .map(|v| {
                let row = &v.entry.row;
                json!({
                    "seq": row.seq, "ts": row.ts, "op": v.op().as_str(), "mode": row.mode,
                    "journal_id": row.journal_id, "sha256": v.state, "prev_sha256": row.prev_sha256,
                    "bytes": row.bytes, "caller": row.caller, "via": row.via, "pid": row.pid,
                    "comm": row.comm, "uid": row.uid, "reason": row.reason, "from": row.from,
                    "availability": v.availability.as_str(),
                    "restorable": matches!(v.availability, Availability::Current | Availability::Stored),
                })
            })
            .collect();
        Ok(ok(json!({
            "path": history.path.as_str(), "current_sha256": history.current, "exists": history.current.is_some(),
            "total": total, "count": versions.len(), "versions": versions,
        })))
    }

    pub fn restore(&self, call: &Call, args: RestoreArgs) -> Outcome {
        let to = match (args.sha256.as_deref(), args.at.as_deref()) {
            (Some(sha), None) => RestoreTo::Sha(sha.to_string()),
            (None, Some(at)) => RestoreTo::At(self.time_arg(call, "at", at)?),
            _ => {
                return Err(self.bad_argument(
                    call,
                    "sha256",
                    "give exactly one of sha256 (a version or a prefix of it) and at (a time)",
                    json!({"path": args.path}),
                ));
            }
        };
        match self.engine().restore(&args.path, &to, &call.actor).map_err(|e| self.fail(call, e, None))? {
            Restored::Committed(c) => Ok(ok(json!({
                "path": c.path.as_str(), "sha256": c.sha256, "bytes": c.bytes, "journal_id": c.journal_id,
                "wrote_at": c.ts, "seq": c.seq, "prev_sha256": c.prev_sha256, "op": c.op.as_str(),
                "restored": true, "already_current": false,
            }))),
            Restored::AlreadyCurrent { path, sha256 } => Ok(ok(json!({
                "path": path.as_str(), "sha256": sha256, "restored": false, "already_current": true,
            }))),
        }
    }

    pub fn rejections(&self, call: &Call, args: RejectionsArgs) -> Outcome {
        if let Some(id) = args.id.as_deref() {
            return self.rejection(call, id);
        }
        let names = self.engine().workspace().state_list(REJECTIONS).map_err(|e| self.fail(call, e, None))?;
        let mut ids: Vec<String> = names
            .into_iter()
            .filter(|(name, kind)| *kind == FileKind::File && name != LATEST_REJECTION)
            .filter_map(|(name, _)| name.strip_suffix(".json").map(str::to_string))
            .collect();
        ids.sort_by_key(|id| std::cmp::Reverse(rejection_order(id)));
        let total = ids.len();
        let mut listed = Vec::new();
        for id in ids.into_iter().take(args.limit as usize) {
            let bytes = self
                .engine()
                .workspace()
                .state_read(&format!("{REJECTIONS}/{id}.json"))
                .map_err(|e| self.fail(call, e, None))?;
            let envelope = bytes.and_then(|b| serde_json::from_slice::<Value>(&b).ok());
            listed.push(match envelope {
                Some(env) => {
                    let c = &env["context"];
                    json!({
                        "id": id, "path": c["path"], "ts": c["ts"], "rules": c["blocking_rules"],
                        "tool": c["tool"], "action": c["action"], "risk_score": c["risk_score"], "quarantined_sha256": c["quarantined_sha256"],
                    })
                }
                None => json!({"id": id, "corrupt": true}),
            });
        }
        Ok(ok(json!({"count": listed.len(), "total": total, "rejections": listed})))
    }

    /// One rejection's envelope (`latest`: the newest).
    /// `rw_approval_status`: where a version parked for a person's approval stands
    /// (`engine/approve.rs`), and what the agent does about it.
    pub fn approval_status(&self, call: &Call, args: ApprovalStatusArgs) -> Outcome {
        let approval = self.engine().workspace().approval(&args.id).map_err(|e| self.fail(call, e, None))?;
        let next = match approval.state {
            ApprovalState::Pending => {
                "a person has not decided yet: ask the user to run `rwfs approve ID` or `rwfs deny ID` (or to use the \
                 history page); do not write the file again meanwhile — a new write replaces this one"
            }
            ApprovalState::Approved => "approved and installed: the file holds this version now",
            ApprovalState::Denied => {
                "denied: the file was left as it was; do not write this change again unless the user asks"
            }
            ApprovalState::Superseded => {
                "superseded: the file changed, or a later version was parked for it, after this one; this one will not \
                 be installed"
            }
        };
        Ok(json!({"ok": true, "id": approval.id, "state": approval.state, "path": approval.path, "approval": approval,
                  "next": next}))
    }

    fn rejection(&self, call: &Call, id: &str) -> Outcome {
        let valid = !id.is_empty()
            && id.len() <= 128
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(self.bad_argument(
                call,
                "id",
                "a rejection id is rj_… (letters, digits, _ and -) or latest",
                json!({"id": id}),
            ));
        }
        let file = if id == "latest" { LATEST_REJECTION.to_string() } else { format!("{id}.json") };
        let bytes = self
            .engine()
            .workspace()
            .state_read(&format!("{REJECTIONS}/{file}"))
            .map_err(|e| self.fail(call, e, None))?;
        let Some(bytes) = bytes else {
            return Err(self.reject(
                call,
                ErrorKind::StalePrecondition,
                "not_found",
                "no such rejection; rw_rejections without id lists them",
                json!({"id": id}),
                None,
            ));
        };
        let envelope: Value = serde_json::from_slice(&bytes).map_err(|e| {
            self.reject(
                call,
                ErrorKind::WriteCorruption,
                "corrupt_rejection",
                format!("the rejection file is not JSON: {e}"),
                json!({"id": id, "path": format!("{STATE_DIR}/{REJECTIONS}/{file}")}),
                None,
            )
        })?;
        let id = envelope["context"]["rejection_id"].as_str().unwrap_or(id).to_string();
        Ok(ok(json!({"id": id, "envelope": envelope})))
    }

    pub(super) fn time_arg(&self, call: &Call, argument: &str, text: &str) -> Result<SystemTime, Failure> {
        parse_time(text).ok_or_else(|| {
            self.bad_argument(
                call,
                argument,
                format!("{argument} is not a time: give RFC 3339 (2026-04-12T10:00:00Z, +02:00 offsets) or a date"),
                json!({argument: text}),
            )
        })
    }
}

/// Newest first: by the time and sequence number in `rj_<time>_<seq>`.
fn rejection_order(id: &str) -> (String, u64, String) {
    let mut parts = id.strip_prefix("rj_").unwrap_or("").rsplitn(2, '_');
    let seq = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let ts = parts.next().unwrap_or("").to_string();
    (ts, seq, id.to_string())
}

fn format_time(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// `^\.resilient_write/<dir>/<rest>$` with `<rest>` split by `name`.
fn state_file<'a>(path: &'a str, dir: &str) -> Option<&'a str> {
    path.strip_prefix(STATE_DIR)?.strip_prefix('/')?.strip_prefix(dir)?.strip_prefix('/')
}

/// The reference's session and checkpoint names: `[A-Za-z0-9_-]{1,64}`.
fn is_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `chunks/<session>/part-NNN.txt` → (session, NNN).
fn chunk_part(path: &str) -> Option<(&str, u32)> {
    let (session, file) = state_file(path, crate::durable::layout::CHUNKS)?.split_once('/')?;
    let digits = file.strip_prefix("part-")?.strip_suffix(".txt")?;
    (is_name(session) && digits.len() == 3 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| (session, digits.parse().expect("three digits")))
}

/// A chunk session's manifest: derived state.
fn chunk_manifest(path: &str) -> bool {
    state_file(path, crate::durable::layout::CHUNKS)
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(session, file)| is_name(session) && file == super::chunks::MANIFEST)
}

/// `checkpoints/<name>.json` → name.
fn checkpoint(path: &str) -> Option<&str> {
    let name = state_file(path, crate::durable::layout::CHECKPOINTS)?.strip_suffix(".json")?;
    is_name(name).then_some(name)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn seconds_between(a: Option<SystemTime>, b: Option<SystemTime>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) => b.duration_since(a).map_or(0.0, |d| d.as_secs_f64()),
        _ => 0.0,
    }
}

/// First and last write of something, by row time.
#[derive(Default)]
struct Span {
    first: Option<(String, Option<SystemTime>)>,
    last: Option<(String, Option<SystemTime>)>,
}

impl Span {
    fn see(&mut self, ts: &str, t: Option<SystemTime>) {
        if self.first.is_none() {
            self.first = Some((ts.to_string(), t));
        }
        self.last = Some((ts.to_string(), t));
    }

    fn first_ts(&self) -> Option<&str> {
        self.first.as_ref().map(|(s, _)| s.as_str())
    }

    fn last_ts(&self) -> Option<&str> {
        self.last.as_ref().map(|(s, _)| s.as_str())
    }

    fn seconds(&self) -> f64 {
        seconds_between(self.first.as_ref().and_then(|f| f.1), self.last.as_ref().and_then(|l| l.1))
    }
}

#[derive(Default)]
struct Session {
    chunk_writes: u64,
    composes: u64,
    span: Span,
}

/// A session's live parts, as the rows so far leave them.
#[derive(Default)]
struct Parts {
    /// Index → bytes.
    sizes: BTreeMap<u32, u64>,
    /// Row number of the latest chunk write.
    latest: u64,
    /// A compose was counted since the latest chunk write.
    composed: bool,
}

impl Parts {
    /// Could a file of `bytes` be these parts joined by one separator?
    fn fit(&self, bytes: u64) -> bool {
        let (n, sum) = (self.sizes.len() as u64, self.sizes.values().sum::<u64>());
        match n {
            0 => false,
            1 => bytes == sum,
            _ => bytes >= sum && (bytes - sum).is_multiple_of(n - 1) && (bytes - sum) / (n - 1) <= MAX_SEPARATOR,
        }
    }
}

#[derive(Default)]
struct PathStat {
    order: usize,
    count: u64,
    bytes: u64,
    last: String,
}

#[derive(Default)]
struct Checkpoint {
    saves: u64,
    bytes: u64,
    span: Span,
}

/// One pass over the journal for `rw_analytics`.
struct Tally {
    since: Option<SystemTime>,
    rows: u64,
    writes: u64,
    bytes: u64,
    by_mode: BTreeMap<String, u64>,
    by_caller: BTreeMap<String, u64>,
    by_op: BTreeMap<&'static str, u64>,
    timeline: VecDeque<Value>,
    paths: HashMap<String, PathStat>,
    sessions: BTreeMap<String, Session>,
    /// The live parts of every session (all rows, whatever `since`).
    parts: HashMap<String, Parts>,
    checkpoints: BTreeMap<String, Checkpoint>,
    /// Checkpoints saved so far (all rows).
    saved: HashSet<String>,
    checkpoint_overwrites: u64,
    minutes: BTreeMap<String, u64>,
    period: Span,
}

impl Tally {
    fn new(since: Option<SystemTime>) -> Tally {
        Tally {
            since,
            rows: 0,
            writes: 0,
            bytes: 0,
            by_mode: BTreeMap::new(),
            by_caller: BTreeMap::new(),
            by_op: BTreeMap::new(),
            timeline: VecDeque::new(),
            paths: HashMap::new(),
            sessions: BTreeMap::new(),
            parts: HashMap::new(),
            checkpoints: BTreeMap::new(),
            saved: HashSet::new(),
            checkpoint_overwrites: 0,
            minutes: BTreeMap::new(),
            period: Span::default(),
        }
    }

    fn row(&mut self, row: &Row) {
        if chunk_manifest(&row.path) {
            return;
        }
        self.rows += 1;
        let op = row.op();
        let t = crate::time::parse(&row.ts);
        let in_range = match self.since {
            Some(since) => t.is_some_and(|t| t >= since),
            None => true,
        };
        let is_write = matches!(op, Op::Create | Op::Write | Op::Append | Op::Replace | Op::Restore);
        let part = chunk_part(&row.path);
        let saved_before = match checkpoint(&row.path) {
            Some(name) if is_write => !self.saved.insert(name.to_string()),
            _ => false,
        };
        // Compose evidence and the live parts follow every row, whatever `since`.
        let composed = match op {
            Op::Create | Op::Write if row.path.split('/').next() != Some(STATE_DIR) => self.compose(row.bytes),
            _ => None,
        };
        if in_range {
            *self.by_op.entry(op.as_str()).or_default() += 1;
            if is_write {
                self.write(row, t, part, saved_before || row.prev_sha256.is_some());
            }
            if let Some(session) = composed.and_then(|name| self.sessions.get_mut(&name)) {
                session.composes += 1;
            }
        }
        if let Some((session, index)) = part
            && op.states_content()
        {
            let parts = self.parts.entry(session.to_string()).or_default();
            match row.sha256 {
                Some(_) => {
                    parts.sizes.insert(index, row.bytes);
                    parts.latest = self.rows;
                    parts.composed = false;
                }
                None => {
                    parts.sizes.remove(&index);
                }
            }
        }
    }

    fn write(&mut self, row: &Row, t: Option<SystemTime>, part: Option<(&str, u32)>, overwrite: bool) {
        self.writes += 1;
        self.bytes += row.bytes;
        *self.by_mode.entry(row.mode.clone()).or_default() += 1;
        *self.by_caller.entry(row.caller.clone()).or_default() += 1;
        if self.timeline.len() == TIMELINE {
            self.timeline.pop_front();
        }
        self.timeline.push_back(json!({"ts": row.ts, "path": row.path, "bytes": row.bytes, "mode": row.mode}));
        let order = self.paths.len();
        let stat = self.paths.entry(row.path.clone()).or_insert_with(|| PathStat { order, ..PathStat::default() });
        stat.count += 1;
        stat.bytes += row.bytes;
        stat.last = row.ts.clone();
        if let Some(t) = t {
            let minute = format_time(t);
            *self.minutes.entry(format!("{}Z", &minute[..16])).or_default() += 1;
            self.period.see(&row.ts, Some(t));
        }
        if let Some((name, _)) = part {
            let session = self.sessions.entry(name.to_string()).or_default();
            session.chunk_writes += 1;
            session.span.see(&row.ts, t);
        } else if let Some(name) = checkpoint(&row.path) {
            let cp = self.checkpoints.entry(name.to_string()).or_default();
            cp.saves += 1;
            cp.bytes += row.bytes;
            cp.span.see(&row.ts, t);
            if overwrite {
                self.checkpoint_overwrites += 1;
            }
        }
    }

    /// The session a workspace write of `bytes` composes, if any (see the module doc).
    fn compose(&mut self, bytes: u64) -> Option<String> {
        let (name, parts) = self
            .parts
            .iter_mut()
            .filter(|(_, parts)| !parts.composed && parts.fit(bytes))
            .max_by_key(|(_, parts)| parts.latest)?;
        parts.composed = true;
        Some(name.clone())
    }

    fn report(&self, session_filter: Option<&str>) -> Value {
        let mut hot: Vec<(&String, &PathStat)> = self.paths.iter().collect();
        hot.sort_by_key(|(_, s)| (std::cmp::Reverse(s.count), s.order));
        let hot_paths: Vec<Value> = hot
            .iter()
            .take(HOT_PATHS)
            .map(|(p, s)| json!({"path": p, "write_count": s.count, "total_bytes": s.bytes, "last_write": s.last}))
            .collect();
        let mut sessions = Map::new();
        for (name, s) in &self.sessions {
            if session_filter.is_some_and(|f| f != name) {
                continue;
            }
            sessions.insert(
                name.clone(),
                json!({
                    "chunk_writes": s.chunk_writes, "composes": s.composes, "first_write": s.span.first_ts(),
                    "last_write": s.span.last_ts(), "duration_seconds": s.span.seconds(),
                }),
            );
        }
        let mut by_name = Map::new();
        for (name, c) in &self.checkpoints {
            by_name.insert(
                name.clone(),
                json!({"saves": c.saves, "total_bytes": c.bytes, "first_write": c.span.first_ts(),
                       "last_write": c.span.last_ts()}),
            );
        }
        let saves: u64 = self.checkpoints.values().map(|c| c.saves).sum();
        // The earliest of the busiest minutes.
        let peak = self.minutes.iter().fold(None::<(&String, u64)>, |best, (m, &n)| match best {
            Some((_, b)) if b >= n => best,
            _ => Some((m, n)),
        });
        let span = self.period.seconds();
        let per_minute = if span > 0.0 { round2(self.writes as f64 / (span / 60.0)) } else { 0.0 };
        let avg = if self.writes > 0 { round2(self.bytes as f64 / self.writes as f64) } else { 0.0 };
        json!({
            "total_writes": self.writes,
            "unique_paths": self.paths.len(),
            "total_bytes_written": self.bytes,
            "by_mode": self.by_mode,
            "by_caller": self.by_caller,
            "by_op": self.by_op,
            "timeline": self.timeline,
            "hot_paths": hot_paths,
            "sessions": sessions,
            "checkpoints": {"total_saves": saves, "overwrites": self.checkpoint_overwrites, "by_name": by_name},
            "write_velocity": {
                "writes_per_minute": per_minute, "avg_bytes_per_write": avg, "peak_minute": peak.map(|(m, _)| m),
            },
            "period": {
                "first_entry": self.period.first_ts(), "last_entry": self.period.last_ts(), "duration_seconds": span,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_follow_the_reference_patterns() {
        assert_eq!(chunk_part(".resilient_write/chunks/s-1/part-007.txt"), Some(("s-1", 7)));
        assert_eq!(chunk_part(".resilient_write/chunks/s1/part-07.txt"), None);
        assert_eq!(chunk_part(".resilient_write/chunks/s1/manifest.json"), None);
        assert_eq!(chunk_part("chunks/s1/part-001.txt"), None);
        assert_eq!(checkpoint(".resilient_write/checkpoints/plan.json"), Some("plan"));
        assert_eq!(checkpoint(".resilient_write/checkpoints/a/b.json"), None);
        assert_eq!(
            rejection_order("rj_20260412T120000Z_17"),
            ("20260412T120000Z".into(), 17, "rj_20260412T120000Z_17".into())
        );
    }
}
