//! The tree as the mount sees it: entries of every kind, addressed by workspace path, and the
//! namespace changes it makes.
//!
//! Reads may look inside `.resilient_write/` (the mount shows it read-only; which parts it
//! hides is the mount's business); changes never do. Every path is resolved beneath the root
//! without following a symlink in its last component, so each call acts on the entry itself.
//!
//! What is journaled (docs/architecture.md, guarantee 5): removing a regular file (its content is kept in
//! `objects/`), renaming anything (the replaced file's content is kept too), and a hard link (a
//! new path with content). Directories, symlinks, special files and metadata (mode, owner,
//! times, extended attributes) change without a row; so do paths written in place
//! ([`PathClass::PassThrough`](super::PathClass), which the engine tells from the path itself).
//!
//! The gate also guards the namespace: every regular file a rename (of a file or a tree), a
//! link or an exchange brings to a gated path is judged there first unless its bytes were
//! judged alike already (`admit.rs`), so writing a secret to `x.log`, or to an allow-listed
//! `tests/fixtures/`, and moving it to `config.py` is refused like writing it there.

use std::ffi::{OsStr, OsString};

use crate::durable::resolve::locate;
use crate::durable::{Dir, File, FileKind, FsStats, Rename, Scope, SetTime, Stat, Target, WorkspacePath};
use crate::error::{Error, IoContext, Reason, Result};
use crate::journal::{Actor, Change, Op};
use crate::policy::Operation;
use crate::sha::Sha256;

use super::entry::Entry;
use super::{Core, Engine};

/// How a rename treats an existing destination (`renameat2` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenameHow {
    Replace,
    NoReplace,
    Exchange,
}

/// Who asks for a new entry: its owner (the caller's uid and gid, when this process may give
/// it away) and the caller's umask. What the entry finally gets also depends on its directory
/// (setgid, default ACL: see `inherit.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
    pub umask: u32,
}

impl Engine {
    /// `lstat` of a path (`""` is the root); `None` when nothing is there.
    pub fn stat(&self, path: &str) -> Result<Option<Stat>> {
        let disk = self.core.disk();
        let found = self.core.on(Entry::Path(path), Scope::State, |dir, name| {
            disk.stat(dir, name)?.ok_or_else(|| std::io::Error::from_raw_os_error(nix::libc::ENOENT))
        })?;
        match found {
            Ok(stat) => Ok(Some(stat)),
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => Ok(None),
            Err(e) => Err(Error::io("stat", e).at(path)),
        }
    }

    /// The entries of a directory (without `.` and `..`).
    pub fn list(&self, path: &str) -> Result<Vec<(OsString, FileKind)>> {
        let disk = self.core.disk();
        let dir = if path.is_empty() {
            self.core.ws.root.try_clone().step("dup root")?
        } else {
            let (parent, name) = self.core.locate(Entry::Path(path), Scope::State)?;
            disk.open_dir(&parent, &name).step("open directory").map_err(|e| e.at(path))?
        };
        let mut entries = disk.list(&dir).step("list directory").map_err(|e| e.at(path))?;
        // New files staged in batch mode and not installed yet.
        if let Some(batch) = &self.core.batch {
            for name in batch.names_in(path) {
                if !entries.iter().any(|(n, _)| n.as_encoded_bytes() == name.as_bytes()) {
                    entries.push((name.into(), FileKind::File));
                }
            }
        }
        Ok(entries)
    }

    pub fn read_link(&self, path: &str) -> Result<OsString> {
        let (dir, name) = self.core.locate(Entry::Path(path), Scope::State)?;
        self.core.disk().read_link(&dir, &name).step("readlink").map_err(|e| e.at(path))
    }

    pub fn mkdir(&self, path: &str, perm: u32, owner: Owner) -> Result<()> {
        self.core.create_entry(path, FileKind::Dir, perm, owner, |disk, dir, name| disk.mkdir(dir, name, perm))
    }

    pub fn symlink(&self, target: &OsStr, path: &str, owner: Owner) -> Result<()> {
        self.core.create_entry(path, FileKind::Symlink, 0o777, owner, |disk, dir, name| disk.symlink(target, dir, name))
    }

    /// A fifo, socket or device node.
    pub fn mknod(&self, path: &str, kind: FileKind, perm: u32, rdev: u64, owner: Owner) -> Result<()> {
        self.core.create_entry(path, kind, perm, owner, |disk, dir, name| disk.mknod(dir, name, kind, perm, rdev))
    }

    pub fn rmdir(&self, path: &str) -> Result<()> {
        self.core.settle_path(path);
        let (dir, name) = self.core.locate(Entry::Path(path), Scope::Workspace)?;
        self.core.disk().rmdir(&dir, &name).step("remove directory").map_err(|e| e.at(path))
    }

    /// Remove an entry. A regular file is deleted through the commit protocol (journaled, its
    /// content kept) unless it is written in place.
    pub fn remove(&self, path: &str, actor: &Actor) -> Result<()> {
        self.core.remove(path, !self.class(path).in_place(), actor)
    }

    /// A second name for a regular file; journaled as a `create` of `to` with the file's
    /// content unless `to` is written in place. At a gated `to` the content is judged first
    /// unless it was judged alike already; across the gate's boundary (one name written in
    /// place, the other not) `EXDEV` (`admit.rs`).
    pub fn hard_link(&self, from: &str, to: &str, actor: &Actor) -> Result<()> {
        self.core.guard(Operation::Create, to, actor, None, || None)?;
        self.core.hard_link(from, to, !self.class(to).in_place(), actor)
    }

    /// Rename `from` to `to`. Unless both are written in place, the row is journaled and a
    /// regular file replaced at `to` is kept in `objects/` (journaled as the row's
    /// `prev_sha256`); every file the rename brings to a gated path (a file, a tree, both sides
    /// of an exchange) is judged there first unless it was judged alike already (`admit.rs`).
    pub fn rename(&self, from: &str, to: &str, how: RenameHow, actor: &Actor) -> Result<()> {
        // Both names are guarded as renamed; the new one also as written (or created).
        self.core.guard(Operation::Rename, from, actor, None, || None)?;
        self.core.guard(Operation::Rename, to, actor, None, || None)?;
        if self.core.gate.policy().is_protected(to) {
            let replaces = how == RenameHow::Exchange || self.core.exists(to);
            self.core.guard(super::protect::version_op(replaces), to, actor, None, || None)?;
        }
        if how == RenameHow::Exchange {
            self.core.guard(Operation::Write, from, actor, None, || None)?;
        }
        let keep = !self.class(from).in_place() || !self.class(to).in_place();
        self.core.rename(from, to, how, keep, from, actor).map_err(|e| e.at(to))
    }

    /// Make the hard link `to` follow the version just committed at `from` (the commit gave
    /// `from` a new file): a link under a temporary name, renamed over `to`, which keeps and
    /// journals `to`'s previous version like any rename over a file. The content passed the
    /// gate as `from`'s: it is judged again at `to` only where the gate judges otherwise.
    pub fn relink(&self, from: &str, to: &str, actor: &Actor) -> Result<()> {
        let tmp = match to.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/{}", crate::durable::temp_name()),
            None => crate::durable::temp_name(),
        };
        self.core.hard_link(from, &tmp, false, actor)?;
        let renamed = self.core.rename(&tmp, to, RenameHow::Replace, true, from, actor).map_err(|e| e.at(to));
        if renamed.is_err() {
            let _ = self.core.remove(&tmp, false, actor);
        }
        renamed
    }

    /// `chmod`; of a tree path, guarded for `actor` (`protect.rs`).
    pub fn set_perm(&self, entry: Entry<'_>, perm: u32, actor: &Actor) -> Result<()> {
        if let Entry::Path(path) = entry {
            self.core.guard(Operation::Chmod, path, actor, None, || None)?;
        }
        let disk = self.core.disk();
        self.core.on(entry, Scope::Workspace, |dir, name| disk.set_perm(dir, name, perm))?.step("chmod")
    }

    pub fn set_owner(&self, entry: Entry<'_>, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        let disk = self.core.disk();
        self.core.on(entry, Scope::Workspace, |dir, name| disk.set_owner(dir, name, uid, gid))?.step("chown")
    }

    pub fn set_times(&self, entry: Entry<'_>, atime: SetTime, mtime: SetTime) -> Result<()> {
        let disk = self.core.disk();
        self.core.on(entry, Scope::Workspace, |dir, name| disk.set_times(dir, name, atime, mtime))?.step("set times")
    }

    pub fn statfs(&self) -> Result<FsStats> {
        self.core.disk().statfs(&self.core.ws.root).step("statfs")
    }

    /// Bytes the gate has scanned since the engine opened.
    pub fn scanned_bytes(&self) -> u64 {
        self.core.gate.scanned_bytes()
    }

    /// The errno the policy gives a blocked write through the mount.
    pub fn blocked_errno(&self) -> i32 {
        self.core.gate.policy().blocked_errno()
    }

    /// The policy's `stderr_notice` (`None`: unset, the command decides).
    pub fn stderr_notice(&self) -> Option<bool> {
        self.core.gate.policy().stderr_notice()
    }

    /// The refusals of writes through the mount that `agent` (a harness process) has not been
    /// told of yet, now counted as told; `paths` are the workspace paths its tool named (see
    /// `told.rs` for which refusals are an agent's).
    pub fn untold_refusals(
        &self,
        agent: &crate::journal::session::Process,
        paths: &[String],
    ) -> Vec<crate::notice::Notice> {
        self.core.gate.told.untold(agent, paths)
    }
}

impl Engine {
    /// The extended attributes of entries, as the mount shows them: see [`Xattrs`].
    pub fn xattrs(&self) -> Xattrs<'_> {
        Xattrs { core: &self.core }
    }

    /// Files the engine opens for the mount to read and write by descriptor: see [`Files`].
    pub fn files(&self) -> Files<'_> {
        Files { core: &self.core }
    }
}

/// The extended attributes of an [`Entry`] (a path, or a draft by its id), read and changed
/// where the entry's current bytes are: an open draft's file, a version staged in batch mode
/// and not installed yet, else the tree's entry. Invariant: the draft's recovery note
/// (`user.rwfs.target`, `durable/layout.rs`) is rwfs's, not the file's: never listed nor read
/// through here, so a file shows the same attributes before, during and after a draft.
#[derive(Clone, Copy)]
pub struct Xattrs<'a> {
    core: &'a Core,
}

impl Xattrs<'_> {
    pub fn get(&self, entry: Entry<'_>, attr: &OsStr) -> Result<Vec<u8>> {
        // The draft's recovery note is rwfs's, not the file's.
        if attr == crate::durable::layout::DRAFT_TARGET_XATTR && self.core.in_drafts(entry) {
            return Err(Error::io("getxattr", std::io::Error::from_raw_os_error(nix::libc::ENODATA)));
        }
        if let Entry::Draft(id) = entry {
            // Through the draft's own descriptor: the kernel asks for `security.capability`
            // before the first write to every file it has not checked yet.
            let disk = self.core.disk();
            return self.core.draft_table.with_draft(id, |draft| disk.file_xattr(draft.file(), attr).step("getxattr"));
        }
        let disk = self.core.disk();
        self.core.on(entry, Scope::State, |dir, name| disk.get_xattr(dir, name, attr))?.step("getxattr")
    }

    pub fn list(&self, entry: Entry<'_>) -> Result<Vec<OsString>> {
        let disk = self.core.disk();
        let mut names =
            self.core.on(entry, Scope::State, |dir, name| disk.list_xattrs(dir, name))?.step("listxattr")?;
        if self.core.in_drafts(entry) {
            // The draft's recovery note is rwfs's, not the file's (xfstests 020, 062, 097).
            names.retain(|name| name != crate::durable::layout::DRAFT_TARGET_XATTR);
        }
        Ok(names)
    }

    pub fn set(&self, entry: Entry<'_>, attr: &OsStr, value: &[u8], flags: i32) -> Result<()> {
        let disk = self.core.disk();
        self.core
            .on(entry, Scope::Workspace, |dir, name| disk.set_xattr(dir, name, attr, value, flags))?
            .step("setxattr")
    }

    pub fn remove(&self, entry: Entry<'_>, attr: &OsStr) -> Result<()> {
        let disk = self.core.disk();
        self.core.on(entry, Scope::Workspace, |dir, name| disk.remove_xattr(dir, name, attr))?.step("removexattr")
    }
}

/// The files the mount holds open by descriptor rather than through a draft, and the I/O on
/// them: a committed version opened read-only ([`open`](Files::open)), and a pass-through file
/// (policy globs such as `.git/**`) opened to be written in place
/// ([`open_in_place`](Files::open_in_place), where the protect rules guard a writer's open).
/// Every call goes through the engine's `Disk`, the I/O seam (a hooked test disk sees it).
/// Nothing here is judged or journaled, so the mount writes through these descriptors only
/// where [`Engine::class`] says nothing is: a gated path's bytes change only through
/// [`Drafts`](super::Drafts) and the commit protocol.
#[derive(Clone, Copy)]
pub struct Files<'a> {
    core: &'a Core,
}

impl Files<'_> {
    /// Open a regular file for reading (never through a symlink).
    pub fn open(&self, path: &str) -> Result<File> {
        let disk = self.core.disk();
        self.core
            .on(Entry::Path(path), Scope::State, |dir, name| disk.open_read(dir, name))?
            .step("open file")
            .map_err(|e| e.at(path))
    }

    /// Open a file written in place (a pass-through path) for reading and writing, creating it
    /// exclusively with `create`. `writer`: who opens it to write (protect rules apply, see
    /// `protect.rs`); `None` for an open that writes nothing itself.
    pub fn open_in_place(&self, path: &str, create: Option<(u32, Owner)>, writer: Option<&Actor>) -> Result<File> {
        if let Some(actor) = writer {
            self.core.guard(super::protect::version_op(create.is_none()), path, actor, None, || None)?;
        }
        let disk = self.core.disk();
        let (dir, name) = self.core.locate(Entry::Path(path), Scope::Workspace)?;
        let opened = match create {
            None => disk.open_write(&dir, &name, false, 0),
            Some((perm, owner)) => disk.create_new(&dir, &name, perm).and_then(|file| {
                self.core.give(&dir, &name, FileKind::File, perm, owner)?;
                Ok(file)
            }),
        };
        opened.step("open file in place").map_err(|e| e.at(path))
    }

    /// Read from a file opened by [`Files::open`] or [`Files::open_in_place`].
    pub fn read_at(&self, file: &File, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.core.disk().read_at(file, buf, offset).step("read")
    }

    /// Write to a file opened in place (a pass-through path).
    pub fn write_at(&self, file: &File, data: &[u8], offset: u64) -> Result<()> {
        self.core.disk().write_at(file, data, offset).step("write")
    }

    pub fn set_len(&self, file: &File, len: u64) -> Result<()> {
        self.core.disk().set_len(file, len).step("truncate")
    }

    /// `fallocate` of a file opened in place: blocks for `len` bytes from `offset`, and unless
    /// `keep_size` the file grown (with zeros) to cover them.
    pub fn allocate(&self, file: &File, offset: u64, len: u64, keep_size: bool) -> Result<()> {
        let disk = self.core.disk();
        let end = offset.checked_add(len).ok_or_else(|| Error::io("fallocate", efbig()))?;
        if !keep_size && end > disk.file_stat(file).step("stat")?.size {
            disk.set_len(file, end).step("fallocate")?;
        }
        disk.reserve(file, offset, len).step("fallocate")
    }

    pub fn sync(&self, file: &File, data_only: bool) -> Result<()> {
        let disk = self.core.disk();
        if data_only { disk.sync_data(file) } else { disk.sync(file) }.step("fsync")
    }

    pub fn stat(&self, file: &File) -> Result<Stat> {
        self.core.disk().file_stat(file).step("stat")
    }
}

impl Core {
    /// Run `op` on the entry: a path's version staged in batch mode while it has one (see
    /// `batch.rs`: the committer does not install it while `op` runs), else the tree's entry.
    /// A staged version abandoned meanwhile is no longer in drafts/ (`ENOENT`): the tree has
    /// the path's version then.
    pub(crate) fn on<T>(
        &self,
        entry: Entry<'_>,
        scope: Scope,
        op: impl Fn(&Dir, &str) -> std::io::Result<T>,
    ) -> Result<std::io::Result<T>> {
        if let (Entry::Path(path), Some(batch)) = (entry, &self.batch)
            && let Some(reading) = batch.read(path)
        {
            match op(&*self.drafts_home()?, reading.name()) {
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => {}
                done => return Ok(done),
            }
        }
        let (dir, name) = self.locate(entry, scope)?;
        Ok(op(&dir, &name))
    }

    /// Is `entry` served from `drafts/`: an open draft, or a version staged in batch mode and
    /// not installed yet (see [`Core::on`])?
    fn in_drafts(&self, entry: Entry<'_>) -> bool {
        match (entry, &self.batch) {
            (Entry::Draft(_), _) => true,
            (Entry::Path(path), Some(batch)) => batch.has_view(path),
            (Entry::Path(_), None) => false,
        }
    }

    /// Before a namespace change: a journaled one (`keep`) takes the barrier's turn (held until
    /// it is durable), to keep the journal's order in the tree; any other waits only for staged
    /// versions it touches.
    fn order(&self, keep: bool, paths: &[&str]) -> Option<super::order::Turn<'_>> {
        if keep {
            return self.barrier();
        }
        for path in paths {
            self.settle_path(path);
        }
        None
    }

    pub(crate) fn locate(&self, entry: Entry<'_>, scope: Scope) -> Result<(Dir, String)> {
        match entry {
            Entry::Path(path) => locate(self.disk(), &self.ws.root, path, scope),
            Entry::Draft(id) => {
                let name = self.draft_table.with_draft(id, |draft| Ok(draft.name().to_string()))?;
                let dir = self.drafts_home()?.try_clone().step("open drafts directory")?;
                Ok((dir, name))
            }
        }
    }

    /// Make a new entry and give it to its owner, with the mode its directory lets it have.
    fn create_entry(
        &self,
        path: &str,
        kind: FileKind,
        perm: u32,
        owner: Owner,
        make: impl FnOnce(&dyn crate::durable::Disk, &Dir, &str) -> std::io::Result<()>,
    ) -> Result<()> {
        self.settle_path(path);
        let (dir, name) = self.locate(Entry::Path(path), Scope::Workspace)?;
        make(self.disk(), &dir, &name).step("create").map_err(|e| e.at(path))?;
        self.give(&dir, &name, kind, perm, owner).step("set owner").map_err(|e| e.at(path))
    }

    /// The caller's ownership and the mode `dir` lets it have (see `inherit.rs`; this
    /// process's own umask must not apply) for an entry this process just made in `dir`. The
    /// kernel made the entry here, so it already holds the directory's default ACL; the mode
    /// set last agrees with it. Owner changes need privilege: without it the entry stays ours.
    fn give(&self, dir: &Dir, name: &str, kind: FileKind, perm: u32, owner: Owner) -> std::io::Result<()> {
        let disk = self.disk();
        let wanted = self.inherit(dir, kind, perm, owner)?;
        let stat = disk.stat(dir, name)?.ok_or_else(|| std::io::Error::from_raw_os_error(nix::libc::ENOENT))?;
        let mut chowned = false;
        if (stat.uid, stat.gid) != (wanted.uid, wanted.gid) {
            match disk.set_owner(dir, name, Some(wanted.uid), Some(wanted.gid)) {
                Ok(()) => chowned = true,
                Err(e) if e.raw_os_error() == Some(nix::libc::EPERM) => {}
                Err(e) => return Err(e),
            }
        }
        // A chown may clear setuid/setgid: the mode is set again after one.
        if stat.kind != FileKind::Symlink && (stat.perm != wanted.perm || chowned) {
            disk.set_perm(dir, name, wanted.perm)?;
        }
        Ok(())
    }

    /// The digest and size of the regular file at `dir/name` (`None` for other kinds).
    fn content_of(&self, dir: &Dir, name: &str) -> Result<Option<(Sha256, u64)>> {
        let disk = self.disk();
        match disk.stat(dir, name).step("stat")? {
            // Known already: no need to open it (the digest cache keys on what `lstat` says).
            Some(stat)
                if stat.kind == FileKind::File
                    && let Some(sha) = self.cache.get(&stat) =>
            {
                Ok(Some((sha, stat.size)))
            }
            Some(stat) if stat.kind == FileKind::File => {
                let target = Target {
                    parent: dir.try_clone().step("dup directory")?,
                    name: name.to_string(),
                    path: self.path_of(dir, name)?,
                    stat: Some(stat),
                };
                Ok(self.current(&target)?.map(|c| (c.sha, c.stat.size)))
            }
            Some(_) => Ok(None),
            None => Err(Reason::NotFound.into()),
        }
    }

    fn path_of(&self, dir: &Dir, name: &str) -> Result<WorkspacePath> {
        crate::durable::resolve::path_in(dir, name)
    }

    /// See [`Engine::remove`]; `keep`: through the commit protocol.
    fn remove(&self, path: &str, keep: bool, actor: &Actor) -> Result<()> {
        let _order = self.order(keep, &[path]);
        let disk = self.disk();
        let (dir, name) = self.locate(Entry::Path(path), Scope::Workspace)?;
        match disk.stat(&dir, &name).step("stat").map_err(|e| e.at(path))? {
            None => Err(Error::from(Reason::NotFound).at(path)),
            Some(stat) if stat.kind == FileKind::Dir => Err(Error::from(Reason::IsDirectory).at(path)),
            Some(stat) if stat.kind == FileKind::File && keep => {
                self.delete_ordered(path, None, Scope::Workspace, actor).map(drop)
            }
            Some(stat) => {
                // Written in place: guarded, not counted as bulk damage (build outputs go in bulk).
                if stat.kind == FileKind::File {
                    self.guard(Operation::Delete, path, actor, None, || None)?;
                }
                disk.unlink(&dir, &name).step("unlink").map_err(|e| e.at(path))
            }
        }
    }

    /// See [`Engine::hard_link`]; `keep`: journaled, and judged at `to` as `admit.rs` says.
    fn hard_link(&self, from: &str, to: &str, keep: bool, actor: &Actor) -> Result<()> {
        self.link_across(from, to).map_err(|e| e.at(to))?;
        let _order = self.order(keep, &[from, to]);
        let disk = self.disk();
        let (from_dir, from_name) = self.locate(Entry::Path(from), Scope::Workspace)?;
        let (to_dir, to_name) = self.locate(Entry::Path(to), Scope::Workspace)?;
        let content = self.content_of(&from_dir, &from_name)?;
        if keep {
            // The new name is the link's own row (a `create` with the content).
            self.admit(self.arrivals(from, to, from)?, |_| None, actor)?;
        }
        disk.hard_link(&from_dir, &from_name, &to_dir, &to_name).step("link").map_err(|e| e.at(to))?;
        disk.sync_dir(&to_dir).step("fsync directory").map_err(|e| e.at(to))?;
        if let (true, Some(content)) = (keep, content) {
            self.journal.append(Change {
                op: Op::Create,
                path: to.to_string(),
                from: Some(from.to_string()),
                sha256: Some(content.0),
                prev_sha256: None,
                bytes: content.1,
                mode: "link".into(),
                actor: actor.clone(),
                verdict: None,
                reason: None,
            })?;
        }
        Ok(())
    }

    /// See [`Engine::rename`]; `keep`: journaled, the replaced file kept, and what arrives at
    /// gated paths judged as `admit.rs` says; `judged_as`: the path whose judgement the bytes
    /// at `from` carry.
    fn rename(&self, from: &str, to: &str, how: RenameHow, keep: bool, judged_as: &str, actor: &Actor) -> Result<()> {
        let _order = self.order(keep, &[from, to]);
        let disk = self.disk();
        let (from_dir, from_name) = self.locate(Entry::Path(from), Scope::Workspace)?;
        let (to_dir, to_name) = self.locate(Entry::Path(to), Scope::Workspace)?;
        let from_path = self.path_of(&from_dir, &from_name)?;
        let to_path = self.path_of(&to_dir, &to_name)?;
        let _locked = self.locks.lock_pair(&from_path, &to_path);
        let moving = disk.stat(&from_dir, &from_name).step("stat")?.ok_or_else(|| Error::from(Reason::NotFound))?;
        let replaced = disk.stat(&to_dir, &to_name).step("stat")?;
        let content = if moving.kind == FileKind::File { self.content_of(&from_dir, &from_name)? } else { None };
        let exchange = how == RenameHow::Exchange;
        let entering = if keep {
            let mut arrivals = self.arrivals(from_path.as_str(), to_path.as_str(), judged_as)?;
            if exchange {
                arrivals.extend(self.arrivals(to_path.as_str(), from_path.as_str(), to_path.as_str())?);
            }
            // What the refusal's row names as displaced at the new path: only a file replaced
            // at `to` itself is known without reading.
            let displaced = |path: &str| {
                (path == to_path.as_str() && replaced.is_some_and(|s| s.kind == FileKind::File))
                    .then(|| self.content_of(&to_dir, &to_name).ok().flatten().map(|c| c.0))
                    .flatten()
            };
            let admitted = self.admit(arrivals, displaced, actor)?;
            // A plain rename of the file itself states its content in its own row; every other
            // file entering the journal gets a row of its own.
            admitted
                .into_iter()
                .filter(|a| a.arrival.enters && (exchange || a.arrival.from != from_path.as_str()))
                .collect::<Vec<_>>()
        } else {
            Vec::new()
        };
        if !keep {
            let flags = match how {
                RenameHow::Replace => Rename::Replace,
                RenameHow::NoReplace => Rename::NoReplace,
                RenameHow::Exchange => Rename::Exchange,
            };
            return disk.rename(&from_dir, &from_name, &to_dir, &to_name, flags).step("rename");
        }
        // A regular file at `to` is kept: it gets a second name (a temp name in `to`'s own
        // directory) before the rename replaces it, and that name is then moved into objects/.
        // At every instant `to` holds the old or the new content and `from` the new one or
        // nothing; the replaced version is under `to` or the temp name (a directory's changes
        // reach the disk in order, so the link is durable when the rename is), where recovery
        // finds it. Where no second name can be made, the names are swapped (RENAME_EXCHANGE)
        // and what is then at `from` is moved into objects/.
        let kept = match (how, replaced) {
            (RenameHow::NoReplace, Some(_)) => {
                return Err(Error::io("rename", std::io::Error::from_raw_os_error(nix::libc::EEXIST)));
            }
            (RenameHow::Replace, Some(stat)) if stat.kind == FileKind::File => self.content_of(&to_dir, &to_name)?,
            _ => None,
        };
        let other = if exchange && replaced.is_some_and(|s| s.kind == FileKind::File) {
            self.content_of(&to_dir, &to_name)?.map(|c| c.0)
        } else {
            None
        };
        let row = Change {
            op: Op::Rename,
            path: to_path.to_string(),
            from: Some(from_path.to_string()),
            sha256: content.map(|c| c.0),
            prev_sha256: if exchange { other } else { kept.map(|k| k.0) },
            bytes: content.map_or(0, |c| c.1),
            mode: if exchange { "exchange".into() } else { String::new() },
            actor: actor.clone(),
            verdict: None,
            reason: None,
        };
        // A rename frees a full disk's names: its row, its entry and the replaced file's entry in
        // objects/ may use the reserve kept for that (`reserve.rs`).
        let token = self.tracker.begin(self.journal.durable_seq());
        if let Err(e) = self.freeing(|| self.journal.append(row.clone())) {
            self.tracker.end(token);
            return Err(e);
        }
        // The files entering the journal, after the change's own row (which moves what the
        // journal knows below `from`), before the change: one group commit for all of them.
        let mode = if exchange { "exchange" } else { "rename" };
        let pending: Vec<_> = entering.iter().map(|a| self.journal.submit(a.row(mode, actor))).collect();
        if let Some(e) = pending.into_iter().map(crate::journal::Pending::wait).find_map(Result::err) {
            // Rows of a change that did not happen: recovery reads the tail past the watermark.
            drop(token);
            return Err(e);
        }
        let aside = match kept {
            Some(_) if how != RenameHow::Exchange => {
                let tmp = crate::durable::temp_name();
                disk.hard_link(&to_dir, &to_name, &to_dir, &tmp).ok().map(|()| tmp)
            }
            _ => None,
        };
        let flags = match (how, kept.is_some(), replaced.is_some(), aside.is_some()) {
            (RenameHow::Exchange, ..) | (_, true, _, false) => Rename::Exchange,
            (_, _, true, _) => Rename::Replace,
            (_, _, false, _) => Rename::NoReplace,
        };
        let renamed = self.freeing(|| disk.rename(&from_dir, &from_name, &to_dir, &to_name, flags).step("rename"));
        if let Err(e) = renamed {
            if let Some(tmp) = &aside {
                let _ = disk.unlink(&to_dir, tmp);
            }
            for a in &entering {
                // Nothing moved: each path holds what it held (read now, the tree unchanged).
                let unchanged = self
                    .locate(Entry::Path(&a.arrival.to), Scope::Workspace)
                    .ok()
                    .and_then(|(dir, name)| self.content_of(&dir, &name).ok().flatten())
                    .map(|c| c.0);
                let mut aborted = a.row(mode, actor);
                (aborted.op, aborted.sha256, aborted.prev_sha256, aborted.from, aborted.bytes) =
                    (Op::Abort, unchanged, Some(a.sha), None, 0);
                aborted.reason = Some(e.reason().code().to_string());
                if let Err(e) = self.journal.append(aborted) {
                    tracing::error!(path = %a.arrival.to, error = %e, "cannot journal an aborted rename");
                }
            }
            return Err(self.abort(token, &to_path, kept.map(|k| k.0), content.map(|c| c.0), actor, e));
        }
        if let Some((sha, _)) = kept {
            let (dir, name) = match &aside {
                Some(tmp) => (&to_dir, tmp.as_str()),
                None => (&from_dir, from_name.as_str()),
            };
            if let Err(e) = self.freeing(|| self.objects.adopt(dir, name, sha)) {
                tracing::error!(path = %dir.join(name), error = %e, "replaced version left under a temp name");
            }
        }
        // One sync for a rename within a directory (an editor's save).
        let synced = disk.sync_dir(&to_dir).and_then(|()| match from_dir.rel() == to_dir.rel() {
            true => Ok(()),
            false => disk.sync_dir(&from_dir),
        });
        if let Err(e) = synced {
            drop(token);
            return Err(Error::io("fsync directory", e));
        }
        // The file keeps its digest under its new name (the rename changed its ctime, which the
        // digest cache keys on): the next save over it need not read it to keep it.
        if let Some((sha, _)) = content
            && let Ok(Some(stat)) = disk.stat(&to_dir, &to_name)
            && stat.id == moving.id
        {
            self.cache.put(&stat, sha);
        }
        self.tracker.end(token);
        Ok(())
    }
}

/// A size or offset past what a file can hold.
pub(super) fn efbig() -> std::io::Error {
    std::io::Error::from_raw_os_error(nix::libc::EFBIG)
}
