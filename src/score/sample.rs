//! Realistic samples of each rule's secret, generated on demand.
//!
//! Test vectors are made at test time from a rule's [`Part`] list (random bodies with the right
//! alphabet, length and checksum) instead of being committed as credential-shaped literals.
//! Deterministic for a given seed; no I/O.
//!
//! Built on the rules' [`Part`]s, the shared checksums of `codec.rs` and the [`Rng`] of
//! `rng.rs` (re-exported here). Nothing that scores imports this module: the validators share
//! the checksums through `codec.rs`, and the rule table (`rules.rs`) takes only alphabets and
//! generator functions from it, as data for each rule's `sample` field.

use base64::Engine as _;

use super::codec::{BECH32, bech32_hrp_expand, bech32_polymod, crc32_base62, mod97};
pub use super::rng::Rng;
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
pub const LETTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
pub const BASE32_LOWER: &str = "abcdefghijklmnopqrstuvwxyz234567";
/// Lowercase hex extended to `h` (Flutterwave, Mailgun signing keys).
pub const HEX_TO_H: &str = "0123456789abcdefgh";
/// The body alphabet of Azure AD client secrets.
pub const AZURE_SECRET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_~.";

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
        rng.string(BASE64, 4)
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
    let check = 98 - mod97(&format!("{bban}DE00"));
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
    format!(
        "+1 ({}{}) {}{}-{}",
        2 + rng.below(8),
        rng.string(DIGITS, 2),
        2 + rng.below(8),
        rng.string(DIGITS, 2),
        rng.string(DIGITS, 4)
    )
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
    format!(
        "DefaultEndpointsProtocol=https;AccountName={};AccountKey={key};EndpointSuffix=core.windows.net",
        rng.string(LOWER_DIGITS, 12)
    )
}

/// An 88-character base64 Azure storage account key.
pub fn azure_storage_key(rng: &mut Rng) -> String {
    base64::engine::general_purpose::STANDARD.encode(rng.bytes(64))
}

/// A `~/.docker/config.json` with one registry's base64 `user:password`.
pub fn docker_config(rng: &mut Rng) -> String {
    let creds = format!("{}:{}", rng.string(LOWER, 8), rng.string(ALNUM, 20));
    let auth = base64::engine::general_purpose::STANDARD.encode(creds);
    format!("{{\n  \"auths\": {{\n    \"registry.acme.io\": {{\n      \"auth\": \"{auth}\"\n    }}\n  }}\n}}")
}

/// A Kubernetes `Secret` manifest with a base64 password in `data:`.
pub fn k8s_secret(rng: &mut Rng) -> String {
    let password = base64::engine::general_purpose::STANDARD.encode(rng.string(ALNUM, 20));
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-{}\ntype: Opaque\ndata:\n  password: {password}\n",
        rng.string(LOWER, 5)
    )
}

/// A Discord bot token: base64 of an 18 or 19 digit snowflake id, a timestamp and an HMAC.
pub fn discord_bot_token(rng: &mut Rng) -> String {
    let (first, rest) = (1 + rng.below(9), 17 + rng.below(2));
    let id = format!("{first}{}", rng.string(DIGITS, rest));
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id);
    format!("{id}.{}.{}", rng.string(BASE64URL, 6), rng.string(BASE64URL, 38))
}

/// A random (version 4 shaped) UUID, lowercase.
pub fn uuid(rng: &mut Rng) -> String {
    format!(
        "{}-{}-4{}-{}{}-{}",
        rng.string(HEX, 8),
        rng.string(HEX, 4),
        rng.string(HEX, 3),
        rng.string("89ab", 1),
        rng.string(HEX, 3),
        rng.string(HEX, 12)
    )
}

/// A random UUID in uppercase (HubSpot legacy keys).
pub fn uuid_upper(rng: &mut Rng) -> String {
    uuid(rng).to_ascii_uppercase()
}

/// An age X25519 secret key: bech32 of 32 random bytes under `age-secret-key-`, uppercase.
pub fn age_secret_key(rng: &mut Rng) -> String {
    let hrp = "age-secret-key-";
    // 32 bytes = 256 bits → 52 five-bit groups (the last one padded).
    let bytes = rng.bytes(32);
    let mut data = Vec::with_capacity(58);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            data.push(((acc >> bits) & 31) as u8);
        }
    }
    if bits > 0 {
        data.push(((acc << (5 - bits)) & 31) as u8);
    }
    let mut values = bech32_hrp_expand(hrp);
    values.extend(&data);
    values.extend([0u8; 6]);
    let sum = bech32_polymod(&values) ^ 1;
    data.extend((0..6).map(|i| ((sum >> (5 * (5 - i))) & 31) as u8));
    let alphabet = BECH32.as_bytes();
    let body: String = data.iter().map(|&v| alphabet[v as usize].to_ascii_uppercase() as char).collect();
    format!("{}1{body}", hrp.to_ascii_uppercase())
}

/// Base64 lines of `n` random bytes, `width` columns each.
fn base64_lines(rng: &mut Rng, n: usize, width: usize) -> Vec<String> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(rng.bytes(n));
    b64.as_bytes().chunks(width).map(|c| String::from_utf8_lossy(c).into_owned()).collect()
}

/// A PuTTY (`.ppk`, version 2) private key file with random key material.
pub fn putty_private_key(rng: &mut Rng) -> String {
    let public = base64_lines(rng, 279, 64);
    let private = base64_lines(rng, 660, 64);
    format!(
        "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key-{}\nPublic-Lines: {}\n{}\nPrivate-Lines: {}\n{}\nPrivate-MAC: {}",
        rng.string(DIGITS, 8),
        public.len(),
        public.join("\n"),
        private.len(),
        private.join("\n"),
        rng.string(HEX, 40)
    )
}

/// An SSH2 (RFC 4716 / ssh.com) encrypted private key block.
pub fn ssh2_encrypted_private_key(rng: &mut Rng) -> String {
    let lines = base64_lines(rng, 900, 70);
    format!(
        "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: \"rsa-key-{}\"\n{}\n---- END SSH2 ENCRYPTED PRIVATE KEY ----",
        rng.string(DIGITS, 8),
        lines.join("\n")
    )
}

/// An OpenVPN static key (2048 bits as 16 lines of hex).
pub fn openvpn_static_key(rng: &mut Rng) -> String {
    let lines: Vec<String> = (0..16).map(|_| rng.string(HEX, 32)).collect();
    format!("-----BEGIN OpenVPN Static key V1-----\n{}\n-----END OpenVPN Static key V1-----", lines.join("\n"))
}

/// A Microsoft Teams incoming-webhook URL.
pub fn teams_webhook(rng: &mut Rng) -> String {
    format!(
        "https://{}.webhook.office.com/webhookb2/{}@{}/IncomingWebhook/{}/{}",
        rng.string(LOWER, 8),
        uuid(rng),
        uuid(rng),
        rng.string(HEX, 32),
        uuid(rng)
    )
}

/// An HTTP Basic `Authorization` header with random credentials.
pub fn basic_auth_header(rng: &mut Rng) -> String {
    let creds = format!("{}:{}", rng.string(LOWER, 8), rng.string(ALNUM, 18));
    format!("Authorization: Basic {}", base64::engine::general_purpose::STANDARD.encode(creds))
}

/// A Google OAuth refresh token (`1//0` + base64url).
pub fn google_refresh_token(rng: &mut Rng) -> String {
    format!("1//0{}{}", rng.string(UPPER_DIGITS, 1), rng.string(BASE64URL, 98))
}

/// A Jenkins encrypted secret as `credentials.xml` stores it: `{AQAAABAAAA…}`.
pub fn jenkins_secret(rng: &mut Rng) -> String {
    let data = 16 * (1 + rng.below(3));
    let mut raw = vec![1u8];
    raw.extend_from_slice(&16u32.to_be_bytes());
    raw.extend_from_slice(&(data as u32).to_be_bytes());
    raw.extend(rng.bytes(16 + data));
    format!("{{{}}}", base64::engine::general_purpose::STANDARD.encode(raw))
}

/// The base64 of `user:password` that HTTP Basic authentication sends.
pub fn basic_auth_value(rng: &mut Rng) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", rng.string(LOWER, 7), rng.string(ALNUM, 18)))
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
        let age = age_secret_key(&mut rng);
        assert_eq!(age.len(), "AGE-SECRET-KEY-1".len() + 58, "{age}");
        assert!(super::super::check::bech32_ok(&age), "{age}");
        assert!(super::super::check::basic_auth_ok(basic_auth_header(&mut rng).rsplit(' ').next().unwrap()));
    }
}
