//! `rwfs diff`: what changed between two versions of a file (a unified diff, or sizes and
//! digests for binary content), and what a selection of rows changed (a per-file summary like
//! `git diff --stat`, counted without building hunks).
//!
//! The line diff is [`super::lines`] (bounded in time and linear in memory); this file finds the
//! versions, tells text from binary and renders. It never reads more than the two versions
//! asked for, and with a [`Limit`] (the page, MCP) not even those when one is bigger: the
//! answer then says so in its `note`. Versions come from `objects/` or the tree, so a diff works
//! whether or not an engine owns the workspace.

use serde::Serialize;

use super::lines::{self, LineDiff};

use crate::error::{Error, Reason, Result};
use crate::journal::query::{self, Selection};
use crate::sha::Sha256;

use super::{RestoreTo, Workspace};

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// Content with a NUL in its first this many bytes, or not UTF-8, is binary.
const SNIFF: usize = 8000;

/// The biggest version the page and MCP compare line by line (`rwfs diff` has no cap): a diff
/// bigger than this is more than a page or a model can use, and each one asked for holds both
/// versions in the daemon's memory.
pub const SHOWN_MAX: u64 = 4 << 20;

/// How big a version may be read to be compared: `None`, any size.
pub type Limit = Option<u64>;

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
    /// Why the comparison is not the whole story: a version over the caller's [`Limit`] (then
    /// nothing was compared), or the line diff cut short by its deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
    /// A version over the caller's [`Limit`]: its lines were not counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Workspace {
    /// Compare two versions of `input` (default: the one before the last change, and the
    /// current one), each read only when it is within `limit`.
    pub fn diff(&self, input: &str, from: Option<&Rev>, to: Option<&Rev>, limit: Limit) -> Result<FileDiff> {
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
        self.diff_versions(&path, from_sha, to_sha, limit)
    }

    /// Compare versions `from_sha` and `to_sha` of `path` (kept in `objects/` or in the tree;
    /// `None`: absent), each read only when it is within `limit`.
    pub fn diff_versions(
        &self,
        path: &str,
        from_sha: Option<Sha256>,
        to_sha: Option<Sha256>,
        limit: Limit,
    ) -> Result<FileDiff> {
        let (old, new) = (self.version(path, from_sha, limit)?, self.version(path, to_sha, limit)?);
        match (old, new) {
            (Content::Bytes(old), Content::Bytes(new)) => Ok(compare(path, from_sha, &old, to_sha, &new)),
            (old, new) => Ok(FileDiff {
                path: path.to_string(),
                from: from_sha,
                to: to_sha,
                from_bytes: old.len(),
                to_bytes: new.len(),
                binary: false,
                unified: String::new(),
                added: 0,
                removed: 0,
                note: limit.map(over_limit),
            }),
        }
    }

    /// What the rows of `selection` changed, file by file (content as the selection left it;
    /// lines counted where both versions are within `limit`).
    pub fn diff_stat(&self, selection: &Selection, limit: Limit) -> Result<Vec<FileStat>> {
        let touched = query::touched(self, selection)?;
        let mut stats = Vec::new();
        for t in &touched {
            if t.before == t.after || !crate::durable::layout::shown(&t.path) {
                continue;
            }
            let read = |sha| self.version(&t.path, sha, limit).unwrap_or(Content::Bytes(Vec::new()));
            let (counted, note) = match (read(t.before), read(t.after)) {
                (Content::Bytes(old), Content::Bytes(new)) => (count(&old, &new), None),
                _ => (Some((0, 0)), limit.map(over_limit)),
            };
            let status = match (t.before, t.after) {
                (None, _) => "created",
                (_, None) => "deleted",
                _ => "changed",
            };
            stats.push(FileStat {
                path: t.path.clone(),
                status,
                from_path: None,
                added: counted.map_or(0, |(added, _)| added),
                removed: counted.map_or(0, |(_, removed)| removed),
                binary: counted.is_none(),
                from: t.before,
                to: t.after,
                note,
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

    /// Version `sha` of `path` (empty when absent): kept in `objects/` once it left the tree,
    /// else what the path holds now, when its digest is `sha`; its size only when that is over
    /// `limit`.
    pub(super) fn version(&self, path: &str, sha: Option<Sha256>, limit: Limit) -> Result<Content> {
        let Some(sha) = sha else { return Ok(Content::Bytes(Vec::new())) };
        let stored = || {
            let file = self.objects().ok()??.open_object(&sha).ok()??;
            Some(std::fs::File::from(file.into_fd()))
        };
        let current = || self.open_in(path, crate::durable::Scope::Workspace).ok().map(|opened| opened.file);
        // An object is named by its digest, but may be damaged; the current file may have
        // changed since its digest was taken: either counts only when the bytes match.
        for open in [&stored as &dyn Fn() -> Option<std::fs::File>, &current] {
            let Some(file) = open() else { continue };
            let Ok(size) = file.metadata().map(|m| m.len()) else { continue };
            if limit.is_some_and(|max| size > max) {
                return Ok(Content::Over(size));
            }
            let mut bytes = Vec::with_capacity(size as usize);
            if std::io::Read::read_to_end(&mut &file, &mut bytes).is_ok() && Sha256::of(&bytes) == sha {
                return Ok(Content::Bytes(bytes));
            }
        }
        Err(Error::from(Reason::ObjectMissing { sha }).at(path))
    }
}

/// A version read for a diff.
pub(super) enum Content {
    Bytes(Vec<u8>),
    /// Over the limit: only its size.
    Over(u64),
}

impl Content {
    fn len(&self) -> u64 {
        match self {
            Content::Bytes(bytes) => bytes.len() as u64,
            Content::Over(size) => *size,
        }
    }
}

/// The note of a comparison skipped because a version is bigger than `limit`.
fn over_limit(limit: u64) -> String {
    format!(
        "not compared: a version is bigger than the {} MiB compared here; run `rwfs diff` in the workspace for the whole diff",
        limit >> 20
    )
}

/// Compare two versions (at most [`lines::DEADLINE`] of work on the line diff).
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
        note: None,
    };
    let (Some(a), Some(b)) = (text(old), text(new)) else {
        diff.binary = true;
        return diff;
    };
    if from == to {
        return diff;
    }
    let lines = LineDiff::new(a, b);
    diff.added = lines.added();
    diff.removed = lines.removed();
    let label =
        |sha: Option<Sha256>| sha.map_or_else(|| "/dev/null".to_string(), |s| format!("{path}@{}", s.short(12)));
    diff.unified = format!("--- {}\n+++ {}\n{}", label(from), label(to), lines.unified(CONTEXT));
    if lines.approximate() {
        diff.note = Some(APPROXIMATE.to_string());
    }
    diff
}

/// What [`compare`] counts, without building the diff: lines added and removed, or `None` for
/// binary content.
fn count(old: &[u8], new: &[u8]) -> Option<(u64, u64)> {
    Some(lines::count(text(old)?, text(new)?))
}

const APPROXIMATE: &str = "the line diff took longer than its deadline: it is correct but may not be the shortest";

pub(super) fn text(bytes: &[u8]) -> Option<&str> {
    if bytes[..bytes.len().min(SNIFF)].contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_diff_has_its_header_and_counts_and_binary_content_has_neither() {
        let d = compare("f", Some(Sha256::of(b"1")), b"a\nb\nc\n", Some(Sha256::of(b"2")), b"a\nB\nc\n");
        assert_eq!((d.added, d.removed), (1, 1));
        assert_eq!(count(b"a\nb\nc\n", b"a\nB\nc\n"), Some((1, 1)));
        let header = format!("--- f@{}\n+++ f@{}\n", Sha256::of(b"1").short(12), Sha256::of(b"2").short(12));
        assert_eq!(d.unified, format!("{header}@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"));
        let d = compare("f", None, b"", Some(Sha256::of(b"\0")), b"\0\x01");
        assert!(d.binary && d.unified.is_empty());
        assert_eq!(count(b"", b"\0\x01"), None);
    }
}
