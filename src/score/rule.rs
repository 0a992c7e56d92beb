//! What a detection rule is: how it is found, what it must look like, how it is checked, and
//! what to tell the writer.
//!
//! A rule is data ([`Rule`]); the table of built-in rules is `rules.rs`. The pipeline in
//! `mod.rs` interprets it:
//!
//! 1. **trigger**: an anchor literal ([`Trigger::Anchors`], found by one Aho-Corasick automaton
//!    over every rule's anchors, ASCII case-insensitively) or a structural scanner
//!    ([`Trigger::Digits`], [`Trigger::Iban`], [`Trigger::Run`], [`Trigger::Dotted`],
//!    [`Trigger::Generic`]);
//! 2. **regex**: run only on a bounded window around each anchor hit (`before`/`after` bytes),
//!    ASCII semantics; the capture group named `secret` (else the whole match) is the secret;
//! 3. **checks**: a structural validator ([`Check`]), then placeholder filters, then the minimum
//!    entropy. A secret failing them is not a leak, but a rule with a [`Rule::prefix`] still
//!    reports the token-shaped text as *filter* risk (the vendor prefix alone trips host
//!    content filters: `sk-ant-oat01-{REDACTED}`).

/// How candidates for a rule are found.
#[derive(Debug, Clone, Copy)]
pub enum Trigger {
    /// Distinctive literals; matched ASCII case-insensitively.
    Anchors(&'static [&'static str]),
    /// Runs of digits with separators (card numbers, SSNs, phone numbers).
    Digits,
    /// Two capitals and two digits starting an alphanumeric run (IBANs).
    Iban,
    /// `key = value` assignments whose key names a secret (the generic detector).
    Generic,
    /// A run of at least `min` copies of `byte` (case-sensitive), for tokens that start with
    /// padding (Twitter's `AAAA…`); the window is taken around the run's end. An anchor made of
    /// one repeated letter would hit at every byte of such a run.
    Run { byte: u8, min: usize },
    /// A token of three `.`-separated parts of `[A-Za-z0-9_-]` whose middle part is
    /// `middle.0..=middle.1` bytes and whose first part is at least `first` (a Discord bot
    /// token, whose base64 starts `MTk`, `NDE`, `ODE` are syllables of ordinary words and would
    /// hit everywhere as anchors); the window is taken around the first dot, as around an
    /// anchor. Found from the bitmap of dots (`scan::Classes`), far cheaper than a pass over every
    /// byte.
    Dotted { first: usize, middle: (usize, usize) },
    /// A credential word (`key`, `token`, `secret`…) in an identifier given a random-looking
    /// value, with a service of the catalogue named nearby (`service.rs`). The finding is named
    /// after the service (`sendgrid-credential`).
    Service,
}

/// A structural validator applied to the secret before entropy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    None,
    /// GitHub / npm: the last 6 characters are the base62 CRC32 of the 30 before them.
    Crc32Base62,
    /// A JWT whose header decodes to a JSON object with an `alg`.
    Jwt,
    /// A PEM block whose body is base64 of at least 64 bytes.
    Pem,
    /// An OpenSSH private key block (`openssh-key-v1\0` inside).
    OpenSsh,
    /// Luhn checksum (payment cards), no known test number.
    Luhn,
    /// ISO 13616 mod-97 (IBAN).
    Iban,
    /// US SSN issuance rules (area, group, serial; no known fakes).
    Ssn,
    /// A URL whose password is not a placeholder.
    UrlPassword,
    /// A bech32 string (BIP-173 checksum), e.g. an age secret key.
    Bech32,
    /// HTTP Basic credentials: base64 of `user:password` whose password is not a placeholder.
    BasicAuth,
    /// `user:password` from a command line (`curl -u`): the password is real.
    UserPassword,
    /// A password on its own (`ClearTextPassword`): not a placeholder, reference or trivial word.
    Password,
    /// A password given to a command-line flag: as [`Check::Password`], and not a word of one
    /// case, which after the flag's name is prose ("the password flag's options") or a
    /// placeholder in capitals.
    FlagPassword,
    /// A Kubernetes `Secret`'s `data:` value: base64 of a real password or of key material.
    SecretData,
    /// A Discord bot token: its first part is base64 of a numeric snowflake id.
    DiscordId,
    /// At least two letters and two digits (capitals-and-digits keys, not words).
    MixedAlnum,
    /// A Jenkins `hudson.util.Secret`: base64 of version 1, a 16-byte IV, the ciphertext's
    /// length and the ciphertext.
    JenkinsSecret,
}

/// How sure a match is a real credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// What the default policy does with a leak finding of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// A live-looking credential or private key: blocked by default.
    Credential,
    /// Personal data or a generic high-entropy assignment: a warning by default.
    Sensitive,
}

/// One piece of a generated sample token (test vectors are generated, never committed).
#[derive(Debug, Clone, Copy)]
pub enum Part {
    Lit(&'static str),
    /// `n` random characters of the alphabet.
    Rand(&'static str, usize),
    /// The base62 CRC32 of the characters generated since the last literal (6 characters).
    Crc32Base62,
    /// A generator for structured tokens (PEM blocks, JWTs, card numbers, IBANs).
    Gen(fn(&mut super::rng::Rng) -> String),
}

/// A detection rule.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Stable identifier (`anthropic-api-key`), printed in findings.
    pub id: &'static str,
    /// Family for the reference score (Eq. 1) and for policy (`disable_families`, weights).
    pub family: &'static str,
    pub trigger: Trigger,
    /// Regex (ASCII, bytes) run around each trigger; `(?P<secret>…)` marks the secret.
    pub regex: &'static str,
    /// Bytes before and after the anchor's start that a match may span.
    pub before: usize,
    pub after: usize,
    pub check: Check,
    /// Minimum Shannon entropy of the secret in bits per character (0: none).
    pub min_entropy: f32,
    pub confidence: Confidence,
    pub severity: Severity,
    /// Regex for the token-shaped prefix that host content filters react to, matched at the
    /// anchor; when present, a match of it that is not a leak is still reported as filter risk.
    pub prefix: Option<&'static str>,
    /// Environment variable the suggested replacement reads.
    pub env: &'static str,
    /// Whether the regex needs a key name before the value (`aws_secret_access_key = …`).
    pub needs_key: bool,
    /// A catch-all rule (bearer headers, URL passwords, `key = value`): any vendor-specific
    /// finding on the same text outranks it, even one whose checksum failed.
    pub generic: bool,
    /// A generator for realistic samples of the secret (as `needs_key` rules expect the value).
    pub sample: &'static [Part],
}

/// Defaults for the fields most rules share; `..BASE` in the table.
pub const BASE: Rule = Rule {
    id: "",
    family: "api_key",
    trigger: Trigger::Anchors(&[]),
    regex: "",
    before: 0,
    after: 256,
    check: Check::None,
    min_entropy: 0.0,
    confidence: Confidence::Medium,
    severity: Severity::Credential,
    prefix: None,
    env: "SECRET",
    needs_key: false,
    generic: false,
    sample: &[],
};
