//! Realistic samples of each rule's secret, generated on demand.
//!
//! Test vectors are made at test time from a rule's [`Part`] list (random bodies with the right
//! alphabet, length and checksum) instead of being committed as credential-shaped literals.
//! Deterministic for a given seed; no I/O.

use base64::Engine as _;

use super::rule::Part;

pub const DIGITS: &str = "0123456789";
pub const HEX: &str = "0123456789abcdef";
pub const HEX_UPPER: &str = "0123456789ABCDEF";
pub const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
pub const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
pub const LOWER_DIGITS: &str = "abcdefghijklmnopqrstuvwxyz0123456789";
pub const UPPER_DIGITS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
pub const BASE32: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
pub const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub const BASE64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const BASE64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// The base62 alphabet of GitHub/npm checksums.
pub const BASE62: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

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

/// A sample token from a rule's parts.
pub fn generate(parts: &[Part], rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut since_literal = String::new();
    for part in parts {
        match part {
            Part::Lit(s) => {
                out.push_str(s);
                since_literal.clear();
            }
            Part::Rand(alphabet, n) => {
                let s = rng.string(alphabet, *n);
                since_literal.push_str(&s);
                out.push_str(&s);
            }
            Part::Crc32Base62 => out.push_str(&crc32_base62(since_literal.as_bytes())),
            Part::Gen(f) => out.push_str(&f(rng)),
        }
    }
    out
}

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

/// A PEM block of `label` with a random body (64-column lines).
pub fn pem(rng: &mut Rng, label: &str, body_bytes: usize) -> String {
    pem_with_body(label, &rng.bytes(body_bytes))
}

fn pem_with_body(label: &str, body: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(body);
    let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap_or("")).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----", lines.join("\n"))
}

pub fn pem_rsa(rng: &mut Rng) -> String {
    pem(rng, "RSA PRIVATE KEY", 1190)
}

pub fn pem_pkcs8(rng: &mut Rng) -> String {
    pem(rng, "PRIVATE KEY", 1218)
}

pub fn pem_ec(rng: &mut Rng) -> String {
    pem(rng, "EC PRIVATE KEY", 121)
}

pub fn pem_dsa(rng: &mut Rng) -> String {
    pem(rng, "DSA PRIVATE KEY", 444)
}

pub fn pem_encrypted(rng: &mut Rng) -> String {
    pem(rng, "ENCRYPTED PRIVATE KEY", 1298)
}

pub fn pem_pgp(rng: &mut Rng) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(rng.bytes(900));
    let lines: Vec<&str> = body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap_or("")).collect();
    format!(
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{}\n={}\n-----END PGP PRIVATE KEY BLOCK-----",
        lines.join("\n"),
        rng.string(super::sample::BASE64, 4)
    )
}

pub fn pem_openssh(rng: &mut Rng) -> String {
    let mut body = b"openssh-key-v1\0".to_vec();
    body.extend(rng.bytes(380));
    pem_with_body("OPENSSH PRIVATE KEY", &body)
}

/// A JWT with an HS256 header and a small payload; the signature is random.
pub fn jwt(rng: &mut Rng) -> String {
    let enc = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let payload = format!(r#"{{"sub":"{}","iat":{}}}"#, rng.string(DIGITS, 10), 1_700_000_000 + rng.below(10_000_000));
    format!("{}.{}.{}", enc(br#"{"alg":"HS256","typ":"JWT"}"#), enc(payload.as_bytes()), enc(&rng.bytes(32)))
}

/// A Luhn-valid 16-digit Visa-range number, grouped by fours.
pub fn card(rng: &mut Rng) -> String {
    let mut digits: Vec<u8> = vec![4];
    for _ in 0..14 {
        digits.push(rng.below(10) as u8);
    }
    digits.push(luhn_check_digit(&digits));
    let s: String = digits.iter().map(|d| (b'0' + d) as char).collect();
    format!("{} {} {} {}", &s[0..4], &s[4..8], &s[8..12], &s[12..16])
}

/// The digit that makes `digits` + it pass Luhn.
pub fn luhn_check_digit(digits: &[u8]) -> u8 {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = d as u32;
            if i % 2 == 0 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    ((10 - sum % 10) % 10) as u8
}

/// A German IBAN with valid check digits.
pub fn iban(rng: &mut Rng) -> String {
    let bban = rng.string(DIGITS, 18);
    let check = 98 - super::check::mod97(&format!("{bban}DE00"));
    format!("DE{check:02}{bban}")
}

/// An SSN that follows the issuance rules.
pub fn ssn(rng: &mut Rng) -> String {
    let area = loop {
        let a = 1 + rng.below(899);
        if a != 666 {
            break a;
        }
    };
    format!("{area:03}-{:02}-{:04}", 1 + rng.below(99), 1 + rng.below(9999))
}

/// A US phone number in the common written form.
pub fn phone(rng: &mut Rng) -> String {
    format!("+1 ({}{}) {}{}-{}", 2 + rng.below(8), rng.string(DIGITS, 2), 2 + rng.below(8), rng.string(DIGITS, 2), rng.string(DIGITS, 4))
}

/// An email address at a non-reserved domain.
pub fn email(rng: &mut Rng) -> String {
    format!("{}.{}@{}.com", rng.string(LOWER, 6), rng.string(LOWER, 8), rng.string(LOWER, 7))
}

/// A database URL with a random password.
pub fn database_url(rng: &mut Rng) -> String {
    format!(
        "postgres://{}:{}@db-{}.internal:5432/{}",
        rng.string(LOWER, 8),
        rng.string(ALNUM, 20),
        rng.string(LOWER_DIGITS, 6),
        rng.string(LOWER, 6)
    )
}

/// A Google service-account JSON file.
pub fn gcp_service_account(rng: &mut Rng) -> String {
    let key = pem_pkcs8(rng).replace('\n', "\\n");
    format!(
        r#"{{"type": "service_account", "project_id": "{p}", "private_key_id": "{id}", "private_key": "{key}", "client_email": "sa@{p}.iam.gserviceaccount.com"}}"#,
        p = rng.string(LOWER, 10),
        id = rng.string(HEX, 40),
    )
}

/// An Azure storage connection string.
pub fn azure_connection_string(rng: &mut Rng) -> String {
    let key = base64::engine::general_purpose::STANDARD.encode(rng.bytes(64));
    format!("DefaultEndpointsProtocol=https;AccountName={};AccountKey={key};EndpointSuffix=core.windows.net", rng.string(LOWER_DIGITS, 12))
}

/// An 88-character base64 Azure storage account key.
pub fn azure_storage_key(rng: &mut Rng) -> String {
    base64::engine::general_purpose::STANDARD.encode(rng.bytes(64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_and_generators_are_self_consistent() {
        let mut rng = Rng::new(7);
        let body = rng.string(ALNUM, 30);
        let sum = crc32_base62(body.as_bytes());
        assert_eq!(sum.len(), 6);
        assert!(super::super::check::crc32_base62_ok(&format!("ghp_{body}{sum}")));
        assert!(super::super::check::luhn(&card(&mut rng).replace(' ', "")));
        assert!(super::super::check::iban_ok(&iban(&mut rng)));
        assert!(super::super::check::ssn_ok(&ssn(&mut rng)));
    }
}
