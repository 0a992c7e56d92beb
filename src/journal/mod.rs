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
pub mod query;
mod row;
mod scan;
pub mod session;
mod writer;

use std::sync::Arc;

use crate::durable::{Dir, Disk, File};
use crate::error::{IoContext, Result};

pub use row::{Ledger, Op, Row, Via};
pub use scan::{Entry, Problem, Scan};
pub use writer::{Actor, Appended, Change, Journal, Pending, process_name};

/// The journal's file name inside the state directory.
pub const JOURNAL_FILE: &str = crate::durable::layout::JOURNAL;

/// Open the journal of `state` for appending (creating it durably), read it through `visit`,
/// and start the writer.
pub fn open(disk: Arc<dyn Disk>, state: &Dir, visit: impl FnMut(Entry)) -> Result<(Journal, Scan)> {
    let existed = disk.stat(state, JOURNAL_FILE).step("stat journal")?.is_some();
    let file = disk.open_write(state, JOURNAL_FILE, true, 0o644).step("open journal")?;
    if !existed {
        disk.sync_dir(state).step("fsync state directory")?;
    }
    let scan = scan::scan(&*disk, &file, visit).step("read journal")?;
    for problem in &scan.problems {
        tracing::warn!(%problem, "journal");
    }
    let journal = Journal::start(disk, file, &scan)?;
    Ok((journal, scan))
}

/// Read the journal of `state` without writing (a missing journal reads as empty).
pub fn read(disk: &dyn Disk, state: &Dir, visit: impl FnMut(Entry)) -> Result<Scan> {
    match disk.open_read(state, JOURNAL_FILE) {
        Ok(file) => read_file(disk, &file, visit),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Scan::default()),
        Err(e) => Err(e).step("open journal"),
    }
}

fn read_file(disk: &dyn Disk, file: &File, visit: impl FnMut(Entry)) -> Result<Scan> {
    scan::scan(disk, file, visit).step("read journal")
}
