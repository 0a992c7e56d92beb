//! MCP's sessions over streamable HTTP (`rwfs mount --mcp-http ADDR`), bounded against any
//! client, with or without the token: a session (legacy streamable HTTP) expires after
//! [`SessionLimits::idle`] without a request, and sessions are capped
//! ([`SessionLimits::max`]): a new one evicts the least recently used.
//!
//! The limits come from the environment (`RWFS_MCP_HTTP_MAX_SESSIONS`,
//! `RWFS_MCP_HTTP_SESSION_IDLE_SECS`). Connections, read times, bodies, authentication and the
//! Host/Origin checks are the loopback HTTP module's (`crate::http`), shared with the page.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};

use crate::http::env_number;

/// How many MCP sessions one listener keeps, and for how long without a request.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub max: usize,
    pub idle: Duration,
}

impl SessionLimits {
    /// 64 sessions, 10 minutes, each overridden by its environment variable when that is a
    /// positive number.
    pub fn from_env() -> SessionLimits {
        SessionLimits {
            max: env_number("RWFS_MCP_HTTP_MAX_SESSIONS").map_or(64, |n| n as usize),
            idle: Duration::from_secs(env_number("RWFS_MCP_HTTP_SESSION_IDLE_SECS").unwrap_or(600)),
        }
    }
}

/// rmcp's session manager with an idle expiry and a cap.
pub struct CappedSessions {
    inner: LocalSessionManager,
    last_used: Mutex<HashMap<SessionId, Instant>>,
    limits: SessionLimits,
}

impl CappedSessions {
    pub fn new(limits: SessionLimits) -> CappedSessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.idle);
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
                Some(at) if at.elapsed() < self.limits.idle => {
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
            let over = (by_age.len() + 1).saturating_sub(self.limits.max);
            by_age
                .iter()
                .enumerate()
                .filter(|(i, (_, at))| *i < over || at.elapsed() >= self.limits.idle)
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
