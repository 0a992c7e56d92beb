//! Following the journal: every row appended after an offset, once and in order, as the writer
//! appends it, without a polling loop.
//!
//! The follower sleeps in `poll(2)` on an inotify watch of `journal.jsonl` (and on the reader
//! it serves, to notice when it leaves); each wake-up reads the complete lines past its offset
//! and hands them over. A line without its newline yet is kept until the rest arrives. An
//! offset inside a line starts at the next line (the tail of a row is not a row). A file
//! shorter than the offset (a failed batch the writer cut off again) moves the offset back.
//!
//! Rows are handed over once the writer has written them: the writer makes a batch durable
//! with one `fdatasync` right after writing it, so what a follower prints is durable within
//! milliseconds, and a batch that fails to sync is cut (its rows were never acknowledged).

use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

/// Hand every complete line of the file at `path` past `offset` to `line`, then every line
/// appended later, until `line` returns `false`, `peer` (the reader being served, if any)
/// hangs up, or an I/O error. Lines are given without their newline.
pub fn follow(
    path: &Path,
    mut offset: u64,
    peer: Option<BorrowedFd<'_>>,
    mut line: impl FnMut(&[u8]) -> bool,
) -> io::Result<()> {
    let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).map_err(io::Error::from)?;
    inotify
        .add_watch(path, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_ATTRIB | AddWatchFlags::IN_DELETE_SELF)
        .map_err(io::Error::from)?;
    let mut file = std::fs::File::open(path)?;
    let mut partial: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    // An offset inside a line (a caller's own arithmetic, a hand-made URL): the rest of that
    // line is no row; the lines start after it.
    let mut inside_line = offset > 0 && {
        let mut before = [0u8; 1];
        std::os::unix::fs::FileExt::read_at(&file, &mut before, offset - 1)? == 1 && before[0] != b'\n'
    };
    loop {
        let len = file.metadata()?.len();
        if len < offset {
            offset = len - len.min(partial.len() as u64);
            partial.clear();
            inside_line = false;
        }
        if len > offset {
            file.seek(SeekFrom::Start(offset))?;
            let mut left = len - offset;
            while left > 0 {
                let want = left.min(buf.len() as u64) as usize;
                let n = file.read(&mut buf[..want])?;
                if n == 0 {
                    break;
                }
                offset += n as u64;
                left -= n as u64;
                let mut chunk = &buf[..n];
                while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
                    partial.extend_from_slice(&chunk[..i]);
                    if std::mem::take(&mut inside_line) {
                        // The tail of the line the offset fell in.
                    } else if !partial.is_empty() && !line(&partial) {
                        return Ok(());
                    }
                    partial.clear();
                    chunk = &chunk[i + 1..];
                }
                partial.extend_from_slice(chunk);
            }
        }
        let mut fds = vec![PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
        if let Some(peer) = peer {
            fds.push(PollFd::new(peer, PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        if fds.get(1).and_then(PollFd::revents).is_some_and(|r| !r.is_empty()) {
            // The reader never sends anything after its request: readable means gone.
            return Ok(());
        }
        // Drain the events; what they say is re-read from the file.
        while let Ok(events) = inotify.read_events() {
            if events.is_empty() {
                break;
            }
            if events.iter().any(|e| e.mask.contains(AddWatchFlags::IN_DELETE_SELF)) {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_arrive_once_in_order_and_partial_lines_wait() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        std::fs::write(&path, b"old\n").unwrap();
        let writer_path = path.clone();
        let writer = std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().append(true).open(writer_path).unwrap();
            for i in 0..50 {
                write!(f, "row {i}").unwrap();
                f.flush().unwrap();
                writeln!(f).unwrap();
            }
        });
        let mut seen = Vec::new();
        follow(&path, 4, None, |l| {
            seen.push(String::from_utf8(l.to_vec()).unwrap());
            seen.len() < 50
        })
        .unwrap();
        writer.join().unwrap();
        assert_eq!(seen, (0..50).map(|i| format!("row {i}")).collect::<Vec<_>>());
    }

    #[test]
    fn an_offset_inside_a_line_starts_at_the_next_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        std::fs::write(&path, b"first row\nsecond row\nthird\n").unwrap();
        for (offset, first) in
            [(0, "first row"), (3, "second row"), (9, "second row"), (10, "second row"), (12, "third")]
        {
            let mut seen = None;
            follow(&path, offset, None, |l| {
                seen = Some(String::from_utf8(l.to_vec()).unwrap());
                false
            })
            .unwrap();
            assert_eq!(seen.as_deref(), Some(first), "offset {offset}");
        }
    }
}
