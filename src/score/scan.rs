//! Candidate discovery: anchors, structural scanners and windows.
//!
//! Stage 1 finds every anchor (ASCII case-insensitive, overlapping) over the whole input: by the
//! gram sieve of `grams.rs` where the CPU has AVX2, else by one Aho-Corasick DFA in [`LANES`]
//! interleaved walks ([`Anchors`]), and turns every anchor hit into a window
//! `[hit - before, hit + after)` for the rules that anchor belongs to. Windows of one rule that
//! overlap are merged, so dense anchors (10 MB of `sk-`) cost one regex pass over the merged
//! span rather than one per hit: the total regex work is linear in the input.
//!
//! The structural triggers cost far less than a byte-by-byte pass. One classification pass
//! ([`Classes`]) turns each 64-byte chunk into bitmaps of digits, capitals, newlines, dots,
//! base64 bytes and `@` (one 128-byte table lookup per 64 bytes with AVX-512 VBMI, compares with
//! AVX2, 8 bytes per `u64` elsewhere); from them come
//! the line statistics, the IBAN starts, the chunks dense enough in digits to hold a card, SSN or
//! phone number (numbers are parsed only from the first digit of each run), the chunks base64
//! blobs grow from, dotted tokens, and the email rule's one anchor, `@`, instead of the automaton
//! ([`AT`]). Runs of one byte are found by probing one byte in `k`, where `k` is the shortest run
//! worth reporting, and grown 16 bytes at a time.

use std::ops::Range;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::{AhoCorasick, AhoCorasickKind, Anchored, MatchKind, PatternID, dfa};

use super::grams::{Grams, Hit};

/// Every anchor, found ASCII case-insensitively, all overlapping occurrences: small inputs by
/// `aho-corasick`'s NFA, built in a fraction of a millisecond, until the input is large or
/// enough has been scanned to pay for a [`Stage1`] (the [`Table`], a DFA whose construction
/// was about a third of the CPU of `rwfs scan` of one small file: every command would pay it
/// for a few hundred bytes). All report the same hits in the same order.
pub struct Anchors {
    nfa: AhoCorasick,
    words: Vec<String>,
    table: OnceLock<Option<Stage1>>,
    /// Bytes scanned by the NFA so far.
    scanned: AtomicU64,
}

/// An input this large is walked by the table.
const TABLE_INPUT: usize = 16 << 10;
/// The table is built once this many bytes have been scanned without it.
const TABLE_AFTER: u64 = 1 << 20;

impl Anchors {
    pub fn new(words: &[String]) -> Result<Anchors, String> {
        if words.iter().any(|w| w.as_bytes().contains(&0)) {
            // NUL is class 0's sample in the table: it must not be an anchor byte.
            return Err("an anchor holds a NUL byte".to_string());
        }
        let nfa = AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::NoncontiguousNFA))
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(words)
            .map_err(|e| e.to_string())?;
        Ok(Anchors { nfa, words: words.to_vec(), table: OnceLock::new(), scanned: AtomicU64::new(0) })
    }

    /// Every occurrence of every anchor, in order of their end.
    pub fn find(&self, hay: &[u8]) -> Vec<Hit> {
        let table = match self.table.get() {
            Some(table) => table.as_ref(),
            None if hay.len() >= TABLE_INPUT
                || self.scanned.fetch_add(hay.len() as u64, Ordering::Relaxed) >= TABLE_AFTER =>
            {
                // A table that cannot be built (never the built-in anchors': the scorer's unit
                // test `builtin_anchor_table_builds`) leaves the NFA to do the work.
                self.table.get_or_init(|| Stage1::new(&self.words)).as_ref()
            }
            None => None,
        };
        match table {
            Some(Stage1::Grams(grams)) => grams.find(hay),
            Some(Stage1::Table(table)) => table.find(hay),
            None => self
                .nfa
                .find_overlapping_iter(hay)
                .map(|m| Hit { start: m.start(), anchor: m.pattern().as_usize() })
                .collect(),
        }
    }

    /// Has the table been built (and is it walked from now on)?
    #[cfg(test)]
    pub fn walks_table(&self) -> bool {
        matches!(self.table.get(), Some(Some(_)))
    }
}

/// What finds the anchors of large inputs: the gram sieve where the CPU has AVX2 and every
/// anchor has three bytes or more (the built-in ones do), else the automaton's table.
enum Stage1 {
    Grams(Grams),
    Table(Box<Table>),
}

impl Stage1 {
    fn new(words: &[String]) -> Option<Stage1> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && let Ok(grams) = Grams::new(words)
        {
            return Some(Stage1::Grams(grams));
        }
        Table::new(words).ok().map(|table| Stage1::Table(Box::new(table)))
    }
}

/// Every anchor in one DFA (ASCII case-insensitive, all overlapping occurrences).
///
/// The DFA is `aho-corasick`'s, copied into a table laid out for this walk: bytes that no
/// anchor tells apart (upper and lower case among them) share one class, states are numbered
/// breadth first (the shallow states, where source code keeps the walk, sit together) with the
/// match states last, so a step is a class lookup, one table load and one compare.
///
/// A DFA scan is bound by the latency of its table lookups: each byte's next state depends on
/// the previous one. [`Anchors::find`] therefore cuts the input into [`LANES`] parts and walks
/// them in lock step, one independent state per lane, so the lookups of different lanes
/// overlap in the CPU. Lane `k` starts `longest anchor - 1` bytes before its part, so no
/// occurrence that crosses a cut is lost, and reports only occurrences that end inside its
/// part, so none is reported twice.
pub struct Table {
    /// Byte → class.
    classes: [u8; 256],
    /// `trans[state + class]`: the next state. States are premultiplied by the number of
    /// classes, so a state is the offset of its row.
    trans: Vec<u32>,
    start: u32,
    /// States from this one on are match states.
    first_match: u32,
    /// Match state `first_match + j * stride` ends the anchors `ends[ends_at[j]..ends_at[j + 1]]`.
    ends_at: Vec<u32>,
    ends: Vec<u32>,
    stride: u32,
    /// Anchor → its length.
    lens: Vec<usize>,
    longest: usize,
}

/// Lanes walked side by side; more stop paying off on two-wide hardware.
const LANES: usize = 4;
/// Below this many bytes per lane one walk is as fast.
const MIN_LANE: usize = 256;
/// Bytes per lane walked between two recordings of the matches met.
const BLOCK: usize = 64;

impl Table {
    pub fn new(words: &[String]) -> Result<Table, String> {
        let dfa = dfa::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(words)
            .map_err(|e| e.to_string())?;
        let begin = dfa.start_state(Anchored::No).map_err(|e| e.to_string())?;
        let next = |sid: StateID, byte: u8| dfa.next_state(Anchored::No, sid, byte);
        // Byte classes from the anchors themselves: each byte an anchor holds (both cases of a
        // letter together) is a class, and every other byte is one more, since no anchor tells
        // those apart (each takes every state where a mismatch does). Found without walking the
        // automaton: building a scanner is part of every `rwfs scan`'s start.
        let mut classes = [0u8; 256];
        let mut samples: Vec<u8> = vec![0];
        for word in words {
            for byte in word.bytes().map(|b| b.to_ascii_lowercase()) {
                if byte != 0 && classes[usize::from(byte)] == 0 {
                    let class = u8::try_from(samples.len()).map_err(|_| "too many anchor bytes".to_string())?;
                    classes[usize::from(byte)] = class;
                    classes[usize::from(byte.to_ascii_uppercase())] = class;
                    samples.push(byte);
                }
            }
        }
        if words.iter().any(|w| w.as_bytes().contains(&0)) {
            // NUL is class 0's sample: it must not be an anchor byte.
            return Err("an anchor holds a NUL byte".to_string());
        }
        // Every state reachable from the start, breadth first (one byte of each class is
        // enough); `number[sid]` is its place.
        let mut states = vec![begin];
        let mut number: Vec<Option<usize>> = vec![None; begin.as_usize() + 1];
        number[begin.as_usize()] = Some(0);
        let mut i = 0;
        while let Some(&sid) = states.get(i) {
            for &byte in &samples {
                let to = next(sid, byte);
                if to.as_usize() >= number.len() {
                    number.resize(to.as_usize() + 1, None);
                }
                if number[to.as_usize()].is_none() {
                    number[to.as_usize()] = Some(states.len());
                    states.push(to);
                }
            }
            i += 1;
        }
        let place = |sid: StateID| number[sid.as_usize()].unwrap_or(0);
        // Plain states first, then the match states.
        let (plain, matching): (Vec<StateID>, Vec<StateID>) = states.iter().partition(|&&sid| !dfa.is_match(sid));
        let stride = samples.len();
        u32::try_from(states.len() * stride).map_err(|_| "anchor automaton too large".to_string())?;
        let mut id = vec![0u32; states.len()];
        for (n, &sid) in plain.iter().chain(&matching).enumerate() {
            id[place(sid)] = (n * stride) as u32;
        }
        let trans: Vec<u32> = plain
            .iter()
            .chain(&matching)
            .flat_map(|&sid| samples.iter().map(move |&byte| (sid, byte)))
            .map(|(sid, byte)| id[place(next(sid, byte))])
            .collect();
        // What the walk's unchecked load relies on: a row starts at every state.
        let row_at = |sid: u32| (sid as usize).is_multiple_of(stride) && sid as usize + stride <= trans.len();
        if !(trans.iter().all(|&sid| row_at(sid)) && classes.iter().all(|&c| usize::from(c) < stride)) {
            return Err("anchor automaton table out of shape".to_string());
        }
        let mut ends_at = vec![0];
        let mut ends = Vec::new();
        for &sid in &matching {
            ends.extend((0..dfa.match_len(sid)).map(|m| dfa.match_pattern(sid, m).as_u32()));
            ends_at.push(ends.len() as u32);
        }
        let lens = (0..dfa.patterns_len()).map(|p| dfa.pattern_len(PatternID::must(p))).collect();
        Ok(Table {
            classes,
            trans,
            start: id[0],
            first_match: (plain.len() * stride) as u32,
            ends_at,
            ends,
            stride: stride as u32,
            lens,
            longest: dfa.max_pattern_len(),
        })
    }

    /// Every occurrence of every anchor, in order of their end.
    pub fn find(&self, hay: &[u8]) -> Vec<Hit> {
        if hay.len() < LANES * MIN_LANE { self.walk::<1>(hay) } else { self.walk::<LANES>(hay) }
    }

    fn walk<const K: usize>(&self, hay: &[u8]) -> Vec<Hit> {
        let overlap = self.longest.saturating_sub(1);
        let part = hay.len() / K;
        // Lane k reports ends in (cut[k], cut[k + 1]] and reads from cut[k] - overlap.
        let cut = |k: usize| if k == K { hay.len() } else { k * part };
        let from: [usize; K] = std::array::from_fn(|k| cut(k).saturating_sub(overlap));
        let mut state = [self.start; K];
        let mut hits: [Vec<Hit>; K] = std::array::from_fn(|_| Vec::new());
        let common = (0..K).map(|k| cut(k + 1) - from[k]).min().unwrap_or(0);
        let lanes: [&[u8]; K] = std::array::from_fn(|k| &hay[from[k]..from[k] + common]);
        let (trans, classes, first_match) = (&self.trans[..], &self.classes, self.first_match);
        // Match states met in a block, as (state, lane, offset), recorded after the block: the
        // walk itself makes no call, so its states stay in registers.
        let mut met = [(0u32, 0usize, 0usize); BLOCK * LANES];
        for block in (0..common).step_by(BLOCK) {
            let mut n = 0;
            for i in block..(block + BLOCK).min(common) {
                for k in 0..K {
                    let at = state[k] as usize + usize::from(classes[usize::from(lanes[k][i])]);
                    // SAFETY: every state starts a row and every class is below the row
                    // length (`Table::new` checks both), so `at < trans.len()`.
                    let sid = unsafe { *trans.get_unchecked(at) };
                    state[k] = sid;
                    if sid >= first_match {
                        met[n] = (sid, k, i);
                        n += 1;
                    }
                }
            }
            for &(sid, k, i) in &met[..n] {
                if from[k] + i >= cut(k) {
                    self.record(sid, from[k] + i, &mut hits[k]);
                }
            }
        }
        for k in 0..K {
            for at in from[k] + common..cut(k + 1) {
                let sid = trans[state[k] as usize + usize::from(classes[usize::from(hay[at])])];
                state[k] = sid;
                if sid >= first_match && at >= cut(k) {
                    self.record(sid, at, &mut hits[k]);
                }
            }
        }
        let mut all = std::mem::take(&mut hits[0]);
        for lane in &mut hits[1..] {
            all.append(lane);
        }
        all
    }

    /// The anchors that match state `sid` ends at `at`.
    fn record(&self, sid: u32, at: usize, hits: &mut Vec<Hit>) {
        let j = ((sid - self.first_match) / self.stride) as usize;
        for &anchor in &self.ends[self.ends_at[j] as usize..self.ends_at[j + 1] as usize] {
            let anchor = anchor as usize;
            hits.push(Hit { start: at + 1 - self.lens[anchor], anchor });
        }
    }
}

/// Per-rule merged spans of the input to search.
#[derive(Debug, Default, Clone)]
pub struct Spans(Vec<Range<usize>>);

impl Spans {
    /// Add a window, merging it with the previous one when they touch (hits arrive in order of
    /// their end, so windows arrive almost sorted; a window starting before the last one is
    /// merged into it too).
    pub fn push(&mut self, window: Range<usize>) {
        if let Some(last) = self.0.last_mut()
            && window.start <= last.end
        {
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

/// Maximal runs of at least `step` bytes that are `member`s, looking only at every `step`-th
/// position: a run that long always contains a probed position. Cost: `n / step` probes plus
/// the runs extended over, each byte at most once (forward 16 bytes at a time).
fn probed_runs(hay: &[u8], step: usize, member: impl Fn(u8) -> bool) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut covered = 0;
    let mut i = step - 1;
    while i < hay.len() {
        if i >= covered && member(hay[i]) {
            let mut start = i;
            while start > covered && member(hay[start - 1]) {
                start -= 1;
            }
            let end = i + 1 + members_from(&hay[i + 1..], &member);
            if end - start >= step {
                out.push(start..end);
            }
            covered = end;
        }
        i += step;
    }
    out
}

/// How many bytes at the start of `bytes` are `member`s: 16 at a time while all are (a
/// comparison the compiler vectorises), then byte by byte.
fn members_from(bytes: &[u8], member: &impl Fn(u8) -> bool) -> usize {
    let mut n = 0;
    for block in bytes.chunks_exact(16) {
        if !block.iter().fold(true, |all, &b| all & member(b)) {
            break;
        }
        n += 16;
    }
    n + bytes[n..].iter().position(|&b| !member(b)).unwrap_or(bytes.len() - n)
}

fn is_number_separator(b: u8) -> bool {
    matches!(b, b' ' | b'-' | b'.' | b'(' | b')' | b'+')
}

/// Runs of digits and separators that hold 9 to 19 digits, bounded by non-word bytes:
/// candidates for card numbers, SSNs and phone numbers. Parsed only around 64-byte chunks that,
/// with a neighbour, hold at least 9 digits (see [`Classes`]).
pub fn digit_runs_of(hay: &[u8], classes: &Classes) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut covered = 0;
    for region in &classes.digit_regions {
        for k in region.start / CHUNK..region.end.div_ceil(CHUNK) {
            let carry = if k > 0 { classes.digits[k - 1] >> 63 } else { 0 };
            // The first digit of each run of digits: only there can a number start.
            let mut firsts = classes.digits[k] & !((classes.digits[k] << 1) | carry);
            while firsts != 0 {
                let i = k * CHUNK + firsts.trailing_zeros() as usize;
                firsts &= firsts - 1;
                let Some(start) = (i >= covered).then(|| number_start(hay, i, covered)).flatten() else { continue };
                let (number, stop) = parse_number(hay, start);
                out.extend(number);
                covered = stop;
            }
        }
    }
    out
}

const CHUNK: usize = 64;

/// The one-byte anchor found from a bitmap of [`Classes`] rather than by the automaton: a rule
/// whose only anchor it is (the email rule) gets its windows from the bitmap, so that a file
/// dense in `@` (10 MB of `a@a.a`) does not cost one automaton hit per byte or five.
pub const AT: u8 = b'@';

/// Every [`AT`] of the input, in order.
pub fn ats(classes: &Classes) -> impl Iterator<Item = usize> + '_ {
    classes.ats.iter().enumerate().flat_map(|(k, &word)| {
        let mut rest = word;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let at = k * CHUNK + rest.trailing_zeros() as usize;
                rest &= rest - 1;
                at
            })
        })
    })
}
const HIGH: u64 = 0x8080_8080_8080_8080;

fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// The high bit of each byte of `w` that is in `lo..=hi` (ASCII), without branches.
fn range_mask(w: u64, lo: u8, hi: u8) -> u64 {
    let w7 = w | HIGH;
    let ge_lo = w7.wrapping_sub(splat(lo)) & HIGH; // high bit kept iff byte & 0x7f >= lo
    let gt_hi = w7.wrapping_sub(splat(hi + 1)) & HIGH; // iff byte & 0x7f > hi
    ge_lo & !gt_hi & !w & HIGH
}

/// Gather the 8 high bits of `mask` (bytes in memory order) into the low 8 bits.
fn pack(mask: u64) -> u64 {
    let bits = u64::from_le(mask) >> 7;
    bits.wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// Where the structural detectors need to look, and the line statistics, from one branch-free
/// pass that classifies the input 8 bytes at a time into bitmaps of digits, capitals and
/// newlines (64 bytes per word):
/// - `digits`: the digit bitmap itself, so numbers are parsed only from their first digit;
/// - `digit_regions`: around each pair of adjacent 64-byte chunks holding at least 9 digits
///   (a number worth parsing has 9 digits within 64 bytes), widened by 64 bytes and merged;
/// - `iban_starts`: every position where two capitals are followed by two digits;
/// - `lines` (a last line without `\n` counts too), the longest line in bytes, and whether the
///   input is ASCII (then bytes are characters);
/// - the number of non-printable bytes and the first one (`binary_hint`'s dense content).
#[derive(Debug, Default)]
pub struct Classes {
    /// The digit bitmap, one word per 64-byte chunk.
    pub digits: Vec<u64>,
    /// The `.` bitmap, likewise (dotted tokens).
    pub dots: Vec<u64>,
    /// The 64-byte chunks made only of base64 bytes: every run of 127 or more holds one.
    pub base64_chunks: Vec<usize>,
    /// The [`AT`] bitmap, likewise.
    pub ats: Vec<u64>,
    pub digit_regions: Vec<Range<usize>>,
    pub iban_starts: Vec<usize>,
    pub lines: usize,
    pub longest_line: usize,
    pub ascii: bool,
    pub non_printable: usize,
    pub first_non_printable: Option<usize>,
}

/// The class bitmaps of one 64-byte chunk (bit `j` is byte `j`).
/// The classes of [`Masks`] as bits of one byte, for the AVX-512 kernel's table.
mod flag {
    pub const DIGIT: u8 = 1;
    pub const UPPER: u8 = 2;
    pub const NEWLINE: u8 = 4;
    pub const CONTROL: u8 = 8;
    pub const DOT: u8 = 16;
    pub const BASE64: u8 = 32;
    pub const AT: u8 = 64;
}

/// ASCII byte → its [`flag`]s.
const FLAGS: [u8; 128] = {
    let mut table = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let byte = b as u8;
        let mut f = 0;
        if byte.is_ascii_digit() {
            f |= flag::DIGIT | flag::BASE64;
        }
        if byte.is_ascii_uppercase() {
            f |= flag::UPPER | flag::BASE64;
        }
        if byte.is_ascii_lowercase() || matches!(byte, b'+' | b'/' | b'=') {
            f |= flag::BASE64;
        }
        if byte == b'\n' {
            f |= flag::NEWLINE;
        }
        if (byte < 0x20 && !matches!(byte, b'\t' | b'\n' | b'\r' | 0x0c)) || byte == 0x7f {
            f |= flag::CONTROL;
        }
        if byte == b'.' {
            f |= flag::DOT;
        }
        if byte == AT {
            f |= flag::AT;
        }
        table[b] = f;
        b += 1;
    }
    table
};

#[derive(Debug, Default, Clone, Copy)]
struct Masks {
    digits: u64,
    upper: u64,
    newlines: u64,
    /// Non-printable bytes: controls other than tab, newline, carriage return and form feed
    /// (NUL included), and DEL.
    controls: u64,
    dots: u64,
    /// Base64 bytes: letters, digits, `+`, `/` and `=`.
    base64: u64,
    /// `@`, the email rule's one anchor ([`AT`]).
    ats: u64,
    non_ascii: bool,
}

impl Masks {
    /// The masks of the chunk at `start` (zero-padded past the end), by `kernel`.
    #[inline(always)]
    fn at(hay: &[u8], start: usize, kernel: &impl Fn(&[u8; CHUNK]) -> Masks) -> Masks {
        if let Some(chunk) = hay.get(start..start + CHUNK).and_then(|c| <&[u8; CHUNK]>::try_from(c).ok()) {
            return kernel(chunk);
        }
        let mut buf = [0u8; CHUNK];
        let tail = &hay[start.min(hay.len())..];
        buf[..tail.len()].copy_from_slice(tail);
        kernel(&buf)
    }

    /// 32 bytes per compare, a movemask turning each compare into 32 bits (AVX2, when the CPU
    /// has it: [`Classes::of`] asks).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    fn avx2(chunk: &[u8; CHUNK]) -> Masks {
        use std::arch::x86_64::{
            __m256i, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
            _mm256_set1_epi8, _mm256_sub_epi8,
        };
        let mut masks = Masks::default();
        let mut high = 0;
        for j in 0..2 {
            // SAFETY: bytes 32 * j .. 32 * j + 32 of a 64-byte array; the load is unaligned.
            let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().add(32 * j).cast::<__m256i>()) };
            let bits = |m: __m256i| _mm256_movemask_epi8(m) as u32 as u64;
            // `lo..lo + len` of `x`, unsigned, as one signed compare: shift the range down to -128.
            let in_range_of = |x: __m256i, lo: u8, len: u8| {
                let shifted = _mm256_sub_epi8(x, _mm256_set1_epi8(lo.wrapping_add(128) as i8));
                _mm256_cmpgt_epi8(_mm256_set1_epi8((len as i8).wrapping_add(i8::MIN)), shifted)
            };
            let in_range = |lo: u8, len: u8| bits(in_range_of(v, lo, len));
            let is = |b: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b as i8));
            let digits = in_range(b'0', 10);
            masks.digits |= digits << (32 * j);
            masks.upper |= in_range(b'A', 26) << (32 * j);
            // Letters of either case in one compare (`| 0x20` folds the case), then `+ / =`.
            let letters = bits(in_range_of(_mm256_or_si256(v, _mm256_set1_epi8(0x20)), b'a', 26));
            let signs = bits(_mm256_or_si256(_mm256_or_si256(is(b'+'), is(b'/')), is(b'=')));
            masks.base64 |= (digits | letters | signs) << (32 * j);
            masks.newlines |= bits(is(b'\n')) << (32 * j);
            // Tab and newline are 9..=10, form feed and carriage return 12..=13.
            let blank = in_range(b'\t', 2) | in_range(0x0c, 2);
            masks.controls |= ((in_range(0, 32) & !blank) | bits(is(0x7f))) << (32 * j);
            masks.dots |= bits(is(b'.')) << (32 * j);
            masks.ats |= bits(is(AT)) << (32 * j);
            high |= _mm256_movemask_epi8(v);
        }
        masks.non_ascii = high != 0;
        masks
    }

    /// 64 bytes at once (AVX-512 with VBMI, when the CPU has it: [`Classes::of`] asks): one
    /// byte-table lookup ([`FLAGS`], 128 entries in two registers) gives each byte its classes
    /// as bits, and one test per class turns them into its mask; bytes above ASCII have none.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    #[inline]
    fn avx512(chunk: &[u8; CHUNK], table: &[std::arch::x86_64::__m512i; 2]) -> Masks {
        use std::arch::x86_64::{
            _mm512_loadu_si512, _mm512_movepi8_mask, _mm512_permutex2var_epi8, _mm512_set1_epi8, _mm512_test_epi8_mask,
        };
        // SAFETY: a 64-byte array; the load is unaligned.
        let v = unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) };
        let high = _mm512_movepi8_mask(v);
        // Index bit 6 picks the table's half, bit 7 is ignored: bytes above ASCII are masked.
        let flags = _mm512_permutex2var_epi8(table[0], v, table[1]);
        let class = |flag: u8| _mm512_test_epi8_mask(flags, _mm512_set1_epi8(flag as i8)) & !high;
        Masks {
            digits: class(flag::DIGIT),
            upper: class(flag::UPPER),
            newlines: class(flag::NEWLINE),
            controls: class(flag::CONTROL),
            dots: class(flag::DOT),
            base64: class(flag::BASE64),
            ats: class(flag::AT),
            non_ascii: high != 0,
        }
    }

    /// The same, 8 bytes at a time in a `u64` (SWAR): CPUs without AVX2.
    fn portable(chunk: &[u8; CHUNK]) -> Masks {
        let mut masks = Masks::default();
        let mut high = 0;
        for (j, word) in chunk.chunks_exact(8).enumerate() {
            let w = u64::from_ne_bytes(word.try_into().unwrap_or([0; 8]));
            masks.digits |= pack(range_mask(w, b'0', b'9')) << (8 * j);
            masks.upper |= pack(range_mask(w, b'A', b'Z')) << (8 * j);
            masks.newlines |= pack(range_mask(w, b'\n', b'\n')) << (8 * j);
            let blank = [b'\t', b'\n', b'\r', 0x0c].into_iter().fold(0, |m, b| m | range_mask(w, b, b));
            masks.controls |= pack((range_mask(w, 0, 31) & !blank) | range_mask(w, 0x7f, 0x7f)) << (8 * j);
            masks.dots |= pack(range_mask(w, b'.', b'.')) << (8 * j);
            let letters = range_mask(w | splat(0x20), b'a', b'z');
            let signs = [b'+', b'/', b'='].into_iter().fold(0, |m, b| m | range_mask(w, b, b));
            masks.base64 |= pack(range_mask(w, b'0', b'9') | letters | signs) << (8 * j);
            masks.ats |= pack(range_mask(w, AT, AT)) << (8 * j);
            high |= w;
        }
        masks.non_ascii = high & HIGH != 0;
        masks
    }
}

/// [`FLAGS`] in two registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn flags_avx512() -> [std::arch::x86_64::__m512i; 2] {
    use std::arch::x86_64::_mm512_loadu_si512;
    // SAFETY: bytes 0..64 and 64..128 of a 128-byte array; the loads are unaligned.
    unsafe { [_mm512_loadu_si512(FLAGS.as_ptr().cast()), _mm512_loadu_si512(FLAGS.as_ptr().add(64).cast())] }
}

impl Classes {
    pub fn of(hay: &[u8]) -> Classes {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vbmi")
            && std::arch::is_x86_feature_detected!("popcnt")
            && std::arch::is_x86_feature_detected!("bmi1")
        {
            // SAFETY: the CPU has AVX-512 (F, BW, VBMI), POPCNT and BMI1 (just asked).
            return unsafe { Classes::of_avx512(hay) };
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
            && std::arch::is_x86_feature_detected!("bmi1")
        {
            // SAFETY: the CPU has AVX2, POPCNT and BMI1 (just asked).
            return unsafe { Classes::of_avx2(hay) };
        }
        Classes::of_by(hay, &Masks::portable)
    }

    /// The bitmaps by [`Masks::avx2`]; counting and finding bits by `popcnt` and `tzcnt`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt,bmi1")]
    fn of_avx2(hay: &[u8]) -> Classes {
        Classes::of_by(hay, &|chunk| Masks::avx2(chunk))
    }

    /// The bitmaps by [`Masks::avx512`]; counting and finding bits by `popcnt` and `tzcnt`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt,bmi1")]
    fn of_avx512(hay: &[u8]) -> Classes {
        let table = flags_avx512();
        Classes::of_by(hay, &|chunk| Masks::avx512(chunk, &table))
    }

    /// The classes of `hay`, each 64-byte chunk's masks by `kernel`.
    #[inline(always)]
    fn of_by(hay: &[u8], kernel: &impl Fn(&[u8; CHUNK]) -> Masks) -> Classes {
        let chunks = hay.len().div_ceil(CHUNK);
        let mut out = Classes {
            ascii: true,
            digits: Vec::with_capacity(chunks),
            dots: Vec::with_capacity(chunks),
            ats: Vec::with_capacity(chunks),
            ..Classes::default()
        };
        let mut line_start = 0;
        let mut prev_count = 0;
        let mut cur = Masks::at(hay, 0, kernel);
        for k in 0..chunks {
            let next = if k + 1 < chunks { Masks::at(hay, (k + 1) * CHUNK, kernel) } else { Masks::default() };
            // Two capitals then two digits, reading up to 3 bits into the next chunk.
            let upper1 = (cur.upper >> 1) | (next.upper << 63);
            let digits2 = (cur.digits >> 2) | (next.digits << 62);
            let digits3 = (cur.digits >> 3) | (next.digits << 61);
            let mut sig = cur.upper & upper1 & digits2 & digits3;
            while sig != 0 {
                let i = k * CHUNK + sig.trailing_zeros() as usize;
                if i < hay.len() {
                    out.iban_starts.push(i);
                }
                sig &= sig - 1;
            }
            out.digits.push(cur.digits);
            out.dots.push(cur.dots);
            out.ats.push(cur.ats);
            if cur.base64 == u64::MAX {
                out.base64_chunks.push(k);
            }
            let count = cur.digits.count_ones();
            if prev_count + count >= 9 {
                let region = (k * CHUNK).saturating_sub(2 * CHUNK)..((k + 2) * CHUNK).min(hay.len());
                match out.digit_regions.last_mut() {
                    Some(last) if region.start <= last.end => last.end = last.end.max(region.end),
                    _ => out.digit_regions.push(region),
                }
            }
            let mut newlines = cur.newlines;
            out.lines += newlines.count_ones() as usize;
            if newlines != 0 {
                // Lines that end inside the chunk but for the first are shorter than a chunk:
                // they matter only while no line has been that long.
                let first = k * CHUNK + newlines.trailing_zeros() as usize;
                out.longest_line = out.longest_line.max(first - line_start);
                line_start = first + 1;
                newlines &= newlines - 1;
                while out.longest_line < CHUNK && newlines != 0 {
                    let at = k * CHUNK + newlines.trailing_zeros() as usize;
                    out.longest_line = out.longest_line.max(at - line_start);
                    line_start = at + 1;
                    newlines &= newlines - 1;
                }
                if newlines != 0 {
                    // The start of the chunk's last line.
                    line_start = k * CHUNK + (CHUNK - newlines.leading_zeros() as usize);
                }
            }
            out.ascii &= !cur.non_ascii;
            // The zero padding past the end is not content.
            let tail = hay.len() - k * CHUNK;
            let controls = if tail < CHUNK { cur.controls & ((1u64 << tail) - 1) } else { cur.controls };
            if controls != 0 && out.first_non_printable.is_none() {
                out.first_non_printable = Some(k * CHUNK + controls.trailing_zeros() as usize);
            }
            out.non_printable += controls.count_ones() as usize;
            prev_count = count;
            cur = next;
        }
        if line_start < hay.len() {
            out.lines += 1;
            out.longest_line = out.longest_line.max(hay.len() - line_start);
        }
        out
    }
}

/// Where a number whose first digit is at `i` starts: at a `+` or `(` just before it, else at
/// the digit, never before `floor`, and only after a byte that cannot continue a word, version
/// or range (`x1`, `1.2`, `3-4`).
fn number_start(hay: &[u8], i: usize, floor: usize) -> Option<usize> {
    let free = |at: usize| at == 0 || !(is_word(hay[at - 1]) || matches!(hay[at - 1], b'.' | b'-'));
    if i > floor && matches!(hay[i - 1], b'+' | b'(') && free(i - 1) { Some(i - 1) } else { free(i).then_some(i) }
}

/// Parse the number starting at `start`: digits with at most two separators in a row, each
/// followed by more of the number. Returns the number if it holds 9 to 19 digits and ends at a
/// word boundary, and where parsing stopped.
fn parse_number(hay: &[u8], start: usize) -> (Option<Range<usize>>, usize) {
    let n = hay.len();
    let (mut digits, mut separators) = (0, 0);
    let mut end = start;
    let mut j = start;
    while j < n {
        let c = hay[j];
        if c.is_ascii_digit() {
            digits += 1;
            separators = 0;
            end = j + 1;
        } else if !is_number_separator(c)
            || digits > 19
            || {
                separators += 1;
                separators > 2
            }
            || (j + 1 < n && matches!(c, b' ' | b'-' | b'.') && !matches!(hay[j + 1], b'0'..=b'9' | b'('))
        {
            break;
        }
        j += 1;
    }
    let bounded = end >= n || !is_word(hay[end]);
    (((9..=19).contains(&digits) && bounded).then_some(start..end), j.max(start + 1))
}

fn is_iban_byte(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

/// Possible IBANs: two capitals and two digits at a word start, with the alphanumeric (and
/// single-space grouped) run that follows, 15 to 34 characters without the spaces. Parsed only
/// at the starts [`Classes`] finds.
pub fn iban_runs_of(hay: &[u8], classes: &Classes) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for &start in &classes.iban_starts {
        if out.last().is_some_and(|last| start < last.end) {
            continue;
        }
        out.extend(iban_runs_in(hay, start..start + 1));
    }
    out
}

/// [`iban_runs`] starting inside `region`.
fn iban_runs_in(hay: &[u8], region: Range<usize>) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let n = hay.len();
    let mut i = region.start;
    while i < region.end && i + 4 <= n {
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
            if is_iban_byte(c) {
                count += 1;
                end = j + 1;
                j += 1;
            } else if c == b' ' && j + 1 < n && is_iban_byte(hay[j + 1]) {
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

fn is_base64_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'='
}

/// Runs of base64 characters of at least `min` bytes that look like encoded data (upper and
/// lower case and digits), for the reference's `binary_hint` family. A run of `min` (at least
/// 127) bytes holds a 64-byte chunk of base64 bytes only, which [`Classes`] lists: runs are
/// grown from those chunks alone, over the chunks that follow in the list at 64 bytes a step.
pub fn base64_runs(hay: &[u8], classes: &Classes, min: usize) -> Vec<Range<usize>> {
    assert!(min >= 2 * CHUNK - 1, "a run shorter than 127 bytes may hold no whole chunk");
    let member = |i: usize| is_base64_byte(hay[i]);
    let chunks = &classes.base64_chunks;
    let mut runs = Vec::new();
    let mut next = 0;
    while let Some(&k) = chunks.get(next) {
        next += 1;
        let mut end = (k + 1) * CHUNK;
        while chunks.get(next) == Some(&(end / CHUNK)) {
            end += CHUNK;
            next += 1;
        }
        while end < hay.len() && member(end) {
            end += 1;
        }
        let mut start = k * CHUNK;
        while start > 0 && member(start - 1) {
            start -= 1;
        }
        runs.push(start..end);
    }
    runs.into_iter()
        .filter(|r| {
            let run = &hay[r.clone()];
            r.len() >= min
                && run.iter().any(u8::is_ascii_uppercase)
                && run.iter().any(u8::is_ascii_lowercase)
                && run.iter().any(u8::is_ascii_digit)
        })
        .collect()
}

fn is_token_byte(b: u8) -> bool {
    is_word(b) || b == b'-'
}

/// The dots that end the first part of a dotted token: followed by `middle.0..=middle.1` bytes
/// of `[A-Za-z0-9_-]` and another dot, and preceded by at least `first` such bytes. Found with
/// the dot bitmap of [`Classes`]: a dot with another dot `middle` bytes further is a shift and
/// an AND per 64 bytes, and only those few are checked byte by byte, so that source code, full
/// of dots, costs little.
pub fn dotted(hay: &[u8], classes: &Classes, first: usize, middle: (usize, usize)) -> Vec<usize> {
    debug_assert!(middle.1 + 1 < CHUNK, "a middle part shorter than 63 bytes");
    let mut out = Vec::new();
    let words = &classes.dots;
    for (k, &word) in words.iter().enumerate() {
        let next = words.get(k + 1).copied().unwrap_or(0);
        // Bit j: a dot at j + s (s < 64).
        let ahead = |s: usize| (word >> s) | (next << (CHUNK - s));
        let mut paired = word & (middle.0 + 1..=middle.1 + 1).fold(0, |m, s| m | ahead(s));
        while paired != 0 {
            let dot = k * CHUNK + paired.trailing_zeros() as usize;
            paired &= paired - 1;
            let Some(len) = (middle.0..=middle.1).find(|&m| hay.get(dot + 1 + m) == Some(&b'.')) else { continue };
            if dot >= first
                && hay[dot + 1..dot + 1 + len].iter().all(|&b| is_token_byte(b))
                && hay[dot - first..dot].iter().all(|&b| is_token_byte(b))
            {
                out.push(dot);
            }
        }
    }
    out
}

/// Runs of at least `min` copies of `byte` (case-sensitive), for tokens that start with one.
pub fn byte_runs(hay: &[u8], byte: u8, min: usize) -> Vec<Range<usize>> {
    probed_runs(hay, min, |b| b == byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digit_runs(hay: &[u8]) -> Vec<Range<usize>> {
        digit_runs_of(hay, &Classes::of(hay))
    }

    fn iban_runs(hay: &[u8]) -> Vec<Range<usize>> {
        iban_runs_of(hay, &Classes::of(hay))
    }

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

    /// The definition of [`digit_runs_of`], byte by byte over the whole input.
    fn digit_runs_by_bytes(hay: &[u8]) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < hay.len() {
            let b = hay[i];
            let opens = matches!(b, b'+' | b'(') && hay.get(i + 1).is_some_and(u8::is_ascii_digit);
            let free = i == 0 || !(is_word(hay[i - 1]) || matches!(hay[i - 1], b'.' | b'-'));
            if !(b.is_ascii_digit() || opens) || !free {
                i += 1;
                continue;
            }
            let (number, stop) = parse_number(hay, i);
            out.extend(number);
            i = stop;
        }
        out
    }

    #[test]
    fn digit_runs_from_bitmaps_match_a_byte_by_byte_reading() {
        let mut rng = super::super::sample::Rng::new(7);
        for round in 0..3000 {
            let len = rng.below(400);
            let alphabet: &[u8] = if round % 2 == 0 { b"0123456789 -.()+x\n" } else { b"0123456789012345 -(+a" };
            let text: Vec<u8> = (0..len).map(|_| alphabet[rng.below(alphabet.len())]).collect();
            assert_eq!(digit_runs(&text), digit_runs_by_bytes(&text), "{:?}", String::from_utf8_lossy(&text));
        }
    }

    #[test]
    fn iban_runs_take_grouped_forms() {
        let s = "pay GB82 WEST 1234 5698 7654 32 today";
        let r: Vec<_> = iban_runs(s.as_bytes()).into_iter().map(|r| &s[r]).collect();
        assert_eq!(r, ["GB82 WEST 1234 5698 7654 32"]);
    }

    #[test]
    fn classes_bitmaps_match_a_byte_by_byte_reading() {
        let mut rng = super::super::sample::Rng::new(3);
        for len in [0, 1, 7, 63, 64, 65, 130, 1000] {
            let text: Vec<u8> = (0..len).map(|_| b"AZ09x .-(Q5"[rng.below(11)]).chain(std::iter::once(0xff)).collect();
            let classes = Classes::of(&text);
            let want: Vec<usize> = (0..text.len().saturating_sub(3))
                .filter(|&i| {
                    text[i].is_ascii_uppercase()
                        && text[i + 1].is_ascii_uppercase()
                        && text[i + 2].is_ascii_digit()
                        && text[i + 3].is_ascii_digit()
                })
                .collect();
            assert_eq!(classes.iban_starts, want, "len {len}");
        }
        assert_eq!(pack(range_mask(u64::from_ne_bytes(*b"a1b2c3d4"), b'0', b'9')), 0b1010_1010);
    }

    #[test]
    fn lines_and_the_longest_line_match_a_byte_by_byte_reading() {
        let mut rng = super::super::sample::Rng::new(5);
        for round in 0..300 {
            // Lines of a few bytes to a few hundred, so that chunks hold many or none.
            let longest = [3, 40, 70, 300][round % 4];
            let mut text = Vec::new();
            for _ in 0..rng.below(40) {
                text.extend(std::iter::repeat_n(b'x', rng.below(longest + 1)));
                text.push(b'\n');
            }
            text.extend(std::iter::repeat_n(b'y', rng.below(3) * rng.below(longest + 1)));
            let classes = Classes::of(&text);
            let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
            let want_lines = lines.len() - usize::from(lines.last().is_some_and(|l| l.is_empty()));
            let want_longest = lines.iter().map(|l| l.len()).max().unwrap_or(0);
            assert_eq!((classes.lines, classes.longest_line), (want_lines, want_longest), "round {round}");
        }
    }

    #[test]
    fn masks_kernels_agree_with_the_definition() {
        let mut rng = super::super::sample::Rng::new(11);
        for round in 0..2000 {
            let chunk: [u8; CHUNK] = std::array::from_fn(|_| {
                if round % 2 == 0 {
                    rng.below(256) as u8
                } else {
                    b"09AZaz@[/:.\n\t\r\x0b\x0c\x00\x1f\x7f\x80\xff+=`{\xc1\xe1"[rng.below(27)]
                }
            });
            let bit = |f: fn(&u8) -> bool| chunk.iter().enumerate().fold(0u64, |m, (j, b)| m | (u64::from(f(b)) << j));
            let control = |b: &u8| (*b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c)) || *b == 0x7f;
            let want = (
                bit(u8::is_ascii_digit),
                bit(u8::is_ascii_uppercase),
                bit(|b| *b == b'\n'),
                bit(control),
                bit(|b| *b == b'.'),
                bit(|b| is_base64_byte(*b)),
                bit(|b| *b == AT),
                !chunk.is_ascii(),
            );
            let mut kernels = vec![Masks::portable(&chunk)];
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2.
                kernels.push(unsafe { Masks::avx2(&chunk) });
            }
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vbmi")
            {
                // SAFETY: the CPU has AVX-512 (F, BW, VBMI).
                kernels.push(unsafe { Masks::avx512(&chunk, &flags_avx512()) });
            }
            for got in kernels {
                let got =
                    (got.digits, got.upper, got.newlines, got.controls, got.dots, got.base64, got.ats, got.non_ascii);
                assert_eq!(got, want, "{chunk:?}");
            }
        }
    }

    /// The definition of [`base64_runs`]: every maximal run of base64 bytes, byte by byte.
    fn base64_runs_by_bytes(hay: &[u8], min: usize) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < hay.len() {
            let start = i;
            while i < hay.len() && is_base64_byte(hay[i]) {
                i += 1;
            }
            let run = &hay[start..i];
            if run.len() >= min
                && run.iter().any(u8::is_ascii_uppercase)
                && run.iter().any(u8::is_ascii_lowercase)
                && run.iter().any(u8::is_ascii_digit)
            {
                out.push(start..i);
            }
            i = i.max(start + 1);
        }
        out
    }

    #[test]
    fn base64_runs_from_whole_chunks_match_a_byte_by_byte_reading() {
        let mut rng = super::super::sample::Rng::new(13);
        for round in 0..400 {
            // Long runs broken now and then, at every offset relative to the chunks.
            let breaks = [3, 40, 150, 300][round % 4];
            let text: Vec<u8> = (0..rng.below(2000))
                .map(|_| if rng.below(breaks) == 0 { b" .-_\n\xff"[rng.below(6)] } else { b"aZ09+/="[rng.below(7)] })
                .collect();
            for min in [127, 200] {
                let got = base64_runs(&text, &Classes::of(&text), min);
                assert_eq!(got, base64_runs_by_bytes(&text, min), "min {min}: {:?}", String::from_utf8_lossy(&text));
            }
        }
    }

    #[test]
    fn ats_are_every_at_sign_in_order() {
        for text in ["", "@", "a@b.c @@", &"x@".repeat(100), &format!("{}@", "y".repeat(127))] {
            let want: Vec<usize> = text.bytes().enumerate().filter(|(_, b)| *b == AT).map(|(i, _)| i).collect();
            assert_eq!(ats(&Classes::of(text.as_bytes())).collect::<Vec<_>>(), want, "{text:?}");
        }
    }

    #[test]
    fn dense_windows_keep_every_candidate() {
        // A number placed at every offset in a long line of text is still found.
        let number = "4532 0151 1283 0366";
        for offset in 0..80 {
            let text = format!("{} {number} {}", "x".repeat(offset), "y".repeat(100));
            assert_eq!(runs(&text), [number], "offset {offset}");
        }
        let iban = "GB82 WEST 1234 5698 7654 32";
        for offset in 0..80 {
            let text = format!("{}{iban} {}", "z ".repeat(offset / 2), "y".repeat(100));
            let r: Vec<_> = iban_runs(text.as_bytes()).into_iter().map(|r| &text[r]).collect();
            assert_eq!(r, [iban], "offset {offset}");
        }
    }

    #[test]
    fn probing_finds_every_long_enough_run() {
        // Runs of every length at every offset: probing must agree with a full pass.
        for len in 1..40 {
            for offset in 0..20 {
                let mut hay = vec![b'.'; offset];
                hay.extend(std::iter::repeat_n(b'A', len));
                hay.extend(b"..........");
                let found = byte_runs(&hay, b'A', 9);
                let expected: Vec<Range<usize>> = (len >= 9).then_some(offset..offset + len).into_iter().collect();
                assert_eq!(found, expected, "len {len} offset {offset}");
            }
        }
    }

    #[test]
    fn dotted_finds_every_first_dot_of_a_three_part_token() {
        let mut rng = super::super::sample::Rng::new(17);
        for round in 0..3000 {
            let alphabet: &[u8] = if round % 2 == 0 { b"aZ9_.-" } else { b"aZ9_.-.. \n(" };
            let text: Vec<u8> = (0..rng.below(300)).map(|_| alphabet[rng.below(alphabet.len())]).collect();
            let token = |r: std::ops::Range<usize>| text[r].iter().all(|&b| is_token_byte(b));
            let want: Vec<usize> = (0..text.len())
                .filter(|&d| {
                    text[d] == b'.'
                        && d >= 5
                        && token(d - 5..d)
                        && (2..=3)
                            .find(|&m| text.get(d + 1 + m) == Some(&b'.'))
                            .is_some_and(|m| token(d + 1..d + 1 + m))
                })
                .collect();
            assert_eq!(dotted(&text, &Classes::of(&text), 5, (2, 3)), want, "{:?}", String::from_utf8_lossy(&text));
        }
    }

    #[test]
    fn classes_count_non_printable_bytes_but_not_the_padding() {
        for len in [0, 1, 63, 64, 65, 200] {
            let text: Vec<u8> = (0..len).map(|i| if i % 3 == 0 { 0 } else { b'\t' + (i % 2) as u8 * 0x76 }).collect();
            let want = text.iter().filter(|&&b| b == 0 || b == 0x7f).count();
            let classes = Classes::of(&text);
            assert_eq!(classes.non_printable, want, "len {len}");
            assert_eq!(classes.first_non_printable, (len > 0).then_some(0), "len {len}");
        }
    }

    #[test]
    fn lanes_find_exactly_the_overlapping_matches() {
        let words: Vec<String> =
            ["sk-", "SK-PROJ", "ghp_", "token", "ok", "k", "tokentokentoken"].map(String::from).to_vec();
        let anchors = Anchors::new(&words).expect("anchors");
        let table = Table::new(&words).expect("table");
        let oracle = aho_corasick::AhoCorasick::builder().ascii_case_insensitive(true).build(&words).expect("oracle");
        let mut rng = super::super::sample::Rng::new(5);
        for (round, len) in
            [0, 1, 100, LANES * MIN_LANE - 1, LANES * MIN_LANE, LANES * MIN_LANE + 3, 50_000].into_iter().enumerate()
        {
            let mut hay: Vec<u8> = (0..len).map(|_| b"skSK-proghp_tken .x"[rng.below(19)]).collect();
            // Anchors across every cut between lanes, at every offset over the rounds.
            for k in 1..LANES {
                let at = (k * (len / LANES)).saturating_sub(round * 2 + 1);
                if at + 15 <= len {
                    hay[at..at + 15].copy_from_slice(b"tokentokentoken");
                }
            }
            let mut want: Vec<(usize, usize)> =
                oracle.find_overlapping_iter(&hay).map(|m| (m.end(), m.start())).collect();
            want.sort();
            // The NFA below the table's sizes, the table above them, and the table alone.
            for (how, hits) in [("anchors", anchors.find(&hay)), ("table", table.find(&hay))] {
                let mut got: Vec<(usize, usize)> =
                    hits.iter().map(|h| (h.start + words[h.anchor].len(), h.start)).collect();
                assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "{how}: in order of their end, len {len}");
                got.sort();
                assert_eq!(got, want, "{how}: len {len}");
            }
        }
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
