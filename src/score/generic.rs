//! The generic detector: `key = value` where the key names a secret and the value looks random.
//!
//! No big regex (the main cost and false-positive source of gitleaks' `generic-api-key`): from an
//! anchor inside a key name, a hand-written parse finds the whole key, an assignment operator and
//! a literal value, then rejects what is not a literal secret — expressions, references,
//! placeholders, words, paths, short or low-entropy values, and keys that only mention a secret
//! (`token_type`, `public_key`, `max_tokens`). Findings are low-confidence warnings.

use std::ops::Range;

use super::filter::{char_classes, entropy, is_placeholder};

/// Words of key names that contain a keyword but do not hold a secret (`token_url`,
/// `publicKey`, `password_min_length`, `next_token`, `KeyId`), compared with the key's words
/// (`authorization_header` is `authorization`, `header`; `admin` is not `min`).
const NOT_SECRET_WORDS: &[&str] = &[
    "public",
    "url",
    "uri",
    "path",
    "file",
    "filename",
    "name",
    "type",
    "length",
    "len",
    "max",
    "min",
    "count",
    "size",
    "policy",
    "format",
    "prompt",
    "field",
    "label",
    "hint",
    "placeholder",
    "regex",
    "pattern",
    "hash",
    "ttl",
    "timeout",
    "limit",
    "endpoint",
    "header",
    "tokenizer",
    "tokens",
    "id",
    "ids",
    "prefix",
    "suffix",
    "kind",
    "mode",
    "enabled",
    "enable",
    "required",
    "version",
    "reset",
    "forgot",
    "confirm",
    "validation",
    "validator",
    "strength",
    "manager",
    "provider",
    "author",
    "next",
    "output",
    "input",
    "continuation",
    "pagination",
    "expiry",
    "expires",
    "expiration",
    "expire",
    "expired",
    "lifetime",
    "method",
    "scheme",
    "style",
    "strategy",
    "algorithm",
    "rotation",
    "location",
    "arn",
    "ref",
];

/// Endings of flat keys written as one word (`authtype`, `tokenlength`, `passwordpolicy`): a word
/// that ends so only mentions a secret (a word that starts so may be a service: `typeform`).
const NOT_SECRET_ENDINGS: &[&str] = &[
    "type",
    "length",
    "policy",
    "format",
    "prompt",
    "pattern",
    "timeout",
    "endpoint",
    "header",
    "placeholder",
    "version",
    "expiry",
    "expiration",
    "strength",
    "provider",
    "manager",
    "url",
    "uri",
    "path",
    "file",
    "name",
];

/// Fragments anywhere in the key (`tokenizer_config`).
const NOT_SECRET_FRAGMENTS: &[&str] = &["tokeniz"];

/// Values that are language keywords or common literals, not secrets.
const NOT_SECRET_VALUES: &[&str] = &["true", "false", "null", "none", "nil", "undefined", "string", "str", "bytes"];

/// A parsed assignment whose value may be a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

pub fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// The identifier around `at` (at most 64 bytes each way): the key an anchor is part of.
pub fn key_around(hay: &[u8], at: usize) -> Range<usize> {
    let mut start = at;
    while start > 0 && is_key_byte(hay[start - 1]) && at - start < 64 {
        start -= 1;
    }
    let mut end = at;
    while end < hay.len() && is_key_byte(hay[end]) && end - at < 64 {
        end += 1;
    }
    start..end
}

/// Parse an assignment around the keyword found at `at`, and keep it only if the value looks
/// like a secret literal. `bare` says whether an unquoted value can be a literal: in
/// configuration (`.env`, YAML, INI) it can; in a programming language an unquoted value is an
/// identifier, a type (`token: crate::Token`) or a number, never a string.
pub fn find(hay: &[u8], at: usize, bare: bool) -> Option<Assignment> {
    // The whole key around the keyword.
    let Range { start: ks, end: ke } = key_around(hay, at);
    let value = value_of(hay, ks, ke, bare)?;
    // The key's words last: most keyword hits are not assignments at all.
    if only_mentions_secret(std::str::from_utf8(&hay[ks..ke]).ok()?) {
        return None;
    }
    let text = std::str::from_utf8(&hay[value.clone()]).ok()?;
    if looks_secret(text) { Some(Assignment { key: ks..ke, value }) } else { None }
}

/// Does a key that contains a credential word only mention one (`token_url`, `public_key`,
/// `password_min_length`)?
pub fn only_mentions_secret(key: &str) -> bool {
    only_mentions_secret_unless(key, |_| false)
}

/// [`only_mentions_secret`], where a word for which `is_name` holds (a service's name:
/// `stackpath`, `typeform`) is never read as an ending (`path`, `type`).
pub fn only_mentions_secret_unless(key: &str, is_name: impl Fn(&[u8]) -> bool) -> bool {
    let b = key.as_bytes();
    let contains = |f: &str| b.windows(f.len()).any(|w| w.eq_ignore_ascii_case(f.as_bytes()));
    if NOT_SECRET_FRAGMENTS.iter().any(|f| contains(f)) {
        return true;
    }
    let mut found = false;
    super::words::for_words(b, |w| {
        let ends = |x: &str| w.len() > x.len() && w[w.len() - x.len()..].eq_ignore_ascii_case(x.as_bytes());
        found |= NOT_SECRET_WORDS.iter().any(|x| x.as_bytes().eq_ignore_ascii_case(w))
            || (NOT_SECRET_ENDINGS.iter().any(|x| ends(x)) && !is_name(&w.to_ascii_lowercase()));
    });
    found
}

/// The literal given to the key `ks..ke`: after an assignment operator (a closing quote of a
/// quoted key before it), or compared with it (`if token == "…"`, quoted only), or as a C macro's
/// body (`#define API_KEY "…"`), or as an XML element's text (`<password>…</password>`).
fn value_of(hay: &[u8], ks: usize, ke: usize, bare: bool) -> Option<Range<usize>> {
    if ks > 0 && hay[ks - 1] == b'<' && hay.get(ke) == Some(&b'>') {
        let start = ke + 1;
        let len = hay[start..].iter().take(512).position(|&b| b == b'<' || b == b'\n')?;
        return (hay.get(start + len) == Some(&b'<') && len > 0).then_some(start..start + len);
    }
    if defined_on_its_line(hay, ks) && matches!(hay.get(ke), Some(b' ' | b'\t')) {
        let i = skip_blanks(hay, ke);
        return if hay.get(i) == Some(&b'"') { literal(hay, i, false) } else { None };
    }
    // Optional closing quote of a quoted key and closing bracket of an index (`['db_password']`),
    // then the operator.
    let mut i = ke;
    if i < hay.len() && matches!(hay[i], b'"' | b'\'' | b'`') {
        i += 1;
    }
    if i < hay.len() && hay[i] == b']' {
        i += 1;
    }
    i = skip_blanks(hay, i);
    if let Some(n) = comparison(&hay[i.min(hay.len())..]) {
        let j = skip_blanks(hay, i + n);
        return if matches!(hay.get(j), Some(b'"' | b'\'')) { literal(hay, j, false) } else { None };
    }
    let op_len = match operator(&hay[i.min(hay.len())..]) {
        Some(n) => n,
        // `var apiKey string = "…"` (Go)
        None if i > ke => return typed(hay, i).and_then(|j| literal(hay, j, false)),
        None => return None,
    };
    let colon = hay.get(i) == Some(&b':') && op_len == 1;
    i = skip_blanks(hay, i + op_len);
    // A typed declaration: `API_KEY: &str = "…"`, `apiKey: string = "…"`.
    if colon && let Some(j) = typed(hay, i) {
        return literal(hay, j, false);
    }
    literal(hay, i, bare)
}

/// How far back from a key its line's `#define` is looked for. Bounded so that a keyword hit
/// costs the same on a line of any length: 10 MB without a newline must not be searched back
/// to its start once per hit.
const DEFINE_REACH: usize = 256;

/// Does the line of the key starting at `ks` begin (after blanks) with `#define`, within
/// [`DEFINE_REACH`] bytes before the key?
fn defined_on_its_line(hay: &[u8], ks: usize) -> bool {
    let from = ks.saturating_sub(DEFINE_REACH);
    let line_start = match memchr::memrchr(b'\n', &hay[from..ks]) {
        Some(i) => from + i + 1,
        None if from == 0 => 0,
        None => return false,
    };
    hay[line_start..ks].trim_ascii_start().starts_with(b"#define")
}

/// Where the value starts after a type and its `=` (`&'static str = `, `String = `,
/// `Optional[str] = `), when `i` is at such a type; a comparison or `=>` is not one.
pub fn typed(hay: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    while j < hay.len()
        && j - i < 48
        && (hay[j].is_ascii_alphanumeric()
            || matches!(
                hay[j],
                b'_' | b'&' | b'\'' | b'<' | b'>' | b'[' | b']' | b':' | b'.' | b',' | b'*' | b'?' | b' '
            ))
    {
        j += 1;
    }
    let typed = j > i && hay[i].is_ascii_alphabetic() || hay.get(i) == Some(&b'&');
    let assign = hay.get(j) == Some(&b'=') && !matches!(hay.get(j + 1), Some(b'=' | b'>'));
    (typed && assign).then(|| skip_blanks(hay, j + 1))
}

/// Length of an equality comparison at the start of `s` (`==`, `===`, `!=`, `!==`).
fn comparison(s: &[u8]) -> Option<usize> {
    match s {
        [b'=', b'=', b'=', ..] | [b'!', b'=', b'=', ..] => Some(3),
        [b'=', b'=', ..] | [b'!', b'=', ..] => Some(2),
        _ => None,
    }
}

fn skip_blanks(hay: &[u8], mut i: usize) -> usize {
    while i < hay.len() && matches!(hay[i], b' ' | b'\t') {
        i += 1;
    }
    i
}

/// Length of an assignment operator at the start of `s` (`=`, `:`, `:=`, `=>`, `?=`), never a
/// comparison (`==`, `!=`, `<=`, `>=`).
fn operator(s: &[u8]) -> Option<usize> {
    match s {
        [b'=', b'=', ..] => None,
        [b':', b'=', ..] | [b'=', b'>', ..] | [b'?', b'=', ..] => Some(2),
        [b':', b':', ..] => None,
        [b'=', ..] | [b':', ..] => Some(1),
        _ => None,
    }
}

/// The value: the inside of a quoted string on one line, or a bare word up to a delimiter.
fn literal(hay: &[u8], mut i: usize, bare: bool) -> Option<Range<usize>> {
    // Rust raw strings: r"…", r#"…"#.
    if hay.get(i) == Some(&b'r') && matches!(hay.get(i + 1), Some(b'"' | b'#')) {
        i += 1;
        while hay.get(i) == Some(&b'#') {
            i += 1;
        }
    }
    let quote = *hay.get(i)?;
    if matches!(quote, b'"' | b'\'' | b'`') {
        let start = i + 1;
        let len = hay[start..].iter().take(512).position(|&b| b == quote || b == b'\n')?;
        (hay.get(start + len) == Some(&quote)).then_some(start..start + len)
    } else if !bare {
        None
    } else {
        let len = hay[i..]
            .iter()
            .take(512)
            .position(|&b| {
                b.is_ascii_whitespace()
                    || matches!(b, b',' | b';' | b')' | b'}' | b']' | b'#' | b'\\' | b'"' | b'\'' | b'`')
            })
            .unwrap_or(hay.len() - i);
        let value = i..i + len;
        // A bare value that is an expression (call, attribute, index) is code, not a literal.
        let text = &hay[value.clone()];
        if text.iter().any(|b| matches!(b, b'(' | b'[' | b'{' | b'<')) || text.first().is_some_and(|b| *b == b'$') {
            return None;
        }
        Some(value)
    }
}

/// Does a literal value look like a secret? Length, character classes, entropy; no placeholder,
/// word, path or keyword.
pub fn looks_secret(value: &str) -> bool {
    let len = value.len();
    if !(8..=256).contains(&len) || value.contains(char::is_whitespace) || is_placeholder(value) {
        return false;
    }
    if NOT_SECRET_VALUES.contains(&value.to_ascii_lowercase().as_str()) || value.contains("://") {
        return false;
    }
    let b = value.as_bytes();
    // Expressions and paths (`Jobs[-1].JobId`, `$upper(x)`, `&anchor`, `projects/p/secrets/s`,
    // `urn:ietf:params:oauth`), not literals a person or a vault produced.
    if b.iter().any(|c| matches!(c, b'[' | b']' | b'(' | b')' | b'\\'))
        || value.contains(".*")
        || value.contains(".+")
        || matches!(b[0], b'&' | b'*')
        || value.split('/').filter(|p| p.len() >= 3 && p.bytes().all(|c| c.is_ascii_alphabetic() || c == b'-')).count()
            >= 2
        || (value.split(':').count() >= 3 && value.split(':').all(|p| p.len() < 16))
    {
        return false;
    }
    let classes = char_classes(b);
    // Identifiers and prose (`my_secret_value`, `Hello.World`) are letters with a separator.
    let wordy = b.iter().all(|c| c.is_ascii_alphabetic() || matches!(c, b'_' | b'-' | b'.' | b'/' | b':'));
    let needed = if len >= 20 { 3.5 } else { 3.0 };
    classes >= 2 && !wordy && entropy(b) >= needed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str) -> Option<&str> {
        check_in(line, true)
    }

    fn check_in(line: &str, bare: bool) -> Option<&str> {
        let at =
            super::super::rules::GENERIC_KEYWORDS.iter().filter_map(|k| line.to_ascii_lowercase().find(k)).min()?;
        find(line.as_bytes(), at, bare).map(|a| &line[a.value])
    }

    #[test]
    fn assignments_of_random_literals_are_found() {
        assert_eq!(check(r#"db_password = "Zx81kq0Pa9uT77ab""#), Some("Zx81kq0Pa9uT77ab")); // rw:allow
        assert_eq!(check("API_TOKEN=9f86d081884c7d659a2feaa0c55ad015"), Some("9f86d081884c7d659a2feaa0c55ad015"));
        assert_eq!(check(r#"  "client_secret": "q8W2-Lm4s9XaPz71""#), Some("q8W2-Lm4s9XaPz71")); // rw:allow
        assert_eq!(check("secret: Tb7x9QmL2vZ4kW8p"), Some("Tb7x9QmL2vZ4kW8p"));
        assert_eq!(check("MYSQL_PASS=Tb7x9QmL2vZ4kW8p"), Some("Tb7x9QmL2vZ4kW8p")); // rw:allow
        assert_eq!(check("encryption_key: Tb7x9QmL2vZ4kW8p"), Some("Tb7x9QmL2vZ4kW8p")); // rw:allow
    }

    #[test]
    fn code_placeholders_and_lookalikes_are_not() {
        for line in [
            "password = get_password()",
            "token = self.token",
            r#"password = os.environ["DB_PASSWORD"]"#,
            r#"api_key = "${API_KEY}""#,
            r#"secret = "changeme""#,
            "if token == expected_token:",
            "token_type = Bearer_Token_Value",
            "max_tokens = 4096",
            r#"public_key = "Zx81kq0Pa9uT77ab""#,
            "password: str",
            r#"password = "correct-horse-battery""#,
            "let token = next_token(&mut lexer);",
        ] {
            assert_eq!(check(line), None, "{line}");
        }
    }

    #[test]
    fn code_takes_only_quoted_values() {
        assert_eq!(check_in("    pub const BPKI_CT_SETPWD_REQ: crate::ObjectIdentifier =", false), None);
        assert_eq!(check_in("fn f(api_key: ApiKeyV2x9) {}", false), None);
        assert_eq!(check_in("API_TOKEN=9f86d081884c7d659a2feaa0c55ad015", false), None);
        assert_eq!(
            check_in(r#"let api_token = "9f86d081884c7d659a2feaa0c55ad015";"#, false), // rw:allow
            Some("9f86d081884c7d659a2feaa0c55ad015")
        );
    }
}
