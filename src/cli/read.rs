//! The read-only commands' work (`show`, `log`, `history`, `status`): one workspace opened for
//! reading, the journal's and the engine's answers printed. Which process runs them — this one
//! or the daemon that owns the workspace — is `readonly.rs`'s decision; `run.rs` dispatches.
//! Nothing here changes the workspace.

use std::time::{Duration, SystemTime};

use serde_json::json;

use super::mount::mount_statuses;
use super::reach::{parse_time, short};
use super::text::{self, TIME_WIDTH};
use super::{Escaped, Exit, HistoryArgs, LogArgs};
use super::{errln, outln};
use crate::error::{Reason, Result};
use crate::history::{RestoreTo, Workspace};
use crate::journal::query;
use crate::journal::{Op, Row};

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
/// Print the last rows `args` asks for; the journal's length read and the rows' filter.
pub(super) fn log_tail(ws: &Workspace, args: &LogArgs) -> Result<(u64, query::Filter)> {
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

pub(super) fn print_row(row: &Row, json: bool) {
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
        who_and_why(row)
    );
}

/// A row's process, then its group (a rewind's, or the agent's tool call it answers) and, on a
/// `tool_call` row, what is known of the call.
fn who_and_why(row: &Row) -> String {
    let mut out = who(row);
    if let Some(group) = &row.group {
        out.push_str(&format!("  {}", Escaped(group)));
    }
    if row.op() == Op::ToolCall
        && let Some(reason) = &row.reason
    {
        out.push_str(&format!("  {}", Escaped(reason)));
    }
    out
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
