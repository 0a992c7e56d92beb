//! Many writers at once: exclusive create, compare-and-swap, and appends that never get lost.

use std::collections::BTreeSet;
use std::sync::Barrier;

use rwfs::engine::{Expect, WriteMode};
use rwfs::journal::Op;

use crate::support::{Ws, sha, write, write_expect};

const THREADS: usize = 16;

/// Run `f(t)` on [`THREADS`] threads released at the same instant; results in thread order.
fn race<T: Send>(f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    f(t)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn sixteen_creates_of_one_path_exactly_one_wins() {
    let ws = Ws::new();
    let engine = ws.open();
    let results = race(|t| write(&engine, "race.txt", format!("writer {t}\n").as_bytes(), WriteMode::Create));
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one create succeeds");
    let losers: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(losers.len(), THREADS - 1);
    for e in &losers {
        assert_eq!(e.kind().as_str(), "stale_precondition", "{e}");
        assert_eq!(e.reason().code(), "file_already_exists", "{e}");
    }
    let content = ws.read("race.txt").unwrap();
    assert_eq!(Some(sha(&content)), winners[0].sha256);
    let rows = ws.rows();
    assert_eq!(rows.iter().filter(|r| r.op() == Op::Create).count(), 1);
    assert_eq!(rows.len(), 1, "losers leave no rows: {rows:?}");
}

#[test]
fn sixteen_compare_and_swap_writers_exactly_one_wins() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "counter", b"0", WriteMode::Create).unwrap();
    let results = race(|t| {
        let expect = Some(Expect::Sha(sha(b"0")));
        write_expect(&engine, "counter", format!("writer {t}").as_bytes(), WriteMode::Overwrite, expect)
    });
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1);
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(e.reason().code(), "expected_prev_sha256_mismatch", "{e}");
    }
    assert_eq!(Some(sha(&ws.read("counter").unwrap())), winners[0].sha256);
    assert_eq!(ws.object(&sha(b"0")).unwrap(), b"0", "the replaced version is kept");
}

#[test]
fn sixteen_threads_times_a_hundred_appends_lose_nothing() {
    const APPENDS: usize = 100;
    let ws = Ws::new();
    let engine = ws.open();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let engine = &engine;
            s.spawn(move || {
                for i in 0..APPENDS {
                    write(engine, "shared.log", format!("t{t:02} i{i:03}\n").as_bytes(), WriteMode::Append).unwrap();
                }
            });
        }
    });
    let content = String::from_utf8(ws.read("shared.log").unwrap()).unwrap();
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), THREADS * APPENDS);
    let distinct: BTreeSet<&str> = lines.iter().copied().collect();
    assert_eq!(distinct.len(), THREADS * APPENDS, "every append present exactly once");
    // Each thread's appends stay in its own order.
    for t in 0..THREADS {
        let mine: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with(&format!("t{t:02} "))).collect();
        let expected: Vec<String> = (0..APPENDS).map(|i| format!("t{t:02} i{i:03}")).collect();
        assert_eq!(mine, expected);
    }
    let rows = ws.rows();
    assert_eq!(rows.len(), THREADS * APPENDS);
    let seqs: BTreeSet<u64> = rows.iter().map(|r| r.seq.unwrap()).collect();
    assert_eq!(seqs.len(), rows.len(), "seq is unique");
    engine.close().unwrap();
    assert!(rwfs::history::verify(&ws.workspace()).unwrap().is_clean());
}
