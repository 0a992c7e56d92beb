//! `rwfs mcp`: one MCP session on stdio, on the workspace's one engine; or, with `--http`,
//! streamable HTTP for hosts that only speak HTTP, without a mount.
//!
//! - When a process already owns the workspace (a mount daemon, or another `rwfs mcp`), its
//!   socket answers and stdio is relayed to it byte for byte: every client shares one engine,
//!   one journal and one set of retry budgets.
//! - Otherwise this process opens the engine (refusing an unsafe root before any byte of MCP is
//!   spoken), serves the session on stdio, and also listens on the workspace's socket, so that
//!   `rwfs` CLI commands and further `rwfs mcp` sessions reach this engine instead of failing on
//!   its lock. It exits once its own session has ended and no relayed session is still open.
//! - `--http ADDR` opens the engine (refused while another process owns it), listens on the
//!   socket as above, and serves HTTP as the mount daemon's `--mcp-http` does (the same code and
//!   token) until SIGINT, SIGTERM or SIGHUP.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::control::{self, Daemon};
use crate::durable::STATE_DIR;
use crate::engine::Engine;
use crate::engine::Options;
use crate::error::Result;
use crate::mcp::{self, Peer};
use crate::tools::Tools;

/// Run one MCP session on stdio for the workspace at `root`.
pub fn run(root: &Path, options: &Options) -> Result<()> {
    if control::answers(root) {
        tracing::info!(root = %root.display(), "relaying MCP to the process that owns the workspace");
        return mcp::relay(&root.join(STATE_DIR).join(control::SOCKET_LINK));
    }
    let engine = Arc::new(Engine::open(root, options)?);
    let tools = Arc::new(Tools::new(engine.clone(), mcp::settings_from_env()));
    let owner = Arc::new(Owner { engine: engine.clone(), tools: tools.clone(), sessions: AtomicUsize::new(0) });
    let workspace: PathBuf = engine.workspace().path().to_path_buf();
    let state = engine.state().dir_path()?;
    control::start(&workspace, &state, owner.clone())?;
    let served = mcp::serve_stdio(tools, control::agent_host(std::process::id()));
    // Relayed sessions keep the engine until they end.
    while owner.sessions.load(Ordering::SeqCst) > 0 {
        std::thread::sleep(Duration::from_millis(100));
    }
    control::unlisten(&workspace, &state);
    drop(owner);
    let closed = Arc::try_unwrap(engine).map_or(Ok(()), Engine::close);
    served.and(closed)
}

/// Serve MCP over streamable HTTP at `addr` for the workspace at `root`, until a stop signal.
pub fn run_http(root: &Path, options: &Options, addr: std::net::SocketAddr) -> Result<()> {
    use crate::error::{Error, IoContext};
    // Before any thread starts, so that only the waiting thread takes them.
    let signals = super::daemon::block_signals()?;
    let engine = Arc::new(Engine::open(root, options)?);
    let tools = Arc::new(Tools::new(engine.clone(), mcp::settings_from_env()));
    let owner = Arc::new(Owner { engine: engine.clone(), tools: tools.clone(), sessions: AtomicUsize::new(0) });
    let workspace: PathBuf = engine.workspace().path().to_path_buf();
    let state = engine.state().dir_path()?;
    let (token, new) = mcp::http_token(&engine)?;
    let listener =
        std::net::TcpListener::bind(addr).map_err(|e| Error::io("bind MCP HTTP address", e).at(addr.to_string()))?;
    let bound = listener.local_addr().step("MCP HTTP address")?;
    control::start(&workspace, &state, owner.clone())?;
    let stop = tokio_util::sync::CancellationToken::new();
    let on_signal = stop.clone();
    std::thread::Builder::new()
        .name("rwfs-signals".into())
        .spawn(move || {
            if signals.wait().is_ok() {
                on_signal.cancel();
            }
        })
        .step("start signal thread")?;
    let mut note = format!("rwfs: MCP over HTTP at http://{bound}/mcp");
    if new {
        note.push_str(&format!("; bearer token (shown once, kept 0600 in {STATE_DIR}/{}): {token}", mcp::TOKEN_FILE));
    }
    super::daemon::say(&note);
    let served = mcp::serve_http(tools, listener, token, None, stop);
    control::unlisten(&workspace, &state);
    drop(owner);
    let closed = Arc::try_unwrap(engine).map_or(Ok(()), Engine::close);
    served.and(closed)
}

/// The process that owns the workspace for an MCP session.
struct Owner {
    engine: Arc<Engine>,
    tools: Arc<Tools>,
    sessions: AtomicUsize,
}

impl Daemon for Owner {
    fn engine(&self) -> &Engine {
        &self.engine
    }

    fn status(&self) -> Value {
        json!({
            "pid": std::process::id(),
            "workspace": self.engine.workspace().path(),
            "mountpoint": null,
            "drafts_open": 0,
            "last_commit": null,
            "serving": "mcp",
        })
    }

    /// Not a daemon: it stops when its own session ends.
    fn shutdown(&self) {}

    /// `rwfs mcp` serves no page.
    fn ui_url(&self) -> Result<Option<String>> {
        Ok(None)
    }

    fn serve_mcp(&self, stream: std::os::unix::net::UnixStream, first: Vec<u8>, peer: Peer) {
        self.sessions.fetch_add(1, Ordering::SeqCst);
        if let Err(e) = mcp::serve_connection(self.tools.clone(), stream, first, peer) {
            tracing::warn!(error = %e, "relayed MCP session ended with an error");
        }
        self.sessions.fetch_sub(1, Ordering::SeqCst);
    }
}
