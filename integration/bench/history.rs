//! The history benchmark's workspace: a journal of `--rows` rows over `--paths` paths, then a
//! real tree of `--files` files changed by one session, for `integration/bench/history.sh`.
//!
//! ```text
//!   journal   --rows rows (writes of gen/dNNN/fNNNNN.txt over --paths paths, 50 sessions),
//!             appended through the journal's own writer (Journal::submit_written, one sync at
//!             the end): real rows, chained and keyed, with seq, ts, session and process. Their
//!             content is not in the tree or objects/ (log and history do not read it); the
//!             settle watermark is set past them, as an engine that had settled them would.
//!   tree      --files text files (real/dNN/fNNNNN.txt) written through the engine in session
//!             `base`, then each rewritten (a few lines changed) in session `agent`: what
//!             `diff --since` and `rewind --session agent` work on
//! ```
//!
//! Prints `since=<RFC 3339>` (a time between the two sessions) and `path=<a generated path>`
//! for the script.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rwfs::durable::{Disk, OsDisk, STATE_DIR};
use rwfs::engine::Options;
use rwfs::engine::{Engine, WriteMode, WriteRequest};
use rwfs::journal::{Actor, Change, Op, Via};
use rwfs::sha::Sha256;

#[derive(Parser, Debug)]
#[command(name = "history", about = "Build the history benchmark's workspace")]
struct Args {
    /// The workspace to create (must not exist).
    #[arg(long)]
    ws: PathBuf,
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    #[arg(long, default_value_t = 50_000)]
    paths: u64,
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    /// Threads writing the real tree (the engine's group commit shares their syncs).
    #[arg(long, default_value_t = 8)]
    writers: usize,
}

fn main() {
    let args = Args::parse();
    if args.ws.exists() {
        eprintln!("history: {} exists; give a new directory", args.ws.display());
        std::process::exit(2);
    }
    std::fs::create_dir_all(args.ws.join(STATE_DIR)).expect("create workspace");
    let started = Instant::now();
    generate_rows(&args);
    eprintln!("history: {} journal rows in {:.1?}", args.rows, started.elapsed());
    let started = Instant::now();
    let since = real_tree(&args);
    eprintln!("history: {} files written and rewritten in {:.1?}", args.files, started.elapsed());
    println!("since={since}");
    println!("path={}", generated_path(args.paths / 2));
}

fn generated_path(p: u64) -> String {
    format!("gen/d{:03}/f{p:05}.txt", p % 500)
}

/// `--rows` writes round-robin over `--paths` paths, through the journal's writer.
fn generate_rows(args: &Args) {
    let disk: Arc<dyn Disk> = Arc::new(OsDisk);
    let root = disk.open_root(&args.ws).expect("open workspace");
    let state = disk.open_dir(&root, STATE_DIR).expect("open state directory");
    let (journal, _) = rwfs::journal::open(disk.clone(), &state, |_| {}).expect("open journal");
    let mut pending = std::collections::VecDeque::new();
    let content = |p: u64, round: u64| Sha256::of(format!("{p}/{round}").as_bytes());
    for i in 0..args.rows {
        let (p, round) = (i % args.paths, i / args.paths);
        let actor = Actor {
            session_label: Some(format!("gen-{:02}", i * 50 / args.rows)),
            ..Actor::this_process(Via::Fuse, "bench")
        };
        pending.push_back(journal.submit_written(Change {
            op: if round == 0 { Op::Create } else { Op::Write },
            path: generated_path(p),
            from: None,
            sha256: Some(content(p, round)),
            prev_sha256: (round > 0).then(|| content(p, round - 1)),
            bytes: 100 + p % 1000,
            mode: String::new(),
            actor,
            verdict: None,
            reason: None,
        }));
        if pending.len() >= 4096 {
            pending.pop_front().expect("queued").wait().expect("row written");
        }
    }
    for p in pending {
        p.wait().expect("row written");
    }
    journal.sync().expect("sync journal");
    let seq = journal.durable_seq();
    journal.close();
    // What an engine that had applied these rows would have recorded (`engine/settle.rs`).
    let lock = args.ws.join(STATE_DIR).join(rwfs::durable::layout::LOCK);
    std::fs::write(lock, format!("{{\"pid\":0,\"settled_seq\":{seq}}}\n")).expect("write lock");
}

/// The real tree: written in session `base`, rewritten in session `agent`; returns a time
/// between the two.
fn real_tree(args: &Args) -> String {
    let engine = Engine::open(&args.ws, &Options::default()).expect("open engine");
    let text =
        |i: usize, round: usize| -> String {
            (0..40)
                .map(|l| {
                    if l % 10 == round * 3 {
                        format!("line {l} of {i}: changed\n")
                    } else {
                        format!("line {l} of {i}\n")
                    }
                })
                .collect()
        };
    let write_all = |session: &str, round: usize| {
        let actor = Actor { session_label: Some(session.into()), ..Actor::this_process(Via::Cli, "bench") };
        std::thread::scope(|s| {
            for w in 0..args.writers {
                let (engine, actor) = (&engine, &actor);
                s.spawn(move || {
                    for i in (w..args.files).step_by(args.writers) {
                        let path = format!("real/d{:02}/f{i:05}.txt", i % 100);
                        let content = text(i, round);
                        let req = WriteRequest {
                            path: &path,
                            content: content.as_bytes(),
                            mode: WriteMode::Overwrite,
                            expect: None,
                            actor,
                        };
                        engine.safe_write(&req).unwrap_or_else(|e| panic!("write {path}: {e}"));
                    }
                });
            }
        });
    };
    write_all("base", 0);
    std::thread::sleep(Duration::from_millis(1100));
    let since = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    std::thread::sleep(Duration::from_millis(1100));
    write_all("agent", 1);
    engine.close().expect("close engine");
    since
}
