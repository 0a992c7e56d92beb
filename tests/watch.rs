//! Issue 24 item 6: file watchers see rwfs's own changes. A change the daemon makes — an MCP
//! write, `rwfs write`, `rwfs rm`, `rwfs restore`, a rewind while mounted — raises on the mount
//! the inotify events the same change made through the mount raises, seen here by a real
//! inotify watcher on the mount's directories (the mask Node's `fs.watch` uses, plus
//! `IN_CLOSE_WRITE`).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use serde_json::json;

use crate::support::mcp::Stdio;
use crate::support::mount::{Mounted, rwfs};
use crate::support::run_ok;

/// An inotify watcher on some directories of the mount.
struct Watcher {
    inotify: Inotify,
    dirs: Vec<(nix::sys::inotify::WatchDescriptor, String)>,
}

impl Watcher {
    fn on(dirs: &[(&Path, &str)]) -> Watcher {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).unwrap();
        let mask = AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_CLOSE_WRITE;
        let dirs =
            dirs.iter().map(|(path, name)| (inotify.add_watch(*path, mask).unwrap(), name.to_string())).collect();
        Watcher { inotify, dirs }
    }

    /// The events seen since the last call, as `dir/name EVENT`, until `expect` are all there
    /// (or 10 s: then the test fails, showing what was seen).
    #[track_caller]
    fn expect(&self, expect: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = BTreeSet::new();
        loop {
            for event in self.inotify.read_events().unwrap_or_default() {
                let dir = self.dirs.iter().find(|(wd, _)| *wd == event.wd).map_or("?", |(_, d)| d.as_str());
                let name = event.name.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                for (flag, word) in [
                    (AddWatchFlags::IN_CREATE, "CREATE"),
                    (AddWatchFlags::IN_MODIFY, "MODIFY"),
                    (AddWatchFlags::IN_ATTRIB, "ATTRIB"),
                    (AddWatchFlags::IN_CLOSE_WRITE, "CLOSE_WRITE"),
                    (AddWatchFlags::IN_DELETE, "DELETE"),
                    (AddWatchFlags::IN_MOVED_TO, "MOVED_TO"),
                ] {
                    if event.mask.contains(flag) {
                        seen.insert(format!("{dir}/{name} {word}"));
                    }
                }
            }
            if expect.iter().all(|e| seen.contains(*e)) {
                return;
            }
            assert!(Instant::now() < deadline, "expected {expect:?}, the watcher saw {seen:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn cli(m: &Mounted, args: &[&str], stdin: &[u8]) {
    let mut child = rwfs()
        .args(args)
        .arg("--workspace")
        .arg(m.ws.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    assert!(child.wait().unwrap().success(), "rwfs {args:?}");
}

#[test]
fn watchers_on_the_mount_see_the_daemons_own_changes() {
    let m = Mounted::new();
    m.write("src/lib.rs", b"one\n").unwrap();
    let watcher = Watcher::on(&[(m.mountpoint(), "."), (&m.path("src"), "src")]);

    // An MCP write (relayed to the daemon): a new file, then an overwrite of it.
    let mut mcp = Stdio::start(m.ws.path(), "watch-test");
    mcp.call("rw_safe_write", json!({"path": "src/new.rs", "content": "new\n"})).ok();
    watcher.expect(&["src/new.rs CREATE", "src/new.rs MODIFY", "src/new.rs CLOSE_WRITE"]);
    mcp.call("rw_safe_write", json!({"path": "src/lib.rs", "content": "two\n", "mode": "overwrite"})).ok();
    watcher.expect(&["src/lib.rs MODIFY", "src/lib.rs CLOSE_WRITE"]);
    // A file in a directory the engine makes on the way.
    mcp.call("rw_safe_write", json!({"path": "docs/guide.md", "content": "g\n"})).ok();
    watcher.expect(&["./docs CREATE"]);
    assert!(mcp.finish().success());
    assert_eq!(m.read("src/lib.rs").unwrap(), b"two\n");

    // rwfs write, rm and restore while mounted.
    cli(&m, &["write", "src/lib.rs"], b"three\n");
    watcher.expect(&["src/lib.rs MODIFY"]);
    cli(&m, &["write", "notes.txt"], b"n\n");
    watcher.expect(&["./notes.txt CREATE"]);
    cli(&m, &["rm", "src/new.rs"], b"");
    watcher.expect(&["src/new.rs DELETE"]);
    cli(&m, &["restore", "src/new.rs", "--sha", &rwfs::sha::Sha256::of(b"new\n").to_hex()], b"");
    watcher.expect(&["src/new.rs CREATE"]);
    // A rewind: everything after the first row is undone.
    cli(&m, &["rewind", "--seq", "1"], b"");
    watcher.expect(&["src/lib.rs MODIFY", "src/new.rs DELETE", "./notes.txt DELETE"]);
    assert_eq!(m.read("src/lib.rs").unwrap(), b"one\n");
    assert!(m.read("notes.txt").is_err());

    // Nothing was journaled twice: one row per change, none by the daemon's own process.
    let rows = m.ws.rows();
    let daemon = m.daemon_pid() as u32;
    assert!(rows.iter().all(|r| r.pid != Some(daemon) || r.via != Some(rwfs::journal::Via::Fuse)), "{rows:#?}");
    let out = run_ok(rwfs().args(["verify", "--workspace"]).arg(m.ws.path()));
    assert!(out.status.success());
}
