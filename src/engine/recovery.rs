//! Recovery at open: make the journal and the tree agree again after a crash.
//!
//! Only the unsettled tail needs looking at: rows with `seq` above the watermark the previous
//! owner recorded (all rwfs rows when that record is missing or unreadable). For each path such a
//! row touches:
//!
//! 1. Temp files (`.rwfs.<hex>.tmp`) in the path's directory are the previous version of an
//!    overwrite that was not moved to `objects/` yet, or a staged version that was never
//!    installed. Either way their bytes go into `objects/` and a `recover` row says so. A name
//!    alone is not enough: a file the journal says holds a version (a user's file that happens
//!    to be named like a temp, acknowledged by rwfs) is the user's and stays where it is.
//! 2. Versions the mount staged and journaled but did not install are installed (rolled
//!    forward), in row order: a version acknowledged in `batch` durability must survive a crash
//!    of any process. A mount row is done when the path holds its version or the version of a
//!    later mount row of the same path; otherwise it is installed when its draft is still in
//!    drafts/ with exactly the row's bytes and the path holds what the row replaced. The first
//!    mount row that cannot be installed (its draft lost or torn by a power loss) stops the
//!    roll forward (`Recovery::roll_forward_stopped` says where and why): no later mount row is
//!    installed either, so the tree stays a prefix of the journal.
//! 3. The path's content is compared with the last row that claims it. A difference means the
//!    crash came between a durable row and a durable change (or someone edited the tree while
//!    no engine owned it); a `recover` row records what is really there, so `verify` agrees
//!    with the tree and `history` tells what happened.
//!
//! Nothing is deleted: an unacknowledged commit may land either way, and both outcomes keep
//! every byte (drafts that are not installed go to `objects/`, see `draft.rs`). The one
//! exception holds no byte: an empty draft that names no file (made, and killed before its
//! note, for a create nobody was answered) is removed.

use std::collections::{BTreeSet, HashMap};

use crate::durable::{FileKind, Scope, is_temp_name};
use crate::error::{IoContext, Result};
use crate::journal::{Actor, Change, Ledger, Op, Row, Via};
use crate::sha::Sha256;

use super::Core;
use crate::history::{Found, found_at};

/// What recovery learned from the journal while it was read at open.
#[derive(Default)]
pub(crate) struct Claims {
    /// What the journal says every path holds.
    ledger: Ledger,
    /// Paths that rows above the watermark touched.
    unsettled: BTreeSet<String>,
    /// The path of the last row above the watermark that wrote, or replaced, each content: what
    /// an orphan draft was for when its note is gone.
    written: HashMap<Sha256, String>,
    /// The mount's new versions above the watermark, in row order (candidates to roll forward).
    mount_writes: Vec<MountWrite>,
    /// Rows observed so far: each row's place in the journal, whatever its `seq`.
    observed: u64,
    /// Path → the place of the last row on it that was not a mount write: it settles what every
    /// earlier mount row of the path meant for it.
    cleared: HashMap<String, u64>,
}

/// A version the mount journaled: its path, its digest and what it replaced.
struct MountWrite {
    /// Its place among the rows observed (see `Claims::cleared`).
    at: u64,
    seq: u64,
    path: String,
    sha: Sha256,
    prev: Option<Sha256>,
}

impl Claims {
    pub(crate) fn observe(&mut self, row: &Row, settled: Option<u64>) {
        let mut touched = self.ledger.apply(row);
        touched.push(row.path.clone());
        let unsettled = row.seq.filter(|seq| settled.is_none_or(|w| *seq > w));
        // A `create` with a `from` is a name a link or a move brought (`admit.rs`), with no
        // draft to install: waiting for one would stop the roll forward there.
        let mount_write = (row.via == Some(Via::Fuse) && matches!(row.op(), Op::Write | Op::Create))
            .then_some(row.sha256)
            .flatten()
            .filter(|_| row.from.is_none());
        let at = self.observed;
        self.observed += 1;
        match (unsettled, mount_write) {
            // Every mount row stays a candidate, a path's earlier ones included: their installs
            // were made durable before a later row of the path was written, but a power loss can
            // still find one undone (its draft then still in drafts/), and dropping it installed
            // later rows of other paths without it.
            (Some(seq), Some(sha)) => {
                let write = MountWrite { at, seq, path: row.path.clone(), sha, prev: row.prev_sha256 };
                self.mount_writes.push(write);
            }
            // Any other later row on a path (an abort, a delete, a rename, a write through MCP
            // or the CLI, each made after the batch was drained) settles what the earlier mount
            // rows meant for it.
            _ => {
                for path in &touched {
                    self.cleared.insert(path.clone(), at);
                }
            }
        }
        if unsettled.is_some() {
            for sha in [row.prev_sha256, row.sha256].into_iter().flatten() {
                self.written.insert(sha, row.path.clone());
            }
            self.unsettled.extend(touched);
        }
    }

    /// The file an unsettled row wrote `sha` to, or replaced it in.
    pub(crate) fn path_of(&self, sha: &Sha256) -> Option<&str> {
        self.written.get(sha).map(String::as_str)
    }
}

/// What recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Paths compared with the journal.
    pub checked: usize,
    /// Paths whose content differed from their last row (a `recover` row was written).
    pub corrected: Vec<String>,
    /// Temp files whose bytes were moved into `objects/`.
    pub temps_kept: Vec<String>,
    /// Drafts of a mount that died, moved into `objects/`.
    pub drafts_kept: Vec<String>,
    /// Paths given the version a mount row acknowledged and did not install.
    pub rolled_forward: Vec<String>,
    /// The first mount row that could not be rolled forward, and why: no later one was
    /// installed either (the tree stays a prefix of the journal).
    pub roll_forward_stopped: Option<String>,
    /// Orphan drafts left for after the mount is ready: holding more data than recovery hashes
    /// before it ([`RECOVERY_HASH_BUDGET`]), they wait in `drafts/` under their names until
    /// [`Engine::recover_deferred_drafts`](super::Engine::recover_deferred_drafts).
    pub drafts_deferred: Vec<String>,
    /// Rewind groups a crash interrupted, finished (see `rewind.rs`).
    pub rewinds_finished: Vec<String>,
}

/// Bytes of orphan drafts' data (holes excluded) recovery hashes before the engine is ready; the
/// rest is deferred, so a mount never waits on a huge orphan.
pub const RECOVERY_HASH_BUDGET: u64 = 256 << 20;

impl Core {
    pub(crate) fn recover(&self, claims: &Claims) -> Result<Recovery> {
        let mut report = Recovery::default();
        let actor = Actor::engine();
        let dirs: BTreeSet<String> =
            claims.unsettled.iter().map(|p| p.rsplit_once('/').map_or(String::new(), |(d, _)| d.to_string())).collect();
        for dir in dirs {
            self.keep_temps(&dir, &claims.ledger, &actor, &mut report)?;
        }
        self.roll_forward(claims, &mut report)?;
        for path in &claims.unsettled {
            let expected = claims.ledger.get(path).flatten();
            report.checked += 1;
            let found = found_at(&self.ws, path)?;
            let actual = match found {
                Found::Absent => None,
                Found::Sha(sha) => Some(sha),
                Found::Unreadable(why) => {
                    tracing::warn!(path, why, "recovery cannot read this path; left as is");
                    continue;
                }
            };
            if actual == expected {
                continue;
            }
            tracing::warn!(path, "content differs from the journal after a crash; recording it");
            let bytes = match actual {
                Some(_) => self.size_of(path).unwrap_or(0),
                None => 0,
            };
            self.journal.append(recover_row(path, actual, expected, bytes, "tree_differs_from_journal", &actor))?;
            report.corrected.push(path.clone());
        }
        self.objects.sync()?;
        Ok(report)
    }

    /// Move the bytes of every rwfs temp file in `dir` into `objects/`: a file with a temp name
    /// that the journal says holds a version is a user's file with that name, and stays.
    fn keep_temps(&self, dir_rel: &str, ledger: &Ledger, actor: &Actor, report: &mut Recovery) -> Result<()> {
        let disk = &*self.ws.disk;
        let dir = match disk.open_dir(&self.ws.root, dir_rel) {
            Ok(dir) => dir,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).step("open directory for recovery"),
        };
        for (name, kind) in disk.list(&dir).step("list directory for recovery")? {
            let Some(name) = name.to_str() else { continue };
            if kind != FileKind::File || !is_temp_name(name) || ledger.get(&dir.join(name)).flatten().is_some() {
                continue;
            }
            let file = disk.open_read(&dir, name).step("open temp file")?;
            let (sha, bytes) = crate::durable::hash_file(disk, &file).step("read temp file")?;
            self.objects.adopt(&dir, name, sha)?;
            let path = dir.join(name);
            tracing::warn!(path, sha = %sha.short(12), "kept an interrupted commit's file in objects/");
            self.journal.append(recover_row(&path, None, Some(sha), bytes, "temp_file_kept_in_objects", actor))?;
            report.temps_kept.push(path);
        }
        Ok(())
    }

    /// Install the mount's journaled versions whose drafts are intact (see the module docs).
    fn roll_forward(&self, claims: &Claims, report: &mut Recovery) -> Result<()> {
        if claims.mount_writes.is_empty() {
            return Ok(());
        }
        let disk = &*self.ws.disk;
        let dir = self.drafts_dir()?;
        let mut drafts: HashMap<Sha256, String> = HashMap::new();
        for (name, kind) in disk.list(&dir).step("list drafts")? {
            let Some(name) = name.to_str() else { continue };
            if kind != FileKind::File {
                continue;
            }
            let file = disk.open_read(&dir, name).step("open draft")?;
            let (sha, _) = crate::durable::hash_file(disk, &file).step("read draft")?;
            drafts.insert(sha, name.to_string());
        }
        // The last mount row writing each version of each path: a path holding the version of a
        // later mount row of its own had this one installed, and replaced since.
        let last_of: HashMap<(&str, Sha256), usize> =
            claims.mount_writes.iter().enumerate().map(|(i, w)| ((w.path.as_str(), w.sha), i)).collect();
        // What each path holds, read once and then kept as the installs change it.
        let mut holds: HashMap<&str, Option<Sha256>> = HashMap::new();
        for (i, write) in claims.mount_writes.iter().enumerate() {
            if claims.cleared.get(&write.path).is_some_and(|&at| at > write.at) {
                continue;
            }
            let stop = |why: String| format!("seq {} ({}): {why}", write.seq, write.path);
            let now = match holds.get(write.path.as_str()) {
                Some(now) => *now,
                None => match found_at(&self.ws, &write.path)? {
                    Found::Sha(sha) => Some(sha),
                    Found::Absent => None,
                    Found::Unreadable(why) => {
                        report.roll_forward_stopped = Some(stop(format!("the path cannot be read: {why}")));
                        break;
                    }
                },
            };
            holds.insert(&write.path, now);
            if now.is_some_and(|now| last_of.get(&(write.path.as_str(), now)).is_some_and(|&j| j >= i)) {
                continue;
            }
            let Some(name) = drafts.get(&write.sha).filter(|_| now == write.prev).cloned() else {
                let why = match (drafts.contains_key(&write.sha), now) {
                    (false, _) => "its draft is not in drafts/ with the row's bytes".to_string(),
                    (true, Some(now)) => format!("the path holds {}, not what the row replaced", now.short(12)),
                    (true, None) => "the path is absent, and the row replaced a version".to_string(),
                };
                report.roll_forward_stopped = Some(stop(why));
                break;
            };
            if let Err(e) = self.install_draft(&dir, &name, write, now) {
                report.roll_forward_stopped = Some(stop(format!("its install failed: {e}")));
                break;
            }
            drafts.remove(&write.sha);
            holds.insert(&write.path, Some(write.sha));
            tracing::warn!(path = write.path, sha = %write.sha.short(12), "installed a version the mount had acknowledged");
            report.rolled_forward.push(write.path.clone());
        }
        if let Some(stopped) = &report.roll_forward_stopped {
            tracing::warn!(
                stopped,
                "a journaled version of the mount cannot be rolled forward; later ones are not installed"
            );
        }
        Ok(())
    }

    /// Install draft `dir/name` as `write` says, durably; the displaced version into objects/.
    fn install_draft(
        &self,
        dir: &crate::durable::Dir,
        name: &str,
        write: &MountWrite,
        now: Option<Sha256>,
    ) -> Result<()> {
        let disk = &*self.ws.disk;
        let target = crate::durable::resolve::resolve(disk, &self.ws.root, &write.path, Scope::Workspace, true)?;
        let file = disk.open_read(dir, name).step("open draft")?;
        let len = disk.file_stat(&file).step("stat draft")?.size;
        let home = std::sync::Arc::new(dir.try_clone().step("dup drafts directory")?);
        let staged = crate::durable::Staged::adopt(
            file,
            home,
            name.to_string(),
            write.sha,
            len,
            Some(crate::durable::layout::DRAFT_TARGET_XATTR),
        );
        let (displaced, _) = self.put_in_place(&target, &staged, false)?;
        disk.sync_dir(&target.parent).step("fsync directory")?;
        if let (Some(displaced), Some(prev)) = (displaced, now) {
            self.objects.adopt(&displaced.dir, &displaced.name, prev)?;
        }
        Ok(())
    }

    fn size_of(&self, path: &str) -> Option<u64> {
        let target = crate::durable::resolve::resolve(&*self.ws.disk, &self.ws.root, path, Scope::State, false).ok()?;
        target.stat.map(|s| s.size)
    }
}

fn recover_row(
    path: &str,
    now: Option<Sha256>,
    claimed: Option<Sha256>,
    bytes: u64,
    reason: &str,
    actor: &Actor,
) -> Change {
    Change {
        op: Op::Recover,
        path: path.to_string(),
        from: None,
        sha256: now,
        prev_sha256: claimed,
        bytes,
        mode: String::new(),
        actor: actor.clone(),
        verdict: None,
        reason: Some(reason.to_string()),
    }
}
