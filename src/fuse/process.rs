//! What a request's thread id stands for. FUSE names the *thread* that made a request; the
//! filesystem reasons about processes (a writer writes from many threads, and a close commits
//! only its own process's writes), so the adapter maps each thread to its thread group once
//! and caches it with the process name.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::process::{comm, thread_group};
use crate::vfs::Caller;

/// Cached thread → process mappings (bounded: cleared when it grows past this).
const MAX_CACHED: usize = 4096;

#[derive(Clone)]
struct Process {
    pid: u32,
    comm: Option<String>,
}

#[derive(Default)]
pub struct Processes(Mutex<HashMap<u32, Process>>);

impl Processes {
    /// The caller of a request from thread `tid` with credentials `uid`/`gid`; the kernel's
    /// own requests (tid 0) stay pid 0. A process gone before we look keeps its thread id.
    pub fn caller(&self, tid: u32, uid: u32, gid: u32) -> Caller {
        if tid == 0 {
            return Caller { pid: 0, uid, gid, comm: None, umask: 0, groups: Vec::new() };
        }
        let mut cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() > MAX_CACHED {
            cache.clear();
        }
        let process = cache.entry(tid).or_insert_with(|| {
            let pid = thread_group(tid).unwrap_or(tid);
            Process { pid, comm: comm(pid) }
        });
        Caller { pid: process.pid, uid, gid, comm: process.comm.clone(), umask: 0, groups: Vec::new() }
    }
}
