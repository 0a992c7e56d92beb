//! The deterministic random source of sample generation ([`Rng`]).
//!
//! Its own module because two sides name it: a rule's sample parts (`Part::Gen` in `rule.rs`)
//! and the generator that runs them (`sample.rs`); neither imports the other for it.

/// xorshift64*: small, deterministic, good enough for test tokens.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn string(&mut self, alphabet: &str, n: usize) -> String {
        let alphabet = alphabet.as_bytes();
        (0..n).map(|_| alphabet[self.below(alphabet.len())] as char).collect()
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}
