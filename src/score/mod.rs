//! The risk scorer: content and path in, a [`Report`] out. Pure: no I/O, clock or environment.
//!
//! ```text
//!   stage 1  every rule's anchors (ASCII case-insensitive, overlapping: a gram sieve with
//!            AVX2, else one Aho-Corasick automaton) + linear structural passes (digit runs,
//!            IBAN starts, base64 runs)
//!   stage 2  each rule's regex, only on the merged windows around its triggers
//!   stage 3  structural validators (checksums, JWT header, PEM/OpenSSH body, Luhn, mod-97,
//!            SSN rules), then placeholder filters, then minimum entropy
//!   report   leak risk, filter risk, the reference's Eq. 1 score and verdict, findings with a
//!            salted hash and a replacement in the file's language — never the secret itself
//! ```
//!
//! Linear time by construction: the automaton and the structural passes are single passes, the
//! regexes (finite automata, no backtracking) run on merged windows whose total size is at most
//! the input, and findings per rule are capped ([`MAX_FINDINGS_PER_RULE`]; Eq. 1 saturates at
//! three hits per family anyway). Never one giant `RegexSet`.
//!
//! Inside, `codec.rs` (base62 CRC32, bech32, mod-97) and `rng.rs` sit at the bottom; the
//! validators (`check.rs`) and the sample generator (`sample.rs`, test vectors made on demand)
//! both use them and not each other; a rule (`rule.rs`) names `rng::Rng` only as the type of its
//! sample generators.
//!
//! What this module does not do: decide. Whether a finding blocks a write is the policy's
//! business (`crate::policy`).

mod check;
mod codec;
mod context;
mod filter;
mod generic;
mod grams;
pub mod interop;
mod replace;
mod report;
mod rng;
mod rule;
pub mod rules;
pub mod sample;
mod scan;
pub mod service;
mod structured;
mod words;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use regex_automata::Input;
use regex_automata::meta::Regex;
use regex_automata::util::syntax;

pub use check::passes as check_passes;
pub use context::FileKind;
pub use filter::{entropy, is_placeholder};
pub use replace::Lang;
pub use report::{DEFAULT_WEIGHTS, Finding, Hint, Kind, Level, Report, Risk, SizeHit, Thresholds, Verdict};
pub use rule::{Check, Confidence, Part, Rule, Severity, Trigger};

/// What a scan reads of a file's path: its language (the replacement a finding suggests), its
/// kind (configuration, code, sample: how a generic assignment is judged) and its name (how it
/// is parsed). The same bytes scanned at two paths of equal contexts give the same report,
/// unless the scanner reads whole paths ([`Scanner::reads_whole_paths`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathContext {
    lang: Lang,
    kind: FileKind,
    /// The file's name, lower case (`None`: no path).
    name: Option<String>,
}

impl PathContext {
    pub fn of(path: Option<&str>) -> PathContext {
        let name = path.map(|p| p.rsplit('/').next().unwrap_or(p).to_ascii_lowercase());
        PathContext { lang: Lang::of(path), kind: FileKind::of(path), name }
    }
}

use crate::sha::Hasher;

/// Findings kept per rule and scan; a rule that reaches it is listed in `Report::truncated`.
pub const MAX_FINDINGS_PER_RULE: usize = 200;
/// The reference's `long_base64_blob` threshold.
const BASE64_BLOB_MIN: usize = 200;
/// Non-printable bytes above this share of the content are the paper's dense binary content
/// (POLICY.md's "more than 40% non-printable").
const NON_PRINTABLE_SHARE: f64 = 0.40;

/// A pattern added by the policy (`extend_patterns`): searched over the whole content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraPattern {
    pub family: String,
    pub name: String,
    pub regex: String,
}

/// What a [`Scanner`] is built from (the policy's scanning part).
#[derive(Debug, Clone, Default)]
pub struct ScanConfig {
    pub disabled_families: BTreeSet<String>,
    pub extra: Vec<ExtraPattern>,
    /// Family weights for Eq. 1 over [`DEFAULT_WEIGHTS`].
    pub weights: BTreeMap<String, f64>,
    pub thresholds: Thresholds,
    /// Salt of the findings' hashes.
    pub salt: [u8; 16],
    /// The team's gitleaks and detect-secrets configuration (`interop.rs`).
    pub interop: Arc<interop::Interop>,
}

impl ScanConfig {
    /// The policy's own patterns in use, compiled: what [`Scanner::new`] adds to the built-in
    /// rules, and all of it that can fail (checking a policy needs nothing else, so commands
    /// that never scan do not pay for building the built-in rules).
    pub fn compile_extra(&self) -> Result<Vec<(ExtraPattern, Regex)>, BadPattern> {
        let mut extra = Vec::new();
        for pattern in &self.extra {
            if self.disabled_families.contains(&pattern.family) {
                continue;
            }
            let regex =
                compile(&pattern.regex).map_err(|message| BadPattern { name: pattern.name.clone(), message })?;
            extra.push((pattern.clone(), regex));
        }
        Ok(extra)
    }
}

/// An `extend_patterns` regex that does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPattern {
    pub name: String,
    pub message: String,
}

impl std::fmt::Display for BadPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pattern {}: {}", self.name, self.message)
    }
}

impl std::error::Error for BadPattern {}

/// A rule and its regexes, each compiled on its first use: a scan of a small file meets few
/// rules, and compiling all of them made every `rwfs scan` start slow.
struct Compiled {
    rule: &'static Rule,
    regex: OnceLock<Option<Regex>>,
    prefix: OnceLock<Option<Regex>>,
}

impl Compiled {
    fn new(rule: &'static Rule) -> Compiled {
        Compiled { rule, regex: OnceLock::new(), prefix: OnceLock::new() }
    }

    // The table's patterns are fixed and compile (`tests/scan.rs` compiles every rule).
    fn regex(&self) -> Option<&Regex> {
        let rule = self.rule;
        self.regex
            .get_or_init(|| (!rule.regex.is_empty()).then(|| compile(rule.regex).expect("built-in pattern compiles")))
            .as_ref()
    }

    fn prefix(&self) -> Option<&Regex> {
        let rule = self.rule;
        self.prefix.get_or_init(|| rule.prefix.map(|p| compile(p).expect("built-in pattern compiles"))).as_ref()
    }
}

/// A compiled set of rules; cheap to share, scans concurrently.
pub struct Scanner {
    config: ScanConfig,
    weights: BTreeMap<String, f64>,
    /// The built-in rules in use, compiled once per set of disabled families.
    set: Arc<RuleSet>,
    extra: Vec<(ExtraPattern, Regex)>,
}

/// The compiled built-in rules minus some families: the expensive part of a scanner.
struct RuleSet {
    rules: Vec<Compiled>,
    anchors: Option<scan::Anchors>,
    /// Automaton pattern → rules it triggers.
    anchor_rules: Vec<Vec<usize>>,
    /// Rules whose one anchor is [`scan::AT`]: their windows come from the bitmap of
    /// [`scan::Classes`], not from the automaton.
    at_rules: Vec<usize>,
    /// The generic assignment rule, which parsed configuration files report under.
    generic: Option<usize>,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner").field("rules", &self.set.rules.len()).field("extra", &self.extra.len()).finish()
    }
}

fn compile(pattern: &str) -> Result<Regex, String> {
    Regex::builder()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(Regex::config().nfa_size_limit(Some(8 << 20)).dfa_size_limit(Some(8 << 20)))
        .build(pattern)
        .map_err(|e| e.to_string())
}

impl RuleSet {
    /// Every built-in rule (compiled once per process and shared), or the rules outside
    /// `disabled` (compiled anew: a policy that disables families is rare).
    fn get(disabled: &BTreeSet<String>) -> Arc<RuleSet> {
        static ALL: OnceLock<Arc<RuleSet>> = OnceLock::new();
        let keep = |rule: &Rule| !disabled.contains(rule.family);
        if disabled.is_empty() {
            ALL.get_or_init(|| Arc::new(RuleSet::build(keep))).clone()
        } else {
            Arc::new(RuleSet::build(keep))
        }
    }

    fn build(keep: impl Fn(&Rule) -> bool) -> RuleSet {
        let mut rules = Vec::new();
        let mut anchors: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut at_rules = Vec::new();
        let at = [char::from(scan::AT).to_string()];
        for rule in rules::RULES.iter().filter(|r| keep(r)) {
            let index = rules.len();
            let words: &[&str] = match rule.trigger {
                Trigger::Anchors(words) if words == at => {
                    at_rules.push(index);
                    &[]
                }
                Trigger::Anchors(words) => words,
                Trigger::Generic => rules::GENERIC_KEYWORDS,
                Trigger::Service => service::KEYWORDS,
                Trigger::Digits | Trigger::Iban | Trigger::Run { .. } | Trigger::Dotted { .. } => &[],
            };
            for word in words {
                anchors.entry(word.to_ascii_lowercase()).or_default().push(index);
            }
            rules.push(Compiled::new(rule));
        }
        let (patterns, anchor_rules): (Vec<String>, Vec<Vec<usize>>) = anchors.into_iter().unzip();
        let anchors = (!patterns.is_empty()).then(|| scan::Anchors::new(&patterns).expect("built-in anchors compile"));
        let generic = rules.iter().position(|c| matches!(c.rule.trigger, Trigger::Generic));
        RuleSet { rules, anchors, anchor_rules, at_rules, generic }
    }
}

impl Scanner {
    /// The built-in rules and the default configuration.
    pub fn builtin() -> Scanner {
        Scanner::new(ScanConfig::default()).expect("built-in rules compile")
    }

    /// A scanner for `config`; only the policy's own patterns can fail to compile.
    pub fn new(config: ScanConfig) -> Result<Scanner, BadPattern> {
        let extra = config.compile_extra()?;
        let set = RuleSet::get(&config.disabled_families);
        let mut weights: BTreeMap<String, f64> = DEFAULT_WEIGHTS.iter().map(|(f, w)| (f.to_string(), *w)).collect();
        weights.extend(config.weights.iter().map(|(f, w)| (f.clone(), *w)));
        Ok(Scanner { config, weights, set, extra })
    }

    /// Number of rules in use (built-in and extra).
    pub fn rule_count(&self) -> usize {
        self.set.rules.len() + self.extra.len()
    }

    /// Does a scan read more of a path than its [`PathContext`]? A team's gitleaks or
    /// detect-secrets files (`interop.rs`) match and allow by whole paths.
    pub fn reads_whole_paths(&self) -> bool {
        !self.config.interop.is_empty()
    }

    /// Scan `hay`; `path` (workspace-relative) picks the replacement language, the file's kind
    /// and how it is parsed (its [`PathContext`]), and what a team's interop files match.
    pub fn scan(&self, hay: &[u8], path: Option<&str>) -> Report {
        let context = PathContext::of(path);
        let mut out = Collector::new(self, hay, path, context.lang, context.kind);
        let classes = scan::Classes::of(hay);
        self.anchored(hay, &classes, &mut out);
        self.parsed(hay, context.name.as_deref(), &mut out);
        self.structural(hay, &classes, &mut out);
        self.extra_patterns(hay, &mut out);
        for found in self.config.interop.custom_findings(hay, path) {
            out.custom(&found.rule, found.secret);
        }
        out.finish(self, &classes)
    }

    /// Stage 1 and 2 for anchored rules (and the generic detector).
    fn anchored(&self, hay: &[u8], classes: &scan::Classes, out: &mut Collector<'_>) {
        let mut spans: Vec<scan::Spans> = vec![scan::Spans::default(); self.set.rules.len()];
        let mut generic_hits: Vec<(usize, usize)> = Vec::new();
        let mut service_hits: Vec<(usize, usize)> = Vec::new();
        for hit in self.set.anchors.iter().flat_map(|anchors| anchors.find(hay)) {
            for &r in &self.set.anchor_rules[hit.anchor] {
                let rule = self.set.rules[r].rule;
                match rule.trigger {
                    Trigger::Generic => {
                        generic_hits.push((r, hit.start));
                        continue;
                    }
                    Trigger::Service => {
                        service_hits.push((r, hit.start));
                        continue;
                    }
                    _ => {}
                }
                spans[r].push(hit.start.saturating_sub(rule.before)..(hit.start + rule.after).min(hay.len()));
            }
        }
        for &r in &self.set.at_rules {
            let rule = self.set.rules[r].rule;
            for at in scan::ats(classes) {
                spans[r].push(at.saturating_sub(rule.before)..(at + rule.after).min(hay.len()));
            }
        }
        for (r, compiled) in self.set.rules.iter().enumerate() {
            let rule = compiled.rule;
            match rule.trigger {
                Trigger::Run { byte, min } => {
                    for run in scan::byte_runs(hay, byte, min) {
                        spans[r].push(run.end.saturating_sub(rule.before)..(run.end + rule.after).min(hay.len()));
                    }
                }
                Trigger::Dotted { first, middle } => {
                    for at in scan::dotted(hay, classes, first, middle) {
                        spans[r].push(at.saturating_sub(rule.before)..(at + rule.after).min(hay.len()));
                    }
                }
                _ => {}
            }
        }
        for (r, rule_spans) in spans.iter().enumerate() {
            let compiled = &self.set.rules[r];
            for span in rule_spans.iter() {
                out.work += span.len() as u64;
                if let Some(regex) = compiled.regex() {
                    for caps in regex.captures_iter(Input::new(hay).range(span.clone())) {
                        if out.full(r) {
                            break;
                        }
                        let Some(whole) = caps.get_match() else {
                            continue;
                        };
                        let secret = caps.get_group_by_name("secret").unwrap_or(whole.span());
                        out.candidate(r, compiled.rule, secret.start..secret.end);
                    }
                }
                if let Some(prefix) = compiled.prefix() {
                    for m in prefix.find_iter(Input::new(hay).range(span.clone())) {
                        out.prefix(r, compiled.rule, m.start()..m.end());
                    }
                }
            }
        }
        for (r, at) in generic_hits {
            if out.full(r) {
                continue;
            }
            if let Some(assignment) = generic::find(hay, at, out.lang.has_bare_strings()) {
                let key = String::from_utf8_lossy(&hay[assignment.key]).into_owned();
                out.assignment(r, self.set.rules[r].rule, &key, assignment.value);
            }
        }
        // Hits arrive in order of their end; several anchors in one key (`api_key_token`) are
        // one key, judged once.
        service_hits.sort_unstable_by_key(|&(_, at)| at);
        let mut judged = 0;
        for (r, at) in service_hits {
            if at < judged || out.full(r) {
                continue;
            }
            judged = service::key_around(hay, at).end;
            if let Some(hit) = service::find(hay, at) {
                out.service(r, self.set.rules[r].rule, hit);
            }
        }
    }

    /// Configuration files parsed (`structured.rs`, by the file's `name` or its content): each
    /// leaf whose key path and value say credential is judged as a generic assignment. Never
    /// source code; a file that does not parse is left to the line detectors.
    fn parsed(&self, hay: &[u8], name: Option<&str>, out: &mut Collector<'_>) {
        let Some(r) = self.set.generic else { return };
        if out.kind == FileKind::Code || hay.len() > structured::MAX_BYTES {
            return;
        }
        let Some(format) = structured::Format::of(name, hay) else { return };
        let Some(leaves) = std::str::from_utf8(hay).ok().and_then(|text| structured::leaves(format, text)) else {
            return;
        };
        out.work += hay.len() as u64;
        let rule = self.set.rules[r].rule;
        // Four passes over the file at most for values found by search.
        let (mut cursor, mut budget) = (0, 4 * hay.len());
        for (leaf, _) in structured::candidates(&leaves) {
            if out.full(r) {
                break;
            }
            let span = leaf.span.clone().or_else(|| structured::locate(hay, &leaf.value, &mut cursor, &mut budget));
            if let Some(span) = span {
                let key = leaf.path.iter().rev().find(|k| k.as_str() != "[]").map_or("", String::as_str);
                out.assignment(r, rule, key, span);
            }
        }
    }

    /// Rules triggered by the linear structural passes, and `binary_hint`.
    fn structural(&self, hay: &[u8], classes: &scan::Classes, out: &mut Collector<'_>) {
        let wants = |t: fn(&Trigger) -> bool| self.set.rules.iter().any(|c| t(&c.rule.trigger));
        if wants(|t| matches!(t, Trigger::Digits)) {
            let runs = scan::digit_runs_of(hay, classes);
            self.on_runs(hay, &runs, |t| matches!(t, Trigger::Digits), out);
        }
        if wants(|t| matches!(t, Trigger::Iban)) {
            let runs = scan::iban_runs_of(hay, classes);
            self.on_runs(hay, &runs, |t| matches!(t, Trigger::Iban), out);
        }
        if !self.config.disabled_families.contains("binary_hint") {
            out.blobs = scan::base64_runs(hay, classes, BASE64_BLOB_MIN);
            out.dense = dense_non_printable(hay, classes);
        }
    }

    /// Run the rules of a structural trigger on each run, anchored to the run.
    fn on_runs(&self, hay: &[u8], runs: &[Range<usize>], trigger: fn(&Trigger) -> bool, out: &mut Collector<'_>) {
        if runs.is_empty() {
            return;
        }
        for (r, compiled) in self.set.rules.iter().enumerate() {
            // The trigger first: `regex()` compiles on first use.
            if !trigger(&compiled.rule.trigger) {
                continue;
            }
            let Some(regex) = compiled.regex() else { continue };
            for run in runs {
                if out.full(r) {
                    break;
                }
                out.work += run.len() as u64;
                // Anchored rules (`^…$`) see the run as the whole haystack.
                if let Some(caps) = regex.captures_iter(Input::new(&hay[run.clone()])).next()
                    && let Some(whole) = caps.get_match()
                {
                    let secret = caps.get_group_by_name("secret").unwrap_or(whole.span());
                    out.candidate(r, compiled.rule, run.start + secret.start..run.start + secret.end);
                }
            }
        }
    }

    /// The policy's `extend_patterns`, over the whole content (they have no anchors).
    fn extra_patterns(&self, hay: &[u8], out: &mut Collector<'_>) {
        for (pattern, regex) in &self.extra {
            out.work += hay.len() as u64;
            for m in regex.find_iter(Input::new(hay)).take(MAX_FINDINGS_PER_RULE) {
                out.extra(pattern, m.start()..m.end());
            }
        }
    }
}

/// Findings as they are found, before deduplication and the report.
struct Collector<'a> {
    hay: &'a [u8],
    path: Option<&'a str>,
    lang: replace::Lang,
    kind: FileKind,
    salt: [u8; 16],
    raw: Vec<Raw>,
    per_rule: Vec<usize>,
    /// `binary_hint`: base64 runs of [`BASE64_BLOB_MIN`]+ bytes.
    blobs: Vec<Range<usize>>,
    /// `binary_hint`: the first non-printable byte and their number, when they are dense.
    dense: Option<(usize, usize)>,
    work: u64,
}

/// A finding before it has a line and column.
struct Raw {
    rule: String,
    family: String,
    kind: Kind,
    confidence: Confidence,
    severity: Severity,
    validated: bool,
    /// A filter hit of a rule with a structural check (checksum, decoding): the token failed it.
    checked: bool,
    /// Named after a service of the catalogue (`service.rs`).
    named: bool,
    vendor: bool,
    generic: bool,
    env: std::borrow::Cow<'static, str>,
    span: Range<usize>,
}

impl<'a> Collector<'a> {
    fn new(
        scanner: &Scanner,
        hay: &'a [u8],
        path: Option<&'a str>,
        lang: replace::Lang,
        kind: FileKind,
    ) -> Collector<'a> {
        Collector {
            hay,
            path,
            lang,
            kind,
            salt: scanner.config.salt,
            raw: Vec::new(),
            per_rule: vec![0; scanner.set.rules.len()],
            blobs: Vec::new(),
            dense: None,
            work: 0,
        }
    }

    fn full(&self, r: usize) -> bool {
        self.per_rule[r] >= MAX_FINDINGS_PER_RULE
    }

    /// A generic assignment: a leak of the generic rule, which blocks when the file's kind, the
    /// key and the value together say it is a deployed credential ([`context::promotes`]).
    fn assignment(&mut self, r: usize, rule: &'static Rule, key: &str, value: Range<usize>) {
        if !self.candidate(r, rule, value.clone()) {
            return;
        }
        let mut line_start = memchr::memrchr(b'\n', &self.hay[..value.start]).map_or(0, |i| i + 1);
        // A command continued over lines (`\` at their ends) is one line.
        for _ in 0..16 {
            let prev = &self.hay[..line_start.saturating_sub(1)];
            if line_start == 0 || !prev.trim_ascii_end().ends_with(b"\\") {
                break;
            }
            line_start = memchr::memrchr(b'\n', prev).map_or(0, |i| i + 1);
        }
        let line_end = memchr::memchr(b'\n', &self.hay[value.end..]).map_or(self.hay.len(), |i| value.end + i);
        let line = String::from_utf8_lossy(&self.hay[line_start..line_end]);
        let value = String::from_utf8_lossy(&self.hay[value]);
        if context::promotes(self.kind, key, &value, &line)
            && let Some(last) = self.raw.last_mut()
        {
            last.severity = Severity::Credential;
            last.confidence = Confidence::Medium;
        }
    }

    /// A regex match of rule `r`: a leak if it passes the checks, else nothing (the prefix pass
    /// reports token-shaped text). Whether it was kept.
    fn candidate(&mut self, r: usize, rule: &'static Rule, span: Range<usize>) -> bool {
        let Ok(secret) = std::str::from_utf8(&self.hay[span.clone()]) else {
            return false;
        };
        if !check::passes(rule.check, secret) || (rule.family != "pem_block" && placeholder(rule, secret)) {
            return false;
        }
        // A documentation example token, whichever rule found it (`Bearer eyJ…` of jwt.io).
        if secret.starts_with("eyJ") && check::jwt_example(secret) {
            return false;
        }
        if rule.check == Check::None && rule.min_entropy > 0.0 && filter::entropy(secret.as_bytes()) < rule.min_entropy
        {
            return false;
        }
        // An address right after `:` or `/` is a URL's userinfo, not an email.
        if rule.id == "email-address"
            && (!email_ok(secret) || span.start > 0 && matches!(self.hay[span.start - 1], b':' | b'/'))
        {
            return false;
        }
        if !rule.regex.contains("://") && broken_by_question_mark(self.hay, &span) {
            return false;
        }
        // The storage emulator's account key is published in Microsoft's documentation.
        if rule.id == "azure-storage-account-key" && near(self.hay, &span, 200, &["devstoreaccount1"]) {
            return false;
        }
        // Google API keys that ship to every browser or phone are public by design (restricted by
        // referrer or app): Firebase web configurations, `google-services.json` and
        // `GoogleService-Info.plist`, the Maps JavaScript API's `<script>` URL, Android's
        // `com.google.android.geo.API_KEY` and `<string name="google_maps_key">` resource. A warning, not a block.
        let firebase = [
            "firebase",
            "authdomain",
            "messagingsenderid",
            "storagebucket",
            "current_key",
            "gcm_sender_id",
            "google_app_id",
            "maps.googleapis.com/maps/api/js",
            "com.google.android.geo.api_key",
            "name=\"google_maps_key\"",
        ];
        let severity = if (rule.id == "google-api-key" && near(self.hay, &span, 400, &firebase))
            || (rule.id == "aws-access-key-id" && presigned_credential(self.hay, &span))
        {
            Severity::Sensitive
        } else {
            rule.severity
        };
        self.per_rule[r] += 1;
        self.raw.push(Raw {
            rule: rule.id.to_string(),
            family: rule.family.to_string(),
            kind: Kind::Leak,
            confidence: rule.confidence,
            severity,
            validated: rule.check != Check::None,
            checked: false,
            named: false,
            vendor: rule.prefix.is_some(),
            generic: rule.generic,
            env: rule.env.into(),
            span,
        });
        true
    }

    /// A service-keyed credential (`service.rs`): named after its service, blocked by default.
    /// It warns instead where the value alone does not convince ([`context::service_blocks`]).
    fn service(&mut self, r: usize, rule: &'static Rule, hit: service::Hit) {
        let service = &service::catalogue().services[hit.service as usize];
        let line = interop::line_of(self.hay, hit.value.start);
        let value = String::from_utf8_lossy(&self.hay[hit.value.clone()]);
        let severity = if context::service_blocks(self.kind, &value, &String::from_utf8_lossy(&self.hay[line])) {
            rule.severity
        } else {
            Severity::Sensitive
        };
        self.per_rule[r] += 1;
        self.raw.push(Raw {
            rule: format!("{}-credential", service.id),
            family: rule.family.to_string(),
            kind: Kind::Leak,
            confidence: rule.confidence,
            severity,
            validated: false,
            checked: false,
            named: true,
            vendor: false,
            // A vendor rule that knows the value's format (a Google API key in a Firebase
            // configuration, a `sk_live_` key) has the last word on it.
            generic: true,
            env: service.env().into(),
            span: hit.value,
        });
    }

    /// A token-shaped prefix of rule `r` at `span`: filter risk, extended over the token.
    fn prefix(&mut self, r: usize, rule: &'static Rule, span: Range<usize>) {
        if self.full(r) {
            return;
        }
        let mut end = span.end;
        while end < self.hay.len()
            && end - span.start < 256
            && !matches!(self.hay[end], b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'\'' | b'`' | b',' | b';' | b')')
        {
            end += 1;
        }
        self.per_rule[r] += 1;
        self.raw.push(Raw {
            rule: rule.id.to_string(),
            family: rule.family.to_string(),
            kind: Kind::Filter,
            confidence: rule.confidence,
            severity: rule.severity,
            validated: false,
            checked: rule.check != Check::None,
            named: false,
            vendor: true,
            generic: rule.generic,
            env: rule.env.into(),
            span: span.start..end,
        });
    }

    /// A finding of a custom rule of the team's `.gitleaks.toml`: it fails their CI, so it blocks.
    fn custom(&mut self, rule: &str, span: Range<usize>) {
        self.blocking(rule, "api_key", span);
    }

    fn extra(&mut self, pattern: &ExtraPattern, span: Range<usize>) {
        self.blocking(&pattern.name, &pattern.family, span);
    }

    /// A blocking credential finding of a rule rwfs does not know (the team's own rules).
    fn blocking(&mut self, rule: &str, family: &str, span: Range<usize>) {
        self.raw.push(Raw {
            rule: rule.to_string(),
            family: family.to_string(),
            kind: Kind::Leak,
            confidence: Confidence::Medium,
            severity: Severity::Credential,
            validated: false,
            checked: false,
            named: false,
            vendor: false,
            generic: false,
            env: "SECRET".into(),
            span,
        });
    }

    fn finish(self, scanner: &Scanner, classes: &scan::Classes) -> Report {
        let hay = self.hay;
        let kept = dedupe(self.raw);
        let allowed = allowed_lines(hay);
        let mut kept: Vec<Raw> =
            kept.into_iter().filter(|f| !allowed.iter().any(|l| l.contains(&f.span.start))).collect();
        let interop = &scanner.config.interop;
        if !interop.is_empty() {
            let mut positions = Positions::new(hay);
            let path = self.path.unwrap_or("");
            kept.retain(|f| {
                let line = interop::line_of(hay, f.span.start);
                let secret = &hay[f.span.clone()];
                let candidate = interop::Candidate {
                    path,
                    rule: &f.rule,
                    secret,
                    whole: secret,
                    line_text: &hay[line],
                    line: positions.at(f.span.start).0,
                };
                !interop.allows(&candidate)
            });
        }
        let (line_count, max_line_len) = line_stats(hay, classes);
        let mut positions = Positions::new(hay);
        let mut findings = Vec::with_capacity(kept.len());
        let mut leak = 0f32;
        let mut filtered = 0f32;
        // Eq. 1's n_f: distinct matched strings per family, so a key repeated is one key.
        let mut distinct: BTreeMap<&str, BTreeSet<&[u8]>> = BTreeMap::new();
        for raw in &kept {
            distinct.entry(&raw.family).or_default().insert(&hay[raw.span.clone()]);
        }
        let mut counts: BTreeMap<String, usize> =
            distinct.into_iter().map(|(family, matches)| (family.to_string(), matches.len())).collect();
        for raw in kept {
            let (line, column) = positions.at(raw.span.start);
            let secret = &hay[raw.span.clone()];
            let (replacement, replace) =
                replace::suggest(hay, raw.span.clone(), &raw.env, &raw.family, &raw.rule, self.lang);
            let finding = Finding {
                snippet: snippet(secret),
                hash: salted_hash(&self.salt, secret),
                length: secret.len(),
                line,
                column,
                rule: raw.rule,
                family: raw.family,
                kind: raw.kind,
                confidence: raw.confidence,
                severity: match raw.severity {
                    Severity::Credential => "credential",
                    Severity::Sensitive => "sensitive",
                },
                validated: raw.validated,
                replacement,
                span: raw.span,
                replace,
            };
            leak = leak.max(report::leak_score(&finding));
            filtered = filtered.max(report::filter_score(&finding, raw.vendor));
            findings.push(finding);
        }
        // Capped rules: their findings beyond the cap still count in Eq. 1.
        let mut truncated = Vec::new();
        for (r, &n) in self.per_rule.iter().enumerate() {
            if n >= MAX_FINDINGS_PER_RULE {
                truncated.push(scanner.set.rules[r].rule.id.to_string());
            }
        }
        let hints = hints(hay, &self.blobs, self.dense);
        if !hints.is_empty() {
            let blobs: BTreeSet<&[u8]> = self.blobs.iter().map(|r| &hay[r.clone()]).collect();
            counts.insert("binary_hint".into(), blobs.len() + usize::from(self.dense.is_some()));
        }
        let size = report::size_hits(hay.len(), line_count, max_line_len);
        let (score, verdict) = report::reference_score(&counts, &scanner.weights, &size, &scanner.config.thresholds);
        Report {
            bytes: hay.len(),
            line_count,
            max_line_len,
            leak_risk: Risk::of(leak),
            filter_risk: Risk::of(filtered),
            score,
            verdict,
            findings,
            truncated,
            counts,
            hints,
            size,
            work: self.work,
        }
    }
}

/// Keep one finding per overlapping cluster: a vendor-specific rule's leak, or its filter hit
/// when the token failed the rule's checksum or decoding (a fake `ghp_` token is not a generic
/// secret), over a service-named leak (a random value beside a service's name), over another
/// catch-all rule's leak (a random value named by a key), over a
/// vendor prefix whose token only failed a shape the vendor may have changed; then a leak over a
/// filter hit, a credential over personal data, higher confidence, the longer span.
fn dedupe(mut raw: Vec<Raw>) -> Vec<Raw> {
    raw.sort_by_key(|f| (f.span.start, std::cmp::Reverse(f.span.end)));
    let tier = |f: &Raw| match (f.generic, f.kind) {
        (false, Kind::Leak) => 3,
        (false, Kind::Filter) if f.checked => 3,
        (_, Kind::Leak) if f.named => 2,
        (_, Kind::Leak) => 1,
        _ => 0,
    };
    let rank =
        |f: &Raw| (tier(f), f.kind == Kind::Leak, f.severity == Severity::Credential, f.confidence, f.span.len());
    let mut out: Vec<Raw> = Vec::with_capacity(raw.len());
    for f in raw {
        match out.last_mut() {
            Some(last) if f.span.start < last.span.end => {
                if rank(&f) > rank(last) {
                    *last = f;
                }
            }
            _ => out.push(f),
        }
    }
    out
}

/// A placeholder, whole or after the vendor prefix (`shpss_a1b2c3d4…`).
fn placeholder(rule: &Rule, secret: &str) -> bool {
    let body = match rule.sample.first() {
        Some(Part::Lit(prefix)) if !rule.generic => secret.strip_prefix(prefix).unwrap_or(secret),
        // A catch-all rule knows no prefix: a short one before `_` or `-` (`shpss_`, `key-`).
        _ => secret.split_once(['_', '-']).filter(|(p, _)| p.len() <= 12).map_or(secret, |(_, b)| b),
    };
    filter::is_placeholder(secret) || (body.len() >= 8 && filter::is_placeholder(body))
}

/// A token cut by `?` (a lost non-ASCII byte, a truncated paste): `tok?en` is two fragments,
/// neither of which is the credential.
fn broken_by_question_mark(hay: &[u8], span: &Range<usize>) -> bool {
    let token = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    (hay.get(span.end) == Some(&b'?') && token(hay.get(span.end + 1)))
        || (span.start >= 2 && hay[span.start - 1] == b'?' && token(hay.get(span.start - 2)))
}

/// Does one of `markers` (lowercase) occur within `reach` bytes of `span`, in any case? Used
/// for context that changes a finding's meaning: a Firebase web configuration (its API key
/// ships to every browser), the storage emulator's documented account.
fn near(hay: &[u8], span: &Range<usize>, reach: usize, markers: &[&str]) -> bool {
    let window = hay[span.start.saturating_sub(reach)..(span.end + reach).min(hay.len())].to_ascii_lowercase();
    markers.iter().any(|m| memchr::memmem::find(&window, m.as_bytes()).is_some())
}

/// Is the AWS access key id at `span` the `X-Amz-Credential` of a presigned URL? AWS hands such
/// URLs to third parties by design: the key id in them is the public half, and what grants access
/// is the signature, valid for at most seven days from `X-Amz-Date`. A warning, not a block (the
/// AWS CLI's pages show expired ones); a key id anywhere else blocks.
fn presigned_credential(hay: &[u8], span: &Range<usize>) -> bool {
    const PARAM: &[u8] = b"x-amz-credential=";
    span.start >= PARAM.len() && hay[span.start - PARAM.len()..span.start].eq_ignore_ascii_case(PARAM)
}

/// Email addresses that are not personal data: reserved domains, no-reply and git hosts, and
/// file names (`logo@2x.png`).
fn email_ok(email: &str) -> bool {
    let lower = email.to_ascii_lowercase();
    let Some((local, domain)) = lower.rsplit_once('@') else {
        return false;
    };
    let tld = domain.rsplit('.').next().unwrap_or("");
    const RESERVED: &[&str] =
        &["example.com", "example.org", "example.net", "localhost", "email.com", "domain.com", "test.com"];
    const RESERVED_TLDS: &[&str] = &["test", "invalid", "localhost", "example", "local", "internal"];
    const FILE_TLDS: &[&str] =
        &["png", "jpg", "jpeg", "gif", "svg", "webp", "js", "ts", "css", "map", "json", "html", "md", "py", "rs", "go"];
    const ROBOTS: &[&str] = &["noreply", "no-reply", "donotreply", "git", "notifications", "users.noreply"];
    let under = |d: &str| domain.strip_suffix(d).is_some_and(|rest| rest.is_empty() || rest.ends_with('.'));
    !(RESERVED.iter().any(|d| under(d))
        || RESERVED_TLDS.contains(&tld)
        || FILE_TLDS.contains(&tld)
        || ROBOTS.iter().any(|r| local == *r || domain.starts_with(r))
        || filter::is_placeholder(&lower))
}

/// What a finding shows of its match: its length only. No character of a secret is ever
/// echoed (not even a vendor prefix or the first few characters): the rule, line, column and
/// salted hash say which one it is.
fn snippet(secret: &[u8]) -> String {
    format!("[hidden: {} chars]", secret.len())
}

fn salted_hash(salt: &[u8; 16], secret: &[u8]) -> String {
    let mut hasher = Hasher::new();
    hasher.update(salt);
    hasher.update(secret);
    hasher.finish().short(12)
}

/// Lines (newlines, plus one for an unterminated last line; 0 for empty content) and the
/// longest line in characters, as the reference counts them. [`scan::Classes`] has them when
/// the content is ASCII; otherwise lines are measured again, each only when it could win.
fn line_stats(hay: &[u8], classes: &scan::Classes) -> (usize, usize) {
    if classes.ascii {
        return (classes.lines, classes.longest_line);
    }
    let mut longest = 0;
    let mut start = 0;
    let mut measure = |line: &[u8]| {
        // A line's characters are at most its bytes.
        if line.len() > longest {
            longest = longest.max(char_count(line));
        }
    };
    for nl in memchr::memchr_iter(b'\n', hay) {
        measure(&hay[start..nl]);
        start = nl + 1;
    }
    measure(&hay[start..]);
    (classes.lines, longest)
}

fn char_count(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
}

/// Line and column (in characters) of increasing offsets: newlines are counted with `memchr`,
/// and the column continues from the previous offset when it is on the same line.
struct Positions<'a> {
    hay: &'a [u8],
    offset: usize,
    line: usize,
    column: usize,
}

impl<'a> Positions<'a> {
    fn new(hay: &'a [u8]) -> Positions<'a> {
        Positions { hay, offset: 0, line: 1, column: 0 }
    }

    fn at(&mut self, target: usize) -> (usize, usize) {
        if target < self.offset {
            *self = Positions::new(self.hay);
        }
        let gap = &self.hay[self.offset..target];
        match memchr::memrchr(b'\n', gap) {
            Some(last) => {
                self.line += memchr::memchr_iter(b'\n', gap).count();
                self.column = char_count(&gap[last + 1..]);
            }
            None => self.column += char_count(gap),
        }
        self.offset = target;
        (self.line, self.column + 1)
    }
}

/// The first non-printable byte and their number, when more than [`NON_PRINTABLE_SHARE`] of the
/// content is non-printable: controls other than tab, newline, carriage return and form feed
/// (NUL included), and DEL, counted by [`scan::Classes`].
fn dense_non_printable(hay: &[u8], classes: &scan::Classes) -> Option<(usize, usize)> {
    let n = classes.non_printable;
    if n == 0 || (n as f64) <= NON_PRINTABLE_SHARE * hay.len() as f64 {
        return None;
    }
    Some((classes.first_non_printable?, n))
}

/// The `binary_hint` items of `detected_patterns`: each base64 blob, then dense non-printable
/// content (placed at its first non-printable byte).
fn hints(hay: &[u8], blobs: &[Range<usize>], dense: Option<(usize, usize)>) -> Vec<Hint> {
    let mut positions = Positions::new(hay);
    let mut out: Vec<Hint> = blobs
        .iter()
        .map(|r| {
            let (line, column) = positions.at(r.start);
            Hint { pattern: "long_base64_blob", line, column, length: r.len() }
        })
        .collect();
    if let Some((first, n)) = dense {
        let (line, column) = Positions::new(hay).at(first);
        out.push(Hint { pattern: "non_printable_bytes", line, column, length: n });
    }
    out
}

/// Byte ranges of the lines that carry an allow marker: rwfs's `rw:allow`, gitleaks'
/// `gitleaks:allow`, detect-secrets' `pragma: allowlist secret` (and its `pragma: allowlist
/// nextline secret`, which allows the line after it). One pass for `allow`, which every marker
/// holds.
fn allowed_lines(hay: &[u8]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    for at in memchr::memmem::find_iter(hay, b"allow") {
        let before = |marker: &[u8]| at >= marker.len() && hay[at - marker.len()..at].eq_ignore_ascii_case(marker);
        let after = |marker: &[u8]| hay.get(at + 5..at + 5 + marker.len()).is_some_and(|m| m == marker);
        if before(b"rw:") || before(b"gitleaks:") || (before(b"pragma: ") && after(b"list secret")) {
            out.push(interop::line_of(hay, at));
        } else if before(b"pragma: ") && after(b"list nextline secret") {
            let line = interop::line_of(hay, at);
            if line.end < hay.len() {
                out.push(interop::line_of(hay, line.end + 1));
            }
        }
    }
    out
}

/// Replace every finding's `replace` range by its replacement (later ranges first).
pub fn apply_replacements(hay: &[u8], findings: &[Finding]) -> Vec<u8> {
    let mut ranges: Vec<(&Range<usize>, &str)> =
        findings.iter().map(|f| (&f.replace, f.replacement.as_str())).collect();
    ranges.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    let mut out = hay.to_vec();
    let mut floor = usize::MAX;
    for (range, text) in ranges {
        if range.end > floor {
            continue;
        }
        out.splice(range.clone(), text.bytes());
        floor = range.start;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_anchor_table_builds() {
        // A small input is searched by the NFA, a large one by the table, with the same findings.
        let set = RuleSet::build(|_| true);
        let anchors = set.anchors.as_ref().expect("built-in anchors");
        let line = "GITHUB_TOKEN=ghp_x api_key: 'k' Bearer sk-ant-x password=p\n";
        let small = anchors.find(line.as_bytes());
        assert!(!small.is_empty() && !anchors.walks_table());
        let large = line.repeat(400);
        let hits = anchors.find(large.as_bytes());
        assert!(anchors.walks_table(), "the built-in anchors' table builds");
        assert_eq!(hits.len(), small.len() * 400);
        assert_eq!(anchors.find(line.as_bytes()), small);
    }

    #[test]
    fn line_stats_count_characters_as_the_reference_does() {
        let mut rng = sample::Rng::new(13);
        for round in 0..2000 {
            let parts: &[&str] =
                if round % 2 == 0 { &["a", "\n", "bc", " "] } else { &["a", "\n", "é", "日本", "x"] };
            let text: String = (0..rng.below(300)).map(|_| parts[rng.below(parts.len())]).collect();
            // The reference: `content.splitlines()` (on `\n` here) and `len(line)` in characters.
            let lines: Vec<&str> =
                if text.is_empty() { vec![] } else { text.strip_suffix('\n').unwrap_or(&text).split('\n').collect() };
            let want = (lines.len(), lines.iter().map(|l| l.chars().count()).max().unwrap_or(0));
            assert_eq!(line_stats(text.as_bytes(), &scan::Classes::of(text.as_bytes())), want, "{text:?}");
        }
    }
}
