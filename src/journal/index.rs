//! The journal's index: `.resilient_write/index/journal.redb`, a cache that answers the history
//! questions of `query.rs` without reading the whole journal.
//!
//! ```text
//!   rows          ordinal → (offset, length, line number, digest) of the row's line
//!   by_path       (path, ordinal)      a row naming the path (its `path`, or a rename's `from`)
//!   by_session    (session, ordinal)   by_group (group, ordinal)
//!   by_seq        seq → ordinal        by_time (unix ns, ordinal)
//!   sessions      name → the session's summary so far; session_order first ordinal → name;
//!                 session_files (session, path) for its distinct changed files
//!   meta          what the index covers: the journal's identity, length, lines, chain state
//! ```
//!
//! Invariants:
//! - `journal.jsonl` is the source of truth; the index holds no row, only where each is. A
//!   row is read back from the journal and must hash to the digest the index recorded, so an
//!   index that disagrees with the journal is never believed (the caller scans instead, and
//!   the next refresh rebuilds it).
//! - [`Index::open`] brings the index up to date before it answers: built from scratch when it
//!   is missing, unreadable, of another version or another journal file, or when the journal is
//!   shorter than what it covers or the bytes it covers changed; caught up from the last
//!   covered offset when the journal only grew. Only complete lines are covered; a torn tail
//!   is left to the next refresh.
//! - The index is never believed over the journal: it keeps the sha256 of the bytes it covers
//!   and the journal's size, modification and change times as it saw them. The same size and
//!   both times unchanged mean the file was not written since (a write sets the change time,
//!   which nobody can set back; restoring the modification time sets it too): the answer comes
//!   without reading the journal. Anything else — the journal grew, or was touched — and the
//!   covered bytes are hashed again before the index is believed (an edit of a middle row with
//!   its size and modification time restored is caught there: the index is rebuilt); that
//!   pass is the catch-up's own read of the journal. A row read back is also checked against
//!   its digest.
//! - Rows are accepted as the tolerant scan accepts them (`scan.rs`): unreadable lines are
//!   skipped and, like a broken chain, remembered as problems. Keyed `mac`s and the head are
//!   `rwfs verify`'s to check, which always reads the whole journal.
//! - Deleting the index is always safe: the next question rebuilds it.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::durable::{Dir, Disk, File};
use crate::sha::Sha256;

use super::JOURNAL_FILE;
use super::row::{Op, Row};
use super::scan::{Entry, Problem};
use super::summary::{self, SessionSummary};

/// The database an [`Index`] lives in (see [`open_db`]).
pub type IndexDb = Database;

/// The index file inside `.resilient_write/index/`.
pub const INDEX_FILE: &str = "journal.redb";
/// Bumped whenever what the tables hold changes: an index of another version is rebuilt.
const VERSION: u64 = 4;
/// Problems remembered (the first ones; `rwfs verify` lists them all).
const MAX_PROBLEMS: usize = 100;

type Ordinal = u64;
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const ROWS: TableDefinition<Ordinal, (u64, u64, u64, u64)> = TableDefinition::new("rows");
const BY_PATH: TableDefinition<(&str, Ordinal), ()> = TableDefinition::new("by_path");
const BY_SESSION: TableDefinition<(&str, Ordinal), ()> = TableDefinition::new("by_session");
const BY_GROUP: TableDefinition<(&str, Ordinal), ()> = TableDefinition::new("by_group");
const BY_SEQ: TableDefinition<u64, Ordinal> = TableDefinition::new("by_seq");
const BY_TIME: TableDefinition<(u64, Ordinal), ()> = TableDefinition::new("by_time");
const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
const SESSION_ORDER: TableDefinition<Ordinal, &str> = TableDefinition::new("session_order");
const SESSION_FILES: TableDefinition<(&str, &str), ()> = TableDefinition::new("session_files");

/// What the index covers of the journal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Mark {
    version: u64,
    /// The journal file's device and inode: a replaced journal is another journal.
    file: (u64, u64),
    /// Bytes covered: complete lines only.
    len: u64,
    /// The journal's modification and change times when it was `len` bytes long: with the
    /// same length and both unchanged, it was not written since.
    mtime_ns: i64,
    ctime_ns: i64,
    /// The sha256 of the journal's first `len` bytes.
    prefix: Option<Sha256>,
    /// Lines covered (1-based numbering continues from here).
    lines: u64,
    /// Rows indexed (the next ordinal).
    rows: u64,
    /// The `chain` the next row must carry, and whether chained rows were seen.
    next_chain: Option<Sha256>,
    chained: bool,
    problems: Vec<String>,
}

/// An up-to-date index of one journal, open for questions.
pub struct Index<'a> {
    disk: &'a dyn Disk,
    journal: File,
    db: Arc<Database>,
    problems: Vec<String>,
    len: u64,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// A line's digest as the index keeps it (the first 8 bytes of its sha256).
fn digest(line: &[u8]) -> u64 {
    let sha = Sha256::of(line);
    u64::from_le_bytes(sha.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// Where the index of the state directory `state` lives (through its descriptor, so that a
/// mount over the workspace does not hide it from the daemon).
pub fn index_dir(state: &Dir) -> PathBuf {
    state.fd_path().join(crate::durable::layout::INDEX)
}

/// Open (creating it, or replacing an unreadable one) the index database of `state`. Fails
/// when another process has it open: ask the journal then.
pub fn open_db(disk: &dyn Disk, state: &Dir) -> io::Result<Database> {
    if disk.stat(state, crate::durable::layout::INDEX)?.is_none() {
        disk.mkdir(state, crate::durable::layout::INDEX, 0o700)?;
    }
    let path = index_dir(state).join(INDEX_FILE);
    match Database::create(&path) {
        Ok(db) => Ok(db),
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => Err(other("index in use by another process")),
        Err(e) => {
            // Not a readable index (corrupt, another format): it is only a cache.
            tracing::info!(error = %e, "journal index unreadable; rebuilding it");
            std::fs::remove_file(&path)?;
            Database::create(&path).map_err(other)
        }
    }
}

impl<'a> Index<'a> {
    /// Open (creating or rebuilding as needed, see the module docs) the index of the journal in
    /// `state`, brought up to date. An error means "no index now": ask the journal instead.
    pub fn open(disk: &'a dyn Disk, state: &Dir) -> io::Result<Index<'a>> {
        Index::attach(disk, state, Arc::new(open_db(disk, state)?))
    }

    /// The index kept in `db` (from [`open_db`], held by the caller across questions: opening
    /// a database syncs it), brought up to date.
    pub fn attach(disk: &'a dyn Disk, state: &Dir, db: Arc<Database>) -> io::Result<Index<'a>> {
        let journal = disk.open_read(state, JOURNAL_FILE)?;
        let mut index = Index { disk, journal, db, problems: Vec::new(), len: 0 };
        index.refresh()?;
        Ok(index)
    }

    /// Problems found in the covered rows (unreadable lines, a broken chain, `tamper` rows).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Bytes of the journal the answers cover.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn mark(&self) -> io::Result<Option<Mark>> {
        let txn = self.db.begin_read().map_err(other)?;
        let meta = match txn.open_table(META) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(other(e)),
        };
        let Some(bytes) = meta.get("mark").map_err(other)? else { return Ok(None) };
        Ok(serde_json::from_slice::<Mark>(bytes.value()).ok())
    }

    fn read(&self, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        let mut done = 0;
        while done < buf.len() {
            let n = self.disk.read_at(&self.journal, &mut buf[done..], offset + done as u64)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "journal shorter than its index"));
            }
            done += n;
        }
        Ok(buf)
    }

    /// Bring the index up to date with the journal (see the module docs).
    fn refresh(&mut self) -> io::Result<()> {
        let stat = self.disk.file_stat(&self.journal)?;
        let file = (stat.id.dev, stat.id.ino);
        let mark =
            self.mark()?.filter(|m| m.version == VERSION && m.file == file && m.len <= stat.size && m.prefix.is_some());
        let times = (stat.mtime_ns, stat.ctime_ns);
        let mark = match mark {
            Some(mark) if mark.len == stat.size && (mark.mtime_ns, mark.ctime_ns) == times => mark,
            // Grown or touched: the covered bytes are checked on the way.
            Some(mark) => self.catch_up(Some(mark), file, stat.size, times)?,
            None => self.catch_up(None, file, stat.size, times)?,
        };
        self.problems = mark.problems;
        self.len = mark.len;
        Ok(())
    }

    /// Empty every table (within `txn`).
    fn clear(txn: &redb::WriteTransaction) -> io::Result<()> {
        for table in [META, SESSIONS] {
            txn.delete_table(table).map_err(other)?;
        }
        for table in [BY_PATH, BY_SESSION, BY_GROUP] {
            txn.delete_table(table).map_err(other)?;
        }
        txn.delete_table(ROWS).map_err(other)?;
        txn.delete_table(BY_SEQ).map_err(other)?;
        txn.delete_table(BY_TIME).map_err(other)?;
        txn.delete_table(SESSION_ORDER).map_err(other)?;
        txn.delete_table(SESSION_FILES).map_err(other)?;
        Ok(())
    }

    /// The sha256 of the journal's first `len` bytes, and those bytes fed to a hasher that
    /// goes on from there.
    fn hash_prefix(&self, len: u64) -> io::Result<(Sha256, crate::sha::Hasher)> {
        let mut hasher = crate::sha::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut offset = 0;
        while offset < len {
            let want = buf.len().min((len - offset) as usize);
            let n = self.disk.read_at(&self.journal, &mut buf[..want], offset)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "journal shorter than its index"));
            }
            hasher.update(&buf[..n]);
            offset += n as u64;
        }
        Ok((hasher.clone().finish(), hasher))
    }

    /// Index the complete lines between `mark.len` and `size`, in one transaction, once the
    /// bytes `from` covers are checked against its digest (`from`: `None`, or bytes that
    /// changed: rebuilt from scratch). Write transactions are exclusive: one that finds the
    /// index already moved by another thread of this process since `from` was read leaves it
    /// as it is.
    fn catch_up(&self, from: Option<Mark>, file: (u64, u64), size: u64, times: (i64, i64)) -> io::Result<Mark> {
        let txn = self.db.begin_write().map_err(other)?;
        let now = {
            let meta = txn.open_table(META).map_err(other)?;
            meta.get("mark").map_err(other)?.and_then(|v| serde_json::from_slice::<Mark>(v.value()).ok())
        };
        if from.is_some() && now != from {
            txn.abort().map_err(other)?;
            return Ok(now.unwrap_or_default());
        }
        let kept = match from {
            Some(mark) => match self.hash_prefix(mark.len) {
                Ok((sha, hasher)) if Some(sha) == mark.prefix => Some((mark, hasher)),
                Ok(_) | Err(_) => {
                    tracing::info!("the journal's indexed rows changed; rebuilding its index");
                    None
                }
            },
            None => None,
        };
        let (mut mark, mut hasher) = match kept {
            Some(kept) => kept,
            None => {
                Index::clear(&txn)?;
                (Mark { version: VERSION, file, ..Mark::default() }, crate::sha::Hasher::new())
            }
        };
        {
            let mut t = Tables::open(&txn)?;
            let mut sessions: BTreeMap<String, SessionSummary> = BTreeMap::new();
            let mut buf = vec![0u8; 1 << 20];
            let mut pending: Vec<u8> = Vec::new();
            let mut offset = mark.len;
            let mut line_start = mark.len;
            while offset < size {
                let want = buf.len().min((size - offset) as usize);
                let n = self.disk.read_at(&self.journal, &mut buf[..want], offset)?;
                if n == 0 {
                    break;
                }
                offset += n as u64;
                let mut chunk = &buf[..n];
                while let Some(i) = memchr::memchr(b'\n', chunk) {
                    pending.extend_from_slice(&chunk[..i]);
                    hasher.update(&pending);
                    hasher.update(b"\n");
                    self.line(&mut t, &mut mark, &mut sessions, line_start, &pending)?;
                    line_start += pending.len() as u64 + 1;
                    pending.clear();
                    chunk = &chunk[i + 1..];
                }
                pending.extend_from_slice(chunk);
            }
            for (name, summary) in &sessions {
                let json = serde_json::to_vec(summary).map_err(other)?;
                t.sessions.insert(name.as_str(), json.as_slice()).map_err(other)?;
            }
            mark.len = line_start;
            (mark.mtime_ns, mark.ctime_ns) = times;
            mark.prefix = Some(hasher.finish());
            let json = serde_json::to_vec(&mark).map_err(other)?;
            t.meta.insert("mark", json.as_slice()).map_err(other)?;
        }
        txn.commit().map_err(other)?;
        Ok(mark)
    }

    /// Index one complete line starting at `offset`.
    fn line(
        &self,
        t: &mut Tables<'_>,
        mark: &mut Mark,
        sessions: &mut BTreeMap<String, SessionSummary>,
        offset: u64,
        line: &[u8],
    ) -> io::Result<()> {
        mark.lines += 1;
        let line_no = mark.lines;
        if line.is_empty() {
            return Ok(());
        }
        let sha = Sha256::of(line);
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str::<Row>(s).map_err(|e| e.to_string()));
        let mut problem = |p: Problem| {
            if mark.problems.len() < MAX_PROBLEMS {
                mark.problems.push(p.to_string());
            }
        };
        let row = match parsed {
            Ok(row) => row,
            Err(error) => {
                problem(Problem::Unreadable { line: line_no, bytes: line.len() as u64, error });
                return Ok(());
            }
        };
        match row.chain {
            Some(chain) if chain != mark.next_chain.unwrap_or_else(Sha256::zero) => {
                problem(Problem::ChainBroken { line: line_no })
            }
            None if mark.chained => problem(Problem::Unchained { line: line_no }),
            _ => {}
        }
        mark.chained |= row.chain.is_some();
        if row.op() == Op::Tamper {
            problem(Problem::Tampered { line: line_no, reason: row.reason.clone().unwrap_or_default() });
        }
        mark.next_chain = Some(sha);
        let ord = mark.rows;
        mark.rows += 1;
        let e = other;
        t.rows.insert(ord, (offset, line.len() as u64, line_no, digest(line))).map_err(e)?;
        t.by_path.insert((row.path.as_str(), ord), ()).map_err(e)?;
        if let Some(from) = row.from.as_deref().filter(|f| *f != row.path) {
            t.by_path.insert((from, ord), ()).map_err(e)?;
        }
        if let Some(session) = &row.session {
            t.by_session.insert((session.as_str(), ord), ()).map_err(e)?;
        }
        if let Some(group) = &row.group {
            t.by_group.insert((group.as_str(), ord), ()).map_err(e)?;
        }
        if let Some(seq) = row.seq {
            t.by_seq.insert(seq, ord).map_err(e)?;
        }
        if let Some(ns) = unix_ns(&row.ts) {
            t.by_time.insert((ns, ord), ()).map_err(e)?;
        }
        let name = row.session.clone().unwrap_or_default();
        if !sessions.contains_key(&name) {
            let known = t.sessions.get(name.as_str()).map_err(e)?.and_then(|v| serde_json::from_slice(v.value()).ok());
            let summary = match known {
                Some(summary) => summary,
                None => {
                    t.session_order.insert(ord, name.as_str()).map_err(e)?;
                    summary::new_session(&row)
                }
            };
            sessions.insert(name.clone(), summary);
        }
        let summary = sessions.get_mut(&name).expect("inserted above");
        if let Some(path) = summary::count_row(summary, &row)
            && t.session_files.insert((name.as_str(), path), ()).map_err(e)?.is_none()
        {
            summary.files_changed += 1;
        }
        Ok(())
    }

    /// The row at `ord`, read back from the journal and checked against the index.
    fn entry(&self, ord: Ordinal, rows: &impl ReadableTable<Ordinal, (u64, u64, u64, u64)>) -> io::Result<Entry> {
        let (offset, len, line, want) =
            rows.get(ord).map_err(other)?.ok_or_else(|| other("index names a row it does not have"))?.value();
        let bytes = self.read(offset, len)?;
        if digest(&bytes) != want {
            return Err(other("the journal changed under its index"));
        }
        let row = serde_json::from_slice::<Row>(&bytes).map_err(other)?;
        Ok(Entry { line, row })
    }

    /// The rows at these ordinals, in journal order.
    pub(crate) fn entries(&self, ords: impl IntoIterator<Item = Ordinal>) -> io::Result<Vec<Entry>> {
        let txn = self.db.begin_read().map_err(other)?;
        let rows = txn.open_table(ROWS).map_err(other)?;
        let mut ords: Vec<Ordinal> = ords.into_iter().collect();
        ords.sort_unstable();
        ords.dedup();
        ords.into_iter().map(|ord| self.entry(ord, &rows)).collect()
    }

    /// Ordinals of the rows naming `key` in one of the `(key, ordinal)` tables, newest first
    /// when `newest_first`, at most `limit`.
    fn keyed(
        &self,
        table: TableDefinition<(&str, Ordinal), ()>,
        key: &str,
        newest_first: bool,
        limit: usize,
    ) -> io::Result<Vec<Ordinal>> {
        let txn = self.db.begin_read().map_err(other)?;
        let t = txn.open_table(table).map_err(other)?;
        let mut range = t.range((key, 0)..=(key, u64::MAX)).map_err(other)?;
        let mut out = Vec::new();
        while out.len() < limit {
            let next = if newest_first { range.next_back() } else { range.next() };
            let Some(r) = next else { break };
            out.push(r.map_err(other)?.0.value().1);
        }
        Ok(out)
    }

    /// Rows naming `path` (as `path` or a rename's `from`), oldest first.
    pub fn path_ordinals(&self, path: &str) -> io::Result<Vec<Ordinal>> {
        self.keyed(BY_PATH, path, false, usize::MAX)
    }

    /// Rows naming a path strictly below the directory `dir`.
    pub fn below_ordinals(&self, dir: &str) -> io::Result<Vec<Ordinal>> {
        let txn = self.db.begin_read().map_err(other)?;
        let t = txn.open_table(BY_PATH).map_err(other)?;
        let (lo, hi) = (format!("{dir}/"), format!("{dir}0"));
        t.range((lo.as_str(), 0)..(hi.as_str(), 0))
            .map_err(other)?
            .map(|r| r.map(|(k, _)| k.value().1).map_err(other))
            .collect()
    }

    /// The newest `n` rows below ordinal `below` naming `path`, or of `session`, or of the
    /// whole journal (ordinals, newest first).
    pub fn newest(
        &self,
        path: Option<&str>,
        session: Option<&str>,
        below: Ordinal,
        n: usize,
    ) -> io::Result<Vec<Ordinal>> {
        let txn = self.db.begin_read().map_err(other)?;
        let key = path.or(session);
        match key {
            Some(key) => {
                let t = txn.open_table(if path.is_some() { BY_PATH } else { BY_SESSION }).map_err(other)?;
                let range = t.range((key, 0)..(key, below)).map_err(other)?;
                range.rev().take(n).map(|r| r.map(|(k, _)| k.value().1).map_err(other)).collect()
            }
            None => {
                let rows = txn.open_table(ROWS).map_err(other)?;
                let range = rows.range::<Ordinal>(..below).map_err(other)?;
                range.rev().take(n).map(|r| r.map(|(k, _)| k.value()).map_err(other)).collect()
            }
        }
    }

    /// The ordinal of the row with this `seq` (none when no row has it).
    pub fn seq_ordinal(&self, seq: u64) -> io::Result<Option<Ordinal>> {
        let txn = self.db.begin_read().map_err(other)?;
        let t = txn.open_table(BY_SEQ).map_err(other)?;
        Ok(t.get(seq).map_err(other)?.map(|v| v.value()))
    }

    /// An ordinal bound below which every row with a `seq` under `seq` lies: the ordinal of
    /// the first row numbered `seq` or more (the writer numbers rows in journal order), else
    /// the end.
    pub fn ordinal_below_seq(&self, seq: u64) -> io::Result<Ordinal> {
        let txn = self.db.begin_read().map_err(other)?;
        let t = txn.open_table(BY_SEQ).map_err(other)?;
        let first = t.range(seq..).map_err(other)?.next().transpose().map_err(other)?;
        Ok(first.map_or(u64::MAX, |(_, ord)| ord.value()))
    }

    /// The ordinals of the rows a selection picks.
    pub fn selected(&self, selection: &summary::Selection) -> io::Result<Vec<Ordinal>> {
        use summary::Selection;
        let txn = self.db.begin_read().map_err(other)?;
        let collect2 =
            |table: TableDefinition<(&str, Ordinal), ()>, key: &str| self.keyed(table, key, false, usize::MAX);
        match selection {
            Selection::Session(s) => collect2(BY_SESSION, s),
            Selection::SessionAfter(s, _) => {
                let mut ords = collect2(BY_SESSION, s)?;
                ords.sort_unstable();
                ords.dedup();
                let entries = self.entries(ords.iter().copied())?;
                Ok(ords.into_iter().zip(entries).filter(|(_, e)| selection.matches(&e.row)).map(|(o, _)| o).collect())
            }
            Selection::Group(g) => collect2(BY_GROUP, g),
            Selection::AfterSeq(seq) => {
                let t = txn.open_table(BY_SEQ).map_err(other)?;
                t.range(seq.saturating_add(1)..)
                    .map_err(other)?
                    .map(|r| r.map(|(_, v)| v.value()).map_err(other))
                    .collect()
            }
            Selection::AfterTime(time) => self.since_ns(time_ns(*time).saturating_add(1)),
        }
    }

    /// Rows whose time is at or after `ns` (unix nanoseconds), in journal order.
    pub fn since_ns(&self, ns: u64) -> io::Result<Vec<Ordinal>> {
        let txn = self.db.begin_read().map_err(other)?;
        let t = txn.open_table(BY_TIME).map_err(other)?;
        let mut ords: Vec<Ordinal> = t
            .range((ns, 0)..)
            .map_err(other)?
            .map(|r| r.map(|(k, _)| k.value().1).map_err(other))
            .collect::<io::Result<_>>()?;
        ords.sort_unstable();
        Ok(ords)
    }

    /// Every session, in the order of their first row.
    pub fn sessions(&self) -> io::Result<Vec<SessionSummary>> {
        let txn = self.db.begin_read().map_err(other)?;
        let order = txn.open_table(SESSION_ORDER).map_err(other)?;
        let sessions = txn.open_table(SESSIONS).map_err(other)?;
        let mut out = Vec::new();
        for r in order.range::<Ordinal>(..).map_err(other)? {
            let (_, name) = r.map_err(other)?;
            let summary = sessions.get(name.value()).map_err(other)?.ok_or_else(|| other("session without summary"))?;
            out.push(serde_json::from_slice(summary.value()).map_err(other)?);
        }
        Ok(out)
    }
}

/// The tables a catch-up writes.
struct Tables<'t> {
    meta: redb::Table<'t, &'static str, &'static [u8]>,
    rows: redb::Table<'t, Ordinal, (u64, u64, u64, u64)>,
    by_path: redb::Table<'t, (&'static str, Ordinal), ()>,
    by_session: redb::Table<'t, (&'static str, Ordinal), ()>,
    by_group: redb::Table<'t, (&'static str, Ordinal), ()>,
    by_seq: redb::Table<'t, u64, Ordinal>,
    by_time: redb::Table<'t, (u64, Ordinal), ()>,
    sessions: redb::Table<'t, &'static str, &'static [u8]>,
    session_order: redb::Table<'t, Ordinal, &'static str>,
    session_files: redb::Table<'t, (&'static str, &'static str), ()>,
}

impl<'t> Tables<'t> {
    fn open(txn: &'t redb::WriteTransaction) -> io::Result<Tables<'t>> {
        Ok(Tables {
            meta: txn.open_table(META).map_err(other)?,
            rows: txn.open_table(ROWS).map_err(other)?,
            by_path: txn.open_table(BY_PATH).map_err(other)?,
            by_session: txn.open_table(BY_SESSION).map_err(other)?,
            by_group: txn.open_table(BY_GROUP).map_err(other)?,
            by_seq: txn.open_table(BY_SEQ).map_err(other)?,
            by_time: txn.open_table(BY_TIME).map_err(other)?,
            sessions: txn.open_table(SESSIONS).map_err(other)?,
            session_order: txn.open_table(SESSION_ORDER).map_err(other)?,
            session_files: txn.open_table(SESSION_FILES).map_err(other)?,
        })
    }
}

/// A row's time as unix nanoseconds (`None`: unparseable or before 1970).
fn unix_ns(ts: &str) -> Option<u64> {
    crate::time::parse(ts).map(time_ns)
}

fn time_ns(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64)
}
