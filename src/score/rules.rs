//! The built-in rules.
//!
//! Token formats are public facts (prefix, alphabet, length, checksum). Several rules' data —
//! anchors, token shapes and entropy thresholds — were adapted from gitleaks'
//! `config/gitleaks.toml`, Copyright (c) 2019 Zachary Rice, MIT License
//! (https://github.com/gitleaks/gitleaks/blob/master/LICENSE); the regexes here are our own
//! rewrites for a windowed, ASCII, linear-time engine. Anthropic `oat01`/`ort01`/`sid01`
//! formats, which no public rule set covers, are rwfs's own.
//!
//! Conventions: anchors are the shortest literal that is distinctive (they are matched ASCII
//! case-insensitively); `(?P<secret>…)` marks the secret; a token rule ends with
//! `(?:[^A-Za-z0-9_\-]|$)` so that it does not match the prefix of a longer token.

use super::rule::{BASE, Check, Confidence, Part, Rule, Severity, Trigger};
use super::sample::{self as s, ALNUM, BASE32, BASE64, BASE64URL, DIGITS, HEX, LOWER_DIGITS, UPPER_DIGITS};

/// `[A-Za-z0-9_-]`, the body alphabet of Anthropic and OpenAI keys.
const URLSAFE: &str = BASE64URL;

pub static RULES: &[Rule] = &[
    // ---- Anthropic -------------------------------------------------------------------------
    Rule {
        id: "anthropic-api-key",
        trigger: Trigger::Anchors(&["sk-ant-api"]),
        regex: r"\b(?P<secret>sk-ant-api\d\d-[A-Za-z0-9_\-]{93}AA)(?:[^A-Za-z0-9_\-]|$)",
        after: 130,
        confidence: Confidence::High,
        prefix: Some(r"\bsk-ant-api\d\d-"),
        env: "ANTHROPIC_API_KEY",
        sample: &[Part::Lit("sk-ant-api03-"), Part::Rand(URLSAFE, 93), Part::Lit("AA")],
        ..BASE
    },
    Rule {
        id: "anthropic-admin-key",
        trigger: Trigger::Anchors(&["sk-ant-admin"]),
        regex: r"\b(?P<secret>sk-ant-admin\d\d-[A-Za-z0-9_\-]{93}AA)(?:[^A-Za-z0-9_\-]|$)",
        after: 130,
        confidence: Confidence::High,
        prefix: Some(r"\bsk-ant-admin\d\d-"),
        env: "ANTHROPIC_ADMIN_KEY",
        sample: &[Part::Lit("sk-ant-admin01-"), Part::Rand(URLSAFE, 93), Part::Lit("AA")],
        ..BASE
    },
    Rule {
        id: "anthropic-oauth-token",
        trigger: Trigger::Anchors(&["sk-ant-oat"]),
        regex: r"\b(?P<secret>sk-ant-oat\d\d-[A-Za-z0-9_\-]{80,120})(?:[^A-Za-z0-9_\-]|$)",
        after: 150,
        min_entropy: 3.5,
        confidence: Confidence::High,
        prefix: Some(r"\bsk-ant-oat\d\d-"),
        env: "CLAUDE_CODE_OAUTH_TOKEN",
        sample: &[Part::Lit("sk-ant-oat01-"), Part::Rand(URLSAFE, 93), Part::Lit("AA")],
        ..BASE
    },
    Rule {
        id: "anthropic-refresh-token",
        trigger: Trigger::Anchors(&["sk-ant-ort"]),
        regex: r"\b(?P<secret>sk-ant-ort\d\d-[A-Za-z0-9_\-]{80,120})(?:[^A-Za-z0-9_\-]|$)",
        after: 150,
        min_entropy: 3.5,
        confidence: Confidence::High,
        prefix: Some(r"\bsk-ant-ort\d\d-"),
        env: "ANTHROPIC_REFRESH_TOKEN",
        sample: &[Part::Lit("sk-ant-ort01-"), Part::Rand(URLSAFE, 93), Part::Lit("AA")],
        ..BASE
    },
    Rule {
        id: "anthropic-session-key",
        trigger: Trigger::Anchors(&["sk-ant-sid"]),
        regex: r"\b(?P<secret>sk-ant-sid\d\d-[A-Za-z0-9_\-]{80,120})(?:[^A-Za-z0-9_\-]|$)",
        after: 150,
        min_entropy: 3.5,
        confidence: Confidence::High,
        prefix: Some(r"\bsk-ant-sid\d\d-"),
        env: "ANTHROPIC_SESSION_KEY",
        sample: &[Part::Lit("sk-ant-sid01-"), Part::Rand(URLSAFE, 93), Part::Lit("AA")],
        ..BASE
    },
    // ---- OpenAI -----------------------------------------------------------------------------
    Rule {
        id: "openai-project-key",
        trigger: Trigger::Anchors(&["sk-proj-"]),
        regex: r"\b(?P<secret>sk-proj-[A-Za-z0-9_\-]{58,74}T3BlbkFJ[A-Za-z0-9_\-]{58,74})(?:[^A-Za-z0-9_\-]|$)",
        after: 180,
        confidence: Confidence::High,
        prefix: Some(r"\bsk-proj-"),
        env: "OPENAI_API_KEY",
        sample: &[Part::Lit("sk-proj-"), Part::Rand(URLSAFE, 74), Part::Lit("T3BlbkFJ"), Part::Rand(URLSAFE, 74)],
        ..BASE
    },
    Rule {
        id: "openai-service-account-key",
        trigger: Trigger::Anchors(&["sk-svcacct-"]),
        regex: r"\b(?P<secret>sk-svcacct-[A-Za-z0-9_\-]{58,74}T3BlbkFJ[A-Za-z0-9_\-]{58,74})(?:[^A-Za-z0-9_\-]|$)",
        after: 180,
        confidence: Confidence::High,
        prefix: Some(r"\bsk-svcacct-"),
        env: "OPENAI_API_KEY",
        sample: &[Part::Lit("sk-svcacct-"), Part::Rand(URLSAFE, 58), Part::Lit("T3BlbkFJ"), Part::Rand(URLSAFE, 58)],
        ..BASE
    },
    Rule {
        id: "openai-admin-key",
        trigger: Trigger::Anchors(&["sk-admin-"]),
        regex: r"\b(?P<secret>sk-admin-[A-Za-z0-9_\-]{58,74}T3BlbkFJ[A-Za-z0-9_\-]{58,74})(?:[^A-Za-z0-9_\-]|$)",
        after: 180,
        confidence: Confidence::High,
        prefix: Some(r"\bsk-admin-"),
        env: "OPENAI_ADMIN_KEY",
        sample: &[Part::Lit("sk-admin-"), Part::Rand(URLSAFE, 58), Part::Lit("T3BlbkFJ"), Part::Rand(URLSAFE, 58)],
        ..BASE
    },
    Rule {
        id: "openai-legacy-key",
        trigger: Trigger::Anchors(&["t3blbkfj"]),
        regex: r"\b(?P<secret>sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})(?:[^A-Za-z0-9_\-]|$)",
        before: 24,
        after: 32,
        confidence: Confidence::High,
        env: "OPENAI_API_KEY",
        sample: &[Part::Lit("sk-"), Part::Rand(ALNUM, 20), Part::Lit("T3BlbkFJ"), Part::Rand(ALNUM, 20)],
        ..BASE
    },
    // ---- AWS --------------------------------------------------------------------------------
    Rule {
        id: "aws-access-key-id",
        family: "aws_secret",
        trigger: Trigger::Anchors(&["akia", "asia", "abia", "acca", "a3t"]),
        regex: r"\b(?P<secret>(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16})(?:[^A-Za-z0-9_\-]|$)",
        after: 24,
        min_entropy: 3.0,
        confidence: Confidence::High,
        prefix: Some(r"\b(?:AKIA|ASIA)[A-Z0-9*xX]{4}"),
        env: "AWS_ACCESS_KEY_ID",
        sample: &[Part::Lit("AKIA"), Part::Rand(BASE32, 16)],
        ..BASE
    },
    Rule {
        id: "aws-secret-access-key",
        family: "aws_secret",
        trigger: Trigger::Anchors(&["secret_access_key", "secretaccesskey", "secret-access-key", "aws_secret", "awssecret"]),
        regex: r#"(?i:aws)?_?(?i:secret)_?-?(?i:access)?_?-?(?i:key)["'`\]]?\s*(?::=|=>|=|:)\s*(?:r#*)?["'`]?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        before: 8,
        after: 90,
        min_entropy: 3.8,
        confidence: Confidence::High,
        env: "AWS_SECRET_ACCESS_KEY",
        needs_key: true,
        sample: &[Part::Rand(BASE64, 40)],
        ..BASE
    },
    Rule {
        id: "aws-session-token",
        family: "aws_secret",
        trigger: Trigger::Anchors(&["session_token", "sessiontoken", "session-token"]),
        regex: r#"(?i:aws)?_?(?i:session)[_\-]?(?i:token)["'`\]]?\s*(?::=|=>|=|:)\s*(?:r#*)?["'`]?(?P<secret>[A-Za-z0-9/+=]{100,1024})(?:[^A-Za-z0-9/+=]|$)"#,
        before: 8,
        after: 1100,
        min_entropy: 4.0,
        confidence: Confidence::High,
        env: "AWS_SESSION_TOKEN",
        needs_key: true,
        sample: &[Part::Lit("IQoJb3JpZ2luX2Vj"), Part::Rand(BASE64, 300)],
        ..BASE
    },
    // ---- GitHub / GitLab --------------------------------------------------------------------
    Rule {
        id: "github-pat",
        family: "github_pat",
        trigger: Trigger::Anchors(&["ghp_"]),
        regex: r"\b(?P<secret>ghp_[A-Za-z0-9]{36})(?:[^A-Za-z0-9_\-]|$)",
        after: 48,
        check: Check::Crc32Base62,
        confidence: Confidence::High,
        prefix: Some(r"\bghp_"),
        env: "GITHUB_TOKEN",
        sample: &[Part::Lit("ghp_"), Part::Rand(ALNUM, 30), Part::Crc32Base62],
        ..BASE
    },
    Rule {
        id: "github-oauth-token",
        family: "github_pat",
        trigger: Trigger::Anchors(&["gho_"]),
        regex: r"\b(?P<secret>gho_[A-Za-z0-9]{36})(?:[^A-Za-z0-9_\-]|$)",
        after: 48,
        check: Check::Crc32Base62,
        confidence: Confidence::High,
        prefix: Some(r"\bgho_"),
        env: "GITHUB_TOKEN",
        sample: &[Part::Lit("gho_"), Part::Rand(ALNUM, 30), Part::Crc32Base62],
        ..BASE
    },
    Rule {
        id: "github-user-to-server-token",
        family: "github_pat",
        trigger: Trigger::Anchors(&["ghu_"]),
        regex: r"\b(?P<secret>ghu_[A-Za-z0-9]{36})(?:[^A-Za-z0-9_\-]|$)",
        after: 48,
        check: Check::Crc32Base62,
        confidence: Confidence::High,
        prefix: Some(r"\bghu_"),
        env: "GITHUB_TOKEN",
        sample: &[Part::Lit("ghu_"), Part::Rand(ALNUM, 30), Part::Crc32Base62],
        ..BASE
    },
    Rule {
        id: "github-server-to-server-token",
        family: "github_pat",
        trigger: Trigger::Anchors(&["ghs_"]),
        regex: r"\b(?P<secret>ghs_[A-Za-z0-9]{36})(?:[^A-Za-z0-9_\-]|$)",
        after: 48,
        check: Check::Crc32Base62,
        confidence: Confidence::High,
        prefix: Some(r"\bghs_"),
        env: "GITHUB_TOKEN",
        sample: &[Part::Lit("ghs_"), Part::Rand(ALNUM, 30), Part::Crc32Base62],
        ..BASE
    },
    Rule {
        id: "github-refresh-token",
        family: "github_pat",
        trigger: Trigger::Anchors(&["ghr_"]),
        regex: r"\b(?P<secret>ghr_[A-Za-z0-9]{36,76})(?:[^A-Za-z0-9_\-]|$)",
        after: 90,
        min_entropy: 3.5,
        confidence: Confidence::High,
        prefix: Some(r"\bghr_"),
        env: "GITHUB_REFRESH_TOKEN",
        sample: &[Part::Lit("ghr_"), Part::Rand(ALNUM, 76)],
        ..BASE
    },
    Rule {
        id: "github-fine-grained-pat",
        family: "github_pat",
        trigger: Trigger::Anchors(&["github_pat_"]),
        regex: r"\b(?P<secret>github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})(?:[^A-Za-z0-9_\-]|$)",
        after: 100,
        min_entropy: 3.5,
        confidence: Confidence::High,
        prefix: Some(r"\bgithub_pat_"),
        env: "GITHUB_TOKEN",
        sample: &[Part::Lit("github_pat_11"), Part::Rand(UPPER_DIGITS, 20), Part::Lit("_"), Part::Rand(ALNUM, 59)],
        ..BASE
    },
    Rule {
        id: "gitlab-pat",
        trigger: Trigger::Anchors(&["glpat-"]),
        regex: r"\b(?P<secret>glpat-[A-Za-z0-9_\-]{20,300}(?:\.[0-9a-z]{2}[0-9a-z]{7})?)(?:[^A-Za-z0-9_\-.]|$)",
        after: 320,
        min_entropy: 3.0,
        confidence: Confidence::High,
        prefix: Some(r"\bglpat-"),
        env: "GITLAB_TOKEN",
        sample: &[Part::Lit("glpat-"), Part::Rand(URLSAFE, 20)],
        ..BASE
    },
    // ---- Chat -------------------------------------------------------------------------------
    Rule {
        id: "slack-bot-token",
        trigger: Trigger::Anchors(&["xoxb-"]),
        regex: r"\b(?P<secret>xoxb-[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{20,34})(?:[^A-Za-z0-9_\-]|$)",
        after: 100,
        confidence: Confidence::High,
        prefix: Some(r"\bxoxb-"),
        env: "SLACK_BOT_TOKEN",
        sample: &[Part::Lit("xoxb-"), Part::Rand(DIGITS, 12), Part::Lit("-"), Part::Rand(DIGITS, 13), Part::Lit("-"), Part::Rand(ALNUM, 24)],
        ..BASE
    },
    Rule {
        id: "slack-user-token",
        trigger: Trigger::Anchors(&["xoxp-", "xoxe-"]),
        regex: r"\b(?P<secret>xox[pe](?:-[0-9]{10,13}){3}-[A-Za-z0-9]{28,34})(?:[^A-Za-z0-9_\-]|$)",
        after: 110,
        confidence: Confidence::High,
        prefix: Some(r"\bxox[pe]-"),
        env: "SLACK_USER_TOKEN",
        sample: &[
            Part::Lit("xoxp-"), Part::Rand(DIGITS, 12), Part::Lit("-"), Part::Rand(DIGITS, 12), Part::Lit("-"),
            Part::Rand(DIGITS, 13), Part::Lit("-"), Part::Rand(HEX, 32),
        ],
        ..BASE
    },
    Rule {
        id: "slack-webhook-url",
        trigger: Trigger::Anchors(&["hooks.slack.com/"]),
        regex: r"(?P<secret>https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56})(?:[^A-Za-z0-9+/]|$)",
        before: 10,
        after: 80,
        confidence: Confidence::High,
        prefix: Some(r"hooks\.slack\.com/(?:services|workflows|triggers)/"),
        env: "SLACK_WEBHOOK_URL",
        sample: &[
            Part::Lit("https://hooks.slack.com/services/T"), Part::Rand(UPPER_DIGITS, 8), Part::Lit("/B"),
            Part::Rand(UPPER_DIGITS, 10), Part::Lit("/"), Part::Rand(ALNUM, 24),
        ],
        ..BASE
    },
    // ---- Payments ---------------------------------------------------------------------------
    Rule {
        id: "stripe-secret-key",
        trigger: Trigger::Anchors(&["sk_live_", "sk_test_", "sk_prod_"]),
        regex: r"\b(?P<secret>sk_(?:live|test|prod)_[A-Za-z0-9]{10,247})(?:[^A-Za-z0-9_\-]|$)",
        after: 260,
        min_entropy: 3.0,
        confidence: Confidence::High,
        prefix: Some(r"\bsk_(?:live|test|prod)_"),
        env: "STRIPE_SECRET_KEY",
        sample: &[Part::Lit("sk_live_"), Part::Rand(ALNUM, 99)],
        ..BASE
    },
    Rule {
        id: "stripe-restricted-key",
        trigger: Trigger::Anchors(&["rk_live_", "rk_test_", "rk_prod_"]),
        regex: r"\b(?P<secret>rk_(?:live|test|prod)_[A-Za-z0-9]{10,247})(?:[^A-Za-z0-9_\-]|$)",
        after: 260,
        min_entropy: 3.0,
        confidence: Confidence::High,
        prefix: Some(r"\brk_(?:live|test|prod)_"),
        env: "STRIPE_RESTRICTED_KEY",
        sample: &[Part::Lit("rk_test_"), Part::Rand(ALNUM, 99)],
        ..BASE
    },
    // ---- Google / Azure ---------------------------------------------------------------------
    Rule {
        id: "google-api-key",
        family: "cloud_key",
        trigger: Trigger::Anchors(&["aiza"]),
        regex: r"\b(?P<secret>AIza[A-Za-z0-9_\-]{35})(?:[^A-Za-z0-9_\-]|$)",
        after: 45,
        min_entropy: 3.5,
        confidence: Confidence::High,
        prefix: Some(r"\bAIza[A-Za-z0-9_\-]{4}"),
        env: "GOOGLE_API_KEY",
        sample: &[Part::Lit("AIza"), Part::Rand(URLSAFE, 35)],
        ..BASE
    },
    Rule {
        id: "gcp-service-account-key",
        family: "cloud_key",
        trigger: Trigger::Anchors(&["\"private_key\""]),
        regex: r#""private_key"\s*:\s*"(?P<secret>-----BEGIN [A-Z ]{0,20}PRIVATE KEY-----(?:\\[nr]|[A-Za-z0-9+/=\s])+?-----END [A-Z ]{0,20}PRIVATE KEY-----(?:\\n)?)""#,
        after: 8192,
        check: Check::Pem,
        confidence: Confidence::High,
        prefix: Some(r#""private_key"\s*:\s*"-----BEGIN"#),
        env: "GOOGLE_APPLICATION_CREDENTIALS",
        needs_key: true,
        sample: &[Part::Gen(s::gcp_service_account)],
        ..BASE
    },
    Rule {
        id: "azure-storage-account-key",
        family: "cloud_key",
        trigger: Trigger::Anchors(&["accountkey="]),
        regex: r"(?i:AccountKey)=(?P<secret>[A-Za-z0-9+/]{86}==)(?:[^A-Za-z0-9+/=]|$)",
        after: 110,
        confidence: Confidence::High,
        prefix: Some(r"(?i:AccountKey)=[A-Za-z0-9+/]{4}"),
        env: "AZURE_STORAGE_CONNECTION_STRING",
        sample: &[Part::Gen(s::azure_connection_string)],
        ..BASE
    },
    // ---- Private keys -----------------------------------------------------------------------
    Rule {
        id: "rsa-private-key",
        family: "pem_block",
        trigger: Trigger::Anchors(&["-----begin rsa private key-----"]),
        regex: r"(?P<secret>-----BEGIN RSA PRIVATE KEY-----(?s:.+?)-----END RSA PRIVATE KEY-----)",
        after: 16384,
        check: Check::Pem,
        confidence: Confidence::High,
        prefix: Some(r"-----BEGIN RSA PRIVATE KEY-----"),
        env: "PRIVATE_KEY_PATH",
        sample: &[Part::Gen(s::pem_rsa)],
        ..BASE
    },
    Rule {
        id: "private-key",
        family: "pem_block",
        trigger: Trigger::Anchors(&["-----begin private key-----"]),
        regex: r"(?P<secret>-----BEGIN PRIVATE KEY-----(?s:.+?)-----END PRIVATE KEY-----)",
        after: 16384,
        check: Check::Pem,
        confidence: Confidence::High,
        prefix: Some(r"-----BEGIN PRIVATE KEY-----"),
        env: "PRIVATE_KEY_PATH",
        sample: &[Part::Gen(s::pem_pkcs8)],
        ..BASE
    },
    Rule {
        id: "ec-private-key",
        family: "pem_block",
        trigger: Trigger::Anchors(&["-----begin ec private key-----"]),
        regex: r"(?P<secret>-----BEGIN EC PRIVATE KEY-----(?s:.+?)-----END EC PRIVATE KEY-----)",
        after: 8192,
        check: Check::Pem,
        confidence: Confidence::High,
        prefix: Some(r"-----BEGIN EC PRIVATE KEY-----"),
        env: "PRIVATE_KEY_PATH",
        sample: &[Part::Gen(s::pem_ec)],
        ..BASE
    },
    Rule {
        id: "dsa-private-key",
        family: "pem_block",
        trigger: Trigger::Anchors(&["-----begin dsa private key-----"]),
        regex: r"(?P<secret>-----BEGIN DSA PRIVATE KEY-----(?s:.+?)-----END DSA PRIVATE KEY-----)",
        after: 8192,
        check: Check::Pem,
        confidence: Confidence::High,
        prefix: Some(r"-----BEGIN DSA PRIVATE KEY-----"),
        env: "PRIVATE_KEY_PATH",
        sample: &[Part::Gen(s::pem_dsa)],
        ..BASE
    },
    Rule {
        id: "openssh-private-key",
        family: "pem_block",
        trigger: Trigger::Anchors(&["-----begin openssh private key-----"]),
        regex: r"(?P<secret>-----BEGIN OPENSSH PRIVATE KEY-----(?s:.+?)-----END OPENSSH PRIVATE KEY-----)",
        after: 16384,
        check: Check::OpenSsh,
        confidence: Confidence::High,
        prefix: Some(r"-----BEGIN OPENSSH PRIVATE KEY-----"),
        env: "SSH_PRIVATE_KEY_PATH",
        sample: &[Part::Gen(s::pem_openssh)],
        ..BASE
    },
    Rule {
        id: "encrypted-private-key",
        family: "pem_block",
        trigger: Trigger::Anchors(&["-----begin encrypted private key-----"]),
        regex: r"(?P<secret>-----BEGIN ENCRYPTED PRIVATE KEY-----(?s:.+?)-----END ENCRYPTED PRIVATE KEY-----)",
        after: 16384,
        check: Check::Pem,
        confidence: Confidence::High,
        prefix: Some(r"-----BEGIN ENCRYPTED PRIVATE KEY-----"),
        env: "PRIVATE_KEY_PATH",
        sample: &[Part::Gen(s::pem_encrypted)],
        ..BASE
    },
    Rule {
        id: "pgp-private-key-block",
        family: "pem_block",
        trigger: Trigger::Anchors(&["-----begin pgp private key block-----"]),
        regex: r"(?P<secret>-----BEGIN PGP PRIVATE KEY BLOCK-----(?s:.+?)-----END PGP PRIVATE KEY BLOCK-----)",
        after: 32768,
        check: Check::Pem,
        confidence: Confidence::High,
        prefix: Some(r"-----BEGIN PGP PRIVATE KEY BLOCK-----"),
        env: "PGP_PRIVATE_KEY_PATH",
        sample: &[Part::Gen(s::pem_pgp)],
        ..BASE
    },
    // ---- Tokens in general ------------------------------------------------------------------
    Rule {
        id: "jwt",
        family: "jwt",
        trigger: Trigger::Anchors(&["eyj"]),
        regex: r"\b(?P<secret>eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{16,})(?:[^A-Za-z0-9_\-.]|$)",
        after: 4096,
        check: Check::Jwt,
        confidence: Confidence::Medium,
        env: "JWT_TOKEN",
        sample: &[Part::Gen(s::jwt)],
        ..BASE
    },
    Rule {
        id: "bearer-token",
        trigger: Trigger::Anchors(&["bearer "]),
        regex: r"(?i:bearer)\s+(?P<secret>[A-Za-z0-9\-_.=~+/]{20,512})(?:[^A-Za-z0-9\-_.=~+/]|$)",
        after: 530,
        min_entropy: 3.5,
        confidence: Confidence::Medium,
        env: "API_TOKEN",
        generic: true,
        sample: &[Part::Lit("Bearer "), Part::Rand(ALNUM, 40)],
        ..BASE
    },
    Rule {
        id: "database-url-with-password",
        family: "db_credential",
        trigger: Trigger::Anchors(&[
            "postgres://", "postgresql://", "mysql://", "mariadb://", "mongodb://", "mongodb+srv://",
            "redis://", "rediss://", "amqp://", "amqps://", "mssql://", "sqlserver://", "clickhouse://",
        ]),
        regex: r"(?P<secret>(?i:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|clickhouse)://[^\s:@/'\x22]{0,64}:[^\s@/'\x22]{3,128}@[A-Za-z0-9.\-_]+(?::\d+)?(?:/[^\s'\x22]*)?)",
        after: 400,
        check: Check::UrlPassword,
        confidence: Confidence::High,
        env: "DATABASE_URL",
        sample: &[Part::Gen(s::database_url)],
        ..BASE
    },
    Rule {
        id: "url-with-password",
        family: "db_credential",
        trigger: Trigger::Anchors(&["https://", "http://", "ftp://", "ftps://", "sftp://", "ssh://", "git+ssh://", "smtp://"]),
        regex: r"(?P<secret>(?i:https?|s?ftps?|ssh|git\+ssh|smtp)://[^\s:@/'\x22]{1,64}:[^\s@/'\x22]{3,128}@[A-Za-z0-9.\-_]+(?::\d+)?)",
        after: 300,
        check: Check::UrlPassword,
        min_entropy: 2.5,
        confidence: Confidence::Medium,
        env: "SERVICE_URL",
        sample: &[Part::Lit("https://deploy:"), Part::Rand(ALNUM, 20), Part::Lit("@registry.internal.net")],
        ..BASE
    },
    // ---- The reference server's families -----------------------------------------------------
    Rule {
        id: "datadog-client-key",
        trigger: Trigger::Anchors(&["pub"]),
        regex: r"\b(?P<secret>pub[a-f0-9]{32})(?:[^A-Za-z0-9_\-]|$)",
        after: 40,
        min_entropy: 3.0,
        confidence: Confidence::Low,
        env: "DD_CLIENT_TOKEN",
        sample: &[Part::Lit("pub"), Part::Rand(HEX, 32)],
        ..BASE
    },
    Rule {
        id: "statsig-client-key",
        trigger: Trigger::Anchors(&["client-"]),
        regex: r"\b(?P<secret>client-[A-Za-z0-9]{30,60})(?:[^A-Za-z0-9_\-]|$)",
        after: 70,
        min_entropy: 4.0,
        confidence: Confidence::Low,
        env: "STATSIG_CLIENT_KEY",
        sample: &[Part::Lit("client-"), Part::Rand(ALNUM, 43)],
        ..BASE
    },
    // ---- Personal data (low weight, warnings by default) -------------------------------------
    Rule {
        id: "email-address",
        family: "pii",
        trigger: Trigger::Anchors(&["@"]),
        regex: r"(?P<secret>[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}[A-Za-z0-9])?)*\.[A-Za-z]{2,24})\b",
        before: 64,
        after: 256,
        confidence: Confidence::Low,
        severity: Severity::Sensitive,
        env: "",
        sample: &[Part::Gen(s::email)],
        ..BASE
    },
    Rule {
        id: "us-ssn",
        family: "pii",
        trigger: Trigger::Digits,
        regex: r"^(?P<secret>\d{3}-\d{2}-\d{4})$",
        check: Check::Ssn,
        confidence: Confidence::Low,
        severity: Severity::Sensitive,
        env: "",
        sample: &[Part::Gen(s::ssn)],
        ..BASE
    },
    Rule {
        id: "payment-card-number",
        family: "pii",
        trigger: Trigger::Digits,
        regex: r"^(?P<secret>\d{4}(?:[ \-]?\d{4}){2}[ \-]?\d{1,7}|\d{4}[ \-]?\d{6}[ \-]?\d{5})$",
        check: Check::Luhn,
        confidence: Confidence::Medium,
        severity: Severity::Sensitive,
        env: "",
        sample: &[Part::Gen(s::card)],
        ..BASE
    },
    Rule {
        id: "phone-number",
        family: "pii",
        trigger: Trigger::Digits,
        regex: r"^(?P<secret>\+\d{1,3}[ .\-]?\(?\d{2,4}\)?[ .\-]?\d{3}[ .\-]?\d{3,4}|\(\d{3}\) ?\d{3}[ .\-]\d{4}|\d{3}[.\-]\d{3}[.\-]\d{4})$",
        confidence: Confidence::Low,
        severity: Severity::Sensitive,
        env: "",
        sample: &[Part::Gen(s::phone)],
        ..BASE
    },
    Rule {
        id: "iban",
        family: "pii",
        trigger: Trigger::Iban,
        regex: r"^(?P<secret>[A-Z]{2}\d{2}(?: ?[A-Z0-9]{1,4}){3,8})$",
        check: Check::Iban,
        confidence: Confidence::Medium,
        severity: Severity::Sensitive,
        env: "",
        sample: &[Part::Gen(s::iban)],
        ..BASE
    },
    // ---- Generic assignments (low weight, warnings by default) --------------------------------
    Rule {
        id: "generic-secret-assignment",
        family: "generic_secret",
        trigger: Trigger::Generic,
        regex: "",
        confidence: Confidence::Low,
        severity: Severity::Sensitive,
        env: "SECRET",
        needs_key: true,
        generic: true,
        sample: &[Part::Rand(LOWER_DIGITS, 12), Part::Rand(ALNUM, 20)],
        ..BASE
    },
];

/// Key-name words that make an assignment worth a look for the generic detector.
pub const GENERIC_KEYWORDS: &[&str] = &[
    "password", "passwd", "passphrase", "secret", "token", "api_key", "apikey", "api-key", "access_key",
    "accesskey", "auth_key", "private_key", "privatekey", "client_secret", "credential", "pwd",
];
