//! The `rwfs` command line: argument definitions (clap derive) and exit codes.
//!
//! Conventions: stdout is data, stderr is talk; every command that prints something a script
//! would parse has `--json`. Exit codes: 0 success, 1 the command ran and the answer is
//! negative (`verify` found problems, `scan` found something the policy blocks), 2 error (the
//! kind and reason are printed on stderr).

mod approvals;
mod discover;
mod history;
mod hook;
mod mount;
mod reach;
mod read;
mod readonly;
mod run;
mod scan;
mod session;
mod text;

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout is closed (`rwfs scan | head`): later output is dropped, and the command
/// still ends with its own exit code instead of a panic.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Print to stdout (what `print!` does) without panicking on a closed pipe.
pub fn emit(args: std::fmt::Arguments) {
    emit_with(|out| out.write_fmt(args));
}

/// Write raw bytes (a file's content) to stdout, like [`emit`].
pub fn emit_bytes(bytes: &[u8]) {
    emit_with(|out| out.write_all(bytes));
}

std::thread_local! {
    /// While [`captured`] runs on this thread: what would go to stdout and to stderr.
    static CAPTURE: std::cell::RefCell<Option<(Vec<u8>, Vec<u8>)>> = const { std::cell::RefCell::new(None) };
}

/// Run `f` with what it prints through [`emit`] and [`emit_err`] (on this thread) kept instead
/// of printed: its result, its stdout and its stderr. How a daemon answers a read-only command
/// with the very code the command line runs (`readonly.rs`).
pub fn captured<R>(f: impl FnOnce() -> R) -> (R, Vec<u8>, Vec<u8>) {
    CAPTURE.with(|c| *c.borrow_mut() = Some((Vec::new(), Vec::new())));
    let result = f();
    let (out, err) = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (result, out, err)
}

/// Keep `bytes` in this thread's capture (stdout or stderr); `false` when nothing captures.
fn capture(bytes: &[u8], stderr: bool) -> bool {
    CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some((out, err)) => {
            if stderr { err } else { out }.extend_from_slice(bytes);
            true
        }
        None => false,
    })
}

fn emit_with(write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) {
    let mut kept = Vec::new();
    if CAPTURE.with(|c| c.borrow().is_some()) {
        let _ = write(&mut kept);
        capture(&kept, false);
        return;
    }
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = write(&mut out).and_then(|()| out.flush()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            tracing::warn!(error = %e, "cannot write to stdout");
        }
    }
}

/// Has stdout been closed (a reader that left)?
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Print to stderr (what `eprint!` does); a closed stderr loses the text, it does not panic.
pub fn emit_err(args: std::fmt::Arguments) {
    if !capture(args.to_string().as_bytes(), true) {
        let _ = std::io::stderr().lock().write_fmt(args);
    }
}

/// `println!` that survives a closed stdout.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::cli::emit(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that survives a closed stderr.
macro_rules! errln {
    ($($arg:tt)*) => { $crate::cli::emit_err(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {errln, outln};

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use run::run;

/// Exit status of the `rwfs` binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    Negative = 1,
    Error = 2,
}

#[derive(Debug, Parser)]
#[command(
    name = "rwfs",
    version,
    about = "Durable, journaled, reversible writes for coding agents",
    long_about = "rwfs makes every write durable (temp file, fsync, atomic rename, fsync of the \
directory), journals it in a hash-chained log with who made it, and keeps every overwritten or \
deleted version so it can be restored.",
    after_help = "Examples and exit codes: rwfs --help. One command: rwfs COMMAND --help.",
    after_long_help = "Examples:
  echo 'hello' | rwfs write notes.txt            write a file durably (journaled)
  rwfs write --mode create --expect '' new.txt   fail if new.txt exists
  rwfs log -n 10                                 the last ten changes
  rwfs history notes.txt                         every version of a file
  rwfs restore notes.txt --at '10m'              the file as it was ten minutes ago
  rwfs show notes.txt@3f2a9c                     print that version, restore nothing
  rwfs log --since 1h                            the last hour's changes
  rwfs log --follow --json                       stream rows as they become durable
  rwfs sessions                                  who changed what, session by session
  rwfs diff notes.txt                            the last change to a file, as a unified diff
  rwfs diff --session claude-4242                what that agent run changed, per file
  rwfs rewind --session claude-4242 --dry-run    what undoing that run would do
  rwfs rewind --to 20m                           the whole tree as it was 20 minutes ago
  rwfs rewind --undo rw-19a...                   take a rewind back
  rwfs verify                                    journal chain intact? files as journaled?
  rwfs scan --sarif src/ > findings.sarif        secrets and personal data, as SARIF
  rwfs shell                                     a shell inside the gated view of this directory
  rwfs run -- claude                             run an agent inside it (mounts, then unmounts)
  rwfs mount --daemon ~/repo                     gate every write to ~/repo (mount over it)
  rwfs unmount ~/repo                            commit open drafts and unmount
  rwfs mcp -w ~/repo                             MCP on stdio (relays to the mount's daemon)

Exit status: 0 success, 1 negative answer (verify found problems, scan found something blocked),
2 error."
)]
pub struct Cli {
    /// The workspace root [default: $RW_WORKSPACE, else the current directory].
    #[arg(short = 'w', long, global = true, env = "RW_WORKSPACE", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Accept a system directory or the home directory as workspace root.
    #[arg(long, global = true)]
    pub allow_unsafe_root: bool,
    /// Colour the text output: `auto` (on a terminal, unless NO_COLOR is set), `always`, `never`.
    #[arg(long, global = true, value_enum, default_value = "auto", value_name = "WHEN")]
    pub color: text::When,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write stdin to PATH durably (temp, fsync, atomic rename, fsync dir, journal row).
    Write(WriteArgs),
    /// Delete PATH, keeping its content restorable.
    Rm(RmArgs),
    /// Show journal rows, oldest first.
    Log(LogArgs),
    /// Show every journaled version of PATH.
    History(HistoryArgs),
    /// Bring back a previous version of PATH (as a new, journaled change).
    Restore(RestoreArgs),
    /// Print a version of a file to stdout without restoring it: PATH@REV, REV a digest prefix
    /// (at least 4 hex digits, as `rwfs history` shows) or a time as for `restore --at`.
    Show(ShowArgs),
    /// Check the journal's hash chain and that files hold what their last row says.
    Verify(JsonArg),
    /// List sessions (who changed the workspace, from when to when, how much, how many
    /// writes were blocked), oldest first. A row's session is `RWFS_SESSION` from the writer's
    /// environment, else its nearest agent-host ancestor (policy `session_hosts`), else its
    /// POSIX session; MCP writes carry their MCP session.
    Sessions(JsonArg),
    /// Put the workspace (or the paths matching GLOBs) back to what it was at a time, after a
    /// seq, or before a session; one journaled group, undoable with `--undo GROUP`.
    Rewind(RewindArgs),
    /// A unified diff between two versions of PATH, or with --since / --session a per-file
    /// summary (like `git diff --stat`) of what changed.
    Diff(DiffArgs),
    /// Each line of PATH's current version with the row that introduced it (seq, time,
    /// session, process), from the kept versions; cached beside the journal index, so a blame
    /// after more writes diffs only the new versions.
    Blame(BlameArgs),
    /// Apply retention to kept versions: past the age limit, then the oldest versions of the
    /// busiest paths while the store is over its size limit (policy `retention`).
    Gc(GcArgs),
    /// Show who owns the workspace and what the journal and store hold.
    Status(JsonArg),
    /// List the new versions waiting for a person's approval (policy `protect:` rules with
    /// `approve`), oldest first, each with its id, file, rule and writer; `--all` also those
    /// approved, denied or superseded (by a later change of the file or a later parked version).
    Approvals(ApprovalsArgs),
    /// Install the version parked as ID (`rwfs approvals` lists them) as a new, journaled change
    /// of its file, recording who approved; the content gate still judges it. Refused when the
    /// file changed since it was parked, unless --force.
    Approve(ApproveArgs),
    /// Refuse the version parked as ID: its file stays as it is, the version stays in the store,
    /// marked denied.
    Deny(DenyArgs),
    /// Scan files, trees (respecting .gitignore) or stdin (`-`) for secrets and personal data;
    /// exit 1 when anything would be blocked (usable as a pre-commit hook).
    Scan(ScanArgs),
    /// Serve WORKSPACE through FUSE (over itself without MOUNTPOINT): every write is scanned,
    /// committed durably, journaled and kept restorable.
    Mount(MountArgs),
    /// Ask the daemon serving PATH to commit its open drafts and unmount (lazy unmount if no
    /// daemon answers).
    Unmount(UnmountArgs),
    /// Run PROGRAM inside the gated view of the workspace: mount it over itself if it is not
    /// mounted, start PROGRAM with its working directory on the mount (so every write it makes
    /// goes through the gate), and unmount afterwards if this command mounted it. Exits with
    /// PROGRAM's status.
    Run(RunArgs),
    /// `rwfs run -- $SHELL`: an interactive shell whose writes go through the gate.
    Shell(ShellArgs),
    /// Print the rules for an agent's instructions file (CLAUDE.md, AGENTS.md, .cursorrules,
    /// .github/copilot-instructions.md): what a refused write means on the mount, and which
    /// MCP tool fits which write, with this workspace's policy thresholds.
    AgentRules(AgentRulesArgs),
    /// The hook an agent harness runs after its tools: reads the harness's hook JSON on stdin
    /// and prints, as the harness's additional context, every refusal of a write through the
    /// mount that this agent (the harness process, and everything it runs) has not been told
    /// of yet — file, rule, line, replacement, what to do. Prints `{}` when there is none, and
    /// never fails the tool call. Installed by `rwfs hooks`.
    Hook(HookArgs),
    /// Print a harness's hook configuration that runs `rwfs hook` (Claude Code's settings.json
    /// `hooks`, Codex's hooks.json), or merge it into the harness's file with `--install`; for
    /// aider (no hooks), what reaches its model instead.
    Hooks(HooksArgs),
    /// Print a shell completion script: `rwfs completions bash > /etc/bash_completion.d/rwfs`,
    /// `rwfs completions zsh > "${fpath[1]}/_rwfs"`, `rwfs completions fish >
    /// ~/.config/fish/completions/rwfs.fish`.
    Completions(CompletionsArgs),
    /// Print the man page (roff), generated from this CLI: `rwfs man > /usr/local/share/man/man1/rwfs.1`;
    /// with `--dir DIR`, write it and one page per command (`rwfs-log.1`, …, which it links to) there.
    Man(ManArgs),
    /// Speak MCP on stdio (what an agent host launches): relayed to the daemon when the
    /// workspace is mounted, else served by an engine in this process. Logs go to stderr.
    /// With `--http ADDR`: serve streamable HTTP instead, without a mount.
    Mcp(McpArgs),
    /// Serve the history page (a timeline by session and process, live; each file's versions
    /// and diffs; refused writes; rewind with a preview) on a loopback address until
    /// interrupted. Prints the page's URL once, with a token made for this run: the page's
    /// requests need it.
    Ui(UiArgs),
}

#[derive(Debug, Args)]
pub struct UiArgs {
    /// Where to listen: `127.0.0.1:8766`, or a bare port on 127.0.0.1. Default: a free port on
    /// 127.0.0.1.
    #[arg(long, value_name = "ADDR", value_parser = loopback_by_default, default_value = "127.0.0.1:0")]
    pub addr: std::net::SocketAddr,
}

impl Command {
    /// Was `--json` given? Then a failure's typed envelope goes to stdout too.
    pub fn json(&self) -> bool {
        match self {
            Command::Write(WriteArgs { json, .. })
            | Command::Rm(RmArgs { json, .. })
            | Command::History(HistoryArgs { json, .. })
            | Command::Restore(RestoreArgs { json, .. })
            | Command::Gc(GcArgs { json, .. })
            | Command::Verify(json)
            | Command::Sessions(json)
            | Command::Deny(DenyArgs { json, .. })
            | Command::Status(json) => json.json,
            Command::Approvals(args) => args.json,
            Command::Approve(args) => args.json,
            Command::Rewind(args) => args.json,
            Command::Diff(args) => args.json,
            Command::Blame(args) => args.json,
            Command::Log(args) => args.json,
            Command::Scan(args) => args.json,
            Command::Mount(_)
            | Command::Unmount(_)
            | Command::Run(_)
            | Command::Shell(_)
            | Command::Show(_)
            | Command::Completions(_)
            | Command::Man(_)
            | Command::AgentRules(_)
            | Command::Hook(_)
            | Command::Hooks(_)
            | Command::Mcp(_)
            | Command::Ui(_) => false,
        }
    }
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Serve MCP over streamable HTTP at ADDR (path /mcp) instead of stdio, without a mount, until
    /// SIGINT or SIGTERM: `127.0.0.1:8765`, or a bare port for loopback (`8765`). Every request
    /// needs `Authorization: Bearer <token>`, the token kept 0600 in the state directory (printed
    /// when first generated). Refused while another process owns the workspace (a mount
    /// daemon: use `rwfs mount --mcp-http` there).
    #[arg(long, value_name = "ADDR", value_parser = loopback_by_default)]
    pub http: Option<std::net::SocketAddr>,
}

/// `HOST:PORT`, or a bare `PORT` on 127.0.0.1.
fn loopback_by_default(s: &str) -> std::result::Result<std::net::SocketAddr, String> {
    match s.parse::<u16>() {
        Ok(port) => Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
        Err(_) => s.parse().map_err(|e| format!("{e} (expected HOST:PORT or PORT)")),
    }
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// PATH@REV: REV is a digest prefix or a time ("10m", RFC 3339).
    #[arg(value_name = "PATH@REV")]
    pub spec: String,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `rwfs.1` and a page per command into DIR (e.g. /usr/local/share/man/man1) instead
    /// of printing `rwfs.1`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct MountArgs {
    /// The workspace [default: --workspace, $RW_WORKSPACE, else the current directory].
    #[arg(value_name = "WORKSPACE")]
    pub target: Option<PathBuf>,
    /// Where to mount [default: over WORKSPACE itself].
    pub mountpoint: Option<PathBuf>,
    /// Detach once the mount is ready (exit 0), or exit 2 with the error.
    #[arg(long)]
    pub daemon: bool,
    #[command(flatten)]
    pub options: MountOptionArgs,
}

/// How a mount behaves: `rwfs mount`'s options, which `rwfs run` and `rwfs shell` take too
/// (for the mount they make when the workspace is not mounted yet).
#[derive(Debug, Clone, Default, Args)]
pub struct MountOptionArgs {
    /// Mount read-only (writes fail with EROFS).
    #[arg(long)]
    pub read_only: bool,
    /// Let other users in (allow_other; permissions are checked by the kernel).
    #[arg(long)]
    pub allow_other: bool,
    /// Errno of a blocked write: EACCES (default), EPERM, EIO, EROFS, ENOSPC or EDQUOT
    /// [default: the policy's blocked_errno].
    #[arg(long, value_name = "NAME")]
    pub blocked_errno: Option<String>,
    /// Also write paths matching GLOB in place, without draft, scan or journal (repeatable;
    /// added to the policy's pass_through).
    #[arg(long = "pass-through", value_name = "GLOB")]
    pub pass_through: Vec<String>,
    /// When close() returns: `close` once the new version, its directory entry and its row are
    /// on stable storage; `batch` once it is judged, staged and its row written (durable within
    /// the batch window, or at fsync) [default: the policy's durability, else close].
    #[arg(long, value_name = "MODE", value_parser = ["close", "batch"])]
    pub durability: Option<String>,
    /// Serve files on pass-through paths through the daemon instead of letting the kernel read
    /// and write them directly (FUSE passthrough, Linux ≥ 6.9, as root; used where available).
    #[arg(long)]
    pub no_kernel_passthrough: bool,
    /// Tell a refused writer why, one line on its standard error (a terminal, pipe or socket;
    /// never a file) before its write or close fails [default: the policy's stderr_notice,
    /// else off; `rwfs run` turns it on].
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub stderr_notice: Option<String>,
    /// Also serve MCP over streamable HTTP at ADDR (loopback, e.g. 127.0.0.1:8765), path /mcp,
    /// with a bearer token kept in the state directory (printed when first generated).
    #[arg(long, value_name = "ADDR")]
    pub mcp_http: Option<std::net::SocketAddr>,
}

#[derive(Debug, Args)]
pub struct AgentRulesArgs {
    /// The agent the rules are for: `claude` (CLAUDE.md), `codex` (AGENTS.md), `aider`
    /// (CONVENTIONS.md), `cursor` (.cursorrules), `copilot` (.github/copilot-instructions.md)
    /// or `generic`.
    #[arg(long = "for", value_enum, default_value = "generic", value_name = "AGENT")]
    pub agent: Agent,
    /// Only the mount's section (for an agent without the rwfs MCP server).
    #[arg(long)]
    pub mount_only: bool,
}

#[derive(Debug, Args)]
pub struct HookArgs {
    /// Print the notices as plain text, one paragraph each, instead of the harness's JSON.
    #[arg(long)]
    pub text: bool,
}

#[derive(Debug, Args)]
pub struct HooksArgs {
    /// The harness: `claude` (Claude Code's settings.json), `codex` (Codex's hooks.json) or
    /// `aider` (no hooks: what reaches its model instead).
    #[arg(long = "for", value_enum, value_name = "AGENT")]
    pub agent: Agent,
    /// Merge the hooks into the harness's file instead of printing them: `.claude/settings.json`
    /// in the workspace (Claude Code), `$CODEX_HOME/hooks.json` (Codex, `~/.codex`), or `--file`.
    #[arg(long)]
    pub install: bool,
    /// The file `--install` merges into.
    #[arg(long, value_name = "FILE", requires = "install")]
    pub file: Option<PathBuf>,
}

/// The agents `rwfs agent-rules` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    Claude,
    Codex,
    Aider,
    Cursor,
    Copilot,
    Generic,
}

impl Agent {
    /// The file the rules go in.
    pub fn file(self) -> &'static str {
        match self {
            Agent::Claude => "CLAUDE.md",
            Agent::Codex | Agent::Generic => "AGENTS.md",
            Agent::Aider => "CONVENTIONS.md",
            Agent::Cursor => ".cursorrules",
            Agent::Copilot => ".github/copilot-instructions.md",
        }
    }

    /// The harness's name, as a person says it.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Codex => "Codex CLI",
            Agent::Aider => "aider",
            Agent::Cursor => "Cursor",
            Agent::Copilot => "GitHub Copilot",
            Agent::Generic => "a generic agent",
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Leave the workspace mounted when PROGRAM exits (if this command mounted it).
    #[arg(long)]
    pub keep_mounted: bool,
    #[command(flatten)]
    pub mount: MountOptionArgs,
    /// The program and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "PROGRAM")]
    pub program: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ShellArgs {
    /// Leave the workspace mounted when the shell exits (if this command mounted it).
    #[arg(long)]
    pub keep_mounted: bool,
    #[command(flatten)]
    pub mount: MountOptionArgs,
}

#[derive(Debug, Args)]
pub struct UnmountArgs {
    /// The mountpoint (or the workspace of a mount over itself).
    pub path: PathBuf,
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Also the approved, denied and superseded ones.
    #[arg(long)]
    pub all: bool,
    /// With each pending one, the unified diff of its file's current version against it.
    #[arg(long)]
    pub diff: bool,
    /// Print JSON (an array).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The approval's id (`rj_…`, as `rwfs approvals` and the refusal's envelope give it).
    pub id: String,
    /// Install it even though its file changed since it was parked (without a journaled change:
    /// an edit while unmounted), overwriting that change (which stays restorable).
    #[arg(long)]
    pub force: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DenyArgs {
    /// The approval's id.
    pub id: String,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WriteArgs {
    /// Path relative to the workspace root.
    pub path: String,
    /// create (fail if it exists), overwrite, or append.
    #[arg(long, default_value = "overwrite", value_parser = ["create", "overwrite", "append"])]
    pub mode: String,
    /// Fail unless the current content has this sha256 ("" = the file must not exist).
    #[arg(long, value_name = "SHA")]
    pub expect: Option<String>,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    pub path: String,
    /// Fail unless the current content has this sha256.
    #[arg(long, value_name = "SHA")]
    pub expect: Option<String>,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only rows of this path.
    #[arg(long)]
    pub path: Option<String>,
    /// Show the last N rows (0: all).
    #[arg(short = 'n', default_value_t = 20)]
    pub n: usize,
    /// Only rows from TIME on: RFC 3339, a UTC "YYYY-MM-DD HH:MM:SS", or a duration ago ("1h").
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only rows of this session (see `rwfs sessions`).
    #[arg(long, value_name = "S")]
    pub session: Option<String>,
    /// Also rows of editors' swap, backup, lock and probe files (policy `editor_files`), which
    /// are left out by default (their refusals never are).
    #[arg(long)]
    pub all: bool,
    /// After the last rows, keep printing rows as they become durable, until interrupted.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Print the rows as JSON lines, exactly as stored.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("point").required(true).args(["to", "seq", "session", "undo", "tool_call", "turn"]))]
pub struct RewindArgs {
    /// What the workspace held at TIME (RFC 3339, "YYYY-MM-DD HH:MM:SS" UTC, or "20m" ago).
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
    /// What it held right after the row with this seq.
    #[arg(long, value_name = "N")]
    pub seq: Option<u64>,
    /// What the paths this session changed held before it (others' changes stay).
    #[arg(long, value_name = "S")]
    pub session: Option<String>,
    /// Take back the rewind GROUP (its id is printed by the rewind and in its rows).
    #[arg(long, value_name = "GROUP")]
    pub undo: Option<String>,
    /// Undo exactly one tool call of an agent: the changes made while it ran, by the harness or
    /// anything it spawned (its id, `toolu_…`, as `rwfs log` shows it; needs `rwfs hooks
    /// --install`).
    #[arg(long, value_name = "ID")]
    pub tool_call: Option<String>,
    /// Undo everything an agent session did since its prompt turn N began (SESSION:N names the
    /// session; N alone, the newest session with a turn N).
    #[arg(long, value_name = "[SESSION:]N")]
    pub turn: Option<String>,
    /// Only paths matching these globs (`src/**`, `*.md`).
    #[arg(value_name = "GLOB")]
    pub globs: Vec<String>,
    /// Print the plan, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also overwrite paths whose bytes changed outside rwfs since their last row (the plan
    /// marks them `forced`).
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["path", "since", "session"]))]
pub struct DiffArgs {
    /// The file to compare two versions of.
    pub path: Option<String>,
    /// The older version: a digest prefix, a time, or `seq:N` [default: the one before the
    /// last change].
    #[arg(long, value_name = "REV", requires = "path")]
    pub from: Option<String>,
    /// The newer version [default: the current one].
    #[arg(long, value_name = "REV", requires = "path")]
    pub to: Option<String>,
    /// Summarise every file changed since TIME.
    #[arg(long, value_name = "TIME", conflicts_with = "path")]
    pub since: Option<String>,
    /// Summarise every file this session changed.
    #[arg(long, value_name = "S", conflicts_with = "path")]
    pub session: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BlameArgs {
    /// The file to blame.
    pub path: String,
    /// One JSON object: the path, its current digest, `note`, and `lines` (each `line`, `text`
    /// and `origin`: the row's seq, ts, session, pid, comm, uid, sha256; null when no row).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    pub path: String,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("version").required(true).args(["sha", "at"]))]
pub struct RestoreArgs {
    pub path: String,
    /// The version's sha256, or an unambiguous prefix of at least 4 hex digits.
    #[arg(long)]
    pub sha: Option<String>,
    /// The content the file had at TIME: RFC 3339 ("2026-11-21T10:00:00Z"), a UTC date and
    /// time ("2026-11-21 10:00:00"), or a duration ago ("10m", "2h 30m").
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Files or directories to scan, `-` for stdin [default: .].
    pub paths: Vec<String>,
    /// Print one JSON document with every file's report.
    #[arg(long, conflicts_with = "sarif")]
    pub json: bool,
    /// Print SARIF 2.1.0 (for code-scanning tools).
    #[arg(long)]
    pub sarif: bool,
    /// Skip files larger than this many bytes.
    #[arg(long, default_value_t = 10 << 20, value_name = "BYTES")]
    pub max_size: u64,
    /// Policy file [default: $RW_POLICY_FILE, else WORKSPACE/.resilient_write/policy.yaml].
    #[arg(long, env = "RW_POLICY_FILE", value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Keep versions that left the tree less than N days ago (default: the policy's
    /// `retention.max_age_days`, 30); the store's size limit applies either way.
    #[arg(long, value_name = "N")]
    pub keep_days: Option<u64>,
    /// Also encrypt the kept versions stored in plaintext that should not be: refused drafts and
    /// versions holding a credential (a store written before encryption at rest, or while the
    /// key was missing). Crash-safe; the key is made on first need (see docs/state.md).
    #[arg(long)]
    pub encrypt: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// A name in text output: control characters and backslashes escaped (`\n`, `\t`, `\u{1b}`,
/// `\\`), so one row stays one line and a terminal never runs what a name holds. JSON output
/// keeps names as they are.
pub struct Escaped<'a>(pub &'a str);

impl std::fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write as _;
        for c in self.0.chars() {
            match c {
                '\\' => f.write_str("\\\\")?,
                c if c.is_control() => write!(f, "{}", c.escape_default())?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}
