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
//!   Connections, read times, bodies and sessions are bounded (`http.rs`).
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

use super::http::{Admitted, CappedSessions, Connections, Limits, MAX_BODY, hold_until_sent};
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
    let existing = engine.state_read(TOKEN_FILE)?;
    let create = existing.is_none();
    if let Some(token) = existing.and_then(valid) {
        return Ok((token, false));
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::io("generate token", std::io::Error::other(e.to_string())))?;
    let token = hex::encode(bytes);
    match engine.state_write(TOKEN_FILE, format!("{token}\n").as_bytes(), create, true, &Actor::engine()) {
        Ok(_) => Ok((token, true)),
        // Created meanwhile: that one is the token.
        Err(e) if matches!(e.reason(), Reason::AlreadyExists { .. }) => engine
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
/// it returns) until `stop` is cancelled, within the [`Limits`] of the environment.
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

    let limits = Limits::from_env();
    let runtime = runtime()?;
    let served = runtime.block_on(async move {
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(LOOPBACK_HOSTS)
            .with_allowed_origins(LOOPBACK_ORIGINS.map(|o| format!("{o}:*")))
            .enforce_origin_validation()
            .with_cancellation_token(stop.child_token());
        let peer = Peer { pid: None, uid: None };
        let service = StreamableHttpService::new(
            move || Ok(Server::new(tools.clone(), peer)),
            CappedSessions::new(limits).into(),
            config,
        );
        let expected = Arc::new(format!("Bearer {token}"));
        let app = axum::Router::new().nest_service("/mcp", service);
        let app = match page {
            Some(page) => app.merge(page),
            None => app,
        };
        let app = app.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let expected = expected.clone();
                async move {
                    let page = request.method() == axum::http::Method::GET && request.uri().path() == "/";
                    if let Err((status, why)) = check_access(request.headers(), (!page).then_some(expected.as_str())) {
                        return refuse(status, why);
                    }
                    // The whole body within the read timeout, before any work.
                    let (parts, body) = request.into_parts();
                    match tokio::time::timeout(limits.read_timeout, axum::body::to_bytes(body, MAX_BODY)).await {
                        Ok(Ok(bytes)) => next.run(axum::extract::Request::from_parts(parts, bytes.into())).await,
                        Ok(Err(_)) => refuse(axum::http::StatusCode::PAYLOAD_TOO_LARGE, "body too large or broken\n"),
                        Err(_) => refuse(axum::http::StatusCode::REQUEST_TIMEOUT, "body not sent in time\n"),
                    }
                }
            },
        ));
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let connections = Arc::new(Connections::default());
        while let Some(stream) = accept(&listener, &stop).await {
            let Some(admitted) = connections.admit(limits.connection_cap()) else {
                tracing::debug!("HTTP: every connection busy, one refused");
                continue;
            };
            tokio::spawn(serve_http_connection(stream, admitted, app.clone(), limits, stop.clone()));
        }
        Ok(())
    });
    runtime.shutdown_background();
    served.step("serve MCP over HTTP")
}

/// The next connection on `listener`, or `None` once `stop` is cancelled. A failed accept (out
/// of descriptors or memory) backs off rather than spins.
pub async fn accept(listener: &tokio::net::TcpListener, stop: &CancellationToken) -> Option<tokio::net::TcpStream> {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return None,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => return Some(stream),
                Err(e) => {
                    tracing::warn!("HTTP accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// One HTTP/1.1 connection, until it ends, is evicted, times out reading, or `stop`.
async fn serve_http_connection(
    stream: tokio::net::TcpStream,
    admitted: Admitted,
    app: axum::Router,
    limits: Limits,
    stop: CancellationToken,
) {
    let admitted = Arc::new(admitted);
    let evicted = admitted.evicted.clone();
    let session = super::ConnectionSession::new();
    let service = hyper::service::service_fn(move |mut request: axum::http::Request<hyper::body::Incoming>| {
        let in_flight = admitted.request();
        request.extensions_mut().insert(session);
        let mut app = app.clone();
        async move {
            let response = tower_service::Service::call(&mut app, request.map(axum::body::Body::new)).await?;
            Ok::<_, std::convert::Infallible>(response.map(|body| hold_until_sent(body, in_flight)))
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.read_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    tokio::select! {
        _ = connection => {}
        _ = evicted.cancelled() => {}
        _ = stop.cancelled() => {}
    }
}

/// The names a loopback endpoint answers to in `Host` (with any port).
pub const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];
/// The browser origins allowed to call a loopback endpoint (with any port).
pub const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost", "http://127.0.0.1", "http://[::1]"];

/// The one decision on who may call rwfs's loopback HTTP endpoints (MCP over HTTP, the page of
/// `rwfs ui`): `Host` must be a loopback name (a page on another site resolving its name to
/// 127.0.0.1 — DNS rebinding — sends its own name); an `Origin`, when a browser sends one, must
/// be a loopback origin (a page of another site calling in); and with `expected` (the whole
/// `Bearer <token>` value) the `Authorization` header must carry it. A cross-site page cannot
/// set that header without a CORS preflight, which nothing here answers: a request that needs
/// the token is safe against cross-site requests.
pub fn check_access(
    headers: &axum::http::HeaderMap,
    expected: Option<&str>,
) -> std::result::Result<(), (axum::http::StatusCode, &'static str)> {
    use axum::http::{StatusCode, header};
    let text = |name| headers.get(name).and_then(|v: &axum::http::HeaderValue| v.to_str().ok());
    let host = text(header::HOST).unwrap_or("");
    let host_name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !name.is_empty() => name,
        _ => host,
    };
    if !LOOPBACK_HOSTS.contains(&host_name) {
        return Err((StatusCode::FORBIDDEN, "Host is not a loopback name; open the page at 127.0.0.1 or localhost\n"));
    }
    if let Some(origin) = text(header::ORIGIN) {
        let name = origin.rsplit_once(':').filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()));
        let name = name.map_or(origin, |(name, _)| name);
        if !LOOPBACK_ORIGINS.contains(&name) {
            return Err((StatusCode::FORBIDDEN, "cross-origin request refused; use the page rwfs serves\n"));
        }
    }
    if let Some(expected) = expected {
        let given = text(header::AUTHORIZATION);
        if !given.is_some_and(|g| crate::sha::same_secret(g.as_bytes(), expected.as_bytes())) {
            return Err((
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token; use the URL with the token rwfs printed\n",
            ));
        }
    }
    Ok(())
}

/// A refusal: `why` as text, with the headers its status needs.
pub fn refuse(status: axum::http::StatusCode, why: &'static str) -> axum::response::Response {
    let mut response = axum::response::IntoResponse::into_response((status, why));
    if status == axum::http::StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
    } else {
        response.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    response
}
