//! `rwfs run` and `rwfs shell`: the safe way in. A mount over a workspace covers the directory
//! that shells already standing in it keep using: their writes go *under* the mount, past the
//! gate. These commands mount the workspace when it is not mounted yet, start the program with
//! its working directory re-resolved through the mount (so every write it and its children
//! make goes through the gate), and unmount afterwards when they mounted it (`--keep-mounted`
//! leaves it). Nothing this process keeps leads its children under the mount: it leaves the
//! directory the mount covers before it starts the program. [`shadowed_cwd`] tells other
//! commands when the caller stands under a mount.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::sys::signal::{SigHandler, Signal};

use super::mount::{mounts, unmount};
use super::{Exit, RunArgs, UnmountArgs, errln};
use crate::error::{Error, IoContext, Reason, Result};

/// Run `args.program` inside the mounted view of the workspace at `root`.
pub fn run_inside(root: &Path, allow_unsafe_root: bool, args: RunArgs) -> Result<Exit> {
    let root =
        std::fs::canonicalize(root).map_err(|e| Error::io("resolve workspace", e).at(root.display().to_string()))?;
    let (program, rest) = args.program.split_first().ok_or(Reason::InvalidArgument { what: "program to run" })?;
    // As a shell does, before anything is mounted: a program that is not there is 127.
    if !runnable(program) {
        errln!("rwfs: {program}: command not found (nothing was mounted)");
        std::process::exit(127);
    }
    let session = session_name(program);
    let (mountpoint, mounted_here) = match mountpoint_of(&root) {
        Some(mountpoint) => {
            if !args.mount.to_args().is_empty() {
                errln!(
                    "rwfs: {} is mounted already: its mount keeps the options it has (yours apply when run mounts it)",
                    root.display()
                );
            }
            (mountpoint, false)
        }
        None => {
            mount_daemon(&root, allow_unsafe_root, &args.mount)?;
            let mountpoint = mountpoint_of(&root).ok_or_else(|| {
                Error::from(Reason::InvalidArgument { what: "mount: the daemon reported ready but no mount is listed" })
            })?;
            errln!("rwfs: mounted {} (over itself) for this session", root.display());
            (mountpoint, true)
        }
    };
    let cwd = std::env::current_dir().step("read the working directory")?;
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    // `join` of an empty path would add a trailing slash ($PWD would read `/ws/`).
    let inside = match cwd.strip_prefix(&root) {
        Ok(rel) if !rel.as_os_str().is_empty() => mountpoint.join(rel),
        _ => mountpoint.clone(),
    };
    check_on_mount(&inside, &mountpoint)?;
    // This process stood in the directory the mount now covers: its working directory would
    // lead the program there (`/proc/$PPID/cwd/…`), past the gate. It needs none of it.
    std::env::set_current_dir("/").step("leave the workspace's backing directory")?;
    let mut command = Command::new(program);
    command.args(rest).current_dir(&inside).env("PWD", &inside).env("RWFS_MOUNT", &mountpoint);
    command.env("RWFS_SESSION", &session);
    errln!("rwfs: session {session}: every write of this run is journaled under that name");
    // Ctrl-C and Ctrl-\ reach the whole foreground group: they are the program's to handle (an
    // agent's prompt, the shell's line); this process waits for it and then unmounts.
    let keyboard = [Signal::SIGINT, Signal::SIGQUIT];
    // SAFETY: the handler is SIG_DFL, and in the child only async-signal-safe calls are made.
    unsafe {
        command.pre_exec(move || {
            for signal in keyboard {
                nix::sys::signal::signal(signal, SigHandler::SigDfl).map_err(std::io::Error::from)?;
            }
            Ok(())
        });
        for signal in keyboard {
            let _ = nix::sys::signal::signal(signal, SigHandler::SigIgn);
        }
    }
    let status = command.status().map_err(|e| Error::io("start program", e).at(program.clone()));
    if mounted_here && !args.keep_mounted {
        // `unmount` says what it did.
        if let Err(e) = unmount(&UnmountArgs { path: mountpoint.clone() }) {
            errln!("rwfs: could not unmount {}: {e} (try `rwfs unmount {0}`)", mountpoint.display());
        }
    }
    errln!(
        "rwfs: session {session} ended; see it with `rwfs diff --session {session}`, undo it with `rwfs rewind --session {session}`"
    );
    let status = status?;
    // The program's own exit status (128 + signal, as shells report a killed program).
    let code = status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(2);
    std::process::exit(code)
}

/// The session of this run: `$RWFS_SESSION` when this runs inside one already (a nested run
/// belongs to it), else the program's name and this process's pid (`bash-4242`), so each
/// `rwfs run` and `rwfs shell` is its own session, one agent run as one.
fn session_name(program: &str) -> String {
    if let Some(outer) = std::env::var("RWFS_SESSION").ok().filter(|s| !s.is_empty()) {
        return outer;
    }
    let base = Path::new(program).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let base: String = base.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).collect();
    format!("{}-{}", if base.is_empty() { "run" } else { &base }, std::process::id())
}

/// Can `program` be started: a path to an executable file, or a name found on `$PATH`?
fn runnable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        return executable(Path::new(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).any(|dir| executable(&dir.join(program)))
}

/// The mountpoint of the rwfs mount serving the workspace at `root`, if any.
fn mountpoint_of(root: &Path) -> Option<PathBuf> {
    mounts().into_iter().find(|m| m.workspace == root).map(|m| m.mountpoint)
}

/// `rwfs mount --daemon ROOT`, as a child: it returns once the mount is ready (or failed). Its
/// note is for a user who mounted by hand (a shell left under the mount must `cd` again), so
/// it is shown only when the mount failed.
fn mount_daemon(root: &Path, allow_unsafe_root: bool, how: &super::MountOptionArgs) -> Result<()> {
    let exe = std::env::current_exe().step("find the rwfs binary")?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount").arg("--daemon").arg(root).args(how.to_args());
    // Under `rwfs run` a refused writer is told why on its stderr, unless the policy says.
    let policy_says = crate::history::Workspace::open(root, &Default::default())
        .and_then(|ws| {
            ws.policy(std::env::var_os("RW_POLICY_FILE").filter(|f| !f.is_empty()).as_deref().map(Path::new))
        })
        .ok()
        .and_then(|p| p.stderr_notice());
    if policy_says.is_none() && how.stderr_notice.is_none() {
        cmd.args(["--stderr-notice", "on"]);
    }
    if allow_unsafe_root {
        cmd.arg("--allow-unsafe-root");
    }
    let out = cmd.stderr(std::process::Stdio::piped()).output().step("start the mount daemon")?;
    if !out.status.success() {
        errln!("{}", String::from_utf8_lossy(&out.stderr).trim_end());
        return Err(Error::from(Reason::InvalidArgument { what: "mount: see the message above" })
            .at(root.display().to_string()));
    }
    Ok(())
}

/// Refuse to start the program anywhere but on the mount (a path that does not reach it would
/// let its writes past the gate).
fn check_on_mount(dir: &Path, mountpoint: &Path) -> Result<()> {
    let dev =
        |p: &Path| std::fs::metadata(p).map(|m| m.dev()).map_err(|e| Error::io("stat", e).at(p.display().to_string()));
    if dev(dir)? != dev(mountpoint)? {
        return Err(Error::from(Reason::InvalidArgument { what: "working directory: not on the mount" })
            .at(dir.display().to_string()));
    }
    Ok(())
}

/// When the caller's working directory is the directory *under* an rwfs mount (a shell that
/// was there before the mount), the mountpoint that covers it: its writes do not go through
/// the gate until it changes directory again.
pub fn shadowed_cwd() -> Option<PathBuf> {
    let path = std::env::current_dir().ok()?;
    let here = std::fs::metadata(".").ok()?;
    let there = std::fs::metadata(&path).ok()?;
    if (here.dev(), here.ino()) == (there.dev(), there.ino()) {
        return None;
    }
    mounts().into_iter().map(|m| m.mountpoint).filter(|m| path.starts_with(m)).max_by_key(|m| m.as_os_str().len())
}

/// Say on stderr when the caller stands under a mount (see [`shadowed_cwd`]).
pub fn warn_if_shadowed() {
    if let Some(mountpoint) = shadowed_cwd() {
        let cwd = std::env::current_dir().unwrap_or_default();
        errln!(
            "rwfs: warning: this shell's working directory is the directory under the mount at {}; \
             writes made from here bypass the gate. Run `cd {}` to go through the mount, or start \
             programs with `rwfs run` / `rwfs shell`.",
            mountpoint.display(),
            cwd.display()
        );
    }
}
