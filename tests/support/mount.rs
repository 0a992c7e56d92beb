//! A real mount for a test: a temporary workspace served by the `rwfs` binary (`rwfs mount
//! --daemon`), unmounted (drafts committed) when the fixture drops. Needs root and
//! `/dev/fuse`, as CI has; without them the test fails, it does not skip.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::Ws;

/// A workspace and the mount that serves it.
pub struct Mounted {
    pub ws: Ws,
    /// The mountpoint (the workspace itself when mounted over it).
    mountpoint: PathBuf,
    _mnt: Option<tempfile::TempDir>,
    log: PathBuf,
    mounted: bool,
}

/// The `rwfs` binary under test.
pub fn rwfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rwfs"))
}

impl Mounted {
    /// A fresh workspace mounted at a separate mountpoint.
    pub fn new() -> Mounted {
        Mounted::with(Ws::new(), false, &[])
    }

    /// A fresh workspace mounted over itself.
    pub fn over_itself() -> Mounted {
        Mounted::with(Ws::new(), true, &[])
    }

    /// `ws` (already prepared) mounted with extra `rwfs mount` arguments.
    pub fn with(ws: Ws, over_itself: bool, args: &[&str]) -> Mounted {
        let log = ws.path().with_extension("log");
        let (mountpoint, mnt) = if over_itself {
            (ws.path().to_path_buf(), None)
        } else {
            let mnt = tempfile::Builder::new().prefix("rwfs-mnt-").tempdir().expect("mountpoint");
            (mnt.path().to_path_buf(), Some(mnt))
        };
        let mut cmd = rwfs();
        cmd.arg("mount").arg(ws.path());
        if !over_itself {
            cmd.arg(&mountpoint);
        }
        cmd.arg("--daemon").args(args).env("RWFS_LOG_FILE", &log).env("RWFS_LOG", "info");
        let out = cmd.output().expect("run rwfs mount");
        assert!(
            out.status.success(),
            "rwfs mount failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Mounted { ws, mountpoint, _mnt: mnt, log, mounted: true }
    }

    /// A path through the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mountpoint.join(rel)
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The bytes of `rel` in the backing tree (only for separate mountpoints: over itself the
    /// backing tree is under the mount).
    pub fn backing(&self, rel: &str) -> Option<Vec<u8>> {
        assert_ne!(self.mountpoint, self.ws.path(), "the backing tree is covered by the mount");
        self.ws.read(rel)
    }

    /// Write through the mount with plain `std::fs`.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> std::io::Result<()> {
        if let Some(parent) = self.path(rel).parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(self.path(rel), bytes)
    }

    pub fn read(&self, rel: &str) -> std::io::Result<Vec<u8>> {
        std::fs::read(self.path(rel))
    }

    /// Run `program args` in the mount's root; panics with its output when it fails.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        let out = Command::new(program)
            .args(args)
            .current_dir(&self.mountpoint)
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Is the mountpoint an rwfs mount now?
    pub fn is_mounted(&self) -> bool {
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let point = self.mountpoint.to_string_lossy().to_string();
        info.lines().any(|l| l.contains(" - fuse.rwfs ") && l.split(' ').nth(4) == Some(point.as_str()))
    }

    /// `rwfs unmount`: drafts committed, the mount gone.
    pub fn unmount(&mut self) {
        if !self.mounted {
            return;
        }
        self.mounted = false;
        let out = rwfs().arg("unmount").arg(&self.mountpoint).output().expect("run rwfs unmount");
        if !out.status.success() || self.is_mounted() {
            let _ = nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH);
            panic!("rwfs unmount failed: {}\n{}", String::from_utf8_lossy(&out.stderr), self.log());
        }
    }

    /// The mount is gone without `rwfs unmount` (the daemon was killed): detach what is left.
    pub fn forget(&mut self) {
        self.mounted = false;
        let _ = nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH);
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.mounted {
            self.mounted = false;
            let _ = rwfs().arg("unmount").arg(&self.mountpoint).output();
            if self.is_mounted() {
                let _ = nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH);
            }
        }
    }
}
