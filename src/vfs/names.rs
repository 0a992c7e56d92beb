//! The namespace: lookups, attributes, directories, links, renames, removals, extended
//! attributes. Files created through the mount and not committed yet (`pending`) exist only in
//! the inode table: lookups, listings and `rmdir` account for them, and a rename or a link
//! commits one first so that the tree always has what the operation moves.

use std::ffi::{OsStr, OsString};

use nix::libc;

use super::data::os_error;
use super::file::FileState;
use super::table::ROOT;
use super::{Announce, Attr, Caller, DirEntry, Handle, SETGID, Vfs};
use crate::durable::{FileKind, SetTime, Stat};
use crate::engine::{Entry, RenameHow};
use crate::error::{Error, Reason, Result};

/// A `setattr` request, as the engine needs it.
#[derive(Debug, Default, Clone, Copy)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SetTime>,
    pub mtime: Option<SetTime>,
    /// Without a file handle: `truncate(2)` by path, a complete change (not `ftruncate`).
    pub by_path: bool,
}

impl SetAttr {
    /// Does it change metadata (anything but the size)?
    fn touches_meta(&self) -> bool {
        self.mode.is_some() || self.uid.is_some() || self.gid.is_some() || self.atime.is_some() || self.mtime.is_some()
    }
}

/// `perm` once a write by a process without `CAP_FSETID` has dropped what it drops: the setuid
/// bit, and the setgid bit when the group may execute (setgid without it marks mandatory
/// locking, and stays), as the kernel's `setattr_should_drop_suidgid` says.
fn without_write_privileges(perm: u32) -> u32 {
    let mut kept = perm & !0o4000;
    if perm & 0o010 != 0 {
        kept &= !SETGID;
    }
    kept
}

/// The attributes of a file that has no name any more: what it was (`stat`), with no link
/// left; a placeholder when nothing of it is open.
fn detached_attr(ino: u64, stat: Option<Stat>) -> Attr {
    let mut stat = stat.unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64);
        Stat {
            id: crate::durable::FileId { dev: 0, ino: 0 },
            kind: FileKind::File,
            perm: 0o644,
            uid: 0,
            gid: 0,
            size: 0,
            nlink: 0,
            blocks: 0,
            rdev: 0,
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
        }
    });
    stat.nlink = 0;
    Attr { ino, stat }
}

/// How long a rename waits for the releases of pass-through handles already closed (the kernel
/// sends them after `close(2)` returns) before it refuses to give their file a gated name.
const RELEASE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

impl Vfs {
    /// The attributes of `ino` now.
    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        let file_node = self.file_of(ino);
        if let Some(file_node) = &file_node {
            let state = file_node.lock_closed();
            let unlinked = self.table().path(ino).is_none();
            if let Some(mut attr) = self.file_attr(ino, &state)? {
                if unlinked {
                    attr.stat.nlink = 0;
                }
                return Ok(attr);
            }
            if unlinked {
                // Unlinked while the kernel still holds it (an open file, or a refused new file
                // about to be written again): what it was, with no link left.
                let stat = match &state.backing {
                    Some(backing) => Some(self.engine.files().stat(backing)?),
                    None => None,
                };
                return Ok(detached_attr(ino, stat));
            }
        }
        if file_node.is_none() {
            let table = self.table();
            if table.path(ino).is_none()
                && let Some(last) = table.get(ino).and_then(|node| node.last)
            {
                return Ok(detached_attr(ino, Some(last)));
            }
        }
        if self.table().get(ino).is_none() {
            // A node the kernel still names but this table let go (see `data.rs`'s invariant).
            return Err(super::data::name_dropped());
        }
        let path = self.path(ino)?;
        if file_node.is_none() {
            self.wait_for_closes_in(ino);
        }
        let stat = self.engine.stat(&path)?.ok_or_else(|| Error::from(Reason::NotFound))?;
        Ok(Attr { ino, stat })
    }

    /// Before `parent/name` loses its name: keep what a node the kernel holds (other than a
    /// regular file, whose state keeps its own) is, for an `fstat` of it afterwards.
    fn remember_before_removal(&self, parent: u64, name: &OsStr, path: &str) {
        let Some(ino) = self.child_of(parent, name).filter(|&ino| self.file_of(ino).is_none()) else {
            return;
        };
        if let Ok(Some(stat)) = self.engine.stat(path)
            && let Some(node) = self.table().get_mut(ino)
        {
            node.last = Some(stat);
        }
    }

    /// A commit puts a file into its directory by a rename, which changes the directory's
    /// mtime and ctime: a directory's stat right after a `close()` waits for the commits of
    /// the last closes still running in it, as a file's does.
    fn wait_for_closes_in(&self, dir: u64) {
        let closing: Vec<(u64, std::sync::Arc<super::file::FileNode>)> = {
            let closing = self.closing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            closing.iter().map(|(ino, (file_node, _))| (*ino, file_node.clone())).collect()
        };
        if closing.is_empty() {
            return;
        }
        let in_dir: Vec<_> = {
            let table = self.table();
            closing.into_iter().filter(|(ino, _)| table.get(*ino).is_some_and(|n| n.parent == dir)).collect()
        };
        for (_, file_node) in in_dir {
            drop(file_node.lock_closed());
        }
    }

    /// [`Vfs::lookup`] by `caller`. This process's own lookups of a name it is announcing
    /// (`Vfs::changed`) see it as the announced operation needs: absent for a creation (so the
    /// kernel creates it, and says so), present for a removal (so the kernel removes it).
    pub fn lookup_as(&self, parent: u64, name: &OsStr, caller: &Caller) -> Result<Attr> {
        let path = self.child_path(parent, name)?;
        match self.heralded(&path, caller) {
            Some(Announce::Dir | Announce::Created) => Err(Reason::NotFound.into()),
            Some(Announce::Deleted) if self.engine.stat(&path)?.is_none() => {
                // Gone already: a stand-in for the kernel to remove (it never had one).
                let dir = self.table().path(parent).ok_or_else(|| Error::from(Reason::NotFound))?;
                let mut stat = self.engine.stat(&dir)?.ok_or_else(|| Error::from(Reason::NotFound))?;
                (stat.kind, stat.perm, stat.size, stat.nlink, stat.blocks) = (FileKind::File, 0o644, 0, 1, 0);
                let ino = self.table().lookup(parent, name, FileKind::File);
                Ok(Attr { ino, stat })
            }
            _ => self.lookup(parent, name),
        }
    }

    /// May the kernel remember that `name` in `parent` is absent, as `caller` was told? Not an
    /// announcement's (`Vfs::lookup_as`), nor where [`Vfs::absence_cacheable`] says no.
    pub fn absence_cacheable_for(&self, parent: u64, name: &OsStr, caller: &Caller) -> bool {
        let heralded = self.child_path(parent, name).ok().and_then(|p| self.heralded(&p, caller));
        heralded.is_none() && self.absence_cacheable(parent)
    }

    /// Resolve `name` in `parent`, counting a lookup.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Attr> {
        let path = self.child_path(parent, name)?;
        self.check_listed(&path)?;
        let known = self.child_of(parent, name);
        if let Some(ino) = known
            && self.is_pending(ino)
        {
            let attr = self.getattr(ino)?;
            if let Some(node) = self.table().get_mut(ino) {
                node.lookups += 1;
            }
            return Ok(attr);
        }
        if let Some(file_node) = known.and_then(|ino| self.file_of(ino)) {
            // A last close still committing: the name is what that commit makes it.
            drop(file_node.lock_closed());
        }
        let Some(stat) = self.engine.stat(&path)? else {
            if known.is_some() {
                self.table().detach(parent, name);
            }
            return Err(Reason::NotFound.into());
        };
        let ino = self.table().lookup(parent, name, stat.kind);
        match self.file_of(ino) {
            Some(file_node) => Ok(self.file_attr(ino, &file_node.lock_closed())?.unwrap_or(Attr { ino, stat })),
            None => Ok(Attr { ino, stat }),
        }
    }

    pub fn forget(&self, ino: u64, n: u64) {
        self.table().forget(ino, n);
    }

    pub fn setattr(&self, ino: u64, set: SetAttr, caller: &Caller) -> Result<Attr> {
        // An announcement's truncation to the size the file has (`Vfs::changed`): nothing to do.
        if let (Some(size), Ok(path)) = (set.size, self.path(ino))
            && matches!(self.heralded(&path, caller), Some(Announce::Created | Announce::Modified))
        {
            let attr = self.getattr(ino)?;
            if attr.stat.size == size {
                return Ok(attr);
            }
        }
        if self.is_unlinked(ino) && self.file_of(ino).is_some() {
            return self.setattr_unlinked(ino, set, caller);
        }
        let path = self.path(ino)?;
        let touches_meta = set.touches_meta();
        if touches_meta || set.size.is_some() {
            self.check_writable(&path)?;
        }
        if let Some(size) = set.size {
            self.truncate(ino, size, set.by_path, caller)?;
        }
        let set = SetAttr { mode: self.chmod_mode(ino, &set, caller)?, ..set };
        if touches_meta {
            let file_node = self.file_of(ino);
            let state = file_node.as_ref().map(|f| f.lock());
            let draft = state.as_ref().and_then(|s| s.draft());
            let pending = self.is_pending(ino);
            // The tree's entry (unless it is not there yet) and the draft the next version is.
            let mut entries: Vec<Entry<'_>> = Vec::new();
            if !pending {
                entries.push(Entry::Path(&path));
            }
            entries.extend(draft.map(Entry::Draft));
            for entry in entries {
                if set.uid.is_some() || set.gid.is_some() {
                    self.engine.set_owner(entry, set.uid, set.gid)?;
                }
                if let Some(mode) = set.mode {
                    self.engine
                        .set_perm(entry, mode & 0o7777, &self.actor(caller))
                        .inspect_err(|e| self.tell_refusal(caller, e))?;
                }
                if set.atime.is_some() || set.mtime.is_some() {
                    self.engine.set_times(
                        entry,
                        set.atime.unwrap_or(SetTime::Keep),
                        set.mtime.unwrap_or(SetTime::Keep),
                    )?;
                }
            }
        }
        self.getattr(ino)
    }

    /// `ftruncate`, `fchmod`, `fchown`, `futimens` on a file that lost its name while open:
    /// they change its draft, which is never committed.
    fn setattr_unlinked(&self, ino: u64, set: SetAttr, caller: &Caller) -> Result<Attr> {
        if let Some(size) = set.size {
            self.truncate(ino, size, false, caller)?;
        }
        let touches_meta = set.touches_meta();
        let set = SetAttr { mode: self.chmod_mode(ino, &set, caller)?, ..set };
        if touches_meta && let Some(file_node) = self.file_of(ino) {
            let mut state = file_node.lock();
            let draft = self.unlinked_draft(ino, &mut state)?;
            let entry = Entry::Draft(draft);
            if set.uid.is_some() || set.gid.is_some() {
                self.engine.set_owner(entry, set.uid, set.gid)?;
            }
            if let Some(mode) = set.mode {
                self.engine
                    .set_perm(entry, mode & 0o7777, &self.actor(caller))
                    .inspect_err(|e| self.tell_refusal(caller, e))?;
            }
            if set.atime.is_some() || set.mtime.is_some() {
                self.engine.set_times(entry, set.atime.unwrap_or(SetTime::Keep), set.mtime.unwrap_or(SetTime::Keep))?;
            }
        }
        self.getattr(ino)
    }

    /// The mode a `chmod` sets: the setgid bit asked for by a caller outside the file's group
    /// (and not root) is dropped, as the kernel's `setattr_copy` does for a local filesystem;
    /// through FUSE the request arrives with it and the filesystem must drop it.
    fn chmod_mode(&self, ino: u64, set: &SetAttr, caller: &Caller) -> Result<Option<u32>> {
        let Some(mode) = set.mode.filter(|m| m & SETGID != 0 && caller.uid != 0) else { return Ok(set.mode) };
        let gid = match set.gid {
            Some(gid) => gid,
            None => self.getattr(ino)?.stat.gid,
        };
        Ok(Some(if caller.may_set_setgid(gid) { mode } else { mode & !SETGID }))
    }

    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        use std::os::unix::ffi::OsStringExt;
        Ok(self.engine.read_link(&self.path(ino)?)?.into_vec())
    }

    /// A new entry made by `make`, as a node with one lookup.
    fn made(&self, parent: u64, name: &OsStr, make: impl FnOnce(&str) -> Result<()>) -> Result<Attr> {
        let path = self.child_path(parent, name)?;
        self.check_writable(&path)?;
        if self.child_of(parent, name).is_some_and(|ino| self.is_pending(ino)) {
            return Err(os_error("create", libc::EEXIST));
        }
        make(&path)?;
        let stat = self.engine.stat(&path)?.ok_or_else(|| Error::from(Reason::NotFound))?;
        let ino = self.table().insert(parent, name, stat.kind, None);
        Ok(Attr { ino, stat })
    }

    pub fn mkdir(&self, parent: u64, name: &OsStr, mode: u32, caller: &Caller) -> Result<Attr> {
        // An announcement of a directory the engine made (`Vfs::changed`): the one there.
        let path = self.child_path(parent, name)?;
        if self.heralded(&path, caller) == Some(Announce::Dir)
            && let Some(stat) = self.engine.stat(&path)?.filter(|s| s.kind == FileKind::Dir)
        {
            let ino = self.table().lookup(parent, name, FileKind::Dir);
            return Ok(Attr { ino, stat });
        }
        let owner = caller.owner();
        self.made(parent, name, |path| self.engine.mkdir(path, mode & 0o7777, owner))
    }

    pub fn symlink(&self, parent: u64, name: &OsStr, target: &OsStr, caller: &Caller) -> Result<Attr> {
        let owner = caller.owner();
        self.made(parent, name, |path| self.engine.symlink(target, path, owner))
    }

    pub fn mknod(&self, parent: u64, name: &OsStr, mode: u32, rdev: u32, caller: &Caller) -> Result<Attr> {
        let kind = match mode & libc::S_IFMT {
            libc::S_IFIFO => FileKind::Fifo,
            libc::S_IFSOCK => FileKind::Socket,
            libc::S_IFCHR => FileKind::CharDevice,
            libc::S_IFBLK => FileKind::BlockDevice,
            // A regular file: created and committed empty, like `open(O_CREAT)` then `close`.
            libc::S_IFREG | 0 => {
                let (attr, fh) = self.create(parent, name, mode, libc::O_WRONLY | libc::O_EXCL, caller)?;
                let flushed = self.flush(fh, false, caller);
                self.release(fh, caller);
                flushed?;
                return self.getattr(attr.ino);
            }
            _ => return Err(Reason::InvalidArgument { what: "file type" }.into()),
        };
        let owner = caller.owner();
        self.made(parent, name, |path| self.engine.mknod(path, kind, mode & 0o7777, u64::from(rdev), owner))
    }

    pub fn unlink(&self, parent: u64, name: &OsStr, caller: &Caller) -> Result<()> {
        let path = self.child_path(parent, name)?;
        self.check_writable(&path)?;
        // An announcement of a removal the engine made (`Vfs::changed`): only the name goes.
        if self.heralded(&path, caller) == Some(Announce::Deleted) && self.engine.stat(&path)?.is_none() {
            self.table().detach(parent, name);
            return Ok(());
        }
        let known = self.child_of(parent, name);
        let file_node = known.and_then(|ino| self.file_of(ino));
        if let (Some(ino), Some(file_node)) = (known, &file_node) {
            let mut state = file_node.lock();
            if self.is_pending(ino) {
                // Never committed: it only ever existed here.
                if state.handles == 0
                    && let Some(draft) = state.discard()
                {
                    self.engine.drafts().discard(draft);
                }
                let mut table = self.table();
                if let Some(node) = table.get_mut(ino) {
                    node.pending = false;
                }
                table.detach(parent, name);
                return Ok(());
            }
            self.keep_open_version(&mut state, &path);
        }
        self.engine.remove(&path, &self.actor(caller)).inspect_err(|e| self.tell_refusal(caller, e))?;
        let detached = self.table().detach(parent, name);
        // A hard-linked file lives on under another of its names.
        if let Some(ino) = detached
            && self.table().path(ino).is_some()
        {
            self.retarget(ino);
        }
        Ok(())
    }

    /// The file at `path` is about to be removed or replaced: its open handles keep reading it.
    fn keep_open_version(&self, state: &mut FileState, path: &str) {
        if state.handles > 0 && state.draft().is_none() && state.backing.is_none() {
            state.backing = self.engine.files().open(path).ok().map(std::sync::Arc::new);
        }
    }

    pub fn rmdir(&self, parent: u64, name: &OsStr) -> Result<()> {
        let path = self.child_path(parent, name)?;
        self.check_writable(&path)?;
        let pending_inside = self.child_of(parent, name).is_some_and(|ino| !self.table().pending_in(ino).is_empty());
        if pending_inside {
            return Err(os_error("rmdir", libc::ENOTEMPTY));
        }
        self.remember_before_removal(parent, name, &path);
        self.engine.rmdir(&path)?;
        self.table().detach(parent, name);
        Ok(())
    }

    /// The kind of the node named `name` in `parent`, if the table knows one.
    fn kind_of(&self, parent: u64, name: &OsStr) -> Option<FileKind> {
        let table = self.table();
        table.child(parent, name).and_then(|ino| table.get(ino)).map(|n| n.kind)
    }

    /// Commit a pending file so the tree has it (before a rename or a link moves its name).
    fn materialize(&self, parent: u64, name: &OsStr, caller: &Caller) -> Result<()> {
        let Some(ino) = self.child_of(parent, name) else {
            return Ok(());
        };
        if !self.is_pending(ino) {
            return Ok(());
        }
        let Some(file_node) = self.file_of(ino) else {
            return Ok(());
        };
        let mut state = file_node.lock();
        if state.is_refused() {
            return Err(Reason::StillBlocked.into());
        }
        self.commit(ino, &mut state, caller, crate::engine::CommitAt::Close)
    }

    pub fn rename(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        flags: u32,
        caller: &Caller,
    ) -> Result<()> {
        let from = self.child_path(parent, name)?;
        let to = self.child_path(new_parent, new_name)?;
        self.check_writable(&from)?;
        self.check_writable(&to)?;
        let how = if flags & libc::RENAME_EXCHANGE != 0 {
            RenameHow::Exchange
        } else if flags & libc::RENAME_NOREPLACE != 0 {
            RenameHow::NoReplace
        } else {
            RenameHow::Replace
        };
        let blocked_by_open = || {
            self.leaves_pass_through_open(parent, name, &from, &to)
                || (how == RenameHow::Exchange && self.leaves_pass_through_open(new_parent, new_name, &to, &from))
        };
        // The kernel sends a handle's release after close(2) has returned: `echo x > a.log; mv
        // a.log a.py` must not see a handle that is only on its way out.
        let deadline = std::time::Instant::now() + RELEASE_GRACE;
        while blocked_by_open() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if blocked_by_open() {
            // A file open on a pass-through path is read and written without the gate (by the
            // kernel itself, with passthrough): it may not take a gated name while it is open.
            // `EXDEV` makes `mv` and most programs copy it instead, and the copy is judged.
            return Err(os_error("rename", libc::EXDEV));
        }
        self.materialize(parent, name, caller)?;
        if how == RenameHow::Exchange {
            self.materialize(new_parent, new_name, caller)?;
        } else if how == RenameHow::Replace
            && let Some(dir) = self.child_of(new_parent, new_name)
            && self.kind_of(parent, name) == Some(FileKind::Dir)
            && !self.table().pending_in(dir).is_empty()
        {
            // A directory whose only entries are files not committed yet is not empty.
            return Err(os_error("rename", libc::ENOTEMPTY));
        } else if let Some(ino) = self.child_of(new_parent, new_name)
            && self.is_pending(ino)
        {
            if how == RenameHow::NoReplace {
                return Err(os_error("rename", libc::EEXIST));
            }
            // Replacing a file that was never committed: nothing of it is in the tree to keep.
            self.unlink(new_parent, new_name, caller)?;
        }
        if how != RenameHow::Exchange
            && let Some(replaced) = self.child_of(new_parent, new_name).and_then(|ino| self.file_of(ino))
        {
            self.keep_open_version(&mut replaced.lock(), &to);
        }
        if how == RenameHow::Replace {
            self.remember_before_removal(new_parent, new_name, &to);
        }
        self.engine.rename(&from, &to, how, &self.actor(caller)).inspect_err(|e| self.tell_refusal(caller, e))?;
        let moved = self.child_of(parent, name);
        self.table().rename(parent, name, new_parent, new_name, how == RenameHow::Exchange);
        if let Some(ino) = moved {
            self.retarget(ino);
        }
        Ok(())
    }

    /// Would moving `name` in `parent` from `from` to `to` give a gated name to a file (it, or
    /// one below it) that is open with a handle written in place?
    fn leaves_pass_through_open(&self, parent: u64, name: &OsStr, from: &str, to: &str) -> bool {
        let Some(moved) = self.child_of(parent, name) else { return false };
        // The open in-place handles first (usually none), then where their files are.
        let open: Vec<u64> = self
            .handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .filter_map(|h| match **h {
                super::Handle::InPlace { ino, .. } => Some(ino),
                _ => None,
            })
            .collect();
        open.into_iter().any(|ino| {
            // The node itself (under any of its names), or a file below it.
            if ino == moved {
                return !self.in_place(to);
            }
            let Ok(path) = self.path(ino) else { return false };
            match path.strip_prefix(from) {
                Some(rest) if rest.starts_with('/') => !self.in_place(&format!("{to}{rest}")),
                _ => false,
            }
        })
    }

    /// Drafts below a renamed node now belong to new paths (for recovery's note).
    fn retarget(&self, ino: u64) {
        let nodes: Vec<(u64, std::sync::Arc<super::file::FileNode>)> = {
            let table = self.table();
            std::iter::once(ino)
                .chain(table.descendants(ino))
                .filter_map(|i| table.get(i).and_then(|n| n.file.clone()).map(|f| (i, f)))
                .collect()
        };
        for (ino, file_node) in nodes {
            let state = file_node.lock();
            if let (Some(draft), Ok(path)) = (state.draft(), self.path(ino)) {
                self.engine.drafts().retarget(draft, &path);
            }
        }
    }

    pub fn link(&self, ino: u64, new_parent: u64, new_name: &OsStr, caller: &Caller) -> Result<Attr> {
        let (parent, name) = {
            let table = self.table();
            let node = table.get(ino).ok_or_else(|| Error::from(Reason::NotFound))?;
            (node.parent, node.name.clone())
        };
        self.materialize(parent, &name, caller)?;
        let from = self.path(ino)?;
        let to = self.child_path(new_parent, new_name)?;
        self.check_writable(&to)?;
        // Never across the gate's boundary (the engine refuses that with EXDEV): the new name
        // is the same inode (see `inodes`), with its new link count.
        self.engine.hard_link(&from, &to, &self.actor(caller)).inspect_err(|e| self.tell_refusal(caller, e))?;
        self.table().alias(ino, new_parent, new_name);
        self.getattr(ino)
    }

    pub fn opendir(&self, ino: u64) -> Result<u64> {
        self.path(ino)?;
        self.table().get_mut(ino).ok_or_else(|| Error::from(Reason::NotFound))?.opens += 1;
        Ok(self.new_handle(Handle::Dir { ino, entries: std::sync::Mutex::new(None) }))
    }

    /// May the kernel keep `dir`'s listing across opens? Yes, except in the state directory,
    /// whose entries the engine adds behind its back all the time (journal rows, rejection
    /// envelopes). Everywhere else a listing changes through a request the kernel sends (it
    /// drops the listing itself), or through [`Kernel::forget_name`](super::Kernel::forget_name):
    /// every name that appears or goes otherwise (an MCP or CLI write, a restore, a refused
    /// new file dropped) is said there. Names that exist only while a commit is in flight
    /// (rwfs's temporary names) are never listed, so no listing depends on when it was read.
    pub fn listing_cacheable(&self, dir: u64) -> bool {
        self.path(dir).is_ok_and(|path| !self.engine.class(&path).is_state())
    }

    /// Directory entries from `offset` on (`.` and `..` first, then the tree's entries and the
    /// pending files), read once per open directory; `add` takes an entry and the offset of the
    /// next one, and says when the reply is full.
    pub fn readdir(&self, fh: u64, offset: u64, mut add: impl FnMut(&DirEntry, u64) -> bool) -> Result<()> {
        let (_, list) = self.listing(fh, offset)?;
        for (i, entry) in list.iter().enumerate() {
            if add(entry, offset + i as u64 + 1) {
                break;
            }
        }
        Ok(())
    }

    /// `readdirplus`: [`Vfs::readdir`] with each entry's attributes. Each entry but `.` and `..`
    /// counts a lookup, as [`Vfs::lookup`] does (the kernel forgets it later; it ignores the
    /// two dots); an entry the reply has no room for does not. An entry gone since the listing
    /// is left out; one whose attributes cannot be had (a name that is not UTF-8) comes without
    /// them (`None`), which counts nothing.
    pub fn readdirplus(
        &self,
        fh: u64,
        offset: u64,
        mut add: impl FnMut(&DirEntry, Option<&Attr>, u64) -> bool,
    ) -> Result<()> {
        let (dir, list) = self.listing(fh, offset)?;
        for (i, entry) in list.iter().enumerate() {
            let next = offset + i as u64 + 1;
            let (attr, counted) = match entry.name.as_encoded_bytes() {
                b"." | b".." => (self.getattr(entry.ino).ok(), false),
                _ => match self.lookup(dir, &entry.name) {
                    Ok(attr) => (Some(attr), true),
                    Err(e) if *e.reason() == Reason::NotFound => continue,
                    Err(_) => (None, false),
                },
            };
            if add(entry, attr.as_ref(), next) {
                if let Some(attr) = attr.filter(|_| counted) {
                    self.forget(attr.ino, 1);
                }
                break;
            }
        }
        Ok(())
    }

    /// The open directory `fh`'s node and its entries from `offset` on, listed at the first
    /// call of the handle.
    fn listing(&self, fh: u64, offset: u64) -> Result<(u64, Vec<DirEntry>)> {
        self.with_handle(fh, |vfs, handle| {
            let Handle::Dir { ino, entries } = handle else {
                return Err(Reason::NotADirectory.into());
            };
            let mut entries = entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if entries.is_none() {
                *entries = Some(vfs.list(*ino)?);
            }
            let list = entries.as_ref().map_or(&[][..], |v| &v[..]);
            Ok((*ino, list.get(offset as usize..).unwrap_or_default().to_vec()))
        })
    }

    /// How many references the kernel holds on node `ino` (lookups not yet forgotten); `None`
    /// for a node the table does not have.
    pub fn lookups(&self, ino: u64) -> Option<u64> {
        self.table().get(ino).map(|n| n.lookups)
    }

    fn list(&self, ino: u64) -> Result<Vec<DirEntry>> {
        let path = self.path(ino)?;
        let parent = self.table().get(ino).map_or(ROOT, |n| n.parent);
        let dir = |ino, name: &str| DirEntry { ino, kind: FileKind::Dir, name: OsString::from(name) };
        let mut out = vec![dir(ino, "."), dir(parent, "..")];
        let listed = self.engine.list(&path)?;
        let table = self.table();
        for (name, kind) in &listed {
            if name.to_str().is_some_and(crate::durable::is_temp_name)
                || table.child_path(ino, name).is_some_and(|child| !self.listed(&child))
            {
                continue;
            }
            // A number for readdir only; `stat` gives the node's (d_ino is advisory).
            let child = table.child(ino, name).unwrap_or(u64::MAX);
            out.push(DirEntry { ino: child, kind: *kind, name: name.clone() });
        }
        for (name, child) in table.pending_in(ino) {
            if !listed.iter().any(|(n, _)| *n == name) {
                out.push(DirEntry { ino: child, kind: FileKind::File, name });
            }
        }
        Ok(out)
    }

    pub fn getxattr(&self, ino: u64, attr: &OsStr) -> Result<Vec<u8>> {
        self.with_entry(ino, |vfs, entry| vfs.engine.xattrs().get(entry, attr))
    }

    pub fn listxattr(&self, ino: u64) -> Result<Vec<u8>> {
        use std::os::unix::ffi::OsStrExt;
        let names = self.with_entry(ino, |vfs, entry| vfs.engine.xattrs().list(entry))?;
        Ok(names.iter().flat_map(|n| n.as_bytes().iter().copied().chain([0])).collect())
    }

    /// `setxattr`. Setting the access ACL of a setgid file by a caller outside its group (and
    /// not root) also drops the setgid bit, as `posix_acl_update_mode` does on a local
    /// filesystem: the backing filesystem sees rwfs's own credentials, which may keep it.
    pub fn setxattr(&self, ino: u64, attr: &OsStr, value: &[u8], flags: i32, caller: &Caller) -> Result<()> {
        self.check_writable(&self.path(ino)?)?;
        self.each_entry(ino, |vfs, entry| vfs.engine.xattrs().set(entry, attr, value, flags))?;
        if attr == crate::engine::ACL_ACCESS && caller.uid != 0 {
            let stat = self.getattr(ino)?.stat;
            if stat.perm & SETGID != 0 && !caller.may_set_setgid(stat.gid) {
                let perm = stat.perm & !SETGID;
                self.each_entry(ino, |vfs, entry| vfs.engine.set_perm(entry, perm, &vfs.actor(caller)))?;
            }
        }
        Ok(())
    }

    pub fn removexattr(&self, ino: u64, attr: &OsStr) -> Result<()> {
        self.check_writable(&self.path(ino)?)?;
        self.each_entry(ino, |vfs, entry| vfs.engine.xattrs().remove(entry, attr))
    }

    /// What the kernel's `file_remove_privs` does before a write, for a write that leaves it to
    /// the filesystem (`FUSE_WRITE_KILL_SUIDGID`: a direct-I/O handle, a writer without
    /// `CAP_FSETID`): the setuid bit goes, and the setgid bit of a group-executable file, in the
    /// tree's entry and the draft as a `chmod` would. The backing filesystem keeps them: rwfs
    /// writes there with its own credentials. A file capability (`security.capability`) needs
    /// nothing here: the backing filesystem drops it at the draft's write whoever writes (it does
    /// not depend on `CAP_FSETID`), and the draft is what the file reads as. A handle that does
    /// not write through the gate is left alone.
    pub fn drop_privileges_for_write(&self, fh: u64, caller: &Caller) -> Result<()> {
        let Some(ino) = self.draft_handle_node(fh) else { return Ok(()) };
        let perm = self.getattr(ino)?.stat.perm;
        let kept = without_write_privileges(perm);
        if kept != perm {
            self.setattr(ino, SetAttr { mode: Some(kept), ..SetAttr::default() }, caller)?;
        }
        Ok(())
    }

    /// Read from the draft when there is one, else from the tree.
    fn with_entry<T>(&self, ino: u64, f: impl FnOnce(&Vfs, Entry<'_>) -> Result<T>) -> Result<T> {
        let path = self.path(ino)?;
        let file_node = self.file_of(ino);
        let state = file_node.as_ref().map(|f| f.lock());
        match state.as_ref().and_then(|s| s.draft()) {
            Some(draft) => f(self, Entry::Draft(draft)),
            None => f(self, Entry::Path(&path)),
        }
    }

    /// Change the tree's entry (unless pending) and the draft (when there is one).
    fn each_entry(&self, ino: u64, mut f: impl FnMut(&Vfs, Entry<'_>) -> Result<()>) -> Result<()> {
        let path = self.path(ino)?;
        let pending = self.is_pending(ino);
        let file_node = self.file_of(ino);
        let state = file_node.as_ref().map(|f| f.lock());
        if !pending {
            f(self, Entry::Path(&path))?;
        }
        if let Some(draft) = state.as_ref().and_then(|s| s.draft()) {
            f(self, Entry::Draft(draft))?;
        }
        Ok(())
    }

    pub fn statfs(&self) -> Result<crate::durable::FsStats> {
        self.engine.statfs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_drops_setuid_and_the_setgid_of_a_group_executable_file_only() {
        assert_eq!(without_write_privileges(0o6755), 0o755);
        assert_eq!(without_write_privileges(0o4644), 0o644);
        // setgid without group execute marks mandatory locking: kept, as the kernel keeps it.
        assert_eq!(without_write_privileges(0o2644), 0o2644);
        assert_eq!(without_write_privileges(0o3775), 0o1775);
        assert_eq!(without_write_privileges(0o755), 0o755);
    }
}
