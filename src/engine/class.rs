//! Which class a path is in: the one place that decides whether the gate applies to a path,
//! whether the mount writes it in place, and what the mount may do inside `.resilient_write/`
//! (docs/architecture.md, Invariants).
//!
//! The classes come from the policy's `pass_through` globs and the extra globs of
//! [`Options::pass_through`](super::Options::pass_through) (the mount's `--pass-through`), put
//! into one glob set when the engine opens, and from the state directory's table
//! ([`crate::durable::layout`]). The state directory comes first: no glob makes a path inside
//! it writable.
//!
//! The decision is lexical (no symlink is followed, nothing is read): it is asked of the paths
//! the mount holds, before every open, create and namespace change. Writes that do not come
//! through the mount are refused inside the state directory whatever the class, by resolution
//! ([`Scope::Workspace`](crate::durable::Scope)).

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::durable::layout::{Visibility, lexical, state_visibility};
use crate::error::{Reason, Result};
use crate::policy::Policy;

use super::Engine;

/// What the mount and the commit protocol do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathClass {
    /// Through the gate: drafts, a scan at every commit, a journal row, old versions kept.
    Gated,
    /// Written in place by the mount: no draft, no scan, no row (build outputs, databases,
    /// logs, `.git/`).
    PassThrough,
    /// Inside `.resilient_write/`, readable through the mount, never changed through it.
    StateReadOnly,
    /// Inside `.resilient_write/`, never shown by the mount (not listed, not found, not opened).
    StateHidden,
}

impl PathClass {
    /// Written in place by the mount?
    pub fn in_place(self) -> bool {
        self == PathClass::PassThrough
    }

    /// Inside the state directory (never changed through the mount)?
    pub fn is_state(self) -> bool {
        matches!(self, PathClass::StateReadOnly | PathClass::StateHidden)
    }

    /// May the mount open it?
    pub fn readable(self) -> bool {
        self != PathClass::StateHidden
    }
}

/// The classifier an engine builds when it opens.
pub(crate) struct Classes {
    pass_through: GlobSet,
}

impl Classes {
    /// The policy's `pass_through` globs and `extra` ones.
    pub(crate) fn new(policy: &Policy, extra: &[String]) -> Result<Classes> {
        let mut globs = GlobSetBuilder::new();
        for pattern in policy.pass_through_patterns().iter().chain(extra) {
            let glob = Glob::new(pattern).map_err(|_| Reason::InvalidArgument { what: "pass-through glob" })?;
            globs.add(glob);
        }
        let pass_through = globs.build().map_err(|_| Reason::InvalidArgument { what: "pass-through glob" })?;
        Ok(Classes { pass_through })
    }

    pub(crate) fn class(&self, path: &str) -> PathClass {
        let path = lexical(path);
        if let Some(class) = state_class(&path) {
            return class;
        }
        if self.pass_through.is_match(path.as_ref()) { PathClass::PassThrough } else { PathClass::Gated }
    }
}

/// The class of a path inside the state directory (`None` outside it): the part of
/// [`Engine::class`] that needs no policy, read from the layout table
/// ([`state_visibility`]), which the read side (`history`) asks too, so that it answers for a
/// path as the mount does.
fn state_class(path: &str) -> Option<PathClass> {
    Some(match state_visibility(path)? {
        Visibility::ReadOnly => PathClass::StateReadOnly,
        Visibility::Hidden => PathClass::StateHidden,
    })
}

impl Engine {
    /// The class of the workspace path `path` (`""` is the root): see [`PathClass`].
    pub fn class(&self, path: &str) -> PathClass {
        self.core.classes.class(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::STATE_DIR;
    use crate::engine::Options;

    #[test]
    fn every_path_has_one_class() {
        let ws = tempfile::tempdir().unwrap();
        let options = Options { pass_through: vec!["build/**".into(), "*.tmp".into()], ..Options::default() };
        let engine = Engine::open(ws.path(), &options).unwrap();
        let hex = "ab".repeat(32);
        let cases: &[(&str, PathClass)] = &[
            ("", PathClass::Gated),
            ("src/main.rs", PathClass::Gated),
            ("README.md", PathClass::Gated),
            // The policy's default globs.
            ("target/x", PathClass::PassThrough),
            ("target/debug/deps/a.rlib", PathClass::PassThrough),
            (".git/config", PathClass::PassThrough),
            (".git/objects/ab/cd", PathClass::PassThrough),
            ("node_modules/x/index.js", PathClass::PassThrough),
            ("a/b/__pycache__/m.pyc", PathClass::PassThrough),
            ("build.log", PathClass::PassThrough),
            ("logs/app.log", PathClass::PassThrough),
            ("app.db", PathClass::PassThrough),
            ("data/app.sqlite3", PathClass::PassThrough),
            // ... at any depth: a nested repository, a sub-crate's build, a package's modules.
            ("a/.git/x", PathClass::PassThrough),
            ("vendor/lib/.git/objects/ab/cd", PathClass::PassThrough),
            ("crates/core/target/debug/x", PathClass::PassThrough),
            ("web/app/node_modules/m/i.js", PathClass::PassThrough),
            ("py/.venv/bin/python", PathClass::PassThrough),
            // ... but only as whole names of a directory.
            ("src/targets/x", PathClass::Gated),
            ("my.git/x", PathClass::Gated),
            ("src/target.rs", PathClass::Gated),
            (".gitignore", PathClass::Gated),
            ("a/.github/workflows/ci.yml", PathClass::Gated),
            // The mount's extra globs.
            ("build/out.o", PathClass::PassThrough),
            ("notes.tmp", PathClass::PassThrough),
            ("buildx/out.o", PathClass::Gated),
            // The state directory, by its table.
            (".resilient_write", PathClass::StateReadOnly),
            (".resilient_write/journal.jsonl", PathClass::StateReadOnly),
            (".resilient_write/lock", PathClass::StateReadOnly),
            (".resilient_write/policy.yaml", PathClass::StateReadOnly),
            (".resilient_write/rwfs.sock", PathClass::StateReadOnly),
            (".resilient_write/rejections/latest.json", PathClass::StateReadOnly),
            (".resilient_write/chunks/s1/part-001.txt", PathClass::StateReadOnly),
            (".resilient_write/checkpoints/c.json", PathClass::StateReadOnly),
            (".resilient_write/handoffs/x.md", PathClass::StateReadOnly),
            (".resilient_write/objects", PathClass::StateHidden),
            (".resilient_write/objects/ab/cd", PathClass::StateHidden),
            (&format!(".resilient_write/objects/ab/{hex}"), PathClass::StateHidden),
            (".resilient_write/drafts/x", PathClass::StateHidden),
            (".resilient_write/scratch/x", PathClass::StateHidden),
            (".resilient_write/scratch/index.jsonl", PathClass::StateHidden),
            (".resilient_write/keys/x", PathClass::StateHidden),
            (".resilient_write/keys/cursor.key", PathClass::StateHidden),
            (".resilient_write/mcp-http.token", PathClass::StateHidden),
            (".resilient_write/index/x", PathClass::StateHidden),
            // Unknown names are hidden (a leftover temp of the old token writer, say).
            (".resilient_write/mcp-http.token.tmp", PathClass::StateHidden),
            (".resilient_write/new", PathClass::StateHidden),
            // No glob reaches inside the state directory.
            (".resilient_write/x.log", PathClass::StateHidden),
            (".resilient_write/build.db", PathClass::StateHidden),
            // Other spellings of the same paths.
            ("./.resilient_write/keys/x", PathClass::StateHidden),
            ("a/../.resilient_write//mcp-http.token", PathClass::StateHidden),
            (".resilient_write/./journal.jsonl", PathClass::StateReadOnly),
            ("./target/x", PathClass::PassThrough),
            // Names that only look like the state directory.
            (".resilient_write_x/keys/x", PathClass::Gated),
            ("a/.resilient_write/keys/x", PathClass::Gated),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter(|(path, class)| engine.class(path) != *class)
            .map(|(path, class)| format!("{path}: {:?}, expected {class:?}", engine.class(path)))
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn the_policy_globs_replace_the_defaults() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join(STATE_DIR)).unwrap();
        std::fs::write(ws.path().join(STATE_DIR).join("policy.yaml"), "pass_through: [\"out/**\"]\n").unwrap();
        let engine = Engine::open(ws.path(), &Options::default()).unwrap();
        assert_eq!(engine.class("out/a"), PathClass::PassThrough);
        assert_eq!(engine.class("target/x"), PathClass::Gated);
        assert_eq!(engine.class(".git/config"), PathClass::Gated);
    }

    #[test]
    fn a_bad_extra_glob_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        let options = Options { pass_through: vec!["a[".into()], ..Options::default() };
        let err = Engine::open(ws.path(), &options).unwrap_err();
        assert_eq!(*err.reason(), Reason::InvalidArgument { what: "pass-through glob" });
    }

    #[test]
    fn lexical_forms() {
        for (input, expect) in
            [("a/b", "a/b"), ("", ""), ("./a//b/", "a/b"), ("/a/b", "a/b"), ("a/../b", "b"), ("../../a", "a")]
        {
            assert_eq!(lexical(input), expect, "{input}");
        }
    }
}
