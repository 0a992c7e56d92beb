//! The state directory's layout (docs/architecture.md, The state directory): every name rwfs writes in `.resilient_write/` is
//! in `durable::layout`'s table, and `Engine::class` puts everything below an entry in that
//! entry's class. (That the mount honours the classes is in `mount.rs` and `mcp/serving.rs`.)

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::json;

use rwfs::durable::STATE_DIR;
use rwfs::durable::layout::{self, Shape, Visibility, state_entry};
use rwfs::engine::{DraftBase, PathClass};
use rwfs::tools::Settings;

use crate::support::mcp::Mcp;
use crate::support::{Ws, aws_secret_line};

#[test]
fn every_name_rwfs_writes_in_the_state_directory_is_in_the_layout_table() {
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", b"");
    let mcp = Mcp::start_with(ws, Settings::default());
    let engine = &mcp.engine;
    // A kept version (objects/), a refused write (rejections/), an open draft (drafts/).
    mcp.call("rw_safe_write", json!({"path": "a.txt", "content": "one\n", "mode": "overwrite"})).ok();
    mcp.call("rw_safe_write", json!({"path": "a.txt", "content": "two\n", "mode": "overwrite"})).ok();
    mcp.call("rw_safe_write", json!({"path": "config.py", "content": aws_secret_line(7), "mode": "create"})).err();
    let _draft = engine.drafts().start("a.txt", DraftBase::Current).unwrap();
    // Every tool that keeps files there.
    mcp.call("rw_chunk_write", json!({"session": "s", "index": 1, "content": "x", "total_expected": 1})).ok();
    mcp.call("rw_scratch_put", json!({"content": "out of band"})).ok();
    mcp.call("rw_checkpoint", json!({"name": "c", "data": 1})).ok();
    let envelope = json!({"task_id": "t", "status": "partial", "agent": "a", "summary": "s", "next_steps": ["n"]});
    mcp.call("rw_handoff_write", json!({"envelope": envelope})).ok();
    mcp.call("rw_handoff_write", json!({"envelope": envelope, "archive": true})).ok();
    mcp.call("rr_make_cursor", json!({"path": "a.txt"})).ok();
    // A rewind keeps its plan (rewinds/).
    mcp.call("rw_rewind", json!({"session": "self", "confirm": true})).ok();
    // The daemon's HTTP token.
    let (_, new) = rwfs::mcp::http_token(engine).unwrap();
    assert!(new);

    let state = mcp.ws.abs(STATE_DIR);
    let mut seen = BTreeSet::new();
    for dirent in std::fs::read_dir(&state).unwrap() {
        let dirent = dirent.unwrap();
        let name = dirent.file_name().into_string().unwrap();
        let entry = state_entry(&name).unwrap_or_else(|| panic!("{STATE_DIR}/{name} is not in durable::layout"));
        let kind = dirent.file_type().unwrap();
        let shape = if kind.is_symlink() {
            Shape::Symlink
        } else if kind.is_dir() {
            Shape::Dir
        } else {
            Shape::File
        };
        assert_eq!(shape, entry.shape, "{name}");
        let class = match entry.visibility {
            Visibility::ReadOnly => PathClass::StateReadOnly,
            Visibility::Hidden => PathClass::StateHidden,
        };
        for path in walk(&state, &format!("{STATE_DIR}/{name}")) {
            assert_eq!(engine.class(&path), class, "{path}");
        }
        seen.insert(entry.name);
    }
    // What this test does not make: the daemon's socket link (see `mcp/serving.rs`) and its
    // default log files (`mount.rs`). The journal's index is made by the rewind's plan.
    let missing: Vec<&str> = layout::STATE_LAYOUT.iter().map(|e| e.name).filter(|n| !seen.contains(n)).collect();
    assert_eq!(missing, [layout::SOCKET, layout::DAEMON_LOG, layout::DAEMON_LOG_OLD]);
    assert_eq!(engine.class(STATE_DIR), PathClass::StateReadOnly);
}

/// `rel` (relative to `state`'s parent) and every path below it, not following symlinks.
fn walk(state: &Path, rel: &str) -> Vec<String> {
    let mut out = vec![rel.to_string()];
    let abs = state.parent().unwrap().join(rel);
    if std::fs::symlink_metadata(&abs).unwrap().is_dir() {
        for dirent in std::fs::read_dir(&abs).unwrap() {
            let name = dirent.unwrap().file_name().into_string().unwrap();
            out.extend(walk(state, &format!("{rel}/{name}")));
        }
    }
    out
}
