//! The test vocabulary: a workspace fixture and a few helpers, so tests read as intent.

#![allow(dead_code)]

pub mod hooked;
pub mod mcp;
pub mod mount;
pub mod recorder;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rwfs::durable::Disk;
use rwfs::engine::{Committed, Engine, Expect, WriteMode, WriteRequest};
use rwfs::history::{Options, Workspace};
use rwfs::journal::{Actor, Row, Via};
use rwfs::sha::Sha256;

/// A temporary workspace directory (removed on drop).
pub struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    pub fn new() -> Ws {
        Ws { dir: tempfile::Builder::new().prefix("rwfs-test-").tempdir().expect("tempdir") }
    }

    /// A workspace inside `parent` (for tests that need a particular filesystem).
    pub fn new_in(parent: &Path) -> Ws {
        Ws { dir: tempfile::Builder::new().prefix("ws-").tempdir_in(parent).expect("tempdir") }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Absolute path of a workspace-relative path.
    pub fn abs(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn open(&self) -> Engine {
        Engine::open(self.path(), &Default::default()).expect("open engine")
    }

    pub fn open_with(&self, disk: Arc<dyn Disk>) -> rwfs::Result<Engine> {
        Engine::open(self.path(), &Options { disk: Some(disk), ..Options::default() }.into())
    }

    pub fn workspace(&self) -> Workspace {
        Workspace::open(self.path(), &Options::default()).expect("open workspace")
    }

    /// The bytes at `rel` on the backing filesystem (`None`: absent).
    pub fn read(&self, rel: &str) -> Option<Vec<u8>> {
        match std::fs::read(self.abs(rel)) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => panic!("read {rel}: {e}"),
        }
    }

    /// Put a file in place directly, bypassing rwfs (test setup, "edits outside rwfs").
    pub fn put(&self, rel: &str, bytes: &[u8]) {
        let path = self.abs(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    /// Every readable journal row.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        self.workspace().read_journal(|e| rows.push(e.row)).expect("read journal");
        rows
    }

    /// The bytes of kept version `sha`, if stored (opened with the workspace's key when sealed).
    pub fn object(&self, sha: &Sha256) -> Option<Vec<u8>> {
        self.workspace().object(sha).expect("read object")
    }

    /// A workspace an engine opened and closed once, with its `drafts/` made: where a test
    /// puts the orphans a dead daemon would have left, before the next open recovers them.
    pub fn drafts_for_orphans(&self) -> PathBuf {
        self.open().close().unwrap();
        let drafts = self.abs(".resilient_write/drafts");
        std::fs::create_dir_all(&drafts).unwrap();
        drafts
    }
}

pub fn actor() -> Actor {
    Actor::this_process(Via::Cli, "rwfs-tests")
}

/// [`actor`] in the session labelled `name`.
pub fn in_session(name: &str) -> Actor {
    Actor { session_label: Some(name.into()), ..actor() }
}

/// Run `cmd` to success (a failure fails the test with its output); its output.
#[track_caller]
pub fn run_ok(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn sha(bytes: &[u8]) -> Sha256 {
    Sha256::of(bytes)
}

/// `engine.safe_write` with the common arguments.
pub fn write(engine: &Engine, path: &str, bytes: &[u8], mode: WriteMode) -> rwfs::Result<Committed> {
    write_expect(engine, path, bytes, mode, None)
}

pub fn write_expect(
    engine: &Engine,
    path: &str,
    bytes: &[u8],
    mode: WriteMode,
    expect: Option<Expect>,
) -> rwfs::Result<Committed> {
    let actor = actor();
    engine.safe_write(&WriteRequest { path, content: bytes, mode, expect, actor: &actor })
}

/// Assert an error's reason code, printing the whole error when it differs.
#[track_caller]
pub fn assert_reason<T: std::fmt::Debug>(result: rwfs::Result<T>, code: &str) -> rwfs::Error {
    match result {
        Ok(v) => panic!("expected error {code}, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.reason().code(), code, "wrong reason: {e:?}");
            e
        }
    }
}

/// Every file below `dir` (excluding the state directory) with its bytes, sorted.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let rel = path.strip_prefix(base).unwrap().to_string_lossy().to_string();
            if rel == ".resilient_write" {
                continue;
            }
            let ft = entry.file_type().unwrap();
            if ft.is_dir() {
                walk(base, &path, out);
            } else if ft.is_file() {
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

/// A config line holding a realistic AWS secret access key, generated (never committed).
pub fn aws_secret_line(seed: u64) -> String {
    let mut rng = rwfs::score::sample::Rng::new(seed);
    let key = rng.string(rwfs::score::sample::BASE64, 40);
    format!("AWS_SECRET_ACCESS_KEY = \"{key}\"\n")
}

/// The refusals of writes to `path`, in order, as their envelopes say: (retry budget, reason).
pub fn refusals(ws: &Ws, path: &str) -> Vec<(u64, String)> {
    ws.rows()
        .iter()
        .filter(|r| r.path == path && r.op() == rwfs::journal::Op::Block)
        .map(|r| {
            let id = rwfs::envelope::rejection_id(&r.ts, r.seq.unwrap());
            let text = ws.read(&format!(".resilient_write/rejections/{id}.json")).unwrap();
            let envelope: serde_json::Value = serde_json::from_slice(&text).unwrap();
            (envelope["retry_budget"].as_u64().unwrap(), envelope["context"]["reason"].as_str().unwrap().to_string())
        })
        .collect()
}

/// What [`refusals`] reads of an identical write refused five times by one agent: a budget
/// of three retries counted down, then spent.
pub fn five_refusals_counted_down() -> Vec<(u64, String)> {
    let expect = |b: u64, r: &str| (b, r.to_string());
    vec![
        expect(3, "content_blocked"),
        expect(2, "content_blocked"),
        expect(1, "content_blocked"),
        expect(0, "content_blocked"),
        expect(0, "retry_budget_exhausted"),
    ]
}

/// A small deterministic generator (xorshift) for the model tests, so failures reproduce from
/// the seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// `std::fs::write`, but the error of `close()` is reported (Rust's `File` drops it), where a
/// refusal at commit arrives.
pub fn write_closed(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::fd::IntoRawFd;
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    nix::unistd::close(file.into_raw_fd()).map_err(std::io::Error::from)
}

/// Set extended attribute `name` of the file at `path` (the test fails if it cannot).
pub fn set_xattr(path: &std::path::Path, name: &str, value: &[u8]) {
    let file = std::fs::File::open(path).unwrap();
    use std::os::fd::AsRawFd;
    let name = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid descriptor, C string and buffer.
    let rc = unsafe { nix::libc::fsetxattr(file.as_raw_fd(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    assert_eq!(rc, 0, "fsetxattr: {}", std::io::Error::last_os_error());
}

/// Extended attribute `name` of the file at `path`, if it has one (of at most 256 bytes).
pub fn get_xattr(path: &std::path::Path, name: &str) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).unwrap();
    use std::os::fd::AsRawFd;
    let name = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 256];
    // SAFETY: valid descriptor, C string and buffer.
    let n = unsafe { nix::libc::fgetxattr(file.as_raw_fd(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return None;
    }
    buf.truncate(n as usize);
    Some(buf)
}
