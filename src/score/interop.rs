//! A team's existing secret-scanning configuration, read so that it means the same at the gate
//! as in its CI: gitleaks' `.gitleaks.toml` (custom rules, rule and global allowlists) and
//! `.gitleaksignore` (finding fingerprints), and detect-secrets' `.secrets.baseline` (the
//! findings already reviewed, by the SHA-1 of the secret, and its exclusion filters).
//!
//! Key types: [`Interop`] (everything parsed and compiled; `Default` is "no such files"),
//! [`InteropTexts`] (the files' contents, read by the caller). The scanner consults it while it
//! scans ([`Interop::allows`], [`Interop::custom_findings`]).
//!
//! How the files' meanings map onto the gate (from gitleaks' README and detect-secrets'
//! documentation of their formats):
//! - A gitleaks `[[rules]]` entry with a `regex` is a detector: its `secretGroup`, `entropy`
//!   (a finding needs more), `keywords` (one must occur in the file, any case), `path` (a regex
//!   the file's path must match; a rule with only a `path` flags the file) and its allowlists
//!   all apply. Its findings block, as they fail the team's CI.
//! - Allowlists (`[[rules.allowlists]]`, the older `[rules.allowlist]`, global `[[allowlists]]`
//!   and `[allowlist]`, with `targetRules`): `paths`, `regexes` against the secret, the whole
//!   match or the line (`regexTarget`), `stopwords` (in the secret, any case), combined by
//!   `condition` OR (default) or AND. `commits` never match a write (there is no commit yet).
//!   An allowlist of a gitleaks built-in rule id (`generic-api-key`) cannot name an rwfs rule, so
//!   it applies to all of rwfs's own findings, as do global allowlists.
//! - `[extend]` (`useDefault`, `path`, `disabledRules`) is not followed: rwfs's own rules always
//!   run; the gate adds the team's rules to them, it does not replace them.
//! - `.gitleaksignore` lines (`file:rule:line`, with a leading commit or not) allow the findings
//!   on that line of that file, whatever the rule (rule ids differ between the tools).
//! - `.secrets.baseline`: a finding whose secret's SHA-1 is listed for its file is allowed,
//!   unless the team's audit marked it real (`"is_secret": true`); the `should_exclude_file`,
//!   `should_exclude_line` and `should_exclude_secret` filters (and the older `exclude`) apply.
//!
//! Inline markers (`gitleaks:allow`, `pragma: allowlist secret`) are honoured by the scanner
//! itself, like `rw:allow`, whether these files exist or not.
//!
//! What this module does not do: read files (the workspace reads them at the place it reads the
//! policy) or decide actions.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use regex_automata::Input;
use regex_automata::meta::Regex;
use serde::Deserialize;
use sha1::Digest as _;

/// The files' contents, as read from the workspace root.
#[derive(Debug, Clone, Default)]
pub struct InteropTexts {
    pub gitleaks_toml: Option<String>,
    pub gitleaks_ignore: Option<String>,
    pub secrets_baseline: Option<String>,
}

/// A file that does not parse, or a pattern in it that does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInterop {
    /// `.gitleaks.toml`, `.secrets.baseline`.
    pub file: &'static str,
    /// The rule or key concerned, when there is one.
    pub what: String,
    pub message: String,
}

impl std::fmt::Display for BadInterop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.what.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.what, self.message)
        }
    }
}

impl std::error::Error for BadInterop {}

/// What an allowlist regex is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

/// One allowlist, compiled.
#[derive(Debug)]
struct Allowlist {
    and: bool,
    paths: Vec<Regex>,
    regexes: Vec<Regex>,
    target: Target,
    stopwords: Vec<String>,
    /// Rule ids it is limited to (global `targetRules`); empty: every rule.
    target_rules: Vec<String>,
    /// It names commits: under AND it can never match a write.
    commits: bool,
}

/// A custom gitleaks rule, compiled.
#[derive(Debug)]
struct CustomRule {
    id: String,
    regex: Option<Regex>,
    secret_group: usize,
    entropy: f32,
    keywords: Vec<String>,
    path: Option<Regex>,
    allowlists: Vec<Allowlist>,
}

/// A finding of a custom rule: the rule's id, the secret and the whole match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomFinding {
    pub rule: String,
    pub secret: Range<usize>,
}

/// What is known about one finding when its allowlisting is decided.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub path: &'a str,
    pub rule: &'a str,
    pub secret: &'a [u8],
    pub whole: &'a [u8],
    pub line_text: &'a [u8],
    /// 1-based.
    pub line: usize,
}

/// Everything parsed from a team's configuration.
#[derive(Debug, Default)]
pub struct Interop {
    rules: Vec<CustomRule>,
    /// Global allowlists and allowlists of rule ids rwfs does not have.
    allowlists: Vec<Allowlist>,
    /// `.gitleaksignore`: (file, line).
    ignored: BTreeSet<(String, usize)>,
    /// `.secrets.baseline`: file → SHA-1 hex digests of allowed secrets.
    baseline: BTreeMap<String, BTreeSet<String>>,
    exclude_files: Vec<Regex>,
    exclude_lines: Vec<Regex>,
    exclude_secrets: Vec<Regex>,
}

fn compile(pattern: &str) -> Result<Regex, String> {
    let build = |p: &str| {
        Regex::builder()
            .syntax(regex_automata::util::syntax::Config::new().unicode(false).utf8(false))
            .configure(Regex::config().nfa_size_limit(Some(8 << 20)).dfa_size_limit(Some(8 << 20)))
            .build(p)
            .map_err(|e| e.to_string())
    };
    // Go's RE2 reads a `{` that starts no repetition as a literal; this engine needs it escaped.
    build(pattern).or_else(|e| build(&escape_bare_braces(pattern)).map_err(|_| e))
}

/// `{` not followed by a repetition count (`{2}`, `{2,}`, `{2,5}`) escaped.
fn escape_bare_braces(pattern: &str) -> String {
    let b = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\\' && i + 1 < b.len() {
            out.push(c as char);
            out.push(b[i + 1] as char);
            i += 2;
            continue;
        }
        if c == b'{' {
            let rest = &pattern[i + 1..];
            let close = rest.find('}');
            let counted = close.is_some_and(|j| {
                let inner = &rest[..j];
                !inner.is_empty() && inner.bytes().all(|x| x.is_ascii_digit() || x == b',') && !inner.starts_with(',')
            });
            if !counted {
                out.push('\\');
            }
        }
        out.push(c as char);
        i += 1;
    }
    out
}

// ---- gitleaks ------------------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GlFile {
    #[serde(default)]
    rules: Vec<GlRule>,
    #[serde(default)]
    allowlist: Option<GlAllowlist>,
    #[serde(default)]
    allowlists: Vec<GlAllowlist>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GlRule {
    #[serde(default)]
    id: String,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    secret_group: Option<usize>,
    #[serde(default)]
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    allowlist: Option<GlAllowlist>,
    #[serde(default)]
    allowlists: Vec<GlAllowlist>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GlAllowlist {
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    commits: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    regex_target: Option<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    target_rules: Vec<String>,
}

const GITLEAKS: &str = ".gitleaks.toml";
const BASELINE: &str = ".secrets.baseline";

fn bad(file: &'static str, what: &str, message: impl Into<String>) -> BadInterop {
    BadInterop { file, what: what.to_string(), message: message.into() }
}

fn allowlist(spec: &GlAllowlist, what: &str) -> Result<Allowlist, BadInterop> {
    let regexes = |list: &[String]| -> Result<Vec<Regex>, BadInterop> {
        list.iter()
            .map(|p| compile(p).map_err(|e| bad(GITLEAKS, what, format!("allowlist regex {p:?}: {e}"))))
            .collect()
    };
    let target = match spec.regex_target.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("secret") | Some("") => Target::Secret,
        Some("match") => Target::Match,
        Some("line") => Target::Line,
        Some(other) => return Err(bad(GITLEAKS, what, format!("regexTarget {other:?} is not secret, match or line"))),
    };
    let and = match spec.condition.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("OR") | Some("") => false,
        Some("AND") => true,
        Some(other) => return Err(bad(GITLEAKS, what, format!("condition {other:?} is not OR or AND"))),
    };
    Ok(Allowlist {
        and,
        paths: regexes(&spec.paths)?,
        regexes: regexes(&spec.regexes)?,
        target,
        stopwords: spec.stopwords.iter().map(|s| s.to_ascii_lowercase()).collect(),
        target_rules: spec.target_rules.clone(),
        commits: !spec.commits.is_empty(),
    })
}

impl Allowlist {
    /// Does it allow the candidate? OR: any criterion; AND: every criterion it has.
    fn allows(&self, c: &Candidate<'_>) -> bool {
        if !self.target_rules.is_empty() && !self.target_rules.iter().any(|r| r == c.rule) {
            return false;
        }
        let text = match self.target {
            Target::Secret => c.secret,
            Target::Match => c.whole,
            Target::Line => c.line_text,
        };
        let secret = String::from_utf8_lossy(c.secret).to_ascii_lowercase();
        let mut results = Vec::with_capacity(3);
        if !self.paths.is_empty() {
            results.push(self.paths.iter().any(|r| r.is_match(c.path.as_bytes())));
        }
        if !self.regexes.is_empty() {
            results.push(self.regexes.iter().any(|r| r.is_match(Input::new(text))));
        }
        if !self.stopwords.is_empty() {
            results.push(self.stopwords.iter().any(|w| secret.contains(w.as_str())));
        }
        if self.and {
            !self.commits && !results.is_empty() && results.iter().all(|&r| r)
        } else {
            results.iter().any(|&r| r)
        }
    }
}

// ---- detect-secrets ----------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
struct DsBaseline {
    #[serde(default)]
    results: BTreeMap<String, Vec<DsResult>>,
    #[serde(default)]
    filters_used: Vec<DsFilter>,
    #[serde(default)]
    exclude: Option<DsExclude>,
}

#[derive(Debug, Default, Deserialize)]
struct DsResult {
    #[serde(default)]
    hashed_secret: String,
    #[serde(default)]
    is_secret: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct DsFilter {
    #[serde(default)]
    path: String,
    #[serde(default)]
    pattern: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
struct DsExclude {
    #[serde(default)]
    files: Option<String>,
    #[serde(default)]
    lines: Option<String>,
}

/// A path as both tools write it: relative, `/`-separated, no leading `./`.
fn normal(path: &str) -> &str {
    path.trim_start_matches("./")
}

impl Interop {
    /// Parse and compile the files that exist; `Default` when none does.
    pub fn parse(texts: &InteropTexts) -> Result<Interop, BadInterop> {
        let mut out = Interop::default();
        if let Some(text) = &texts.gitleaks_toml {
            out.gitleaks(text)?;
        }
        if let Some(text) = &texts.gitleaks_ignore {
            out.gitleaks_ignore(text);
        }
        if let Some(text) = &texts.secrets_baseline {
            out.baseline(text)?;
        }
        Ok(out)
    }

    /// Is there anything to apply?
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.allowlists.is_empty()
            && self.ignored.is_empty()
            && self.baseline.is_empty()
            && self.exclude_files.is_empty()
            && self.exclude_lines.is_empty()
            && self.exclude_secrets.is_empty()
    }

    /// Number of custom rules.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    fn gitleaks(&mut self, text: &str) -> Result<(), BadInterop> {
        let file: GlFile = toml::from_str(text).map_err(|e| bad(GITLEAKS, "", e.to_string()))?;
        for spec in file.allowlist.iter().chain(&file.allowlists) {
            self.allowlists.push(allowlist(spec, "allowlist")?);
        }
        for rule in &file.rules {
            if rule.id.is_empty() {
                return Err(bad(GITLEAKS, "[[rules]]", "a rule has no id"));
            }
            let lists: Vec<Allowlist> = rule
                .allowlist
                .iter()
                .chain(&rule.allowlists)
                .map(|a| allowlist(a, &rule.id))
                .collect::<Result<_, _>>()?;
            if rule.regex.is_none() && rule.path.is_none() {
                // An entry that only adds allowlists to a gitleaks built-in rule.
                self.allowlists.extend(lists);
                continue;
            }
            let regex = match &rule.regex {
                Some(p) => Some(compile(p).map_err(|e| bad(GITLEAKS, &rule.id, format!("regex: {e}")))?),
                None => None,
            };
            let path = match &rule.path {
                Some(p) => Some(compile(p).map_err(|e| bad(GITLEAKS, &rule.id, format!("path: {e}")))?),
                None => None,
            };
            self.rules.push(CustomRule {
                id: rule.id.clone(),
                regex,
                secret_group: rule.secret_group.unwrap_or(0),
                entropy: rule.entropy.unwrap_or(0.0) as f32,
                keywords: rule.keywords.iter().map(|k| k.to_ascii_lowercase()).collect(),
                path,
                allowlists: lists,
            });
        }
        Ok(())
    }

    fn gitleaks_ignore(&mut self, text: &str) {
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            // `[commit:]file:rule:line`: the file is what is left of the last two fields.
            let mut parts = line.rsplitn(3, ':');
            let (Some(number), Some(_rule), Some(head)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let Ok(number) = number.parse::<usize>() else { continue };
            let file = match head.split_once(':') {
                Some((commit, file)) if commit.len() >= 7 && commit.bytes().all(|b| b.is_ascii_hexdigit()) => file,
                _ => head,
            };
            self.ignored.insert((normal(file).to_string(), number));
        }
    }

    fn baseline(&mut self, text: &str) -> Result<(), BadInterop> {
        let file: DsBaseline = serde_json::from_str(text).map_err(|e| bad(BASELINE, "", e.to_string()))?;
        for (path, results) in &file.results {
            let set = self.baseline.entry(normal(path).to_string()).or_default();
            for r in results.iter().filter(|r| r.is_secret != Some(true) && !r.hashed_secret.is_empty()) {
                set.insert(r.hashed_secret.to_ascii_lowercase());
            }
        }
        let regexes = |list: &[String], what: &str| -> Result<Vec<Regex>, BadInterop> {
            list.iter().map(|p| compile(p).map_err(|e| bad(BASELINE, what, format!("{p:?}: {e}")))).collect()
        };
        for filter in &file.filters_used {
            let name = filter.path.rsplit('.').next().unwrap_or("");
            match name {
                "should_exclude_file" => self.exclude_files.extend(regexes(&filter.pattern, name)?),
                "should_exclude_line" => self.exclude_lines.extend(regexes(&filter.pattern, name)?),
                "should_exclude_secret" => self.exclude_secrets.extend(regexes(&filter.pattern, name)?),
                _ => {}
            }
        }
        if let Some(exclude) = &file.exclude {
            if let Some(p) = &exclude.files {
                self.exclude_files.extend(regexes(std::slice::from_ref(p), "exclude.files")?);
            }
            if let Some(p) = &exclude.lines {
                self.exclude_lines.extend(regexes(std::slice::from_ref(p), "exclude.lines")?);
            }
        }
        Ok(())
    }

    /// Does the team's configuration allow this finding of rwfs's own (or of a custom rule)?
    pub fn allows(&self, c: &Candidate<'_>) -> bool {
        let path = normal(c.path);
        if self.ignored.contains(&(path.to_string(), c.line)) {
            return true;
        }
        if self.allowlists.iter().any(|a| a.allows(c)) {
            return true;
        }
        if self.exclude_files.iter().any(|r| r.is_match(path.as_bytes()))
            || self.exclude_lines.iter().any(|r| r.is_match(Input::new(c.line_text)))
            || self.exclude_secrets.iter().any(|r| r.is_match(Input::new(c.secret)))
        {
            return true;
        }
        self.baseline.get(path).is_some_and(|set| set.contains(&sha1_hex(c.secret)))
    }

    /// The custom rules' findings in `hay` at `path`, each already past its own rule's
    /// allowlists and entropy (the global ones are applied with the rest, by [`Interop::allows`]).
    pub fn custom_findings(&self, hay: &[u8], path: Option<&str>) -> Vec<CustomFinding> {
        if self.rules.is_empty() {
            return Vec::new();
        }
        let path = normal(path.unwrap_or(""));
        let lower = hay.to_ascii_lowercase();
        let mut out = Vec::new();
        for rule in &self.rules {
            if rule.path.as_ref().is_some_and(|p| !p.is_match(path.as_bytes())) {
                continue;
            }
            if !rule.keywords.is_empty()
                && !rule.keywords.iter().any(|k| memchr::memmem::find(&lower, k.as_bytes()).is_some())
            {
                continue;
            }
            let Some(regex) = &rule.regex else {
                // A path-only rule flags the file itself.
                out.push(CustomFinding { rule: rule.id.clone(), secret: 0..0 });
                continue;
            };
            for caps in regex.captures_iter(Input::new(hay)).take(super::MAX_FINDINGS_PER_RULE) {
                let Some(whole) = caps.get_match() else { continue };
                let group = if rule.secret_group > 0 {
                    caps.get_group(rule.secret_group)
                } else {
                    (1..caps.group_len()).find_map(|g| caps.get_group(g).filter(|s| !s.is_empty()))
                };
                let secret = group.unwrap_or(whole.span());
                let secret = secret.start..secret.end;
                if rule.entropy > 0.0 && super::filter::entropy(&hay[secret.clone()]) <= rule.entropy {
                    continue;
                }
                let line = line_of(hay, secret.start);
                let candidate = Candidate {
                    path,
                    rule: &rule.id,
                    secret: &hay[secret.clone()],
                    whole: &hay[whole.start()..whole.end()],
                    line_text: &hay[line],
                    line: 0,
                };
                if rule.allowlists.iter().any(|a| a.allows(&candidate)) {
                    continue;
                }
                out.push(CustomFinding { rule: rule.id.clone(), secret });
            }
        }
        out
    }
}

/// The line around `at`, without its newline.
pub fn line_of(hay: &[u8], at: usize) -> Range<usize> {
    let start = memchr::memrchr(b'\n', &hay[..at.min(hay.len())]).map_or(0, |i| i + 1);
    let end = memchr::memchr(b'\n', &hay[at.min(hay.len())..]).map_or(hay.len(), |i| at + i);
    start..end
}

/// detect-secrets' `hashed_secret`: the SHA-1 of the secret, lowercase hex.
pub fn sha1_hex(secret: &[u8]) -> String {
    hex::encode(sha1::Sha1::digest(secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate<'a>(path: &'a str, secret: &'a str, line: &'a str) -> Candidate<'a> {
        Candidate {
            path,
            rule: "generic-secret-assignment",
            secret: secret.as_bytes(),
            whole: secret.as_bytes(),
            line_text: line.as_bytes(),
            line: 3,
        }
    }

    #[test]
    fn gitleaks_rules_and_allowlists() {
        let toml = r#"
title = "team"
[extend]
useDefault = true
disabledRules = ["generic-api-key"]

[[rules]]
id = "acme-token"
regex = '''acme_(?:live|test)_([a-z0-9]{24})'''
secretGroup = 1
entropy = 3.0
keywords = ["acme_"]
  [[rules.allowlists]]
  regexTarget = "line"
  regexes = ['''fixture''']

[[rules]]
id = "generic-api-key"
  [rules.allowlist]
  stopwords = ["notasecret"]

[allowlist]
paths = ['''(^|/)testdata/''']

[[allowlists]]
targetRules = ["acme-token"]
regexes = ['''^0{4}''']
"#;
        let interop = Interop::parse(&InteropTexts { gitleaks_toml: Some(toml.into()), ..Default::default() }).unwrap();
        assert_eq!(interop.rule_count(), 1);
        let secret = "k3j9x0q2m7v5w8z1r4t6y8u0"; // rw:allow
        let text = format!("token = acme_live_{secret}\nother = acme_live_{secret} # fixture\n");
        let found = interop.custom_findings(text.as_bytes(), Some("src/app.py"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(&text[found[0].secret.clone()], secret);
        // Keywords gate the rule; entropy too.
        assert!(interop.custom_findings(b"nothing here", Some("a.py")).is_empty());
        assert!(interop.custom_findings(b"acme_live_aaaaaaaaaaaaaaaaaaaaaaaa\n", Some("a.py")).is_empty());
        // Global path allowlist, a built-in rule's stopwords (applied to rwfs's own findings).
        assert!(interop.allows(&candidate("pkg/testdata/x.env", "Zx81kq0Pa9uT77ab", "")));
        assert!(interop.allows(&candidate("src/x.env", "my-NotASecret-value", "")));
        assert!(!interop.allows(&candidate("src/x.env", "Zx81kq0Pa9uT77ab", "")));
        // targetRules limit a global allowlist.
        let zeros = Candidate { rule: "acme-token", ..candidate("a.py", "0000abc", "") };
        assert!(interop.allows(&zeros));
        assert!(!interop.allows(&candidate("a.py", "0000abc", "")));
    }

    #[test]
    fn gitleaks_and_condition_and_go_braces() {
        let toml = r#"
[[allowlists]]
condition = "AND"
paths = ['''\.lock$''']
regexes = ['''^sha512-''']

[[rules]]
id = "braces"
regex = '''^\$(?:\d+|{\d+})$'''
"#;
        let interop = Interop::parse(&InteropTexts { gitleaks_toml: Some(toml.into()), ..Default::default() }).unwrap();
        assert!(interop.allows(&candidate("yarn.lock", "sha512-abc", "")));
        assert!(!interop.allows(&candidate("yarn.lock", "abc", "")));
        assert!(!interop.allows(&candidate("a.txt", "sha512-abc", "")));
        let bad = Interop::parse(&InteropTexts {
            gitleaks_toml: Some("[[rules]]\nid = 'x'\nregex = '(?<=a)b'\n".into()),
            ..Default::default()
        });
        assert!(bad.is_err());
        assert!(
            Interop::parse(&InteropTexts { gitleaks_toml: Some("[[rules]\n".into()), ..Default::default() }).is_err()
        );
    }

    #[test]
    fn gitleaksignore_fingerprints() {
        let text = "# reviewed\nconfig/app.env:generic-api-key:3\n1a2b3c4d5e6f7a8b9c0d:src/x.py:aws-access-token:12\n";
        let interop =
            Interop::parse(&InteropTexts { gitleaks_ignore: Some(text.into()), ..Default::default() }).unwrap();
        assert!(interop.allows(&candidate("config/app.env", "s", "")));
        assert!(interop.allows(&Candidate { line: 12, ..candidate("src/x.py", "s", "") }));
        assert!(!interop.allows(&Candidate { line: 4, ..candidate("config/app.env", "s", "") }));
    }

    #[test]
    fn detect_secrets_baseline() {
        let secret = "Zx81kq0Pa9uT77ab"; // rw:allow
        let real = "Q7v2LmP9xR4tK8wZ3nB6";
        let baseline = serde_json::json!({
            "version": "1.5.0",
            "plugins_used": [{"name": "KeywordDetector"}],
            "filters_used": [
                {"path": "detect_secrets.filters.allowlist.is_line_allowlisted"},
                {"path": "detect_secrets.filters.regex.should_exclude_file", "pattern": ["^vendor/"]},
                {"path": "detect_secrets.filters.regex.should_exclude_secret", "pattern": ["^dev-"]}
            ],
            "results": {
                "config/settings.py": [
                    {"type": "Secret Keyword", "filename": "config/settings.py", "hashed_secret": sha1_hex(secret.as_bytes()), "is_verified": false, "line_number": 3},
                    {"type": "Secret Keyword", "filename": "config/settings.py", "hashed_secret": sha1_hex(real.as_bytes()), "is_verified": false, "line_number": 4, "is_secret": true}
                ]
            },
            "generated_at": "2024-01-01T00:00:00Z"
        });
        let texts = InteropTexts { secrets_baseline: Some(baseline.to_string()), ..Default::default() };
        let interop = Interop::parse(&texts).unwrap();
        assert!(interop.allows(&candidate("config/settings.py", secret, "")));
        assert!(interop.allows(&candidate("./config/settings.py", secret, "")));
        assert!(!interop.allows(&candidate("config/other.py", secret, "")), "baselined for its own file only");
        assert!(!interop.allows(&candidate("config/settings.py", real, "")), "audited as a real secret");
        assert!(interop.allows(&candidate("vendor/lib.py", real, "")));
        assert!(interop.allows(&candidate("a.py", "dev-Q7v2LmP9xR4tK8wZ", "")));
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert!(Interop::parse(&InteropTexts { secrets_baseline: Some("{".into()), ..Default::default() }).is_err());
    }
}
