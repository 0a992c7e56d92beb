//! Change events: the engine says which workspace path it changed, so that a front end that
//! caches the tree (the mount, and through it the kernel) can forget what it knew.
//!
//! Published after the change is durable and journaled and after the engine released its
//! locks, synchronously, from the thread that made the change: a subscriber may block (the
//! mount waits until the kernel dropped its entries), and when [`Engine::safe_write`] returns
//! every subscriber has seen the event. Published for the changes made through the engine's
//! own API — [`Engine::safe_write`], [`Engine::delete`], [`Engine::restore`] — whatever the
//! front end (MCP, CLI, the mount's control socket); the mount's own namespace calls (commits
//! of drafts, renames, links) are not published: the mount made them and knows.
//!
//! [`Engine::safe_write`]: super::Engine::safe_write
//! [`Engine::delete`]: super::Engine::delete
//! [`Engine::restore`]: super::Engine::restore

use std::sync::{Mutex, PoisonError};

use crate::journal::Via;

/// One path the engine changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The workspace path.
    pub path: String,
    /// The front end the change came through.
    pub via: Via,
}

/// A subscriber: called with each event; returns `false` to unsubscribe (its owner is gone).
pub type Subscriber = Box<dyn Fn(&Changed) -> bool + Send + Sync>;

/// The engine's subscribers.
#[derive(Default)]
pub(crate) struct Subscribers(Mutex<Vec<Subscriber>>);

impl Subscribers {
    pub(crate) fn add(&self, subscriber: Subscriber) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(subscriber);
    }

    /// Tell every subscriber, dropping those that say they are gone.
    pub(crate) fn publish(&self, changed: &Changed) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).retain(|subscriber| subscriber(changed));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn subscribers_see_each_event_until_they_leave() {
        let subscribers = Subscribers::default();
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        subscribers.add(Box::new(move |_| counter.fetch_add(1, Ordering::SeqCst) < 1));
        let event = Changed { path: "a".into(), via: Via::Mcp };
        subscribers.publish(&event);
        subscribers.publish(&event);
        subscribers.publish(&event);
        assert_eq!(seen.load(Ordering::SeqCst), 2, "the second call said it was gone");
    }
}
