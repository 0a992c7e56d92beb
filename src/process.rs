//! Who is calling: what Linux's `/proc` says of a process, read in this one place.
//!
//! A process's name ([`comm`]), its `stat` line parsed once ([`Stat`]: name, parent, start
//! time; [`Pinned`] holds a process to ask again whether it is still running), its command line ([`args`]), one variable of the environment it started with
//! ([`env_var`]), a thread's process and supplementary groups ([`thread_group`], [`groups`]),
//! where its standard error points ([`fd_path`], [`fd_target`]), this machine's mounts
//! ([`mounts`]) and the clock of start times ([`ticks_since_boot`]). Every answer is `None`
//! (or empty) when the process is gone or `/proc` says nothing readable: callers treat a
//! vanished caller as an unknown one.
//!
//! It decides nothing about what an answer means (a session, an agent, a sed temp file): the
//! journal, the mount and the CLI do. The engine never reads a writer's command line itself:
//! the mount's front end hands it a reader ([`args`]) through the engine's options.

use std::path::PathBuf;

/// `/proc/<pid>/comm`, without the newline.
pub fn comm(pid: u32) -> Option<String> {
    let comm = read_line(&format!("/proc/{pid}/comm"))?;
    Some(comm.trim_end_matches('\n').to_string())
}

/// A one-line `/proc` file whole, in one `read` where it fits (every writer's commit reads
/// one: `std::fs::read_to_string` would add a `statx` and four growing reads); `None` when it
/// cannot be opened or read or is not UTF-8.
fn read_line(path: &str) -> Option<String> {
    read_whole(&std::fs::File::open(path).ok()?)
}

/// An open one-line `/proc` file from its start (`pread`: a kept file reads the same way
/// again), until the line's newline or the end.
fn read_whole(file: &std::fs::File) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 1024];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if buf[len - 1] == b'\n' {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).ok()
}

/// What `/proc/<pid>/stat` says of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// The process name (as `comm`, read in the same instant as the rest).
    pub comm: String,
    pub parent: u32,
    /// Clock ticks after boot ([`ticks_since_boot`]'s clock): with the pid, it tells a
    /// recycled pid from the process that had it.
    pub start: u64,
}

/// Process `pid`'s [`Stat`].
pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&read_line(&format!("/proc/{pid}/stat"))?)
}

/// A process held by a descriptor that stays with it, to ask cheaply whether `pid` is still
/// the process it was when it was pinned (a pid is recycled once its process is gone).
///
/// A pidfd where the kernel gives one (`pidfd_open`, Linux 5.3; a thread group's leader): it
/// becomes readable when its process exits, so the question is one `poll` that reads nothing.
/// Else `/proc/<pid>/stat` kept open with the start time read then: one `pread` (the kernel
/// formats the whole line) tells, since a gone process's file answers nothing and a later
/// process given the same pid has a `/proc` entry of its own.
pub struct Pinned(Pin);

enum Pin {
    Pidfd(std::os::fd::OwnedFd),
    Stat { file: std::fs::File, start: u64 },
}

impl Pinned {
    /// Pin process `pid`; `None` when it is gone.
    pub fn open(pid: u32) -> Option<Pinned> {
        if let Some(fd) = pidfd_open(pid, 0) {
            return Some(Pinned(Pin::Pidfd(fd)));
        }
        Pinned::by_stat(pid)
    }

    /// Pin thread `tid` itself (any thread, not only a group's leader): not alive once that
    /// thread has exited, and so before its id can be given to another thread or process
    /// (`PIDFD_THREAD`, Linux 6.9; else its `/proc` stat line, which a thread has too).
    pub fn thread(tid: u32) -> Option<Pinned> {
        if let Some(fd) = pidfd_open(tid, PIDFD_THREAD) {
            return Some(Pinned(Pin::Pidfd(fd)));
        }
        Pinned::by_stat(tid)
    }

    fn by_stat(pid: u32) -> Option<Pinned> {
        let file = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
        let start = parse_stat(&read_whole(&file)?)?.start;
        Some(Pinned(Pin::Stat { file, start }))
    }

    /// Is the pinned process still running (not exited, and so its pid not given to another)?
    pub fn is_alive(&self) -> bool {
        match &self.0 {
            Pin::Pidfd(fd) => {
                use std::os::fd::AsFd;
                let mut polled = [nix::poll::PollFd::new(fd.as_fd(), nix::poll::PollFlags::POLLIN)];
                // Readable (or an error) once the process has exited.
                nix::poll::poll(&mut polled, nix::poll::PollTimeout::ZERO) == Ok(0)
            }
            Pin::Stat { file, start } => {
                read_whole(file).and_then(|line| parse_stat(&line)).is_some_and(|now| now.start == *start)
            }
        }
    }
}

impl std::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Pin::Pidfd(_) => "Pinned(pidfd)",
            Pin::Stat { .. } => "Pinned(stat)",
        })
    }
}

/// `pidfd_open`'s flag for a descriptor of one thread (`O_EXCL`, as the kernel defines it).
const PIDFD_THREAD: nix::libc::c_uint = nix::libc::O_EXCL as nix::libc::c_uint;

/// `pidfd_open(pid, flags)`; `None` where the kernel refuses (gone, not a thread group's leader
/// without `PIDFD_THREAD`, a kernel without it or without the flag).
fn pidfd_open(pid: u32, flags: nix::libc::c_uint) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let pid = nix::libc::pid_t::try_from(pid).ok()?;
    // SAFETY: a plain system call with integer arguments; it returns a new descriptor or -1.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, flags) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: `fd` was just returned by the kernel for this process and is owned by no one else.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// A `stat` line: the name is between the first `(` and the last `)` (it may hold either);
/// after it come state (3), ppid (4), ..., starttime (22).
fn parse_stat(line: &str) -> Option<Stat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let comm = line.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    Some(Stat { comm, parent: fields.get(1)?.parse().ok()?, start: fields.get(19)?.parse().ok()? })
}

/// Process `pid`'s command line, one argument each (bytes that are not UTF-8 replaced).
pub fn args(pid: u32) -> Option<Vec<String>> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmdline = cmdline.strip_suffix(&[0]).unwrap_or(&cmdline);
    if cmdline.is_empty() {
        return Some(Vec::new());
    }
    Some(cmdline.split(|&b| b == 0).map(|arg| String::from_utf8_lossy(arg).into_owned()).collect())
}

/// The value of `name` in the environment process `pid` was started with.
pub fn env_var(pid: u32, name: &str) -> Option<Vec<u8>> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{name}=");
    environ.split(|&b| b == 0).find_map(|var| var.strip_prefix(prefix.as_bytes())).map(<[u8]>::to_vec)
}

/// A field of `/proc/<tid>/status` (`Tgid`, `Groups`, ...), trimmed.
fn status_field(tid: u32, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':')).map(|v| v.trim().to_string())
}

/// The process (thread group) of thread `tid`.
pub fn thread_group(tid: u32) -> Option<u32> {
    status_field(tid, "Tgid")?.parse().ok()
}

/// The supplementary groups of thread `tid` (none when it is gone).
pub fn groups(tid: u32) -> Vec<u32> {
    status_field(tid, "Groups").unwrap_or_default().split_whitespace().filter_map(|g| g.parse().ok()).collect()
}

/// `/proc/<pid>/fd/<fd>`: opening it opens what the process has open there.
pub fn fd_path(pid: u32, fd: u32) -> String {
    format!("/proc/{pid}/fd/{fd}")
}

/// What process `pid`'s descriptor `fd` points at (`/dev/pts/3`, `pipe:[1234]`, a path).
pub fn fd_target(pid: u32, fd: u32) -> Option<PathBuf> {
    std::fs::read_link(fd_path(pid, fd)).ok()
}

/// Clock ticks (1/100 s, Linux's `USER_HZ`) since boot: the clock of [`Stat::start`]. 0 when
/// it cannot be read.
pub fn ticks_since_boot() -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|s| s.parse::<f64>().ok()))
        .map_or(0, |secs| (secs * 100.0) as u64)
}

/// One mount of this process's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub fs_type: String,
    /// What was mounted (for a FUSE filesystem, the name it gave itself).
    pub source: PathBuf,
    pub mountpoint: PathBuf,
}

/// Every mount, from `/proc/self/mountinfo` (none when it cannot be read).
pub fn mounts() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo").map_or_else(|_| Vec::new(), |info| parse_mountinfo(&info))
}

fn parse_mountinfo(info: &str) -> Vec<Mount> {
    info.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut right = right.split(' ');
            let fs_type = right.next()?.to_string();
            let source = PathBuf::from(unescape(right.next()?));
            let mountpoint = PathBuf::from(unescape(left.split(' ').nth(4)?));
            Some(Mount { fs_type, source, mountpoint })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(Ok(v)) = field.get(i + 1..i + 4).map(|octal| u8::from_str_radix(octal, 8))
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_name_holding_parentheses_and_spaces() {
        let line = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        assert_eq!(parse_stat(line), Some(Stat { comm: "a (b) c".into(), parent: 17, start: 987654 }));
        assert_eq!(parse_stat("4242 (cut short) S 17"), None);
    }

    #[test]
    fn this_process_is_seen_whole() {
        let me = std::process::id();
        let mine = stat(me).expect("our own stat");
        assert_eq!(comm(me).as_deref(), Some(mine.comm.as_str()));
        assert!(mine.start <= ticks_since_boot());
        assert_eq!(thread_group(me), Some(me));
        assert!(!args(me).unwrap_or_default().is_empty());
        assert_eq!(stat(u32::MAX), None, "no such process");
    }

    #[test]
    fn mountinfo_lines_are_split_and_unescaped() {
        let info = "36 35 98:0 / /mnt/my\\040dir rw,noatime master:1 - fuse.rwfs /src/my\\040ws rw\n\
                    37 35 98:0 / /proc rw - proc proc rw\n";
        let mounts = parse_mountinfo(info);
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[0].fs_type, "fuse.rwfs");
        assert_eq!(mounts[0].source, PathBuf::from("/src/my ws"));
        assert_eq!(mounts[0].mountpoint, PathBuf::from("/mnt/my dir"));
    }
}
