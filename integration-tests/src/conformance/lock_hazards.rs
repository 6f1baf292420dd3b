//! Lock scenarios for hazards a Jepsen-style fault model brings out: a waiter's slow
//! refresh, a contender id reused by a process whose clock is behind, and a `lock()` future
//! dropped while a write is in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::StoreError;
use cql_lease::Timing;
use cql_lease::cells::memory::CellOp;
use cql_lease::cells::rows::{CHOOSING, MAIN, NUMBER, QUEUE, SHADOW};
use cql_lease::cells::{Cell, CellRef, CellStore, wall_micros};
use cql_lease::lock::{BakeryLock, Contenders, Lock, LockError, LockOptions};
use cql_lease::memory::{Fault, Times};
use tokio::time::Instant;

use super::lock::{Algo, LockBackend, contender, contender_with, lock_name, lock_options};

const LONG: Duration = Duration::from_secs(600);

/// Timing with room for a slow refresh: validity 5 s, store TTL 6 s, refresh every 2.5 s (so a
/// refresh can be answered after the old ticket expired yet within its own validity).
fn slow_refresh_options() -> LockOptions {
    LockOptions {
        timing: Timing {
            lease_duration: Duration::from_secs(6),
            renew_period: Duration::from_millis(2500),
            retry_period: Duration::from_millis(100),
            max_clock_skew: Duration::ZERO,
            resolve_timeout: Duration::from_secs(2),
            // The refresh must be waited for to land late (the scenario), not given up.
            request_timeout: Some(Duration::from_secs(5)),
        },
        poll_interval: Duration::from_millis(20),
    }
}

/// A waiter whose ticket refresh is answered only after the ticket's validity (the ticket
/// expired in between, and a newcomer drew a number without seeing it) must not count that
/// refresh: it starts again, so the newcomer and it are never inside together.
pub async fn slow_refresh_restarts_the_waiter(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("slow-refresh");
    let o = slow_refresh_options();
    let (h, i, j) = (
        contender_with(b, algo, 0, o),
        contender_with(b, algo, 1, o),
        contender_with(b, algo, 2, o),
    );
    let t0 = Instant::now();
    let h_guard = h.lock.lock(&name, Some(LONG)).await.unwrap();
    let i_task = {
        let (lock, name) = (Arc::clone(&i.lock), name.clone());
        tokio::spawn(async move { lock.lock(&name, Some(LONG)).await.unwrap() })
    };
    tokio::time::sleep_until(t0 + Duration::from_millis(500)).await;
    // I's next write is its refresh at ~2.5 s; it lands at ~6.5 s, after I's ticket (written
    // at ~0, TTL 6 s) expired, and is answered within the refresh's own validity.
    i.view.inject(
        Some(CellOp::Write),
        Fault::Latency(Duration::from_millis(4000)),
        Times::Next(1),
    );
    tokio::time::sleep_until(t0 + Duration::from_millis(6200)).await;
    let j_task = {
        let (lock, name) = (Arc::clone(&j.lock), name.clone());
        tokio::spawn(async move { lock.lock(&name, Some(LONG)).await.unwrap() })
    };
    tokio::time::sleep_until(t0 + Duration::from_millis(6800)).await;
    h_guard.release().await.unwrap();
    let i_guard = i_task.await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    if j_task.is_finished() {
        let j_guard = j_task.await.unwrap();
        assert!(
            !(i_guard.is_held() && j_guard.is_held()),
            "{} / {algo:?}: two holders after a slow refresh",
            b.name()
        );
    } else {
        i_guard.release().await.unwrap();
        j_task.await.unwrap().release().await.unwrap();
    }
}

/// A cell store that hides the first ticket written through it behind a delete timestamped
/// a minute ahead: what an earlier incarnation with the same contender id and a fast clock
/// leaves behind.
struct HidesFirstTicket {
    inner: Arc<dyn CellStore>,
    done: AtomicBool,
}

#[async_trait]
impl CellStore for HidesFirstTicket {
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError> {
        self.inner.write(at, value, ttl, timestamp).await?;
        if at.row == NUMBER && !self.done.swap(true, Ordering::Relaxed) {
            self.inner.delete(at, wall_micros() + 60_000_000).await?;
        }
        Ok(())
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
        self.inner.read_row(lock, row, from, limit).await
    }
    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError> {
        self.inner.read_cell(at).await
    }
}

/// A restarted process that reuses its process key while its clock is behind its previous
/// incarnation's: the old tombstones must not hide its new cells (ids carry a random
/// incarnation), and a ticket hidden anyway is a typed error, never an entry.
pub async fn reused_contender_key_cannot_hide_a_ticket(b: &dyn LockBackend, algo: Algo) {
    // The previous incarnation of "host1" (clock a minute ahead) deleted its ticket.
    let name = lock_name("reused-key");
    let old_ticket = CellRef {
        lock: &name,
        row: NUMBER,
        cell: "host1/000000",
    };
    b.cells()
        .delete(old_ticket, wall_micros() + 60_000_000)
        .await
        .unwrap();
    let restarted =
        BakeryLock::with_contenders(b.cells(), lock_options(), Contenders::new("host1").unwrap())
            .unwrap();
    let other = contender(b, algo, 1);
    let guard = restarted
        .lock(&name, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    let second = other.lock.lock(&name, Some(Duration::from_secs(1))).await;
    assert!(
        matches!(second, Err(LockError::Timeout { .. })),
        "{} / {algo:?}: a second contender got in: {second:?}",
        b.name()
    );
    guard.release().await.unwrap();

    // Any id, hidden anyway: the read-back refuses to enter.
    let name = lock_name("hidden-ticket");
    let hiding: Arc<dyn CellStore> = Arc::new(HidesFirstTicket {
        inner: b.cells(),
        done: AtomicBool::new(false),
    });
    let hidden = BakeryLock::new(hiding, lock_options()).unwrap();
    let got = hidden.lock(&name, Some(Duration::from_secs(5))).await;
    assert!(
        matches!(got, Err(LockError::Shadowed { .. })),
        "{} / {algo:?}: entered on a hidden ticket: {got:?}",
        b.name()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let next = other.lock.try_lock(&name).await.unwrap();
    assert!(next.is_some(), "{algo:?}: the refused contender left cells");
}

/// A `lock()` future dropped at any point (here: while writes are applied but unanswered)
/// leaves no cell behind once its background cleanup ran.
pub async fn dropped_lock_leaves_no_cell(b: &dyn LockBackend, algo: Algo) {
    // Cells that live long enough for a busy machine's cleanup to be told from their TTL.
    let options = LockOptions {
        timing: Timing {
            lease_duration: Duration::from_secs(8),
            ..lock_options().timing
        },
        ..lock_options()
    };
    let c = contender_with(b, algo, 0, options);
    c.view.inject_slow_answer(
        Some(CellOp::Write),
        Duration::from_millis(30),
        Times::Always,
    );
    let mut dropped = 0;
    for step in 0..8u64 {
        let name = lock_name("dropped");
        let cut = Duration::from_millis(5 + 10 * step);
        match tokio::time::timeout(cut, c.lock.lock(&name, Some(LONG))).await {
            Ok(guard) => guard.unwrap().release().await.unwrap(),
            Err(_) => dropped += 1,
        }
        // Wait for the background cleanup, but not until the TTL could have removed the
        // cells instead (8 s, whole seconds on Cassandra).
        let cleaned_by = Instant::now() + Duration::from_secs(3);
        loop {
            let mut left = Vec::new();
            for row in [CHOOSING, NUMBER, QUEUE, MAIN, SHADOW] {
                let cells = b.cells().read_row(&name, row, "", 10).await.unwrap();
                left.extend(cells.into_iter().map(|c| (row, c)));
            }
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < cleaned_by,
                "{} / {algo:?}: cut at {cut:?} left {left:?}",
                b.name()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(dropped > 0, "{algo:?}: never cut mid-acquisition");
}
