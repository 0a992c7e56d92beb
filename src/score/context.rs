//! What kind of file a write is, from its path alone, and what that says about a generic
//! `key = value` finding.
//!
//! A credential-named key with a random literal value is a leak in configuration (`.env`,
//! YAML/JSON/INI/TOML, Dockerfiles, manifests, CI files, shell scripts and history) and blocks;
//! the same line in a test fixture or in documentation is usually a sample and only warns; in a
//! programming language a literal assigned to `password` is as often a test value or a default
//! as a secret, so it warns too. Plain text of unknown kind blocks only on stronger evidence.
//! This module does not read the file: the gate passes the path, and the scorer stays pure.

/// The kind of a file, for the generic detector's judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Configuration, infrastructure and shell: a literal there is deployed as is.
    Config,
    /// Source code in a programming language.
    Code,
    /// Tests, fixtures, examples and documentation.
    Sample,
    /// Anything else (plain text, no extension, no path).
    Other,
}

/// Path words that mark tests, fixtures, examples and documentation.
const SAMPLE_WORDS: &[&str] =
    &["test", "spec", "fixture", "example", "sample", "mock", "demo", "docs/", "doc/", "readme", "tutorial"];
/// Extensions of documentation.
const DOC_EXTENSIONS: &[&str] = &["md", "markdown", "rst", "adoc", "txt.md", "ipynb", "html", "htm"];
/// Extensions of configuration and infrastructure files.
const CONFIG_EXTENSIONS: &[&str] = &[
    "env",
    "yaml",
    "yml",
    "json",
    "jsonc",
    "ini",
    "toml",
    "cfg",
    "conf",
    "config",
    "properties",
    "tfvars",
    "tf",
    "hcl",
    "xml",
    "npmrc",
    "pypirc",
    "netrc",
    "pgpass",
    "sh",
    "bash",
    "zsh",
    "ps1",
    "cnf",
    "plist",
    "service",
];
/// Whole file names of configuration files without a telling extension.
const CONFIG_NAMES: &[&str] = &[
    "dockerfile",
    "containerfile",
    "jenkinsfile",
    "credentials",
    "config",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".bash_history",
    ".zsh_history",
    ".sh_history",
    ".history",
    ".htpasswd",
    ".s3cfg",
    ".git-credentials",
];
/// Extensions of programming languages.
const CODE_EXTENSIONS: &[&str] = &[
    "rs", "py", "pyi", "js", "mjs", "cjs", "jsx", "ts", "tsx", "go", "java", "kt", "kts", "scala", "groovy", "rb",
    "php", "cs", "c", "h", "cc", "cpp", "hpp", "swift", "m", "dart", "lua", "pl", "r", "ex", "exs", "erl", "clj",
    "vue", "svelte",
];

/// Is `ext` (lowercase, no dot) the extension of source code or documentation?
pub fn code_or_docs(ext: &str) -> bool {
    CODE_EXTENSIONS.contains(&ext) || DOC_EXTENSIONS.contains(&ext)
}

impl FileKind {
    pub fn of(path: Option<&str>) -> FileKind {
        let Some(path) = path else { return FileKind::Other };
        let lower = path.to_ascii_lowercase();
        let name = lower.rsplit('/').next().unwrap_or(&lower);
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        if SAMPLE_WORDS.iter().any(|w| lower.contains(w)) || DOC_EXTENSIONS.contains(&ext) {
            return FileKind::Sample;
        }
        let config = CONFIG_EXTENSIONS.contains(&ext)
            || CONFIG_NAMES.contains(&name)
            || name.starts_with(".env")
            || name.starts_with("dockerfile")
            || name.ends_with("_history")
            || name.ends_with(".env")
            || lower.contains(".github/workflows/")
            || lower.contains(".circleci/");
        if config {
            FileKind::Config
        } else if CODE_EXTENSIONS.contains(&ext) {
            FileKind::Code
        } else {
            FileKind::Other
        }
    }
}

/// Should a generic assignment of `value` to `key` in a file of `kind` block? The generic
/// detector has already judged the key (it names a credential: `password`, `secret`, `token`,
/// `api_key`, `auth`…, and is not `token_url` or `public_key`) and the value (length, classes,
/// entropy, no placeholder or reference). `line` is the assignment's line, for the words around
/// it.
///
/// In source code a literal assigned to a credential-named key is as often a test value or a
/// default as a secret, so it blocks only when the value alone is convincing ([`convincing`]):
/// long and random, or a strong password, and not a digest beside a hash word.
pub fn promotes(kind: FileKind, key: &str, value: &str, line: &str) -> bool {
    if !plain_value(value)
        || super::check::encodes_placeholder(value)
        || transcript(line)
        || credential_word(value)
        || published_by_design(key)
    {
        return false;
    }
    let b = value.as_bytes();
    let classes = super::filter::char_classes(b);
    let entropy = super::filter::entropy(b);
    match kind {
        FileKind::Config => value.len() >= 8 && (classes >= 3 || (value.len() >= 16 && entropy >= 3.5)),
        FileKind::Other => value.len() >= 12 && classes >= 3 && entropy >= 3.5,
        FileKind::Code => convincing(key, value, line),
        FileKind::Sample => false,
    }
}

/// Should a service-keyed credential (a value beside a credential word and a service's name,
/// `service.rs`) in a file of `kind` block? Such a value has no format of its own to vouch for
/// it, so it blocks only where the value alone convinces: never in tests, fixtures, examples and
/// documentation (the AWS CLI's `.rst` pages are full of them), not on a transcript's line; in
/// source code only when it is random by itself ([`super::service::random_enough`], not merely
/// of the service's documented shape) and does not walk the alphabet as typed-in samples do
/// (`abCDeFGhiJKlmn…`, `a123b45c6d78…`). In configuration and other files it blocks.
pub fn service_blocks(kind: FileKind, value: &str, line: &str) -> bool {
    if transcript(line) || super::filter::walks_alphabet(value) {
        return false;
    }
    match kind {
        FileKind::Sample => false,
        FileKind::Code => super::service::random_enough(value),
        FileKind::Config | FileKind::Other => true,
    }
}

/// Key names of values that are published on purpose: a domain or site verification token (SES's
/// `VerificationToken`, `google_site_verification`) is put in a DNS record or a page for anyone
/// to read, proving control of the domain, not granting access. A key that also says `secret`
/// is judged as any other; a service's verification token named with its service (Slack's) is the
/// service detector's to judge.
fn published_by_design(key: &str) -> bool {
    let key: String = key.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
    ["verificationtoken", "siteverification", "domainverification"].iter().any(|w| key.contains(w))
        && !key.contains("secret")
}

/// A line of a shell transcript in help text or documentation (`$ cmd --password=…`, `{command}`):
/// an example of how a command is typed, not a deployed setting.
fn transcript(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("$ ") || t.starts_with("> $ ") || line.contains("{command}")
}

/// Words that make a value a stand-in for a credential rather than one (`Password123!`,
/// `s3cr3t-k3y`), checked after undoing leetspeak.
const STAND_IN_WORDS: &[&str] =
    &["password", "passwd", "secret", "changeme", "example", "sample", "dummy", "qwerty", "letmein", "default"];

/// Does `value` spell a credential word or a stand-in once leetspeak is undone?
fn credential_word(value: &str) -> bool {
    let plain = unleet(value);
    STAND_IN_WORDS.iter().any(|w| plain.contains(w))
}

/// `value` lowercase with leetspeak undone (`P@ssw0rd!` → `password!`... `i`).
fn unleet(value: &str) -> String {
    value
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            '0' => 'o',
            '1' | '!' | '|' => 'i',
            '3' => 'e',
            '4' | '@' => 'a',
            '5' | '$' => 's',
            '7' => 't',
            '8' => 'b',
            c => c,
        })
        .collect()
}

/// Key words that name what is secret itself (not a mention: `auth_header`, `pwd_len` are judged
/// before this).
const STRONG_KEY_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "access_key",
    "accesskey",
    "private_key",
    "privatekey",
    "credential",
    "auth_key",
    "authkey",
    "signing_key",
    "encryption_key",
    "master_key",
    "client_secret",
    "pwd",
    "pass",
];

/// Words that say a hex value beside them is a digest, not a key.
const HASH_WORDS: &[&str] =
    &["sha", "md5", "hash", "digest", "checksum", "fingerprint", "commit", "etag", "integrity", "crc", "hmac("];

/// Placeholder words a human-made test password is built from, checked after undoing leetspeak.
const PASSWORD_WORDS: &[&str] = &[
    "password", "passwd", "secret", "test", "example", "sample", "dummy", "changeme", "admin", "qwerty", "letmein",
    "welcome", "default", "demo", "hunter", "foobar", "foo", "bar", "user", "pass", "root", "guest", "mysql",
    "postgres", "abc", "xyz",
];

/// Is a literal in source code convincing as a deployed credential on its own? The key must name
/// the secret itself; then either the value is random ([`super::service::random_enough`]: 16+
/// characters, several classes, high entropy, not made of words) and, when it is hex, no hash word
/// is on its line; or the key is a password's and the value is a strong password (10+ characters,
/// four classes or three with 14+, not a leetspeak placeholder).
pub fn convincing(key: &str, value: &str, line: &str) -> bool {
    let key = key.to_ascii_lowercase();
    if !STRONG_KEY_WORDS.iter().any(|w| key.contains(w)) {
        return false;
    }
    // A template or a GUID (`_SA_{262E99C9-…}`), not a key.
    if value.contains(['{', '}']) || value.bytes().filter(|&b| b == b'-').count() >= 4 {
        return false;
    }
    let lower_line = line.to_ascii_lowercase();
    let hex = value.bytes().all(|b| b.is_ascii_hexdigit());
    // Hex shorter than 32 digits in code is an id or a digest's prefix (`"AWS::ApiGateway::ApiKey":
    // "48205d4ffd7feba3"` in a schema's table of contents), and beside a hash word a digest.
    if hex && (value.len() < 32 || HASH_WORDS.iter().any(|w| lower_line.contains(w))) {
        return false;
    }
    if super::service::random_enough(value) {
        return true;
    }
    let password_key = ["password", "passwd", "passphrase", "pwd", "pass"].iter().any(|w| key.contains(w));
    password_key && strong_password(value)
}

/// A password a person chose that is not a stand-in: 10 to 64 characters without spaces, all
/// four classes (or three from 14 characters), and no placeholder word inside once leetspeak is
/// undone (`P@ssw0rd123!` is `password123!`).
fn strong_password(value: &str) -> bool {
    let b = value.as_bytes();
    if !(10..=64).contains(&b.len()) || b.iter().any(|c| c.is_ascii_whitespace() || !c.is_ascii_graphic()) {
        return false;
    }
    let classes = super::filter::char_classes(b);
    if !(classes == 4 || (classes == 3 && b.len() >= 14)) || super::filter::entropy(b) < 3.0 {
        return false;
    }
    let plain = unleet(value);
    !PASSWORD_WORDS.iter().any(|w| plain.contains(w))
}

/// Not a path, a host name, an address, a version or a reference written without a marker.
fn plain_value(value: &str) -> bool {
    let starts = ["/", "./", "../", "~/", "http", "file:", "arn:", "vault:", "sm://", "ref+", "op://"];
    let lower = value.to_ascii_lowercase();
    if starts.iter().any(|s| lower.starts_with(s)) || lower.contains(":\\") {
        return false;
    }
    // `db.internal.acme.com`, `user@host.net`, `1.2.3`: dotted words, not random.
    let dotted = value.split('.').count() >= 3 && value.split('.').all(|p| p.len() < 16);
    !(dotted || value.contains('@') && value.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_paths() {
        for (path, kind) in [
            (".env", FileKind::Config),
            ("deploy/.env.production", FileKind::Config),
            ("k8s/secret.yaml", FileKind::Config),
            ("Dockerfile", FileKind::Config),
            ("docker/Dockerfile.prod", FileKind::Config),
            (".github/workflows/ci.yml", FileKind::Config),
            ("home/.bash_history", FileKind::Config),
            ("src/app.py", FileKind::Code),
            ("tests/fixtures/config.yaml", FileKind::Sample),
            ("docs/setup.md", FileKind::Sample),
            ("config.example.json", FileKind::Sample),
            ("notes.txt", FileKind::Other),
        ] {
            assert_eq!(FileKind::of(Some(path)), kind, "{path}");
        }
    }

    #[test]
    fn promotion_needs_a_plain_value_and_a_config_file() {
        let value = ["Zx81", "kq0P", "a9uT", "77ab"].concat();
        let p = |kind, value: &str| promotes(kind, "db_password", value, "");
        assert!(p(FileKind::Config, &value));
        assert!(p(FileKind::Other, &value));
        // In code only a convincing value blocks: this one is (16 random characters, three classes).
        assert!(p(FileKind::Code, &value));
        assert!(!p(FileKind::Code, "Zx81kq0Pa9"));
        assert!(!p(FileKind::Sample, &value));
        assert!(!p(FileKind::Config, "/run/secrets/db_password1"));
        assert!(!p(FileKind::Config, "api.v2.acme-corp.internal"));
        assert!(!p(FileKind::Other, "abcd1234efgh"));
    }

    #[test]
    fn code_blocks_only_convincing_values() {
        let random = ["q8W2", "Lm4s", "9XaP", "z71R", "t5Vb"].concat();
        assert!(convincing("API_TOKEN", &random, ""));
        assert!(convincing("password", "Zq7#mK2!vR9x", ""));
        assert!(convincing("secret", "9f86d081884c7d659a2feaa0c55ad015", "let secret = ...;"));
        for (key, value, line) in [
            ("password", "P@ssw0rd123!", ""),
            ("password", "Test1234!", ""),
            ("password", "Welcome2024!", ""),
            ("token_value", "short1A!", ""),
            ("secret", "9f86d081884c7d659a2feaa0c55ad015", "expected sha256 digest"),
            ("auth_mode", "q8W2Lm4s9XaPz71Rt5Vb", ""),
            ("api_key", "MyApplicationApiKeyName", ""),
        ] {
            assert!(!convincing(key, value, line), "{key} = {value}");
        }
    }

    #[test]
    fn verification_tokens_are_published_not_promoted() {
        let value = ["ILQMESfEW0p6i6", "gIJcEWvO65TP5h", "g6B99hGFZ2lxrIs="].concat();
        for kind in [FileKind::Code, FileKind::Config] {
            assert!(promotes(kind, "AccessToken", &value, ""), "{kind:?}: the look-alike's key blocks");
            for key in ["VerificationToken", "verification_token", "google-site-verification"] {
                assert!(!promotes(kind, key, &value, ""), "{kind:?}: {key}");
            }
            assert!(promotes(kind, "verification_token_secret", &value, ""), "{kind:?}: a secret stays one");
        }
    }
}
