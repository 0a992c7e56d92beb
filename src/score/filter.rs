//! Is a candidate a placeholder, a reference or boilerplate rather than a secret?
//!
//! Applied after the structural checks: templated values (`${VAR}`, `{{ x }}`, `<your-key>`,
//! `%VAR%`, `$VAR`), redactions (`{REDACTED}`, `xxxx`, `****`), documented examples
//! (`EXAMPLE`, `AKIAIOSFODNN7EXAMPLE`, the tokens RFC 5849/6749/6750 print), runs of one character and sequences (`abcdef`,
//! `123456`); and the entropy measure used by rules with a minimum.

/// Shannon entropy of `s` in bits per byte.
pub fn entropy(s: &[u8]) -> f32 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in s {
        counts[b as usize] += 1;
    }
    let n = s.len() as f32;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f32 / n;
            -p * p.log2()
        })
        .sum()
}

/// How many character classes `s` mixes: lowercase, uppercase, digits, others.
pub fn char_classes(s: &[u8]) -> usize {
    let has = |f: fn(&u8) -> bool| usize::from(s.iter().any(f));
    has(u8::is_ascii_lowercase)
        + has(u8::is_ascii_uppercase)
        + has(u8::is_ascii_digit)
        + has(|c| !c.is_ascii_alphanumeric())
}

/// Substrings that mark a value as an example, a template or a redaction (checked lowercase).
const MARKERS: &[&str] = &[
    "example",
    "redacted",
    "xxxx",
    "****",
    "....",
    "<your",
    "your_",
    "your-",
    "yourkey",
    "changeme",
    "change_me",
    "placeholder",
    "dummy",
    "fake",
    "sample",
    "insert",
    "replace",
    "todo",
    "fixme",
    "${",
    "{{",
    "}}",
    "<%",
    "%>",
    "%(",
    "env(",
    "getenv",
    "environ",
    "process.env",
    "secrets.",
];

/// Example tokens that specifications publish in their text, which libraries implementing them
/// quote in docstrings and tests: RFC 5849 (OAuth 1.0: consumer keys, tokens, secrets and the
/// verifier of its sections 1.2 and 3.1), RFC 6749 (OAuth 2.0: the access and refresh tokens and
/// the authorization code of sections 4.1 and 5.1) and RFC 6750 (a bearer token). They are
/// recognised exactly: a value that merely looks like them is judged as any other.
const SPECIFICATION_EXAMPLES: &[&str] = &[
    "dpf43f3p2l4k3l03",
    "kd94hf93k423kf44",
    "hh5s93j4hdidpola",
    "hdhd0244k9j7ao03",
    "hfdp7dh39dks9884",
    "nnch734d00sl2jdk",
    "pfkkdhi9sl3r4s00",
    "0685bd9184jfhq22",
    "ad180jjd733klru7",
    "2YotnFZFEjr1zCsicMWpAA",
    "tGzv3JOkF0XG5Qx2TlKWIA",
    "SplxlOBeZQQYbYS6WxSbIA",
    "mF_9.B5f-4.1JqM",
];

/// [`MARKERS`] in one automaton, any case: a candidate is checked once, not once per marker
/// (a file of 2 million `a@a.a` is 2 million candidates).
fn markers() -> &'static aho_corasick::AhoCorasick {
    static MARKERS_AC: std::sync::OnceLock<aho_corasick::AhoCorasick> = std::sync::OnceLock::new();
    MARKERS_AC.get_or_init(|| {
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(MARKERS)
            .expect("the placeholder markers compile")
    })
}

/// Is `value` a placeholder rather than a secret?
pub fn is_placeholder(value: &str) -> bool {
    let v = value.trim_matches(|c| c == '"' || c == '\'' || c == '`');
    if v.is_empty() || SPECIFICATION_EXAMPLES.contains(&v) {
        return true;
    }
    if markers().is_match(v) {
        return true;
    }
    let b = v.as_bytes();
    // <name>, %NAME%, $NAME, @NAME@, and a format string's {name} / {} / {0} (Rust, Python)
    let wrapped = |open: u8, close: u8| b.len() > 2 && b[0] == open && b[b.len() - 1] == close;
    if wrapped(b'<', b'>') || wrapped(b'%', b'%') || wrapped(b'@', b'@') || wrapped(b'[', b']') {
        return true;
    }
    if b.len() >= 2 && b[0] == b'{' && b[b.len() - 1] == b'}' && b[1..b.len() - 1].iter().all(is_name_byte) {
        return true;
    }
    if b[0] == b'$' && b[1..].iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_') {
        return true;
    }
    is_run(b) || is_sequence(b) || is_interleaved_sequence(b)
}

fn is_name_byte(c: &u8) -> bool {
    c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.' || *c == b':'
}

/// Two sequences woven together (`a1b2c3d4…`, `1a2b3c…`): a typed-in placeholder, not a key.
fn is_interleaved_sequence(b: &[u8]) -> bool {
    if b.len() < 8 {
        return false;
    }
    let even: Vec<u8> = b.iter().step_by(2).copied().collect();
    let odd: Vec<u8> = b.iter().skip(1).step_by(2).copied().collect();
    is_sequence(&even) && is_sequence(&odd)
}

/// A run dominated by one repeated character (`aaaaaaaa`, `00000000`, `=====`).
fn is_run(b: &[u8]) -> bool {
    if b.len() < 6 {
        return false;
    }
    let mut best = 0;
    let mut current = 0;
    for (i, &c) in b.iter().enumerate() {
        current = if i > 0 && b[i - 1] == c { current + 1 } else { 1 };
        best = best.max(current);
    }
    best * 2 >= b.len() || best >= 8
}

/// An ascending or descending sequence over most of the value (`abcdefgh`, `12345678`).
fn is_sequence(b: &[u8]) -> bool {
    if b.len() < 6 {
        return false;
    }
    let steps = b.windows(2).filter(|w| w[1] as i16 - w[0] as i16 == 1 || w[0] as i16 - w[1] as i16 == 1).count();
    steps * 4 >= (b.len() - 1) * 3
}

/// Typed-in sample text that walks the alphabet and the digits with case changes and a few
/// breaks (`abCDeFGhiJKlmnOPqrST…`, `a123b45c6d78e9f0…`, `12cs345-67cd-890b-…`): three in ten
/// of its neighbouring letters or digits are the next one in order (case aside), where a random
/// value has about one in forty. Not part of [`is_placeholder`]: vendors' own test tokens are
/// often written this way and a vendor format knows better; the service detector asks it.
pub fn walks_alphabet(value: &str) -> bool {
    let b = value.as_bytes();
    let (mut pairs, mut steps) = (0usize, 0usize);
    for w in b.windows(2) {
        let (x, y) = (w[0].to_ascii_lowercase(), w[1].to_ascii_lowercase());
        if !(x.is_ascii_alphanumeric() && y.is_ascii_alphanumeric()) {
            continue;
        }
        pairs += 1;
        steps += usize::from(y == x + 1);
    }
    pairs >= 8 && steps * 10 >= pairs * 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphabet_walks() {
        for v in [
            "abCDeFGhiJKlmnOPqrSTuvwxYZ1aBCdEFghijK7LM51nOpqRSTuv3WxY3ZabC5dEFGhI2Jk3LmnoPQ6RST9",
            "AB1C2defGHijkLMNo3PqQRstUvwxyzaBCDEfghh4ijklMN5opqrStuVWxyzAbCDEfghIJ",
            "a123b45c6d78e9f012a34cd5e6a7890b12c3d45e6f78a1b234c56d7e890a1234",
            "12cs345-67cd-890b-1cd2-c3a4567d89f1",
        ] {
            assert!(walks_alphabet(v), "{v}");
        }
        for v in
            ["ze1z7svucm5z17kyizcve7gin44socz5", "8bklk8bl1k3sB38D9B3l0enyWT8c09B30lkq0blk", "Q7v2LmP9xR4tK8wZ3nB6"]
        {
            assert!(!walks_alphabet(v), "{v}");
        }
    }

    #[test]
    fn placeholders() {
        for p in [
            "${STRIPE_KEY}",
            "{{ api_key }}",
            "<your-key>",
            "%API_KEY%",
            "$TOKEN",
            "xxxxxxxxxxxxxxxx",
            "{REDACTED}",
            "AKIAIOSFODNN7EXAMPLE",
            "aaaaaaaaaaaa",
            "abcdefghijklmnop",
            "1234567890",
            "changeme",
            "os.environ['X']",
            "process.env.X",
            "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4",
            "1a2b3c4d5e6f7a8b",
            "{password}",
            "{}",
            "{0}",
            "{db.password}",
            "%(SMTP_PASS)s",
            "ad180jjd733klru7",
            "2YotnFZFEjr1zCsicMWpAA",
        ] {
            assert!(is_placeholder(p), "{p}");
        }
        // The specifications' examples are matched exactly, not by their look.
        for real in ["Q7v2LmP9xR4tK8wZ3nB6", "Zx81kq0Pa9uT", "9f86d081884c7d659a2feaa0c55ad015", "ad180jjd733klru8"] {
            assert!(!is_placeholder(real), "{real}");
        }
    }

    #[test]
    fn entropy_orders_randomness() {
        assert!(entropy(b"aaaaaaaa") < 0.1);
        assert!(entropy(b"9f86d081884c7d659a2feaa0c55ad015") > 3.5);
    }
}
