//! The commit protocol: how a new version, a delete or a restore reaches the tree.
//!
//! ```text
//!   resolve  the path beneath the root (typed refusal, nothing touched)
//!   lock     the path (per-path serialisation)
//!   read     the current version: digest (cached by inode), attributes; check preconditions
//!   gate     the whole new version scored and judged by the policy; refused content goes to
//!            objects/, a `block` row and rejections/<id>.json instead (gate.rs) → blocked
//!   stage    temp file in the target's directory, attributes carried, bytes written and read
//!            back; the two digests must agree                     → write_corruption
//!   round 1  ┌ journal row submitted (group commit: one fdatasync per batch)
//!            └ fsync(temp)                                  — concurrently
//!   install  link (create) or RENAME_EXCHANGE (overwrite): one atomic directory operation
//!   round 2  fsync(directory)                                          → acknowledge
//!   settle   the displaced previous inode is renamed into objects/ (synced lazily, before
//!            the settle watermark passes this row; retried by the settle thread on failure)
//! ```
//!
//! Why this order (the journal is a write-ahead log of intent):
//! - The row is durable before the change is visible, so no change can ever be on disk without
//!   its row. A row whose change did not become durable (crash between round 1 and round 2) is
//!   in the unsettled tail, which recovery compares with the tree and corrects with a `recover`
//!   row; see `settle.rs` and `recovery.rs`.
//! - The temp file is durable before it is installed, so a crash never exposes a torn file: the
//!   name holds the old inode or the complete new one.
//! - The previous version is kept by swapping names, not by copying: after the exchange it sits
//!   under a temp name in the same directory (found by recovery if a crash comes first) and is
//!   then moved into `objects/`. Nothing that was ever acknowledged is lost.
//! - Two sync rounds per commit, like the minimal temp + fsync + rename + fsync(dir) protocol:
//!   the journal's fdatasync overlaps the temp file's fsync and is shared by every commit of the
//!   batch.
//! - A failure after the row is durable but before the change is visible appends an `abort`
//!   row; a failure after the change is visible but before it is durable leaves the row
//!   unsettled for recovery, since only the next start can know which way the disk went.

use std::borrow::Cow;
use std::str::FromStr;

use std::sync::PoisonError;

use nix::libc;

use crate::durable::{
    Attrs, Disk, Displaced, File, FileKind, Install, Scope, Source, Staged, Stat, Target, WorkspacePath, hash_file,
    resolve::resolve, stage, stage_into,
};
use crate::error::{Error, IoContext, Reason, Result};
use crate::journal::{Actor, Change, Op};
use crate::policy::Operation;
use crate::sha::Sha256;

use super::Core;
use super::gate::{Quarantine, Refusal, SCAN_MAX};
use super::settle::Token;

/// Versions at least this big have their pages dropped from the cache when they leave the tree
/// (below it the hint costs more than the memory it frees).
pub(crate) const DROP_CACHE_MIN: u64 = 64 * 1024;

/// The reference server's write modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// The file must not exist.
    Create,
    /// Replace the content (creating the file if needed).
    Overwrite,
    /// Add to the end (creating the file if needed).
    Append,
    /// Replace the content of a file after a find-and-replace (`rw_safe_replace`): written as
    /// `Overwrite`, journaled with the reference's mode `replace`.
    Replace,
}

impl WriteMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteMode::Create => "create",
            WriteMode::Overwrite => "overwrite",
            WriteMode::Append => "append",
            WriteMode::Replace => "replace",
        }
    }
}

impl FromStr for WriteMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<WriteMode> {
        match s {
            "create" => Ok(WriteMode::Create),
            "overwrite" => Ok(WriteMode::Overwrite),
            "append" => Ok(WriteMode::Append),
            _ => Err(Reason::InvalidArgument { what: "mode (create, overwrite or append)" }.into()),
        }
    }
}

/// A precondition on the version being replaced (`expected_prev_sha256`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The path must not exist (the reference's `""`).
    Absent,
    /// The current content must hash to this.
    Sha(Sha256),
}

impl Expect {
    /// The reference's encoding: `""` means absent, otherwise a lowercase hex digest.
    pub fn parse(s: &str) -> Result<Expect> {
        if s.is_empty() {
            return Ok(Expect::Absent);
        }
        s.parse()
            .map(Expect::Sha)
            .map_err(|_| Reason::InvalidArgument { what: "expected sha256 (64 lowercase hex digits, or \"\")" }.into())
    }

    fn check(self, actual: Option<Sha256>) -> Result<()> {
        let expected = match self {
            Expect::Absent => None,
            Expect::Sha(sha) => Some(sha),
        };
        if expected == actual { Ok(()) } else { Err(Reason::PreconditionFailed { expected, actual }.into()) }
    }
}

/// A write through the engine.
#[derive(Debug, Clone)]
pub struct WriteRequest<'a> {
    pub path: &'a str,
    pub content: &'a [u8],
    pub mode: WriteMode,
    pub expect: Option<Expect>,
    pub actor: &'a Actor,
}

/// An acknowledged, durable change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub path: WorkspacePath,
    pub op: Op,
    /// The path's content now (`None` after a delete).
    pub sha256: Option<Sha256>,
    /// The content it replaced (`None`: the path was absent).
    pub prev_sha256: Option<Sha256>,
    /// Size of the new content.
    pub bytes: u64,
    pub seq: u64,
    pub journal_id: String,
    pub ts: String,
    /// Attributes of the previous version that could not be carried over.
    pub attrs_skipped: Vec<String>,
}

impl Committed {
    /// A new version (`sha`, `bytes`) of `path`, journaled as `appended`.
    pub(crate) fn version(
        path: &WorkspacePath,
        op: Op,
        (sha, bytes): (Sha256, u64),
        prev: Option<Sha256>,
        appended: crate::journal::Appended,
        attrs_skipped: Vec<String>,
    ) -> Committed {
        Committed {
            path: path.clone(),
            op,
            sha256: Some(sha),
            prev_sha256: prev,
            bytes,
            seq: appended.seq,
            journal_id: appended.journal_id,
            ts: appended.ts,
            attrs_skipped,
        }
    }
}

/// What the new version is made of.
enum Content<'a> {
    Bytes(&'a [u8]),
    Append(&'a [u8]),
    /// A stored version; its bytes must hash to `sha`.
    Version {
        file: &'a File,
        sha: Sha256,
    },
}

struct Plan<'a> {
    content: Content<'a>,
    create_only: bool,
    expect: Option<Expect>,
    /// The reference `mode` string for the row.
    mode: &'static str,
    restore: bool,
    /// Scored and judged by the policy (every workspace file; not the engine's own state).
    gated: bool,
    /// A version a person approved (`approve.rs`): the protect rules asked already, the
    /// content gate has not.
    approved: bool,
    /// Permission bits of a new file (`None`: the umask's default).
    new_perm: Option<u32>,
    actor: &'a Actor,
}

/// The version a path holds when a commit starts, open: its bytes are read (an append's base,
/// the gate's whole version, a draft's copy, a delete's drop of its pages).
pub(crate) struct Current {
    pub(crate) file: File,
    pub(crate) stat: Stat,
    pub(crate) sha: Sha256,
}

impl Current {
    /// The attributes a new version of this file carries over: mode, owner, xattrs.
    pub(crate) fn attrs(&self, disk: &dyn Disk) -> Result<Attrs> {
        carried_attrs(disk, &self.file, &self.stat)
    }
}

/// The version a path holds, known by its digest: what a commit that replaces it needs (the
/// row's `prev`, the version moved into `objects/`). Invariant: `file` is open on the version
/// whenever its digest had to be read, or it is large enough that its pages are dropped once it
/// is displaced (`DROP_CACHE_MIN`); a small file whose digest the cache holds for its stat is
/// looked at by one `stat` of its name, and `file` is `None`.
pub(crate) struct Held {
    pub(crate) stat: Stat,
    pub(crate) sha: Sha256,
    pub(crate) file: Option<File>,
}

impl From<Current> for Held {
    fn from(Current { file, stat, sha }: Current) -> Held {
        Held { stat, sha, file: Some(file) }
    }
}

/// The attributes a new version of the file open as `file` carries over: mode, owner, xattrs.
pub(crate) fn carried_attrs(disk: &dyn Disk, file: &File, stat: &Stat) -> Result<Attrs> {
    Ok(Attrs {
        perm: Some(stat.perm),
        owner: Some((stat.uid, stat.gid)),
        xattrs: disk.xattrs(file).step("read extended attributes")?,
    })
}

impl Core {
    /// Write a new version of a workspace file.
    pub(crate) fn safe_write(&self, req: &WriteRequest<'_>) -> Result<Committed> {
        let target = self.resolve_for_write(req.path, req.expect, Scope::Workspace)?;
        let content = match req.mode {
            WriteMode::Append => Content::Append(req.content),
            WriteMode::Create | WriteMode::Overwrite | WriteMode::Replace => Content::Bytes(req.content),
        };
        let plan = Plan {
            content,
            create_only: req.mode == WriteMode::Create,
            expect: req.expect,
            mode: req.mode.as_str(),
            restore: false,
            gated: true,
            approved: false,
            new_perm: None,
            actor: req.actor,
        };
        self.commit(target, plan)
    }

    /// Write a file of the engine's own state (`path` begins with `.resilient_write/`): the same
    /// protocol and row as any write, not gated (the scratchpad holds secrets by design).
    pub(crate) fn write_state(
        &self,
        path: &str,
        content: &[u8],
        create_only: bool,
        new_perm: Option<u32>,
        actor: &Actor,
    ) -> Result<Committed> {
        let target = self.resolve_for_write(path, None, Scope::State)?;
        let plan = Plan {
            content: Content::Bytes(content),
            create_only,
            expect: None,
            mode: if create_only { "create" } else { "overwrite" },
            restore: false,
            gated: false,
            approved: false,
            new_perm,
            actor,
        };
        self.commit(target, plan)
    }

    /// Make `sha` (read from `file`, a stored version) the content of `path` again.
    pub(crate) fn restore_version(
        &self,
        path: &WorkspacePath,
        file: &File,
        sha: Sha256,
        actor: &Actor,
    ) -> Result<Committed> {
        self.restore(path, Content::Version { file, sha }, "restore", actor)
    }

    /// Install a rewind's merge of `path` (`rewind.rs`): a `restore` row with mode `merge`.
    pub(crate) fn install_merged(&self, path: &WorkspacePath, merged: &[u8], actor: &Actor) -> Result<Committed> {
        self.restore(path, Content::Bytes(merged), "merge", actor)
    }

    fn restore(
        &self,
        path: &WorkspacePath,
        content: Content<'_>,
        mode: &'static str,
        actor: &Actor,
    ) -> Result<Committed> {
        let target = self.resolve_for_write(path.as_str(), None, Scope::Workspace)?;
        let plan = Plan {
            content,
            create_only: false,
            expect: None,
            mode,
            restore: true,
            gated: true,
            approved: false,
            new_perm: None,
            actor,
        };
        self.commit(target, plan)
    }

    /// Install `sha` (read from `file`, a version parked for approval) at `path`, over the
    /// version `expect` names: a `restore` row, judged by the content gate and not by the
    /// protect rules (a person approved it).
    pub(crate) fn install_approved(
        &self,
        path: &WorkspacePath,
        file: &File,
        sha: Sha256,
        expect: Option<Expect>,
        actor: &Actor,
    ) -> Result<Committed> {
        let target = self.resolve_for_write(path.as_str(), expect, Scope::Workspace)?;
        let plan = Plan {
            content: Content::Version { file, sha },
            create_only: false,
            expect,
            mode: "restore",
            restore: true,
            gated: true,
            approved: true,
            new_perm: None,
            actor,
        };
        self.commit(target, plan)
    }

    /// Remove a file, keeping its content in `objects/`.
    pub(crate) fn delete(&self, path: &str, expect: Option<Expect>, scope: Scope, actor: &Actor) -> Result<Committed> {
        let _order = self.barrier();
        self.delete_ordered(path, expect, scope, actor)
    }

    /// [`Core::delete`] for a caller that holds the barrier's turn already.
    pub(crate) fn delete_ordered(
        &self,
        path: &str,
        expect: Option<Expect>,
        scope: Scope,
        actor: &Actor,
    ) -> Result<Committed> {
        let disk = self.disk();
        let target = resolve(disk, &self.ws.root, path, scope, false)?;
        let at = target.path.to_string();
        let _guard = self.locks.lock(&target.path);
        let current =
            self.current(&target).map_err(|e| e.at(&at))?.ok_or_else(|| Error::from(Reason::NotFound).at(&at))?;
        if let Some(expect) = expect {
            expect.check(Some(current.sha)).map_err(|e| e.at(&at))?;
        }
        if scope == Scope::Workspace {
            self.guard(Operation::Delete, &at, actor, Some(current.stat.size), || None)?;
        }
        let token = self.tracker.begin(self.journal.durable_seq());
        let change = Change {
            op: Op::Delete,
            path: at.clone(),
            from: None,
            sha256: None,
            prev_sha256: Some(current.sha),
            bytes: 0,
            mode: String::new(),
            actor: actor.clone(),
            verdict: None,
            reason: None,
        };
        // A delete is how a user frees a full disk: its row and its entry in objects/ may use
        // the reserve kept for that (`reserve.rs`).
        let appended = match self.freeing(|| self.journal.append(change.clone())) {
            Ok(appended) => appended,
            Err(e) => {
                self.tracker.end(token);
                return Err(e.at(at));
            }
        };
        if let Err(e) = self.freeing(|| self.objects.adopt(&target.parent, &target.name, current.sha)) {
            return Err(self.abort(token, &target.path, Some(current.sha), None, actor, e));
        }
        if let Err(e) = disk.sync_dir(&target.parent) {
            // The delete may or may not be durable: leave the row unsettled for recovery.
            drop(token);
            return Err(Error::io("fsync directory", e).at(at));
        }
        self.tracker.end(token);
        if current.stat.size >= DROP_CACHE_MIN {
            disk.drop_cache(&current.file);
        }
        tracing::info!(path = %target.path, seq = appended.seq, pid = actor.pid, comm = actor.comm.as_deref(), "deleted");
        Ok(Committed {
            path: target.path,
            op: Op::Delete,
            sha256: None,
            prev_sha256: Some(current.sha),
            bytes: 0,
            seq: appended.seq,
            journal_id: appended.journal_id,
            ts: appended.ts,
            attrs_skipped: Vec::new(),
        })
    }

    /// Resolve a write target, creating missing directories only when the write can succeed.
    fn resolve_for_write(&self, path: &str, expect: Option<Expect>, scope: Scope) -> Result<Target> {
        let disk = self.disk();
        match resolve(disk, &self.ws.root, path, scope, false) {
            Err(e) if *e.reason() == Reason::NotFound => {
                if let Some(expect) = expect {
                    expect.check(None).map_err(|e| e.at(path))?;
                }
                resolve(disk, &self.ws.root, path, scope, true)
            }
            other => other,
        }
    }

    fn commit(&self, target: Target, plan: Plan<'_>) -> Result<Committed> {
        let _order = self.barrier();
        let at = target.path.to_string();
        let _guard = self.locks.lock(&target.path);
        self.commit_locked(&target, plan).map_err(|e| e.at(at))
    }

    fn commit_locked(&self, target: &Target, plan: Plan<'_>) -> Result<Committed> {
        let disk = self.disk();
        let current = self.current(target)?;
        let prev = current.as_ref().map(|c| c.sha);
        if plan.create_only
            && let Some(existing) = prev
        {
            return Err(Reason::AlreadyExists { existing }.into());
        }
        if let Some(expect) = plan.expect {
            expect.check(prev)?;
        }
        let mut credential = false;
        if plan.gated {
            // The whole new version when it fits the scanner; else the bytes sent, in windows.
            let whole = self.whole_version(&plan.content, current.as_ref())?;
            if !plan.approved {
                let prev_size = current.as_ref().map(|c| c.stat.size);
                let new_size = match &plan.content {
                    Content::Bytes(bytes) => bytes.len() as u64,
                    Content::Append(tail) => prev_size.unwrap_or(0) + tail.len() as u64,
                    Content::Version { file, .. } => disk.file_stat(file).step("stat stored version")?.size,
                };
                // What a refusal keeps: the whole version (which approval can park), else the
                // bytes sent.
                let kept = match (&whole, &plan.content) {
                    (Some(whole), _) => Some((&whole[..], true)),
                    (None, Content::Bytes(bytes)) => Some((*bytes, true)),
                    (None, Content::Append(tail)) => Some((*tail, false)),
                    (None, Content::Version { .. }) => None,
                };
                let kept = || {
                    kept.map(|(bytes, whole)| super::protect::Kept {
                        content: Quarantine::Bytes(bytes),
                        sha: Sha256::of(bytes),
                        bytes: bytes.len() as u64,
                        whole,
                    })
                };
                let damage = super::protect::truncation(prev_size, new_size);
                let op = super::protect::version_op(current.is_some());
                self.guard(op, target.path.as_str(), plan.actor, damage, kept)?;
            }
            let judged_as = self.judged_as(target.path.as_str(), plan.actor);
            let judged = match (&whole, &plan.content) {
                (Some(content), _) => self.gate.judge(&judged_as, content).map(|j| (j, &content[..])),
                (None, Content::Bytes(bytes) | Content::Append(bytes)) => {
                    self.gate.judge_windows(&judged_as, bytes).map(|j| (j, *bytes))
                }
                (None, Content::Version { .. }) => None,
            };
            credential = judged.as_ref().is_some_and(|(j, _)| super::gate::holds_credential(j));
            if let Some((judgement, refused)) = judged
                && judgement.blocks()
            {
                return Err(self.refuse(Refusal {
                    path: &target.path,
                    content: Quarantine::Bytes(refused),
                    sha: Sha256::of(refused),
                    bytes: refused.len() as u64,
                    prev,
                    judgement,
                    actor: plan.actor,
                }));
            }
        }
        let source = match (&plan.content, &current) {
            (Content::Bytes(bytes), _) | (Content::Append(bytes), None) => Source::Bytes(bytes),
            (Content::Append(tail), Some(cur)) => Source::Append { base: &cur.file, len: cur.stat.size, tail },
            (Content::Version { file, .. }, _) => {
                Source::File { file, len: disk.file_stat(file).step("stat stored version")?.size }
            }
        };
        let attrs = match &current {
            Some(cur) => cur.attrs(disk)?,
            None => Attrs { perm: plan.new_perm, ..Attrs::default() },
        };
        let staged = match self.spares.take(disk, &target.parent) {
            Some(spare) => stage_into(disk, &target.parent, spare, source, &attrs)?,
            None => stage(disk, &target.parent, source, &attrs)?,
        };
        if let Content::Version { sha, .. } = plan.content
            && staged.sha256() != sha
        {
            let actual = staged.sha256();
            staged.abandon(disk, &target.parent);
            return Err(Reason::ObjectCorrupt { sha, actual }.into());
        }
        if credential {
            self.objects.mark_sensitive(staged.sha256());
        }
        for skipped in &staged.attrs_skipped {
            tracing::warn!(path = %target.path, attribute = %skipped, "attribute not carried over");
        }
        let op = match (&plan.content, &current) {
            _ if plan.restore => Op::Restore,
            (_, None) => Op::Create,
            (Content::Append(_), Some(_)) => Op::Append,
            _ => Op::Write,
        };
        let landed = self.land(target, &staged, current.map(Held::from).as_ref(), op, plan.mode, plan.actor);
        if landed.is_ok() {
            // The next small commit in this directory starts with its inode made.
            self.spares.prepare(&target.parent);
        }
        landed
    }

    /// The second half of every commit, once a verified version is staged: round 1 (the row
    /// and the file's data made durable together), install, round 2 (the directory), settle.
    /// A failure before the install abandons the staged file (an adopted draft stays where it
    /// is, for a retry); after the install nothing is removed.
    pub(crate) fn land(
        &self,
        target: &Target,
        staged: &Staged,
        current: Option<&Held>,
        op: Op,
        mode: &str,
        actor: &Actor,
    ) -> Result<Committed> {
        let disk = self.disk();
        let prev = current.map(|c| c.sha);
        let (sha, bytes, new_id) = (staged.sha256(), staged.len(), staged.file().id());
        let attrs_skipped = staged.attrs_skipped.clone();

        // Round 1: the row and the staged file's data become durable together.
        let token = self.tracker.begin(self.journal.durable_seq());
        let pending = self.journal.submit(version_row(op, &target.path, sha, prev, bytes, mode, actor));
        let synced = staged.sync(disk);
        let appended = match pending.wait() {
            Ok(appended) => appended,
            Err(e) => {
                staged.abandon(disk, &target.parent);
                self.tracker.end(token);
                return Err(e);
            }
        };
        if let Err(e) = synced {
            staged.abandon(disk, &target.parent);
            return Err(self.abort(token, &target.path, prev, Some(sha), actor, e));
        }

        // Install, then round 2.
        let how = if current.is_some() { Install::Exchange } else { Install::Create };
        let displaced =
            match staged.install(disk, &target.parent, &target.name, how, current.and_then(|c| c.file.as_ref())) {
                Ok(displaced) => displaced,
                Err(e) => {
                    let e = self.explain_install_error(target, e);
                    return Err(self.abort(token, &target.path, prev, Some(sha), actor, e));
                }
            };
        if let Err(e) = disk.sync_dir(&target.parent) {
            // Visible but maybe not durable: only the next start can tell; leave it unsettled.
            drop(token);
            return Err(Error::io("fsync directory", e));
        }

        // Acknowledged. Settle the previous version.
        self.installed(target, new_id, sha, displaced.zip(current), token);
        tracing::info!(path = %target.path, op = op.as_str(), seq = appended.seq, sha256 = %sha.short(12), bytes, pid = actor.pid, comm = actor.comm.as_deref(), "committed");
        Ok(Committed::version(&target.path, op, (sha, bytes), prev, appended, attrs_skipped))
    }

    /// A new version is installed durably at `target`: remember its digest, move the version
    /// it displaced into `objects/` and end the commit's token (then, or once that is done).
    pub(crate) fn installed(
        &self,
        target: &Target,
        new_id: crate::durable::FileId,
        sha: Sha256,
        displaced: Option<(Displaced, &Held)>,
        token: Token,
    ) {
        let disk = self.disk();
        if let Ok(Some(stat)) = disk.stat(&target.parent, &target.name)
            && stat.id == new_id
        {
            self.cache.put(&stat, sha);
        }
        match displaced {
            Some((displaced, cur)) => {
                self.settle(displaced, cur.sha, token);
                // Open whenever it is this large (`Held`).
                if let Some(file) = cur.file.as_ref().filter(|_| cur.stat.size >= DROP_CACHE_MIN) {
                    disk.drop_cache(file);
                }
            }
            None => self.tracker.end(token),
        }
    }

    /// The whole new version in memory, for the gate; `None` when it is larger than the gate
    /// scans.
    fn whole_version<'c>(&self, content: &Content<'c>, current: Option<&Current>) -> Result<Option<Cow<'c, [u8]>>> {
        let (file, len, tail): (Option<&File>, u64, &[u8]) = match (content, current) {
            (Content::Bytes(bytes), _) | (Content::Append(bytes), None) => (None, 0, bytes),
            (Content::Append(tail), Some(cur)) => (Some(&cur.file), cur.stat.size, tail),
            (Content::Version { file, .. }, _) => {
                (Some(file), self.disk().file_stat(file).step("stat stored version")?.size, &[])
            }
        };
        if len + tail.len() as u64 > SCAN_MAX as u64 {
            return Ok(None);
        }
        let Some(file) = file else {
            return Ok(Some(Cow::Borrowed(tail)));
        };
        let mut whole = vec![0u8; len as usize];
        let mut got = 0;
        while got < whole.len() {
            match self.disk().read_at(file, &mut whole[got..], got as u64).step("read current version")? {
                0 => break,
                n => got += n,
            }
        }
        whole.truncate(got);
        whole.extend_from_slice(tail);
        Ok(Some(Cow::Owned(whole)))
    }

    /// Move a displaced version into `objects/` and end its commit's token. If that fails the
    /// version stays under its temp name (recovery would find it after a crash) and the settle
    /// thread tries again; until then the watermark stays below the commit's row.
    pub(crate) fn settle(&self, displaced: Displaced, sha: Sha256, token: Token) {
        match self.objects.adopt(&displaced.dir, &displaced.name, sha) {
            Ok(()) => self.tracker.end(token),
            Err(e) => {
                let path = displaced.dir.join(&displaced.name);
                tracing::error!(%path, error = %e, "previous version not moved to objects/ yet; will retry");
                self.unsettled.lock().unwrap_or_else(PoisonError::into_inner).push((displaced, sha, token));
            }
        }
    }

    /// Retry the adoptions that failed; returns how many are still waiting.
    pub(crate) fn retry_unsettled(&self) -> usize {
        let waiting = std::mem::take(&mut *self.unsettled.lock().unwrap_or_else(PoisonError::into_inner));
        for (displaced, sha, token) in waiting {
            self.settle(displaced, sha, token);
        }
        self.unsettled.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// The regular file at the target now, open, with its digest.
    pub(crate) fn current(&self, target: &Target) -> Result<Option<Current>> {
        if self.stat_regular(target)?.is_none() {
            return Ok(None);
        }
        self.open_hashed(target)
    }

    /// The regular file at the target now, by its digest (see [`Held`]): one `stat` when the
    /// digest cache knows it.
    pub(crate) fn held(&self, target: &Target) -> Result<Option<Held>> {
        let Some(stat) = self.stat_regular(target)? else { return Ok(None) };
        if stat.size < DROP_CACHE_MIN
            && let Some(sha) = self.cache.get(&stat)
        {
            return Ok(Some(Held { stat, sha, file: None }));
        }
        Ok(self.open_hashed(target)?.map(Held::from))
    }

    /// The attributes the file at the target carries over to a version that does not start from
    /// its bytes (`O_TRUNC`): they are not read, nor hashed.
    pub(crate) fn current_attrs(&self, target: &Target) -> Result<Option<Attrs>> {
        if self.stat_regular(target)?.is_none() {
            return Ok(None);
        }
        let Some((file, stat)) = self.open_current(target)? else { return Ok(None) };
        carried_attrs(self.disk(), &file, &stat).map(Some)
    }

    /// The stat of the target, if it names a regular file; a directory or any other kind is an
    /// error.
    fn stat_regular(&self, target: &Target) -> Result<Option<Stat>> {
        match self.disk().stat(&target.parent, &target.name).step("stat target")? {
            Some(stat) if stat.kind == FileKind::Dir => Err(Reason::IsDirectory.into()),
            Some(stat) if stat.kind != FileKind::File => Err(Reason::NotRegularFile.into()),
            stat => Ok(stat),
        }
    }

    /// [`Core::open_current`] with the opened version's digest.
    fn open_hashed(&self, target: &Target) -> Result<Option<Current>> {
        let Some((file, stat)) = self.open_current(target)? else { return Ok(None) };
        let sha = self.digest_of(&file, &stat)?;
        Ok(Some(Current { file, stat, sha }))
    }

    /// Open the file at the target (stat as a regular file by the caller) and stat what was
    /// opened: the name may have changed in between.
    fn open_current(&self, target: &Target) -> Result<Option<(File, Stat)>> {
        let disk = self.disk();
        let file = match disk.open_read(&target.parent, &target.name) {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            // A symlink swapped in after the stat: O_NOFOLLOW refuses it.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(Reason::NotRegularFile.into());
            }
            Err(e) => return Err(Error::io("open current version", e)),
        };
        let stat = disk.file_stat(&file).step("stat current version")?;
        if stat.kind != FileKind::File {
            return Err(Reason::NotRegularFile.into());
        }
        Ok(Some((file, stat)))
    }

    /// The digest of the version open as `file`: the cache's, or read (and remembered).
    fn digest_of(&self, file: &File, stat: &Stat) -> Result<Sha256> {
        if let Some(sha) = self.cache.get(stat) {
            return Ok(sha);
        }
        let disk = self.disk();
        // Hashing the current version is rwfs's business, not an access.
        disk.quiet_reads(file);
        let (sha, _) = hash_file(disk, file).step("read current version")?;
        self.cache.put(stat, sha);
        Ok(sha)
    }

    /// A create that lost a race with another process reports what is there now.
    fn explain_install_error(&self, target: &Target, e: Error) -> Error {
        if e.raw_os_error() != Some(libc::EEXIST) {
            return e;
        }
        match self.current(target) {
            Ok(Some(cur)) => Reason::AlreadyExists { existing: cur.sha }.into(),
            _ => e,
        }
    }

    /// Record that the commit whose row is durable did not happen, and return its error.
    pub(crate) fn abort(
        &self,
        token: Token,
        path: &WorkspacePath,
        unchanged: Option<Sha256>,
        claimed: Option<Sha256>,
        actor: &Actor,
        error: Error,
    ) -> Error {
        // Unjournaled, the token stays open: the watermark stays below the row, recovery looks.
        if self.abort_row(path, unchanged, claimed, actor, &error) {
            self.tracker.end(token);
        }
        error
    }

    /// The `abort` row of [`Core::abort`] alone (the caller ends the token); whether it was
    /// journaled (a failure is logged).
    pub(crate) fn abort_row(
        &self,
        path: &WorkspacePath,
        unchanged: Option<Sha256>,
        claimed: Option<Sha256>,
        actor: &Actor,
        error: &Error,
    ) -> bool {
        let change = Change {
            op: Op::Abort,
            path: path.to_string(),
            from: None,
            sha256: unchanged,
            prev_sha256: claimed,
            bytes: 0,
            mode: String::new(),
            actor: actor.clone(),
            verdict: None,
            reason: Some(error.reason().code().to_string()),
        };
        match self.journal.append(change) {
            Ok(_) => true,
            Err(e) => {
                tracing::error!(%path, error = %e, "cannot journal an aborted commit");
                false
            }
        }
    }

    pub(crate) fn disk(&self) -> &dyn Disk {
        &*self.ws.disk
    }
}

/// The row of a new version of `path`.
pub(crate) fn version_row(
    op: Op,
    path: &WorkspacePath,
    sha: Sha256,
    prev: Option<Sha256>,
    bytes: u64,
    mode: &str,
    actor: &Actor,
) -> Change {
    Change {
        op,
        path: path.to_string(),
        from: None,
        sha256: Some(sha),
        prev_sha256: prev,
        bytes,
        mode: mode.to_string(),
        actor: actor.clone(),
        verdict: None,
        reason: None,
    }
}
