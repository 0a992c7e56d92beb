//! The gate: every new version is scored and judged by the workspace policy before it can reach
//! the tree, whatever front end it comes from; a refused version is quarantined, explained and
//! journaled.
//!
//! ```text
//!   judge    scan (binary content is not scanned; content above SCAN_MAX that a commit holds in
//!            memory is scanned in overlapping windows) → policy decision
//!   refuse   retry budget of (path, content) → content into objects/ (durably) → `block` row
//!            → rejections/<id>.json and rejections/latest.json (the envelope) → Reason::Blocked
//! ```
//!
//! The mount's per-write check refuses at `write()` only what is certain from the written
//! window alone ([`Judgement::is_certain`]: a high-confidence leak the policy blocks); the whole
//! version is judged at commit, which catches secrets that span writes (`draft.rs` says which
//! bytes the writes judged already, so that none is scanned twice).
//!
//! Invariants: refused content never reaches the tree and is in `objects/` before its row is
//! written; the row and the envelope name the same digest; an identical retry (same agent
//! session — `journal::session`: the agent run, whichever way it writes, through the mount or
//! MCP; else the MCP connection or the writer's POSIX session —, same path, same content) after
//! a refusal spends the retry budget, and once it is spent the attempt is refused as `retry_budget_exhausted`;
//! every refusal, spent budget or not, is quarantined, journaled and explained (no draft holding
//! the refused bytes is left behind).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::json;

use crate::durable::layout::{LATEST_REJECTION, REJECTIONS};
use crate::durable::{Dir, Install, STATE_DIR, Source, WorkspacePath, stage};
use crate::envelope::{Envelope, rejection_id};
use crate::error::{Error, ErrorKind, IoContext, Reason, Rejection, Result};
use crate::journal::{Actor, Change, Op, Via};
use crate::policy::{Action, Decision, Policy};
use crate::score::{Confidence, Kind, Report, Scanner};
use crate::sha::Sha256;
use crate::store::open_or_create;

use super::Core;

/// Content larger than this is not scanned as a whole (the mount's per-write checks still see
/// every byte): scanning needs it in memory.
pub const SCAN_MAX: usize = 16 << 20;
/// How much consecutive windows of a large version overlap when it is judged in windows.
pub const WINDOW_OVERLAP: usize = 64 << 10;

/// Where the window after the one ending at `end` starts.
pub(crate) fn next_window(end: usize) -> usize {
    end - WINDOW_OVERLAP
}
/// Content with a NUL byte in its first this many bytes is binary and not scanned (as git does).
const BINARY_PROBE: usize = 8000;

/// The workspace policy, its scanner and the retry budgets of refused content.
pub(crate) struct Gate {
    policy: Policy,
    scanner: Scanner,
    /// Bytes scanned since the engine opened (`rwfs status`; each byte a writer sends through
    /// the mount is scanned once, see `draft.rs`).
    scanned: AtomicU64,
    /// Refused writes → retries left.
    budgets: Mutex<HashMap<Attempt, u32>>,
    /// The committed version of a workspace path, as far as it can be judged (text, at most
    /// [`SCAN_MAX`]): what a new version replaces (set by the engine when it opens).
    committed: std::sync::OnceLock<ReadCommitted>,
    /// Which agent was told of which refusal of a write through the mount (`told.rs`).
    pub(crate) told: super::told::Told,
    /// A writer's command line, from the front end ([`Options::command_line`](super::Options::command_line)).
    command_line: Option<super::CommandLine>,
}

/// Reads the committed version of a workspace path.
pub(crate) type ReadCommitted = Box<dyn Fn(&str) -> Option<Vec<u8>> + Send + Sync>;

/// A refused write as its retry budget is keyed: whose attempt (the agent session, see
/// [`Core::attempter`]), which path, which content. The paper's budget belongs to one agent:
/// the same agent retrying through its edit tool, its shell or MCP spends one budget, and a
/// second agent (another run, another terminal) starts with a fresh one.
type Attempt = (Option<String>, String, Sha256);

/// What the policy says about one version.
#[derive(Debug)]
pub struct Judgement {
    pub report: Report,
    pub decision: Decision,
    /// The findings (by index) whose value the version being replaced already holds (same
    /// rule, same value): they do not block (see `Gate::judge_any`).
    pub carried: Vec<usize>,
}

impl Judgement {
    pub fn blocks(&self) -> bool {
        self.decision.action == Action::Block
    }

    /// A refusal the bytes alone make certain (every blocking finding a high-confidence
    /// leak): the mount refuses it at the `write()` that completes it.
    pub fn is_certain(&self) -> bool {
        self.blocks()
            && self.report.findings.iter().zip(&self.decision.findings).all(|(f, action)| {
                *action != Action::Block || (f.kind == Kind::Leak && f.confidence == Confidence::High)
            })
            && self.decision.findings.contains(&Action::Block)
    }
}

/// Where refused content is taken from.
pub(crate) enum Quarantine<'a> {
    Bytes(&'a [u8]),
    /// A file that stays where it is (copied).
    Copy(&'a crate::durable::File),
    /// A file that becomes the object (moved, not copied).
    File {
        dir: &'a Dir,
        name: &'a str,
    },
}

/// A refusal before anything is written.
pub(crate) struct Refusal<'a> {
    pub path: &'a WorkspacePath,
    pub content: Quarantine<'a>,
    pub sha: Sha256,
    pub bytes: u64,
    pub prev: Option<Sha256>,
    pub judgement: Judgement,
    pub actor: &'a Actor,
}

/// Is this content worth scanning as text?
pub fn scannable(content: &[u8]) -> bool {
    content.len() <= SCAN_MAX && !content[..content.len().min(BINARY_PROBE)].contains(&0)
}

/// [`scannable`] of `head` followed by `tail`, without joining them.
pub fn scannable_joined(head: &[u8], tail: &[u8]) -> bool {
    let probe_tail = BINARY_PROBE.saturating_sub(head.len()).min(tail.len());
    head.len() + tail.len() <= SCAN_MAX
        && !head[..head.len().min(BINARY_PROBE)].contains(&0)
        && !tail[..probe_tail].contains(&0)
}

impl Gate {
    pub(crate) fn new(policy: Policy) -> Gate {
        let mut salt = [0u8; 16];
        // Without entropy the hashes are merely unsalted; nothing else depends on it.
        let _ = getrandom::fill(&mut salt);
        let scanner = policy.scanner(salt);
        Gate {
            policy,
            scanner,
            scanned: AtomicU64::new(0),
            budgets: Mutex::default(),
            committed: std::sync::OnceLock::new(),
            told: Default::default(),
            command_line: None,
        }
    }

    /// The gate, asking `command_line` for a writer's command line when a name needs it.
    pub(crate) fn with_command_line(self, command_line: Option<super::CommandLine>) -> Gate {
        Gate { command_line, ..self }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Bytes scanned so far.
    pub fn scanned_bytes(&self) -> u64 {
        self.scanned.load(Ordering::Relaxed)
    }

    /// Would the gate judge any bytes the same at `a` as at `b`? The scanner reads a path's
    /// [`PathContext`](crate::score::PathContext), the policy its globs; nothing else of a path
    /// counts (`admit.rs` asks before it judges moved bytes again).
    pub(crate) fn judged_alike(&self, a: &str, b: &str) -> bool {
        (a == b || !self.scanner.reads_whole_paths())
            && crate::score::PathContext::of(Some(a)) == crate::score::PathContext::of(Some(b))
            && self.policy.paths_alike(a, b)
    }

    /// Score `content` as the new version of `path`; `None` when it is not scanned (binary, or
    /// larger than [`SCAN_MAX`]).
    pub fn judge(&self, path: &str, content: &[u8]) -> Option<Judgement> {
        if !scannable(content) {
            return None;
        }
        Some(self.judge_any(Some(path), content))
    }

    /// Judge bytes larger than [`SCAN_MAX`] window by window (windows overlap by
    /// [`WINDOW_OVERLAP`], longer than any credential, so none is cut in two unseen): the first
    /// blocking window's judgement, else the last window's; `None` for binary content. Line numbers
    /// in the report are relative to the window.
    pub fn judge_windows(&self, path: &str, content: &[u8]) -> Option<Judgement> {
        if content.len() <= SCAN_MAX {
            return self.judge(path, content);
        }
        let read = |start: usize, end: usize| Ok(std::borrow::Cow::Borrowed(&content[start..end]));
        self.judge_windows_with(path, 0, content.len(), read, Some).unwrap_or(None)
    }

    /// [`Gate::judge_windows`] of `len` bytes that `read(start, end)` brings in one window at a
    /// time (a draft on disk: at most one window in memory), from the window starting at `from`
    /// (0, or a [`next_window`] after windows judged already, none blocking). `next_data(offset)`
    /// is where data resumes at or after `offset` (`None`: only zeros from there on): holes hold
    /// nothing to find, so windows skip them, and judging a sparse file costs its data, not its
    /// length.
    pub(crate) fn judge_windows_with<'a>(
        &self,
        path: &str,
        from: usize,
        len: usize,
        mut read: impl FnMut(usize, usize) -> Result<std::borrow::Cow<'a, [u8]>>,
        mut next_data: impl FnMut(usize) -> Option<usize>,
    ) -> Result<Option<Judgement>> {
        let mut start = from;
        loop {
            let end = (start + SCAN_MAX).min(len);
            let window = read(start, end)?;
            let Some(judgement) = self.judge_window(path, start, &window) else { return Ok(None) };
            if judgement.blocks() || end == len {
                return Ok(Some(judgement));
            }
            start = next_window(end);
            match next_data(start) {
                Some(data) if data < len => start = start.max(data),
                _ => return Ok(Some(judgement)),
            }
        }
    }

    /// One window of a windowed judgement, starting at `start`: `None` when the content is
    /// binary (a NUL in the first window's probe), and then no window is judged.
    pub(crate) fn judge_window(&self, path: &str, start: usize, window: &[u8]) -> Option<Judgement> {
        if start == 0 && window[..window.len().min(BINARY_PROBE)].contains(&0) {
            return None;
        }
        Some(self.judge_any(Some(path), window))
    }

    /// Read committed versions with `committed` (the engine, once it is open).
    pub(crate) fn read_committed_with(&self, committed: ReadCommitted) {
        let _ = self.committed.set(committed);
    }

    /// Does the scanner find anything in `text` (a finding of any weight)?
    pub(crate) fn finds_anything(&self, text: &[u8]) -> bool {
        !self.scanner.scan(text, None).findings.is_empty()
    }

    /// Score and judge `content` unconditionally (the risk-score tool). As the new version of
    /// `path`, a blocking finding whose value the committed version of `path` already holds
    /// (same rule, same value digest) does not block: a file that held a credential before
    /// stays editable (an unrelated line, `sed -i`), and only a new credential is refused. The
    /// committed version is read and scanned only when something would block.
    pub(crate) fn judge_any(&self, path: Option<&str>, content: &[u8]) -> Judgement {
        self.scanned.fetch_add(content.len() as u64, Ordering::Relaxed);
        let report = self.scanner.scan(content, path);
        let decision = self.policy.decide(&report, path.unwrap_or(""));
        let mut judgement = Judgement { report, decision, carried: Vec::new() };
        if let (Some(path), true) = (path, judgement.blocks()) {
            self.carry_committed(path, &mut judgement);
        }
        judgement
    }

    /// Let the findings the committed version of `path` already holds warn instead of block.
    fn carry_committed(&self, path: &str, judgement: &mut Judgement) {
        let Some(old) = self.committed.get().and_then(|read| read(path)) else { return };
        if !scannable(&old) {
            return;
        }
        let before = self.scanner.scan(&old, Some(path));
        let held: std::collections::HashSet<(&str, &str)> =
            before.findings.iter().map(|f| (f.rule.as_str(), f.hash.as_str())).collect();
        let carried: Vec<usize> = judgement
            .report
            .findings
            .iter()
            .enumerate()
            .filter(|(_, f)| held.contains(&(f.rule.as_str(), f.hash.as_str())))
            .map(|(i, _)| i)
            .collect();
        if carried.is_empty() {
            return;
        }
        judgement.decision = self.policy.decide_carrying(&judgement.report, path, |i| carried.contains(&i));
        judgement.carried = carried;
    }

    /// Count a refusal of `sha` at `path` by agent session `who`: the budget left, or `None`
    /// when it was already spent. The first refusal leaves the policy's whole budget; each
    /// identical retry by the same session refused again takes one.
    pub(crate) fn spend(&self, who: Option<String>, path: &str, sha: Sha256) -> Option<u32> {
        let key = (who, path.to_string(), sha);
        let mut budgets = self.budgets.lock().unwrap_or_else(PoisonError::into_inner);
        let left = budgets.entry(key).or_insert(self.policy.retry_budget() + 1);
        if *left == 0 {
            return None;
        }
        *left -= 1;
        Some(*left)
    }
}

/// The operation, as the envelope's `context.tool` names it and retry budgets are keyed: the
/// front end's tool, else the front end.
pub(crate) fn tool_of(actor: &Actor) -> &'static str {
    if let Some(tool) = actor.tool {
        return tool;
    }
    match actor.via {
        Via::Fuse => "mount",
        Via::Mcp => "mcp",
        Via::Cli => "cli",
        Via::Engine | Via::Other => "rwfs",
    }
}

impl Core {
    /// Whose attempts a retry budget counts: the actor's session — its agent run whichever way
    /// it writes (`journal::session`), else its MCP connection or POSIX session; `None` for a
    /// writer that is gone (the kernel's writeback).
    pub(crate) fn attempter(&self, actor: &Actor) -> Option<String> {
        actor.session_label.clone().or_else(|| actor.pid.and_then(|pid| self.journal.sessions().of_pid(pid)))
    }

    /// The committed version of workspace path `path` as the gate judges it: `None` when it is
    /// absent, not a regular file, or larger than [`SCAN_MAX`]. The tree's version, not one
    /// staged in batch mode: a judge may hold the path's lock, which the batch committer's
    /// install of that path waits for. A version staged since holds no credential the tree's
    /// did not (each was refused or carried), so at worst one the writer removed moments ago
    /// may come back, which the tree's history holds already.
    pub(crate) fn committed_text(&self, path: &str) -> Option<Vec<u8>> {
        use std::io::Read;
        let opened = self.ws.open_file(path).ok()?;
        if opened.stat.kind != crate::durable::FileKind::File || opened.stat.size > SCAN_MAX as u64 {
            return None;
        }
        let mut bytes = Vec::with_capacity(opened.stat.size as usize);
        opened.file.take(SCAN_MAX as u64).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    /// Quarantine refused content, journal the refusal, write its envelope, and return the
    /// error the front end reports.
    /// A temporary copy is refused as the file it stands for (`crate::temporary`): that file's
    /// budget, row and envelope, and the error names it; the temporary name is kept in the
    /// row's `from` and the envelope's `written_as`.
    pub(crate) fn refuse(&self, refusal: Refusal<'_>) -> Error {
        let edited = self.temporary_target(refusal.path.as_str(), refusal.actor, refusal.prev.is_none());
        let at = edited.clone().unwrap_or_else(|| refusal.path.to_string());
        tracing::info!(path = %at, pid = refusal.actor.pid, comm = refusal.actor.comm.as_deref(), "blocked");
        match self.refuse_inner(refusal, edited) {
            Ok(e) | Err(e) => e.at(at),
        }
    }

    fn refuse_inner(&self, r: Refusal<'_>, edited: Option<String>) -> Result<Error> {
        let subject = edited.as_deref().unwrap_or(r.path.as_str());
        // A mount writer's lineage: whom `rwfs hook` tells of this refusal (`told.rs`).
        let lineage = match (r.actor.via, r.actor.pid) {
            (Via::Fuse, Some(pid)) => Some(crate::journal::session::lineage(pid)),
            _ => None,
        };
        // `None`: spent. Refused outright, but like every refusal with its row and envelope.
        let budget = self.gate.spend(self.attempter(r.actor), subject, r.sha);
        self.quarantine(r.content, r.sha)?;
        let report = &r.judgement.report;
        let blocking: Vec<(String, usize)> = report
            .findings
            .iter()
            .zip(&r.judgement.decision.findings)
            .filter(|(_, action)| **action == Action::Block)
            .map(|(f, _)| (f.rule.clone(), f.line))
            .fold(Vec::new(), |mut rules, (rule, line)| {
                if !rules.iter().any(|(r, _)| *r == rule) {
                    rules.push((rule, line));
                }
                rules
            });
        let rule_ids: Vec<&str> = blocking.iter().map(|(r, _)| r.as_str()).collect();
        let appended = self.journal.append(Change {
            op: Op::Block,
            path: subject.to_string(),
            from: edited.as_ref().map(|_| r.path.to_string()),
            sha256: Some(r.sha),
            prev_sha256: r.prev,
            bytes: r.bytes,
            mode: String::new(),
            actor: r.actor.clone(),
            verdict: Some(report.verdict.as_str().to_string()),
            reason: Some(format!(
                "{} rules={}",
                if budget.is_some() { "content_blocked" } else { "retry_budget_exhausted" },
                rule_ids.join(",")
            )),
        })?;
        let id = rejection_id(&appended.ts, appended.seq);
        let message = match &edited {
            Some(file) => format!(
                "the workspace policy blocks {} in {file} (written by {} as its temporary file {}); nothing was written and {file} is unchanged",
                rule_ids.join(", "),
                r.actor.comm.as_deref().unwrap_or("the writer"),
                r.path.as_str(),
            ),
            None => format!("the workspace policy blocks {}; nothing was written", rule_ids.join(", ")),
        };
        // Credentials the committed file already holds did not block: say they are still there.
        let kept: Vec<String> = r
            .judgement
            .carried
            .iter()
            .filter_map(|&i| report.findings.get(i))
            .map(|f| format!("{} at line {}", f.rule, f.line))
            .collect();
        let message = match kept.is_empty() {
            true => message,
            false => format!(
                "{message}. The committed {subject} already holds {} — left where it is (not what was refused); \
                 move it out when you can",
                kept.join(", ")
            ),
        };
        let mut envelope = Envelope::new(ErrorKind::Blocked, budget.unwrap_or(0));
        if budget.is_none() {
            envelope.suggested_action = "abort".into();
        }
        let mut families: Vec<String> = report.findings.iter().map(|f| f.family.clone()).collect();
        families.sort();
        families.dedup();
        envelope.detected_patterns = families;
        let findings: Vec<_> = report
            .findings
            .iter()
            .zip(&r.judgement.decision.findings)
            .enumerate()
            .map(|(i, (f, action))| {
                json!({
                    "rule": f.rule, "family": f.family, "finding": f.kind, "confidence": f.confidence,
                    "severity": f.severity, "line": f.line, "column": f.column, "length": f.length,
                    "snippet": f.snippet, "hash": f.hash, "replacement": f.replacement, "action": action.as_str(),
                    "already_committed": r.judgement.carried.contains(&i),
                })
            })
            .collect();
        let context = json!({
            "tool": tool_of(r.actor),
            "path": subject,
            "temporary_for": edited,
            "written_as": r.path.as_str(),
            "reason": if budget.is_some() { "content_blocked" } else { "retry_budget_exhausted" },
            "message": message,
            "rejection_id": id,
            "ts": appended.ts,
            "journal_seq": appended.seq,
            "blocking_rules": rule_ids,
            "findings": findings,
            // The policy's decision, and the paper's weighted score only as a score: a blocked
            // credential can score `low` or `medium` there, which must not read as a verdict.
            "action": "block",
            "risk_score": {"score": report.score, "verdict": report.verdict.as_str()},
            "leak_risk": report.leak_risk,
            "filter_risk": report.filter_risk,
            "suggested_actions": report.suggested_actions(),
            "quarantined_sha256": r.sha,
            "quarantined_in": self.objects.path_of(&r.sha),
            "previous_sha256": r.prev,
            "bytes": r.bytes,
            "pid": r.actor.pid,
            "comm": r.actor.comm,
            "uid": r.actor.uid,
            "via": r.actor.via,
            // The writer and its ancestors by pid and start time: what `rwfs hook` matches.
            "writer": lineage.as_ref().map(|l| json!({"lineage": l})),
        });
        if let serde_json::Value::Object(map) = context {
            envelope.context = map;
        }
        if budget.is_none() {
            envelope.context.insert(
                "hint".into(),
                json!(
                    "this exact content was refused here before and its retry budget is spent: change strategy \
                     (alter the content: redact, read the secret from an environment variable, move it to \
                     rw_scratch_put), or ask the user"
                ),
            );
        }
        let text = envelope.to_json();
        // The refusal is journaled and its bytes kept: an envelope file that cannot be written
        // (a full disk) does not turn it into another error; the envelope still travels with it.
        // A text file: it ends with a newline (`cat` leaves the prompt on a line of its own).
        if let Err(e) = self.write_rejection(&id, format!("{text}\n").as_bytes()) {
            tracing::warn!(path = r.path.as_str(), error = %e, "the refusal's envelope file was not written");
        }
        if let Some(lineage) = lineage
            && let Ok(value) = serde_json::to_value(&envelope)
            && let Some(notice) = crate::notice::Notice::of_envelope(&value)
        {
            self.gate.told.record(subject, Some(r.sha), lineage, notice);
        }
        let rejection = Box::new(Rejection { id, rules: blocking, sha256: r.sha, envelope: text });
        Ok(match budget {
            Some(_) => Reason::Blocked(rejection),
            None => Reason::RetryBudgetSpent(rejection),
        }
        .into())
    }

    /// The file that `path`, written by `actor`, is a temporary copy, swap or backup file of
    /// (`crate::temporary`): the gate judges, counts and names it as that file. The name says
    /// which file for most; for a name that does not (sed's), the writer's command line, when
    /// the temporary file is new (`fresh`).
    pub(crate) fn temporary_target(&self, path: &str, actor: &Actor, fresh: bool) -> Option<String> {
        let temporary = crate::temporary::of(path)?;
        match temporary.target {
            Some(target) => Some(target),
            None if fresh => self.edited_through(path, actor),
            None => None,
        }
    }

    /// The path the gate judges `path` as: the file it is a temporary copy of, else itself.
    pub(crate) fn judged_as(&self, path: &str, actor: &Actor) -> String {
        self.temporary_target(path, actor, true).unwrap_or_else(|| path.to_string())
    }

    /// The file a new temporary file was the copy of, when the writer's command line (as the
    /// front end gives it) says: `sed -i EXPR app/settings.py` writes `app/sedXXXXXX` and
    /// renames it over `app/settings.py`. The one argument naming an existing file of the same
    /// directory (by its last component), else nothing.
    fn edited_through(&self, temp: &str, actor: &Actor) -> Option<String> {
        let args = (self.gate.command_line.as_ref()?)(actor.pid?)?;
        let dir = temp.rsplit_once('/').map_or("", |(dir, _)| dir);
        let mut named = args
            .iter()
            .skip(1)
            .filter_map(|arg| arg.rsplit('/').next().filter(|n| !n.is_empty() && *n != "." && *n != ".."))
            .map(|name| if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") })
            .filter(|path| path != temp)
            .filter(|path| {
                let disk = self.disk();
                let found = self
                    .on(super::Entry::Path(path), crate::durable::Scope::Workspace, |dir, name| disk.stat(dir, name));
                matches!(found, Ok(Ok(Some(stat))) if stat.kind == crate::durable::FileKind::File)
            })
            .collect::<Vec<_>>();
        named.dedup();
        (named.len() == 1).then(|| named.remove(0))
    }

    /// Keep refused content in `objects/` as `sha`, durably and sealed (`store/seal.rs`): a
    /// refused draft is what the gate or the policy would not let into the tree, a credential
    /// most often, and the store must not be the place it leaks from.
    pub(super) fn quarantine(&self, content: Quarantine<'_>, sha: Sha256) -> Result<()> {
        match content {
            Quarantine::Bytes(bytes) => self.objects.put_sealed_bytes(bytes, sha),
            Quarantine::Copy(file) => self.objects.put_sealed_file(file, sha),
            Quarantine::File { dir, name } => self.objects.adopt_sealed(dir, name, sha),
        }
    }

    /// Version `sha`, judged by `judgement`, is to be stored sealed when it leaves the tree if
    /// the scanner found a credential in it that the policy blocks or warns about (a `leak`
    /// finding not allowed): the rule of what is encrypted at rest, in one place.
    pub(super) fn note_credentials(&self, judgement: Option<&Judgement>, sha: Sha256) {
        if judgement.is_some_and(holds_credential) {
            self.objects.mark_sensitive(sha);
        }
    }

    /// `rejections/<id>.json` and `rejections/latest.json`, each replaced atomically and durably.
    pub(super) fn write_rejection(&self, id: &str, text: &[u8]) -> Result<()> {
        let disk = self.disk();
        let state = self.ws.state.as_ref().ok_or_else(|| Error::from(Reason::NotFound).at(STATE_DIR))?;
        let dir = open_or_create(disk, state, REJECTIONS)?;
        for name in [format!("{id}.json"), LATEST_REJECTION.to_string()] {
            let staged = stage(disk, &dir, Source::Bytes(text), &Default::default())?;
            staged.sync(disk)?;
            staged.install(disk, &dir, &name, Install::Replace, None)?;
        }
        disk.sync_dir(&dir).step("fsync rejections directory")
    }
}

/// Did the scanner find a credential in the judged version that the policy does not allow?
pub(crate) fn holds_credential(judgement: &Judgement) -> bool {
    judgement
        .report
        .findings
        .iter()
        .zip(&judgement.decision.findings)
        .any(|(f, action)| f.kind == Kind::Leak && *action != Action::Allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scannable_joined_is_scannable_of_the_concatenation() {
        let text = vec![b'a'; BINARY_PROBE + 10];
        let mut cases: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for zero_at in [None, Some(0), Some(5), Some(BINARY_PROBE - 1), Some(BINARY_PROBE), Some(BINARY_PROBE + 5)] {
            for split in [0, 1, 100, BINARY_PROBE - 1, BINARY_PROBE, BINARY_PROBE + 10] {
                let mut all = text.clone();
                if let Some(z) = zero_at {
                    all[z] = 0;
                }
                let (head, tail) = all.split_at(split);
                cases.push((head.to_vec(), tail.to_vec()));
            }
        }
        for (head, tail) in cases {
            let joined: Vec<u8> = head.iter().chain(&tail).copied().collect();
            assert_eq!(scannable_joined(&head, &tail), scannable(&joined), "head {} tail {}", head.len(), tail.len());
        }
    }
}
