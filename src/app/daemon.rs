//! `rwfs mount`: the daemon that owns a workspace, serves it through FUSE and answers the CLI
//! on its control socket.
//!
//! Order of start (each step only once the one before worked):
//!
//! 1. with `--daemon`, fork while still single-threaded; the parent waits on a pipe and exits 0
//!    once the child says the mount is ready, or prints the child's error and exits 2;
//! 2. block SIGINT, SIGTERM and SIGHUP in every thread (they are taken by one waiting thread);
//! 3. open the engine (lock, recovery, orphan drafts) — the workspace descriptor is opened
//!    before anything is mounted, so mounting over the workspace itself works;
//! 4. mount; listen on the control socket;
//! 5. wait for a signal, a `shutdown` request, or the kernel ending the session (`umount`).
//!
//! Order of stop: drafts committed (or quarantined), lazy unmount, control socket removed,
//! engine closed (its watermark made durable).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use nix::sys::signal::{SigSet, Signal};
use serde_json::{Value, json};

use tokio_util::sync::CancellationToken;

use super::control::{self, Daemon};
use crate::engine::Engine;
use crate::engine::Options;
use crate::error::{Error, IoContext, Result};
use crate::fuse::{Mount, MountOptions};
use crate::mcp;
use crate::tools::Tools;

/// What `rwfs mount` was asked for.
#[derive(Clone)]
pub struct MountRequest {
    pub workspace: PathBuf,
    /// `None`: over the workspace itself.
    pub mountpoint: Option<PathBuf>,
    pub daemon: bool,
    pub read_only: bool,
    pub allow_other: bool,
    pub blocked_errno: Option<i32>,
    /// Let the kernel do the I/O of pass-through files where it can.
    pub kernel_passthrough: bool,
    /// Tell refused writers why on their stderr (`None`: the policy's `stderr_notice`, else off).
    pub stderr_notice: Option<bool>,
    pub pass_through: Vec<String>,
    /// Serve MCP over streamable HTTP here too.
    pub mcp_http: Option<std::net::SocketAddr>,
    pub options: Options,
}

/// How long a stop waits for processes still using the mount.
const UNMOUNT_WAIT: Duration = Duration::from_secs(5);

/// Run the daemon until it is told to stop.
pub fn run(request: MountRequest) -> Result<()> {
    let ready = if request.daemon { Some(daemonize(&request.workspace)?) } else { None };
    let outcome = serve(&request, ready.as_ref());
    if let (Err(e), Some(ready)) = (&outcome, &ready) {
        ready.fail(e);
    }
    outcome
}

fn serve(request: &MountRequest, ready: Option<&Ready>) -> Result<()> {
    let signals = block_signals()?;
    raise_open_files_limit();
    // The mount's writers are processes: the engine is handed their command lines.
    let options = Options {
        pass_through: request.pass_through.clone(),
        command_line: Some(Arc::new(crate::process::args)),
        ..request.options.clone()
    };
    let engine = Arc::new(Engine::open(&request.workspace, &options)?);
    let workspace = engine.workspace().path().to_path_buf();
    let mountpoint = match &request.mountpoint {
        Some(m) => {
            std::fs::canonicalize(m).map_err(|e| Error::io("resolve mountpoint", e).at(m.display().to_string()))?
        }
        None => workspace.clone(),
    };
    // Every path is resolved now: the daemon leaves the directory it was started in, which a
    // mount over the workspace may cover (its descriptors are the engine's alone).
    std::env::set_current_dir("/").step("leave the starting directory")?;
    // The state directory's real path: /proc/self/fd/N of the engine's descriptor does not go
    // through the mount, even over the workspace itself.
    let state = engine.state().dir_path()?;
    let mount = Mount::start(
        engine.clone(),
        MountOptions {
            mountpoint: mountpoint.clone(),
            read_only: request.read_only,
            allow_other: request.allow_other,
            blocked_errno: request.blocked_errno,
            kernel_passthrough: request.kernel_passthrough,
            stderr_notice: request.stderr_notice,
        },
    )?;
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<&'static str>(4);
    let shared = Arc::new(Shared {
        engine: engine.clone(),
        tools: Arc::new(Tools::new(engine.clone(), mcp::settings_from_env())),
        mount: Mutex::new(Some(mount)),
        ui_url: std::sync::OnceLock::new(),
        page_thread: Mutex::new(None),
        page_stop: CancellationToken::new(),
        workspace: workspace.clone(),
        mountpoint: mountpoint.clone(),
        stop: stop_tx.clone(),
    });
    let http_stop = CancellationToken::new();
    let mut notes = Vec::new();
    if let Some(addr) = request.mcp_http {
        let (token, new) = mcp::http_token(&engine)?;
        let listener = std::net::TcpListener::bind(addr)
            .map_err(|e| Error::io("bind MCP HTTP address", e).at(addr.to_string()))?;
        if new {
            notes.push(format!(
                "rwfs: MCP over HTTP at http://{addr}/mcp; bearer token (shown once, kept 0600 in {}/{}): {token}",
                crate::durable::STATE_DIR,
                mcp::TOKEN_FILE
            ));
        }
        let page = super::ui::router(super::ui::on_engine(&engine)?);
        let _ = shared.ui_url.set(format!("http://{addr}/#token={token}"));
        let (tools, stop) = (shared.tools.clone(), http_stop.clone());
        std::thread::Builder::new()
            .name("rwfs-mcp-http".into())
            .spawn(move || {
                if let Err(e) = mcp::serve_http(tools, listener, token, Some(page), stop) {
                    tracing::error!(error = %e, "MCP over HTTP stopped");
                }
            })
            .step("start MCP HTTP thread")?;
    }
    control::start(&workspace, &state, shared.clone())?;
    let retention = start_retention(&engine)?;
    recover_deferred_drafts(&engine);
    std::thread::Builder::new()
        .name("rwfs-signals".into())
        .spawn(move || {
            while let Ok(signal) = signals.wait() {
                let _ = stop_tx.send(signal.as_str());
            }
        })
        .step("start signal thread")?;
    tracing::info!(workspace = %workspace.display(), mountpoint = %shared.mountpoint.display(), "mounted");
    notes.insert(0, mounted_note(&workspace, &shared.mountpoint, ready.is_none()));
    let note = notes.join("\n");
    match ready {
        Some(ready) => ready.ok(&note),
        None => say(&note),
    }
    let why = wait_for_stop(&shared, &stop_rx);
    tracing::info!(why, "stopping");
    let foreground = ready.is_none();
    http_stop.cancel();
    shared.page_stop.cancel();
    if let Some(page) = shared.page_thread.lock().unwrap_or_else(PoisonError::into_inner).take() {
        let _ = page.join();
    }
    let mount = shared.mount.lock().unwrap_or_else(PoisonError::into_inner).take();
    let unmounted = mount.map_or(Ok(()), |m| m.unmount(UNMOUNT_WAIT));
    control::unlisten(&workspace, &state);
    drop(shared);
    if let Some((stop, thread)) = retention {
        drop(stop);
        let _ = thread.join();
    }
    let engine = Arc::try_unwrap(engine).ok();
    let closed = engine.map_or(Ok(()), Engine::close);
    if foreground && unmounted.is_ok() {
        say(&format!("rwfs: unmounted {} ({why}); every draft committed or quarantined", mountpoint.display()));
    }
    unmounted.and(closed)
}

/// What `rwfs mount` tells the user once the mount is ready (on stderr).
fn mounted_note(workspace: &Path, mountpoint: &Path, foreground: bool) -> String {
    let stop = if foreground { "Ctrl-C or `rwfs unmount" } else { "stop it with `rwfs unmount" };
    let mut note = format!(
        "rwfs: mounted {} on {} (pid {}); {stop} {}`",
        workspace.display(),
        mountpoint.display(),
        std::process::id(),
        mountpoint.display()
    );
    if workspace == mountpoint {
        note.push_str(&format!(
            "\nrwfs: a shell already in {} still sees the directory under the mount, where writes \
             are not gated: run `cd {}` to go through the mount",
            workspace.display(),
            workspace.display()
        ));
    }
    note
}

/// A line for the user on stderr (lost, not fatal, when stderr is closed).
pub(super) fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Raise the soft limit on open descriptors to the hard one: the daemon holds one per open
/// handle of every process using the mount (the soft default, often 1024, is far too low).
fn raise_open_files_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
        && let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
    {
        tracing::warn!(soft, hard, error = %e, "could not raise the open files limit");
    }
}

/// Block until a signal, a shutdown request, or the end of the session.
fn wait_for_stop(shared: &Shared, stop: &Receiver<&'static str>) -> &'static str {
    loop {
        match stop.recv_timeout(Duration::from_millis(250)) {
            Ok(why) => return why,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return "channel closed",
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                let finished =
                    shared.mount.lock().unwrap_or_else(PoisonError::into_inner).as_ref().is_none_or(Mount::is_finished);
                if finished {
                    return "unmounted";
                }
            }
        }
    }
}

/// The daemon's state, shared with the control socket.
struct Shared {
    engine: Arc<Engine>,
    tools: Arc<Tools>,
    mount: Mutex<Option<Mount>>,
    /// The page of `rwfs ui`, when served with MCP over HTTP (its URL carries the token).
    ui_url: std::sync::OnceLock<String>,
    /// The page's own server, when `rwfs ui` asked for it (not served beside MCP over HTTP).
    page_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    page_stop: CancellationToken,
    workspace: PathBuf,
    mountpoint: PathBuf,
    stop: Sender<&'static str>,
}

impl Daemon for Shared {
    fn engine(&self) -> &Engine {
        &self.engine
    }

    fn status(&self) -> Value {
        let mount = self.mount.lock().unwrap_or_else(PoisonError::into_inner);
        let (drafts, last) = mount.as_ref().map_or((0, None), Mount::status);
        let requests = mount.as_ref().map(Mount::requests).unwrap_or_default();
        json!({
            "pid": std::process::id(),
            "workspace": self.workspace,
            "mountpoint": self.mountpoint,
            "drafts_open": drafts,
            "last_commit": last.map(crate::time::stamp),
            "kernel_passthrough": requests.kernel_passthrough,
            "requests": {
                "read": requests.reads,
                "write": requests.writes,
                "passthrough_opens": requests.passthrough_opens,
                "scanned_bytes": self.engine.scanned_bytes(),
            },
            // Lines of the daemon's log that could not be written (a full disk): dropped.
            "log_lines_dropped": super::log::dropped(),
        })
    }

    fn ui_url(&self) -> Result<Option<String>> {
        let mut thread = self.page_thread.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(url) = self.ui_url.get() {
            return Ok(Some(url.clone()));
        }
        // Not served beside MCP over HTTP: on a free loopback port of its own, until the
        // daemon stops, with a token made now.
        let token = crate::http::new_token()?;
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).step("bind the page's address")?;
        let addr = listener.local_addr().step("read the page's address")?;
        let page = super::ui::on_engine(&self.engine)?;
        let (stop, key) = (self.page_stop.clone(), token.clone());
        *thread = Some(
            std::thread::Builder::new()
                .name("rwfs-ui".into())
                .spawn(move || {
                    if let Err(e) = super::ui::serve(page, listener, &key, stop) {
                        tracing::error!(error = %e, "the history page stopped");
                    }
                })
                .step("start the page's thread")?,
        );
        let url = format!("http://{addr}/#token={token}");
        let _ = self.ui_url.set(url.clone());
        tracing::info!(%addr, "serving the history page");
        Ok(Some(url))
    }

    fn shutdown(&self) {
        let _ = self.stop.send("shutdown requested");
    }

    fn serve_mcp(&self, stream: std::os::unix::net::UnixStream, first: Vec<u8>, peer: mcp::Peer) {
        if let Err(e) = mcp::serve_connection(self.tools.clone(), stream, first, peer) {
            tracing::warn!(error = %e, "MCP session ended with an error");
        }
    }
}

/// Block the stop signals in this thread and every thread started after it; the returned set
/// is waited for by one thread.
pub(super) fn block_signals() -> Result<SigSet> {
    let mut set = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(signal);
    }
    set.thread_block().map_err(|e| Error::io("block signals", e.into()))?;
    Ok(set)
}

/// The child's end of the pipe to the waiting parent.
struct Ready(OwnedFd);

impl Ready {
    /// Ready; `note` is printed by the parent (its lines travel as one, joined by US).
    fn ok(&self, note: &str) {
        let line = format!("ok\t{}\n", note.replace('\n', "\x1f"));
        let _ = nix::unistd::write(&self.0, line.as_bytes());
    }

    fn fail(&self, e: &Error) {
        let _ = nix::unistd::write(&self.0, format!("rwfs: {}/{}: {e}\n", e.kind(), e.code()).as_bytes());
    }
}

/// Fork; the parent waits for the child's word and exits with it. Must run before any thread
/// is started.
fn daemonize(workspace: &Path) -> Result<Ready> {
    let (read, write) = nix::unistd::pipe().map_err(|e| Error::io("pipe", e.into()))?;
    // SAFETY: the process is still single-threaded here (this runs before the engine, the
    // mount or any other thread is started), so the child is a complete copy.
    match unsafe { nix::unistd::fork() }.map_err(|e| Error::io("fork", e.into()))? {
        nix::unistd::ForkResult::Parent { .. } => {
            drop(write);
            // One line: "ok", or the error. EOF first means the child died.
            let mut word = Vec::new();
            let mut buf = [0u8; 512];
            while !word.contains(&b'\n') {
                match nix::unistd::read(&read, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => word.extend_from_slice(&buf[..n]),
                }
            }
            let word = String::from_utf8_lossy(&word);
            if let Some(rest) = word.strip_prefix("ok") {
                if let Some(note) = rest.strip_prefix('\t') {
                    say(note.trim_end().replace('\x1f', "\n").as_str());
                }
                std::process::exit(0);
            }
            let message =
                if word.is_empty() { "rwfs: the daemon exited before the mount was ready\n".into() } else { word };
            say(message.trim_end());
            std::process::exit(2);
        }
        nix::unistd::ForkResult::Child => {
            drop(read);
            nix::unistd::setsid().map_err(|e| Error::io("setsid", e.into()))?;
            detach_stdio(workspace)?;
            Ok(Ready(write))
        }
    }
}

/// stdin and stdout to /dev/null; stderr (the log) to `RWFS_LOG_FILE`, else to
/// `.resilient_write/rwfs.log` (the previous log kept as `rwfs.log.1` once it passes 1 MiB).
fn detach_stdio(workspace: &Path) -> Result<()> {
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null").step("open /dev/null")?;
    let append = |path: &Path| std::fs::OpenOptions::new().create(true).append(true).open(path);
    let log = match std::env::var_os("RWFS_LOG_FILE") {
        Some(path) => append(Path::new(&path)).step("open log file")?,
        None => default_log(workspace)
            .and_then(|path| append(&path).ok())
            .map_or_else(|| null.try_clone(), Ok)
            .step("dup /dev/null")?,
    };
    for (from, to) in [(null.as_raw_fd(), 0), (null.as_raw_fd(), 1), (log.as_raw_fd(), 2)] {
        // SAFETY: dup2 onto the standard descriptors; both descriptors are valid.
        if unsafe { nix::libc::dup2(from, to) } < 0 {
            return Err(Error::io("redirect standard streams", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Where a daemon logs by default: in the state directory of a workspace the engine will accept
/// (never a state directory made in `/` or a home directory), rotated once it is too big.
fn default_log(workspace: &Path) -> Option<PathBuf> {
    use crate::durable::layout::{DAEMON_LOG, DAEMON_LOG_OLD, DAEMON_LOG_ROTATE};
    let canonical = std::fs::canonicalize(workspace).ok()?;
    if crate::history::is_unsafe_root(&canonical) {
        return None;
    }
    let state = canonical.join(crate::durable::STATE_DIR);
    if let Err(e) = std::fs::create_dir(&state)
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        return None;
    }
    let log = state.join(DAEMON_LOG);
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > DAEMON_LOG_ROTATE) {
        let _ = std::fs::rename(&log, state.join(DAEMON_LOG_OLD));
    }
    Some(log)
}

/// Orphan drafts too big to hash before the mount was ready (see `Recovery::drafts_deferred`)
/// are kept in `objects/` now, in the background, while the mount serves.
fn recover_deferred_drafts(engine: &Arc<Engine>) {
    if engine.recovery().drafts_deferred.is_empty() {
        return;
    }
    let engine = engine.clone();
    let spawned =
        std::thread::Builder::new().name("rwfs-recover".into()).spawn(move || match engine.recover_deferred_drafts() {
            Ok(kept) => tracing::info!(drafts = kept.len(), "deferred orphan drafts kept in objects/"),
            Err(e) => tracing::error!(error = %e, "deferred orphan drafts (they stay in drafts/ for the next mount)"),
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the deferred recovery");
    }
}

/// The retention thread's stop sender (dropping it stops the thread) and handle.
type Retainer = (crossbeam_channel::Sender<()>, std::thread::JoinHandle<()>);

/// Enforce the policy's retention every `interval` (never when it is zero) until the returned
/// sender is dropped. The thread holds the engine weakly between runs.
fn start_retention(engine: &Arc<Engine>) -> Result<Option<Retainer>> {
    let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
    let interval = engine.policy().retention().interval;
    if interval.is_zero() {
        return Ok(None);
    }
    let engine = Arc::downgrade(engine);
    let thread = std::thread::Builder::new()
        .name("rwfs-retention".into())
        .spawn(move || {
            while let Err(crossbeam_channel::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                let Some(engine) = engine.upgrade() else { return };
                match engine.retain() {
                    Ok(gc) if gc.objects > 0 => {
                        tracing::info!(removed = gc.objects, bytes = gc.bytes, limit = gc.limit, "retention");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "retention"),
                }
            }
        })
        .step("start retention thread")?;
    Ok(Some((stop, thread)))
}

/// The daemon of the workspace at `root`, if one answers.
pub fn running(root: &Path) -> Option<Value> {
    control::call(root, control::Request::Status, &[]).ok()
}
