//! What a namespace change brings through the gate. A rename of a file or of a directory tree,
//! a hard link and an exchange make bytes appear at paths without a write; each regular file
//! that arrives so at a gated path is judged there as a write would be (docs/architecture.md, guarantee 4), unless
//! its bytes were judged already at a path the gate treats the same way
//! ([`Gate::judged_alike`](super::gate::Gate::judged_alike)). So a file from a pass-through
//! path (`node_modules/`, `*.log`), from a path the policy allows (`tests/fixtures/**: allow`),
//! or of another kind or language (`notes` → `settings.py`) is judged at its new path.
//!
//! ```text
//!   plan     the entry that moves: a file, or a tree walked (names and kinds only, at most
//!            MAX_WALK entries) → its arrivals: (path now, path after, from a pass-through
//!            path?); files that stay outside the gate or were judged alike are left out
//!   bound    more than MAX_FILES arrivals, or more than MAX_BYTES of their bytes, or a tree
//!            over MAX_WALK entries: EXDEV before anything is read, so `mv` copies the tree file
//!            by file instead, each copy an ordinary write through the gate
//!   names    a file that crosses the gate's boundary (in or out) while it has other names:
//!            EXDEV too. One inode may not have a name written in place and a gated one, or
//!            writes through the first would change the second unjudged; a copy is a new inode
//!            (`mv` copies). For the same reason a hard link across the boundary is refused
//!            with EXDEV ([`Core::link_across`]): `ln` reports it, `cp -l` and local clones copy
//!   judge    each arrival read where it is and scanned as at its new path; the first one the
//!            policy blocks refuses the whole change: its bytes copied into objects/, a `block`
//!            row and the envelope at the new path, the policy's errno; nothing moves
//!   rows     an arrival from a pass-through path enters the journal with a `create` row of
//!            its new path (`from` its old one, mode `rename`, `link` or `exchange`), written
//!            after the change's own row and before the change (see `tree.rs`)
//! ```
//!
//! Not here: the change itself and its own row (`tree.rs`).

use crate::durable::{Dir, File, FileKind, Scope};
use crate::error::{Error, IoContext, Result};
use crate::journal::{Actor, Change, Op};
use crate::sha::Sha256;

use super::gate::{Judgement, Quarantine, Refusal, SCAN_MAX};
use super::{Core, Entry};

/// Entries of a moved tree looked at, at most: a bigger tree is refused with `EXDEV`.
pub const MAX_WALK: usize = 100_000;
/// Files judged for one change, at most.
pub const MAX_FILES: usize = 10_000;
/// Bytes judged for one change, at most.
pub const MAX_BYTES: u64 = 256 << 20;

/// A regular file a change brings to a gated path where it must be judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// Its path now.
    pub from: String,
    /// Its path after the change.
    pub to: String,
    /// From a path written in place: it enters the journal.
    pub enters: bool,
}

/// An arrival judged and let in, with the digest and size it was judged with.
#[derive(Debug, Clone)]
pub(crate) struct Admitted {
    pub arrival: Arrival,
    pub sha: Sha256,
    pub bytes: u64,
}

impl Admitted {
    /// The row of a file entering the journal by `mode` (`rename`, `link`, `exchange`).
    pub(crate) fn row(&self, mode: &str, actor: &Actor) -> Change {
        Change {
            op: Op::Create,
            path: self.arrival.to.clone(),
            from: Some(self.arrival.from.clone()),
            sha256: Some(self.sha),
            prev_sha256: None,
            bytes: self.bytes,
            mode: mode.to_string(),
            actor: actor.clone(),
            verdict: None,
            reason: None,
        }
    }
}

/// `EXDEV` for `step`: the change is refused as one across filesystems, which `mv` answers by
/// copying.
fn cross_device(step: &'static str, why: &'static str) -> Error {
    tracing::info!(why, "a namespace change refused with EXDEV: its copy goes through the gate");
    Error::io(step, std::io::Error::from_raw_os_error(nix::libc::EXDEV))
}

/// A file with other names may not cross the gate's boundary (see the module docs).
fn crossing_with_other_names() -> Error {
    cross_device("rename", "a file with other names would have names on both sides of the gate")
}

impl Core {
    /// A hard link from `from` to `to` across the gate's boundary is refused with `EXDEV` (see
    /// the module docs): the one decision for every front end.
    pub(crate) fn link_across(&self, from: &str, to: &str) -> Result<()> {
        if self.crosses(from, to) {
            return Err(cross_device("link", "a link across the gate's boundary"));
        }
        Ok(())
    }

    /// Is one of `a` and `b` written in place and the other not?
    fn crosses(&self, a: &str, b: &str) -> bool {
        self.classes.class(a).in_place() != self.classes.class(b).in_place()
    }

    /// What moving the entry at `from` to `to` brings to gated paths. `judged_as`: the path
    /// whose judgement the bytes at `from` carry (`from` itself, unless the caller knows
    /// better: a version committed at another name of the same file). Fails with `EXDEV` past
    /// the bounds, and for a file with other names that would cross the gate's boundary (see
    /// the module docs).
    pub(crate) fn arrivals(&self, from: &str, to: &str, judged_as: &str) -> Result<Vec<Arrival>> {
        let disk = self.disk();
        let (dir, name) = self.locate(Entry::Path(from), Scope::Workspace)?;
        let Some(stat) = disk.stat(&dir, &name).step("stat")? else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        match stat.kind {
            FileKind::File => {
                if stat.nlink > 1 && self.crosses(from, to) {
                    return Err(crossing_with_other_names());
                }
                self.consider(judged_as, from, to, &mut out);
            }
            FileKind::Dir => {
                // (directory, the relative path below the moved entry), depth first.
                let top = disk.open_dir(&dir, &name).step("open directory").map_err(|e| e.at(from))?;
                let mut todo: Vec<(Dir, String)> = vec![(top, String::new())];
                let mut walked = 0usize;
                while let Some((dir, rel)) = todo.pop() {
                    for (entry, kind) in disk.list(&dir).step("list directory").map_err(|e| e.at(from))? {
                        walked += 1;
                        if walked > MAX_WALK {
                            return Err(cross_device("rename", "tree too big to judge in place"));
                        }
                        // A name that is not UTF-8 cannot be a workspace path: it is refused at
                        // any write, so it cannot arrive anywhere either.
                        let Some(entry) = entry.to_str() else {
                            return Err(cross_device("rename", "a name is not UTF-8"));
                        };
                        let rel = format!("{rel}/{entry}");
                        match kind {
                            FileKind::Dir => {
                                let sub = disk.open_dir(&dir, entry).step("open directory").map_err(|e| e.at(from))?;
                                todo.push((sub, rel));
                            }
                            FileKind::File => {
                                let (old, new, was) =
                                    (format!("{from}{rel}"), format!("{to}{rel}"), format!("{judged_as}{rel}"));
                                if self.crosses(&old, &new)
                                    && disk.stat(&dir, entry).step("stat")?.is_some_and(|s| s.nlink > 1)
                                {
                                    return Err(crossing_with_other_names());
                                }
                                self.consider(&was, &old, &new, &mut out);
                                if out.len() > MAX_FILES {
                                    return Err(cross_device("rename", "too many files to judge in place"));
                                }
                            }
                            // Symlinks, fifos, devices carry no bytes of their own.
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(out)
    }

    /// A file judged as at `was`, now at `old`, arriving at `new`: an arrival when the gate
    /// must judge it there.
    fn consider(&self, was: &str, old: &str, new: &str, out: &mut Vec<Arrival>) {
        if self.classes.class(new) != super::PathClass::Gated {
            return;
        }
        let enters = self.classes.class(was).in_place();
        if !enters && self.gate.judged_alike(was, new) {
            return;
        }
        out.push(Arrival { from: old.to_string(), to: new.to_string(), enters });
    }

    /// Judge every arrival at its new path; the first one the policy blocks is refused (see
    /// the module docs) and its error returned. `prev`: what the change displaces at a new
    /// path, for the refusal's row.
    pub(crate) fn admit(
        &self,
        arrivals: Vec<Arrival>,
        prev: impl Fn(&str) -> Option<Sha256>,
        actor: &Actor,
    ) -> Result<Vec<Admitted>> {
        let disk = self.disk();
        let mut opened = Vec::with_capacity(arrivals.len());
        let mut total = 0u64;
        for arrival in arrivals {
            let (dir, name) = self.locate(Entry::Path(&arrival.from), Scope::Workspace)?;
            let file = disk.open_read(&dir, &name).step("open file").map_err(|e| e.at(arrival.from.as_str()))?;
            // Judging is rwfs's business, not an access to the file.
            disk.quiet_reads(&file);
            let len = disk.file_stat(&file).step("stat file")?.size;
            total = total.saturating_add(len);
            if total > MAX_BYTES {
                return Err(cross_device("rename", "too many bytes to judge in place"));
            }
            opened.push((arrival, file, len));
        }
        let mut admitted = Vec::with_capacity(opened.len());
        for (arrival, file, len) in opened {
            let (sha, small, judgement) = self.judge_file(&arrival.to, &file, len)?;
            if let Some(judgement) = judgement.filter(Judgement::blocks) {
                let path = crate::durable::resolve::lookup(disk, &self.ws.root, &arrival.to, Scope::Workspace)?;
                return Err(self.refuse(Refusal {
                    path: &path,
                    content: match &small {
                        Some(bytes) => Quarantine::Bytes(bytes),
                        None => Quarantine::Copy(&file),
                    },
                    sha,
                    bytes: len,
                    prev: prev(&arrival.to),
                    judgement,
                    actor,
                }));
            }
            admitted.push(Admitted { arrival, sha, bytes: len });
        }
        Ok(admitted)
    }

    /// The digest of `file` (`len` bytes), its bytes when it is small enough to be judged in
    /// one piece, and the gate's judgement of it as the new version of `path` (`None`: binary).
    fn judge_file(&self, path: &str, file: &File, len: u64) -> Result<(Sha256, Option<Vec<u8>>, Option<Judgement>)> {
        if len <= SCAN_MAX as u64 {
            let bytes = self.read_range(file, 0, len as usize)?;
            let judgement = self.gate.judge(path, &bytes);
            return Ok((Sha256::of(&bytes), Some(bytes), judgement));
        }
        let sha = crate::durable::content_digest(self.disk(), file).step("hash file")?.0;
        Ok((sha, None, self.judge_file_windows(path, file, len, 0)?))
    }
}
