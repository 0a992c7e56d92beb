//! The commit benchmark: durable commits per second of the engine's `safe_write` against a
//! minimal implementation of the same protocol in plain `std`, measured side by side in one run.
//!
//! ```text
//!   engine    Engine::safe_write(mode overwrite): stage (O_TMPFILE, write, one pass reading
//!             back + comparing + sha256), journal row (group commit) ∥ fsync(temp),
//!             RENAME_EXCHANGE, fsync(dir), previous version renamed into .resilient_write/objects/
//!   minimal   open(tmp, O_CREAT|O_EXCL), write, fsync(tmp), rename(tmp, name), fsync(dir)
//! ```
//!
//! Both write the same payloads (4 KiB and 1 MiB, distinct per commit) to a rotating set of
//! files (`--files` per writer, each writer its own directory), so every commit replaces a
//! previous version. With several writers the engine is one shared `Engine` used from every
//! thread. The machine this runs on is noisy (fsync latency varies severalfold between runs),
//! so each cell runs `--rounds` times, engine and minimal back to back in alternating order, and
//! the table reports the median; the ratios are also given as the median of per-round ratios,
//! which pairs runs that were close in time.
//!
//! Run it with `integration/bench/commit.sh [OPTIONS]` (`--help` lists them). The default
//! directory is a fresh one under the repository's `target/`, whatever `CARGO_TARGET_DIR` says,
//! so that it sits on the repository's filesystem; the benchmark prints the filesystem it ran
//! on and warns when it differs from the repository's. The engine keeps every version it
//! replaces, so a default run holds about 3 GiB there until it ends (1 MiB cells).
//!
//! Engine and minimal each get a directory in a block group of its own, checked by a file
//! creation probe: see [`spread_subdirectories`] for why (ext4 without a journal).

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

#[path = "stats.rs"]
mod stats;

use clap::{Parser, ValueEnum};
use rwfs::engine::Options;
use rwfs::engine::{Engine, WriteMode, WriteRequest};
use rwfs::journal::{Actor, Via};
use stats::{describe_fs, median, percentile, spread_subdirectories};

#[derive(Parser, Debug)]
#[command(
    name = "commit",
    bin_name = "integration/bench/commit.sh",
    about = "Durable commits/s: rwfs engine safe_write vs a minimal temp+fsync+rename+fsync(dir) protocol"
)]
struct Args {
    /// Directory to benchmark in: a fresh subdirectory is created in it and removed afterwards.
    /// Default: the repository's target/ directory (same filesystem as the repository).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Rounds per cell; engine and minimal alternate within each round.
    #[arg(long, default_value_t = 9)]
    rounds: usize,
    /// Commits per cell per round with 4 KiB payloads (split across the writers).
    #[arg(long = "commits-4k", default_value_t = 400, value_name = "N")]
    commits_4k: usize,
    /// Commits per cell per round with 1 MiB payloads (split across the writers).
    #[arg(long = "commits-1m", default_value_t = 100, value_name = "N")]
    commits_1m: usize,
    /// Files each writer rotates over.
    #[arg(long, default_value_t = 64)]
    files: usize,
    /// Writer thread counts to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8])]
    writers: Vec<usize>,
    /// Payload sizes to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [Size::K4, Size::M1])]
    sizes: Vec<Size>,
    /// Implementations to measure (one alone is useful under strace or perf).
    #[arg(long = "impl", value_delimiter = ',', default_values_t = [Impl::Engine, Impl::Minimal])]
    impls: Vec<Impl>,
    /// Keep the benchmark directory instead of removing it.
    #[arg(long)]
    keep: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Size {
    #[value(name = "4k")]
    K4,
    #[value(name = "1m")]
    M1,
}

impl Size {
    fn bytes(self) -> usize {
        match self {
            Size::K4 => 4 << 10,
            Size::M1 => 1 << 20,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Size::K4 => "4KiB",
            Size::M1 => "1MiB",
        }
    }

    fn dir(self) -> &'static str {
        match self {
            Size::K4 => "s4k",
            Size::M1 => "s1m",
        }
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.to_possible_value().expect("no skipped variants").get_name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Impl {
    Engine,
    Minimal,
}

impl Impl {
    fn label(self) -> &'static str {
        match self {
            Impl::Engine => "engine",
            Impl::Minimal => "minimal",
        }
    }
}

impl std::fmt::Display for Impl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// One way of committing a new version of writer `w`'s file `j`, durably.
trait Protocol: Sync {
    fn commit(&self, size: Size, w: usize, j: usize, data: &[u8]) -> io::Result<()>;
}

/// The engine: one shared `Engine`, paths `s4k/w3/f07` relative to its workspace.
struct EngineProtocol {
    engine: Engine,
    actor: Actor,
}

fn rel_name(size: Size, w: usize, j: usize) -> String {
    format!("{}/w{w}/f{j:03}", size.dir())
}

impl Protocol for EngineProtocol {
    fn commit(&self, size: Size, w: usize, j: usize, data: &[u8]) -> io::Result<()> {
        let path = rel_name(size, w, j);
        let req =
            WriteRequest { path: &path, content: data, mode: WriteMode::Overwrite, expect: None, actor: &self.actor };
        self.engine.safe_write(&req).map(drop).map_err(|e| io::Error::other(format!("safe_write {path}: {e}")))
    }
}

/// The minimal protocol in plain std, under its own root.
struct MinimalProtocol {
    root: PathBuf,
}

impl Protocol for MinimalProtocol {
    fn commit(&self, size: Size, w: usize, j: usize, data: &[u8]) -> io::Result<()> {
        let dir = self.root.join(size.dir()).join(format!("w{w}"));
        let target = dir.join(format!("f{j:03}"));
        // One writer per directory commits sequentially: one temp name per writer suffices.
        let temp = dir.join(".tmp");
        let mut file = OpenOptions::new().write(true).create_new(true).mode(0o666).open(&temp)?;
        file.write_all(data)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, &target)?;
        File::open(&dir)?.sync_all()
    }
}

/// Payloads: random bytes per writer and size, with a header making every commit distinct.
struct Payloads {
    base: Vec<Vec<u8>>,
}

impl Payloads {
    fn new(size: Size, writers: usize) -> Payloads {
        let base = (0..writers)
            .map(|w| {
                let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ ((w as u64 + 1) << 32) ^ size.bytes() as u64;
                let mut buf = vec![0u8; size.bytes()];
                for chunk in buf.chunks_mut(8) {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
                }
                buf
            })
            .collect();
        Payloads { base }
    }

    /// Writer `w`'s buffer, stamped for commit `k` of `round` (the same for both protocols).
    fn stamp(buf: &mut [u8], round: usize, w: usize, k: usize) {
        let header = format!("r{round:04} w{w:02} k{k:08}\n");
        buf[..header.len()].copy_from_slice(header.as_bytes());
    }
}

/// One timed run of one cell.
struct Run {
    commits: usize,
    elapsed: Duration,
    /// Per-commit latencies, nanoseconds.
    latencies: Vec<u64>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.commits as f64 / self.elapsed.as_secs_f64()
    }
}

/// What one timed run does: writer `w` commits `per_writer` times, to file `(start + k) % files`.
#[derive(Clone, Copy)]
struct Spec {
    size: Size,
    writers: usize,
    per_writer: usize,
    files: usize,
    round: usize,
    start: usize,
}

/// Run `spec` through `proto`, all writers starting together; the clock covers them all.
fn run_cell(proto: &dyn Protocol, payloads: &Payloads, spec: &Spec) -> io::Result<Run> {
    let Spec { size, writers, per_writer, files, round, start } = *spec;
    let barrier = Barrier::new(writers + 1);
    let (began, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let barrier = &barrier;
                let mut buf = payloads.base[w].clone();
                scope.spawn(move || -> io::Result<Vec<u64>> {
                    let mut latencies = Vec::with_capacity(per_writer);
                    barrier.wait();
                    for k in 0..per_writer {
                        Payloads::stamp(&mut buf, round, w, k);
                        let t = Instant::now();
                        proto.commit(size, w, (start + k) % files, &buf)?;
                        latencies.push(t.elapsed().as_nanos() as u64);
                    }
                    Ok(latencies)
                })
            })
            .collect();
        barrier.wait();
        let began = Instant::now();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().expect("writer panicked")).collect();
        (began, results)
    });
    let elapsed = began.elapsed();
    let mut latencies = Vec::with_capacity(writers * per_writer);
    for r in results {
        latencies.extend(r?);
    }
    Ok(Run { commits: latencies.len(), elapsed, latencies })
}

/// Untimed warm-up: commit every file twice through `proto`, writers in parallel, so that every
/// file exists and the engine's `objects/` subdirectories are (almost all) created.
fn prepare(proto: &dyn Protocol, payloads: &Payloads, size: Size, writers: usize, files: usize) -> io::Result<()> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let mut buf = payloads.base[w].clone();
                scope.spawn(move || {
                    for pass in 0..2 {
                        for j in 0..files {
                            Payloads::stamp(&mut buf, 9000 + pass, w, j);
                            proto.commit(size, w, j, &buf)?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().expect("writer panicked"))
    })
}

#[derive(Default)]
struct Cell {
    runs: Vec<Run>,
}

impl Cell {
    fn rates(&self) -> Vec<f64> {
        self.runs.iter().map(Run::rate).collect()
    }

    fn median_rate(&self) -> f64 {
        median(&mut self.rates())
    }

    /// p50 and p99 over every commit of every round, milliseconds.
    fn latency(&self) -> (f64, f64) {
        let mut all: Vec<u64> = self.runs.iter().flat_map(|r| r.latencies.iter().copied()).collect();
        all.sort_unstable();
        let ms = |p| percentile(&all, p).map_or(f64::NAN, |ns: u64| ns as f64 / 1e6);
        (ms(50.0), ms(99.0))
    }
}

/// Files created by [`probe`].
const PROBES: usize = 15;
/// A probe slower than this means the block group holds recently freed inodes.
const PROBE_SLOW: Duration = Duration::from_micros(60);

/// A new directory in `base` for one implementation, in a block group where creating a file is
/// cheap. Under a TOPDIR parent ext4 starts its search for a group at a hash of the new
/// directory's name, so a slow one is replaced by another with a new random name (up to 6 tries;
/// the fastest is kept). Returns it with its probe time.
fn pick_root(base: &Path, prefix: &str) -> io::Result<(PathBuf, Duration)> {
    let mut best: Option<(PathBuf, Duration)> = None;
    for _ in 0..6 {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(base)?.keep();
        let cost = probe(&dir)?;
        if best.as_ref().is_none_or(|(_, b)| cost < *b) {
            best = Some((dir, cost));
        }
        if cost < PROBE_SLOW {
            break;
        }
    }
    Ok(best.expect("at least one try"))
}

/// Median time to create an empty file in `dir/probe/` (the files are kept: removing them would
/// itself leave recently freed inodes behind).
fn probe(dir: &Path) -> io::Result<Duration> {
    let probe = dir.join("probe");
    fs::create_dir(&probe)?;
    let mut times = Vec::with_capacity(PROBES);
    for i in 0..PROBES {
        let t = Instant::now();
        OpenOptions::new().write(true).create_new(true).open(probe.join(format!("p{i}")))?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[PROBES / 2])
}

fn dev_of(path: &Path) -> Option<(u64, u64)> {
    let dev = fs::metadata(path).ok()?.dev();
    Some((nix::sys::stat::major(dev), nix::sys::stat::minor(dev)))
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("commit benchmark failed: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> io::Result<()> {
    if args.rounds == 0 || args.files == 0 || args.writers.contains(&0) {
        return Err(io::Error::other("--rounds, --files and --writers must be positive"));
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let parent = match &args.dir {
        Some(dir) => dir.clone(),
        None => repo.join("target"),
    };
    fs::create_dir_all(&parent)?;
    let tmp = tempfile::Builder::new().prefix("rwfs-bench-").tempdir_in(&parent)?;
    let base = tmp.path().to_path_buf();
    let spread = spread_subdirectories(&base);
    let (engine_root, engine_probe) = pick_root(&base, "engine-")?;
    let (minimal_root, minimal_probe) = pick_root(&base, "minimal-")?;
    let (repo_dev, bench_dev) = (dev_of(repo), dev_of(&base));
    let max_writers = args.writers.iter().copied().max().unwrap_or(1);

    let mut header = String::new();
    writeln!(
        header,
        "rwfs commit benchmark: durable commits/s, engine safe_write vs minimal temp+fsync+rename+fsync(dir)"
    )
    .unwrap();
    writeln!(header, "dir         {}", base.display()).unwrap();
    writeln!(
        header,
        "filesystem  {}, device {}",
        describe_fs(&base),
        bench_dev.map_or("?".to_string(), |(a, b)| format!("{a}:{b}"))
    )
    .unwrap();
    if repo_dev != bench_dev {
        writeln!(
            header,
            "WARNING     not the repository's filesystem ({}): figures are not comparable",
            repo.display()
        )
        .unwrap();
    }
    writeln!(
        header,
        "layout      engine and minimal in separate directories{}",
        match &spread {
            Ok(()) => ", spread over block groups (FS_TOPDIR_FL)".to_string(),
            Err(e) => format!(" (FS_TOPDIR_FL not set: {e})"),
        }
    )
    .unwrap();
    writeln!(
        header,
        "inode probe file create, median of {PROBES}: engine dir {:.0} us, minimal dir {:.0} us (slow if > {} us)",
        engine_probe.as_secs_f64() * 1e6,
        minimal_probe.as_secs_f64() * 1e6,
        PROBE_SLOW.as_micros()
    )
    .unwrap();
    writeln!(
        header,
        "setup       {} rounds, engine/minimal alternating; {} files per writer; commits per cell per round: 4KiB {}, 1MiB {} (split across writers); {} CPUs",
        args.rounds,
        args.files,
        args.commits_4k,
        args.commits_1m,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )
    .unwrap();
    eprintln!("benchmarking in {}", base.display());

    for size in &args.sizes {
        for w in 0..max_writers {
            fs::create_dir_all(engine_root.join(size.dir()).join(format!("w{w}")))?;
            fs::create_dir_all(minimal_root.join(size.dir()).join(format!("w{w}")))?;
        }
    }
    let engine =
        Engine::open(&engine_root, &Options::default()).map_err(|e| io::Error::other(format!("open engine: {e}")))?;
    let engine = EngineProtocol { engine, actor: Actor::this_process(Via::Cli, "rwfs-bench") };
    let minimal = MinimalProtocol { root: minimal_root };
    let proto = |imp: Impl| -> &dyn Protocol {
        match imp {
            Impl::Engine => &engine,
            Impl::Minimal => &minimal,
        }
    };

    let payloads: Vec<(Size, Payloads)> = args.sizes.iter().map(|&s| (s, Payloads::new(s, max_writers))).collect();
    let started = Instant::now();
    for (size, payloads) in &payloads {
        for &imp in &args.impls {
            eprintln!("prepare     {} {} x {} files x 2 commits via {imp}", size.label(), max_writers, args.files);
            prepare(proto(imp), payloads, *size, max_writers, args.files)?;
        }
    }
    let prepared = started.elapsed();
    let t0 = Instant::now();

    // cells[(size, writers, impl)] in print order.
    let mut keys = Vec::new();
    for &size in &args.sizes {
        for &writers in &args.writers {
            for &imp in &args.impls {
                keys.push((size, writers, imp));
            }
        }
    }
    let mut cells: Vec<Cell> = keys.iter().map(|_| Cell::default()).collect();
    let mut rotation = 0usize;
    for round in 0..args.rounds {
        let mut line = format!("round {}/{}  ", round + 1, args.rounds);
        for (size, payloads) in &payloads {
            let total = match size {
                Size::K4 => args.commits_4k,
                Size::M1 => args.commits_1m,
            };
            for &writers in &args.writers {
                let per_writer = total.div_ceil(writers).max(1);
                let mut order = args.impls.clone();
                if round % 2 == 1 {
                    order.reverse();
                }
                for imp in order {
                    let spec = Spec { size: *size, writers, per_writer, files: args.files, round, start: rotation };
                    let run = run_cell(proto(imp), payloads, &spec)?;
                    let _ = write!(line, " {}/{}w/{}={:.0}", size.label(), writers, imp.label(), run.rate());
                    let i = keys.iter().position(|k| *k == (*size, writers, imp)).expect("known cell");
                    cells[i].runs.push(run);
                }
            }
        }
        rotation += 17;
        eprintln!("{line}");
    }
    let measured = t0.elapsed();

    let find =
        |size: Size, writers: usize, imp: Impl| keys.iter().position(|k| *k == (size, writers, imp)).map(|i| &cells[i]);
    let mut out = String::new();
    out.push_str(&header);
    writeln!(out).unwrap();
    writeln!(
        out,
        "{:<7} {:>7}  {:<8} {:>9} {:>9} {:>8} {:>8}   commits/s per round",
        "payload", "writers", "impl", "commits/s", "per-write", "p50 ms", "p99 ms"
    )
    .unwrap();
    for (i, (size, writers, imp)) in keys.iter().enumerate() {
        let cell = &cells[i];
        let (p50, p99) = cell.latency();
        let rounds: Vec<String> = cell.rates().iter().map(|r| format!("{r:.0}")).collect();
        let rate = cell.median_rate();
        writeln!(
            out,
            "{:<7} {:>7}  {:<8} {:>9.1} {:>9.1} {:>8.2} {:>8.2}   {}",
            size.label(),
            writers,
            imp.label(),
            rate,
            rate / *writers as f64,
            p50,
            p99,
            rounds.join(" ")
        )
        .unwrap();
    }
    writeln!(out).unwrap();
    writeln!(out, "ratios: of the median rates [median of per-round ratios, min..max]").unwrap();
    for &size in &args.sizes {
        let Some(base_cell) = find(size, 1, Impl::Minimal) else { continue };
        let mut ratio_line = |imp: Impl, num_writers: usize, target: Option<f64>| {
            let Some(cell) = find(size, num_writers, imp) else { return };
            let of_medians = cell.median_rate() / base_cell.median_rate();
            let mut paired: Vec<f64> =
                cell.runs.iter().zip(&base_cell.runs).map(|(e, m)| e.rate() / m.rate()).collect();
            let (lo, hi) = paired.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
            let paired_median = median(&mut paired);
            let verdict = match target {
                None => "(what the disk allows the minimal protocol with more writers)".to_string(),
                Some(t) => {
                    let verdict = match (of_medians >= t, paired_median >= t) {
                        (true, true) => "ok",
                        (false, false) => "MISSED",
                        _ => "borderline",
                    };
                    format!("target >= {t:.1}  {verdict}")
                }
            };
            let name = format!("{}_{num_writers}w", imp.label());
            writeln!(
                out,
                "{:<7} {name:>10} / minimal_1w = {of_medians:5.2}  [{paired_median:.2}, {lo:.2}..{hi:.2}]  {verdict}",
                size.label(),
            )
            .unwrap();
        };
        ratio_line(Impl::Engine, 1, Some(0.9));
        if max_writers > 1 {
            ratio_line(Impl::Engine, max_writers, Some(2.0));
            ratio_line(Impl::Minimal, max_writers, None);
        }
    }
    writeln!(out, "time        prepare {:.1} s, measured {:.1} s", prepared.as_secs_f64(), measured.as_secs_f64())
        .unwrap();
    print!("{out}");

    drop(engine);
    if args.keep {
        eprintln!("kept {}", tmp.keep().display());
    }
    Ok(())
}
