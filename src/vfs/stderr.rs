//! The reason on the refused writer's standard error: before the mount returns a refusal's
//! errno, one line (`crate::notice`) goes to the writing process's fd 2, which an agent
//! harness's shell tool hands back to the model with the command's output (policy
//! `stderr_notice`; on by default under `rwfs run`).
//!
//! The rule for where the line may go, decided from `/proc/PID/fd/2`'s link text alone (no
//! request reaches any filesystem, this one included, before the decision):
//!
//! - a **terminal** in line mode (`/dev/pts/N`, `/dev/ttyN`, `/dev/console`, confirmed with
//!   `tcgetattr` on the descriptor opened: `ICANON` set), a **pipe** (`pipe:[…]`) or a
//!   **socket** (`socket:[…]`): yes — where a program's own diagnostics are read (a shell tool
//!   captures a pipe or a socketpair, a person reads a terminal);
//! - a terminal in raw mode: never — a full-screen program (an agent's TUI, an editor) draws
//!   there, and a stray line would garble its screen;
//! - anything else: never — a **regular file** is a record the user redirected (`2> err.log`,
//!   `>out.bin 2>&1`) and may even be the file being written; `/dev/null` asked for silence;
//!   other devices and anonymous inodes are not text streams; a closed fd 2 has no reader.
//!
//! Best effort, never blocking and never disturbing the writer: a terminal or a pipe is opened
//! afresh through `/proc/PID/fd/2` with `O_NONBLOCK` (a new open file description, so the
//! writer's own flags and offset are untouched); a socket, which cannot be opened that way, is
//! borrowed with `pidfd_getfd` and written with `send(MSG_DONTWAIT | MSG_NOSIGNAL)` (per-call
//! flags, nothing changed on the writer's description). One `write` of at most `PIPE_BUF` bytes:
//! whole or not at all into a pipe, never interleaved with the writer's own lines. A process
//! gone, a full pipe, a permission refused: the line is dropped, silently; the refusal itself is
//! unchanged.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use nix::libc;

/// Longest line written (a pipe's atomic write size).
const MAX_LINE: usize = 4096;

/// What the writer's fd 2 is, as far as the rule goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Terminal,
    Pipe,
    Socket,
}

/// Where `/proc/PID/fd/2` pointing at `link` may receive the line (see the module docs).
pub(crate) fn stream_of(link: &str) -> Option<Stream> {
    if link.starts_with("pipe:[") {
        return Some(Stream::Pipe);
    }
    if link.starts_with("socket:[") {
        return Some(Stream::Socket);
    }
    let tty = link.strip_prefix("/dev/pts/").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        || link.strip_prefix("/dev/tty").is_some_and(|n| n.bytes().all(|b| b.is_ascii_alphanumeric()))
        || link == "/dev/console";
    tty.then_some(Stream::Terminal)
}

/// Write `line` (and a newline) to process `pid`'s standard error where the rule allows it;
/// whether it was written.
pub(crate) fn tell(pid: u32, line: &str) -> bool {
    if pid == 0 || pid == std::process::id() {
        return false;
    }
    let fd2 = crate::process::fd_path(pid, 2);
    let Some(link) = crate::process::fd_target(pid, 2) else { return false };
    let Some(stream) = link.to_str().and_then(stream_of) else { return false };
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.truncate(floor_char_boundary(&text, MAX_LINE - 1));
    text.push('\n');
    let written = match stream {
        Stream::Terminal | Stream::Pipe => write_reopened(&fd2, stream, text.as_bytes()),
        Stream::Socket => send_borrowed(pid, text.as_bytes()),
    };
    if let Err(e) = &written {
        tracing::debug!(pid, error = %e, "the refusal's line did not reach the writer's stderr");
    }
    written.is_ok()
}

/// The largest index ≤ `at` on a character boundary of `s`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// A terminal or a pipe: a fresh, non-blocking open file description of it.
fn write_reopened(fd2: &str, stream: Stream, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(fd2)?;
    if stream == Stream::Terminal && !line_mode_terminal(&file) {
        return Err(std::io::Error::other("not a terminal in line mode"));
    }
    file.write(bytes).and_then(|n| if n == bytes.len() { Ok(()) } else { Err(std::io::Error::other("short write")) })
}

/// Is `file` a terminal in canonical (line) mode? A terminal in raw mode belongs to a
/// full-screen program (an agent's TUI, an editor), whose screen a stray line would garble.
fn line_mode_terminal(file: &std::fs::File) -> bool {
    let mut termios = std::mem::MaybeUninit::<libc::termios>::uninit();
    // SAFETY: tcgetattr fills the struct it is given, or fails and leaves it unread.
    if unsafe { libc::tcgetattr(file.as_raw_fd(), termios.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: tcgetattr succeeded, so the struct is initialised.
    unsafe { termios.assume_init() }.c_lflag & libc::ICANON != 0
}

/// A socket: borrowed from the writer (`pidfd_getfd`), written without blocking or signals.
fn send_borrowed(pid: u32, bytes: &[u8]) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: plain system calls; each descriptor returned is owned by exactly one OwnedFd.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), 2, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let socket = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let sent = nix::sys::socket::send(
        socket.as_raw_fd(),
        bytes,
        nix::sys::socket::MsgFlags::MSG_DONTWAIT | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
    )
    .map_err(std::io::Error::from)?;
    if sent == bytes.len() { Ok(()) } else { Err(std::io::Error::other("short send")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_terminals_pipes_and_sockets_receive_the_line() {
        assert_eq!(stream_of("pipe:[123456]"), Some(Stream::Pipe));
        assert_eq!(stream_of("socket:[98765]"), Some(Stream::Socket));
        assert_eq!(stream_of("/dev/pts/3"), Some(Stream::Terminal));
        assert_eq!(stream_of("/dev/tty1"), Some(Stream::Terminal));
        assert_eq!(stream_of("/dev/console"), Some(Stream::Terminal));
        for never in [
            "/home/me/project/err.log",
            "/tmp/out.bin",
            "/home/me/project/config.py (deleted)",
            "/dev/null",
            "/dev/sda",
            "/dev/pts/ptmx",
            "anon_inode:[eventfd]",
            "/dev/pts/../sda",
        ] {
            assert_eq!(stream_of(never), None, "{never}");
        }
    }
}
