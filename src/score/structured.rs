//! Configuration files read as what they are: key paths and values, not lines.
//!
//! The line detector (`generic.rs`) sees `password: X` only when key, operator and value share a
//! line and the key holds a keyword. A parsed file also shows what lines hide: a leaf whose name
//! is only a credential together with its parents (`api: {key: X}`, `auths.<host>.auth`), the
//! `name`/`value` pairs of Kubernetes `env:` lists and of `<add key= value=>`-style settings,
//! every `data:`/`stringData:` entry of a Kubernetes `Secret`, quoted values with escapes and
//! YAML block scalars. Each leaf whose key path names a credential and whose value looks like
//! one is handed to the judge as a generic assignment, so blocking follows the file's kind
//! exactly as for the line detector (`context::promotes`): a block in configuration, a warning
//! in fixtures and documentation.
//!
//! Invariants:
//! - Only configuration kinds go through a parser ([`Format::of`]: by file name or extension,
//!   else by sniffing the first bytes of a file of no known kind); source code never does, so
//!   scanning code costs nothing here.
//! - Bounded: files above [`MAX_BYTES`] are left to the line detectors; the parsers are linear
//!   (serde_json with its recursion limit, toml, serde-saphyr with its default budget of events,
//!   aliases and depth); leaves deeper than [`MAX_DEPTH`] are skipped; at most [`MAX_LEAVES`]
//!   leaves are collected; finding a value's bytes in the file is budgeted to a few passes
//!   over it ([`locate`]).
//! - A file that does not parse is not an error: the line detectors have already read it.

use std::ops::Range;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{check, context, generic};

/// Larger files are not parsed (configuration is small; the line detectors still run).
pub const MAX_BYTES: usize = 1 << 20;
/// Nesting below this depth is skipped.
const MAX_DEPTH: usize = 48;
/// Leaves collected per file.
const MAX_LEAVES: usize = 20_000;

/// A parser for one kind of configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    /// One or more documents (`---`), as Kubernetes manifests are.
    Yaml,
    Toml,
    /// INI, `.env`, Java properties: `key = value` lines under optional `[section]`s.
    Ini,
}

/// Extensions and whole names of INI-like files.
const INI_EXTENSIONS: &[&str] = &["env", "ini", "cfg", "conf", "cnf", "properties", "npmrc", "pypirc", "s3cfg"];
const INI_NAMES: &[&str] = &["credentials", ".npmrc", ".pypirc", ".s3cfg", ".gitconfig", ".pgpass"];
/// Extensions of files that are never sniffed besides code and documentation (shell, markup,
/// infrastructure code, lockfiles).
const NEVER_SNIFFED: &[&str] = &["sh", "bash", "zsh", "ps1", "xml", "tf", "hcl", "lock", "sum"];

impl Format {
    /// The parser for a file: by name or extension, else (a file with no telling extension) by
    /// its first bytes: `{` is JSON, `---` or a `key:` first line is YAML, a `[section]` or
    /// `KEY=value` first line is INI.
    pub fn of(path: Option<&str>, hay: &[u8]) -> Option<Format> {
        let lower = path.map(str::to_ascii_lowercase).unwrap_or_default();
        let name = lower.rsplit('/').next().unwrap_or(&lower);
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        match ext {
            "json" => return Some(Format::Json),
            "yaml" | "yml" => return Some(Format::Yaml),
            "toml" => return Some(Format::Toml),
            _ => {}
        }
        if INI_EXTENSIONS.contains(&ext)
            || INI_NAMES.contains(&name)
            || name.starts_with(".env")
            || name.ends_with(".env")
        {
            return Some(Format::Ini);
        }
        if NEVER_SNIFFED.contains(&ext) || context::code_or_docs(ext) || name.starts_with("dockerfile") {
            return None;
        }
        sniff(hay)
    }
}

/// The format of a file of no known kind, from its first meaningful line.
fn sniff(hay: &[u8]) -> Option<Format> {
    let head = &hay[..hay.len().min(512)];
    let first = head
        .split(|&b| b == b'\n')
        .map(|l| l.trim_ascii())
        .find(|l| !l.is_empty() && !l.starts_with(b"#") && !l.starts_with(b";"))?;
    if first.starts_with(b"{") {
        return Some(Format::Json);
    }
    if first.starts_with(b"---") {
        return Some(Format::Yaml);
    }
    if first.starts_with(b"[") && first.ends_with(b"]") {
        return Some(Format::Ini);
    }
    let key_len = first.iter().position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')))?;
    match first.get(key_len..)? {
        [b':', b' ', ..] | [b':'] if key_len > 0 => Some(Format::Yaml),
        [b'=', ..] if key_len > 0 => Some(Format::Ini),
        _ => None,
    }
}

/// The path component of a sequence's elements: a list under a credential-like key (Cargo's
/// `features.auth = ["dep:oauth2"]`) holds names, not the credential, so an element's own name
/// is this and never names one.
const ELEMENT: &str = "[]";

/// A scalar of a parsed file: the keys leading to it (lowercase; a sequence's elements add
/// [`ELEMENT`]), its document (YAML streams) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub path: Vec<String>,
    pub doc: usize,
    pub value: String,
    /// Where the value is in the file, when the parser knows (INI); else found by [`locate`].
    pub span: Option<Range<usize>>,
}

/// Every string leaf of `text` read as `format`; `None` when it does not parse.
pub fn leaves(format: Format, text: &str) -> Option<Vec<Leaf>> {
    let docs: Vec<Doc> = match format {
        Format::Json => vec![serde_json::from_str(text).ok()?],
        Format::Toml => vec![toml::from_str(text).ok()?],
        Format::Yaml => serde_saphyr::from_multiple_with_options(text, yaml_options(text.len())).ok()?,
        Format::Ini => return Some(ini(text)),
    };
    let mut out = Vec::new();
    for (doc, Doc(leaves)) in docs.into_iter().enumerate() {
        out.extend(leaves.into_iter().map(|mut l| {
            l.doc = doc;
            l
        }));
    }
    Some(out)
}

/// serde-saphyr's budget scaled to the input: parser events, aliases and the events replayed for
/// them at most about one per input byte, so an alias bomb stops after linear work.
fn yaml_options(len: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_events = len + 1024;
    budget.max_recorded_anchor_events = len + 1024;
    budget.max_aliases = len / 4 + 64;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// One document's leaves.
struct Doc(Vec<Leaf>);

impl<'de> de::Deserialize<'de> for Doc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Doc, D::Error> {
        let mut out = Vec::new();
        Collect { path: &mut Vec::new(), out: &mut out, depth: 0 }.deserialize(d)?;
        Ok(Doc(out))
    }
}

/// Walks any self-describing format, recording string leaves with their key path.
struct Collect<'a> {
    path: &'a mut Vec<String>,
    out: &'a mut Vec<Leaf>,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Collect<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.depth > MAX_DEPTH {
            return d.deserialize_ignored_any(IgnoredAny).map(|_| ());
        }
        d.deserialize_any(self)
    }
}

impl Collect<'_> {
    fn child(&mut self) -> Collect<'_> {
        Collect { path: self.path, out: self.out, depth: self.depth + 1 }
    }

    fn leaf(self, value: &str) {
        if self.out.len() < MAX_LEAVES {
            self.out.push(Leaf { path: self.path.clone(), doc: 0, value: value.to_string(), span: None });
        }
    }
}

impl<'de> Visitor<'de> for Collect<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.leaf(v);
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.path.push(ELEMENT.to_string());
        let result = (|| {
            while seq.next_element_seed(self.child())?.is_some() {}
            Ok(())
        })();
        self.path.pop();
        result
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let first = self.out.len();
        while let Some(key) = map.next_key::<Key>()? {
            self.path.push(key.0);
            let value = map.next_value_seed(self.child());
            self.path.pop();
            value?;
        }
        name_value_pair(&mut self.out[first..], self.path.len());
        Ok(())
    }
}

/// A map of the form `{name: DB_PASSWORD, value: X}` (Kubernetes `env:`, `<add key= value=>`
/// settings): the value's key is the name.
fn name_value_pair(children: &mut [Leaf], depth: usize) {
    let direct = |l: &Leaf, key: &str| l.path.len() == depth + 1 && l.path[depth] == key;
    let Some(name) = children.iter().find(|l| direct(l, "name") || direct(l, "key")).map(|l| l.value.clone()) else {
        return;
    };
    if let Some(value) = children.iter_mut().find(|l| direct(l, "value")) {
        value.path[depth] = name.to_ascii_lowercase();
    }
}

/// A map key as text (numbers and booleans too); a composite key reads as `?`.
struct Key(String);

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        d.deserialize_any(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a map key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(Key(v.to_ascii_lowercase()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
        Ok(Key("?".into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Key, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Key("?".into()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Key, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Key("?".into()))
    }
}

/// INI, `.env` and properties lines: `[section]`, `key = value`, `key: value`, `export KEY=value`,
/// values optionally quoted, `#` and `;` comment lines. Values keep their place in the file.
fn ini(text: &str) -> Vec<Leaf> {
    let mut out = Vec::new();
    let mut section: Option<String> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with(['#', ';', '!']) {
            continue;
        }
        if trimmed.starts_with('[') && trimmed.ends_with(']') {
            section = Some(trimmed[1..trimmed.len() - 1].trim().to_ascii_lowercase());
            continue;
        }
        let Some((op, key)) = split_assignment(line) else { continue };
        let raw = &line[op + 1..];
        let lead = raw.len() - raw.trim_start().len();
        let value = raw.trim();
        let (inner, offset) = match value.as_bytes() {
            [q @ (b'"' | b'\''), .., last] if last == q && value.len() >= 2 => (&value[1..value.len() - 1], 1),
            _ => (value.split(" #").next().unwrap_or(value).trim_end(), 0),
        };
        if out.len() >= MAX_LEAVES || inner.is_empty() {
            continue;
        }
        let from = start + op + 1 + lead + offset;
        let mut path: Vec<String> = section.iter().cloned().collect();
        path.push(key.to_ascii_lowercase());
        out.push(Leaf { path, doc: 0, value: inner.to_string(), span: Some(from..from + inner.len()) });
    }
    out
}

/// Where the operator of an INI line is and its key: the first `=`, else the first `:`, whose
/// key (without `export `) is one non-empty word.
fn split_assignment(line: &str) -> Option<(usize, &str)> {
    ['=', ':'].into_iter().find_map(|op| {
        let at = line.find(op)?;
        let key = line[..at].trim();
        let key = key.strip_prefix("export ").unwrap_or(key).trim();
        (!key.is_empty() && !key.contains(char::is_whitespace)).then_some((at, key))
    })
}

/// Words that make a (normalised: lowercase, no `_`, `-`, `.`) key name a credential.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "accountkey",
    "privatekey",
    "credential",
    "authkey",
    "encryptionkey",
    "signingkey",
    "masterkey",
    "sharedkey",
];
/// Whole key names that are credentials only as a whole (`pass` is in `passport`, `auth` in
/// `author`).
const SECRET_NAMES: &[&str] = &["pass", "auth", "pat", "psk"];
/// Leaf names that say nothing alone but name a credential under a credential-like parent
/// (`api: {key: X}`, `stripe: {secret: {value: X}}`).
const VAGUE_NAMES: &[&str] = &["key", "value", "data"];
/// Parent words that make a vague leaf a credential, at the start or end of the parent's name
/// (`api`, `stripe_api`, `credentials`; not `capital`).
const PARENT_WORDS: &[&str] = &["api", "secret", "credential", "password", "token", "auth"];
/// Names of a Kubernetes `Secret`'s entries that are not secret themselves.
const PLAIN_ENTRIES: &[&str] =
    &["username", "user", "host", "hostname", "port", "url", "uri", "database", "db", "name", "email", "region"];

fn normalise(key: &str) -> String {
    key.chars().filter(|c| !matches!(c, '_' | '-' | '.' | ' ')).collect()
}

/// Does the key path name a credential? The leaf's own name, unless it only mentions one
/// (`token_url`, `password_min_length`: the line detector's exclusions), or a vague leaf name
/// under a credential-like parent.
fn secret_path(path: &[String]) -> bool {
    // Most keys name nothing secret: the word lists first, the exclusions only for the rest.
    let Some(leaf) = path.last() else { return false };
    let name = normalise(leaf);
    if SECRET_WORDS.iter().any(|w| name.contains(w)) || SECRET_NAMES.contains(&name.as_str()) {
        return !generic::only_mentions_secret(leaf);
    }
    let Some(parent) = path.len().checked_sub(2).map(|i| &path[i]) else { return false };
    let parent_name = normalise(parent);
    VAGUE_NAMES.contains(&name.as_str())
        && PARENT_WORDS.iter().any(|w| parent_name.starts_with(w) || parent_name.ends_with(w))
        && !generic::only_mentions_secret(parent)
}

/// Why a leaf is a credential candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A credential-named key with a secret-looking value.
    Named,
    /// A Docker `auths.<registry>.auth`: base64 of `user:password`.
    DockerAuth,
    /// A Kubernetes `Secret`'s `data:` (base64) or `stringData:` entry.
    SecretEntry,
}

/// The leaves that hold credentials, with why. A `Secret` document is one whose top-level
/// `kind` is `Secret`.
pub fn candidates(leaves: &[Leaf]) -> Vec<(&Leaf, Reason)> {
    let secret_docs: Vec<usize> = leaves
        .iter()
        .filter(|l| l.path.len() == 1 && l.path[0] == "kind" && l.value == "Secret")
        .map(|l| l.doc)
        .collect();
    let mut out = Vec::new();
    for leaf in leaves {
        let path = &leaf.path;
        let reason = if path.len() == 3 && path[0] == "auths" && path[2] == "auth" {
            check::basic_auth_ok(&leaf.value).then_some(Reason::DockerAuth)
        } else if secret_docs.contains(&leaf.doc)
            && path.len() == 2
            && matches!(path[0].as_str(), "data" | "stringdata")
            && !PLAIN_ENTRIES.contains(&path[1].as_str())
        {
            let ok =
                if path[0] == "data" { check::secret_data_ok(&leaf.value) } else { generic::looks_secret(&leaf.value) };
            ok.then_some(Reason::SecretEntry)
        } else {
            (secret_path(path) && generic::looks_secret(&leaf.value) && !check::encodes_placeholder(&leaf.value))
                .then_some(Reason::Named)
        };
        if let Some(reason) = reason {
            out.push((leaf, reason));
        }
    }
    out
}

/// Where `value` is in `hay`, searching from `*cursor` (leaves come in document order) and then
/// once from the start; JSON values are also looked for in their escaped form. `budget` bytes
/// of searching are left: each search spends the bytes it covers, so that many candidates that
/// are not found cost a bounded number of passes over the file.
pub fn locate(hay: &[u8], value: &str, cursor: &mut usize, budget: &mut usize) -> Option<Range<usize>> {
    let escaped = serde_json::to_string(value).ok();
    let forms = std::iter::once(value).chain(escaped.as_deref().map(|e| &e[1..e.len() - 1]));
    for form in forms {
        for from in [*cursor, 0] {
            let Some(region) = hay.get(from..) else { continue };
            if *budget < region.len() || form.is_empty() {
                return None;
            }
            let found = memchr::memmem::find(region, form.as_bytes());
            *budget -= found.map_or(region.len(), |i| i + form.len());
            if let Some(i) = found {
                *cursor = from + i + form.len();
                return Some(from + i..from + i + form.len());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(format: Format, text: &str) -> Vec<(String, String)> {
        leaves(format, text).expect("parses").into_iter().map(|l| (l.path.join("."), l.value)).collect()
    }

    #[test]
    fn formats_by_name_and_by_sniffing() {
        for (path, text, want) in [
            ("a.json", "", Some(Format::Json)),
            ("k8s/x.yml", "", Some(Format::Yaml)),
            ("Cargo.toml", "", Some(Format::Toml)),
            (".env.local", "", Some(Format::Ini)),
            ("prod.env", "", Some(Format::Ini)),
            ("src/main.rs", "{\"a\": 1}", None),
            ("Dockerfile", "FROM x", None),
            ("settings", "  {\"a\": 1}", Some(Format::Json)),
            ("manifest", "# c\napiVersion: v1\n", Some(Format::Yaml)),
            ("conf", "[core]\nx = 1\n", Some(Format::Ini)),
            ("vars", "DB_PASSWORD=x\n", Some(Format::Ini)),
            ("notes", "Hello world.\n", None),
        ] {
            assert_eq!(Format::of(Some(path), text.as_bytes()), want, "{path}");
        }
    }

    #[test]
    fn leaves_carry_key_paths_in_every_format() {
        assert_eq!(
            paths(Format::Json, r#"{"a": {"b": ["x", {"c": "y"}], "n": 3}}"#),
            [("a.b.[]".into(), "x".into()), ("a.b.[].c".into(), "y".into())]
        );
        assert_eq!(paths(Format::Toml, "[db]\npassword = 'p'\n"), [("db.password".into(), "p".into())]);
        let yaml = paths(Format::Yaml, "kind: Secret\n---\napi:\n  key: |\n    v\n");
        assert_eq!(yaml, [("kind".into(), "Secret".into()), ("api.key".into(), "v\n".into())]);
        assert_eq!(
            paths(Format::Ini, "[S]\nexport Key = \"v w\" \nk2: x # c\n"),
            [("s.key".into(), "v w".into()), ("s.k2".into(), "x".into())]
        );
    }

    #[test]
    fn ini_spans_point_at_the_value() {
        let text = "A=1\n[s]\n  key = \"xyz\"\n";
        for leaf in leaves(Format::Ini, text).expect("parses") {
            assert_eq!(&text[leaf.span.expect("span")], leaf.value);
        }
    }

    #[test]
    fn name_value_maps_take_the_name_as_key() {
        let env = "env:\n  - name: DB_PASSWORD\n    value: x\n";
        assert_eq!(
            paths(Format::Yaml, env),
            [("env.[].name".into(), "DB_PASSWORD".into()), ("env.[].db_password".into(), "x".into())]
        );
    }

    #[test]
    fn key_paths_that_name_credentials() {
        let p = |s: &str| s.split('.').map(String::from).collect::<Vec<_>>();
        for yes in ["db.password", "auth.clientsecret", "storage.accountkey", "api.key", "npm.auth", "x.db_pwd"] {
            assert!(secret_path(&p(yes)), "{yes}");
        }
        for no in [
            "db.password_min_length",
            "oauth.token_url",
            "x.key",
            "user.author",
            "api.public_key",
            "passport",
            "features.auth.[]",
        ] {
            assert!(!secret_path(&p(no)), "{no}");
        }
    }

    #[test]
    fn locate_searches_on_then_from_the_start_within_budget() {
        let hay = b"a: \"x\\\"y\"\nb: zz\nc: zz\n";
        let (mut cursor, mut budget) = (0, 1000);
        assert_eq!(locate(hay, "zz", &mut cursor, &mut budget), Some(13..15));
        assert_eq!(locate(hay, "zz", &mut cursor, &mut budget), Some(19..21));
        assert_eq!(locate(hay, "zz", &mut cursor, &mut budget), Some(13..15), "wraps once");
        assert_eq!(locate(hay, "x\"y", &mut cursor, &mut budget), Some(4..8), "escaped form");
        let mut none = 5;
        assert_eq!(locate(hay, "zz", &mut 0, &mut none), None, "out of budget");
    }
}
