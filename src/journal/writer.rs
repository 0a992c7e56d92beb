//! The journal writer: one thread, group commit.
//!
//! Callers [`submit`](Journal::submit) a [`Change`] and get a [`Pending`]; the writer thread
//! takes everything queued, assigns `seq`, `ts`, `journal_id` and `chain` in queue order, writes
//! the batch with one `pwrite` at the end of the file and makes it durable with one `fdatasync`,
//! then releases every caller of the batch. A caller is released with `Ok` only after its row is
//! durable. While one batch syncs, the next one queues: that is the whole of group commit.
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
use super::session::Sessions;

/// Largest number of rows written in one batch.
const MAX_BATCH: usize = 1024;

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
    /// The MCP session that asked (unique within this process); not journaled, it keys retry
    /// budgets so that one agent's retries are bounded and another agent starts fresh.
    pub session: Option<u64>,
    /// The session name journaled in the row's `session` (see `journal::session`); when `None`
    /// for a change by a process through the mount or the CLI, [`Journal::submit`] looks it up.
    pub session_label: Option<String>,
    /// The group of rows one command makes together (a rewind), journaled in `group`.
    pub group: Option<String>,
}

impl Actor {
    /// This process, through the given front end.
    pub fn this_process(via: Via, caller: &str) -> Actor {
        let pid = std::process::id();
        Actor {
            via,
            caller: caller.to_string(),
            pid: Some(pid),
            comm: process_name(pid),
            uid: Some(nix::unistd::getuid().as_raw()),
            tool: None,
            session: None,
            session_label: None,
            group: None,
        }
    }

    /// rwfs itself (recovery, retention).
    pub fn engine() -> Actor {
        Actor::this_process(Via::Engine, "rwfs")
    }
}

/// `/proc/<pid>/comm`, without the newline.
pub fn process_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_string())
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

/// A row to write and who waits for it.
type Request = (Change, Replier<Result<Appended>>);

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

/// The append side of `journal.jsonl`.
pub struct Journal {
    queue: Arc<Queue<Request>>,
    sessions: Sessions,
    worker: Mutex<Option<JoinHandle<()>>>,
    durable_seq: Arc<AtomicU64>,
}

impl Journal {
    /// Start the writer on an open journal file whose contents `scan` describes.
    pub fn start(disk: Arc<dyn Disk>, file: File, scan: &Scan) -> Result<Journal> {
        let queue = Arc::new(Queue::default());
        let durable_seq = Arc::new(AtomicU64::new(scan.last_seq));
        let mut writer = Writer {
            durable_seq: durable_seq.clone(),
            disk,
            file,
            end: scan.len,
            needs_newline: scan.needs_newline,
            chain: scan.next_chain(),
            next_seq: scan.last_seq + 1,
            cut_pending: false,
        };
        let rx = queue.clone();
        let worker = std::thread::Builder::new()
            .name("rwfs-journal".into())
            .spawn(move || writer.run(&rx))
            .step("start journal writer")?;
        Ok(Journal { queue, sessions: Sessions::default(), worker: Mutex::new(Some(worker)), durable_seq })
    }

    /// How this journal names sessions (the policy sets its agent hosts).
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Queue a row; it is durable when the returned [`Pending`] says so. A change by a process
    /// through the mount or the CLI without a session name gets one here (`journal::session`).
    pub fn submit(&self, mut change: Change) -> Pending {
        let actor = &mut change.actor;
        if actor.session_label.is_none()
            && matches!(actor.via, Via::Fuse | Via::Cli)
            && let Some(pid) = actor.pid
        {
            actor.session_label = self.sessions.of_pid(pid);
        }
        let (replier, reply) = crate::wake::reply();
        // If the writer is gone the request (and `replier`) is dropped and `wait` reports it.
        let _ = self.queue.push((change, replier));
        Pending(reply)
    }

    /// The highest `seq` known to be durable.
    pub fn durable_seq(&self) -> u64 {
        self.durable_seq.load(Ordering::Acquire)
    }

    /// Append a row and wait until it is durable.
    pub fn append(&self, change: Change) -> Result<Appended> {
        self.submit(change).wait()
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
    /// Offset just past the last durable byte.
    end: u64,
    needs_newline: bool,
    chain: Sha256,
    next_seq: u64,
    /// A failed batch left bytes past `end` that could not be cut yet.
    cut_pending: bool,
}

impl Writer {
    /// Write batches of what is queued until the queue is closed and drained.
    fn run(&mut self, queue: &Queue<Request>) {
        loop {
            let batch = queue.take(MAX_BATCH);
            if batch.is_empty() {
                return;
            }
            self.commit(batch);
        }
    }

    fn commit(&mut self, batch: Vec<Request>) {
        let (saved_seq, saved_chain) = (self.next_seq, self.chain);
        let now = SystemTime::now();
        let ts = humantime::format_rfc3339_seconds(now).to_string();
        let millis = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let mut buf = Vec::with_capacity(batch.len() * 400 + 1);
        if self.needs_newline {
            buf.push(b'\n');
        }
        let mut appended = Vec::with_capacity(batch.len());
        for (change, _) in &batch {
            let seq = self.next_seq;
            self.next_seq += 1;
            let journal_id = format!("wj_{:012x}{:08x}", millis & 0xffff_ffff_ffff, seq & 0xffff_ffff);
            let row = to_row(change, seq, &journal_id, &ts, self.chain);
            let line = row.to_line();
            self.chain = Sha256::of(line.as_bytes());
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
            appended.push(Appended { seq, journal_id, ts: ts.clone() });
        }
        match self.write(&buf) {
            Ok(()) => {
                self.end += buf.len() as u64;
                self.needs_newline = false;
                self.durable_seq.store(self.next_seq - 1, Ordering::Release);
                for ((_, reply), ok) in batch.into_iter().zip(appended) {
                    reply.send(Ok(ok));
                }
            }
            Err(e) => {
                tracing::error!(error = %e, rows = batch.len(), "journal append failed");
                self.next_seq = saved_seq;
                self.chain = saved_chain;
                self.cut_pending = true;
                self.cut();
                for (_, reply) in batch {
                    reply.send(Err(Error::io("journal append", e.duplicate())));
                }
            }
        }
    }

    fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if self.cut_pending && !self.cut() {
            return Err(std::io::Error::other("cannot cut a failed batch from the journal"));
        }
        self.disk.write_at(&self.file, buf, self.end)?;
        self.disk.sync_data(&self.file)
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
        group: actor.group.clone(),
        journal_id: journal_id.to_string(),
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
