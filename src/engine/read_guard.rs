//! The read guard (policy `read_guard:`): what a process of an agent run reads of a file the
//! policy keeps out of an agent's reach (`.env*`, `*.pem`, …), and what everyone else reads.
//!
//! The decision ([`Engine::read_view`]) is made once per open, by the mount:
//!
//! - **Who is guarded**: a process of an agent run, as `journal::session` names one (rules 1
//!   and 2: `RWFS_SESSION` in its environment, which `rwfs run` sets, or an ancestor whose
//!   process name is one of `session_hosts`: `claude`, `codex`, `aider`, …). A person's shell,
//!   an editor, a build started outside any agent read the real bytes.
//! - **Who is exempt**: a reader with `RWFS_READ_REAL=1` in the environment it was started with
//!   (a person runs the program under test that way), or whose program the rule names in
//!   `exempt_programs` (its process name, or the file name of its `argv[0]`).
//! - **What a guarded reader gets**: `refuse` is `EACCES` (and the mount's notice on its
//!   stderr); `redact` is a view in which every value the scanner finds (credentials and every
//!   other finding: a read guard errs on hiding), and the value of every `NAME=value` /
//!   `NAME: value` line whose name says credential (a weak `DB_PASSWORD=hunter2` the scanner
//!   lets pass), is overwritten by a placeholder **of the same
//!   length** naming the variable it was assigned to (`[rwfs read guard: API_KEY***]`). The
//!   view has the real file's length, so `st_size`, offsets and line numbers agree for every
//!   reader, and nothing else of the file changes.
//!
//! Invariants the mount keeps (vfs/data.rs): a redacted view is computed at open from the
//! file's committed content and served from memory with direct I/O, so it never enters the page
//! cache that real readers share, and an open of a guarded path never keeps cached pages; a
//! guarded open for reading and writing is refused (a redacted view written back would replace
//! the secrets with placeholders), a write-only open (`>>`) works as for anyone. A guarded
//! open on a pass-through path gets the redacted handle too, never the kernel's passthrough.
//!
//! What this does not do: stop a determined process of the agent run from reaching the bytes
//! another way (the backing directory when the mount is not over it,
//! another process's memory). It keeps secrets out of an agent's read tool, `cat`, `grep` and
//! the transcript they feed, which is how they leak in practice.

use crate::error::{Error, Reason, Result};
use crate::policy::ReadAction;

use super::Engine;

/// The environment variable that lets a reader of an agent run read the real bytes.
pub const READ_REAL_ENV: &str = "RWFS_READ_REAL";

/// Views larger than this are refused rather than built in memory.
pub const MAX_REDACTED_BYTES: u64 = 16 << 20;

/// What a reader sees of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadView {
    /// The file's bytes.
    Real,
    /// A view with its secret values replaced, under the named rule.
    Redacted { rule: String },
    /// Nothing: the open is refused, under the named rule.
    Refused { rule: String },
}

impl Engine {
    /// What process `pid` (its name `comm`) may read of `path` (see the module docs).
    pub fn read_view(&self, path: &str, pid: u32, comm: Option<&str>) -> ReadView {
        let Some(rule) = self.policy().read_guard(path) else {
            return ReadView::Real;
        };
        if self.agent_session(pid).is_none() || exempt(pid, comm, &rule.exempt_programs) {
            return ReadView::Real;
        }
        let rule_name = rule.name.clone();
        match rule.action {
            ReadAction::Redact => ReadView::Redacted { rule: rule_name },
            ReadAction::Refuse => ReadView::Refused { rule: rule_name },
        }
    }

    /// Does a `read_guard:` rule name `path` (then no open of it keeps cached pages)?
    pub fn is_read_guarded(&self, path: &str) -> bool {
        self.policy().read_guard(path).is_some()
    }

    /// The redacted view of `path`'s committed content under `rule`; a file over
    /// [`MAX_REDACTED_BYTES`] is refused instead ([`Reason::ReadGuarded`]).
    pub fn redacted_view(&self, path: &str, rule: &str) -> Result<Vec<u8>> {
        let file = self.files().open(path)?;
        let size = self.files().stat(&file)?.size;
        if size > MAX_REDACTED_BYTES {
            let rule = format!("{rule}; a redacted view over {MAX_REDACTED_BYTES} bytes is refused");
            return Err(Error::from(Reason::ReadGuarded { rule, redacted: false }).at(path));
        }
        let bytes = crate::store::read_all(self.core.ws.disk(), &file).map_err(|e| e.at(path))?;
        Ok(self.redacted(path, &bytes))
    }

    /// `content` of `path` with every finding's value overwritten by a same-length placeholder.
    pub fn redacted(&self, path: &str, content: &[u8]) -> Vec<u8> {
        let mut out = content.to_vec();
        // Nothing but the lines is shown rather than everything: content too large or binary to
        // scan, or so many findings of one rule that the scanner stopped listing them.
        let hidden = |mut out: Vec<u8>| {
            out.iter_mut().filter(|b| **b != b'\n').for_each(|b| *b = b'*');
            out
        };
        let Some(judgement) = self.core.gate.judge(path, content) else {
            return hidden(out);
        };
        let mut per_rule: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for finding in &judgement.report.findings {
            *per_rule.entry(finding.rule.as_str()).or_default() += 1;
        }
        if per_rule.values().any(|&n| n >= crate::score::MAX_FINDINGS_PER_RULE) {
            return hidden(out);
        }
        for finding in &judgement.report.findings {
            let span = finding.span.clone();
            if span.end > out.len() || span.is_empty() {
                continue;
            }
            let name = variable_before(content, span.start).unwrap_or(&finding.rule);
            out[span.clone()].copy_from_slice(&placeholder(name, span.len()));
        }
        // A value the scanner lets pass (short, or not random enough to block: a weak password)
        // is still the value of a credential when its name says so.
        for (name, span) in credential_assignments(content) {
            out[span.clone()].copy_from_slice(&placeholder(name, span.len()));
        }
        out
    }
}

/// Is the reader exempt: `RWFS_READ_REAL=1` in its environment, or its program named?
fn exempt(pid: u32, comm: Option<&str>, programs: &[String]) -> bool {
    if crate::process::env_var(pid, READ_REAL_ENV).is_some_and(|v| v == b"1") {
        return true;
    }
    if programs.is_empty() {
        return false;
    }
    let comm = comm.map(str::to_string).or_else(|| crate::process::comm(pid));
    let argv0 = crate::process::args(pid)
        .and_then(|args| args.into_iter().next())
        .map(|a| a.rsplit('/').next().unwrap_or_default().to_string());
    programs.iter().any(|p| Some(p) == comm.as_ref() || Some(p) == argv0.as_ref())
}

/// The name a value at `at` is assigned to on its line (`API_KEY=…`, `"token": "…"`,
/// `password: …`), if there is one.
fn variable_before(content: &[u8], at: usize) -> Option<&str> {
    let line_start = content[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let before = &content[line_start..at];
    let is_name = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
    let end = before.iter().rposition(|&b| is_name(b))? + 1;
    // Only assignment punctuation and quotes between the name and the value.
    if !before[end..].iter().all(|b| matches!(b, b'=' | b':' | b' ' | b'\t' | b'"' | b'\'' | b'>')) {
        return None;
    }
    let start = before[..end].iter().rposition(|&b| !is_name(b)).map_or(0, |i| i + 1);
    std::str::from_utf8(&before[start..end]).ok().filter(|s| !s.is_empty())
}

/// Every `NAME=value` / `NAME: value` line (`export` allowed; quotes around the value left
/// out) whose name names a credential (`DB_PASSWORD`, `apiToken`): the name and the value's span.
fn credential_assignments(content: &[u8]) -> Vec<(&str, std::ops::Range<usize>)> {
    let mut found = Vec::new();
    let mut start = 0;
    for line in content.split(|&b| b == b'\n') {
        let end = start + line.len();
        let body = line.strip_prefix(b"export ").unwrap_or(line);
        let offset = start + (line.len() - body.len());
        let is_name = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
        let lead = body.iter().take_while(|b| **b == b' ' || **b == b'\t').count();
        let name_len = body[lead..].iter().take_while(|b| is_name(b)).count();
        let rest = &body[lead + name_len..];
        let sep = rest.iter().take_while(|b| matches!(b, b' ' | b'\t' | b'=' | b':')).count();
        if let Ok(name) = std::str::from_utf8(&body[lead..lead + name_len])
            && name_len > 0
            && rest[..sep].iter().filter(|b| matches!(b, b'=' | b':')).count() == 1
            && crate::score::service::names_credential(name)
        {
            let value = &rest[sep..];
            let value = value.strip_suffix(b"\r").unwrap_or(value);
            let trimmed = value.trim_ascii_end();
            let quoted =
                trimmed.len() >= 2 && matches!(trimmed[0], b'"' | b'\'') && trimmed[trimmed.len() - 1] == trimmed[0];
            let from = offset + lead + name_len + sep + usize::from(quoted);
            let to = from + trimmed.len() - 2 * usize::from(quoted);
            if to > from && !trimmed.starts_with(b"[rwfs") {
                found.push((name, from..to));
            }
        }
        start = end + 1;
    }
    found
}

/// A placeholder of exactly `len` bytes naming `name`: the longest of
/// `[rwfs read guard: NAME]`, `[rwfs:NAME]`, `[NAME]` that fits, padded with `*` before its
/// closing bracket; `*` alone when none fits.
fn placeholder(name: &str, len: usize) -> Vec<u8> {
    for shape in [format!("[rwfs read guard: {name}"), format!("[rwfs:{name}"), format!("[{name}")] {
        if shape.len() < len {
            let mut out = shape.into_bytes();
            out.resize(len - 1, b'*');
            out.push(b']');
            return out;
        }
    }
    vec![b'*'; len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_keep_the_length_and_name_the_variable() {
        for len in [1, 3, 8, 20, 40, 64] {
            assert_eq!(placeholder("AWS_SECRET_ACCESS_KEY", len).len(), len);
        }
        assert_eq!(placeholder("API_KEY", 40), b"[rwfs read guard: API_KEY**************]");
        assert_eq!(placeholder("API_KEY", 12), b"[API_KEY***]");
        assert_eq!(placeholder("X", 2), b"**");
    }

    #[test]
    fn values_named_as_credentials_are_found_even_when_weak() {
        let text = b"DB_PASSWORD=hunter2\nexport API_TOKEN='abc'\nDEBUG=true\nsecret: s3\nPASSWORD=\nurl==x\n";
        let found: Vec<(&str, &[u8])> = credential_assignments(text).into_iter().map(|(n, r)| (n, &text[r])).collect();
        assert_eq!(found, [("DB_PASSWORD", &b"hunter2"[..]), ("API_TOKEN", b"abc"), ("secret", b"s3")]);
    }

    #[test]
    fn the_variable_is_the_name_a_value_is_assigned_to() {
        let text = b"A=1\nexport API_KEY=\"abc\"\n  \"token\": \"xyz\"\nfoo(bar) qqq\n";
        let at = |needle: &str| text.windows(needle.len()).position(|w| w == needle.as_bytes()).unwrap();
        assert_eq!(variable_before(text, at("abc")), Some("API_KEY"));
        assert_eq!(variable_before(text, at("xyz")), Some("token"));
        assert_eq!(variable_before(text, at("qqq")), None);
    }
}
