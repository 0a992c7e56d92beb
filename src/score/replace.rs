//! Suggested replacements: read the secret from the environment, in the file's own language.
//!
//! A suggestion never keeps the vendor prefix (a mask like `sk-ant-oat01-{REDACTED}` is exactly
//! what trips a host's content filter). Where the secret is the whole of a quoted string in a
//! programming language, the quoted string becomes an expression (`os.environ["X"]`,
//! `process.env.X`, `std::env::var("X")`); inside a larger string, and in shell, `.env` and
//! configuration files, it becomes `${X}`; in GitHub Actions workflows `${{ secrets.X }}`.
//! Personal data gets a neutral placeholder instead. Every replacement re-scans clean.

/// The language a replacement is written in, from the file's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Python,
    JavaScript,
    Rust,
    Go,
    Java,
    Ruby,
    Php,
    CSharp,
    /// Shell scripts, `.env` files, Dockerfiles, YAML/TOML/INI configuration: `${X}`.
    Template,
    GithubActions,
}

impl Lang {
    pub fn of(path: Option<&str>) -> Lang {
        let Some(path) = path else { return Lang::Template };
        let name = path.rsplit('/').next().unwrap_or(path);
        if path.contains(".github/workflows/") {
            return Lang::GithubActions;
        }
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
        match ext.as_str() {
            "py" | "pyi" | "ipynb" => Lang::Python,
            "js" | "mjs" | "cjs" | "jsx" | "ts" | "tsx" | "mts" | "cts" => Lang::JavaScript,
            "rs" => Lang::Rust,
            "go" => Lang::Go,
            "java" | "kt" | "kts" | "scala" | "groovy" => Lang::Java,
            "rb" => Lang::Ruby,
            "php" => Lang::Php,
            "cs" => Lang::CSharp,
            _ => Lang::Template,
        }
    }

    /// Whether an unquoted value is a string (configuration, shell), not code.
    pub fn has_bare_strings(self) -> bool {
        matches!(self, Lang::Template | Lang::GithubActions)
    }

    /// An expression that reads `var` from the environment.
    pub fn env_reference(self, var: &str) -> String {
        match self {
            Lang::Python => format!("os.environ[\"{var}\"]"),
            Lang::JavaScript => format!("process.env.{var}"),
            Lang::Rust => format!("std::env::var(\"{var}\")"),
            Lang::Go => format!("os.Getenv(\"{var}\")"),
            Lang::Java => format!("System.getenv(\"{var}\")"),
            Lang::Ruby => format!("ENV[\"{var}\"]"),
            Lang::Php => format!("getenv('{var}')"),
            Lang::CSharp => format!("Environment.GetEnvironmentVariable(\"{var}\")"),
            Lang::Template => format!("${{{var}}}"),
            Lang::GithubActions => format!("${{{{ secrets.{var} }}}}"),
        }
    }

    /// Whether a whole quoted string can be replaced by an expression.
    fn has_expressions(self) -> bool {
        !matches!(self, Lang::Template | Lang::GithubActions)
    }
}

/// The replacement text for a secret at `span` of `hay`, and the range it replaces.
pub fn suggest(
    hay: &[u8],
    span: std::ops::Range<usize>,
    env: &str,
    family: &str,
    rule: &str,
    lang: Lang,
) -> (String, std::ops::Range<usize>) {
    if env.is_empty() || family == "pii" {
        return (pii_placeholder(rule).to_string(), span);
    }
    let quoted = span.start > 0
        && span.end < hay.len()
        && matches!(hay[span.start - 1], b'"' | b'\'' | b'`')
        && hay[span.end] == hay[span.start - 1];
    if quoted && lang.has_expressions() {
        return (lang.env_reference(env), span.start - 1..span.end + 1);
    }
    let text = if lang == Lang::GithubActions { lang.env_reference(env) } else { Lang::Template.env_reference(env) };
    (text, span)
}

fn pii_placeholder(rule: &str) -> &'static str {
    match rule {
        "email-address" => "user@example.com",
        "us-ssn" => "<SSN>",
        "payment-card-number" => "<CARD_NUMBER>",
        "phone-number" => "<PHONE_NUMBER>",
        "iban" => "<IBAN>",
        _ => "<REDACTED>",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_and_references() {
        assert_eq!(
            Lang::of(Some("app/settings.py")).env_reference("STRIPE_SECRET_KEY"),
            "os.environ[\"STRIPE_SECRET_KEY\"]"
        );
        assert_eq!(Lang::of(Some("src/index.ts")).env_reference("X"), "process.env.X");
        assert_eq!(Lang::of(Some("src/main.rs")).env_reference("X"), "std::env::var(\"X\")");
        assert_eq!(Lang::of(Some(".env")).env_reference("X"), "${X}");
        assert_eq!(Lang::of(Some(".github/workflows/ci.yml")).env_reference("X"), "${{ secrets.X }}");
    }

    #[test]
    fn a_whole_quoted_string_becomes_an_expression() {
        let hay = br#"key = "abc123""#;
        let (text, range) = suggest(hay, 7..13, "K", "api_key", "r", Lang::Python);
        assert_eq!((text.as_str(), range), ("os.environ[\"K\"]", 6..14));
        let (text, range) = suggest(hay, 7..13, "K", "api_key", "r", Lang::Template);
        assert_eq!((text.as_str(), range), ("${K}", 7..13));
    }
}
