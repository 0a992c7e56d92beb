//! Hand-over between threads that sleep until they are woken: a [`Queue`] of work and a one-shot
//! [`reply`]. A waiter blocks on a condition variable (one futex wait) and never spins first.
//!
//! `crossbeam-channel`'s blocking receive, which these replace on the commit path, spins and then
//! calls `sched_yield` several times before it parks: the journal writer, the mount's commit
//! threads, the spare-file thread and every committer waiting for its row did that at each
//! commit (~14 `sched_yield` per committed file), which on 2 shared cores costs more than the
//! wake-up it waits for. This module does no I/O and knows nothing of what it carries.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// A first-in first-out queue shared by producers and the threads that take from it, with an
/// optional capacity and a `close` that lets takers drain what is queued and stop.
pub struct Queue<T> {
    state: Mutex<QueueState<T>>,
    ready: Condvar,
    capacity: usize,
}

struct QueueState<T> {
    items: VecDeque<T>,
    closed: bool,
    /// Takers asleep on `ready`: a push wakes one only when there is one (a futex call saved
    /// per item while the taker is busy).
    sleeping: usize,
}

/// What [`Queue::pop`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Popped<T> {
    Item(T),
    /// Nothing arrived before the timeout.
    TimedOut,
    /// Closed, and nothing is left.
    Closed,
}

impl<T> Default for Queue<T> {
    fn default() -> Queue<T> {
        Queue::bounded(usize::MAX)
    }
}

impl<T> Queue<T> {
    /// A queue that refuses items beyond `capacity` ([`Queue::push`] hands them back).
    pub fn bounded(capacity: usize) -> Queue<T> {
        Queue {
            state: Mutex::new(QueueState { items: VecDeque::new(), closed: false, sleeping: 0 }),
            ready: Condvar::new(),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queue `item` and wake one taker; the item back when the queue is closed or full.
    pub fn push(&self, item: T) -> Result<(), T> {
        let mut state = self.lock();
        if state.closed || state.items.len() >= self.capacity {
            return Err(item);
        }
        state.items.push_back(item);
        let sleeping = state.sleeping > 0;
        drop(state);
        if sleeping {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// Sleep on `ready` (counted in `sleeping`, so that a push knows to wake us).
    fn sleep<'a>(
        &self,
        mut state: MutexGuard<'a, QueueState<T>>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, QueueState<T>> {
        state.sleeping += 1;
        let mut state = match timeout {
            None => self.ready.wait(state).unwrap_or_else(PoisonError::into_inner),
            Some(timeout) => self.ready.wait_timeout(state, timeout).unwrap_or_else(PoisonError::into_inner).0,
        };
        state.sleeping -= 1;
        state
    }

    /// The next item, waiting for one at most `timeout` (`None`: as long as it takes).
    pub fn pop(&self, timeout: Option<Duration>) -> Popped<T> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut state = self.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                return Popped::Item(item);
            }
            if state.closed {
                return Popped::Closed;
            }
            state = match deadline {
                None => self.sleep(state, None),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Popped::TimedOut;
                    }
                    self.sleep(state, Some(left))
                }
            };
        }
    }

    /// Everything queued, up to `max` items, waiting until there is at least one; empty once the
    /// queue is closed and drained.
    pub fn take(&self, max: usize) -> Vec<T> {
        let mut state = self.lock_with_items();
        let n = state.items.len().min(max);
        state.items.drain(..n).collect()
    }

    /// What is queued, up to `max` items, without waiting (maybe none); `None` once closed (what
    /// is still queued then is for the takers that drain it).
    pub fn take_now(&self, max: usize) -> Option<Vec<T>> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        let n = state.items.len().min(max);
        Some(state.items.drain(..n).collect())
    }

    /// Wait until something is queued (true) or the queue is closed and drained (false); takes
    /// nothing.
    pub fn wait_for_items(&self) -> bool {
        !self.lock_with_items().items.is_empty()
    }

    /// The state once something is queued or the queue is closed (waiting as long as it takes).
    fn lock_with_items(&self) -> MutexGuard<'_, QueueState<T>> {
        let mut state = self.lock();
        while state.items.is_empty() && !state.closed {
            state = self.sleep(state, None);
        }
        state
    }

    /// Refuse new items; takers get what is queued, then [`Popped::Closed`] (or nothing).
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// A one-shot reply: the [`Replier`] sends one value, the [`Reply`] waits for it.
pub fn reply<T>() -> (Replier<T>, Reply<T>) {
    let slot = Arc::new(Slot { value: Mutex::new(Sent::Waiting), sent: Condvar::new(), sleeping: false.into() });
    (Replier(Some(slot.clone())), Reply(slot))
}

struct Slot<T> {
    value: Mutex<Sent<T>>,
    sent: Condvar,
    /// The waiter sleeps on `sent` (a reply sent before anyone waits wakes nobody: no futex call).
    sleeping: std::sync::atomic::AtomicBool,
}

enum Sent<T> {
    Waiting,
    Value(T),
    /// The replier went away without sending.
    Dropped,
}

impl<T> Slot<T> {
    fn set(&self, sent: Sent<T>) {
        let mut value = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        *value = sent;
        // Read under the lock the waiter sets it under: it cannot start sleeping unseen.
        let sleeping = self.sleeping.load(std::sync::atomic::Ordering::Relaxed);
        drop(value);
        if sleeping {
            self.sent.notify_all();
        }
    }
}

/// The sending half of a [`reply`]; dropping it unsent releases the waiter with `None`.
pub struct Replier<T>(Option<Arc<Slot<T>>>);

impl<T> Replier<T> {
    pub fn send(mut self, value: T) {
        if let Some(slot) = self.0.take() {
            slot.set(Sent::Value(value));
        }
    }
}

impl<T> Drop for Replier<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.set(Sent::Dropped);
        }
    }
}

/// The waiting half of a [`reply`].
pub struct Reply<T>(Arc<Slot<T>>);

impl<T> Reply<T> {
    /// The value, once sent; `None` if the replier went away without sending.
    pub fn wait(self) -> Option<T> {
        let mut value = self.0.value.lock().unwrap_or_else(PoisonError::into_inner);
        while matches!(*value, Sent::Waiting) {
            self.0.sleeping.store(true, std::sync::atomic::Ordering::Relaxed);
            value = self.0.sent.wait(value).unwrap_or_else(PoisonError::into_inner);
        }
        match std::mem::replace(&mut *value, Sent::Dropped) {
            Sent::Value(v) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_hands_items_over_in_order_and_drains_after_close() {
        let queue = Arc::new(Queue::default());
        let taker = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while let Popped::Item(i) = queue.pop(None) {
                    got.push(i);
                }
                got
            })
        };
        for i in 0..100 {
            queue.push(i).unwrap();
        }
        queue.close();
        assert_eq!(queue.push(100), Err(100), "closed");
        assert_eq!(taker.join().unwrap(), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn take_batches_what_is_queued_and_pop_times_out() {
        let queue = Queue::bounded(3);
        assert_eq!(queue.pop(Some(Duration::from_millis(10))), Popped::TimedOut);
        for i in 0..3 {
            queue.push(i).unwrap();
        }
        assert_eq!(queue.push(3), Err(3), "full");
        assert_eq!(queue.take(2), [0, 1]);
        assert_eq!(queue.take(10), [2]);
        queue.close();
        assert!(queue.take(10).is_empty());
        assert_eq!(queue.pop(None), Popped::Closed);
    }

    #[test]
    fn a_reply_is_waited_for_or_reported_dropped() {
        let (replier, reply) = super::reply();
        let sender = std::thread::spawn(move || replier.send(7));
        assert_eq!(reply.wait(), Some(7));
        sender.join().unwrap();
        let (replier, reply) = super::reply::<u32>();
        drop(replier);
        assert_eq!(reply.wait(), None);
    }
}
