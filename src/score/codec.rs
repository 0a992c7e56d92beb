//! Encodings and checksums that token formats are built from, shared by the validators
//! (`check.rs`) and the sample generator (`sample.rs`): base62 CRC32 (GitHub, npm), bech32
//! (BIP-173, age keys), ISO 7064 mod-97 (IBAN).
//!
//! Pure functions of their input; nothing here knows about rules or findings.

/// The base62 alphabet of GitHub/npm checksums.
pub const BASE62: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The bech32 data alphabet, lowercase (value `v` is the `v`-th character).
pub const BECH32: &str = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";

/// `base62(crc32(data))`, left-padded with `0` to 6 characters (GitHub and npm tokens).
pub fn crc32_base62(data: &[u8]) -> String {
    let mut n = crc32fast::hash(data) as u64;
    let alphabet = BASE62.as_bytes();
    let mut out = [b'0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = alphabet[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// BIP-173 checksum polynomial over 5-bit values.
pub fn bech32_polymod(values: &[u8]) -> u32 {
    const GEN: [u32; 5] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3];
    let mut chk: u32 = 1;
    for &v in values {
        let top = chk >> 25;
        chk = ((chk & 0x01ff_ffff) << 5) ^ v as u32;
        for (i, g) in GEN.iter().enumerate() {
            if (top >> i) & 1 == 1 {
                chk ^= g;
            }
        }
    }
    chk
}

/// The human-readable part expanded for the checksum (lowercase).
pub fn bech32_hrp_expand(hrp: &str) -> Vec<u8> {
    let b = hrp.as_bytes();
    let mut out: Vec<u8> = b.iter().map(|c| c >> 5).collect();
    out.push(0);
    out.extend(b.iter().map(|c| c & 31));
    out
}

/// The remainder of an alphanumeric string read as a number with letters A=10 … Z=35.
pub fn mod97(s: &str) -> u32 {
    let mut rem: u32 = 0;
    for c in s.chars() {
        let v = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'A'..='Z' => c as u32 - 'A' as u32 + 10,
            'a'..='z' => c as u32 - 'a' as u32 + 10,
            _ => continue,
        };
        rem = if v >= 10 { (rem * 100 + v) % 97 } else { (rem * 10 + v) % 97 };
    }
    rem
}
