//! The mount's filesystem without a kernel (`rwfs::vfs`): every semantic rule of the mount
//! (docs/architecture.md, The mount) is tested here first, as requests a kernel would send, on
//! a plain temporary workspace — no root, no `/dev/fuse`. `tests/mount.rs` then proves the adapter and the kernel keep them.
//!
//! The last test is a model test: random sequences of opens, writes, closes (including a
//! forked child's close of an inherited descriptor), fsyncs, truncations, renames, unlinks and
//! refused writes over several handles and processes, checked after every step against a
//! plain in-memory model of what a writer must see (through every handle) and what the backing
//! tree must hold.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};

use nix::libc;
use rwfs::engine::Options as EngineOptions;
use rwfs::engine::{Engine, WriteMode};
use rwfs::history::RestoreTo;
use rwfs::journal::{Actor, Op, Via};
use rwfs::policy::Durability;
use rwfs::vfs::{Attr, Caller, Kernel, Options, ROOT, SetAttr, Vfs};
use rwfs::{ErrorKind, Reason, Result};

use crate::support::{Rng, Ws, aws_secret_line, sha, write};

/// What the filesystem asked the kernel to forget, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Forgot {
    Node(u64),
    Attr(u64),
    Name(u64, String),
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Forgot>>);

impl Recorder {
    fn take(&self) -> Vec<Forgot> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl Kernel for Recorder {
    fn forget_node(&self, ino: u64) {
        self.0.lock().unwrap().push(Forgot::Node(ino));
    }
    fn forget_attr(&self, ino: u64) {
        self.0.lock().unwrap().push(Forgot::Attr(ino));
    }
    fn forget_name(&self, parent: u64, name: &OsStr) {
        self.0.lock().unwrap().push(Forgot::Name(parent, name.to_string_lossy().into_owned()));
    }
    fn settle(&self) {}
    fn announce(&self, _path: &str, _what: rwfs::vfs::Announce) -> bool {
        false
    }
}

/// A workspace, its engine and the filesystem over it.
struct Fx {
    ws: Ws,
    engine: Arc<Engine>,
    vfs: Arc<Vfs>,
    kernel: Arc<Recorder>,
}

const RDONLY: i32 = libc::O_RDONLY;
const WRONLY: i32 = libc::O_WRONLY;
const TRUNC: i32 = libc::O_WRONLY | libc::O_TRUNC;

fn process(pid: u32) -> Caller {
    Caller {
        pid,
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        comm: Some(format!("p{pid}")),
        umask: 0,
        groups: Vec::new(),
    }
}

impl Fx {
    fn new() -> Fx {
        Fx::with(Ws::new(), EngineOptions::default())
    }

    /// Over an engine opened with `options` (the mount's extra pass-through globs live there).
    fn with(ws: Ws, options: EngineOptions) -> Fx {
        let engine = Arc::new(Engine::open(ws.path(), &options).expect("open engine"));
        let kernel = Arc::new(Recorder::default());
        let vfs = Vfs::new(engine.clone(), Options::default(), kernel.clone());
        Fx { ws, engine, vfs, kernel }
    }

    /// The node at `path`, looked up from the root as the kernel does.
    fn node(&self, path: &str) -> Result<u64> {
        let mut at = ROOT;
        for name in path.split('/') {
            at = self.vfs.lookup(at, OsStr::new(name))?.ino;
        }
        Ok(at)
    }

    /// The parent node and last name of `path`.
    fn parent(&self, path: &str) -> (u64, &'static OsStr) {
        let (dir, name) = path.rsplit_once('/').map_or(("", path), |(d, n)| (d, n));
        let parent = if dir.is_empty() { ROOT } else { self.node(dir).expect("parent") };
        (parent, OsStr::new(Box::leak(name.to_string().into_boxed_str())))
    }

    /// `open(path, flags | O_CREAT, 0644)` by `who`: CREATE when the name is absent, else OPEN.
    fn open(&self, path: &str, flags: i32, who: &Caller) -> Result<u64> {
        match self.node(path) {
            Ok(ino) => self.vfs.open(ino, flags, who).map(|o| o.fh),
            Err(e) if *e.reason() == Reason::NotFound => {
                let (parent, name) = self.parent(path);
                self.vfs.create(parent, name, 0o644, flags | libc::O_CREAT, who).map(|(_, fh)| fh)
            }
            Err(e) => Err(e),
        }
    }

    fn write(&self, fh: u64, offset: u64, data: &[u8], who: &Caller) -> Result<()> {
        self.vfs.write(fh, offset, data, who).map(|n| assert_eq!(n as usize, data.len()))
    }

    fn read(&self, fh: u64) -> Vec<u8> {
        self.vfs.read(fh, 0, 1 << 20).expect("read")
    }

    /// `close(2)`: the flush (whose errno is close's) and the release.
    fn close(&self, fh: u64, who: &Caller) -> Result<()> {
        let flushed = self.vfs.flush(fh, false, who);
        self.vfs.release(fh, who);
        flushed
    }

    fn ftruncate(&self, path: &str, size: u64, who: &Caller) -> Result<Attr> {
        let set = SetAttr { size: Some(size), ..SetAttr::default() };
        self.vfs.setattr(self.node(path)?, set, who)
    }

    fn backing(&self, path: &str) -> Option<Vec<u8>> {
        self.ws.read(path)
    }

    /// Write `data` to `path` in one open/write/close by `who`.
    fn put(&self, path: &str, data: &[u8], who: &Caller) -> Result<()> {
        let fh = self.open(path, TRUNC, who)?;
        let wrote = self.write(fh, 0, data, who);
        let closed = self.close(fh, who);
        wrote.and(closed)
    }
}

fn blocked<T: std::fmt::Debug>(r: Result<T>) {
    let e = r.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Blocked, "{e}");
}

#[test]
fn a_write_is_committed_at_close_with_its_writer_in_the_row() {
    let fx = Fx::new();
    let p = process(4242);
    let fh = fx.open("a.txt", TRUNC, &p).unwrap();
    fx.write(fh, 0, b"hello\n", &p).unwrap();
    assert_eq!(fx.backing("a.txt"), None, "nothing reaches the tree before close");
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("a.txt").unwrap(), b"hello\n");
    let row = fx.ws.rows().into_iter().rfind(|r| r.path == "a.txt").unwrap();
    assert_eq!((row.op(), row.pid, row.comm.as_deref()), (Op::Create, Some(4242), Some("p4242")));
    assert_eq!(row.sha256, Some(sha(b"hello\n")));
}

#[test]
fn large_writes_hashed_while_the_writer_goes_on_name_the_version_by_its_bytes() {
    // Writes of 128 KiB or more that continue the running digest are hashed on a thread of
    // their own after they are written, which reads them back from the draft while the writer
    // goes on (`Draft::write`, issue 27): the row still names the bytes installed, whether the
    // writes follow one another, a small one comes between, one goes back over bytes already
    // hashed, a truncation cuts bytes still being read, or two files are written in turns.
    let fx = Fx::new();
    let p = process(4343);
    let bytes = |n: usize, seed: usize| -> Vec<u8> { (0..n).map(|i| ((i * 7 + seed * 13) % 251) as u8).collect() };
    let mib = 1 << 20;
    let mut want = Vec::new();
    let fh = fx.open("seq.bin", TRUNC, &p).unwrap();
    for (k, len) in [mib, mib, 10, mib, 200 << 10].into_iter().enumerate() {
        let chunk = bytes(len, k);
        fx.write(fh, want.len() as u64, &chunk, &p).unwrap();
        want.extend_from_slice(&chunk);
    }
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("seq.bin").unwrap(), want);
    let row = fx.ws.rows().into_iter().rfind(|r| r.path == "seq.bin").unwrap();
    assert_eq!(row.sha256, Some(sha(&want)), "the running digest of sequential writes");

    let fh = fx.open("back.bin", TRUNC, &p).unwrap();
    fx.write(fh, 0, &bytes(2 * mib, 1), &p).unwrap();
    let over = bytes(mib, 2);
    fx.write(fh, 512 << 10, &over, &p).unwrap();
    fx.write(fh, 2 * mib as u64, &bytes(mib, 3), &p).unwrap();
    fx.close(fh, &p).unwrap();
    let mut want = bytes(2 * mib, 1);
    want[512 << 10..(512 << 10) + mib].copy_from_slice(&over);
    want.extend_from_slice(&bytes(mib, 3));
    assert_eq!(fx.backing("back.bin").unwrap(), want);
    let row = fx.ws.rows().into_iter().rfind(|r| r.path == "back.bin").unwrap();
    assert_eq!(row.sha256, Some(sha(&want)), "a write that went back: the draft is read again");

    // Truncations while a write's bytes may still be hashed: to where the hash ends (it
    // goes on), to zero (it starts again), then a sequential rewrite.
    let fh = fx.open("cut.bin", TRUNC, &p).unwrap();
    fx.write(fh, 0, &bytes(mib, 4), &p).unwrap();
    fx.ftruncate("cut.bin", mib as u64, &p).unwrap();
    fx.write(fh, mib as u64, &bytes(mib, 5), &p).unwrap();
    fx.ftruncate("cut.bin", 0, &p).unwrap();
    let want = [bytes(mib, 6), bytes(mib, 7)].concat();
    fx.write(fh, 0, &want[..mib], &p).unwrap();
    fx.write(fh, mib as u64, &want[mib..], &p).unwrap();
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("cut.bin").unwrap(), want);
    let row = fx.ws.rows().into_iter().rfind(|r| r.path == "cut.bin").unwrap();
    assert_eq!(row.sha256, Some(sha(&want)));

    // Cut below where the hash ends (the bytes it reads back may be gone), then written on
    // from the cut: the draft is read again at the commit.
    let fh = fx.open("short.bin", TRUNC, &p).unwrap();
    fx.write(fh, 0, &bytes(2 * mib, 8), &p).unwrap();
    fx.ftruncate("short.bin", (mib / 2) as u64, &p).unwrap();
    fx.write(fh, (mib / 2) as u64, &bytes(mib, 9), &p).unwrap();
    fx.close(fh, &p).unwrap();
    let want = [&bytes(2 * mib, 8)[..mib / 2], &bytes(mib, 9)].concat();
    assert_eq!(fx.backing("short.bin").unwrap(), want);
    let row = fx.ws.rows().into_iter().rfind(|r| r.path == "short.bin").unwrap();
    assert_eq!(row.sha256, Some(sha(&want)));

    // Two drafts written in turns, each with a hash of its own running.
    let (a, b) = (fx.open("a.bin", TRUNC, &p).unwrap(), fx.open("b.bin", TRUNC, &p).unwrap());
    let (mut want_a, mut want_b) = (Vec::new(), Vec::new());
    for k in 0..4 {
        let (chunk_a, chunk_b) = (bytes(mib, 10 + k), bytes(mib, 20 + k));
        fx.write(a, want_a.len() as u64, &chunk_a, &p).unwrap();
        fx.write(b, want_b.len() as u64, &chunk_b, &p).unwrap();
        want_a.extend_from_slice(&chunk_a);
        want_b.extend_from_slice(&chunk_b);
    }
    fx.close(a, &p).unwrap();
    fx.close(b, &p).unwrap();
    for (path, want) in [("a.bin", want_a), ("b.bin", want_b)] {
        assert_eq!(fx.backing(path).unwrap(), want);
        let row = fx.ws.rows().into_iter().rfind(|r| r.path == path).unwrap();
        assert_eq!(row.sha256, Some(sha(&want)), "{path}");
    }
}

#[test]
fn readers_see_the_draft_and_the_tree_keeps_the_old_version_until_close() {
    let fx = Fx::new();
    let p = process(10);
    fx.put("f", b"old\n", &p).unwrap();
    let writer = fx.open("f", TRUNC, &p).unwrap();
    let reader = fx.open("f", RDONLY, &process(11)).unwrap();
    fx.write(writer, 0, b"new\n", &p).unwrap();
    assert_eq!(fx.read(reader), b"new\n", "one draft per file, shared by every handle");
    assert_eq!(fx.backing("f").unwrap(), b"old\n");
    fx.close(reader, &process(11)).unwrap();
    assert_eq!(fx.backing("f").unwrap(), b"old\n", "a reader's close commits nothing");
    fx.close(writer, &p).unwrap();
    assert_eq!(fx.backing("f").unwrap(), b"new\n");
}

#[test]
fn a_childs_close_of_an_inherited_descriptor_does_not_commit_half_a_file() {
    let fx = Fx::new();
    let (parent, child) = (process(20), process(21));
    let fh = fx.open("big", TRUNC, &parent).unwrap();
    fx.write(fh, 0, b"first half\n", &parent).unwrap();
    // fork + exec: the child's copy of the descriptor is closed (a FLUSH from the child).
    fx.vfs.flush(fh, false, &child).unwrap();
    assert_eq!(fx.backing("big"), None, "the child did not write: its close commits nothing");
    fx.write(fh, 11, b"second half\n", &parent).unwrap();
    fx.close(fh, &parent).unwrap();
    assert_eq!(fx.backing("big").unwrap(), b"first half\nsecond half\n");
}

#[test]
fn kernel_writeback_of_mapped_pages_counts_as_the_openers_and_commits_at_release() {
    let fx = Fx::new();
    let p = process(30);
    fx.put("m", b"aaaa", &p).unwrap();
    let fh = fx.open("m", libc::O_RDWR, &p).unwrap();
    fx.vfs.flush(fh, false, &p).unwrap();
    // munmap after close: the kernel writes the dirty page back (pid 0) before RELEASE.
    fx.write(fh, 0, b"bbbb", &Caller::kernel()).unwrap();
    fx.vfs.release(fh, &Caller::kernel());
    assert_eq!(fx.backing("m").unwrap(), b"bbbb", "the last close commits late pages");
    let row = fx.ws.rows().into_iter().rfind(|r| r.path == "m").unwrap();
    assert_eq!(row.pid, Some(30), "the row names the process that had the file open");
}

#[test]
fn partial_writes_truncation_and_appends_land_exactly() {
    let fx = Fx::new();
    let p = process(40);
    fx.put("f", b"0123456789", &p).unwrap();
    let fh = fx.open("f", libc::O_RDWR, &p).unwrap();
    fx.write(fh, 3, b"abc", &p).unwrap();
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("f").unwrap(), b"012abc6789");
    let fh = fx.open("f", WRONLY, &p).unwrap();
    fx.ftruncate("f", 4, &p).unwrap();
    fx.write(fh, 4, b"++", &p).unwrap();
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("f").unwrap(), b"012a++");
    // truncate(2) by path, with no handle open, commits at once.
    let set = SetAttr { size: Some(2), by_path: true, ..SetAttr::default() };
    fx.vfs.setattr(fx.node("f").unwrap(), set, &p).unwrap();
    assert_eq!(fx.backing("f").unwrap(), b"01");
}

#[test]
fn an_open_that_only_truncates_commits_at_the_last_close_not_at_a_dups_close() {
    // `echo x > f` from bash: open(O_TRUNC), dup, close the dup before writing, write, close.
    let fx = Fx::new();
    let p = process(50);
    fx.put("f", b"before\n", &p).unwrap();
    let fh = fx.open("f", TRUNC, &p).unwrap();
    fx.vfs.flush(fh, false, &p).unwrap();
    assert_eq!(fx.backing("f").unwrap(), b"before\n", "no empty version from the dup's close");
    fx.write(fh, 0, b"x\n", &p).unwrap();
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("f").unwrap(), b"x\n");
    let versions = fx.ws.rows().into_iter().filter(|r| r.path == "f").count();
    assert_eq!(versions, 2, "one version per redirect");
}

#[test]
fn a_refusal_is_the_errno_of_write_and_close_until_a_rewrite_or_the_last_close() {
    let fx = Fx::new();
    let p = process(60);
    fx.put("conf.py", b"DEBUG = True\n", &p).unwrap();
    let fh = fx.open("conf.py", libc::O_RDWR | libc::O_TRUNC, &p).unwrap();
    fx.kernel.take();
    blocked(fx.write(fh, 0, aws_secret_line(1).as_bytes(), &p));
    let ino = fx.node("conf.py").unwrap();
    assert!(fx.kernel.take().contains(&Forgot::Node(ino)), "the kernel drops the refused pages");
    assert_eq!(fx.backing("conf.py").unwrap(), b"DEBUG = True\n", "the tree keeps its version");
    assert_eq!(fx.read(fh), b"DEBUG = True\n", "reads see the committed version again");
    blocked(fx.write(fh, 0, b"harmless\n", &p));
    blocked(fx.vfs.flush(fh, true, &p));
    // A rewrite (truncate to nothing) starts over.
    fx.ftruncate("conf.py", 0, &p).unwrap();
    fx.write(fh, 0, b"SAFE = 1\n", &p).unwrap();
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("conf.py").unwrap(), b"SAFE = 1\n");

    // Refused again, then the last close forgets the refusal.
    let fh = fx.open("conf.py", WRONLY, &p).unwrap();
    blocked(fx.write(fh, 0, aws_secret_line(2).as_bytes(), &p));
    blocked(fx.close(fh, &p));
    fx.put("conf.py", b"SAFE = 2\n", &p).unwrap();
    assert_eq!(fx.backing("conf.py").unwrap(), b"SAFE = 2\n");
    let ops: Vec<Op> = fx.ws.rows().iter().filter(|r| r.path == "conf.py").map(|r| r.op()).collect();
    assert_eq!(ops.iter().filter(|o| **o == Op::Block).count(), 2, "each refusal has its row: {ops:?}");
}

#[test]
fn a_secret_spanning_two_writes_is_refused_at_close() {
    let fx = Fx::new();
    let p = process(61);
    let line = aws_secret_line(3);
    let (a, b) = line.as_bytes().split_at(line.len() / 2);
    let fh = fx.open("s.env", TRUNC, &p).unwrap();
    let first = fx.write(fh, 0, a, &p);
    let second = first.and_then(|()| fx.write(fh, a.len() as u64, b, &p));
    let closed = fx.close(fh, &p);
    assert!(second.is_err() || closed.is_err(), "refused at the second write or at close");
    assert_eq!(fx.backing("s.env"), None);
}

#[test]
fn a_refused_new_file_never_appears_and_can_be_written_again() {
    let fx = Fx::new();
    let p = process(70);
    let fh = fx.open("new.py", TRUNC, &p).unwrap();
    blocked(fx.write(fh, 0, aws_secret_line(4).as_bytes(), &p));
    assert_eq!(fx.read(fh), b"", "its handles see an empty placeholder");
    blocked(fx.close(fh, &p));
    assert_eq!(fx.backing("new.py"), None);
    assert_eq!(*fx.node("new.py").unwrap_err().reason(), Reason::NotFound, "gone after its last close");
    fx.put("new.py", b"print('ok')\n", &p).unwrap();
    assert_eq!(fx.backing("new.py").unwrap(), b"print('ok')\n");
}

#[test]
fn a_refused_new_file_whose_name_the_kernel_kept_answers_stale_and_is_created_afresh() {
    let fx = Fx::new();
    let p = process(71);
    let fh = fx.open("k.py", TRUNC, &p).unwrap();
    let ino = fx.node("k.py").unwrap();
    blocked(fx.write(fh, 0, aws_secret_line(5).as_bytes(), &p));
    blocked(fx.close(fh, &p));
    // The kernel still holds the node and opens it again: ESTALE, with or without O_TRUNC,
    // so the kernel resolves the name once more (gone) and creates the file.
    for flags in [TRUNC, libc::O_WRONLY] {
        let stale = fx.vfs.open(ino, flags, &p).map(|_| ()).unwrap_err();
        assert_eq!(stale.raw_os_error(), Some(libc::ESTALE), "{stale}");
    }
    assert_eq!(*fx.node("k.py").unwrap_err().reason(), Reason::NotFound);
    let fh = fx.open("k.py", TRUNC, &p).unwrap();
    fx.write(fh, 0, b"x = 1\n", &p).unwrap();
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("k.py").unwrap(), b"x = 1\n");
}

#[test]
fn a_created_file_exists_only_in_the_mount_until_its_first_commit() {
    let fx = Fx::new();
    let p = process(80);
    let fh = fx.open("dir-less.txt", TRUNC, &p).unwrap();
    assert!(fx.node("dir-less.txt").is_ok(), "looked up while pending");
    let dir = fx.vfs.opendir(ROOT).unwrap();
    let mut names = Vec::new();
    fx.vfs
        .readdir(dir, 0, |e, _| {
            names.push(e.name.to_string_lossy().into_owned());
            false
        })
        .unwrap();
    fx.vfs.release(dir, &p);
    assert!(names.contains(&"dir-less.txt".to_string()), "listed while pending: {names:?}");
    assert_eq!(fx.backing("dir-less.txt"), None);
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("dir-less.txt").unwrap(), b"", "an empty file, committed at its last close");
}

#[test]
fn a_directory_holding_only_uncommitted_files_is_not_empty() {
    let fx = Fx::new();
    let p = process(81);
    let d = fx.vfs.mkdir(ROOT, OsStr::new("d"), 0o755, &p).unwrap().ino;
    let fh = fx.open("d/pending", TRUNC, &p).unwrap();
    let e = fx.vfs.rmdir(ROOT, OsStr::new("d")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY), "{e}");
    fx.close(fh, &p).unwrap();
    fx.vfs.unlink(d, OsStr::new("pending"), &p).unwrap();
    fx.vfs.rmdir(ROOT, OsStr::new("d")).unwrap();
}

#[test]
fn unlink_and_rename_over_keep_the_old_versions() {
    let fx = Fx::new();
    let p = process(90);
    fx.put("a", b"version a\n", &p).unwrap();
    fx.put("b", b"version b\n", &p).unwrap();
    fx.vfs.rename(ROOT, OsStr::new("a"), ROOT, OsStr::new("b"), 0, &p).unwrap();
    assert_eq!((fx.backing("a"), fx.backing("b").unwrap()), (None, b"version a\n".to_vec()));
    fx.vfs.unlink(ROOT, OsStr::new("b"), &p).unwrap();
    assert_eq!(fx.backing("b"), None);
    for kept in [&b"version a\n"[..], b"version b\n"] {
        assert_eq!(fx.ws.object(&sha(kept)).as_deref(), Some(kept), "kept in objects/");
    }
}

#[test]
fn an_open_file_keeps_its_version_after_a_rename_over_it_and_its_writes_are_never_committed() {
    let fx = Fx::new();
    let p = process(91);
    fx.put("f", b"mine\n", &p).unwrap();
    fx.put("g", b"theirs\n", &p).unwrap();
    let fh = fx.open("f", libc::O_RDWR, &p).unwrap();
    fx.vfs.rename(ROOT, OsStr::new("g"), ROOT, OsStr::new("f"), 0, &p).unwrap();
    assert_eq!(fx.read(fh), b"mine\n", "still the version it opened");
    fx.write(fh, 0, b"MINE\n", &p).unwrap();
    assert_eq!(fx.read(fh), b"MINE\n", "an unlinked open file takes writes");
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("f").unwrap(), b"theirs\n", "and never reaches the tree");
    let getattr = fx.vfs.getattr(fx.node("f").unwrap()).unwrap();
    assert_eq!(getattr.stat.size, 7);
}

#[test]
fn an_unlinked_open_file_reports_no_link_and_keeps_working() {
    let fx = Fx::new();
    let p = process(92);
    fx.put("u", b"data\n", &p).unwrap();
    let ino = fx.node("u").unwrap();
    let fh = fx.vfs.open(ino, libc::O_RDWR, &p).unwrap().fh;
    fx.vfs.unlink(ROOT, OsStr::new("u"), &p).unwrap();
    assert_eq!(fx.vfs.getattr(ino).unwrap().stat.nlink, 0);
    fx.write(fh, 5, b"more\n", &p).unwrap();
    assert_eq!(fx.read(fh), b"data\nmore\n");
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("u"), None);
}

#[test]
fn hard_links_through_the_mount_are_one_node_and_follow_each_commit() {
    let fx = Fx::new();
    let p = process(93);
    fx.put("one", b"v1\n", &p).unwrap();
    let ino = fx.node("one").unwrap();
    let linked = fx.vfs.link(ino, ROOT, OsStr::new("two"), &p).unwrap();
    assert_eq!(linked.ino, ino, "one inode number for both names");
    assert_eq!(linked.stat.nlink, 2);
    assert!(!linked.cacheable(), "a file with two names is not cached by the kernel");
    fx.put("two", b"v2\n", &p).unwrap();
    assert_eq!((fx.backing("one").unwrap(), fx.backing("two").unwrap()), (b"v2\n".to_vec(), b"v2\n".to_vec()));
}

#[test]
fn the_state_directory_is_read_only_and_its_secrets_unreadable() {
    let fx = Fx::new();
    let p = process(94);
    fx.put("x", b"x\n", &p).unwrap();
    let journal = fx.node(".resilient_write/journal.jsonl").unwrap();
    let fh = fx.vfs.open(journal, RDONLY, &p).unwrap().fh;
    assert!(!fx.read(fh).is_empty());
    fx.vfs.release(fh, &p);
    assert_eq!(fx.vfs.open(journal, WRONLY, &p).unwrap_err().reason().code(), "read_only_filesystem");
    // A version leaves the tree: it is kept, and the mount neither finds nor lists it.
    fx.put("x", b"y\n", &p).unwrap();
    let hex = sha(b"x\n").to_hex();
    assert_eq!(fx.ws.object(&sha(b"x\n")).as_deref(), Some(&b"x\n"[..]));
    let err = fx.node(&format!(".resilient_write/objects/{}/{hex}", &hex[..2])).unwrap_err();
    assert_eq!(err.reason().code(), "not_found");
    assert_eq!(fx.node(".resilient_write/objects").unwrap_err().reason().code(), "not_found");
}

#[test]
fn pass_through_paths_are_written_in_place_without_rows() {
    let fx = Fx::with(Ws::new(), EngineOptions { pass_through: vec!["build/**".into()], ..EngineOptions::default() });
    let p = process(95);
    fx.vfs.mkdir(ROOT, OsStr::new("build"), 0o755, &p).unwrap();
    let fh = fx.open("build/out.o", TRUNC, &p).unwrap();
    fx.write(fh, 0, b"obj", &p).unwrap();
    assert_eq!(fx.backing("build/out.o").unwrap(), b"obj", "in place, before close");
    fx.close(fh, &p).unwrap();
    assert!(fx.ws.rows().iter().all(|r| !r.path.starts_with("build/")), "no row");
    // The policy's defaults too.
    fx.vfs.mkdir(ROOT, OsStr::new("target"), 0o755, &p).unwrap();
    fx.put("target/x", aws_secret_line(6).as_bytes(), &p).unwrap();
    assert!(fx.backing("target/x").is_some(), "nothing gated there");
}

#[test]
fn only_in_place_handles_may_pass_through_and_an_open_one_never_takes_a_gated_name() {
    let fx = Fx::new();
    let p = process(96);
    fx.vfs.mkdir(ROOT, OsStr::new("target"), 0o755, &p).unwrap();
    let first = fx.open("target/x", TRUNC, &p).unwrap();
    let open = fx.vfs.in_place_backing(first).expect("written in place");
    assert!(matches!(open.backing, Some(Ok(_))), "the node's first open gets a read-write descriptor");
    let second = fx.open("target/x", RDONLY, &p).unwrap();
    let later = fx.vfs.in_place_backing(second).expect("written in place");
    assert_eq!(later.ino, open.ino);
    assert!(later.backing.is_none(), "a later open follows the first (the kernel never mixes the two)");
    let gated = fx.open("src.txt", TRUNC, &p).unwrap();
    assert!(fx.vfs.in_place_backing(gated).is_none(), "a gated file's bytes must all reach the gate");
    fx.close(gated, &p).unwrap();

    // Open on a pass-through path: it keeps writing there without the gate, so it may not be
    // renamed to a gated name (EXDEV: `mv` copies instead, and the copy is judged).
    let (target, x) = fx.parent("target/x");
    let e = fx.vfs.rename(target, x, ROOT, OsStr::new("moved.txt"), 0, &p).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{e}");
    let e = fx.vfs.rename(ROOT, OsStr::new("target"), ROOT, OsStr::new("dist"), 0, &p).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "nor may a directory holding it: {e}");
    fx.close(second, &p).unwrap();
    fx.close(first, &p).unwrap();
    fx.vfs.rename(target, x, ROOT, OsStr::new("moved.txt"), 0, &p).expect("closed: renamed, and judged");
    assert!(fx.backing("moved.txt").is_some());
}

#[test]
fn a_path_has_the_same_inode_number_in_every_mount() {
    // git's index records st_ino: after a remount, the same paths must show the same numbers.
    let fx = Fx::new();
    let p = process(99);
    fx.vfs.mkdir(ROOT, OsStr::new("src"), 0o755, &p).unwrap();
    let paths = ["src", "src/a.rs", "src/b.rs", "README.md"];
    for path in &paths[1..] {
        fx.put(path, b"x\n", &p).unwrap();
    }
    let before: Vec<u64> = paths.iter().map(|p| fx.node(p).unwrap()).collect();
    // A commit gives the file a new backing inode, not a new number.
    fx.put("src/a.rs", b"y\n", &p).unwrap();
    assert_eq!(fx.node("src/a.rs").unwrap(), before[1]);
    let Fx { ws, engine, vfs, .. } = fx;
    drop(vfs);
    drop(engine);
    // Another mount of the workspace, looking the names up in another order.
    let fx = Fx::with(ws, EngineOptions::default());
    let mut after: Vec<u64> = paths.iter().rev().map(|p| fx.node(p).unwrap()).collect();
    after.reverse();
    assert_eq!(after, before);
}

#[test]
fn readdirplus_counts_one_lookup_per_entry_but_the_dots() {
    let fx = Fx::new();
    let p = process(98);
    fx.vfs.mkdir(ROOT, OsStr::new("d"), 0o755, &p).unwrap();
    fx.put("d/a", b"a\n", &p).unwrap();
    fx.put("d/b", b"bb\n", &p).unwrap();
    let created = fx.open("d/new", TRUNC, &p).unwrap(); // pending: only in the mount
    let d = fx.node("d").unwrap();
    let count = |ino| fx.vfs.lookups(ino).unwrap_or(0);
    let before: Vec<u64> = ["d/a", "d/b", "d/new"].iter().map(|p| fx.node(p).unwrap()).collect();
    let counts: Vec<u64> = before.iter().map(|&ino| count(ino)).collect();
    let (d_count, root_count) = (count(d), count(ROOT));
    let fh = fx.vfs.opendir(d).unwrap();
    let mut seen = Vec::new();
    fx.vfs
        .readdirplus(fh, 0, |e, attr, next| {
            let attr = attr.expect("attributes");
            seen.push((e.name.to_string_lossy().into_owned(), attr.ino, attr.stat.size, next));
            false
        })
        .unwrap();
    let mut names: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
    names.sort();
    assert_eq!(names, [".", "..", "a", "b", "new"]);
    for (name, ino, size, _) in &seen {
        match name.as_str() {
            "." => assert_eq!(*ino, d),
            ".." => assert_eq!(*ino, ROOT),
            "a" => assert_eq!((*ino, *size), (before[0], 2)),
            "b" => assert_eq!((*ino, *size), (before[1], 3)),
            _ => assert_eq!(*ino, before[2], "the pending file's node"),
        }
    }
    let after: Vec<u64> = before.iter().map(|&ino| count(ino)).collect();
    assert_eq!(after, counts.iter().map(|c| c + 1).collect::<Vec<_>>(), "one lookup per entry");
    assert_eq!((count(d), count(ROOT)), (d_count, root_count), "the dots count nothing");
    // A reply that is full at the fourth entry: that entry is not counted; the next call
    // starts there.
    let mut added = Vec::new();
    fx.vfs
        .readdirplus(fh, 0, |e, attr, _| {
            if added.len() == 3 {
                true
            } else {
                added.push((e.name.clone(), attr.unwrap().ino));
                false
            }
        })
        .unwrap();
    let rest_offset = added.len() as u64;
    let mut rest = Vec::new();
    fx.vfs
        .readdirplus(fh, rest_offset, |e, attr, _| {
            rest.push((e.name.clone(), attr.unwrap().ino));
            false
        })
        .unwrap();
    assert_eq!(added.len() + rest.len(), 5);
    let after2: Vec<u64> = before.iter().map(|&ino| count(ino)).collect();
    assert_eq!(after2, counts.iter().map(|c| c + 2).collect::<Vec<_>>(), "each entry counted once per listing");
    // A file looked up only by the listing is forgotten with it.
    fx.put("d/c", b"c", &p).unwrap();
    let c = fx.node("d/c").unwrap();
    fx.vfs.forget(c, count(c));
    assert_eq!(fx.vfs.lookups(c), None);
    let fh2 = fx.vfs.opendir(d).unwrap();
    let mut c_ino = None;
    fx.vfs
        .readdirplus(fh2, 0, |e, attr, _| {
            if e.name == "c" {
                c_ino = attr.map(|a| a.ino);
            }
            false
        })
        .unwrap();
    let c_ino = c_ino.expect("listed");
    assert_eq!(fx.vfs.lookups(c_ino), Some(1));
    fx.vfs.forget(c_ino, 1);
    assert_eq!(fx.vfs.lookups(c_ino), None);
    fx.vfs.release(fh, &p);
    fx.vfs.release(fh2, &p);
    fx.close(created, &p).unwrap();
}

/// Does a read-only open of `path` let the kernel keep its pages? (It closes again.)
fn keeps_pages(fx: &Fx, path: &str, who: &Caller) -> bool {
    let opened = fx.vfs.open(fx.node(path).unwrap(), RDONLY, who).unwrap();
    assert!(!opened.flush_at_close, "a reader's close commits nothing");
    fx.close(opened.fh, who).unwrap();
    opened.keep_cache
}

#[test]
fn the_kernel_keeps_a_files_pages_across_opens_until_the_file_changes() {
    let fx = Fx::with(Ws::new(), EngineOptions { pass_through: vec!["build/**".into()], ..EngineOptions::default() });
    let p = process(97);
    fx.put("f", b"v1\n", &p).unwrap();
    let unchanged_at = |path: &str, what: &str| {
        assert!(!keeps_pages(&fx, path, &p), "pages kept after {what}");
        assert!(keeps_pages(&fx, path, &p), "pages dropped again with nothing changed since {what}");
    };
    let unchanged = |what: &str| unchanged_at("f", what);
    unchanged("the first commit");
    assert!(keeps_pages(&fx, "f", &p), "a third open");
    // A commit through the file itself, and through another of its names (one node).
    fx.put("f", b"v2\n", &p).unwrap();
    unchanged("a commit");
    fx.vfs.link(fx.node("f").unwrap(), ROOT, OsStr::new("g"), &p).unwrap();
    fx.put("g", b"v3\n", &p).unwrap();
    unchanged("a commit through a hard link");
    // A truncation by path (committed at once).
    fx.ftruncate("f", 2, &p).unwrap();
    unchanged("a truncation");
    // An MCP or CLI write, and a restore: the engine's change events.
    write(&fx.engine, "f", b"v4\n", WriteMode::Overwrite).unwrap();
    unchanged("an engine write");
    fx.engine.restore("f", &RestoreTo::Sha(sha(b"v2\n").to_hex()), &Actor::engine()).unwrap();
    unchanged("a restore");
    // A change made outside the mount altogether: the committed file is another one.
    std::fs::write(fx.ws.path().join("f"), b"outside\n").unwrap();
    unchanged("a change outside the mount");
    // While a draft exists, every open reads it, not the pages of the committed version.
    let w = fx.vfs.open(fx.node("f").unwrap(), WRONLY, &p).unwrap();
    assert!(w.flush_at_close, "a writer's close may commit");
    let w = w.fh;
    fx.write(w, 0, b"draft", &p).unwrap();
    let r = fx.vfs.open(fx.node("f").unwrap(), RDONLY, &p).unwrap();
    assert!(!r.keep_cache, "a draft is being written");
    assert_eq!(fx.read(r.fh), b"draftde\n");
    assert!(!keeps_pages(&fx, "f", &p), "still drafting");
    fx.close(w, &p).unwrap();
    fx.close(r.fh, &p).unwrap();
    unchanged("a draft");
    // A refused draft.
    let w = fx.open("f", TRUNC, &p).unwrap();
    blocked(fx.write(w, 0, aws_secret_line(8).as_bytes(), &p));
    blocked(fx.close(w, &p));
    assert_eq!(fx.backing("f").unwrap(), b"draftde\n");
    unchanged("a refusal");
    // Pass-through files: their own version says whether they changed.
    fx.vfs.mkdir(ROOT, OsStr::new("build"), 0o755, &p).unwrap();
    fx.put("build/out", b"o1", &p).unwrap();
    unchanged_at("build/out", "a write in place");
    std::thread::sleep(std::time::Duration::from_millis(10));
    fx.put("build/out", b"o2", &p).unwrap();
    assert!(!keeps_pages(&fx, "build/out", &p), "rewritten in place");
}

#[test]
fn changes_the_engine_makes_elsewhere_drop_the_kernels_caches() {
    let fx = Fx::new();
    let p = process(96);
    fx.put("seen", b"1\n", &p).unwrap();
    let ino = fx.node("seen").unwrap();
    fx.kernel.take();
    // An MCP write: the engine publishes it, the filesystem tells the kernel.
    write(&fx.engine, "seen", b"2\n", WriteMode::Overwrite).unwrap();
    let forgot = fx.kernel.take();
    assert!(forgot.contains(&Forgot::Node(ino)), "{forgot:?}");
    assert!(forgot.contains(&Forgot::Name(ROOT, "seen".into())), "{forgot:?}");
    // A name the kernel may have cached as absent.
    write(&fx.engine, "fresh/new.txt", b"n\n", WriteMode::Create).unwrap();
    assert_eq!(fx.kernel.take(), vec![Forgot::Name(ROOT, "fresh".into())]);
    // The mount's own commits are its own: no event comes back.
    fx.put("seen", b"3\n", &p).unwrap();
    assert!(fx.kernel.take().iter().all(|f| !matches!(f, Forgot::Name(..) | Forgot::Node(_))));
    let fh = fx.open("seen", RDONLY, &p).unwrap();
    assert_eq!(fx.read(fh), b"3\n");
    fx.close(fh, &p).unwrap();
    assert!(fx.ws.rows().iter().any(|r| r.via == Some(Via::Fuse)));
}

// ---- The model test.

/// The draft of a file in the model.
#[derive(Debug, Clone)]
struct MDraft {
    bytes: Vec<u8>,
    /// Written or truncated since it started (a writer's close commits it).
    dirty: bool,
    /// The processes that changed it.
    writers: BTreeSet<u32>,
}

/// A file (one node) in the model.
#[derive(Debug, Clone, Default)]
struct MFile {
    /// The version in the tree; for a file that lost its name, the version it had.
    committed: Option<Vec<u8>>,
    draft: Option<MDraft>,
    /// Refused: writes and closes fail until a rewrite or the last close.
    refused: bool,
    /// Has a name (else unlinked or replaced while open).
    named: bool,
    handles: usize,
}

impl MFile {
    /// What reads through any handle see.
    fn visible(&self) -> Vec<u8> {
        if self.refused {
            // A refused new file shows its empty placeholder.
            return self.committed.clone().unwrap_or_default();
        }
        match &self.draft {
            Some(d) => d.bytes.clone(),
            None => self.committed.clone().unwrap_or_default(),
        }
    }
}

#[derive(Default)]
struct Model {
    files: Vec<MFile>,
    /// name → file index.
    names: BTreeMap<&'static str, usize>,
    /// Open handles: (fh, file index, owner pid).
    handles: Vec<(u64, usize, u32)>,
}

impl Model {
    fn commit(&mut self, f: usize) {
        let file = &mut self.files[f];
        if let Some(d) = file.draft.take() {
            file.committed = Some(d.bytes);
        }
    }

    /// The close of a handle (its flush, then its release): what close returns.
    fn close(&mut self, at: usize, pid: u32) -> bool {
        let (_, f, _) = self.handles.remove(at);
        let ok = self.flush(f, pid);
        self.release(f);
        ok
    }

    fn flush(&mut self, f: usize, pid: u32) -> bool {
        let file = &mut self.files[f];
        if !file.named {
            return true;
        }
        if file.refused {
            return false;
        }
        if file.draft.as_ref().is_some_and(|d| d.dirty && (d.writers.is_empty() || d.writers.contains(&pid))) {
            self.commit(f);
        }
        true
    }

    fn release(&mut self, f: usize) {
        let file = &mut self.files[f];
        file.handles -= 1;
        if file.handles > 0 {
            return;
        }
        if file.refused || !file.named {
            file.refused = false;
            file.draft = None;
            if file.committed.is_none() {
                // Never committed: the name goes.
                self.names.retain(|_, i| *i != f);
                self.files[f].named = false;
            }
            return;
        }
        if file.draft.is_some() {
            self.commit(f);
        }
    }

    /// The name a file index has, if any.
    fn name_of(&self, f: usize) -> Option<&'static str> {
        self.names.iter().find(|(_, i)| **i == f).map(|(n, _)| *n)
    }
}

const NAMES: &[&str] = &["a", "b", "c"];
const PIDS: &[u32] = &[1001, 1002, 1003];

/// A workspace whose mount acknowledges closes in `batch` durability, with a window long
/// enough that nothing is installed behind the test's back.
fn batch_fx(ws: Ws) -> Fx {
    batch_fx_with_window(ws, 10_000)
}

/// A workspace whose mount acknowledges closes in `batch` durability with a window of
/// `window_ms`.
fn batch_fx_with_window(ws: Ws, window_ms: u64) -> Fx {
    std::fs::create_dir_all(ws.path().join(".resilient_write")).unwrap();
    std::fs::write(ws.path().join(".resilient_write/policy.yaml"), format!("batch_window_ms: {window_ms}\n")).unwrap();
    Fx::with(ws, EngineOptions { durability: Some(Durability::Batch), ..EngineOptions::default() })
}

fn names_in(fx: &Fx, dir: u64, who: &Caller) -> Vec<String> {
    let fh = fx.vfs.opendir(dir).unwrap();
    let mut names = Vec::new();
    fx.vfs
        .readdir(fh, 0, |e, _| {
            names.push(e.name.to_string_lossy().into_owned());
            false
        })
        .unwrap();
    fx.vfs.release(fh, who);
    names
}

#[test]
fn batch_mode_a_close_is_seen_at_once_and_durable_at_fsync_at_a_rename_or_at_close() {
    let fx = batch_fx(Ws::new());
    let p = process(300);
    fx.put("a.txt", b"one\n", &p).unwrap();
    // Acknowledged: the mount shows it, its row is written, the tree does not have it yet.
    let fh = fx.open("a.txt", RDONLY, &p).unwrap();
    assert_eq!(fx.read(fh), b"one\n");
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.vfs.getattr(fx.node("a.txt").unwrap()).unwrap().stat.size, 4);
    assert!(names_in(&fx, ROOT, &p).contains(&"a.txt".to_string()), "listed before its install");
    assert_eq!(fx.backing("a.txt"), None, "not installed before the window or an fsync");
    let rows = fx.ws.rows();
    assert!(rows.iter().any(|r| r.path == "a.txt" && r.op() == Op::Create), "the row is written at close");
    // A mode change reaches the staged version itself.
    let set = SetAttr { mode: Some(0o600), ..SetAttr::default() };
    fx.vfs.setattr(fx.node("a.txt").unwrap(), set, &p).unwrap();
    // fsync returns once the file is durable in the tree.
    let fh = fx.open("a.txt", WRONLY, &p).unwrap();
    fx.write(fh, 0, b"two\n", &p).unwrap();
    fx.vfs.flush(fh, true, &p).unwrap();
    assert_eq!(fx.backing("a.txt").unwrap(), b"two\n", "durable at fsync");
    fx.close(fh, &p).unwrap();
    let mode = std::fs::metadata(fx.ws.path().join("a.txt")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777, 0o600);
    // An editor's save: a staged temp renamed over the file, in the journal's order.
    fx.put("a.txt.swp", b"three\n", &p).unwrap();
    fx.vfs.rename(ROOT, OsStr::new("a.txt.swp"), ROOT, OsStr::new("a.txt"), 0, &p).unwrap();
    assert_eq!((fx.backing("a.txt.swp"), fx.backing("a.txt").unwrap()), (None, b"three\n".to_vec()));
    assert_eq!(fx.ws.object(&sha(b"two\n")).as_deref(), Some(&b"two\n"[..]), "the replaced version is kept");
    // A staged version replaced by another before its install: both kept, the last one wins.
    fx.put("b.txt", b"b1\n", &p).unwrap();
    fx.put("b.txt", b"b2\n", &p).unwrap();
    // A refusal is still the errno of close, and the refused bytes never reach the tree.
    blocked(fx.put("c.txt", aws_secret_line(7).as_bytes(), &p));
    fx.engine.make_all_durable();
    assert_eq!(fx.backing("b.txt").unwrap(), b"b2\n");
    assert_eq!(fx.ws.object(&sha(b"b1\n")).as_deref(), Some(&b"b1\n"[..]));
    assert_eq!(fx.backing("c.txt"), None);
    // Closing the engine installs what is still staged.
    fx.put("last.txt", b"last\n", &p).unwrap();
    let Fx { ws, engine, vfs, .. } = fx;
    drop(vfs);
    Arc::into_inner(engine).expect("the only engine").close().unwrap();
    assert_eq!(ws.read("last.txt").unwrap(), b"last\n", "installed when the engine closes");
}

/// Fails the next sync once armed (ENOSPC: a full disk found at writeback, as ext4's delayed
/// allocation reports it at fsync).
#[derive(Default)]
struct FailNextSync(std::sync::atomic::AtomicBool);

impl crate::support::hooked::Intercept for FailNextSync {
    fn before(&self, call: &crate::support::hooked::Call<'_>) -> std::io::Result<()> {
        let sync = matches!(call, crate::support::hooked::Call::Sync { .. });
        if sync && self.0.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
}

#[test]
fn a_close_that_failed_is_never_committed_later_its_bytes_are_kept() {
    // Each case on a workspace whose objects/ holds nothing to drop: with old versions there,
    // a full disk makes room and retries (tests/retention.rs), which this fault (one failed
    // sync) would let succeed.
    let fresh = || {
        let disk = Arc::new(crate::support::hooked::Hooked(FailNextSync::default()));
        let fx = Fx::with(
            Ws::new(),
            EngineOptions {
                workspace: rwfs::history::Options { disk: Some(disk.clone()), ..Default::default() },
                ..EngineOptions::default()
            },
        );
        fx.put("old.txt", b"v1\n", &process(310)).unwrap();
        (disk, fx)
    };
    let p = process(310);
    for (path, before) in [("old.txt", Some(&b"v1\n"[..])), ("new.txt", None)] {
        let (disk, fx) = fresh();
        let bytes = format!("{path}: the draft whose close failed\n").into_bytes();
        disk.0.0.store(true, std::sync::atomic::Ordering::SeqCst);
        let e = fx.put(path, &bytes, &p).expect_err("the close reports the full disk");
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
        // The last close came after it: nothing was committed behind the writer's back.
        assert_eq!(fx.backing(path).as_deref(), before, "{path}: the tree keeps its version");
        assert_eq!(fx.ws.object(&sha(&bytes)), Some(bytes.clone()), "{path}: the bytes are kept");
        let row = fx.ws.rows().into_iter().rfind(|r| r.op() == Op::Recover).expect("a recover row");
        assert_eq!(row.from.as_deref(), Some(path));
        assert_eq!(row.reason.as_deref(), Some("failed_close_draft_kept_in_objects"));
        let report = rwfs::history::verify(&fx.ws.workspace()).unwrap();
        assert!(report.drift.is_empty(), "{path}: the journal says the tree holds what it holds: {report:?}");
        // Space again: the next save commits as usual.
        fx.put(path, b"saved\n", &p).unwrap();
        assert_eq!(fx.backing(path).unwrap(), b"saved\n");
    }
    // A writer that writes again after the failure is committing a new state: its close commits.
    let (disk, fx) = fresh();
    let fh = fx.open("old.txt", TRUNC, &p).unwrap();
    fx.write(fh, 0, b"v2\n", &p).unwrap();
    disk.0.0.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(fx.vfs.flush(fh, false, &p).is_err());
    fx.write(fh, 0, b"v3\n", &p).unwrap();
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("old.txt").unwrap(), b"v3\n");
}

/// A backing filesystem without `RENAME_EXCHANGE` (`EINVAL`, as some network and FUSE
/// filesystems answer).
struct NoExchange;

impl crate::support::hooked::Intercept for NoExchange {
    fn before(&self, call: &crate::support::hooked::Call<'_>) -> std::io::Result<()> {
        use crate::support::hooked::Call;
        match call {
            Call::Rename { how: rwfs::durable::Rename::Exchange, .. } => {
                Err(std::io::Error::from_raw_os_error(libc::EINVAL))
            }
            _ => Ok(()),
        }
    }
}

#[test]
fn without_rename_exchange_every_overwritten_version_is_kept_in_both_modes() {
    for durability in [Durability::Close, Durability::Batch] {
        let disk = Arc::new(crate::support::hooked::Hooked(NoExchange));
        let fx = Fx::with(
            Ws::new(),
            EngineOptions {
                durability: Some(durability),
                workspace: rwfs::history::Options { disk: Some(disk), ..Default::default() },
                ..EngineOptions::default()
            },
        );
        let p = process(340);
        // The first overwrite reads the version it replaces; the later ones find its digest
        // cached and know it by its name's stat alone (nothing open to link aside).
        for v in ["v1\n", "v2\n", "v3\n", "v4\n"] {
            fx.put("f.txt", v.as_bytes(), &p).unwrap();
        }
        fx.engine.make_all_durable();
        assert_eq!(fx.backing("f.txt").unwrap(), b"v4\n", "{durability:?}");
        for v in ["v1\n", "v2\n", "v3\n"] {
            assert_eq!(fx.ws.object(&sha(v.as_bytes())).as_deref(), Some(v.as_bytes()), "{durability:?}: {v:?} kept");
        }
        let report = rwfs::history::verify(&fx.ws.workspace()).unwrap();
        assert!(report.drift.is_empty(), "{durability:?}: {report:?}");
    }
}

#[test]
fn batch_mode_an_fsync_installs_its_own_file_and_leaves_the_window_staged() {
    // Issue 27 item 6: an fsync in batch mode waited for the whole window to be installed.
    let fx = batch_fx(Ws::new());
    let p = process(330);
    fx.put("other.txt", b"staged first\n", &p).unwrap();
    let fh = fx.open("mine.txt", WRONLY, &p).unwrap();
    fx.write(fh, 0, b"mine\n", &p).unwrap();
    fx.vfs.flush(fh, true, &p).unwrap();
    // What the writer sees at fsync(): its bytes installed in the tree.
    assert_eq!(fx.backing("mine.txt").as_deref(), Some(&b"mine\n"[..]), "installed at fsync");
    // The rest of the window is still staged (not installed), still seen through the mount.
    assert_eq!(fx.backing("other.txt"), None, "the other file waits for its window");
    let other = fx.open("other.txt", RDONLY, &p).unwrap();
    assert_eq!(fx.read(other), b"staged first\n");
    fx.close(other, &p).unwrap();
    fx.close(fh, &p).unwrap();
    // Both rows are in the journal, in the order of the closes.
    let rows: Vec<String> = fx.ws.rows().into_iter().filter(|r| r.op() == Op::Create).map(|r| r.path).collect();
    assert_eq!(rows, ["other.txt", "mine.txt"]);
    fx.engine.make_all_durable();
    assert_eq!(fx.backing("other.txt").as_deref(), Some(&b"staged first\n"[..]));
}

/// Counts the filesystem syncs (`syncfs`) and the file syncs (`fsync`) the engine asks for.
#[derive(Default)]
struct CountSyncs {
    fs: Arc<std::sync::atomic::AtomicUsize>,
    files: Arc<std::sync::atomic::AtomicUsize>,
}

impl crate::support::hooked::Intercept for CountSyncs {
    fn before(&self, call: &crate::support::hooked::Call<'_>) -> std::io::Result<()> {
        use crate::support::hooked::Call;
        use std::sync::atomic::Ordering::SeqCst;
        match call {
            Call::SyncFs { .. } => self.fs.fetch_add(1, SeqCst),
            Call::Sync { .. } => self.files.fetch_add(1, SeqCst),
            _ => 0,
        };
        Ok(())
    }
}

/// Write a new file and fsync it through a mount of `durability`; the filesystem and file
/// syncs that fsync cost, and whether the file was in the tree when it returned.
fn syncs_of_one_fsync(durability: Durability) -> (usize, usize, bool) {
    use std::sync::atomic::Ordering::SeqCst;
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path().join(".resilient_write")).unwrap();
    std::fs::write(ws.path().join(".resilient_write/policy.yaml"), "batch_window_ms: 10000\n").unwrap();
    let counts = CountSyncs::default();
    let (fs_syncs, file_syncs) = (counts.fs.clone(), counts.files.clone());
    let disk = Arc::new(crate::support::hooked::Hooked(counts));
    let options = EngineOptions {
        durability: Some(durability),
        workspace: rwfs::history::Options { disk: Some(disk), ..Default::default() },
        ..EngineOptions::default()
    };
    let fx = Fx::with(ws, options);
    let p = process(340);
    let fh = fx.open("save.txt.tmp", WRONLY, &p).unwrap();
    fx.write(fh, 0, b"saved\n", &p).unwrap();
    let before = (fs_syncs.load(SeqCst), file_syncs.load(SeqCst));
    fx.vfs.flush(fh, true, &p).unwrap();
    let cost = (fs_syncs.load(SeqCst) - before.0, file_syncs.load(SeqCst) - before.1);
    let installed = fx.backing("save.txt.tmp").as_deref() == Some(&b"saved\n"[..]);
    fx.close(fh, &p).unwrap();
    // Nothing left staged: the close after the fsync had nothing new.
    let before = fs_syncs.load(SeqCst);
    fx.engine.make_all_durable();
    assert_eq!(fs_syncs.load(SeqCst), before, "{durability:?}: nothing left to drain");
    let rows: Vec<String> = fx.ws.rows().into_iter().filter(|r| r.op() == Op::Create).map(|r| r.path).collect();
    assert_eq!(rows, ["save.txt.tmp"]);
    (cost.0, cost.1, installed)
}

#[test]
fn batch_mode_an_fsync_with_nothing_else_staged_costs_what_close_mode_does() {
    // Issue 27 items 5 and 6: an editor's save (temp, fsync, rename) staged its fsync's
    // version as a window of its own, two `syncfs` of the whole filesystem where close mode
    // pays one `fsync` of the file and one of its directory: batch was slower than close. Now
    // an fsync with nothing else staged commits at once, durably, under the barrier; with
    // others staged it still settles only its own file (the test above).
    let close = syncs_of_one_fsync(Durability::Close);
    let batch = syncs_of_one_fsync(Durability::Batch);
    assert_eq!(close.0, 0, "close mode syncs no filesystem");
    assert!(close.2 && batch.2, "installed when the fsync returned: {close:?} {batch:?}");
    assert_eq!(batch, close, "(filesystem syncs, file syncs, installed): batch as close");
}

/// Fails every `syncfs` (EIO), and the `fsync` of files whose bytes are `bad`: a batch window
/// whose filesystem sync fails.
struct FailSyncFs {
    bad: &'static [u8],
}

impl crate::support::hooked::Intercept for FailSyncFs {
    fn before(&self, call: &crate::support::hooked::Call<'_>) -> std::io::Result<()> {
        use crate::support::hooked::Call;
        let bad = |file: &rwfs::durable::File| {
            let mut buf = vec![0; self.bad.len() + 1];
            let n = nix::sys::uio::pread(file, &mut buf, 0).unwrap_or(0);
            buf[..n] == *self.bad
        };
        match call {
            Call::SyncFs { .. } => Err(std::io::Error::from_raw_os_error(libc::EIO)),
            Call::Sync { file } if bad(file) => Err(std::io::Error::from_raw_os_error(libc::EIO)),
            _ => Ok(()),
        }
    }
}

#[test]
fn batch_mode_a_failed_filesystem_sync_is_charged_only_to_the_files_that_fail_their_own() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path().join(".resilient_write")).unwrap();
    std::fs::write(ws.path().join(".resilient_write/policy.yaml"), "batch_window_ms: 10000\n").unwrap();
    let disk = Arc::new(crate::support::hooked::Hooked(FailSyncFs { bad: b"bad\n" }));
    let options = EngineOptions {
        durability: Some(Durability::Batch),
        workspace: rwfs::history::Options { disk: Some(disk), ..Default::default() },
        ..EngineOptions::default()
    };
    let fx = Fx::with(ws, options);
    let p = process(320);
    fx.put("good.txt", b"good\n", &p).unwrap();
    fx.put("bad.txt", b"bad\n", &p).unwrap();
    fx.put("also.txt", b"also good\n", &p).unwrap();
    fx.engine.make_all_durable();
    assert_eq!(fx.backing("good.txt").as_deref(), Some(&b"good\n"[..]), "synced by itself and installed");
    assert_eq!(fx.backing("also.txt").as_deref(), Some(&b"also good\n"[..]), "synced by itself and installed");
    assert_eq!(fx.backing("bad.txt"), None, "its own sync failed: not installed");
    assert_eq!(fx.ws.object(&sha(b"bad\n")).as_deref(), Some(&b"bad\n"[..]), "its bytes are kept");
    let rows = fx.ws.rows();
    assert!(rows.iter().any(|r| r.path == "bad.txt" && r.op() == Op::Abort), "an abort row says so: {rows:?}");
}

/// Once armed, the next write puts its first half in the file and then fails with ENOSPC, as
/// a write into a full tmpfs does after its last free page.
#[derive(Default)]
struct FailNextWriteHalfway(std::sync::atomic::AtomicBool);

impl crate::support::hooked::Intercept for FailNextWriteHalfway {
    fn before(&self, call: &crate::support::hooked::Call<'_>) -> std::io::Result<()> {
        if let crate::support::hooked::Call::Write { file, data, offset } = call
            && self.0.swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            nix::sys::uio::pwrite(file, &data[..data.len() / 2], *offset as libc::off_t)?;
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
}

/// Issue 25 item 3: a write that failed halfway (4,096 bytes in, then ENOSPC) left the draft
/// holding bytes its digest did not count; the close returned 0 and installed them under a row
/// saying "empty". Now the draft never holds what its row does not say, the writer's close
/// returns the write's error and commits nothing, and what the draft held is kept.
#[test]
fn a_write_that_failed_halfway_is_the_errno_of_close_and_never_reaches_the_tree() {
    let p = process(320);
    let chunk = vec![b'w'; 8192];
    // (path, what the tree held, how the writer opens it, where it writes)
    let cases: [(&str, Option<&[u8]>, i32, u64); 3] = [
        ("new.txt", None, TRUNC, 0),
        ("rewritten.txt", Some(b"the committed version\n"), TRUNC, 0),
        ("patched.txt", Some(&[b'o'; 12_000]), WRONLY, 1000),
    ];
    for (path, before, flags, offset) in cases {
        for durability in [Durability::Close, Durability::Batch] {
            let disk = Arc::new(crate::support::hooked::Hooked(FailNextWriteHalfway::default()));
            let options = EngineOptions {
                workspace: rwfs::history::Options { disk: Some(disk.clone()), ..Default::default() },
                durability: Some(durability),
                ..EngineOptions::default()
            };
            let fx = Fx::with(Ws::new(), options);
            if let Some(bytes) = before {
                fx.put(path, bytes, &p).unwrap();
                fx.engine.make_all_durable();
            }
            let rows = fx.ws.rows().len();
            let fh = fx.open(path, flags, &p).unwrap();
            disk.0.0.store(true, std::sync::atomic::Ordering::SeqCst);
            let e = fx.write(fh, offset, &chunk, &p).expect_err("the write fails");
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{path}: {e}");
            let e = fx.close(fh, &p).expect_err("the close tells the writer again");
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{path} ({durability:?}): {e}");
            fx.engine.make_all_durable();
            assert_eq!(fx.backing(path).as_deref(), before, "{path} ({durability:?}): the tree keeps its version");
            let report = rwfs::history::verify(&fx.ws.workspace()).unwrap();
            assert!(report.drift.is_empty(), "{path} ({durability:?}): every row says what the tree holds: {report:?}");
            let new: Vec<_> = fx.ws.rows().into_iter().skip(rows).collect();
            assert!(new.iter().all(|r| r.op() == Op::Recover), "{path}: no version row: {new:?}");
            if path == "patched.txt" {
                // The draft held the old bytes with half the write over them: kept, named.
                let mut held = before.unwrap().to_vec();
                held[1000..1000 + 4096].copy_from_slice(&chunk[..4096]);
                assert_eq!(fx.ws.object(&sha(&held)), Some(held), "{path}: the draft's bytes are kept");
                assert_eq!(new.len(), 1, "{new:?}");
                assert_eq!(new[0].from.as_deref(), Some(path));
            } else {
                // Cut back to what it held before the failed write: empty, nothing to keep.
                assert!(new.is_empty(), "{path}: {new:?}");
            }
            // The writer tries again with room: its close commits, with the right row.
            let fh = fx.open(path, TRUNC, &p).unwrap();
            fx.write(fh, 0, &chunk, &p).unwrap();
            fx.close(fh, &p).unwrap();
            fx.engine.make_all_durable();
            assert_eq!(fx.backing(path).unwrap(), chunk);
            assert!(rwfs::history::verify(&fx.ws.workspace()).unwrap().is_clean());
        }
    }
}

#[test]
fn random_sequences_over_handles_and_processes_match_the_model() {
    let started = std::time::Instant::now();
    // Many short sequences (each on a fresh workspace) and a few long ones. On tmpfs where
    // there is one: the model is about what a writer sees, and fsync there costs nothing.
    let (short, long) = (1000u64, 20u64);
    for seed in 1..=short {
        run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 30);
    }
    for seed in 1..=long {
        run(seed.wrapping_mul(0xD1B5_4A32_D192_ED03), 300);
    }
    println!("vfs model: {short} sequences of 30 steps and {long} of 300 in {:.1} s", started.elapsed().as_secs_f64());
}

/// The same model in `batch` durability: every handle must see exactly what it sees in
/// `close` mode; the tree catches up at the group commits (checked after a drain, now and then,
/// so staged versions pile up across paths in between).
#[test]
fn batch_mode_random_sequences_match_the_same_model() {
    let started = std::time::Instant::now();
    let (short, long) = (300u64, 6u64);
    for seed in 1..=short {
        run_in(seed.wrapping_mul(0x2545_F491_4F6C_DD1D), 30, Some(Durability::Batch));
    }
    for seed in 1..=long {
        run_in(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 300, Some(Durability::Batch));
    }
    println!(
        "vfs model, batch mode: {short} sequences of 30 steps and {long} of 300 in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// A workspace on tmpfs when the machine has one (else the default temporary directory).
fn scratch_ws() -> Ws {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() { Ws::new_in(shm) } else { Ws::new() }
}

fn run(seed: u64, steps: usize) {
    run_in(seed, steps, None);
}

fn run_in(seed: u64, steps: usize, durability: Option<Durability>) {
    let fx = match durability {
        Some(Durability::Batch) => batch_fx(scratch_ws()),
        _ => Fx::with(scratch_ws(), EngineOptions::default()),
    };
    let batch = durability == Some(Durability::Batch);
    let mut rng = Rng(seed);
    let mut m = Model::default();
    for step in 0..steps {
        let ctx = format!("seed {seed:#x} step {step}");
        let pid = *rng.pick(PIDS);
        let who = process(pid);
        let payload = format!("{step}:{}\n", rng.below(1000)).into_bytes();
        match rng.below(12) {
            // open, maybe creating, maybe truncating
            0 | 1 => {
                if m.handles.len() >= 6 {
                    continue;
                }
                let name = *rng.pick(NAMES);
                let trunc = rng.below(2) == 0;
                let fh = fx.open(name, if trunc { libc::O_RDWR | libc::O_TRUNC } else { libc::O_RDWR }, &who);
                let fh = fh.unwrap_or_else(|e| panic!("{ctx}: open {name}: {e}"));
                let f = match m.names.get(name) {
                    Some(&f) => {
                        let file = &mut m.files[f];
                        if trunc {
                            // A rewrite: the draft (or a refused new file's placeholder) is
                            // emptied, which counts as a change; else an empty draft starts.
                            let had_draft = file.draft.is_some() || (file.refused && file.committed.is_none());
                            let mut writers = file.draft.take().map(|d| d.writers).unwrap_or_default();
                            writers.insert(pid);
                            file.refused = false;
                            file.draft = Some(MDraft { bytes: vec![], dirty: had_draft, writers });
                        }
                        f
                    }
                    None => {
                        let draft = MDraft { bytes: vec![], dirty: false, writers: [pid].into() };
                        m.files.push(MFile { named: true, draft: Some(draft), ..MFile::default() });
                        m.names.insert(name, m.files.len() - 1);
                        m.files.len() - 1
                    }
                };
                m.files[f].handles += 1;
                m.handles.push((fh, f, pid));
            }
            // write at the end or over the start
            2..=4 => {
                if m.handles.is_empty() {
                    continue;
                }
                let (fh, f, owner) = *rng.pick(&m.handles);
                let writer = if rng.below(4) == 0 { pid } else { owner };
                let who = process(writer);
                let file = &mut m.files[f];
                let end = file.visible().len() as u64;
                let at = if rng.below(3) == 0 { 0 } else { end };
                let r = fx.write(fh, at, &payload, &who);
                if file.refused {
                    assert!(r.is_err(), "{ctx}: a refused file takes no bytes");
                    continue;
                }
                r.unwrap_or_else(|e| panic!("{ctx}: write: {e}"));
                let base = file.visible();
                let draft = file.draft.get_or_insert(MDraft { bytes: base, dirty: false, writers: BTreeSet::new() });
                let at = at as usize;
                if draft.bytes.len() < at + payload.len() {
                    draft.bytes.resize(at + payload.len(), 0);
                }
                draft.bytes[at..at + payload.len()].copy_from_slice(&payload);
                draft.dirty = true;
                if file.named {
                    draft.writers.insert(writer);
                }
            }
            // a refused write (a credential)
            5 => {
                if m.handles.is_empty() || rng.below(3) != 0 {
                    continue;
                }
                let (fh, f, owner) = *rng.pick(&m.handles);
                let file = &mut m.files[f];
                if !file.named {
                    continue;
                }
                let end = file.visible().len() as u64;
                let r = fx.write(fh, end, aws_secret_line(step as u64).as_bytes(), &process(owner));
                assert_eq!(r.unwrap_err().kind(), ErrorKind::Blocked, "{ctx}");
                file.refused = true;
                file.draft = None;
            }
            // close by the owner
            6 | 7 => {
                if m.handles.is_empty() {
                    continue;
                }
                let at = rng.below(m.handles.len() as u64) as usize;
                let (fh, _, owner) = m.handles[at];
                let r = fx.close(fh, &process(owner));
                let ok = m.close(at, owner);
                assert_eq!(r.is_ok(), ok, "{ctx}: close: {r:?}");
            }
            // a forked child closes its copy of a descriptor (a flush from another process)
            8 => {
                if m.handles.is_empty() {
                    continue;
                }
                let (fh, f, owner) = *rng.pick(&m.handles);
                let child = owner + 100;
                let r = fx.vfs.flush(fh, false, &process(child));
                let ok = m.flush(f, child);
                assert_eq!(r.is_ok(), ok, "{ctx}: child's close: {r:?}");
            }
            // fsync
            9 => {
                if m.handles.is_empty() {
                    continue;
                }
                let (fh, f, _) = *rng.pick(&m.handles);
                let r = fx.vfs.flush(fh, true, &who);
                let file = &m.files[f];
                if !file.named {
                    r.unwrap();
                } else if file.refused {
                    assert!(r.is_err(), "{ctx}: fsync of a refused file");
                } else {
                    r.unwrap_or_else(|e| panic!("{ctx}: fsync: {e}"));
                    m.commit(f);
                }
            }
            // rename one name over another
            10 => {
                let (from, to) = (*rng.pick(NAMES), *rng.pick(NAMES));
                let Some(&f) = m.names.get(from) else { continue };
                if from == to || (m.files[f].refused && m.files[f].committed.is_none()) {
                    continue;
                }
                fx.vfs
                    .rename(ROOT, OsStr::new(from), ROOT, OsStr::new(to), 0, &who)
                    .unwrap_or_else(|e| panic!("{ctx}: rename {from} {to}: {e}"));
                if m.files[f].committed.is_none() {
                    // A file never committed is committed first, so the tree has what moves.
                    m.commit(f);
                }
                if let Some(old) = m.names.remove(to) {
                    m.files[old].named = false;
                }
                m.names.remove(from);
                m.names.insert(to, f);
            }
            // unlink
            _ => {
                let name = *rng.pick(NAMES);
                let Some(&f) = m.names.get(name) else { continue };
                fx.vfs.unlink(ROOT, OsStr::new(name), &who).unwrap_or_else(|e| panic!("{ctx}: unlink {name}: {e}"));
                m.names.remove(name);
                let file = &mut m.files[f];
                file.named = false;
                if file.committed.is_none() && file.handles == 0 {
                    file.draft = None;
                }
            }
        }
        // In batch mode the tree is compared after a drain, every fourth step.
        let tree = !batch || step % 4 == 0;
        if batch && tree {
            fx.engine.make_all_durable();
        }
        check(&fx, &m, &ctx, tree);
    }
    // Every handle closes; then the tree holds what the model says, and every row is chained.
    while !m.handles.is_empty() {
        let (fh, _, owner) = m.handles[0];
        let r = fx.close(fh, &process(owner));
        let ok = m.close(0, owner);
        assert_eq!(r.is_ok(), ok, "seed {seed:#x} final close: {r:?}");
        fx.engine.make_all_durable();
        check(&fx, &m, &format!("seed {seed:#x} final"), true);
    }
    fx.engine.make_all_durable();
    for name in NAMES {
        let expect = m.names.get(name).and_then(|&f| m.files[f].committed.clone());
        assert_eq!(fx.backing(name), expect, "seed {seed:#x} final {name}");
    }
}

/// After each step: every handle reads what the model shows, and the tree holds each name's
/// committed version (or nothing).
fn check(fx: &Fx, m: &Model, ctx: &str, tree: bool) {
    for &(fh, f, _) in &m.handles {
        let file = &m.files[f];
        let name = m.name_of(f).unwrap_or("(unlinked)");
        assert_eq!(
            String::from_utf8_lossy(&fx.read(fh)),
            String::from_utf8_lossy(&file.visible()),
            "{ctx}: read through handle {fh} of {name}: {file:?}"
        );
    }
    for name in NAMES {
        let expect = m.names.get(name).and_then(|&f| m.files[f].committed.clone());
        // Between group commits, the engine's view (staged versions first) is the tree to be.
        let now = if tree { fx.backing(name) } else { engine_view(fx, name) };
        assert_eq!(now, expect, "{ctx}: the tree (or its staged view) at {name}");
    }
}

/// The content the engine gives `path` now: its staged version in batch mode, else the tree's.
fn engine_view(fx: &Fx, path: &str) -> Option<Vec<u8>> {
    fx.engine.stat(path).unwrap()?;
    let file = fx.engine.files().open(path).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match fx.engine.files().read_at(&file, &mut buf, out.len() as u64).unwrap() {
            0 => return Some(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// The backing entry's permission bits and group.
fn perm_and_group(path: &std::path::Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).expect("stat backing entry");
    (meta.mode() & 0o7777, meta.gid())
}

#[test]
fn new_entries_in_a_setgid_directory_take_its_group_and_subdirectories_its_bit() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    let p = process(300);
    let d = fx.vfs.mkdir(ROOT, OsStr::new("shared"), 0o775, &p).unwrap().ino;
    let dir = fx.ws.path().join("shared");
    // A group the caller is not in (the caller is the test's own uid and gid).
    let group = p.gid + 4242;
    std::os::unix::fs::chown(&dir, None, Some(group)).expect("chown needs root or a group of ours");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o2775)).unwrap();

    let sub = fx.vfs.mkdir(d, OsStr::new("sub"), 0o755, &p).unwrap();
    assert_eq!((sub.stat.perm, sub.stat.gid), (0o2755, group), "a subdirectory is setgid with the group");
    let link = fx.vfs.symlink(d, OsStr::new("link"), OsStr::new("target"), &p).unwrap();
    assert_eq!(link.stat.gid, group);
    let fifo = fx.vfs.mknod(d, OsStr::new("fifo"), libc::S_IFIFO | 0o644, 0, &p).unwrap();
    assert_eq!((fifo.stat.perm, fifo.stat.gid), (0o644, group));
    let fh = fx.open("shared/file", TRUNC, &p).unwrap();
    fx.write(fh, 0, b"x", &p).unwrap();
    fx.close(fh, &p).unwrap();
    for name in ["sub", "link", "fifo", "file"] {
        assert_eq!(perm_and_group(&dir.join(name)).1, group, "{name} in the backing tree");
    }
    assert_eq!(perm_and_group(&dir.join("file")).0, 0o644);
}

/// `setfacl -d -m SPEC` on the directory `ino`, made through the filesystem as a `setfacl` on
/// the mount is: the ACL's bytes are made by `setfacl` on a scratch directory, then set.
fn set_default_acl(fx: &Fx, ino: u64, spec: &str) {
    let scratch = tempfile::tempdir().unwrap();
    let set = std::process::Command::new("setfacl").args(["-d", "-m", spec]).arg(scratch.path()).status().unwrap();
    assert!(set.success(), "the filesystem supports ACLs");
    let path = std::ffi::CString::new(scratch.path().as_os_str().as_encoded_bytes()).unwrap();
    let mut value = vec![0u8; 4096];
    // SAFETY: valid C strings and buffer.
    let n = unsafe {
        libc::getxattr(path.as_ptr(), c"system.posix_acl_default".as_ptr(), value.as_mut_ptr().cast(), value.len())
    };
    assert!(n > 0, "read the default ACL back");
    value.truncate(n as usize);
    let root = Caller { uid: 0, gid: 0, ..process(1) };
    fx.vfs.setxattr(ino, OsStr::new("system.posix_acl_default"), &value, 0, &root).unwrap();
}

#[test]
fn a_default_acl_bounds_new_modes_and_the_umask_applies_only_without_one() {
    if !std::process::Command::new("setfacl").arg("--version").output().is_ok_and(|o| o.status.success()) {
        panic!("setfacl is needed (Debian package acl)");
    }
    let fx = Fx::new();
    let strict = Caller { umask: 0o022, ..process(310) };
    let open = Caller { umask: 0, ..process(310) };
    // Without a default ACL the caller's umask applies (the kernel leaves it to rwfs).
    let fh = fx.open("plain", TRUNC, &strict).unwrap();
    fx.close(fh, &strict).unwrap();
    assert_eq!(perm_and_group(&fx.ws.path().join("plain")).0, 0o644);
    let plain_dir = fx.vfs.mkdir(ROOT, OsStr::new("plain-dir"), 0o777, &strict).unwrap();
    assert_eq!(plain_dir.stat.perm, 0o755);

    let d = fx.vfs.mkdir(ROOT, OsStr::new("acl"), 0o777, &open).unwrap().ino;
    let dir = fx.ws.path().join("acl");
    set_default_acl(&fx, d, "u::r,g::r,o::-");
    // umask 0, mode 0666: the default ACL makes it r--r----- (was rw-rw-rw-).
    let fh = fx.open("acl/file", TRUNC, &open).unwrap();
    fx.write(fh, 0, b"data", &open).unwrap();
    fx.close(fh, &open).unwrap();
    assert_eq!(perm_and_group(&dir.join("file")).0, 0o440, "the committed file");
    assert_eq!(fx.vfs.getattr(fx.node("acl/file").unwrap()).unwrap().stat.perm, 0o440);
    // A strict umask does not apply under a default ACL either.
    let fh = fx.open("acl/umasked", TRUNC, &Caller { umask: 0o722, ..open.clone() }).unwrap();
    fx.close(fh, &open).unwrap();
    assert_eq!(perm_and_group(&dir.join("umasked")).0, 0o440);
    let sub = fx.vfs.mkdir(d, OsStr::new("sub"), 0o777, &strict).unwrap();
    assert_eq!(sub.stat.perm, 0o440);
    let inherited =
        std::process::Command::new("getfacl").args(["-n", "-d", "-c"]).arg(dir.join("sub")).output().unwrap();
    let text = String::from_utf8_lossy(&inherited.stdout);
    assert!(
        text.contains("user::r--") && text.contains("other::---"),
        "the subdirectory inherits the default ACL: {text}"
    );
    let fifo = fx.vfs.mknod(d, OsStr::new("fifo"), libc::S_IFIFO | 0o666, 0, &open).unwrap();
    assert_eq!(fifo.stat.perm, 0o440);

    // A default ACL with a named user: the new file's access ACL carries it, bounded by the mask.
    set_default_acl(&fx, d, "u::rwx,u:4242:rwx,g::r-x,m::r-x,o::-");
    let fh = fx.open("acl/named", TRUNC, &open).unwrap();
    fx.write(fh, 0, b"data", &open).unwrap();
    fx.close(fh, &open).unwrap();
    assert_eq!(perm_and_group(&dir.join("named")).0, 0o640);
    let acl = std::process::Command::new("getfacl").args(["-n", "-c"]).arg(dir.join("named")).output().unwrap();
    let text = String::from_utf8_lossy(&acl.stdout);
    assert!(text.contains("user:4242:rwx") && text.contains("mask::r--"), "{text}");
}

#[test]
fn an_open_directory_removed_or_renamed_over_still_stats_with_no_link() {
    // xfstests 035: fstat of an open directory after it is replaced is ext4's answer, nlink 0.
    let fx = Fx::new();
    let p = process(320);
    fx.vfs.mkdir(ROOT, OsStr::new("d1"), 0o755, &p).unwrap();
    let d2 = fx.vfs.mkdir(ROOT, OsStr::new("d2"), 0o750, &p).unwrap().ino;
    let fh = fx.vfs.opendir(d2).unwrap();
    fx.vfs.rename(ROOT, OsStr::new("d1"), ROOT, OsStr::new("d2"), 0, &p).unwrap();
    let attr = fx.vfs.getattr(d2).expect("fstat of the replaced directory");
    assert_eq!((attr.stat.kind, attr.stat.perm, attr.stat.nlink), (rwfs::durable::FileKind::Dir, 0o750, 0));
    fx.vfs.release(fh, &p);

    let d3 = fx.vfs.mkdir(ROOT, OsStr::new("d3"), 0o700, &p).unwrap().ino;
    let fh = fx.vfs.opendir(d3).unwrap();
    fx.vfs.rmdir(ROOT, OsStr::new("d3")).unwrap();
    let attr = fx.vfs.getattr(d3).expect("fstat of the removed directory");
    assert_eq!((attr.stat.kind, attr.stat.nlink), (rwfs::durable::FileKind::Dir, 0));
    fx.vfs.release(fh, &p);
}

#[test]
fn a_files_draft_does_not_show_rwfs_own_note_among_its_attributes() {
    let fx = Fx::new();
    let p = process(330);
    let fh = fx.open("noted.txt", TRUNC, &p).unwrap();
    fx.write(fh, 0, b"draft", &p).unwrap();
    let ino = fx.node("noted.txt").unwrap();
    let names = fx.vfs.listxattr(ino).unwrap();
    assert!(!String::from_utf8_lossy(&names).contains("rwfs"), "{names:?}");
    assert!(fx.vfs.getxattr(ino, OsStr::new("user.rwfs.target")).is_err());
    fx.close(fh, &p).unwrap();
}

#[test]
fn a_version_staged_in_batch_mode_does_not_show_rwfs_own_note_either() {
    // Closed, acknowledged and served from drafts/ until its install (xfstests generic/097).
    let fx = batch_fx(Ws::new());
    let p = process(331);
    fx.put("staged.txt", b"staged\n", &p).unwrap();
    assert_eq!(fx.backing("staged.txt"), None, "still staged");
    let ino = fx.node("staged.txt").unwrap();
    let names = fx.vfs.listxattr(ino).unwrap();
    assert!(!String::from_utf8_lossy(&names).contains("rwfs"), "{names:?}");
    assert!(fx.vfs.getxattr(ino, OsStr::new("user.rwfs.target")).is_err());
}

#[test]
fn fallocate_grows_a_draft_with_zeros_or_only_reserves_and_refuses_modes_that_change_bytes() {
    let fx = Fx::new();
    let p = process(332);
    fx.put("f.bin", b"abc", &p).unwrap();
    let fh = fx.open("f.bin", WRONLY, &p).unwrap();
    // Blocks only: the file keeps its size and its bytes.
    fx.vfs.fallocate(fh, 0, 1 << 20, libc::FALLOC_FL_KEEP_SIZE, &p).unwrap();
    assert_eq!(fx.vfs.getattr(fx.node("f.bin").unwrap()).unwrap().stat.size, 3);
    // Mode 0 past the end: the file grows with zeros, committed at close like a write.
    fx.vfs.fallocate(fh, 2, 6, 0, &p).unwrap();
    assert_eq!(fx.vfs.getattr(fx.node("f.bin").unwrap()).unwrap().stat.size, 8);
    for mode in [
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_ZERO_RANGE,
        libc::FALLOC_FL_COLLAPSE_RANGE,
    ] {
        let e = fx.vfs.fallocate(fh, 0, 1, mode, &p).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "mode {mode:#x}");
    }
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("f.bin").unwrap(), b"abc\0\0\0\0\0");
    let rows = fx.ws.rows();
    assert_eq!(rows.last().map(|r| (r.path.as_str(), r.bytes)), Some(("f.bin", 8)));
}

#[test]
fn a_chmod_to_setgid_by_a_caller_outside_the_files_group_drops_the_bit() {
    // As ext4 does (xfstests generic/375): the kernel leaves it to a FUSE filesystem.
    let fx = Fx::new();
    let root = process(333);
    fx.put("sgid.txt", b"x", &root).unwrap();
    std::fs::create_dir(fx.ws.abs("sgid.d")).unwrap();
    for name in ["sgid.txt", "sgid.d"] {
        let ino = fx.node(name).unwrap();
        let chown = SetAttr { uid: Some(100), gid: Some(100), ..SetAttr::default() };
        fx.vfs.setattr(ino, chown, &root).unwrap();
        let chmod = |who: &Caller| {
            fx.vfs.setattr(ino, SetAttr { mode: Some(0o2777), ..SetAttr::default() }, who).unwrap().stat.perm
        };
        let member = Caller { uid: 100, gid: 100, ..process(334) };
        let supplementary = Caller { uid: 100, gid: 101, groups: vec![7, 100], ..process(335) };
        let outsider = Caller { uid: 100, gid: 101, groups: vec![7], ..process(336) };
        assert_eq!(chmod(&member), 0o2777, "{name}: the owner in the file's group");
        assert_eq!(chmod(&supplementary), 0o2777, "{name}: in the group through a supplementary group");
        assert_eq!(chmod(&outsider), 0o777, "{name}: outside the group, the bit is dropped");
        assert_eq!(chmod(&root), 0o2777, "{name}: root keeps it");
        // And so does setting the access ACL (`setfacl -m u::rwx,g::rwx,o::rwx`).
        let acl: Vec<u8> =
            [2u32.to_le_bytes().to_vec(), acl_entry(0x01, 7), acl_entry(0x04, 7), acl_entry(0x20, 7)].concat();
        let acl_attr = OsStr::new("system.posix_acl_access");
        fx.vfs.setxattr(ino, acl_attr, &acl, 0, &member).unwrap();
        assert_eq!(fx.vfs.getattr(ino).unwrap().stat.perm, 0o2777, "{name}: an ACL set by a member");
        fx.vfs.setxattr(ino, acl_attr, &acl, 0, &outsider).unwrap();
        assert_eq!(fx.vfs.getattr(ino).unwrap().stat.perm, 0o777, "{name}: an ACL set by an outsider");
    }
}

/// One entry of an ACL's extended attribute: tag, permissions, no qualifier.
fn acl_entry(tag: u16, perm: u16) -> Vec<u8> {
    [tag.to_le_bytes().to_vec(), perm.to_le_bytes().to_vec(), u32::MAX.to_le_bytes().to_vec()].concat()
}

#[test]
fn batch_mode_holds_a_bounded_number_of_staged_versions() {
    // Each staged version holds descriptors until its install: a writer faster than the
    // committer (10,000 creates under load) ran the daemon out of them. Past 1,024 staged
    // versions a close waits for the committer instead, so with a window nothing else would
    // end, the first versions are installed before the last close returns.
    let fx = batch_fx(Ws::new());
    let p = process(337);
    for i in 0..1100 {
        fx.put(&format!("f{i:04}"), b"x", &p).unwrap();
    }
    assert!(fx.backing("f0000").is_some(), "the batch made room by installing what it held");
    assert!(fx.backing("f1099").is_none(), "the last close is still staged (the window is long)");
}

#[test]
fn batch_mode_readers_never_see_a_version_go_back_while_it_is_installed() {
    // `git diff` through a batch mount failed with "short read while indexing": an install
    // swaps the staged version into the tree (RENAME_EXCHANGE), which leaves the version it
    // replaced under the staged one's name in drafts/ until the install is settled, and reads
    // of the path still went there. Every version here names itself (`n` lines of `n`), and
    // each close of a staged path installs the previous version first, so installs and reads
    // overlap thousands of times: a reader must never see an older version than one it saw.
    let fx = batch_fx_with_window(Ws::new(), 1);
    let version = |n: usize| format!("{n:06}\n").repeat(n).into_bytes();
    let number = |bytes: &[u8]| -> usize {
        let n: usize = std::str::from_utf8(&bytes[..6]).unwrap().parse().unwrap();
        assert_eq!(bytes, version(n), "a whole version");
        n
    };
    fx.put("a.txt", &version(1), &process(400)).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for reader in 0..2u32 {
            let (fx, done) = (&fx, &done);
            s.spawn(move || {
                let p = process(401 + reader);
                let mut seen = 1;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let ino = fx.node("a.txt").unwrap();
                    let size = fx.vfs.getattr(ino).unwrap().stat.size as usize;
                    assert!(size / 7 >= seen, "stat went back from version {seen} to {}", size / 7);
                    seen = size / 7;
                    let fh = fx.vfs.open(ino, RDONLY, &p).unwrap().fh;
                    let n = number(&fx.read(fh));
                    fx.close(fh, &p).unwrap();
                    assert!(n >= seen, "a read went back from version {seen} to {n}");
                    seen = n;
                }
            });
        }
        let p = process(400);
        for n in 2..=400 {
            // Each version longer than the last, written over it in one call, without a
            // truncation a reader could see.
            let fh = fx.open("a.txt", WRONLY, &p).unwrap();
            fx.write(fh, 0, &version(n), &p).unwrap();
            fx.close(fh, &p).unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    fx.engine.make_all_durable();
    assert_eq!(fx.backing("a.txt").unwrap(), version(400));
}

/// `size` bytes of comment lines for `app.env`, with `line` put at the line start at or before
/// `at`.
fn env_text(size: usize, at: usize, line: &str) -> Vec<u8> {
    let filler = b"# a comment line of the environment file, nothing in it\n";
    let mut text: Vec<u8> = filler.iter().copied().cycle().take(size).collect();
    let at = text[..at].iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    text.splice(at..at + line.len(), line.bytes());
    text
}

/// Write `text` to `path` from its start in `chunk`-byte writes, then close: the index of the
/// write refused, if any, and the close's result.
fn write_in_chunks(fx: &Fx, path: &str, text: &[u8], chunk: usize, who: &Caller) -> (Option<usize>, Result<()>) {
    let fh = fx.open(path, TRUNC, who).unwrap();
    let mut refused = None;
    for (i, piece) in text.chunks(chunk).enumerate() {
        if let Err(e) = fx.write(fh, (i * chunk) as u64, piece, who) {
            assert_eq!(e.kind(), ErrorKind::Blocked, "{e}");
            refused = Some(i);
            break;
        }
    }
    (refused, fx.close(fh, who))
}

#[test]
fn a_draft_s_bytes_are_scanned_once_and_judged_as_the_whole_file() {
    let fx = Fx::new();
    let p = process(450);
    let scanned = || fx.engine.scanned_bytes();
    // One write: judged then, and that judgement is the commit's (nothing scanned at close).
    let small = env_text(4000, 0, "");
    let before = scanned();
    fx.put("app.env", &small, &p).unwrap();
    assert_eq!(scanned() - before, small.len() as u64, "scanned once, at the write");
    // A blockable value the bytes alone do not make certain: refused at close, as the whole
    // file, however it was written; a write after the first means the whole is judged again.
    let secret = "DB_PASSWORD=Zq8vLm2pXr7tKw4n\n";
    let medium = env_text(4000, 2000, secret);
    blocked(fx.put("app.env", &medium, &p));
    let (refused, closed) = write_in_chunks(&fx, "app.env", &medium, 1000, &p);
    assert_eq!(refused, None, "not certain from any one write");
    blocked(closed);
    assert_eq!(fx.backing("app.env").unwrap(), small, "the tree keeps the clean version");

    // A big file written from its start: its 16 MiB windows are judged as they fill, so the
    // same value is refused at the write that fills its window, not at close.
    let window = rwfs::engine::SCAN_MAX;
    let mib = 1 << 20;
    let big = env_text(window + 3 * mib, 5 * mib, secret);
    let (refused, closed) = write_in_chunks(&fx, "app.env", &big, mib, &p);
    assert_eq!(refused, Some(window / mib), "refused at the write past the first window");
    blocked(closed);
    // Clean, past the first window: every byte scanned, and only the first window's twice (its
    // writes are checked as they come, before the file is known to be big).
    let clean = env_text(window + 8 * mib, 0, "");
    let before = scanned();
    let (refused, closed) = write_in_chunks(&fx, "app.env", &clean, mib, &p);
    assert_eq!(refused, None);
    closed.unwrap();
    let twice = scanned() - before;
    assert!(twice >= clean.len() as u64, "every byte scanned: {twice} of {}", clean.len());
    assert!(twice <= (clean.len() + window + mib) as u64, "scanned once past the first window: {twice} bytes");
    assert_eq!(fx.backing("app.env").unwrap(), clean);
    // The windows a commit makes, wherever the value sits: across the first window's end
    // (caught by the overlap), in the last (judged at close).
    for at in [window - 10, window + 6 * mib] {
        let text = env_text(window + 8 * mib, at, secret);
        let (_, closed) = write_in_chunks(&fx, "app.env", &text, mib, &p);
        blocked(closed);
        assert_eq!(fx.backing("app.env").unwrap(), clean, "value at byte {at}");
    }
}

#[test]
fn directories_kept_open_follow_every_change_to_them() {
    // Issue 27 item 3: the engine keeps directories open by path (`durable/dirs.rs`) and
    // remembers what each gives new entries. Every change through the mount forgets what it
    // touched; a change behind its back is seen once what was kept expires.
    let fx = Fx::new();
    let p = process(7);
    fx.vfs.mkdir(ROOT, OsStr::new("d"), 0o755, &p).unwrap();
    fx.put("d/a", b"a\n", &p).unwrap();
    // Renamed away and made again: new files go to the new `d`.
    fx.vfs.rename(ROOT, OsStr::new("d"), ROOT, OsStr::new("e"), 0, &p).unwrap();
    fx.vfs.mkdir(ROOT, OsStr::new("d"), 0o755, &p).unwrap();
    fx.put("d/b", b"b\n", &p).unwrap();
    assert_eq!((fx.backing("d/b").as_deref(), fx.backing("e/b")), (Some(&b"b\n"[..]), None));
    // Removed and made again.
    fx.vfs.unlink(fx.node("d").unwrap(), OsStr::new("b"), &p).unwrap();
    fx.vfs.rmdir(ROOT, OsStr::new("d")).unwrap();
    fx.vfs.mkdir(ROOT, OsStr::new("d"), 0o755, &p).unwrap();
    fx.put("d/c", b"c\n", &p).unwrap();
    assert_eq!(fx.backing("d/c").unwrap(), b"c\n");
    // Made setgid through the mount: the next new file takes the directory's group.
    let gid = 4321;
    let set = SetAttr { gid: Some(gid), mode: Some(0o2775), ..SetAttr::default() };
    let root = Caller { uid: 0, gid: 0, ..process(8) };
    fx.vfs.setattr(fx.node("d").unwrap(), set, &root).unwrap();
    fx.put("d/g", b"g\n", &p).unwrap();
    let meta = |path: &str| std::fs::metadata(fx.ws.path().join(path)).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta("d/g").gid(), gid, "the setgid directory's group");
    // Renamed behind the mount's back (in the backing tree itself), and made again there: seen
    // once what was kept expires (at most a second later).
    std::fs::rename(fx.ws.path().join("d"), fx.ws.path().join("f")).unwrap();
    std::fs::create_dir(fx.ws.path().join("d")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    fx.put("d/h", b"h\n", &p).unwrap();
    assert_eq!((fx.backing("d/h").as_deref(), fx.backing("f/h")), (Some(&b"h\n"[..]), None));
    // `drafts/` removed behind the mount's back: the next new file makes it again.
    std::fs::remove_dir(fx.ws.path().join(".resilient_write/drafts")).unwrap();
    fx.put("d/i", b"i\n", &p).unwrap();
    assert_eq!(fx.backing("d/i").unwrap(), b"i\n");
}

#[test]
fn a_name_made_behind_the_kernels_back_between_its_lookup_and_its_create_loses_no_bytes() {
    // Issue 27 item 3: a create of a name the kernel believes absent does not ask the disk
    // again where the kernel may keep that belief (the engine tells it of every name it makes,
    // before the change is acknowledged). In the instant between the kernel's lookup and its
    // create an MCP write may still make the name: the close commits over it, as it would over
    // one made while the file is written, and the MCP version is kept as the one before.
    let fx = Fx::new();
    let p = process(11);
    let looked = fx.vfs.lookup(ROOT, OsStr::new("race"));
    assert_eq!(looked.map(|a| a.ino).map_err(|e| e.reason().clone()), Err(Reason::NotFound));
    write(&fx.engine, "race", b"mcp\n", WriteMode::Create).unwrap();
    let (_, fh) = fx.vfs.create(ROOT, OsStr::new("race"), 0o644, WRONLY | libc::O_CREAT, &p).unwrap();
    fx.write(fh, 0, b"mount\n", &p).unwrap();
    fx.close(fh, &p).unwrap();
    assert_eq!(fx.backing("race").unwrap(), b"mount\n");
    assert_eq!(fx.ws.object(&sha(b"mcp\n")).as_deref(), Some(&b"mcp\n"[..]), "the MCP version is kept");
    let ops: Vec<Op> = fx.ws.rows().iter().filter(|r| r.path == "race").map(|r| r.op()).collect();
    assert_eq!(ops, vec![Op::Create, Op::Write], "the mount's commit is journaled as the overwrite it is");
}
