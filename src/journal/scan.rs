//! Reading the journal back: tolerant, streaming, and checking the hash chain as it goes.
//!
//! A line that does not parse is never fatal. The last line without a newline is `Torn` (a crash
//! during an append); any other unparseable line is `Unreadable`. Both are reported and skipped;
//! the writer starts its next row on a fresh line. Each row's `chain` must equal the sha256 of
//! the last readable row line before it (64 zeros for the first); a mismatch is `ChainBroken`,
//! which is how edits, deletions and insertions are detected. Rows without `chain` (written by
//! the reference server) are accepted before the first chained row and reported as `Unchained`
//! after it.
//!
//! With the workspace's journal key ([`Seal`]) the scan also checks each row's keyed `mac`
//! (`MacBroken`; `Unkeyed` for a row without one after keyed rows) and compares the journal with
//! its head: the journal must be at least as long as the head says, and its first `len` bytes
//! must end with the row the head vouches for (`Truncated`, `HeadMismatch`). Rows past the head
//! are the batches a crash kept it from recording; the keyed chain covers them. `tamper` rows
//! (what an earlier open found) are reported again every time.

use std::io;

use crate::durable::{Disk, File};
use crate::sha::Sha256;

use super::row::{Op, Row};
use super::seal::{Head, Keys, Seal};

/// A row read back, with where it was.
#[derive(Debug, Clone)]
pub struct Entry {
    /// 1-based line number.
    pub line: u64,
    pub row: Row,
}

/// Something wrong with a line. Problems are reported and the line skipped; never fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The last line is incomplete (a crash during an append).
    Torn { line: u64, bytes: u64 },
    /// A line that is not a journal row.
    Unreadable { line: u64, bytes: u64, error: String },
    /// The row's `chain` does not match the row before it: the journal was edited.
    ChainBroken { line: u64 },
    /// A row without `chain` after chained rows: it was inserted by something else.
    Unchained { line: u64 },
    /// The row's keyed `mac` is wrong: a row before it was changed, removed or inserted and the
    /// plain chain recomputed, or the row was not written by rwfs.
    MacBroken { line: u64 },
    /// A row without `mac` after keyed rows: not written by rwfs.
    Unkeyed { line: u64 },
    /// Keyed rows, but no key to check them with (`keys/journal.key` missing or unreadable).
    KeyMissing,
    /// Keyed rows, but no head file.
    HeadMissing,
    /// The head file does not parse or does not carry the key's tag.
    HeadForged,
    /// The journal is shorter than its head says: rows were removed from its end.
    Truncated { len: u64, head_len: u64 },
    /// The rows up to the head's length are not the ones it vouches for: the last of them was
    /// changed, or the tail was rewritten.
    HeadMismatch { head_seq: u64, head_len: u64 },
    /// A `tamper` row: what rwfs found when it opened the workspace.
    Tampered { line: u64, reason: String },
}

impl Problem {
    /// A line skipped with no row lost: torn (a crash cut an append short) or unreadable (a torn
    /// line the next append terminated, or bytes put there by something else). A row damaged
    /// or removed is never only this: the row after it reports `ChainBroken`, and the last row
    /// the head vouches for a head problem.
    pub fn is_skipped_line(&self) -> bool {
        matches!(self, Problem::Torn { .. } | Problem::Unreadable { .. })
    }

    /// Found by comparing the journal with its head: the evidence the next head overwrites,
    /// which the engine turns into a `tamper` row when it opens.
    pub fn is_head_problem(&self) -> bool {
        matches!(
            self,
            Problem::HeadMissing | Problem::HeadForged | Problem::Truncated { .. } | Problem::HeadMismatch { .. }
        )
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Torn { line, bytes } => {
                write!(
                    f,
                    "line {line}: torn last line ({bytes} bytes) skipped: an append a crash cut short (a durable row cut away would show against the journal's head)"
                )
            }
            Problem::Unreadable { line, bytes, error } => {
                write!(
                    f,
                    "line {line}: not a journal row ({bytes} bytes, {error}); skipped (a torn append a later one terminated, or bytes not written by rwfs: a row lost here would break the chain at the next row)"
                )
            }
            Problem::ChainBroken { line } => {
                write!(f, "line {line}: hash chain broken (the row before it was changed, removed or inserted)")
            }
            Problem::Unchained { line } => {
                write!(f, "line {line}: row without a chain after chained rows")
            }
            Problem::MacBroken { line } => write!(
                f,
                "line {line}: keyed chain broken (a row before it was changed, removed or inserted, or this row was not written by rwfs)"
            ),
            Problem::Unkeyed { line } => {
                write!(f, "line {line}: row without a keyed chain after keyed rows (not written by rwfs)")
            }
            Problem::KeyMissing => write!(f, "keyed rows but no journal key to check them (keys/journal.key)"),
            Problem::HeadMissing => write!(f, "keyed rows but no journal head (keys/journal.head)"),
            Problem::HeadForged => write!(f, "the journal head is unreadable or not signed by the journal key"),
            Problem::Truncated { len, head_len } => write!(
                f,
                "journal truncated: {len} bytes, its head vouches for {head_len} (rows were removed from its end)"
            ),
            Problem::HeadMismatch { head_seq, head_len } => write!(
                f,
                "the journal's first {head_len} bytes do not end with the row its head vouches for (seq {head_seq}): its last rows were changed"
            ),
            Problem::Tampered { line, reason } => write!(f, "line {line}: recorded at open: {reason}"),
        }
    }
}

/// What a scan learned about the file as a whole.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub problems: Vec<Problem>,
    /// Readable rows.
    pub rows: u64,
    /// File length in bytes.
    pub len: u64,
    /// The file does not end with a newline (a torn or unterminated last line).
    pub needs_newline: bool,
    /// The `chain` value for the next row.
    pub next_chain: Option<Sha256>,
    /// Highest `seq` seen (0 when none).
    pub last_seq: u64,
    /// Length, highest `seq` and next `chain` of the journal's complete lines (a torn tail
    /// left out): what a head written now vouches for.
    pub complete: (u64, u64, Option<Sha256>),
}

impl Scan {
    pub fn next_chain(&self) -> Sha256 {
        self.next_chain.unwrap_or_else(Sha256::zero)
    }
}

/// Read every line of `file`, calling `visit` for each readable row; `keys` (the journal key
/// and head, when the workspace has them) add the keyed checks.
pub fn scan(disk: &dyn Disk, file: &File, keys: &Keys, mut visit: impl FnMut(Entry)) -> io::Result<Scan> {
    let mut scan = Scan::default();
    let seal = keys.seal.as_ref();
    let mut chained = false;
    let mut keyed = false;
    let mut key_missing = false;
    let mut line_no = 0u64;
    let mut on_line = |line: &[u8], terminated: bool, scan: &mut Scan| {
        line_no += 1;
        if line.is_empty() {
            return;
        }
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str::<Row>(s).map_err(|e| e.to_string()));
        let row = match parsed {
            Ok(row) => row,
            Err(_) if !terminated => {
                scan.problems.push(Problem::Torn { line: line_no, bytes: line.len() as u64 });
                return;
            }
            Err(error) => {
                let bytes = line.len() as u64;
                scan.problems.push(Problem::Unreadable { line: line_no, bytes, error });
                return;
            }
        };
        match row.chain {
            Some(chain) => {
                if chain != scan.next_chain() {
                    scan.problems.push(Problem::ChainBroken { line: line_no });
                }
                chained = true;
            }
            None if chained => scan.problems.push(Problem::Unchained { line: line_no }),
            None => {}
        }
        match (row.mac, seal) {
            (Some(mac), Some(seal)) => {
                if mac != seal.row_mac(&scan.next_chain()) {
                    scan.problems.push(Problem::MacBroken { line: line_no });
                }
                keyed = true;
            }
            (Some(_), None) => {
                keyed = true;
                if !key_missing {
                    key_missing = true;
                    scan.problems.push(Problem::KeyMissing);
                }
            }
            (None, _) if keyed => scan.problems.push(Problem::Unkeyed { line: line_no }),
            (None, _) => {}
        }
        if row.op() == Op::Tamper {
            let reason = row.reason.clone().unwrap_or_default();
            scan.problems.push(Problem::Tampered { line: line_no, reason });
        }
        scan.next_chain = Some(Sha256::of(line));
        scan.last_seq = scan.last_seq.max(row.seq.unwrap_or(0));
        scan.rows += 1;
        visit(Entry { line: line_no, row });
    };
    // The state after the head's length, to compare with what the head says.
    let head = match (&keys.head, seal) {
        (Some(slots), Some(seal)) => seal.newest(slots),
        _ => None,
    };
    let mut at_head: Option<(u64, Sha256)> = None;
    let mut consumed = 0u64;
    let mut check_head = |consumed: u64, scan: &mut Scan| {
        scan.complete = (consumed, scan.last_seq, scan.next_chain);
        if head.is_some_and(|h| h.len == consumed) {
            at_head = Some((scan.last_seq, scan.next_chain()));
        }
    };
    check_head(0, &mut scan);

    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut offset = 0u64;
    loop {
        let n = disk.read_at(file, &mut buf, offset)?;
        if n == 0 {
            break;
        }
        offset += n as u64;
        let mut chunk = &buf[..n];
        while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            if pending.is_empty() {
                on_line(&chunk[..i], true, &mut scan);
                consumed += i as u64 + 1;
            } else {
                pending.extend_from_slice(&chunk[..i]);
                on_line(&pending, true, &mut scan);
                consumed += pending.len() as u64 + 1;
                pending.clear();
            }
            check_head(consumed, &mut scan);
            chunk = &chunk[i + 1..];
        }
        pending.extend_from_slice(chunk);
    }
    scan.len = offset;
    scan.needs_newline = !pending.is_empty();
    if !pending.is_empty() {
        on_line(&pending, false, &mut scan);
    }
    match (&keys.head, seal) {
        (None, Some(_)) if keyed => scan.problems.push(Problem::HeadMissing),
        (Some(_), Some(_)) if head.is_none() => scan.problems.push(Problem::HeadForged),
        _ => {}
    }
    if let Some(head) = head {
        if scan.len < head.len {
            scan.problems.push(Problem::Truncated { len: scan.len, head_len: head.len });
        } else if at_head != Some((head.seq, head.chain_next)) {
            scan.problems.push(Problem::HeadMismatch { head_seq: head.seq, head_len: head.len });
        }
    }
    Ok(scan)
}

/// Head generation `generation`, vouching for the complete lines `scan` read.
pub fn head_of(seal: &Seal, generation: u64, scan: &Scan) -> Head {
    let (len, seq, chain) = scan.complete;
    seal.head(generation, seq, len, chain.unwrap_or_else(Sha256::zero))
}
