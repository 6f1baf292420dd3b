//! The looks of one process's waiters at one lock or lease, shared.
//!
//! Waiters in one process for the same lease (or fair lock) on the same store would each
//! read it at their own pace, the first two back to back: with many of them the reads, not
//! the Paxos rounds, load the database. Here a look (what a waiter reads to learn whether
//! and when to claim: the lease row and the head of its line, or the head of a fair lock's
//! queue) is shared: a waiter that wants a look newer than its last one takes the latest
//! such look if one was made, else waits for the look under way, else makes one itself, one
//! at a time. A release made by this process wakes the waiters at once, so the first in
//! line claims without waiting for its next look (the claim decides, as ever). Each waiter
//! still stands in the line with its own cell, so the order across processes is the
//! line's, as without sharing. A look that failed is shared like any other: each waiter
//! that took it retries after its own pause, with a look newer than that one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Which store: the address of the store a client was given (clients wrap it in their own
/// timeouts, so the wrapper's address would not do). Compared, never dereferenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct StoreId(usize);

impl StoreId {
    /// The identity of `store`.
    pub(crate) fn of<S: ?Sized>(store: &Arc<S>) -> Self {
        StoreId(Arc::as_ptr(store).cast::<()>() as usize)
    }
}

/// Which lease or lock: the store and the stored row.
type Key = (StoreId, String);

/// Leases remembered at least before the dead entries are swept.
const SWEEP_AT: usize = 1024;

/// The shared looks of one kind, by lease or lock, while some waiter holds them.
pub(crate) struct Registry<T> {
    shared: LazyLock<Mutex<Entries<T>>>,
}

struct Entries<T> {
    by_key: HashMap<Key, Weak<SharedLooks<T>>>,
    /// Sweep the dead entries when this many are remembered: twice the live ones after
    /// the last sweep, so that many live ones do not make every call sweep.
    sweep_at: usize,
}

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries {
            by_key: HashMap::new(),
            sweep_at: SWEEP_AT,
        }
    }
}

impl<T> Registry<T> {
    /// An empty registry, for a `static`.
    pub(crate) const fn new() -> Self {
        Registry {
            shared: LazyLock::new(Mutex::default),
        }
    }

    /// The shared looks at `row` of `store`, for a waiter to hold while it waits.
    pub(crate) fn of(&self, store: StoreId, row: &str) -> Arc<SharedLooks<T>> {
        let Ok(mut entries) = self.shared.lock() else {
            return Arc::default(); // poisoned: unshared, as correct
        };
        if entries.by_key.len() >= entries.sweep_at {
            entries.by_key.retain(|_, shared| shared.strong_count() > 0);
            entries.sweep_at = (entries.by_key.len() * 2).max(SWEEP_AT);
        }
        let slot = entries.by_key.entry((store, row.to_owned())).or_default();
        if let Some(shared) = slot.upgrade() {
            return shared;
        }
        let shared = Arc::new(SharedLooks::default());
        *slot = Arc::downgrade(&shared);
        shared
    }

    /// Tells this process's waiters of `row` on `store` that it released the lease.
    pub(crate) fn released(&self, store: StoreId, row: &str) {
        let shared = self.shared.lock().ok().and_then(|entries| {
            entries
                .by_key
                .get(&(store, row.to_owned()))
                .and_then(Weak::upgrade)
        });
        if let Some(shared) = shared {
            shared.was_released();
        }
    }

    /// How many leases or locks are remembered, dead ones included.
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.shared.lock().map_or(0, |entries| entries.by_key.len())
    }
}

/// One look: what was read, when, and how long it took.
#[derive(Debug)]
pub(crate) struct Look<T> {
    /// When the reads were sent.
    pub sent: Instant,
    /// How long they took.
    pub took: Duration,
    /// What they read.
    pub seen: T,
}

/// What a process's contenders on a lock had done by some moment (see
/// [`SharedLooks::tally`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Claims that had left the main row.
    pub departures: u64,
    /// Claims made, holds begun and claims gone.
    pub stirs: u64,
}

impl Tally {
    /// The earlier of two tallies, counter by counter.
    pub(crate) fn min(self, other: Tally) -> Tally {
        Tally {
            departures: self.departures.min(other.departures),
            stirs: self.stirs.min(other.stirs),
        }
    }
}

/// A waiter of this process in a fair lock's queue.
#[derive(Debug)]
struct Queued {
    /// Its contender id.
    id: String,
    /// What lives as long as it waits or holds.
    alive: Weak<dyn Send + Sync>,
    /// When it left the main row as a holder, if it did.
    left: Option<Instant>,
}

/// How long a departed holder's queue cell counts as this process's: its cell may still
/// show in looks for a few round trips.
const REMEMBER_LEFT: Duration = Duration::from_secs(1);

/// The shared looks at one lease or lock.
#[derive(Debug)]
pub(crate) struct SharedLooks<T> {
    /// The latest look.
    last: Mutex<Option<Arc<Look<T>>>>,
    /// The look under way, if one is: one at a time, unless it is overdue.
    looking: Mutex<Option<UnderWay>>,
    /// When this process last released the lease.
    released: Mutex<Option<Instant>>,
    /// Wakes the waiters when this process releases the lease.
    wake: Notify,
    /// The contenders of this process with a claim in the lock's main row, and whether
    /// each holds the lock (for a lease: the holders of this process).
    in_main: Mutex<HashMap<String, bool>>,
    /// How many holders of this process have left the lock's main row so far.
    departures: AtomicU64,
    /// Wakes the waiters counting departures.
    departed: Notify,
    /// How many times so far a contender of this process claimed the main row, came to
    /// hold the lock or left the main row.
    stirs: AtomicU64,
    /// This process's waiters' queue cells on the lock, while the waiter is alive and for
    /// a moment after it left: what the process knows of their claims is all there is to
    /// know (a claim sent but not confirmed counts as not made). Keyed by queue cell, not
    /// by id: an id is reused by the same contender's next acquisition.
    ours: Mutex<HashMap<String, Queued>>,
}

impl<T> Default for SharedLooks<T> {
    fn default() -> Self {
        SharedLooks {
            last: Mutex::new(None),
            looking: Mutex::new(None),
            released: Mutex::new(None),
            wake: Notify::new(),
            in_main: Mutex::new(HashMap::new()),
            departures: AtomicU64::new(0),
            departed: Notify::new(),
            stirs: AtomicU64::new(0),
            ours: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> SharedLooks<T> {
    /// Contender `id` of this process has its claim in the lock's main row (and does not
    /// hold the lock yet).
    pub(crate) fn claimed(&self, id: &str) {
        if let Ok(mut here) = self.in_main.lock() {
            here.insert(id.to_owned(), false);
        }
        self.stirs.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    /// A new contender takes the id `id`: whatever was known of an earlier one under it (a
    /// guard abandoned, a release not confirmed) is forgotten.
    pub(crate) fn new_contender(&self, id: &str) {
        if let Ok(mut here) = self.in_main.lock() {
            here.remove(id);
        }
    }

    /// Contender `id` of this process waits in line under the queue cell `cell`, for as
    /// long as `alive` lives and until it leaves the main row as a holder.
    pub(crate) fn queued(&self, cell: &str, id: &str, alive: Weak<dyn Send + Sync>) {
        if let Ok(mut ours) = self.ours.lock() {
            ours.retain(|_, queued| match queued.left {
                Some(left) => left.elapsed() < REMEMBER_LEFT,
                None => queued.alive.strong_count() > 0,
            });
            let queued = Queued {
                id: id.to_owned(),
                alive,
                left: None,
            };
            ours.insert(cell.to_owned(), queued);
        }
    }

    /// Whether the queue cell `cell` is a waiter of this process that has not left: then
    /// whether it has a claim in the main row and whether it holds the lock are known
    /// here without a read.
    pub(crate) fn ours(&self, cell: &str) -> bool {
        self.ours.lock().is_ok_and(|ours| {
            ours.get(cell)
                .is_some_and(|queued| queued.left.is_none() && queued.alive.strong_count() > 0)
        })
    }

    /// Whether the queue cell `cell` is a waiter of this process, or was one that left
    /// the main row as a holder less than [`REMEMBER_LEFT`] ago.
    pub(crate) fn ours_or_left(&self, cell: &str) -> bool {
        self.ours.lock().is_ok_and(|ours| {
            ours.get(cell).is_some_and(|queued| match queued.left {
                Some(left) => left.elapsed() < REMEMBER_LEFT,
                None => queued.alive.strong_count() > 0,
            })
        })
    }

    /// Holder `id` of this process holds the lease (its release wakes the waiters).
    pub(crate) fn holding(&self, id: &str) {
        if let Ok(mut here) = self.in_main.lock() {
            here.insert(id.to_owned(), true);
        }
    }

    /// Holder `id` of this process no longer holds the lease (released, or lost).
    pub(crate) fn let_go(&self, id: &str) {
        if let Ok(mut here) = self.in_main.lock() {
            here.remove(id);
        }
    }

    /// Contender `id` of this process holds the lock: wakes the waiters.
    pub(crate) fn holds(&self, id: &str) {
        if let Ok(mut here) = self.in_main.lock() {
            here.insert(id.to_owned(), true);
        }
        self.stirs.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    /// Contender `id` of this process has no claim in the main row any more (its delete
    /// was confirmed, or given up): wakes the waiters.
    pub(crate) fn gone(&self, id: &str) {
        let held = self
            .in_main
            .lock()
            .is_ok_and(|mut here| here.remove(id).unwrap_or(false));
        // Only a holder's leaving moves the queue; a claim that gives way does not. A
        // holder that left is done: no longer a contender to wait on.
        if held {
            if let Ok(mut ours) = self.ours.lock() {
                let now = Instant::now();
                for queued in ours.values_mut().filter(|queued| queued.id == id) {
                    queued.left.get_or_insert(now);
                }
            }
            self.departures.fetch_add(1, Ordering::SeqCst);
            self.departed.notify_waiters();
        }
        self.stirs.fetch_add(1, Ordering::SeqCst);
        self.was_released();
    }

    /// How many holders of this process have left the main row so far
    /// ([`SharedLooks::gone`] after [`SharedLooks::holds`]).
    pub(crate) fn departures(&self) -> u64 {
        self.departures.load(Ordering::SeqCst)
    }

    /// Completes when a holder of this process leaves the main row: from the call on once
    /// enabled ([`Notified::enable`](tokio::sync::futures::Notified::enable)) or first polled.
    pub(crate) fn departure_seen(&self) -> tokio::sync::futures::Notified<'_> {
        self.departed.notified()
    }

    /// How many times so far a contender of this process claimed the main row, came to
    /// hold the lock or left the main row.
    pub(crate) fn stirs(&self) -> u64 {
        self.stirs.load(Ordering::SeqCst)
    }

    /// What this process's contenders have done so far: taken before a read, what the
    /// read may not show yet.
    pub(crate) fn tally(&self) -> Tally {
        Tally {
            departures: self.departures(),
            stirs: self.stirs(),
        }
    }

    /// Whether contender `id` has its claim in the main row, from this process.
    pub(crate) fn in_main_here(&self, id: &str) -> bool {
        self.in_main.lock().is_ok_and(|here| here.contains_key(id))
    }

    /// Whether contender `id` holds the lock, in this process: when it leaves, it wakes us.
    pub(crate) fn held_here(&self, id: &str) -> bool {
        self.in_main
            .lock()
            .is_ok_and(|here| here.get(id).copied().unwrap_or(false))
    }

    /// Tells this process's waiters that a holder here released the lock.
    pub(crate) fn was_released(&self) {
        if let Ok(mut released) = self.released.lock() {
            *released = Some(Instant::now());
        }
        self.wake.notify_waiters();
    }

    /// When this process last released the lease.
    pub(crate) fn last_release(&self) -> Option<Instant> {
        self.released.lock().ok().and_then(|released| *released)
    }

    /// Completes when this process releases the lease (or, on a fair lock, when one of its
    /// contenders holds it or leaves the main row): from the call on once enabled
    /// ([`Notified::enable`](tokio::sync::futures::Notified::enable)) or first polled.
    pub(crate) fn release_seen(&self) -> tokio::sync::futures::Notified<'_> {
        self.wake.notified()
    }

    /// The latest look, if any was made.
    pub(crate) fn latest(&self) -> Option<Arc<Look<T>>> {
        self.latest_after(None)
    }

    pub(crate) fn latest_after(&self, after: Option<Instant>) -> Option<Arc<Look<T>>> {
        let last = self.last.lock().ok()?.clone()?;
        after.is_none_or(|after| last.sent > after).then_some(last)
    }
}

mod under_way;

use under_way::UnderWay;

#[cfg(test)]
mod tests;
