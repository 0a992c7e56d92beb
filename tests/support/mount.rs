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
    /// Extra `rwfs mount` arguments.
    args: Vec<String>,
    /// Extra environment of the daemon.
    env: Vec<(String, String)>,
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
        Mounted::with_env(ws, over_itself, args, &[])
    }

    /// `ws` mounted with extra `rwfs mount` arguments and daemon environment.
    pub fn with_env(ws: Ws, over_itself: bool, args: &[&str], env: &[(&str, &str)]) -> Mounted {
        let log = ws.path().with_extension("log");
        let (mountpoint, mnt) = if over_itself {
            (ws.path().to_path_buf(), None)
        } else {
            let mnt = tempfile::Builder::new().prefix("rwfs-mnt-").tempdir().expect("mountpoint");
            (mnt.path().to_path_buf(), Some(mnt))
        };
        let mut m = Mounted {
            ws,
            mountpoint,
            _mnt: mnt,
            log,
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            mounted: false,
        };
        m.start();
        m
    }

    /// `rwfs mount --daemon` of the workspace at the mountpoint, with the fixture's arguments.
    fn start(&mut self) {
        let mut cmd = rwfs();
        cmd.arg("mount").arg(self.ws.path());
        if self.mountpoint != self.ws.path() {
            cmd.arg(&self.mountpoint);
        }
        cmd.arg("--daemon").args(&self.args).env("RWFS_LOG_FILE", &self.log).env("RWFS_LOG", "info");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let out = cmd.output().expect("run rwfs mount");
        assert!(
            out.status.success(),
            "rwfs mount failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        self.mounted = true;
    }

    /// Mount the same workspace at the same mountpoint again, after `unmount` or `kill`.
    pub fn remount(&mut self) {
        assert!(!self.mounted, "still mounted");
        self.start();
    }

    /// The daemon's pid, from the workspace lock it holds.
    pub fn daemon_pid(&self) -> i32 {
        let out =
            rwfs().args(["status", "--json", "--workspace"]).arg(self.ws.path()).output().expect("run rwfs status");
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
        let pid = status["owner"]["pid"].as_i64().unwrap_or_else(|| panic!("no owner in {status}"));
        i32::try_from(pid).expect("a pid")
    }

    /// SIGKILL the daemon (no draft committed, nothing unmounted cleanly), wait until it is
    /// gone, then detach the dead mount.
    pub fn kill(&mut self) {
        self.lose_daemon();
        self.forget();
    }

    /// SIGKILL the daemon and wait until it is gone, leaving its dead mount in place (what a
    /// user meets after a crash).
    pub fn lose_daemon(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.daemon_pid());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("kill the daemon");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // Gone, or a zombie nobody has reaped yet (its mount connection is closed either way).
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
        };
        while alive() {
            assert!(std::time::Instant::now() < deadline, "the daemon outlived SIGKILL");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.mounted = false;
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
    #[track_caller]
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        super::run_ok(Command::new(program).args(args).current_dir(&self.mountpoint))
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
