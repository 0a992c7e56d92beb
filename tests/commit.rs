//! What a writer sees: modes, preconditions, attributes, kept versions, history and restore.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, SystemTime};

use rwfs::engine::{Expect, Restored, WriteMode};
use rwfs::history::{Availability, RestoreTo, verify};
use rwfs::journal::{Op, Via};

use crate::support::{Ws, actor, assert_reason, get_xattr, set_xattr, sha, write, write_expect};

#[test]
fn create_overwrite_append_keep_every_version() {
    let ws = Ws::new();
    let engine = ws.open();
    let a = write(&engine, "notes.md", b"one\n", WriteMode::Create).unwrap();
    assert_eq!((a.op, a.prev_sha256, a.sha256), (Op::Create, None, Some(sha(b"one\n"))));
    let b = write(&engine, "notes.md", b"two\n", WriteMode::Overwrite).unwrap();
    assert_eq!((b.op, b.prev_sha256), (Op::Write, Some(sha(b"one\n"))));
    let c = write(&engine, "notes.md", b"three\n", WriteMode::Append).unwrap();
    assert_eq!((c.op, c.bytes), (Op::Append, 10));
    assert_eq!(ws.read("notes.md").unwrap(), b"two\nthree\n");
    // Both replaced versions are in objects/, byte for byte.
    assert_eq!(ws.object(&sha(b"one\n")).unwrap(), b"one\n");
    assert_eq!(ws.object(&sha(b"two\n")).unwrap(), b"two\n");
    // One row each, in order, chained, with increasing seq.
    let rows = ws.rows();
    let seqs: Vec<_> = rows.iter().map(|r| r.seq.unwrap()).collect();
    assert_eq!(seqs, vec![a.seq, b.seq, c.seq]);
    assert!(a.seq < b.seq && b.seq < c.seq);
    assert_eq!(rows[2].prev_sha256, Some(sha(b"two\n")));
    engine.close().unwrap();
    assert!(verify(&ws.workspace()).unwrap().is_clean());
}

#[test]
fn append_and_overwrite_create_missing_files_and_directories() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "a/b/c/log.txt", b"x", WriteMode::Append).unwrap();
    write(&engine, "d/e.txt", b"y", WriteMode::Overwrite).unwrap();
    assert_eq!(ws.read("a/b/c/log.txt").unwrap(), b"x");
    assert_eq!(ws.read("d/e.txt").unwrap(), b"y");
    assert_eq!(ws.rows()[0].op(), Op::Create);
}

#[test]
fn create_refuses_an_existing_file_and_names_its_digest() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"first", WriteMode::Create).unwrap();
    let err = assert_reason(write(&engine, "f", b"second", WriteMode::Create), "file_already_exists");
    assert_eq!(err.kind().as_str(), "stale_precondition");
    assert_eq!(err.reason(), &rwfs::Reason::AlreadyExists { existing: sha(b"first") });
    assert_eq!(ws.read("f").unwrap(), b"first");
    assert_eq!(ws.rows().len(), 1, "a refused write leaves no row");
}

#[test]
fn expected_previous_digest_is_compare_and_swap() {
    let ws = Ws::new();
    let engine = ws.open();
    write_expect(&engine, "f", b"v1", WriteMode::Overwrite, Some(Expect::Absent)).unwrap();
    assert_reason(
        write_expect(&engine, "f", b"v2", WriteMode::Overwrite, Some(Expect::Absent)),
        "expected_prev_sha256_mismatch",
    );
    assert_reason(
        write_expect(&engine, "f", b"v2", WriteMode::Overwrite, Some(Expect::Sha(sha(b"other")))),
        "expected_prev_sha256_mismatch",
    );
    write_expect(&engine, "f", b"v2", WriteMode::Overwrite, Some(Expect::Sha(sha(b"v1")))).unwrap();
    assert_eq!(ws.read("f").unwrap(), b"v2");
    // A digest expectation on a path whose directory does not exist creates nothing.
    assert_reason(
        write_expect(&engine, "new/dir/f", b"x", WriteMode::Overwrite, Some(Expect::Sha(sha(b"v1")))),
        "expected_prev_sha256_mismatch",
    );
    assert!(!ws.abs("new").exists());
    assert_eq!(Expect::parse("").unwrap(), Expect::Absent);
    assert_reason(Expect::parse("ABC"), "invalid_argument");
}

#[test]
fn mode_owner_and_xattrs_are_carried_over() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "run.sh", b"#!/bin/sh\necho 1\n", WriteMode::Create).unwrap();
    let path = ws.abs("run.sh");
    // chown clears setuid, so chmod second.
    std::os::unix::fs::chown(&path, Some(4242), Some(4343)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o4751)).unwrap();
    set_xattr(&path, "user.rwfs.test", b"kept");
    write(&engine, "run.sh", b"#!/bin/sh\necho 2\n", WriteMode::Overwrite).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o4751, "mode including setuid");
    assert_eq!((meta.uid(), meta.gid()), (4242, 4343));
    assert_eq!(get_xattr(&path, "user.rwfs.test").as_deref(), Some(&b"kept"[..]));
}

#[test]
fn new_files_get_the_default_mode() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "new.txt", b"x", WriteMode::Create).unwrap();
    let mode = std::fs::metadata(ws.abs("new.txt")).unwrap().mode() & 0o777;
    let umask = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    nix::sys::stat::umask(umask);
    assert_eq!(mode, 0o666 & !umask.bits());
}

#[test]
fn delete_keeps_the_content_and_restore_brings_it_back() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "doc.txt", b"precious", WriteMode::Create).unwrap();
    let deleted = engine.delete("doc.txt", None, &actor()).unwrap();
    assert_eq!((deleted.op, deleted.sha256, deleted.prev_sha256), (Op::Delete, None, Some(sha(b"precious"))));
    assert_eq!(ws.read("doc.txt"), None);
    assert_eq!(ws.object(&sha(b"precious")).unwrap(), b"precious");
    assert_reason(engine.delete("doc.txt", None, &actor()), "not_found");

    let prefix = sha(b"precious").short(8);
    let Restored::Committed(restored) = engine.restore("doc.txt", &RestoreTo::Sha(prefix), &actor()).unwrap() else {
        panic!("expected a commit");
    };
    assert_eq!((restored.op, restored.prev_sha256), (Op::Restore, None));
    assert_eq!(ws.read("doc.txt").unwrap(), b"precious");
    let again = engine.restore("doc.txt", &RestoreTo::Sha(sha(b"precious").to_hex()), &actor()).unwrap();
    assert!(matches!(again, Restored::AlreadyCurrent { .. }));
}

#[test]
fn delete_checks_its_precondition() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"v1", WriteMode::Create).unwrap();
    assert_reason(engine.delete("f", Some(Expect::Sha(sha(b"v0"))), &actor()), "expected_prev_sha256_mismatch");
    engine.delete("f", Some(Expect::Sha(sha(b"v1"))), &actor()).unwrap();
}

#[test]
fn restore_by_time_picks_the_version_current_then() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"morning", WriteMode::Create).unwrap();
    // Rows carry whole seconds: step over a second boundary between versions.
    std::thread::sleep(Duration::from_millis(1100));
    let between = SystemTime::now();
    std::thread::sleep(Duration::from_millis(1100));
    write(&engine, "f", b"evening", WriteMode::Overwrite).unwrap();
    engine.restore("f", &RestoreTo::At(between), &actor()).unwrap();
    assert_eq!(ws.read("f").unwrap(), b"morning");
    let long_ago = SystemTime::now() - Duration::from_secs(3600);
    assert_reason(engine.restore("f", &RestoreTo::At(long_ago), &actor()), "absent_at_time");
}

#[test]
fn restore_refuses_unknown_ambiguous_and_missing_versions() {
    let ws = Ws::new();
    let engine = ws.open();
    assert_reason(engine.restore("nothing", &RestoreTo::Sha("abcd".into()), &actor()), "version_not_found");
    write(&engine, "f", b"v1", WriteMode::Create).unwrap();
    write(&engine, "f", b"v2", WriteMode::Overwrite).unwrap();
    assert_reason(engine.restore("f", &RestoreTo::Sha("ab".into()), &actor()), "invalid_argument");
    assert_reason(engine.restore("f", &RestoreTo::Sha("0000000000".into()), &actor()), "version_not_found");
    // Two versions whose digests share their first four hex digits.
    let first = sha(b"v1").short(4);
    let twin = (0u64..).map(|i| format!("twin {i}")).find(|c| sha(c.as_bytes()).short(4) == first).unwrap();
    write(&engine, "f", twin.as_bytes(), WriteMode::Overwrite).unwrap();
    assert_reason(engine.restore("f", &RestoreTo::Sha(first), &actor()), "ambiguous_version");
    std::fs::remove_file(ws.abs(&format!(".resilient_write/objects/{}/{}", &sha(b"v1").to_hex()[..2], sha(b"v1"))))
        .unwrap();
    assert_reason(engine.restore("f", &RestoreTo::Sha(sha(b"v1").to_hex()), &actor()), "object_missing");
    let history = ws.workspace().history("f").unwrap();
    let wheres: Vec<_> = history.versions.iter().map(|v| v.availability).collect();
    assert_eq!(wheres, vec![Availability::Missing, Availability::Stored, Availability::Current]);
}

#[test]
fn restore_verifies_the_stored_bytes() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"good", WriteMode::Create).unwrap();
    write(&engine, "f", b"newer", WriteMode::Overwrite).unwrap();
    let hex = sha(b"good").to_hex();
    let object = ws.abs(&format!(".resilient_write/objects/{}/{hex}", &hex[..2]));
    std::fs::write(&object, b"evil").unwrap();
    assert_reason(engine.restore("f", &RestoreTo::Sha(hex), &actor()), "object_corrupt");
    assert_eq!(ws.read("f").unwrap(), b"newer");
}

#[test]
fn history_lists_every_version_with_where_it_is() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "dir/f", b"1", WriteMode::Create).unwrap();
    write(&engine, "dir/f", b"2", WriteMode::Overwrite).unwrap();
    engine.delete("dir/f", None, &actor()).unwrap();
    engine.close().unwrap();
    // The directory still exists; also look a deleted path up through a removed directory.
    let history = ws.workspace().history("./dir//f").unwrap();
    assert_eq!(history.path.as_str(), "dir/f");
    assert_eq!(history.current, None);
    let summary: Vec<_> = history.versions.iter().map(|v| (v.op(), v.availability)).collect();
    assert_eq!(
        summary,
        vec![(Op::Create, Availability::Stored), (Op::Write, Availability::Stored), (Op::Delete, Availability::Absent)]
    );
    std::fs::remove_dir(ws.abs("dir")).unwrap();
    assert_eq!(ws.workspace().history("dir/f").unwrap().versions.len(), 3);
}

#[test]
fn rows_say_who_wrote() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"x", WriteMode::Create).unwrap();
    let row = &ws.rows()[0];
    assert_eq!(row.pid, Some(std::process::id()));
    assert_eq!(row.uid, Some(nix::unistd::getuid().as_raw()));
    assert_eq!(row.via, Some(Via::Cli));
    assert_eq!(row.caller, "rwfs-tests");
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    assert_eq!(row.comm.as_deref(), Some(comm.trim_end()));
}

#[test]
fn writes_through_an_in_tree_symlink_land_on_its_target() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "real/config.toml", b"a = 1\n", WriteMode::Create).unwrap();
    std::os::unix::fs::symlink("real/config.toml", ws.abs("link.toml")).unwrap();
    let committed = write(&engine, "link.toml", b"a = 2\n", WriteMode::Overwrite).unwrap();
    assert_eq!(committed.path.as_str(), "real/config.toml");
    assert_eq!(ws.read("real/config.toml").unwrap(), b"a = 2\n");
    assert!(std::fs::symlink_metadata(ws.abs("link.toml")).unwrap().file_type().is_symlink());
}

#[test]
fn overwriting_a_hard_linked_file_leaves_the_other_link_with_the_old_bytes() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "a", b"shared", WriteMode::Create).unwrap();
    std::fs::hard_link(ws.abs("a"), ws.abs("b")).unwrap();
    write(&engine, "a", b"new", WriteMode::Overwrite).unwrap();
    assert_eq!(ws.read("a").unwrap(), b"new");
    assert_eq!(ws.read("b").unwrap(), b"shared");
    // The kept version is a copy, not the inode still reachable as `b`.
    let hex = sha(b"shared").to_hex();
    let object = ws.abs(&format!(".resilient_write/objects/{}/{hex}", &hex[..2]));
    assert_ne!(std::fs::metadata(&object).unwrap().ino(), std::fs::metadata(ws.abs("b")).unwrap().ino());
    std::fs::write(ws.abs("b"), b"edited via b").unwrap();
    assert_eq!(std::fs::read(object).unwrap(), b"shared");
}

#[test]
fn gc_removes_versions_past_retention_and_journals_it() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"old", WriteMode::Create).unwrap();
    write(&engine, "f", b"new", WriteMode::Overwrite).unwrap();
    let kept = engine.gc(Some(Duration::from_secs(86_400)), &actor()).unwrap();
    assert_eq!(kept.objects, 0);
    assert!(ws.object(&sha(b"old")).is_some());
    std::thread::sleep(Duration::from_millis(20));
    let gc = engine.gc(Some(Duration::ZERO), &actor()).unwrap();
    assert_eq!((gc.objects, gc.bytes), (1, 3));
    assert!(ws.object(&sha(b"old")).is_none());
    assert_eq!(ws.read("f").unwrap(), b"new", "the current version is never touched");
    let last = ws.rows().pop().unwrap();
    assert_eq!(last.op(), Op::Gc);
    assert_eq!(last.bytes, 3);
}

#[test]
fn a_reference_state_directory_opens_and_continues() {
    let ws = Ws::new();
    let body = b"hello";
    let reference_row = format!(
        r#"{{"bytes":5,"caller":"resilient-write","journal_id":"wj_0a1b2c3d4e5f01234567","mode":"create","path":"hello.txt","sha256":"{}","ts":"2026-04-12T10:00:00Z"}}"#,
        sha(body)
    );
    ws.put(".resilient_write/journal.jsonl", format!("{reference_row}\n").as_bytes());
    ws.put(".resilient_write/scratch/index.jsonl", b"{}\n");
    ws.put(".resilient_write/chunks/s1/part-001.txt", b"chunk");
    ws.put("hello.txt", body);
    let engine = ws.open();
    assert!(engine.recovery().corrected.is_empty());
    write(&engine, "hello.txt", b"hello again", WriteMode::Overwrite).unwrap();
    engine.close().unwrap();
    let rows = ws.rows();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].prev_sha256, Some(sha(body)));
    assert_eq!(rows[1].seq, Some(1));
    let report = verify(&ws.workspace()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(ws.read(".resilient_write/chunks/s1/part-001.txt").unwrap(), b"chunk");
}

#[test]
fn an_edit_outside_rwfs_shows_in_verify_and_is_kept_on_the_next_overwrite() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"journaled", WriteMode::Create).unwrap();
    ws.put("f", b"edited behind our back");
    let report = verify(&ws.workspace()).unwrap();
    assert_eq!(report.drift.len(), 1);
    let committed = write(&engine, "f", b"next", WriteMode::Overwrite).unwrap();
    assert_eq!(committed.prev_sha256, Some(sha(b"edited behind our back")));
    assert!(ws.object(&sha(b"edited behind our back")).is_some());
}

#[test]
fn the_workspace_has_one_owner() {
    let ws = Ws::new();
    let engine = ws.open();
    let err = assert_reason(rwfs::engine::Engine::open(ws.path(), &Default::default()), "workspace_locked");
    assert!(err.to_string().contains(&std::process::id().to_string()), "{err}");
    let owner = ws.workspace().status().unwrap().owner.expect("owner");
    assert_eq!(owner.pid, std::process::id());
    engine.close().unwrap();
    assert!(ws.workspace().status().unwrap().owner.is_none());
    ws.open().close().unwrap();
}
