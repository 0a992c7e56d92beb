//! `rwfs mount`, `rwfs unmount`, and the list of active mounts `rwfs status` shows.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::errln;
use super::{Exit, MountArgs, UnmountArgs};
use crate::app::control::{self, Request};
use crate::app::daemon::{self, MountRequest};
use crate::engine::Options;
use crate::error::{Error, Reason, Result};

/// The filesystem type rwfs mounts show in `/proc/self/mountinfo`.
const FS_TYPE: &str = "fuse.rwfs";

pub fn mount(root: PathBuf, options: Options, args: MountArgs) -> Result<Exit> {
    let MountArgs { target, mountpoint, daemon, options: how } = args;
    let blocked_errno =
        match &how.blocked_errno {
            Some(name) => Some(crate::policy::errno_named(name).ok_or(Reason::InvalidArgument {
                what: "blocked errno (EACCES, EPERM, EIO, EROFS, ENOSPC or EDQUOT)",
            })?),
            None => None,
        };
    let durability = match how.durability.as_deref() {
        Some("batch") => Some(crate::policy::Durability::Batch),
        Some(_) => Some(crate::policy::Durability::Close),
        None => None,
    };
    let options = Options { durability, ..options };
    let workspace = target.unwrap_or(root);
    if let Some(at) = mountpoint.as_deref().filter(|m| !m.is_dir()) {
        return Err(Error::from(Reason::InvalidArgument {
            what: "MOUNTPOINT: no such directory (create it with `mkdir -p`, or leave MOUNTPOINT out to \
                   mount the workspace over itself)",
        })
        .at(at.display().to_string()));
    }
    remove_dead_mounts(&workspace, mountpoint.as_deref());
    refuse_if_mounted(&workspace, mountpoint.as_deref())?;
    wait_for_departing_daemon(&workspace);
    daemon::run(MountRequest {
        workspace,
        mountpoint,
        daemon,
        read_only: how.read_only,
        allow_other: how.allow_other,
        blocked_errno,
        kernel_passthrough: !how.no_kernel_passthrough,
        stderr_notice: how.stderr_notice.as_deref().map(|v| v == "on"),
        pass_through: how.pass_through,
        mcp_http: how.mcp_http,
        options,
    })?;
    Ok(Exit::Ok)
}

impl super::MountOptionArgs {
    /// These options as `rwfs mount` arguments (`rwfs run` starts the mount as a child).
    pub(super) fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        let mut flag = |on: bool, name: &str| on.then(|| args.push(name.to_string()));
        flag(self.read_only, "--read-only");
        flag(self.allow_other, "--allow-other");
        flag(self.no_kernel_passthrough, "--no-kernel-passthrough");
        let valued = [
            ("--blocked-errno", self.blocked_errno.clone()),
            ("--durability", self.durability.clone()),
            ("--stderr-notice", self.stderr_notice.clone()),
            ("--mcp-http", self.mcp_http.map(|a| a.to_string())),
        ];
        for (name, value) in valued.into_iter().filter_map(|(n, v)| v.map(|v| (n, v))) {
            args.extend([name.to_string(), value]);
        }
        for glob in &self.pass_through {
            args.extend(["--pass-through".to_string(), glob.clone()]);
        }
        args
    }
}

/// Is `path` a mountpoint whose FUSE daemon is gone (the kernel answers `ENOTCONN`, or
/// `ECONNABORTED` to a request the connection's end caught)?
fn is_dead_mount(path: &Path) -> bool {
    // Opened, not stat'ed: the kernel may still answer a stat from its attribute cache.
    std::fs::read_dir(path)
        .is_err_and(|e| matches!(e.raw_os_error(), Some(nix::libc::ENOTCONN | nix::libc::ECONNABORTED)))
}

/// Detach dead mounts of this workspace (at `workspace` itself, at `mountpoint`, or any whose
/// source it is), saying so: a crashed daemon leaves one behind, and mounting again is how a
/// user resumes.
fn remove_dead_mounts(workspace: &Path, mountpoint: Option<&Path>) {
    let canonical = std::fs::canonicalize(workspace).ok();
    let mut dead: Vec<PathBuf> = [Some(workspace), mountpoint]
        .into_iter()
        .flatten()
        .filter(|p| is_dead_mount(p))
        .map(Path::to_path_buf)
        .collect();
    dead.extend(
        mounts()
            .into_iter()
            .filter(|m| canonical.as_ref() == Some(&m.workspace) && is_dead_mount(&m.mountpoint))
            .map(|m| m.mountpoint),
    );
    dead.dedup();
    for path in dead {
        match nix::mount::umount2(&path, nix::mount::MntFlags::MNT_DETACH) {
            Ok(()) => errln!("rwfs: removed the dead mount on {} (its daemon had stopped)", path.display()),
            Err(e) => errln!("rwfs: cannot remove the dead mount on {}: {e}", path.display()),
        }
    }
}

/// How long a new mount waits for a daemon that is going away.
const DEPARTING_WAIT: Duration = Duration::from_secs(10);

/// `umount` returns once the kernel has detached the mount, before its daemon has finished
/// stopping (drafts settled, watermark synced) and released the workspace lock: an immediate
/// mount waits for that daemon (up to [`DEPARTING_WAIT`], saying so) instead of failing with
/// `workspace_locked`. Only an `rwfs mount` process holding the lock is waited for — no mount
/// of this workspace is live any more (`refuse_if_mounted` ran first), so it is going away; an
/// MCP session or a CLI command owning the workspace is not, and the engine reports it at once.
fn wait_for_departing_daemon(workspace: &Path) {
    let lock = workspace.join(crate::durable::STATE_DIR).join(crate::history::LOCK_FILE);
    let Ok(file) = std::fs::File::open(&lock) else {
        return;
    };
    let deadline = Instant::now() + DEPARTING_WAIT;
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => {
                let _ = file.unlock();
                return;
            }
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(_)) => return,
        }
        let holder = std::fs::read_to_string(&lock)
            .ok()
            .and_then(|text| serde_json::from_str::<crate::history::LockInfo>(text.trim()).ok())
            .map(|info| info.pid);
        let Some(pid) = holder.filter(|&pid| is_mount_daemon(pid)) else {
            return;
        };
        if Instant::now() >= deadline {
            return;
        }
        if !said {
            errln!(
                "rwfs: waiting up to {} s for the previous daemon of {} (pid {pid}) to finish stopping",
                DEPARTING_WAIT.as_secs(),
                workspace.display()
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Is process `pid` an `rwfs mount` (by its command line)?
fn is_mount_daemon(pid: u32) -> bool {
    let Some(args) = crate::process::args(pid) else {
        return false;
    };
    let mut args = args.into_iter();
    let program = args.next().unwrap_or_default();
    Path::new(&program).file_name().is_some_and(|name| name.to_string_lossy().starts_with("rwfs"))
        && args.any(|arg| arg == "mount")
}

/// An rwfs mount already serving `workspace` (or at `mountpoint`) is an error naming it.
fn refuse_if_mounted(workspace: &Path, mountpoint: Option<&Path>) -> Result<()> {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let (workspace, mountpoint) = (canonical(workspace), mountpoint.and_then(canonical));
    let taken = mounts().into_iter().find(|m| {
        workspace.as_ref().is_some_and(|w| *w == m.workspace || *w == m.mountpoint)
            || mountpoint.as_ref() == Some(&m.mountpoint)
    });
    match taken {
        Some(m) => {
            let pid = daemon::running(&m.workspace).and_then(|d| d["pid"].as_u64()).and_then(|p| u32::try_from(p).ok());
            let mountpoint = m.mountpoint.display().to_string();
            Err(Error::from(Reason::AlreadyMounted { pid, mountpoint }).at(m.workspace.display().to_string()))
        }
        None => Ok(()),
    }
}

/// An rwfs mount of this machine.
#[derive(Debug, Clone)]
pub struct Mounted {
    pub workspace: PathBuf,
    pub mountpoint: PathBuf,
}

/// Every rwfs mount, from `/proc/self/mountinfo`.
pub fn mounts() -> Vec<Mounted> {
    crate::process::mounts()
        .into_iter()
        .filter(|m| m.fs_type == FS_TYPE)
        .map(|m| Mounted { workspace: m.source, mountpoint: m.mountpoint })
        .collect()
}

/// The mounts of the workspace at `root` (its canonical path: over itself, or elsewhere with it
/// as the source), each with its daemon's status (what `rwfs status` lists).
pub fn mount_statuses(root: &Path) -> Vec<(Mounted, Option<Value>)> {
    mounts()
        .into_iter()
        .filter(|m| m.workspace == root || m.mountpoint == root)
        .map(|m| {
            let status = daemon::running(&m.workspace);
            (m, status)
        })
        .collect()
}

pub fn unmount(args: &UnmountArgs) -> Result<Exit> {
    // A dead mount cannot be resolved (ENOTCONN): then its path as given, made absolute.
    let path = std::fs::canonicalize(&args.path)
        .or_else(|_| std::path::absolute(&args.path))
        .unwrap_or_else(|_| args.path.clone());
    let Some(mounted) = mounts().into_iter().find(|m| m.mountpoint == path || m.workspace == path) else {
        return Err(Error::from(Reason::NotMounted).at(path.display().to_string()));
    };
    match control::call(&mounted.workspace, Request::Shutdown, &[]) {
        Ok(_) => {
            // The daemon detaches the mount at once (lazily), serves processes still inside
            // for up to its grace period, then closes the engine (journal, settled watermark)
            // and releases the workspace's lock, its last act: only then has it stopped.
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut detached = None;
            while Instant::now() < deadline && (detached.is_none() || is_locked(&mounted.workspace)) {
                if detached.is_none() && !mounted_at(&mounted.mountpoint) {
                    detached = Some((Instant::now(), crate::time::stamp(std::time::SystemTime::now())));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let at = mounted.mountpoint.display();
            match detached {
                Some(_) if is_locked(&mounted.workspace) => {
                    errln!("rwfs: unmounted {at}, but its daemon is still stopping after 30 s");
                }
                // The daemon stayed for processes still inside the detached mount.
                Some((when, stamp)) if when.elapsed() >= IN_USE_AFTER => errln!(
                    "rwfs: unmounted {at} at {stamp}: processes still inside it (a working directory or an \
                     open file there) were served {:.1} s more, their writes gated and journaled; its daemon \
                     stopped at {}, and those processes now get ENOTCONN there (`cd {at}` again reaches the \
                     directory itself)",
                    when.elapsed().as_secs_f64(),
                    crate::time::stamp(std::time::SystemTime::now()),
                ),
                Some(_) => errln!("rwfs: unmounted {at} (its daemon committed or quarantined every draft and stopped)"),
                None => {
                    errln!("rwfs: the daemon did not unmount in 30 s; unmounting lazily");
                    return lazy_unmount(&mounted.mountpoint);
                }
            }
            return Ok(Exit::Ok);
        }
        Err(e) => errln!("rwfs: no daemon answers ({e}); unmounting lazily"),
    }
    lazy_unmount(&mounted.mountpoint)
}

/// A daemon stops at once once the mount is detached unless processes are still inside it (it
/// serves them for a grace period, `app::daemon`'s `UNMOUNT_WAIT`): a stop this long after
/// the detach was that.
const IN_USE_AFTER: Duration = Duration::from_secs(1);

/// Detach `mountpoint` without a daemon's help.
fn lazy_unmount(mountpoint: &Path) -> Result<Exit> {
    nix::mount::umount2(mountpoint, nix::mount::MntFlags::MNT_DETACH)
        .map_err(|e| Error::io("unmount", e.into()).at(mountpoint.display().to_string()))?;
    errln!(
        "rwfs: unmounted {} (lazily: processes using it keep it until they close their files)",
        mountpoint.display()
    );
    Ok(Exit::Ok)
}

/// Does a process hold the lock of the workspace at `workspace` (an engine owns it)?
fn is_locked(workspace: &Path) -> bool {
    let lock = workspace.join(crate::durable::STATE_DIR).join(crate::history::LOCK_FILE);
    let Ok(file) = std::fs::File::open(&lock) else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(_)) => false,
    }
}

fn mounted_at(mountpoint: &Path) -> bool {
    mounts().iter().any(|m| m.mountpoint == mountpoint)
}
