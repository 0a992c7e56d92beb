//! Path resolution beneath the workspace root.
//!
//! Callers hand rwfs arbitrary strings (agents, scripts, the kernel). This module is the only
//! way to turn one into something the engine can act on: a [`Target`], holding an open
//! descriptor of the parent directory, the final name, and the canonical [`WorkspacePath`].
//!
//! Invariants:
//! - A [`WorkspacePath`] is canonical (no `.`, `..`, empty or symlinked components), relative,
//!   valid UTF-8, at most 4095 bytes with components of at most 255 bytes. Only this module
//!   constructs one.
//! - Directories are opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to
//!   the root descriptor, so `..` chains, absolute symlinks and outward symlinks fail with a typed
//!   error rather than being followed; the final component is examined with `lstat` and a symlink
//!   there is followed by resolving its target again from the root (at most 40 hops), so a write
//!   through an in-tree symlink lands on the file it names, as with a shell redirection.
//! - Everything after resolution uses the parent descriptor and a single name, so a symlink
//!   swapped into the path afterwards cannot redirect the operation.
//! - With [`Scope::Workspace`], nothing inside `.resilient_write/` is reachable, by any spelling,
//!   and no directory is created inside it.
//! - A refused path creates nothing: before the first missing directory is made, the rest of the
//!   path (directories about to be created, so `..` in it is exact) is checked for an escape.

use std::fmt;
use std::io;

use nix::libc;

use super::disk::Disk;
use super::layout::STATE_DIR;
use super::types::{Dir, FileKind, Stat};
use crate::error::{Error, Reason, Result};

/// Longest path accepted, in bytes (Linux `PATH_MAX` includes the terminating NUL).
pub const MAX_PATH: usize = 4095;
/// Longest component accepted, in bytes.
pub const MAX_NAME: usize = 255;
const MAX_SYMLINK_HOPS: usize = 40;

/// A canonical path relative to the workspace root (see the module invariants).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkspacePath(String);

impl WorkspacePath {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Is this inside `.resilient_write/`?
    pub fn is_state(&self) -> bool {
        first_component(&self.0) == STATE_DIR
    }

    /// The parent directory part (`""` for a top-level name).
    pub fn parent(&self) -> &str {
        self.0.rsplit_once('/').map_or("", |(p, _)| p)
    }
}

impl fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for WorkspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl AsRef<str> for WorkspacePath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// May the path lie inside `.resilient_write/`?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Agent-facing paths: the state directory is refused.
    Workspace,
    /// The engine's own files (chunks, scratch, checkpoints).
    State,
}

/// A resolved file location.
#[derive(Debug)]
pub struct Target {
    pub parent: Dir,
    pub name: String,
    pub path: WorkspacePath,
    /// `None` when nothing exists at the name; otherwise a regular file (anything else is
    /// refused during resolution).
    pub stat: Option<Stat>,
}

/// Refusals that need no disk access.
pub fn check_lexical(input: &str) -> Result<()> {
    if input.is_empty() {
        return Err(Reason::EmptyPath.into());
    }
    if input.contains('\0') {
        return Err(Reason::NulByte.into());
    }
    if input.starts_with('/') {
        return Err(Reason::AbsolutePath.into());
    }
    if input.len() > MAX_PATH {
        return Err(Reason::PathTooLong.into());
    }
    if input.split('/').any(|c| c.len() > MAX_NAME) {
        return Err(Reason::NameTooLong.into());
    }
    Ok(())
}

/// Resolve `input` to a file location beneath `root`.
///
/// With `create_parents`, missing directories are created (and made durable: the parent of each
/// new directory is synced).
pub fn resolve(disk: &dyn Disk, root: &Dir, input: &str, scope: Scope, create_parents: bool) -> Result<Target> {
    resolve_inner(disk, root, input, scope, create_parents).map_err(|e| e.at(input))
}

fn resolve_inner(disk: &dyn Disk, root: &Dir, input: &str, scope: Scope, create_parents: bool) -> Result<Target> {
    check_lexical(input)?;
    let mut rel = input.to_string();
    for _ in 0..=MAX_SYMLINK_HOPS {
        let (parent_rel, name) = split_last(&rel)?;
        // Refuse the obvious spelling before touching the disk (and before creating anything).
        // (Lexical `..` is only a hint here: after a symlink it may differ from the kernel's.)
        if scope == Scope::Workspace && normalize_lexically(&rel).is_ok_and(|n| first_component(&n) == STATE_DIR) {
            return Err(Reason::StateDir.into());
        }
        let parent = open_parent(disk, root, parent_rel, scope, create_parents)?;
        let path = canonical(&parent.join(name))?;
        if scope == Scope::Workspace && path.is_state() {
            return Err(Reason::StateDir.into());
        }
        let stat = disk.stat(&parent, name).map_err(|e| Error::io("stat target", e))?;
        match stat.map(|s| s.kind) {
            None | Some(FileKind::File) => {
                let name = name.to_string();
                return Ok(Target { parent, name, path, stat });
            }
            Some(FileKind::Dir) => return Err(Reason::IsDirectory.into()),
            Some(FileKind::Fifo | FileKind::Socket | FileKind::CharDevice | FileKind::BlockDevice) => {
                return Err(Reason::NotRegularFile.into());
            }
            Some(FileKind::Symlink) => {
                let link = disk.read_link(&parent, name).map_err(|e| Error::io("readlink", e))?;
                let link = link.into_string().map_err(|_| Reason::NotUtf8)?;
                if link.starts_with('/') {
                    return Err(Reason::EscapesWorkspace.into());
                }
                rel = if parent.rel().is_empty() { link } else { format!("{}/{link}", parent.rel()) };
                check_lexical(&rel)?;
            }
        }
    }
    Err(Reason::TooManySymlinks.into())
}

/// The canonical path a row for `input` would carry, even when the file (or its directory) no
/// longer exists: resolved on disk where possible, otherwise normalized lexically.
pub fn lookup(disk: &dyn Disk, root: &Dir, input: &str, scope: Scope) -> Result<WorkspacePath> {
    match resolve(disk, root, input, scope, false) {
        Ok(target) => Ok(target.path),
        Err(e) if *e.reason() == Reason::NotFound => {
            let path = canonical(&normalize_lexically(input)?).map_err(|e| e.at(input))?;
            if scope == Scope::Workspace && path.is_state() {
                return Err(Error::from(Reason::StateDir).at(input));
            }
            Ok(path)
        }
        Err(e) => Err(e),
    }
}

/// The entry `input` names, without following a symlink in its last component: its open
/// directory and its name. `""` names the root itself (`(root, ".")`). Used where the caller
/// acts on the entry, whatever its kind (the mount: `lstat`, `unlink`, `chmod`, ...).
pub fn locate(disk: &dyn Disk, root: &Dir, input: &str, scope: Scope) -> Result<(Dir, String)> {
    if input.is_empty() {
        return Ok((root.try_clone().map_err(|e| Error::io("dup root", e))?, ".".to_string()));
    }
    let located = (|| {
        check_lexical(input)?;
        let (parent_rel, name) = split_last(input)?;
        let normal = normalize_lexically(input)?;
        if scope == Scope::Workspace && first_component(&normal) == STATE_DIR {
            return Err(Reason::StateDir.into());
        }
        let parent = open_parent(disk, root, parent_rel, scope, false)?;
        if scope == Scope::Workspace && canonical(&parent.join(name))?.is_state() {
            return Err(Reason::StateDir.into());
        }
        Ok((parent, name.to_string()))
    })();
    located.map_err(|e: Error| e.at(input))
}

/// Open the directory `rel` beneath `root`, creating missing components when asked.
pub fn open_parent(disk: &dyn Disk, root: &Dir, rel: &str, scope: Scope, create: bool) -> Result<Dir> {
    match disk.open_dir(root, rel) {
        Ok(dir) => check_scope(dir, scope),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => walk_dirs(disk, root, rel, scope, create),
        Err(e) => Err(resolve_error(e)),
    }
}

/// `mkdir -p` beneath `root`: every directory created is made durable by syncing its parent.
pub fn ensure_dir(disk: &dyn Disk, root: &Dir, rel: &str, scope: Scope) -> Result<Dir> {
    walk_dirs(disk, root, rel, scope, true)
}

/// Open `rel` one component at a time. At the first missing one, the rest can only be
/// directories we would create, so `..` in it is exact: a path that would leave the root or
/// enter the state directory is refused before anything is created (or, without `create`,
/// reported as such instead of `not_found`).
fn walk_dirs(disk: &dyn Disk, root: &Dir, rel: &str, scope: Scope, create: bool) -> Result<Dir> {
    let components: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    let mut dir = check_scope(root.try_clone().map_err(|e| Error::io("dup root", e))?, scope)?;
    for (i, component) in components.iter().enumerate() {
        let prefix = components[..=i].join("/");
        match disk.open_dir(root, &prefix) {
            Ok(next) => dir = check_scope(next, scope)?,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && !matches!(*component, "." | "..") => {
                let rest = normalize_lexically(&format!("{}/{}", dir.rel(), components[i..].join("/")))?;
                if scope == Scope::Workspace && first_component(&rest) == STATE_DIR {
                    return Err(Reason::StateDir.into());
                }
                if !create {
                    return Err(resolve_error(e));
                }
                match disk.mkdir(&dir, component, 0o777) {
                    Ok(()) => disk.sync_dir(&dir).map_err(|e| Error::io("fsync new directory's parent", e))?,
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                    Err(e) => return Err(Error::io("create directory", e)),
                }
                dir = check_scope(disk.open_dir(root, &prefix).map_err(resolve_error)?, scope)?;
            }
            Err(e) => return Err(resolve_error(e)),
        }
    }
    Ok(dir)
}

fn check_scope(dir: Dir, scope: Scope) -> Result<Dir> {
    if scope == Scope::Workspace && first_component(dir.rel()) == STATE_DIR {
        return Err(Reason::StateDir.into());
    }
    Ok(dir)
}

/// Map an error from opening a directory beneath the root.
fn resolve_error(e: io::Error) -> Error {
    let reason = match e.raw_os_error() {
        // openat2 says EXDEV when resolution would leave the root, as does our prefix check.
        Some(libc::EXDEV) => Reason::EscapesWorkspace,
        Some(libc::EILSEQ) => Reason::NotUtf8,
        _ => return Error::io("open directory", e),
    };
    Error::new(reason)
}

fn split_last(rel: &str) -> Result<(&str, &str)> {
    if rel.ends_with('/') {
        return Err(Reason::IsDirectory.into());
    }
    let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    if matches!(name, "." | "..") {
        return Err(Reason::IsDirectory.into());
    }
    Ok((parent, name))
}

fn first_component(path: &str) -> &str {
    path.split('/').find(|c| !c.is_empty() && *c != ".").unwrap_or("")
}

/// `a/./b//../c` → `a/c`; `..` above the root is an escape.
fn normalize_lexically(input: &str) -> Result<String> {
    let mut out: Vec<&str> = Vec::new();
    for component in input.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                if out.pop().is_none() {
                    return Err(Reason::EscapesWorkspace.into());
                }
            }
            c => out.push(c),
        }
    }
    Ok(out.join("/"))
}

/// The workspace path of `name` (one component, not `.` or `..`) in `dir`, whatever it is.
pub fn path_in(dir: &Dir, name: &str) -> Result<WorkspacePath> {
    if name.is_empty() || name.contains('/') || matches!(name, "." | "..") {
        return Err(Reason::InvalidArgument { what: "name" }.into());
    }
    canonical(&dir.join(name))
}

fn canonical(path: &str) -> Result<WorkspacePath> {
    if path.is_empty() {
        return Err(Reason::IsDirectory.into());
    }
    if path.len() > MAX_PATH {
        return Err(Reason::PathTooLong.into());
    }
    Ok(WorkspacePath(path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_refusals_are_typed() {
        let long_name = "x".repeat(256);
        let long_path = "a/".repeat(2048);
        let cases = [
            ("", Reason::EmptyPath),
            ("a\0b", Reason::NulByte),
            ("/etc/passwd", Reason::AbsolutePath),
            (long_name.as_str(), Reason::NameTooLong),
            (long_path.as_str(), Reason::PathTooLong),
        ];
        for (input, reason) in cases {
            assert_eq!(check_lexical(input).unwrap_err().reason(), &reason, "{input:.40}");
        }
        assert!(check_lexical(&"x".repeat(255)).is_ok());
    }

    #[test]
    fn lexical_normalization() {
        assert_eq!(normalize_lexically("a/./b//../c").unwrap(), "a/c");
        assert_eq!(normalize_lexically("./x").unwrap(), "x");
        assert_eq!(normalize_lexically("a/../../x").unwrap_err().reason(), &Reason::EscapesWorkspace);
        assert_eq!(first_component("./.resilient_write/x"), STATE_DIR);
    }

    #[test]
    fn split_refuses_directory_spellings() {
        for input in ["a/", "a/.", "a/..", ".", ".."] {
            assert_eq!(split_last(input).unwrap_err().reason(), &Reason::IsDirectory, "{input}");
        }
        assert_eq!(split_last("a/b/c").unwrap(), ("a/b", "c"));
        assert_eq!(split_last("c").unwrap(), ("", "c"));
    }
}
