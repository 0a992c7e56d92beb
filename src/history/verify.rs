//! `rwfs verify`: is the journal intact, does the tree hold what the journal says, and does the
//! store hold what its names say?
//!
//! Three checks, all read-only and all usable while another process owns the workspace: the
//! journal's own problems from the scan (torn or unreadable lines, a broken hash chain, a broken
//! keyed chain, a journal that does not match its head: see `journal/seal.rs`); for every path,
//! the content against the last row that sets it (`drift`: edits made outside rwfs, or damage);
//! and every object in `objects/` hashed against its name (`bad_objects`; a sealed one is opened
//! with the workspace's key first, and one that does not open is listed with why).

use crate::durable::{Scope, hash_file, resolve::resolve};
use crate::error::{IoContext, Reason, Result};
use crate::journal::{Ledger, Problem};
use crate::sha::Sha256;
use crate::store::BadObject;

use super::workspace::Workspace;

/// What a path holds on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Absent,
    Sha(Sha256),
    /// Not a readable regular file (a directory now, permission denied, ...): the reason code.
    Unreadable(&'static str),
}

/// A path whose content differs from its last row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    pub path: String,
    /// What the journal says (`None`: absent).
    pub expected: Option<Sha256>,
    pub found: Found,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub rows: u64,
    pub paths: u64,
    pub problems: Vec<Problem>,
    pub drift: Vec<Drift>,
    /// Objects hashed.
    pub objects: u64,
    /// Objects whose bytes do not hash to their names.
    pub bad_objects: Vec<BadObject>,
}

impl Report {
    /// Nothing wrong: no journal problem but skipped lines (`Problem::is_skipped_line`: a crash
    /// leaves one, and no row is lost with it), no drift, no bad object.
    pub fn is_clean(&self) -> bool {
        self.problems.iter().all(Problem::is_skipped_line) && self.drift.is_empty() && self.bad_objects.is_empty()
    }
}

/// Check the journal's integrity and every journaled path's content.
pub fn verify(ws: &Workspace) -> Result<Report> {
    let mut ledger = Ledger::default();
    let scan = ws.read_journal(|entry| {
        ledger.apply(&entry.row);
    })?;
    let (objects, bad_objects) = match ws.objects()? {
        Some(store) => store.check_all()?,
        None => (0, Vec::new()),
    };
    let mut report = Report {
        rows: scan.rows,
        paths: ledger.len() as u64,
        problems: scan.problems,
        drift: Vec::new(),
        objects,
        bad_objects,
    };
    for (path, expected) in ledger.iter() {
        let path = path.to_string();
        let found = found_at(ws, &path)?;
        let agrees = match (&found, expected) {
            (Found::Absent, None) => true,
            (Found::Sha(sha), Some(expected)) => *sha == expected,
            _ => false,
        };
        if !agrees {
            report.drift.push(Drift { path, expected, found });
        }
    }
    Ok(report)
}

/// The content at a journaled path.
pub(crate) fn found_at(ws: &Workspace, path: &str) -> Result<Found> {
    let disk = ws.disk();
    let target = match resolve(disk, &ws.root, path, Scope::State, false) {
        Ok(target) => target,
        Err(e) if *e.reason() == Reason::NotFound => return Ok(Found::Absent),
        Err(e) if e.kind() == crate::error::ErrorKind::Io => return Err(e),
        Err(e) => return Ok(Found::Unreadable(e.reason().code())),
    };
    if target.stat.is_none() {
        return Ok(Found::Absent);
    }
    let file = match disk.open_read(&target.parent, &target.name) {
        Ok(file) => file,
        Err(e) => return Ok(Found::Unreadable(Reason::from_io(&e).code())),
    };
    // Recovery and verify hashing a file is no access to it.
    disk.quiet_reads(&file);
    Ok(Found::Sha(hash_file(disk, &file).step("read file")?.0))
}
