//! The inode table: FUSE inode numbers for the entries of the tree.
//!
//! Node numbers (the kernel's node ids) are rwfs's own: a commit gives a file a new backing
//! inode, so a node is a name — `{parent, name}` — plus what the kernel holds of it (its lookup count) and, for a
//! regular file, the shared [`FileNode`] (open handles, the draft). Invariants:
//!
//! - `children` maps each `(parent, name)` the kernel may use to exactly one node, whose
//!   `parent`/`name` (or one of its `aliases`) are that key; a node without a key is *detached*
//!   (unlinked, or replaced by a rename) and lives only while the kernel references it or a
//!   handle is open.
//! - A hard link made through the mount is an alias of its source's node, so both names have
//!   one inode number, as `link(2)` promises (`git clone` and `tar` check it). Whichever name a
//!   writer opened, the commit lands at the node's own name and is then linked over each alias
//!   (see `Vfs::commit`), so every name shows the new version, as on any filesystem.
//! - A node is forgotten (removed) when its lookup count reaches zero and no handle is open; a
//!   file created through the mount and not yet committed (`pending`) stays until then too.
//! - A node's number is its path's when it is made: bit 62 set and the 62 bits below it taken
//!   from the SHA-256 of its workspace path ([`path_number`]; bit 63 stays clear), so the same
//!   path gets the same node number in every mount of the workspace. What `stat` reports as
//!   `st_ino` is not this number but the backing file's (`Attr::st_ino`). The number stays with the node for its life, through
//!   renames. If another live node holds that number (a detached node still referenced at the
//!   same path, or a hash collision) or the path has no UTF-8 name, the node takes the next
//!   number of a counter below 2⁶² instead, which is never reused. A path's number is reused
//!   only after the kernel forgot the node that had it (lookup count zero), so the kernel never
//!   sees one number for two live inodes and the generation is always 0.
//!
//! Locking: the table has one mutex, held only for map updates and path computation; a file's
//! state has its own. Order: a file's state, then the table — the table never takes a file's
//! lock, so a commit can hold its file and still ask where the file is now.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::Arc;

use super::file::FileNode;
use crate::durable::FileKind;
use crate::sha::Sha256;

/// The root's inode number (fixed by FUSE).
pub const ROOT: u64 = 1;

/// The number of a node at workspace path `path` when no other live node has it: in
/// `[2⁶², 2⁶³)`, above the counter's numbers.
pub fn path_number(path: &str) -> u64 {
    let digest = Sha256::of(path.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_bytes()[..8]);
    u64::from_le_bytes(first) & ((1 << 62) - 1) | 1 << 62
}

/// One name the kernel may hold: a directory, a regular file (with its shared state), or any
/// other entry.
pub struct Node {
    pub parent: u64,
    pub name: OsString,
    pub kind: FileKind,
    /// References the kernel holds (lookups not yet forgotten).
    pub lookups: u64,
    /// Open handles (files and directories).
    pub opens: u64,
    /// Reachable by its name (false once unlinked or replaced).
    pub linked: bool,
    /// A file created through the mount whose first version is not committed yet: its name
    /// exists only in this table (lookups, listings and `rmdir` account for it), and its
    /// content only in its draft.
    pub pending: bool,
    /// Other names of the same file: hard links made through the mount (see the module docs).
    pub aliases: Vec<(u64, OsString)>,
    pub file: Option<Arc<FileNode>>,
    /// What a node other than a regular file was when it lost its name (a directory removed or
    /// renamed over while the kernel still holds it): `fstat` of an open directory answers with
    /// it, with no link left, as ext4 does.
    pub last: Option<crate::durable::Stat>,
}

pub struct Table {
    nodes: HashMap<u64, Node>,
    children: HashMap<(u64, OsString), u64>,
    next: u64,
}

impl Default for Table {
    fn default() -> Table {
        let root = Node {
            parent: ROOT,
            name: OsString::new(),
            kind: FileKind::Dir,
            lookups: 1,
            opens: 0,
            linked: true,
            pending: false,
            aliases: Vec::new(),
            file: None,
            last: None,
        };
        Table { nodes: HashMap::from([(ROOT, root)]), children: HashMap::new(), next: ROOT + 1 }
    }
}

impl Table {
    pub fn get(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    pub fn get_mut(&mut self, ino: u64) -> Option<&mut Node> {
        self.nodes.get_mut(&ino)
    }

    /// The node named `name` in `parent`, if the table knows one.
    pub fn child(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.children.get(&(parent, name.to_os_string())).copied()
    }

    /// The workspace path of a node (`""` for the root); `None` for a detached node or one
    /// with a name that is not UTF-8.
    pub fn path(&self, ino: u64) -> Option<String> {
        let mut parts: Vec<&str> = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let node = self.nodes.get(&at)?;
            if !node.linked {
                return None;
            }
            parts.push(node.name.to_str()?);
            at = node.parent;
        }
        parts.reverse();
        Some(parts.join("/"))
    }

    /// The name of the entry directly under the root that holds node `ino` (itself, or one of
    /// its ancestors); `None` for the root.
    pub fn top(&self, ino: u64) -> Option<&OsStr> {
        let mut at = self.nodes.get(&ino)?;
        if ino == ROOT {
            return None;
        }
        while at.parent != ROOT {
            at = self.nodes.get(&at.parent)?;
        }
        Some(&at.name)
    }

    /// The path a node has, or had when it was detached (`None` when its old directory has no
    /// path any more).
    pub fn former_path(&self, ino: u64) -> Option<String> {
        let node = self.nodes.get(&ino)?;
        self.child_path(node.parent, &node.name)
    }

    /// The path of `name` inside `parent`.
    pub fn child_path(&self, parent: u64, name: &OsStr) -> Option<String> {
        let name = name.to_str()?;
        let dir = self.path(parent)?;
        Some(if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") })
    }

    /// The node for `(parent, name)` of `kind`, counting one lookup: the known one when its
    /// kind still matches, else a new one (the old one is detached).
    pub fn lookup(&mut self, parent: u64, name: &OsStr, kind: FileKind) -> u64 {
        if let Some(ino) = self.child(parent, name)
            && let Some(node) = self.nodes.get_mut(&ino)
            && node.kind == kind
        {
            node.lookups += 1;
            return ino;
        }
        self.insert(parent, name, kind, None)
    }

    /// A new node for `(parent, name)` with one lookup; whatever had the name is detached.
    pub fn insert(&mut self, parent: u64, name: &OsStr, kind: FileKind, file: Option<Arc<FileNode>>) -> u64 {
        self.detach(parent, name);
        let ino = self.number_for(parent, name);
        let file = file.or_else(|| (kind == FileKind::File).then(Default::default));
        let node = Node {
            parent,
            name: name.to_os_string(),
            kind,
            lookups: 1,
            opens: 0,
            linked: true,
            pending: false,
            aliases: Vec::new(),
            file,
            last: None,
        };
        self.nodes.insert(ino, node);
        self.children.insert((parent, name.to_os_string()), ino);
        ino
    }

    /// The number of a new node named `name` in `parent` (see the module docs).
    fn number_for(&mut self, parent: u64, name: &OsStr) -> u64 {
        match self.child_path(parent, name).map(|path| path_number(&path)) {
            Some(ino) if !self.nodes.contains_key(&ino) => ino,
            _ => {
                let ino = self.next;
                self.next += 1;
                ino
            }
        }
    }

    /// A hard link: `(parent, name)` is now also `ino`'s name, counting one lookup; whatever had
    /// the name is detached.
    pub fn alias(&mut self, ino: u64, parent: u64, name: &OsStr) {
        if !self.nodes.contains_key(&ino) {
            return;
        }
        self.detach(parent, name);
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.aliases.push((parent, name.to_os_string()));
            node.lookups += 1;
            self.children.insert((parent, name.to_os_string()), ino);
        }
    }

    /// The name is gone from the tree: the node that had it (if any) is detached, or keeps
    /// another of its names.
    pub fn detach(&mut self, parent: u64, name: &OsStr) -> Option<u64> {
        let key = (parent, name.to_os_string());
        let ino = self.children.remove(&key)?;
        if let Some(node) = self.nodes.get_mut(&ino) {
            if (node.parent, &node.name) != (parent, &key.1) {
                node.aliases.retain(|alias| *alias != key);
            } else if node.aliases.is_empty() {
                node.linked = false;
            } else {
                (node.parent, node.name) = node.aliases.remove(0);
            }
        }
        self.collect(ino);
        Some(ino)
    }

    /// Give the node named `from` the name `to` (its own name or an alias).
    fn rename_key(&mut self, ino: u64, from: &(u64, OsString), to: (u64, OsString)) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        if (node.parent, &node.name) == (from.0, &from.1) {
            (node.parent, node.name) = to.clone();
        } else if let Some(alias) = node.aliases.iter_mut().find(|a| *a == from) {
            *alias = to.clone();
        }
        self.children.insert(to, ino);
    }

    /// A rename: the node named `(parent, name)` now has `(new_parent, new_name)`; whatever had
    /// that name is detached. With `exchange`, the two nodes trade names instead.
    pub fn rename(&mut self, parent: u64, name: &OsStr, new_parent: u64, new_name: &OsStr, exchange: bool) {
        let (from, to) = ((parent, name.to_os_string()), (new_parent, new_name.to_os_string()));
        let moving = self.children.remove(&from);
        let other = if exchange {
            self.children.remove(&to)
        } else {
            self.detach(new_parent, new_name);
            None
        };
        if let Some(ino) = moving {
            self.rename_key(ino, &from, to.clone());
        }
        if let Some(ino) = other {
            self.rename_key(ino, &to, from);
        }
    }

    /// The kernel dropped `n` references.
    pub fn forget(&mut self, ino: u64, n: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(n);
        }
        self.collect(ino);
    }

    /// Remove a node nobody references any more. A pending file stays while named: it exists
    /// only here until its first commit.
    pub fn collect(&mut self, ino: u64) {
        if ino == ROOT {
            return;
        }
        let Some(node) = self.nodes.get(&ino) else {
            return;
        };
        if node.lookups > 0 || node.opens > 0 || (node.pending && node.linked) {
            return;
        }
        if node.linked {
            self.children.remove(&(node.parent, node.name.clone()));
        }
        for key in &node.aliases {
            self.children.remove(key);
        }
        self.nodes.remove(&ino);
    }

    /// Pending files (created through the mount, not committed yet) directly in `parent`.
    pub fn pending_in(&self, parent: u64) -> Vec<(OsString, u64)> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.parent == parent && n.linked && n.pending)
            .map(|(ino, n)| (n.name.clone(), *ino))
            .collect()
    }

    /// Every regular file node (for shutdown).
    pub fn files(&self) -> Vec<(u64, Arc<FileNode>)> {
        self.nodes.iter().filter_map(|(ino, n)| n.file.clone().map(|f| (*ino, f))).collect()
    }

    /// Nodes below `ino` that are linked (for re-pointing drafts after a directory rename).
    pub fn descendants(&self, ino: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut stack = vec![ino];
        while let Some(dir) = stack.pop() {
            for ((parent, _), child) in &self.children {
                if *parent == dir {
                    out.push(*child);
                    stack.push(*child);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_one_node_and_detached_nodes_live_until_forgotten() {
        let mut t = Table::default();
        let d = t.lookup(ROOT, OsStr::new("d"), FileKind::Dir);
        let f = t.lookup(d, OsStr::new("f"), FileKind::File);
        assert_eq!(t.lookup(d, OsStr::new("f"), FileKind::File), f, "same name, same node");
        assert_eq!(t.path(f).as_deref(), Some("d/f"));
        t.rename(d, OsStr::new("f"), ROOT, OsStr::new("g"), false);
        assert_eq!(t.path(f).as_deref(), Some("g"));
        assert_eq!(t.child(d, OsStr::new("f")), None);
        let h = t.insert(ROOT, OsStr::new("g"), FileKind::File, None);
        assert_ne!(h, f);
        assert_eq!(t.path(f), None, "replaced: detached");
        assert!(t.get(f).is_some(), "still referenced by the kernel");
        t.forget(f, 2);
        assert!(t.get(f).is_none());
        // A kind change gives a new node.
        let g2 = t.lookup(ROOT, OsStr::new("g"), FileKind::Dir);
        assert_ne!(g2, h);
    }

    #[test]
    fn a_hard_link_is_an_alias_of_its_source() {
        let mut t = Table::default();
        let d = t.lookup(ROOT, OsStr::new("d"), FileKind::Dir);
        let f = t.lookup(ROOT, OsStr::new("f"), FileKind::File);
        t.alias(f, d, OsStr::new("g"));
        assert_eq!(t.lookup(d, OsStr::new("g"), FileKind::File), f, "one inode, two names");
        // Removing the first name leaves the node at the other; renames move either name.
        t.detach(ROOT, OsStr::new("f"));
        assert_eq!(t.path(f).as_deref(), Some("d/g"));
        t.alias(f, ROOT, OsStr::new("h"));
        t.rename(ROOT, OsStr::new("h"), d, OsStr::new("i"), false);
        assert_eq!(t.child(d, OsStr::new("i")), Some(f));
        // An alias that stops being a link (its name detached) is looked up as a node of its own.
        assert_eq!(t.get(f).unwrap().aliases, [(d, OsString::from("i"))]);
        assert_eq!(t.detach(d, OsStr::new("i")), Some(f));
        assert!(t.get(f).unwrap().aliases.is_empty());
        assert_ne!(t.lookup(d, OsStr::new("i"), FileKind::File), f);
        assert_eq!(t.path(f).as_deref(), Some("d/g"));
        // A node that goes takes its aliases' names with it.
        t.alias(f, ROOT, OsStr::new("j"));
        t.forget(f, 10);
        assert_eq!(
            (t.get(f).is_some(), t.child(d, OsStr::new("g")), t.child(ROOT, OsStr::new("j"))),
            (false, None, None)
        );
    }

    #[test]
    fn a_path_has_the_same_number_in_every_table_unless_a_live_node_holds_it() {
        let (mut one, mut two) = (Table::default(), Table::default());
        let a1 = one.lookup(ROOT, OsStr::new("a"), FileKind::Dir);
        let f1 = one.lookup(a1, OsStr::new("f"), FileKind::File);
        // Another order, and other nodes made first.
        let g2 = two.lookup(ROOT, OsStr::new("g"), FileKind::File);
        let a2 = two.lookup(ROOT, OsStr::new("a"), FileKind::Dir);
        let f2 = two.lookup(a2, OsStr::new("f"), FileKind::File);
        assert_eq!((a1, f1), (a2, f2));
        assert_eq!((f1, g2), (path_number("a/f"), path_number("g")));
        assert!((1 << 62..1 << 63).contains(&f1));
        // Renamed, a node keeps its number; a new node at its old path takes the path's number
        // once nothing holds it.
        one.rename(a1, OsStr::new("f"), ROOT, OsStr::new("moved"), false);
        assert_eq!(one.child(ROOT, OsStr::new("moved")), Some(f1));
        let again = one.lookup(a1, OsStr::new("f"), FileKind::File);
        assert_ne!(again, f1, "the renamed node still holds a/f's number");
        assert!(again < 1 << 62, "from the counter");
        one.detach(a1, OsStr::new("f"));
        one.forget(again, 1);
        one.forget(f1, 1);
        assert_eq!(one.lookup(a1, OsStr::new("f"), FileKind::File), path_number("a/f"), "free again");
    }

    #[test]
    fn exchange_swaps_names() {
        let mut t = Table::default();
        let a = t.lookup(ROOT, OsStr::new("a"), FileKind::File);
        let b = t.lookup(ROOT, OsStr::new("b"), FileKind::Dir);
        t.rename(ROOT, OsStr::new("a"), ROOT, OsStr::new("b"), true);
        assert_eq!((t.path(a).as_deref(), t.path(b).as_deref()), (Some("b"), Some("a")));
    }
}
