//! Retention of kept versions (issue 14, item 12): the store's limit, the eviction order (age,
//! then the oldest versions of the busiest paths), the safety rule (never the last version of a
//! deleted file for size), `gc` rows, `rwfs status`, and the daemon enforcing it on its own.

use std::time::{Duration, Instant};

use rwfs::engine::WriteMode;
use rwfs::journal::Op;

use crate::support::mount::{Mounted, rwfs};
use crate::support::{Ws, actor, sha, write};

/// A workspace whose policy limits the store to `max_bytes`.
fn limited(max_bytes: u64, interval_seconds: u64) -> Ws {
    let ws = Ws::new();
    ws.put(
        ".resilient_write/policy.yaml",
        format!("retention: {{max_bytes: {max_bytes}, max_age_days: 30, interval_seconds: {interval_seconds}}}\n")
            .as_bytes(),
    );
    ws
}

/// Versions leave the tree in this order; ctimes must tell them apart.
fn pause() {
    std::thread::sleep(Duration::from_millis(15));
}

#[test]
fn over_the_limit_the_oldest_versions_of_the_busiest_paths_go_and_a_deleted_file_keeps_its_last() {
    // Every version is 10 bytes; the store may keep 40.
    let ws = limited(40, 0);
    let engine = ws.open();
    let v = |name: &str, n: u32| format!("{}{n:05}\n", &name[..4]).into_bytes();
    write(&engine, "gone", &v("gone", 1), WriteMode::Create).unwrap();
    engine.delete("gone", None, &actor()).unwrap();
    pause();
    write(&engine, "quiet", &v("quiet", 1), WriteMode::Create).unwrap();
    write(&engine, "quiet", &v("quiet", 2), WriteMode::Overwrite).unwrap();
    pause();
    write(&engine, "busy", &v("busy", 1), WriteMode::Create).unwrap();
    for n in 2..=6 {
        pause();
        write(&engine, "busy", &v("busy", n), WriteMode::Overwrite).unwrap();
    }
    // Kept: gone v1 (deleted: its last version), quiet v1, busy v1..v5 = 70 bytes.
    let gc = engine.gc(None, &actor()).unwrap();
    assert_eq!((gc.store_bytes, gc.limit), (70, 40));
    assert_eq!((gc.objects, gc.by_age, gc.by_size, gc.bytes), (3, 0, 3, 30));
    let kept = |name: &str, n: u32| ws.object(&sha(&v(name, n))).is_some();
    assert!(!kept("busy", 1) && !kept("busy", 2) && !kept("busy", 3), "the busiest path's oldest go first");
    assert!(kept("busy", 4) && kept("busy", 5), "then busy (2 left) is level with the others");
    assert!(kept("quiet", 1), "a path rewritten once keeps its previous version");
    assert!(kept("gone", 1), "never the last version of a deleted file for size");
    assert_eq!(ws.read("busy").unwrap(), v("busy", 6), "the tree is never touched");
    let row = ws.rows().pop().unwrap();
    assert_eq!((row.op(), row.bytes), (Op::Gc, 30));
    assert!(row.reason.as_deref().unwrap().contains("by_size=3"), "{:?}", row.reason);
    // Tighter still: the deleted file's last version stays while anything else can go.
    std::fs::write(ws.abs(".resilient_write/policy.yaml"), "retention: {max_bytes: 0}\n").unwrap();
    drop(engine);
    let engine = ws.open();
    engine.gc(None, &actor()).unwrap();
    assert!(kept("gone", 1) && !kept("quiet", 1) && !kept("busy", 5));
    // By age it goes.
    std::thread::sleep(Duration::from_millis(20));
    engine.gc(Some(Duration::ZERO), &actor()).unwrap();
    assert!(!kept("gone", 1));
}

#[test]
fn the_daemon_enforces_retention_on_its_own_and_status_shows_it() {
    let m = Mounted::with(limited(16, 1), false, &[]);
    for n in 0..6 {
        m.write("fixture.txt", format!("version {n}\n").as_bytes()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let gc_row = loop {
        if let Some(row) = m.ws.rows().into_iter().find(|r| r.op() == Op::Gc) {
            break row;
        }
        assert!(Instant::now() < deadline, "no gc row from the daemon within 20 s");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(gc_row.via, Some(rwfs::journal::Via::Engine));
    assert!(gc_row.reason.as_deref().unwrap().contains("limit=16"), "{:?}", gc_row.reason);
    let store: u64 = std::fs::read_dir(m.ws.abs(".resilient_write/objects"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(store <= 16, "the store is within its limit: {store} bytes");
    let out = rwfs().arg("--workspace").arg(m.ws.path()).args(["status", "--json"]).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["retention"]["limit"], 16, "{status}");
    assert_eq!(status["retention"]["interval_seconds"], 1);
    assert_eq!(status["last_gc"]["seq"], gc_row.seq.unwrap(), "{status}");
}

/// A workspace on a tmpfs of `size`, unmounted (lazily) when dropped.
struct SmallDisk {
    ws: Ws,
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn new(size: &str) -> SmallDisk {
        let dir = tempfile::Builder::new().prefix("rwfs-small-").tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mounting a tmpfs needs root");
        SmallDisk { ws: Ws::new_in(dir.path()), dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

#[test]
fn a_write_on_a_disk_full_of_old_versions_drops_some_and_succeeds() {
    let disk = SmallDisk::new("8m");
    let engine = disk.ws.open();
    let mib = |fill: u8| vec![fill; 1 << 20];
    // Versions of a busy file fill the disk, and a deleted file's only copy is in objects/.
    write(&engine, "gone.bin", &mib(b'g'), WriteMode::Create).unwrap();
    engine.delete("gone.bin", None, &actor()).unwrap();
    let mut versions = 0;
    for fill in b'a'..=b'z' {
        pause();
        match write(&engine, "busy.bin", &mib(fill), WriteMode::Overwrite) {
            Ok(_) => versions += 1,
            Err(e) => {
                // Room was made from the busy file's own old versions: the disk was full.
                assert!(versions >= 4, "only {versions} versions fit before: {e}");
                panic!("a write failed although old versions could be dropped: {e}");
            }
        }
    }
    assert_eq!(versions, 26, "26 MiB written through an 8 MiB disk");
    let rows = disk.ws.rows();
    let gc: Vec<_> = rows.iter().filter(|r| r.op() == Op::Gc).collect();
    assert!(!gc.is_empty(), "each emergency run is a gc row");
    assert!(gc.iter().all(|r| r.reason.as_deref().is_some_and(|why| why.starts_with("no_space"))), "{gc:?}");
    // The deleted file's only copy was not needed: the busy file's old versions made room.
    assert_eq!(disk.ws.object(&sha(&mib(b'g'))).unwrap(), mib(b'g'));
    assert_eq!(std::fs::read(disk.ws.abs("busy.bin")).unwrap(), mib(b'z'));
    engine.close().unwrap();
}
