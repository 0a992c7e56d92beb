//! The journal: group commit, acknowledgement only after durability, the hash chain, and
//! tolerance of what a crash or an editor leaves behind.

use std::collections::HashMap;

use rwfs::engine::{WriteMode, verify};
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
    assert!(humantime::parse_rfc3339(ts).is_ok() && ts.ends_with('Z') && ts.len() == 20, "{ts}");
}
