//! An undone claim's give-back still on the wire when the queue cuts the claim (its own
//! bound, two thirds of the validity) never undoes the claim the cut's read-back counts:
//! the item runs once.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::cells::memory::CellOp;
use cql_lease::memory::{Fault, Times};
use cql_lease::{StoreError, Timing};
use cql_workqueue::bakery::PlainItemStore;
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::{ClaimMode, ItemKey, JobState, QueueConfig, StoredItem, WorkQueue};
use integration_tests::conformance::queue::queue_config;
use integration_tests::tweaked::Tweaked;
use tokio::time::Instant;

/// The embedded plain item rows, except that one armed write reaches the store `delay`
/// after it is sent, whether or not its sender is still waiting for the answer (a
/// coordinator keeps working on a write its client stopped waiting for).
struct LateWrite {
    inner: Arc<dyn PlainItemStore>,
    armed: AtomicBool,
    delay: Duration,
    sent_at: Mutex<Option<Instant>>,
}

#[async_trait]
impl PlainItemStore for LateWrite {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        if !self.armed.swap(false, Ordering::SeqCst) {
            return self.inner.write_item(item, ts).await;
        }
        if let Ok(mut sent_at) = self.sent_at.lock() {
            *sent_at = Some(Instant::now());
        }
        let (inner, item, delay) = (Arc::clone(&self.inner), item.clone(), self.delay);
        let landing = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            inner.write_item(&item, ts).await
        });
        landing
            .await
            .unwrap_or_else(|e| Err(StoreError::Unknown(format!("late write: {e}"))))
    }

    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// Default timing (validity 13.5 s, request timeout 4.5 s, retry period 2 s): the claim's
/// bound is 9 s and its high-water mark is sent again until 8 s after the draw, so a
/// give-back after a failed mark starts just before the claim is cut.
fn default_timing_config() -> QueueConfig {
    QueueConfig {
        timing: Timing::default(),
        claim_mode: ClaimMode::Bakery,
        max_attempts: 3,
        ..queue_config()
    }
}

/// Safety (no duplicate run). Process A claims; its high-water mark lands but every
/// answer is lost until the mark's deadline (8 s), so A gives the attempt back, and that
/// row write takes 4 s to land. The queue cuts A's claim at its bound (9 s) while the
/// give-back is on the wire and reads the claim back: mark recorded, number live, row not
/// yet given back. The read-back must not count a claim its own process is giving back:
/// delivered, its job would run while the give-back lands under it, making the item
/// claimable again once the job ends, so it would run twice. Instead the cut claim is
/// orphaned and handed back, and whoever claims next runs the item: exactly once, and it
/// ends done.
#[tokio::test(start_paused = true)]
async fn give_back_cut_by_the_claim_bound_never_runs_the_item_twice() {
    let mem = Arc::new(MemoryQueueStore::new());
    let items = Arc::new(LateWrite {
        inner: Arc::clone(mem.plain_items()) as _,
        armed: AtomicBool::new(false),
        delay: Duration::from_secs(4),
        sent_at: Mutex::default(),
    });
    let seen = Arc::clone(&items);
    let tweaked = Arc::new(Tweaked {
        wrap_items: Some(Box::new(move |_| Arc::clone(&seen) as _)),
        ..Tweaked::new(Arc::clone(&mem) as _)
    });
    let config = default_timing_config();
    let a = WorkQueue::new(Arc::clone(&tweaked) as _, "cut", config).expect("queue A");
    let b = WorkQueue::new(Arc::clone(&mem) as _, "cut", config).expect("queue B");
    let id = a.enqueue("run me once").await.expect("enqueue");
    let key = ItemKey {
        partition: "cut".into(),
        id,
    };
    // The next item-row write (A's give-back) lands 4 s after it is sent.
    items.armed.store(true, Ordering::SeqCst);
    // Cell row reads a little slow, so the faults can be armed between A's number and its
    // mark.
    mem.cells().inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let t0 = Instant::now();
    let base = mem.cells().calls(CellOp::Write);
    let claim = tokio::spawn({
        let a = a.clone();
        async move { a.claim("A").await }
    });
    // Choosing mark and number written: the mark's first send lands, its answer is lost;
    // every later send hangs (its answer never comes), until the mark's deadline.
    while mem.cells().calls(CellOp::Write) < base + 2 {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    mem.cells().inject(
        Some(CellOp::Write),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    while mem.cells().calls(CellOp::Write) < base + 3 {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    mem.cells().inject(
        Some(CellOp::Write),
        Fault::Latency(Duration::from_secs(60)),
        Times::Always,
    );
    // The mark gives up (8 s) and A gives the attempt back: the store is healthy again.
    while items.sent_at.lock().expect("lock").is_none() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    mem.cells().clear_faults();
    let sent = items.sent_at.lock().expect("lock").expect("sent") - t0;
    assert!(
        sent > Duration::from_secs(5) && sent < Duration::from_secs(9),
        "the scenario did not arise: A's give-back was sent {sent:?} after its claim, not \
         within the 4 s before the claim's bound (9 s)"
    );
    let first = claim.await.expect("join").expect("claim A");
    let mut runs = Vec::new();
    if let Some(job) = first {
        runs.push(("A's first claim", job.token()));
        // The job works for 4 s: A's give-back lands meanwhile (12 s).
        tokio::time::sleep(Duration::from_secs(4)).await;
        let _ = job.complete().await;
    }
    // Both processes keep claiming for a minute (every claim lapses well within it).
    while t0.elapsed() < Duration::from_secs(60) {
        for (who, q) in [("A", &a), ("B", &b)] {
            if let Some(job) = q.claim(who).await.expect("claim") {
                runs.push((who, job.token()));
                job.complete().await.expect("complete");
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let item = b.store().read(&key).await.expect("read").expect("row");
    assert!(
        runs.len() == 1 && item.state == JobState::Done,
        "the item must run exactly once and end done: runs {runs:?}; row {:?} attempt {} \
         requeued_at {}",
        item.state,
        item.attempt,
        item.requeued_at
    );
}
