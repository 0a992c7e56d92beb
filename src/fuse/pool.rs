//! Threads for the mount's slow work: commits (they wait for fsync) run on a few workers that
//! own the request's reply, so the request loop keeps serving reads meanwhile; kernel cache
//! invalidations run on their own thread, never inside a request handler (the kernel may hold
//! the inode's lock while it waits for that handler's reply).

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::wake::{Popped, Queue};

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads running jobs in submission order (per thread).
pub struct Pool {
    queue: Arc<Queue<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    pub fn new(threads: usize, name: &str) -> std::io::Result<Pool> {
        let queue = Arc::new(Queue::<Job>::default());
        let threads = (0..threads.max(1))
            .map(|i| {
                let queue = queue.clone();
                std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || {
                    while let Popped::Item(job) = queue.pop(None) {
                        job();
                    }
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Pool { queue, threads })
    }

    /// Run `job` on one of the threads (at once on this one if the pool has stopped).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        if let Err(job) = self.queue.push(Box::new(job)) {
            job();
        }
    }

    /// Finish the queued jobs and stop.
    pub fn stop(&mut self) {
        self.queue.close();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}
