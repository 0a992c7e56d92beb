//! Anchor occurrences by a gram sieve: stage 1 of the scorer over large inputs on CPUs with AVX2.
//!
//! Every anchor is found from its rarest four bytes (all three when it has three): the four
//! bytes of the anchor, at the offset [`Grams::new`] picks, that are least common in source code
//! by the table of `grams.txt` (the 4,096 most common four-byte grams of the cargo registry's
//! Rust sources with their rates per MB; a gram not listed is rarer than all listed, estimated
//! from its bytes): `contentful` by `ntfu`, not `cont`; `password` by `sswo`. Each position's
//! bytes, folded to lower case, pick one bit of a bitmap — the word by a hash of the first three
//! bytes, the bit by the fourth byte's low five bits, every bit of the word for a three-byte
//! anchor — and only where that bit is set are the anchors indexed by those bytes compared, each
//! whole at its start, `offset` bytes back ([`Grams::at`]). Of [`MULTIPLIERS`] hashes the one
//! kept lets the least of the listed grams' rate through for nothing (a hash that sent four
//! spaces to an anchor's word would compare a tenth of all positions). The AVX2 kernel hashes 32
//! positions at a time and tests their bits with one gather per 8: a few independent
//! instructions per byte, where an automaton's walk is a chain of dependent loads into a table
//! beyond L1 (the [`super::scan::Table`] this replaces on such CPUs). Positions in source code
//! hardly ever hold an anchor's rarest gram (about 1,100 per MB of the registry's Rust, most of
//! them in real hits such as `token` and `key`, against 4,100 for the first four bytes), so
//! comparing costs little.
//!
//! Four bytes, not three: three-byte grams of the vendors' anchors are common in code (`pub`
//! of `pubd`, `tok`, `cre`), and the trigram sieve tried before this one spent its time
//! comparing them. A 32-bit word per hash, not a byte: the sixteen `pub0`…`pubf` share their
//! first three bytes, and eight bits for their fourth would let `pub ` through.
//!
//! What this does not do: anchors shorter than three bytes ([`Grams::new`] refuses them; the
//! caller keeps an automaton), or any matching other than ASCII case-insensitive, every
//! occurrence of every anchor, overlapping.

use std::collections::HashMap;

/// An anchor occurrence: where it starts and which anchor. What every stage-1 finder gives (this
/// sieve, and `scan.rs`'s automata, which import it from here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub start: usize,
    pub anchor: usize,
}

/// Bits of the hash that picks a bitmap word: 2^13 words, 32 KB.
const WORD_BITS: u32 = 13;

/// Multipliers of the hash tried: [`Grams::new`] keeps the one under which the least common
/// code passes the sieve for nothing (a hash that sends four spaces to an anchor's bit would
/// compare a tenth of all positions).
const MULTIPLIERS: usize = 32;

/// Bytes folded so that ASCII letters of either case meet (other bytes may meet too: the
/// comparison after the sieve tells them apart).
const FOLD: u32 = 0x2020_2020;

/// The first three bytes of a little-endian `u32`.
const THREE: u32 = 0x00ff_ffff;

/// The most common four-byte grams of Rust source, lower case, with their rates per MB; written
/// by `cargo bench --bench scan -- --write-grams src/score/grams.txt`.
const RATES: &str = include_str!("grams.txt");

/// The bitmap word and the bit of folded bytes `f` (a little-endian `u32`).
fn word_of(f: u32, multiplier: u32) -> usize {
    ((f & THREE).wrapping_mul(multiplier) >> (32 - WORD_BITS)) as usize
}

fn bit_of(f: u32) -> u32 {
    (f >> 24) & 31
}

/// The first multiplier tried (the golden ratio's); the others step from it.
const MULTIPLIER_SEED: u32 = 0x9e37_79b1;

/// The sieve's bitmap of `entries` under `multiplier`.
fn bitmap(entries: &[Entry], multiplier: u32) -> Vec<u32> {
    let mut bits = vec![0u32; 1 << WORD_BITS];
    for e in entries {
        let w = word_of(e.gram, multiplier);
        if e.mask == THREE {
            bits[w] = u32::MAX;
        } else {
            bits[w] |= 1 << bit_of(e.gram);
        }
    }
    bits
}

/// Bit `j` of `lanes` (8 bits) moved to bit `4j`.
fn spread(lanes: u32) -> u32 {
    let x = (lanes | lanes << 12) & 0x000f_000f;
    let x = (x | x << 6) & 0x0303_0303;
    (x | x << 3) & 0x1111_1111
}

/// How [`Grams::find`] sifts: the widest the CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    fn best() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("bmi1") {
                return Kernel::Avx2;
            }
        }
        Kernel::Scalar
    }

    /// Every kernel this CPU can run.
    #[cfg(test)]
    fn all() -> Vec<Kernel> {
        let mut all = vec![Kernel::Scalar];
        #[cfg(target_arch = "x86_64")]
        if Kernel::best() == Kernel::Avx2 {
            all.push(Kernel::Avx2);
        }
        all
    }
}

/// One anchor in the sieve: its folded gram (four bytes, or three: `mask`) at `offset` bytes
/// into it.
#[derive(Clone, Copy)]
struct Entry {
    gram: u32,
    mask: u32,
    anchor: u32,
    offset: u32,
}

/// Every anchor, by a bitmap of their folded rarest grams.
pub struct Grams {
    /// Word [`word_of`], bit [`bit_of`]: some anchor's gram may be those bytes.
    bits: Vec<u32>,
    /// The anchors whose gram falls in word `w`: `entries[first[w]..first[w + 1]]`.
    first: Vec<u16>,
    entries: Vec<Entry>,
    /// Anchor → its bytes, lower case.
    words: Vec<Box<[u8]>>,
    /// Of the hash ([`word_of`]).
    multiplier: u32,
}

/// The bytes at `at..at + 4`, zero past the end, little-endian.
fn load(hay: &[u8], at: usize) -> u32 {
    if let Some(bytes) = hay.get(at..at + 4) {
        return u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    }
    let mut bytes = [0u8; 4];
    let tail = &hay[at.min(hay.len())..];
    bytes[..tail.len()].copy_from_slice(tail);
    u32::from_le_bytes(bytes)
}

/// How common four lower-case bytes are in source code, per MB: the rate of `grams.txt` where
/// it lists them, else an estimate below the least rate listed (by how common each byte is in
/// the grams listed, as if independent).
struct Rates {
    listed: HashMap<[u8; 4], f64>,
    /// The grams listed, in the table's order.
    order: Vec<([u8; 4], f64)>,
    least: f64,
    /// Byte → its share of the listed grams' bytes, weighted by their rates.
    share: [f64; 256],
}

impl Rates {
    fn builtin() -> Rates {
        let order: Vec<([u8; 4], f64)> = RATES
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .map(|line| {
                let (rate, gram) = line.split_once('\t').expect("grams.txt: rate, tab, gram");
                let gram = unescape(gram);
                let gram: [u8; 4] = gram.try_into().expect("grams.txt: four bytes");
                (gram, rate.parse::<f64>().expect("grams.txt: a rate"))
            })
            .collect();
        let listed: HashMap<[u8; 4], f64> = order.iter().copied().collect();
        let least = order.iter().map(|&(_, rate)| rate).fold(f64::INFINITY, f64::min);
        let mut share = [0f64; 256];
        for (gram, rate) in &order {
            for &b in gram {
                share[usize::from(b)] += rate;
            }
        }
        let total: f64 = share.iter().sum();
        let floor = share.iter().copied().filter(|&s| s > 0.0).fold(f64::INFINITY, f64::min) / 2.0;
        for s in &mut share {
            *s = (*s).max(floor) / total;
        }
        Rates { listed, order, least, share }
    }

    fn of(&self, gram: [u8; 4]) -> f64 {
        if let Some(&rate) = self.listed.get(&gram) {
            return rate;
        }
        let most = self.share.iter().copied().fold(0.0, f64::max);
        self.least * gram.iter().map(|&b| self.share[usize::from(b)] / most).product::<f64>()
    }

    /// The offset of `word`'s rarest four bytes (the first of equally rare ones).
    fn rarest(&self, word: &[u8]) -> usize {
        let mut best = (0, f64::INFINITY);
        for (offset, gram) in word.windows(4).enumerate() {
            let rate = self.of([gram[0], gram[1], gram[2], gram[3]]);
            if rate < best.1 {
                best = (offset, rate);
            }
        }
        best.0
    }
}

/// `grams.txt`'s escapes: `\\`, `\t`, `\n`, `\r`, `\xNN`.
fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b't') => out.push(b'\t'),
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b'x') => {
                let hex: Vec<u8> = bytes.by_ref().take(2).collect();
                let hex = std::str::from_utf8(&hex).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                out.push(hex.expect("grams.txt: \\x and two hex digits"));
            }
            Some(other) => out.push(other),
            None => out.push(b'\\'),
        }
    }
    out
}

impl Grams {
    pub fn new(words: &[String]) -> Result<Grams, String> {
        let rates = Rates::builtin();
        let words: Vec<Box<[u8]>> =
            words.iter().map(|w| w.to_ascii_lowercase().into_bytes().into_boxed_slice()).collect();
        let mut entries = Vec::with_capacity(words.len());
        for (anchor, word) in words.iter().enumerate() {
            let anchor = u32::try_from(anchor).map_err(|_| "too many anchors".to_string())?;
            if word.len() < 3 {
                let word = String::from_utf8_lossy(word);
                return Err(format!("the anchor {word:?} is shorter than 3 bytes (the gram sieve takes 3 or more)"));
            }
            let offset = if word.len() == 3 { 0 } else { rates.rarest(word) };
            let folded = load(word, offset) | FOLD;
            let (gram, mask) = if word.len() == 3 { (folded & THREE, THREE) } else { (folded, u32::MAX) };
            entries.push(Entry { gram, mask, anchor, offset: offset as u32 });
        }
        // The listed grams folded, rates in tenths per MB: the cost of a multiplier is the rate
        // of the grams that pass its sieve.
        let common: Vec<(u32, u64)> =
            rates.order.iter().map(|&(gram, rate)| (u32::from_le_bytes(gram) | FOLD, (rate * 10.0) as u64)).collect();
        let (_, multiplier, bits) = (0..MULTIPLIERS as u32)
            .map(|i| {
                let multiplier = MULTIPLIER_SEED.wrapping_add(i.wrapping_mul(0x6a09_e668)) | 1;
                let bits = bitmap(&entries, multiplier);
                let passing: u64 = common
                    .iter()
                    .filter(|&&(f, _)| bits[word_of(f, multiplier)] >> bit_of(f) & 1 != 0)
                    .map(|&(_, rate)| rate)
                    .sum();
                (passing, multiplier, bits)
            })
            .min_by_key(|&(passing, multiplier, _)| (passing, multiplier))
            .expect("MULTIPLIERS > 0");
        if u16::try_from(entries.len()).is_err() {
            return Err("too many anchors for the gram sieve".to_string());
        }
        entries.sort_by_key(|e| (word_of(e.gram, multiplier), e.anchor));
        let first = (0..=1usize << WORD_BITS)
            .map(|w| entries.partition_point(|e| word_of(e.gram, multiplier) < w) as u16)
            .collect();
        Ok(Grams { bits, first, entries, words, multiplier })
    }

    /// Every occurrence of every anchor, in order of their end (and of their start among those
    /// that end together).
    pub fn find(&self, hay: &[u8]) -> Vec<Hit> {
        self.find_by(hay, Kernel::best())
    }

    fn find_by(&self, hay: &[u8], kernel: Kernel) -> Vec<Hit> {
        let mut hits = Vec::new();
        let done = match kernel {
            Kernel::Scalar => 0,
            // SAFETY: `Kernel::best` found AVX2 and BMI1 (or a test did).
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { self.sift_avx2(hay, &mut hits) },
        };
        for at in done..hay.len() {
            self.at(hay, at, &mut hits);
        }
        // Found in order of their gram's position: put in order of end, then start (each anchor
        // is reported once per start, so no two hits are equal in both). Nearly sorted already:
        // the stable sort takes the runs as they are (10 MB of `sk-` is one run).
        hits.sort_by_key(|h| (h.start + self.words[h.anchor].len(), h.start));
        hits
    }

    /// The anchors whose gram is at `at`.
    #[inline]
    fn at(&self, hay: &[u8], at: usize, hits: &mut Vec<Hit>) {
        let folded = load(hay, at) | FOLD;
        let w = word_of(folded, self.multiplier);
        if self.bits[w] >> bit_of(folded) & 1 == 0 {
            return;
        }
        for e in &self.entries[usize::from(self.first[w])..usize::from(self.first[w + 1])] {
            if folded & e.mask != e.gram {
                continue;
            }
            let Some(start) = at.checked_sub(e.offset as usize) else { continue };
            let word = &self.words[e.anchor as usize];
            if hay.get(start..start + word.len()).is_some_and(|bytes| bytes.eq_ignore_ascii_case(word)) {
                hits.push(Hit { start, anchor: e.anchor as usize });
            }
        }
    }

    /// The hits of every position whose four bytes lie inside `hay`, 32 positions per step:
    /// the four loads at `p..p + 4` give the `u32`s of positions `p + o + 4j` (lane `j` of load
    /// `o`), hashed and tested by a gather; the few positions whose bit is set are compared one
    /// by one. Returns the first position not looked at.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1")]
    fn sift_avx2(&self, hay: &[u8], hits: &mut Vec<Hit>) -> usize {
        use std::arch::x86_64::{
            __m256i, _mm256_and_si256, _mm256_castsi256_ps, _mm256_i32gather_epi32, _mm256_loadu_si256,
            _mm256_movemask_ps, _mm256_mullo_epi32, _mm256_or_si256, _mm256_set1_epi32, _mm256_slli_epi32,
            _mm256_srli_epi32, _mm256_srlv_epi32,
        };
        const STEP: usize = 32;
        let fold = _mm256_set1_epi32(FOLD as i32);
        let multiplier = _mm256_set1_epi32(self.multiplier as i32);
        let three = _mm256_set1_epi32(THREE as i32);
        let low5 = _mm256_set1_epi32(31);
        let bits = self.bits.as_ptr().cast::<i32>();
        let mut p = 0;
        // The last load reads `p + 3..p + 35`.
        while p + STEP + 3 <= hay.len() {
            let mut sifted = [0u32; 4];
            for (o, out) in sifted.iter_mut().enumerate() {
                // SAFETY: `p + o + 32 <= p + 35 <= hay.len()`; the load is unaligned.
                let x = unsafe { _mm256_loadu_si256(hay.as_ptr().add(p + o).cast::<__m256i>()) };
                let folded = _mm256_or_si256(x, fold);
                let w = _mm256_srli_epi32::<{ 32 - WORD_BITS as i32 }>(_mm256_mullo_epi32(
                    _mm256_and_si256(folded, three),
                    multiplier,
                ));
                // SAFETY: `w < 2^WORD_BITS`, a word of the bitmap.
                let words = unsafe { _mm256_i32gather_epi32::<4>(bits, w) };
                let set = _mm256_srlv_epi32(words, _mm256_and_si256(_mm256_srli_epi32::<24>(folded), low5));
                *out = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32::<31>(set))) as u32;
            }
            // Bit `4j + o` for lane `j` of load `o`: positions in order, so that hits come by
            // their gram's position.
            let mut set = sifted.iter().enumerate().fold(0, |all, (o, &lanes)| all | spread(lanes) << o);
            while set != 0 {
                self.at(hay, p + set.trailing_zeros() as usize, hits);
                set &= set - 1;
            }
            p += STEP;
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_moves_each_lane_to_every_fourth_bit() {
        for lanes in 0..256u32 {
            let want = (0..8).fold(0, |m, j| m | (lanes >> j & 1) << (4 * j));
            assert_eq!(spread(lanes), want);
        }
    }

    #[test]
    fn short_anchors_are_refused() {
        assert!(Grams::new(&["ok".to_string()]).is_err());
        assert!(Grams::new(&["key".to_string(), "token".to_string()]).is_ok());
    }

    #[test]
    fn the_table_parses_and_anchors_are_indexed_by_their_rarest_grams() {
        let rates = Rates::builtin();
        assert!(rates.listed.len() >= 1000, "{} grams", rates.listed.len());
        assert!(rates.listed[b"toke"] > 100.0 && rates.least > 0.0);
        // Below the least listed rate when not listed, and rarer for rarer bytes.
        assert!(rates.of(*b"ntfu") < rates.least && rates.of(*b"qzjx") < rates.of(*b"ntfu"));
        let gram = |word: &str| word[rates.rarest(word.as_bytes())..][..4].to_string();
        assert_ne!(gram("contentful"), "cont");
        assert_ne!(gram("password"), "pass");
        assert_eq!(gram("token"), "toke");
        assert_eq!(unescape(r"a\tb\n\x7f\\"), b"a\tb\n\x7f\\");
    }

    #[test]
    fn every_occurrence_of_every_anchor_in_order_of_end() {
        let words: Vec<String> =
            ["sk-", "SK-PROJ", "ghp_", "token", "key", "tokentokentoken", "pubd", "contentful", "password", "kenk"]
                .map(String::from)
                .to_vec();
        let grams = Grams::new(&words).expect("grams");
        let oracle = aho_corasick::AhoCorasick::builder().ascii_case_insensitive(true).build(&words).expect("oracle");
        let mut rng = super::super::sample::Rng::new(29);
        for len in [0, 1, 3, 4, 31, 34, 35, 36, 66, 67, 68, 100, 131, 1000, 20_000] {
            // Random bytes with anchors (in either case) planted now and then.
            let mut hay: Vec<u8> = Vec::new();
            while hay.len() < len {
                if rng.below(8) == 0 {
                    let word = words[rng.below(words.len())].as_bytes();
                    hay.extend(word.iter().map(|b| if rng.below(2) == 0 { b.to_ascii_uppercase() } else { *b }));
                } else {
                    hay.push(b"skSK-proghp_tkenyubdPUBD .x\xc0cntfulasswrd"[rng.below(40)]);
                }
            }
            hay.truncate(len);
            let mut want: Vec<(usize, usize, usize)> =
                oracle.find_overlapping_iter(&hay).map(|m| (m.end(), m.start(), m.pattern().as_usize())).collect();
            want.sort();
            for kernel in Kernel::all() {
                let got: Vec<(usize, usize, usize)> = grams
                    .find_by(&hay, kernel)
                    .iter()
                    .map(|h| (h.start + words[h.anchor].len(), h.start, h.anchor))
                    .collect();
                assert_eq!(got, want, "len {len}, {kernel:?}");
            }
        }
    }
}
