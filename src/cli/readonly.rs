//! The read-only commands (`log`, `history`, `show`, `sessions`, `diff`, `blame`, `status`,
//! `approvals`) give the same answer whether or not the workspace is mounted over itself.
//!
//! Through a mount over the workspace, `objects/`, the keys and the journal's index are hidden
//! (docs/architecture.md, guarantee 7): a command reading them there would call kept versions lost. So when a
//! process owns the workspace (its control socket answers), the command line goes to it
//! ([`Request::Read`]); it runs the very same command ([`answer`], registered with
//! `control::answer_reads_with`) on its own view of the backing directory, with the output kept
//! instead of printed, and this process prints what it printed and exits with its code. Its
//! errors come back as the daemon's errors and print as this process's own would. Without an
//! owner the command runs here ([`run`]). It does not serve `log --follow` (that streams
//! through the daemon's change feed, `history::follow`) nor any command that changes something
//! (those have their own requests).

use std::path::Path;

use base64::Engine as _;
use serde_json::{Value, json};

use super::{Cli, Command, Exit};
use crate::app::control::{self, Request};
use crate::error::{Reason, Result};
use crate::history::Workspace;

/// Is `command` one [`run`] answers?
pub fn is_read_only(command: &Command) -> bool {
    match command {
        Command::Log(args) => !args.follow,
        Command::History(_)
        | Command::Show(_)
        | Command::Sessions(_)
        | Command::Diff(_)
        | Command::Blame(_)
        | Command::Status(_)
        | Command::Approvals(_) => true,
        _ => false,
    }
}

/// Run the read-only `command` for the workspace at `root`: by the process that owns it when
/// one answers, else on `ws` opened here (`open`, called only then).
pub fn run(root: &Path, command: Command, open: impl FnOnce() -> Result<Workspace>) -> Result<Exit> {
    if control::answers(root) {
        // The command line as given (its other arguments are parsed again by the owner).
        let argv: Option<Vec<String>> = std::env::args_os().map(|a| a.into_string().ok()).collect();
        if let Some(mut argv) = argv {
            // The owner's output is not a terminal: colour as this process would (unless the
            // command line says; before the subcommand, so never after a `--`).
            if !argv.iter().any(|a| a == "--color" || a.starts_with("--color=")) {
                let colour = if super::text::colours() { "--color=always" } else { "--color=never" };
                argv.insert(1.min(argv.len()), colour.to_string());
            }
            match control::call(root, Request::Read { argv }, &[]) {
                Ok(answer) => return Ok(replay(&answer)),
                // An owner that does not know the request (an older daemon) or went away
                // meanwhile: read here.
                Err(e) if e.code() == "bad_request" || e.code() == "daemon_gone" => {}
                Err(e) if e.step() == Some("connect to the daemon") => {}
                Err(e) => return Err(e),
            }
        }
    }
    on(&open()?, command)
}

/// Print what the owner printed; its exit code.
fn replay(answer: &Value) -> Exit {
    let bytes = |key: &str| {
        let text = answer[key].as_str().unwrap_or_default();
        base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_default()
    };
    super::emit_bytes(&bytes("stdout"));
    let stderr = bytes("stderr");
    if !stderr.is_empty() {
        super::emit_err(format_args!("{}", String::from_utf8_lossy(&stderr)));
    }
    match answer["exit"].as_u64() {
        Some(0) => Exit::Ok,
        Some(1) => Exit::Negative,
        _ => Exit::Error,
    }
}

/// The owner's side of [`Request::Read`]: run the read-only command line `argv` on `ws` (the
/// owner's view of the backing directory), keeping what it prints: `{ok, exit, stdout,
/// stderr}` (base64), or the command's error.
pub fn answer(ws: &Workspace, argv: &[String]) -> Result<Value> {
    let cli = <Cli as clap::Parser>::try_parse_from(argv)
        .map_err(|_| Reason::InvalidArgument { what: "read request: not a command line rwfs parses" })?;
    if !is_read_only(&cli.command) {
        return Err(Reason::InvalidArgument { what: "read request: not a read-only command" }.into());
    }
    super::text::colour_when(cli.color);
    let (exit, stdout, stderr) = super::captured(|| on(ws, cli.command));
    let encode = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    Ok(json!({"ok": true, "exit": exit? as u8, "stdout": encode(&stdout), "stderr": encode(&stderr)}))
}

/// The read-only `command` on `ws`.
fn on(ws: &Workspace, command: Command) -> Result<Exit> {
    match command {
        Command::Log(args) => super::read::log(ws, args),
        Command::History(args) => super::read::history(ws, args),
        Command::Show(args) => super::read::show(ws, &args.spec),
        Command::Sessions(args) => super::history::sessions(ws, args.json),
        Command::Diff(args) => super::history::diff(ws, args),
        Command::Blame(args) => super::history::blame(ws, args),
        Command::Status(args) => super::read::status(ws, args.json),
        Command::Approvals(args) => super::approvals::list(ws, &args),
        _ => Err(Reason::InvalidArgument { what: "a read-only command" }.into()),
    }
}
