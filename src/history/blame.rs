//! `rwfs blame`: for each line of a file's current version, the journal row that introduced it
//! (its seq, time, session, process), walked forward through the kept versions with the line
//! diff of [`super::lines`] ([`LineDiff::origins`]).
//!
//! Incremental: the answer for the last version walked (which row owns each line, by journal
//! line number) is cached in `.resilient_write/index/blame/` beside the journal index, named by
//! the path's digest; the next blame starts from there and diffs only the versions written
//! since (one read of the cached version, one diff per new version). The cache is only a cache:
//! missing, unreadable or stale (its version no longer in the path's history, or the bytes it
//! names gone) and the blame is computed from the first version and the cache written again;
//! a cache that cannot be written (a reader without write access) is skipped.
//!
//! Versions retention removed cannot be read, nor the tree's own copy of the last version once
//! something outside rwfs overwrote it: lines they wrote are credited to the next version read
//! (or to no row), and the answer's `note` says so. Lines changed outside rwfs (the file differs from
//! its last row) have no row. Binary content has no lines. It does not know tool calls or
//! prompt turns (the journal does not record them yet).

use serde::{Deserialize, Serialize};

use super::Workspace;
use super::diff::{Content, text};
use super::lines::LineDiff;
use crate::error::Result;
use crate::journal::Row;
use crate::sha::Sha256;

/// Where blame caches live, inside the journal index's directory.
const CACHE_DIR: &str = "blame";

/// The cache format; another number is ignored (and rewritten).
const CACHE_VERSION: u32 = 1;

/// A file's current version, line by line, with who wrote each line.
#[derive(Debug, Clone, Serialize)]
pub struct Blame {
    pub path: String,
    /// The content blamed (`None`: the file is absent).
    pub current: Option<Sha256>,
    pub binary: bool,
    pub lines: Vec<BlameLine>,
    /// Why the answer is approximate: versions no longer kept, or changes outside rwfs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One line and the row that introduced it.
#[derive(Debug, Clone, Serialize)]
pub struct BlameLine {
    /// 1-based.
    pub line: usize,
    /// The line without its newline.
    pub text: String,
    /// `None`: written outside rwfs (or before its first row).
    pub origin: Option<Origin>,
}

/// The row a line came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    pub seq: Option<u64>,
    pub ts: String,
    pub session: Option<String>,
    pub pid: Option<u32>,
    pub comm: Option<String>,
    pub uid: Option<u32>,
    /// The version the row wrote.
    pub sha256: Option<Sha256>,
    /// The row's group: the agent's tool call the change answered (`toolu_…`), or a rewind's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl Origin {
    fn of(row: &Row) -> Origin {
        Origin {
            seq: row.seq,
            ts: row.ts.clone(),
            session: row.session.clone(),
            pid: row.pid,
            comm: row.comm.clone(),
            uid: row.uid,
            sha256: row.sha256,
            group: row.group.clone(),
        }
    }
}

/// What the cache keeps of one path: the last version walked and each of its lines' owner (the
/// journal line number of the row that introduced it; `None`: no row).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Cached {
    version: u32,
    path: String,
    /// The journal line of the last row walked, and the content it left.
    through: u64,
    state: Option<Sha256>,
    owners: Vec<Option<u64>>,
    /// Versions skipped because they were no longer kept.
    missing: u64,
}

impl Workspace {
    /// Blame the current version of `input`.
    pub fn blame(&self, input: &str) -> Result<Blame> {
        let history = self.history(input)?;
        let path = history.path.to_string();
        let rows: std::collections::BTreeMap<u64, &Row> =
            history.versions.iter().map(|v| (v.entry.line, &v.entry.row)).collect();
        let start = self.read_cache(&path).and_then(|c| {
            // The cached version must still be this path's history, and its bytes readable.
            let at = history.versions.iter().position(|v| v.entry.line == c.through && v.state == c.state)?;
            let text = self.blame_text(&path, c.state).ok()??;
            Some((at + 1, c, text))
        });
        let (from, mut walked, mut text) = match start {
            Some((from, cached, text)) => (from, cached, text),
            None => {
                let empty = Cached {
                    version: CACHE_VERSION,
                    path: path.clone(),
                    through: 0,
                    state: None,
                    owners: Vec::new(),
                    missing: 0,
                };
                (0, empty, String::new())
            }
        };
        let mut binary = false;
        for v in &history.versions[from..] {
            walked.through = v.entry.line;
            if v.state == walked.state {
                continue;
            }
            match self.blame_text(&path, v.state) {
                Ok(Some(next)) => {
                    walked.owners = step(&text, &next, &walked.owners, Some(v.entry.line));
                    walked.state = v.state;
                    text = next;
                    binary = false;
                }
                // Binary content: no lines until a text version comes again.
                Ok(None) => {
                    walked.owners.clear();
                    walked.state = v.state;
                    text.clear();
                    binary = true;
                }
                // No longer kept: its lines go to the next kept version.
                Err(_) => walked.missing += 1,
            }
        }
        self.write_cache(&walked);
        let mut outside = false;
        if history.current != walked.state {
            // Changed outside rwfs since its last row: the new lines have no row.
            match self.blame_text(&path, history.current)? {
                Some(now) => {
                    walked.owners = step(&text, &now, &walked.owners, None);
                    text = now;
                    binary = false;
                }
                None => binary = true,
            }
            outside = true;
        }
        let lines = if binary { Vec::new() } else { split_lines(&text) };
        let lines = lines
            .into_iter()
            .zip(&walked.owners)
            .enumerate()
            .map(|(i, (line, owner))| BlameLine {
                line: i + 1,
                text: line.strip_suffix('\n').unwrap_or(line).to_string(),
                origin: owner.and_then(|l| rows.get(&l)).map(|row| Origin::of(row)),
            })
            .collect();
        let mut notes = Vec::new();
        if walked.missing > 0 {
            notes.push(format!(
                "{} versions are no longer kept (removed by retention, or overwritten outside rwfs before they were): their lines are credited to the next version read",
                walked.missing
            ));
        }
        if outside {
            notes.push("the file changed outside rwfs since its last row: those lines have no row".to_string());
        }
        Ok(Blame { path, current: history.current, binary, lines, note: (!notes.is_empty()).then(|| notes.join("; ")) })
    }

    /// Version `sha` of `path` as text (`""` when absent; `None` when binary).
    fn blame_text(&self, path: &str, sha: Option<Sha256>) -> Result<Option<String>> {
        let Content::Bytes(bytes) = self.version(path, sha, None)? else { return Ok(None) };
        Ok(text(&bytes).map(str::to_string))
    }

    fn cache_file(&self, path: &str) -> Option<std::path::PathBuf> {
        let state = self.state.as_ref()?;
        let dir = crate::journal::index_dir(state).join(CACHE_DIR);
        Some(dir.join(format!("{}.json", Sha256::of(path.as_bytes()).short(64))))
    }

    fn read_cache(&self, path: &str) -> Option<Cached> {
        let bytes = std::fs::read(self.cache_file(path)?).ok()?;
        let cached: Cached = serde_json::from_slice(&bytes).ok()?;
        (cached.version == CACHE_VERSION && cached.path == path).then_some(cached)
    }

    /// Keep `walked` for the next blame; a failure only costs the next one its head start.
    fn write_cache(&self, walked: &Cached) {
        let Some(file) = self.cache_file(&walked.path) else { return };
        let Ok(bytes) = serde_json::to_vec(walked) else { return };
        let written = file.parent().map_or(Ok(()), |dir| {
            std::fs::create_dir_all(dir)?;
            // Written whole, then renamed: a reader never sees half a cache.
            let partial = file.with_extension("partial");
            std::fs::write(&partial, &bytes)?;
            std::fs::rename(&partial, &file)
        });
        if let Err(e) = written {
            tracing::debug!(error = %e, "blame cache not written");
        }
    }
}

/// The owners of `new`'s lines: those it kept from `old` keep theirs, the rest are `by`'s.
fn step(old: &str, new: &str, owners: &[Option<u64>], by: Option<u64>) -> Vec<Option<u64>> {
    LineDiff::new(old, new)
        .origins()
        .into_iter()
        .map(|o| o.and_then(|i| owners.get(i).copied()).unwrap_or(by))
        .collect()
}

/// The lines of `text`, each with its `\n` (a last line without one is a line too).
fn split_lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_keeps_its_owner_until_it_changes() {
        let v1 = "a\nb\nc\n";
        let owners = step("", v1, &[], Some(1));
        assert_eq!(owners, vec![Some(1); 3]);
        let v2 = "a\nB\nc\nd";
        let owners = step(v1, v2, &owners, Some(2));
        assert_eq!(owners, vec![Some(1), Some(2), Some(1), Some(2)]);
        let owners = step(v2, "x\na\nc\nd", &owners, None);
        assert_eq!(owners, vec![None, Some(1), Some(1), Some(2)]);
        assert_eq!(split_lines("x\na\nc\nd"), vec!["x\n", "a\n", "c\n", "d"]);
    }
}
