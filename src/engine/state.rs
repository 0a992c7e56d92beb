//! Writing the engine's own files under `.resilient_write/` (chunk sessions, the scratchpad,
//! checkpoints, handoff archives) for the tool layers. Reading them back, and plain reads of
//! workspace files, is the read side's (`history/read.rs`: `Workspace::state_read`, …).
//!
//! Names given here are relative to the state directory (`chunks/s1/part-001.txt`) and are
//! built by the tool layers from validated parts; they are still resolved beneath the root, so
//! a bad name is refused, never followed out.
//!
//! Invariants:
//! - a state file is written by the same protocol as any workspace file (temp, fsync, install,
//!   fsync(dir), a row), so it is whole after a crash and every version of it is kept; the only
//!   difference is that it is not gated (the scratchpad holds secrets by design);
//! - an index file ([`State::append_line`]) only ever grows by whole lines: a torn last line left
//!   by a crash is closed with a newline before the next line, so readers can skip it;
//! - [`StateLock`] serialises read-modify-write sequences on one name within the engine (one
//!   engine per workspace, so that is every writer); its locks are not the ones writes take, so
//!   a holder can write the very file it locked.

use std::sync::MutexGuard;

use crate::durable::resolve::{open_parent, resolve};
use crate::durable::{STATE_DIR, Scope};
use crate::error::{Error, IoContext, Reason, Result};
use crate::journal::Actor;
use crate::sha::Sha256;

use crate::history::read::state_path;

use super::{Committed, Core, Engine};

/// The state directory's files as the tool layers write them (chunk sessions, the scratchpad,
/// checkpoints, handoff archives, the HTTP token): names relative to `.resilient_write/`,
/// resolved beneath the root. It owns the invariants above: whole versions written by the
/// commit protocol and journaled (never gated), index files that grow by whole lines, and
/// per-name locks apart from the ones writes take.
#[derive(Clone, Copy)]
pub struct State<'a> {
    core: &'a Core,
}

/// Holds the engine's lock of one state name.
pub struct StateLock<'a> {
    _guard: MutexGuard<'a, ()>,
}

/// Give the state directory its `.gitignore` (`*`) when it has none: created with the
/// directory, and added to older workspaces at their next open. Not journaled (it is part of
/// the directory's layout, like the lock file); durable before the engine is used.
pub(crate) fn ensure_gitignore(disk: &dyn crate::durable::Disk, state: &crate::durable::Dir) -> Result<()> {
    use crate::durable::layout::{GITIGNORE, GITIGNORE_CONTENT};
    if disk.stat(state, GITIGNORE).step("stat state .gitignore")?.is_some() {
        return Ok(());
    }
    let temp = disk.create_temp(state, 0o644).step("create state .gitignore")?;
    disk.write_at(&temp.file, GITIGNORE_CONTENT, 0).step("write state .gitignore")?;
    disk.sync(&temp.file).step("fsync state .gitignore")?;
    let installed = match &temp.name {
        Some(name) => disk.rename(state, name, state, GITIGNORE, crate::durable::Rename::NoReplace),
        None => disk.link(&temp.file, state, GITIGNORE),
    };
    match installed {
        Ok(()) => disk.sync_dir(state).step("fsync state directory"),
        Err(e) if e.raw_os_error() == Some(nix::libc::EEXIST) => {
            if let Some(name) = &temp.name {
                let _ = disk.unlink(state, name);
            }
            Ok(())
        }
        Err(e) => Err(Error::io("install state .gitignore", e)),
    }
}

impl<'a> State<'a> {
    /// Write the state file `rel` (create-only or replace), journaled; `private` files are
    /// created mode 0600.
    pub fn write(
        &self,
        rel: &str,
        content: &[u8],
        create_only: bool,
        private: bool,
        actor: &Actor,
    ) -> Result<Committed> {
        let perm = private.then_some(0o600);
        self.core.write_state(&state_path(rel), content, create_only, perm, actor)
    }

    /// Remove the state file `rel` (its content is kept in `objects/` and journaled); `false`
    /// when it did not exist.
    pub fn remove(&self, rel: &str, actor: &Actor) -> Result<bool> {
        match self.core.delete(&state_path(rel), None, Scope::State, actor) {
            Ok(_) => Ok(true),
            Err(e) if *e.reason() == Reason::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// [`remove`](State::remove) only while the file still holds `sha`: what a
    /// caller judged is what goes (a changed file is a `stale_precondition` error).
    pub fn remove_if(&self, rel: &str, sha: Sha256, actor: &Actor) -> Result<bool> {
        match self.core.delete(&state_path(rel), Some(super::Expect::Sha(sha)), Scope::State, actor) {
            Ok(_) => Ok(true),
            Err(e) if *e.reason() == Reason::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Remove the directory `rel` if it is empty (missing is fine).
    pub fn remove_dir(&self, rel: &str) -> Result<()> {
        let path = state_path(rel);
        let (parent, name) = match path.rsplit_once('/') {
            Some(split) => split,
            None => return Err(Reason::InvalidArgument { what: "state directory" }.into()),
        };
        let disk = self.core.disk();
        let dir = match open_parent(disk, &self.core.ws.root, parent, Scope::State, false) {
            Ok(dir) => dir,
            Err(e) if *e.reason() == Reason::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        match disk.rmdir(&dir, name) {
            Ok(()) => disk.sync_dir(&dir).step("fsync directory"),
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => Ok(()),
            Err(e) => Err(Error::io("remove directory", e).at(path)),
        }
    }

    /// Append one line to the state file `rel` (created 0600 if missing) and make it durable.
    /// A torn last line is closed first.
    pub fn append_line(&self, rel: &str, line: &[u8]) -> Result<()> {
        let path = state_path(rel);
        let disk = self.core.disk();
        let target = resolve(disk, &self.core.ws.root, &path, Scope::State, true)?;
        let lock = self.core.locks.lock(&target.path);
        let created = target.stat.is_none();
        let file = disk.open_write(&target.parent, &target.name, created, 0o600).step("open index")?;
        let len = disk.file_stat(&file).step("stat index")?.size;
        let mut bytes = Vec::with_capacity(line.len() + 2);
        if len > 0 {
            let mut last = [0u8; 1];
            disk.read_at(&file, &mut last, len - 1).step("read index")?;
            if last[0] != b'\n' {
                bytes.push(b'\n');
            }
        }
        bytes.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            bytes.push(b'\n');
        }
        disk.write_at(&file, &bytes, len).step("append to index")?;
        disk.sync_data(&file).step("fsync index")?;
        if created {
            disk.sync_dir(&target.parent).step("fsync directory")?;
        }
        drop(lock);
        Ok(())
    }

    /// Hold the engine's lock of the state name `rel` (read-modify-write sequences). These
    /// locks are apart from the ones writes take, so the holder may write any state file,
    /// `rel` included; it must not take a second state lock (two names may share a stripe).
    pub fn lock(&self, rel: &str) -> Result<StateLock<'a>> {
        let path =
            crate::durable::resolve::lookup(self.core.disk(), &self.core.ws.root, &state_path(rel), Scope::State)?;
        Ok(StateLock { _guard: self.core.state_locks.lock(&path) })
    }

    /// A path to the state directory that reaches it through the engine's own descriptor
    /// (valid while the engine is open, in this process), even when a mount covers the
    /// workspace.
    pub fn dir_path(&self) -> Result<std::path::PathBuf> {
        let state = self.core.ws.state.as_ref().ok_or_else(|| Error::from(Reason::NotFound).at(STATE_DIR))?;
        Ok(state.fd_path())
    }
}

impl Engine {
    /// The engine's own files under `.resilient_write/`, as the tool layers write them: see
    /// [`State`].
    pub fn state(&self) -> State<'_> {
        State { core: &self.core }
    }

    /// Score `content` (as the new version of `path`, when given) and judge it by the policy,
    /// whatever its size or kind.
    pub fn score(&self, content: &[u8], path: Option<&str>) -> super::Judgement {
        self.core.gate.judge_any(path, content)
    }

    /// Count a refused attempt by `actor` to write `sha` at `path`, on its agent session's
    /// budget: the retries left, or `None` once the budget is spent (see the gate).
    pub fn spend_retry(&self, actor: &Actor, path: &str, sha: Sha256) -> Option<u32> {
        self.core.gate.spend(self.core.attempter(actor), path, sha)
    }

    /// The agent run process `pid` belongs to, when one names it (`RWFS_SESSION`, or an agent
    /// host among its ancestors: `journal::session`): an MCP client launched by an agent writes
    /// in that agent's session.
    pub fn agent_session(&self, pid: u32) -> Option<String> {
        self.core.journal.sessions().agent_of_pid(pid)
    }

    /// The workspace policy the engine judges with.
    pub fn policy(&self) -> &crate::policy::Policy {
        self.core.gate.policy()
    }
}
