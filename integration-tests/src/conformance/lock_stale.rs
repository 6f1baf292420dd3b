//! Lock scenarios for a slow contender between its read and its write: a read served at
//! once but answered late, while the contender's own "I am
//! choosing" (bakery) or "I am trying" (shadow row) cell expires in the store. Lamport's
//! bakery and the shadow-row protocol both rely on that cell being visible until the
//! contender's next write (the ticket, the main cell) has landed; a TTL'd cell can vanish
//! first, and a newcomer that no longer sees it may enter on a view that misses the slow
//! contender's write still to come.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::cells::rows::{MAIN, NUMBER};
use cql_lease::cells::{Cell, CellRef, CellStore};
use cql_lease::lock::{BakeryLock, Contenders, Lock, LockGuard, LockOptions, ShadowLock};
use cql_lease::{StoreError, Timing};
use tokio::time::Instant;

use super::lock::{Algo, LockBackend, SHADOW_BACKOFF, lock_name, lock_options};

const LONG: Duration = Duration::from_secs(600);

/// A cell store whose `nth` read of row `row` is served at once and answered `delay` later
/// (stale by then), as a slow network or a paused process would make it.
struct StaleRead {
    inner: Arc<dyn CellStore>,
    row: &'static str,
    nth: usize,
    seen: AtomicUsize,
    delay: Duration,
}

#[async_trait]
impl CellStore for StaleRead {
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError> {
        self.inner.write(at, value, ttl, timestamp).await
    }
    async fn delete(&self, at: CellRef<'_>, timestamp: i64) -> Result<(), StoreError> {
        self.inner.delete(at, timestamp).await
    }
    async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<Cell>, StoreError> {
        let answer = self.inner.read_row(lock, row, from, limit).await;
        if row == self.row && self.seen.fetch_add(1, Ordering::Relaxed) == self.nth {
            tokio::time::sleep(self.delay).await;
        }
        answer
    }
    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError> {
        self.inner.read_cell(at).await
    }
}

/// The slow contender's read is answered this late: past the TTL of the cell it wrote just
/// before (whole seconds on the store).
fn stale_by() -> Duration {
    lock_options().timing.lease_duration * 3 / 2
}
/// The newcomer starts once the slow contender's cell has expired on every store.
fn newcomer_at() -> Duration {
    lock_options().timing.lease_duration + Duration::from_millis(100)
}

/// A contender that reads (the tickets, the main row), stalls past its own choosing/shadow
/// cell's TTL, then writes (its ticket, its main cell) must not enter beside a newcomer that
/// entered in the meantime.
pub async fn slow_contender_between_read_and_write(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("stale-read");
    let (row, nth) = match algo {
        Algo::Bakery => (NUMBER, 0), // the max read before the ticket is written
        Algo::Shadow => (MAIN, 1),   // the main-row read after the shadow row said "alone"
        _ => return,
    };
    let stale: Arc<dyn CellStore> = Arc::new(StaleRead {
        inner: b.cells(),
        row,
        nth,
        seen: AtomicUsize::new(0),
        delay: stale_by(),
    });
    // The slow one gets the lower id, so the bakery's tie (same ticket) goes its way.
    let make = |store: Arc<dyn CellStore>, key: &str, options: LockOptions| -> Arc<dyn Lock> {
        let contenders = Contenders::new(key).unwrap();
        match algo {
            Algo::Bakery => {
                Arc::new(BakeryLock::with_contenders(store, options, contenders).unwrap())
            }
            _ => Arc::new(
                ShadowLock::new(store, options)
                    .unwrap()
                    .with_owner_backoff(SHADOW_BACKOFF),
            ),
        }
    };
    // Patient with requests, or its reads would be cut by the request timeout and sent
    // again (fresh) instead of answered stale: the stall stands for a paused process too.
    let patient = LockOptions {
        timing: Timing {
            request_timeout: Some(LONG),
            resolve_timeout: stale_by() * 3,
            ..lock_options().timing
        },
        ..lock_options()
    };
    let slow = make(stale, "a-slow", patient);
    let fast = make(b.cells(), "b-fast", lock_options());
    let t0 = Instant::now();
    let slow_task = {
        let name = name.clone();
        tokio::spawn(async move { slow.lock(&name, Some(LONG)).await.unwrap() })
    };
    tokio::time::sleep_until(t0 + newcomer_at()).await;
    let fast_guard: LockGuard = fast
        .lock(&name, Some(lock_options().timing.lease_duration * 5 / 2))
        .await
        .unwrap();
    // The slow contender wakes at t0 + stale_by(); give it time to (wrongly) enter.
    tokio::time::sleep_until(t0 + stale_by() + Duration::from_millis(700)).await;
    let both = slow_task.is_finished() && fast_guard.is_held();
    fast_guard.release().await.unwrap();
    let slow_guard = slow_task.await.unwrap();
    assert!(
        !both,
        "{} / {algo:?}: the slow contender entered beside the newcomer",
        b.name()
    );
    slow_guard.release().await.unwrap();
}
