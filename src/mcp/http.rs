//! Streamable HTTP (`rwfs mount --mcp-http ADDR`), bounded against any client, with or
//! without the token.
//!
//! - **Connections** are capped ([`Limits::max_connections`], and never more than a quarter of
//!   the descriptor limit, so the mount always has descriptors). At the cap a new connection
//!   evicts the oldest one that has no request in flight, or is closed at once when all are busy.
//! - **Reads** are timed: the request head (also the wait for a first or a next request on an
//!   idle connection) and the body each within [`Limits::read_timeout`]; bodies are at most
//!   [`MAX_BODY`].
//! - **Sessions** (legacy streamable HTTP) expire after [`Limits::session_idle`] without a
//!   request, and are capped ([`Limits::max_sessions`]): a new one evicts the least recently
//!   used.
//!
//! The limits come from the environment (`RWFS_MCP_HTTP_MAX_CONNECTIONS`,
//! `RWFS_MCP_HTTP_READ_TIMEOUT_MS`, `RWFS_MCP_HTTP_MAX_SESSIONS`,
//! `RWFS_MCP_HTTP_SESSION_IDLE_SECS`). Authentication and the Host/Origin checks are in
//! `serve.rs`; this file only bounds.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use futures_util::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

/// The largest request body read.
pub const MAX_BODY: usize = 16 << 20;

/// What one HTTP listener allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub read_timeout: Duration,
    pub max_sessions: usize,
    pub session_idle: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 256,
            read_timeout: Duration::from_secs(10),
            max_sessions: 64,
            session_idle: Duration::from_secs(600),
        }
    }
}

impl Limits {
    /// The defaults, each overridden by its environment variable when that is a number.
    pub fn from_env() -> Limits {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok()).filter(|n| *n > 0);
        let d = Limits::default();
        Limits {
            max_connections: var("RWFS_MCP_HTTP_MAX_CONNECTIONS").map_or(d.max_connections, |n| n as usize),
            read_timeout: var("RWFS_MCP_HTTP_READ_TIMEOUT_MS").map_or(d.read_timeout, Duration::from_millis),
            max_sessions: var("RWFS_MCP_HTTP_MAX_SESSIONS").map_or(d.max_sessions, |n| n as usize),
            session_idle: var("RWFS_MCP_HTTP_SESSION_IDLE_SECS").map_or(d.session_idle, Duration::from_secs),
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

/// The open connections, oldest first.
#[derive(Default)]
pub struct Connections {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Slot>>,
}

struct Slot {
    in_flight: Arc<AtomicUsize>,
    evict: CancellationToken,
}

/// A connection let in; it leaves the table when dropped.
pub struct Admitted {
    id: u64,
    table: Arc<Connections>,
    in_flight: Arc<AtomicUsize>,
    /// Cancelled when a newer connection took this one's place.
    pub evicted: CancellationToken,
}

impl Connections {
    /// Let a new connection in under `cap`, evicting the oldest idle one if need be; `None`
    /// when every connection has a request in flight.
    pub fn admit(self: &Arc<Self>, cap: usize) -> Option<Admitted> {
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
    pub fn request(&self) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.in_flight.clone())
    }
}

/// A request in flight on a connection (its response body included).
pub struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `body`, holding `guard` until it is finished or dropped (a streamed response is in flight
/// as long as it streams).
pub fn hold_until_sent(body: Body, guard: InFlight) -> Body {
    Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _ = &guard;
        chunk
    }))
}

/// rmcp's session manager with an idle expiry and a cap.
pub struct CappedSessions {
    inner: LocalSessionManager,
    last_used: Mutex<HashMap<SessionId, Instant>>,
    limits: Limits,
}

impl CappedSessions {
    pub fn new(limits: Limits) -> CappedSessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.session_idle);
        CappedSessions { inner, last_used: Mutex::default(), limits }
    }

    fn last_used(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Instant>> {
        self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Note a use of `id`; false when it had expired (it is closed then).
    async fn touch(&self, id: &SessionId) -> bool {
        let expired = {
            let mut last_used = self.last_used();
            match last_used.get_mut(id) {
                Some(at) if at.elapsed() < self.limits.session_idle => {
                    *at = Instant::now();
                    false
                }
                Some(_) => true,
                None => false,
            }
        };
        if expired {
            self.last_used().remove(id);
            let _ = self.inner.close_session(id).await;
        }
        !expired
    }

    /// Close every expired session, then the least recently used until one more fits.
    async fn make_room(&self) {
        let doomed: Vec<SessionId> = {
            let last_used = self.last_used();
            let mut by_age: Vec<(&SessionId, &Instant)> = last_used.iter().collect();
            by_age.sort_by_key(|(_, at)| **at);
            let over = (by_age.len() + 1).saturating_sub(self.limits.max_sessions);
            by_age
                .iter()
                .enumerate()
                .filter(|(i, (_, at))| *i < over || at.elapsed() >= self.limits.session_idle)
                .map(|(_, (id, _))| (*id).clone())
                .collect()
        };
        for id in doomed {
            self.last_used().remove(&id);
            let _ = self.inner.close_session(&id).await;
        }
    }
}

type Inner = LocalSessionManager;

impl SessionManager for CappedSessions {
    type Error = <Inner as SessionManager>::Error;
    type Transport = <Inner as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.make_room().await;
        let (id, transport) = self.inner.create_session().await?;
        self.last_used().insert(id.clone(), Instant::now());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id).await;
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        if !self.touch(id).await {
            return Ok(false);
        }
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.last_used().remove(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id).await;
        SessionManager::create_stream(&self.inner, id, message).await
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.touch(id).await;
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id).await;
        SessionManager::create_standalone_stream(&self.inner, id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id).await;
        SessionManager::resume(&self.inner, id, last_event_id).await
    }
}
