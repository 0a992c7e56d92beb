//! `rwfs ui`: the time-travel page, served on a loopback address.
//!
//! ```text
//!   GET  /                 the page (ui.html, embedded: no CDN, no build step); no data in it
//!   GET  /api/sessions     every session (journal::query::sessions)
//!   GET  /api/rows         ?limit=N&before=SEQ&session=S&path=P: the newest rows, one page
//!                          (query::tail); `next` is the `before` of the page after it
//!   GET  /api/feed         ?after=OFFSET: the rows appended past OFFSET as they arrive, as
//!                          text/event-stream lines (the journal's follow feed)
//!   GET  /api/history      ?path=P: the file's versions (Workspace::history)
//!   GET  /api/diff         ?path=P&from=REV&to=REV: a unified diff (Workspace::diff); versions
//!                          over engine::SHOWN_MAX (4 MiB) are not compared, and `note` says so
//!   GET  /api/blocked      ?seq=N: the shown part of a refusal's envelope (rule, line,
//!                          suggested action; never the matched text)
//!   POST /api/rewind       {"session"|"to_time"|"seq", "confirm"}: the plan, or the rewind
//! ```
//!
//! Every request passes `mcp::check_access` — the one decision on loopback HTTP callers shared
//! with MCP over HTTP: a loopback `Host`, a loopback `Origin` when one is sent, and for
//! `/api/` the bearer token in the `Authorization` header. The page takes the token from the
//! URL's fragment (never sent to the server, so never in a log) and sends it as that header,
//! which a cross-site page cannot do: no request that reads or changes anything can be forged
//! from another site. The token is random per `rwfs ui` process and printed once with the URL.
//!
//! This file only translates HTTP to the engine's and the journal's questions: every answer is
//! theirs, and a page is at most [`MAX_PAGE`] rows (the page never gets the whole journal).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::engine::{Rev, Rewind, Workspace};
use crate::error::{Error, IoContext, Result};
use crate::journal::Row;
use crate::journal::query::{self, Filter, Selection};

/// The page: HTML, CSS and script in one file.
const PAGE: &str = include_str!("ui.html");
/// The most rows one page of `/api/rows` carries.
pub const MAX_PAGE: usize = 500;
/// The largest request body read (a rewind request).
const MAX_BODY: usize = 64 << 10;

/// Performs a rewind (or plans it, for a dry run) on the workspace's engine: the daemon's when
/// it is mounted, else one opened for it.
pub type Rewinder = Box<dyn Fn(&Rewind) -> Result<Value> + Send + Sync>;
/// Hands the journal's lines past an offset to a callback as they arrive, until it returns
/// `false`.
pub type Follower = Box<dyn Fn(u64, &mut dyn FnMut(&[u8]) -> bool) -> Result<()> + Send + Sync>;

/// What the page is served from.
pub struct Ui {
    pub ws: Workspace,
    /// `Bearer <token>`.
    pub bearer: String,
    pub rewind: Rewinder,
    pub follow: Follower,
}

/// A fresh random token for one `rwfs ui` process.
pub fn new_token() -> Result<String> {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).map_err(|e| Error::io("generate token", std::io::Error::other(e.to_string())))?;
    Ok(hex::encode(bytes))
}

/// Serve the page on `listener` (bound by the caller) until `stop` is cancelled.
pub fn serve(ui: Arc<Ui>, listener: std::net::TcpListener, stop: CancellationToken) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .step("start the page's runtime")?;
    let served: std::io::Result<()> = runtime.block_on(async move {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        while let Some(stream) = crate::mcp::accept(&listener, &stop).await {
            let ui = ui.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: axum::http::Request<hyper::body::Incoming>| {
                    let ui = ui.clone();
                    async move { Ok::<_, std::convert::Infallible>(handle(ui, request.map(Body::new)).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(std::time::Duration::from_secs(10))
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
        Ok(())
    });
    runtime.shutdown_background();
    served.step("serve the page")
}

/// The page's routes, to serve beside MCP over HTTP (the daemon's listener).
pub fn router(ui: Arc<Ui>) -> axum::Router {
    axum::Router::new().fallback(move |request: axum::extract::Request| {
        let ui = ui.clone();
        async move { handle(ui, request).await }
    })
}

/// The page of a daemon's engine: its workspace, rewinds on it, its journal's feed; the
/// token of its HTTP endpoint.
pub fn on_engine(engine: &Arc<crate::engine::Engine>, token: &str) -> Result<Arc<Ui>> {
    let (rewinder, follower) = (engine.clone(), engine.clone());
    let actor = crate::journal::Actor::this_process(crate::journal::Via::Cli, "rwfs-ui");
    Ok(Arc::new(Ui {
        ws: engine.workspace().try_clone()?,
        bearer: format!("Bearer {token}"),
        rewind: Box::new(move |rewind| rewinder.rewind(rewind, &actor).map(|r| super::control::rewound_json(&r))),
        follow: Box::new(move |offset, line| {
            let journal = follower.state_dir_path()?.join(crate::journal::JOURNAL_FILE);
            crate::journal::follow::follow(&journal, offset, None, |l| line(l)).step("follow journal")
        }),
    }))
}

/// One request.
pub async fn handle(ui: Arc<Ui>, request: axum::http::Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let api = parts.uri.path().starts_with("/api/");
    if let Err((status, why)) = crate::mcp::check_access(&parts.headers, api.then_some(ui.bearer.as_str())) {
        return crate::mcp::refuse(status, why);
    }
    let params = params(parts.uri.query().unwrap_or(""));
    let route = (parts.method.clone(), parts.uri.path().to_string());
    if route == (Method::GET, "/".to_string()) {
        let mut response = PAGE.into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"),
        );
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
        return response;
    }
    if route == (Method::GET, "/api/feed".to_string()) {
        return feed(ui, &params);
    }
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(_) => return crate::mcp::refuse(StatusCode::PAYLOAD_TOO_LARGE, "body too large\n"),
    };
    let answer = tokio::task::spawn_blocking(move || answer(&ui, &route.0, &route.1, &params, &body)).await;
    match answer {
        Ok(Ok(value)) => json_response(StatusCode::OK, &value),
        Ok(Err(e)) => {
            let status = match (e.reason(), e.kind()) {
                (crate::Reason::NotFound, _) => StatusCode::NOT_FOUND,
                (_, crate::ErrorKind::PolicyViolation | crate::ErrorKind::StalePrecondition) => StatusCode::BAD_REQUEST,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            json_response(status, &json!({"ok": false, "error": e.to_string()}))
        }
        Err(_) => json_response(StatusCode::INTERNAL_SERVER_ERROR, &json!({"ok": false, "error": "request failed"})),
    }
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The answer of a JSON route.
fn answer(ui: &Ui, method: &Method, path: &str, params: &BTreeMap<String, String>, body: &[u8]) -> Result<Value> {
    let ws = &ui.ws;
    let param = |name: &str| params.get(name).filter(|v| !v.is_empty()).cloned();
    let number = |name: &str| -> Result<Option<u64>> {
        param(name)
            .map(|v| v.parse::<u64>().map_err(|_| invalid("a number parameter (limit, before, seq, after)")))
            .transpose()
    };
    match (method.as_str(), path) {
        ("GET", "/api/sessions") => Ok(json!({"sessions": query::sessions(ws)?})),
        ("GET", "/api/rows") => {
            let limit = number("limit")?.map_or(100, |n| n as usize).clamp(1, MAX_PAGE);
            let filter = Filter {
                path: param("path"),
                session: param("session"),
                since: None,
                before: number("before")?,
                // As `rwfs log`: editors' swap files and temporary copies only with `all=1` or
                // when a path is asked for.
                leave_out: if param("all").is_none() && param("path").is_none() { Some(left_out(ws)?) } else { None },
            };
            let tail = query::tail(ws, &filter, limit)?;
            let next = if tail.rows.len() == limit { tail.rows.first().and_then(|r| r.seq) } else { None };
            Ok(json!({"rows": tail.rows, "next": next, "len": tail.len, "problems": tail.problems}))
        }
        ("GET", "/api/history") => {
            let path = param("path").ok_or_else(|| invalid("path parameter"))?;
            let history = ws.history(&path)?;
            let versions: Vec<Value> = history
                .versions
                .iter()
                .map(|v| {
                    json!({
                        "seq": v.entry.row.seq, "ts": v.entry.row.ts, "op": v.op().as_str(), "state": v.state,
                        "availability": format!("{:?}", v.availability).to_lowercase(),
                        "session": v.entry.row.session, "who": who(&v.entry.row), "bytes": v.entry.row.bytes,
                    })
                })
                .collect();
            Ok(json!({"path": history.path.as_str(), "current": history.current, "versions": versions}))
        }
        ("GET", "/api/diff") => {
            let path = param("path").ok_or_else(|| invalid("path parameter"))?;
            let rev = |name: &str| param(name).map(|s| Rev::parse(&s, parse_time)).transpose();
            let d = ws.diff(&path, rev("from")?.as_ref(), rev("to")?.as_ref(), Some(crate::engine::SHOWN_MAX))?;
            Ok(json!(d))
        }
        ("GET", "/api/blocked") => {
            let seq = number("seq")?.ok_or_else(|| invalid("seq parameter"))?;
            let row = query::row_at_seq(ws, seq)?
                .ok_or_else(|| Error::from(crate::Reason::NotFound).at(format!("seq {seq}")))?;
            Ok(json!({"envelope": ws.blocked_envelope(&row)?}))
        }
        ("POST", "/api/rewind") => {
            let request: RewindRequest = serde_json::from_slice(body)
                .map_err(|_| invalid("rewind request (JSON: session, to_time or seq; confirm)"))?;
            let selection = match (request.session, request.to_time, request.seq) {
                (Some(s), None, None) => Selection::Session(s),
                (None, Some(t), None) => Selection::AfterTime(parse_time(&t)?),
                (None, None, Some(seq)) => Selection::AfterSeq(seq),
                _ => return Err(invalid("rewind request: exactly one of session, to_time, seq")),
            };
            (ui.rewind)(&Rewind { selection, globs: vec![], force: false, dry_run: !request.confirm })
        }
        _ => Err(Error::from(crate::Reason::NotFound).at(path.to_string())),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RewindRequest {
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    to_time: Option<String>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    confirm: bool,
}

fn invalid(what: &'static str) -> Error {
    crate::Reason::InvalidArgument { what }.into()
}

fn parse_time(s: &str) -> Result<std::time::SystemTime> {
    crate::time::parse_at(s, std::time::SystemTime::now())
}

/// Who wrote a row: `comm[pid]`, or its caller.
fn who(row: &Row) -> String {
    match (&row.comm, row.pid) {
        (Some(comm), Some(pid)) => format!("{comm}[{pid}]"),
        _ => row.caller.clone(),
    }
}

/// The rows the timeline leaves out, as `rwfs log` does: the policy's `editor_files` (and,
/// through [`Filter`], temporary copies renamed over their file), refusals excepted.
fn left_out(ws: &Workspace) -> Result<globset::GlobSet> {
    Ok(ws.policy(None)?.editor_files().clone())
}

/// `/api/feed`: rows past `after` as server-sent events, one `data:` line per journal row; a
/// row the timeline leaves out ([`left_out`]) is sent as `event: hidden`, so the page still
/// counts its bytes. The follower runs on a thread of its own and ends when the page goes away
/// (at the next row).
fn feed(ui: Arc<Ui>, params: &BTreeMap<String, String>) -> Response {
    let after = params.get("after").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(256);
    let shown = Filter { leave_out: left_out(&ui.ws).ok(), ..Filter::default() };
    std::thread::spawn(move || {
        let _ = (ui.follow)(after, &mut |line| {
            let hidden = serde_json::from_slice::<Row>(line).is_ok_and(|row| !shown.matches(&row));
            let kind: &[u8] = if hidden { b"event: hidden\n" } else { b"" };
            let event = [kind, b"data: ".as_slice(), line, b"\n\n"].concat();
            tx.blocking_send(event).is_ok()
        });
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(event)), rx))
    });
    let mut response = Body::from_stream(stream).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A query string's parameters, decoded as a form (`+` a space, `%XX` a byte).
fn params(query: &str) -> BTreeMap<String, String> {
    let decode = |s: &str| percent_encoding::percent_decode_str(&s.replace('+', " ")).decode_utf8_lossy().into_owned();
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}
