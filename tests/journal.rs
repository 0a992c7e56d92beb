//! The journal: group commit, acknowledgement only after durability, the hash chain, and
//! tolerance of what a crash or an editor leaves behind.

use std::collections::HashMap;

use rwfs::engine::WriteMode;
use rwfs::history::verify;
use rwfs::journal::Problem;

use crate::support::recorder::{Event, Image, Recorder};
use crate::support::{Ws, write};

#[test]
fn every_acknowledged_row_was_synced_first_and_batches_are_shared() {
    const THREADS: usize = 8;
    const WRITES: usize = 25;
    let ws = Ws::new();
    ws.open().close().unwrap();
    let (_base, inos) = Image::snapshot(ws.path());
    let journal_id = std::fs::metadata(ws.abs(".resilient_write/journal.jsonl")).unwrap();
    let journal_ino = {
        use std::os::unix::fs::MetadataExt;
        inos[&rwfs::durable::FileId { dev: journal_id.dev(), ino: journal_id.ino() }]
    };
    let rec = Recorder::new(inos);
    let engine = ws.open_with(rec.clone()).unwrap();
    let acks: Vec<(usize, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (engine, rec) = (&engine, &rec);
                s.spawn(move || {
                    (0..WRITES)
                        .map(|i| {
                            let c = write(engine, &format!("t{t}/f{i}"), b"x", WriteMode::Create).unwrap();
                            let id = t * WRITES + i;
                            rec.mark(Event::Ack { id });
                            (id, c.journal_id)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    engine.close().unwrap();
    let events = rec.events();
    let ack_at: HashMap<usize, usize> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| if let Event::Ack { id } = e { Some((*id, i)) } else { None })
        .collect();
    let mut journal_syncs = 0;
    for (id, journal_id) in &acks {
        let written = events
            .iter()
            .position(|e| matches!(e, Event::Write { ino, data, .. } if *ino == journal_ino && contains(data, journal_id.as_bytes())))
            .unwrap_or_else(|| panic!("row {journal_id} never written"));
        let synced =
            events[written..ack_at[id]].iter().any(|e| matches!(e, Event::Sync { ino } if *ino == journal_ino));
        assert!(synced, "row {journal_id} was acknowledged before its batch was synced");
    }
    for e in &events {
        if matches!(e, Event::Sync { ino } if *ino == journal_ino) {
            journal_syncs += 1;
        }
    }
    let rows = THREADS * WRITES;
    println!("group commit: {rows} rows made durable by {journal_syncs} journal syncs");
    assert!(journal_syncs < rows, "8 concurrent writers must share journal syncs ({journal_syncs} for {rows} rows)");
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn the_chain_detects_edits_removals_and_insertions() {
    let ws = Ws::new();
    let engine = ws.open();
    for i in 0..5 {
        write(&engine, "f", format!("v{i}").as_bytes(), WriteMode::Overwrite).unwrap();
    }
    engine.close().unwrap();
    let path = ws.abs(".resilient_write/journal.jsonl");
    let original = std::fs::read_to_string(&path).unwrap();
    assert!(verify(&ws.workspace()).unwrap().is_clean());
    let lines: Vec<&str> = original.lines().collect();

    // Edit: change a byte count in row 2 (still valid JSON).
    let edited = original.replacen(r#""bytes":2"#, r#""bytes":3"#, 2);
    std::fs::write(&path, &edited).unwrap();
    assert_chain_broken(&ws, 3);

    // Removal of row 3.
    let removed: Vec<&str> = lines.iter().enumerate().filter(|(i, _)| *i != 2).map(|(_, l)| *l).collect();
    std::fs::write(&path, removed.join("\n") + "\n").unwrap();
    assert_chain_broken(&ws, 3);

    // Insertion of a forged row copied from another.
    let mut inserted = lines.clone();
    inserted.insert(2, lines[1]);
    std::fs::write(&path, inserted.join("\n") + "\n").unwrap();
    assert_chain_broken(&ws, 3);
}

fn assert_chain_broken(ws: &Ws, line: u64) {
    let report = verify(&ws.workspace()).unwrap();
    assert!(report.problems.contains(&Problem::ChainBroken { line }), "{:?}", report.problems);
}

#[test]
fn a_torn_tail_is_skipped_and_the_next_row_starts_on_a_fresh_line() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"one", WriteMode::Create).unwrap();
    engine.close().unwrap();
    let path = ws.abs(".resilient_write/journal.jsonl");
    let torn: &[u8] = br#"{"bytes":3,"caller":"rwfs-tests","chain":"00"#;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(torn);
    std::fs::write(&path, &bytes).unwrap();
    let report = verify(&ws.workspace()).unwrap();
    assert_eq!(report.problems, vec![Problem::Torn { line: 2, bytes: torn.len() as u64 }]);

    let engine = ws.open();
    write(&engine, "f", b"two", WriteMode::Overwrite).unwrap();
    engine.close().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[1].as_bytes(), torn, "the torn bytes stay, terminated");
    let rows = ws.rows();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].seq, Some(2));
    let report = verify(&ws.workspace()).unwrap();
    // The torn line is now an unreadable line in the middle; the chain skips it.
    assert!(matches!(report.problems.as_slice(), [Problem::Unreadable { line: 2, .. }]), "{:?}", report.problems);
    assert!(report.drift.is_empty());
}

#[test]
fn rows_carry_the_reference_keys_in_sorted_order() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"x", WriteMode::Create).unwrap();
    engine.close().unwrap();
    let line = std::fs::read_to_string(ws.abs(".resilient_write/journal.jsonl")).unwrap();
    let value: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
    let object = value.as_object().unwrap();
    for key in [
        "bytes",
        "caller",
        "journal_id",
        "mode",
        "path",
        "sha256",
        "ts",
        "seq",
        "op",
        "prev_sha256",
        "pid",
        "comm",
        "uid",
        "via",
        "chain",
    ] {
        assert!(object.contains_key(key), "missing {key}: {line}");
    }
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    let mut in_line: Vec<(usize, &str)> = keys.iter().map(|k| (line.find(&format!("\"{k}\":")).unwrap(), *k)).collect();
    in_line.sort();
    let order: Vec<&str> = in_line.into_iter().map(|(_, k)| k).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);
    let id = object["journal_id"].as_str().unwrap();
    assert!(id.starts_with("wj_") && id.len() == 23, "{id}");
    let ts = object["ts"].as_str().unwrap();
    // RFC 3339 in UTC with microseconds: `2026-11-24T10:02:11.123456Z`.
    assert!(
        rwfs::time::parse(ts).is_some() && ts.ends_with('Z') && ts.len() == 27 && ts.as_bytes()[19] == b'.',
        "{ts}"
    );
}

// ---------------------------------------------------------------------------------------------
// Tampering (issue 14, item 9): the keyed chain, the head, and the store.

const JOURNAL: &str = ".resilient_write/journal.jsonl";

/// A workspace with three rows and one kept version (`f`'s first), closed.
fn three_rows() -> Ws {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "f", b"one", WriteMode::Create).unwrap();
    write(&engine, "f", b"two", WriteMode::Overwrite).unwrap();
    write(&engine, "g", b"12345", WriteMode::Create).unwrap();
    engine.close().unwrap();
    assert!(verify(&ws.workspace()).unwrap().is_clean(), "{:?}", verify(&ws.workspace()).unwrap());
    ws
}

fn rows_of(ws: &Ws) -> Vec<rwfs::journal::Row> {
    let text = std::fs::read_to_string(ws.abs(JOURNAL)).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Write `rows` as the journal, each `chain` recomputed as an attacker without the key can.
fn rewrite_rechained(ws: &Ws, rows: &mut [rwfs::journal::Row]) {
    let mut chain = rwfs::sha::Sha256::zero();
    let mut text = String::new();
    for row in rows.iter_mut() {
        row.chain = Some(chain);
        let line = row.to_line();
        chain = rwfs::sha::Sha256::of(line.as_bytes());
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::write(ws.abs(JOURNAL), text).unwrap();
}

/// Open the workspace, append a row, and verify.
fn problems_after_one_more_row(ws: &Ws) -> Vec<Problem> {
    let engine = ws.open();
    write(&engine, "h", b"h", WriteMode::Create).unwrap();
    engine.close().unwrap();
    problems_of(ws)
}

fn problems_of(ws: &Ws) -> Vec<Problem> {
    verify(&ws.workspace()).unwrap().problems
}

#[test]
fn verify_catches_an_edit_of_the_last_row_even_after_the_next_append() {
    let ws = three_rows();
    let text = std::fs::read_to_string(ws.abs(JOURNAL)).unwrap();
    std::fs::write(ws.abs(JOURNAL), text.replacen(r#""bytes":5"#, r#""bytes":9"#, 1)).unwrap();
    assert_eq!(ws.rows()[2].bytes, 9);
    let problems = problems_of(&ws);
    assert!(matches!(problems.as_slice(), [Problem::HeadMismatch { head_seq: 3, .. }]), "{problems:?}");
    // The next append would hide it for good, were it not recorded first.
    let problems = problems_after_one_more_row(&ws);
    assert!(
        matches!(problems.as_slice(), [Problem::Tampered { line: 4, reason }] if reason.contains("last rows were changed")),
        "{problems:?}"
    );
    assert_eq!(ws.rows()[3].op(), rwfs::journal::Op::Tamper);
}

#[test]
fn verify_catches_a_forged_row_appended_with_a_correct_chain() {
    for keep_mac in [true, false] {
        let ws = three_rows();
        let mut rows = rows_of(&ws);
        let mut forged = rows[2].clone();
        forged.seq = Some(4);
        forged.path = "forged".into();
        if !keep_mac {
            forged.mac = None;
        }
        rows.push(forged);
        rewrite_rechained(&ws, &mut rows);
        let problems = problems_of(&ws);
        let expect = if keep_mac { Problem::MacBroken { line: 4 } } else { Problem::Unkeyed { line: 4 } };
        assert_eq!(problems, vec![expect], "the plain chain is right, so only the keyed one tells");
    }
}

#[test]
fn verify_catches_a_middle_row_edited_or_removed_with_the_chain_recomputed() {
    let ws = three_rows();
    let mut rows = rows_of(&ws);
    rows[1].bytes = 7;
    rewrite_rechained(&ws, &mut rows);
    let problems = problems_of(&ws);
    // The row after the edited one no longer follows it under the key.
    assert!(problems.contains(&Problem::MacBroken { line: 3 }), "{problems:?}");
    assert!(problems.iter().all(|p| !matches!(p, Problem::ChainBroken { .. })), "{problems:?}");
    let ws = three_rows();
    let mut rows = rows_of(&ws);
    rows.remove(1);
    rewrite_rechained(&ws, &mut rows);
    let problems = problems_of(&ws);
    assert!(problems.contains(&Problem::MacBroken { line: 2 }), "{problems:?}");
    assert!(problems.iter().any(|p| matches!(p, Problem::Truncated { .. })), "{problems:?}");
}

#[test]
fn verify_catches_a_journal_truncated_to_nothing_and_remembers_it() {
    let ws = three_rows();
    let len = std::fs::metadata(ws.abs(JOURNAL)).unwrap().len();
    std::fs::write(ws.abs(JOURNAL), b"").unwrap();
    assert_eq!(problems_of(&ws), vec![Problem::Truncated { len: 0, head_len: len }]);
    let problems = problems_after_one_more_row(&ws);
    assert!(
        matches!(problems.as_slice(), [Problem::Tampered { line: 1, reason }] if reason.contains("truncated")),
        "{problems:?}"
    );
}

#[test]
fn verify_hashes_every_kept_version() {
    let ws = three_rows();
    let hex = crate::support::sha(b"one").to_hex();
    let object = ws.abs(&format!(".resilient_write/objects/{}/{hex}", &hex[..2]));
    assert_eq!(std::fs::read(&object).unwrap(), b"one");
    std::fs::write(&object, b"eno").unwrap();
    let report = verify(&ws.workspace()).unwrap();
    assert!(!report.is_clean());
    assert_eq!(report.objects, 1);
    assert_eq!(report.bad_objects.len(), 1, "{:?}", report.bad_objects);
    assert_eq!(report.bad_objects[0].actual, Some(crate::support::sha(b"eno")));
    assert!(report.problems.is_empty() && report.drift.is_empty());
}

#[test]
fn a_journal_from_before_the_key_still_verifies_and_continues_keyed() {
    let ws = three_rows();
    // What an rwfs without the keyed chain left: plain chains, no keys/.
    let mut rows = rows_of(&ws);
    for row in &mut rows {
        row.mac = None;
    }
    rewrite_rechained(&ws, &mut rows);
    std::fs::remove_dir_all(ws.abs(".resilient_write/keys")).unwrap();
    assert_eq!(problems_of(&ws), vec![]);
    assert_eq!(problems_after_one_more_row(&ws), vec![]);
    let rows = rows_of(&ws);
    assert!(rows[..3].iter().all(|r| r.mac.is_none()) && rows[3].mac.is_some(), "{rows:?}");
    assert_eq!(std::fs::read(ws.abs(".resilient_write/keys/journal.key")).unwrap().len(), 32);
}
