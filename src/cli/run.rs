//! Running a parsed command: open the workspace, call the engine, print the answer.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::mount::{mount, unmount};
use super::reach::{actor, existing, parse_time, with_engine};
use super::read::{log_tail, print_row};
use super::{Cli, Command, Escaped, Exit, GcArgs, LogArgs, RestoreArgs, RmArgs, WriteArgs};
use super::{errln, outln};
use crate::app::control::{self, Request, committed_json};
use crate::engine::{Expect, Options, Restored, WriteMode, WriteRequest};
use crate::error::{IoContext, Reason, Result};
use crate::history::{RestoreTo, Workspace, verify};
use crate::journal::Row;

/// Run `cli`; errors are returned for `main` to print (on stderr). With `--json` a failure's
/// typed envelope is also printed on stdout, as one line: a script reads why from there.
pub fn run(cli: Cli) -> Result<Exit> {
    // A daemon this process becomes answers read-only commands with this very code.
    control::answer_reads_with(super::readonly::answer);
    super::text::colour_when(cli.color);
    let json = cli.command.json();
    let outcome = run_command(cli);
    if let (Err(e), true) = (&outcome, json) {
        outln!("{}", crate::envelope::Envelope::json_of(e));
    }
    outcome
}

fn run_command(cli: Cli) -> Result<Exit> {
    if matches!(
        cli.command,
        Command::Write(_)
            | Command::Rm(_)
            | Command::Restore(_)
            | Command::Status(_)
            | Command::Gc(_)
            | Command::Rewind(_)
            | Command::Approve(_)
            | Command::Deny(_)
    ) {
        super::session::warn_if_shadowed();
    }
    let root = match &cli.command {
        // The hook finds its workspace from the harness's `cwd`; help texts need none.
        Command::Hook(_) | Command::Completions(_) | Command::Man(_) => {
            cli.workspace.clone().unwrap_or_else(|| ".".into())
        }
        command => {
            let takes_paths = matches!(
                command,
                Command::Write(_)
                    | Command::Rm(_)
                    | Command::Restore(_)
                    | Command::History(_)
                    | Command::Show(_)
                    | Command::Diff(_)
                    | Command::Blame(_)
                    | Command::Log(_)
                    | Command::Rewind(_)
            );
            super::discover::chosen(cli.workspace.clone(), takes_paths)
        }
    };
    let options = Options {
        workspace: crate::history::Options { allow_unsafe_root: cli.allow_unsafe_root, disk: None },
        policy_file: std::env::var_os("RW_POLICY_FILE").filter(|f| !f.is_empty()).map(std::path::PathBuf::from),
        pass_through: Vec::new(),
        durability: None,
        // A CLI write's process is rwfs itself: no command line to read for it.
        command_line: None,
    };
    match cli.command {
        Command::Write(args) => write(&root, &options, args),
        Command::Rm(args) => rm(&root, &options, args),
        Command::Log(args) if args.follow => follow_log(&root, &existing(&root, &options)?, args),
        // The same answer mounted or not: asked of the owner when there is one.
        command @ (Command::Log(_)
        | Command::History(_)
        | Command::Show(_)
        | Command::Sessions(_)
        | Command::Diff(_)
        | Command::Blame(_)
        | Command::Status(_)
        | Command::Approvals(_)) => super::readonly::run(&root, command, || existing(&root, &options)),
        Command::Approve(args) => super::approvals::approve(&root, &options, &args),
        Command::Deny(args) => super::approvals::deny(&root, &options, &args),
        Command::Restore(args) => restore(&root, &options, args),
        Command::Man(super::ManArgs { dir: Some(dir) }) => {
            clap_mangen::generate_to(<Cli as clap::CommandFactory>::command(), &dir)
                .map_err(|e| crate::error::Error::io("write man pages", e).at(dir.display().to_string()))?;
            errln!("rwfs: wrote rwfs.1 and a page per command (rwfs-log.1, …) in {}", dir.display());
            Ok(Exit::Ok)
        }
        Command::Man(_) => {
            let mut out = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut out).step("render man page")?;
            super::emit_bytes(&out);
            Ok(Exit::Ok)
        }
        Command::Completions(args) => {
            let mut out = Vec::new();
            clap_complete::generate(args.shell, &mut <Cli as clap::CommandFactory>::command(), "rwfs", &mut out);
            super::emit_bytes(&out);
            Ok(Exit::Ok)
        }
        Command::Verify(args) => verify_cmd(&root, &options, args.json),
        Command::Rewind(args) => super::history::rewind(&root, &options, args),
        Command::Ui(args) => super::history::ui(&root, &options, args),
        Command::Gc(args) => gc(&root, &options, args),
        Command::Scan(args) => super::scan::scan(&root, &options, args),
        Command::Mount(args) => mount(root, options, args),
        Command::Unmount(args) => unmount(&args),
        Command::Run(args) => super::session::run_inside(&root, cli.allow_unsafe_root, args),
        Command::Shell(args) => {
            let shell = std::env::var("SHELL").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "/bin/sh".into());
            let args = super::RunArgs { keep_mounted: args.keep_mounted, mount: args.mount, program: vec![shell] };
            super::session::run_inside(&root, cli.allow_unsafe_root, args)
        }
        Command::Mcp(args) => {
            match args.http {
                Some(addr) => crate::app::mcp::run_http(&root, &options, addr)?,
                None => crate::app::mcp::run(&root, &options)?,
            }
            Ok(Exit::Ok)
        }
        Command::Hook(args) => {
            super::hook::hook(cli.workspace.as_deref(), &args);
            Ok(Exit::Ok)
        }
        Command::Hooks(args) => super::hook::hooks(&root, &args).map(|()| Exit::Ok),
        Command::AgentRules(args) => {
            let policy = Workspace::open(&root, &options.workspace)
                .and_then(|ws| ws.policy(options.policy_file.as_deref()))
                .or_else(|_| crate::policy::Policy::parse(""))?;
            super::emit(format_args!("{}", agent_rules(&args, &policy)));
            Ok(Exit::Ok)
        }
    }
}

/// The workspace at `root` for a read-only command: one rwfs has written (an empty answer
/// from a directory that is not a workspace would mislead).
/// The mount's section of `rwfs agent-rules`.
const AGENT_RULES: &str = include_str!("agent_rules.md");
/// The MCP section (`{retry_budget}`, `{high}`, `{medium}`, `{low}` come from the policy).
const AGENT_RULES_MCP: &str = include_str!("agent_rules_mcp.md");

/// What `rwfs agent-rules` prints for `args.agent`, with `policy`'s numbers.
fn agent_rules(args: &super::AgentRulesArgs, policy: &crate::policy::Policy) -> String {
    let mut out = format!(
        "<!-- rwfs agent rules for {} (generated by `rwfs agent-rules --for {}`) -->\n\n",
        args.agent.file(),
        format!("{:?}", args.agent).to_ascii_lowercase()
    );
    out.push_str(AGENT_RULES);
    if !args.mount_only {
        let t = policy.thresholds();
        out.push('\n');
        out.push_str(
            &AGENT_RULES_MCP
                .replace("{retry_budget}", &policy.retry_budget().to_string())
                .replace("{high}", &t.high.to_string())
                .replace("{medium}", &t.medium.to_string())
                .replace("{low}", &t.low.to_string()),
        );
    }
    out
}

fn write(root: &Path, options: &Options, args: WriteArgs) -> Result<Exit> {
    let mode: WriteMode = args.mode.parse()?;
    let expect = args.expect.as_deref().map(Expect::parse).transpose()?;
    let mut content = Vec::new();
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        errln!(
            "rwfs: reading the new content of {} from the terminal: end it with Ctrl-D (or pipe it: `echo hi | rwfs write PATH`)",
            Escaped(&args.path)
        );
    }
    std::io::stdin().read_to_end(&mut content).step("read stdin")?;
    let actor = actor();
    let committed = with_engine(
        root,
        options,
        |engine| {
            let request = WriteRequest { path: &args.path, content: &content, mode, expect, actor: &actor };
            engine.safe_write(&request).map(|c| committed_json(&c))
        },
        || {
            let request = Request::Write {
                path: args.path.clone(),
                mode: args.mode.clone(),
                expect: args.expect.clone(),
                len: content.len() as u64,
            };
            (request, content.clone())
        },
    )?;
    print_committed(&committed, args.json.json);
    Ok(Exit::Ok)
}

fn rm(root: &Path, options: &Options, args: RmArgs) -> Result<Exit> {
    let expect = args.expect.as_deref().map(Expect::parse).transpose()?;
    let actor = actor();
    let committed = with_engine(
        root,
        options,
        |engine| engine.delete(&args.path, expect, &actor).map(|c| committed_json(&c)),
        || (Request::Rm { path: args.path.clone(), expect: args.expect.clone() }, Vec::new()),
    )?;
    print_committed(&committed, args.json.json);
    Ok(Exit::Ok)
}

fn restore(root: &Path, options: &Options, args: RestoreArgs) -> Result<Exit> {
    let to = match (&args.sha, &args.at) {
        (Some(sha), _) => RestoreTo::Sha(sha.clone()),
        (None, Some(at)) => RestoreTo::At(parse_time(at)?),
        (None, None) => {
            return Err(Reason::InvalidArgument { what: "version: give --sha or --at" }.into());
        }
    };
    let actor = actor();
    let at_unix_ns = match &to {
        RestoreTo::At(t) => Some(control::unix_ns(*t)),
        RestoreTo::Sha(_) => None,
    };
    let restored = with_engine(
        root,
        options,
        |engine| match engine.restore(&args.path, &to, &actor)? {
            Restored::Committed(committed) => Ok(committed_json(&committed)),
            Restored::AlreadyCurrent { path, sha256 } => {
                Ok(json!({"ok": true, "path": path.as_str(), "sha256": sha256, "unchanged": true}))
            }
        },
        || (Request::Restore { path: args.path.clone(), sha: args.sha.clone(), at_unix_ns }, Vec::new()),
    )?;
    if restored["unchanged"] == json!(true) {
        if args.json.json {
            outln!("{restored}");
        } else {
            errln!(
                "{} already holds {}; nothing to do",
                Escaped(restored["path"].as_str().unwrap_or("")),
                short_json(&restored["sha256"])
            );
        }
    } else {
        print_committed(&restored, args.json.json);
    }
    Ok(Exit::Ok)
}

fn gc(root: &Path, options: &Options, args: GcArgs) -> Result<Exit> {
    let keep = args.keep_days.map(|days| Duration::from_secs(days.saturating_mul(86_400)));
    let actor = actor();
    let gc = with_engine(
        root,
        options,
        |engine| crate::app::control::gc_request(engine, keep, args.encrypt, &actor),
        || (Request::Gc { keep_seconds: keep.map(|k| k.as_secs()), encrypt: args.encrypt }, Vec::new()),
    )?;
    if args.json.json {
        outln!("{gc}");
    } else {
        outln!(
            "removed {} versions ({} bytes): {} by age, {} over the limit (the store held {} bytes, its limit is {})",
            gc["removed"],
            gc["bytes"],
            gc["by_age"],
            gc["by_size"],
            gc["store_bytes"],
            gc["limit"]
        );
        if let Some(done) = gc.get("encrypted") {
            outln!(
                "encrypted {} versions ({} were already, {} looked at)",
                done["sealed"],
                done["already"],
                done["objects"]
            );
        }
    }
    Ok(Exit::Ok)
}

fn follow_log(root: &Path, ws: &Workspace, args: LogArgs) -> Result<Exit> {
    let (len, filter) = log_tail(ws, &args)?;
    // New rows only (no `--since` or `-n` cut): each once, in order, as they arrive.
    super::history::follow(root, ws, len, |line| match serde_json::from_slice::<Row>(line) {
        Ok(row) if filter.matches(&row) => {
            match args.json {
                true => super::emit_bytes(&[line, b"\n"].concat()),
                false => print_row(&row, false),
            }
            !super::stdout_closed()
        }
        _ => !super::stdout_closed(),
    })?;
    Ok(Exit::Ok)
}

fn verify_cmd(root: &Path, options: &Options, as_json: bool) -> Result<Exit> {
    let here = || -> Result<serde_json::Value> { Ok(control::verify_json(&verify(&existing(root, options)?)?)) };
    let report = if control::answers(root) {
        match control::call(root, Request::Verify, &[]) {
            Ok(answer) => answer["report"].clone(),
            // The daemon went away meanwhile (`rwfs unmount` returns once the mount is gone,
            // before its daemon has exited): nothing hides the state directory any more.
            Err(e) if e.code() == "daemon_gone" || e.step() == Some("connect to the daemon") => here()?,
            Err(e) => return Err(e),
        }
    } else {
        here()?
    };
    let exit = if report["ok"] == json!(true) { Exit::Ok } else { Exit::Negative };
    if as_json {
        outln!("{report}");
        return Ok(exit);
    }
    let list = |key: &str| report[key].as_array().cloned().unwrap_or_default();
    let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    let short = |v: &serde_json::Value| v.as_str().map_or("absent".to_string(), |s| s.chars().take(12).collect());
    outln!(
        "journal: {} rows, {}",
        report["rows"],
        super::text::count(list("problems").len() as u64, "problem", "problems")
    );
    for problem in list("problems") {
        outln!("  {}", Escaped(&text(&problem)));
    }
    for skipped in list("skipped_lines") {
        outln!("  {}", Escaped(&text(&skipped)));
    }
    outln!("files: {} paths checked, {} differ from their last row", report["paths"], list("drift").len());
    for drift in list("drift") {
        outln!(
            "  {}: journal {} , disk {}",
            Escaped(&text(&drift["path"])),
            short(&drift["expected"]),
            text(&drift["found"])
        );
    }
    outln!("objects: {} checked, {} do not hash to their names", report["objects"], list("bad_objects").len());
    for bad in list("bad_objects") {
        let actual = bad["actual"].as_str().map_or_else(|| "unreadable".to_string(), |a| a.chars().take(12).collect());
        outln!("  {}: holds {actual}: {}", text(&bad["path"]), text(&bad["why"]));
    }
    Ok(exit)
}

fn print_committed(c: &serde_json::Value, as_json: bool) {
    if as_json {
        outln!("{c}");
        return;
    }
    outln!(
        "{} {}: {} bytes, sha256 {} (was {}), seq {}",
        c["op"].as_str().unwrap_or("?"),
        Escaped(c["path"].as_str().unwrap_or("?")),
        c["bytes"],
        short_json(&c["sha256"]),
        short_json(&c["prev_sha256"]),
        c["seq"]
    );
}

/// A digest in JSON (or null), abbreviated.
fn short_json(sha: &serde_json::Value) -> String {
    sha.as_str().filter(|s| !s.is_empty()).map_or_else(|| "absent".to_string(), |s| s[..12.min(s.len())].to_string())
}
