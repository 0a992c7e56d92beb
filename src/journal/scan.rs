//! Reading the journal back: tolerant, streaming, and checking the hash chain as it goes.
//!
//! A line that does not parse is never fatal. The last line without a newline is `Torn` (a crash
//! during an append); any other unparseable line is `Unreadable`. Both are reported and skipped;
//! the writer starts its next row on a fresh line. Each row's `chain` must equal the sha256 of
//! the last readable row line before it (64 zeros for the first); a mismatch is `ChainBroken`,
//! which is how edits, deletions and insertions are detected. Rows without `chain` (written by
//! the reference server) are accepted before the first chained row and reported as `Unchained`
//! after it.

use std::io;

use crate::durable::{Disk, File};
use crate::sha::Sha256;

use super::row::Row;

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
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Torn { line, bytes } => {
                write!(f, "line {line}: torn last line ({bytes} bytes) skipped")
            }
            Problem::Unreadable { line, bytes, error } => {
                write!(f, "line {line}: not a journal row ({bytes} bytes, {error}); skipped")
            }
            Problem::ChainBroken { line } => {
                write!(f, "line {line}: hash chain broken (the row before it was changed, removed or inserted)")
            }
            Problem::Unchained { line } => {
                write!(f, "line {line}: row without a chain after chained rows")
            }
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
}

impl Scan {
    pub fn next_chain(&self) -> Sha256 {
        self.next_chain.unwrap_or_else(Sha256::zero)
    }
}

/// Read every line of `file`, calling `visit` for each readable row.
pub fn scan(disk: &dyn Disk, file: &File, mut visit: impl FnMut(Entry)) -> io::Result<Scan> {
    let mut scan = Scan::default();
    let mut chained = false;
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
        scan.next_chain = Some(Sha256::of(line));
        scan.last_seq = scan.last_seq.max(row.seq.unwrap_or(0));
        scan.rows += 1;
        visit(Entry { line: line_no, row });
    };

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
            } else {
                pending.extend_from_slice(&chunk[..i]);
                on_line(&pending, true, &mut scan);
                pending.clear();
            }
            chunk = &chunk[i + 1..];
        }
        pending.extend_from_slice(chunk);
    }
    scan.len = offset;
    scan.needs_newline = !pending.is_empty();
    if !pending.is_empty() {
        on_line(&pending, false, &mut scan);
    }
    Ok(scan)
}
