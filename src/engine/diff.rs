//! `rwfs diff`: what changed between two versions of a file (a unified diff, or sizes and
//! digests for binary content), and what a selection of rows changed (a per-file summary like
//! `git diff --stat`).
//!
//! The line diff is Myers' O(ND) algorithm over whole lines; it never reads more than the two
//! versions asked for. Versions come from `objects/` or the tree (`Workspace::version_bytes`),
//! so a diff works whether or not an engine owns the workspace.

use serde::Serialize;

use crate::error::{Error, Reason, Result};
use crate::journal::query::{self, Selection};
use crate::sha::Sha256;

use super::{RestoreTo, Workspace};

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// Content with a NUL in its first this many bytes, or not UTF-8, is binary.
const SNIFF: usize = 8000;

/// A version of a file named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rev {
    /// A digest prefix or a time, as for a restore.
    Version(RestoreTo),
    /// The path's state after the row with this `seq`.
    Seq(u64),
}

impl Rev {
    /// `seq:N` or `#N` (or a number of fewer than 4 digits) is a seq; 4 to 64 hex digits a
    /// digest prefix; anything else a time (`parse_time` reads it).
    pub fn parse(s: &str, parse_time: impl Fn(&str) -> Result<std::time::SystemTime>) -> Result<Rev> {
        let seq = s.strip_prefix("seq:").or_else(|| s.strip_prefix('#'));
        if let Some(n) =
            seq.or_else(|| (s.len() < 4 && !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then_some(s))
        {
            return n.parse().map(Rev::Seq).map_err(|_| Reason::InvalidArgument { what: "seq (a number)" }.into());
        }
        if s.len() >= 4 && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(Rev::Version(RestoreTo::Sha(s.to_string())));
        }
        Ok(Rev::Version(RestoreTo::At(parse_time(s)?)))
    }
}

/// Two versions of one file, compared.
#[derive(Debug, Clone, Serialize)]
pub struct FileDiff {
    pub path: String,
    pub from: Option<Sha256>,
    pub to: Option<Sha256>,
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub binary: bool,
    /// The unified diff (empty when binary or equal).
    pub unified: String,
    pub added: u64,
    pub removed: u64,
}

/// One file of a `--stat` summary.
#[derive(Debug, Clone, Serialize)]
pub struct FileStat {
    pub path: String,
    /// `created`, `deleted`, `changed` or `renamed`.
    pub status: &'static str,
    /// A rename's old path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_path: Option<String>,
    pub added: u64,
    pub removed: u64,
    pub binary: bool,
    pub from: Option<Sha256>,
    pub to: Option<Sha256>,
}

impl Workspace {
    /// Compare two versions of `input` (default: the one before the last change, and the
    /// current one).
    pub fn diff(&self, input: &str, from: Option<&Rev>, to: Option<&Rev>) -> Result<FileDiff> {
        let history = self.history(input)?;
        let path = history.path.to_string();
        let state_at_seq = |seq: u64| -> Option<Sha256> {
            let mut state = history.versions.first().and_then(|v| v.entry.row.prev_sha256);
            for v in &history.versions {
                if v.entry.row.seq.is_some_and(|s| s <= seq) {
                    state = v.state;
                }
            }
            state
        };
        let pick = |rev: &Rev| -> Result<Option<Sha256>> {
            match rev {
                Rev::Seq(seq) => Ok(state_at_seq(*seq)),
                Rev::Version(to) => super::pick_version(&history, to).map(Some).map_err(|e| e.at(&path)),
            }
        };
        let to_sha = match to {
            Some(rev) => pick(rev)?,
            None => history.current,
        };
        let from_sha = match from {
            Some(rev) => pick(rev)?,
            None => {
                // The version before the last change that left `to` in place.
                let last =
                    history.versions.iter().rev().find(|v| v.entry.row.op().states_content() && v.state == to_sha);
                match last {
                    Some(v) if v.entry.row.path == path => v.entry.row.prev_sha256,
                    Some(_) => None,
                    None => to_sha,
                }
            }
        };
        let old = self.bytes_of(&path, from_sha)?;
        let new = self.bytes_of(&path, to_sha)?;
        Ok(compare(&path, from_sha, &old, to_sha, &new))
    }

    /// What the rows of `selection` changed, file by file (content as the selection left it).
    pub fn diff_stat(&self, selection: &Selection) -> Result<Vec<FileStat>> {
        let touched = query::touched(self, selection)?;
        let mut stats = Vec::new();
        for t in &touched {
            if t.before == t.after || !super::class::shown(&t.path) {
                continue;
            }
            let old = self.bytes_of(&t.path, t.before).unwrap_or_default();
            let new = self.bytes_of(&t.path, t.after).unwrap_or_default();
            let d = compare(&t.path, t.before, &old, t.after, &new);
            let status = match (t.before, t.after) {
                (None, _) => "created",
                (_, None) => "deleted",
                _ => "changed",
            };
            stats.push(FileStat {
                path: t.path.clone(),
                status,
                from_path: None,
                added: d.added,
                removed: d.removed,
                binary: d.binary,
                from: t.before,
                to: t.after,
            });
        }
        // A renamed file: its old path deleted and its new path created with the same content.
        let renamed: Vec<(String, String)> = touched
            .iter()
            .filter(|t| t.renamed && t.after.is_some() && t.before.is_none())
            .filter_map(|new| {
                touched
                    .iter()
                    .find(|old| old.renamed && old.after.is_none() && old.before == new.after)
                    .map(|old| (old.path.clone(), new.path.clone()))
            })
            .collect();
        for (old, new) in renamed {
            stats.retain(|s| s.path != old);
            if let Some(s) = stats.iter_mut().find(|s| s.path == new) {
                s.status = "renamed";
                s.from_path = Some(old);
                s.added = 0;
                s.removed = 0;
            }
        }
        Ok(stats)
    }

    /// The bytes of version `sha` of `path` (empty when absent): kept in `objects/` once it
    /// left the tree, else what the path holds now, when its digest is `sha`.
    fn bytes_of(&self, path: &str, sha: Option<Sha256>) -> Result<Vec<u8>> {
        let Some(sha) = sha else { return Ok(Vec::new()) };
        self.stored_bytes(&sha)
            .or_else(|| self.current_bytes(path).filter(|bytes| Sha256::of(bytes) == sha))
            .ok_or_else(|| Error::from(Reason::ObjectMissing { sha }).at(path))
    }

    fn stored_bytes(&self, sha: &Sha256) -> Option<Vec<u8>> {
        use std::io::Read;
        let file = self.objects().ok()??.open_object(sha).ok()??;
        let mut bytes = Vec::new();
        std::fs::File::from(file.into_fd()).read_to_end(&mut bytes).ok()?;
        (Sha256::of(&bytes) == *sha).then_some(bytes)
    }

    fn current_bytes(&self, path: &str) -> Option<Vec<u8>> {
        use std::io::Read;
        let opened = self.open_in(path, crate::durable::Scope::Workspace).ok()?;
        let mut bytes = Vec::with_capacity(opened.stat.size as usize);
        (&opened.file).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }
}

/// Compare two versions.
pub fn compare(path: &str, from: Option<Sha256>, old: &[u8], to: Option<Sha256>, new: &[u8]) -> FileDiff {
    let mut diff = FileDiff {
        path: path.to_string(),
        from,
        to,
        from_bytes: old.len() as u64,
        to_bytes: new.len() as u64,
        binary: false,
        unified: String::new(),
        added: 0,
        removed: 0,
    };
    let (Some(a), Some(b)) = (text(old), text(new)) else {
        diff.binary = true;
        return diff;
    };
    if from == to {
        return diff;
    }
    let a: Vec<&str> = a.split_inclusive('\n').collect();
    let b: Vec<&str> = b.split_inclusive('\n').collect();
    let ops = myers(&a, &b);
    diff.added = ops.iter().filter(|o| matches!(o, Edit::Insert(_))).count() as u64;
    diff.removed = ops.iter().filter(|o| matches!(o, Edit::Delete(_))).count() as u64;
    let label =
        |sha: Option<Sha256>| sha.map_or_else(|| "/dev/null".to_string(), |s| format!("{path}@{}", s.short(12)));
    diff.unified = format!("--- {}\n+++ {}\n{}", label(from), label(to), hunks(&a, &b, &ops));
    diff
}

fn text(bytes: &[u8]) -> Option<&str> {
    if bytes[..bytes.len().min(SNIFF)].contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    /// Line `i` of the old version, kept as line `j` of the new.
    Keep(usize, usize),
    Delete(usize),
    Insert(usize),
}

/// The shortest edit script from `a` to `b` (Myers 1986).
fn myers(a: &[&str], b: &[&str]) -> Vec<Edit> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (n + m) as usize;
    let offset = max as isize + 1;
    let mut v = vec![0isize; 2 * max + 3];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    'search: for d in 0..=max as isize {
        trace.push(v.clone());
        let mut k = -d;
        while k <= d {
            let idx = (k + offset) as usize;
            let mut x = if k == -d || (k != d && v[idx - 1] < v[idx + 1]) { v[idx + 1] } else { v[idx - 1] + 1 };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[idx] = x;
            if x >= n && y >= m {
                trace.push(v.clone());
                break 'search;
            }
            k += 2;
        }
    }
    // Walk back through the saved frontiers.
    let mut edits = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (0..trace.len() as isize - 1).rev() {
        let v = &trace[d as usize];
        let k = x - y;
        let idx = (k + offset) as usize;
        let prev_k = if k == -d || (k != d && v[idx - 1] < v[idx + 1]) { k + 1 } else { k - 1 };
        let prev_x = v[(prev_k + offset) as usize];
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
            edits.push(Edit::Keep(x as usize, y as usize));
        }
        if d > 0 {
            if x == prev_x {
                y -= 1;
                edits.push(Edit::Insert(y as usize));
            } else {
                x -= 1;
                edits.push(Edit::Delete(x as usize));
            }
        }
        (x, y) = (prev_x.max(0), prev_y.max(0));
    }
    edits.reverse();
    edits
}

/// The edit script as unified-diff hunks.
fn hunks(a: &[&str], b: &[&str], ops: &[Edit]) -> String {
    let mut out = String::new();
    let changed: Vec<usize> =
        ops.iter().enumerate().filter(|(_, o)| !matches!(o, Edit::Keep(..))).map(|(i, _)| i).collect();
    let mut i = 0;
    while i < changed.len() {
        let start = changed[i].saturating_sub(CONTEXT);
        let mut end = changed[i];
        while i < changed.len() && changed[i] <= end + 2 * CONTEXT {
            end = changed[i];
            i += 1;
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let slice = &ops[start..end];
        // Where the hunk starts in each version (1-based; the line before for an empty side).
        let (mut old_at, mut new_at) = (None, None);
        let (mut old_count, mut new_count) = (0, 0);
        let mut body = String::new();
        let mut line = |mark: char, text: &str| {
            body.push(mark);
            body.push_str(text);
            if !text.ends_with('\n') {
                body.push_str("\n\\ No newline at end of file\n");
            }
        };
        for op in slice {
            match *op {
                Edit::Keep(x, y) => {
                    old_at.get_or_insert(x);
                    new_at.get_or_insert(y);
                    old_count += 1;
                    new_count += 1;
                    line(' ', a[x]);
                }
                Edit::Delete(x) => {
                    old_at.get_or_insert(x);
                    old_count += 1;
                    line('-', a[x]);
                }
                Edit::Insert(y) => {
                    new_at.get_or_insert(y);
                    new_count += 1;
                    line('+', b[y]);
                }
            }
        }
        let first_old = old_at.unwrap_or_else(|| lines_before(ops, start, true));
        let first_new = new_at.unwrap_or_else(|| lines_before(ops, start, false));
        let range =
            |at: usize, count: usize| if count == 0 { format!("{at},0") } else { format!("{},{count}", at + 1) };
        out.push_str(&format!("@@ -{} +{} @@\n", range(first_old, old_count), range(first_new, new_count)));
        out.push_str(&body);
    }
    out
}

/// How many lines of one version come before edit `at`.
fn lines_before(ops: &[Edit], at: usize, old: bool) -> usize {
    ops[..at]
        .iter()
        .filter(|o| match o {
            Edit::Keep(..) => true,
            Edit::Delete(_) => old,
            Edit::Insert(_) => !old,
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(a: &[&str], b: &[&str], ops: &[Edit]) -> Vec<String> {
        ops.iter()
            .filter_map(|o| match *o {
                Edit::Keep(x, _) => Some(a[x].to_string()),
                Edit::Insert(y) => Some(b[y].to_string()),
                Edit::Delete(_) => None,
            })
            .collect()
    }

    #[test]
    fn the_script_turns_one_version_into_the_other_and_is_short() {
        let cases: &[(&str, &str)] = &[
            ("", ""),
            ("a\n", ""),
            ("", "a\n"),
            ("a\nb\nc\n", "a\nc\n"),
            ("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", "a\nB\nc\nd\ne\nf\ng\nh\nI\nj\nk\n"),
            ("x\ny\n", "y\nx\n"),
        ];
        for (old, new) in cases {
            let a: Vec<&str> = old.split_inclusive('\n').collect();
            let b: Vec<&str> = new.split_inclusive('\n').collect();
            let ops = myers(&a, &b);
            assert_eq!(apply(&a, &b, &ops).concat(), *new, "{old:?} -> {new:?}");
        }
        let d = compare("f", Some(Sha256::of(b"1")), b"a\nb\nc\n", Some(Sha256::of(b"2")), b"a\nB\nc\n");
        assert_eq!((d.added, d.removed), (1, 1));
        assert!(d.unified.contains("@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"), "{}", d.unified);
        let d = compare("f", None, b"", Some(Sha256::of(b"\0")), b"\0\x01");
        assert!(d.binary);
    }
}
