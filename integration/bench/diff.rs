//! The diff benchmark: the time and peak memory of a line diff on two big versions of one
//! file, in the engine and through `rwfs diff` as a user runs it.
//!
//! ```text
//!   the pair   two versions of a 20,000-line file, every tenth line changed (the pair the
//!              hand-written Myers diff took 2.5 GB and 9.6 s for); targets ≤ 100 ms and
//!              ≤ 50 MB peak RSS
//!   engine     rwfs::history::lines on the pair in this process: the diff and its unified
//!              text, then the --stat count alone
//!   rwfs diff  `rwfs diff big.txt` (the unified diff) and `rwfs diff --since T` (the --stat
//!              summary) in a new process each; wall time and the process's peak RSS
//!   baseline   with --baseline PATH, the same commands with that rwfs binary in the same run
//!              (a build of an earlier commit), and the ratios
//! ```
//!
//! Each figure is the median of --runs runs. The peak RSS of one command is its own
//! (`getrusage(RUSAGE_CHILDREN)` in a helper process that runs only it). Run it with
//! `integration/bench/diff.sh [OPTIONS]`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "stats.rs"]
#[allow(dead_code)]
mod stats;

use clap::Parser;
use rwfs::engine::Options;
use rwfs::engine::{Engine, WriteMode, WriteRequest};
use rwfs::history::lines::{self, LineDiff};
use rwfs::journal::{Actor, Via};
use stats::median;

#[derive(Parser, Debug)]
#[command(name = "diff", bin_name = "integration/bench/diff.sh", about = "Line diff time and peak RSS")]
struct Args {
    /// The rwfs binary (release build); diff.sh passes it.
    #[arg(long, value_name = "PATH")]
    rwfs: PathBuf,
    /// Another rwfs binary to run the same commands with, side by side.
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
    /// Where the workspace goes (a fresh subdirectory, removed afterwards).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Runs per figure.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Lines of the file.
    #[arg(long, default_value_t = 20_000)]
    lines: usize,
    /// Internal: run this command and print its wall time (ms) and peak RSS (KiB).
    #[arg(long, hide = true, num_args = 1.., allow_hyphen_values = true)]
    measure: Option<Vec<String>>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let args = Args::parse();
    if let Some(command) = &args.measure {
        return measure(command);
    }
    let dir = args.dir.clone().unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let ws = dir.join(format!("diff-bench-{}", std::process::id()));
    let (old, new) = pair(args.lines);
    let since = make_workspace(&ws, &old, &new);

    println!("the pair: {} lines, every tenth changed ({} and {} bytes)", args.lines, old.len(), new.len());
    println!("{:<34} {:>10} {:>12}", "", "median ms", "peak RSS MB");
    let (old_text, new_text) = (std::str::from_utf8(&old).unwrap(), std::str::from_utf8(&new).unwrap());
    let mut times = timed(args.runs, || {
        let d = LineDiff::new(old_text, new_text);
        assert_eq!(d.added(), (args.lines as u64).div_ceil(10));
        d.unified(3).len()
    });
    println!("{:<34} {:>10.1} {:>12}", "engine: LineDiff + unified", median(&mut times), "");
    let mut times = timed(args.runs, || lines::count(old_text, new_text).0 as usize);
    println!("{:<34} {:>10.1} {:>12}", "engine: count (--stat)", median(&mut times), "");

    let ws_arg = ws.display().to_string();
    let commands: [(&str, Vec<&str>); 2] = [
        ("rwfs diff big.txt", vec!["diff", "big.txt"]),
        ("rwfs diff --since (--stat)", vec!["diff", "--since", &since]),
    ];
    let binaries: Vec<(&str, &Path)> =
        std::iter::once(("", args.rwfs.as_path())).chain(args.baseline.as_deref().map(|b| ("baseline: ", b))).collect();
    for (name, argv) in &commands {
        let mut figures = Vec::new();
        for (label, binary) in &binaries {
            let (mut ms, mut kib) = (Vec::new(), Vec::new());
            for _ in 0..args.runs {
                let (t, rss) = run_measured(binary, &ws_arg, argv);
                ms.push(t);
                kib.push(rss);
            }
            let (ms, mb) = (median(&mut ms), median(&mut kib) / 1024.0);
            println!("{:<34} {ms:>10.1} {mb:>12.1}", format!("{label}{name}"));
            figures.push((ms, mb));
        }
        if let [now, before] = figures[..] {
            println!("{:<34} {:>9.3}x {:>11.3}x", format!("  ratio to baseline"), now.0 / before.0, now.1 / before.1);
        }
    }
    println!("targets for `rwfs diff big.txt`: ≤ 100 ms, ≤ 50 MB");
    let _ = std::fs::remove_dir_all(&ws);
}

/// Two versions of an `n`-line text, every tenth line changed.
fn pair(n: usize) -> (Vec<u8>, Vec<u8>) {
    let old: String = (0..n).map(|i| format!("    let value_{i} = compute({i}, \"some argument\");\n")).collect();
    let new: String = (0..n)
        .map(|i| {
            if i % 10 == 0 {
                format!("    let value_{i} = compute_again({i});\n")
            } else {
                format!("    let value_{i} = compute({i}, \"some argument\");\n")
            }
        })
        .collect();
    (old.into_bytes(), new.into_bytes())
}

/// The workspace: `big.txt` written, then rewritten; returns a time between the two.
fn make_workspace(ws: &Path, old: &[u8], new: &[u8]) -> String {
    std::fs::create_dir_all(ws).expect("create workspace");
    let engine = Engine::open(ws, &Options::default()).expect("open engine");
    let actor = Actor::this_process(Via::Cli, "bench");
    let write = |content: &[u8]| {
        let req = WriteRequest { path: "big.txt", content, mode: WriteMode::Overwrite, expect: None, actor: &actor };
        engine.safe_write(&req).expect("write big.txt");
    };
    write(old);
    std::thread::sleep(Duration::from_millis(1100));
    let since = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    std::thread::sleep(Duration::from_millis(1100));
    write(new);
    engine.close().expect("close engine");
    since
}

/// Milliseconds of each of `runs` calls of `f`.
fn timed(runs: usize, mut f: impl FnMut() -> usize) -> Vec<f64> {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect()
}

/// `binary -w ws argv…` in a helper process of its own: (wall ms, peak RSS KiB).
fn run_measured(binary: &Path, ws: &str, argv: &[&str]) -> (f64, f64) {
    let me = std::env::current_exe().expect("own path");
    let out = Command::new(me)
        .args(["--rwfs", "-", "--measure"])
        .arg(binary)
        .args(["-w", ws])
        .args(argv)
        .output()
        .expect("run the helper");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().unwrap_or(f64::NAN));
    match (fields.next(), fields.next()) {
        (Some(ms), Some(kib)) if out.status.success() => (ms, kib),
        _ => panic!("{} {argv:?} failed: {text}{}", binary.display(), String::from_utf8_lossy(&out.stderr)),
    }
}

/// The helper: run `command` (output discarded), print its wall ms and its peak RSS in KiB.
fn measure(command: &[String]) {
    use nix::sys::resource::{UsageWho, getrusage};
    let t = Instant::now();
    let status = Command::new(&command[0])
        .args(&command[1..])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("start the command");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(status.success(), "{command:?}: {status}");
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    println!("{ms} {}", usage.max_rss());
}
