//! Full disks through a real mount (issue 25 items 2, 3, 4 and 6), as root: the workspace on a
//! small tmpfs or ext4 (a loop device) filesystem, `close` and `batch` durability, the mount in
//! the foreground and as a daemon (whose log is on the full disk). The filesystem is filled from
//! outside but for 512 KiB, then hundreds of small files are created through the mount (the
//! first ones acknowledged, then the disk is full): every request is answered (an error, never
//! `ENOTCONN`: the mount stays alive), `rm` and `mv` work while the disk is full, and after a clean unmount every acknowledged close (write and close returned 0)
//! is in the tree, or in `objects/` with a row naming it, and every file in the tree holds what
//! its last row says (`rwfs verify` is clean).

use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::libc;

use crate::support::mount::{Mounted, rwfs};
use crate::support::{Ws, run_ok, sha};

#[derive(Debug, Clone, Copy)]
enum Fs {
    Tmpfs,
    Ext4,
}

/// A small filesystem mounted at a temporary directory, unmounted (lazily) when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
    _image: Option<tempfile::NamedTempFile>,
}

impl SmallFs {
    fn new(fs: Fs, mib: u64) -> SmallFs {
        let dir = tempfile::Builder::new().prefix("rwfs-full-").tempdir().unwrap();
        let image = match fs {
            Fs::Tmpfs => {
                run_ok(
                    Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"]).arg(dir.path()),
                );
                None
            }
            Fs::Ext4 => {
                let image = tempfile::Builder::new().prefix("rwfs-ext4-").tempfile().unwrap();
                image.as_file().set_len(mib << 20).unwrap();
                // No blocks reserved for root: the daemon (root) meets the same full disk.
                run_ok(Command::new("mkfs.ext4").args(["-q", "-F", "-m", "0"]).arg(image.path()));
                run_ok(Command::new("mount").args(["-o", "loop"]).arg(image.path()).arg(dir.path()));
                Some(image)
            }
        };
        SmallFs { dir, _image: image }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fill the filesystem with a file outside the workspace to its last block, then give
    /// `leave` bytes back: the creates that follow fill the disk themselves, some of them
    /// acknowledged on the way.
    fn fill(&self, leave: u64) {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        for chunk in [1 << 20, 4096, 512] {
            let block = vec![0x5a_u8; chunk];
            while file.write_all(&block).and_then(|()| file.sync_data()).is_ok() {}
        }
        let len = file.metadata().unwrap().len();
        file.set_len(len.saturating_sub(leave)).unwrap();
        file.sync_all().unwrap();
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// The mount under test: `rwfs mount --daemon` (the fixture), or `rwfs mount` in the
/// foreground, a child logging to a pipe nobody reads past its end.
enum Serving {
    Daemon(Mounted),
    Foreground { ws: Ws, mnt: tempfile::TempDir, child: Child },
}

impl Serving {
    fn start(ws: Ws, daemon: bool) -> Serving {
        if daemon {
            return Serving::Daemon(Mounted::with_env(ws, false, &[], &[]));
        }
        let mnt = tempfile::Builder::new().prefix("rwfs-mnt-").tempdir().unwrap();
        let child = rwfs()
            .arg("mount")
            .arg(ws.path())
            .arg(mnt.path())
            .env("RWFS_LOG", "info")
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !is_mounted(mnt.path()) {
            assert!(std::time::Instant::now() < deadline, "the foreground mount did not come up");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Serving::Foreground { ws, mnt, child }
    }

    fn ws(&self) -> &Ws {
        match self {
            Serving::Daemon(m) => &m.ws,
            Serving::Foreground { ws, .. } => ws,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        match self {
            Serving::Daemon(m) => m.path(rel),
            Serving::Foreground { mnt, .. } => mnt.path().join(rel),
        }
    }

    /// A clean stop: `rwfs unmount`, or SIGTERM to the foreground mount; both commit what is
    /// open or staged.
    fn stop(&mut self) {
        match self {
            Serving::Daemon(m) => m.unmount(),
            Serving::Foreground { mnt, child, .. } => {
                let pid = nix::unistd::Pid::from_raw(child.id() as i32);
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
                let status = child.wait().unwrap();
                let _ = nix::mount::umount2(mnt.path(), nix::mount::MntFlags::MNT_DETACH);
                assert!(status.success(), "the foreground mount stopped with {status}");
            }
        }
    }
}

fn is_mounted(point: &Path) -> bool {
    let point = point.to_string_lossy().to_string();
    std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().any(|l| l.split(' ').nth(4) == Some(&point))
}

/// Create `path` with `bytes` through the mount: `Ok` only when open, write and close all
/// returned 0 (the close's own errno is read, which `std::fs::write` drops).
fn create(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    let written = file.write_all(bytes);
    let closed = nix::unistd::close(file.into_raw_fd()).map_err(std::io::Error::from);
    written.and(closed)
}

/// The first value named `key` anywhere in `value`.
fn find<'a>(value: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map.get(key).or_else(|| map.values().find_map(|v| find(v, key))),
        serde_json::Value::Array(items) => items.iter().find_map(|v| find(v, key)),
        _ => None,
    }
}

/// Fails the test at once when the mount stopped answering.
#[track_caller]
fn alive<T>(result: std::io::Result<T>, what: &str) -> std::io::Result<T> {
    if let Err(e) = &result {
        assert_ne!(e.raw_os_error(), Some(libc::ENOTCONN), "{what}: the mount died ({e})");
    }
    result
}

/// Whether a file of the state directory's drafts/ holds `bytes` (a version left for the next
/// start to keep), to tell a lost version from one kept in the wrong place.
fn draft_holding(ws: &Ws, bytes: &[u8]) -> bool {
    let drafts = ws.path().join(".resilient_write/drafts");
    std::fs::read_dir(drafts)
        .map(|dir| dir.flatten().any(|e| std::fs::read(e.path()).is_ok_and(|b| b == bytes)))
        .unwrap_or(false)
}

/// The lines of the daemon's log that name `rel`, and its errors.
fn log_of(ws: &Ws, rel: &str) -> String {
    let log = std::fs::read_to_string(ws.path().join(".resilient_write/rwfs.log")).unwrap_or_default();
    log.lines().filter(|l| l.contains(rel) || l.contains("ERROR")).collect::<Vec<_>>().join("\n")
}

fn full_disk(fs: Fs, durability: &str, daemon: bool) {
    let small = SmallFs::new(fs, 24);
    let ws = Ws::new_in(small.path());
    std::fs::create_dir_all(ws.path().join(".resilient_write")).unwrap();
    std::fs::write(ws.path().join(".resilient_write/policy.yaml"), format!("durability: {durability}\n")).unwrap();
    let mut m = Serving::start(ws, daemon);
    let name = format!("{fs:?} {durability} {}", if daemon { "daemon" } else { "foreground" });
    // Files to delete and rename once the disk is full.
    std::fs::create_dir(m.path("keep")).unwrap();
    for i in 0..20 {
        create(&m.path(&format!("keep/{i}.txt")), format!("kept {i}\n").as_bytes()).unwrap();
    }
    std::fs::create_dir(m.path("new")).unwrap();
    small.fill(512 << 10);
    // Item 2, 3 and 6: 700 creates on the full disk, each acknowledged or refused.
    let mut acked = Vec::new();
    let mut refused = 0;
    for i in 0..700 {
        let rel = format!("new/{i}.txt");
        let bytes = format!("created on a full disk, number {i}\n").repeat(20);
        match alive(create(&m.path(&rel), bytes.as_bytes()), &rel) {
            Ok(()) => acked.push((rel, bytes.into_bytes())),
            Err(e) => {
                assert!(matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)), "{rel}: {e}");
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "{name}: the disk was never full");
    assert!(!acked.is_empty(), "{name}: no create was acknowledged before the disk filled");
    // Item 4: rm and mv on the full disk.
    for i in 0..10 {
        alive(std::fs::remove_file(m.path(&format!("keep/{i}.txt"))), "rm")
            .unwrap_or_else(|e| panic!("{name}: rm: {e}"));
    }
    for i in 10..20 {
        let (from, to) = (m.path(&format!("keep/{i}.txt")), m.path(&format!("keep/{i}.moved")));
        alive(std::fs::rename(from, to), "mv").unwrap_or_else(|e| panic!("{name}: mv: {e}"));
    }
    // The mount still answers, and so does the daemon.
    alive(std::fs::read_dir(m.path("new")), "readdir").unwrap();
    let status = rwfs().args(["status", "--json", "--workspace"]).arg(m.ws().path()).output().unwrap();
    assert!(status.status.success(), "{name}: rwfs status: {}", String::from_utf8_lossy(&status.stderr));
    // Item 6: the daemon's log is on the full disk (the mount stayed alive above); lines the
    // disk refused were dropped and counted (none when the log's last page still had room).
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let dropped = find(&status, "log_lines_dropped").and_then(serde_json::Value::as_u64);
    assert!(!daemon || dropped.is_some(), "{name}: rwfs status counts dropped log lines: {status}");
    m.stop();
    let ws = m.ws();
    // Every acknowledged close is in the tree, or kept in objects/ with a row naming it.
    let rows = ws.rows();
    let named = |digest| rows.iter().any(|r| r.sha256 == Some(digest) || r.prev_sha256 == Some(digest));
    let mut kept = 0;
    for (rel, bytes) in &acked {
        if ws.read(rel).as_deref() == Some(bytes.as_slice()) {
            continue;
        }
        let digest = sha(bytes);
        assert!(
            ws.object(&digest).as_deref() == Some(bytes.as_slice()) && named(digest),
            "{name}: {rel} was acknowledged and is lost (neither in the tree nor kept in objects/ with a row; \
             a draft holding it: {}; the tree holds {:?} bytes; its rows: {:?}; gc rows: {:?}); the daemon's log of it:\n{}",
            draft_holding(ws, bytes),
            ws.read(rel).map(|b| b.len()),
            rows.iter()
                .filter(|r| r.path == *rel || r.prev_sha256 == Some(digest))
                .map(|r| format!("{:?} {:?} {:?}", r.op(), r.path, r.reason))
                .collect::<Vec<_>>(),
            rows.iter()
                .filter(|r| r.op() == rwfs::journal::Op::Gc)
                .map(|r| format!("{:?}", r.reason))
                .collect::<Vec<_>>(),
            log_of(ws, rel)
        );
        kept += 1;
    }
    for i in 0..10 {
        assert_eq!(ws.read(&format!("keep/{i}.txt")), None, "{name}: keep/{i}.txt deleted");
        assert_eq!(
            ws.object(&sha(format!("kept {i}\n").as_bytes())).as_deref(),
            Some(format!("kept {i}\n").as_bytes())
        );
    }
    for i in 10..20 {
        assert_eq!(
            ws.read(&format!("keep/{i}.moved")).as_deref(),
            Some(format!("kept {i}\n").as_bytes()),
            "{name}: mv"
        );
    }
    // A row before every visible change: the tree is what the journal says.
    let verify = rwfs().args(["verify", "--workspace"]).arg(ws.path()).output().unwrap();
    assert!(
        verify.status.success(),
        "{name}: rwfs verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    println!(
        "full disk, {name}: {} of 700 creates acknowledged ({kept} kept in objects/), {refused} refused",
        acked.len()
    );
}

#[test]
fn a_full_tmpfs_in_close_mode_under_a_daemon() {
    full_disk(Fs::Tmpfs, "close", true);
}

#[test]
fn a_full_tmpfs_in_batch_mode_under_a_daemon() {
    full_disk(Fs::Tmpfs, "batch", true);
}

#[test]
fn a_full_tmpfs_in_batch_mode_in_the_foreground() {
    full_disk(Fs::Tmpfs, "batch", false);
}

/// Installs fail here at the edge of the full disk (1 to 24 versions per run kept in `objects/`
/// instead): an emergency retention run between such a keep and its `abort` row removed the
/// version as an old one, in 1 of 3 to 6 runs (issue 25 item 2; the row comes first now).
#[test]
fn a_full_ext4_in_batch_mode_under_a_daemon() {
    full_disk(Fs::Ext4, "batch", true);
}

#[test]
fn a_full_ext4_in_close_mode_in_the_foreground() {
    full_disk(Fs::Ext4, "close", false);
}
