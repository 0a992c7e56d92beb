//! Loopback HTTP, written once for every endpoint rwfs serves on it: MCP over streamable HTTP
//! (`mcp/serve.rs`) and the history page (`app/ui.rs`), alone or side by side on one listener.
//!
//! - **Who may call** ([`check_access`]): a loopback `Host` (DNS rebinding), a loopback `Origin`
//!   when a browser sends one (another site's page), and the bearer token in `Authorization`,
//!   compared in constant time (`subtle`, through [`crate::sha::same_secret`]) — on every request
//!   but `GET /` (the page, which holds no data).
//! - **How much** ([`Limits`], `Connections`): connections are capped (never more than a
//!   quarter of the descriptor limit, so the mount keeps descriptors); at the cap a new
//!   connection evicts the oldest one with no request in flight, or is closed at once. The
//!   request head (also the wait on an idle connection) and the body are each read within
//!   [`Limits::read_timeout`]; bodies are at most [`MAX_BODY`], before any work.
//! - **The serve loop** ([`serve`]): accept, admit, serve HTTP/1.1 with hyper, until stopped.
//!
//! An endpoint is an `axum::Router` of its own routes; this file knows none of them, nor MCP's
//! sessions (`mcp/http.rs` bounds those).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, IoContext, Result};

/// The largest request body read, on any route (a route may allow less).
pub const MAX_BODY: usize = 16 << 20;

/// The names a loopback endpoint answers to in `Host` (with any port).
pub const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];
/// The browser origins allowed to call a loopback endpoint (with any port).
pub const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost", "http://127.0.0.1", "http://[::1]"];

/// What one listener allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_connections: 256, read_timeout: Duration::from_secs(10) }
    }
}

impl Limits {
    /// The defaults, each overridden by its environment variable when that is a positive number
    /// (`RWFS_MCP_HTTP_MAX_CONNECTIONS`, `RWFS_MCP_HTTP_READ_TIMEOUT_MS`; the names predate the
    /// page, which shares them).
    pub fn from_env() -> Limits {
        let d = Limits::default();
        Limits {
            max_connections: env_number("RWFS_MCP_HTTP_MAX_CONNECTIONS").map_or(d.max_connections, |n| n as usize),
            read_timeout: env_number("RWFS_MCP_HTTP_READ_TIMEOUT_MS").map_or(d.read_timeout, Duration::from_millis),
        }
    }

    /// The connection cap now: a quarter of the descriptor limit at most (read each time: a
    /// limit can change under a running process).
    pub fn connection_cap(&self) -> usize {
        use nix::sys::resource::{Resource, getrlimit};
        let quarter = getrlimit(Resource::RLIMIT_NOFILE).map_or(u64::MAX, |(soft, _)| soft / 4);
        self.max_connections.min(usize::try_from(quarter).unwrap_or(usize::MAX)).max(1)
    }
}

/// An environment variable holding a positive number.
pub fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok()).filter(|n| *n > 0)
}

/// A fresh random token (64 hex digits).
pub fn new_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::io("generate token", std::io::Error::other(e.to_string())))?;
    Ok(hex::encode(bytes))
}

/// A runtime for one listener's thread.
pub fn runtime(name: &str) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .step("start the HTTP runtime")
}

/// Serve `app` on `listener` (bound by the caller, so clients can connect as soon as it is
/// bound) until `stop` is cancelled: every request passes [`check_access`] with `token` and has
/// its body read within the limits before `app` sees it. `per_connection` makes a value put in
/// the extensions of every request of one connection (MCP's per-connection session).
pub async fn serve<E: Clone + Send + Sync + 'static>(
    listener: std::net::TcpListener,
    app: axum::Router,
    token: &str,
    limits: Limits,
    stop: CancellationToken,
    per_connection: fn() -> E,
) -> std::io::Result<()> {
    let app = guarded(app, format!("Bearer {token}"), limits);
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let connections = Arc::new(Connections::default());
    while let Some(stream) = accept(&listener, &stop).await {
        let Some(admitted) = connections.admit(limits.connection_cap()) else {
            tracing::debug!("HTTP: every connection busy, one refused");
            continue;
        };
        let extension = per_connection();
        tokio::spawn(serve_connection(stream, admitted, app.clone(), extension, limits, stop.clone()));
    }
    Ok(())
}

/// `app` behind the access checks and the body's limits.
fn guarded(app: axum::Router, expected: String, limits: Limits) -> axum::Router {
    let expected = Arc::new(expected);
    app.layer(axum::middleware::from_fn(move |request: axum::extract::Request, next: axum::middleware::Next| {
        let expected = expected.clone();
        async move {
            let page = request.method() == Method::GET && request.uri().path() == "/";
            if let Err((status, why)) = check_access(request.headers(), (!page).then_some(expected.as_str())) {
                return refuse(status, why);
            }
            // The whole body within the read timeout, before any work.
            let (parts, body) = request.into_parts();
            match tokio::time::timeout(limits.read_timeout, axum::body::to_bytes(body, MAX_BODY)).await {
                Ok(Ok(bytes)) => next.run(axum::extract::Request::from_parts(parts, bytes.into())).await,
                Ok(Err(_)) => refuse(StatusCode::PAYLOAD_TOO_LARGE, "body too large or broken\n"),
                Err(_) => refuse(StatusCode::REQUEST_TIMEOUT, "body not sent in time\n"),
            }
        }
    }))
}

/// The next connection on `listener`, or `None` once `stop` is cancelled. A failed accept (out
/// of descriptors or memory) backs off rather than spins.
async fn accept(listener: &tokio::net::TcpListener, stop: &CancellationToken) -> Option<tokio::net::TcpStream> {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return None,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => return Some(stream),
                Err(e) => {
                    tracing::warn!("HTTP accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// One HTTP/1.1 connection, until it ends, is evicted, times out reading, or `stop`.
async fn serve_connection<E: Clone + Send + Sync + 'static>(
    stream: tokio::net::TcpStream,
    admitted: Admitted,
    app: axum::Router,
    extension: E,
    limits: Limits,
    stop: CancellationToken,
) {
    let admitted = Arc::new(admitted);
    let evicted = admitted.evicted.clone();
    let service = hyper::service::service_fn(move |mut request: axum::http::Request<hyper::body::Incoming>| {
        let in_flight = admitted.request();
        request.extensions_mut().insert(extension.clone());
        let mut app = app.clone();
        async move {
            let response = tower_service::Service::call(&mut app, request.map(Body::new)).await?;
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

/// The one decision on who may call rwfs's loopback HTTP endpoints: `Host` must be a loopback
/// name (a page on another site resolving its name to 127.0.0.1 — DNS rebinding — sends its own
/// name); an `Origin`, when a browser sends one, must be a loopback origin (a page of another
/// site calling in); and with `expected` (the whole `Bearer <token>` value) the `Authorization`
/// header must carry it. A cross-site page cannot set that header without a CORS preflight,
/// which nothing here answers: a request that needs the token is safe against cross-site
/// requests.
pub fn check_access(
    headers: &HeaderMap,
    expected: Option<&str>,
) -> std::result::Result<(), (StatusCode, &'static str)> {
    let text = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
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
pub fn refuse(status: StatusCode, why: &'static str) -> Response {
    let mut response = (status, why).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    } else {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The open connections, oldest first.
#[derive(Default)]
struct Connections {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Slot>>,
}

struct Slot {
    in_flight: Arc<AtomicUsize>,
    evict: CancellationToken,
}

/// A connection let in; it leaves the table when dropped.
struct Admitted {
    id: u64,
    table: Arc<Connections>,
    in_flight: Arc<AtomicUsize>,
    /// Cancelled when a newer connection took this one's place.
    evicted: CancellationToken,
}

impl Connections {
    /// Let a new connection in under `cap`, evicting the oldest idle one if need be; `None`
    /// when every connection has a request in flight.
    fn admit(self: &Arc<Self>, cap: usize) -> Option<Admitted> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        while open.len() >= cap {
            let oldest = open.iter().find(|(_, s)| s.in_flight.load(Ordering::Acquire) == 0).map(|(id, _)| *id)?;
            if let Some(slot) = open.remove(&oldest) {
                slot.evict.cancel();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Slot { in_flight: Arc::default(), evict: CancellationToken::new() };
        let admitted =
            Admitted { id, table: self.clone(), in_flight: slot.in_flight.clone(), evicted: slot.evict.clone() };
        open.insert(id, slot);
        Some(admitted)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.table.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

impl Admitted {
    /// Mark a request in flight until the returned guard drops.
    fn request(&self) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.in_flight.clone())
    }
}

/// A request in flight on a connection (its response body included).
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `body`, holding `guard` until it is finished or dropped (a streamed response is in flight
/// as long as it streams).
fn hold_until_sent(body: Body, guard: InFlight) -> Body {
    Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _ = &guard;
        chunk
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_idle_connection_is_evicted_and_a_busy_table_refuses() {
        let table = Arc::new(Connections::default());
        let (oldest, busy) = (table.admit(2).unwrap(), table.admit(2).unwrap());
        let _request = busy.request();
        let newest = table.admit(2).expect("the oldest idle connection makes room");
        assert!(oldest.evicted.is_cancelled());
        assert!(!busy.evicted.is_cancelled(), "a connection with a request in flight stays");
        let _also = newest.request();
        assert!(table.admit(2).is_none(), "every connection busy: the new one is refused");
    }

    #[test]
    fn only_a_loopback_host_and_origin_with_the_token_pass() {
        let headers = |pairs: &[(header::HeaderName, &'static str)]| {
            pairs.iter().map(|(k, v)| (k.clone(), HeaderValue::from_static(v))).collect::<HeaderMap>()
        };
        let ok = headers(&[(header::HOST, "127.0.0.1:8080"), (header::AUTHORIZATION, "Bearer t")]);
        assert_eq!(check_access(&ok, Some("Bearer t")), Ok(()));
        assert_eq!(check_access(&ok, Some("Bearer u")).unwrap_err().0, StatusCode::UNAUTHORIZED);
        let rebound = headers(&[(header::HOST, "evil.example:80"), (header::AUTHORIZATION, "Bearer t")]);
        assert_eq!(check_access(&rebound, Some("Bearer t")).unwrap_err().0, StatusCode::FORBIDDEN);
        let cross = headers(&[(header::HOST, "localhost"), (header::ORIGIN, "http://evil.example")]);
        assert_eq!(check_access(&cross, None).unwrap_err().0, StatusCode::FORBIDDEN);
        let same = headers(&[(header::HOST, "[::1]:9"), (header::ORIGIN, "http://[::1]:9")]);
        assert_eq!(check_access(&same, None), Ok(()));
    }
}
