//! Structural validators: does a candidate have the inner structure of the real thing?
//!
//! Each is a pure function of the candidate text; they run before entropy and placeholder
//! filters because a passing checksum is the strongest evidence there is. The checksums that the
//! sample generator computes too (base62 CRC32, bech32, mod-97) are in `codec.rs`.

use base64::Engine as _;

use super::codec::{BASE62, BECH32, bech32_hrp_expand, bech32_polymod, crc32_base62, mod97};
use super::rule::Check;

/// Run `check` on a candidate secret.
pub fn passes(check: Check, secret: &str) -> bool {
    match check {
        Check::None => true,
        Check::Crc32Base62 => crc32_base62_ok(secret),
        Check::Jwt => jwt_ok(secret),
        Check::Pem => !pem_example(secret) && pem_body(secret).is_some_and(|b| b.len() >= 64),
        Check::OpenSsh => !pem_example(secret) && pem_body(secret).is_some_and(|b| b.starts_with(b"openssh-key-v1\0")),
        Check::Luhn => card_ok(secret),
        Check::Iban => iban_ok(secret),
        Check::Ssn => ssn_ok(secret),
        Check::UrlPassword => url_password_ok(secret),
        Check::Bech32 => bech32_ok(secret),
        Check::BasicAuth => basic_auth_ok(secret),
        Check::UserPassword => user_password_ok(secret),
        Check::Password => plain_password_ok(secret),
        Check::FlagPassword => plain_password_ok(secret) && !is_word(secret),
        Check::SecretData => secret_data_ok(secret),
        Check::DiscordId => discord_id_ok(secret),
        Check::MixedAlnum => mixed_alnum(secret),
        Check::JenkinsSecret => jenkins_secret_ok(secret),
    }
}

/// At least two letters and two digits.
fn mixed_alnum(secret: &str) -> bool {
    let b = secret.as_bytes();
    b.iter().filter(|c| c.is_ascii_digit()).count() >= 2 && b.iter().filter(|c| c.is_ascii_alphabetic()).count() >= 2
}

/// Jenkins' `Secret` payload: byte 1, the IV's length (16) and the ciphertext's length, both
/// big-endian 32-bit, then the IV and a whole number of AES blocks.
pub fn jenkins_secret_ok(secret: &str) -> bool {
    let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(secret) else {
        return false;
    };
    let word = |at: usize| raw.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let (Some(iv), Some(data)) = (word(1), word(5)) else {
        return false;
    };
    raw[0] == 1 && iv == 16 && data > 0 && data.is_multiple_of(16) && raw.len() == 9 + iv + data
}

/// GitHub classic and npm tokens: `prefix_` + 30 random + 6 base62 characters of their CRC32.
pub fn crc32_base62_ok(token: &str) -> bool {
    let Some((_, body)) = token.rsplit_once('_') else {
        return false;
    };
    if body.len() < 7 || !body.is_ascii() {
        return false;
    }
    let (random, sum) = body.split_at(body.len() - 6);
    crc32_base62(random.as_bytes()) == sum && sum.bytes().all(|b| BASE62.as_bytes().contains(&b))
}

/// The header decodes (base64url) to a JSON object naming an algorithm, and the token is not a
/// documentation example (see [`jwt_example`]).
pub fn jwt_ok(token: &str) -> bool {
    let Some(header) = token.split('.').next() else {
        return false;
    };
    if jwt_example(token) {
        return false;
    }
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header.trim_end_matches('=')) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("alg").map(|a| a.is_string()))
        .unwrap_or(false)
}

/// Claim values that documentation puts in example tokens (jwt.io's `John Doe`, `1234567890`),
/// checked lowercase in the decoded payload; an unsigned token (`alg: none`) is an example too.
const JWT_EXAMPLE_CLAIMS: &[&str] = &[
    "\"john doe\"",
    "\"jane doe\"",
    "\"1234567890\"",
    "1516239022",
    "@example.com",
    "\"example\"",
    "\"test user\"",
    "\"your-",
    "\"<",
];

/// Is `token` a documented example: its payload holds the claims tutorials use, or it is not
/// signed?
pub fn jwt_example(token: &str) -> bool {
    let decode = |part: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).ok();
    let mut parts = token.split('.');
    let (Some(header), Some(payload)) = (parts.next().and_then(decode), parts.next().and_then(decode)) else {
        return false;
    };
    let header = String::from_utf8_lossy(&header).to_ascii_lowercase();
    let payload = String::from_utf8_lossy(&payload).to_ascii_lowercase();
    header.replace(' ', "").contains("\"alg\":\"none\"")
        || JWT_EXAMPLE_CLAIMS.iter().any(|c| payload.contains(c))
        || claims_nothing(&payload)
}

/// Key fragments of the claims a token that grants something carries: RFC 7519's registered
/// claims, identities, scopes and roles, tenants and sessions (checked lowercase, as substrings).
const GRANTING_CLAIMS: &[&str] = &[
    "iss", "sub", "aud", "exp", "nbf", "iat", "jti", "id", "user", "name", "mail", "scope", "scp", "role", "perm",
    "group", "tenant", "org", "account", "client", "azp", "session", "claim", "auth", "admin", "grant",
];

/// A small payload that names no subject, issuer, expiry, scope or role (`{"some":"payload"}`,
/// `{"k":"value"}`): the token demonstrates the format and authorises nobody. Payloads over 64
/// bytes are not judged here: a real token's custom claims can be long without a known name.
fn claims_nothing(payload: &str) -> bool {
    if payload.len() > 64 {
        return false;
    }
    let Ok(serde_json::Value::Object(members)) = serde_json::from_str::<serde_json::Value>(payload) else {
        return false;
    };
    !members.is_empty() && !members.keys().any(|k| GRANTING_CLAIMS.iter().any(|c| k.contains(c)))
}

/// Is a PEM block a vendor's documented example? AWS marks the keys of its documentation by
/// writing `EXAMPLE` into the base64 body (`-----BEGIN RSA PRIVATE KEY-----\nEXAMPLEBAAKCAQEA…`),
/// which no encoder produces from a real key's DER: seven given capitals occur by chance once in
/// about 4·10¹² positions, and lowercase markers (`todo`, `fake`) are not used here for that reason.
/// A key without the marker blocks wherever it is, a documentation page included.
pub fn pem_example(block: &str) -> bool {
    block.contains("EXAMPLE")
}

/// The decoded body of a PEM block (also when its newlines are written as `\n` escapes, as in
/// JSON); `None` when it is not base64.
pub fn pem_body(block: &str) -> Option<Vec<u8>> {
    let text = block.replace("\\r\\n", "\n").replace("\\n", "\n");
    let mut body = String::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        // RFC 4716 (SSH2) blocks use `---- BEGIN …` with four dashes and a space.
        if line.starts_with("-----BEGIN") || line.starts_with("---- BEGIN") {
            inside = true;
            continue;
        }
        if line.starts_with("-----END") || line.starts_with("---- END") {
            break;
        }
        // Headers of legacy encrypted PEM (`Proc-Type:`, `DEK-Info:`) and PGP armor (`Version:`,
        // `=crc`) are not body.
        if !inside || line.is_empty() || line.contains(':') || line.starts_with('=') {
            continue;
        }
        body.push_str(line);
    }
    base64::engine::general_purpose::STANDARD.decode(body.as_bytes()).ok()
}

pub fn luhn(digits: &str) -> bool {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = (b - b'0') as u32;
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Well-known test card numbers that are not personal data.
const TEST_CARDS: &[&str] = &[
    "4111111111111111",
    "4242424242424242",
    "4012888888881881",
    "4000056655665556",
    "5555555555554444",
    "5105105105105100",
    "5200828282828210",
    "378282246310005",
    "371449635398431",
    "6011111111111117",
    "6011000990139424",
    "3530111333300000",
    "30569309025904",
    "38520000023237",
];

/// A plausible payment card number: 13–19 digits (separators allowed), a known issuer prefix,
/// Luhn, not a documented test number, not one repeated digit.
pub fn card_ok(candidate: &str) -> bool {
    let digits: String = candidate.chars().filter(char::is_ascii_digit).collect();
    let issuer = matches!(digits.as_bytes().first(), Some(b'3' | b'4' | b'5' | b'6' | b'2'));
    (13..=19).contains(&digits.len())
        && issuer
        && luhn(&digits)
        && !TEST_CARDS.contains(&digits.as_str())
        && !digits.bytes().all(|b| b == digits.as_bytes()[0])
}

/// IBAN lengths of common countries (others: 15 to 34).
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AT", 20),
    ("BE", 16),
    ("CH", 21),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("ES", 24),
    ("FI", 18),
    ("FR", 27),
    ("GB", 22),
    ("GR", 27),
    ("HU", 28),
    ("IE", 22),
    ("IT", 27),
    ("LU", 20),
    ("NL", 18),
    ("NO", 15),
    ("PL", 28),
    ("PT", 25),
    ("RO", 24),
    ("SE", 24),
    ("SK", 24),
    ("TR", 26),
];

pub fn iban_ok(candidate: &str) -> bool {
    let s: String = candidate.chars().filter(|c| !c.is_whitespace()).collect();
    let b = s.as_bytes();
    if b.len() < 15
        || b.len() > 34
        || !b[..2].iter().all(u8::is_ascii_uppercase)
        || !b[2..4].iter().all(u8::is_ascii_digit)
    {
        return false;
    }
    if !b.iter().all(u8::is_ascii_alphanumeric) {
        return false;
    }
    if let Some((_, len)) = IBAN_LENGTHS.iter().find(|(cc, _)| cc.as_bytes() == &b[..2])
        && *len != b.len()
    {
        return false;
    }
    let rearranged = format!("{}{}", &s[4..], &s[..4]);
    mod97(&rearranged) == 1
}

/// SSNs never issued or published as examples.
const FAKE_SSNS: &[&str] = &["078051120", "219099999", "123456789", "111111111", "987654320"];

/// `ddd-dd-dddd` (one separator kind) following the issuance rules.
pub fn ssn_ok(candidate: &str) -> bool {
    let b = candidate.as_bytes();
    let (area, group, serial) = match b.len() {
        11 if b[3] == b[6] && matches!(b[3], b'-' | b' ') => (&candidate[0..3], &candidate[4..6], &candidate[7..11]),
        _ => return false,
    };
    let all_digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    if !(all_digits(area) && all_digits(group) && all_digits(serial)) {
        return false;
    }
    let joined = format!("{area}{group}{serial}");
    let never_issued = area == "000" || area == "666" || area.starts_with('9') || group == "00" || serial == "0000";
    let published = FAKE_SSNS.contains(&joined.as_str()) || joined.bytes().all(|c| c == joined.as_bytes()[0]);
    !never_issued && !published
}

/// The password part of `scheme://user:password@host` is not a placeholder.
pub fn url_password_ok(url: &str) -> bool {
    let Some(rest) = url.split_once("://").map(|(_, r)| r) else {
        return false;
    };
    let Some(userinfo) = rest.split('@').next().filter(|_| rest.contains('@')) else {
        return false;
    };
    // A multi-host URL (`https://a.com:123,foo:bar@b.com`) lists `host:port,` before the
    // userinfo of the last host: the credentials are what follows the last comma.
    let userinfo = match userinfo.rsplit_once(',') {
        Some((hosts, last)) if hosts.contains(':') && last.contains(':') => last,
        _ => userinfo,
    };
    let Some((user, password)) = userinfo.split_once(':') else {
        return false;
    };
    !documented(user, &password.replace("%20", " ")) && password_ok(user, password)
}

/// The example credentials of RFC 7617 (Basic; in URLs often without the space, as in hyper's
/// and reqwest's documentation) and RFC 6749 (OAuth 2.0 client credentials).
fn documented(user: &str, password: &str) -> bool {
    const DOCUMENTED: &[(&str, &str)] = &[
        ("Aladdin", "open sesame"),
        ("Aladdin", "opensesame"),
        ("s6BhdRkqt3", "gX1fBat3bV"),
        ("s6BhdRkqt3", "7Fjfp0ZBr1KtDRbnfVdmIw"),
    ];
    DOCUMENTED.contains(&(user, password))
}

/// A password that is not empty, the user name, a trivial word, a placeholder or too short and
/// uniform to be anything but an example (`abc`, `1111`).
fn password_ok(user: &str, password: &str) -> bool {
    // A command line quoted in source code ends with the string's escaped newline (`\n`).
    let password = password.trim_end_matches("\\n").trim_end_matches("\\r");
    /// Passwords of examples and local development setups.
    const TRIVIAL: &[&str] = &[
        "password", "pass", "passwd", "pwd", "secret", "admin", "root", "user", "test", "guest", "postgres", "mysql",
        "redis",
    ];
    password.len() >= 5
        && super::filter::entropy(password.as_bytes()) >= 2.0
        && password != user
        && !TRIVIAL.contains(&password.to_ascii_lowercase().as_str())
        && !["password", "passwd"].iter().any(|w| letters(password).contains(w))
        && !super::filter::is_placeholder(password)
}

/// The letters of `value`, lowercase: `Pass@Word1` reads `password`.
fn letters(value: &str) -> String {
    value.chars().filter(char::is_ascii_alphabetic).map(|c| c.to_ascii_lowercase()).collect()
}

/// HTTP Basic credentials: the value decodes (base64) to printable `user:password` with a real
/// password.
pub fn basic_auth_ok(value: &str) -> bool {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    let Ok(bytes) = STANDARD.decode(value).or_else(|_| STANDARD_NO_PAD.decode(value.trim_end_matches('='))) else {
        return false;
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return false;
    };
    let Some((user, password)) = text.split_once(':') else {
        return false;
    };
    !user.is_empty()
        && !text.chars().any(char::is_control)
        && !documented(user, password)
        && password_ok(user, password)
}

/// `user:password` as a command line passes it (`curl -u`, `--user`): a real password.
pub fn user_password_ok(value: &str) -> bool {
    value.split_once(':').is_some_and(|(user, password)| {
        !user.is_empty() && !documented(user, password) && password_ok(user, password) && !password.starts_with('$')
    })
}

/// A password written on its own (`ClearTextPassword`, `--password=`): not a placeholder, a
/// reference or a trivial word.
pub fn plain_password_ok(value: &str) -> bool {
    password_ok("", value) && !value.starts_with('$') && !value.starts_with('%')
}

/// Only ASCII letters of one case, as a word of prose (`options`, `instead`) or a placeholder
/// in capitals (`VALUE`) is.
fn is_word(value: &str) -> bool {
    value.bytes().all(|b| b.is_ascii_lowercase()) || value.bytes().all(|b| b.is_ascii_uppercase())
}

/// A Kubernetes `Secret`'s `data:` value: base64 of printable text that is itself a password
/// (not empty, a placeholder or a trivial word), or of binary key material.
pub fn secret_data_ok(value: &str) -> bool {
    use base64::engine::general_purpose::STANDARD;
    let Ok(bytes) = STANDARD.decode(value) else {
        return false;
    };
    match std::str::from_utf8(&bytes) {
        Ok(text) => {
            let text = text.trim_end_matches(['\n', '\r']);
            !text.chars().any(char::is_control) && plain_password_ok(text)
        }
        Err(_) => bytes.len() >= 16,
    }
}

/// Is `value` base64 of printable text that is a placeholder (`username:password`,
/// `changeme`)? Such a value is an encoded example, not a credential.
pub fn encodes_placeholder(value: &str) -> bool {
    use base64::engine::general_purpose::STANDARD;
    if value.len() < 8 || !value.len().is_multiple_of(4) {
        return false;
    }
    let Some(text) = STANDARD.decode(value).ok().and_then(|b| String::from_utf8(b).ok()) else {
        return false;
    };
    if text.chars().any(char::is_control) {
        return false;
    }
    match text.split_once(':') {
        Some(_) => !basic_auth_ok(value),
        None => !plain_password_ok(&text),
    }
}

/// A Discord bot token's first part: base64 of the bot's numeric id (a 17 to 20 digit
/// snowflake).
pub fn discord_id_ok(token: &str) -> bool {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let Some(id) = token.split('.').next() else {
        return false;
    };
    let id = id.trim_end_matches('=');
    let Ok(bytes) = URL_SAFE_NO_PAD.decode(id).or_else(|_| STANDARD_NO_PAD.decode(id)) else {
        return false;
    };
    (17..=20).contains(&bytes.len()) && bytes.iter().all(u8::is_ascii_digit) && bytes[0] != b'0'
}

/// A bech32 string (BIP-173): `hrp` `1` data, one case, data in the bech32 alphabet, valid
/// checksum.
pub fn bech32_ok(candidate: &str) -> bool {
    if candidate.bytes().any(|b| b.is_ascii_lowercase()) && candidate.bytes().any(|b| b.is_ascii_uppercase()) {
        return false;
    }
    let lower = candidate.to_ascii_lowercase();
    let Some(pos) = lower.rfind('1') else {
        return false;
    };
    let (hrp, data) = (&lower[..pos], &lower[pos + 1..]);
    if hrp.is_empty() || data.len() < 6 || !hrp.bytes().all(|b| (33..=126).contains(&b)) {
        return false;
    }
    let mut values = bech32_hrp_expand(hrp);
    for b in data.bytes() {
        match BECH32.bytes().position(|c| c == b) {
            Some(v) => values.push(v as u8),
            None => return false,
        }
    }
    bech32_polymod(&values) == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_numbers() {
        assert!(card_ok("4532 0151 1283 0366"));
        assert!(!card_ok("4532 0151 1283 0367"), "bad check digit");
        assert!(!card_ok("4111 1111 1111 1111"), "documented test number");
        assert!(!card_ok("1234 5678 9012 3456"), "no issuer");
    }

    #[test]
    fn ibans() {
        assert!(iban_ok("GB82 WEST 1234 5698 7654 32"));
        assert!(iban_ok("DE89370400440532013000"));
        assert!(!iban_ok("DE89370400440532013001"));
        assert!(!iban_ok("GB82WEST123456987654"), "wrong length for GB");
    }

    #[test]
    fn ssns() {
        assert!(ssn_ok("536-22-1234"));
        for bad in [
            "000-22-1234",
            "666-22-1234",
            "912-22-1234",
            "536-00-1234",
            "536-22-0000",
            "078-05-1120",
            "536-22 1234",
            "123-45-6789",
        ] {
            assert!(!ssn_ok(bad), "{bad}");
        }
    }

    #[test]
    fn bech32_checksums() {
        // BIP-173 test vectors.
        assert!(bech32_ok("A12UEL5L"));
        assert!(bech32_ok("abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw"));
        assert!(!bech32_ok("abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxx"), "bad checksum");
        assert!(!bech32_ok("A12uEL5L"), "mixed case");
    }

    #[test]
    fn basic_auth() {
        assert!(basic_auth_ok("ZGVwbG95OlF4N3ZMbTJwUjl0Sw==")); // deploy:Qx7vLm2pR9tK
        assert!(!basic_auth_ok("dXNlcm5hbWU6cGFzc3dvcmQ=")); // username:password
        assert!(!basic_auth_ok("dXNlcjp1c2Vy")); // user:user
        assert!(!basic_auth_ok("bm9jb2xvbg==")); // nocolon
        assert!(!basic_auth_ok("czZCaGRSa3F0MzpnWDFmQmF0M2JW"), "RFC 6749's example");
        assert!(!basic_auth_ok("QWxhZGRpbjpvcGVuIHNlc2FtZQ=="), "RFC 7617's example");
    }

    #[test]
    fn ssh2_blocks_have_a_body() {
        // Assembled at run time: the file itself holds no key-shaped block.
        let label = ["SSH2", "ENCRYPTED PRIVATE KEY"].join(" ");
        let body = "P2/56wAAAi4AAAA3aWYtbW9kbntzaWdue3JzYS1wa2NzMS1zaGExfSxlbmNyeXB0e3JzYS1wa2NzMXYyLW9hZXB9fQ==";
        let block = format!("---- BEGIN {label} ----\nComment: \"k\"\n{body}\n---- END {label} ----");
        let block = block.as_str();
        assert!(pem_body(block).is_some_and(|b| b.len() >= 64));
    }

    #[test]
    fn url_passwords() {
        assert!(url_password_ok(&format!("postgres://app:{}@db:5432/app", "Zx81kq0Pa9")));
        assert!(!url_password_ok("postgres://app:${DB_PASSWORD}@db/app"));
        assert!(!url_password_ok("postgres://app:password@db/app"));
        assert!(!url_password_ok("https://example.com/path"));
        // RFC 7617's example, as hyper-util's docs and tests write it.
        assert!(!url_password_ok("https://Aladdin:opensesame@localhost:8887"));
        assert!(!url_password_ok("http://Aladdin:open%20sesame@y.ep"));
        assert!(url_password_ok(&format!("http://Aladdin:{}@y.ep", "Zx81kq0Pa9")));
        assert!(!url_password_ok("https://user:abc@host.net"), "too short");
        assert!(!url_password_ok("https://bob:1111@host.net"), "too short and uniform");
        assert!(!url_password_ok("https://bob:aaaa1111@host.net"), "uniform");
        // A multi-host URL: the userinfo is after the last host's comma.
        assert!(!url_password_ok("https://foo.com:123,foo:bar@bar.com/path"));
        assert!(url_password_ok(&format!("https://foo.com:123,app:{}@bar.com/path", "Zx81kq0Pa9")));
    }

    #[test]
    fn command_line_and_standalone_passwords() {
        assert!(user_password_ok(&format!("deploy:{}", "Qx7vLm2pR9tK")));
        assert!(!user_password_ok("user:password"));
        assert!(!user_password_ok("user:$PASSWORD"));
        assert!(!user_password_ok("nocolon"));
        assert!(plain_password_ok(&["Qx7v", "Lm2p", "R9tK"].concat()));
        for bad in ["%NUGET_PASSWORD%", "$PASSWORD", "password", "abc", "<password>", "changeme", "Pass@Word1"] {
            assert!(!plain_password_ok(bad), "{bad}");
        }
    }

    #[test]
    fn secret_data_decodes_to_a_password() {
        use base64::Engine as _;
        let enc = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert!(secret_data_ok(&enc(&["Qx7v", "Lm2p", "R9tK"].concat())));
        assert!(!secret_data_ok(&enc("password")));
        assert!(!secret_data_ok(&enc("changeme")));
        assert!(!secret_data_ok("not base64!"));
    }

    #[test]
    fn example_jwts_claim_nothing() {
        use base64::Engine as _;
        let part = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let token = |payload: &str| format!("{}.{}.{}", part(r#"{"alg":"HS256"}"#), part(payload), "x".repeat(43));
        assert!(jwt_example(&token(r#"{"some":"payload"}"#)));
        assert!(jwt_example(&token(r#"{"k":"value"}"#)));
        for granting in
            [r#"{"sub":"u-4821"}"#, r#"{"user_id":"4821"}"#, r#"{"role":"service"}"#, r#"{"exp":1900000000}"#]
        {
            assert!(!jwt_example(&token(granting)), "{granting}");
        }
        let long = format!(r#"{{"k":"{}"}}"#, "v".repeat(80));
        assert!(!jwt_example(&token(&long)), "a long payload is not judged");
    }

    #[test]
    fn pem_examples_carry_the_vendors_marker() {
        let label = ["RSA", "PRIVATE KEY"].join(" ");
        let block = |body: &str| format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----");
        let body = "MIIEowIBAAKCAQEAwYSiPeJLSi6k8J4".repeat(4);
        assert!(!pem_example(&block(&body)));
        assert!(pem_example(&block(&body.replacen("MIIEowI", "EXAMPLE", 1))));
        assert!(!pem_example(&block(&body.replacen("MIIEowI", "example", 1))), "lowercase is chance, not a marker");
    }

    #[test]
    fn discord_ids() {
        use base64::Engine as _;
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("123456789012345678");
        assert!(discord_id_ok(&format!("{id}.AbCdEf.{}", "x".repeat(27))));
        let word = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("abcdefghijklmnopqr");
        assert!(!discord_id_ok(&format!("{word}.AbCdEf.x")));
    }
}
