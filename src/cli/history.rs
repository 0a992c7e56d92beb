//! `rwfs sessions`, `rwfs rewind`, `rwfs diff`, `rwfs blame` and the following half of `rwfs log --follow`:
//! the time-travel commands. The questions go to `journal::query` and the engine; this file
//! parses and prints.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde_json::json;

use super::reach::{actor, existing, parse_time, short, with_engine};
use super::{BlameArgs, DiffArgs, Escaped, Exit, RewindArgs, UiArgs, errln, outln};
use crate::app::control::{self, Request, rewound_json, unix_ns};
use crate::engine::Options;
use crate::engine::Rewind;
use crate::error::{Error, IoContext, Reason, Result};
use crate::history::{Rev, Workspace};
use crate::journal::query::{self, Selection};

/// `rwfs blame PATH`: `SEQ  TIME  SESSION  PROCESS  N| line`, one row per line.
pub fn blame(ws: &Workspace, args: BlameArgs) -> Result<Exit> {
    let b = ws.blame(&args.path)?;
    if args.json {
        outln!("{}", json!(b));
        return Ok(Exit::Ok);
    }
    if let Some(note) = &b.note {
        errln!("rwfs blame: {note}");
    }
    if b.binary {
        errln!("rwfs blame: {} is binary ({}): it has no lines", Escaped(&b.path), short(b.current));
        return Ok(Exit::Ok);
    }
    let width = b.lines.len().to_string().len();
    for l in &b.lines {
        let (seq, ts, session, process) = match &l.origin {
            Some(o) => (
                o.seq.map_or_else(|| "-".to_string(), |s| format!("#{s}")),
                o.ts.as_str(),
                o.session.as_deref().unwrap_or("-"),
                format!(
                    "{} {}{}",
                    o.comm.as_deref().unwrap_or("?"),
                    o.pid.map_or_else(|| "-".to_string(), |p| p.to_string()),
                    o.group.as_deref().map(|g| format!(" {g}")).unwrap_or_default()
                ),
            ),
            None => ("-".to_string(), "(outside rwfs)", "-", String::new()),
        };
        outln!(
            "{seq:>7}  {ts:<tw$}  {:<20}  {:<20}  {:>width$}| {}",
            Escaped(session).to_string(),
            Escaped(&process).to_string(),
            l.line,
            Escaped(&l.text),
            tw = super::text::TIME_WIDTH
        );
    }
    Ok(Exit::Ok)
}

/// `rwfs sessions`.
pub fn sessions(ws: &Workspace, as_json: bool) -> Result<Exit> {
    let sessions = query::sessions(ws)?;
    if as_json {
        for s in &sessions {
            outln!("{}", json!(s));
        }
        return Ok(Exit::Ok);
    }
    let w = super::text::TIME_WIDTH;
    outln!(
        "{:<28}  {:<w$}  {:<w$}  {:>6}  {:>6}  {:>7}  {:>5}  ROOT",
        "SESSION",
        "START",
        "END",
        "ROWS",
        "FILES",
        "BLOCKED",
        "CALLS"
    );
    for s in &sessions {
        outln!(
            "{:<28}  {:<w$}  {:<w$}  {:>6}  {:>6}  {:>7}  {:>5}  {}",
            Escaped(if s.name.is_empty() { "-" } else { &s.name }).to_string(),
            s.start,
            s.end,
            s.rows,
            s.files_changed,
            s.blocked,
            s.tool_calls,
            Escaped(&s.root)
        );
    }
    Ok(Exit::Ok)
}

/// `rwfs rewind`: on the daemon's engine when mounted (the mount sees the result at once),
/// else on one opened here.
pub fn rewind(root: &Path, options: &Options, args: RewindArgs) -> Result<Exit> {
    // Nothing to rewind where rwfs never wrote; a dry run sets nothing up there either.
    if !control::answers(root) {
        existing(root, options)?;
    }
    let after_unix_ns = args.to.as_deref().map(parse_time).transpose()?.map(unix_ns);
    let selection = match &args.turn {
        Some(spec) => turn(root, options, spec)?,
        None => {
            let group = args.undo.clone().or_else(|| args.tool_call.clone());
            control::selection(args.seq, after_unix_ns, args.session.clone(), group)?
        }
    };
    let rewind = Rewind { selection, globs: args.globs.clone(), force: args.force, dry_run: args.dry_run };
    let out = rewind_on_engine(root, options, &rewind)?;
    if args.json {
        outln!("{out}");
        return Ok(Exit::Ok);
    }
    let steps = out["steps"].as_array().cloned().unwrap_or_default();
    let verb = if args.dry_run { "would" } else { "will" };
    outln!("rewind to {}: {} paths", out["selection"].as_str().unwrap_or("?"), steps.len());
    for step in &steps {
        let path = Escaped(step["path"].as_str().unwrap_or("?")).to_string();
        let (from, to) = (short_json(&step["from"]), short_json(&step["to"]));
        match step["skipped"].as_str() {
            Some(why) => outln!("  skip     {path}  ({why})"),
            None => outln!(
                "  {:<8} {path}  {from} -> {to}{}",
                step["action"].as_str().unwrap_or("?"),
                if step["forced"] == json!(true) { "  (forced: overwrites the changes made since)" } else { "" }
            ),
        }
        // A merge that conflicted: the hunks, so a person can merge by hand or decide on --force.
        for line in step["conflict"].as_str().into_iter().flat_map(str::lines) {
            outln!("           | {}", Escaped(line));
        }
    }
    let conflicts = steps.iter().filter(|s| s["conflict"].is_string() && s["skipped"].is_string()).count();
    if conflicts > 0 {
        errln!(
            "{conflicts} paths changed since conflict with the rewind and are left alone: merge them by hand, \
             or run again with --force to overwrite their changes (kept in history either way)"
        );
    }
    if args.dry_run {
        errln!(
            "dry run: nothing changed ({verb} apply {} steps)",
            steps.iter().filter(|s| s["skipped"].is_null()).count()
        );
    } else {
        match out["group"].as_str() {
            Some(group) => {
                errln!("applied {} steps as group {group} (undo: rwfs rewind --undo {group})", out["applied"])
            }
            None => errln!("nothing to do"),
        }
        for failed in out["failed"].as_array().into_iter().flatten() {
            errln!(
                "not applied: {} ({})",
                Escaped(failed[0].as_str().unwrap_or("?")),
                failed[1].as_str().unwrap_or("")
            );
        }
    }
    Ok(Exit::Ok)
}

/// What `--turn [SESSION:]N` selects (`journal::query::turn`), asked of the daemon when mounted.
fn turn(root: &Path, options: &Options, spec: &str) -> Result<Selection> {
    let answer = if control::answers(root) {
        control::call(root, Request::Turn { spec: spec.to_string() }, &[])?
    } else {
        control::turn_json(&Workspace::open(root, &options.workspace)?, spec)?
    };
    let (Some(session), Some(after_seq)) = (answer["session"].as_str(), answer["after_seq"].as_u64()) else {
        return Err(Error::from(Reason::NotFound).at(format!(
            "turn {spec}: no tool call of that turn is journaled (rwfs log shows tool_call rows; \
             they need `rwfs hooks --for claude --install`)"
        )));
    };
    Ok(Selection::SessionAfter(session.to_string(), after_seq))
}

/// Plan or perform `rewind` on the workspace's engine (the daemon's when mounted), as JSON.
pub fn rewind_on_engine(root: &Path, options: &Options, rewind: &Rewind) -> Result<serde_json::Value> {
    let actor = actor();
    with_engine(
        root,
        options,
        |engine| engine.rewind(rewind, &actor).map(|r| rewound_json(&r)),
        || {
            let (mut after_seq, mut after_unix_ns, mut session, mut group) = (None, None, None, None);
            match &rewind.selection {
                Selection::AfterSeq(seq) => after_seq = Some(*seq),
                Selection::AfterTime(t) => after_unix_ns = Some(unix_ns(*t)),
                Selection::Session(s) => session = Some(s.clone()),
                Selection::SessionAfter(s, seq) => (session, after_seq) = (Some(s.clone()), Some(*seq)),
                Selection::Group(g) => group = Some(g.clone()),
            }
            let request = Request::Rewind {
                after_seq,
                after_unix_ns,
                session,
                group,
                globs: rewind.globs.clone(),
                dry_run: rewind.dry_run,
                force: rewind.force,
            };
            (request, Vec::new())
        },
    )
}

/// `rwfs ui`: serve the time-travel page on a loopback address until interrupted; print its
/// URL, with a token made for this run, once.
pub fn ui(root: &Path, options: &Options, args: UiArgs) -> Result<Exit> {
    if control::answers(root) {
        // Mounted: the daemon serves the page (through the mount the journal's index and
        // objects/ are hidden; the daemon sees the backing directory), until it is unmounted.
        let answer = control::call(root, Request::Ui, &[])?;
        outln!(
            "rwfs: the history page of {} is served by its mount at {}",
            root.display(),
            answer["url"].as_str().unwrap_or("?")
        );
        errln!("(served until the workspace is unmounted; the token in the URL is the key to the page)");
        return Ok(Exit::Ok);
    }
    let ws = Workspace::open(root, &options.workspace)?;
    let feed_ws = Workspace::open(root, &options.workspace)?;
    let shown = ws.path().display().to_string();
    let token = crate::http::new_token()?;
    let listener = std::net::TcpListener::bind(args.addr)
        .map_err(|e| Error::io("bind the page's address", e).at(args.addr.to_string()))?;
    let addr = listener.local_addr().step("read the page's address")?;
    let (rewind_root, rewind_options) = (root.to_path_buf(), options.clone());
    let follow_root = root.to_path_buf();
    let (decide_root, decide_options) = (root.to_path_buf(), options.clone());
    let ui = crate::app::ui::Ui {
        ws,
        rewind: Box::new(move |rewind| rewind_on_engine(&rewind_root, &rewind_options, rewind)),
        // The page approves without --force: a file changed behind rwfs is decided at the CLI.
        decide: Box::new(move |id, approve| {
            super::approvals::decide(&decide_root, &decide_options, id, approve.then_some(false))
        }),
        follow: Box::new(move |offset, line| follow(&follow_root, &feed_ws, offset, |l| line(l))),
    };
    outln!("rwfs: the history page of {shown} is at http://{addr}/#token={token}");
    errln!("(the token in the URL is the key to the page: share it only with who may rewind this workspace)");
    crate::app::ui::serve(std::sync::Arc::new(ui), listener, &token, tokio_util::sync::CancellationToken::new())?;
    Ok(Exit::Ok)
}

fn short_json(sha: &serde_json::Value) -> String {
    sha.as_str().map_or_else(|| "absent".to_string(), |s| s[..12.min(s.len())].to_string())
}

/// `rwfs diff PATH [--from REV] [--to REV]`, or `rwfs diff --since TIME | --session S`.
pub fn diff(ws: &Workspace, args: DiffArgs) -> Result<Exit> {
    if let Some(path) = &args.path {
        let rev = |s: &Option<String>| s.as_deref().map(|s| Rev::parse(s, parse_time)).transpose();
        let d = ws.diff(path, rev(&args.from)?.as_ref(), rev(&args.to)?.as_ref(), None)?;
        if let (Some(note), false) = (&d.note, args.json) {
            errln!("rwfs diff: {note}");
        }
        if args.json {
            outln!("{}", json!(d));
        } else if d.binary {
            outln!(
                "Binary versions of {} differ: {} bytes ({}) -> {} bytes ({})",
                Escaped(&d.path),
                d.from_bytes,
                short(d.from),
                d.to_bytes,
                short(d.to)
            );
        } else {
            for line in d.unified.split_inclusive('\n') {
                let (body, end) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
                super::emit(format_args!("{}{end}", super::text::diff_line(body)));
            }
        }
        return Ok(Exit::Ok);
    }
    let selection = match (&args.since, &args.session) {
        (Some(since), _) => Selection::AfterTime(parse_time(since)?),
        (None, Some(session)) => Selection::Session(session.clone()),
        (None, None) => return Err(crate::error::Reason::InvalidArgument { what: "PATH, --since or --session" }.into()),
    };
    let stats = ws.diff_stat(&selection, None)?;
    if args.json {
        for s in &stats {
            outln!("{}", json!(s));
        }
        return Ok(Exit::Ok);
    }
    let width = stats.iter().map(|s| s.path.len()).max().unwrap_or(0).min(60);
    let (mut added, mut removed) = (0, 0);
    for s in &stats {
        added += s.added;
        removed += s.removed;
        let name = match &s.from_path {
            Some(from) => format!("{} => {}", Escaped(from), Escaped(&s.path)),
            None => Escaped(&s.path).to_string(),
        };
        let what = match (s.binary, s.status) {
            (true, status) => format!("binary ({status})"),
            (false, "renamed") => "renamed".to_string(),
            (false, status) => format!(
                "{:>5} {}{} ({status})",
                s.added + s.removed,
                "+".repeat(s.added.min(30) as usize),
                "-".repeat(s.removed.min(30) as usize)
            ),
        };
        outln!(" {name:<width$} | {what}");
    }
    outln!(" {} files changed, {added} insertions(+), {removed} deletions(-)", stats.len());
    Ok(Exit::Ok)
}

/// The journal's lines past `offset`, handed to `line` as they arrive, until it returns
/// `false`: through the daemon's change feed when one answers (a follower on the mount
/// would not be woken by the daemon's appends below it), else with inotify on the file.
pub fn follow(root: &Path, ws: &Workspace, offset: u64, mut line: impl FnMut(&[u8]) -> bool) -> Result<()> {
    if control::answers(root) {
        let link = root.join(crate::durable::STATE_DIR).join(control::SOCKET_LINK);
        let mut stream = std::os::unix::net::UnixStream::connect(&link)
            .map_err(|e| Error::io("connect to the daemon", e).at(link.display().to_string()))?;
        let request = json!({"rwfs_control": 1, "op": "follow", "offset": offset});
        writeln!(stream, "{request}").step("send request")?;
        for got in BufReader::new(stream).split(b'\n') {
            if !line(&got.step("read journal feed")?) {
                break;
            }
        }
        return Ok(());
    }
    let path = ws.path().join(crate::durable::STATE_DIR).join(crate::journal::JOURNAL_FILE);
    crate::journal::follow::follow(&path, offset, None, line).step("follow journal")
}
