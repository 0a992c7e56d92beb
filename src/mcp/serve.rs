//! Where MCP is served.
//!
//! - **stdio** ([`serve_stdio`]), or a byte-for-byte [`relay`] of stdio to the socket of the
//!   process that owns the workspace (`app/mcp.rs` decides which).
//! - **the owner's socket** ([`serve_connection`]): a connection whose first line is JSON-RPC
//!   (rather than a control request) is an MCP session; the peer's pid and uid come from the
//!   socket.
//! - **streamable HTTP** ([`serve_http`], `rwfs mount --mcp-http ADDR` or `rwfs mcp --http
//!   ADDR`): every request must carry `Authorization: Bearer <token>`; the token is generated
//!   once, kept 0600 in the state directory (written through the engine, hidden from the mount) and printed when created.
//!   `Host` must be a loopback name and a browser `Origin` a loopback origin (DNS rebinding).
//!   Those checks, the connection cap, read times and bodies are the loopback HTTP module's
//!   (`crate::http`, shared with the page); sessions are bounded here (`http.rs`).
//!
//! stdout carries only the protocol: logs go to stderr.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use crate::durable::STATE_DIR;
use crate::engine::Engine;
use crate::error::{Error, IoContext, Reason, Result};
use crate::journal::Actor;
use crate::tools::{Settings, Tools};

use super::http::{CappedSessions, SessionLimits};
use super::lines::check_lines;
use super::{Peer, Server};

/// The tool settings from the environment (`RW_SCRATCH_DISABLE_GET`).
pub fn settings_from_env() -> Settings {
    Settings { scratch_get_disabled: std::env::var_os("RW_SCRATCH_DISABLE_GET").is_some_and(|v| !v.is_empty()) }
}

/// Serve one MCP session on this process's stdin and stdout, until the client closes it.
pub fn serve_stdio(tools: Arc<Tools>, peer: Peer) -> Result<()> {
    let runtime = runtime()?;
    // Taken before stdin and stdout may be made non-blocking, given back when the session ends.
    let _flags = stdio::Flags::save();
    let served = runtime.block_on(async move {
        let (pair, written) = match stdio::pollable()? {
            Some((read, write)) => check_lines(read, write),
            None => check_lines(tokio::io::stdin(), tokio::io::stdout()),
        };
        serve_checked(Server::new(tools, peer), pair, written).await
    });
    runtime.shutdown_background();
    served.step("serve MCP on stdio")
}

/// stdin and stdout polled by the runtime itself when they are pipes or sockets (what every
/// agent host spawns a server with), instead of tokio's default of one blocking-pool thread per
/// read and per write: two thread hand-offs fewer on every call.
mod stdio {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::pin::Pin;

    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use nix::sys::stat::{SFlag, fstat};
    use tokio::io::{AsyncRead, AsyncWrite};

    type Reader = Pin<Box<dyn AsyncRead + Send>>;
    type Writer = Pin<Box<dyn AsyncWrite + Send>>;

    /// `(stdin, stdout)` registered with the runtime's poller (both set non-blocking; see
    /// [`Flags`]), or `None` when either is something else (a terminal, a file), served the
    /// default way.
    pub(super) fn pollable() -> io::Result<Option<(Reader, Writer)>> {
        let (Some(input), Some(output)) = (kind(io::stdin().as_fd()), kind(io::stdout().as_fd())) else {
            return Ok(None);
        };
        let reader: Reader = match input {
            Kind::Fifo => Box::pin(tokio::net::unix::pipe::Receiver::from_file(dup(io::stdin().as_fd())?)?),
            Kind::Socket => Box::pin(socket(io::stdin().as_fd())?),
        };
        let writer: Writer = match output {
            Kind::Fifo => Box::pin(tokio::net::unix::pipe::Sender::from_file(dup(io::stdout().as_fd())?)?),
            Kind::Socket => Box::pin(socket(io::stdout().as_fd())?),
        };
        Ok(Some((reader, writer)))
    }

    /// The file status flags stdin and stdout had, put back on drop: they belong to the open
    /// file, which the process that spawned us may share.
    pub(super) struct Flags([Option<OFlag>; 2]);

    impl Flags {
        pub(super) fn save() -> Flags {
            Flags(
                [io::stdin().as_fd(), io::stdout().as_fd()]
                    .map(|fd| fcntl(fd, FcntlArg::F_GETFL).ok().map(OFlag::from_bits_retain)),
            )
        }
    }

    impl Drop for Flags {
        fn drop(&mut self) {
            for (fd, flags) in [io::stdin().as_fd(), io::stdout().as_fd()].into_iter().zip(self.0) {
                if let Some(flags) = flags {
                    let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
                }
            }
        }
    }

    enum Kind {
        Fifo,
        Socket,
    }

    fn kind(fd: BorrowedFd<'_>) -> Option<Kind> {
        let mode = SFlag::from_bits_truncate(fstat(fd).ok()?.st_mode) & SFlag::S_IFMT;
        match mode {
            SFlag::S_IFIFO => Some(Kind::Fifo),
            SFlag::S_IFSOCK => Some(Kind::Socket),
            _ => None,
        }
    }

    fn dup(fd: BorrowedFd<'_>) -> io::Result<File> {
        Ok(File::from(fd.try_clone_to_owned()?))
    }

    fn socket(fd: BorrowedFd<'_>) -> io::Result<tokio::net::UnixStream> {
        let stream = std::os::unix::net::UnixStream::from(OwnedFd::from(dup(fd)?));
        stream.set_nonblocking(true)?;
        tokio::net::UnixStream::from_std(stream)
    }
}

/// Serve one session on the rmcp side of [`check_lines`], then wait (briefly) for its last replies
/// to reach the client.
async fn serve_checked(
    server: Server,
    pair: (tokio::io::DuplexStream, tokio::io::DuplexStream),
    written: tokio::task::JoinHandle<()>,
) -> std::io::Result<()> {
    let service = server.serve(pair).await.map_err(std::io::Error::other)?;
    service.waiting().await.map_err(std::io::Error::other)?;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), written).await;
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rwfs-mcp")
        .enable_all()
        .build()
        .step("start the MCP runtime")
}

/// Copy stdin to the daemon's socket and its answers to stdout, until either side ends.
pub fn relay(link: &Path) -> Result<()> {
    let socket =
        UnixStream::connect(link).map_err(|e| Error::io("connect to the daemon", e).at(link.display().to_string()))?;
    let mut to_daemon = socket.try_clone().step("clone socket")?;
    let upstream = std::thread::Builder::new()
        .name("rwfs-relay".into())
        .spawn(move || {
            let copied = std::io::copy(&mut std::io::stdin().lock(), &mut to_daemon);
            let _ = to_daemon.shutdown(std::net::Shutdown::Write);
            copied
        })
        .step("start relay thread")?;
    let mut from_daemon = socket;
    let mut stdout = std::io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from_daemon.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("read from the daemon", e)),
        };
        stdout.write_all(&buf[..n]).step("write to stdout")?;
        stdout.flush().step("write to stdout")?;
    }
    // The daemon closed the session; stdin may still be open (the client decides when to stop).
    drop(upstream);
    Ok(())
}

/// Serve one MCP session on a daemon's socket connection whose first line (already read) is
/// `first`.
pub fn serve_connection(tools: Arc<Tools>, stream: UnixStream, first: Vec<u8>, peer: Peer) -> Result<()> {
    stream.set_read_timeout(None).step("socket timeout")?;
    stream.set_nonblocking(true).step("socket mode")?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().step("start the MCP runtime")?;
    let served = runtime.block_on(async move {
        let stream = tokio::net::UnixStream::from_std(stream)?;
        let (read, write) = stream.into_split();
        let read = tokio::io::AsyncReadExt::chain(std::io::Cursor::new(first), read);
        let (pair, written) = check_lines(read, write);
        serve_checked(Server::new(tools, peer), pair, written).await
    });
    runtime.shutdown_background();
    served.step("serve MCP on the socket")
}

/// The bearer token of the workspace's HTTP endpoint: read from the state directory, or
/// generated (and reported as new) on first use. It is written like every state file (temp,
/// fsync, rename, a row carrying its digest), created 0600, and hidden from the mount.
pub fn http_token(engine: &Engine) -> Result<(String, bool)> {
    let valid = |bytes: Vec<u8>| Some(String::from_utf8_lossy(&bytes).trim().to_string()).filter(|t| t.len() >= 32);
    let existing = engine.workspace().state_read(TOKEN_FILE)?;
    let create = existing.is_none();
    if let Some(token) = existing.and_then(valid) {
        return Ok((token, false));
    }
    let token = crate::http::new_token()?;
    match engine.state().write(TOKEN_FILE, format!("{token}\n").as_bytes(), create, true, &Actor::engine()) {
        Ok(_) => Ok((token, true)),
        // Created meanwhile: that one is the token.
        Err(e) if matches!(e.reason(), Reason::AlreadyExists { .. }) => engine
            .workspace()
            .state_read(TOKEN_FILE)?
            .and_then(valid)
            .map(|token| (token, false))
            .ok_or_else(|| Error::from(Reason::NotFound).at(format!("{STATE_DIR}/{TOKEN_FILE}"))),
        Err(e) => Err(e),
    }
}

/// The token file in the state directory.
pub const TOKEN_FILE: &str = crate::durable::layout::HTTP_TOKEN;

/// Serve streamable HTTP on `listener` (bound by the caller, so clients can connect as soon as
/// it returns) until `stop` is cancelled, within the limits of the environment
/// ([`crate::http::Limits`], `SessionLimits`).
///
/// With `page` (the daemon's `rwfs ui` routes), every other path is answered by it, under the
/// same token; only the page itself (`GET /`, which holds no data) is served without it.
pub fn serve_http(
    tools: Arc<Tools>,
    listener: std::net::TcpListener,
    token: String,
    page: Option<axum::Router>,
    stop: CancellationToken,
) -> Result<()> {
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

    let runtime = runtime()?;
    let served = runtime.block_on(async move {
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(crate::http::LOOPBACK_HOSTS)
            .with_allowed_origins(crate::http::LOOPBACK_ORIGINS.map(|o| format!("{o}:*")))
            .enforce_origin_validation()
            .with_cancellation_token(stop.child_token());
        let peer = Peer { pid: None, uid: None };
        let service = StreamableHttpService::new(
            move || Ok(Server::new(tools.clone(), peer)),
            CappedSessions::new(SessionLimits::from_env()).into(),
            config,
        );
        let app = axum::Router::new().nest_service("/mcp", service);
        let app = match page {
            Some(page) => app.merge(page),
            None => app,
        };
        let limits = crate::http::Limits::from_env();
        crate::http::serve(listener, app, &token, limits, stop, super::ConnectionSession::new).await
    });
    runtime.shutdown_background();
    served.step("serve MCP over HTTP")
}
