//! Threads for the mount's slow work: commits (they wait for fsync) run on a few workers that
//! own the request's reply, so the request loop keeps serving reads meanwhile; kernel cache
//! invalidations run on their own thread, never inside a request handler (the kernel may hold
//! the inode's lock while it waits for that handler's reply).

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads running jobs in submission order (per thread).
pub struct Pool {
    tx: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    pub fn new(threads: usize, name: &str) -> std::io::Result<Pool> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let threads = (0..threads.max(1))
            .map(|i| {
                let rx: Receiver<Job> = rx.clone();
                std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || {
                    for job in rx {
                        job();
                    }
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Pool { tx: Some(tx), threads })
    }

    /// Run `job` on one of the threads (at once on this one if the pool has stopped).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        match &self.tx {
            Some(tx) => {
                if let Err(e) = tx.send(Box::new(job)) {
                    (e.into_inner())();
                }
            }
            None => job(),
        }
    }

    /// Finish the queued jobs and stop.
    pub fn stop(&mut self) {
        drop(self.tx.take());
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
