//! The three-way merge a rewind does on a path someone else changed after the rewound rows.
//!
//! Taking back a selection of rows from a path is reverting a change: the selection turned
//! `before` into `after`, and since then someone else (another session, a person, a tool outside
//! rwfs) turned `after` into `now`. The rewind's result is `now` with the selection's change
//! undone — a merge with `after` as the common ancestor of `now` (their work) and `before` (the
//! rewound text), exactly as `git revert` merges:
//!
//! ```text
//!   before ──selection──▶ after ──their edits──▶ now
//!                           │
//!            merge(ancestor: after, ours: now, theirs: before)
//! ```
//!
//! The line merge itself is [`diffy`]'s. This module only bounds it and says what came of it:
//! [`Merged::Clean`] (the bytes to install), [`Merged::Conflict`] (the conflicting hunks, for a
//! person to read in the plan; nothing is installed), or [`Merged::Unmergeable`] (binary or too
//! large to merge line by line). It reads and writes nothing.

/// The largest version, in bytes, merged line by line; a larger one is left alone.
pub(crate) const MAX_MERGE_BYTES: usize = 8 << 20;

/// The most lines of conflicting hunks a plan shows per path.
const MAX_CONFLICT_LINES: usize = 60;

/// What came of merging one path.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Merged {
    /// Their edits kept, the selection's change undone: the path's new content.
    Clean(Vec<u8>),
    /// Their edits and the undo touch the same lines: the conflicting hunks, with diff3 markers
    /// naming the three versions (at most [`MAX_CONFLICT_LINES`] lines).
    Conflict(String),
    /// Not text, or too large to merge: why (a machine word).
    Unmergeable(&'static str),
}

/// Merge the undo of `after → before` into `now` (see the module docs).
pub(crate) fn revert(before: &[u8], after: &[u8], now: &[u8]) -> Merged {
    if [before, after, now].iter().any(|v| v.len() > MAX_MERGE_BYTES) {
        return Merged::Unmergeable("too_large_to_merge");
    }
    if [before, after, now].iter().any(|v| memchr::memchr(0, v).is_some()) {
        return Merged::Unmergeable("binary");
    }
    let mut options = diffy::MergeOptions::new();
    options.set_conflict_style(diffy::ConflictStyle::Diff3).set_incomplete_hunk_style(diffy::IncompleteHunkStyle::Git);
    match options.merge_bytes(after, now, before) {
        Ok(merged) => Merged::Clean(merged),
        Err(marked) => Merged::Conflict(hunks(&String::from_utf8_lossy(&marked))),
    }
}

/// The conflict regions of a merged text with diff3 markers, each under a `@@ line N` header
/// (N: its first line in the marked text), with the markers renamed after the versions they
/// stand for.
fn hunks(marked: &str) -> String {
    let mut out = Vec::new();
    let mut inside = false;
    for (n, line) in marked.lines().enumerate() {
        let renamed = match line {
            "<<<<<<< ours" => Some("<<<<<<< now (their edits since)"),
            "||||||| original" => Some("||||||| after the rewound rows"),
            "=======" if inside => Some("======="),
            ">>>>>>> theirs" => Some(">>>>>>> before the rewound rows (what the rewind restores)"),
            _ => None,
        };
        if line == "<<<<<<< ours" {
            inside = true;
            out.push(format!("@@ line {}", n + 1));
        }
        if inside {
            out.push(renamed.map_or_else(|| line.to_string(), str::to_string));
        }
        if line == ">>>>>>> theirs" {
            inside = false;
        }
        if out.len() >= MAX_CONFLICT_LINES {
            out.push("… (more conflicting lines not shown)".to_string());
            break;
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &[u8] = b"one\ntwo\nthree\nfour\nfive\n";

    #[test]
    fn an_edit_elsewhere_is_kept_and_the_selection_undone() {
        let after = b"one\nTWO (agent)\nthree\nfour\nfive\n";
        let now = b"one\nTWO (agent)\nthree\nfour\nfive (person)\n";
        assert_eq!(revert(BEFORE, after, now), Merged::Clean(b"one\ntwo\nthree\nfour\nfive (person)\n".to_vec()));
    }

    #[test]
    fn an_edit_of_the_same_line_is_a_conflict_naming_the_three_versions() {
        let after = b"one\nTWO (agent)\nthree\nfour\nfive\n";
        let now = b"one\nTWO (person)\nthree\nfour\nfive\n";
        let Merged::Conflict(hunks) = revert(BEFORE, after, now) else { panic!("a conflict") };
        assert!(hunks.starts_with("@@ line 2\n<<<<<<< now (their edits since)\nTWO (person)\n"), "{hunks}");
        assert!(hunks.contains("||||||| after the rewound rows\nTWO (agent)\n"), "{hunks}");
        assert!(hunks.ends_with("two\n>>>>>>> before the rewound rows (what the rewind restores)"), "{hunks}");
        assert!(!hunks.contains("one") && !hunks.contains("five"), "only the conflict: {hunks}");
    }

    #[test]
    fn binary_and_oversized_versions_are_not_merged() {
        assert_eq!(revert(b"a\0", b"b\0", b"c\0"), Merged::Unmergeable("binary"));
        let big = vec![b'x'; MAX_MERGE_BYTES + 1];
        assert_eq!(revert(BEFORE, &big, BEFORE), Merged::Unmergeable("too_large_to_merge"));
    }

    #[test]
    fn a_file_without_a_final_newline_merges() {
        let before = b"a\nb\nc\nd\ne";
        let after = b"a\nB\nc\nd\ne";
        let now = b"a\nB\nc\nd\ne\nf";
        assert_eq!(revert(before, after, now), Merged::Clean(b"a\nb\nc\nd\ne\nf".to_vec()));
    }
}
