//! What a request's thread id stands for. FUSE names the *thread* that made a request; the
//! filesystem reasons about processes (a writer writes from many threads, and a close commits
//! only its own process's writes), so the adapter maps each thread to its thread group once
//! and caches it with the process name.
//!
//! Invariant: a cached mapping is used only while the thread it was read for has not exited,
//! or when no other thread has its id yet. A thread's id is given to a new thread or process
//! once it is gone (ids are recycled), and a mapping kept past that would journal the new
//! process's writes as the old one's (its name, its agent session). Each mapping holds the
//! thread itself ([`Pinned::thread`]: one `poll` asks); once it has exited, the id is read
//! again, and the old mapping kept only if nothing holds the id now (the closes a process
//! makes as it exits arrive after its threads are gone).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::process::{Pinned, comm, thread_group};
use crate::vfs::Caller;

/// Cached thread → process mappings (bounded: cleared when it grows past this). Each holds a
/// descriptor: few enough that the daemon's handles never run short of descriptors for it,
/// plenty for the threads writing at once.
const MAX_CACHED: usize = 512;

struct Process {
    pid: u32,
    comm: Option<String>,
    /// The thread the mapping was read for; `None` if it was gone then.
    thread: Option<Pinned>,
}

impl Process {
    /// Thread `tid`'s process now; `None` when no thread has that id.
    fn of_thread(tid: u32) -> Option<Process> {
        // Pinned first: the `/proc` read after it is of the pinned thread while it lives.
        let thread = Pinned::thread(tid);
        let pid = thread_group(tid)?;
        Some(Process { pid, comm: comm(pid), thread })
    }

    fn is_current(&self) -> bool {
        self.thread.as_ref().is_some_and(Pinned::is_alive)
    }
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
        if cache.get(&tid).is_some_and(|known| !known.is_current())
            && let Some(now) = Process::of_thread(tid)
        {
            cache.insert(tid, now);
        }
        if cache.len() > MAX_CACHED {
            cache.clear();
        }
        let process = cache.entry(tid).or_insert_with(|| {
            Process::of_thread(tid).unwrap_or_else(|| Process { pid: tid, comm: comm(tid), thread: None })
        });
        Caller { pid: process.pid, uid, gid, comm: process.comm.clone(), umask: 0, groups: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Start `program` (which waits on its standard input) as process `pid` when the kernel
    /// gives that id next: `ns_last_pid` (root) set just below it. `None` when another fork
    /// took it first.
    fn spawn_as(pid: u32, program: &str) -> Option<std::process::Child> {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).expect("root sets ns_last_pid");
        let child = std::process::Command::new(program).stdin(std::process::Stdio::piped()).spawn().unwrap();
        if child.id() == pid {
            return Some(running(child, program));
        }
        end(child);
        None
    }

    /// Wait until the child runs `program` (its `exec` is done).
    fn running(child: std::process::Child, program: &str) -> std::process::Child {
        let started = std::time::Instant::now();
        while comm(child.id()).as_deref() != Some(program) {
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "{program} never started");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        child
    }

    fn end(mut child: std::process::Child) {
        drop(child.stdin.take());
        let _ = child.kill();
        child.wait().unwrap();
    }

    #[test]
    fn a_recycled_thread_id_is_the_new_process_not_the_one_that_had_it() {
        assert!(nix::unistd::geteuid().is_root(), "this test recycles a pid: run it as root, as CI does");
        let processes = Processes::default();
        let first = std::process::Command::new("cat").stdin(std::process::Stdio::piped()).spawn().unwrap();
        let first = running(first, "cat");
        let pid = first.id();
        let caller = processes.caller(pid, 0, 0);
        assert_eq!((caller.pid, caller.comm.as_deref()), (pid, Some("cat")));
        end(first);
        // Gone and not yet recycled: its late requests keep what it was.
        let caller = processes.caller(pid, 0, 0);
        assert_eq!((caller.pid, caller.comm.as_deref()), (pid, Some("cat")), "a gone thread keeps its process");
        // The id given to another program: that program, not the cached one.
        let second = (0..50).find_map(|_| spawn_as(pid, "sort")).expect("the pid recycled in 50 tries");
        let caller = processes.caller(pid, 0, 0);
        assert_eq!((caller.pid, caller.comm.as_deref()), (pid, Some("sort")), "the recycled id is the new process");
        end(second);
    }

    #[test]
    fn a_thread_of_a_process_is_that_process_while_it_lives() {
        let processes = Processes::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw() as u32).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        let me = std::process::id();
        assert_ne!(tid, me);
        assert_eq!(processes.caller(tid, 0, 0).pid, me);
        assert_eq!(processes.caller(tid, 0, 0).pid, me, "cached");
        done_tx.send(()).unwrap();
        worker.join().unwrap();
        // Exited: nothing holds the id, the mapping stays.
        assert_eq!(processes.caller(tid, 0, 0).pid, me);
    }
}
