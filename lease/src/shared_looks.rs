//! The looks of one process's waiters at one lease, shared.
//!
//! Waiters in one process for the same lease on the same store would each read the lease
//! and the waiting line at their own pace, the first two back to back: with many of them the
//! reads, not the Paxos rounds, load the database. Here a look (the lease row and the head of
//! its line, read together) is shared: a waiter that wants a look newer than its last one
//! takes the latest such look if one was made, else waits for the look under way, else makes
//! one itself, one at a time. A release made by this process wakes the waiters at once, so
//! the first in line proposes without waiting for its next look (the LWT decides, as ever).
//! Each waiter still stands in the line with its own ticket, so the order across processes
//! is the line's, as without sharing.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::StoreError;
use crate::store::{LeaseStore, StoredLease};

/// Which store: the address of the store a client was given (clients wrap it in their own
/// timeouts, so the wrapper's address would not do). Compared, never dereferenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct StoreId(usize);

impl StoreId {
    /// The identity of `store`.
    pub(crate) fn of(store: &Arc<dyn LeaseStore>) -> Self {
        StoreId(Arc::as_ptr(store).cast::<()>() as usize)
    }
}

/// Which lease: the store and the stored row.
type Key = (StoreId, String);

/// Shared looks by lease, while some waiter holds them.
static LEASES: LazyLock<Mutex<HashMap<Key, Weak<SharedLooks>>>> = LazyLock::new(Mutex::default);

/// Leases remembered before the dead entries are swept.
const SWEEP_AT: usize = 1024;

/// One look: the lease row and the first tickets of its line, read together.
#[derive(Debug)]
pub(crate) struct Look {
    /// When the reads were sent.
    pub sent: Instant,
    /// How long they took.
    pub took: Duration,
    /// The lease row.
    pub lease: Result<Option<StoredLease>, StoreError>,
    /// The first tickets of the line, or `None` when it was not read (no line, or it failed).
    pub line: Option<Vec<String>>,
}

/// The shared looks at one lease.
#[derive(Debug, Default)]
pub(crate) struct SharedLooks {
    /// The latest look.
    last: Mutex<Option<Arc<Look>>>,
    /// Held while a look is made: one at a time.
    looking: tokio::sync::Mutex<()>,
    /// When this process last released the lease.
    released: Mutex<Option<Instant>>,
    /// Wakes the waiters when this process releases the lease.
    wake: Notify,
}

impl SharedLooks {
    /// The shared looks at `row` of `store`, for a waiter to hold while it waits.
    pub(crate) fn of(store: StoreId, row: &str) -> Arc<SharedLooks> {
        let Ok(mut leases) = LEASES.lock() else {
            return Arc::default(); // poisoned: unshared, as correct
        };
        if leases.len() >= SWEEP_AT {
            leases.retain(|_, shared| shared.strong_count() > 0);
        }
        let slot = leases.entry((store, row.to_owned())).or_default();
        if let Some(shared) = slot.upgrade() {
            return shared;
        }
        let shared = Arc::new(SharedLooks::default());
        *slot = Arc::downgrade(&shared);
        shared
    }

    /// Tells this process's waiters of `row` on `store` that it released the lease.
    pub(crate) fn released(store: StoreId, row: &str) {
        let shared = LEASES
            .lock()
            .ok()
            .and_then(|leases| leases.get(&(store, row.to_owned())).and_then(Weak::upgrade));
        if let Some(shared) = shared {
            if let Ok(mut released) = shared.released.lock() {
                *released = Some(Instant::now());
            }
            shared.wake.notify_waiters();
        }
    }

    /// When this process last released the lease.
    pub(crate) fn last_release(&self) -> Option<Instant> {
        self.released.lock().ok().and_then(|released| *released)
    }

    /// Completes when this process releases the lease (from the call on).
    pub(crate) async fn release_seen(&self) {
        self.wake.notified().await;
    }

    fn latest_after(&self, after: Option<Instant>) -> Option<Arc<Look>> {
        let last = self.last.lock().ok()?.clone()?;
        after.is_none_or(|after| last.sent > after).then_some(last)
    }

    /// A look sent after `after` (any look when `None`): the latest one if it is, else the
    /// one under way, else one made now with `make`.
    ///
    /// # Cancel safety
    /// Cancel-safe: a look dropped half-way is not recorded; another waiter makes its own.
    pub(crate) async fn look<F>(&self, after: Option<Instant>, make: F) -> Arc<Look>
    where
        F: AsyncFnOnce() -> Look,
    {
        if let Some(look) = self.latest_after(after) {
            return look;
        }
        let _looking = self.looking.lock().await;
        if let Some(look) = self.latest_after(after) {
            return look;
        }
        let look = Arc::new(make().await);
        if let Ok(mut last) = self.last.lock() {
            *last = Some(Arc::clone(&look));
        }
        look
    }
}
