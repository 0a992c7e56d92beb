//! The journal writer: group commit, by the caller when the writer is idle, else by a thread.
//!
//! Callers [`submit`](Journal::submit) a [`Change`] and get a [`Pending`]. Whoever holds the
//! writer takes everything queued, assigns `seq`, `ts`, `journal_id` and `chain` in queue order,
//! writes the batch with one `pwrite` at the end of the file and makes it durable with one
//! `fdatasync`, then releases every caller of the batch. A caller is released with `Ok` only
//! after its row is durable. While one batch syncs, the next one queues: that is the whole of
//! group commit.
//!
//! Who holds the writer: a caller that waits for its row at once ([`Journal::append`],
//! [`Journal::submit_written`]) and finds the writer idle writes the queue and its own row
//! itself, on its own thread (no hand-off: two thread switches fewer per row, the common case
//! of one writer at a time); one that finds it busy queues its row for the writer thread, which
//! waits for the writer and then takes everything queued as the next batch. A row
//! [`submitted`](Journal::submit) always goes to the thread: its caller has work of its own to
//! do while the row syncs (a commit's `fsync` of its file: round 1 of `engine/commit.rs` is
//! two syncs side by side, not one after the other), or more rows to queue into the same
//! batch. The queue is only ever taken with the writer held, so rows are written in the order
//! they were queued.
//!
//! A row may also be [`written`](Journal::submit_written) without waiting for the sync (the
//! mount's `batch` durability: a process crash cannot lose it, the page cache holds it); the
//! writer then skips the `fdatasync` for a batch of such rows only. [`Journal::sync`] makes
//! everything written so far durable. `durable_seq` never passes a row that was not synced.
//!
//! A failed batch (ENOSPC, EIO) is cut off again (`ftruncate` to the previous end), its callers
//! get the error, and `seq` and the chain continue as if it had never been written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::SystemTime;

use crate::durable::{Disk, File};
use crate::error::{Error, IoContext, Result};
use crate::sha::Sha256;
use crate::wake::{Queue, Replier, Reply};

use super::row::{Op, Row, Via};
use super::scan::Scan;
use super::seal::{Seal, write_head};
use super::session::Sessions;

/// Largest number of rows written in one batch.
const MAX_BATCH: usize = 1024;
/// Space kept allocated past the journal's end (`fallocate`, size unchanged), so the rows of a
/// delete or a rename still fit when the disk is full and a user can free space through the
/// mount. Topped up whenever less than half of it is left; when that fails for want of space,
/// the half left is for the rows of space-freeing and recording operations only
/// ([`uses_reserve`]): every other row gets `ENOSPC` until the disk has room again.
const RESERVE: u64 = 256 << 10;

/// Rows that may be written into the last half of the journal's reserve on a full disk: the
/// ones that free space (deletes, renames, retention) or record what already happened (an
/// aborted commit, what recovery found, tampering), never a new version.
fn uses_reserve(op: Op) -> bool {
    matches!(op, Op::Delete | Op::Rename | Op::Gc | Op::Abort | Op::Recover | Op::Tamper)
}

/// Who made a change, as recorded in its row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub via: Via,
    /// The reference's `caller` field (`"rwfs-cli"`, an MCP client's name, ...).
    pub caller: String,
    pub pid: Option<u32>,
    /// Process name, from `/proc/<pid>/comm`.
    pub comm: Option<String>,
    pub uid: Option<u32>,
    /// The operation a front end ran for it (an MCP tool's name); not journaled, it keys retry
    /// budgets and names the tool in envelopes.
    pub tool: Option<&'static str>,
    /// The session name journaled in the row's `session` (see `journal::session`), which also
    /// keys retry budgets; when `None` for a change by a process through the mount or the CLI,
    /// [`Journal::submit`] looks it up.
    pub session_label: Option<String>,
    /// The group of rows one command makes together (a rewind), journaled in `group`. Only a
    /// rewind sets it (the protect rules let a rewind's own changes through).
    pub group: Option<String>,
    /// The agent's tool call the change answers (`journal::tool_calls`), journaled in `group`
    /// when `group` is `None`; when `None` for a change by a process, [`Journal::submit`] looks
    /// it up. Never exempts a change from anything.
    pub tool_call: Option<String>,
}

impl Actor {
    /// This process, through the given front end.
    pub fn this_process(via: Via, caller: &str) -> Actor {
        let pid = std::process::id();
        Actor {
            via,
            caller: caller.to_string(),
            pid: Some(pid),
            comm: crate::process::comm(pid),
            uid: Some(nix::unistd::getuid().as_raw()),
            tool: None,
            session_label: None,
            group: None,
            tool_call: None,
        }
    }

    /// rwfs itself (recovery, retention).
    pub fn engine() -> Actor {
        Actor::this_process(Via::Engine, "rwfs")
    }
}

/// A change to record; the writer adds `seq`, `ts`, `journal_id` and `chain`.
#[derive(Debug, Clone)]
pub struct Change {
    pub op: Op,
    pub path: String,
    /// See [`Row::from`](super::Row::from).
    pub from: Option<String>,
    pub sha256: Option<Sha256>,
    pub prev_sha256: Option<Sha256>,
    pub bytes: u64,
    /// The reference `mode`; defaults to the op's name when empty.
    pub mode: String,
    pub actor: Actor,
    pub verdict: Option<String>,
    pub reason: Option<String>,
}

/// What the writer assigned to a durable row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub seq: u64,
    pub journal_id: String,
    pub ts: String,
}

/// What the writer is asked to do. (A `Sync` is rare and small; boxing every row to shrink
/// the enum would cost an allocation per row.)
#[allow(clippy::large_enum_variant)]
enum Request {
    /// Append a row; reply once it is durable (`durable`), or once it is written.
    Row { change: Change, durable: bool, reply: Replier<Result<Appended>> },
    /// Make every row written so far durable.
    Sync(Replier<Result<()>>),
}

/// A submitted row; [`wait`](Pending::wait) returns once it is durable (or failed).
#[must_use = "a row is acknowledged only by waiting for it"]
pub struct Pending(Reply<Result<Appended>>);

impl Pending {
    pub fn wait(self) -> Result<Appended> {
        self.0.wait().unwrap_or_else(|| Err(writer_gone()))
    }
}

fn writer_gone() -> Error {
    Error::io("journal append", std::io::Error::other("journal writer stopped"))
}

/// Must a row be synced before its caller is released?
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durable {
    Yes,
    No,
}

/// May the caller write its row on its own thread when the writer is idle?
#[derive(Clone, Copy, PartialEq, Eq)]
enum Here {
    IfIdle,
    Never,
}

/// The append side of `journal.jsonl`.
pub struct Journal {
    queue: Arc<Queue<Request>>,
    writer: Arc<Mutex<Writer>>,
    sessions: Sessions,
    tool_calls: super::tool_calls::ToolCalls,
    worker: Mutex<Option<JoinHandle<()>>>,
    durable_seq: Arc<AtomicU64>,
}

impl Journal {
    /// Start the writer on an open journal file whose contents `scan` describes; with a key,
    /// rows are keyed and `head` is rewritten after every durable batch (see `seal.rs`).
    /// `seal` is the key, the head file and the next head generation.
    pub fn start(disk: Arc<dyn Disk>, file: File, scan: &Scan, seal: Option<(Seal, File, u64)>) -> Result<Journal> {
        let queue = Arc::new(Queue::default());
        let durable_seq = Arc::new(AtomicU64::new(scan.last_seq));
        // What an earlier writer reserved is still allocated (an append-only file has no
        // holes): reserving again would change the journal's modification time, which tells the
        // journal index the file was rewritten, although no row was.
        let reserved_to = disk.file_stat(&file).map_or(0, |stat| stat.blocks * 512);
        let writer = Writer {
            durable_seq: durable_seq.clone(),
            disk,
            file,
            end: scan.len,
            unsynced: false,
            reserved_to,
            needs_newline: scan.needs_newline,
            chain: scan.next_chain(),
            next_seq: scan.last_seq + 1,
            cut_pending: false,
            seal,
        };
        let writer = Arc::new(Mutex::new(writer));
        let (rx, held) = (queue.clone(), writer.clone());
        let worker = std::thread::Builder::new()
            .name("rwfs-journal".into())
            .spawn(move || Writer::run(&held, &rx))
            .step("start journal writer")?;
        Ok(Journal {
            queue,
            writer,
            sessions: Sessions::default(),
            tool_calls: Default::default(),
            worker: Mutex::new(Some(worker)),
            durable_seq,
        })
    }

    /// How this journal names sessions (the policy sets its agent hosts).
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// The agents' open tool calls, which name the `group` of the rows written while they run.
    pub fn tool_calls(&self) -> &super::tool_calls::ToolCalls {
        &self.tool_calls
    }

    /// Queue a row for the writer thread; it is durable when the returned [`Pending`] says so.
    /// Meanwhile the caller syncs what the row describes, or queues more rows for the same
    /// `fdatasync`.
    pub fn submit(&self, change: Change) -> Pending {
        self.request(change, Durable::Yes, Here::Never)
    }

    /// Write a row; the returned [`Pending`] says when it is written (in the page cache, safe
    /// from a crash of any process but not from power loss). [`Journal::sync`] makes it durable.
    pub fn submit_written(&self, change: Change) -> Pending {
        self.request(change, Durable::No, Here::IfIdle)
    }

    /// A change by a process through the mount or the CLI without a session name gets one here
    /// (`journal::session`), and one without a group the agent's tool call it answers, if any
    /// (`journal::tool_calls`).
    fn request(&self, mut change: Change, durable: Durable, here: Here) -> Pending {
        let durable = durable == Durable::Yes;
        let actor = &mut change.actor;
        if let Some(pid) = actor.pid {
            if actor.session_label.is_none() && matches!(actor.via, Via::Fuse | Via::Cli) {
                actor.session_label = self.sessions.of_pid(pid);
            }
            if actor.tool_call.is_none() && matches!(actor.via, Via::Fuse | Via::Cli | Via::Mcp) {
                actor.tool_call = self.tool_calls.of_pid(pid);
            }
        }
        let (reply, pending) = crate::wake::reply();
        self.enqueue(Request::Row { change, durable, reply }, here);
        Pending(pending)
    }

    /// Hand `request` to the writer, or with the writer idle (`Here::IfIdle`) write what is
    /// queued and it here, on the caller's thread (see the module docs). Closed: the request
    /// (and its reply) is dropped, and its `wait` reports that.
    fn enqueue(&self, request: Request, here: Here) {
        if here == Here::IfIdle
            && let Ok(mut writer) = self.writer.try_lock()
        {
            if let Some(mut batch) = self.queue.take_now(MAX_BATCH - 1) {
                batch.push(request);
                writer.commit(batch);
            }
            return;
        }
        let _ = self.queue.push(request);
    }

    /// Make every row written so far durable (one `fdatasync`, shared with whatever is queued).
    pub fn sync(&self) -> Result<()> {
        let (reply, synced) = crate::wake::reply();
        self.enqueue(Request::Sync(reply), Here::IfIdle);
        synced.wait().unwrap_or_else(|| Err(writer_gone()))
    }

    /// The highest `seq` known to be durable.
    pub fn durable_seq(&self) -> u64 {
        self.durable_seq.load(Ordering::Acquire)
    }

    /// Append a row and wait until it is durable.
    pub fn append(&self, change: Change) -> Result<Appended> {
        self.request(change, Durable::Yes, Here::IfIdle).wait()
    }

    /// Finish queued rows and stop the writer; later appends fail.
    pub fn close(&self) {
        let worker = self.worker.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(worker) = worker {
            self.queue.close();
            let _ = worker.join();
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.close();
    }
}

struct Writer {
    durable_seq: Arc<AtomicU64>,
    disk: Arc<dyn Disk>,
    file: File,
    /// Offset just past the last byte written.
    end: u64,
    /// Rows were written since the last `fdatasync`.
    unsynced: bool,
    /// The journal's blocks are allocated up to here (see [`RESERVE`]).
    reserved_to: u64,
    needs_newline: bool,
    chain: Sha256,
    next_seq: u64,
    /// A failed batch left bytes past `end` that could not be cut yet.
    cut_pending: bool,
    /// The journal key, the head file and the next head generation.
    seal: Option<(Seal, File, u64)>,
}

impl Writer {
    /// The writer thread: write batches of what is queued, holding the writer, until the queue
    /// is closed and drained. (A caller may have taken what woke it: then there is nothing.)
    fn run(writer: &Mutex<Writer>, queue: &Queue<Request>) {
        let lock = || writer.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = lock().top_up();
        while queue.wait_for_items() {
            let mut writer = lock();
            let batch = match queue.take_now(MAX_BATCH) {
                Some(batch) => batch,
                // Closed meanwhile: the rest is drained below.
                None => break,
            };
            if !batch.is_empty() {
                writer.commit(batch);
            }
        }
        let mut writer = lock();
        loop {
            let batch = queue.take(MAX_BATCH);
            if batch.is_empty() {
                writer.sync_head();
                return;
            }
            writer.commit(batch);
        }
    }

    fn commit(&mut self, mut batch: Vec<Request>) {
        if self.short_of_reserve() {
            batch = self.refuse_new_versions(batch);
            if batch.is_empty() {
                return;
            }
        }
        let (saved_seq, saved_chain) = (self.next_seq, self.chain);
        let now = SystemTime::now();
        let ts = crate::time::stamp(now);
        let millis = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let mut buf = Vec::with_capacity(batch.len() * 400 + 1);
        if self.needs_newline {
            buf.push(b'\n');
        }
        let mut appended = Vec::with_capacity(batch.len());
        let mut sync = false;
        for request in &batch {
            let Request::Row { change, durable, .. } = request else {
                sync = true;
                continue;
            };
            sync |= durable;
            let seq = self.next_seq;
            self.next_seq += 1;
            let journal_id = format!("wj_{:012x}{:08x}", millis & 0xffff_ffff_ffff, seq & 0xffff_ffff);
            let mut row = to_row(change, seq, &journal_id, &ts, self.chain);
            row.mac = self.seal.as_ref().map(|(seal, _, _)| seal.row_mac(&self.chain));
            let line = row.to_line();
            self.chain = Sha256::of(line.as_bytes());
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
            appended.push(Appended { seq, journal_id, ts: ts.clone() });
        }
        let rows = !appended.is_empty();
        match self.write(if rows { &buf } else { &[] }, sync) {
            Ok(()) => {
                if rows {
                    self.end += buf.len() as u64;
                    self.needs_newline = false;
                    let _ = self.top_up();
                }
                if sync {
                    self.durable_seq.store(self.next_seq - 1, Ordering::Release);
                    self.record_head();
                }
                let mut appended = appended.into_iter();
                for request in batch {
                    match request {
                        Request::Row { reply, .. } => reply.send(Ok(appended.next().expect("one per row"))),
                        Request::Sync(reply) => reply.send(Ok(())),
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, rows = appended.len(), "journal append failed");
                self.next_seq = saved_seq;
                self.chain = saved_chain;
                if rows {
                    self.cut_pending = true;
                    self.cut();
                }
                for request in batch {
                    let error = Error::io("journal append", e.duplicate());
                    match request {
                        Request::Row { reply, .. } => reply.send(Err(error)),
                        Request::Sync(reply) => reply.send(Err(error)),
                    }
                }
            }
        }
    }

    /// Write `buf` at the end; with `sync`, make everything written durable.
    fn write(&mut self, buf: &[u8], sync: bool) -> std::io::Result<()> {
        if self.cut_pending && !self.cut() {
            return Err(std::io::Error::other("cannot cut a failed batch from the journal"));
        }
        if !buf.is_empty() {
            self.disk.write_at(&self.file, buf, self.end)?;
            self.unsynced = true;
        }
        if sync && self.unsynced {
            self.disk.sync_data(&self.file)?;
            self.unsynced = false;
        }
        Ok(())
    }

    /// Keep [`RESERVE`] bytes allocated past the end (best effort: a full disk keeps what is
    /// left of the reserve, which is what it is for). False when less than half of it is left
    /// and the disk has no room for more.
    fn top_up(&mut self) -> bool {
        if self.reserved_to >= self.end + RESERVE / 2 {
            return true;
        }
        match self.disk.reserve(&self.file, self.end, RESERVE) {
            Ok(()) => {
                self.reserved_to = self.end + RESERVE;
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "journal reserve not topped up");
                !matches!(e.raw_os_error(), Some(nix::libc::ENOSPC | nix::libc::EDQUOT))
            }
        }
    }

    /// Is the disk full with less than half of the reserve left (see [`RESERVE`])?
    fn short_of_reserve(&mut self) -> bool {
        !self.top_up()
    }

    /// Answer the rows that may not use the reserve with `ENOSPC` (nothing is written for
    /// them, and they take no `seq`); the rest of the batch goes on.
    fn refuse_new_versions(&self, batch: Vec<Request>) -> Vec<Request> {
        let mut kept = Vec::with_capacity(batch.len());
        for request in batch {
            match request {
                Request::Row { change, reply, .. } if !uses_reserve(change.op) => {
                    tracing::debug!(
                        op = change.op.as_str(),
                        path = change.path,
                        "row refused: the journal's reserve is kept for deletes and renames"
                    );
                    reply.send(Err(Error::io(
                        "journal append (the disk is full; what is left of the journal's reserve is kept for deletes and renames)",
                        std::io::Error::from_raw_os_error(nix::libc::ENOSPC),
                    )));
                }
                other => kept.push(other),
            }
        }
        kept
    }

    /// Rewrite the head to vouch for the journal as it is durable now: right after a batch's
    /// sync (never before), when the file ends with that batch's newline. A failure only leaves
    /// the head behind, which the keyed chain covers.
    fn record_head(&mut self) {
        if let Some((seal, head, generation)) = &mut self.seal {
            let line = seal.head(*generation, self.next_seq - 1, self.end, self.chain);
            *generation += 1;
            if let Err(e) = write_head(&*self.disk, head, &line, false) {
                tracing::warn!(error = %e, "cannot record the journal head");
            }
        }
    }

    /// Make the last head written durable (at close).
    fn sync_head(&self) {
        if let Some((_, head, _)) = &self.seal
            && let Err(e) = self.disk.sync_data(head)
        {
            tracing::warn!(error = %e, "cannot sync the journal head");
        }
    }

    /// Remove bytes of a failed batch; true when the file ends at `end` again.
    fn cut(&mut self) -> bool {
        match self.disk.set_len(&self.file, self.end) {
            Ok(()) => {
                self.cut_pending = false;
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot truncate the journal after a failed append");
                false
            }
        }
    }
}

/// An io::Error cannot be cloned; every caller of a failed batch gets an equivalent one.
trait Duplicate {
    fn duplicate(&self) -> std::io::Error;
}

impl Duplicate for std::io::Error {
    fn duplicate(&self) -> std::io::Error {
        match self.raw_os_error() {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::new(self.kind(), self.to_string()),
        }
    }
}

fn to_row(change: &Change, seq: u64, journal_id: &str, ts: &str, chain: Sha256) -> Row {
    let actor = &change.actor;
    Row {
        bytes: change.bytes,
        caller: actor.caller.clone(),
        chain: Some(chain),
        comm: actor.comm.clone(),
        from: change.from.clone(),
        group: actor.group.clone().or_else(|| actor.tool_call.clone()),
        journal_id: journal_id.to_string(),
        mac: None,
        mode: if change.mode.is_empty() { change.op.as_str().to_string() } else { change.mode.clone() },
        op_field: Some(change.op),
        path: change.path.clone(),
        pid: actor.pid,
        prev_sha256: change.prev_sha256,
        reason: change.reason.clone(),
        seq: Some(seq),
        session: actor.session_label.clone(),
        sha256: change.sha256,
        ts: ts.to_string(),
        uid: actor.uid,
        verdict: change.verdict.clone(),
        via: Some(actor.via),
    }
}
