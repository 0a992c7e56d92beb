//! Stop the world between any two steps: fail the n-th change of a commit with EIO or ENOSPC,
//! then reopen (recovery) and check that nothing is torn, lost or unjournaled.

use std::sync::Arc;

use nix::libc;
use rwfs::engine::{Engine, WriteMode};
use rwfs::history::verify;

use crate::support::hooked::Hooked;
use crate::support::recorder::{Image, Recorder};
use crate::support::{Ws, actor, sha, tree, write};

/// A workspace holding `f.txt`, with an engine on a recording disk.
fn armed() -> (Ws, Arc<Hooked<Recorder>>, Engine) {
    let ws = Ws::new();
    setup(&ws);
    let (_base, inos) = Image::snapshot(ws.path());
    let rec = Recorder::new(inos);
    let engine = ws.open_with(rec.clone()).unwrap();
    (ws, rec, engine)
}

/// Changes a commit makes, counted on a dry run.
fn changes_of(op: impl Fn(&Engine)) -> usize {
    let (_ws, rec, engine) = armed();
    let before = rec.changes();
    op(&engine);
    let n = rec.changes() - before;
    engine.close().unwrap();
    n
}

fn setup(ws: &Ws) {
    let engine = ws.open();
    write(&engine, "f.txt", b"old version\n", WriteMode::Create).unwrap();
    engine.close().unwrap();
}

fn check_every_failure_point(
    name: &str,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
    op: impl Fn(&Engine) -> rwfs::Result<()>,
) {
    let total = changes_of(|e| op(e).unwrap());
    let mut failures = 0;
    for errno in [libc::EIO, libc::ENOSPC] {
        for n in 0..total {
            let (ws, rec, engine) = armed();
            rec.fail_change(n, errno);
            let result = op(&engine);
            let context = format!("{name}: change {n} of {total} fails with errno {errno}");
            if let Err(e) = &result {
                failures += 1;
                if errno == libc::ENOSPC && e.raw_os_error() == Some(libc::ENOSPC) {
                    assert_eq!(e.kind().as_str(), "quota_exceeded", "{context}: {e}");
                }
            }
            drop(engine);
            // Reopen on the real disk: recovery runs.
            let engine = ws.open();
            engine.close().unwrap();
            let now = ws.read("f.txt");
            let allowed: Vec<Option<&[u8]>> = if result.is_ok() { vec![new] } else { vec![old, new] };
            assert!(allowed.contains(&now.as_deref()), "{context}: f.txt holds {now:?} after {result:?}");
            if let Some(old) = old {
                assert!(now.as_deref() == Some(old) || ws.object(&sha(old)).is_some(), "{context}: old version lost");
            }
            let report = verify(&ws.workspace()).unwrap();
            assert!(report.drift.is_empty(), "{context}: {report:?}");
            // An abort row undoes the claim of the row before it for the same path.
            let rows = ws.rows();
            for (i, abort) in rows.iter().enumerate().filter(|(_, r)| r.op() == rwfs::journal::Op::Abort) {
                let claimed = rows[..i].iter().rev().find(|r| r.path == abort.path).expect("a claimed row");
                assert_eq!(
                    (abort.prev_sha256, abort.sha256),
                    (claimed.sha256, claimed.prev_sha256),
                    "{context}: {abort:?}"
                );
            }
            let temps: Vec<_> = tree(ws.path())
                .into_iter()
                .filter(|(p, _)| p.rsplit('/').next().is_some_and(rwfs::durable::is_temp_name))
                .collect();
            assert!(temps.is_empty(), "{context}: temp files left: {temps:?}");
        }
    }
    println!("{name}: {total} changes, each failed with EIO and ENOSPC: {failures} typed errors, all consistent");
    assert!(failures > 0);
}

#[test]
fn a_failure_at_any_step_of_an_overwrite_loses_nothing() {
    check_every_failure_point("overwrite", Some(b"old version\n"), Some(b"new version\n"), |e| {
        write(e, "f.txt", b"new version\n", WriteMode::Overwrite).map(drop)
    });
}

#[test]
fn a_failure_at_any_step_of_a_create_loses_nothing() {
    check_every_failure_point("create", Some(b"old version\n"), Some(b"old version\n"), |e| {
        write(e, "dir/new.txt", b"created\n", WriteMode::Create).map(drop)
    });
}

#[test]
fn a_failure_at_any_step_of_a_delete_loses_nothing() {
    check_every_failure_point("delete", Some(b"old version\n"), None, |e| e.delete("f.txt", None, &actor()).map(drop));
}

#[test]
fn a_failed_journal_append_leaves_the_file_untouched() {
    let (ws, rec, engine) = armed();
    // Changes of an overwrite: create temp, set its attributes, write temp, [journal write |
    // fsync temp] ... Fail every change in turn until the journal write is the one refused.
    let mut refused = None;
    for n in 0..5 {
        rec.fail_change(n, libc::ENOSPC);
        match write(&engine, "f.txt", b"new version\n", WriteMode::Overwrite) {
            Err(e) if e.step() == Some("journal append") => {
                refused = Some(e);
                break;
            }
            Err(_) => continue,
            Ok(_) => panic!("the write should have failed"),
        }
    }
    let e = refused.expect("some change was the journal append");
    assert_eq!((e.kind().as_str(), e.reason().code()), ("quota_exceeded", "no_space"), "{e}");
    assert_eq!(ws.read("f.txt").unwrap(), b"old version\n");
    rec.clear_failure();
    write(&engine, "f.txt", b"after\n", WriteMode::Overwrite).unwrap();
    engine.close().unwrap();
    let report = verify(&ws.workspace()).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn a_failed_move_into_objects_is_retried_by_the_settle_thread() {
    let total = changes_of(|e| {
        write(e, "f.txt", b"new version\n", WriteMode::Overwrite).unwrap();
    });
    let temps = |ws: &Ws| -> Vec<String> {
        tree(ws.path())
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| rwfs::durable::is_temp_name(p.rsplit('/').next().unwrap()))
            .collect()
    };
    let mut retried = 0;
    for n in 0..total {
        let (ws, rec, engine) = armed();
        rec.fail_change(n, libc::EIO);
        let acknowledged = write(&engine, "f.txt", b"new version\n", WriteMode::Overwrite).is_ok();
        if !acknowledged || temps(&ws).is_empty() {
            continue;
        }
        // Acknowledged, with the old version still under its temp name: the settle thread
        // (every 2 s) moves it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(6);
        while !temps(&ws).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(temps(&ws).is_empty(), "change {n}: temp file still there: {:?}", temps(&ws));
        assert_eq!(ws.object(&sha(b"old version\n")).unwrap(), b"old version\n");
        assert_eq!(engine.open_commits(), 0, "change {n}: the commit settled");
        retried += 1;
    }
    assert!(retried > 0, "some failure point leaves an acknowledged commit unsettled");
}
