//! The questions asked of the journal's history — which sessions there are, what a selection
//! of rows changed and what each path held before it — behind one seam.
//!
//! Every caller (`rwfs sessions`, `rwfs rewind`, `rwfs diff`, the MCP tools) asks through the
//! functions here, given a [`RowSource`]. When the source has an index (`index.rs`, brought up
//! to date from the journal before it answers) the answer comes from it without reading the
//! whole journal; otherwise, or when the index cannot answer, from one pass over
//! `journal.jsonl`. No caller knows which: both give the same answer (`tests/journal_index.rs`).
//! The journal stays the source of truth.
//!
//! Invariants: a query never writes; rows it cannot read are skipped as the reader skips them
//! (reported by the scan); rows of the state directory (`.resilient_write/...`) are never part
//! of an answer about the workspace's files.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Reason, Result};
use crate::sha::Sha256;

use super::index::Index;
use super::row::{Ledger, Op, Row};
use super::scan::{Entry, Scan};
pub use super::summary::{Selection, SessionSummary, is_state};
use super::summary::{count_row, new_session};

/// Where rows come from: the journal, oldest first, and its index when there is one.
pub trait RowSource {
    /// Every readable row with its line number; what the reading found is in the [`Scan`].
    fn each_entry(&self, visit: &mut dyn FnMut(Entry)) -> Result<Scan>;

    /// Every readable row.
    fn each_row(&self, visit: &mut dyn FnMut(Row)) -> Result<()> {
        self.each_entry(&mut |entry| visit(entry.row)).map(drop)
    }

    /// An index of the same rows, brought up to date; `None` to read the journal.
    fn index(&self) -> Option<Index<'_>> {
        None
    }
}

/// Every session, in the order of their first row.
pub fn sessions(source: &dyn RowSource) -> Result<Vec<SessionSummary>> {
    if let Some(found) = from_index(source, |index| index.sessions()) {
        return Ok(found);
    }
    let mut order: Vec<String> = Vec::new();
    let mut found: BTreeMap<String, (SessionSummary, BTreeSet<String>)> = BTreeMap::new();
    source.each_row(&mut |row| {
        let name = row.session.clone().unwrap_or_default();
        let (summary, files) = found.entry(name.clone()).or_insert_with(|| {
            order.push(name.clone());
            (new_session(&row), BTreeSet::new())
        });
        if let Some(path) = count_row(summary, &row) {
            files.insert(path.to_string());
        }
    })?;
    Ok(order
        .into_iter()
        .filter_map(|name| found.remove(&name))
        .map(|(mut summary, files)| {
            summary.files_changed = files.len() as u64;
            summary
        })
        .collect())
}

/// The index's answer to `ask`; `None` when there is no index or it could not answer (an
/// index that failed to answer is not believed): the caller reads the journal instead.
fn from_index<T>(source: &dyn RowSource, ask: impl FnOnce(&Index<'_>) -> std::io::Result<T>) -> Option<T> {
    let index = source.index()?;
    match ask(&index) {
        Ok(answer) => Some(answer),
        Err(e) => {
            tracing::info!(error = %e, "journal index could not answer; reading the journal");
            None
        }
    }
}

/// The rows naming `path` (as their path, or as a rename's old path), oldest first.
pub fn path_rows(source: &dyn RowSource, path: &str) -> Result<Vec<Entry>> {
    if let Some(rows) = from_index(source, |index| index.path_ordinals(path).and_then(|ords| index.entries(ords))) {
        return Ok(rows);
    }
    let mut rows = Vec::new();
    source.each_entry(&mut |entry| {
        if entry.row.path == path || entry.row.from.as_deref() == Some(path) {
            rows.push(entry);
        }
    })?;
    Ok(rows)
}

/// Which rows `rwfs log` shows.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Rows whose `path` is this.
    pub path: Option<String>,
    pub session: Option<String>,
    /// Rows at or after this time (rows carry whole seconds).
    pub since: Option<std::time::SystemTime>,
    /// Rows whose `seq` is below this (the next page back of a paginated view).
    pub before: Option<u64>,
    /// Rows of these paths are left out, their refusals (`block` rows) excepted: editors' swap
    /// and backup files (policy `editor_files`) unless `rwfs log --all`; with it, rows of
    /// temporary copies renamed over their file (`crate::temporary::is_copy`: Claude Code's
    /// `x.tmp.<pid>.<hex>`, sed's `sedXXXXXX`), whose save is the rename's row.
    pub leave_out: Option<globset::GlobSet>,
}

impl Filter {
    /// Does `row` pass?
    pub fn matches(&self, row: &Row) -> bool {
        self.path.as_ref().is_none_or(|p| row.path == *p)
            && self.session.as_ref().is_none_or(|s| row.session.as_deref() == Some(s.as_str()))
            && self.since.is_none_or(|since| crate::time::parse(&row.ts).is_some_and(|ts| ts >= since))
            && self.before.is_none_or(|before| row.seq.is_some_and(|seq| seq < before))
            && !self.leave_out.as_ref().is_some_and(|g| {
                row.op() != super::Op::Block && (g.is_match(&row.path) || crate::temporary::is_copy(&row.path))
            })
    }
}

/// The row with this `seq`.
pub fn row_at_seq(source: &dyn RowSource, seq: u64) -> Result<Option<Row>> {
    if let Some(rows) = from_index(source, |index| index.seq_ordinal(seq).and_then(|ord| index.entries(ord))) {
        return Ok(rows.into_iter().next().map(|e| e.row));
    }
    let mut found = None;
    source.each_row(&mut |row| {
        if found.is_none() && row.seq == Some(seq) {
            found = Some(row);
        }
    })?;
    Ok(found)
}

/// What `rwfs rewind --turn [SESSION:]N` takes back: the rows of the agent session whose turn N
/// began last (or of SESSION) from that turn's first tool call on — the call's `tool_call` row
/// (`journal::tool_calls`) and everything after it in that session. `None` when no tool call
/// of that turn was journaled. (A read of the whole journal: rows are not indexed by turn.)
pub fn turn(source: &dyn RowSource, spec: &str) -> Result<Option<Selection>> {
    let (session, n) = match spec.rsplit_once(':') {
        Some((session, n)) => (Some(session), n),
        None => (None, spec),
    };
    let n: u64 = n.trim().parse().map_err(|_| Reason::InvalidArgument { what: "--turn: N or SESSION:N" })?;
    // Each session's first tool call of turn n, by journal order.
    let mut first: Vec<(String, u64)> = Vec::new();
    source.each_row(&mut |row| {
        if row.op() == Op::ToolCall
            && row.reason.as_deref().and_then(super::tool_calls::turn_of) == Some(n)
            && let (Some(s), Some(seq)) = (row.session.clone(), row.seq)
            && session.is_none_or(|want| want == s)
            && !first.iter().any(|(known, _)| *known == s)
        {
            first.push((s, seq));
        }
    })?;
    Ok(first.pop().map(|(s, seq)| Selection::SessionAfter(s, seq.saturating_sub(1))))
}

/// The newest rows a [`Filter`] picks, at most `n` (all when 0), in journal order; with what
/// the journal's reading found wrong and how many bytes of it the answer covers (where a
/// follower starts).
#[derive(Debug, Clone, Default)]
pub struct Tail {
    pub rows: Vec<Row>,
    pub problems: Vec<String>,
    pub len: u64,
}

/// See [`Tail`].
pub fn tail(source: &dyn RowSource, filter: &Filter, n: usize) -> Result<Tail> {
    let keep = if n == 0 { usize::MAX } else { n };
    let indexed = |index: &Index<'_>| {
        let rows = tail_indexed(index, filter, keep)?;
        Ok(Tail { rows, problems: index.problems().to_vec(), len: index.len() })
    };
    if let Some(tail) = from_index(source, indexed) {
        return Ok(tail);
    }
    let mut rows: std::collections::VecDeque<Row> = std::collections::VecDeque::new();
    let scan = source.each_entry(&mut |entry| {
        if filter.matches(&entry.row) {
            if rows.len() == keep {
                rows.pop_front();
            }
            rows.push_back(entry.row);
        }
    })?;
    Ok(Tail { rows: rows.into(), problems: scan.problems.iter().map(ToString::to_string).collect(), len: scan.len })
}

/// Pages of the newest rows, read back newest first until `keep` match.
fn tail_indexed(index: &Index<'_>, filter: &Filter, keep: usize) -> std::io::Result<Vec<Row>> {
    if let Some(since) = filter.since {
        let ords = index.since_ns(index_ns(since))?;
        let mut rows: Vec<Row> =
            index.entries(ords)?.into_iter().map(|e| e.row).filter(|r| filter.matches(r)).collect();
        let cut = rows.len().saturating_sub(keep);
        return Ok(rows.split_off(cut));
    }
    let mut page = keep.clamp(16, 4096);
    let below = match filter.before {
        Some(seq) => index.ordinal_below_seq(seq)?,
        None => u64::MAX,
    };
    loop {
        let ords = index.newest(filter.path.as_deref(), filter.session.as_deref(), below, page)?;
        let exhausted = ords.len() < page;
        let mut rows: Vec<Row> =
            index.entries(ords)?.into_iter().map(|e| e.row).filter(|r| filter.matches(r)).collect();
        if rows.len() >= keep || exhausted {
            let cut = rows.len().saturating_sub(keep);
            return Ok(rows.split_off(cut));
        }
        page = page.saturating_mul(4);
    }
}

fn index_ns(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64)
}

/// A path the selected rows changed: what it held before them and what the journal says it
/// holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touched {
    pub path: String,
    /// Before the first selected row that changed it (`None`: absent).
    pub before: Option<Sha256>,
    /// After the last row of the journal (`None`: absent).
    pub now: Option<Sha256>,
    /// After the last selected row that changed it.
    pub after: Option<Sha256>,
    /// A row outside the selection changed it after the selection's last change: its session
    /// (or `""`) and seq. Taking the selection back would undo that change too.
    pub later: Option<(String, u64)>,
    /// The selection renamed it (from or to).
    pub renamed: bool,
    /// The selection renamed something to it (a file, or a directory: see `rewind`).
    pub renamed_here: bool,
}

/// Every workspace path the selected rows changed, in path order.
pub fn touched(source: &dyn RowSource, selection: &Selection) -> Result<Vec<Touched>> {
    if let Some(rows) = from_index(source, |index| relevant_rows(index, selection)) {
        return touched_in(&Listed(rows), selection);
    }
    touched_in(source, selection)
}

/// Rows already read, oldest first.
struct Listed(Vec<Entry>);

impl RowSource for Listed {
    fn each_entry(&self, visit: &mut dyn FnMut(Entry)) -> Result<Scan> {
        self.0.iter().cloned().for_each(visit);
        Ok(Scan::default())
    }
}

/// The rows that decide what [`touched`] says about a selection: the selected ones, and every
/// row naming a path they name, a directory above one, or a path below one — repeated for
/// the paths renames among those bring in, until no new path appears. Every other row leaves
/// those paths' ledger state alone, so the answer is the same as from the whole journal.
fn relevant_rows(index: &Index<'_>, selection: &Selection) -> std::io::Result<Vec<Entry>> {
    let selected = index.selected(selection)?;
    let mut ords: BTreeSet<u64> = selected.iter().copied().collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = Vec::new();
    let names = |row: &Row| -> Vec<String> { row.from.iter().chain([&row.path]).cloned().collect() };
    for entry in index.entries(selected)? {
        todo.extend(names(&entry.row));
    }
    while let Some(path) = todo.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let mut found = index.path_ordinals(&path)?;
        found.extend(index.below_ordinals(&path)?);
        let mut above = path.as_str();
        while let Some((dir, _)) = above.rsplit_once('/') {
            found.extend(index.path_ordinals(dir)?);
            above = dir;
        }
        let new: Vec<u64> = found.into_iter().filter(|o| ords.insert(*o)).collect();
        for entry in index.entries(new)? {
            if entry.row.op() == Op::Rename {
                todo.extend(names(&entry.row).into_iter().filter(|p| !seen.contains(p)));
            }
        }
    }
    index.entries(ords)
}

fn touched_in(source: &dyn RowSource, selection: &Selection) -> Result<Vec<Touched>> {
    let mut ledger = Ledger::default();
    let mut found: BTreeMap<String, Touched> = BTreeMap::new();
    source.each_row(&mut |row| {
        let selected = selection.matches(&row);
        let before = if selected { before_row(&ledger, &row) } else { BTreeMap::new() };
        let touched = ledger.apply(&row);
        for path in touched {
            if is_state(&path) {
                continue;
            }
            let now = ledger.get(&path).flatten();
            match (selected, found.get_mut(&path)) {
                (true, Some(t)) => {
                    t.after = now;
                    t.later = None;
                    t.renamed |= row.op() == Op::Rename;
                    t.renamed_here |= row.op() == Op::Rename && row.path == path;
                }
                (true, None) => {
                    let was = before.get(&path).copied().flatten();
                    found.insert(
                        path.clone(),
                        Touched {
                            path: path.clone(),
                            before: was,
                            now,
                            after: now,
                            later: None,
                            renamed: row.op() == Op::Rename,
                            renamed_here: row.op() == Op::Rename && row.path == path,
                        },
                    );
                }
                (false, Some(t)) => {
                    if t.later.is_none() {
                        t.later = Some((row.session.clone().unwrap_or_default(), row.seq.unwrap_or(0)));
                    }
                }
                (false, None) => {}
            }
        }
    })?;
    // `now` as of the end of the journal.
    for t in found.values_mut() {
        t.now = ledger.get(&t.path).flatten();
    }
    Ok(found.into_values().collect())
}

/// What the paths `row` changes held just before it: the journal's state, or where no row
/// named a path yet, what the row itself says it found (`prev_sha256`; a rename's source held
/// what moved).
fn before_row(ledger: &Ledger, row: &Row) -> BTreeMap<String, Option<Sha256>> {
    let mut before = BTreeMap::new();
    match (row.op(), &row.from) {
        (Op::Rename, Some(from)) => {
            before.insert(from.clone(), ledger.get(from).unwrap_or(row.sha256));
            before.insert(row.path.clone(), ledger.get(&row.path).unwrap_or(row.prev_sha256));
            for root in [from.as_str(), row.path.as_str()] {
                for (path, sha) in ledger.below(root) {
                    before.insert(path, sha);
                }
            }
        }
        (op, _) if op.states_content() => {
            before.insert(row.path.clone(), row.prev_sha256);
        }
        _ => {}
    }
    before
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Via;

    struct Rows(Vec<Row>);

    impl RowSource for Rows {
        fn each_entry(&self, visit: &mut dyn FnMut(Entry)) -> Result<Scan> {
            self.0.iter().cloned().enumerate().for_each(|(i, row)| visit(Entry { line: i as u64 + 1, row }));
            Ok(Scan::default())
        }
    }

    fn row(seq: u64, session: &str, op: Op, path: &str, prev: Option<&[u8]>, now: Option<&[u8]>) -> Row {
        Row {
            bytes: 0,
            caller: "t".into(),
            chain: None,
            comm: Some("sh".into()),
            from: None,
            group: None,
            journal_id: String::new(),
            mac: None,
            mode: String::new(),
            op_field: Some(op),
            path: path.into(),
            pid: Some(1),
            prev_sha256: prev.map(Sha256::of),
            reason: None,
            seq: Some(seq),
            session: Some(session.into()),
            sha256: now.map(Sha256::of),
            ts: "2026-11-24T10:00:00Z".into(),
            uid: None,
            verdict: None,
            via: Some(Via::Fuse),
        }
    }

    #[test]
    fn a_session_is_taken_back_to_what_its_paths_held_before_it() {
        let rows = Rows(vec![
            row(1, "a", Op::Write, "x", Some(b"x0"), Some(b"x1")),
            row(2, "b", Op::Create, "y", None, Some(b"y1")),
            row(3, "a", Op::Delete, "y", Some(b"y1"), None),
            row(4, "a", Op::Create, "z", None, Some(b"z1")),
            row(5, "b", Op::Write, "z", Some(b"z1"), Some(b"z2")),
            Row { from: Some("x".into()), ..row(6, "a", Op::Rename, "w", None, Some(b"x1")) },
        ]);
        let t = touched(&rows, &Selection::Session("a".into())).unwrap();
        let by: BTreeMap<&str, &Touched> = t.iter().map(|t| (t.path.as_str(), t)).collect();
        assert_eq!(by["x"].before, Some(Sha256::of(b"x0")));
        assert_eq!(by["x"].now, None);
        assert_eq!(by["w"].before, None);
        assert_eq!(by["w"].now, Some(Sha256::of(b"x1")));
        assert_eq!(by["y"].before, Some(Sha256::of(b"y1")));
        assert_eq!(by["z"].later, Some(("b".to_string(), 5)), "b changed z after a");
        let all = touched(&rows, &Selection::AfterSeq(1)).unwrap();
        assert!(all.iter().all(|t| t.later.is_none()));
        let s = sessions(&rows).unwrap();
        assert_eq!(s.iter().map(|s| (s.name.as_str(), s.files_changed)).collect::<Vec<_>>(), [("a", 4), ("b", 2)]);
    }

    #[test]
    fn a_sessions_files_are_the_files_it_changed_not_their_temporary_copies() {
        let rows = Rows(vec![
            row(1, "a", Op::Create, "src/x.py.tmp.4242.0123456789ab", None, Some(b"x1")),
            Row {
                from: Some("src/x.py.tmp.4242.0123456789ab".into()),
                ..row(2, "a", Op::Rename, "src/x.py", None, Some(b"x1"))
            },
            row(3, "a", Op::Create, "src/.y.py.swp", None, Some(b"s")),
            row(4, "a", Op::Write, "src/y.py", Some(b"y0"), Some(b"y1")),
            row(5, "a", Op::Delete, "src/.y.py.swp", Some(b"s"), None),
        ]);
        let s = sessions(&rows).unwrap();
        assert_eq!((s[0].rows, s[0].files_changed), (5, 2), "{s:?}");
    }
}
