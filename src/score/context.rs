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

/// Should a generic assignment of `value` in a file of `kind` block? The generic detector has
/// already judged the key (it names a credential: `password`, `secret`, `token`, `api_key`,
/// `auth`…, and is not `token_url` or `public_key`) and the value (length, classes, entropy,
/// no placeholder or reference).
pub fn promotes(kind: FileKind, value: &str) -> bool {
    if !plain_value(value) || super::check::encodes_placeholder(value) {
        return false;
    }
    let b = value.as_bytes();
    let classes = super::filter::char_classes(b);
    let entropy = super::filter::entropy(b);
    match kind {
        FileKind::Config => value.len() >= 8 && (classes >= 3 || (value.len() >= 16 && entropy >= 3.5)),
        FileKind::Other => value.len() >= 12 && classes >= 3 && entropy >= 3.5,
        FileKind::Code | FileKind::Sample => false,
    }
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
        assert!(promotes(FileKind::Config, &value));
        assert!(promotes(FileKind::Other, &value));
        assert!(!promotes(FileKind::Code, &value));
        assert!(!promotes(FileKind::Sample, &value));
        assert!(!promotes(FileKind::Config, "/run/secrets/db_password1"));
        assert!(!promotes(FileKind::Config, "api.v2.acme-corp.internal"));
        assert!(!promotes(FileKind::Other, "abcd1234efgh"));
    }
}
