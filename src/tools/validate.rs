//! `rw_validate`: a syntax check of a draft before it is written, for LaTeX, JSON, Python, YAML,
//! TOML and Markdown front matter.
//!
//! [`validate`] is a pure function (no I/O; `target_path` is only looked at for its extension)
//! returning a [`Validation`]: the resolved [`Format`] and [`Diagnostic`]s with 1-based lines
//! and columns (columns count characters, as Python's do). The tool always succeeds (`ok:
//! true`); `valid` is false only when a diagnostic has severity `error`, and `summary` is the
//! reference's `"<fmt>: ok"`, `"<fmt>: N warning(s)"` or `"<fmt>: N error(s)[, M warning(s)]"`.
//!
//! The format is the hint (lowercased), else the target path's extension, else a sniff of the
//! content: `{`/`[` is JSON, `---` is YAML, except that a `---` line closed by a second `---`
//! line is Markdown front matter. Markdown is checked by parsing its front matter only (YAML
//! between `---` lines, TOML between `+++` lines, errors at their lines in the whole file); the
//! body is prose and always valid.
//!
//! Differences from the reference (its bug, fixed here):
//! - LaTeX is scanned, not pattern-matched: escaped braces (`\{ \}`) and `%` comments are not
//!   counted, `\verb`, `\lstinline` and verbatim-like environments (`verbatim`, `lstlisting`,
//!   `minted`, `comment`, …) are skipped, math is tracked across lines (`$…$`, `$$…$$`, `\(…\)`,
//!   `\[…\]`, math environments), and an underscore inside the argument of `\label`, `\ref`,
//!   `\cite`, `\input`, `\include`, `\includegraphics`, `\url`, `\href`, `\texttt` (and their
//!   kin) is not warned about; `\url`/`\href` arguments may hold `%` without a warning;
//! - Markdown with YAML front matter is not taken for a two-document YAML stream;
//! - an unknown format is not passed silently: it is `format: "unknown"` with `checked: false`
//!   and a note in `warnings` (the reference's `errors: []` and `"unknown: ok"` are kept);
//! - Python is parsed by Ruff's parser (current Python grammar), TOML by `toml`, JSON by
//!   `serde_json` (strict: no `NaN`), YAML by `serde-saphyr` (one document; duplicate keys are
//!   errors, as the YAML spec says).
//!
//! Invariants: nothing here reads or writes a file; a check never panics or overflows the
//! stack on hostile input (the parsers bound their recursion; the Python tree is dropped on a
//! stack sized to it); at most [`MAX_LISTED`] diagnostics are listed, the counts in `summary`
//! cover them all.

mod latex;

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::{Call, Outcome, Tools, ok};

/// Diagnostics listed in one answer; the rest are counted (`omitted`).
pub const MAX_LISTED: usize = 200;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateArgs {
    /// The text to check (nothing is written).
    pub content: String,
    /// `latex`, `json`, `python`, `yaml`, `toml` or `markdown`. Without it the format comes from
    /// `target_path`'s extension, then from the content (`{`/`[` → json, `---` → yaml, or
    /// markdown when a second `---` line closes front matter). An unknown hint checks nothing.
    #[serde(default)]
    pub format_hint: Option<String>,
    /// Where the content is meant to go; only its extension is used (`.tex`, `.json`, `.py`,
    /// `.yaml`/`.yml`, `.toml`, `.md`/`.markdown`).
    #[serde(default)]
    pub target_path: Option<String>,
}

impl Tools {
    pub fn validate(&self, _call: &Call, args: ValidateArgs) -> Outcome {
        let validation = validate(&args.content, args.format_hint.as_deref(), args.target_path.as_deref());
        Ok(ok(validation.to_json()))
    }
}

/// What the content was checked as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Latex,
    Json,
    Python,
    Yaml,
    Toml,
    Markdown,
    /// Not recognised: nothing was checked.
    Unknown,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Latex => "latex",
            Format::Json => "json",
            Format::Python => "python",
            Format::Yaml => "yaml",
            Format::Toml => "toml",
            Format::Markdown => "markdown",
            Format::Unknown => "unknown",
        }
    }

    /// A `format_hint` (already lowercased), with the file-extension spellings as aliases.
    fn from_hint(hint: &str) -> Option<Format> {
        Some(match hint {
            "latex" | "tex" => Format::Latex,
            "json" => Format::Json,
            "python" | "py" => Format::Python,
            "yaml" | "yml" => Format::Yaml,
            "toml" => Format::Toml,
            "markdown" | "md" => Format::Markdown,
            _ => return None,
        })
    }

    fn from_extension(path: &str) -> Option<Format> {
        let ext = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "tex" => Format::Latex,
            "json" => Format::Json,
            "py" => Format::Python,
            "yaml" | "yml" => Format::Yaml,
            "toml" => Format::Toml,
            "md" | "markdown" => Format::Markdown,
            _ => return None,
        })
    }

    /// The reference's sniff (`{`/`[` → JSON, `---` → YAML), except that front matter closed
    /// by a second `---` line is Markdown (reference bug 28).
    fn sniff(content: &str) -> Format {
        let head = content.trim_start();
        if head.starts_with('{') || head.starts_with('[') {
            Format::Json
        } else if head.starts_with("---") {
            match front_matter(content) {
                Some(fm) if fm.closer == Some("---") => Format::Markdown,
                _ => Format::Yaml,
            }
        } else {
            Format::Unknown
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One finding: 1-based line, 1-based column in characters when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub line: usize,
    pub col: Option<usize>,
    pub message: String,
    pub severity: Severity,
}

impl Diagnostic {
    pub fn error(line: usize, col: Option<usize>, message: impl Into<String>) -> Diagnostic {
        Diagnostic { line, col, message: message.into(), severity: Severity::Error }
    }

    pub fn warning(line: usize, col: Option<usize>, message: impl Into<String>) -> Diagnostic {
        Diagnostic { line, col, message: message.into(), severity: Severity::Warning }
    }
}

/// The outcome of [`validate`].
#[derive(Debug, Clone)]
pub struct Validation {
    pub format: Format,
    pub diagnostics: Vec<Diagnostic>,
    /// False when the format is unknown and nothing was checked.
    pub checked: bool,
    /// Notes about the check itself (why nothing was checked, what was left out).
    pub notes: Vec<String>,
}

impl Validation {
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity == Severity::Error).count()
    }

    pub fn warnings(&self) -> usize {
        self.diagnostics.len() - self.errors()
    }

    /// No diagnostic of severity `error` (warnings allowed).
    pub fn valid(&self) -> bool {
        self.errors() == 0
    }

    /// The reference's one-line summary.
    pub fn summary(&self) -> String {
        let (errors, warnings) = (self.errors(), self.warnings());
        let fmt = self.format.as_str();
        match (errors, warnings) {
            (0, 0) => format!("{fmt}: ok"),
            (0, w) => format!("{fmt}: {w} warning(s)"),
            (e, 0) => format!("{fmt}: {e} error(s)"),
            (e, w) => format!("{fmt}: {e} error(s), {w} warning(s)"),
        }
    }

    /// The tool's fields (without `ok`): the reference's `valid`, `format`, `errors`,
    /// `summary`, plus `checked`, `warnings` (notes) and `omitted` (diagnostics not listed).
    pub fn to_json(&self) -> Value {
        let omitted = self.diagnostics.len().saturating_sub(MAX_LISTED);
        let mut notes = self.notes.clone();
        if omitted > 0 {
            notes.push(format!("{omitted} more diagnostic(s) not listed; the summary counts them all"));
        }
        let errors: Vec<Value> = self
            .diagnostics
            .iter()
            .take(MAX_LISTED)
            .map(|d| json!({"line": d.line, "col": d.col, "message": d.message, "severity": d.severity.as_str()}))
            .collect();
        json!({
            "valid": self.valid(),
            "format": self.format.as_str(),
            "errors": errors,
            "summary": self.summary(),
            "checked": self.checked,
            "warnings": notes,
            "omitted": omitted,
        })
    }
}

/// Check `content` as the format the hint, the target path's extension or the content itself
/// names (in that order).
pub fn validate(content: &str, format_hint: Option<&str>, target_path: Option<&str>) -> Validation {
    let hint = format_hint.map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty());
    let format = match &hint {
        Some(h) => Format::from_hint(h).unwrap_or(Format::Unknown),
        None => target_path.and_then(Format::from_extension).unwrap_or_else(|| Format::sniff(content)),
    };
    let diagnostics = match format {
        Format::Latex => latex::check(content),
        Format::Json => json_check(content),
        Format::Python => python_check(content),
        Format::Yaml => yaml_check(content, 0),
        Format::Toml => toml_check(content, 0),
        Format::Markdown => markdown_check(content),
        Format::Unknown => Vec::new(),
    };
    let mut notes = Vec::new();
    if format == Format::Unknown {
        notes.push(match &hint {
            Some(h) => format!(
                "format_hint {h:?} is not a format rw_validate checks (latex, json, python, yaml, toml, markdown): \
                 nothing was checked"
            ),
            None => "no format_hint, no known target_path extension, and the content does not start like JSON or \
                     YAML: nothing was checked"
                .to_string(),
        });
    }
    Validation { format, diagnostics, checked: format != Format::Unknown, notes }
}

/// Line starts of a text, to turn byte offsets into 1-based (line, character column).
struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let starts = std::iter::once(0).chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1)).collect();
        Lines { text, starts }
    }

    /// The (line, column) of byte `offset` (clamped to the text, rounded down to a character).
    fn locate(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line - 1];
        (line, self.text[start..offset].chars().count() + 1)
    }

    /// The byte offset of 1-based `line`'s `byte_col`-th byte (0: the line's start).
    fn offset(&self, line: usize, byte_col: usize) -> usize {
        let start = self.starts.get(line.saturating_sub(1)).copied().unwrap_or(self.text.len());
        start + byte_col.saturating_sub(1)
    }
}

fn json_check(content: &str) -> Vec<Diagnostic> {
    let Err(e) = serde_json::from_str::<IgnoredAny>(content) else {
        return Vec::new();
    };
    let lines = Lines::new(content);
    // serde_json counts columns in bytes, 0 meaning "before the line's first byte".
    let (line, col) = lines.locate(lines.offset(e.line(), e.column()));
    let message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = message.strip_suffix(&suffix).unwrap_or(&message);
    vec![Diagnostic::error(line, Some(col), message)]
}

/// Syntax errors by Ruff's parser; like `ast.parse`, the first one only. Version-dependent
/// constructs are accepted (the grammar is the newest Python's).
fn python_check(content: &str) -> Vec<Diagnostic> {
    let parsed = ruff_python_parser::parse_unchecked_source(content, ruff_python_ast::PySourceType::Python);
    let first = parsed
        .errors()
        .iter()
        .min_by_key(|e| e.location.start())
        .map(|e| (usize::from(e.location.start()), e.error.to_string()));
    // The parser grows its own stack, but dropping the tree recurses once per nesting level
    // (about 200 bytes each in a debug build, at most one level per token): drop it on a stack
    // that fits, so deeply nested input cannot overflow the caller's.
    let needed = 64 * 1024 + 256 * parsed.tokens().len();
    stacker::maybe_grow(needed, needed, move || drop(parsed));
    let Some((offset, message)) = first else {
        return Vec::new();
    };
    let (line, col) = Lines::new(content).locate(offset);
    vec![Diagnostic::error(line, Some(col), message)]
}

/// One YAML document; `first_line` is the line before the text's first (front matter).
fn yaml_check(text: &str, first_line: usize) -> Vec<Diagnostic> {
    let Err(e) = serde_saphyr::from_str::<IgnoredAny>(text) else {
        return Vec::new();
    };
    let message = match e.without_snippet() {
        serde_saphyr::Error::MultipleDocuments { .. } => {
            "more than one YAML document (a second '---'); only a single document is accepted".to_string()
        }
        _ => crate::policy::yaml_message(&e),
    };
    let (line, col) = match e.location().filter(|l| l.line() > 0) {
        Some(l) => (l.line() as usize, Some(l.column() as usize)),
        None => (1, None),
    };
    vec![Diagnostic::error(line + first_line, col, message)]
}

fn toml_check(text: &str, first_line: usize) -> Vec<Diagnostic> {
    let Err(e) = toml::from_str::<toml::Table>(text) else {
        return Vec::new();
    };
    let (line, col) = match e.span() {
        Some(span) => {
            let (line, col) = Lines::new(text).locate(span.start);
            (line, Some(col))
        }
        None => (1, None),
    };
    vec![Diagnostic::error(line + first_line, col, e.message())]
}

/// Markdown: its front matter only (the body is prose).
fn markdown_check(content: &str) -> Vec<Diagnostic> {
    let Some(fm) = front_matter(content) else {
        return Vec::new();
    };
    if fm.closer.is_none() {
        let fence = if fm.toml { "+++" } else { "---" };
        return vec![Diagnostic::error(
            fm.opened_at,
            Some(1),
            format!("front matter opened at line {} is never closed (no '{fence}' line after it)", fm.opened_at),
        )];
    }
    if fm.toml { toml_check(fm.body, fm.opened_at) } else { yaml_check(fm.body, fm.opened_at) }
}

/// The front matter at the top of a Markdown file: `---` (YAML, closed by `---` or `...`) or
/// `+++` (TOML, closed by `+++`) alone on the first non-blank line.
struct FrontMatter<'a> {
    /// The 1-based line of the opening fence.
    opened_at: usize,
    /// The text between the fences (to the end when not closed).
    body: &'a str,
    /// The closing fence (`---`, `...` or `+++`), if any.
    closer: Option<&'a str>,
    toml: bool,
}

fn front_matter(content: &str) -> Option<FrontMatter<'_>> {
    // (1-based line number, byte offset of the line, the line without its end)
    let mut offset = 0;
    let mut lines = content.split_inclusive('\n').enumerate().map(|(i, line)| {
        let at = offset;
        offset += line.len();
        (i + 1, at, line.trim_end())
    });
    let (opened_at, fence_at, fence) = lines.by_ref().find(|(_, _, l)| !l.trim_start().is_empty())?;
    let toml = match fence {
        "---" => false,
        "+++" => true,
        _ => return None,
    };
    let body_start = content[fence_at..].find('\n').map_or(content.len(), |i| fence_at + i + 1);
    let closing = lines.find(|(_, _, l)| if toml { *l == "+++" } else { *l == "---" || *l == "..." });
    let (body_end, closer) = closing.map_or((content.len(), None), |(_, at, l)| (at, Some(l)));
    Some(FrontMatter { opened_at, body: &content[body_start..body_end], closer, toml })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(v: &Validation, severity: Severity) -> Vec<&str> {
        v.diagnostics.iter().filter(|d| d.severity == severity).map(|d| d.message.as_str()).collect()
    }

    fn latex(content: &str) -> Validation {
        validate(content, Some("latex"), None)
    }

    /// Where each diagnostic is: (line, col, severity).
    fn places(v: &Validation) -> Vec<(usize, Option<usize>, &'static str)> {
        v.diagnostics.iter().map(|d| (d.line, d.col, d.severity.as_str())).collect()
    }

    const DOC: &str = "\\documentclass{article}\n\\begin{document}\nHello world.\n\\end{document}\n";

    /// `body` inside a complete document (so no structure warnings), starting at line 3.
    fn in_document(body: &str) -> Validation {
        latex(&format!("\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n"))
    }

    // The reference's test_new_features validate cases.

    #[test]
    fn valid_latex_has_no_findings() {
        let v = latex(DOC);
        assert!(v.valid());
        assert_eq!(v.format, Format::Latex);
        assert!(v.diagnostics.is_empty(), "{:?}", v.diagnostics);
        assert_eq!(v.summary(), "latex: ok");
    }

    #[test]
    fn latex_unmatched_brace_is_an_error() {
        let v = latex("{hello");
        assert!(!v.valid());
        let errors = messages(&v, Severity::Error);
        assert!(errors.iter().any(|m| m.to_lowercase().contains("brace")), "{errors:?}");
        assert_eq!(errors, ["Unclosed braces: 1 still open at end of file (the outermost opened at line 1, column 1)"]);
        assert_eq!(v.summary(), "latex: 1 error(s), 3 warning(s)");
    }

    #[test]
    fn latex_unclosed_environment_is_an_error() {
        let v = latex("\\begin{itemize}\n\\item hello\n");
        assert!(!v.valid());
        assert!(messages(&v, Severity::Error).contains(&"\\begin{itemize} never closed"));
    }

    #[test]
    fn latex_mismatched_environment_is_an_error() {
        let v = latex("\\begin{itemize}\n\\item hello\n\\end{enumerate}\n");
        assert!(!v.valid());
        assert_eq!(messages(&v, Severity::Error), ["\\end{enumerate} mismatches \\begin{itemize} opened at line 1"]);
        assert_eq!(places(&v)[0], (3, Some(1), "error"));
    }

    #[test]
    fn latex_missing_documentclass_is_a_warning() {
        let v = latex("\\begin{document}\nHello\n\\end{document}\n");
        assert!(v.valid());
        assert_eq!(messages(&v, Severity::Warning), ["\\documentclass not found"]);
        assert_eq!(v.summary(), "latex: 1 warning(s)");
    }

    #[test]
    fn latex_being_typo_is_a_warning() {
        let v = latex("\\being{document}\nHello\n");
        let warnings = messages(&v, Severity::Warning);
        assert!(warnings.contains(&"Probable typo: \\being (did you mean \\begin?)"), "{warnings:?}");
    }

    #[test]
    fn latex_nested_braces_are_balanced() {
        let v = latex("{a{b{c}d}e}");
        assert!(v.valid());
        assert!(messages(&v, Severity::Error).is_empty());
    }

    #[test]
    fn json_valid_and_invalid() {
        let v = validate("{\"key\": \"value\"}", Some("json"), None);
        assert!(v.valid());
        assert_eq!(v.format, Format::Json);
        assert!(v.diagnostics.is_empty());
        let v = validate("{\"key\":}", Some("json"), None);
        assert!(!v.valid());
        assert_eq!(places(&v), [(1, Some(8), "error")]);
        assert_eq!(v.diagnostics[0].message, "expected value");
        assert_eq!(v.summary(), "json: 1 error(s)");
    }

    #[test]
    fn python_valid_and_invalid() {
        let v = validate("def foo(): pass", Some("python"), None);
        assert!(v.valid());
        assert_eq!(v.format, Format::Python);
        assert!(v.diagnostics.is_empty());
        let v = validate("def foo(", Some("python"), None);
        assert!(!v.valid());
        assert_eq!(v.diagnostics.len(), 1);
        assert_eq!(v.diagnostics[0].severity, Severity::Error);
    }

    #[test]
    fn format_is_detected_from_content_and_extension() {
        let v = validate("{\"auto\": true}", None, None);
        assert_eq!((v.format, v.valid()), (Format::Json, true));
        let v = validate("def foo(): pass", None, Some("foo.py"));
        assert_eq!((v.format, v.valid()), (Format::Python, true));
        let v = validate("a: 1\n", None, Some("conf/App.YML"));
        assert_eq!(v.format, Format::Yaml);
        let v = validate("a = 1\n", None, Some("Cargo.toml"));
        assert_eq!(v.format, Format::Toml);
        let v = validate("\\section{x}", None, Some("paper.tex"));
        assert_eq!(v.format, Format::Latex);
        // The hint wins over the extension, in any case.
        let v = validate("a = 1\n", Some(" TOML "), Some("x.json"));
        assert_eq!((v.format, v.valid()), (Format::Toml, true));
        // An empty hint is no hint.
        let v = validate("[1]", Some(""), None);
        assert_eq!(v.format, Format::Json);
    }

    #[test]
    fn undetectable_content_is_unknown_and_valid() {
        let v = validate("just plain text", None, None);
        assert_eq!(v.format, Format::Unknown);
        assert!(v.valid());
        assert!(v.diagnostics.is_empty());
        assert!(!v.checked);
        assert_eq!(v.summary(), "unknown: ok");
        assert!(v.notes[0].contains("nothing was checked"), "{:?}", v.notes);
    }

    #[test]
    fn empty_content_never_fails_the_call() {
        for hint in [Some("latex"), Some("json"), Some("python"), Some("yaml"), Some("toml"), Some("markdown"), None] {
            let v = validate("", hint, None);
            let _ = v.to_json();
        }
        assert!(!validate("", Some("json"), None).valid(), "empty JSON is not a document");
        assert_eq!(places(&validate("", Some("json"), None)), [(1, Some(1), "error")]);
        assert!(validate("", Some("python"), None).valid());
        assert!(validate("", Some("yaml"), None).valid());
        assert!(validate("", Some("toml"), None).valid());
    }

    // Reference bug 28.

    #[test]
    fn escaped_braces_and_comments_are_not_counted_reference_bug_28() {
        let v = in_document(
            "A set \\{x \\mid x > 0\\} and 50\\% off.\n% a stray } in a comment {\n% \\begin{itemize} commented out",
        );
        assert!(v.diagnostics.is_empty(), "{:?}", v.diagnostics);
        let v = in_document("A closing brace } on its own.");
        assert_eq!(places(&v), [(3, Some(17), "error")]);
        assert_eq!(v.diagnostics[0].message, "Unexpected closing brace '}'");
    }

    #[test]
    fn verbatim_and_verb_are_skipped_reference_bug_28() {
        let v = in_document(
            "\\begin{verbatim}\nif (x) { y_1 = 2; \\begin{foo}\n\\end{verbatim}\n\
             Inline \\verb|}{_| and \\verb*+a_b+ and \\lstinline[language=C]{a_b[0]}.\n\
             \\begin{comment}\nunbalanced { and \\end{itemize}\n\\end{comment}\n\
             \\begin{lstlisting}[language=Python]\ndef f(a_b): return {\n\\end{lstlisting}",
        );
        assert!(v.diagnostics.is_empty(), "{:?}", v.diagnostics);
        let v = in_document("\\verb|never closed\nmore");
        assert_eq!(messages(&v, Severity::Error), ["\\verb ended by end of line"]);
        // Unclosed, it runs to the end, `\end{document}` included.
        let v = in_document("\\begin{verbatim}\nnever closed");
        assert_eq!(messages(&v, Severity::Error), ["\\begin{verbatim} never closed", "\\begin{document} never closed"]);
    }

    #[test]
    fn underscores_in_keys_files_and_urls_are_fine_reference_bug_28() {
        let v = in_document(
            "See Figure~\\ref{fig_a} in \\S\\ref{sec_x}.\\label{sec_intro}\n\\input{my_file}\n\\include{chap_1}\n\
             \\cite[p.~3]{knuth_84} \\citep{a_b,c_d} \\eqref{eq_1}\n\\includegraphics[width=0.5\\linewidth]{img_1.png}\n\
             \\url{http://example.org/a_b%20c} and \\href{https://x.org/p_q%7E}{the_link text}",
        );
        assert_eq!(messages(&v, Severity::Warning), ["Unescaped '_' outside math mode (use \\_)"]);
        // The only one: `the_link` is text, not a URL.
        assert_eq!(places(&v), [(8, Some(69), "warning")]);
    }

    #[test]
    fn bare_underscores_outside_math_are_warned_at_their_column() {
        let v =
            in_document("a foo_bar and a $x_1$ and\n\\[ y_2 \\] then \\begin{equation} z_3 \\end{equation} baz_qux");
        assert_eq!(places(&v), [(3, Some(6), "warning"), (4, Some(55), "warning")]);
        // Math spanning lines, and $$…$$.
        let v = in_document("$$a_1\n+ b_2$$ and $c\n_d$");
        assert!(v.diagnostics.is_empty(), "{:?}", v.diagnostics);
        // An unclosed `$` ends at the paragraph.
        let v = in_document("$a_1\n\nnext_para");
        assert_eq!(places(&v), [(5, Some(5), "warning")]);
    }

    #[test]
    fn percent_in_a_bare_url_is_a_warning() {
        let v = in_document("See http://example.com/a%20b here");
        assert_eq!(messages(&v, Severity::Warning), ["Unescaped '%' in URL (use \\% in LaTeX)"]);
        assert_eq!(places(&v), [(3, Some(25), "warning")]);
        assert!(in_document("See http://example.com/a\\%20b here.").diagnostics.is_empty());
    }

    #[test]
    fn markdown_front_matter_is_not_yaml_reference_bug_28() {
        let post = "---\ntitle: A post\ntags: [a, b]\n---\n# Heading\n\nProse: with colons, and --- dashes.\n";
        for v in [validate(post, None, None), validate(post, None, Some("posts/2024-01-01.md"))] {
            assert_eq!(v.format, Format::Markdown);
            assert!(v.valid(), "{:?}", v.diagnostics);
            assert_eq!(v.summary(), "markdown: ok");
        }
        // Only the front matter is YAML: its errors are placed in the whole file.
        let v = validate("---\ntitle: ok\ntags: [a, b\n---\nbody\n", None, Some("a.md"));
        assert!(!v.valid());
        assert_eq!(places(&v), [(3, Some(7), "error")]);
        // Without a closing `---` line the sniff keeps the reference's YAML; a .md file says
        // what is wrong.
        assert_eq!(validate("---\na: 1\n", None, None).format, Format::Yaml);
        assert_eq!(validate("---\na: 1\n...\n", None, None).format, Format::Yaml);
        let v = validate("---\ntitle: x\nbody\n", None, Some("a.md"));
        assert_eq!(
            messages(&v, Severity::Error),
            ["front matter opened at line 1 is never closed (no '---' line after it)"]
        );
        // TOML front matter, and none at all.
        assert!(validate("+++\ntitle = \"x\"\n+++\nbody\n", Some("markdown"), None).valid());
        let v = validate("+++\ntitle = \n+++\nbody\n", Some("md"), None);
        assert_eq!(places(&v), [(2, Some(9), "error")]);
        assert!(validate("# Just prose_with_underscores\n", None, Some("README.md")).valid());
        // An explicit YAML hint still means one document.
        let v = validate("---\na: 1\n---\nb: 2\n", Some("yaml"), None);
        assert!(v.diagnostics[0].message.contains("only a single document"), "{:?}", v.diagnostics);
        assert!(v.diagnostics[0].line >= 3, "{:?}", v.diagnostics);
    }

    #[test]
    fn unknown_formats_are_reported_not_passed_silently_reference_bug_28() {
        let v = validate("<a/>", Some("XML"), Some("a.json"));
        assert_eq!(v.format, Format::Unknown);
        assert!(v.valid() && !v.checked);
        assert_eq!(v.summary(), "unknown: ok");
        assert!(v.notes[0].contains("\"xml\""), "{:?}", v.notes);
        let out = v.to_json();
        assert_eq!(out["checked"], false);
        assert_eq!(out["warnings"].as_array().unwrap().len(), 1);
    }

    // TOML, YAML, JSON and Python positions.

    #[test]
    fn toml_errors_have_line_and_column() {
        assert!(validate("[package]\nname = \"x\"\n", Some("toml"), None).valid());
        let v = validate("a = 1\nb = \n", Some("toml"), None);
        assert_eq!(places(&v), [(2, Some(5), "error")]);
        let v = validate("a = 1\na = 2\n", Some("toml"), None);
        assert_eq!(places(&v), [(2, Some(1), "error")]);
        assert_eq!(v.diagnostics[0].message, "duplicate key");
        assert_eq!(v.summary(), "toml: 1 error(s)");
    }

    #[test]
    fn json_is_strict() {
        for bad in ["[\"\\q\"]", "[\"a\tb\"]", "[1,]", "{\"a\": NaN}", "[01]", "[1] [2]", "{'a': 1}"] {
            assert!(!validate(bad, Some("json"), None).valid(), "{bad}");
        }
        assert!(validate("[\"\\u00e9\", 1e5, -0.5, true, null]\n", Some("json"), None).valid());
    }

    #[test]
    fn yaml_errors_have_line_and_column() {
        assert!(validate("a: 1\nb: [1, 2]\n", Some("yaml"), None).valid());
        let v = validate("a: 1\nb: [1, 2\n", Some("yaml"), None);
        assert_eq!(places(&v), [(2, Some(4), "error")]);
        assert_eq!(v.diagnostics[0].message, "unclosed bracket '['");
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let v = validate("{\"é\": x}", Some("json"), None);
        assert_eq!(places(&v), [(1, Some(7), "error")]);
        let v = validate("x = 'é' )\n", Some("python"), None);
        assert_eq!(places(&v), [(1, Some(9), "error")]);
        let v = validate("s = \"ééé\" b\n", Some("toml"), None);
        assert_eq!(places(&v), [(1, Some(11), "error")]);
    }

    #[test]
    fn python_errors_have_line_and_column_and_modern_syntax_is_valid() {
        let v = validate("x = 1\ndef f(:\n    pass\n", Some("python"), None);
        assert_eq!(places(&v), [(2, Some(7), "error")]);
        let v = validate("if True:\npass\n", Some("python"), None);
        assert_eq!(v.diagnostics[0].line, 2);
        let modern = "x = f\"{d[\"a\"]}\"\ntype Alias = int\ndef g[T](x: T) -> T: ...\n\
                      match x:\n    case 1:\n        pass\ntry:\n    pass\nexcept* E:\n    pass\n";
        let v = validate(modern, None, Some("m.py"));
        assert!(v.valid(), "{:?}", v.diagnostics);
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        // The size of a tokio blocking thread's stack.
        let run = std::thread::Builder::new().stack_size(2 << 20).spawn(|| {
            let n = 100_000;
            for (hint, text) in [
                ("python", format!("x = {}", "[".repeat(n))),
                ("python", format!("x = {}{}", "[".repeat(n), "]".repeat(n))),
                ("python", format!("x = {}1", "-".repeat(n))),
                ("json", "[".repeat(n)),
                ("yaml", "[".repeat(n)),
                ("toml", format!("a = {}", "[".repeat(n))),
                ("latex", "{".repeat(n)),
                ("markdown", format!("---\na: {}\n---\n", "[".repeat(n))),
            ] {
                let v = validate(&text, Some(hint), None);
                assert!(!v.diagnostics.is_empty() || hint == "python", "{hint}");
            }
        });
        run.unwrap().join().expect("no stack overflow");
    }

    #[test]
    fn long_diagnostic_lists_are_capped_but_counted() {
        let v = in_document(&"a_b ".repeat(500));
        assert_eq!(v.warnings(), 500);
        assert_eq!(v.summary(), "latex: 500 warning(s)");
        let out = v.to_json();
        assert_eq!(out["errors"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(out["omitted"], 500 - MAX_LISTED);
        assert!(out["warnings"][0].as_str().unwrap().contains("300 more"));
    }

    #[test]
    fn output_has_the_reference_fields() {
        let out = validate("{hello", Some("latex"), None).to_json();
        assert_eq!(out["valid"], false);
        assert_eq!(out["format"], "latex");
        assert_eq!(out["summary"], "latex: 1 error(s), 3 warning(s)");
        let first = &out["errors"][0];
        assert_eq!(first["severity"], "error");
        assert_eq!(first["line"], 1);
        assert!(first["col"].is_null());
        assert_eq!(
            out["errors"][1],
            json!({"line": 1, "col": null, "message": "\\documentclass not found", "severity": "warning"})
        );
    }
}
