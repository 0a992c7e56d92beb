//! SHA-256 digests as a type.
//!
//! [`Sha256`] is the name of every version rwfs keeps: journal rows carry it, `objects/` files are
//! named by it, and preconditions compare it. It is a 32-byte value printed as 64 lowercase hex
//! digits; parsing accepts exactly that form, so a digest that reaches the engine is well formed.
//! [`Hasher`] is the streaming form used while bytes are copied or read back.
//! [`hmac_sha256`] keys the journal's chain and signs read cursors, and [`same_secret`] compares
//! what a client sent with a secret; both are RustCrypto's (`hmac`, `subtle`), not written here.

use std::fmt;
use std::str::FromStr;

use sha2::Digest as _;

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256([u8; 32]);

impl Sha256 {
    /// Digest of `bytes` in one call.
    pub fn of(bytes: &[u8]) -> Sha256 {
        let mut hasher = Hasher::new();
        hasher.update(bytes);
        hasher.finish()
    }

    /// Digest of the empty string, the chain value before the first journal row.
    pub fn zero() -> Sha256 {
        Sha256([0; 32])
    }

    /// A digest computed elsewhere (an HMAC).
    pub fn from_bytes(bytes: [u8; 32]) -> Sha256 {
        Sha256(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex, 64 characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The first `n` hex digits, for humans (`rwfs log`).
    pub fn short(&self, n: usize) -> String {
        let mut s = self.to_hex();
        s.truncate(n.min(64));
        s
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256({})", self.short(12))
    }
}

/// HMAC-SHA256 (RFC 2104, RustCrypto's `hmac`): the journal's keyed chain and the read cursors'
/// signatures. Callers domain-separate their messages.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use hmac::{KeyInit, Mac};
    // HMAC takes a key of any length (a longer one is hashed first): this never fails.
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ
/// (`subtle`): for secrets compared with what a client sent (tokens, signatures).
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

/// The text was not 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotASha256;

impl fmt::Display for NotASha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a lowercase sha256 hex digest (64 characters 0-9a-f)")
    }
}

impl std::error::Error for NotASha256 {}

impl FromStr for Sha256 {
    type Err = NotASha256;

    /// Exactly 64 lowercase hex digits (the journal reads millions of these).
    fn from_str(s: &str) -> Result<Sha256, NotASha256> {
        fn nibble(b: u8) -> Result<u8, NotASha256> {
            match b {
                b'0'..=b'9' => Ok(b - b'0'),
                b'a'..=b'f' => Ok(b - b'a' + 10),
                _ => Err(NotASha256),
            }
        }
        let hex: &[u8; 64] = s.as_bytes().try_into().map_err(|_| NotASha256)?;
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
            *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
        }
        Ok(Sha256(out))
    }
}

impl serde::Serialize for Sha256 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for Sha256 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Sha256, D::Error> {
        deserialize_or_empty(d)?.ok_or_else(|| serde::de::Error::custom(NotASha256))
    }
}

/// A digest, or `None` for `""`: read in place where the input allows (no string is copied).
pub fn deserialize_or_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Sha256>, D::Error> {
    struct Hex;
    impl serde::de::Visitor<'_> for Hex {
        type Value = Option<Sha256>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a sha256 digest in lowercase hex")
        }

        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Option<Sha256>, E> {
            if s.is_empty() { Ok(None) } else { s.parse().map(Some).map_err(E::custom) }
        }
    }
    d.deserialize_str(Hex)
}

/// Streaming SHA-256.
#[derive(Clone, Default)]
pub struct Hasher(sha2::Sha256);

impl Hasher {
    pub fn new() -> Hasher {
        Hasher(sha2::Sha256::new())
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn finish(self) -> Sha256 {
        Sha256(self.0.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        let case1 = hmac_sha256(&[0x0b; 20], b"Hi There");
        assert_eq!(hex::encode(case1), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        let case2 = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex::encode(case2), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let case6 = hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First");
        assert_eq!(hex::encode(case6), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn secrets_compare_equal_only_when_equal() {
        assert!(same_secret(b"Bearer abc", b"Bearer abc"));
        assert!(!same_secret(b"Bearer abc", b"Bearer abd"));
        assert!(!same_secret(b"Bearer ab", b"Bearer abc"));
        assert!(same_secret(b"", b""));
    }

    #[test]
    fn known_digest_round_trips() {
        let empty = Sha256::of(b"");
        assert_eq!(empty.to_hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(empty.to_hex().parse::<Sha256>(), Ok(empty));
    }

    #[test]
    fn rejects_uppercase_short_and_non_hex() {
        let upper = Sha256::of(b"x").to_hex().to_uppercase();
        for bad in [upper.as_str(), "abc", &"g".repeat(64), ""] {
            assert_eq!(bad.parse::<Sha256>(), Err(NotASha256), "{bad}");
        }
    }
}
