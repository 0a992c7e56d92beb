//! How a command reaches the workspace: opened for reading when it exists ([`existing`]), its
//! engine — the daemon's when it is mounted, else one opened for the command ([`with_engine`])
//! — and the CLI's [`actor`]; and the two forms every command reads and prints alike (a time
//! given on the command line, a short digest). It runs no command (`run.rs` dispatches them).

use std::path::Path;
use std::time::SystemTime;

use crate::app::control::{self, Request};
use crate::engine::Engine;
use crate::engine::Options;
use crate::error::{Reason, Result};
use crate::history::Workspace;
use crate::journal::{Actor, Via};
use crate::sha::Sha256;

const CALLER: &str = "rwfs-cli";

/// The workspace at `root`, opened for reading; an error naming it when rwfs never wrote there.
pub(super) fn existing(root: &Path, options: &Options) -> Result<Workspace> {
    let ws = Workspace::open(root, &options.workspace)?;
    if !ws.is_initialized() {
        return Err(crate::error::Error::from(Reason::NotAWorkspace).at(ws.path().display().to_string()));
    }
    Ok(ws)
}

/// The CLI, in the rows it writes.
pub(super) fn actor() -> Actor {
    Actor::this_process(Via::Cli, CALLER)
}

/// Run a change on the workspace's engine: the daemon's when the workspace is mounted (its
/// control socket answers; `relay` builds the request), else one opened here for `f` and
/// closed after (making the watermark durable).
pub(super) fn with_engine(
    root: &Path,
    options: &Options,
    f: impl FnOnce(&Engine) -> Result<serde_json::Value>,
    relay: impl FnOnce() -> (Request, Vec<u8>),
) -> Result<serde_json::Value> {
    if control::answers(root) {
        let (request, body) = relay();
        return control::call(root, request, &body);
    }
    let engine = Engine::open(root, options)?;
    let out = f(&engine)?;
    engine.close()?;
    Ok(out)
}

/// A digest's first 12 digits, or `absent`.
pub(super) fn short(sha: Option<Sha256>) -> String {
    sha.map_or_else(|| "absent".to_string(), |s| s.short(12))
}

/// `--at`, `--to`, `--since`: a time as `crate::time::parse_at` reads it.
pub(super) fn parse_time(s: &str) -> Result<SystemTime> {
    crate::time::parse_at(s, SystemTime::now())
}
