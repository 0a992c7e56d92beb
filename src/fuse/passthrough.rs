//! Kernel FUSE passthrough (Linux ≥ 6.9) for files written in place: the kernel reads and
//! writes the backing file itself, and those requests never reach the daemon. Only for handles
//! the filesystem says are written in place ([`Vfs::in_place_backing`]): a gated file's bytes
//! must all reach the gate.
//!
//! Invariants, from the kernel's rules (`fs/fuse/iomode.c`):
//! - one backing per node while any of its opens passes through: every such open of a node
//!   is answered with the same [`BackingId`], registered at the node's first open and dropped
//!   when its last passthrough handle is released;
//! - a node never mixes opens that pass through with opens that cache (the kernel fails such an
//!   open with `EIO`): passthrough starts only at a node's first open, and later opens follow
//!   what the first one got;
//! - anything that fails (no kernel support, no `CAP_SYS_ADMIN` for the backing ioctl, a file
//!   that cannot be opened read-write) falls back to an ordinary open, silently; a refused
//!   ioctl turns passthrough off for the session.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fuser::BackingId;

use crate::vfs::Vfs;

/// The session's passthrough state and its request counters.
#[derive(Default)]
pub(crate) struct Passthrough {
    /// The kernel granted `FUSE_PASSTHROUGH` and registering backings works.
    on: AtomicBool,
    /// Per node: its backing and how many handles use it.
    nodes: Mutex<HashMap<u64, (BackingId, u64)>>,
    /// Handles opened in passthrough, and their node.
    handles: Mutex<HashMap<u64, u64>>,
    counts: Counts,
}

/// What reached the daemon, for `rwfs status`: data requests, and opens that passed through.
#[derive(Default)]
pub(crate) struct Counts {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub passthrough_opens: AtomicU64,
}

/// The counters at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    pub reads: u64,
    pub writes: u64,
    pub passthrough_opens: u64,
    pub kernel_passthrough: bool,
}

impl Passthrough {
    pub fn enable(&self) {
        self.on.store(true, Ordering::Release);
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    pub fn requests(&self) -> Requests {
        Requests {
            reads: self.counts.reads.load(Ordering::Relaxed),
            writes: self.counts.writes.load(Ordering::Relaxed),
            passthrough_opens: self.counts.passthrough_opens.load(Ordering::Relaxed),
            kernel_passthrough: self.on.load(Ordering::Acquire),
        }
    }

    /// Answer the open of handle `fh`: passing through with the node's backing when the handle
    /// is written in place and the node passes through (or may start to), else plainly.
    pub fn answer(&self, vfs: &Vfs, fh: u64, reply: impl Answer) {
        if !self.on.load(Ordering::Acquire) {
            return reply.plain();
        }
        // One decision at a time: two first opens of a node racing here must not answer one
        // through passthrough and the other cached.
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(open) = vfs.in_place_backing(fh) else { return reply.plain() };
        if let Some((backing, users)) = nodes.get_mut(&open.ino) {
            *users += 1;
            self.start(fh, open.ino);
            return reply.passthrough(backing);
        }
        let Some(Ok(file)) = open.backing else { return reply.plain() };
        match reply.register(&file) {
            Ok(backing) => {
                self.start(fh, open.ino);
                reply.passthrough(&nodes.entry(open.ino).or_insert((backing, 1)).0);
            }
            Err(e) => {
                if e.raw_os_error() == Some(nix::libc::EPERM) {
                    tracing::info!(
                        "kernel passthrough refused (no CAP_SYS_ADMIN): the daemon serves pass-through files"
                    );
                    self.on.store(false, Ordering::Release);
                } else {
                    tracing::debug!(error = %e, "no kernel passthrough for this file");
                }
                reply.plain()
            }
        }
    }

    fn start(&self, fh: u64, ino: u64) {
        self.handles.lock().unwrap_or_else(PoisonError::into_inner).insert(fh, ino);
        self.counts.passthrough_opens.fetch_add(1, Ordering::Relaxed);
    }

    /// Handle `fh` is released: the last passthrough handle of a node drops its backing.
    pub fn release(&self, fh: u64) {
        let Some(ino) = self.handles.lock().unwrap_or_else(PoisonError::into_inner).remove(&fh) else { return };
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, users)) = nodes.get_mut(&ino) {
            *users -= 1;
            if *users == 0 {
                nodes.remove(&ino);
            }
        }
    }
}

/// An open's reply (`ReplyOpen` or `ReplyCreate` with what it answers).
pub(crate) trait Answer {
    /// Make a backing of `file` (the ioctl `FUSE_DEV_IOC_BACKING_OPEN`).
    fn register(&self, file: &crate::durable::File) -> std::io::Result<BackingId>;
    /// Open with the kernel doing the I/O on `backing`.
    fn passthrough(self, backing: &BackingId);
    /// Open with the I/O coming to the daemon.
    fn plain(self);
}
