//! The generic detector: `key = value` where the key names a secret and the value looks random.
//!
//! No big regex (the main cost and false-positive source of gitleaks' `generic-api-key`): from an
//! anchor inside a key name, a hand-written parse finds the whole key, an assignment operator and
//! a literal value, then rejects what is not a literal secret — expressions, references,
//! placeholders, words, paths, short or low-entropy values, and keys that only mention a secret
//! (`token_type`, `public_key`, `max_tokens`). Findings are low-confidence warnings.

use std::ops::Range;

use super::filter::{char_classes, entropy, is_placeholder};

/// Key names that contain a keyword but do not hold a secret.
const NOT_SECRET_KEYS: &[&str] = &[
    "public",
    "_url",
    "url_",
    "uri",
    "_path",
    "path_",
    "_file",
    "file_",
    "_name",
    "name_",
    "_type",
    "type_",
    "length",
    "_len",
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
    "expir",
    "ttl",
    "timeout",
    "limit",
    "endpoint",
    "header",
    "tokenizer",
    "tokens",
    "_id",
    "id_",
    "prefix",
    "suffix",
    "kind",
    "mode",
    "enabled",
    "required",
    "version",
    "reset",
    "forgot",
    "confirm",
    "validation",
    "strength",
    "policy",
    "manager",
    "provider",
    "store",
    "author",
];

/// Values that are language keywords or common literals, not secrets.
const NOT_SECRET_VALUES: &[&str] = &["true", "false", "null", "none", "nil", "undefined", "string", "str", "bytes"];

/// A parsed assignment whose value may be a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Parse an assignment around the keyword found at `at`, and keep it only if the value looks
/// like a secret literal. `bare` says whether an unquoted value can be a literal: in
/// configuration (`.env`, YAML, INI) it can; in a programming language an unquoted value is an
/// identifier, a type (`token: crate::Token`) or a number, never a string.
pub fn find(hay: &[u8], at: usize, bare: bool) -> Option<Assignment> {
    // The whole key around the keyword.
    let mut ks = at;
    while ks > 0 && is_key_byte(hay[ks - 1]) && at - ks < 64 {
        ks -= 1;
    }
    let mut ke = at;
    while ke < hay.len() && is_key_byte(hay[ke]) && ke - at < 64 {
        ke += 1;
    }
    // Optional closing quote of a quoted key, then the operator.
    let mut i = ke;
    if i < hay.len() && matches!(hay[i], b'"' | b'\'' | b'`' | b']') {
        i += 1;
    }
    i = skip_blanks(hay, i);
    let op_len = operator(&hay[i.min(hay.len())..])?;
    i = skip_blanks(hay, i + op_len);
    let value = literal(hay, i, bare)?;
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
    // `count` (`token_count`) is also inside `account` (`AccountKey`, `service_account_password`).
    let key = key.to_ascii_lowercase().replace("account", "acct");
    NOT_SECRET_KEYS.iter().any(|w| key.contains(w))
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
            .position(|&b| b.is_ascii_whitespace() || matches!(b, b',' | b';' | b')' | b'}' | b']' | b'#'))
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
    let classes = char_classes(b);
    // Identifiers and prose (`my_secret_value`, `Hello.World`) are letters with a separator.
    let wordy = b.iter().all(|c| c.is_ascii_alphabetic() || matches!(c, b'_' | b'-' | b'.' | b'/'));
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
        assert_eq!(check(r#"db_password = "Zx81kq0Pa9uT77ab""#), Some("Zx81kq0Pa9uT77ab"));
        assert_eq!(check("API_TOKEN=9f86d081884c7d659a2feaa0c55ad015"), Some("9f86d081884c7d659a2feaa0c55ad015"));
        assert_eq!(check(r#"  "client_secret": "q8W2-Lm4s9XaPz71""#), Some("q8W2-Lm4s9XaPz71"));
        assert_eq!(check("secret: Tb7x9QmL2vZ4kW8p"), Some("Tb7x9QmL2vZ4kW8p"));
        assert_eq!(check("MYSQL_PASS=Tb7x9QmL2vZ4kW8p"), Some("Tb7x9QmL2vZ4kW8p"));
        assert_eq!(check("encryption_key: Tb7x9QmL2vZ4kW8p"), Some("Tb7x9QmL2vZ4kW8p"));
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
            check_in(r#"let api_token = "9f86d081884c7d659a2feaa0c55ad015";"#, false),
            Some("9f86d081884c7d659a2feaa0c55ad015")
        );
    }
}
