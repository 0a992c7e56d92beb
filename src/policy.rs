//! The workspace policy: what the scorer looks for and what happens to what it finds.
//!
//! Source: `.resilient_write/policy.yaml`, or the file `RW_POLICY_FILE` names (read by the
//! caller: this module parses text and decides, it does no I/O). The reference server's keys
//! keep their meaning — `version` (ignored), `extend_patterns`, `disable_families`, `thresholds`,
//! `retry_budget` — and rwfs adds:
//!
//! ```yaml
//! weights: {api_key: 0.35, pii: 0.05}        # family weights of the reference score (Eq. 1)
//! rules:                                     # first match wins, per finding
//!   - paths: ["tests/**"]                    # optional globs on the workspace path
//!     family: pii                            # optional: rule (id), family, kind (leak|filter)
//!     action: allow                          # allow | warn | block
//!   - verdict: high                          # a whole-file rule: the scan's verdict ≥ this
//!     action: block
//! allow_paths: ["fixtures/**"]               # findings there are allowed
//! pass_through: [".git/**", "target/**"]     # the mount writes these in place, unscanned
//! blocked_errno: EACCES                      # errno of a blocked write through the mount
//! read_cap_bytes: 65536                      # most bytes one rr_read_bytes / rr_read_next returns
//! editor_files: ["**/.*.sw?", "**/*~"]       # rows `rwfs log` leaves out unless --all
//! durability: close                          # the mount: close (durable at close) or batch
//! batch_window_ms: 100                        # batch: longest wait before a close is durable
//! max_gated_bytes: 4294967296                # a gated version above this is refused (EFBIG)
//! retention:                                 # what `objects/` may keep (see `Retention`)
//!   max_bytes: 10737418240                   #   at most this many bytes
//!   max_free_fraction: 0.2                   #   and this share of the space it could use
//!   max_age_days: 30                         #   versions older than this go
//!   interval_seconds: 600                    #   how often the daemon enforces it
//!   full_disk_keeps_previous: true           #   a full disk keeps each path's previous version
//! session_hosts: [claude, codex, aider]      # process names that host agents (journal::session)
//! stderr_notice: true                        # the mount tells a refused writer why on its stderr
//!                                            #   (default: on under `rwfs run`, off under `rwfs mount`)
//! protect:                                   # protected paths, whatever the content: first rule
//!   - paths: [".github/workflows/**"]        #   whose globs match and that names the operation
//!     all: deny                              #   decides; all: sets every operation not named
//!   - paths: ["Cargo.lock"]                  #   write | create | delete | rename | chmod:
//!     delete: approve                        #   allow | approve | deny (default: allow)
//! read_guard:                                # what an agent run reads of secret files (opt-in;
//!   - paths: [".env*", "*.pem"]              #   engine/read_guard.rs): redact (each credential
//!     action: redact                         #   value replaced by a same-length placeholder) or
//!     exempt_programs: [node]                #   refuse; exempt programs and RWFS_READ_REAL=1
//! bulk_damage:                               # refuse a session's deletes and truncations past
//!   max_files: 200                           #   this many files or bytes within the window
//!   max_bytes: 52428800                      #   (default: no limit)
//!   window_seconds: 60
//! ```
//!
//! Without a matching rule, a real-looking credential (`leak`, severity `credential`) is
//! blocked; token-shaped text (`filter`), personal data and generic assignments are warnings.
//!
//! A broken file is one typed error ([`Reason::BadPolicy`]) naming the line, the key and what is
//! wrong; nothing of it is applied. Unknown keys are errors too (a misspelt key silently doing
//! nothing is worse), which the reference server would have ignored.

use std::collections::{BTreeMap, BTreeSet};

use globset::{Glob, GlobSet, GlobSetBuilder};
use nix::libc;
use serde::Deserialize;

use crate::error::{Error, Reason, Result};
use crate::score::interop::{Interop, InteropTexts};
use crate::score::{ExtraPattern, Kind, Report, ScanConfig, Scanner, Thresholds, Verdict};

/// What happens to a write, or to one finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Warn,
    Block,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Warn => "warn",
            Action::Block => "block",
        }
    }
}

/// An operation a protect rule may refuse (`protect:`; `engine/protect.rs` asks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A new version of an existing file.
    Write,
    /// A new file (or a hard link to one).
    Create,
    Delete,
    /// Either name of a rename: the one it leaves and the one it takes.
    Rename,
    /// A change of permission bits.
    Chmod,
}

impl Operation {
    pub const ALL: [Operation; 5] =
        [Operation::Write, Operation::Create, Operation::Delete, Operation::Rename, Operation::Chmod];

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Write => "write",
            Operation::Create => "create",
            Operation::Delete => "delete",
            Operation::Rename => "rename",
            Operation::Chmod => "chmod",
        }
    }
}

/// What a protect rule does with an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Guard {
    Allow,
    /// A person must say yes: refused (with an envelope saying so) until approvals exist.
    Approve,
    Deny,
}

impl Guard {
    pub fn as_str(self) -> &'static str {
        match self {
            Guard::Allow => "allow",
            Guard::Approve => "approve",
            Guard::Deny => "deny",
        }
    }
}

/// One `protect:` rule, compiled: its name (for rows and envelopes) and an action per operation.
#[derive(Debug)]
pub struct ProtectRule {
    pub name: String,
    paths: GlobSet,
    actions: [Option<Guard>; 5],
}

/// What a `read_guard:` rule does when a process of an agent run opens one of its paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadAction {
    /// Serve a view with every credential value replaced by a placeholder of the same length.
    Redact,
    /// Refuse the open (`EACCES`).
    Refuse,
}

/// One `read_guard:` rule, compiled (`engine/read_guard.rs` applies it).
#[derive(Debug)]
pub struct ReadGuardRule {
    pub name: String,
    paths: GlobSet,
    pub action: ReadAction,
    /// Programs (process name, or the file name of `argv[0]`) that read the real bytes.
    pub exempt_programs: Vec<String>,
}

/// The bulk damage limit (`bulk_damage:`): more deletes and truncations than this in one
/// session within the window are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkDamage {
    pub max_files: u64,
    pub max_bytes: u64,
    pub window: std::time::Duration,
}

/// The mount's defaults for paths written in place (docs/architecture.md, The mount), at any depth: a nested
/// repository's `.git/`, a sub-crate's `target/`, a package's `node_modules/`. A database's rollback journal,
/// write-ahead log and shared-memory index (`x.db-journal`, `x.db-wal`, `x.db-shm`) go with it:
/// gated, each sqlite transaction would be a committed, journaled and kept version of them.
pub const DEFAULT_PASS_THROUGH: &[&str] = &[
    "**/.git/**",
    "**/target/**",
    "**/node_modules/**",
    "**/.venv/**",
    "**/__pycache__/**",
    "*.log",
    "*.sqlite*",
    "*.db",
    "*.db-journal",
    "*.db-wal",
    "*.db-shm",
];

/// Editors' own files around a save, at any depth: vim's swap files and their probes
/// (`.x.swp`, `.x.swx`, …) and its write-permission probe `4913`, vim and emacs backups (`x~`),
/// emacs lock and auto-save files (`.#x`, `#x#`), JetBrains' safe-write files. They stay gated
/// and journaled (a secret typed in an editor must not reach the tree through its swap file),
/// but `rwfs log` leaves their rows out unless asked (`--all`), so one save reads as one version.
pub const DEFAULT_EDITOR_FILES: &[&str] =
    &["**/.*.sw?", "**/4913", "**/*~", "**/.#*", "**/#*#", "**/*___jb_tmp___", "**/*___jb_old___"];

/// When the mount's `close()` returns (docs/architecture.md, guarantee 2; `rwfs mount --durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Once the version, its directory entry and its row are on stable storage.
    #[default]
    Close,
    /// Once the version is judged, staged and its row written; durable within the batch
    /// window, or at the writer's `fsync()`.
    Batch,
}

impl Durability {
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Close => "close",
            Durability::Batch => "batch",
        }
    }
}

/// The default of `batch_window_ms`.
pub const DEFAULT_BATCH_WINDOW_MS: u64 = 100;
/// The longest `batch_window_ms` a policy may set.
pub const MAX_BATCH_WINDOW_MS: u64 = 10_000;

/// The reference's default retry budget.
pub const DEFAULT_RETRY_BUDGET: u32 = 3;

/// The default of `read_cap_bytes`: the most bytes one byte read returns, so that one answer fits
/// a typical tool-output budget (the paper's reason for cursors: a 550 KB log is paged, not
/// returned whole).
pub const DEFAULT_READ_CAP_BYTES: u64 = 64 << 10;
/// The largest `read_cap_bytes` a policy may set.
pub const MAX_READ_CAP_BYTES: u64 = 2 << 20;

/// The default of `max_gated_bytes`: the largest version the gate takes (4 GiB). Bigger files
/// belong on pass-through paths: their scan and digest would hold a commit for minutes.
pub const DEFAULT_MAX_GATED_BYTES: u64 = 4 << 30;

/// What `objects/` may keep: the retention that keeps the disk safe while keeping versions is
/// the point (docs/architecture.md, guarantee 3).
///
/// Invariants of enforcement (`Engine::gc`): versions older than `max_age` go; then, while the
/// store is over its limit — the smaller of `max_bytes` and `max_free_fraction` of the space
/// the store could use (its own bytes plus the filesystem's available bytes) — the oldest
/// version of the path with the most kept versions goes, one at a time; the newest version of a
/// file that is deleted now is never removed for size, only by age.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retention {
    pub max_bytes: u64,
    pub max_free_fraction: f64,
    pub max_age: std::time::Duration,
    /// How often the daemon enforces it; zero: never in the background (`rwfs gc` only).
    pub interval: std::time::Duration,
    /// On a full disk, keep the newest previous version of every path (`engine/retention.rs`).
    pub full_disk_keeps_previous: bool,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention {
            max_bytes: 10 << 30,
            max_free_fraction: 0.2,
            max_age: std::time::Duration::from_secs(30 * 86_400),
            interval: std::time::Duration::from_secs(600),
            full_disk_keeps_previous: true,
        }
    }
}

impl Retention {
    /// The store's limit given its own size and the bytes still available on its filesystem.
    pub fn limit(&self, store_bytes: u64, available: u64) -> u64 {
        let could_use = store_bytes.saturating_add(available) as f64;
        self.max_bytes.min((could_use * self.max_free_fraction) as u64)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    version: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    extend_patterns: BTreeMap<String, Vec<PatternSpec>>,
    #[serde(default)]
    disable_families: Vec<String>,
    #[serde(default)]
    thresholds: Option<ThresholdSpec>,
    #[serde(default)]
    retry_budget: Option<RetryBudgetSpec>,
    #[serde(default)]
    weights: BTreeMap<String, f64>,
    #[serde(default)]
    rules: Vec<RuleSpec>,
    #[serde(default)]
    allow_paths: Vec<String>,
    #[serde(default)]
    pass_through: Option<Vec<String>>,
    #[serde(default)]
    editor_files: Option<Vec<String>>,
    #[serde(default)]
    blocked_errno: Option<String>,
    #[serde(default)]
    read_cap_bytes: Option<i64>,
    #[serde(default)]
    durability: Option<Durability>,
    #[serde(default)]
    batch_window_ms: Option<i64>,
    max_gated_bytes: Option<i64>,
    #[serde(default)]
    session_hosts: Option<Vec<String>>,
    #[serde(default)]
    stderr_notice: Option<bool>,
    #[serde(default)]
    retention: Option<RetentionSpec>,
    #[serde(default)]
    protect: Vec<ProtectSpec>,
    #[serde(default)]
    bulk_damage: Option<BulkSpec>,
    #[serde(default)]
    read_guard: Vec<ReadGuardSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadGuardSpec {
    #[serde(default)]
    name: Option<String>,
    paths: Vec<String>,
    action: ReadAction,
    #[serde(default)]
    exempt_programs: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProtectSpec {
    #[serde(default)]
    name: Option<String>,
    paths: Vec<String>,
    #[serde(default)]
    all: Option<Guard>,
    #[serde(default)]
    write: Option<Guard>,
    #[serde(default)]
    create: Option<Guard>,
    #[serde(default)]
    delete: Option<Guard>,
    #[serde(default)]
    rename: Option<Guard>,
    #[serde(default)]
    chmod: Option<Guard>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkSpec {
    max_files: Option<i64>,
    max_bytes: Option<i64>,
    window_seconds: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetentionSpec {
    max_bytes: Option<i64>,
    max_free_fraction: Option<f64>,
    max_age_days: Option<f64>,
    interval_seconds: Option<i64>,
    full_disk_keeps_previous: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternSpec {
    name: String,
    regex: String,
    /// The reference ignores it; rwfs uses it as the family's weight unless `weights` sets one.
    #[serde(default)]
    weight: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThresholdSpec {
    high: Option<f64>,
    medium: Option<f64>,
    low: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryBudgetSpec {
    default: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    family: Option<String>,
    #[serde(default)]
    kind: Option<KindSpec>,
    #[serde(default)]
    verdict: Option<VerdictSpec>,
    action: Action,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum KindSpec {
    Leak,
    Filter,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum VerdictSpec {
    Safe,
    Low,
    Medium,
    High,
}

/// One `rules:` entry, compiled.
#[derive(Debug)]
struct PathRule {
    paths: Option<GlobSet>,
    rule: Option<String>,
    family: Option<String>,
    kind: Option<Kind>,
    verdict: Option<Verdict>,
    action: Action,
}

/// A parsed, validated policy.
#[derive(Debug)]
pub struct Policy {
    scan: ScanConfig,
    retry_budget: u32,
    rules: Vec<PathRule>,
    allow_paths: GlobSet,
    pass_through: GlobSet,
    editor_files: GlobSet,
    pass_through_patterns: Vec<String>,
    blocked_errno: i32,
    read_cap_bytes: u64,
    durability: Durability,
    batch_window_ms: u64,
    max_gated_bytes: u64,
    retention: Retention,
    session_hosts: Option<Vec<String>>,
    stderr_notice: Option<bool>,
    protect: Vec<ProtectRule>,
    bulk_damage: Option<BulkDamage>,
    read_guard: Vec<ReadGuardRule>,
}

/// What the policy says about one scanned piece of content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The strongest action over the findings and the whole-file rules.
    pub action: Action,
    /// One action per finding of the report, in order.
    pub findings: Vec<Action>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::parse("").expect("the empty policy is valid")
    }
}

impl Policy {
    /// Parse and validate a policy file's text.
    pub fn parse(text: &str) -> Result<Policy> {
        let file: PolicyFile = if text.trim().is_empty() {
            PolicyFile::default()
        } else {
            let options = serde_saphyr::Options::default();
            serde_saphyr::from_str_with_options(text, options).map_err(|e| yaml_error(text, &e))?
        };
        Policy::build(file, text)
    }

    fn build(file: PolicyFile, text: &str) -> Result<Policy> {
        let _ = file.version;
        let mut thresholds = Thresholds::default();
        if let Some(t) = &file.thresholds {
            thresholds.high = t.high.unwrap_or(thresholds.high);
            thresholds.medium = t.medium.unwrap_or(thresholds.medium);
            thresholds.low = t.low.unwrap_or(thresholds.low);
            let ordered = thresholds.high >= thresholds.medium && thresholds.medium >= thresholds.low;
            let bounded = [thresholds.high, thresholds.medium, thresholds.low].iter().all(|v| (0.0..=1.0).contains(v));
            if !ordered || !bounded {
                return Err(semantic(text, "thresholds", "thresholds must lie in [0, 1] with high ≥ medium ≥ low"));
            }
        }
        let retry_budget = match &file.retry_budget {
            None => DEFAULT_RETRY_BUDGET,
            Some(r) => u32::try_from(r.default)
                .map_err(|_| semantic(text, "default", "retry_budget.default must be a whole number ≥ 0"))?,
        };
        let mut weights = BTreeMap::new();
        let mut extra = Vec::new();
        for (family, patterns) in &file.extend_patterns {
            for p in patterns {
                if let Some(w) = p.weight {
                    weights.entry(family.clone()).or_insert(w);
                }
                extra.push(ExtraPattern { family: family.clone(), name: p.name.clone(), regex: p.regex.clone() });
            }
        }
        for (family, &w) in &file.weights {
            if !(0.0..=10.0).contains(&w) {
                return Err(semantic(text, family, "a weight must lie in [0, 10]"));
            }
            weights.insert(family.clone(), w);
        }
        let scan = ScanConfig {
            disabled_families: file.disable_families.iter().cloned().collect::<BTreeSet<_>>(),
            extra,
            weights,
            thresholds,
            salt: [0; 16],
            interop: Default::default(),
        };
        // Compile now, so a bad regex is reported here and not at the first write.
        scan.compile_extra().map_err(|e| semantic(text, &e.name, &format!("bad regex: {}", e.message)))?;
        let mut rules = Vec::new();
        for spec in &file.rules {
            let paths = if spec.paths.is_empty() { None } else { Some(globs(&spec.paths, text)?) };
            rules.push(PathRule {
                paths,
                rule: spec.rule.clone(),
                family: spec.family.clone(),
                kind: spec.kind.map(|k| match k {
                    KindSpec::Leak => Kind::Leak,
                    KindSpec::Filter => Kind::Filter,
                }),
                verdict: spec.verdict.map(|v| match v {
                    VerdictSpec::Safe => Verdict::Safe,
                    VerdictSpec::Low => Verdict::Low,
                    VerdictSpec::Medium => Verdict::Medium,
                    VerdictSpec::High => Verdict::High,
                }),
                action: spec.action,
            });
        }
        let pass_through_patterns: Vec<String> = match &file.pass_through {
            Some(p) => p.clone(),
            None => DEFAULT_PASS_THROUGH.iter().map(|s| s.to_string()).collect(),
        };
        let blocked_errno = match &file.blocked_errno {
            None => libc::EACCES,
            Some(name) => errno_named(name).ok_or_else(|| {
                semantic(
                    text,
                    "blocked_errno",
                    "blocked_errno must be one of EACCES, EPERM, EIO, EROFS, ENOSPC, EDQUOT",
                )
            })?,
        };
        let read_cap_bytes = match file.read_cap_bytes {
            None => DEFAULT_READ_CAP_BYTES,
            Some(n) => u64::try_from(n).ok().filter(|n| (1..=MAX_READ_CAP_BYTES).contains(n)).ok_or_else(|| {
                semantic(text, "read_cap_bytes", "read_cap_bytes must be a whole number from 1 to 2097152 (2 MiB)")
            })?,
        };
        let batch_window_ms = match file.batch_window_ms {
            None => DEFAULT_BATCH_WINDOW_MS,
            Some(n) => u64::try_from(n).ok().filter(|n| (1..=MAX_BATCH_WINDOW_MS).contains(n)).ok_or_else(|| {
                semantic(text, "batch_window_ms", "batch_window_ms must be a whole number from 1 to 10000 (10 s)")
            })?,
        };
        let max_gated_bytes = match file.max_gated_bytes {
            None => DEFAULT_MAX_GATED_BYTES,
            Some(n) => u64::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| semantic(text, "max_gated_bytes", "max_gated_bytes must be a whole number ≥ 1"))?,
        };
        let retention = retention(file.retention.as_ref(), text)?;
        let protect = protect_rules(&file.protect, text)?;
        let bulk_damage = bulk_damage(file.bulk_damage.as_ref(), text)?;
        let read_guard = read_guard_rules(&file.read_guard, text)?;
        Ok(Policy {
            protect,
            read_guard,
            bulk_damage,
            scan,
            retry_budget,
            read_cap_bytes,
            durability: file.durability.unwrap_or_default(),
            batch_window_ms,
            max_gated_bytes,
            retention,
            rules,
            allow_paths: globs(&file.allow_paths, text)?,
            pass_through: globs(&pass_through_patterns, text)?,
            editor_files: match &file.editor_files {
                Some(p) => globs(p, text)?,
                None => globs(&DEFAULT_EDITOR_FILES.iter().map(|s| s.to_string()).collect::<Vec<_>>(), text)?,
            },
            pass_through_patterns,
            blocked_errno,
            session_hosts: file.session_hosts,
            stderr_notice: file.stderr_notice,
        })
    }

    /// This policy with a team's gitleaks and detect-secrets configuration (`.gitleaks.toml`,
    /// `.gitleaksignore`, `.secrets.baseline`, read by the caller from the workspace root): their
    /// custom rules scan, their allowlists and reviewed findings are allowed
    /// (`crate::score::interop`). A file that does not parse, or a pattern of it that does not
    /// compile, is one typed error naming the file and the rule, like a broken policy.
    pub fn with_interop(mut self, texts: &InteropTexts) -> Result<Policy> {
        let interop = Interop::parse(texts).map_err(|e| {
            Error::from(Reason::BadPolicy {
                line: 0,
                column: 0,
                key: if e.what.is_empty() { e.file.to_string() } else { format!("{}: {}", e.file, e.what) },
                message: format!("{} (fix it or remove the file; rwfs reads it beside its own policy)", e.message),
            })
        })?;
        self.scan.interop = std::sync::Arc::new(interop);
        Ok(self)
    }

    /// A scanner for this policy; `salt` salts the findings' hashes.
    pub fn scanner(&self, salt: [u8; 16]) -> Scanner {
        let mut config = self.scan.clone();
        config.salt = salt;
        // Validated when the policy was parsed.
        Scanner::new(config).expect("policy patterns compile")
    }

    /// The retry budget of a refused write (the reference's `retry_budget.default`).
    pub fn retry_budget(&self) -> u32 {
        self.retry_budget
    }

    /// The verdict cut-offs of the paper's score.
    pub fn thresholds(&self) -> Thresholds {
        self.scan.thresholds
    }

    /// The most bytes one `rr_read_bytes` or `rr_read_next` returns (`read_cap_bytes`).
    pub fn read_cap_bytes(&self) -> u64 {
        self.read_cap_bytes
    }

    /// The mount's durability mode (`durability`), unless the command line says otherwise.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// How long a close acknowledged in `batch` mode may wait to be durable.
    pub fn batch_window(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.batch_window_ms)
    }

    /// The largest version the gate takes (`max_gated_bytes`); a bigger one is refused (`EFBIG`).
    pub fn max_gated_bytes(&self) -> u64 {
        self.max_gated_bytes
    }

    /// What `objects/` may keep (`retention`).
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// Is `path` an editor's swap, backup, lock or probe file (policy `editor_files`)? Their rows
    /// are left out of `rwfs log` unless asked for; nothing else about them changes.
    pub fn is_editor_file(&self, path: &str) -> bool {
        self.editor_files.is_match(path)
    }

    /// The globs of [`Policy::is_editor_file`].
    pub fn editor_files(&self) -> &globset::GlobSet {
        &self.editor_files
    }

    /// Is `path` written in place by the mount, without a draft or a scan?
    pub fn is_pass_through(&self, path: &str) -> bool {
        self.pass_through.is_match(path)
    }

    /// Process names that host agents: a writer's nearest such ancestor names its session
    /// (`session_hosts`; see `journal::session`); `None`: the defaults.
    pub fn session_hosts(&self) -> Option<&[String]> {
        self.session_hosts.as_deref()
    }

    /// Does the mount write a refused writer one line on its standard error saying why
    /// (`stderr_notice`)? `None`: the command's default (on under `rwfs run`).
    pub fn stderr_notice(&self) -> Option<bool> {
        self.stderr_notice
    }

    pub fn pass_through_patterns(&self) -> &[String] {
        &self.pass_through_patterns
    }

    /// The errno a blocked write gets through the mount.
    pub fn blocked_errno(&self) -> i32 {
        self.blocked_errno
    }

    /// Does every path glob of the policy (`allow_paths`, the rules' `paths`) say the same of
    /// `a` and `b`? Then [`Policy::decide`] decides alike for both, whatever the report.
    pub fn paths_alike(&self, a: &str, b: &str) -> bool {
        self.allow_paths.is_match(a) == self.allow_paths.is_match(b)
            && self.rules.iter().all(|r| r.paths.as_ref().is_none_or(|g| g.is_match(a) == g.is_match(b)))
    }

    /// The protect rule that decides `op` on `path` and what it says: the first rule whose globs
    /// match and that names the operation (or `all`); `None`: no rule, allowed.
    pub fn protection(&self, op: Operation, path: &str) -> Option<(&ProtectRule, Guard)> {
        self.protect.iter().find_map(|rule| {
            let guard = rule.actions[op as usize]?;
            rule.paths.is_match(path).then_some((rule, guard))
        })
    }

    /// The `read_guard:` rule for `path`: the first whose globs match.
    pub fn read_guard(&self, path: &str) -> Option<&ReadGuardRule> {
        self.read_guard.iter().find(|rule| rule.paths.is_match(path))
    }

    /// Does any protect rule name `path` (for any operation)?
    pub fn is_protected(&self, path: &str) -> bool {
        self.protect.iter().any(|rule| rule.paths.is_match(path))
    }

    /// The bulk damage limit (`bulk_damage`); `None`: no limit (the default).
    pub fn bulk_damage(&self) -> Option<BulkDamage> {
        self.bulk_damage
    }

    /// What happens to content at `path` with this report.
    pub fn decide(&self, report: &Report, path: &str) -> Decision {
        self.decide_carrying(report, path, |_| false)
    }

    /// [`Policy::decide`], where a finding `carried` says is already in the version being
    /// replaced (same rule, same value) only warns: an edit that leaves a committed credential
    /// where it was is not refused for it; a new one still is.
    pub fn decide_carrying(&self, report: &Report, path: &str, carried: impl Fn(usize) -> bool) -> Decision {
        if self.allow_paths.is_match(path) {
            return Decision { action: Action::Allow, findings: vec![Action::Allow; report.findings.len()] };
        }
        let findings: Vec<Action> = report
            .findings
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let action = self
                    .rules
                    .iter()
                    .filter(|r| r.verdict.is_none())
                    .find(|r| {
                        r.paths.as_ref().is_none_or(|g| g.is_match(path))
                            && r.rule.as_ref().is_none_or(|id| *id == f.rule)
                            && r.family.as_ref().is_none_or(|fam| *fam == f.family)
                            && r.kind.is_none_or(|k| k == f.kind)
                    })
                    .map_or_else(|| default_action(f), |r| r.action);
                if action == Action::Block && carried(i) { Action::Warn } else { action }
            })
            .collect();
        let whole = self
            .rules
            .iter()
            .filter(|r| {
                r.verdict.is_some_and(|v| report.verdict >= v) && r.paths.as_ref().is_none_or(|g| g.is_match(path))
            })
            .map(|r| r.action)
            .max();
        let action = findings.iter().copied().chain(whole).max().unwrap_or(Action::Allow);
        Decision { action, findings }
    }
}

/// Without a policy rule: block a real-looking credential, warn about everything else.
fn retention(spec: Option<&RetentionSpec>, text: &str) -> Result<Retention> {
    let mut out = Retention::default();
    let Some(spec) = spec else { return Ok(out) };
    if let Some(n) = spec.max_bytes {
        out.max_bytes = u64::try_from(n)
            .map_err(|_| semantic(text, "max_bytes", "retention.max_bytes must be a whole number ≥ 0"))?;
    }
    if let Some(f) = spec.max_free_fraction {
        if !(0.0..=1.0).contains(&f) {
            return Err(semantic(text, "max_free_fraction", "retention.max_free_fraction must lie in [0, 1]"));
        }
        out.max_free_fraction = f;
    }
    if let Some(days) = spec.max_age_days {
        if !(0.0..1e6).contains(&days) {
            return Err(semantic(text, "max_age_days", "retention.max_age_days must be a number of days ≥ 0"));
        }
        out.max_age = std::time::Duration::from_secs_f64(days * 86_400.0);
    }
    if let Some(n) = spec.interval_seconds {
        let n = u64::try_from(n)
            .map_err(|_| semantic(text, "interval_seconds", "retention.interval_seconds must be a whole number ≥ 0"))?;
        out.interval = std::time::Duration::from_secs(n);
    }
    if let Some(keep) = spec.full_disk_keeps_previous {
        out.full_disk_keeps_previous = keep;
    }
    Ok(out)
}

fn protect_rules(specs: &[ProtectSpec], text: &str) -> Result<Vec<ProtectRule>> {
    let mut rules = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        if spec.paths.is_empty() {
            return Err(semantic(text, "protect", "a protect rule needs paths (a list of globs)"));
        }
        let named = [spec.write, spec.create, spec.delete, spec.rename, spec.chmod];
        if spec.all.is_none() && named.iter().all(Option::is_none) {
            return Err(semantic(
                text,
                "protect",
                "a protect rule needs an action for at least one operation (all, write, create, delete, rename, chmod)",
            ));
        }
        let actions = named.map(|guard| guard.or(spec.all));
        let name = spec.name.clone().unwrap_or_else(|| format!("protect[{i}] {}", spec.paths.join(", ")));
        rules.push(ProtectRule { name, paths: globs(&spec.paths, text)?, actions });
    }
    Ok(rules)
}

fn read_guard_rules(specs: &[ReadGuardSpec], text: &str) -> Result<Vec<ReadGuardRule>> {
    let mut rules = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        if spec.paths.is_empty() {
            return Err(semantic(text, "read_guard", "a read_guard rule needs paths (a list of globs)"));
        }
        let name = spec.name.clone().unwrap_or_else(|| format!("read_guard[{i}] {}", spec.paths.join(", ")));
        rules.push(ReadGuardRule {
            name,
            paths: globs(&spec.paths, text)?,
            action: spec.action,
            exempt_programs: spec.exempt_programs.clone(),
        });
    }
    Ok(rules)
}

fn bulk_damage(spec: Option<&BulkSpec>, text: &str) -> Result<Option<BulkDamage>> {
    let Some(spec) = spec else { return Ok(None) };
    let whole = |n: Option<i64>, key: &str, default: u64| match n {
        None => Ok(default),
        Some(n) => u64::try_from(n)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| semantic(text, key, &format!("bulk_damage.{key} must be a whole number ≥ 1"))),
    };
    Ok(Some(BulkDamage {
        max_files: whole(spec.max_files, "max_files", u64::MAX)?,
        max_bytes: whole(spec.max_bytes, "max_bytes", u64::MAX)?,
        window: std::time::Duration::from_secs(whole(spec.window_seconds, "window_seconds", 60)?),
    }))
}

fn default_action(f: &crate::score::Finding) -> Action {
    if f.kind == Kind::Leak && f.severity == "credential" { Action::Block } else { Action::Warn }
}

/// The errno a `blocked_errno` name stands for.
pub fn errno_named(name: &str) -> Option<i32> {
    Some(match name.trim().to_ascii_uppercase().as_str() {
        "EACCES" => libc::EACCES,
        "EPERM" => libc::EPERM,
        "EIO" => libc::EIO,
        "EROFS" => libc::EROFS,
        "ENOSPC" => libc::ENOSPC,
        "EDQUOT" => libc::EDQUOT,
        _ => return None,
    })
}

fn globs(patterns: &[String], text: &str) -> Result<GlobSet> {
    let mut builder = GlobSetBuilder::new();
    for p in patterns {
        let glob = Glob::new(p).map_err(|e| semantic(text, p, &format!("bad glob: {e}")))?;
        builder.add(glob);
    }
    builder.build().map_err(|e| semantic(text, "paths", &format!("bad glob: {e}")))
}

/// A YAML or type error, with the key found on the line it points at.
fn yaml_error(text: &str, e: &serde_saphyr::Error) -> Error {
    let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
    Reason::BadPolicy { line, column, key: key_on_line(text, line), message: yaml_message(e) }.into()
}

/// A YAML error's message alone: its first line, without the `error: line L column C: ` prefix
/// and the source snippet serde-saphyr adds (the location is reported separately).
pub(crate) fn yaml_message(e: &serde_saphyr::Error) -> String {
    let message = e.to_string().lines().next().unwrap_or("").trim_start_matches("error: ").to_string();
    message
        .split_once(": ")
        .filter(|(head, _)| head.starts_with("line "))
        .map_or(message.clone(), |(_, m)| m.to_string())
}

/// A validation error about `key`, located at the first line that mentions it.
fn semantic(text: &str, key: &str, message: &str) -> Error {
    let found = text.lines().enumerate().find_map(|(i, l)| l.find(key).map(|c| (i as u64 + 1, c as u64 + 1)));
    let (line, column) = found.unwrap_or((0, 0));
    Reason::BadPolicy { line, column, key: key.to_string(), message: message.to_string() }.into()
}

/// The mapping key written on 1-based `line`, if any (`  high: x` → `high`).
fn key_on_line(text: &str, line: u64) -> String {
    let Some(l) = text.lines().nth(line.saturating_sub(1) as usize) else {
        return String::new();
    };
    let l = l.trim_start().trim_start_matches("- ");
    l.split_once(':').map(|(k, _)| k.trim().trim_matches(|c| c == '"' || c == '\'').to_string()).unwrap_or_default()
}
