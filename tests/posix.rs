//! POSIX conformance and data integrity of the mount, measured by two external suites:
//!
//! - **pjdfstest** (the Rust rewrite, 0.2.2) runs against the mount and against a plain
//!   directory on the same filesystem as the workspace; of the cases that pass on the plain
//!   directory, at least 95% must pass on the mount. Every difference is printed with the
//!   rwfs semantic that explains it (`KNOWN`), or as unexplained.
//! - **fsx** (the Rust port, 0.3.2) runs 100,000 random operations on one file in the mount,
//!   with close/open, truncation, mapped reads and writes, msync, fsync and fdatasync (each
//!   close and fsync is a commit), and must find no mismatch; the committed file must then be
//!   the bytes fsx last saw.
//!
//! Both tools are installed by `scripts/test` (what `.ci/run` runs). They are found through `RWFS_PJDFSTEST` / `RWFS_FSX`,
//! else `PATH`, else `$CARGO_HOME/bin` or `~/.cargo/bin`; a missing tool fails the test (it
//! never skips). Run with `--nocapture` to see the counts and the differences.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::support::Ws;
use crate::support::mount::Mounted;

/// Cases that pass on the backing filesystem but not on the mount, by name prefix, with the
/// rwfs semantic that explains each (also in the README's known deviations).
const KNOWN: &[(&str, &str)] = &[
    // A file created and closed without a write is committed at its release, which the kernel
    // sends after close() has returned. rwfs makes a stat wait for a release it has received,
    // but one that reaches it first (under load) still sees the state before that commit.
    (
        "open::changed_time_fields_success",
        "race under load: the directory's mtime/ctime change when the new, unwritten file is \
         committed at its release, which can come after the stat that follows close()",
    ),
    (
        "chmod::failed_chmod_unchanged_ctime::regular",
        "race under load: a new, unwritten file's ctime changes at its commit at release, which \
         can come after the stat that follows close()",
    ),
    ("truncate::unchanged_ctime_failed", "race under load: as chmod::failed_chmod_unchanged_ctime::regular"),
    ("link::unchanged_ctime_fails::regular", "race under load: as chmod::failed_chmod_unchanged_ctime::regular"),
    ("rename::preserve_metadata_symlink", "race under load: as chmod::failed_chmod_unchanged_ctime::regular"),
    (
        "link::link_count_max",
        "skipped on the mount: glibc's pathconf(_PC_LINK_MAX) knows no limit for FUSE and \
         answers 127, which pjdfstest treats as unknown",
    ),
];

/// The two suites are heavy: they take turns, so that neither measures the other's load.
static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The mount's pass rate over the cases the backing filesystem passes, in percent.
const REQUIRED_PERCENT: usize = 95;

/// The outcome of one pjdfstest case.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Pass,
    Fail(String),
    Skip,
}

/// A tool: `$env`, else `name` on `PATH`, else in cargo's bin directory.
fn tool(env: &str, name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "{env}={} is not a file", path.display());
        return path;
    }
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Some(cargo_home) = std::env::var_os("CARGO_HOME") {
        dirs.push(PathBuf::from(cargo_home).join("bin"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(&home).join(".cache/rwfs/tools/bin"));
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!(
            "{name} is not installed (looked at ${env}, PATH, ~/.cache/rwfs/tools/bin and ~/.cargo/bin): run \
             scripts/test, which installs pjdfstest 0.2.2 and fsx 0.3.2 (or `cargo install --locked \
             pjdfstest@0.2.2 fsx@0.3.2`)"
        )
    })
}

/// A directory others may enter (pjdfstest switches users).
fn open_to_all(path: &Path) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod 755");
}

/// A user and its own primary group, other than root, for pjdfstest's user switching.
fn dummy_users() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for user in ["nobody", "tests", "daemon", "bin", "sys"] {
        let Ok(Some(u)) = nix::unistd::User::from_name(user) else { continue };
        let Ok(Some(g)) = nix::unistd::Group::from_gid(u.gid) else { continue };
        if u.uid.is_root() || found.iter().any(|(_, group): &(String, String)| *group == g.name) {
            continue;
        }
        found.push((u.name, g.name));
        if found.len() == 2 {
            return found;
        }
    }
    panic!("pjdfstest needs two non-root users with their own groups (nobody, daemon, ...): found {found:?}");
}

/// pjdfstest's configuration: the optional features both filesystems have, and the users.
fn pjdfstest_config(dir: &Path, secondary: Option<&Path>) -> PathBuf {
    let users: Vec<String> = dummy_users().iter().map(|(u, g)| format!("[\"{u}\", \"{g}\"]")).collect();
    let secondary = secondary.map(|p| format!("secondary_fs = \"{}\"\n", p.display())).unwrap_or_default();
    let text = format!(
        "[features]\nposix_fallocate = {{}}\nrename_ctime = {{}}\nutime_now = {{}}\nutimensat = {{}}\n{secondary}\n\
         [settings]\nnaptime = 0.01\n\n[dummy_auth]\nentries = [{}]\n",
        users.join(", ")
    );
    let path = dir.join("pjdfstest.toml");
    std::fs::write(&path, text).expect("write pjdfstest.toml");
    path
}

/// Run pjdfstest in `dir`; every case's outcome and the summary line.
fn pjdfstest(bin: &Path, config: &Path, dir: &Path) -> (BTreeMap<String, Outcome>, String) {
    let started = Instant::now();
    let out = Command::new(bin)
        .arg("-c")
        .arg(config)
        .arg("-p")
        .arg(dir)
        .env("NO_COLOR", "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run pjdfstest");
    let text = strip_ansi(&String::from_utf8_lossy(&out.stdout));
    let summary = text.lines().find(|l| l.starts_with("Summary:")).unwrap_or_else(|| {
        panic!("pjdfstest printed no summary ({}):\n{text}\n{}", out.status, String::from_utf8_lossy(&out.stderr))
    });
    println!("pjdfstest in {}: {summary} ({:.0?})", dir.display(), started.elapsed());
    (parse_pjdfstest(&text), summary.to_string())
}

/// `name   ok` / `FAILED` / `skipped` lines; a failure's message is on the tab-indented lines
/// after it.
fn parse_pjdfstest(text: &str) -> BTreeMap<String, Outcome> {
    let mut cases = BTreeMap::new();
    let mut last_failed: Option<String> = None;
    for line in text.lines() {
        if let Some(message) = line.strip_prefix('\t') {
            if let Some(name) = &last_failed
                && let Some(Outcome::Fail(why)) = cases.get_mut(name)
                && why.is_empty()
            {
                *why = message.trim().to_string();
            }
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(name), Some(status)) = (words.next(), words.next()) else { continue };
        if !name.contains("::") {
            continue;
        }
        let rest: Vec<&str> = std::iter::once(status).chain(words).collect();
        let outcome = match rest.join(" ").as_str() {
            "ok" => Outcome::Pass,
            "skipped" => Outcome::Skip,
            "failed as expected" | "FAILED" | "PASSED UNEXPECTEDLY" => Outcome::Fail(String::new()),
            _ => continue,
        };
        last_failed = matches!(outcome, Outcome::Fail(_)).then(|| name.to_string());
        cases.insert(name.to_string(), outcome);
    }
    cases
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A directory on another filesystem than `of`, for the EXDEV cases (`/dev/shm` when it is
/// one), kept alive by the returned guard.
fn secondary_fs(of: &Path) -> Option<tempfile::TempDir> {
    let dev = std::fs::metadata(of).ok()?.dev();
    let shm = Path::new("/dev/shm");
    if std::fs::metadata(shm).ok()?.dev() == dev {
        return None;
    }
    let dir = tempfile::Builder::new().prefix("rwfs-pjd-other-").tempdir_in(shm).ok()?;
    open_to_all(dir.path());
    Some(dir)
}

#[test]
fn pjdfstest_on_the_mount_passes_95_percent_of_what_the_backing_fs_passes() {
    let bin = tool("RWFS_PJDFSTEST", "pjdfstest");
    let _turn = HEAVY.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let version = Command::new(&bin).arg("--version").output().expect("pjdfstest --version");
    println!("{}", String::from_utf8_lossy(&version.stdout).trim());

    let ws = Ws::new();
    open_to_all(ws.path());
    let m = Mounted::with(ws, false, &["--allow-other"]);
    // The plain directory: a sibling of the workspace, so on the same filesystem.
    let parent = m.ws.path().parent().expect("the workspace has a parent");
    let plain = tempfile::Builder::new().prefix("rwfs-pjd-backing-").tempdir_in(parent).expect("tempdir");
    open_to_all(plain.path());
    let other = secondary_fs(plain.path());
    let scratch = tempfile::tempdir().expect("tempdir");
    let config = pjdfstest_config(scratch.path(), other.as_ref().map(|d| d.path()));

    let (backing, backing_summary) = pjdfstest(&bin, &config, plain.path());
    let (mount, mount_summary) = pjdfstest(&bin, &config, m.mountpoint());

    let passing: Vec<&String> = backing.iter().filter(|(_, o)| **o == Outcome::Pass).map(|(n, _)| n).collect();
    let both = passing.iter().filter(|n| mount.get(**n) == Some(&Outcome::Pass)).count();
    let mount_passes = mount.values().filter(|o| **o == Outcome::Pass).count();
    println!("\npjdfstest cases: {} in all", backing.len());
    println!("  backing filesystem: {} passed   ({backing_summary})", passing.len());
    println!("  mount:              {mount_passes} passed   ({mount_summary})");
    println!(
        "  of the {} cases the backing filesystem passes, the mount passes {both} ({:.1}%, at least {REQUIRED_PERCENT}% required)",
        passing.len(),
        100.0 * both as f64 / passing.len().max(1) as f64
    );
    println!("\nPassing on the backing filesystem, not on the mount:");
    let mut unexplained = Vec::new();
    for name in passing.iter().filter(|n| mount.get(**n) != Some(&Outcome::Pass)) {
        let got = match mount.get(*name) {
            Some(Outcome::Fail(why)) => format!("FAILED: {why}"),
            Some(Outcome::Skip) => "skipped".to_string(),
            Some(Outcome::Pass) => unreachable!(),
            None => "not run".to_string(),
        };
        match KNOWN.iter().find(|(prefix, _)| name.starts_with(prefix)) {
            Some((_, reason)) => println!("  {name}: {got}\n      known: {reason}"),
            None => {
                println!("  {name}: {got}\n      UNEXPLAINED");
                unexplained.push(name.to_string());
            }
        }
    }
    if !unexplained.is_empty() {
        println!("\n{} unexplained difference(s): {unexplained:?}", unexplained.len());
    }
    drop(m);

    assert!(
        passing.len() >= 300,
        "pjdfstest passed only {} cases on the backing filesystem: is it running as root?",
        passing.len()
    );
    assert!(
        both * 100 >= passing.len() * REQUIRED_PERCENT,
        "the mount passes {both} of the {} cases the backing filesystem passes (< {REQUIRED_PERCENT}%); \
         unexplained: {unexplained:?}",
        passing.len()
    );
}

/// fsx's configuration: a 64 KiB file, every operation the mount supports, with the commit
/// points (close/open, msync after each mapped write, fsync, fdatasync) among them.
const FSX_CONFIG: &str = "\
flen = 65536
nomsyncafterwrite = false

[weights]
close_open = 1
read = 10
write = 10
mapread = 3
mapwrite = 5
invalidate = 1
truncate = 3
fsync = 1
fdatasync = 1
sendfile = 1
posix_fadvise = 1
copy_file_range = 1
";

/// Operations per run.
const FSX_OPS: u64 = 100_000;

#[test]
fn fsx_100k_operations_no_mismatch() {
    let bin = tool("RWFS_FSX", "fsx");
    let _turn = HEAVY.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let seed: u64 = std::env::var("RWFS_FSX_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20_261_122);
    let mut m = Mounted::new();
    let scratch = tempfile::tempdir().expect("tempdir");
    let config = scratch.path().join("fsx.toml");
    std::fs::write(&config, FSX_CONFIG).expect("write fsx.toml");
    let file = m.path("fsx.data");
    let started = Instant::now();
    let out = Command::new(&bin)
        .arg("-f")
        .arg(&config)
        .arg("-N")
        .arg(FSX_OPS.to_string())
        .arg("-S")
        .arg(seed.to_string())
        .arg("-P")
        .arg(scratch.path())
        .arg(&file)
        .output()
        .expect("run fsx");
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ok = out.status.success() && stdout.contains("All operations completed A-OK!");
    println!("fsx {FSX_OPS} operations, seed {seed}: {} in {elapsed:.1?}", if ok { "no mismatch" } else { "FAILED" });
    if !ok {
        // fsx leaves its operation log and the expected bytes in the artifacts directory.
        let mut artifacts = String::new();
        for entry in std::fs::read_dir(scratch.path()).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "fsxlog") {
                let log = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(80).collect();
                artifacts += &format!("--- last lines of {}:\n", path.display());
                artifacts += &tail.into_iter().rev().collect::<Vec<_>>().join("\n");
            }
        }
        panic!(
            "fsx found a mismatch ({}), seed {seed}:\n{stdout}\n{stderr}\n{artifacts}\n--- daemon log:\n{}",
            out.status,
            m.log()
        );
    }
    // What fsx last saw through the mount is what the tree holds once the mount is gone.
    let seen = std::fs::read(&file).expect("read the fsx file");
    m.unmount();
    assert_eq!(m.ws.read("fsx.data").as_deref(), Some(&seen[..]), "the committed file is what the mount showed");
}

mod parsing {
    use super::*;

    #[test]
    fn pjdfstest_lines_are_read_with_their_failure_messages() {
        let text = "chmod::ok_case                                  \u{1b}[32mok\u{1b}[0m\n\
                    link::share_metadata::regular                  FAILED\n\
                    \tassertion `left == right` failed\n\
                    \t  left: 1\n\
                    link::link_count_max                           skipped\n\
                    \tCannot get value for LINK_MAX\n\
                    \n\
                    Summary: 1 failed, 1 skipped, 1 passed, 0 expected failures, 3 total\n";
        let cases = parse_pjdfstest(&strip_ansi(text));
        assert_eq!(cases["chmod::ok_case"], Outcome::Pass);
        assert_eq!(cases["link::share_metadata::regular"], Outcome::Fail("assertion `left == right` failed".into()));
        assert_eq!(cases["link::link_count_max"], Outcome::Skip);
        assert_eq!(cases.len(), 3);
    }
}
