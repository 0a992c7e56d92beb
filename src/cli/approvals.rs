//! `rwfs approvals`, `rwfs approve ID`, `rwfs deny ID`: a person's decision on the new versions
//! the policy parks for approval (`history/approvals.rs`). The list is a read-only command (the
//! owner answers it when the workspace is mounted, `readonly.rs`); a decision goes to the
//! daemon's engine when one owns the workspace, else to one opened here (`run::with_engine`).
//! What is decided and how is the engine's; this module only asks and prints.

use std::path::Path;

use serde_json::Value;

use super::reach::{actor, short, with_engine};
use super::{ApprovalsArgs, ApproveArgs, DenyArgs, Exit};
use super::{Escaped, errln, outln};
use crate::app::control::{Request, decided_json};
use crate::engine::Options;
use crate::error::Result;
use crate::history::{ApprovalState, Workspace};

/// `rwfs approvals`.
pub fn list(ws: &Workspace, args: &ApprovalsArgs) -> Result<Exit> {
    let shown: Vec<_> = ws.approvals()?.into_iter().filter(|a| args.all || a.state == ApprovalState::Pending).collect();
    if args.json {
        outln!("{}", serde_json::to_value(&shown).unwrap_or_default());
        return Ok(Exit::Ok);
    }
    if shown.is_empty() {
        errln!("no version waits for approval{}", if args.all { " and none did" } else { "" });
        return Ok(Exit::Ok);
    }
    for a in &shown {
        let by = a.comm.as_deref().map(|c| format!(" by {}", Escaped(c))).unwrap_or_default();
        let decided = a.decided_by.as_deref().map(|d| format!(" by {}", Escaped(d))).unwrap_or_default();
        outln!(
            "{}  {:<10} {} {} ({} bytes, sha256 {}, over {}){by}, rule `{}`, at {}{}",
            a.id,
            a.state.as_str(),
            a.operation,
            Escaped(&a.path),
            a.bytes,
            a.sha256.short(12),
            short(a.base),
            Escaped(&a.rule),
            a.ts,
            if a.state == ApprovalState::Pending { String::new() } else { decided },
        );
        if args.diff && a.state == ApprovalState::Pending {
            let diff = ws.approval_diff(&a.id, None)?;
            match diff.binary {
                true => outln!("  (binary: {} bytes -> {} bytes)", diff.from_bytes, diff.to_bytes),
                false => outln!("{}", diff.unified.trim_end_matches('\n')),
            }
        }
    }
    if shown.iter().any(|a| a.state == ApprovalState::Pending) {
        errln!(
            "`rwfs approvals --diff` shows what each would change; `rwfs approve ID` installs it, `rwfs deny ID` drops it"
        );
    }
    Ok(Exit::Ok)
}

/// `rwfs approve ID`.
pub fn approve(root: &Path, options: &Options, args: &ApproveArgs) -> Result<Exit> {
    print(&decide(root, options, &args.id, Some(args.force))?, args.json);
    Ok(Exit::Ok)
}

/// `rwfs deny ID`.
pub fn deny(root: &Path, options: &Options, args: &DenyArgs) -> Result<Exit> {
    print(&decide(root, options, &args.id, None)?, args.json.json);
    Ok(Exit::Ok)
}

/// Approve `id` (`Some(force)`) or deny it (`None`) on the workspace's engine (the daemon's
/// when mounted): the decision's JSON. The page of `rwfs ui` decides through it too.
pub fn decide(root: &Path, options: &Options, id: &str, approve: Option<bool>) -> Result<Value> {
    let actor = actor();
    with_engine(
        root,
        options,
        |engine| match approve {
            Some(force) => engine.approve(id, force, &actor).map(|d| decided_json(&d)),
            None => engine.deny(id, &actor).map(|d| decided_json(&d)),
        },
        || match approve {
            Some(force) => (Request::Approve { id: id.to_string(), force }, Vec::new()),
            None => (Request::Deny { id: id.to_string() }, Vec::new()),
        },
    )
}

fn print(decided: &Value, as_json: bool) {
    if as_json {
        outln!("{decided}");
        return;
    }
    let a = &decided["approval"];
    let path = Escaped(a["path"].as_str().unwrap_or("?"));
    match decided["committed"]["seq"].as_u64() {
        Some(seq) => outln!("approved {}: {path} now holds it (seq {seq})", a["id"].as_str().unwrap_or("?")),
        None => {
            outln!("denied {}: {path} is unchanged; the version stays in the store", a["id"].as_str().unwrap_or("?"))
        }
    }
}
