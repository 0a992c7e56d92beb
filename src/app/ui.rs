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
//!                          over history::SHOWN_MAX (4 MiB) are not compared, and `note` says so
//!   GET  /api/blame        ?path=P: the current version's lines, each with the row that
//!                          introduced it (Workspace::blame); at most MAX_BLAME_LINES lines,
//!                          `total_lines` and `note` say when there are more
//!   GET  /api/blocked      ?seq=N: the shown part of a refusal's envelope (rule, line,
//!                          suggested action; never the matched text)
//!   POST /api/rewind       {"session"|"to_time"|"seq", "confirm"}: the plan, or the rewind
//!   GET  /api/approvals    the versions waiting for a person's approval (history/approvals.rs),
//!                          each with its diff against its file's current version
//!   POST /api/approvals    {"id", "decision": "approve"|"deny"}: the decision, journaled as the
//!                          page's process (caller `rwfs-ui`); approve without `--force`
//! ```
//!
//! Every request passes the loopback HTTP module's checks (`crate::http::check_access`, shared
//! with MCP over HTTP): a loopback `Host`, a loopback `Origin` when one is sent, and on every
//! route but `GET /` the bearer token in the `Authorization` header. The page takes the token
//! from the URL's fragment (never sent to the server, so never in a log) and sends it as that
//! header, which a cross-site page cannot do: no request that reads or changes anything can be
//! forged from another site. The token is random per `rwfs ui` process and printed once with
//! the URL. Connections are capped as MCP's are ([`crate::http::Limits`]).
//!
//! This file only translates HTTP to the engine's and the journal's questions: every answer is
//! theirs, and a page is at most [`MAX_PAGE`] rows (the page never gets the whole journal).

use std::str::FromStr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::engine::Rewind;
use crate::error::{Error, IoContext, Result};
use crate::history::{Rev, Workspace};
use crate::journal::Row;
use crate::journal::query::{self, Filter, Selection};

/// The page: HTML, CSS and script in one file.
const PAGE: &str = include_str!("ui.html");
/// The most rows one page of `/api/rows` carries.
pub const MAX_PAGE: usize = 500;
/// The most lines one `/api/blame` answer carries.
pub const MAX_BLAME_LINES: usize = 5_000;
/// The largest request body read (a rewind request).
const MAX_BODY: usize = 64 << 10;

/// Performs a rewind (or plans it, for a dry run) on the workspace's engine: the daemon's when
/// it is mounted, else one opened for it.
pub type Rewinder = Box<dyn Fn(&Rewind) -> Result<Value> + Send + Sync>;
/// Hands the journal's lines past an offset to a callback as they arrive, until it returns
/// `false`.
pub type Follower = Box<dyn Fn(u64, &mut dyn FnMut(&[u8]) -> bool) -> Result<()> + Send + Sync>;

/// Approves (`true`) or denies (`false`) the version parked as an id, on the workspace's
/// engine: the daemon's when it is mounted, else one opened for it.
pub type Decider = Box<dyn Fn(&str, bool) -> Result<Value> + Send + Sync>;

/// What the page is served from.
pub struct Ui {
    pub ws: Workspace,
    pub rewind: Rewinder,
    pub follow: Follower,
    pub decide: Decider,
}

/// Serve the page alone on `listener` (bound by the caller) until `stop` is cancelled, to
/// callers that bring `token`.
pub fn serve(ui: Arc<Ui>, listener: std::net::TcpListener, token: &str, stop: CancellationToken) -> Result<()> {
    let runtime = crate::http::runtime("rwfs-ui")?;
    let limits = crate::http::Limits::from_env();
    let served = runtime.block_on(crate::http::serve(listener, router(ui), token, limits, stop, || ()));
    runtime.shutdown_background();
    served.step("serve the page")
}

/// The page's routes (without the access checks: `crate::http::serve` puts them in front), to
/// serve alone or beside MCP over HTTP (the daemon's listener).
pub fn router(ui: Arc<Ui>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/sessions", get(sessions))
        .route("/api/rows", get(rows))
        .route("/api/feed", get(feed))
        .route("/api/history", get(history))
        .route("/api/diff", get(diff))
        .route("/api/blame", get(blame))
        .route("/api/blocked", get(blocked))
        .route("/api/rewind", post(rewind))
        .route("/api/approvals", get(approvals).post(decide))
        .fallback(|| async { failure(Error::from(crate::Reason::NotFound).at("no such page".to_string())) })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(ui)
}

/// The page of a daemon's engine: its workspace, rewinds on it, its journal's feed.
pub fn on_engine(engine: &Arc<crate::engine::Engine>) -> Result<Arc<Ui>> {
    let (rewinder, follower, decider) = (engine.clone(), engine.clone(), engine.clone());
    let actor = crate::journal::Actor::this_process(crate::journal::Via::Cli, "rwfs-ui");
    let decider_actor = actor.clone();
    Ok(Arc::new(Ui {
        ws: engine.workspace().try_clone()?,
        rewind: Box::new(move |rewind| rewinder.rewind(rewind, &actor).map(|r| super::control::rewound_json(&r))),
        decide: Box::new(move |id, approve| {
            let decided = match approve {
                true => decider.approve(id, false, &decider_actor)?,
                false => decider.deny(id, &decider_actor)?,
            };
            Ok(super::control::decided_json(&decided))
        }),
        follow: Box::new(move |offset, line| {
            let journal = follower.state().dir_path()?.join(crate::journal::JOURNAL_FILE);
            crate::journal::follow::follow(&journal, offset, None, |l| line(l)).step("follow journal")
        }),
    }))
}

type Page = State<Arc<Ui>>;

async fn page() -> Response {
    let mut response = PAGE.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

async fn sessions(State(ui): Page) -> Response {
    answer(move || Ok(json!({"sessions": query::sessions(&ui.ws)?}))).await
}

/// `?limit=N&before=SEQ&session=S&path=P&all=1`
#[derive(Deserialize)]
struct RowsQuery {
    #[serde(default, deserialize_with = "given")]
    limit: Option<usize>,
    #[serde(default, deserialize_with = "given")]
    before: Option<u64>,
    #[serde(default, deserialize_with = "given")]
    session: Option<String>,
    #[serde(default, deserialize_with = "given")]
    path: Option<String>,
    #[serde(default, deserialize_with = "given")]
    all: Option<String>,
}

async fn rows(State(ui): Page, Params(q): Params<RowsQuery>) -> Response {
    answer(move || {
        let ws = &ui.ws;
        let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
        // As `rwfs log`: editors' swap files and temporary copies only with `all=1` or when a
        // path is asked for.
        let leave_out = if q.all.is_none() && q.path.is_none() { Some(left_out(ws)?) } else { None };
        let filter = Filter { path: q.path, session: q.session, since: None, before: q.before, leave_out };
        let tail = query::tail(ws, &filter, limit)?;
        let next = if tail.rows.len() == limit { tail.rows.first().and_then(|r| r.seq) } else { None };
        Ok(json!({"rows": tail.rows, "next": next, "len": tail.len, "problems": tail.problems}))
    })
    .await
}

/// `?path=P`
#[derive(Deserialize)]
struct PathQuery {
    #[serde(default, deserialize_with = "given")]
    path: Option<String>,
}

async fn history(State(ui): Page, Params(q): Params<PathQuery>) -> Response {
    answer(move || {
        let path = q.path.ok_or_else(|| invalid("path parameter"))?;
        let history = ui.ws.history(&path)?;
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
    })
    .await
}

/// `?path=P&from=REV&to=REV`
#[derive(Deserialize)]
struct DiffQuery {
    #[serde(default, deserialize_with = "given")]
    path: Option<String>,
    #[serde(default, deserialize_with = "given")]
    from: Option<String>,
    #[serde(default, deserialize_with = "given")]
    to: Option<String>,
}

async fn diff(State(ui): Page, Params(q): Params<DiffQuery>) -> Response {
    answer(move || {
        let path = q.path.ok_or_else(|| invalid("path parameter"))?;
        let rev = |r: Option<String>| r.map(|s| Rev::parse(&s, parse_time)).transpose();
        let (from, to) = (rev(q.from)?, rev(q.to)?);
        Ok(json!(ui.ws.diff(&path, from.as_ref(), to.as_ref(), Some(crate::history::SHOWN_MAX))?))
    })
    .await
}

async fn blame(State(ui): Page, Params(q): Params<PathQuery>) -> Response {
    answer(move || {
        let path = q.path.ok_or_else(|| invalid("path parameter"))?;
        let mut b = ui.ws.blame(&path)?;
        let total = b.lines.len();
        if total > MAX_BLAME_LINES {
            b.lines.truncate(MAX_BLAME_LINES);
            let more = format!("the first {MAX_BLAME_LINES} of {total} lines: `rwfs blame` shows them all");
            b.note = Some(b.note.map_or(more.clone(), |note| format!("{note}; {more}")));
        }
        let mut answer = json!(b);
        answer["total_lines"] = json!(total);
        Ok(answer)
    })
    .await
}

/// `?seq=N`
#[derive(Deserialize)]
struct SeqQuery {
    #[serde(default, deserialize_with = "given")]
    seq: Option<u64>,
}

async fn blocked(State(ui): Page, Params(q): Params<SeqQuery>) -> Response {
    answer(move || {
        let seq = q.seq.ok_or_else(|| invalid("seq parameter"))?;
        let row = query::row_at_seq(&ui.ws, seq)?
            .ok_or_else(|| Error::from(crate::Reason::NotFound).at(format!("seq {seq}")))?;
        Ok(json!({"envelope": ui.ws.blocked_envelope(&row)?}))
    })
    .await
}

async fn rewind(State(ui): Page, body: Posted) -> Response {
    answer_posted(body, "rewind request (JSON: session, to_time or seq; confirm)", move |request: RewindRequest| {
        let selection = match (request.session, request.to_time, request.seq) {
            (Some(s), None, None) => Selection::Session(s),
            (None, Some(t), None) => Selection::AfterTime(parse_time(&t)?),
            (None, None, Some(seq)) => Selection::AfterSeq(seq),
            _ => return Err(invalid("rewind request: exactly one of session, to_time, seq")),
        };
        (ui.rewind)(&Rewind { selection, globs: vec![], force: false, dry_run: !request.confirm })
    })
    .await
}

/// A POST's body, or why it was not read.
type Posted = std::result::Result<Bytes, axum::extract::rejection::BytesRejection>;

/// The JSON answer `work` gives to the POST body `body`, parsed as a `T` (`what`: what to send
/// when it does not parse).
async fn answer_posted<T: serde::de::DeserializeOwned + Send + 'static>(
    body: Posted,
    what: &'static str,
    work: impl FnOnce(T) -> Result<Value> + Send + 'static,
) -> Response {
    let Ok(body) = body else {
        return crate::http::refuse(StatusCode::PAYLOAD_TOO_LARGE, "body too large\n");
    };
    answer(move || work(serde_json::from_slice(&body).map_err(|_| invalid(what))?)).await
}

async fn approvals(State(ui): Page) -> Response {
    answer(move || {
        let mut shown = Vec::new();
        for a in ui.ws.approvals()?.into_iter().filter(|a| a.state == crate::history::ApprovalState::Pending) {
            let diff = ui.ws.approval_diff(&a.id, Some(crate::history::SHOWN_MAX))?;
            let mut item = json!(a);
            item["diff"] = json!(diff);
            shown.push(item);
        }
        Ok(json!({"approvals": shown}))
    })
    .await
}

async fn decide(State(ui): Page, body: Posted) -> Response {
    answer_posted(body, "approval request (JSON: id, decision approve or deny)", move |request: DecideRequest| {
        match request.decision.as_str() {
            "approve" => (ui.decide)(&request.id, true),
            "deny" => (ui.decide)(&request.id, false),
            _ => Err(invalid("approval decision (approve or deny)")),
        }
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideRequest {
    id: String,
    decision: String,
}

#[derive(Deserialize)]
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

/// A route's query parameters, typed; parameters that do not parse are answered as every bad
/// argument is (400, with what to send instead).
struct Params<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> std::result::Result<Self, Response> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(params)) => Ok(Params(params)),
            Err(_) => Err(failure(invalid("a number parameter (limit, before, seq, after)"))),
        }
    }
}

/// A parameter given with a value: an empty one (`?session=`) is as good as absent.
fn given<'de, D: Deserializer<'de>, T: FromStr>(d: D) -> std::result::Result<Option<T>, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    match text.filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => t.parse().map(Some).map_err(|_| serde::de::Error::custom("not a valid value")),
    }
}

/// The JSON answer `work` gives, computed on a blocking thread (it reads the journal and the
/// store).
async fn answer(work: impl FnOnce() -> Result<Value> + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => json_response(StatusCode::OK, &value),
        Ok(Err(e)) => failure(e),
        Err(_) => json_response(StatusCode::INTERNAL_SERVER_ERROR, &json!({"ok": false, "error": "request failed"})),
    }
}

fn failure(e: Error) -> Response {
    let status = match (e.reason(), e.kind()) {
        (crate::Reason::NotFound, _) => StatusCode::NOT_FOUND,
        (_, crate::ErrorKind::PolicyViolation | crate::ErrorKind::StalePrecondition) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    json_response(status, &json!({"ok": false, "error": e.to_string()}))
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
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

/// `?after=OFFSET`
#[derive(Deserialize)]
struct FeedQuery {
    #[serde(default, deserialize_with = "given")]
    after: Option<u64>,
}

/// `/api/feed`: rows past `after` as server-sent events, one `data:` line per journal row; a
/// row the timeline leaves out ([`left_out`]) is sent as `event: hidden`, so the page still
/// counts its bytes. The follower runs on a thread of its own and ends when the page goes away
/// (at the next row).
async fn feed(State(ui): Page, Params(q): Params<FeedQuery>) -> Response {
    let after = q.after.unwrap_or(0);
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
    let mut response = axum::body::Body::from_stream(stream).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
