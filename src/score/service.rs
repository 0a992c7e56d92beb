//! The long tail of credentials: a value that looks random, next to a credential word and the
//! name of a service that issues keys (`LANGUAGELAYER_TOKEN = '…'`, `scrapingbee: {api_key: …}`,
//! `curl 'https://app.scrapingbee.com/api/v1/?api_key=…'`).
//!
//! The catalogue ([`Catalogue`], `services.txt`, compiled in) lists the services: names, aliases
//! and, where a vendor documents a value the randomness test would reject (all digits, short),
//! its shape. It is parsed once per process, on first use.
//!
//! [`find`] runs at each credential-word anchor (`key`, `token`, `secret`, `pass`…): it takes the
//! identifier around the anchor (the key), checks that one of its words is a credential word,
//! reads the value the key is given — after `=`, `:`, `=>`, `:=`, `==`, `,`, `(`, a CLI flag's
//! space, an XML element's `>`, an `<add key= value=>` pair, an HTTP header's `Bearer`/`Token` —
//! and keeps it only if it looks random ([`random_enough`]) or has the service's documented shape.
//! Then it looks for a service name: in the key's own words, in the words before the key and after
//! the value on its line, and in the few lines above (a YAML, JSON, TOML or XML parent, a
//! constructor call). A name that is also an ordinary word (`box`, `square`, `line`) counts only
//! inside the key itself or as a label of a host name (`api.box.com`).
//!
//! What this module does not do: block. It reports a service-keyed candidate; the collector turns
//! it into a finding, and the policy decides.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

use super::filter::{char_classes, entropy, is_placeholder};
use super::generic::is_key_byte;
pub use super::generic::key_around;
use super::words::{for_word_spans, for_words};

/// The catalogue's text.
pub const CATALOGUE: &str = include_str!("services.txt");

/// Words that make an identifier a credential's name.
const CREDENTIAL_WORDS: &[&str] = &[
    "key",
    "keys",
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "pass",
    "passphrase",
    "pat",
    "auth",
    "authtoken",
    "authkey",
    "credential",
    "credentials",
    "creds",
    "cred",
    "bearer",
    "accesskey",
    "secretkey",
    "apitoken",
    "apisecret",
    "accesstoken",
    "authorization",
];

/// The anchors of the service detector: parts of the credential words, found ASCII
/// case-insensitively (the detector checks the whole word).
/// `pat` alone starts a word in hundreds of places per MB of code (`path`, `pattern`, `patch`):
/// it is anchored only where a delimiter follows it or a separator joins it to a word.
pub const KEYWORDS: &[&str] = &[
    "key", "token", "secret", "pass", "pwd", "auth", "cred", "bearer", "pat_", "-pat", "pat-", "pat\"", "pat ", "pat=",
    "pat:", "pat'",
];

/// Words of keys whose values are random but not secret: cache and idempotency keys, cursors,
/// CSRF tokens, public, publishable and browser keys (reCAPTCHA's site key, Supabase's anon key).
const NOT_SECRET_WORDS: &[&str] = &[
    "cache",
    "idempotency",
    "idempotent",
    "dedup",
    "dedupe",
    "lock",
    "partition",
    "sort",
    "primary",
    "foreign",
    "cursor",
    "page",
    "etag",
    "nonce",
    "csrf",
    "xsrf",
    "public",
    "pub",
    "publishable",
    "site",
    "sitekey",
    "anon",
];

/// How far before a key the context reaches: lines, and bytes in all.
const LINES_ABOVE: usize = 4;
const BYTES_ABOVE: usize = 480;
/// How far along its line the context reaches on each side.
const BYTES_ALONG: usize = 160;

/// A value's alphabet in a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    Digits,
    Hex,
    Lower,
    Upper,
    Alnum,
    /// `A-Za-z0-9_-`
    Url,
    /// `A-Za-z0-9+/=`
    Base64,
}

impl Charset {
    fn admits(self, b: u8) -> bool {
        match self {
            Charset::Digits => b.is_ascii_digit(),
            Charset::Hex => b.is_ascii_hexdigit(),
            Charset::Lower => b.is_ascii_lowercase() || b.is_ascii_digit(),
            Charset::Upper => b.is_ascii_uppercase() || b.is_ascii_digit(),
            Charset::Alnum => b.is_ascii_alphanumeric(),
            Charset::Url => b.is_ascii_alphanumeric() || b == b'_' || b == b'-',
            Charset::Base64 => b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='),
        }
    }
}

/// A documented value format: an alphabet and a length range, or a UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Chars { charset: Charset, min: usize, max: usize },
    Uuid,
}

impl Shape {
    fn parse(text: &str) -> Result<Shape, String> {
        if text == "uuid" {
            return Ok(Shape::Uuid);
        }
        let split = text.find(|c: char| c.is_ascii_digit()).ok_or_else(|| format!("shape {text:?} has no length"))?;
        let (name, range) = text.split_at(split);
        let charset = match name.trim_end_matches('_') {
            "digits" => Charset::Digits,
            "hex" => Charset::Hex,
            "lower" => Charset::Lower,
            "upper" => Charset::Upper,
            "alnum" => Charset::Alnum,
            "url" => Charset::Url,
            "b64" => Charset::Base64,
            other => return Err(format!("shape {text:?}: unknown alphabet {other:?}")),
        };
        let number = |s: &str| s.parse::<usize>().map_err(|_| format!("shape {text:?}: bad length {s:?}"));
        let (min, max) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(range)?, number(range)?),
        };
        if min < 6 || max < min || max > 256 {
            return Err(format!("shape {text:?}: lengths must lie in 6..=256, min <= max"));
        }
        Ok(Shape::Chars { charset, min, max })
    }

    pub fn admits(&self, value: &str) -> bool {
        match *self {
            Shape::Uuid => is_uuid(value.as_bytes()),
            Shape::Chars { charset, min, max } => {
                (min..=max).contains(&value.len()) && value.bytes().all(|b| charset.admits(b))
            }
        }
    }
}

/// One service of the catalogue.
#[derive(Debug, Clone)]
pub struct Service {
    /// The first name: the finding is `<id>-credential`.
    pub id: String,
    /// Every name as written in the catalogue (`google-maps`), without the `~` mark.
    pub names: Vec<String>,
    pub shapes: Vec<Shape>,
}

impl Service {
    /// The environment variable a replacement reads: `GOOGLE_MAPS_API_KEY`.
    pub fn env(&self) -> String {
        format!("{}_API_KEY", self.id.to_ascii_uppercase().replace('-', "_"))
    }
}

/// A name's entry in the lookup table.
#[derive(Debug, Clone, Copy)]
struct Entry {
    service: u32,
    /// Also an ordinary word: counts only in the key or a host name.
    ambiguous: bool,
}

/// The parsed catalogue.
#[derive(Debug)]
pub struct Catalogue {
    pub services: Vec<Service>,
    /// Squashed name (lowercase letters and digits) → entry.
    by_name: HashMap<String, Entry>,
    /// The longest squashed name.
    longest: usize,
    /// Every distinct shape of any service: a value none admits needs the randomness test.
    shapes: Vec<Shape>,
}

/// The built-in catalogue, parsed on first use.
pub fn catalogue() -> &'static Catalogue {
    static CATALOGUE_ONCE: OnceLock<Catalogue> = OnceLock::new();
    // `services.txt` is checked by `catalogue_parses` below and by `tests/scan.rs`.
    CATALOGUE_ONCE.get_or_init(|| Catalogue::parse(CATALOGUE).expect("the built-in catalogue parses"))
}

/// A name as the lookup sees it: lowercase letters and digits only.
fn squash(name: &str) -> String {
    name.bytes().filter(u8::is_ascii_alphanumeric).map(|b| b.to_ascii_lowercase() as char).collect()
}

impl Catalogue {
    /// Parse catalogue text; an error names the line and what is wrong with it.
    pub fn parse(text: &str) -> Result<Catalogue, String> {
        let mut services: Vec<Service> = Vec::new();
        let mut by_name: HashMap<String, Entry> = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |e: String| format!("services.txt line {}: {e}", n + 1);
            let mut fields = line.split_whitespace();
            let names_field = fields.next().unwrap_or("");
            let shapes = match fields.next() {
                Some(shapes) => shapes.split('|').map(Shape::parse).collect::<Result<Vec<_>, _>>().map_err(at)?,
                None => Vec::new(),
            };
            if fields.next().is_some() {
                return Err(at("more than a name list and a shape list".into()));
            }
            let index = services.len() as u32;
            let mut names = Vec::new();
            for raw in names_field.split(',') {
                let ambiguous = raw.ends_with('~');
                let name = raw.trim_end_matches('~');
                let valid = !name.is_empty()
                    && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !name.starts_with('-')
                    && !name.ends_with('-');
                if !valid {
                    return Err(at(format!("bad name {raw:?} (lowercase words joined by '-', optional '~')")));
                }
                let key = squash(name);
                if key.len() < 2 {
                    return Err(at(format!("name {raw:?} is too short")));
                }
                if let Some(old) = by_name.get(&key)
                    && old.service != index
                {
                    return Err(at(format!("name {raw:?} also names {}", services[old.service as usize].id)));
                }
                by_name.insert(key, Entry { service: index, ambiguous });
                names.push(name.to_string());
            }
            services.push(Service { id: names[0].clone(), names, shapes });
        }
        let longest = by_name.keys().map(String::len).max().unwrap_or(0);
        let mut shapes: Vec<Shape> = Vec::new();
        for shape in services.iter().flat_map(|s| s.shapes.iter()) {
            if !shapes.contains(shape) {
                shapes.push(*shape);
            }
        }
        Ok(Catalogue { services, by_name, longest, shapes })
    }

    /// The service a squashed name names.
    fn lookup(&self, squashed: &str) -> Option<Entry> {
        self.by_name.get(squashed).copied()
    }

    /// The service named by `name` (any spelling), for tests and tools.
    pub fn named(&self, name: &str) -> Option<&Service> {
        self.lookup(&squash(name)).map(|e| &self.services[e.service as usize])
    }

    /// Is `name` marked as an ordinary word?
    pub fn is_ambiguous(&self, name: &str) -> bool {
        self.lookup(&squash(name)).is_some_and(|e| e.ambiguous)
    }
}

/// A service-keyed credential: the key, the value and the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub key: Range<usize>,
    pub value: Range<usize>,
    pub service: u32,
}

/// Find a service-keyed credential whose key holds the anchor at `at`.
pub fn find(hay: &[u8], at: usize) -> Option<Hit> {
    let key = key_around(hay, at);
    let value = value_after(hay, key.clone())?;
    // The value first: most keys in code are given expressions, short or wordy, and that test
    // is the cheapest.
    let text = std::str::from_utf8(&hay[value.clone()]).ok()?;
    let catalogue = catalogue();
    let random = random_enough(text);
    if !random && !catalogue.shapes.iter().any(|s| s.admits(text)) {
        return None;
    }
    let key_text = std::str::from_utf8(&hay[key.clone()]).ok()?;
    let is_name = |w: &[u8]| std::str::from_utf8(w).is_ok_and(|w| catalogue.lookup(w).is_some());
    if !names_credential(key_text)
        || super::generic::only_mentions_secret_unless(key_text, is_name)
        || has_word(key_text, NOT_SECRET_WORDS)
    {
        return None;
    }
    // A placeholder behind a short prefix (`shpss_a1b2c3d4…`), or base64 of one (`username:password`).
    let body = text.split_once(['_', '-']).filter(|(p, b)| p.len() <= 12 && b.len() >= 8).map_or(text, |(_, b)| b);
    if is_placeholder(body) || super::check::encodes_placeholder(text) {
        return None;
    }
    if spells_credential_word(text) {
        return None;
    }
    let (service, place) = service_near(catalogue, hay, &key, &value)?;
    // A UUID is as often an identifier (`TargetKeyId`, `ChangeToken`) as a key: only a service
    // named in the key itself (`SNYK_TOKEN`, `herokuApiKey`) makes it one.
    if is_uuid(text.as_bytes()) && place != Place::Key {
        return None;
    }
    if AWS_NAMES.contains(&catalogue.services[service as usize].id.as_str()) && !aws_random(text) {
        return None;
    }
    let shaped = || catalogue.services[service as usize].shapes.iter().any(|s| s.admits(text)) && !is_placeholder(text);
    (random || shaped()).then_some(Hit { key, value, service })
}

/// Services whose names sit beside hundreds of ids, ETags, change tokens and resource names
/// in AWS's SDKs, schemas and documentation (`"AWS::ApiGateway::ApiKey": "48205d4ffd7feba3"`,
/// `--change-token 12cs345-…`, `Authorization: AWS4-HMAC-SHA256`): a value beside them needs
/// [`aws_random`].
const AWS_NAMES: &[&str] = &["aws", "cloudfront", "cognito", "redshift", "amazon-ses"];

/// The secrets AWS issues (secret access keys: 40 base64 characters; session tokens: hundreds;
/// API Gateway keys: 40 letters and digits; Cognito client secrets: 50 or more) are long, drawn
/// from the base64 alphabet, and not hex: 30 characters or more of `A-Za-z0-9+/=`, upper and
/// lower case and digits, random by [`random_enough`]. AWS's own ids are hex, short, or
/// punctuated (`i-0abc…`, `us-west-2_…`).
fn aws_random(value: &str) -> bool {
    let b = value.as_bytes();
    b.len() >= 30
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='))
        && !b.iter().all(u8::is_ascii_hexdigit)
        && b.iter().any(u8::is_ascii_uppercase)
        && b.iter().any(u8::is_ascii_lowercase)
        && b.iter().any(u8::is_ascii_digit)
        && random_enough(value)
}

/// Does one of the identifier's words name a credential (`apiKey`, `SITELEAF_TOKEN`,
/// `--auth-token`, `languagelayertoken`)?
pub fn names_credential(key: &str) -> bool {
    let mut found = false;
    for_words(key.as_bytes(), |w| {
        let ends = |s: &str| w.len() > s.len() + 2 && w[w.len() - s.len()..].eq_ignore_ascii_case(s.as_bytes());
        found |= CREDENTIAL_WORDS.iter().any(|c| c.as_bytes().eq_ignore_ascii_case(w))
            || ["token", "secret", "apikey", "password", "passwd"].iter().any(|s| ends(s));
    });
    found
}

/// Is one of the value's words after its first a lowercase word that starts with a credential
/// word (`gss_krb5_rfc1964_keydata`, `api_token_name`)? Then the value is an identifier, not a
/// key: a random value breaks into short mixed fragments. The first word may be a vendor's
/// prefix (Mailgun's `key-…`, Stytch's `secret-live-…`).
fn spells_credential_word(value: &str) -> bool {
    let mut found = false;
    let b = value.as_bytes();
    for_word_spans(b, |r| {
        let w = &b[r.clone()];
        found |= r.start > 0
            && w.len() >= 3
            && w.iter().all(u8::is_ascii_lowercase)
            && ["key", "token", "secret", "passw", "cred"].iter().any(|c| w.starts_with(c.as_bytes()));
    });
    found
}

/// Is one of `words` (lowercase) a word of the identifier?
fn has_word(key: &str, words: &[&str]) -> bool {
    let mut found = false;
    for_words(key.as_bytes(), |w| found |= words.iter().any(|x| x.as_bytes().eq_ignore_ascii_case(w)));
    found
}

/// The value given to the key that ends at `key.end`, if there is one on the same line.
fn value_after(hay: &[u8], key: Range<usize>) -> Option<Range<usize>> {
    let mut i = key.end;
    let at = |i: usize| hay.get(i).copied().unwrap_or(b'\n');
    let blanks = |mut i: usize| {
        while matches!(at(i), b' ' | b'\t') {
            i += 1;
        }
        i
    };
    let xml_element = key.start > 0 && hay[key.start - 1] == b'<';
    let flag = hay[key.clone()].starts_with(b"-");
    // A quoted key's closing quote, or an index's `]`.
    let quoted_key = matches!(at(i), b'"' | b'\'' | b'`');
    if quoted_key {
        i += 1;
    }
    if at(i) == b']' {
        i += 1;
    }
    let before_op = i;
    i = blanks(i);
    // `<add key="X_TOKEN" value="…"/>`, `<entry name="X_TOKEN" value="…">`
    if quoted_key && hay.get(i..i + 5).is_some_and(|w| w.eq_ignore_ascii_case(b"value")) {
        i = blanks(i + 5);
        if at(i) != b'=' {
            return None;
        }
        i = blanks(i + 1);
    } else if xml_element {
        // `<apiKey>…</apiKey>`
        while at(i) != b'>' {
            if at(i) == b'\n' || i - key.end > 64 {
                return None;
            }
            i += 1;
        }
        i += 1;
    } else {
        let op = match (at(i), at(i + 1), at(i + 2)) {
            (b'=', b'=', b'=') => 3,
            (b'=', b'=', _) | (b':', b'=', _) | (b'=', b'>', _) | (b'-', b'>', _) | (b'?', b'=', _) => 2,
            (b'|', b'|', b'=') => 3,
            (b'=' | b':' | b',' | b'(', _, _) => 1,
            // `token - 'v'`: a dash with blanks around it.
            (b'-', b' ' | b'\t', _) if i > before_op => 1,
            // `--api-key VALUE`, `token "VALUE"`
            _ if i > before_op && (flag || matches!(at(i), b'"' | b'\'' | b'`')) => 0,
            // `var apiKey string = "…"` (Go)
            _ if i > before_op && super::generic::typed(hay, i).is_some() => 0,
            _ => return None,
        };
        let colon = op == 1 && at(i) == b':';
        i = blanks(i + op);
        // `API_KEY: &str = "…"`, `apiKey: string = "…"`, `val key: String = "…"`
        if (colon || op == 0)
            && let Some(after) = super::generic::typed(hay, i)
        {
            i = after;
        }
    }
    // String prefixes: Rust r"…"/r#"…"#, C# @"…", Python b"…"/u"…"/f"…".
    if matches!(at(i), b'r' | b'b' | b'u' | b'f' | b'@') && matches!(at(i + 1), b'"' | b'\'' | b'#') {
        i += 1;
        while at(i) == b'#' {
            i += 1;
        }
    }
    if matches!(at(i), b'"' | b'\'' | b'`') {
        i += 1;
    }
    // An HTTP authorization scheme before the value.
    for scheme in [&b"bearer "[..], b"token ", b"apikey ", b"key "] {
        if hay.get(i..i + scheme.len()).is_some_and(|w| w.eq_ignore_ascii_case(scheme)) {
            i = blanks(i + scheme.len());
            break;
        }
    }
    let start = i;
    while i - start < 1024
        && (at(i).is_ascii_alphanumeric() || matches!(at(i), b'_' | b'-' | b'.' | b'+' | b'/' | b'=' | b'~'))
    {
        i += 1;
    }
    // A value that runs on into more token bytes (or a `(`: a call) was not read whole.
    // A value cut by a call, a template or a redaction (`pypi-AgEI<your-token>`, `key{REDACTED}`,
    // `ABSK***`) is not a whole literal.
    let closing_tag = at(i) == b'<' && at(i + 1) == b'/';
    if i == start
        || i - start >= 1024
        || (matches!(at(i), b'(' | b'$' | b'{' | b'<' | b'*' | b'%' | b'[') && !closing_tag)
    {
        return None;
    }
    let mut end = i;
    // A sentence's full stop is not part of the value.
    while end > start && hay[end - 1] == b'.' {
        end -= 1;
    }
    Some(start..end)
}

/// Does `value` look like a randomly generated credential rather than a word, an identifier,
/// a number, a version, a path or a placeholder? Length 16–256, a token alphabet, several
/// character classes or a long single-alphabet string of high entropy, and few of the letter
/// pairs that make up English words and identifiers.
pub fn random_enough(value: &str) -> bool {
    let b = value.as_bytes();
    let len = b.len();
    if !(16..=1024).contains(&len) {
        return false;
    }
    if is_uuid(b) {
        return !is_placeholder(value);
    }
    if b.iter().all(u8::is_ascii_digit) || value.contains("..") || b[0] == b'.' || b[0] == b'/' || names_digest(value) {
        return false;
    }
    // Dotted words (`com.example.app`, `1.2.3-beta`) and paths (`a/b/c`).
    let dots = b.iter().filter(|&&c| c == b'.').count();
    let slashes = b.iter().filter(|&&c| c == b'/').count();
    if (dots >= 2 && value.split('.').all(|p| p.len() < 16)) || (slashes >= 2 && !value.ends_with('=')) {
        return false;
    }
    let classes = char_classes(b);
    let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
    let letters = b.iter().filter(|c| c.is_ascii_alphabetic()).count();
    let e = entropy(b);
    // Hex has 16 symbols: 32 random ones measure about 3.5 bits, rarely under 3.
    if b.iter().all(u8::is_ascii_hexdigit) {
        return e >= 2.9 && digits >= 2 && letters >= 2 && !is_placeholder(value);
    }
    let enough = match (classes, digits > 0) {
        // One alphabet without digits (letters only): long and very varied.
        (1, false) => len >= 24 && e >= 4.0,
        (_, false) => len >= 20 && e >= 3.8,
        _ => e >= if len < 24 { 3.2 } else { 3.5 },
    };
    enough && letters >= 4 && !wordy(b) && !camel_words(b) && !is_placeholder(value)
}

/// A digest labelled with its algorithm (`sha256=TSIMqs…` in a wheel's `RECORD`, `sha512-…` in a
/// lockfile) or an algorithm's name (`AWS4-HMAC-SHA256`): not a key.
fn names_digest(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    ["sha1", "sha224", "sha256", "sha384", "sha512", "md5", "hmac-"].iter().any(|a| lower.contains(a))
}

/// Is most of the value spelled in words of three or more letters, each lowercase or capitalized
/// and holding a vowel (`getYourApiKeyFromTheDashboard2024`)? Random strings break into short
/// fragments at their case changes and digits.
fn camel_words(b: &[u8]) -> bool {
    let mut covered = 0;
    for_words(b, |w| {
        let letters = w.iter().take_while(|c| c.is_ascii_alphabetic()).count();
        let word = &w[..letters];
        let shaped = word.len() >= 3 && word[1..].iter().all(u8::is_ascii_lowercase);
        if shaped && word.iter().any(|c| b"aeiouyAEIOUY".contains(c)) {
            covered += word.len();
        }
    });
    covered * 10 >= b.len() * 6
}

/// A UUID (8-4-4-4-12 hex digits).
pub fn is_uuid(b: &[u8]) -> bool {
    b.len() == 36
        && b.iter()
            .enumerate()
            .all(|(i, &c)| if matches!(i, 8 | 13 | 18 | 23) { c == b'-' } else { c.is_ascii_hexdigit() })
}

/// The letter pairs most common in English words and identifiers (lowercase).
const COMMON_PAIRS: &[&[u8; 2]] = &[
    b"th", b"he", b"in", b"er", b"an", b"re", b"on", b"at", b"en", b"nd", b"ti", b"es", b"or", b"te", b"of", b"ed",
    b"is", b"it", b"al", b"ar", b"st", b"to", b"nt", b"ng", b"se", b"ha", b"as", b"ou", b"io", b"le", b"ve", b"co",
    b"me", b"de", b"hi", b"ri", b"ro", b"ic", b"ne", b"ea", b"ra", b"ce", b"li", b"ch", b"ll", b"be", b"ma", b"si",
    b"om", b"ur", b"ca", b"el", b"ta", b"la", b"ns", b"di", b"fo", b"ho", b"pe", b"ec", b"pr", b"no", b"ct", b"us",
    b"ac", b"ot", b"il", b"tr", b"ly", b"nc", b"et", b"ut", b"ss", b"so", b"rs", b"un", b"lo",
];

/// Is the value mostly made of the letter pairs words are made of? In random strings over 36 or
/// 62 characters about one letter pair in ten is one of them (under four in ten for 99 in 100
/// strings of 24 characters); in identifiers, nineteen in twenty have four in ten or more
/// (measured on the cargo registry's identifiers of 16 to 40 characters). Hex strings have too
/// few letter pairs to judge and are left to the entropy test.
fn wordy(b: &[u8]) -> bool {
    if b.iter().all(u8::is_ascii_hexdigit) {
        return false;
    }
    let mut pairs = 0usize;
    let mut common = 0usize;
    for w in b.windows(2) {
        // Pairs within words only: `apiKey` is `api`, `Key`.
        if !(w[0].is_ascii_alphabetic() && w[1].is_ascii_alphabetic())
            || (w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        {
            continue;
        }
        pairs += 1;
        let pair = [w[0].to_ascii_lowercase(), w[1].to_ascii_lowercase()];
        if COMMON_PAIRS.iter().any(|p| **p == pair) {
            common += 1;
        }
    }
    // Keys usually mix in digits, identifiers seldom do: with digits, five pairs in ten.
    let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
    let share = if digits >= 2 { 5 } else { 4 };
    pairs >= 4 && common * 10 >= pairs * share
}

/// Where the service's name was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// In the credential's own key.
    Key,
    /// In a line above (a parent key, a section, a constructor).
    Above,
    /// On the key's line, before the key or after the value.
    Along,
}

/// A word of the context and where it is.
#[derive(Debug, Clone)]
struct Word {
    span: Range<usize>,
    /// Inside the credential's key.
    in_key: bool,
    /// A label of a host name (`app.scrapingbee.com`), or a section or parent key of its own on a
    /// line above (`render:`, `[box]`, `"zoom": {`, `<square>`).
    in_host: bool,
}

/// Top-level domains that end a host name in text.
const TLDS: &[&str] = &[
    "com", "io", "net", "org", "co", "ai", "dev", "app", "cloud", "so", "me", "us", "uk", "de", "fr", "eu", "info",
    "biz", "tech", "sh", "to", "ly", "xyz", "site", "works", "run", "page", "services", "tv", "fm", "gg", "cc", "jp",
    "cn", "ru", "in", "br", "ca", "au", "nl", "se", "ch", "es", "it", "pl", "pro", "one", "network",
];

/// The service named nearest the key: in the key, along the line, in the lines above. Names in
/// the key win; then the longest name.
fn service_near(catalogue: &Catalogue, hay: &[u8], key: &Range<usize>, value: &Range<usize>) -> Option<(u32, Place)> {
    let line_start = memchr::memrchr(b'\n', &hay[..key.start]).map_or(0, |i| i + 1);
    let line_end = memchr::memchr(b'\n', &hay[value.end..]).map_or(hay.len(), |i| value.end + i);
    let mut from = line_start.max(key.start.saturating_sub(BYTES_ALONG));
    // The lines above, within budget.
    let mut above = line_start;
    for _ in 0..LINES_ABOVE {
        if above == 0 || line_start - above >= BYTES_ABOVE {
            break;
        }
        above = memchr::memrchr(b'\n', &hay[..above - 1]).map_or(0, |i| i + 1);
    }
    if above < line_start {
        from = above.max(line_start.saturating_sub(BYTES_ABOVE));
    }
    let to = line_end.min(value.end + BYTES_ALONG);
    let mut words: Vec<Word> = Vec::with_capacity(32);
    let hosts = host_spans(hay, from..to);
    let headers = header_lines(hay, from..line_start);
    let mut push = |span: Range<usize>| {
        // The value's own bytes never name a service.
        if span.start >= value.start && span.end <= value.end {
            return;
        }
        let in_key = span.start >= key.start && span.end <= key.end;
        let in_host = hosts.iter().any(|h| span.start >= h.start && span.end <= h.end)
            || headers.iter().any(|h| span.start >= h.start && span.end <= h.end);
        words.push(Word { span, in_key, in_host });
    };
    for_word_spans(&hay[from..to], |r| push(from + r.start..from + r.end));
    let mut best: Option<(bool, usize, u32, Place)> = None;
    let mut buf = String::with_capacity(catalogue.longest + 8);
    for i in 0..words.len() {
        buf.clear();
        for j in i..words.len().min(i + 4) {
            if j > i {
                // Only words written together or with one separator form a name.
                let gap = &hay[words[j - 1].span.end..words[j].span.start];
                if gap.len() > 1 || gap.first().is_some_and(|g| !matches!(g, b'_' | b'-' | b' ' | b'.')) {
                    break;
                }
            }
            buf.extend(hay[words[j].span.clone()].iter().map(|b| b.to_ascii_lowercase() as char));
            if buf.len() > catalogue.longest {
                break;
            }
            let Some(entry) = catalogue.lookup(&buf) else { continue };
            let in_key = words[i..=j].iter().all(|w| w.in_key);
            let in_host = words[i..=j].iter().all(|w| w.in_host);
            if entry.ambiguous && !in_key && !in_host {
                continue;
            }
            let place = if in_key {
                Place::Key
            } else if words[j].span.end <= line_start {
                Place::Above
            } else {
                Place::Along
            };
            let rank = (in_key, buf.len(), entry.service, place);
            if best.is_none_or(|b| (rank.0, rank.1) > (b.0, b.1)) {
                best = Some(rank);
            }
        }
    }
    best.map(|b| (b.2, b.3))
}

/// Lines in `range` that only open a section or a parent key: `render:`, `"zoom": {`, `[box]`,
/// `<square>`, `fly {`.
fn header_lines(hay: &[u8], range: Range<usize>) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = range.start;
    while start < range.end {
        let end = memchr::memchr(b'\n', &hay[start..range.end]).map_or(range.end, |i| start + i);
        let line = &hay[start..end];
        let mut inner = line.trim_ascii();
        while let [b'-' | b'[' | b'<' | b'"' | b'\'' | b' ', rest @ ..] = inner {
            inner = rest;
        }
        while let [rest @ .., b'{' | b'[' | b'(' | b':' | b'=' | b'>' | b']' | b'"' | b'\'' | b' '] = inner {
            inner = rest;
        }
        if !inner.is_empty() && inner.len() <= 64 && inner.iter().all(|&b| is_key_byte(b)) {
            out.push(start..end);
        }
        start = end + 1;
    }
    out
}

/// Host names in `range`: dot-separated labels ending in a known top-level domain.
fn host_spans(hay: &[u8], range: Range<usize>) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut i = range.start;
    while i < range.end {
        if !(hay[i].is_ascii_alphanumeric()) {
            i += 1;
            continue;
        }
        let start = i;
        while i < range.end && (hay[i].is_ascii_alphanumeric() || matches!(hay[i], b'.' | b'-')) {
            i += 1;
        }
        let run = &hay[start..i];
        if let Some(dot) = memchr::memrchr(b'.', run) {
            let tld = std::str::from_utf8(&run[dot + 1..]).unwrap_or("").to_ascii_lowercase();
            if TLDS.contains(&tld.as_str()) {
                out.push(start..i);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Option<(String, &str)> {
        let lower = text.to_ascii_lowercase();
        let cat = catalogue();
        ["key", "token", "secret", "pass", "pwd", "auth", "cred", "bearer", "pat"]
            .iter()
            .flat_map(|w| lower.match_indices(w).map(|(i, _)| i).collect::<Vec<_>>())
            .find_map(|at| find(text.as_bytes(), at))
            .map(|h| (cat.services[h.service as usize].id.clone(), &text[h.value]))
    }

    #[test]
    fn catalogue_parses_and_is_large() {
        let cat = catalogue();
        assert!(cat.services.len() >= 700, "{} services", cat.services.len());
        assert!(cat.named("GoogleMaps").is_some());
        assert!(cat.is_ambiguous("box"));
        assert!(Catalogue::parse("Bad Name\n").is_err());
        assert!(Catalogue::parse("a-b,ab2 hex\n").is_err());
        assert!(Catalogue::parse("one\ntwo,one\n").is_err());
    }

    #[test]
    fn words_split_identifiers() {
        let mut got = Vec::new();
        for_words(b"LANGUAGELAYER_TOKEN apiKey APIKey auth0 x-api-key", |w| {
            got.push(String::from_utf8_lossy(w).into_owned())
        });
        assert_eq!(got, ["LANGUAGELAYER", "TOKEN", "api", "Key", "API", "Key", "auth0", "x", "api", "key"]);
    }

    #[test]
    fn service_keyed_values_in_many_contexts() {
        let v = "ze1z7svucm5z17kyizcve7gin44socz5";
        for (text, service) in [
            (format!("languagelayer token = '{v}'"), "languagelayer"),
            (format!("siteleaf token - '{v}'"), "siteleaf"),
            (format!("SCRAPINGBEE_API_KEY={v}\n"), "scrapingbee"),
            (format!("curl 'https://app.scrapingbee.com/api/v1/?api_key={v}&url=x'"), "scrapingbee"),
            (format!("languagelayer:\n  api:\n    token: {v}\n"), "languagelayer"),
            (format!("{{\"sendgrid\": {{\"apiKey\": \"{v}\"}}}}"), "sendgrid"),
            (format!("<add key=\"SendGridApiKey\" value=\"{v}\" />"), "sendgrid"),
            (format!("<sendgrid>\n  <apiKey>{v}</apiKey>\n</sendgrid>"), "sendgrid"),
            (format!("client = Shippo(api_key=\"{v}\")"), "shippo"),
            (format!("scrapingbee --api-key {v} get"), "scrapingbee"),
            (format!("curl -H \"X-Api-Key: {v}\" https://api.box.com/2.0/users"), "box"),
            (format!("let boxToken = \"{v}\";"), "box"),
            (format!("headers = {{'Authorization': 'Bearer {v}'}}  # airtable"), "airtable"),
        ] {
            assert_eq!(check(&text), Some((service.to_string(), v)), "{text}");
        }
    }

    #[test]
    fn lookalikes_are_not() {
        let v = "ze1z7svucm5z17kyizcve7gin44socz5";
        for text in [
            format!("token = '{v}'"),
            format!("a box of keys: key = '{v}'"),
            "SENDGRID_API_KEY=your_sendgrid_api_key_here".to_string(),
            "SENDGRID_API_KEY=${SENDGRID_API_KEY}".to_string(),
            "sendgrid_api_key = os.environ[\"SENDGRID_API_KEY\"]".to_string(),
            "let sendgridKey = getSendgridApiKeyFromVault();".to_string(),
            "stripe_publishable_key_name = \"StripePublishableKeyName\"".to_string(),
            "github_token_url = \"https://github.com/login/oauth/access_token\"".to_string(),
            "SENTRY_AUTH_TOKEN=1234567890123456".to_string(),
            "slack:\n  token_type: bot_token_for_the_workspace".to_string(),
            "names = {'gss_krb5_lucid_key', 'gss_krb5_rfc1964_keydata'}  # ankr".to_string(),
        ] {
            assert_eq!(check(&text), None, "{text}");
        }
    }

    #[test]
    fn aws_names_need_aws_shaped_secrets() {
        // An API Gateway key's shape: 40 letters and digits (in two halves, so that this file
        // passes the gate it describes when copied into a mounted workspace).
        let secret = ["Zq8Lm3Pd2QwJalrXUtnF", "EMIK7MDENGbPxRfiCY4k"].concat();
        assert_eq!(check(&format!("aws_secret = \"{secret}\"")), Some(("aws".to_string(), secret.as_str())));
        for text in [
            "\"AWS::ApiGateway::ApiKey\": \"48205d4ffd7feba3\",",
            "aws waf update-rule --change-token 12cs345-67cd-890b-1cd2-c3a4567d89f1",
            "aws cognito-idp forget-device --device-key us-west-2_abcd_1234-5678",
            "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1",
            "aws apigateway get-api-key --api-key 8bklk8bl1k3sB38D9B3l",
        ] {
            assert_eq!(check(text), None, "{text}");
        }
    }

    #[test]
    fn vendor_prefixes_are_not_identifiers() {
        assert!(spells_credential_word("gss_krb5_rfc1964_keydata"));
        assert!(!spells_credential_word("secret-live-WMVHqL8O484sqIDWUQVIr9qcdPsiocxxZc07"));
        assert!(!spells_credential_word("key-3ax6xnjp29jd6fds4gc373sgvjxteol0"));
    }

    #[test]
    fn randomness() {
        for v in ["ze1z7svucm5z17kyizcve7gin44socz5", "Q7v2LmP9xR4tK8wZ3nB6", "9f86d081884c7d659a2feaa0c55ad015"] {
            assert!(random_enough(v), "{v}");
        }
        for v in [
            "my_service_api_key_name",
            "SendGridApiKeyProvider",
            "1234567890123456",
            "com.example.service.key",
            "/etc/secrets/api.key",
            "getYourApiKeyFromTheDashboard2024",
            "v1.2.3-beta.4+build",
            "sha256=TSIMqsMcVfoX2CHDtaHoMMPCBnIFphCcNjXKkH_GKA8",
            "AWS4-HMAC-SHA256",
        ] {
            assert!(!random_enough(v), "{v}");
        }
    }

    #[test]
    fn shapes_parse_and_admit() {
        assert!(Shape::parse("digits15").unwrap().admits("123456789012345"));
        assert!(!Shape::parse("digits15").unwrap().admits("12345678901234a"));
        assert!(Shape::parse("alnum20-40").unwrap().admits("abcdefghij0123456789"));
        assert!(Shape::parse("uuid").unwrap().admits("123e4567-e89b-12d3-a456-426614174000"));
        assert!(Shape::parse("hex").is_err());
        assert!(Shape::parse("zz10").is_err());
    }
}
