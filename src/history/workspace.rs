//! A workspace opened for reading: root checks, the state directory, and the queries that work
//! whether or not an engine owns the workspace (`log`, `history`, `status`).
//!
//! Opening refuses unsafe roots by comparing resolved forms (so `/private/tmp`-style aliases and
//! symlinks do not slip past): `/`, `/bin`, `/sbin`, `/usr`, `/etc`, `/var`, `/tmp`, `/proc`,
//! `/sys`, `/dev`, `/boot` and the user's home directory itself (a project *inside* home is fine).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::durable::layout::REJECTIONS;
use crate::durable::{Dir, Disk, File, FileKind, OsDisk, STATE_DIR, Scope, WorkspacePath, hash_file};
use crate::error::{Error, IoContext, Reason, Result};
use crate::journal::{self, Entry, Op, Row, Scan};
use crate::policy::Policy;
use crate::sha::Sha256;
use crate::store::{OBJECTS_DIR, Objects};

use super::owner::{self, LockInfo};

/// The policy file's name inside the state directory.
pub const POLICY_FILE: &str = crate::durable::layout::POLICY;

const UNSAFE_ROOTS: &[&str] = &["/", "/bin", "/sbin", "/usr", "/etc", "/var", "/tmp", "/proc", "/sys", "/dev", "/boot"];

/// How to open a workspace: what the read side reads (the engine's own options, which only a
/// writer needs, are `engine::Options`, which holds these).
#[derive(Clone, Default)]
pub struct Options {
    /// Accept a system directory or the home directory as root.
    pub allow_unsafe_root: bool,
    /// The I/O seam; [`OsDisk`] when `None`.
    pub disk: Option<Arc<dyn Disk>>,
}

impl Options {
    pub(crate) fn disk(&self) -> Arc<dyn Disk> {
        self.disk.clone().unwrap_or_else(|| Arc::new(OsDisk))
    }
}

/// A workspace root and its state directory, opened for reading.
pub struct Workspace {
    pub(crate) disk: Arc<dyn Disk>,
    path: PathBuf,
    pub(crate) root: Dir,
    /// `None` until something created `.resilient_write/`.
    pub(crate) state: Option<Dir>,
    /// The journal's index database, opened at the first question (`None` inside: it could
    /// not be, ask the journal), shared with this handle's clones.
    index_db: Arc<std::sync::OnceLock<Option<Arc<journal::IndexDb>>>>,
}

impl Workspace {
    /// Open `path` for reading.
    pub fn open(path: &Path, options: &Options) -> Result<Workspace> {
        let (disk, path, root) = open_root(path, options)?;
        let state = match disk.stat(&root, STATE_DIR).step("stat state directory")? {
            Some(stat) if stat.kind == FileKind::Dir => {
                Some(disk.open_dir(&root, STATE_DIR).step("open state directory")?)
            }
            Some(_) => return Err(Error::from(Reason::NotADirectory).at(STATE_DIR)),
            None => None,
        };
        Ok(Workspace { disk, path, root, state, index_db: Arc::default() })
    }

    /// A second handle on the same workspace (its directories' descriptors duplicated).
    pub fn try_clone(&self) -> Result<Workspace> {
        let state = self.state.as_ref().map(Dir::try_clone).transpose().step("duplicate state directory")?;
        let root = self.root.try_clone().step("duplicate workspace directory")?;
        Ok(Workspace { disk: self.disk.clone(), path: self.path.clone(), root, state, index_db: self.index_db.clone() })
    }

    pub(crate) fn from_parts(disk: Arc<dyn Disk>, path: PathBuf, root: Dir, state: Dir) -> Workspace {
        Workspace { disk, path, root, state: Some(state), index_db: Arc::default() }
    }

    /// The root as given (canonicalized).
    /// Does the workspace have its state directory (has rwfs ever written here)?
    pub fn is_initialized(&self) -> bool {
        self.state.is_some()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn disk(&self) -> &dyn Disk {
        &*self.disk
    }

    /// Read every journal row (tolerantly; problems are in the returned [`Scan`]).
    pub fn read_journal(&self, visit: impl FnMut(Entry)) -> Result<Scan> {
        match &self.state {
            Some(state) => journal::read(&*self.disk, state, visit),
            None => Ok(Scan::default()),
        }
    }

    /// The journal's index, brought up to date (see `journal::index`); `None` when the
    /// workspace has no journal or the index cannot be used now (another process holds it,
    /// the state directory is not writable): questions then read the journal.
    pub fn journal_index(&self) -> Option<crate::journal::Index<'_>> {
        let state = self.state.as_ref()?;
        // Opened once per workspace handle (and its clones): opening syncs the database.
        let db = self.index_db.get_or_init(|| match journal::open_index_db(&*self.disk, state) {
            Ok(db) => Some(Arc::new(db)),
            Err(e) => {
                tracing::debug!(error = %e, "journal index not used");
                None
            }
        });
        match crate::journal::Index::attach(&*self.disk, state, db.clone()?) {
            Ok(index) => Some(index),
            Err(e) => {
                tracing::debug!(error = %e, "journal index not used");
                None
            }
        }
    }

    /// The canonical path rows for `input` carry (the file need not exist any more).
    pub fn lookup(&self, input: &str) -> Result<WorkspacePath> {
        crate::durable::resolve::lookup(&*self.disk, &self.root, input, Scope::State)
    }

    /// The current content's digest of `path`: `None` when absent.
    pub fn current_sha(&self, path: &WorkspacePath) -> Result<Option<Sha256>> {
        let Some((file, _)) = self.open_current(path)? else { return Ok(None) };
        Ok(Some(hash_file(&*self.disk, &file).step("read file")?.0))
    }

    /// The bytes `path` holds now; `None` when it is absent or larger than `max` bytes.
    pub(crate) fn read_current(&self, path: &WorkspacePath, max: usize) -> Result<Option<Vec<u8>>> {
        match self.open_current(path)? {
            Some((file, size)) if usize::try_from(size).is_ok_and(|size| size <= max) => {
                crate::store::read_all(&*self.disk, &file).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// `path`'s current file, opened for reading, and its size; `None` when absent.
    fn open_current(&self, path: &WorkspacePath) -> Result<Option<(File, u64)>> {
        let target = crate::durable::resolve::resolve(&*self.disk, &self.root, path.as_str(), Scope::State, false);
        let target = match target {
            Ok(t) => t,
            Err(e) if *e.reason() == Reason::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(stat) = target.stat else { return Ok(None) };
        let file = self.disk.open_read(&target.parent, &target.name).step("open file")?;
        self.disk.quiet_reads(&file);
        Ok(Some((file, stat.size)))
    }

    /// The rows of `input`'s path, oldest first, with where each version can be found.
    pub fn history(&self, input: &str) -> Result<History> {
        self.history_of(self.lookup(input)?)
    }

    /// [`history`](Workspace::history) of an already resolved path.
    pub(crate) fn history_of(&self, path: WorkspacePath) -> Result<History> {
        // A file the mount hides (keys, objects, drafts, the token) has no rows and no content
        // here either: the answer of a path that never existed, as through the mount.
        if !crate::durable::layout::shown(path.as_str()) {
            return Ok(History { path, current: None, versions: Vec::new() });
        }
        let rows = crate::journal::query::path_rows(self, path.as_str())?;
        let current = self.current_sha(&path)?;
        let objects = self.objects()?;
        let mut versions = Vec::with_capacity(rows.len());
        let mut stored: BTreeMap<Sha256, bool> = BTreeMap::new();
        for entry in rows {
            let row = &entry.row;
            let state = match (row.path == path.as_str(), row.op().states_content()) {
                (true, true) => row.sha256,
                // A refusal (or another non-stating row) leaves the content as it was.
                (true, false) => row.prev_sha256,
                (false, _) => None,
            };
            let availability = match state {
                None => Availability::Absent,
                Some(sha) if Some(sha) == current => Availability::Current,
                Some(sha) => {
                    let here = match stored.get(&sha) {
                        Some(here) => *here,
                        None => {
                            let here = match &objects {
                                Some(objects) => objects.contains(&sha)?,
                                None => false,
                            };
                            stored.insert(sha, here);
                            here
                        }
                    };
                    if here { Availability::Stored } else { Availability::Missing }
                }
            };
            versions.push(Version { entry, state, availability });
        }
        Ok(History { path, current, versions })
    }

    /// Who owns the workspace, and what its journal and store hold.
    pub fn status(&self) -> Result<Status> {
        let mut last: Option<Row> = None;
        let mut last_gc: Option<Row> = None;
        let scan = self.read_journal(|entry| {
            if entry.row.op() == crate::journal::Op::Gc {
                last_gc = Some(entry.row.clone());
            }
            last = Some(entry.row);
        })?;
        let owner = match &self.state {
            Some(state) => owner::current_owner(&*self.disk, state)?,
            None => None,
        };
        let (objects, object_bytes, available) = match self.objects()? {
            Some(objects) => {
                let list = objects.list()?;
                (list.len() as u64, list.iter().map(|(_, s)| s.size).sum(), objects.available().ok())
            }
            None => (0, 0, None),
        };
        // A broken policy file is `rwfs scan`'s and the mount's error to report, not status's.
        let retention = self.policy(None).ok().map(|p| p.retention());
        let object_limit = retention.zip(available).map(|(r, available)| r.limit(object_bytes, available));
        Ok(Status {
            root: self.path.clone(),
            initialized: self.state.is_some(),
            owner,
            rows: scan.rows,
            last_row: last,
            // As `rwfs verify` counts them: lines skipped with no row lost are not problems.
            journal_problems: scan
                .problems
                .iter()
                .filter(|p| !matches!(p, journal::Problem::KeyMissing) && !p.is_skipped_line())
                .count(),
            objects,
            object_bytes,
            retention,
            object_limit,
            last_gc,
        })
    }

    /// The workspace's policy: the file `file` names (absolute, or relative to the root — the
    /// value of `RW_POLICY_FILE`, read by the caller), else `.resilient_write/policy.yaml`, else
    /// the defaults. A broken file is an error, never a silent default.
    pub fn policy(&self, file: Option<&Path>) -> Result<Policy> {
        let text = match file {
            Some(path) if path.is_absolute() => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| Error::io("read policy file", e).at(path.display().to_string()))?,
            ),
            Some(path) => {
                let rel = path.to_str().ok_or(Reason::NotUtf8)?;
                let target = crate::durable::resolve::resolve(&*self.disk, &self.root, rel, Scope::State, false)?;
                if target.stat.is_none() {
                    return Err(Error::from(Reason::NotFound).at(rel));
                }
                Some(self.read_small(&target.parent, &target.name).map_err(|e| e.at(rel))?)
            }
            None => match &self.state {
                Some(state) if self.disk.stat(state, POLICY_FILE).step("stat policy")?.is_some() => {
                    Some(self.read_small(state, POLICY_FILE).map_err(|e| e.at(format!("{STATE_DIR}/{POLICY_FILE}")))?)
                }
                _ => None,
            },
        };
        Policy::parse(text.as_deref().unwrap_or(""))?.with_interop(&self.interop_texts()?)
    }

    /// A team's gitleaks and detect-secrets files at the workspace root, those that exist.
    fn interop_texts(&self) -> Result<crate::score::interop::InteropTexts> {
        let read = |name: &str| -> Result<Option<String>> {
            match self.disk.stat(&self.root, name).step("stat interop file")? {
                // A large repository's baseline lists many findings.
                Some(stat) if stat.kind == FileKind::File => Ok(Some(
                    self.read_text(&self.root, name, 64 << 20, "gitleaks or detect-secrets file (larger than 64 MiB)")
                        .map_err(|e| e.at(name))?,
                )),
                _ => Ok(None),
            }
        };
        Ok(crate::score::interop::InteropTexts {
            gitleaks_toml: read(".gitleaks.toml")?,
            gitleaks_ignore: read(".gitleaksignore")?,
            secrets_baseline: read(".secrets.baseline")?,
        })
    }

    /// The shown part of the envelope of the refusal `row` journaled (see
    /// [`shown_envelope`](crate::envelope::shown_envelope)); `None` for another row or when the
    /// envelope is gone.
    pub fn blocked_envelope(&self, row: &Row) -> Result<Option<serde_json::Value>> {
        let (Some(state), Some(seq), Op::Block) = (&self.state, row.seq, row.op()) else { return Ok(None) };
        let dir = match self.disk.stat(state, REJECTIONS).step("stat rejections")? {
            Some(stat) if stat.kind == FileKind::Dir => {
                self.disk.open_dir(state, REJECTIONS).step("open rejections")?
            }
            _ => return Ok(None),
        };
        let name = format!("{}.json", crate::envelope::rejection_id(&row.ts, seq));
        if self.disk.stat(&dir, &name).step("stat envelope")?.is_none() {
            return Ok(None);
        }
        let text = self.read_small(&dir, &name)?;
        let envelope: serde_json::Value = serde_json::from_str(&text)
            .map_err(|_| Reason::InvalidArgument { what: "rejection envelope (not JSON)" })?;
        Ok(Some(crate::envelope::shown_envelope(&envelope)))
    }

    /// A small text file (at most 1 MiB), through the disk.
    fn read_small(&self, dir: &Dir, name: &str) -> Result<String> {
        self.read_text(dir, name, 1 << 20, "policy file (larger than 1 MiB)")
    }

    /// A text file of at most `limit` bytes, through the disk; `too_large` names the refusal.
    fn read_text(&self, dir: &Dir, name: &str, limit: u64, too_large: &'static str) -> Result<String> {
        let file = self.disk.open_read(dir, name).step("open policy file")?;
        let size = self.disk.file_stat(&file).step("stat policy file")?.size;
        if size > limit {
            return Err(Reason::InvalidArgument { what: too_large }.into());
        }
        let mut buf = vec![0u8; size as usize];
        let mut got = 0;
        while got < buf.len() {
            let n = self.disk.read_at(&file, &mut buf[got..], got as u64).step("read policy file")?;
            if n == 0 {
                break;
            }
            got += n;
        }
        buf.truncate(got);
        String::from_utf8(buf).map_err(|_| Reason::NotUtf8.into())
    }

    /// The object store, read-only; `None` before the workspace was first written.
    pub(crate) fn objects(&self) -> Result<Option<Objects>> {
        let Some(state) = &self.state else {
            return Ok(None);
        };
        if self.disk.stat(state, OBJECTS_DIR).step("stat objects")?.is_none() {
            return Ok(None);
        }
        Ok(Some(Objects::open(self.disk.clone(), state, &self.path)?))
    }
}

/// Where a version's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// It is the file's current content.
    Current,
    /// It is in `objects/`.
    Stored,
    /// Retention removed it (or it was lost).
    Missing,
    /// The row leaves the path absent (a delete).
    Absent,
}

impl Availability {
    pub fn as_str(self) -> &'static str {
        match self {
            Availability::Current => "current",
            Availability::Stored => "stored",
            Availability::Missing => "missing",
            Availability::Absent => "absent",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Version {
    pub entry: Entry,
    /// What the path held after this row: its `sha256`; the unchanged `prev_sha256` for a row
    /// that states no content (a `block`, whose `sha256` is the refused draft); absent when the
    /// row renamed the path away.
    pub state: Option<Sha256>,
    pub availability: Availability,
}

impl Version {
    pub fn op(&self) -> Op {
        self.entry.row.op()
    }
}

#[derive(Debug, Clone)]
pub struct History {
    pub path: WorkspacePath,
    /// The file's content now (`None`: absent).
    pub current: Option<Sha256>,
    pub versions: Vec<Version>,
}

#[derive(Debug, Clone)]
pub struct Status {
    pub root: PathBuf,
    /// `.resilient_write/` exists.
    pub initialized: bool,
    /// The engine that owns the workspace now, if any.
    pub owner: Option<LockInfo>,
    pub rows: u64,
    pub last_row: Option<Row>,
    /// Problems any reader can see (a key it may not read — hidden through the mount, 0600 to
    /// other users — is left to `rwfs verify`).
    pub journal_problems: usize,
    pub objects: u64,
    pub object_bytes: u64,
    /// The policy's retention (`None`: the policy file is broken).
    pub retention: Option<crate::policy::Retention>,
    /// The store's limit now (see [`crate::policy::Retention::limit`]).
    pub object_limit: Option<u64>,
    /// The last `gc` row.
    pub last_gc: Option<Row>,
}

/// Open the root directory after the unsafe-root check.
pub(crate) fn open_root(path: &Path, options: &Options) -> Result<(Arc<dyn Disk>, PathBuf, Dir)> {
    let canonical = std::fs::canonicalize(path).map_err(|e| root_error(path, "resolve workspace root", e))?;
    if !options.allow_unsafe_root && is_unsafe_root(&canonical) {
        return Err(Error::from(Reason::UnsafeRoot).at(canonical.display().to_string()));
    }
    let disk = options.disk();
    let root = disk.open_root(&canonical).map_err(|e| root_error(&canonical, "open workspace root", e))?;
    Ok((disk, canonical, root))
}

/// The error of a workspace root that cannot be reached: missing, a dead mount, or another.
fn root_error(path: &Path, step: &'static str, e: std::io::Error) -> Error {
    let shown = path.display().to_string();
    match e.raw_os_error() {
        Some(nix::libc::ENOENT) => Error::from(Reason::NoSuchWorkspace).at(shown),
        // ECONNABORTED: a request caught by the connection's end (the daemon died under it).
        Some(nix::libc::ENOTCONN | nix::libc::ECONNABORTED) => {
            let mountpoint = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
            Error::from(Reason::DeadMount { mountpoint: mountpoint.display().to_string() }).at(shown)
        }
        _ => Error::io(step, e).at(shown),
    }
}

/// Is `canonical` (already resolved) one of the refused roots?
pub fn is_unsafe_root(canonical: &Path) -> bool {
    let resolved = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut refused: Vec<PathBuf> = UNSAFE_ROOTS.iter().map(|p| resolved(Path::new(p))).collect();
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        refused.push(resolved(Path::new(&home)));
    }
    if let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::getuid()) {
        refused.push(resolved(&user.dir));
    }
    refused.iter().any(|r| r == canonical)
}

impl crate::journal::query::RowSource for Workspace {
    fn each_entry(&self, visit: &mut dyn FnMut(Entry)) -> Result<Scan> {
        self.read_journal(visit)
    }

    fn index(&self) -> Option<crate::journal::Index<'_>> {
        self.journal_index()
    }
}
