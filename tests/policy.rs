//! The policy: reference keys, rwfs extensions, decisions, and typed errors for broken files.

use rwfs::policy::{Action, Policy};
use rwfs::score::Verdict;
use rwfs::score::rules::RULES;
use rwfs::score::sample::{Rng, generate};

fn sample(rule: &str, seed: u64) -> String {
    generate(RULES.iter().find(|r| r.id == rule).unwrap().sample, &mut Rng::new(seed))
}

fn decide(policy: &Policy, text: &str, path: &str) -> (Action, Vec<Action>) {
    let report = policy.scanner([0; 16]).scan(text.as_bytes(), Some(path));
    let decision = policy.decide(&report, path);
    (decision.action, decision.findings)
}

#[test]
fn the_default_policy_blocks_credentials_and_warns_on_personal_data() {
    let policy = Policy::default();
    let key = sample("stripe-secret-key", 1);
    assert_eq!(decide(&policy, &format!("k = \"{key}\"\n"), "app.py").0, Action::Block);
    assert_eq!(decide(&policy, "contact: jane.doe@acme-corp.io\n", "README.md").0, Action::Warn);
    assert_eq!(decide(&policy, "Authorization: Bearer sk-ant-oat01-{REDACTED}\n", "notes.md").0, Action::Warn);
    assert_eq!(decide(&policy, "fn main() {}\n", "main.rs").0, Action::Allow);
    assert_eq!(policy.retry_budget(), 3);
    assert!(policy.is_pass_through(".git/objects/ab/cd") && policy.is_pass_through("logs/build.log"));
    assert!(!policy.is_pass_through("src/main.rs"));
    assert_eq!(policy.blocked_errno(), nix::libc::EACCES);
}

#[test]
fn reference_keys_keep_their_meaning() {
    let policy = Policy::parse(
        r#"
version: 1
extend_patterns:
  internal_token:
    - name: corp_token
      regex: "corp_[a-z0-9]{24}"
      weight: 0.5
disable_families: [pii]
thresholds:
  high: 0.9
  medium: 0.5
  low: 0.2
retry_budget:
  default: 5
"#,
    )
    .unwrap();
    assert_eq!(policy.retry_budget(), 5);
    let scanner = policy.scanner([0; 16]);
    let report = scanner.scan(b"token: corp_abcdefghijklmnopqrstuvwx\nmail: jane.doe@acme-corp.io\n", Some("c.yaml"));
    let rules: Vec<&str> = report.findings.iter().map(|f| f.rule.as_str()).collect();
    assert_eq!(rules, ["corp_token"], "pii disabled, custom family found");
    // weight 0.5 for one hit → 0.5, which is medium under these thresholds (≥ 0.5, < 0.9).
    assert_eq!((report.score, report.verdict), (0.5, Verdict::Medium));
}

#[test]
fn path_rules_first_match_wins_and_verdict_rules_apply_to_the_file() {
    let policy = Policy::parse(
        r#"
rules:
  - paths: ["tests/**"]
    action: allow
  - family: pii
    action: block
  - verdict: medium
    paths: ["*.md"]
    action: block
allow_paths: ["fixtures/**"]
"#,
    )
    .unwrap();
    let key = sample("github-pat", 2);
    assert_eq!(decide(&policy, &format!("t = \"{key}\"\n"), "tests/fixture.py").0, Action::Allow);
    assert_eq!(decide(&policy, &format!("t = \"{key}\"\n"), "fixtures/a.py").0, Action::Allow);
    assert_eq!(decide(&policy, &format!("t = \"{key}\"\n"), "src/a.py").0, Action::Block);
    assert_eq!(decide(&policy, "mail: jane.doe@acme-corp.io\n", "src/contacts.txt").0, Action::Block);
    // A filter-only hit alone is a warning, but the .md verdict rule blocks medium files.
    let two = "a: Bearer sk-ant-oat01-{REDACTED}\nb: sk-ant-api03-{REDACTED}\n";
    assert_eq!(decide(&policy, two, "notes.txt").0, Action::Warn);
    assert_eq!(decide(&policy, two, "notes.md").0, Action::Block);
}

#[test]
fn extensions_weights_errno_and_pass_through() {
    let policy = Policy::parse("weights: {pii: 0.9}\nblocked_errno: eperm\npass_through: [\"build/**\"]\n").unwrap();
    let report = policy.scanner([0; 16]).scan(b"mail: jane.doe@acme-corp.io\n", None);
    assert_eq!(report.verdict, Verdict::High);
    assert_eq!(policy.blocked_errno(), nix::libc::EPERM);
    assert!(policy.is_pass_through("build/out.o") && !policy.is_pass_through(".git/HEAD"));
}

#[test]
fn a_broken_policy_names_the_line_and_key() {
    let cases: &[(&str, u64, &str, &str)] = &[
        ("thresholds:\n  high: 0.5\n  medum: 0.3\n", 3, "medum", "unknown field"),
        ("thresholds:\n  high: lots\n", 2, "high", "float"),
        ("disable_families: [pii\n", 1, "disable_families", "unclosed"),
        ("extend_patterns:\n  x:\n    - name: bad\n      regex: \"([a-z\"\n", 3, "bad", "bad regex"),
        ("thresholds:\n  high: 0.2\n  low: 0.5\n", 1, "thresholds", "high ≥ medium ≥ low"),
        ("retry_budget:\n  default: -1\n", 2, "default", "≥ 0"),
        ("blocked_errno: ENOENT\n", 1, "blocked_errno", "one of"),
        ("rules:\n  - paths: [\"[\"]\n    action: allow\n", 2, "[", "bad glob"),
        ("rules:\n  - action: maybe\n", 2, "action", "unknown variant"),
        ("weights: {pii: -1}\n", 1, "pii", "[0, 10]"),
        ("typo_key: 1\n", 1, "typo_key", "unknown field"),
        ("read_guard:\n  - paths: [\".env\"]\n    action: hide\n", 3, "action", "unknown variant"),
        ("read_guard:\n  - paths: []\n    action: redact\n", 1, "read_guard", "needs paths"),
    ];
    for (text, line, key, message) in cases {
        let err = Policy::parse(text).expect_err(text);
        assert_eq!(err.reason().code(), "bad_policy", "{text}");
        assert_eq!(err.kind().as_str(), "policy_violation");
        match err.reason() {
            rwfs::Reason::BadPolicy { line: l, key: k, message: m, .. } => {
                assert_eq!((l, k.as_str()), (line, *key), "{text}: {err}");
                assert!(m.contains(message), "{text}: {m}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn the_reference_format_parses_unchanged() {
    // The reference server's documented example policy.
    let policy = Policy::parse(
        "version: 1\nextend_patterns:\n  api_key:\n    - name: internal_key\n      regex: 'ik_[A-Za-z0-9]{32}'\ndisable_families:\n  - binary_hint\nthresholds:\n  high: 0.7\n  medium: 0.4\n  low: 0.1\nretry_budget:\n  default: 3\n",
    )
    .unwrap();
    let report = policy.scanner([0; 16]).scan(b"key = ik_0123456789abcdefABCDEF0123456789\n", None);
    assert_eq!(report.findings[0].rule, "internal_key");
    assert_eq!(report.findings[0].family, "api_key");
}

#[test]
fn the_example_policy_parses_and_names_every_key() {
    let text = include_str!("../examples/policy.yaml");
    let policy = Policy::parse(text).unwrap_or_else(|e| panic!("examples/policy.yaml: {e}"));
    assert!(policy.is_pass_through("sub/crate/target/debug/x"));
    for key in [
        "version:",
        "extend_patterns:",
        "disable_families:",
        "thresholds:",
        "retry_budget:",
        "weights:",
        "rules:",
        "allow_paths:",
        "pass_through:",
        "blocked_errno:",
        "read_cap_bytes:",
        "editor_files:",
        "durability:",
        "batch_window_ms:",
        "max_gated_bytes:",
        "retention:",
        "read_guard:",
    ] {
        assert!(text.lines().any(|l| l.starts_with(key)), "examples/policy.yaml documents {key}");
    }
}

#[test]
fn durability_and_batch_window_are_checked() {
    let batch = Policy::parse("durability: batch\nbatch_window_ms: 250\n").unwrap();
    assert_eq!(batch.durability(), rwfs::policy::Durability::Batch);
    assert_eq!(batch.batch_window(), std::time::Duration::from_millis(250));
    let default = Policy::parse("").unwrap();
    assert_eq!((default.durability(), default.batch_window().as_millis()), (rwfs::policy::Durability::Close, 100));
    let wrong = Policy::parse("durability: fast\n").unwrap_err().to_string();
    assert!(wrong.contains("close") && wrong.contains("batch"), "names the two modes: {wrong}");
    let zero = Policy::parse("batch_window_ms: 0\n").unwrap_err().to_string();
    assert!(zero.contains("batch_window_ms"), "{zero}");
}

/// A team's `.gitleaks.toml`, `.gitleaksignore` and `.secrets.baseline` at the workspace root
/// mean at the gate what they mean in its CI: custom rules block, allowlists and reviewed
/// findings are allowed; a broken file is a typed error naming it.
#[test]
fn a_teams_gitleaks_and_detect_secrets_files_apply_at_the_gate() {
    use rwfs::history::{Options, Workspace};
    use rwfs::score::interop::sha1_hex;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let stripe = sample("stripe-secret-key", 7);
    let reviewed = sample("generic-secret-assignment", 8);
    let acme = "q8w2lm4s9xap7z1rt5vbk3nd";
    std::fs::write(
        root.join(".gitleaks.toml"),
        "[extend]\nuseDefault = true\n\n[[rules]]\nid = \"acme-token\"\nregex = '''acme_live_([a-z0-9]{24})'''\nsecretGroup = 1\nkeywords = [\"acme_live_\"]\n\n[[allowlists]]\npaths = ['''^fixtures/''']\n",
    )
    .unwrap();
    std::fs::write(root.join(".gitleaksignore"), "config/legacy.env:generic-api-key:2\n").unwrap();
    let baseline = serde_json::json!({
        "version": "1.5.0",
        "results": {"config/app.env": [{"type": "Secret Keyword", "filename": "config/app.env", "hashed_secret": sha1_hex(reviewed.as_bytes()), "line_number": 1}]}
    });
    std::fs::write(root.join(".secrets.baseline"), baseline.to_string()).unwrap();
    let policy = Workspace::open(root, &Options::default()).unwrap().policy(None).unwrap();
    // The team's own rule blocks what rwfs alone would not know.
    let (action, _) = decide(&policy, &format!("ACME=acme_live_{acme}\n"), "src/app.py");
    assert_eq!(action, Action::Block);
    assert_eq!(decide(&Policy::default(), &format!("ACME=acme_live_{acme}\n"), "src/app.py").0, Action::Allow);
    // Allowlisted paths, ignored fingerprints and baselined secrets pass; others still block.
    assert_eq!(decide(&policy, &format!("key = \"{stripe}\"\n"), "fixtures/stripe.py").0, Action::Allow);
    assert_eq!(decide(&policy, &format!("key = \"{stripe}\"\n"), "src/stripe.py").0, Action::Block);
    assert_eq!(decide(&policy, &format!("A=1\nDB_PASSWORD={reviewed}\n"), "config/legacy.env").0, Action::Allow);
    assert_eq!(decide(&policy, &format!("DB_PASSWORD={reviewed}\n"), "config/app.env").0, Action::Allow);
    assert_eq!(decide(&policy, &format!("DB_PASSWORD={reviewed}\n"), "config/other.env").0, Action::Block);
    // Inline markers of both tools.
    for marker in ["# gitleaks:allow", "# pragma: allowlist secret"] {
        let text = format!("key = \"{stripe}\"  {marker}\n");
        assert_eq!(decide(&Policy::default(), &text, "src/x.py").0, Action::Allow, "{marker}");
    }
    let text = format!("# pragma: allowlist nextline secret\nkey = \"{stripe}\"\n");
    assert_eq!(decide(&Policy::default(), &text, "src/x.py").0, Action::Allow);
    // A broken file is an error that names it.
    std::fs::write(root.join(".gitleaks.toml"), "[[rules]]\nid = \"x\"\nregex = '''(?<=a)b'''\n").unwrap();
    let err = Workspace::open(root, &Options::default()).unwrap().policy(None).unwrap_err();
    assert!(err.to_string().contains(".gitleaks.toml"), "{err}");
}
