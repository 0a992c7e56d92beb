//! `batch` durability's order: closes being staged and changes made durable at once never
//! overlap, so the tree after a power loss is the state after a prefix of the journal.
//!
//! ```text
//!   Stage    a close of the mount: its row written (not synced), its draft handed to the
//!            group commit (batch.rs). Many at once.
//!   Change   everything else the journal orders: MCP and CLI writes, deletes, renames, links,
//!            restores. Drains the batch first, then its row is durable and its change visible
//!            and synced before it ends. Many at once.
//! ```
//!
//! A close staged while a change drains the batch used to get a row *before* the change's own
//! row and stay uninstalled while the change became durable: after a power cut the change was
//! there and the acknowledged close was not (issue 25). With the two kinds apart, every row of
//! a close comes either before a change's drain (which installs it and makes it durable first)
//! or after the change is durable.
//!
//! Fairness: while one kind runs, the other kind's arrivals wait; once the running ones are
//! done, every waiter of the other kind goes in together (so neither kind starves the other),
//! and arrivals of the same kind join a turn only while nobody of the other kind waits.
//!
//! What it does not do: order changes among themselves (concurrent changes finish in any
//! order, as in `close` durability: each is acknowledged only once durable), or take path
//! locks. A holder never waits for the other kind, and takes its turn before any path lock
//! (the group commit takes path locks and is waited for by a change's drain).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The two kinds of work (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Stage,
    Change,
}

impl Kind {
    fn index(self) -> usize {
        match self {
            Kind::Stage => 0,
            Kind::Change => 1,
        }
    }

    fn other(self) -> Kind {
        match self {
            Kind::Stage => Kind::Change,
            Kind::Change => Kind::Stage,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// The kind inside and how many of it.
    inside: Option<(Kind, usize)>,
    /// Waiting, per kind.
    waiting: [usize; 2],
    /// Waiters of this kind let in together when the last holder of the other kind left:
    /// how many of them may still enter past the other kind's waiters.
    admitted: Option<(Kind, usize)>,
}

/// The lock that keeps the two kinds apart.
#[derive(Debug, Default)]
pub(crate) struct Order {
    state: Mutex<State>,
    changed: Condvar,
}

/// One holder's turn; the next kind may go once every turn of this kind has been dropped.
#[must_use = "the order holds only while the turn is kept"]
pub(crate) struct Turn<'o> {
    order: &'o Order,
    kind: Kind,
}

impl Order {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wait for a turn of `kind`.
    pub(crate) fn enter(&self, kind: Kind) -> Turn<'_> {
        let mut state = self.lock();
        state.waiting[kind.index()] += 1;
        loop {
            let admitted = matches!(state.admitted, Some((k, n)) if k == kind && n > 0);
            let others_wait = state.waiting[kind.other().index()] > 0;
            let may = match state.inside {
                None => admitted || state.admitted.is_none() || !others_wait,
                Some((k, _)) if k == kind => admitted || !others_wait,
                Some(_) => false,
            };
            if may {
                break;
            }
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.waiting[kind.index()] -= 1;
        if let Some((k, n)) = &mut state.admitted
            && *k == kind
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                state.admitted = None;
            }
        }
        state.inside = match state.inside {
            Some((k, n)) if k == kind => Some((k, n + 1)),
            _ => Some((kind, 1)),
        };
        Turn { order: self, kind }
    }

    fn leave(&self, kind: Kind) {
        let mut state = self.lock();
        let left = match state.inside {
            Some((k, n)) if k == kind && n > 1 => Some((k, n - 1)),
            _ => None,
        };
        state.inside = left;
        if left.is_none() {
            // The other kind's waiters go in together; else this kind's, if any wait.
            let other = kind.other();
            state.admitted = match (state.waiting[other.index()], state.waiting[kind.index()]) {
                (0, 0) => None,
                (0, n) => Some((kind, n)),
                (n, _) => Some((other, n)),
            };
        }
        // Waiters count themselves under the lock before they wait: none counted, none to wake
        // (a notify is a futex call even then; every staged close ends a turn).
        let wake = state.waiting != [0, 0];
        drop(state);
        if wake {
            self.changed.notify_all();
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.order.leave(self.kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_kinds_never_overlap_and_neither_starves() {
        let order = Arc::new(Order::default());
        let inside = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let done = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (order, inside, done) = (order.clone(), inside.clone(), done.clone());
                std::thread::spawn(move || {
                    let kind = if t % 4 == 0 { Kind::Change } else { Kind::Stage };
                    for _ in 0..200 {
                        let turn = order.enter(kind);
                        inside[kind.index()].fetch_add(1, Ordering::SeqCst);
                        assert_eq!(inside[kind.other().index()].load(Ordering::SeqCst), 0, "both kinds inside");
                        std::thread::yield_now();
                        inside[kind.index()].fetch_sub(1, Ordering::SeqCst);
                        drop(turn);
                        done[kind.index()].fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(done[0].load(Ordering::SeqCst), 6 * 200);
        assert_eq!(done[1].load(Ordering::SeqCst), 2 * 200);
    }

    #[test]
    fn a_turn_of_the_same_kind_joins_while_nobody_else_waits() {
        let order = Order::default();
        let a = order.enter(Kind::Stage);
        let b = order.enter(Kind::Stage);
        drop(a);
        let c = order.enter(Kind::Stage);
        drop((b, c));
        let d = order.enter(Kind::Change);
        let e = order.enter(Kind::Change);
        drop((d, e));
    }
}
