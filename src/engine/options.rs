//! How the engine opens a workspace: how the read side opens it ([`history::Options`]: the root
//! check and the I/O seam), and what only the workspace's owner uses — the policy file, the
//! mount's pass-through globs and durability, a writer's command line.
//!
//! The read side never sees these: a workspace opened for reading takes `history::Options`
//! alone, and an engine hands its own `workspace` field to the same opening.

use std::path::PathBuf;
use std::sync::Arc;

use crate::history;
use crate::policy::Durability;

/// How to open the engine.
#[derive(Clone, Default)]
pub struct Options {
    /// How the workspace is opened, as the read side opens it.
    pub workspace: history::Options,
    /// The policy file (`RW_POLICY_FILE`); else `.resilient_write/policy.yaml`, else defaults.
    pub policy_file: Option<PathBuf>,
    /// Globs of paths written in place besides the policy's `pass_through` (the mount's
    /// `--pass-through`; see `Engine::class`).
    pub pass_through: Vec<String>,
    /// The mount's durability mode; the policy's `durability` when `None`. Only the mount's
    /// closes are ever acknowledged before they are durable: every other write stays `close`.
    pub durability: Option<Durability>,
    /// A writer's command line by pid, handed in by the front end whose writers are processes
    /// (the mount: `crate::process::args`). A new temporary file whose name does not say which
    /// file it copies (sed's `sedXXXXXX`) is judged as the one file of its directory the
    /// command line names; with `None` such a file is judged as itself.
    pub command_line: Option<CommandLine>,
}

/// Gives the command line of a process (its arguments), or `None` when it is gone.
pub type CommandLine = Arc<dyn Fn(u32) -> Option<Vec<String>> + Send + Sync>;

/// The engine's defaults over a workspace opened this way.
impl From<history::Options> for Options {
    fn from(workspace: history::Options) -> Options {
        Options { workspace, ..Options::default() }
    }
}
