//! Candidate discovery: anchors, structural scanners and windows.
//!
//! Stage 1 runs one Aho-Corasick automaton (ASCII case-insensitive, overlapping) over the whole
//! input and turns every anchor hit into a window `[hit - before, hit + after)` for the rules
//! that anchor belongs to. Windows of one rule that overlap are merged, so dense anchors (10 MB
//! of `sk-`) cost one regex pass over the merged span rather than one per hit: the total regex
//! work is linear in the input. The structural triggers (digit runs, IBAN starts) are single
//! linear passes of their own.

use std::ops::Range;

/// Per-rule merged spans of the input to search.
#[derive(Debug, Default, Clone)]
pub struct Spans(Vec<Range<usize>>);

impl Spans {
    /// Add a window, merging it with the previous one when they touch (hits arrive in order of
    /// their end, so windows arrive almost sorted; a window starting before the last one is
    /// merged into it too).
    pub fn push(&mut self, window: Range<usize>) {
        if let Some(last) = self.0.last_mut()
            && window.start <= last.end {
                last.start = last.start.min(window.start);
                last.end = last.end.max(window.end);
                return;
            }
        self.0.push(window);
    }

    pub fn iter(&self) -> impl Iterator<Item = &Range<usize>> {
        self.0.iter()
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Maximal runs of digits and separators that hold 9 to 19 digits, bounded by non-word bytes:
/// candidates for card numbers, SSNs and phone numbers. One pass.
pub fn digit_runs(hay: &[u8]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = hay.len();
    while i < n {
        let b = hay[i];
        let starts = b.is_ascii_digit() || ((b == b'+' || b == b'(') && i + 1 < n && hay[i + 1].is_ascii_digit());
        if !starts || (i > 0 && (is_word(hay[i - 1]) || hay[i - 1] == b'.' || hay[i - 1] == b'-')) {
            i += 1;
            continue;
        }
        let start = i;
        let mut digits = 0;
        let mut end = i;
        let mut j = i;
        while j < n {
            let c = hay[j];
            if c.is_ascii_digit() {
                digits += 1;
                end = j + 1;
            } else if !matches!(c, b' ' | b'-' | b'.' | b'(' | b')' | b'+')
                || digits > 19
                // A separator must be followed by more of the number.
                || (j + 1 < n && matches!(c, b' ' | b'-' | b'.') && !matches!(hay[j + 1], b'0'..=b'9' | b'('))
            {
                break;
            }
            j += 1;
        }
        // A closing parenthesis belongs to the run only when one was opened.
        let bounded = end >= n || !is_word(hay[end]);
        if (9..=19).contains(&digits) && bounded {
            out.push(start..end);
        }
        i = j.max(i + 1);
    }
    out
}

/// Starts of possible IBANs: two capitals and two digits at a word start, with the alphanumeric
/// (and single-space grouped) run that follows, up to 34 characters without spaces.
pub fn iban_runs(hay: &[u8]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let n = hay.len();
    let mut i = 0;
    while i + 4 <= n {
        let ok = hay[i].is_ascii_uppercase()
            && hay[i + 1].is_ascii_uppercase()
            && hay[i + 2].is_ascii_digit()
            && hay[i + 3].is_ascii_digit()
            && (i == 0 || !is_word(hay[i - 1]));
        if !ok {
            i += 1;
            continue;
        }
        let mut j = i + 4;
        let mut count = 4;
        let mut end = j;
        while j < n && count < 34 {
            let c = hay[j];
            if c.is_ascii_uppercase() || c.is_ascii_digit() {
                count += 1;
                end = j + 1;
                j += 1;
            } else if c == b' ' && j + 1 < n && (hay[j + 1].is_ascii_uppercase() || hay[j + 1].is_ascii_digit()) {
                j += 1;
            } else {
                break;
            }
        }
        if count >= 15 && (end >= n || !is_word(hay[end])) {
            out.push(i..end);
        }
        i = end.max(i + 1);
    }
    out
}

/// Runs of base64 characters of at least `min` bytes that look like encoded data (several
/// character classes), for the reference's `binary_hint` family. One pass.
pub fn base64_runs(hay: &[u8], min: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = hay.len();
    let is_b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=';
    while i < n {
        if !is_b64(hay[i]) {
            i += 1;
            continue;
        }
        let start = i;
        let (mut upper, mut lower, mut digit) = (false, false, false);
        while i < n && is_b64(hay[i]) {
            upper |= hay[i].is_ascii_uppercase();
            lower |= hay[i].is_ascii_lowercase();
            digit |= hay[i].is_ascii_digit();
            i += 1;
        }
        if i - start >= min && upper && lower && digit {
            out.push(start..i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(s: &str) -> Vec<&str> {
        digit_runs(s.as_bytes()).into_iter().map(|r| &s[r]).collect()
    }

    #[test]
    fn digit_runs_find_formatted_numbers_only_at_word_boundaries() {
        assert_eq!(runs("ssn 536-22-1234."), ["536-22-1234"]);
        assert_eq!(runs("card: 4532 0151 1283 0366\n"), ["4532 0151 1283 0366"]);
        assert_eq!(runs("call +1 (415) 555-0199 now"), ["+1 (415) 555-0199"]);
        assert_eq!(runs("id x123456789 and v1.2.3"), Vec::<&str>::new());
        assert_eq!(runs("12345678"), Vec::<&str>::new(), "fewer than 9 digits");
    }

    #[test]
    fn iban_runs_take_grouped_forms() {
        let s = "pay GB82 WEST 1234 5698 7654 32 today";
        let r: Vec<_> = iban_runs(s.as_bytes()).into_iter().map(|r| &s[r]).collect();
        assert_eq!(r, ["GB82 WEST 1234 5698 7654 32"]);
    }

    #[test]
    fn spans_merge_overlapping_windows() {
        let mut spans = Spans::default();
        spans.push(0..10);
        spans.push(5..20);
        spans.push(30..40);
        spans.push(25..31);
        assert_eq!(spans.iter().cloned().collect::<Vec<_>>(), vec![0..20, 25..40]);
    }
}
