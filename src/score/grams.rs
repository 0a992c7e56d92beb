//! Anchor occurrences by a gram sieve: stage 1 of the scorer over large inputs on CPUs with AVX2.
//!
//! Every anchor is found from its first four bytes (all three when it has three): each
//! position's bytes, folded to lower case, pick one bit of a bitmap — the word by a hash of the
//! first three bytes, the bit by the fourth byte's low five bits, every bit of the word for a
//! three-byte anchor — and only where that bit is set are the anchors that start with those
//! bytes compared ([`Grams::at`]). The AVX2 kernel hashes 32 positions at a time and tests
//! their bits with one gather per 8: a few independent instructions per byte, where an
//! automaton's walk is a chain of dependent loads into a table beyond L1 (the
//! [`super::scan::Table`] this replaces on such CPUs). Positions in source code hardly ever
//! start an anchor (about 900 hits and a few thousand four-byte prefixes of one per MB of Rust),
//! so comparing costs little.
//!
//! Four bytes, not three: three-byte prefixes of the vendors' anchors are common in code (`pub`
//! of `pubd`, `tok`, `cre`), and the trigram sieve tried before this one spent its time
//! comparing them.
//!
//! What this does not do: anchors shorter than three bytes ([`Grams::new`] refuses them; the
//! caller keeps an automaton), or any matching other than ASCII case-insensitive, every
//! occurrence of every anchor, overlapping.

use super::scan::Hit;

/// Bits of the hash that picks a bitmap word: 2^13 words, 32 KB.
const WORD_BITS: u32 = 13;

const MULTIPLIER: u32 = 0x9e37_79b1;

/// Bytes folded so that ASCII letters of either case meet (other bytes may meet too: the
/// comparison after the sieve tells them apart).
const FOLD: u32 = 0x2020_2020;

/// The first three bytes of a little-endian `u32`.
const THREE: u32 = 0x00ff_ffff;

/// The word and the bit of folded bytes `f` (a little-endian `u32`).
fn word_of(f: u32) -> usize {
    ((f & THREE).wrapping_mul(MULTIPLIER) >> (32 - WORD_BITS)) as usize
}

fn bit_of(f: u32) -> u32 {
    (f >> 24) & 31
}

/// Bit `j` of `lanes` (8 bits) moved to bit `4j`.
fn spread(lanes: u32) -> u32 {
    let x = (lanes | lanes << 12) & 0x000f_000f;
    let x = (x | x << 6) & 0x0303_0303;
    (x | x << 3) & 0x1111_1111
}

/// Every anchor, by a bitmap of their folded prefixes.
pub struct Grams {
    /// Word [`word_of`], bit [`bit_of`]: some anchor may start with those bytes.
    bits: Vec<u32>,
    /// The anchors whose prefix falls in word `w`: `entries[first[w]..first[w + 1]]`, each
    /// (folded prefix, its mask: four or three bytes, anchor).
    first: Vec<u32>,
    entries: Vec<(u32, u32, u32)>,
    /// Anchor → its bytes, lower case.
    words: Vec<Box<[u8]>>,
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

impl Grams {
    pub fn new(words: &[String]) -> Result<Grams, String> {
        let words: Vec<Box<[u8]>> =
            words.iter().map(|w| w.to_ascii_lowercase().into_bytes().into_boxed_slice()).collect();
        let mut bits = vec![0u32; 1 << WORD_BITS];
        let mut entries = Vec::with_capacity(words.len());
        for (anchor, word) in words.iter().enumerate() {
            let anchor = u32::try_from(anchor).map_err(|_| "too many anchors".to_string())?;
            if word.len() < 3 {
                let word = String::from_utf8_lossy(word);
                return Err(format!("the anchor {word:?} is shorter than 3 bytes (the gram sieve takes 3 or more)"));
            }
            let folded = load(word, 0) | FOLD;
            let w = word_of(folded);
            if word.len() == 3 {
                bits[w] = u32::MAX;
                entries.push((folded & THREE, THREE, anchor));
            } else {
                bits[w] |= 1 << bit_of(folded);
                entries.push((folded, u32::MAX, anchor));
            }
        }
        entries.sort_by_key(|&(gram, _, anchor)| (word_of(gram), anchor));
        let first = (0..=bits.len()).map(|w| entries.partition_point(|&(gram, ..)| word_of(gram) < w) as u32).collect();
        Ok(Grams { bits, first, entries, words })
    }

    /// Every occurrence of every anchor, in order of their end (and of their start among those
    /// that end together).
    pub fn find(&self, hay: &[u8]) -> Vec<Hit> {
        let mut hits = Vec::new();
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("bmi1") {
            // SAFETY: the CPU has AVX2 and BMI1 (just asked).
            done = unsafe { self.sift_avx2(hay, &mut hits) };
        }
        for at in done..hay.len() {
            self.at(hay, at, &mut hits);
        }
        // Found in order of start: put in order of end, then start (each anchor is reported
        // once per start, so no two hits are equal in both). Nearly sorted already: the stable
        // sort takes the runs as they are (10 MB of `sk-` is one run).
        hits.sort_by_key(|h| (h.start + self.words[h.anchor].len(), h.start));
        hits
    }

    /// The anchors that start at `at`.
    #[inline]
    fn at(&self, hay: &[u8], at: usize, hits: &mut Vec<Hit>) {
        let folded = load(hay, at) | FOLD;
        let w = word_of(folded);
        if self.bits[w] >> bit_of(folded) & 1 == 0 {
            return;
        }
        let rest = &hay[at..];
        for &(gram, mask, anchor) in &self.entries[self.first[w] as usize..self.first[w + 1] as usize] {
            let word = &self.words[anchor as usize];
            if folded & mask == gram && rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word) {
                hits.push(Hit { start: at, anchor: anchor as usize });
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
        let multiplier = _mm256_set1_epi32(MULTIPLIER as i32);
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
            // Bit `4j + o` for lane `j` of load `o`: positions in order, so that hits come by start.
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
    fn every_occurrence_of_every_anchor_in_order_of_end() {
        let words: Vec<String> =
            ["sk-", "SK-PROJ", "ghp_", "token", "key", "tokentokentoken", "pubd"].map(String::from).to_vec();
        let grams = Grams::new(&words).expect("grams");
        let oracle = aho_corasick::AhoCorasick::builder().ascii_case_insensitive(true).build(&words).expect("oracle");
        let mut rng = super::super::sample::Rng::new(29);
        for len in [0, 1, 3, 4, 31, 34, 35, 36, 67, 100, 1000, 20_000] {
            // Random bytes with anchors (in either case) planted now and then.
            let mut hay: Vec<u8> = Vec::new();
            while hay.len() < len {
                if rng.below(8) == 0 {
                    let word = words[rng.below(words.len())].as_bytes();
                    hay.extend(word.iter().map(|b| if rng.below(2) == 0 { b.to_ascii_uppercase() } else { *b }));
                } else {
                    hay.push(b"skSK-proghp_tkenyubdPUBD .x\xc0"[rng.below(28)]);
                }
            }
            hay.truncate(len);
            let mut want: Vec<(usize, usize, usize)> =
                oracle.find_overlapping_iter(&hay).map(|m| (m.end(), m.start(), m.pattern().as_usize())).collect();
            want.sort();
            let got: Vec<(usize, usize, usize)> =
                grams.find(&hay).iter().map(|h| (h.start + words[h.anchor].len(), h.start, h.anchor)).collect();
            assert_eq!(got, want, "len {len}");
        }
    }
}
