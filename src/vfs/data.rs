//! The data path: open, create, read, write, truncate, and the commit points (flush, fsync,
//! release). Each regular file's state is locked for the whole of an operation on it, so the
//! draft a write changes is the draft a concurrent flush commits.
//!
//! Invariant: no writer is told `ENOENT` for a file it is creating. A new file that was never
//! committed (a refused one) loses its name at its last close, and FUSE sends that release
//! after `close()` returned: the writer's next `open(O_CREAT)` may already have resolved the
//! name to the old node. An open of such a node (checked again under the file's lock, under
//! which a last close drops the name), or a `getattr` of a node the table let go, answers
//! `ESTALE`: the kernel resolves the name once more (`LOOKUP_REVAL`) and creates the file afresh
//! (`ENOENT` only without `O_CREAT`, as for any missing file). A create that finds the name
//! gone between its check and its open creates afresh too. The writer then meets the refusal at
//! its own write or close, with its own row and envelope.

use std::ffi::OsStr;
use std::sync::Arc;

use nix::libc;

use super::file::{FileNode, FileState, Version};
use super::{Attr, Caller, Handle, Vfs};
use crate::engine::{CommitAt, DraftBase, DraftId, ReadView};
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::journal::Actor;

/// An open file: its handle, and whether the kernel may keep the pages it cached of the file
/// (`FOPEN_KEEP_CACHE`): only when nothing changed the file since they were read, as far as
/// this filesystem, which sees every change made through it or the engine, can tell (the
/// committed file's `Version` is checked too, for changes made outside). Otherwise the
/// kernel drops them, and reads come here.
///
/// `flush_at_close` is false for a read-only open: a reader's close commits nothing (see
/// [`Vfs::flush_target`]), so the kernel need not send the flush at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub fh: u64,
    pub keep_cache: bool,
    pub flush_at_close: bool,
    /// Reads and writes bypass the page cache: a redacted view (`engine/read_guard.rs`), and
    /// every other open of a read-guarded file that is not written in place (a pass-through
    /// path: not covered). The page cache is the node's, shared by all its
    /// handles: a mapping of a redacted view is filled there (the kernel drops the node's pages
    /// first, then faults them in through the view's handle), and a real reader's cached
    /// `read()` at that moment would leave real pages in it for the mapping to show. With every
    /// real handle direct, only a real process's own mapping can put real pages there.
    pub direct_io: bool,
}

/// An open of a file written in place (see [`Vfs::in_place_backing`]).
///
/// The kernel refuses to mix, on one node, opens whose I/O passes through with opens whose
/// pages it caches; so only a node's first open may start passthrough, and the later opens
/// follow it (the adapter reuses the first one's backing while any of them is open).
pub struct InPlaceOpen {
    pub ino: u64,
    /// For the node's only open handle: a read-write descriptor of its file (read-write, so
    /// that a later writable open can share it). `None` when other handles are open.
    pub backing: Option<Result<crate::durable::File>>,
}

/// A released file handle whose last close is still to run (see [`Vfs::release_handle`]).
pub struct Closing {
    ino: u64,
    file_node: Option<Arc<FileNode>>,
    /// It was the file's last handle.
    last: bool,
}

/// An errno from the operating system's vocabulary (`EBADF`, `EEXIST`, …).
pub(super) fn os_error(what: &'static str, errno: i32) -> Error {
    Error::io(what, std::io::Error::from_raw_os_error(errno))
}

impl Vfs {
    fn file_node(&self, ino: u64) -> Result<Arc<FileNode>> {
        let table = self.table();
        let node = table.get(ino).ok_or_else(|| Error::from(Reason::NotFound))?;
        match (&node.file, node.kind) {
            (Some(file), _) => Ok(file.clone()),
            (None, crate::durable::FileKind::Dir) => Err(Reason::IsDirectory.into()),
            (None, _) => Err(Reason::NotRegularFile.into()),
        }
    }

    // Small queries that take and release the table's lock inside, so that no caller holds it
    // while it locks a file (the lock order is file, then table).

    pub(crate) fn is_pending(&self, ino: u64) -> bool {
        self.table().get(ino).is_some_and(|n| n.pending)
    }

    pub(crate) fn file_of(&self, ino: u64) -> Option<Arc<FileNode>> {
        self.table().get(ino).and_then(|n| n.file.clone())
    }

    /// Has the node lost its name (unlinked, or replaced by a rename) while the kernel still
    /// holds it?
    pub(crate) fn is_unlinked(&self, ino: u64) -> bool {
        self.table().get(ino).is_some_and(|n| !n.linked)
    }

    pub(crate) fn child_of(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.table().child(parent, name)
    }

    fn set_opens(&self, ino: u64, delta: i64) {
        let mut table = self.table();
        if let Some(node) = table.get_mut(ino) {
            node.opens = node.opens.saturating_add_signed(delta);
        }
        table.collect(ino);
    }

    /// The attributes of a regular file: its draft's while it has one.
    pub(crate) fn file_attr(&self, ino: u64, state: &FileState) -> Result<Option<Attr>> {
        match state.draft() {
            Some(draft) => Ok(Some(Attr { ino, stat: self.engine.drafts().stat(draft)? })),
            None => Ok(None),
        }
    }

    /// `open(2)` of an existing node with `flags`: the handle, and whether the kernel may keep
    /// the pages it cached of the file (see [`Opened`]).
    pub fn open(&self, ino: u64, flags: i32, caller: &Caller) -> Result<Opened> {
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let truncate = writable && flags & libc::O_TRUNC != 0;
        let path = match self.path(ino) {
            Ok(path) => path,
            // A never-committed file whose name went at its last close, while the kernel
            // resolved that name for this open (see the module docs): the kernel resolves it
            // again, and creates the file afresh if the caller asked for `O_CREAT`.
            Err(_) if self.table().get(ino).is_none() || (self.is_unlinked(ino) && self.file_of(ino).is_some()) => {
                return Err(name_dropped());
            }
            Err(e) => return Err(e),
        };
        self.check_readable(&path)?;
        if writable {
            self.check_writable(&path)?;
        }
        if let Some(opened) = self.guarded_open(ino, &path, flags, caller)? {
            return Ok(opened);
        }
        let file_node = self.file_node(ino)?;
        if self.engine.class(&path).in_place() && !self.is_pending(ino) {
            let file = if writable {
                self.engine
                    .files()
                    .open_in_place(&path, None, Some(&self.actor(caller)))
                    .inspect_err(|e| self.tell_refusal(caller, e))?
            } else {
                self.engine.files().open(&path)?
            };
            if truncate {
                self.engine.files().set_len(&file, 0)?;
            }
            // Written in place, through the kernel or not: the file's own version says.
            let version = Version::from(&self.engine.files().stat(&file)?);
            let keep_cache = file_node.lock().open_pages(Some(version)) && !self.engine.is_read_guarded(&path);
            self.set_opens(ino, 1);
            let fh = self.new_handle(Handle::InPlace { ino, file });
            return Ok(Opened { fh, keep_cache, flush_at_close: writable, direct_io: false });
        }
        let mut state = file_node.lock();
        // A last close drops a name under this lock: it may have done so since `path` above.
        if self.is_unlinked(ino) {
            return Err(name_dropped());
        }
        if truncate {
            self.rewrite(&path, &mut state, caller)?;
        }
        let version = match (state.draft(), &state.backing) {
            (Some(_), _) => None,
            (None, Some(backing)) => Some(Version::from(&self.engine.files().stat(backing)?)),
            (None, None) if self.is_pending(ino) => None,
            (None, None) => self.engine.stat(&path)?.as_ref().map(Version::from),
        };
        // The state directory's files change behind the kernel's back: never kept. Nor are a
        // read-guarded file's: a private mapping of a redacted view fills the page cache.
        let guarded = self.engine.is_read_guarded(&path);
        let keep_cache = state.open_pages(version) && !self.engine.class(&path).is_state() && !guarded;
        state.handles += 1;
        drop(state);
        self.set_opens(ino, 1);
        let fh = self.new_handle(Handle::File { ino, writable, opener: caller.clone() });
        // A read-guarded file's real bytes never enter the page cache through a read or a
        // write (see [`Opened::direct_io`]).
        Ok(Opened { fh, keep_cache, flush_at_close: writable, direct_io: guarded })
    }

    /// The open of a read-guarded file by a process of an agent run (`engine/read_guard.rs`):
    /// refused, or (read-only) a handle on its redacted view; `None` for every other open,
    /// which goes on as usual (a write-only open too: it reads nothing).
    fn guarded_open(&self, ino: u64, path: &str, flags: i32, caller: &Caller) -> Result<Option<Opened>> {
        let access = flags & libc::O_ACCMODE;
        let view = self.engine.read_view(path, caller.pid, caller.comm.as_deref());
        let refusal = match view {
            ReadView::Real => return Ok(None),
            _ if access == libc::O_WRONLY => return Ok(None),
            ReadView::Redacted { rule } if access == libc::O_RDONLY => {
                let view = self.engine.redacted_view(path, &rule)?;
                self.set_opens(ino, 1);
                let fh = self.new_handle(Handle::Redacted { ino, view });
                return Ok(Some(Opened { fh, keep_cache: false, flush_at_close: false, direct_io: true }));
            }
            ReadView::Redacted { rule } => Reason::ReadGuarded { rule, redacted: true },
            ReadView::Refused { rule } => Reason::ReadGuarded { rule, redacted: false },
        };
        let error = crate::error::Error::from(refusal).at(path);
        if self.stderr_notice {
            super::stderr::tell(caller.pid, &format!("rwfs: {path}: {}", error.reason()));
        }
        Err(error)
    }

    /// The node of handle `fh` when it writes through a draft (the gate), not in place.
    pub(crate) fn draft_handle_node(&self, fh: u64) -> Option<u64> {
        self.with_handle(fh, |_, handle| match handle {
            Handle::File { ino, writable: true, .. } => Ok(Some(*ino)),
            _ => Ok(None),
        })
        .ok()
        .flatten()
    }

    /// For a handle written in place (a pass-through path, where nothing is judged), what the
    /// kernel needs to read and write its file directly (FUSE passthrough); `None` for every
    /// other handle: a gated file's bytes must all come here, or the gate would not see them.
    pub fn in_place_backing(&self, fh: u64) -> Option<InPlaceOpen> {
        let ino = self
            .with_handle(fh, |_, handle| match handle {
                Handle::InPlace { ino, .. } => Ok(*ino),
                _ => Err(Reason::NotRegularFile.into()),
            })
            .ok()?;
        let first = self.table().get(ino).is_some_and(|n| n.opens <= 1);
        let backing =
            first.then(|| self.path(ino).and_then(|path| self.engine.files().open_in_place(&path, None, None)));
        Some(InPlaceOpen { ino, backing })
    }

    /// Truncate to nothing (`O_TRUNC`): the draft is emptied, or an empty one started; a
    /// refusal is forgotten (a rewrite), and a refused new file's placeholder becomes its draft.
    fn rewrite(&self, path: &str, state: &mut FileState, caller: &Caller) -> Result<()> {
        let actor = self.actor(caller);
        if let Some(placeholder) = state.take_placeholder() {
            state.start(placeholder, true, Some(actor.clone()));
        }
        match state.drafting() {
            Some(draft) => {
                self.engine.drafts().truncate(draft, 0)?;
                state.changed_by(actor);
            }
            None => {
                let draft = self.engine.drafts().start(path, DraftBase::Truncated)?;
                if let Some(old) = state.start(draft, true, Some(actor)) {
                    self.engine.drafts().discard(old);
                }
            }
        }
        Ok(())
    }

    /// `open(O_CREAT)` of a name the kernel believes absent: the new node and its handle.
    ///
    /// Where the kernel may keep that belief ([`Vfs::absence_cacheable_for`]: a name appears
    /// there only through this module or through the engine, which says so before its change
    /// is acknowledged), it is not asked of the disk again. A name made behind the kernel's
    /// back in the instant between its lookup and this create is found by the commit, as one
    /// made while the file is written is: the close commits over it, and the version it
    /// replaces is kept.
    pub fn create(&self, parent: u64, name: &OsStr, mode: u32, flags: i32, caller: &Caller) -> Result<(Attr, u64)> {
        let path = self.child_path(parent, name)?;
        self.check_writable(&path)?;
        let exists = self.child_of(parent, name).is_some_and(|ino| self.is_pending(ino))
            || (!self.absence_cacheable_for(parent, name, caller) && self.engine.stat(&path)?.is_some());
        if exists {
            if flags & libc::O_EXCL != 0 {
                return Err(os_error("create", libc::EEXIST));
            }
            if let Some(found) = self.open_named(parent, name, flags, caller)? {
                return Ok(found);
            }
        }
        let perm = mode & 0o7777;
        let owner = caller.owner();
        if self.engine.class(&path).in_place() {
            let file = self
                .engine
                .files()
                .open_in_place(&path, Some((perm, owner)), Some(&self.actor(caller)))
                .inspect_err(|e| self.tell_refusal(caller, e))?;
            let stat = self.engine.files().stat(&file)?;
            let ino = self.table().insert(parent, name, crate::durable::FileKind::File, None);
            self.set_opens(ino, 1);
            return Ok((Attr { ino, stat }, self.new_handle(Handle::InPlace { ino, file })));
        }
        let draft = self.engine.drafts().start(&path, DraftBase::New { perm, owner: caller.owner() })?;
        let stat = self.engine.drafts().stat(draft)?;
        let file_node = Arc::new(FileNode::default());
        {
            let mut state = file_node.lock();
            state.start(draft, true, Some(self.actor(caller)));
            state.handles = 1;
        }
        let ino = {
            let mut table = self.table();
            let ino = table.insert(parent, name, crate::durable::FileKind::File, Some(file_node));
            if let Some(node) = table.get_mut(ino) {
                node.pending = true;
                node.opens = 1;
            }
            ino
        };
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        Ok((Attr { ino, stat }, self.new_handle(Handle::File { ino, writable, opener: caller.clone() })))
    }

    /// A create of a name that exists: a pending file, or a name created behind the kernel's
    /// back (an MCP write): open what is there. `None` when the name went meanwhile (a refused
    /// new file's placeholder, dropped by its last close): the create makes the file afresh.
    fn open_named(&self, parent: u64, name: &OsStr, flags: i32, caller: &Caller) -> Result<Option<(Attr, u64)>> {
        let attr = match self.lookup(parent, name) {
            Ok(attr) => attr,
            Err(e) if matches!(e.reason(), Reason::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
        match self.open(attr.ino, flags, caller) {
            Ok(opened) => Ok(Some((attr, opened.fh))),
            Err(e) => {
                // The kernel is not given this node: the lookup counted for it is undone.
                self.forget(attr.ino, 1);
                if e.raw_os_error() == Some(libc::ESTALE) { Ok(None) } else { Err(e) }
            }
        }
    }

    /// Up to `size` bytes at `offset` (fewer only at the end of the file).
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; size as usize];
        let n = self.with_handle(fh, |vfs, handle| match handle {
            Handle::InPlace { file, .. } => vfs.engine.files().read_at(file, &mut buf, offset),
            Handle::File { ino, .. } => vfs.read_file(*ino, &mut buf, offset),
            Handle::Redacted { view, .. } => {
                let from = usize::try_from(offset).unwrap_or(usize::MAX).min(view.len());
                let n = buf.len().min(view.len() - from);
                buf[..n].copy_from_slice(&view[from..from + n]);
                Ok(n)
            }
            Handle::Dir { .. } => Err(Reason::IsDirectory.into()),
        })?;
        buf.truncate(n);
        Ok(buf)
    }

    fn read_file(&self, ino: u64, buf: &mut [u8], offset: u64) -> Result<usize> {
        let file_node = self.file_node(ino)?;
        let mut state = file_node.lock();
        if let Some(draft) = state.draft() {
            return read_full(|b, at| self.engine.drafts().read(draft, at, b), buf, offset);
        }
        let backing = match &state.backing {
            Some(backing) => backing.clone(),
            None => {
                let opened = Arc::new(self.engine.files().open(&self.path(ino)?)?);
                state.backing = Some(opened.clone());
                opened
            }
        };
        drop(state);
        read_full(|b, at| self.engine.files().read_at(&backing, b, at), buf, offset)
    }

    /// `write(2)`: all of `data` at `offset`, or the errno of a refusal.
    pub fn write(&self, fh: u64, offset: u64, data: &[u8], caller: &Caller) -> Result<u32> {
        let target = self.with_handle(fh, |vfs, handle| match handle {
            Handle::InPlace { file, .. } => vfs.engine.files().write_at(file, data, offset).map(|()| None),
            Handle::File { ino, writable: true, opener } => Ok(Some((*ino, opener.clone()))),
            Handle::File { .. } | Handle::Redacted { .. } => Err(os_error("write", libc::EBADF)),
            Handle::Dir { .. } => Err(Reason::IsDirectory.into()),
        })?;
        let Some((ino, opener)) = target else {
            return Ok(data.len() as u32);
        };
        // Pages of a shared mapping are written back by the kernel (no pid): they are the
        // writes of a process that has the file open for writing.
        let caller = if caller.pid == 0 { &opener } else { caller };
        let file_node = self.file_node(ino)?;
        let mut state = file_node.lock();
        if self.is_unlinked(ino) {
            let draft = self.unlinked_draft(ino, &mut state)?;
            self.engine.drafts().write_unlinked(draft, offset, data)?;
            return Ok(data.len() as u32);
        }
        let path = self.path(ino)?;
        self.ensure_draft(&path, &mut state)?;
        let actor = self.actor(caller);
        let write = |draft| self.engine.drafts().write(draft, &path, offset, data, &actor);
        match state.write_with(write, |draft| self.engine.drafts().has(draft)) {
            Ok(()) => {
                state.changed_by(actor);
                Ok(data.len() as u32)
            }
            Err(e) => {
                if is_refusal(&e) {
                    self.refused(ino, &mut state, caller, &e);
                } else {
                    // Its close must learn of it (see `Drafting::failed_write`).
                    state.changed_by(actor);
                }
                Err(e)
            }
        }
    }

    /// `fallocate(2)` with `mode` 0 (allocate, growing the file with zeros as `truncate` does)
    /// or `FALLOC_FL_KEEP_SIZE` (blocks only: no byte changes), on the draft or the in-place
    /// file. Modes that change bytes inside the file (punching holes, zeroing, collapsing or
    /// inserting ranges) are `EOPNOTSUPP`, which `posix_fallocate` and most tools answer by
    /// writing the range, so the bytes go through the draft and the gate as any write.
    pub fn fallocate(&self, fh: u64, offset: u64, len: u64, mode: i32, caller: &Caller) -> Result<()> {
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            return Err(os_error("fallocate", libc::EOPNOTSUPP));
        }
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let target = self.with_handle(fh, |vfs, handle| match handle {
            Handle::InPlace { file, .. } => vfs.engine.files().allocate(file, offset, len, keep_size).map(|()| None),
            Handle::File { ino, writable: true, .. } => Ok(Some(*ino)),
            Handle::File { .. } | Handle::Redacted { .. } => Err(os_error("fallocate", libc::EBADF)),
            Handle::Dir { .. } => Err(Reason::IsDirectory.into()),
        })?;
        let Some(ino) = target else { return Ok(()) };
        let file_node = self.file_node(ino)?;
        let mut state = file_node.lock();
        if self.is_unlinked(ino) {
            let draft = self.unlinked_draft(ino, &mut state)?;
            return self.engine.drafts().allocate(draft, offset, len, keep_size).map(drop);
        }
        let path = self.path(ino)?;
        self.ensure_draft(&path, &mut state)?;
        let grew = match state.drafting() {
            Some(draft) => self.engine.drafts().allocate(draft, offset, len, keep_size)?,
            None => false,
        };
        if grew {
            state.changed_by(self.actor(caller));
        }
        Ok(())
    }

    /// A draft to write into: the existing one, or a copy of the committed version. A file
    /// whose draft was refused takes no more bytes until it is truncated.
    fn ensure_draft(&self, path: &str, state: &mut FileState) -> Result<()> {
        if state.is_refused() {
            return Err(Reason::StillBlocked.into());
        }
        if state.drafting().is_none() {
            let draft = self.engine.drafts().start(path, DraftBase::Current)?;
            state.start(draft, false, None);
        }
        Ok(())
    }

    /// The draft of a file that lost its name while open: its handles keep reading and writing
    /// it (POSIX), but it is never committed; its last close discards it.
    /// Its recovery note names the path the file had.
    pub(crate) fn unlinked_draft(&self, ino: u64, state: &mut FileState) -> Result<DraftId> {
        if state.is_refused() {
            return Err(Reason::StillBlocked.into());
        }
        if let Some(draft) = state.drafting() {
            return Ok(draft);
        }
        let backing = state.backing.clone().ok_or_else(|| Error::from(Reason::NotFound))?;
        let former = self.table().former_path(ino);
        let draft = self.engine.drafts().start_unlinked(&backing, former.as_deref())?;
        state.start(draft, false, None);
        Ok(draft)
    }

    /// Tell the caller why the policy refused its operation (a write, or a rename or link that
    /// brought bytes to a gated path), one line on its standard error, when the mount does that
    /// (`stderr.rs`); other errors say nothing there.
    pub(super) fn tell_refusal(&self, caller: &Caller, error: &crate::error::Error) {
        if self.stderr_notice
            && let Some(notice) = notice_of(error)
        {
            super::stderr::tell(caller.pid, &notice.line());
        }
    }

    /// The draft was refused and quarantined: the file refuses further writes and commits; a
    /// pending file keeps an empty placeholder until its last handle closes (it never reaches
    /// the tree); the kernel forgets the refused pages; the writer is told why on its standard
    /// error when the mount does that (`stderr.rs`), before it sees the errno.
    fn refused(&self, ino: u64, state: &mut FileState, caller: &Caller, error: &crate::error::Error) {
        self.tell_refusal(caller, error);
        let placeholder = if self.is_pending(ino)
            && let Ok(path) = self.path(ino)
        {
            self.engine.drafts().start(&path, DraftBase::New { perm: 0o600, owner: caller.owner() }).ok()
        } else {
            None
        };
        if let Some(old) = state.refuse(placeholder) {
            self.engine.drafts().discard(old);
        }
        self.kernel.forget_node(ino);
    }

    /// Set the size of a file (`truncate`, `ftruncate`, `O_TRUNC` without atomic truncation).
    /// `truncate(2)` by path (`by_path`), or any truncation without an open handle, is committed
    /// at once: the kernel sends the release of a file just closed after `close()` returns, so
    /// a handle may still be counted that its process no longer has. A file that lost its name
    /// while open truncates its draft, which is never committed. Truncating to nothing forgets
    /// a refusal (a rewrite); any other size of a refused file is refused.
    pub(crate) fn truncate(&self, ino: u64, size: u64, by_path: bool, caller: &Caller) -> Result<()> {
        if self.is_unlinked(ino) {
            let file_node = self.file_node(ino)?;
            let mut state = file_node.lock();
            let draft = self.unlinked_draft(ino, &mut state)?;
            return self.engine.drafts().truncate(draft, size);
        }
        let path = self.path(ino)?;
        self.check_writable(&path)?;
        if self.engine.class(&path).in_place() && !self.is_pending(ino) {
            let file = self
                .engine
                .files()
                .open_in_place(&path, None, Some(&self.actor(caller)))
                .inspect_err(|e| self.tell_refusal(caller, e))?;
            return self.engine.files().set_len(&file, size);
        }
        let file_node = self.file_node(ino)?;
        let mut state = file_node.lock();
        if size == 0 {
            self.rewrite(&path, &mut state, caller)?;
            // Marked written: a close after `ftruncate(fd, 0)` commits the empty version.
            if let Some(draft) = state.drafting() {
                self.engine.drafts().truncate(draft, 0)?;
                state.changed();
            }
        } else {
            self.ensure_draft(&path, &mut state)?;
            if let Some(draft) = state.drafting() {
                self.engine.drafts().truncate(draft, size)?;
            }
            state.changed_by(self.actor(caller));
        }
        if by_path || state.handles == 0 {
            self.commit(ino, &mut state, caller, CommitAt::Close)?;
        }
        Ok(())
    }

    /// `flush` (every `close`) and `fsync` (`sync`) of handle `fh`: commit the file's draft if
    /// it has changes.
    pub fn flush(&self, fh: u64, sync: bool, caller: &Caller) -> Result<()> {
        match self.flush_target(fh, sync)? {
            Some(ino) => self.flush_file(ino, sync, caller),
            None => Ok(()),
        }
    }

    /// The file whose draft a `flush` (`sync`: an `fsync`) of `fh` may commit, if any. A
    /// reader's close does not commit a writer's draft; an fsync on any handle does. The fsync
    /// of a file written in place is done here. `None` is cheap enough for a request thread.
    pub fn flush_target(&self, fh: u64, sync: bool) -> Result<Option<u64>> {
        self.with_handle(fh, |vfs, handle| match handle {
            Handle::InPlace { file, .. } if sync => vfs.engine.files().sync(file, false).map(|()| None),
            Handle::InPlace { .. } | Handle::Dir { .. } | Handle::Redacted { .. } => Ok(None),
            Handle::File { ino, writable, .. } if *writable || sync => Ok(Some(*ino)),
            Handle::File { .. } => Ok(None),
        })
    }

    /// The commit half of a flush of file `ino`. A close commits what its process wrote; an
    /// fsync also what was only created or truncated (`echo x > f` closes a dup of its
    /// descriptor before writing: that close must not commit an empty version). The last
    /// close commits the rest (see [`Vfs::finish_release`]).
    pub fn flush_file(&self, ino: u64, sync: bool, caller: &Caller) -> Result<()> {
        if self.is_unlinked(ino) {
            // Nothing to commit: the file is gone (its draft goes at the last close).
            return Ok(());
        }
        let file_node = self.file_node(ino)?;
        let mut state = file_node.lock();
        if state.is_refused() {
            return Err(Reason::StillBlocked.into());
        }
        // A writer whose last write failed is told again, and nothing is committed: the draft
        // is not the version it meant (the last close keeps its bytes in objects/).
        if let Some(errno) = state.failed_write_for((caller.pid != 0).then_some(caller.pid), sync) {
            state.failure_reported();
            return Err(os_error("write", errno));
        }
        let commit = if sync {
            state.needs_commit() || (self.is_pending(ino) && state.draft().is_some())
        } else {
            state.commits_at_close_by((caller.pid != 0).then_some(caller.pid))
        };
        let at = if sync { CommitAt::Fsync } else { CommitAt::Close };
        if commit && let Err(e) = self.commit(ino, &mut state, caller, at) {
            state.failure_reported();
            return Err(e);
        }
        if !commit && state.needs_commit() {
            // The last close commits this draft (a file created and closed unwritten, a dup's
            // close): the kernel holds the create's attributes with their TTL, so a stat made
            // right after close() would not ask, and would not wait for that commit. It asks.
            self.kernel.forget_attr(ino);
        }
        if sync {
            // In batch durability the commit only staged the version: an fsync returns once it
            // is installed and durable, without waiting for the rest of the window. A no-op in
            // close mode.
            let path = self.path(ino)?;
            self.engine.make_durable(&path);
        }
        Ok(())
    }

    /// Whether [`Vfs::flush_file`] of `ino` is quick enough for a thread that reads the kernel's
    /// requests: nothing to commit, or a commit that only stages
    /// ([`crate::engine::Drafts::commits_quickly`]). Not while another thread holds the file.
    pub fn flushes_quickly(&self, ino: u64) -> bool {
        let Ok(file_node) = self.file_node(ino) else { return true };
        let Some(state) = file_node.try_lock() else { return false };
        self.commit_is_quick(&state)
    }

    /// Whether committing what `state` holds is quick: nothing to commit, or only staging.
    fn commit_is_quick(&self, state: &FileState) -> bool {
        match state.drafting() {
            Some(draft) if state.needs_commit() => self.engine.drafts().commits_quickly(draft),
            _ => true,
        }
    }

    /// Whether [`Vfs::finish_release`] of `closing` is quick enough for a thread that reads the
    /// kernel's requests: not the last close, or a last close with nothing to commit or keep
    /// (its writer's close committed), or whose commit only stages.
    pub fn finishes_quickly(&self, closing: &Closing) -> bool {
        let Some(file_node) = closing.file_node.as_ref().filter(|_| closing.last) else { return true };
        let Some(state) = file_node.try_lock() else { return false };
        if state.has_reported_failure() {
            // Its bytes are kept in objects/ (hashed, synced).
            return false;
        }
        self.commit_is_quick(&state)
    }

    /// The release of a handle, both halves at once.
    pub fn release(&self, fh: u64, caller: &Caller) {
        if let Some(closing) = self.release_handle(fh) {
            self.finish_release(closing, caller);
        }
    }

    /// The first half of a release, cheap enough for a request thread: the handle is gone, and
    /// when it was the file's last, the file is `closing` (a stat waits for the second half,
    /// so one made right after `close()` sees the commit). `None` when nothing is left to do.
    pub fn release_handle(&self, fh: u64) -> Option<Closing> {
        let handle = self.handles.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&fh)?;
        let ino = match *handle {
            Handle::InPlace { ino, .. } | Handle::Dir { ino, .. } | Handle::Redacted { ino, .. } => {
                self.set_opens(ino, -1);
                return None;
            }
            Handle::File { ino, .. } => ino,
        };
        let file_node = self.file_node(ino).ok();
        let mut last = false;
        if let Some(file_node) = &file_node {
            let mut state = file_node.lock();
            state.handles = state.handles.saturating_sub(1);
            if state.handles == 0 {
                state.closing += 1;
                let mut closing = self.closing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                closing.entry(ino).or_insert_with(|| (file_node.clone(), 0)).1 += 1;
                last = true;
            }
        }
        Some(Closing { ino, file_node, last })
    }

    /// The second half (it may commit): the last close, if no handle was opened since.
    pub fn finish_release(&self, closing: Closing, caller: &Caller) {
        if let Some(file_node) = &closing.file_node
            && closing.last
        {
            let mut state = file_node.lock();
            if state.handles == 0 {
                self.last_close(closing.ino, &mut state, caller);
                // No descriptor outlives the handles: the kernel keeps inodes cached long after
                // their files are closed, and one descriptor each would exhaust the daemon's.
                state.backing = None;
            }
            file_node.closed(&mut state);
            let mut closing_files = self.closing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((_, n)) = closing_files.get_mut(&closing.ino) {
                *n -= 1;
                if *n == 0 {
                    closing_files.remove(&closing.ino);
                }
            }
        }
        self.set_opens(closing.ino, -1);
    }

    /// No handle is left: commit what is still to commit (late mmap pages arrive before
    /// release), forget a refusal, and drop drafts of files that are gone.
    fn last_close(&self, ino: u64, state: &mut FileState, caller: &Caller) {
        let (linked, pending) = self.table().get(ino).map_or((false, false), |n| (n.linked, n.pending));
        let mut drop_it = state.is_refused() || !linked;
        if !drop_it && state.has_reported_failure() {
            self.keep_reported_failure(ino, state, caller);
            // A new file that was never committed loses its name, as a refused one does.
            drop_it = pending;
        }
        let keep = if !drop_it && (state.needs_commit() || (pending && state.draft().is_some())) {
            match self.commit(ino, state, caller, CommitAt::Close) {
                Ok(()) => false,
                Err(e) => {
                    // close() has already returned: the journal (block row, quarantine) and the
                    // log are where this outcome is recorded. A draft that failed for another
                    // reason stays, for the next commit point (shutdown settles it).
                    tracing::warn!(ino, error = %e, "commit at release failed");
                    drop_it = is_refusal(&e);
                    !drop_it
                }
            }
        } else {
            false
        };
        if !keep && let Some(draft) = state.discard() {
            self.engine.drafts().discard(draft);
        }
        let pending = self.table().get(ino).is_some_and(|n| n.pending);
        if drop_it && pending {
            // Never committed: the name never reached the tree; the kernel forgets it too.
            let mut table = self.table();
            if let Some(node) = table.get_mut(ino) {
                node.pending = false;
            }
            if let Some((parent, name)) = table.get(ino).map(|n| (n.parent, n.name.clone())) {
                table.detach(parent, &name);
                drop(table);
                self.kernel.forget_name(parent, &name);
            }
        }
    }

    /// Commit the file's draft at its current path, durably: Drafting → Clean, or Refused, or
    /// Drafting again when the commit failed for another reason. Afterwards reads open the
    /// committed file (read-only: a writable descriptor on it would make `execve` of the
    /// backing file fail with `ETXTBSY`).
    pub(crate) fn commit(&self, ino: u64, state: &mut FileState, caller: &Caller, at: CommitAt) -> Result<()> {
        let Some((draft, writer)) = state.to_commit() else {
            return Ok(());
        };
        let path = match self.path(ino) {
            Ok(path) => path,
            Err(e) => {
                state.commit_failed();
                return Err(e);
            }
        };
        let actor = writer.unwrap_or_else(|| self.actor(caller));
        match self.engine.drafts().commit(draft, &path, &actor, at) {
            Ok(_) => {
                state.committed();
                state.backing = None;
                let aliases = {
                    let mut table = self.table();
                    if let Some(node) = table.get_mut(ino) {
                        node.pending = false;
                    }
                    table.get(ino).map(|n| n.aliases.clone()).unwrap_or_default()
                };
                // Hard links made through the mount follow the new version, as on any
                // filesystem; one that cannot keeps the old version under a node of its own.
                for (parent, name) in aliases {
                    let Some(alias) = self.table().child_path(parent, &name) else { continue };
                    if let Err(e) = self.engine.relink(&path, &alias, &actor) {
                        tracing::warn!(path = alias, error = %e, "a hard link keeps the previous version");
                        self.table().detach(parent, &name);
                        self.kernel.forget_name(parent, &name);
                    }
                }
                // Installing the draft changed its ctime: the kernel's copy of the attributes
                // (the draft's) is stale.
                self.kernel.forget_attr(ino);
                self.committed();
                Ok(())
            }
            Err(error) => {
                if self.engine.drafts().has(draft) {
                    state.commit_failed();
                } else {
                    state.committed();
                }
                if is_refusal(&error) {
                    self.refused(ino, state, caller, &error);
                }
                Err(error)
            }
        }
    }

    /// A draft whose commit failed at a close that reported it is not committed later behind
    /// the writer's back: its bytes are kept in `objects/` with a row (or, if even that fails,
    /// left in `drafts/` for the next start to keep). The file keeps its committed version.
    fn keep_reported_failure(&self, ino: u64, state: &mut FileState, caller: &Caller) {
        let Some(draft) = state.discard() else { return };
        let path = self.path(ino).unwrap_or_default();
        if let Err(e) = self.engine.drafts().keep(draft, &path, &self.actor(caller)) {
            tracing::warn!(path, error = %e, "a draft whose close failed stays in drafts/ for the next start");
        }
    }

    /// Commit (or, if refused, quarantine) every open draft (shutdown); how many were settled.
    pub fn settle_drafts(&self) -> usize {
        let files = self.table().files();
        let mut settled = 0;
        let daemon = Caller::kernel();
        for (ino, file_node) in files {
            let mut state = file_node.lock();
            if state.has_reported_failure() {
                self.keep_reported_failure(ino, &mut state, &daemon);
                continue;
            }
            if !(state.needs_commit() || (self.is_pending(ino) && !state.is_refused() && state.draft().is_some())) {
                continue;
            }
            state.author_unless_known(Actor::engine());
            if let Err(e) = self.commit(ino, &mut state, &daemon, CommitAt::Close) {
                tracing::warn!(ino, error = %e, "draft not committed at shutdown");
            }
            settled += 1;
        }
        settled
    }

    pub(crate) fn open_drafts(&self) -> usize {
        let files = self.table().files();
        files.iter().filter(|(_, f)| f.lock().draft().is_some()).count()
    }

    /// Run `f` on an open handle (the handle table is not locked meanwhile).
    pub(crate) fn with_handle<T>(&self, fh: u64, f: impl FnOnce(&Vfs, &Handle) -> Result<T>) -> Result<T> {
        let handle = self
            .handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&fh)
            .cloned()
            .ok_or_else(|| os_error("handle", libc::EBADF))?;
        f(self, &handle)
    }
}

/// The answer to a request for a node whose never-committed name its last close dropped after
/// the kernel resolved it: `ESTALE` makes the kernel resolve the name again (see the module
/// docs).
pub(super) fn name_dropped() -> Error {
    os_error("stale node", libc::ESTALE)
}

/// Read until `buf` is full or the file ends.
fn read_full(mut read: impl FnMut(&mut [u8], u64) -> Result<usize>, buf: &mut [u8], offset: u64) -> Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match read(&mut buf[got..], offset + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// What a refusal tells its writer: from its envelope (an identical retry once the budget is
/// spent has one too, with no retries left).
pub(super) fn notice_of(error: &crate::error::Error) -> Option<crate::notice::Notice> {
    match error.reason() {
        crate::error::Reason::Blocked(rejection) | crate::error::Reason::RetryBudgetSpent(rejection) => {
            serde_json::from_str(&rejection.envelope)
                .ok()
                .and_then(|envelope| crate::notice::Notice::of_envelope(&envelope))
        }
        crate::error::Reason::Protected(protection) => serde_json::from_str(&protection.envelope)
            .ok()
            .and_then(|envelope| crate::notice::Notice::of_envelope(&envelope)),
        _ => None,
    }
}

/// A refusal whose draft the engine quarantined: secrets (`Blocked`), or a version over the
/// policy's `max_gated_bytes` (`EFBIG`). The file takes no more bytes until it is truncated.
fn is_refusal(e: &crate::error::Error) -> bool {
    e.kind() == ErrorKind::Blocked || matches!(e.reason(), crate::error::Reason::TooBig { .. })
}
