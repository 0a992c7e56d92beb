//! Drafts: the bytes of a file being written through the mount, before they are a version.
//!
//! A draft is a file in `.resilient_write/drafts/`, on the tree's filesystem, carrying the mode,
//! owner and extended attributes the new version will have. The mount keeps one per inode being
//! written (every handle of the inode writes to it, and reads see it); the tree keeps the last
//! committed version until [`Drafts::commit`]:
//!
//! ```text
//!   start    empty (a new file, or O_TRUNC) or a copy of the current version (copy_file_range)
//!   write    pwrite into the draft; a running sha256 while writes continue where the last
//!            ended (a large write's bytes hashed on a thread of its own after its reply);
//!            the written window (with the bytes just before it) checked by the gate:
//!            a certain refusal (`Judgement::is_certain`) quarantines the draft at once →
//!            blocked. A draft written from its start past 16 MiB is judged window by window
//!            as its windows fill (the windows the commit would judge; a blocking one refuses
//!            at once), and its bytes past the first window are left to those windows
//!   commit   digest (running, or one read of the draft), the whole draft judged by the gate
//!            (refused → quarantined, `block` row, envelope) — except what the writes judged
//!            already (`Judged`): the verdict is the one a judgement of the finished draft
//!            gives, however it was written — then the commit protocol with the draft itself
//!            as the staged file: no copy — the draft is renamed into place
//!            (RENAME_NOREPLACE for a new file, RENAME_EXCHANGE otherwise, the previous
//!            version then sits in drafts/ until it is moved into objects/)
//! ```
//!
//! Invariants: a draft's bytes reach the tree only through the gate and the commit protocol; a
//! draft is never deleted with content nobody has: it is committed (it becomes the file),
//! quarantined (it becomes an object), or discarded by its owner (an unlinked file's last
//! handle closed). Drafts found at open belonged to a process that died: recovery moves them to
//! `objects/` and journals a `recover` row naming the file they were for (the `user.rwfs.target`
//! extended attribute, removed before a draft becomes a file).
//!
//! The digest of a committed draft is of the bytes as written (a running hash, or one read of
//! the draft's pages); the read-back comparison of MCP writes has no counterpart here because
//! the draft is the very file that is installed.

use std::ffi::OsStr;
use std::sync::{Arc, PoisonError};

use crate::durable::{
    Attrs, Dir, Disk, File, FileKind, SPARSE_DIGEST_MIN, Scope, Source, Staged, Stat, WorkspacePath, content_digest,
    resolve::resolve, stage,
};
use crate::error::{Error, IoContext, Reason, Result};
use crate::journal::{Actor, Change, Op};
use crate::policy::Guard;
use crate::sha::{Hasher, Sha256};
use crate::store::open_or_create;

use super::batch::{Batch, Entry};
use super::commit::version_row;
use super::entry::DraftId;
use super::gate::{Judgement, Quarantine, Refusal, SCAN_MAX, next_window};
use super::{Committed, Core, Engine};

/// The drafts' directory inside the state directory.
pub const DRAFTS_DIR: &str = crate::durable::layout::DRAFTS;
use crate::durable::layout::DRAFT_TARGET_XATTR as TARGET_XATTR;

/// The largest draft whose commit in `batch` durability is cheap enough for a request thread
/// ([`Drafts::commits_quickly`]): most of its judgement and digest ran at its writes; the rest
/// is at most this much to hash and scan.
const QUICK_COMMIT: u64 = 256 << 10;
/// Bytes before a write that the early check sees with it (a token split across two writes).
const EARLY_CONTEXT: usize = 1024;
/// Read size when a draft is hashed or judged.
const CHUNK: usize = 1 << 20;
/// The smallest write whose bytes are hashed on a thread of its own after they are written
/// ([`Draft::write`]): below it a thread costs more than it saves.
const HASH_BESIDE: usize = 128 << 10;
/// The stack of that thread (it only hashes).
const HASH_STACK: usize = 64 << 10;

/// What a new draft starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraftBase {
    /// The current version's bytes and attributes.
    Current,
    /// No bytes, the current version's attributes (`O_TRUNC`, `truncate(0)`).
    Truncated,
    /// A file that does not exist yet, asked with `perm` by `owner`; it gets what its
    /// directory gives it (group, mode, ACL: `inherit.rs`).
    New { perm: u32, owner: super::Owner },
}

/// A file being written (see the module documentation), held in the engine's draft table
/// (`drafts.rs`); the mount knows it by its [`DraftId`].
pub(crate) struct Draft {
    file: File,
    name: String,
    len: u64,
    /// sha256 of the first `hashed` bytes, while every write so far continued where the
    /// previous one ended.
    digest: Option<(Running, u64)>,
    /// The last bytes of that sequential stream, for the early check.
    tail: Vec<u8>,
    /// What the gate judged of it already (meaningful while `digest` runs).
    judged: Judged,
}

/// What the gate has judged of a draft written sequentially from its start, so that its commit
/// judges only the rest. Each state gives exactly what a judgement of the finished draft would:
/// a whole draft's judgement is kept only while the draft is that one write, and windows are
/// judged only where the commit's windowed judgement would put them (full, not the last).
#[derive(Debug, Default)]
enum Judged {
    /// Nothing yet: the commit judges it all.
    #[default]
    Nothing,
    /// The draft is one write at its start, judged then as the new version of `path`
    /// (`None`: not scanned, as binary).
    Whole { path: String, judgement: Option<Box<Judgement>> },
    /// A draft over [`SCAN_MAX`]: its windows before the one at `next` judged as `path`'s,
    /// none blocking.
    Windows { path: String, next: u64 },
    /// Binary, seen in its first window: never judged.
    Binary,
}

impl std::fmt::Debug for Draft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Draft").field("name", &self.name).field("len", &self.len).finish()
    }
}

/// The row a draft's commit writes: its bytes, what it replaces, who.
struct Version<'a> {
    sha: Sha256,
    bytes: u64,
    prev: Option<Sha256>,
    op: Op,
    mode: &'static str,
    actor: &'a Actor,
}

/// What asks for a draft's commit: in `batch` durability a close's is staged (acknowledged
/// before it is durable), an fsync's is durable before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitAt {
    /// A close (or anything else that commits and may be acknowledged at once).
    Close,
    /// An `fsync`: durable on return, in every mode.
    Fsync,
}

impl Draft {
    fn new(file: File, name: String, len: u64, digest: Option<(Hasher, u64)>) -> Draft {
        let digest = digest.map(|(hasher, hashed)| (Running::new(hasher), hashed));
        Draft { file, name, len, digest, tail: Vec::new(), judged: Judged::Nothing }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The draft file (for its attributes).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Its name in `drafts/`.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Write `data` at `offset` into the draft's file and record it. A large write that
    /// continues the running digest is hashed on a thread of its own after its bytes are in
    /// the file, which reads them back from the draft's pages: the writer has its reply as
    /// soon as they are written, and its next write goes through the kernel and into the file
    /// side by side with the hash of this one (whatever reads the digest waits for it:
    /// [`Running::ready`]).
    fn write(&mut self, disk: &Arc<dyn Disk>, offset: u64, data: &[u8]) -> std::io::Result<()> {
        disk.write_at(&self.file, data, offset)?;
        self.len = self.len.max(offset + data.len() as u64);
        match &mut self.digest {
            Some((running, hashed)) if *hashed == offset => {
                if data.len() >= HASH_BESIDE {
                    running.read_beside(disk, &self.file, offset, data.len());
                } else if let Some(hasher) = running.ready() {
                    hasher.update(data);
                }
                *hashed += data.len() as u64;
                let keep = EARLY_CONTEXT.saturating_sub(data.len()).min(self.tail.len());
                self.tail.drain(..self.tail.len() - keep);
                self.tail.extend_from_slice(&data[data.len().saturating_sub(EARLY_CONTEXT)..]);
                if matches!(self.judged, Judged::Whole { .. }) {
                    self.judged = Judged::Nothing;
                }
            }
            // A write that goes back (or leaves a gap): the commit reads the draft. A thread
            // still hashing is left to finish on its own; nothing reads what it gives.
            _ => {
                self.digest = None;
                self.judged = Judged::Nothing;
            }
        }
        Ok(())
    }

    /// The digest when the running hash covers the whole draft.
    fn complete_digest(&mut self) -> Option<Sha256> {
        match self.digest.take() {
            Some((running, hashed)) if hashed == self.len => running.finish(),
            _ => None,
        }
    }
}

/// A draft's running SHA-256: ready, or taking a large write's bytes on a thread of its own
/// ([`Draft::write`]). Whoever reads it or adds to it waits for that thread first.
///
/// The thread reads the bytes back from the draft (from the pages the write just filled), so
/// the request's thread copies nothing for it; it lives as long as the running digest (one
/// per draft written in large writes), so a write does not start a thread either. Nothing
/// changes those bytes while the digest is kept: a write that goes back over them, or a
/// truncation below their end, drops the digest (`Draft::write`, `truncate_draft`) and with
/// it what the thread gives. If the read falls short (the draft cut by someone else) or
/// fails, the digest is lost and the commit reads the draft whole.
struct Running {
    /// `None` while the thread has it, or once lost.
    hasher: Option<Hasher>,
    /// The thread, once a large write has come.
    beside: Option<Beside>,
    /// The thread has the hasher and some bytes to add.
    busy: bool,
}

/// The thread of a running digest: it takes the hasher and a range of the draft to add, and
/// gives the hasher back (`None`: the range could not be read). It ends with its [`Running`].
struct Beside {
    jobs: std::sync::mpsc::Sender<(Hasher, u64, usize)>,
    done: std::sync::mpsc::Receiver<Option<Hasher>>,
}

impl Beside {
    fn start(disk: &Arc<dyn Disk>, file: &File) -> std::io::Result<Beside> {
        let (jobs, inbox) = std::sync::mpsc::channel::<(Hasher, u64, usize)>();
        let (outbox, done) = std::sync::mpsc::channel();
        let (disk, file) = (Arc::clone(disk), file.try_clone()?);
        std::thread::Builder::new().name("rwfs-hash".into()).stack_size(HASH_STACK).spawn(move || {
            let mut buf = Vec::new();
            for (mut hasher, offset, len) in inbox {
                let read = read_into(&*disk, &file, offset, len, &mut buf, &mut hasher);
                if outbox.send(read.then_some(hasher)).is_err() {
                    return;
                }
            }
        })?;
        Ok(Beside { jobs, done })
    }
}

impl Running {
    fn new(hasher: Hasher) -> Running {
        Running { hasher: Some(hasher), beside: None, busy: false }
    }

    /// The hasher once every byte handed to it is in it (`None`: lost).
    fn ready(&mut self) -> Option<&mut Hasher> {
        if self.busy {
            self.busy = false;
            self.hasher = self.beside.as_ref().and_then(|beside| beside.done.recv().ok().flatten());
        }
        self.hasher.as_mut()
    }

    /// Add the `len` bytes of `file` at `offset`, just written, on the thread; here when no
    /// thread can be had.
    fn read_beside(&mut self, disk: &Arc<dyn Disk>, file: &File, offset: u64, len: usize) {
        if self.ready().is_none() {
            return;
        }
        let Some(hasher) = self.hasher.take() else { return };
        if self.beside.is_none() {
            self.beside = Beside::start(disk, file).ok();
        }
        let sent = match &self.beside {
            Some(beside) => beside.jobs.send((hasher, offset, len)).map_err(|back| back.0.0),
            None => Err(hasher),
        };
        match sent {
            Ok(()) => self.busy = true,
            Err(mut hasher) => {
                let read = read_into(&**disk, file, offset, len, &mut Vec::new(), &mut hasher);
                self.hasher = read.then_some(hasher);
            }
        }
    }

    fn finish(mut self) -> Option<Sha256> {
        self.ready().map(|hasher| std::mem::take(hasher).finish())
    }
}

/// Read the `len` bytes of `file` at `offset` through `buf` into `hasher`: whether they were
/// all there.
fn read_into(disk: &dyn Disk, file: &File, offset: u64, len: usize, buf: &mut Vec<u8>, hasher: &mut Hasher) -> bool {
    buf.resize(len.min(CHUNK), 0);
    let mut done = 0;
    while done < len {
        let want = (len - done).min(buf.len());
        match disk.read_at(file, &mut buf[..want], offset + done as u64) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                hasher.update(&buf[..n]);
                done += n;
            }
        }
    }
    true
}

impl Engine {
    /// The drafts of files being written through the mount: see [`Drafts`].
    pub fn drafts(&self) -> Drafts<'_> {
        Drafts { core: &self.core }
    }
}

/// The mount's drafts, as the engine lends them: every call names a live draft by the
/// [`DraftId`] [`Drafts::start`] (or [`Drafts::start_unlinked`]) gave, and runs with that draft's
/// entry of the engine's table locked (`drafts.rs`).
///
/// It owns a draft's whole life: start, write, read, truncate and allocate, then exactly one
/// end — [`commit`](Drafts::commit) (the draft becomes the file's version), a refusal by the
/// gate at a write or a commit (quarantined in `objects/`), [`keep`](Drafts::keep) (kept in
/// `objects/` with a `recover` row), or [`discard`](Drafts::discard) (nobody needs its bytes).
/// Invariants: the bytes never leave the engine (the caller holds an id, plain data); a draft's
/// bytes reach the tree only through the gate and the commit protocol; any failure that is not
/// an end leaves the draft in its slot, and [`has`](Drafts::has) says whether it is still held.
#[derive(Clone, Copy)]
pub struct Drafts<'a> {
    core: &'a Core,
}

impl Drafts<'_> {
    /// Start a draft of `path` (workspace-relative).
    pub fn start(&self, path: &str, base: DraftBase) -> Result<DraftId> {
        let draft = self.core.start_draft(path, base).map_err(|e| e.at(path))?;
        Ok(self.core.draft_table.insert(draft))
    }

    /// Whether draft `id` is still held (not committed, quarantined, kept or discarded).
    pub fn has(&self, id: DraftId) -> bool {
        self.core.draft_table.contains(id)
    }

    /// Write `data` at `offset` into draft `id` of `path`. When the written window alone is
    /// certainly refused, the draft is quarantined and journaled and `Err(blocked)` returned
    /// with the draft gone ([`Drafts::has`] is false).
    pub fn write(&self, id: DraftId, path: &str, offset: u64, data: &[u8], actor: &Actor) -> Result<()> {
        let need = data.len() as u64;
        let table = &self.core.draft_table;
        self.core
            .with_room(need, actor, || table.with(id, |slot| self.core.write_draft(slot, path, offset, data, actor)))
            .map_err(|e| e.at(path))
    }

    /// A draft for a file that has no name any more (unlinked, or replaced by a rename, while
    /// open), copied from `from`, the version its handles still read. Such a draft never
    /// becomes a version: the mount discards it at the file's last close.
    /// `former` is the path the file had, for recovery's note.
    pub fn start_unlinked(&self, from: &File, former: Option<&str>) -> Result<DraftId> {
        let draft = self.core.start_unlinked_draft(from, former)?;
        Ok(self.core.draft_table.insert(draft))
    }

    /// Write into the draft of a file that has no name any more. Its bytes can never reach the
    /// tree (the draft is discarded at the last close), so nothing is judged.
    pub fn write_unlinked(&self, id: DraftId, offset: u64, data: &[u8]) -> Result<()> {
        self.core.draft_table.with_draft(id, |draft| draft.write(&self.core.ws.disk, offset, data).step("write draft"))
    }

    pub fn read(&self, id: DraftId, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.core
            .draft_table
            .with_draft(id, |draft| self.core.disk().read_at(&draft.file, buf, offset).step("read draft"))
    }

    /// Cut or extend the draft to `len` bytes.
    pub fn truncate(&self, id: DraftId, len: u64) -> Result<()> {
        self.core.draft_table.with_draft(id, |draft| self.core.truncate_draft(draft, len))
    }

    /// `fallocate` of a draft: blocks for `len` bytes from `offset`, and unless `keep_size` the
    /// draft grown (with zeros, as by [`Drafts::truncate`]) to cover them. Returns whether
    /// the draft's bytes changed.
    pub fn allocate(&self, id: DraftId, offset: u64, len: u64, keep_size: bool) -> Result<bool> {
        self.core.draft_table.with_draft(id, |draft| {
            let end = offset.checked_add(len).ok_or_else(|| Error::io("fallocate", super::tree::efbig()))?;
            let grows = !keep_size && end > draft.len;
            if grows {
                self.core.truncate_draft(draft, end)?;
            }
            self.core.disk().reserve(&draft.file, offset, len).step("allocate draft")?;
            Ok(grows)
        })
    }

    /// Whether committing draft `id` now is quick enough to run on a thread that reads the
    /// kernel's requests: in `batch` durability a commit judges and stages the draft and writes
    /// its row, without any sync, so a small one (`QUICK_COMMIT` bytes or fewer) while the
    /// batch has room costs microseconds. A commit in `close` durability waits for `fsync`s:
    /// never quick. A guess, not a promise: a commit that must wait (for a barrier, a full
    /// disk's room) still waits where it runs.
    pub fn commits_quickly(&self, id: DraftId) -> bool {
        self.core.batch.as_ref().is_some_and(|batch| batch.has_room())
            && self.core.draft_table.with_draft(id, |draft| Ok(draft.len <= QUICK_COMMIT)).unwrap_or(false)
    }

    /// Make draft `id` the new version of `path`, durably, or refuse it. Committed or refused,
    /// the draft is gone; any other failure leaves it in the table for the next commit point
    /// ([`Drafts::has`] says which).
    /// On a full disk, old versions make room and the commit is tried once more (`room.rs`).
    pub fn commit(&self, id: DraftId, path: &str, actor: &Actor, at: CommitAt) -> Result<Committed> {
        self.core
            .draft_table
            .with(id, |slot| match self.core.commit_draft(id, slot, path, actor, at) {
                Err(e) if slot.is_some() && self.core.make_room(&e, slot.as_ref().map_or(0, |d| d.len), actor) => {
                    self.core.commit_draft(id, slot, path, actor, at)
                }
                other => other,
            })
            .map_err(|e| e.at(path))
    }

    /// Keep the bytes of a draft that will not be committed (its commit, or a write into it,
    /// failed and the writer was told so) in `objects/`, with a `recover` row naming `path`; an
    /// empty one is discarded. The draft is gone from the table either way; on failure its
    /// file stays in `drafts/`, where the next start keeps it.
    pub fn keep(&self, id: DraftId, path: &str, actor: &Actor) -> Result<()> {
        self.core.draft_table.with(id, |slot| {
            let Some(draft) = slot.take() else { return Ok(()) };
            if draft.is_empty() {
                // Nothing in it to keep (a write that failed before its first byte landed).
                self.core.discard(&draft);
                return Ok(());
            }
            let dir = self.core.drafts_home()?;
            let (sha, _) = self.core.read_draft_whole(&draft)?;
            self.core.keep_in_objects(
                &dir,
                &draft.name,
                (sha, draft.len),
                Some(path.to_string()),
                "failed_close_draft_kept_in_objects",
                actor,
            )?;
            self.core.objects.sync()
        })
    }

    /// Drop a draft nobody needs (the file it was for is gone).
    pub fn discard(&self, id: DraftId) {
        let _ = self.core.draft_table.with(id, |slot| {
            if let Some(draft) = slot.take() {
                self.core.discard(&draft);
            }
            Ok(())
        });
    }

    /// Re-point the draft's recovery note after the file it is for was renamed.
    pub fn retarget(&self, id: DraftId, path: &str) {
        let _ = self.core.draft_table.with_draft(id, |draft| {
            let dir = self.core.drafts_home()?;
            let note = path.as_bytes();
            let _ = self.core.disk().set_xattr(&dir, &draft.name, OsStr::new(TARGET_XATTR), note, 0);
            Ok(())
        });
    }

    /// The attributes of draft `id`'s file.
    pub fn stat(&self, id: DraftId) -> Result<Stat> {
        self.core.draft_table.with_draft(id, |draft| self.core.disk().file_stat(draft.file()).step("stat draft"))
    }
}

impl Core {
    /// `drafts/`, opened once and kept: per draft a stat of the kept handle instead of a stat,
    /// an open and a close. A handle whose directory was removed behind rwfs (no link left) is
    /// replaced by a fresh one, so a draft never lands where recovery cannot find it.
    pub(crate) fn drafts_dir(&self) -> Result<Arc<Dir>> {
        let mut kept = self.drafts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dir) = kept.as_ref()
            && self.disk().stat(dir, ".").ok().flatten().is_some_and(|s| s.nlink > 0)
        {
            return Ok(dir.clone());
        }
        let state = self.ws.state.as_ref().ok_or_else(|| Error::from(Reason::NotFound))?;
        let dir = Arc::new(open_or_create(self.disk(), state, DRAFTS_DIR)?);
        *kept = Some(dir.clone());
        Ok(dir)
    }

    /// The `drafts/` the drafts made so far live in: the kept handle as it is, not checked
    /// (a commit moves its draft from where it is, even from a `drafts/` removed or renamed
    /// behind rwfs since), else [`Core::drafts_dir`].
    pub(crate) fn drafts_home(&self) -> Result<Arc<Dir>> {
        let kept = self.drafts.lock().unwrap_or_else(PoisonError::into_inner).clone();
        match kept {
            Some(dir) => Ok(dir),
            None => self.drafts_dir(),
        }
    }

    /// A new, empty file in `drafts/`, made with mode `perm` (which must let its owner write)
    /// and carrying `note` (the path it is a draft for) right after its `openat`. Returns the
    /// directory, the file, its name and what its `openat` made it, when known (an xattr does
    /// not change its mode or owner).
    fn new_draft_file(&self, note: Option<&str>, perm: u32) -> Result<(Arc<Dir>, File, String, Option<Stat>)> {
        let disk = self.disk();
        // A draft becomes the installed version: rwfs reading it at commit must not change the
        // access time a writer set (`touch -t`) or the one it will have. `create_named_temp`'s
        // files are quiet from the start. The kept `drafts/` is used as it is (no check per
        // draft): one removed behind rwfs's back refuses a new file, and is made again.
        // Named at once (one `openat`, where an anonymous file and its `linkat` cost about half
        // of a create's time in ext4's orphan list and the /proc walk). A daemon killed between
        // that `openat` and the note below leaves an empty draft that names nothing, made for a
        // create nobody was answered: recovery removes exactly those (`recover_drafts`).
        let mut dir = self.drafts_home()?;
        let temp = match disk.create_named_temp(&dir, perm) {
            Err(e) => match self.drafts_dir()? {
                again if Arc::ptr_eq(&again, &dir) => Err(e),
                again => {
                    dir = again;
                    disk.create_named_temp(&dir, perm)
                }
            },
            made => made,
        };
        let temp = temp.map_err(|e| Error::io("create draft", e))?;
        // Noted while still empty and writable by its owner (a read-only mode carried over
        // later would refuse the xattr to anyone but root).
        if let Some(path) = note {
            let xattrs = vec![(TARGET_XATTR.into(), path.as_bytes().to_vec())];
            let _ = disk.set_attrs(&temp.file, &Attrs { xattrs, ..Attrs::default() });
        }
        let name = temp
            .name
            .ok_or_else(|| Error::io("name draft", std::io::Error::other("a named temp file without a name")))?;
        Ok((dir, temp.file, name, temp.made))
    }

    fn start_unlinked_draft(&self, from: &File, former: Option<&str>) -> Result<Draft> {
        let disk = self.disk();
        let (dir, file, name, _) = self.new_draft_file(former, 0o600)?;
        let filled = (|| {
            let stat = disk.file_stat(from).step("stat unlinked file")?;
            disk.copy_range(from, &file, stat.size).step("copy unlinked file into draft")?;
            let xattrs = disk.xattrs(from).step("read extended attributes")?;
            let attrs = Attrs { perm: Some(stat.perm), owner: Some((stat.uid, stat.gid)), xattrs };
            disk.set_attrs(&file, &attrs).step("set draft attributes")?;
            Ok(stat.size)
        })();
        match filled {
            Ok(len) => Ok(Draft::new(file, name, len, None)),
            Err(e) => {
                let _ = disk.unlink(&dir, &name);
                Err(e)
            }
        }
    }

    fn start_draft(&self, path: &str, base: DraftBase) -> Result<Draft> {
        if !matches!(base, DraftBase::New { .. }) {
            // A draft starts from the tree's version: a staged one is installed first.
            self.settle_path(path);
        }
        let disk = self.disk();
        // What the draft starts from is read before its file is made, so the attributes it
        // will carry are known: it is made with its mode when that mode lets its owner write
        // (the note is an xattr, which a read-only mode would refuse to anyone but root), and
        // most drafts need no `fchmod`.
        let (attrs, source) = match base {
            DraftBase::New { perm, owner } => (self.new_file_attrs(path, perm, owner)?, None),
            DraftBase::Current => {
                let target = resolve(disk, &self.ws.root, path, Scope::Workspace, false)?;
                let current = self.current(&target)?.ok_or_else(|| Error::from(Reason::NotFound))?;
                (current.attrs(disk)?, Some(current))
            }
            DraftBase::Truncated => {
                let target = resolve(disk, &self.ws.root, path, Scope::Workspace, false)?;
                (self.current_attrs(&target)?.ok_or_else(|| Error::from(Reason::NotFound))?, None)
            }
        };
        let made_with = attrs.perm.filter(|perm| perm & 0o7200 == 0o200).unwrap_or(0o600);
        let (dir, file, name, made) = self.new_draft_file(Some(path), made_with)?;
        let filled = (|| {
            let len = match &source {
                Some(current) => {
                    disk.copy_range(&current.file, &file, current.stat.size).step("copy current version into draft")?;
                    current.stat.size
                }
                None => 0,
            };
            // The owner last but one and the mode last: a read-only mode must not stop the
            // copy (it goes through the descriptor, opened before), and chown clears setuid
            // bits. Only what the `openat` did not give (the umask, another owner) is set, and
            // with what it gave known, nothing is read to find that out.
            let attrs = match &made {
                Some(made) => attrs.beyond(made),
                None => attrs,
            };
            disk.set_attrs(&file, &attrs).step("set draft attributes")?;
            Ok(len)
        })();
        let len = match filled {
            Ok(len) => len,
            Err(e) => {
                let _ = disk.unlink(&dir, &name);
                return Err(e);
            }
        };
        // An empty draft's running digest starts here; a copy's is taken at its commit.
        let digest = source.is_none().then(|| (Hasher::new(), 0));
        Ok(Draft::new(file, name, len, digest))
    }

    /// What a new file at `path`, asked with `perm` by `owner`, gets from its directory
    /// (`inherit.rs`): mode, owner and ACLs.
    fn new_file_attrs(&self, path: &str, perm: u32, owner: super::Owner) -> Result<Attrs> {
        let (dir, _) = self.locate(super::Entry::Path(path), Scope::Workspace)?;
        let wanted = self.inherit(&dir, FileKind::File, perm, owner).step("read the directory's inheritance")?;
        Ok(Attrs { perm: Some(wanted.perm), owner: Some((wanted.uid, wanted.gid)), xattrs: wanted.xattrs })
    }

    /// Remove a draft's file from `drafts/` (nobody needs its bytes).
    fn discard(&self, draft: &Draft) {
        let removed = self.drafts_home().and_then(|dir| self.disk().unlink(&dir, &draft.name).step("remove draft"));
        if let Err(e) = removed {
            tracing::warn!(draft = draft.name, error = %e, "could not remove a discarded draft");
        }
    }

    /// Cut or extend the draft to `len` bytes.
    fn truncate_draft(&self, draft: &mut Draft, len: u64) -> Result<()> {
        self.disk().set_len(&draft.file, len).step("truncate draft")?;
        if draft.digest.as_ref().is_some_and(|(_, hashed)| *hashed != len) {
            draft.digest = None;
        }
        if len == 0 {
            draft.digest = Some((Running::new(Hasher::new()), 0));
            draft.tail.clear();
        }
        draft.judged = Judged::Nothing;
        draft.len = len;
        Ok(())
    }

    fn write_draft(&self, slot: &mut Option<Draft>, path: &str, offset: u64, data: &[u8], actor: &Actor) -> Result<()> {
        let disk = self.disk();
        let written = path;
        let draft = slot.as_mut().ok_or_else(|| Error::from(Reason::NotFound))?;
        // A temporary copy is judged as the file it stands for (its kind: `crate::temporary`).
        let judged_as = self.judged_as(path, actor);
        // A protected file refuses the write that would start its new version (`protect.rs`),
        // the most visible place; its commit asks again.
        // Only a denial: a version waiting for approval is refused at its commit, which keeps it.
        if self.gate.policy().is_protected(&judged_as) {
            let op = super::protect::version_op(self.exists(&judged_as));
            if self.gate.policy().protection(op, &judged_as).is_some_and(|(_, guard)| guard == Guard::Deny) {
                self.guard(op, &judged_as, actor, None, || None)?;
            }
        }
        let context = match &draft.digest {
            Some((_, hashed)) if *hashed == offset => draft.tail.clone(),
            _ => Vec::new(),
        };
        if let Err(e) = draft.write(&self.ws.disk, offset, data) {
            self.undo_failed_write(draft, offset);
            return Err(Error::io("write draft", e));
        }
        let path = judged_as.as_str();
        // Written from its start: the windows now full are judged (and no more), and bytes
        // past the first window are left to the windows.
        let sequential = draft.digest.is_some();
        let filled = if sequential { self.judge_filled_windows(path, draft)? } else { None };
        let refused = match filled {
            Some(judgement) => judgement,
            None if sequential && offset >= SCAN_MAX as u64 => return Ok(()),
            None => match self.judge_written(path, draft, offset, context, data) {
                Some(judgement) => judgement,
                None => return Ok(()),
            },
        };
        let Some(draft) = slot.take() else { unreachable!("checked above") };
        let target = resolve(disk, &self.ws.root, written, Scope::Workspace, false)?;
        let prev = self.held(&target)?.map(|c| c.sha);
        let (sha, whole) = self.read_draft_whole(&draft)?;
        // The envelope's lines are the file's: judge the whole draft when it can be held.
        let judgement = match whole.as_deref().and_then(|w| self.gate.judge(path, w)) {
            Some(j) if j.blocks() => j,
            _ => refused,
        };
        Err(self.refuse_draft(&target.path, &draft, sha, prev, judgement, actor))
    }

    /// A write into the draft failed (`ENOSPC` after some pages, `EIO`): part of its bytes may
    /// be in the file. Past the draft's end they are cut off again, so the draft is what it
    /// was; a write that changed bytes inside it leaves them, and the draft forgets its
    /// running digest and what was judged, so its commit reads and judges what the file really
    /// holds (the row's digest is always of the bytes installed).
    fn undo_failed_write(&self, draft: &mut Draft, offset: u64) {
        let disk = self.disk();
        if offset >= draft.len && disk.set_len(&draft.file, draft.len).is_ok() {
            return;
        }
        let len = disk.file_stat(&draft.file).map_or(draft.len, |stat| stat.size);
        draft.len = draft.len.max(len);
        draft.digest = None;
        draft.judged = Judged::Nothing;
    }

    /// The gate's check of bytes just written at `offset` (with `context`, the bytes before
    /// them): a judgement when the bytes alone are certainly refused. When the draft is this one
    /// write, the judgement is kept for its commit.
    fn judge_written(
        &self,
        path: &str,
        draft: &mut Draft,
        offset: u64,
        context: Vec<u8>,
        data: &[u8],
    ) -> Option<Judgement> {
        let whole = draft.digest.is_some() && offset == 0 && draft.len == data.len() as u64;
        // A window the gate would not scan (binary) needs no copy of the data.
        let judgement = if super::gate::scannable_joined(&context, data) {
            let mut window = context;
            window.extend_from_slice(data);
            self.gate.judge(path, &window)
        } else {
            None
        };
        if judgement.as_ref().is_some_and(Judgement::is_certain) {
            return judgement;
        }
        if whole && data.len() <= SCAN_MAX {
            draft.judged = Judged::Whole { path: path.to_string(), judgement: judgement.map(Box::new) };
        }
        None
    }

    /// Judge the windows of a draft written sequentially from its start that are full and not
    /// its last (bytes follow them), as its commit would (see [`Judged`]): a blocking window's
    /// judgement.
    fn judge_filled_windows(&self, path: &str, draft: &mut Draft) -> Result<Option<Judgement>> {
        loop {
            let next = match &draft.judged {
                Judged::Windows { path: judged_as, next } if judged_as == path => *next,
                Judged::Binary => return Ok(None),
                // Nothing yet, or judged as another path (renamed while written): from the start.
                _ => 0,
            };
            if draft.len <= next + SCAN_MAX as u64 {
                return Ok(None);
            }
            let (start, end) = (next as usize, next as usize + SCAN_MAX);
            let window = self.read_range(&draft.file, start, end)?;
            match self.gate.judge_window(path, start, &window) {
                None => draft.judged = Judged::Binary,
                Some(judgement) if judgement.blocks() => return Ok(Some(judgement)),
                Some(_) => draft.judged = Judged::Windows { path: path.to_string(), next: next_window(end) as u64 },
            }
        }
    }

    /// Quarantine the draft's file and journal the refusal.
    fn refuse_draft(
        &self,
        path: &WorkspacePath,
        draft: &Draft,
        sha: Sha256,
        prev: Option<Sha256>,
        judgement: Judgement,
        actor: &Actor,
    ) -> Error {
        let dir = match self.drafts_home() {
            Ok(dir) => dir,
            Err(e) => return e,
        };
        self.refuse(Refusal {
            path,
            content: Quarantine::File { dir: &dir, name: &draft.name },
            sha,
            bytes: draft.len,
            prev,
            judgement,
            actor,
        })
    }

    /// The draft's digest, and its bytes when it is small enough to judge (a bigger one is
    /// hashed by the digest rule of `durable::sparse`: its holes are not read).
    fn read_draft_whole(&self, draft: &Draft) -> Result<(Sha256, Option<Vec<u8>>)> {
        let disk = self.disk();
        let keep = draft.len <= SCAN_MAX as u64;
        if !keep {
            return Ok((content_digest(disk, &draft.file).step("hash draft")?.0, None));
        }
        // A draft kept whole is read straight into its buffer; a bigger one through a chunk.
        // Either way the buffer is no bigger than the draft (most are a few KiB).
        let mut buf = vec![0u8; if keep { draft.len as usize } else { CHUNK.min(draft.len as usize) }];
        let mut hasher = Hasher::new();
        let mut offset = 0u64;
        while offset < draft.len {
            let at = if keep { offset as usize } else { 0 };
            let want = (buf.len() - at).min((draft.len - offset) as usize);
            let n = disk.read_at(&draft.file, &mut buf[at..at + want], offset).step("read draft")?;
            if n == 0 {
                return Err(Error::io("read draft", std::io::Error::from_raw_os_error(nix::libc::EIO)));
            }
            hasher.update(&buf[at..at + n]);
            offset += n as u64;
        }
        Ok((hasher.finish(), keep.then_some(buf)))
    }

    /// The gate's judgement of a file (a draft, or a file a rename brings to a gated path:
    /// `admit.rs`) larger than [`SCAN_MAX`] as the new version of `path`, window by window from
    /// the one at `from` (the windows before it judged already), holes skipped (they read as
    /// zeros: nothing to find there).
    pub(crate) fn judge_file_windows(&self, path: &str, file: &File, len: u64, from: u64) -> Result<Option<Judgement>> {
        let disk = self.disk();
        let extents = disk.data_extents(file, len).step("find the file's data")?;
        let next_data = |offset: usize| {
            let offset = offset as u64;
            extents.iter().find(|(_, end)| *end > offset).map(|(start, _)| (*start).max(offset) as usize)
        };
        let read = |start, end| self.read_range(file, start, end).map(std::borrow::Cow::Owned);
        self.gate.judge_windows_with(path, from as usize, len as usize, read, next_data)
    }

    /// A file's bytes from `start` to `end` (fewer only past its end).
    pub(crate) fn read_range(&self, file: &File, start: usize, end: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; end - start];
        let mut got = 0;
        while got < buf.len() {
            match self.disk().read_at(file, &mut buf[got..], (start + got) as u64).step("read file")? {
                0 => break,
                n => got += n,
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    /// Commit the draft in `slot` (see [`Drafts::commit`]): the slot is emptied once
    /// the draft's bytes left `drafts/` (installed, quarantined, kept by a protection); every
    /// other failure leaves the draft in it.
    fn commit_draft(
        &self,
        id: DraftId,
        slot: &mut Option<Draft>,
        path: &str,
        actor: &Actor,
        at: CommitAt,
    ) -> Result<Committed> {
        let draft = slot.as_mut().ok_or_else(|| Error::from(Reason::NotFound))?;
        let disk = self.disk();
        let target = resolve(disk, &self.ws.root, path, Scope::Workspace, false)?;
        let (_turn, _guard, staging) = self.lock_for_draft_commit(&target.path, at);
        let current = self.held(&target)?;
        let prev = current.as_ref().map(|c| c.sha);
        let max = self.gate.policy().max_gated_bytes();
        if draft.len > max {
            let error = self.refuse_too_big(&target.path, draft, prev, max, actor);
            self.forget_if_moved(slot);
            return Err(error);
        }
        // One pass over the draft when it must be judged or hashed; none for a big file
        // written sequentially (up to the sparse digest's threshold, where the running SHA-256
        // is the version's name), nor for one its writes judged whole. What the writes judged
        // is judged no more (and forgotten: a failed commit leaves a draft judged afresh).
        let sequential = draft.digest.as_ref().is_some_and(|(_, hashed)| *hashed == draft.len);
        let prior = if sequential { std::mem::take(&mut draft.judged) } else { Judged::Nothing };
        let judged_as = self.judged_as(target.path.as_str(), actor);
        let (prior_whole, from) = match prior {
            Judged::Whole { path, judgement } if path == judged_as => (Some(judgement.map(|j| *j)), 0),
            Judged::Windows { path, next } if path == judged_as => (None, next),
            Judged::Binary => (Some(None), 0),
            _ => (None, 0),
        };
        let running = draft.complete_digest().filter(|_| draft.len <= SPARSE_DIGEST_MIN);
        let (sha, whole) = match running {
            Some(sha) if prior_whole.is_some() || draft.len > SCAN_MAX as u64 => (sha, None),
            _ => self.read_draft_whole(draft)?,
        };
        let dir = self.drafts_home()?;
        // Protected by place (`protect.rs`): refused whatever the content, which is kept.
        let damage = super::protect::truncation(current.as_ref().map(|c| c.stat.size), draft.len);
        let kept = || {
            Some(super::protect::Kept {
                content: Quarantine::File { dir: &dir, name: &draft.name },
                sha,
                bytes: draft.len,
                whole: true,
            })
        };
        if let Err(error) = self.guard(super::protect::version_op(current.is_some()), &judged_as, actor, damage, kept) {
            self.forget_if_moved(slot);
            return Err(error);
        }
        let judged = match (prior_whole, whole.as_deref()) {
            (Some(judged), _) => judged,
            (None, Some(whole)) => self.gate.judge(&judged_as, whole),
            // Too big to hold: judged in windows read back from the draft (binary drafts are
            // recognised from the first window and not scanned).
            (None, None) => self.judge_file_windows(&judged_as, &draft.file, draft.len, from)?,
        };
        self.note_credentials(judged.as_ref(), sha);
        if let Some(judgement) = judged
            && judgement.blocks()
        {
            let error = self.refuse_draft(&target.path, draft, sha, prev, judgement, actor);
            // Quarantined unless the refusal itself failed before moving it.
            self.forget_if_moved(slot);
            return Err(error);
        }
        let op = if current.is_some() { Op::Write } else { Op::Create };
        let mode = if current.is_some() { "overwrite" } else { "create" };
        let version = Version { sha, bytes: draft.len, prev, op, mode, actor };
        // Where the version goes: the current one's filesystem, or the directory's (read when
        // the draft started, `inherit.rs`).
        let home = match &current {
            Some(current) => Ok(current.stat.id.dev),
            None => self.given(&target.parent).map(|given| given.dev),
        };
        let same_fs = home.is_ok_and(|dev| dev == draft.file.id().dev);
        if !same_fs {
            // The file's directory is another filesystem (a mount inside the workspace): copy.
            let source = Source::File { file: &draft.file, len: draft.len };
            let staged = stage(disk, &target.parent, source, &Default::default())?;
            let mut carried = disk.xattrs(&draft.file).unwrap_or_default();
            carried.retain(|(name, _)| name != TARGET_XATTR);
            if let Ok(stat) = disk.file_stat(&draft.file) {
                let attrs = Attrs { perm: Some(stat.perm), owner: Some((stat.uid, stat.gid)), xattrs: carried };
                let _ = disk.set_attrs(staged.file(), &attrs);
            }
            let committed = self.land(&target, &staged, current.as_ref(), op, mode, actor)?;
            let _ = disk.unlink(&dir, &draft.name);
            *slot = None;
            return Ok(committed);
        }
        // The draft itself becomes the version: its file moves into the staged version (which
        // owns the descriptor it installs), taken from the slot only now.
        let adopt = |slot: &mut Option<Draft>| {
            let Draft { file, name, len, .. } = slot.take().expect("the draft is in its slot until here");
            (Staged::adopt(file, dir.clone(), name.clone(), sha, len, Some(TARGET_XATTR)), name)
        };
        if let Some(batch) = self.batch.as_ref().filter(|_| staging) {
            return self.stage_for_batch(batch, target, version, || {
                let (staged, _) = adopt(slot);
                self.draft_table.stage(id);
                (id, staged)
            });
        }
        let (staged, name) = adopt(slot);
        self.land(&target, &staged, current.as_ref(), op, mode, actor).inspect_err(|_| {
            // Still in drafts/ unless the failure came after the install: the draft again, in
            // its slot, hashed and judged afresh by the next commit.
            if matches!(disk.stat(&dir, &name), Ok(Some(s)) if s.id == staged.file().id()) {
                let len = staged.len();
                *slot = Some(Draft::new(staged.into_file(), name, len, None));
            }
        })
    }

    /// After a refusal that moves a draft's bytes out of `drafts/` (quarantined, kept by a
    /// protection): the slot is emptied unless the draft is still there (the refusal failed
    /// before moving it).
    fn forget_if_moved(&self, slot: &mut Option<Draft>) {
        let here = |draft: &Draft| {
            self.drafts_home().is_ok_and(|dir| matches!(self.disk().stat(&dir, &draft.name), Ok(Some(_))))
        };
        if !slot.as_ref().is_some_and(here) {
            *slot = None;
        }
    }

    /// The path's lock for a commit of its draft and, in `batch` durability, a turn to stage it
    /// (taken first: `order.rs`), and whether to stage it. A version of the path still staged
    /// is installed first (the new one replaces it in the tree, and only the committer writes a
    /// staged name), and the batch has room for one more.
    ///
    /// An fsync's commit ([`CommitAt::Fsync`]) with nothing else staged is not staged: it
    /// commits as in `close` mode, under the barrier's turn (held until it is durable: no close
    /// is staged meanwhile, so the journal's order holds). Staged, it would cost a window of
    /// its own, two `syncfs` of the whole filesystem, where `close` mode pays one `fsync` of
    /// the file and one of its directory: batch must never be slower than close (issue 27
    /// items 5 and 6; an editor's save is temp, `fsync`, rename). With other versions staged
    /// it is staged and settled (`Core::make_durable`), which does not wait for their installs.
    fn lock_for_draft_commit(
        &self,
        path: &WorkspacePath,
        at: CommitAt,
    ) -> (Option<super::order::Turn<'_>>, std::sync::MutexGuard<'_, ()>, bool) {
        loop {
            self.settle_path(path.as_str());
            let Some(batch) = &self.batch else { return (None, self.locks.lock(path), false) };
            if at == CommitAt::Fsync && batch.is_empty() {
                let turn = self.barrier();
                return (turn, self.locks.lock(path), false);
            }
            batch.wait_for_room();
            let turn = batch.stage_turn();
            let guard = self.locks.lock(path);
            if !batch.has_view(path.as_str()) {
                return (Some(turn), guard, true);
            }
            // Another close of this path staged a version meanwhile: install it first.
        }
    }

    /// `batch` durability: the row written (not synced) and the draft, made a staged version
    /// by `adopt` once its row is written, handed to the group commit (`batch.rs`); from here
    /// on the path is this version for every engine query. A failure before leaves the draft
    /// where it is.
    fn stage_for_batch(
        &self,
        batch: &Batch,
        target: crate::durable::Target,
        version: Version<'_>,
        adopt: impl FnOnce() -> (DraftId, Staged),
    ) -> Result<Committed> {
        let Version { sha, bytes, prev, op, mode, actor } = version;
        // What its install will need is held before it is acknowledged (`reserve.rs`).
        let charge = self.reserve.block();
        self.reserve.charge(self.disk(), charge)?;
        let in_row_order = batch.row_order();
        let token = self.tracker.begin(self.journal.durable_seq());
        let written = self.journal.submit_written(version_row(op, &target.path, sha, prev, bytes, mode, actor)).wait();
        let appended = match written {
            Ok(appended) => appended,
            Err(e) => {
                self.tracker.end(token);
                self.reserve.discharge(self.disk(), charge);
                return Err(e);
            }
        };
        tracing::info!(path = %target.path, op = op.as_str(), seq = appended.seq, sha256 = %sha.short(12), bytes, pid = actor.pid, comm = actor.comm.as_deref(), "staged");
        let committed = Committed::version(&target.path, op, (sha, bytes), prev, appended, Vec::new());
        let (id, staged) = adopt();
        batch.push(id, Entry::new(target, staged, prev, committed.seq, token, actor.clone(), charge));
        drop(in_row_order);
        Ok(committed)
    }

    /// Move the draft `dir/name` (`bytes` bytes, digest `sha`) into `objects/` with a
    /// `recover` row naming the file it was for.
    fn keep_in_objects(
        &self,
        dir: &Dir,
        name: &str,
        (sha, bytes): (Sha256, u64),
        target: Option<String>,
        reason: &str,
        actor: &Actor,
    ) -> Result<()> {
        self.objects.adopt(dir, name, sha)?;
        let path = dir.join(name);
        tracing::warn!(path, target, sha = %sha.short(12), reason, "kept a draft in objects/");
        self.journal.append(Change {
            op: Op::Recover,
            path,
            from: target,
            sha256: None,
            prev_sha256: Some(sha),
            bytes,
            mode: String::new(),
            actor: actor.clone(),
            verdict: None,
            reason: Some(reason.into()),
        })?;
        Ok(())
    }

    /// Refuse a draft over `max_gated_bytes` (`EFBIG` through the mount) without judging it: its
    /// bytes go to `objects/` (named by their digest, which reads only its data) and a `block`
    /// row with reason `too_big` names them, as for any refusal. Nothing is lost; the tree keeps
    /// the committed version.
    fn refuse_too_big(
        &self,
        path: &WorkspacePath,
        draft: &Draft,
        prev: Option<Sha256>,
        max: u64,
        actor: &Actor,
    ) -> Error {
        let refused = Error::from(Reason::TooBig { bytes: draft.len, max }).at(path.as_str());
        let kept = (|| -> Result<()> {
            let dir = self.drafts_home()?;
            let (sha, _) = content_digest(self.disk(), &draft.file).step("hash draft")?;
            self.objects.adopt(&dir, &draft.name, sha)?;
            self.objects.sync()?;
            self.journal.append(Change {
                op: Op::Block,
                path: path.to_string(),
                from: None,
                sha256: Some(sha),
                prev_sha256: prev,
                bytes: draft.len,
                mode: String::new(),
                actor: actor.clone(),
                verdict: None,
                reason: Some(format!("too_big: {} bytes > max_gated_bytes {max}", draft.len)),
            })?;
            Ok(())
        })();
        if let Err(e) = kept {
            tracing::error!(path = path.as_str(), error = %e, "could not keep a draft refused as too big");
        }
        refused
    }

    /// Move drafts left by a process that died into `objects/`, with a `recover` row each; the
    /// kept ones and the deferred ones. With a `budget`, once the orphans' data (holes excluded:
    /// hashing never reads them) would exceed it, the rest are deferred — left in `drafts/` —
    /// so that the work before the engine is ready stays bounded. `only` restricts the pass to
    /// those names (the deferred ones, while a mount has live drafts there). The one draft
    /// removed instead is an empty one that names no file: nothing to keep.
    pub(crate) fn recover_drafts(
        &self,
        claims: &super::recovery::Claims,
        actor: &Actor,
        mut budget: Option<u64>,
        only: Option<&std::collections::BTreeSet<String>>,
    ) -> Result<(Vec<String>, Vec<String>)> {
        let disk = self.disk();
        let dir = self.drafts_dir()?;
        let mut kept = Vec::new();
        let mut deferred = Vec::new();
        for (name, kind) in disk.list(&dir).step("list drafts")? {
            let Some(name) = name.to_str() else { continue };
            if kind != FileKind::File || only.is_some_and(|only| !only.contains(name)) {
                continue;
            }
            let file = disk.open_read(&dir, name).step("open orphan draft")?;
            if let Some(left) = budget.as_mut() {
                let len = disk.file_stat(&file).step("stat orphan draft")?.size;
                let data: u64 =
                    disk.data_extents(&file, len).step("find orphan draft's data")?.iter().map(|(s, e)| e - s).sum();
                if data > *left {
                    tracing::warn!(name, data, "orphan draft deferred until the mount is ready");
                    deferred.push(dir.join(name));
                    continue;
                }
                *left -= data;
            }
            let (sha, bytes) = crate::durable::hash_file(disk, &file).step("read orphan draft")?;
            // The draft's note, else the unsettled row that wrote these bytes or displaced them (a
            // crash between the note's removal and the install, or after an exchange).
            let target = disk
                .get_xattr(&dir, name, OsStr::new(TARGET_XATTR))
                .ok()
                .and_then(|t| String::from_utf8(t).ok())
                .or_else(|| claims.path_of(&sha).map(str::to_string));
            if target.is_none() && bytes == 0 {
                // Made and never noted (`new_draft_file`: killed between its `openat` and its
                // note): no byte to keep, no file it was for, no writer that was answered.
                tracing::info!(name, "an empty draft that names no file removed");
                disk.unlink(&dir, name).step("remove an empty draft that names no file")?;
                continue;
            }
            self.keep_in_objects(&dir, name, (sha, bytes), target, "orphan_draft_kept_in_objects", actor)?;
            kept.push(dir.join(name));
        }
        if !kept.is_empty() {
            self.objects.sync()?;
        }
        Ok((kept, deferred))
    }
}
