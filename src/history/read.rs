//! Reading files and kept versions: a workspace file opened for reading ([`Opened`]), the
//! engine's own files under `.resilient_write/` (`state_read`, `state_list`: what the tools
//! read back of chunk sessions, checkpoints, the scratchpad, rejections), the bytes of a kept
//! object, and which version a name means ([`RestoreTo`]: a digest prefix or a time,
//! chosen by [`pick_version`]) — what `rwfs show`, `diff`, `restore` and the tools read.
//!
//! Nothing here writes: a restore (`Engine::restore`) asks [`pick_version`] which version to
//! bring back, then commits it through the engine.

use std::collections::BTreeSet;
use std::time::SystemTime;

use crate::durable::resolve::{open_parent, resolve};
use crate::durable::{FileKind, STATE_DIR, Scope, Stat, WorkspacePath};
use crate::error::{Error, IoContext, Reason, Result};
use crate::journal::Op;
use crate::sha::Sha256;

use super::{History, Workspace};

/// A workspace file opened for reading.
#[derive(Debug)]
pub struct Opened {
    pub path: WorkspacePath,
    pub file: std::fs::File,
    pub stat: Stat,
}

/// Which version a restore (`Engine::restore`), `show` or `diff` means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreTo {
    /// A digest or an unambiguous prefix of one (at least 4 hex digits).
    Sha(String),
    /// The content the path had at this time.
    At(SystemTime),
}

impl Workspace {
    /// The workspace file `input` opened for reading (`.resilient_write/` refused).
    pub fn open_file(&self, input: &str) -> Result<Opened> {
        self.open_in(input, Scope::Workspace)
    }

    /// The content of the workspace file `input`.
    pub fn read_file(&self, input: &str) -> Result<(WorkspacePath, Vec<u8>, Sha256)> {
        let opened = self.open_file(input)?;
        let path = opened.path.clone();
        let bytes = read_all(opened)?;
        let sha = Sha256::of(&bytes);
        Ok((path, bytes, sha))
    }

    pub(crate) fn open_in(&self, input: &str, scope: Scope) -> Result<Opened> {
        let disk = &*self.disk;
        let target = resolve(disk, &self.root, input, scope, false)?;
        let at = target.path.to_string();
        let Some(stat) = target.stat else {
            return Err(Error::from(Reason::NotFound).at(at));
        };
        let file = disk.open_read(&target.parent, &target.name).map_err(|e| Error::io("open file", e).at(&at))?;
        Ok(Opened { path: target.path, file: std::fs::File::from(file.into_fd()), stat })
    }
}

impl Workspace {
    /// The bytes of kept version `sha` as stored in `objects/` (opened with the workspace's key
    /// when sealed); `None` when it is not stored.
    pub fn object(&self, sha: &Sha256) -> Result<Option<Vec<u8>>> {
        let Some(objects) = self.objects()? else { return Ok(None) };
        match objects.open_object(sha)? {
            Some(file) => Ok(Some(crate::store::read_all(&*self.disk, &file)?)),
            None => Ok(None),
        }
    }

    /// The bytes of one version of `input` (a digest prefix or a time, as for a restore),
    /// without restoring it: from `objects/`, or the file itself when it is the current one.
    /// The bytes are checked against the digest.
    pub fn version_bytes(&self, input: &str, to: &RestoreTo) -> Result<(Sha256, Vec<u8>)> {
        let history = self.history(input)?;
        let at = history.path.to_string();
        let sha = pick_version(&history, to).map_err(|e| e.at(&at))?;
        let stored = match self.objects()? {
            Some(objects) => objects.open_object(&sha)?,
            None => None,
        };
        let bytes = match stored {
            Some(file) => read_all(Opened {
                path: history.path.clone(),
                stat: self.disk.file_stat(&file).step("stat version")?,
                file: std::fs::File::from(file.into_fd()),
            })?,
            None if history.current == Some(sha) => read_all(self.open_in(&at, Scope::Workspace)?)?,
            None => return Err(Error::from(Reason::ObjectMissing { sha }).at(at)),
        };
        if Sha256::of(&bytes) != sha {
            // The current file changed between the digest and the read.
            return Err(Error::from(Reason::ObjectMissing { sha }).at(at));
        }
        Ok((sha, bytes))
    }
}

impl Workspace {
    /// The content of the state file `rel` (a name inside `.resilient_write/`, built by the tool
    /// layers from validated parts and still resolved beneath the root); `None` when it does not
    /// exist.
    pub fn state_read(&self, rel: &str) -> Result<Option<Vec<u8>>> {
        match self.open_in(&state_path(rel), Scope::State) {
            Ok(opened) => read_all(opened).map(Some),
            Err(e) if *e.reason() == Reason::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The state file `rel` opened for reading.
    pub fn state_open(&self, rel: &str) -> Result<Opened> {
        self.open_in(&state_path(rel), Scope::State)
    }

    /// Names and kinds in the state directory `rel`, sorted; empty when it does not exist.
    pub fn state_list(&self, rel: &str) -> Result<Vec<(String, FileKind)>> {
        let path = state_path(rel);
        let dir = match open_parent(&*self.disk, &self.root, &path, Scope::State, false) {
            Ok(dir) => dir,
            Err(e) if *e.reason() == Reason::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut names: Vec<(String, FileKind)> = self
            .disk
            .list(&dir)
            .step("list directory")?
            .into_iter()
            .filter_map(|(name, kind)| name.into_string().ok().map(|n| (n, kind)))
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(names)
    }
}

/// The workspace path of the state file `rel`.
pub(crate) fn state_path(rel: &str) -> String {
    format!("{STATE_DIR}/{rel}")
}

fn read_all(opened: Opened) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(opened.stat.size as usize);
    let at = opened.path.to_string();
    (&opened.file).read_to_end(&mut bytes).map_err(|e| Error::io("read file", e).at(at))?;
    Ok(bytes)
}

/// The digest a restore, `show` or `diff` means. A digest prefix names any version the path
/// held or replaced, and also a refused draft (a `block` row's `sha256`, kept in objects/): the
/// writer gets its refused bytes back with `rwfs show PATH@SHA`, and a restore of one goes
/// through the gate again like any other restore.
pub fn pick_version(history: &History, to: &RestoreTo) -> Result<Sha256> {
    if history.versions.is_empty() {
        return Err(Reason::VersionNotFound.into());
    }
    match to {
        RestoreTo::Sha(prefix) => {
            let prefix = prefix.to_ascii_lowercase();
            if prefix.len() < 4 || prefix.len() > 64 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Reason::InvalidArgument { what: "version (4 to 64 hex digits)" }.into());
            }
            let known: BTreeSet<Sha256> = history
                .versions
                .iter()
                .flat_map(|v| {
                    let refused = (v.op() == Op::Block).then_some(v.entry.row.sha256).flatten();
                    [v.state, v.entry.row.prev_sha256, refused]
                })
                .flatten()
                .filter(|sha| sha.to_hex().starts_with(&prefix))
                .collect();
            let mut known = known.into_iter();
            match (known.next(), known.next()) {
                (Some(sha), None) => Ok(sha),
                (None, _) => Err(Reason::VersionNotFound.into()),
                (Some(_), Some(_)) => Err(Reason::AmbiguousVersion.into()),
            }
        }
        RestoreTo::At(when) => {
            let mut state = history.versions.first().and_then(|v| v.entry.row.prev_sha256);
            for version in &history.versions {
                let row = &version.entry.row;
                let Some(ts) = crate::time::parse(&row.ts) else {
                    continue;
                };
                if ts > *when {
                    break;
                }
                if row.op().states_content() {
                    state = version.state;
                }
            }
            state.ok_or_else(|| Reason::AbsentAtTime.into())
        }
    }
}
