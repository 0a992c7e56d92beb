//! Issue 17: sessions, rewind, diff, `log --follow` — on the engine, through the CLI unmounted
//! and through a mount's daemon.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use rwfs::engine::{Action, Engine, RenameHow, Rewind, Rewound, WriteMode};
use rwfs::journal::query::Selection;
use rwfs::journal::{Actor, Op};

use crate::support::mount::{Mounted, rwfs};
use crate::support::{Rng, Ws, actor, in_session, tree, write};

/// The workspace's files (not the state directory), with their bytes.
fn files(ws: &Ws) -> BTreeMap<String, Vec<u8>> {
    tree(ws.path()).into_iter().filter(|(p, _)| !p.starts_with(".resilient_write")).collect()
}

fn rewind(engine: &Engine, selection: Selection, dry_run: bool) -> Rewound {
    let r = Rewind { selection, globs: vec![], force: false, dry_run };
    engine.rewind(&r, &in_session("rewinder")).unwrap()
}

/// Sessions `a` and `b` interleave overwrites, deletes and renames over many files, then `a`
/// renames a directory and each creates a file; returns the tree before the two sessions.
fn two_sessions(engine: &Engine, ws: &Ws) -> BTreeMap<String, Vec<u8>> {
    let (a, b) = (in_session("a"), in_session("b"));
    for i in 0..12 {
        write_as(engine, &format!("src/f{i}.txt"), format!("base {i}\n").as_bytes(), &in_session("setup"));
    }
    engine.set_perm(rwfs::engine::Entry::Path("src/f3.txt"), 0o755, &actor()).unwrap();
    write_as(engine, "dir/inner.txt", b"inner\n", &in_session("setup"));
    let before = files(ws);
    let mut rng = Rng(17);
    for step in 0..30u64 {
        let (who, name) = if step % 3 == 0 { (&b, "b") } else { (&a, "a") };
        let path = format!("src/f{}.txt", rng.below(12));
        // Some of these fail (the file was deleted or moved away): that is part of the mix.
        let _ = match rng.below(4) {
            0 | 1 => engine
                .safe_write(&rwfs::engine::WriteRequest {
                    path: &path,
                    content: format!("{name} step {step}\n").as_bytes(),
                    mode: WriteMode::Overwrite,
                    expect: None,
                    actor: who,
                })
                .map(drop),
            2 => engine.delete(&path, None, who).map(drop),
            _ => engine.rename(&path, &format!("src/moved{step}.txt"), RenameHow::Replace, who),
        };
    }
    engine.rename("dir", "dir2", RenameHow::NoReplace, &a).unwrap();
    write_as(engine, "new-by-a.txt", b"a made this\n", &a);
    write_as(engine, "new-by-b.txt", b"b made this\n", &b);
    before
}

fn write_as(engine: &Engine, path: &str, bytes: &[u8], actor: &Actor) {
    engine
        .safe_write(&rwfs::engine::WriteRequest {
            path,
            content: bytes,
            mode: WriteMode::Overwrite,
            expect: None,
            actor,
        })
        .unwrap();
}

#[test]
fn rewinding_everything_after_a_seq_restores_the_tree_byte_for_byte_and_undo_takes_it_back() {
    let ws = Ws::new();
    let engine = ws.open();
    write_as(&engine, "keep.txt", b"keep\n", &actor());
    let cut = ws.rows().last().unwrap().seq.unwrap();
    let at_cut = files(&ws);
    engine.set_perm(rwfs::engine::Entry::Path("keep.txt"), 0o600, &actor()).unwrap();
    let _ = two_sessions(&engine, &ws);
    let changed = files(&ws);
    assert_ne!(changed, at_cut);

    let rows_before = ws.rows().len();
    let plan = rewind(&engine, Selection::AfterSeq(cut), true);
    assert!(plan.group.is_none() && plan.applied == 0);
    assert!(plan.steps.iter().all(|s| s.skipped.is_none()), "{:#?}", plan.steps);
    assert_eq!(files(&ws), changed, "a dry run changes nothing");
    assert_eq!(ws.rows().len(), rows_before, "a dry run writes no row");

    let done = rewind(&engine, Selection::AfterSeq(cut), false);
    assert_eq!(files(&ws), at_cut, "the tree as it was at seq {cut}");
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    let group = done.group.clone().unwrap();
    let grouped: Vec<_> = ws.rows().into_iter().filter(|r| r.group.as_deref() == Some(group.as_str())).collect();
    assert_eq!(grouped.first().unwrap().op(), Op::Create, "the plan file, then the begin row");
    assert_eq!(grouped.iter().filter(|r| r.op() == Op::Rewind).count(), 2, "begin and end");
    // Directories have no rows: the one `dir2` the rename brought goes without one.
    let dirs_removed = done.steps.iter().filter(|s| s.action == Action::RemoveDir && s.skipped.is_none()).count();
    assert_eq!(dirs_removed, 1, "{:#?}", done.steps);
    assert_eq!(
        grouped.iter().filter(|r| matches!(r.op(), Op::Restore | Op::Delete)).count(),
        done.applied - dirs_removed,
        "one row per file step, all in the group"
    );

    let undone = rewind(&engine, Selection::Group(group), false);
    assert!(undone.failed.is_empty());
    assert_eq!(files(&ws), changed, "undoing the rewind restores byte for byte");
    engine.close().unwrap();
    assert!(rwfs::history::verify(&ws.workspace()).unwrap().is_clean());
}

#[test]
fn rewinding_one_session_keeps_the_others_changes_and_restores_modes() {
    let ws = Ws::new();
    let engine = ws.open();
    write_as(&engine, "mode.sh", b"#!/bin/sh\n", &in_session("setup"));
    engine.set_perm(rwfs::engine::Entry::Path("mode.sh"), 0o750, &actor()).unwrap();
    write_as(&engine, "mode.sh", b"#!/bin/sh\necho b\n", &in_session("b"));
    std::fs::set_permissions(ws.abs("mode.sh"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let _ = two_sessions(&engine, &ws);
    let rows = ws.rows();
    let done = rewind(&engine, Selection::Session("b".into()), false);
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    let now = files(&ws);
    assert!(now.contains_key("new-by-a.txt") && !now.contains_key("new-by-b.txt"), "a's file stays, b's goes");
    assert_eq!(ws.read("mode.sh").unwrap(), b"#!/bin/sh\n");
    let mode = std::fs::metadata(ws.abs("mode.sh")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750, "the version comes back with its mode");
    // Every path only b changed holds what it held before b's first change to it; paths that a
    // changed after b (one-line files: every such merge conflicts) are listed as skipped, with
    // the conflicting lines, and not touched.
    for step in &done.steps {
        let later_a = rows.iter().any(|r| {
            r.session.as_deref() == Some("a") && (r.path == step.path || r.from.as_deref() == Some(&step.path))
        });
        if let Some(why) = step.skipped.as_deref() {
            assert!(later_a, "{step:?}");
            assert!(why.starts_with("changed_later") || why.starts_with("merge_conflict (changed_later"), "{step:?}");
        }
        assert_ne!(step.action, Action::Merge, "{step:?}");
    }
    assert!(done.steps.iter().any(|s| s.action == Action::Remove && s.path == "new-by-b.txt"));
    engine.close().unwrap();
}

#[test]
fn a_file_edited_outside_rwfs_is_reported_not_clobbered_unless_forced() {
    let ws = Ws::new();
    let engine = ws.open();
    write_as(&engine, "f.txt", b"one\n", &in_session("s"));
    let cut = ws.rows().last().unwrap().seq.unwrap();
    write_as(&engine, "f.txt", b"two\n", &in_session("s"));
    write_as(&engine, "g.txt", b"g\n", &in_session("s"));
    ws.put("f.txt", b"edited by hand\n");
    let done = rewind(&engine, Selection::AfterSeq(cut), false);
    let f = done.steps.iter().find(|s| s.path == "f.txt").unwrap();
    // The version the hand edit overwrote never left the tree through rwfs: no common ancestor
    // to merge with.
    assert_eq!(f.skipped.as_deref(), Some("changed_outside_rwfs (not merged: version_not_kept)"));
    assert_eq!(ws.read("f.txt").unwrap(), b"edited by hand\n");
    assert_eq!(ws.read("g.txt"), None, "the other path was rewound");
    let forced = engine
        .rewind(
            &Rewind { selection: Selection::AfterSeq(cut), globs: vec!["f.*".into()], force: true, dry_run: false },
            &actor(),
        )
        .unwrap();
    assert!(forced.steps.iter().all(|s| s.path == "f.txt" && s.forced), "{:?}", forced.steps);
    assert_eq!(ws.read("f.txt").unwrap(), b"one\n");
    assert!(ws.object(&crate::support::sha(b"edited by hand\n")).is_some(), "the hand edit is kept");
    engine.close().unwrap();
}

/// The notes file of the merge tests: five lines, the session `setup` wrote it.
const NOTES: &[u8] = b"one\ntwo\nthree\nfour\nfive\n";

fn rows_of_group(ws: &Ws, group: &str) -> Vec<rwfs::journal::Row> {
    ws.rows().into_iter().filter(|r| r.group.as_deref() == Some(group)).collect()
}

#[test]
fn rewinding_a_session_merges_around_a_later_edit_by_someone_else_and_undo_takes_it_back() {
    let ws = Ws::new();
    let engine = ws.open();
    write_as(&engine, "notes.md", NOTES, &in_session("setup"));
    write_as(&engine, "notes.md", b"one\nTWO (agent)\nthree\nfour\nfive\n", &in_session("agent"));
    write_as(&engine, "other.md", b"agent only\n", &in_session("agent"));
    let theirs = b"one\nTWO (agent)\nthree\nfour\nfive (person)\n";
    write_as(&engine, "notes.md", theirs, &in_session("person"));

    let plan = rewind(&engine, Selection::Session("agent".into()), true);
    let step = plan.steps.iter().find(|s| s.path == "notes.md").unwrap();
    assert_eq!((step.action, step.skipped.as_deref(), step.forced), (Action::Merge, None, false), "{step:?}");
    let merged = b"one\ntwo\nthree\nfour\nfive (person)\n";
    assert_eq!(step.to, Some(rwfs::sha::Sha256::of(merged)));
    assert_eq!(ws.read("notes.md").unwrap(), theirs, "a dry run changes nothing");
    assert!(ws.object(&rwfs::sha::Sha256::of(merged)).is_none(), "nor stores anything");

    let done = rewind(&engine, Selection::Session("agent".into()), false);
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    assert_eq!(ws.read("notes.md").unwrap(), merged, "the person's edit kept, the agent's undone");
    assert_eq!(ws.read("other.md"), None);
    let group = done.group.unwrap();
    let row = rows_of_group(&ws, &group).into_iter().find(|r| r.path == "notes.md").unwrap();
    assert_eq!((row.op(), row.mode.as_str()), (Op::Restore, "merge"), "journaled as a merge: {row:?}");

    let undone = rewind(&engine, Selection::Group(group), false);
    assert!(undone.failed.is_empty(), "{:?}", undone.failed);
    assert_eq!(ws.read("notes.md").unwrap(), theirs, "undo restores byte for byte");
    assert_eq!(ws.read("other.md").unwrap(), b"agent only\n");
    engine.close().unwrap();
    assert!(rwfs::history::verify(&ws.workspace()).unwrap().is_clean());
}

#[test]
fn a_conflicting_later_edit_is_listed_with_its_hunks_and_left_alone_unless_forced() {
    let ws = Ws::new();
    let engine = ws.open();
    write_as(&engine, "notes.md", NOTES, &in_session("setup"));
    write_as(&engine, "notes.md", b"one\nTWO (agent)\nthree\nfour\nfive\n", &in_session("agent"));
    let theirs = b"one\nTWO (person)\nthree\nfour\nfive\n";
    write_as(&engine, "notes.md", theirs, &in_session("person"));

    let done = rewind(&engine, Selection::Session("agent".into()), false);
    let step = &done.steps[0];
    assert!(step.skipped.as_deref().unwrap().starts_with("merge_conflict (changed_later: seq "), "{step:?}");
    let hunks = step.conflict.as_deref().unwrap();
    assert!(hunks.contains("TWO (person)") && hunks.contains("TWO (agent)") && hunks.contains("\ntwo\n"), "{hunks}");
    assert_eq!(ws.read("notes.md").unwrap(), theirs, "a conflict is not clobbered");
    assert_eq!(done.group, None, "nothing else to do: no group");

    let forced = engine
        .rewind(
            &Rewind { selection: Selection::Session("agent".into()), globs: vec![], force: true, dry_run: false },
            &in_session("rewinder"),
        )
        .unwrap();
    assert!(forced.steps[0].forced && forced.steps[0].conflict.is_some(), "{:?}", forced.steps);
    assert_eq!(ws.read("notes.md").unwrap(), NOTES, "--force restores what the session found");
    assert!(ws.object(&rwfs::sha::Sha256::of(theirs)).is_some(), "the person's version is kept");
    engine.close().unwrap();
}

#[test]
fn a_pass_through_path_is_listed_and_left_alone() {
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", b"pass_through: [\"*.log\"]\n");
    let engine = ws.open();
    write_as(&engine, "app.log", b"line\n", &in_session("s"));
    let done = rewind(&engine, Selection::Session("s".into()), false);
    assert_eq!(done.steps.len(), 1);
    assert_eq!(done.steps[0].skipped.as_deref(), Some("pass_through"));
    assert_eq!(ws.read("app.log").unwrap(), b"line\n");
    engine.close().unwrap();
}

/// Every directory below the workspace's root (the state directory left out).
fn dirs(ws: &Ws) -> Vec<String> {
    fn walk(base: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            if rel != ".resilient_write" && std::fs::symlink_metadata(&path).unwrap().is_dir() {
                out.push(rel);
                walk(base, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(ws.path(), ws.path(), &mut out);
    out.sort();
    out
}

#[test]
fn rewinding_a_directory_rename_leaves_no_empty_directory_behind() {
    let ws = Ws::new();
    let engine = ws.open();
    write_as(&engine, "a/x.txt", b"x\n", &in_session("setup"));
    write_as(&engine, "a/deeper/y.txt", b"y\n", &in_session("setup"));
    write_as(&engine, "c/z.txt", b"z\n", &in_session("setup"));
    let (before, before_dirs) = (files(&ws), dirs(&ws));
    engine.rename("a", "b", RenameHow::NoReplace, &in_session("s")).unwrap();
    engine.rename("c", "d", RenameHow::NoReplace, &in_session("s")).unwrap();
    // Something rwfs does not journal, in the second one: that directory stays.
    std::fs::write(ws.abs("d/untracked.log"), b"log\n").unwrap();
    let plan = rewind(&engine, Selection::Session("s".into()), true);
    let removals: Vec<&str> =
        plan.steps.iter().filter(|s| s.action == Action::RemoveDir).map(|s| s.path.as_str()).collect();
    assert_eq!(removals, ["b", "d"], "{plan:?}");
    let done = rewind(&engine, Selection::Session("s".into()), false);
    assert_eq!(files(&ws).into_iter().filter(|(p, _)| p != "d/untracked.log").collect::<BTreeMap<_, _>>(), before);
    let mut expected = before_dirs;
    expected.push("d".into());
    expected.sort();
    assert_eq!(dirs(&ws), expected, "{done:?}");
    assert_eq!(done.failed.len(), 1, "{done:?}");
    assert_eq!(done.failed[0].0, "d");
    engine.close().unwrap();
}

#[test]
fn a_rewind_lists_the_paths_it_cannot_reach_with_the_reason() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    let engine = ws.open();
    write_as(&engine, "sess/f.txt", b"one\n", &in_session("setup"));
    write_as(&engine, "sess/f.txt", b"two\n", &in_session("s"));
    write_as(&engine, "sess/g.txt", b"new\n", &in_session("s"));
    engine.close().unwrap();
    // The session's directory replaced by an outward symlink, behind rwfs.
    std::fs::rename(ws.abs("sess"), outside.path().join("sess")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("sess"), ws.abs("sess")).unwrap();
    for dry_run in [true, false] {
        let mut args = vec!["rewind", "--session", "s"];
        if dry_run {
            args.push("--dry-run");
        }
        let out = rwfs().arg("-w").arg(ws.path()).args(&args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(": 2 paths"), "{text}");
        for path in ["sess/f.txt", "sess/g.txt"] {
            assert!(text.contains(&format!("skip     {path}  (unreachable: escapes_workspace)")), "{text}");
        }
    }
    assert_eq!(std::fs::read(outside.path().join("sess/f.txt")).unwrap(), b"two\n", "nothing outside is touched");
    assert!(outside.path().join("sess/g.txt").exists());
}

#[test]
fn diff_prints_a_unified_diff_and_a_stat_summary() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "a.txt", b"1\n2\n3\n", WriteMode::Create).unwrap();
    write(&engine, "a.txt", b"1\ntwo\n3\n4\n", WriteMode::Overwrite).unwrap();
    write(&engine, "c.txt", b"1\n2\n3\n", WriteMode::Create).unwrap();
    write(&engine, "c.txt", b"1\ntwo\n3\n4\n", WriteMode::Overwrite).unwrap();
    write(&engine, "bin.dat", b"\0\x01", WriteMode::Create).unwrap();
    write(&engine, "bin.dat", b"\0\x02\x03", WriteMode::Overwrite).unwrap();
    engine.rename("a.txt", "b.txt", RenameHow::NoReplace, &actor()).unwrap();
    engine.close().unwrap();
    let out = rwfs().arg("-w").arg(ws.path()).args(["diff", "c.txt", "--from", "seq:3"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("@@ -1,3 +1,4 @@\n 1\n-2\n+two\n 3\n+4\n"), "{text}");
    let out = rwfs().arg("-w").arg(ws.path()).args(["diff", "bin.dat"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Binary versions of bin.dat differ: 2 bytes"), "{text}");
    let out = rwfs().arg("-w").arg(ws.path()).args(["diff", "--since", "1h", "--json"]).output().unwrap();
    let stats: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by: BTreeMap<&str, &Value> = stats.iter().map(|s| (s["path"].as_str().unwrap(), s)).collect();
    assert_eq!(by["b.txt"]["status"], "created", "created and renamed within the window: {stats:?}");
    assert_eq!(by["b.txt"]["added"], 4);
    assert_eq!(by["bin.dat"]["binary"], true);
}

#[test]
fn rewind_through_the_daemon_is_seen_by_the_mount_at_once_and_sessions_follow_the_environment() {
    let m = Mounted::new();
    let file = m.path("work.txt");
    std::fs::write(&file, b"mine\n").unwrap();
    std::fs::write(m.path("old.txt"), b"old\n").unwrap();
    // An agent run: a process tree under RWFS_SESSION=agent-1 (a shell and its children).
    let script = format!(
        "echo one > {d}/a.txt && sh -c 'echo two > {d}/b.txt' && echo changed > {d}/work.txt && rm {d}/old.txt",
        d = m.mountpoint().display()
    );
    crate::support::run_ok(Command::new("sh").arg("-c").arg(&script).env("RWFS_SESSION", "agent-1"));
    std::fs::write(m.path("other.txt"), b"not the agent\n").unwrap();
    let rows = m.ws.rows();
    let session_of = |path: &str| rows.iter().rev().find(|r| r.path == path).and_then(|r| r.session.clone());
    assert_eq!(session_of("b.txt").as_deref(), Some("agent-1"), "a child inherits the session");
    assert_eq!(session_of("work.txt").as_deref(), Some("agent-1"));
    let mine = session_of("other.txt").unwrap();
    assert_ne!(mine, "agent-1");
    let expected = rwfs::journal::session::Sessions::default().of_pid(std::process::id()).unwrap();
    assert_eq!(mine, expected, "without RWFS_SESSION: the writer's agent host or POSIX session");

    let out = rwfs().arg("-w").arg(m.ws.path()).args(["sessions", "--json"]).output().unwrap();
    let sessions: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let agent = sessions.iter().find(|s| s["name"] == "agent-1").expect("the agent's session is listed");
    assert_eq!(agent["files_changed"], 4, "{agent}");

    let dry = rwfs()
        .arg("-w")
        .arg(m.ws.path())
        .args(["rewind", "--session", "agent-1", "--dry-run", "--json"])
        .output()
        .unwrap();
    assert!(dry.status.success(), "{}", String::from_utf8_lossy(&dry.stderr));
    assert_eq!(std::fs::read(&file).unwrap(), b"changed\n", "a dry run changes nothing");
    let out = rwfs().arg("-w").arg(m.ws.path()).args(["rewind", "--session", "agent-1", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), b"mine\n", "the mount sees the restore at once");
    assert_eq!(std::fs::read(m.path("old.txt")).unwrap(), b"old\n", "recreated");
    assert!(!m.path("a.txt").exists() && !m.path("b.txt").exists(), "removed (or left absent)");
    assert_eq!(std::fs::read(m.path("other.txt")).unwrap(), b"not the agent\n", "another session's file stays");
    let group = done["group"].as_str().unwrap();
    let out = rwfs().arg("-w").arg(m.ws.path()).args(["rewind", "--undo", group]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(std::fs::read(&file).unwrap(), b"changed\n");
    assert_eq!(std::fs::read(m.path("b.txt")).unwrap(), b"two\n");
    assert!(!m.path("old.txt").exists());
}

#[test]
fn log_follow_delivers_each_new_row_once_in_order_while_another_process_writes() {
    for mounted in [false, true] {
        let m = mounted.then(Mounted::new);
        let own = (!mounted).then(Ws::new);
        let ws = m.as_ref().map_or_else(|| own.as_ref().unwrap(), |m| &m.ws);
        let mut first =
            rwfs().arg("-w").arg(ws.path()).args(["write", "seed.txt"]).stdin(Stdio::null()).output().unwrap();
        assert!(first.status.success(), "{}", String::from_utf8_lossy(&std::mem::take(&mut first.stderr)));
        let mut follower = rwfs()
            .arg("-w")
            .arg(ws.path())
            .args(["log", "--follow", "--json", "-n", "1"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(follower.stdout.take().unwrap()).lines();
        let seed: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        let writer_ws = ws.path().to_path_buf();
        let writer = std::thread::spawn(move || {
            for i in 0..20 {
                let out = rwfs()
                    .arg("-w")
                    .arg(&writer_ws)
                    .args(["write", &format!("f{i}.txt")])
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                assert!(out.status.success());
            }
        });
        let mut seqs = Vec::new();
        while seqs.len() < 20 {
            let row: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            if row["path"].as_str().is_some_and(|p| p.starts_with('f')) {
                seqs.push(row["seq"].as_u64().unwrap());
            }
        }
        writer.join().unwrap();
        let first = seed["seq"].as_u64().unwrap() + 1;
        assert_eq!(seqs, (first..first + 20).collect::<Vec<_>>(), "mounted: {mounted}");
        follower.kill().unwrap();
        follower.wait().unwrap();
    }
}

/// A text of 300,000 numbered lines (4.2 MB, over the 4 MiB MCP and the page compare), line 7
/// reading `seventh`.
pub fn big_text(seventh: &str) -> Vec<u8> {
    let line = |i: usize| if i == 7 { format!("{seventh}\n") } else { format!("line {i:08}\n") };
    (0..300_000).map(line).collect::<String>().into_bytes()
}

#[test]
fn versions_over_the_cap_are_compared_by_rwfs_diff_and_not_by_mcp_whose_answer_says_so() {
    let ws = Ws::new();
    let engine = ws.open();
    write_as(&engine, "big.txt", &big_text("line 00000007"), &in_session("setup"));
    write_as(&engine, "small.txt", b"a\n", &in_session("setup"));
    write_as(&engine, "big.txt", &big_text("seven"), &in_session("agent"));
    write_as(&engine, "small.txt", b"a\nb\n", &in_session("agent"));
    engine.close().unwrap();
    assert!(big_text("x").len() as u64 > rwfs::history::SHOWN_MAX);

    let out = rwfs().arg("-w").arg(ws.path()).args(["diff", "big.txt"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("@@ -5,7 +5,7 @@\n line 00000004\n"), "{text}");
    assert!(text.contains("-line 00000007\n+seven\n"), "{text}");
    let out = rwfs().arg("-w").arg(ws.path()).args(["diff", "--session", "agent", "--json"]).output().unwrap();
    let stats: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(stats.iter().all(|s| s["added"] == 1 && s.get("note").is_none()), "{stats:?}");

    let mcp = crate::support::mcp::Mcp::start_with(ws, rwfs::tools::Settings::default());
    let d = mcp.call("rw_diff", json!({"path": "big.txt"})).ok();
    assert_eq!((d["diff"].as_str(), d["added"].as_u64()), (Some(""), Some(0)), "{d}");
    assert_eq!(d["to_bytes"], big_text("seven").len());
    assert!(d["note"].as_str().unwrap().contains("not compared"), "{d}");
    let s = mcp.call("rw_diff", json!({"session": "agent"})).ok();
    let by: BTreeMap<&str, &Value> =
        s["files"].as_array().unwrap().iter().map(|f| (f["path"].as_str().unwrap(), f)).collect();
    assert!(by["big.txt"]["note"].as_str().unwrap().contains("rwfs diff"), "{s}");
    assert_eq!((by["small.txt"]["added"].as_u64(), by["small.txt"].get("note")), (Some(1), None), "{s}");
}

#[test]
fn mcp_rw_diff_and_rw_rewind_plan_unless_confirmed_and_rows_carry_the_mcp_session() {
    let mcp = crate::support::mcp::Mcp::start();
    mcp.call("rw_safe_write", json!({"path": "a.txt", "content": "one\n", "mode": "create"})).ok();
    mcp.call("rw_safe_write", json!({"path": "a.txt", "content": "two\n", "mode": "overwrite"})).ok();
    let rows = mcp.ws.rows();
    let session = rows.last().unwrap().session.clone().unwrap();
    assert!(session.starts_with("mcp-"), "{session}");
    let d = mcp.call("rw_diff", json!({"path": "a.txt"})).ok();
    assert_eq!(d["diff"].as_str().unwrap().lines().skip(2).collect::<Vec<_>>(), ["@@ -1,1 +1,1 @@", "-one", "+two"]);
    let s = mcp.call("rw_diff", json!({"session": "self"})).ok();
    assert_eq!(s["files_changed"], 1);
    let plan = mcp.call("rw_rewind", json!({"session": "self"})).ok();
    assert_eq!(plan["dry_run"], true);
    assert!(mcp.ws.read("a.txt").is_some(), "nothing changed without confirm");
    let done = mcp.call("rw_rewind", json!({"session": "self", "confirm": true})).ok();
    assert_eq!(done["applied"], 1);
    assert_eq!(mcp.ws.read("a.txt"), None, "created by the session: removed");
    let bad = mcp.call("rw_rewind", json!({"session": "x", "to_seq": 1})).err();
    assert_eq!(bad["ok"], false);
}

#[test]
fn a_directory_tree_removed_with_rm_rf_through_the_mount_comes_back_with_rewind_and_a_glob() {
    let m = Mounted::new();
    std::fs::create_dir_all(m.path("app/sub")).unwrap();
    m.write("app/a.txt", b"a\n").unwrap();
    m.write("app/sub/b.txt", b"b\n").unwrap();
    std::fs::set_permissions(m.path("app/sub/b.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
    m.write("other.txt", b"kept\n").unwrap();
    let seq = m.ws.rows().last().unwrap().seq.unwrap();
    let out = Command::new("rm").arg("-rf").arg(m.path("app")).output().unwrap();
    assert!(out.status.success());
    m.write("other.txt", b"changed after\n").unwrap();
    assert!(!m.path("app").exists());

    let out = rwfs().arg("-w").arg(m.ws.path()).args(["rewind", "--seq", &seq.to_string(), "app/**"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(m.path("app/a.txt")).unwrap(), b"a\n", "seen through the mount at once");
    assert_eq!(std::fs::read(m.path("app/sub/b.txt")).unwrap(), b"b\n");
    let mode = std::fs::metadata(m.ws.abs("app/sub/b.txt")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "modes come back too");
    assert_eq!(std::fs::read(m.path("other.txt")).unwrap(), b"changed after\n", "paths outside the glob stay");
}

#[test]
fn rows_have_sub_second_times_and_rewind_to_a_time_inside_one_second_selects_exactly_the_rows_after_it() {
    let ws = Ws::new();
    {
        let engine = ws.open();
        for (i, text) in ["one\n", "two\n", "three\n", "four\n"].iter().enumerate() {
            write_as(&engine, "notes.txt", text.as_bytes(), &in_session("agent"));
            write_as(&engine, &format!("new{i}.txt"), b"made\n", &in_session("agent"));
        }
    }
    let rows = ws.rows();
    assert!(rows.iter().all(|r| rwfs::time::parse(&r.ts).is_some() && r.ts.contains('.')), "sub-second stamps");
    // The time of the third row (notes.txt = "two"): every later row is undone, none before.
    let at = &rows[2].ts;
    let times: Vec<_> = rows.iter().map(|r| rwfs::time::parse(&r.ts).unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "stamps in row order");
    // For each form the CLI takes: the stamp itself, and the same instant with an offset.
    let shifted = {
        let t = rwfs::time::parse(at).unwrap() + std::time::Duration::from_secs(3600);
        let s = rwfs::time::stamp(t);
        format!("{}+01:00", s.trim_end_matches('Z'))
    };
    for to in [at.clone(), shifted] {
        let out =
            rwfs().args(["rewind", "--json", "--dry-run", "--to", &to, "--workspace"]).arg(ws.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut paths: Vec<String> =
            plan["steps"].as_array().unwrap().iter().map(|s| s["path"].as_str().unwrap().to_string()).collect();
        paths.sort();
        assert_eq!(paths, ["new1.txt", "new2.txt", "new3.txt", "notes.txt"], "--to {to}: {plan}");
    }
    let out = rwfs().args(["rewind", "--to", at, "--workspace"]).arg(ws.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(ws.read("notes.txt").unwrap(), b"two\n");
    assert!(ws.read("new0.txt").is_some() && ws.read("new1.txt").is_none());
}

/// `rwfs blame PATH --json`: each line's `(text, seq of the row that introduced it)`.
fn blame(ws: &std::path::Path, path: &str) -> (Vec<(String, Option<u64>)>, Value) {
    let out = rwfs().arg("-w").arg(ws).args(["blame", path, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lines = b["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["text"].as_str().unwrap().to_string(), l["origin"]["seq"].as_u64()))
        .collect();
    (lines, b)
}

#[test]
fn blame_names_the_row_that_introduced_each_line_and_its_cache_only_speeds_it_up() {
    let ws = Ws::new();
    let engine = ws.open();
    let seq = |ws: &Ws| ws.rows().last().unwrap().seq;
    write_as(&engine, "f.txt", b"a\nb\nc\n", &in_session("first"));
    let first = seq(&ws);
    write_as(&engine, "f.txt", b"a\nB\nc\nd\n", &in_session("second"));
    let second = seq(&ws);
    engine.close().unwrap();
    let (lines, b) = blame(ws.path(), "f.txt");
    let expected = |rows: &[(&str, Option<u64>)]| rows.iter().map(|(t, s)| (t.to_string(), *s)).collect::<Vec<_>>();
    assert_eq!(lines, expected(&[("a", first), ("B", second), ("c", first), ("d", second)]), "{b}");
    assert_eq!(b["lines"][1]["origin"]["session"], "second", "{b}");
    assert!(b.get("note").is_none(), "{b}");
    let cache = ws.path().join(".resilient_write/index/blame");
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1, "the walk is cached beside the index");

    // More versions: the cached walk goes on from where it stopped, to the same answer as a
    // walk from the first version (the cache removed).
    let engine = ws.open();
    write_as(&engine, "f.txt", b"x\na\nB\nd\n", &in_session("third"));
    let third = seq(&ws);
    engine.close().unwrap();
    let want = expected(&[("x", third), ("a", first), ("B", second), ("d", second)]);
    assert_eq!(blame(ws.path(), "f.txt").0, want);
    std::fs::remove_dir_all(&cache).unwrap();
    assert_eq!(blame(ws.path(), "f.txt").0, want, "rebuilt without the cache");
    // A damaged cache is not believed.
    for entry in std::fs::read_dir(&cache).unwrap() {
        std::fs::write(entry.unwrap().path(), b"{not json").unwrap();
    }
    assert_eq!(blame(ws.path(), "f.txt").0, want, "a damaged cache is ignored");

    let text = rwfs().arg("-w").arg(ws.path()).args(["blame", "f.txt"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.lines().next().unwrap().contains("third"), "{text}");
    assert!(text.lines().next().unwrap().ends_with("1| x"), "{text}");

    // A change outside rwfs: its lines have no row, and the answer says why. The version it
    // overwrote was the tree's own copy (the current version is not kept in objects/), so
    // what that row wrote can no longer be told from the outside change: no row either.
    std::fs::write(ws.path().join("f.txt"), b"x\na\nB\nd\nmine\n").unwrap();
    let (lines, b) = blame(ws.path(), "f.txt");
    assert_eq!(lines, expected(&[("x", None), ("a", first), ("B", second), ("d", second), ("mine", None)]), "{b}");
    let note = b["note"].as_str().unwrap();
    assert!(note.contains("outside rwfs") && note.contains("1 versions are no longer kept"), "{b}");
}

#[test]
fn blame_through_a_mount_asks_the_daemon_and_credits_a_child_process_write() {
    let m = Mounted::new();
    m.write("f.txt", b"one\n").unwrap();
    let script = format!("echo two >> {}", m.path("f.txt").display());
    crate::support::run_ok(Command::new("sh").arg("-c").arg(&script).env("RWFS_SESSION", "agent-1"));
    let (lines, b) = blame(m.ws.path(), "f.txt");
    assert_eq!(lines.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), ["one", "two"], "{b}");
    assert!(lines.iter().all(|(_, seq)| seq.is_some()), "{b}");
    assert_ne!(b["lines"][0]["origin"]["session"], "agent-1", "{b}");
    assert_eq!(b["lines"][1]["origin"]["session"], "agent-1", "{b}");
}
