//! Issue 17, item 7: the journal's index answers every history question exactly as reading the
//! whole journal does (a row by seq and pages back from a seq included) — on random journals, after they grow, and after the index or the
//! journal was damaged (missing, stale, corrupt, truncated or rewritten: rebuilt, never
//! believed).

use std::time::{Duration, SystemTime};

use rwfs::history::Workspace;
use rwfs::journal::query::{self, Filter, RowSource, Selection};
use rwfs::journal::{Entry, Op, Row, Scan, Via};
use rwfs::sha::Sha256;

use crate::support::{Rng, Ws};

/// The same workspace, read without its index.
struct ScanOnly<'a>(&'a Workspace);

impl RowSource for ScanOnly<'_> {
    fn each_entry(&self, visit: &mut dyn FnMut(Entry)) -> rwfs::Result<Scan> {
        self.0.each_entry(visit)
    }
}

const PATHS: &[&str] = &["a", "b", "d", "d/x", "d/y", "d/e/z", "e", "e/x", "f/g", ".resilient_write/rewinds/p.json"];
const SESSIONS: &[Option<&str>] = &[Some("s1"), Some("s2"), Some("s3"), None];
const T0: u64 = 1_790_000_000;

/// `n` random rows continuing a chain from `prev` (the previous line's digest) and `seq`.
fn random_rows(rng: &mut Rng, n: usize, seq: &mut u64) -> Vec<Row> {
    (0..n)
        .map(|_| {
            *seq += 1;
            let op = *rng.pick(&[Op::Create, Op::Write, Op::Delete, Op::Rename, Op::Rename, Op::Block, Op::Restore]);
            let content = |rng: &mut Rng| Some(Sha256::of(&rng.below(6).to_le_bytes()));
            let (from, mode) = match op {
                Op::Rename => {
                    (Some(rng.pick(PATHS).to_string()), if rng.below(5) == 0 { "exchange" } else { "rename" })
                }
                _ => (None, op.as_str()),
            };
            let sha256 = match op {
                Op::Delete => None,
                Op::Rename if rng.below(3) == 0 => None,
                _ => content(rng),
            };
            Row {
                bytes: rng.below(100),
                caller: "t".into(),
                chain: None,
                comm: Some(rng.pick(&["sh", "claude", "sed"]).to_string()),
                from,
                group: if rng.below(4) == 0 { Some(format!("g{}", rng.below(2))) } else { None },
                journal_id: String::new(),
                mac: None,
                mode: mode.into(),
                op_field: Some(op),
                path: rng.pick(PATHS).to_string(),
                pid: Some(rng.below(5) as u32),
                prev_sha256: content(rng),
                reason: None,
                seq: if rng.below(10) == 0 { None } else { Some(*seq) },
                session: rng.pick(SESSIONS).map(String::from),
                sha256,
                // Not monotonic: clocks step back.
                ts: humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + rng.below(40)))
                    .to_string(),
                uid: None,
                verdict: None,
                via: Some(if rng.below(4) == 0 { Via::Mcp } else { Via::Fuse }),
            }
        })
        .collect()
}

/// Append `rows` to the journal of `ws`, chained after what is there.
fn append(ws: &Ws, rows: Vec<Row>) {
    let path = ws.abs(".resilient_write/journal.jsonl");
    let mut text = std::fs::read(&path).unwrap_or_default();
    let mut chain =
        text.strip_suffix(b"\n").map_or(Sha256::zero(), |t| Sha256::of(t.rsplit(|&b| b == b'\n').next().unwrap_or(t)));
    for row in rows {
        let line = Row { chain: Some(chain), ..row }.to_line();
        chain = Sha256::of(line.as_bytes());
        text.extend_from_slice(line.as_bytes());
        text.push(b'\n');
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
}

fn lines(entries: Vec<Entry>) -> Vec<(u64, Row)> {
    entries.into_iter().map(|e| (e.line, e.row)).collect()
}

/// Every question, asked of the index and of the journal, must get the same answer.
fn assert_same_answers(ws: &Ws, context: &str) {
    let w = ws.workspace();
    assert!(w.journal_index().is_some(), "{context}: the index opens");
    let scan = ScanOnly(&w);
    assert_eq!(query::sessions(&w).unwrap(), query::sessions(&scan).unwrap(), "{context}: sessions");
    let mut selections = vec![
        Selection::Session("s1".into()),
        Selection::Session("s3".into()),
        Selection::Group("g0".into()),
        Selection::Group("g1".into()),
    ];
    for k in [0, 7, 30, 90] {
        selections.push(Selection::AfterSeq(k));
    }
    for s in [0, 13, 39] {
        selections.push(Selection::AfterTime(SystemTime::UNIX_EPOCH + Duration::from_millis((T0 + s) * 1000 + 500)));
    }
    for selection in &selections {
        assert_eq!(
            query::touched(&w, selection).unwrap(),
            query::touched(&scan, selection).unwrap(),
            "{context}: touched {selection:?}"
        );
    }
    for path in PATHS {
        assert_eq!(
            lines(query::path_rows(&w, path).unwrap()),
            lines(query::path_rows(&scan, path).unwrap()),
            "{context}: rows of {path}"
        );
    }
    for seq in [1, 17, 60, 95, 1000] {
        assert_eq!(query::row_at_seq(&w, seq).unwrap(), query::row_at_seq(&scan, seq).unwrap(), "{context}: seq {seq}");
    }
    let since = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + 20));
    let filters = [
        Filter::default(),
        Filter { path: Some("d/x".into()), ..Filter::default() },
        Filter { session: Some("s2".into()), ..Filter::default() },
        Filter { since, ..Filter::default() },
        Filter { path: Some("a".into()), session: Some("s1".into()), since, ..Filter::default() },
        Filter { before: Some(40), ..Filter::default() },
        Filter { session: Some("s1".into()), before: Some(55), ..Filter::default() },
        Filter { path: Some("d".into()), before: Some(70), ..Filter::default() },
    ];
    for filter in &filters {
        for n in [0, 1, 3, 20] {
            let (i, s) = (query::tail(&w, filter, n).unwrap(), query::tail(&scan, filter, n).unwrap());
            assert_eq!(i.rows, s.rows, "{context}: tail {n} of {filter:?}");
            assert_eq!(i.problems, s.problems, "{context}: problems");
        }
    }
}

fn index_file(ws: &Ws) -> std::path::PathBuf {
    ws.abs(".resilient_write/index").join(rwfs::journal::INDEX_FILE)
}

#[test]
fn the_index_answers_as_the_journal_does_on_random_journals_as_they_grow() {
    for seed in 1..=6u64 {
        let ws = Ws::new();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let mut seq = 0;
        append(&ws, random_rows(&mut rng, 60, &mut seq));
        assert_same_answers(&ws, &format!("seed {seed}"));
        assert!(index_file(&ws).exists(), "the first question built the index");
        // The journal grows: the index catches up.
        append(&ws, random_rows(&mut rng, 40, &mut seq));
        assert_same_answers(&ws, &format!("seed {seed}, grown"));
    }
}

#[test]
fn a_missing_corrupt_or_stale_index_is_rebuilt_and_a_damaged_journal_is_never_answered_from_the_old_index() {
    let ws = Ws::new();
    let mut rng = Rng(77);
    let mut seq = 0;
    append(&ws, random_rows(&mut rng, 80, &mut seq));
    assert_same_answers(&ws, "first");

    std::fs::remove_dir_all(ws.abs(".resilient_write/index")).unwrap();
    assert_same_answers(&ws, "index deleted");

    std::fs::write(index_file(&ws), b"not an index at all").unwrap();
    assert_same_answers(&ws, "index corrupt");

    // Rows removed from the journal's end: shorter than the index covers.
    let path = ws.abs(".resilient_write/journal.jsonl");
    let text = std::fs::read(&path).unwrap();
    let cut: usize = text.split_inclusive(|&b| b == b'\n').take(50).map(<[u8]>::len).sum();
    std::fs::write(&path, &text[..cut]).unwrap();
    assert_same_answers(&ws, "journal truncated");
    assert_eq!(query::tail(&ws.workspace(), &Filter::default(), 0).unwrap().rows.len(), 50);

    // Truncated and then grown past its old length: the last covered line changed.
    append(&ws, random_rows(&mut rng, 60, &mut seq));
    assert_same_answers(&ws, "journal truncated and regrown");

    // A row in the middle rewritten in place, same length: a session's name changes.
    let text = std::fs::read(&path).unwrap();
    let at = text.windows(14).position(|w| w == b"\"session\":\"s1\"").expect("a row of s1");
    let mut tampered = text.clone();
    tampered[at + 12] = b'3';
    std::fs::write(&path, &tampered).unwrap();
    assert_same_answers(&ws, "journal rewritten in place");
    let w = ws.workspace();
    let s3 = query::sessions(&w).unwrap().into_iter().find(|s| s.name == "s3").unwrap();
    let scanned = query::sessions(&ScanOnly(&w)).unwrap().into_iter().find(|s| s.name == "s3").unwrap();
    assert_eq!(s3, scanned);
}

#[test]
fn a_middle_row_edited_in_place_with_its_size_and_modification_time_restored_is_not_answered_from_the_index() {
    use std::os::unix::fs::FileExt;
    let ws = Ws::new();
    let mut rng = Rng(91);
    let mut seq = 0;
    append(&ws, random_rows(&mut rng, 80, &mut seq));
    assert_same_answers(&ws, "built");
    for grown in [false, true] {
        let path = ws.abs(".resilient_write/journal.jsonl");
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        let text = std::fs::read(&path).unwrap();
        // A middle row's session renamed, byte for byte in place (s1 <-> s2).
        let at =
            text[text.len() / 3..].windows(14).position(|w| w == b"\"session\":\"s1\"" || w == b"\"session\":\"s2\"");
        let at = text.len() / 3 + at.expect("a row of s1 or s2") + 12;
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_at(if text[at] == b'1' { b"2" } else { b"1" }, at as u64).unwrap();
        file.set_times(std::fs::FileTimes::new().set_modified(modified)).unwrap();
        drop(file);
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), modified);
        if grown {
            // And then the journal grew, as it does under a running daemon.
            append(&ws, random_rows(&mut rng, 5, &mut seq));
        }
        assert_same_answers(&ws, &format!("edited in place, grown: {grown}"));
    }
}

#[test]
fn opening_the_workspace_again_leaves_the_journal_as_it_was_so_its_index_stays_valid() {
    // The writer reserves room past the journal's end; doing it again at every open changed the
    // file's modification time, which made the index rebuild itself from the whole journal
    // after every mount or command that opened the engine.
    let ws = Ws::new();
    let engine = ws.open();
    crate::support::write(&engine, "a.txt", b"one\n", rwfs::engine::WriteMode::Create).unwrap();
    drop(engine);
    let w = ws.workspace();
    assert_eq!(query::tail(&w, &Filter::default(), 0).unwrap().rows.len(), 1);
    let journal = ws.abs(".resilient_write/journal.jsonl");
    let before = std::fs::metadata(&journal).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    drop(ws.open());
    let after = std::fs::metadata(&journal).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap()),
        "an open that wrote no row changed the journal"
    );
}
