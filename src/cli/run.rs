//! Running a parsed command: open the workspace, call the engine, print the answer.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::json;

use super::mount::{mount, mount_statuses, unmount};
use super::reach::{actor, existing, parse_time, short, with_engine};
use super::text::{self, TIME_WIDTH};
use super::{Cli, Command, Escaped, Exit, GcArgs, HistoryArgs, LogArgs, RestoreArgs, RmArgs, WriteArgs};
use super::{errln, outln};
use crate::app::control::{self, Request, committed_json};
use crate::engine::{Expect, Options, RestoreTo, Restored, Workspace, WriteMode, WriteRequest, verify};
use crate::error::{IoContext, Reason, Result};
use crate::journal::query;
use crate::journal::{Op, Row};

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
                    | Command::Log(_)
                    | Command::Rewind(_)
            );
            super::discover::chosen(cli.workspace.clone(), takes_paths)
        }
    };
    let options = Options {
        allow_unsafe_root: cli.allow_unsafe_root,
        disk: None,
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
        | Command::Status(_)) => super::readonly::run(&root, command, || existing(&root, &options)),
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
            let policy = Workspace::open(&root, &options)
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
        |engine| engine.gc(keep, &actor).map(|gc| crate::app::control::gc_json(&gc)),
        || (Request::Gc { keep_seconds: keep.map(|k| k.as_secs()) }, Vec::new()),
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
    }
    Ok(Exit::Ok)
}

/// `rwfs show PATH@REV`: the bytes of that version on stdout.
pub(super) fn show(ws: &Workspace, spec: &str) -> Result<Exit> {
    let Some((path, rev)) = spec.rsplit_once('@') else {
        return Err(Reason::InvalidArgument { what: "PATH@REV (REV: a digest prefix or a time)" }.into());
    };
    let to = if rev.len() >= 4 && rev.bytes().all(|b| b.is_ascii_hexdigit()) {
        RestoreTo::Sha(rev.to_string())
    } else {
        RestoreTo::At(parse_time(rev)?)
    };
    let (_, bytes) = ws.version_bytes(path, &to)?;
    super::emit_bytes(&bytes);
    Ok(Exit::Ok)
}

/// `rwfs log`: the last rows.
pub(super) fn log(ws: &Workspace, args: LogArgs) -> Result<Exit> {
    log_tail(ws, &args).map(|_| Exit::Ok)
}

/// `rwfs log --follow`: the last rows, then each new row as it becomes durable.
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

/// Print the last rows `args` asks for; the journal's length read and the rows' filter.
fn log_tail(ws: &Workspace, args: &LogArgs) -> Result<(u64, query::Filter)> {
    let filter = args.path.as_deref().map(|p| ws.lookup(p)).transpose()?;
    // Rows carry whole seconds: compare at that precision.
    let since = args.since.as_deref().map(parse_time).transpose()?.map(|t| {
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    });
    let leave_out = (!args.all && filter.is_none()).then(|| ws.policy(None)).transpose()?;
    let filter = query::Filter {
        path: filter.map(|p| p.as_str().to_string()),
        session: args.session.clone(),
        since,
        before: None,
        leave_out: leave_out.map(|p| p.editor_files().clone()),
    };
    let tail = query::tail(ws, &filter, args.n)?;
    if !args.json {
        outln!(
            "{:>6}  {:<TIME_WIDTH$}  {:<8}  {:<12}  {:>10}  {:<40}  WHO",
            "SEQ",
            "TIME",
            "OP",
            "SHA256",
            "BYTES",
            "PATH"
        );
    }
    for row in &tail.rows {
        print_row(row, args.json);
    }
    // The key is unreadable through the mount (hidden) and to other users (0600): checking the
    // keyed chain is `rwfs verify`'s business, not a reason to warn on every listing.
    let key_missing = crate::journal::Problem::KeyMissing.to_string();
    for problem in tail.problems.iter().filter(|p| **p != key_missing) {
        errln!("journal: {problem}");
    }
    Ok((tail.len, filter))
}

fn print_row(row: &Row, json: bool) {
    if json {
        outln!("{}", row.to_line());
        return;
    }
    outln!(
        "{:>6}  {:<TIME_WIDTH$}  {}  {:<12}  {:>10}  {:<40}  {}",
        row.seq.map_or("-".to_string(), |s| s.to_string()),
        row.ts,
        text::op(&format!("{:<8}", row.op().as_str()), row.op().as_str()),
        short(row.sha256),
        row.bytes,
        Escaped(&row.path).to_string(),
        who(row)
    );
}

pub(super) fn history(ws: &Workspace, args: HistoryArgs) -> Result<Exit> {
    let history = ws.history(&args.path)?;
    if args.json.json {
        let versions: Vec<_> = history
            .versions
            .iter()
            .map(|v| {
                let row = &v.entry.row;
                json!({
                    "seq": row.seq, "ts": row.ts, "op": row.op().as_str(), "sha256": v.state,
                    "prev_sha256": row.prev_sha256, "bytes": row.bytes, "where": v.availability.as_str(),
                    "from": row.from, "to": (row.path != history.path.as_str()).then_some(&row.path),
                    "refused_sha256": (row.op() == Op::Block).then_some(row.sha256),
                    "via": row.via, "pid": row.pid, "comm": row.comm, "uid": row.uid, "journal_id": row.journal_id,
                })
            })
            .collect();
        outln!("{}", json!({"path": history.path.as_str(), "current": history.current, "versions": versions}));
        return Ok(Exit::Ok);
    }
    outln!("{} (current: {})", Escaped(history.path.as_str()), short(history.current));
    // WAS: the version the change replaced (for a delete, what was deleted: `rwfs show` or
    // `rwfs restore --sha` bring it back).
    outln!(
        "{:>6}  {:<TIME_WIDTH$}  {:<8}  {:<12}  {:<12}  {:>10}  {:<8}  WHO",
        "SEQ",
        "TIME",
        "OP",
        "WAS",
        "SHA256",
        "BYTES",
        "WHERE"
    );
    for version in &history.versions {
        let row = &version.entry.row;
        outln!(
            "{:>6}  {:<TIME_WIDTH$}  {}  {:<12}  {:<12}  {:>10}  {:<8}  {}",
            row.seq.map_or("-".to_string(), |s| s.to_string()),
            row.ts,
            text::op(&format!("{:<8}", row.op().as_str()), row.op().as_str()),
            short(row.prev_sha256),
            short(version.state),
            row.bytes,
            version.availability.as_str(),
            who(row)
        );
    }
    Ok(Exit::Ok)
}

/// `rwfs verify`: by the daemon when one serves the workspace (through a mount the key and
/// `objects/` are hidden from this process), else here.
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
    outln!("journal: {} rows, {} problems", report["rows"], list("problems").len());
    for problem in list("problems") {
        outln!("  {}", Escaped(&text(&problem)));
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
        outln!("  {}: holds {actual}", text(&bad["path"]));
    }
    Ok(exit)
}

pub(super) fn status(ws: &Workspace, as_json: bool) -> Result<Exit> {
    let status = ws.status()?;
    let last = status.last_row.as_ref();
    let mounts: Vec<serde_json::Value> = mount_statuses(&status.root)
        .into_iter()
        .map(|(m, daemon)| {
            let daemon = daemon.unwrap_or_else(|| json!({}));
            json!({
                "workspace": m.workspace, "mountpoint": m.mountpoint, "pid": daemon["pid"],
                "drafts_open": daemon["drafts_open"], "last_commit": daemon["last_commit"],
                "kernel_passthrough": daemon["kernel_passthrough"], "requests": daemon["requests"],
                "log_lines_dropped": daemon["log_lines_dropped"],
            })
        })
        .collect();
    // The lock probe cannot see the owner through a mount over the workspace (the kernel keeps
    // that mount's flocks to itself): a daemon that answers for this workspace owns it.
    let owner = status.owner.map(|o| (o.pid, Some(o.settled_seq))).or_else(|| {
        let pid = mounts
            .iter()
            .find_map(|m| m["pid"].as_u64())
            .or_else(|| crate::app::daemon::running(&status.root).and_then(|d| d["pid"].as_u64()))?;
        Some((u32::try_from(pid).ok()?, None))
    });
    if as_json {
        outln!(
            "{}",
            json!({
                "workspace": status.root, "initialized": status.initialized,
                "owner": owner.map(|(pid, settled_seq)| json!({"pid": pid, "settled_seq": settled_seq})),
                "rows": status.rows, "journal_problems": status.journal_problems,
                "last": last.map(|r| json!({"seq": r.seq, "ts": r.ts, "op": r.op().as_str(), "path": r.path})),
                "objects": status.objects, "object_bytes": status.object_bytes,
                "retention": status.retention.map(|r| json!({
                    "max_bytes": r.max_bytes, "max_free_fraction": r.max_free_fraction,
                    "max_age_days": r.max_age.as_secs_f64() / 86_400.0, "interval_seconds": r.interval.as_secs(),
                    "limit": status.object_limit,
                })),
                "last_gc": status.last_gc.as_ref().map(|r| json!({"seq": r.seq, "ts": r.ts, "bytes": r.bytes, "reason": r.reason})),
                "mounts": mounts,
            })
        );
        return Ok(Exit::Ok);
    }
    outln!("workspace  {}", Escaped(&status.root.to_string_lossy()));
    match owner {
        Some((0, _)) => outln!("owner      an rwfs process (its lock record is unreadable)"),
        Some((pid, _)) => outln!("owner      rwfs pid {pid}"),
        None => outln!("owner      none (no rwfs process holds the workspace)"),
    }
    match last {
        Some(row) => outln!(
            "journal    {}, {}; last: {} {} {}",
            text::count(status.rows, "row", "rows"),
            text::count(status.journal_problems as u64, "problem", "problems"),
            row.ts,
            row.op().as_str(),
            Escaped(&row.path)
        ),
        None => outln!("journal    empty"),
    }
    outln!(
        "objects    {} kept, {}",
        text::count(status.objects, "version", "versions"),
        text::size(status.object_bytes)
    );
    if let Some(r) = status.retention {
        let limit = status.object_limit.map_or_else(|| "unknown".to_string(), text::size);
        outln!(
            "retention  limit {limit} (max {}, {}% of the space the store could use), versions kept {} days, enforced every {} s",
            text::size(r.max_bytes),
            r.max_free_fraction * 100.0,
            r.max_age.as_secs_f64() / 86_400.0,
            r.interval.as_secs()
        );
    }
    if let Some(row) = &status.last_gc {
        outln!("last gc    {} ({} removed; {})", row.ts, text::size(row.bytes), row.reason.as_deref().unwrap_or(""));
    }
    if mounts.is_empty() {
        outln!("mounts     none (this workspace is not mounted)");
    }
    for m in &mounts {
        let pid = m["pid"].as_u64().map_or_else(|| "no daemon answers".to_string(), |p| format!("pid {p}"));
        outln!(
            "mount      {} on {} ({pid}, {} drafts open, last commit {})",
            Escaped(m["workspace"].as_str().unwrap_or("?")),
            Escaped(m["mountpoint"].as_str().unwrap_or("?")),
            m["drafts_open"].as_u64().unwrap_or(0),
            m["last_commit"].as_str().unwrap_or("never")
        );
        if let Some(requests) = m["requests"].as_object() {
            let n = |k: &str| requests.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
            let kernel = if m["kernel_passthrough"].as_bool() == Some(true) { "on" } else { "off" };
            outln!(
                "requests   {} reads, {} writes served by the daemon, {} bytes scanned; kernel passthrough {kernel} ({} opens)",
                n("read"),
                n("write"),
                n("scanned_bytes"),
                n("passthrough_opens")
            );
        }
        if let Some(dropped) = m["log_lines_dropped"].as_u64().filter(|n| *n > 0) {
            outln!("log        {dropped} lines could not be written (a full disk?) and were dropped");
        }
    }
    Ok(Exit::Ok)
}

/// A committed change, as [`committed_json`] describes it (from this process or the daemon).
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

pub(super) fn who(row: &Row) -> String {
    let via = row.via.map_or_else(|| Escaped(&row.caller).to_string(), |v| format!("{v:?}").to_lowercase());
    let mut who = via;
    if let Some(comm) = &row.comm {
        who.push(' ');
        who.push_str(&Escaped(comm).to_string());
    }
    if let Some(pid) = row.pid {
        who.push_str(&format!("[{pid}]"));
    }
    if let Some(uid) = row.uid {
        who.push_str(&format!(" uid {uid}"));
    }
    who
}
