//! The scan benchmark: throughput, false positives and latency of the risk scorer
//! (`rwfs::score::Scanner::builtin()`), on one core, side by side with the reference scorer
//! (resilient-write 0.3.0's `risk_score.score_content`) and detect-secrets 1.5.0.
//!
//! ```text
//!   1  source code   every .rs file of the local cargo registry (`$CARGO_HOME/registry/src/*/`),
//!                    read into memory first, scanned file by file with its path; MB/s (median of
//!                    --passes), findings per MB by kind and severity, the rules that fire most
//!   2  adversarial   10 MB each, no newline: one letter repeated, random base64, `a@a.a`
//!                    repeated, `sk-` repeated
//!   3  latency       p50/p99 of scanning 100 KB: 20 windows of concatenated real sources, cut to
//!                    exactly 100 KB, scanned round-robin (--latency-scans in all)
//!   4  evaluation    block precision and recall per credential type on a labelled set built at
//!                    run time (`scan_eval.rs`): documented formats with generated bodies, and the
//!                    placeholders, docs, fixtures, hashes, UUIDs and lockfiles around them; an
//!                    item counts as blocked when the default policy blocks it at its path
//!   5  configuration every JSON, YAML, TOML and INI-like file of the same corpus roots and of any
//!                    --config-root (these go through the parsers of `score::structured`): MB/s,
//!                    blocked files per MB
//!   6  tools         the same measurements for the reference and detect-secrets, run by the
//!                    Python driver `scan_reference.py` on a fixed subset (every k-th corpus file
//!                    up to --tool-mb) and on 100 KB adversarial inputs under a time limit;
//!                    rwfs is measured again on exactly those inputs for the ratios
//! ```
//!
//! Run it with `integration/bench/scan.sh [OPTIONS]`: the script pins every measured process to
//! CPU 0 (`taskset -c 0`), creates the Python venv under `target/`, writes the tool inputs with
//! `--prepare`, runs the driver for each tool and then this binary with `--work` to print one
//! table. Run alone (`cargo bench --bench scan`) it prints the rwfs columns only. MB = 10^6 bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "scan_eval.rs"]
mod eval;
#[path = "stats.rs"]
#[allow(dead_code)] // `describe_fs` and `spread_subdirectories` are the other benchmarks'
mod stats;

use clap::Parser;
use rwfs::score::{Kind, Report, Scanner};
use serde_json::Value;
use stats::{median, percentile};

#[derive(Parser, Debug)]
#[command(
    name = "scan",
    bin_name = "integration/bench/scan.sh",
    about = "Risk scorer MB/s, findings per MB and latency on one core, vs the reference scorer and detect-secrets"
)]
struct Args {
    /// Directory whose .rs files (recursively) form the corpus; repeatable.
    /// Default: every directory in $CARGO_HOME/registry/src/ (CARGO_HOME defaults to ~/.cargo).
    #[arg(long, value_name = "DIR")]
    corpus: Vec<PathBuf>,
    /// Directory whose JSON/YAML/TOML/INI files (recursively) the configuration section scans
    /// besides the corpus roots' own; repeatable (e.g. a pip or npm cache, an SDK).
    #[arg(long = "config-root", value_name = "DIR")]
    config_root: Vec<PathBuf>,
    /// Timed passes over the whole corpus (the median is reported).
    #[arg(long, default_value_t = 5)]
    passes: usize,
    /// Size of each adversarial input, MB.
    #[arg(long = "adversarial-mb", default_value_t = 10.0, value_name = "MB")]
    adversarial_mb: f64,
    /// Timed passes over each adversarial input (the median is reported).
    #[arg(long = "adversarial-passes", default_value_t = 3, value_name = "N")]
    adversarial_passes: usize,
    /// Size of the latency input, bytes.
    #[arg(long = "latency-bytes", default_value_t = 100_000, value_name = "N")]
    latency_bytes: usize,
    /// Timed scans of the latency input (after 100 untimed ones).
    #[arg(long = "latency-scans", default_value_t = 2000, value_name = "N")]
    latency_scans: usize,
    /// Size of the corpus subset the Python tools scan, MB (every k-th file up to this size).
    #[arg(long = "tool-mb", default_value_t = 10.0, value_name = "MB")]
    tool_mb: f64,
    /// Size of the adversarial inputs the Python tools scan, bytes.
    #[arg(long = "tool-adversarial-bytes", default_value_t = 100_000, value_name = "N")]
    tool_adversarial_bytes: usize,
    /// Rules listed by count.
    #[arg(long, default_value_t = 12)]
    top: usize,
    /// Directory for the tool inputs (--prepare writes them) and the tools' results
    /// (tool-*.json, read when printing the table).
    #[arg(long, value_name = "DIR")]
    work: Option<PathBuf>,
    /// Only write the tool inputs into --work (subset.txt, adversarial-*.txt) and exit.
    #[arg(long, requires = "work")]
    prepare: bool,
    /// Sections to run (default: all); one alone is handy under perf.
    #[arg(long, value_delimiter = ',')]
    only: Vec<Section>,
    /// Adversarial inputs to run (default: all): letter, base64, email, sk.
    #[arg(long, value_delimiter = ',')]
    adversarial: Vec<String>,
    /// Only write the most common four-byte grams of the corpus (lower case, rates per MB) to
    /// FILE and exit: the table the scorer's gram sieve picks each anchor's rarest gram by
    /// (`src/score/grams.txt`).
    #[arg(long = "write-grams", value_name = "FILE")]
    write_grams: Option<PathBuf>,
    /// Grams --write-grams lists.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    grams: usize,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Section {
    Source,
    Adversarial,
    Latency,
    Eval,
    Config,
}

const MB: f64 = 1e6;

/// One corpus file, in memory.
struct Source {
    /// Relative to its corpus root, prefixed with the root's last component.
    path: String,
    abs: PathBuf,
    data: Vec<u8>,
}

/// A generator of `n` bytes of an adversarial input.
type Generator = fn(usize) -> Vec<u8>;

/// The adversarial inputs: name, description, generator.
const ADVERSARIAL: &[(&str, &str, Generator)] = &[
    ("letter", "one letter repeated ('a'), no newline", letter),
    ("base64", "random base64, no newline", random_base64),
    ("email", "'a@a.a' repeated, no newline", |n| repeat(b"a@a.a", n)),
    ("sk", "'sk-' repeated, no newline", |n| repeat(b"sk-", n)),
];

fn letter(n: usize) -> Vec<u8> {
    vec![b'a'; n]
}

fn repeat(unit: &[u8], n: usize) -> Vec<u8> {
    unit.iter().copied().cycle().take(n).collect()
}

fn random_base64(n: usize) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ALPHABET[(state >> 58) as usize]
        })
        .collect()
}

fn default_corpus() -> io::Result<Vec<PathBuf>> {
    let home = match std::env::var_os("CARGO_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            PathBuf::from(std::env::var_os("HOME").ok_or_else(|| io::Error::other("HOME is not set"))?).join(".cargo")
        }
    };
    let src = home.join("registry").join("src");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&src)
        .map_err(|e| io::Error::other(format!("{}: {e} (run `cargo fetch` first)", src.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Configuration files: the kinds the scanner parses.
fn is_config(path: &Path) -> bool {
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().to_ascii_lowercase());
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    matches!(ext, "json" | "yaml" | "yml" | "toml" | "ini" | "cfg" | "conf" | "env" | "properties")
        || name.starts_with(".env")
}

/// Every regular file under `dir` that `keep` selects (symbolic links not followed), sorted.
fn files_where(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            files_where(&path, keep, out)?;
        } else if kind.is_file() && keep(&path) {
            out.push(path);
        }
    }
    Ok(())
}

fn load_corpus(roots: &[PathBuf]) -> io::Result<Vec<Source>> {
    load_files(roots, &|p| p.extension().is_some_and(|e| e == "rs"))
}

fn load_files(roots: &[PathBuf], keep: &dyn Fn(&Path) -> bool) -> io::Result<Vec<Source>> {
    let mut sources = Vec::new();
    for root in roots {
        let mut paths = Vec::new();
        files_where(root, keep, &mut paths)?;
        let label = root.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        for abs in paths {
            let rel = abs.strip_prefix(root).unwrap_or(&abs).to_string_lossy().into_owned();
            let data = fs::read(&abs)?;
            let path = if roots.len() > 1 { format!("{label}/{rel}") } else { rel };
            sources.push(Source { path, abs, data });
        }
    }
    Ok(sources)
}

/// The Python tools' subset: every k-th file, k chosen so the subset is about `mb`, spread over
/// the whole corpus.
fn tool_subset(sources: &[Source], mb: f64) -> (Vec<usize>, usize) {
    let total: usize = sources.iter().map(|s| s.data.len()).sum();
    let want = (mb * MB) as usize;
    let stride = (total / want.max(1)).max(1);
    let mut picked = Vec::new();
    let mut bytes = 0;
    for i in (0..sources.len()).step_by(stride) {
        if bytes >= want {
            break;
        }
        bytes += sources[i].data.len();
        picked.push(i);
    }
    (picked, stride)
}

/// 20 windows of `size` bytes: the corpus concatenated from evenly spaced starting files.
fn latency_inputs(sources: &[Source], size: usize) -> Vec<(String, Vec<u8>)> {
    const WINDOWS: usize = 20;
    let mut out = Vec::new();
    for w in 0..WINDOWS {
        let first = w * sources.len() / WINDOWS;
        let mut buf = Vec::with_capacity(size);
        for s in sources[first..].iter().chain(sources.iter()) {
            if buf.len() >= size {
                break;
            }
            buf.extend_from_slice(&s.data);
        }
        buf.truncate(size);
        out.push((sources[first].path.clone(), buf));
    }
    out
}

/// This thread's CPU time: the measure that other processes sharing the core cannot inflate.
fn thread_cpu() -> Duration {
    let mut ts = nix::libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A stopwatch for both clocks.
struct Clock {
    wall: Instant,
    cpu: Duration,
}

/// CPU and wall time of one measurement.
#[derive(Clone, Copy, Default)]
struct Spent {
    cpu: Duration,
    wall: Duration,
}

impl Clock {
    fn start() -> Clock {
        Clock { wall: Instant::now(), cpu: thread_cpu() }
    }

    fn spent(&self) -> Spent {
        let cpu = thread_cpu().saturating_sub(self.cpu);
        Spent { cpu, wall: self.wall.elapsed() }
    }
}

/// MB/s by CPU time: median, min, max over the passes; and the median by wall time.
#[derive(Clone, Copy)]
struct Rate {
    cpu: f64,
    lo: f64,
    hi: f64,
    wall: f64,
}

impl Rate {
    fn of(bytes: &[(usize, Spent)]) -> Rate {
        let mut cpu: Vec<f64> = bytes.iter().map(|(b, s)| *b as f64 / MB / s.cpu.as_secs_f64()).collect();
        let mut wall: Vec<f64> = bytes.iter().map(|(b, s)| *b as f64 / MB / s.wall.as_secs_f64()).collect();
        let (lo, hi) = cpu.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        Rate { cpu: median(&mut cpu), lo, hi, wall: median(&mut wall) }
    }

    fn cell(&self, spread: bool) -> String {
        let mut s = fmt_rate(self.cpu);
        if spread {
            write!(s, " [{}..{}]", fmt_rate(self.lo), fmt_rate(self.hi)).unwrap();
        }
        write!(s, ", wall {}", fmt_rate(self.wall)).unwrap();
        s
    }
}

/// `passes` timed passes of scanning every input.
fn throughput(scanner: &Scanner, inputs: &[(&str, &[u8])], passes: usize) -> Rate {
    let bytes: usize = inputs.iter().map(|(_, d)| d.len()).sum();
    let runs: Vec<(usize, Spent)> = (0..passes.max(1))
        .map(|_| {
            let clock = Clock::start();
            for (path, data) in inputs {
                std::hint::black_box(scanner.scan(data, Some(path)));
            }
            (bytes, clock.spent())
        })
        .collect();
    Rate::of(&runs)
}

/// Small inputs: each of 3 runs repeats the inputs until 0.3 s of CPU time have passed.
fn throughput_small(scanner: &Scanner, inputs: &[(&str, &[u8])]) -> Rate {
    let bytes: usize = inputs.iter().map(|(_, d)| d.len()).sum();
    let runs: Vec<(usize, Spent)> = (0..3)
        .map(|_| {
            let clock = Clock::start();
            let mut done = 0usize;
            while clock.spent().cpu < Duration::from_millis(300) {
                for (path, data) in inputs {
                    std::hint::black_box(scanner.scan(data, Some(path)));
                }
                done += bytes;
            }
            (done, clock.spent())
        })
        .collect();
    Rate::of(&runs)
}

/// Findings of one pass over the corpus, by rule.
#[derive(Default)]
struct Tally {
    blocking: usize,
    /// Files the default policy blocks, and the first few of them.
    blocked_files: usize,
    blocked_examples: Vec<String>,
    leak_sensitive: usize,
    filter: usize,
    truncated: usize,
    /// (rule, kind, severity) → count and the first few places.
    rules: BTreeMap<(String, &'static str, &'static str), (usize, Vec<String>)>,
}

impl Tally {
    fn add(&mut self, path: &str, report: &Report) {
        self.truncated += report.truncated.len();
        for f in &report.findings {
            let kind = match f.kind {
                Kind::Leak => "leak",
                Kind::Filter => "filter",
            };
            match (f.kind, f.severity) {
                (Kind::Leak, "credential") => self.blocking += 1,
                (Kind::Leak, _) => self.leak_sensitive += 1,
                (Kind::Filter, _) => self.filter += 1,
            }
            let entry = self.rules.entry((f.rule.clone(), kind, f.severity)).or_default();
            entry.0 += 1;
            if entry.1.len() < 3 {
                entry.1.push(format!("{path}:{}", f.line));
            }
        }
    }
}

/// What a tool's driver measured on one case (see scan_reference.py).
struct ToolCase {
    /// Bytes of one round (every input once).
    total: f64,
    /// Bytes scanned in all (rounds repeat short cases; a time limit cuts a round short).
    bytes: f64,
    /// CPU seconds (process time), the figure compared; `wall` is the wall-clock time.
    seconds: f64,
    wall: f64,
    timed_out: bool,
    limit: f64,
    findings: Option<f64>,
}

impl ToolCase {
    fn of(v: &Value) -> Option<ToolCase> {
        Some(ToolCase {
            total: v.get("bytes")?.as_f64()?,
            bytes: v.get("bytes_done")?.as_f64()?,
            seconds: v.get("cpu_seconds")?.as_f64()?,
            wall: v.get("seconds")?.as_f64()?,
            timed_out: v.get("timed_out")?.as_bool()?,
            limit: v.get("limit")?.as_f64().unwrap_or(f64::NAN),
            findings: v.get("findings").and_then(Value::as_f64),
        })
    }

    fn rate(&self) -> Option<f64> {
        (self.bytes > 0.0 && self.seconds > 0.0).then(|| self.bytes / MB / self.seconds)
    }

    /// MB/s as printed (with the time when it is long), `<` when the time limit stopped the
    /// case before one input was done.
    fn cell(&self) -> String {
        let secs = if self.wall >= 1.0 { format!(" ({:.1} s)", self.wall) } else { String::new() };
        match (self.timed_out, self.rate()) {
            (false, Some(r)) => format!("{}, wall {}{secs}", fmt_rate(r), fmt_rate(self.bytes / MB / self.wall)),
            (true, Some(r)) => format!(
                "{} (stopped at {:.0} s limit, {:.0}% done)",
                fmt_rate(r),
                self.limit,
                100.0 * self.bytes / self.total
            ),
            (true, None) => {
                format!("< {} (stopped at {:.0} s limit)", fmt_rate(self.total / MB / self.limit), self.limit)
            }
            (false, None) => "?".into(),
        }
    }

    /// rwfs ÷ tool, `>` when the tool hit its limit before one input was done.
    fn ratio(&self, rwfs: f64) -> String {
        match (self.timed_out, self.rate()) {
            (false, Some(r)) => fmt_ratio(rwfs / r),
            (true, Some(r)) => format!("~{}", fmt_ratio(rwfs / r)),
            (true, None) => format!("> {}", fmt_ratio(rwfs / (self.total / MB / self.limit))),
            (false, None) => "?".into(),
        }
    }
}

fn fmt_rate(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.1}")
    } else if r >= 0.01 {
        format!("{r:.3}")
    } else {
        format!("{r:.5}")
    }
}

fn fmt_ratio(r: f64) -> String {
    if r >= 10.0 { format!("{r:.0}x") } else { format!("{r:.1}x") }
}

/// A tool's results file, if the script ran it.
struct Tool {
    label: String,
    json: Value,
}

impl Tool {
    fn load(work: &Path, name: &str) -> Option<Tool> {
        let text = fs::read_to_string(work.join(format!("tool-{name}.json"))).ok()?;
        let json: Value = serde_json::from_str(&text).ok()?;
        let label = json.get("label").and_then(Value::as_str).unwrap_or(name).to_string();
        Some(Tool { label, json })
    }

    fn case(&self, name: &str) -> Option<ToolCase> {
        ToolCase::of(self.json.get("cases")?.get(name)?)
    }

    fn describe(&self) -> String {
        let s = |k: &str| self.json.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
        format!("{} via {} (Python {}, CPUs allowed {})", s("label"), s("entry"), s("python"), s("affinity"))
    }
}

/// The CPUs this process may run on, from /proc/self/status.
fn cpus_allowed() -> String {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:").map(|v| v.trim().to_string())))
        .unwrap_or_else(|| "?".into())
}

fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))
        })
        .unwrap_or_else(|| "?".into())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("scan benchmark failed: {e}");
        std::process::exit(1);
    }
}

/// The `n` most common four-byte grams of `sources` (ASCII lower case), by rate per MB, one per
/// line: rate, a tab, the gram with `\\`, `\t`, `\n`, `\r` and `\xNN` escapes (spaces too).
fn write_grams(out: &Path, sources: &[Source], n: usize) -> io::Result<()> {
    let mut counts: std::collections::HashMap<[u8; 4], u64> = std::collections::HashMap::new();
    let mut total = 0;
    for source in sources {
        total += source.data.len();
        for gram in source.data.windows(4) {
            *counts.entry([gram[0], gram[1], gram[2], gram[3]].map(|b| b.to_ascii_lowercase())).or_default() += 1;
        }
    }
    let mut counts: Vec<([u8; 4], u64)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    counts.truncate(n);
    let mb = total as f64 / MB;
    let mut text = format!(
        "# The {} most common four-byte grams of {} .rs files of the cargo registry ({mb:.1} MB), ASCII lower\n\
         # case: occurrences per MB, a tab, the gram (escapes \\\\ \\t \\n \\r \\xNN; a space is \\x20). The scorer's gram sieve indexes\n\
         # each anchor by its rarest four bytes by this table (src/score/grams.rs). Written by\n\
         # `cargo bench --bench scan -- --write-grams src/score/grams.txt`.\n",
        counts.len(),
        sources.len()
    );
    for (gram, count) in counts {
        write!(text, "{:.1}\t", count as f64 / mb).unwrap();
        for b in gram {
            match b {
                b'\\' => text.push_str("\\\\"),
                b'\t' => text.push_str("\\t"),
                b'\n' => text.push_str("\\n"),
                b'\r' => text.push_str("\\r"),
                b'!'..=b'~' => text.push(char::from(b)),
                _ => write!(text, "\\x{b:02x}").unwrap(),
            }
        }
        text.push('\n');
    }
    fs::write(out, &text)?;
    eprintln!("wrote {} grams to {}", text.lines().count() - 4, out.display());
    Ok(())
}

fn write_inputs(work: &Path, sources: &[Source], subset: &[usize], size: usize) -> io::Result<()> {
    fs::create_dir_all(work)?;
    let mut list = String::new();
    for &i in subset {
        let abs = sources[i].abs.to_str().ok_or_else(|| io::Error::other("corpus path is not UTF-8"))?;
        if abs.contains('\n') {
            return Err(io::Error::other(format!("corpus path with a newline: {abs:?}")));
        }
        writeln!(list, "{abs}").unwrap();
    }
    fs::write(work.join("subset.txt"), list)?;
    for (name, _, generate) in ADVERSARIAL {
        fs::write(work.join(format!("adversarial-{name}.txt")), generate(size))?;
    }
    // Stale results must not be printed next to new inputs.
    for name in ["reference", "detect-secrets"] {
        let _ = fs::remove_file(work.join(format!("tool-{name}.json")));
    }
    Ok(())
}

/// One table row: measure, input, rwfs, target, status, per tool its figure and rwfs ÷ it, notes.
type Row = Vec<String>;

/// The table, filled section by section.
struct Table<'a> {
    tools: &'a [Tool],
    rows: Vec<Row>,
}

impl Table<'_> {
    /// A row with the five rwfs cells, the tools' cells and a note.
    fn row(&mut self, cells: [&str; 5], tool_cells: Vec<String>, note: &str) {
        let mut r: Row = cells.iter().map(|c| c.to_string()).collect();
        let mut tool_cells = tool_cells;
        tool_cells.resize(2 * self.tools.len(), String::new());
        r.extend(tool_cells);
        r.push(note.to_string());
        self.rows.push(r);
    }

    /// Each tool's MB/s on `case` and rwfs ÷ it.
    fn rates(&self, case: &str, rwfs: f64) -> Vec<String> {
        self.tools
            .iter()
            .flat_map(|tool| match tool.case(case) {
                Some(c) => [c.cell(), c.ratio(rwfs)],
                None => ["not run".into(), String::new()],
            })
            .collect()
    }

    /// Each tool's findings per MB on `case`.
    fn findings(&self, case: &str) -> Vec<String> {
        self.tools
            .iter()
            .flat_map(|tool| {
                let cell = match tool.case(case) {
                    Some(c) => c.findings.map_or("(stopped)".into(), |n| format!("{:.2} ({n:.0})", n / (c.total / MB))),
                    None => "not run".into(),
                };
                [cell, String::new()]
            })
            .collect()
    }
}

fn status(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

fn per_mb(n: usize, bytes: usize) -> f64 {
    n as f64 / (bytes as f64 / MB)
}

fn run(args: &Args) -> io::Result<()> {
    let roots = if args.corpus.is_empty() { default_corpus()? } else { args.corpus.clone() };
    let t = Instant::now();
    let sources = load_corpus(&roots)?;
    let total: usize = sources.iter().map(|s| s.data.len()).sum();
    if sources.is_empty() || total == 0 {
        return Err(io::Error::other("the corpus holds no .rs file"));
    }
    eprintln!("loaded {} files, {:.1} MB in {:.1} s", sources.len(), total as f64 / MB, t.elapsed().as_secs_f64());
    if let Some(out) = &args.write_grams {
        return write_grams(out, &sources, args.grams);
    }
    let (subset, stride) = tool_subset(&sources, args.tool_mb);
    if args.prepare {
        let work = args.work.as_deref().expect("clap requires --work");
        write_inputs(work, &sources, &subset, args.tool_adversarial_bytes)?;
        eprintln!(
            "wrote {} subset paths and {} adversarial inputs to {}",
            subset.len(),
            ADVERSARIAL.len(),
            work.display()
        );
        return Ok(());
    }
    let tools: Vec<Tool> = match &args.work {
        Some(work) => ["reference", "detect-secrets"].iter().filter_map(|n| Tool::load(work, n)).collect(),
        None => Vec::new(),
    };
    let wants = |s: Section| args.only.is_empty() || args.only.contains(&s);

    let started = Clock::start();
    let t = Instant::now();
    let scanner = Scanner::builtin();
    let build = t.elapsed();
    let mut table = Table { tools: &tools, rows: Vec::new() };
    let mb = total as f64 / MB;
    let corpus: Vec<(&str, &[u8])> = sources.iter().map(|s| (s.path.as_str(), s.data.as_slice())).collect();
    let sub: Vec<(&str, &[u8])> = subset.iter().map(|&i| corpus[i]).collect();
    let sub_bytes: usize = sub.iter().map(|(_, d)| d.len()).sum();
    let mut truncated = 0;

    // 1. Source code.
    if wants(Section::Source) {
        eprintln!("source: {} passes over {mb:.1} MB", args.passes);
        let mut tally = Tally::default();
        let policy = rwfs::policy::Policy::default();
        for (path, data) in &corpus {
            let report = scanner.scan(data, Some(path));
            if policy.decide(&report, path).action == rwfs::policy::Action::Block {
                tally.blocked_files += 1;
                if tally.blocked_examples.len() < 5 {
                    tally.blocked_examples.push(path.to_string());
                }
            }
            tally.add(path, &report);
        }
        truncated = tally.truncated;
        let src = throughput(&scanner, &corpus, args.passes);
        let mut sub_tally = Tally::default();
        for (path, data) in &sub {
            sub_tally.add(path, &scanner.scan(data, Some(path)));
        }
        let sub_rate = throughput(&scanner, &sub, args.passes);

        table.row(
            ["1 MB/s", &format!("all source, {mb:.1} MB"), &src.cell(true), ">= 400", status(src.cpu >= 400.0)],
            vec![],
            "",
        );
        let rates = table.rates("source", sub_rate.cpu);
        table.row(
            ["1 MB/s", &format!("tool subset, {:.1} MB", sub_bytes as f64 / MB), &sub_rate.cell(false), "", ""],
            rates,
            "",
        );
        let block = per_mb(tally.blocking, total);
        table.row(
            [
                "1 blocking/MB",
                "all source (leak, credential)",
                &format!("{block:.3} ({})", tally.blocking),
                "<= 0.05",
                status(block <= 0.05),
            ],
            vec![],
            "",
        );
        let files = per_mb(tally.blocked_files, total);
        table.row(
            [
                "1 blocked files/MB",
                "all source (default policy)",
                &format!("{files:.4} ({})", tally.blocked_files),
                "<= 0.01",
                status(files <= 0.01),
            ],
            vec![],
            &format!("e.g. {}", tally.blocked_examples.join(" ")),
        );
        let sensitive = format!("{:.3} ({})", per_mb(tally.leak_sensitive, total), tally.leak_sensitive);
        table.row(["1 sensitive/MB", "all source (leak, sensitive)", &sensitive, "", ""], vec![], "");
        let filter = format!("{:.3} ({})", per_mb(tally.filter, total), tally.filter);
        table.row(["1 filter/MB", "all source (filter risk)", &filter, "", ""], vec![], "");
        let sub_all = sub_tally.blocking + sub_tally.leak_sensitive + sub_tally.filter;
        let findings = table.findings("source");
        table.row(
            [
                "1 findings/MB",
                "tool subset, any finding",
                &format!("{:.2} ({sub_all}; blocking {})", per_mb(sub_all, sub_bytes), sub_tally.blocking),
                "",
                "",
            ],
            findings,
            "",
        );
        let mut by_count: Vec<_> = tally.rules.iter().collect();
        by_count.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
        for ((rule, kind, severity), (count, places)) in by_count.iter().take(args.top) {
            table.row(
                [
                    "1 top rule",
                    &format!("{rule} ({kind}, {severity})"),
                    &format!("{count} ({:.3}/MB)", per_mb(*count, total)),
                    "",
                    "",
                ],
                vec![],
                &format!("e.g. {}", places.join(" ")),
            );
        }
    }

    // 2. Adversarial inputs: 10 MB, and the tools' size.
    if wants(Section::Adversarial) {
        let adv_bytes = (args.adversarial_mb * MB) as usize;
        for (name, what, generate) in ADVERSARIAL {
            if !args.adversarial.is_empty() && !args.adversarial.iter().any(|a| a == name) {
                continue;
            }
            eprintln!("adversarial: {name}");
            let big = generate(adv_bytes);
            let rate = throughput(&scanner, &[("adversarial.txt", &big)], args.adversarial_passes);
            let findings = scanner.scan(&big, Some("adversarial.txt")).findings.len();
            table.row(
                [
                    "2 MB/s",
                    &format!("{what}, {} MB", args.adversarial_mb),
                    &format!("{} ({findings} findings)", rate.cell(true)),
                    ">= 50",
                    status(rate.cpu >= 50.0),
                ],
                vec![],
                "",
            );
            let small = generate(args.tool_adversarial_bytes);
            let small_rate = throughput_small(&scanner, &[("adversarial.txt", &small)]);
            let rates = table.rates(&format!("adversarial-{name}"), small_rate.cpu);
            table.row(
                [
                    "2 MB/s",
                    &format!("{what}, {} KB", args.tool_adversarial_bytes / 1000),
                    &small_rate.cell(false),
                    "",
                    "",
                ],
                rates,
                "",
            );
        }
    }

    // 3. Latency.
    if wants(Section::Latency) {
        eprintln!("latency: {} scans of {} bytes", args.latency_scans, args.latency_bytes);
        let windows = latency_inputs(&sources, args.latency_bytes);
        for i in 0..100 {
            let (path, data) = &windows[i % windows.len()];
            std::hint::black_box(scanner.scan(data, Some(path)));
        }
        let spent: Vec<Spent> = (0..args.latency_scans)
            .map(|i| {
                let (path, data) = &windows[i % windows.len()];
                let clock = Clock::start();
                std::hint::black_box(scanner.scan(data, Some(path)));
                clock.spent()
            })
            .collect();
        let mut cpu: Vec<Duration> = spent.iter().map(|s| s.cpu).collect();
        let mut wall: Vec<Duration> = spent.iter().map(|s| s.wall).collect();
        cpu.sort_unstable();
        wall.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (p50, p99, max) = (
            ms(percentile(&cpu, 50.0).unwrap_or_default()),
            ms(percentile(&cpu, 99.0).unwrap_or_default()),
            ms(cpu.last().copied().unwrap_or_default()),
        );
        let (wall_p50, wall_p99) =
            (ms(percentile(&wall, 50.0).unwrap_or_default()), ms(percentile(&wall, 99.0).unwrap_or_default()));
        table.row(
            [
                "3 latency",
                &format!("{} KB real source, {} scans", args.latency_bytes / 1000, spent.len()),
                &format!("p50 {p50:.3} ms, p99 {p99:.3} ms (max {max:.3}); wall p50 {wall_p50:.3}, p99 {wall_p99:.3}"),
                "p99 <= 1 ms",
                status(p99 <= 1.0),
            ],
            vec![],
            "20 windows of concatenated corpus files, round-robin",
        );
    }
    // 4. Block precision and recall on the labelled set.
    if wants(Section::Eval) {
        let items = eval::items();
        eprintln!("evaluation: {} labelled items", items.len());
        let (scores, wrong) = eval::evaluate(&scanner, &items);
        let mut all = eval::Score::default();
        for (kind, score) in &scores {
            all.add(*score);
            table.row(
                [
                    "4 block P/R",
                    kind,
                    &format!(
                        "P {:.2} R {:.2} (tp {} fp {} fn {} tn {})",
                        score.precision(),
                        score.recall(),
                        score.tp,
                        score.fp,
                        score.fn_,
                        score.tn
                    ),
                    "",
                    "",
                ],
                vec![],
                "",
            );
        }
        let ok = all.precision() >= 0.90 && all.recall() >= 0.60;
        table.row(
            [
                "4 block P/R",
                &format!("all {} items", items.len()),
                &format!("P {:.3} R {:.3}", all.precision(), all.recall()),
                "P >= 0.90, R >= 0.60",
                status(ok),
            ],
            vec![],
            "a set written with the rules: checks intent, not independent recall",
        );
        for line in wrong.iter().take(args.top) {
            eprintln!("evaluation: {line}");
        }
    }
    // 5. Configuration files of the same roots, through the parsers.
    if wants(Section::Config) {
        let config_roots: Vec<PathBuf> = roots.iter().chain(&args.config_root).cloned().collect();
        let configs = load_files(&config_roots, &is_config)?;
        let bytes: usize = configs.iter().map(|s| s.data.len()).sum();
        let inputs: Vec<(&str, &[u8])> = configs.iter().map(|s| (s.path.as_str(), s.data.as_slice())).collect();
        eprintln!("configuration: {} files, {:.1} MB", inputs.len(), bytes as f64 / MB);
        let policy = rwfs::policy::Policy::default();
        let mut blocked = Vec::new();
        for (path, data) in &inputs {
            if policy.decide(&scanner.scan(data, Some(path)), path).action == rwfs::policy::Action::Block {
                blocked.push(path.to_string());
            }
        }
        let rate = throughput(&scanner, &inputs, args.passes);
        let what = format!("{} JSON/YAML/TOML/INI files, {:.1} MB", inputs.len(), bytes as f64 / MB);
        table.row(["5 MB/s", &what, &rate.cell(true), "", ""], vec![], "");
        let files = per_mb(blocked.len(), bytes.max(1));
        table.row(
            ["5 blocked files/MB", &what, &format!("{files:.4} ({})", blocked.len()), "<= 0.01", status(files <= 0.01)],
            vec![],
            &format!("e.g. {}", blocked.iter().take(5).cloned().collect::<Vec<_>>().join(" ")),
        );
    }
    let total_spent = started.spent();

    let mut header: Row = ["measure", "input", "rwfs", "target", "status"].iter().map(|s| s.to_string()).collect();
    for tool in &tools {
        header.push(tool.label.clone());
        header.push("rwfs ÷".into());
    }
    header.push("notes".into());
    let mut out = String::new();
    writeln!(
        out,
        "rwfs scan benchmark: Scanner::builtin() ({} rules, built in {:.1} ms), release build, MB = 10^6 bytes",
        scanner.rule_count(),
        build.as_secs_f64() * 1e3
    )
    .unwrap();
    writeln!(
        out,
        "cpu      one core: this process may run on CPU {} of {} online (scan.sh pins every measured process with `taskset -c 0`); {}",
        cpus_allowed(),
        fs::read_to_string("/sys/devices/system/cpu/online").map_or("?".into(), |s| s.trim().to_string()),
        cpu_model()
    )
    .unwrap();
    let share = total_spent.cpu.as_secs_f64() / total_spent.wall.as_secs_f64();
    writeln!(
        out,
        "clocks   MB/s and latency by this thread's CPU time (targets judged on it), wall clock beside them; CPU/wall over the run {share:.2}{}",
        if share < 0.95 { ": CPU 0 was shared with other processes, wall figures are inflated (CPU-time ones less: caches are shared)" } else { " (CPU 0 was ours)" }
    )
    .unwrap();
    writeln!(
        out,
        "corpus   {} .rs files, {mb:.1} MB, in memory; scanned file by file with its path; {} passes, median [min..max]; from {}",
        sources.len(),
        args.passes,
        roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    )
    .unwrap();
    writeln!(out, "subset   for the tools: every {stride}th corpus file, {} files, {:.1} MB (the same bytes for rwfs and each tool)", subset.len(), sub_bytes as f64 / MB).unwrap();
    for tool in &tools {
        writeln!(out, "tool     {}", tool.describe()).unwrap();
    }
    if tools.is_empty() {
        writeln!(out, "tools    not run (run integration/bench/scan.sh for the reference and detect-secrets columns)")
            .unwrap();
    }
    if truncated > 0 {
        writeln!(out, "note     {truncated} scans hit the per-rule findings cap (counts are lower bounds)").unwrap();
    }
    let rows = table.rows;
    writeln!(out).unwrap();
    let ncols = header.len();
    let widths: Vec<usize> = (0..ncols)
        .map(|c| rows.iter().chain(std::iter::once(&header)).map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let line = |r: &Row| -> String {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        cells.join(" | ").trim_end().to_string()
    };
    writeln!(out, "{}", line(&header)).unwrap();
    writeln!(out, "{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-+-")).unwrap();
    for r in &rows {
        writeln!(out, "{}", line(r)).unwrap();
    }
    print!("{out}");
    Ok(())
}
