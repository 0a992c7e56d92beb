//! The state directory's layout: one table naming every file and directory rwfs keeps in
//! `.resilient_write/` (docs/architecture.md, The state directory), with what the mount may show of it.
//!
//! Every layer names these files (the journal, the object store, the engine, the tools, the
//! daemon), and `durable` is the one module all of them may import, so the names live here and
//! the others' constants (`JOURNAL_FILE`, `OBJECTS_DIR`, `LOCK_FILE`…) are these. This module
//! only describes: the decision that uses the visibility column is the engine's
//! (`Engine::class`), and nothing here reads or writes the directory. What a query may show of a
//! path ([`shown`]) is this table's column read for a whole path, so the read side (`history`)
//! answers for a path as the mount does without asking the engine.
//!
//! A name the table does not list is hidden from the mount: a file added without an entry
//! fails closed.

/// The state directory's name at the workspace root.
pub const STATE_DIR: &str = ".resilient_write";

/// The flock of the owning engine, with its settle watermark.
pub const LOCK: &str = "lock";
/// Symlink to the owning process's MCP and control socket.
pub const SOCKET: &str = "rwfs.sock";
/// The append-only, hash-chained journal.
pub const JOURNAL: &str = "journal.jsonl";
/// The optional policy file.
pub const POLICY: &str = "policy.yaml";
/// Content-addressed blobs: old versions, deleted files, quarantined drafts.
pub const OBJECTS: &str = "objects";
/// Live drafts of files open for writing through the mount.
pub const DRAFTS: &str = "drafts";
/// Extended attribute on a draft naming the file it is for (recovery reads it after a crash).
pub const DRAFT_TARGET_XATTR: &str = "user.rwfs.target";
/// The envelope of each blocked write, and `latest.json`.
pub const REJECTIONS: &str = "rejections";
/// The copy of the newest envelope inside [`REJECTIONS`].
pub const LATEST_REJECTION: &str = "latest.json";
/// Chunk sessions: `<session>/part-NNN.txt` and `manifest.json`.
pub const CHUNKS: &str = "chunks";
/// Out-of-band blobs (`<sha256>.bin`, 0600) and their `index.jsonl`.
pub const SCRATCH: &str = "scratch";
/// Named checkpoints (`<name>.json`).
pub const CHECKPOINTS: &str = "checkpoints";
/// Archived handoff envelopes.
pub const HANDOFFS: &str = "handoffs";
/// Keys of the workspace: `cursor.key` (signs read cursors), `journal.key` (keys the journal's
/// chain) and `journal.head` (the journal's anchored head; see `journal/seal.rs`).
pub const KEYS: &str = "keys";
/// The bearer token of the MCP HTTP endpoint (0600).
pub const HTTP_TOKEN: &str = "mcp-http.token";
/// The plan of each rewind group (`<group>.json`), written before its first change, so that
/// recovery can finish a group a crash interrupted.
pub const REWINDS: &str = "rewinds";
/// The journal's index (`journal.redb`, see `journal/index.rs`): a cache rebuilt from the
/// journal, safe to delete.
pub const INDEX: &str = "index";
/// The log of a daemon started without `RWFS_LOG_FILE`, and the previous one (rotated when
/// a daemon starts and it is over [`DAEMON_LOG_ROTATE`] bytes).
pub const DAEMON_LOG: &str = "rwfs.log";
pub const DAEMON_LOG_OLD: &str = "rwfs.log.1";
pub const DAEMON_LOG_ROTATE: u64 = 1 << 20;
/// Disk space held back for deletes and renames on a full disk and for versions acknowledged in
/// batch durability (see `engine/reserve.rs`): allocated blocks, no content.
pub const RESERVE: &str = "reserve";
/// The workspace's id (random, not secret): which key in the user's config directory seals
/// its credential-bearing objects (`store/seal.rs`).
pub const WORKSPACE_ID: &str = "workspace.id";
/// Tells git (and tools that honour `.gitignore`) to leave the whole state directory alone.
pub const GITIGNORE: &str = ".gitignore";
/// What [`GITIGNORE`] holds: everything in the state directory, itself included.
pub const GITIGNORE_CONTENT: &[u8] = b"# rwfs state: journal, kept versions, sockets. Not for version control.\n*\n";

/// What the mount shows of an entry of the state directory. Nothing in it is writable through
/// the mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Listed and readable.
    ReadOnly,
    /// Neither listed nor found (`ENOENT`), never opened: refused or quarantined content, kept
    /// versions, secrets kept out of band, keys and tokens. Their names are digests and their
    /// sizes tell what was written, so not even those are shown.
    Hidden,
}

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    File,
    Dir,
    Symlink,
}

/// One top-level entry of the state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateEntry {
    pub name: &'static str,
    pub shape: Shape,
    /// The whole entry's: a directory's contents share it.
    pub visibility: Visibility,
}

const fn entry(name: &'static str, shape: Shape, visibility: Visibility) -> StateEntry {
    StateEntry { name, shape, visibility }
}

/// Every top-level entry of `.resilient_write/`.
pub const STATE_LAYOUT: &[StateEntry] = &[
    entry(LOCK, Shape::File, Visibility::ReadOnly),
    entry(SOCKET, Shape::Symlink, Visibility::ReadOnly),
    entry(JOURNAL, Shape::File, Visibility::ReadOnly),
    entry(POLICY, Shape::File, Visibility::ReadOnly),
    entry(OBJECTS, Shape::Dir, Visibility::Hidden),
    entry(DRAFTS, Shape::Dir, Visibility::Hidden),
    entry(REJECTIONS, Shape::Dir, Visibility::ReadOnly),
    entry(CHUNKS, Shape::Dir, Visibility::ReadOnly),
    entry(SCRATCH, Shape::Dir, Visibility::Hidden),
    entry(CHECKPOINTS, Shape::Dir, Visibility::ReadOnly),
    entry(REWINDS, Shape::Dir, Visibility::ReadOnly),
    entry(HANDOFFS, Shape::Dir, Visibility::ReadOnly),
    entry(KEYS, Shape::Dir, Visibility::Hidden),
    entry(HTTP_TOKEN, Shape::File, Visibility::Hidden),
    entry(INDEX, Shape::Dir, Visibility::Hidden),
    entry(RESERVE, Shape::File, Visibility::Hidden),
    entry(GITIGNORE, Shape::File, Visibility::ReadOnly),
    entry(WORKSPACE_ID, Shape::File, Visibility::ReadOnly),
    entry(DAEMON_LOG, Shape::File, Visibility::ReadOnly),
    entry(DAEMON_LOG_OLD, Shape::File, Visibility::ReadOnly),
];

/// The entry named `name` (a top-level name of the state directory).
pub fn state_entry(name: &str) -> Option<&'static StateEntry> {
    STATE_LAYOUT.iter().find(|e| e.name == name)
}

/// What the mount shows of the workspace path `path` when it is inside the state directory
/// (`None` outside it): the directory itself is read-only, an entry has its table row's
/// visibility, and a name the table does not list is hidden.
pub fn state_visibility(path: &str) -> Option<Visibility> {
    let path = lexical(path);
    let mut parts = path.split('/').filter(|c| !c.is_empty());
    if parts.next() != Some(STATE_DIR) {
        return None;
    }
    Some(match parts.next() {
        None => Visibility::ReadOnly,
        Some(name) => state_entry(name).map_or(Visibility::Hidden, |e| e.visibility),
    })
}

/// May a query show `path` (its rows, its digest, whether it exists)? Not when the mount
/// hides it.
pub fn shown(path: &str) -> bool {
    state_visibility(path) != Some(Visibility::Hidden)
}

/// `path` without empty, `.` and `..` components (`..` above the root is dropped): the paths
/// the mount holds are already in that form, and are returned as they are.
pub fn lexical(path: &str) -> std::borrow::Cow<'_, str> {
    let clean = !path.starts_with('/')
        && !path.ends_with('/')
        && path.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
    if clean || path.is_empty() {
        return std::borrow::Cow::Borrowed(path);
    }
    let mut out: Vec<&str> = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            name => out.push(name),
        }
    }
    std::borrow::Cow::Owned(out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_single_components() {
        for (i, e) in STATE_LAYOUT.iter().enumerate() {
            assert!(!e.name.is_empty() && !e.name.contains('/') && e.name != "." && e.name != "..", "{e:?}");
            assert!(STATE_LAYOUT[..i].iter().all(|other| other.name != e.name), "{} twice", e.name);
        }
        assert_eq!(state_entry(JOURNAL).map(|e| e.visibility), Some(Visibility::ReadOnly));
        assert_eq!(state_entry("nothing"), None);
    }
}
