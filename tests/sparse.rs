//! Sparse and huge files (issue 14, item 4): hashing and judging read a file's data, never its
//! holes; a gated version over `max_gated_bytes` is refused with `EFBIG` and kept; recovery of
//! a huge orphan draft is bounded, and a big one waits until after the mount is ready.

use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::IntoRawFd;

use rwfs::durable::{FileId, OsDisk, content_digest};
use rwfs::engine::Engine;
use rwfs::engine::Options;
use rwfs::journal::Op;

use crate::support::Ws;
use crate::support::mount::Mounted;

const TIB: u64 = 1 << 40;

/// Bytes the process `pid` has read through system calls so far (`rchar`).
fn bytes_read(pid: i32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines().find_map(|l| l.strip_prefix("rchar: ")).unwrap().trim().parse().unwrap()
}

/// Close `file` and return what `close()` said (a `File`'s drop ignores it).
fn close(file: std::fs::File) -> nix::Result<()> {
    nix::unistd::close(file.into_raw_fd())
}

/// The digest rwfs names the file at `path` by.
fn digest_of(path: &std::path::Path) -> rwfs::sha::Sha256 {
    let f = std::fs::File::open(path).unwrap();
    let meta = f.metadata().unwrap();
    let file = rwfs::durable::File::new(f.into(), FileId { dev: meta.dev(), ino: meta.ino() });
    content_digest(&OsDisk, &file).unwrap().0
}

#[test]
fn a_tebibyte_sparse_file_written_at_its_end_commits_reading_only_its_data() {
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", b"max_gated_bytes: 2199023255552\n");
    let m = Mounted::with(ws, false, &[]);
    let pid = m.daemon_pid();
    let before = bytes_read(pid);
    // Made through the mount: a 1 TiB hole and four bytes.
    let f = std::fs::File::create(m.path("huge.img")).unwrap();
    f.set_len(TIB).unwrap();
    f.write_all_at(b"tail", TIB - 4).unwrap();
    close(f).expect("the close commits");
    // Written again at its end: the draft starts as a copy of a 1 TiB version.
    let f = std::fs::OpenOptions::new().write(true).open(m.path("huge.img")).unwrap();
    f.write_all_at(b"TAIL", TIB - 4).unwrap();
    close(f).expect("the second close commits");
    let read = bytes_read(pid) - before;
    let backing = m.ws.abs("huge.img");
    let meta = std::fs::metadata(&backing).unwrap();
    assert_eq!(meta.len(), TIB);
    assert!(meta.blocks() * 512 < 1 << 20, "the committed version is still sparse: {} blocks", meta.blocks());
    let mut tail = [0u8; 4];
    std::fs::File::open(&backing).unwrap().read_exact_at(&mut tail, TIB - 4).unwrap();
    assert_eq!(&tail, b"TAIL");
    // Two commits, each hashing and judging its data (one 1 MiB block at the end, the first
    // window of 16 MiB that tells binary content) and the previous version's digest: tens of
    // MiB at most, where reading the holes would be 2 TiB.
    assert!(read < 128 << 20, "the daemon read {read} bytes");
    let rows = m.ws.rows();
    let last = rows.iter().rev().find(|r| r.path == "huge.img").unwrap();
    assert_eq!(last.op(), Op::Write);
    assert_eq!(last.sha256, Some(digest_of(&backing)), "the row names the version by the sparse digest");
    assert_eq!(last.bytes, TIB);
    eprintln!("1 TiB sparse file, two commits through the mount: the daemon read {read} bytes");
}

#[test]
fn a_gated_version_over_max_gated_bytes_is_refused_with_efbig_and_kept() {
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", b"max_gated_bytes: 1048576\n");
    ws.put("big.bin", b"committed\n");
    let m = Mounted::with(ws, false, &[]);
    let f = std::fs::File::create(m.path("big.bin")).unwrap();
    let body = vec![b'x'; (1 << 20) + 1];
    f.write_all_at(&body, 0).unwrap();
    assert_eq!(close(f), Err(nix::errno::Errno::EFBIG));
    assert_eq!(m.backing("big.bin").unwrap(), b"committed\n", "the tree keeps the committed version");
    let row = m.ws.rows().pop().unwrap();
    assert_eq!((row.op(), row.path.as_str(), row.bytes), (Op::Block, "big.bin", body.len() as u64));
    assert!(row.reason.as_deref().unwrap().starts_with("too_big"), "{:?}", row.reason);
    assert_eq!(m.ws.object(&row.sha256.unwrap()).as_deref(), Some(&body[..]), "the refused bytes are kept");
    // At the limit it commits.
    m.write("big.bin", &body[1..]).unwrap();
    assert_eq!(m.backing("big.bin").unwrap().len(), 1 << 20);
}

#[test]
fn recovery_of_a_huge_sparse_orphan_is_bounded_and_big_orphans_wait_for_the_mount() {
    let ws = Ws::new();
    let drafts = ws.drafts_for_orphans();
    // An 8 TiB orphan with four bytes of data, and a dense one over the recovery budget.
    let huge = std::fs::File::create(drafts.join("huge")).unwrap();
    huge.write_all_at(b"data", 8 * TIB - 4).unwrap();
    drop(huge);
    let dense = std::fs::File::create(drafts.join("dense")).unwrap();
    let mib = vec![7u8; 1 << 20];
    let dense_len = rwfs::engine::RECOVERY_HASH_BUDGET + (1 << 20);
    for i in 0..dense_len >> 20 {
        dense.write_all_at(&mib, i << 20).unwrap();
    }
    drop(dense);
    let me = std::process::id() as i32;
    let before = bytes_read(me);
    let engine = Engine::open(ws.path(), &Options::default()).unwrap();
    let read = bytes_read(me) - before;
    let recovery = engine.recovery().clone();
    assert_eq!(recovery.drafts_kept, vec![".resilient_write/drafts/huge"], "{recovery:?}");
    assert_eq!(recovery.drafts_deferred, vec![".resilient_write/drafts/dense"], "{recovery:?}");
    assert!(read < 16 << 20, "recovery before the engine was ready read {read} bytes");
    assert!(drafts.join("dense").exists(), "deferred: still in drafts/");
    // After the mount is ready (the daemon calls this), the deferred one is kept too.
    assert_eq!(engine.recover_deferred_drafts().unwrap(), vec![".resilient_write/drafts/dense"]);
    assert!(!drafts.join("dense").exists());
    drop(engine);
    let recovered: Vec<_> = ws.rows().into_iter().filter(|r| r.op() == Op::Recover).collect();
    assert_eq!(recovered.len(), 2, "{recovered:?}");
    assert!(recovered.iter().all(|r| r.reason.as_deref() == Some("orphan_draft_kept_in_objects")));
    let huge_row = recovered.iter().find(|r| r.path.ends_with("/huge")).unwrap();
    assert_eq!(huge_row.bytes, 8 * TIB);
    let hex = huge_row.prev_sha256.unwrap().to_hex();
    let object = ws.abs(&format!(".resilient_write/objects/{}/{hex}", &hex[..2]));
    assert!(std::fs::metadata(&object).unwrap().blocks() * 512 < 1 << 20, "kept as it was: sparse");
    assert!(
        rwfs::history::verify(&ws.workspace()).unwrap().bad_objects.is_empty(),
        "verify checks it by the same rule"
    );
    eprintln!("recovery of an 8 TiB sparse orphan read {read} bytes before the engine was ready");
}
