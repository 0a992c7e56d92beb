//! Which workspace a command means when none is named (`-w`, `$RW_WORKSPACE`): found upward
//! from the working directory, as git and jj find their root — the nearest directory with a
//! `.resilient_write/`, else the root of the git repository the directory is in, else the
//! directory itself. A system directory or the home directory is never chosen by discovery
//! (`--allow-unsafe-root` with `-w` names one). So `rwfs log` in `app/` reads its parent's
//! journal, and `rwfs run` there mounts the workspace root, not `app/` as a second workspace
//! with its own journal. It does not translate PATH arguments: they stay relative to the root.

use std::path::{Path, PathBuf};

use super::errln;
use crate::durable::STATE_DIR;

/// The workspace root for a command run in `cwd`, and whether it was found above `cwd`.
pub fn workspace_root(cwd: &Path) -> (PathBuf, bool) {
    let usable = |dir: &Path| !crate::history::is_unsafe_root(dir);
    let found = cwd
        .ancestors()
        .find(|dir| dir.join(STATE_DIR).is_dir() && usable(dir))
        .or_else(|| cwd.ancestors().find(|dir| dir.join(".git").exists() && usable(dir)));
    match found {
        Some(root) if root != cwd => (root.to_path_buf(), true),
        _ => (cwd.to_path_buf(), false),
    }
}

/// The root of the workspace the command means: `named` when given, else discovered from the
/// working directory; says on stderr when it is above the working directory (and, for a
/// command taking workspace paths, that they are relative to that root, not to here).
pub fn chosen(named: Option<PathBuf>, takes_paths: bool) -> PathBuf {
    if let Some(named) = named {
        return named;
    }
    let Ok(cwd) = std::env::current_dir() else { return PathBuf::from(".") };
    let (root, above) = workspace_root(&cwd);
    if above {
        let paths = if takes_paths { "; PATH arguments are relative to it" } else { "" };
        errln!("rwfs: workspace {} (found above this directory{paths}; -w DIR names another)", root.display());
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(base: &Path, rel: &[&str]) {
        for r in rel {
            std::fs::create_dir_all(base.join(r)).unwrap();
        }
    }

    #[test]
    fn the_nearest_state_directory_wins_then_the_repository_root_then_the_directory_itself() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        dirs(&base, &["repo/.git", "repo/app/src", "repo/lib/.resilient_write", "repo/lib/deep", "loose/sub"]);
        // No workspace yet: the repository's root, as git finds it.
        assert_eq!(workspace_root(&base.join("repo/app/src")), (base.join("repo"), true));
        assert_eq!(workspace_root(&base.join("repo")), (base.join("repo"), false));
        // A state directory nearer than the repository's root is the workspace.
        assert_eq!(workspace_root(&base.join("repo/lib/deep")), (base.join("repo/lib"), true));
        // Once the repository's root holds one, it wins over the repository rule.
        dirs(&base, &["repo/.resilient_write"]);
        assert_eq!(workspace_root(&base.join("repo/app")), (base.join("repo"), true));
        // Neither: the directory itself.
        assert_eq!(workspace_root(&base.join("loose/sub")), (base.join("loose/sub"), false));
    }
}
