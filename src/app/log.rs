//! Where the binary's log lines go: stderr (a daemon's is its log file), written so that a
//! failing write can never take the process down.
//!
//! A daemon's log usually lives on the workspace's own filesystem (`rwfs.log`). When that disk
//! is full every log write fails; `tracing-subscriber` then reports the failure with
//! `eprintln!`, which panics when stderr itself cannot be written, and the panicking thread was
//! the mount's (every request got `ENOTCONN` afterwards). [`Log`] never returns an error: a line
//! that cannot be written is dropped and counted ([`dropped`], shown by `rwfs status`).
//!
//! It does not rotate, buffer or retry: a dropped line is gone.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Log lines that could not be written since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// How many log lines were dropped because stderr could not take them.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The writer `tracing-subscriber` formats each line into (see the module documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct Log;

/// One line on its way to stderr.
pub struct Line;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Log {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line
    }
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::io::stderr().write(buf) {
            Ok(n) => Ok(n),
            // The rest of the line is dropped with it: one count per line.
            Err(_) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
