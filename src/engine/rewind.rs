//! Rewind: the workspace, or the paths matching some globs, made what it was before a
//! selection of rows (everything after a time or a `seq`, one session, one rewind group).
//!
//! ```text
//!   plan     journal::query::touched → per path: what it held before the selection, what the
//!            journal says it holds now, and what the disk holds; each path is restored
//!            (overwritten since), recreated (deleted since), removed (created since; the
//!            content stays in objects/), merged (someone else changed it since: their edits
//!            kept, the selection's undone — merge.rs), or skipped with a reason
//!   record   the plan (with the merged contents) as .resilient_write/rewinds/<group>.json (a
//!            durable, journaled state write), then a `rewind` `begin` row carrying its digest
//!   apply    each step through the commit protocol (delete, restore_version), its row in the
//!            group; removals first, so what they keep in objects/ can be restored elsewhere
//!   close    a `rewind` `end` row
//! ```
//!
//! Invariants:
//! - a path is never torn: every step is one commit of the ordinary protocol;
//! - a path changed after the selection — by rows outside it, or outside rwfs (its bytes differ
//!   from the journal's last row) — is merged: `after` (what the selection left) is the common
//!   ancestor of `now` (their edits) and `before` (the rewound text). A clean merge is a step
//!   like any other, its row a `restore` with mode `merge`; a conflict is skipped with the
//!   conflicting hunks in the plan (`conflict`), and only `force` overwrites it with `before`
//!   (the step marked `forced`; what it displaces is kept in `objects/` like every version).
//!   A path that cannot be merged (binary, too large, created or deleted on either side) is
//!   skipped as before merging existed: `force` overrides only a change outside rwfs;
//! - a path in a pass-through path and one whose old version is no longer kept are skipped,
//!   and the plan says why;
//! - a merged content is kept in the plan, durable before the `begin` row: recovery finishing
//!   the group installs it from there (it reaches `objects/` like any version, once displaced);
//! - every row a rewind writes carries its group, so `--undo GROUP` takes back exactly it;
//! - a `begin` row without its `end` row means a crash interrupted the group: at the next open
//!   [`Core::finish_rewinds`] reads the plan, applies the steps whose path still holds the
//!   planned `from` (a path holding the planned `to` is done; anything else is reported, not
//!   touched) and writes the `end` row. A crash before the `begin` row is durable changed
//!   nothing but the plan file.
//! - a dry run writes nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::durable::{STATE_DIR, Scope, WorkspacePath, layout::REWINDS, resolve::lookup};
use crate::error::{Error, IoContext, Reason, Result};
use crate::journal::query::{self, Selection};
use crate::journal::{Actor, Change, Op, Row};
use crate::sha::Sha256;

use super::commit::Expect;
use super::merge::{self, Merged};
use super::{Core, Engine};

/// What to rewind.
#[derive(Debug, Clone)]
pub struct Rewind {
    pub selection: Selection,
    /// Only paths matching one of these globs (all paths when empty).
    pub globs: Vec<String>,
    /// Overwrite paths changed outside rwfs since their last row.
    pub force: bool,
    /// Plan only.
    pub dry_run: bool,
}

/// What a step does to its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Put an older version back over the current one.
    Restore,
    /// Bring a deleted (or renamed away) file back.
    Recreate,
    /// Remove a file created (or renamed here) since; its content stays in `objects/`.
    Remove,
    /// Remove a directory a rename brought here since, once the removals have emptied it: the
    /// empty directories below it, then it (one that still holds anything stays).
    #[serde(rename = "remove_dir")]
    RemoveDir,
    /// Keep the edits made since the selection by someone else and undo the selection's (a
    /// three-way merge, `merge.rs`): `to` is the merged content.
    Merge,
}

/// One path of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub path: String,
    pub action: Action,
    /// What the path holds now (`None`: absent).
    pub from: Option<Sha256>,
    /// What it will hold (`None`: absent).
    pub to: Option<Sha256>,
    /// Why it is left alone (a machine string), when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Applied although the path changed since, overwriting those changes (`--force`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forced: bool,
    /// Why the merge of a path changed since failed: the conflicting hunks, with diff3 markers
    /// naming the three versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
}

/// A rewind's plan, and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rewound {
    /// The group id of the rows it wrote (`None` for a dry run, or when nothing was to do).
    pub group: Option<String>,
    pub selection: String,
    pub dry_run: bool,
    pub steps: Vec<Step>,
    /// Steps applied.
    pub applied: usize,
    /// Steps that could not be applied when their turn came (the path changed meanwhile), with
    /// the error.
    #[serde(default)]
    pub failed: Vec<(String, String)>,
}

/// How a selection reads in a plan and its rows.
pub fn describe(selection: &Selection) -> String {
    match selection {
        Selection::AfterSeq(seq) => format!("seq {seq}"),
        Selection::AfterTime(t) => format!("time {}", crate::time::stamp(*t)),
        Selection::Session(s) => format!("session {s}"),
        Selection::SessionAfter(s, seq) => format!("session {s} after seq {seq}"),
        Selection::Group(g) => format!("group {g}"),
    }
}

impl Engine {
    /// Plan a rewind and, unless it is a dry run, perform it as one journaled group (see the
    /// module docs). The mount is told about every path that changed.
    pub fn rewind(&self, rewind: &Rewind, actor: &Actor) -> Result<Rewound> {
        let (steps, merged) = self.core.plan_rewind(rewind)?;
        let selection = describe(&rewind.selection);
        let todo: Vec<&Step> = steps.iter().filter(|s| s.skipped.is_none()).collect();
        if rewind.dry_run || todo.is_empty() {
            return Ok(Rewound { group: None, selection, dry_run: rewind.dry_run, steps, applied: 0, failed: vec![] });
        }
        let group = new_group();
        let actor = Actor { group: Some(group.clone()), ..actor.clone() };
        // Every merged content belongs to a step to do: a merge that conflicted kept none.
        let plan = PlanFile {
            group: group.clone(),
            selection: selection.clone(),
            steps: todo.into_iter().cloned().collect(),
            merged,
        };
        self.core.begin_rewind(&plan, &actor)?;
        let (applied, failed) = self.core.apply_steps(&plan, &actor, &|path| self.publish_path(path, &actor));
        self.core.end_rewind(&plan, &actor, &format!("done applied={applied} failed={}", failed.len()))?;
        Ok(Rewound { group: Some(group), selection, dry_run: false, steps, applied, failed })
    }

    fn publish_path(&self, path: &str, actor: &Actor) {
        self.subscribers.publish(&super::Changed { path: path.to_string(), via: actor.via });
    }
}

/// What is kept in `rewinds/<group>.json`: the steps to apply.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PlanFile {
    group: String,
    selection: String,
    steps: Vec<Step>,
    /// The content of each merged version the steps install (base64 by digest).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "base64_values")]
    merged: MergedContents,
}

/// The content of merged versions, by digest.
type MergedContents = BTreeMap<Sha256, Vec<u8>>;

/// A map's byte values as base64 strings in JSON.
mod base64_values {
    use std::collections::BTreeMap;

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::MergedContents;

    pub(super) fn serialize<S: Serializer>(map: &MergedContents, s: S) -> Result<S::Ok, S::Error> {
        map.iter().map(|(k, v)| (k.to_hex(), STANDARD.encode(v))).collect::<BTreeMap<_, _>>().serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<MergedContents, D::Error> {
        let text = BTreeMap::<String, String>::deserialize(d)?;
        text.into_iter()
            .map(|(k, v)| {
                let sha = k.parse().map_err(|_| serde::de::Error::custom("a merged version's digest"))?;
                let bytes = STANDARD.decode(v).map_err(serde::de::Error::custom)?;
                Ok((sha, bytes))
            })
            .collect()
    }
}

impl PlanFile {
    fn path(group: &str) -> String {
        format!("{STATE_DIR}/{REWINDS}/{group}.json")
    }
}

/// A new group id: the time and 32 random bits.
fn new_group() -> String {
    let mut random = [0u8; 4];
    let _ = getrandom::fill(&mut random);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    format!("rw-{now:x}-{}", hex::encode(random))
}

/// Threads applying one wave of a rewind: its commits wait on the disk, not the CPU.
const WORKERS: usize = 16;

/// The order a plan's steps are applied in, wave by wave: a step of a later wave may need what
/// an earlier one did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Wave {
    /// Removals: their content goes into `objects/`, where a restore elsewhere may find it.
    Remove,
    /// Restores and recreations whose version is kept already: independent of each other.
    Kept,
    /// Restores and recreations of a version another step of the plan displaces (a swap, a
    /// rename undone over a file the plan also changes): one at a time, in path order.
    NeedsDisplaced,
    /// Directories renamed here, emptied by the removals: one at a time.
    RemoveDirs,
}

/// `displaced`: the `from` of the steps applied.
fn wave(step: &Step, displaced: &BTreeSet<Sha256>) -> Wave {
    match (step.action, step.to) {
        (Action::RemoveDir, _) => Wave::RemoveDirs,
        (Action::Remove, _) => Wave::Remove,
        (_, Some(to)) if displaced.contains(&to) => Wave::NeedsDisplaced,
        _ => Wave::Kept,
    }
}

impl Core {
    /// The steps, and the content of each merged version (by digest).
    fn plan_rewind(&self, rewind: &Rewind) -> Result<(Vec<Step>, MergedContents)> {
        let globs = {
            let mut set = globset::GlobSetBuilder::new();
            for g in &rewind.globs {
                set.add(
                    globset::GlobBuilder::new(g)
                        .literal_separator(false)
                        .build()
                        .map_err(|_| Reason::InvalidArgument { what: "path glob" })?,
                );
            }
            set.build().map_err(|_| Reason::InvalidArgument { what: "path glob" })?
        };
        let touched = query::touched(&self.ws, &rewind.selection)?;
        let mut steps = Vec::new();
        let mut merged = BTreeMap::new();
        for t in touched {
            if !rewind.globs.is_empty() && !globs.is_match(&t.path) {
                continue;
            }
            let action = |from: Option<Sha256>| match (from, t.before) {
                (_, None) => Action::Remove,
                (None, Some(_)) => Action::Recreate,
                (Some(_), Some(_)) => Action::Restore,
            };
            if t.before.is_none() && t.now.is_none() && self.is_dir(&t.path) {
                if !t.renamed_here {
                    // A directory the journal knows no content of, before or now.
                    continue;
                }
                // A directory a rename brought here: removed once the removals emptied it.
                let mut step = Step {
                    path: t.path.clone(),
                    action: Action::RemoveDir,
                    from: None,
                    to: None,
                    skipped: None,
                    forced: false,
                    conflict: None,
                };
                if self.classes.class(&t.path).in_place() {
                    step.skipped = Some("pass_through".into());
                } else if let Some((session, seq)) = &t.later {
                    step.skipped = Some(format!("changed_later: seq {seq} by session {}", or_none(session)));
                }
                steps.push(step);
                continue;
            }
            let path = match self.ws.lookup(&t.path) {
                Ok(path) => path,
                Err(e) => {
                    // Beyond reach now (a directory on the way replaced by a symlink out of the
                    // workspace, say): listed, never followed.
                    let (from, to) = (t.now, t.before);
                    let skipped = Some(format!("unreachable: {}", e.code()));
                    steps.push(Step {
                        path: t.path.clone(),
                        action: action(from),
                        from,
                        to,
                        skipped,
                        forced: false,
                        conflict: None,
                    });
                    continue;
                }
            };
            let disk = match self.ws.current_sha(&path) {
                Ok(sha) => Ok(sha),
                Err(e) => Err(e.code().to_string()),
            };
            let from = disk.clone().ok().flatten();
            if disk.as_ref().is_ok_and(|d| *d == t.before) {
                continue;
            }
            let mut step = Step {
                path: t.path.clone(),
                action: action(from),
                from,
                to: t.before,
                skipped: None,
                forced: false,
                conflict: None,
            };
            if self.classes.class(&t.path).in_place() {
                step.skipped = Some("pass_through".into());
            } else if let Err(code) = &disk {
                step.skipped = Some(format!("unreadable: {code}"));
            } else if t.later.is_some() || from != t.now {
                let why = match &t.later {
                    Some((session, seq)) => format!("changed_later: seq {seq} by session {}", or_none(session)),
                    None => "changed_outside_rwfs".to_string(),
                };
                match self.merge_changed(&path, &t, from)? {
                    Merged::Clean(bytes) => {
                        let sha = Sha256::of(&bytes);
                        if Some(sha) == from {
                            // Their edits undid the selection's already.
                            continue;
                        }
                        (step.action, step.to) = (Action::Merge, Some(sha));
                        merged.insert(sha, bytes);
                    }
                    Merged::Conflict(_) | Merged::Unmergeable(_) if rewind.force && t.later.is_none() => {
                        step.forced = true;
                    }
                    Merged::Conflict(hunks) if rewind.force => {
                        step.forced = true;
                        step.conflict = Some(hunks);
                    }
                    Merged::Conflict(hunks) => {
                        step.skipped = Some(format!("merge_conflict ({why})"));
                        step.conflict = Some(hunks);
                    }
                    Merged::Unmergeable(how) => step.skipped = Some(format!("{why} (not merged: {how})")),
                }
            }
            steps.push(step);
        }
        // A version must be kept, or be the current content of a path a removal or a restore
        // of this plan puts into objects/ first.
        let displaced: BTreeSet<Sha256> = steps.iter().filter(|s| s.skipped.is_none()).filter_map(|s| s.from).collect();
        for step in &mut steps {
            if let (None, Some(to)) = (&step.skipped, step.to)
                && step.action != Action::Merge
                && !displaced.contains(&to)
                && !self.objects.contains(&to)?
            {
                step.skipped = Some("version_not_kept".into());
            }
        }
        steps.sort_by(|a, b| wave(a, &displaced).cmp(&wave(b, &displaced)).then_with(|| a.path.cmp(&b.path)));
        Ok((steps, merged))
    }

    /// Merge the undo of the selection's change into what `path` holds now, `from` (see
    /// `merge.rs`). Only a file on all three sides merges: one the selection created or deleted,
    /// or someone deleted since, is `Unmergeable` (saying which), and so is one whose versions
    /// are gone.
    fn merge_changed(&self, path: &WorkspacePath, t: &query::Touched, from: Option<Sha256>) -> Result<Merged> {
        let (before, after, now) = match (t.before, t.after, from) {
            (None, _, _) => return Ok(Merged::Unmergeable("created_by_the_rewound_rows")),
            (_, None, _) => return Ok(Merged::Unmergeable("deleted_by_the_rewound_rows")),
            (_, _, None) => return Ok(Merged::Unmergeable("deleted_since")),
            (Some(before), Some(after), Some(now)) => (before, after, now),
        };
        let version = |sha: Sha256| -> Result<Option<Vec<u8>>> {
            match self.objects.open_object(&sha)? {
                Some(file) => crate::store::read_all(self.disk(), &file).map(Some),
                None => Ok(None),
            }
        };
        let (Some(before), Some(after)) = (version(before)?, version(after)?) else {
            return Ok(Merged::Unmergeable("version_not_kept"));
        };
        let current = match self.ws.read_current(path, merge::MAX_MERGE_BYTES)? {
            Some(bytes) if Sha256::of(&bytes) == now => bytes,
            Some(_) => return Ok(Merged::Unmergeable("changed_while_planning")),
            None => return Ok(Merged::Unmergeable("too_large_to_merge")),
        };
        Ok(merge::revert(&before, &after, &current))
    }

    fn begin_rewind(&self, plan: &PlanFile, actor: &Actor) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(plan).expect("a plan serializes");
        let path = PlanFile::path(&plan.group);
        self.write_state(&path, &bytes, true, Some(0o644), actor)?;
        self.journal.append(rewind_row(&path, Some(Sha256::of(&bytes)), "begin", &plan.selection, actor))?;
        Ok(())
    }

    fn end_rewind(&self, plan: &PlanFile, actor: &Actor, how: &str) -> Result<()> {
        self.journal.append(rewind_row(&PlanFile::path(&plan.group), None, "end", how, actor)).map(drop)
    }

    /// Apply each step whose path still holds its `from`; a path already holding its `to` counts
    /// as applied (recovery finishing a group). Returns the count applied and the failures.
    ///
    /// The steps run in their waves' order (see [`Wave`]); inside the first two waves on
    /// [`WORKERS`] threads, so their commits share the journal's group commits and the disk's
    /// flushes (each step is still one whole commit: nothing about a crash changes).
    fn apply_steps(
        &self,
        plan: &PlanFile,
        actor: &Actor,
        changed: &(dyn Fn(&str) + Sync),
    ) -> (usize, Vec<(String, String)>) {
        let steps = &plan.steps;
        let displaced: BTreeSet<Sha256> = steps.iter().filter_map(|s| s.from).collect();
        let (mut applied, mut failed) = (0, Vec::new());
        for part in steps.chunk_by(|a, b| wave(a, &displaced) == wave(b, &displaced)) {
            let workers = match wave(&part[0], &displaced) {
                Wave::NeedsDisplaced | Wave::RemoveDirs => 1,
                Wave::Remove | Wave::Kept => WORKERS,
            };
            let next = std::sync::atomic::AtomicUsize::new(0);
            let outcomes: Vec<Vec<(usize, Result<bool>)>> = std::thread::scope(|scope| {
                let run = || {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(step) = part.get(i) else { break done };
                        let outcome = self.apply_step(step, &plan.merged, actor);
                        if matches!(outcome, Ok(true)) {
                            changed(&step.path);
                        }
                        done.push((i, outcome));
                    }
                };
                let threads: Vec<_> = (1..workers.min(part.len())).map(|_| scope.spawn(run)).collect();
                let mut all = vec![run()];
                all.extend(threads.into_iter().map(|t| t.join().unwrap_or_default()));
                all
            });
            let mut outcomes: Vec<(usize, Result<bool>)> = outcomes.into_iter().flatten().collect();
            outcomes.sort_by_key(|(i, _)| *i);
            for (i, outcome) in outcomes {
                match outcome {
                    Ok(_) => applied += 1,
                    Err(e) => failed.push((part[i].path.clone(), e.to_string())),
                }
            }
        }
        (applied, failed)
    }

    /// One step; `false` when the path already held the step's `to`. `merged`: the contents of
    /// the plan's merged versions.
    fn apply_step(&self, step: &Step, merged: &MergedContents, actor: &Actor) -> Result<bool> {
        if step.action == Action::RemoveDir {
            return self.remove_empty_dirs(&step.path);
        }
        let path: WorkspacePath = lookup(self.disk(), &self.ws.root, &step.path, Scope::Workspace)?;
        let current = self.ws.current_sha(&path)?;
        if current == step.to {
            return Ok(false);
        }
        if current != step.from {
            return Err(
                Error::from(Reason::PreconditionFailed { expected: step.from, actual: current }).at(path.to_string())
            );
        }
        match step.to {
            None => {
                self.delete(path.as_str(), step.from.map(Expect::Sha), Scope::Workspace, actor)?;
            }
            Some(sha) if step.action == Action::Merge => {
                let bytes =
                    merged.get(&sha).ok_or_else(|| Error::from(Reason::ObjectMissing { sha }).at(path.to_string()))?;
                // New content over the current file: its mode stays.
                self.install_merged(&path, bytes, actor)?;
            }
            Some(sha) => {
                let file = self
                    .objects
                    .open_object(&sha)?
                    .ok_or_else(|| Error::from(Reason::ObjectMissing { sha }).at(path.to_string()))?;
                let perm = self.disk().file_stat(&file).step("stat version")?.perm;
                self.restore_version(&path, &file, sha, actor)?;
                // The kept inode has the mode the version had when it left the tree.
                if let Ok(Some(stat)) =
                    crate::durable::resolve::resolve(self.disk(), &self.ws.root, path.as_str(), Scope::Workspace, false)
                        .map(|t| t.stat)
                    && stat.perm != perm
                {
                    let (dir, name) = self.locate(super::Entry::Path(path.as_str()), Scope::Workspace)?;
                    self.disk().set_perm(&dir, &name, perm).step("chmod")?;
                }
            }
        }
        Ok(true)
    }

    /// Is `path` a directory (not through a symlink)?
    fn is_dir(&self, path: &str) -> bool {
        self.locate(super::Entry::Path(path), Scope::Workspace)
            .ok()
            .and_then(|(dir, name)| self.disk().stat(&dir, &name).ok().flatten())
            .is_some_and(|stat| stat.kind == crate::durable::FileKind::Dir)
    }

    /// Remove the directory `path` and the directories below it, deepest first, as far as they
    /// are empty; `false` when it is gone already. One that still holds anything (a file rwfs
    /// does not journal, one written since) stays, and so does `path`: an error says so.
    fn remove_empty_dirs(&self, path: &str) -> Result<bool> {
        if !self.is_dir(path) {
            return Ok(false);
        }
        let disk = self.disk();
        let mut below = Vec::new();
        let mut todo = vec![path.to_string()];
        while let Some(dir) = todo.pop() {
            let (parent, name) = self.locate(super::Entry::Path(&dir), Scope::Workspace)?;
            let opened = disk.open_dir(&parent, &name).step("open directory").map_err(|e| e.at(&dir))?;
            for (entry, kind) in disk.list(&opened).step("list directory").map_err(|e| e.at(&dir))? {
                if kind == crate::durable::FileKind::Dir
                    && let Some(entry) = entry.to_str()
                {
                    todo.push(format!("{dir}/{entry}"));
                }
            }
            below.push(dir);
        }
        // No version staged in batch mode may still be on its way into one of them.
        self.barrier();
        // Children after their parents in `below`: remove from the end.
        for dir in below.iter().rev() {
            let (parent, name) = self.locate(super::Entry::Path(dir), Scope::Workspace)?;
            match disk.rmdir(&parent, &name) {
                Ok(()) => disk.sync_dir(&parent).step("fsync directory").map_err(|e| e.at(dir.as_str()))?,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOTEMPTY) => {}
                Err(e) => return Err(Error::io("remove directory", e).at(dir.as_str())),
            }
        }
        if self.is_dir(path) {
            return Err(Error::io("remove directory", std::io::Error::from_raw_os_error(nix::libc::ENOTEMPTY))
                .at(path.to_string()));
        }
        Ok(true)
    }

    /// Finish the rewind groups a crash interrupted (`begin` rows without `end`): see the
    /// module docs. Returns the groups finished.
    pub(crate) fn finish_rewinds(&self, open: &BTreeMap<String, (String, Option<Sha256>)>) -> Result<Vec<String>> {
        let mut finished = Vec::new();
        for (group, (path, digest)) in open {
            let actor = Actor { group: Some(group.clone()), ..Actor::engine() };
            let plan = self
                .ws
                .open_in(path, Scope::State)
                .and_then(|opened| {
                    use std::io::Read;
                    let mut bytes = Vec::new();
                    (&opened.file).read_to_end(&mut bytes).step("read rewind plan")?;
                    Ok(bytes)
                })
                .ok()
                .filter(|bytes| Some(Sha256::of(bytes)) == *digest)
                .and_then(|bytes| serde_json::from_slice::<PlanFile>(&bytes).ok());
            let how = match &plan {
                Some(plan) => {
                    let (applied, failed) = self.apply_steps(plan, &actor, &|_| {});
                    for (path, why) in &failed {
                        tracing::warn!(group, path, why, "rewind step left alone by recovery");
                    }
                    format!("finished_by_recovery applied={applied} failed={}", failed.len())
                }
                // The begin row is written after the plan is durable; an unreadable plan means
                // someone changed it: no step is taken.
                None => "abandoned_by_recovery: plan unreadable".to_string(),
            };
            let plan = plan.unwrap_or(PlanFile {
                group: group.clone(),
                selection: String::new(),
                steps: vec![],
                merged: BTreeMap::new(),
            });
            self.end_rewind(&plan, &actor, &how)?;
            finished.push(group.clone());
        }
        Ok(finished)
    }
}

/// Rewind groups begun and not ended, as the journal is read at open.
#[derive(Debug, Default)]
pub(crate) struct OpenRewinds(pub(crate) BTreeMap<String, (String, Option<Sha256>)>);

impl OpenRewinds {
    pub(crate) fn observe(&mut self, row: &Row) {
        if row.op() != Op::Rewind {
            return;
        }
        let Some(group) = &row.group else { return };
        match row.mode.as_str() {
            "begin" => {
                self.0.insert(group.clone(), (row.path.clone(), row.sha256));
            }
            _ => {
                self.0.remove(group);
            }
        }
    }
}

fn rewind_row(path: &str, sha256: Option<Sha256>, mode: &str, reason: &str, actor: &Actor) -> Change {
    Change {
        op: Op::Rewind,
        path: path.to_string(),
        from: None,
        sha256,
        prev_sha256: None,
        bytes: 0,
        mode: mode.to_string(),
        actor: actor.clone(),
        verdict: None,
        reason: Some(reason.to_string()),
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() { "(none)" } else { s }
}
