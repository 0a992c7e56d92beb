//! Line diffs: which lines of one text became which lines of another, computed by `similar`
//! (Myers with its heuristics, under a deadline) — the one place rwfs compares texts line by
//! line. `rwfs diff`, `rw_diff` and the page render [`LineDiff::unified`]; `--stat` summaries
//! ask [`count`], which builds no hunk; a later `rwfs blame` or three-way merge reads
//! [`LineDiff::spans`] or [`LineDiff::origins`].
//!
//! Key types: [`LineDiff`] (the spans of one comparison) and [`Span`] (a run of lines kept, or
//! changed). Lines keep their `\n`; a last line without one is a line too.
//!
//! Bounded: the work stops at [`DEADLINE`] (then the script is still correct — applying it turns
//! one text into the other — but may not be the shortest; [`LineDiff::approximate`] says so),
//! and the memory is linear in the number of lines. Deciding whether bytes are text, and how
//! big a version the page may compare, is the caller's (`diff.rs`).

use std::ops::Range;
use std::time::{Duration, Instant};

use similar::{Algorithm, DiffOp};

/// The longest one comparison works towards the shortest script.
pub const DEADLINE: Duration = Duration::from_secs(1);

/// A run of lines: the same in both texts, or changed (`old` replaced by `new`; one of them
/// empty for a pure deletion or insertion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Span {
    Same { old: Range<usize>, new: Range<usize> },
    Changed { old: Range<usize>, new: Range<usize> },
}

impl Span {
    pub fn old_lines(&self) -> &Range<usize> {
        match self {
            Span::Same { old, .. } | Span::Changed { old, .. } => old,
        }
    }

    pub fn new_lines(&self) -> &Range<usize> {
        match self {
            Span::Same { new, .. } | Span::Changed { new, .. } => new,
        }
    }
}

/// Two texts compared line by line.
#[derive(Debug, Clone)]
pub struct LineDiff<'a> {
    old: Vec<&'a str>,
    new: Vec<&'a str>,
    spans: Vec<Span>,
    approximate: bool,
}

impl<'a> LineDiff<'a> {
    /// Compare `old` with `new`, within [`DEADLINE`].
    pub fn new(old: &'a str, new: &'a str) -> LineDiff<'a> {
        let (old, new) = (split(old), split(new));
        let (ops, approximate) = script(&old, &new);
        let spans = ops.iter().map(span).collect();
        LineDiff { old, new, spans, approximate }
    }

    /// The runs of lines, in order, covering both texts.
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// Did the deadline pass (the script may be longer than the shortest)?
    pub fn approximate(&self) -> bool {
        self.approximate
    }

    /// Lines only in the new text.
    pub fn added(&self) -> u64 {
        self.changed().map(|(_, new)| new.len() as u64).sum()
    }

    /// Lines only in the old text.
    pub fn removed(&self) -> u64 {
        self.changed().map(|(old, _)| old.len() as u64).sum()
    }

    /// For each line of the new text, the line of the old text it is (`None`: written anew) —
    /// what a blame walks back through versions.
    pub fn origins(&self) -> Vec<Option<usize>> {
        let mut out = vec![None; self.new.len()];
        for span in &self.spans {
            if let Span::Same { old, new } = span {
                for (o, n) in old.clone().zip(new.clone()) {
                    out[n] = Some(o);
                }
            }
        }
        out
    }

    /// The hunks of a unified diff with `context` lines around each change (no `---`/`+++`
    /// header): `@@ -a,b +c,d @@`, then the lines marked ` `, `-`, `+`; a line without a
    /// newline is followed by `\ No newline at end of file`.
    pub fn unified(&self, context: usize) -> String {
        let mut out = String::new();
        for hunk in self.hunks(context) {
            let (old, new) = (hunk_range(&hunk, Span::old_lines), hunk_range(&hunk, Span::new_lines));
            let header = |r: &Range<usize>| match r.len() {
                0 => format!("{},0", r.start),
                n => format!("{},{n}", r.start + 1),
            };
            out.push_str(&format!("@@ -{} +{} @@\n", header(&old), header(&new)));
            for span in &hunk {
                match span {
                    Span::Same { old, .. } => self.old[old.clone()].iter().for_each(|l| line(&mut out, ' ', l)),
                    Span::Changed { old, new } => {
                        self.old[old.clone()].iter().for_each(|l| line(&mut out, '-', l));
                        self.new[new.clone()].iter().for_each(|l| line(&mut out, '+', l));
                    }
                }
            }
        }
        out
    }

    fn changed(&self) -> impl Iterator<Item = (&Range<usize>, &Range<usize>)> {
        self.spans.iter().filter_map(|s| match s {
            Span::Changed { old, new } => Some((old, new)),
            Span::Same { .. } => None,
        })
    }

    /// The changes grouped with up to `context` kept lines around them; changes whose gap is
    /// at most `2 * context` lines share a hunk (as GNU diff and git group them).
    fn hunks(&self, context: usize) -> Vec<Vec<Span>> {
        let mut hunks: Vec<Vec<Span>> = Vec::new();
        let mut current: Vec<Span> = Vec::new();
        let last = self.spans.len().saturating_sub(1);
        for (i, span) in self.spans.iter().enumerate() {
            let Span::Same { old, new } = span else {
                current.push(span.clone());
                continue;
            };
            let len = old.len();
            let (first, final_) = (i == 0, i == last);
            // The kept lines after the previous change and before the next one.
            let lead = if first { 0 } else { len.min(context) };
            let trail = if final_ { 0 } else { len.min(context) };
            if !first && !final_ && len <= 2 * context {
                current.push(span.clone());
                continue;
            }
            if lead > 0 {
                current.push(Span::Same { old: old.start..old.start + lead, new: new.start..new.start + lead });
            }
            if !current.is_empty() {
                hunks.push(std::mem::take(&mut current));
            }
            if trail > 0 {
                current.push(Span::Same { old: old.end - trail..old.end, new: new.end - trail..new.end });
            }
        }
        if current.iter().any(|s| matches!(s, Span::Changed { .. })) {
            hunks.push(current);
        }
        hunks
    }
}

/// Lines added and removed from `old` to `new`, without building hunks or keeping spans.
pub fn count(old: &str, new: &str) -> (u64, u64) {
    let (old, new) = (split(old), split(new));
    let (ops, _) = script(&old, &new);
    ops.iter().filter(|op| !is_equal(op)).fold((0, 0), |(added, removed), op| {
        (added + op.new_range().len() as u64, removed + op.old_range().len() as u64)
    })
}

/// The edit script from `old` to `new`, and whether the deadline cut its search short.
fn script(old: &[&str], new: &[&str]) -> (Vec<DiffOp>, bool) {
    let deadline = Instant::now() + DEADLINE;
    let ops = similar::capture_diff_slices_deadline(Algorithm::Myers, old, new, Some(deadline));
    (ops, Instant::now() > deadline)
}

fn is_equal(op: &DiffOp) -> bool {
    matches!(op, DiffOp::Equal { .. })
}

fn split(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

fn span(op: &DiffOp) -> Span {
    let (old, new) = (op.old_range(), op.new_range());
    if is_equal(op) { Span::Same { old, new } } else { Span::Changed { old, new } }
}

/// The lines of one version a hunk covers.
fn hunk_range(hunk: &[Span], side: fn(&Span) -> &Range<usize>) -> Range<usize> {
    let start = hunk.first().map_or(0, |s| side(s).start);
    let end = hunk.last().map_or(start, |s| side(s).end);
    start..end
}

fn line(out: &mut String, mark: char, text: &str) {
    out.push(mark);
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push_str("\n\\ No newline at end of file\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The new text rebuilt from the old one and the spans.
    fn apply(old: &str, new: &str) -> String {
        let d = LineDiff::new(old, new);
        let (a, b) = (split(old), split(new));
        d.spans()
            .iter()
            .flat_map(|s| match s {
                Span::Same { old, .. } => a[old.clone()].to_vec(),
                Span::Changed { new, .. } => b[new.clone()].to_vec(),
            })
            .collect()
    }

    #[test]
    fn the_spans_turn_one_text_into_the_other_and_count_what_changed() {
        let cases: &[(&str, &str, (u64, u64))] = &[
            ("", "", (0, 0)),
            ("a\n", "", (0, 1)),
            ("", "a\n", (1, 0)),
            ("a\nb\nc\n", "a\nc\n", (0, 1)),
            ("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", "a\nB\nc\nd\ne\nf\ng\nh\nI\nj\nk\n", (3, 2)),
            ("x\ny\n", "y\nx\n", (1, 1)),
            ("a\nb", "a\nb\n", (1, 1)),
        ];
        for (old, new, counts) in cases {
            assert_eq!(apply(old, new), *new, "{old:?} -> {new:?}");
            let d = LineDiff::new(old, new);
            assert_eq!((d.added(), d.removed()), *counts, "{old:?} -> {new:?}");
            assert_eq!(count(old, new), *counts, "{old:?} -> {new:?}");
        }
    }

    #[test]
    fn hunks_carry_three_lines_of_context_and_merge_across_short_gaps() {
        let d = LineDiff::new("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(d.unified(3), "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
        let d = LineDiff::new("", "x\n");
        assert_eq!(d.unified(3), "@@ -0,0 +1,1 @@\n+x\n");
        let d = LineDiff::new("x", "y");
        assert_eq!(
            d.unified(3),
            "@@ -1,1 +1,1 @@\n-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n"
        );
        let old: String = (1..=30).map(|i| format!("{i}\n")).collect();
        // Changes 6 lines apart share a hunk; 7 apart do not (GNU diff -U3, git).
        let near = old.replace("\n5\n", "\nfive\n").replace("\n12\n", "\ntwelve\n");
        assert_eq!(LineDiff::new(&old, &near).unified(3).matches("@@ -").count(), 1);
        let far = old.replace("\n5\n", "\nfive\n").replace("\n13\n", "\nthirteen\n");
        let text = LineDiff::new(&old, &far).unified(3);
        assert_eq!(text.matches("@@ -").count(), 2, "{text}");
        assert!(text.starts_with("@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n@@ -10,7 +10,7 @@\n"), "{text}");
    }

    #[test]
    fn origins_name_the_old_line_each_new_line_was() {
        let d = LineDiff::new("a\nb\nc\n", "a\nx\nc\nd\n");
        assert_eq!(d.origins(), [Some(0), None, Some(2), None]);
    }

    #[test]
    fn long_and_hostile_inputs_still_give_a_correct_script() {
        // Every tenth line of 20,000 changed: the pair the old diff (a copy of its working array
        // per edit step) took 2.5 GB for; its timing is the diff benchmark's.
        let old: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let new: String =
            (0..20_000).map(|i| if i % 10 == 0 { format!("changed {i}\n") } else { format!("line {i}\n") }).collect();
        assert_eq!(count(&old, &new), (2000, 2000));
        let d = LineDiff::new(&old, &new);
        assert_eq!((d.added(), d.removed()), (2000, 2000));
        assert_eq!(d.unified(3).matches("@@ -").count(), 2000);
        // Lines from a tiny alphabet in random order: the worst case of a shortest-script search,
        // cut short by the deadline on a slow machine; whichever, the script is right.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("{}\n", x % 7)
        };
        let (old, new): (String, String) =
            ((0..20_000).map(|_| next()).collect(), (0..20_000).map(|_| next()).collect());
        assert_eq!(apply(&old, &new), new);
    }
}
