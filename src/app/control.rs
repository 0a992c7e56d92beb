//! The daemon's Unix socket: how the CLI reaches the engine of a mounted workspace.
//!
//! Where: the socket lives in a runtime directory (`/run/rwfs` for root, else
//! `$XDG_RUNTIME_DIR/rwfs`, else `/tmp/rwfs-<uid>`, mode 0700), named after the workspace, and
//! `.resilient_write/rwfs.sock` in the workspace is a symlink to it. Clients connect through
//! the symlink, which works whether or not the workspace is mounted over itself (a socket inside
//! a FUSE mount could not be connected to; a symlink there resolves to the real one).
//!
//! Protocol: one request per connection. The client sends one JSON line
//! `{"rwfs_control": 1, "op": ..., ...}`, followed for `write` by exactly `len` bytes of content;
//! the daemon answers one JSON line, `{"ok": true, ...}` or `{"ok": false, "error": kind,
//! "reason": code, "message": ..., "path": ...}`. The caller's pid and uid come from the socket
//! (`SO_PEERCRED`) and are what the journal records. The first line's `rwfs_control` key leaves
//! room for other protocols on the same socket (MCP relay).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::durable::STATE_DIR;
use crate::engine::{Engine, Expect, HookEvent, HookOutcome, Restored, Rewind, Rewound, WriteMode, WriteRequest};
use crate::error::{Error, IoContext, Reason, Result};
use crate::history::RestoreTo;
use crate::journal::query::Selection;
use crate::journal::{Actor, Via};
use crate::sha::Sha256;

/// The symlink's name in the state directory.
pub const SOCKET_LINK: &str = crate::durable::layout::SOCKET;
/// Largest content a `write` request may carry.
const MAX_CONTENT: u64 = 1 << 30;

/// A request to the daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Write {
        path: String,
        mode: String,
        expect: Option<String>,
        len: u64,
    },
    Rm {
        path: String,
        expect: Option<String>,
    },
    Restore {
        path: String,
        sha: Option<String>,
        /// Nanoseconds since the epoch (negative: before it). An `i64`, not an `i128`: serde
        /// cannot buffer an `i128` for the tag of an internally tagged enum.
        at_unix_ns: Option<i64>,
    },
    Gc {
        /// Instead of the policy's `retention.max_age_days`.
        keep_seconds: Option<u64>,
        /// Also seal plaintext objects that should be sealed (`rwfs gc --encrypt`).
        #[serde(default)]
        encrypt: bool,
    },
    /// `rwfs rewind`: one of the four points, the globs, and how.
    Rewind {
        after_seq: Option<u64>,
        after_unix_ns: Option<i64>,
        session: Option<String>,
        group: Option<String>,
        globs: Vec<String>,
        dry_run: bool,
        force: bool,
    },
    /// `rwfs log --follow`: the daemon streams every journal line past `offset`, one per line,
    /// until the client hangs up (no answer line first).
    Follow {
        offset: u64,
    },
    Status,
    /// `rwfs verify`, by the daemon (which can read the key and `objects/`).
    Verify,
    /// A read-only command (`rwfs log`, `history`, `show`, `sessions`, `diff`, `status`), its
    /// command line as given: the owner runs it on its view of the workspace (which a mount
    /// over the workspace hides from the caller) and answers `{exit, stdout, stderr}`.
    Read {
        argv: Vec<String>,
    },
    /// `rwfs ui` on a mounted workspace: the URL of the page the daemon serves.
    Ui,
    /// `rwfs hook`: the refusals the asking hook's agent (its harness: `session::harness_of`)
    /// has not been told of; `paths` are the workspace paths its tool named.
    Untold {
        paths: Vec<String>,
    },
    /// `rwfs hook` at a harness's prompt (`event` `prompt`, with its text) or around a tool call
    /// (`start` with the call's `id`, `tool` and the harness's `agent_session`; `end` with its
    /// `id`): see `engine/tool_call.rs`. The harness is the asking hook's, as for `Untold`.
    ToolEvent {
        event: String,
        #[serde(default)]
        id: Option<String>,
        #[serde(default)]
        tool: Option<String>,
        #[serde(default)]
        agent_session: Option<String>,
        #[serde(default)]
        prompt: Option<String>,
    },
    /// `rwfs rewind --turn [SESSION:]N`: the rows it selects (`journal::query::turn`).
    Turn {
        spec: String,
    },
    /// `rwfs approve ID`: install the version parked as `id` (`engine/approve.rs`).
    Approve {
        id: String,
        force: bool,
    },
    /// `rwfs deny ID`.
    Deny {
        id: String,
    },
    /// Settle drafts, unmount and exit.
    Shutdown,
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    rwfs_control: u32,
    #[serde(flatten)]
    request: Request,
}

/// What the daemon serves: the engine, and hooks into the mount.
pub trait Daemon: Send + Sync {
    fn engine(&self) -> &Engine;
    /// `{pid, workspace, mountpoint, drafts_open, last_commit}`.
    fn status(&self) -> Value;
    fn shutdown(&self);
    /// The URL (with its token) of the page of `rwfs ui` the daemon serves, started on the
    /// first request when it does not serve it yet; `None` when this owner serves no page.
    fn ui_url(&self) -> Result<Option<String>>;
    /// Serve an MCP session on `stream`; `first` holds the bytes already read from it.
    fn serve_mcp(&self, stream: UnixStream, first: Vec<u8>, peer: crate::mcp::Peer);
}

/// How the owner of a workspace answers [`Request::Read`]: the command line's own code, run on
/// the owner's view of the workspace. The front end (`cli`) registers it, so that this module
/// need not import it.
pub type ReadAnswer = fn(&crate::history::Workspace, &[String]) -> Result<Value>;

static READ_ANSWER: std::sync::OnceLock<ReadAnswer> = std::sync::OnceLock::new();

/// Answer [`Request::Read`] with `answer` in this process (the first registration stays).
pub fn answer_reads_with(answer: ReadAnswer) {
    let _ = READ_ANSWER.set(answer);
}

/// What `rwfs verify` answers, in this process or through the daemon.
pub fn verify_json(report: &crate::history::Report) -> Value {
    use crate::history::Found;
    let found = |f: &Found| match f {
        Found::Absent => "absent".to_string(),
        Found::Sha(sha) => sha.short(12),
        Found::Unreadable(why) => format!("unreadable ({why})"),
    };
    let drift: Vec<Value> = report
        .drift
        .iter()
        .map(|d| json!({"path": d.path, "expected": d.expected, "found": found(&d.found)}))
        .collect();
    // Skipped lines apart: they lose no row and leave the report clean (`Report::is_clean`).
    let (skipped, problems): (Vec<_>, Vec<_>) = report.problems.iter().partition(|p| p.is_skipped_line());
    let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let skipped: Vec<String> = skipped.iter().map(ToString::to_string).collect();
    let bad_objects: Vec<Value> = report
        .bad_objects
        .iter()
        .map(|b| json!({"path": b.path, "name": b.name, "actual": b.actual, "why": b.why}))
        .collect();
    json!({
        "ok": report.is_clean(), "rows": report.rows, "paths": report.paths, "problems": problems,
        "skipped_lines": skipped,
        "drift": drift, "objects": report.objects, "bad_objects": bad_objects,
    })
}

/// What `rwfs gc` answers, in this process or through the daemon.
pub fn gc_json(gc: &crate::engine::Gc) -> Value {
    json!({
        "ok": true, "removed": gc.objects, "bytes": gc.bytes, "by_age": gc.by_age, "by_size": gc.by_size,
        "store_bytes": gc.store_bytes, "limit": gc.limit, "seq": gc.seq,
    })
}

/// `rwfs gc` (with `--encrypt`: then the store's plaintext objects that should be sealed are),
/// in this process or in the daemon.
pub fn gc_request(engine: &Engine, keep: Option<Duration>, encrypt: bool, actor: &Actor) -> Result<Value> {
    let mut answer = gc_json(&engine.gc(keep, actor)?);
    if encrypt {
        let done = engine.encrypt()?;
        answer["encrypted"] = json!({"objects": done.objects, "sealed": done.sealed, "already": done.already});
    }
    Ok(answer)
}

/// The runtime directory of sockets for this user.
pub fn runtime_dir() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from("/run/rwfs");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("rwfs"),
        None => PathBuf::from(format!("/tmp/rwfs-{}", nix::unistd::geteuid())),
    }
}

/// The socket of the workspace at `canonical` (its resolved path).
pub fn socket_path(canonical: &Path) -> PathBuf {
    let digest = Sha256::of(canonical.as_os_str().as_encoded_bytes()).to_hex();
    runtime_dir().join(format!("{}.sock", &digest[..16]))
}

/// Listen on the workspace's socket and link it from the state directory. `state` is the
/// state directory's real path, reached without going through a mount over the workspace
/// (`/proc/self/fd/N` of the engine's descriptor).
pub fn listen(canonical: &Path, state: &Path) -> Result<UnixListener> {
    let socket = socket_path(canonical);
    let dir = socket.parent().expect("socket path has a directory");
    std::fs::create_dir_all(dir).step("create runtime directory")?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).step("restrict runtime directory")?;
    }
    // We own the workspace's lock: a socket left here belongs to a daemon that died.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).step("bind control socket")?;
    let link = state.join(SOCKET_LINK);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&socket, &link).step("link control socket")?;
    Ok(listener)
}

/// Listen on the workspace's socket and serve `daemon` there on a thread of its own. A socket
/// that cannot be set up is logged, not fatal: the process then works without it (CLI commands
/// and further MCP sessions cannot reach its engine).
pub fn start(canonical: &Path, state: &Path, daemon: Arc<dyn Daemon>) -> Result<()> {
    match listen(canonical, state) {
        Ok(listener) => {
            std::thread::Builder::new()
                .name("rwfs-control".into())
                .spawn(move || serve(listener, daemon))
                .step("start control socket")?;
        }
        Err(e) => {
            tracing::warn!(error = %e, "no socket: CLI commands and other MCP sessions cannot reach this engine")
        }
    }
    Ok(())
}

/// Remove the socket and its link (at shutdown).
pub fn unlisten(canonical: &Path, state: &Path) {
    let _ = std::fs::remove_file(state.join(SOCKET_LINK));
    let _ = std::fs::remove_file(socket_path(canonical));
}

/// Serve requests until the listener fails (it is closed at exit).
pub fn serve(listener: UnixListener, daemon: Arc<dyn Daemon>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let daemon = daemon.clone();
        let spawned = std::thread::Builder::new().name("rwfs-control".into()).spawn(move || {
            if let Err(e) = handle(stream, &*daemon) {
                tracing::warn!(error = %e, "control request failed");
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot serve a control connection");
        }
    }
}

fn handle(stream: UnixStream, daemon: &dyn Daemon) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60))).step("socket timeout")?;
    let creds = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| Error::io("peer credentials", e.into()))?;
    let pid = u32::try_from(creds.pid()).ok().filter(|p| *p != 0);
    let actor = Actor {
        via: Via::Cli,
        caller: "rwfs-cli".into(),
        pid,
        comm: pid.and_then(crate::process::comm),
        uid: Some(creds.uid()),
        tool: None,
        session_label: None,
        group: None,
        tool_call: None,
    };
    let mut reader = BufReader::new(stream.try_clone().step("clone socket")?);
    let mut line = String::new();
    reader.read_line(&mut line).step("read request")?;
    if line.is_empty() {
        // A probe (`answers`): connected and closed without a request.
        return Ok(());
    }
    if line.contains("\"jsonrpc\"") && !line.contains("\"rwfs_control\"") {
        let mut first = line.into_bytes();
        first.extend_from_slice(reader.buffer());
        let peer = match pid {
            Some(pid) => agent_host(pid),
            None => crate::mcp::Peer { pid: None, uid: Some(creds.uid()) },
        };
        daemon.serve_mcp(stream, first, crate::mcp::Peer { uid: Some(creds.uid()), ..peer });
        return Ok(());
    }
    let mut shutdown = false;
    let answer = match serde_json::from_str::<Envelope>(&line) {
        Ok(Envelope { request: Request::Follow { offset }, .. }) => {
            return follow(stream, offset, daemon);
        }
        Ok(envelope) => {
            shutdown = matches!(envelope.request, Request::Shutdown);
            match execute(envelope.request, &mut reader, &actor, daemon) {
                Ok(value) => value,
                Err(e) => error_json(&e),
            }
        }
        Err(e) => {
            json!({"ok": false, "error": "policy_violation", "reason": "bad_request", "message": e.to_string()})
        }
    };
    let mut stream = stream;
    let answered = writeln!(stream, "{answer}").step("answer request");
    // Only once answered: the daemon may exit as soon as it is told to stop, and a caller left
    // without an answer takes the daemon for dead.
    if shutdown {
        daemon.shutdown();
    }
    answered
}

fn execute(request: Request, body: &mut impl Read, actor: &Actor, daemon: &dyn Daemon) -> Result<Value> {
    let engine = daemon.engine();
    let expect = |e: &Option<String>| e.as_deref().map(Expect::parse).transpose();
    match request {
        Request::Write { path, mode, expect: e, len } => {
            if len > MAX_CONTENT {
                return Err(Reason::InvalidArgument { what: "content length (at most 1 GiB)" }.into());
            }
            let mut content = Vec::with_capacity(len as usize);
            body.take(len).read_to_end(&mut content).step("read content")?;
            if content.len() as u64 != len {
                return Err(Reason::InvalidArgument { what: "content (shorter than announced)" }.into());
            }
            let mode: WriteMode = mode.parse()?;
            let committed = engine.safe_write(&WriteRequest {
                path: &path,
                content: &content,
                mode,
                expect: expect(&e)?,
                actor,
            })?;
            Ok(committed_json(&committed))
        }
        Request::Rm { path, expect: e } => {
            let committed = engine.delete(&path, expect(&e)?, actor)?;
            Ok(committed_json(&committed))
        }
        Request::Restore { path, sha, at_unix_ns } => {
            let to = match (sha, at_unix_ns) {
                (Some(sha), _) => RestoreTo::Sha(sha),
                (None, Some(ns)) => RestoreTo::At(time_of(ns)),
                (None, None) => {
                    return Err(Reason::InvalidArgument { what: "version: give --sha or --at" }.into());
                }
            };
            match engine.restore(&path, &to, actor)? {
                Restored::Committed(committed) => Ok(committed_json(&committed)),
                Restored::AlreadyCurrent { path, sha256 } => {
                    Ok(json!({"ok": true, "path": path.as_str(), "sha256": sha256, "unchanged": true}))
                }
            }
        }
        Request::Gc { keep_seconds, encrypt } => gc_request(engine, keep_seconds.map(Duration::from_secs), encrypt, actor),
        Request::Rewind { after_seq, after_unix_ns, session, group, globs, dry_run, force } => {
            let selection = selection(after_seq, after_unix_ns, session, group)?;
            let rewound = engine.rewind(&Rewind { selection, globs, force, dry_run }, actor)?;
            Ok(rewound_json(&rewound))
        }
        Request::Follow { .. } => Err(Reason::InvalidArgument { what: "follow: its own connection" }.into()),
        Request::Untold { paths } => Ok(untold_json(actor.pid, &paths, engine)),
        Request::Turn { spec } => turn_json(engine.workspace(), &spec),
        Request::ToolEvent { event, id, tool, agent_session, prompt } => {
            let lineage = actor.pid.map(crate::journal::session::lineage).unwrap_or_default();
            let harness = crate::journal::session::harness_of(&lineage).ok_or(Reason::InvalidArgument {
                what: "tool event: the hook's harness is gone (run rwfs hook from the harness's hooks)",
            })?;
            let missing = |what| Error::from(Reason::InvalidArgument { what });
            let event = match event.as_str() {
                "prompt" => HookEvent::Prompt { text: prompt.unwrap_or_default() },
                "start" => HookEvent::Start {
                    id: id.ok_or_else(|| missing("tool event start: its id"))?,
                    tool: tool.unwrap_or_default(),
                    agent_session,
                },
                "end" => HookEvent::End { id: id.ok_or_else(|| missing("tool event end: its id"))? },
                _ => return Err(missing("tool event: one of prompt, start, end")),
            };
            Ok(match engine.hook_event(harness, event, actor)? {
                HookOutcome::Turn(turn) => json!({"ok": true, "turn": turn}),
                HookOutcome::Started { id, seq } => json!({"ok": true, "tool_call": id, "seq": seq}),
                HookOutcome::Ended(open) => json!({"ok": true, "was_open": open}),
            })
        }
        // The report is the answer, whatever it found: `ok` says the request was served.
        Request::Verify => Ok(json!({"ok": true, "report": verify_json(&crate::history::verify(engine.workspace())?)})),
        Request::Read { argv } => match READ_ANSWER.get() {
            Some(answer) => answer(engine.workspace(), &argv),
            None => Err(Reason::InvalidArgument { what: "read request: this process does not answer it" }.into()),
        },
        Request::Status => {
            let mut status = daemon.status();
            status["ok"] = json!(true);
            Ok(status)
        }
        Request::Ui => match daemon.ui_url()? {
            Some(url) => Ok(json!({"ok": true, "url": url})),
            None => Err(Reason::InvalidArgument {
                what: "rwfs ui: the workspace is owned by `rwfs mcp`, which serves no page; run rwfs ui once it has stopped, or mount the workspace (its daemon serves the page)",
            }
            .into()),
        },
        // `handle` stops the daemon after answering.
        Request::Approve { id, force } => Ok(decided_json(&engine.approve(&id, force, actor)?)),
        Request::Deny { id } => Ok(decided_json(&engine.deny(&id, actor)?)),
        Request::Shutdown => Ok(json!({"ok": true})),
    }
}

/// The refusals the agent of the hook `pid` (the connected process) has not been told of:
/// `{"ok": true, "agent": {pid, start, comm} | null, "notices": [{path, text, line}]}`.
fn untold_json(pid: Option<u32>, paths: &[String], engine: &Engine) -> Value {
    let lineage = pid.map(crate::journal::session::lineage).unwrap_or_default();
    let Some(agent) = crate::journal::session::harness_of(&lineage) else {
        return json!({"ok": true, "agent": null, "notices": []});
    };
    let notices: Vec<Value> = engine
        .untold_refusals(agent, paths)
        .iter()
        .map(|n| json!({"path": n.path, "text": n.paragraph(), "line": n.line()}))
        .collect();
    json!({"ok": true, "agent": agent, "notices": notices})
}

/// Stream the journal's lines past `offset` to `stream` until the client leaves.
fn follow(stream: UnixStream, offset: u64, daemon: &dyn Daemon) -> Result<()> {
    stream.set_read_timeout(None).step("socket timeout")?;
    let journal = daemon.engine().state().dir_path()?.join(crate::journal::JOURNAL_FILE);
    let mut out = std::io::BufWriter::new(stream.try_clone().step("clone socket")?);
    crate::journal::follow::follow(&journal, offset, Some(std::os::fd::AsFd::as_fd(&stream)), |line| {
        out.write_all(line).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush()).is_ok()
    })
    .step("follow journal")
}

/// `{ok, session, after_seq}` of `--turn SPEC` (both `null` when no tool call of that turn is
/// journaled).
pub fn turn_json(ws: &crate::history::Workspace, spec: &str) -> Result<Value> {
    Ok(match crate::journal::query::turn(ws, spec)? {
        Some(Selection::SessionAfter(session, seq)) => json!({"ok": true, "session": session, "after_seq": seq}),
        _ => json!({"ok": true, "session": null, "after_seq": null}),
    })
}

/// The rows a rewind takes back, from the request's fields (exactly one is given; a seq with a
/// session: that session's rows after the seq).
pub fn selection(
    after_seq: Option<u64>,
    after_unix_ns: Option<i64>,
    session: Option<String>,
    group: Option<String>,
) -> Result<Selection> {
    match (after_seq, after_unix_ns, session, group) {
        (Some(seq), None, None, None) => Ok(Selection::AfterSeq(seq)),
        (None, Some(ns), None, None) => Ok(Selection::AfterTime(time_of(ns))),
        (None, None, Some(s), None) => Ok(Selection::Session(s)),
        (Some(seq), None, Some(s), None) => Ok(Selection::SessionAfter(s, seq)),
        (None, None, None, Some(g)) => Ok(Selection::Group(g)),
        _ => Err(Reason::InvalidArgument { what: "rewind: one of --to, --seq, --session, --undo" }.into()),
    }
}

/// The JSON of a rewind (what `rwfs rewind --json` prints).
pub fn rewound_json(r: &Rewound) -> Value {
    let mut value = serde_json::to_value(r).expect("a rewind serializes");
    value["ok"] = json!(true);
    value
}

/// The time `ns` nanoseconds after the epoch (before it when negative).
fn time_of(ns: i64) -> std::time::SystemTime {
    let epoch = std::time::SystemTime::UNIX_EPOCH;
    let d = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 { epoch + d } else { epoch - d }
}

/// `t` as nanoseconds since the epoch, saturating at ±292 years around 1970.
pub fn unix_ns(t: std::time::SystemTime) -> i64 {
    match t.duration_since(std::time::SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

/// The JSON of a committed change (what `rwfs write --json` prints).
/// `{ok, approval, committed}` of a decision on a parked version (the CLI, the page, MCP).
pub fn decided_json(d: &crate::engine::Decided) -> Value {
    json!({"ok": true, "approval": d.approval, "committed": d.committed.as_ref().map(committed_json)})
}

pub fn committed_json(c: &crate::engine::Committed) -> Value {
    json!({
        "ok": true, "path": c.path.as_str(), "op": c.op.as_str(), "sha256": c.sha256,
        "prev_sha256": c.prev_sha256, "bytes": c.bytes, "seq": c.seq, "journal_id": c.journal_id,
        "wrote_at": c.ts, "attrs_skipped": c.attrs_skipped,
    })
}

fn error_json(e: &Error) -> Value {
    json!({
        "ok": false, "error": e.kind().as_str(), "reason": e.code(), "message": e.reason().to_string(),
        "path": e.path(), "envelope": crate::envelope::Envelope::json_of(e),
    })
}

/// The agent host behind `pid`: its parent when `pid` is an `rwfs` relay or this process (the
/// host launched it), else `pid` itself.
pub fn agent_host(pid: u32) -> crate::mcp::Peer {
    let uid = Some(nix::unistd::getuid().as_raw());
    let stat = crate::process::stat(pid);
    let is_rwfs = pid == std::process::id() || stat.as_ref().is_some_and(|s| s.comm == "rwfs");
    match stat.map(|s| s.parent) {
        Some(ppid) if is_rwfs && ppid > 1 => crate::mcp::Peer { pid: Some(ppid), uid },
        _ => crate::mcp::Peer { pid: Some(pid), uid },
    }
}

/// Does a daemon listen for the workspace at `root`?
pub fn answers(root: &Path) -> bool {
    UnixStream::connect(root.join(STATE_DIR).join(SOCKET_LINK)).is_ok()
}

/// Send `request` (and `body`) to the daemon of the workspace at `root`; its answer.
pub fn call(root: &Path, request: Request, body: &[u8]) -> Result<Value> {
    call_within(root, request, body, None)
}

/// [`call`], giving up when the daemon has not answered within `wait` (a hook must not hold up
/// its harness).
pub fn call_within(root: &Path, request: Request, body: &[u8], wait: Option<Duration>) -> Result<Value> {
    let link = root.join(STATE_DIR).join(SOCKET_LINK);
    let mut stream =
        UnixStream::connect(&link).map_err(|e| Error::io("connect to the daemon", e).at(link.display().to_string()))?;
    stream.set_read_timeout(wait).step("socket timeout")?;
    stream.set_write_timeout(wait).step("socket timeout")?;
    let line = serde_json::to_string(&Envelope { rwfs_control: 1, request }).expect("request serializes");
    let gone = || Error::from(Reason::DaemonGone).at(root.display().to_string());
    let hung_up =
        |e: &std::io::Error| matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe);
    let sent = writeln!(stream, "{line}").and_then(|()| stream.write_all(body));
    match sent {
        Err(e) if hung_up(&e) => return Err(gone()),
        sent => sent.step("send request")?,
    }
    let mut answer = String::new();
    match BufReader::new(stream).read_line(&mut answer) {
        Err(e) if hung_up(&e) => return Err(gone()),
        // Every answer ends with a newline: without it (nothing, or part of a line) the daemon
        // went away mid-answer.
        Ok(_) if !answer.ends_with('\n') => return Err(gone()),
        read => read.step("read answer")?,
    };
    let value: Value = serde_json::from_str(&answer)
        .map_err(|_| Error::io("read answer", std::io::Error::other("the daemon's answer is not JSON")))?;
    if value["ok"] == json!(true) {
        return Ok(value);
    }
    Err(remote_error(&value))
}

/// The daemon's error, as an engine error the CLI prints like its own.
fn remote_error(value: &Value) -> Error {
    let message = value["message"].as_str().unwrap_or("the daemon refused the request").to_string();
    let path = value["path"].as_str().map(str::to_string);
    let error = Error::from(Reason::Remote {
        kind: value["error"].as_str().and_then(crate::error::ErrorKind::parse).unwrap_or(crate::error::ErrorKind::Io),
        code: value["reason"].as_str().unwrap_or("io_error").to_string(),
        message,
        envelope: value.get("envelope").filter(|e| e.is_object()).map(Value::to_string),
    });
    match path {
        Some(path) => error.at(path),
        None => error,
    }
}
