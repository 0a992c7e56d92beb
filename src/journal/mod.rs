//! The journal: `.resilient_write/journal.jsonl`, append-only, hash-chained, group-committed.
//!
//! One row per change (see [`Row`] for the fields), written by one writer thread that makes
//! each batch durable with a single `fdatasync` before releasing its callers ([`Journal`]).
//! Reading is tolerant (`scan`): torn and unreadable lines are reported and skipped, the hash
//! chain is checked on the way, and rows written by the reference server parse unchanged.
//!
//! The journal records; it does not decide. When a row is written relative to the change it
//! describes is the commit protocol's business (`engine/commit.rs`).

pub mod follow;
mod index;
pub mod query;
mod row;
mod scan;
mod seal;
pub mod session;
mod summary;
pub mod tool_calls;
mod writer;

use std::sync::Arc;

use crate::durable::{Dir, Disk, File};
use crate::error::{IoContext, Result};

pub use index::{INDEX_FILE, Index, IndexDb, index_dir, open_db as open_index_db};
pub use row::{Ledger, Op, Row, Via};
pub use scan::{Entry, Problem, Scan};
pub use seal::{HEAD_FILE, Head, KEY_FILE, Seal};
pub use writer::{Actor, Appended, Change, Journal, Pending};

/// The journal's file name inside the state directory.
pub const JOURNAL_FILE: &str = crate::durable::layout::JOURNAL;

/// Open the journal of `state` for appending (creating it durably), read it through `visit`,
/// and start the writer. The journal key is created (durably) when there is none, and the head
/// with it; what the head shows was done to the journal since it was written (rows removed
/// from its end, its last rows rewritten) is recorded as a `tamper` row before anything else,
/// since the next head no longer shows it.
pub fn open(disk: Arc<dyn Disk>, state: &Dir, visit: impl FnMut(Entry)) -> Result<(Journal, Scan)> {
    let existed = disk.stat(state, JOURNAL_FILE).step("stat journal")?.is_some();
    let file = disk.open_write(state, JOURNAL_FILE, true, 0o644).step("open journal")?;
    if !existed {
        disk.sync_dir(state).step("fsync state directory")?;
    }
    let keys = seal::load(&*disk, state)?;
    let scan = scan::scan(&*disk, &file, &keys, visit).step("read journal")?;
    for problem in &scan.problems {
        tracing::warn!(%problem, "journal");
    }
    let (key, keys_dir) = seal::ensure_key(&*disk, state)
        .step("create journal key")
        .map_err(|e| e.at(format!("{}/{}/{KEY_FILE}", crate::durable::STATE_DIR, seal::KEYS_DIR)))?;
    let (head, head_existed) = seal::open_head(&*disk, &keys_dir)
        .step("open journal head (if it is not a file, remove it: rwfs writes a new one and journals a tamper row)")
        .map_err(|e| e.at(format!("{}/{}/{HEAD_FILE}", crate::durable::STATE_DIR, seal::KEYS_DIR)))?;
    let mut generation = keys.head.as_deref().and_then(|slots| key.newest(slots)).map_or(0, |h| h.generation) + 1;
    if !head_existed {
        // Before any keyed row: a keyed row without a head is evidence of tampering.
        seal::write_head(&*disk, &head, &scan::head_of(&key, generation, &scan), true).step("write journal head")?;
        disk.sync_dir(&keys_dir).step("fsync keys directory")?;
        generation += 1;
    }
    let journal = Journal::start(disk, file, &scan, Some((key, head, generation)))?;
    for problem in scan.problems.iter().filter(|p| p.is_head_problem()) {
        journal.append(Change {
            op: Op::Tamper,
            path: format!("{}/{JOURNAL_FILE}", crate::durable::STATE_DIR),
            from: None,
            sha256: None,
            prev_sha256: None,
            bytes: scan.len,
            mode: String::new(),
            actor: Actor::engine(),
            verdict: None,
            reason: Some(problem.to_string()),
        })?;
    }
    Ok((journal, scan))
}

/// Read the journal of `state` without writing (a missing journal reads as empty).
pub fn read(disk: &dyn Disk, state: &Dir, visit: impl FnMut(Entry)) -> Result<Scan> {
    match disk.open_read(state, JOURNAL_FILE) {
        Ok(file) => read_file(disk, state, &file, visit),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Scan::default()),
        Err(e) => Err(e).step("open journal"),
    }
}

fn read_file(disk: &dyn Disk, state: &Dir, file: &File, visit: impl FnMut(Entry)) -> Result<Scan> {
    let keys = seal::load(disk, state)?;
    scan::scan(disk, file, &keys, visit).step("read journal")
}
