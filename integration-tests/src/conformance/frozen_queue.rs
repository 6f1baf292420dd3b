//! A worker keeps claiming and completing jobs while one node of three is frozen for longer
//! than the claim TTL: every request of the queue (dispatcher scans, cursor and bucket
//! reads, candidate reads, stats) is bounded by the claim timing's request timeout and sent
//! again elsewhere, never left to the driver's 30 s. Wire-only.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};
use cql_test_server::NodeFault;
use cql_workqueue::{
    ClaimOutcome, IndexEntry, ItemClaim, ItemId, ItemKey, JobState, NewRow, QueueStore, Reschedule,
    StoredItem, WorkQueue,
};
use tokio::time::Instant;

use super::queue::{queue_config, queue_store};
use crate::backend::Backend;
use crate::wire_backend::WireBackend;

/// The node frozen (the same as the other frozen-node scenarios').
const FROZEN: usize = 1;

/// Times every read sent to the store (each send on its own: it sits below the queue's own
/// bound), counting the ones cut before they were answered.
struct TimedReads {
    inner: Arc<dyn QueueStore>,
    longest: Mutex<Duration>,
    cut: AtomicUsize,
    answered: AtomicUsize,
}

/// Records one read's time when it ends, answered or dropped.
struct Watch<'a> {
    reads: &'a TimedReads,
    sent: Instant,
    answered: bool,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if let Ok(mut longest) = self.reads.longest.lock() {
            *longest = (*longest).max(self.sent.elapsed());
        }
        let count = if self.answered {
            &self.reads.answered
        } else {
            &self.reads.cut
        };
        count.fetch_add(1, Ordering::Relaxed);
    }
}

impl TimedReads {
    async fn timed<T>(
        &self,
        read: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let mut watch = Watch {
            reads: self,
            sent: Instant::now(),
            answered: false,
        };
        let answer = read.await;
        watch.answered = true;
        answer
    }
}

#[async_trait]
impl QueueStore for TimedReads {
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        self.inner.enqueue(row).await
    }
    async fn revive(&self, row: NewRow<'_>, a: i32, o: &str) -> Result<CasOutcome, StoreError> {
        self.inner.revive(row, a, o).await
    }
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        self.inner.claim(claim).await
    }
    async fn heartbeat(&self, k: &ItemKey, c: &str, t: Duration) -> Result<CasOutcome, StoreError> {
        self.inner.heartbeat(k, c, t).await
    }
    async fn complete(&self, k: &ItemKey, c: &str, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner.complete(k, c, r).await
    }
    async fn reschedule(
        &self,
        k: &ItemKey,
        c: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.reschedule(k, c, to).await
    }
    async fn unclaim(
        &self,
        k: &ItemKey,
        c: &str,
        s: JobState,
        a: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.unclaim(k, c, s, a).await
    }
    async fn requeue(&self, k: &ItemKey, r: i64, a: i32) -> Result<CasOutcome, StoreError> {
        self.inner.requeue(k, r, a).await
    }
    async fn purge(&self, k: &ItemKey, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner.purge(k, r).await
    }
    async fn seal(
        &self,
        k: &ItemKey,
        s: cql_workqueue::Seal<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.seal(k, s).await
    }
    async fn read(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.timed(self.inner.read(k)).await
    }
    async fn peek(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.timed(self.inner.peek(k)).await
    }
    async fn put_entry(&self, q: &str, e: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        self.inner.put_entry(q, e, ts).await
    }
    async fn delete_entry(&self, q: &str, b: i64, s: &str, ts: i64) -> Result<(), StoreError> {
        self.inner.delete_entry(q, b, s, ts).await
    }
    async fn scan_index(
        &self,
        q: &str,
        b: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        self.timed(self.inner.scan_index(q, b, after, before, limit))
            .await
    }
    async fn read_cursor(&self, q: &str) -> Result<i64, StoreError> {
        self.timed(self.inner.read_cursor(q)).await
    }
    async fn advance_cursor(&self, q: &str, pos: i64) -> Result<(), StoreError> {
        self.inner.advance_cursor(q, pos).await
    }
    async fn put_bucket(&self, q: &str, b: i64, t: Duration, ts: i64) -> Result<(), StoreError> {
        self.inner.put_bucket(q, b, t, ts).await
    }
    async fn list_buckets(&self, q: &str, a: i64, l: u32) -> Result<Vec<i64>, StoreError> {
        self.timed(self.inner.list_buckets(q, a, l)).await
    }
    async fn put_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.put_dead(q, id, ts).await
    }
    async fn delete_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.delete_dead(q, id, ts).await
    }
    async fn list_dead(&self, q: &str, a: &str, l: u32) -> Result<Vec<ItemId>, StoreError> {
        self.timed(self.inner.list_dead(q, a, l)).await
    }
}

/// Jobs enqueued before the freeze; the worker claims and completes them one by one, a
/// round every 50 ms, while node `FROZEN` is frozen for 1.5 claim TTLs, and reads the
/// queue's stats each round.
/// It completes several, no read waits past the request timeout (plus scheduling slack),
/// and some request did reach the frozen node (else the scenario proved nothing).
pub async fn worker_keeps_claiming_through_a_frozen_node(b: &WireBackend) {
    const JOBS: usize = 40;
    let config = queue_config();
    let reads = Arc::new(TimedReads {
        inner: queue_store(b),
        longest: Mutex::default(),
        cut: AtomicUsize::new(0),
        answered: AtomicUsize::new(0),
    });
    let q = WorkQueue::new(reads.clone(), "frozen-queue", config).expect("queue");
    for i in 0..JOBS {
        q.enqueue(&format!("job {i}")).await.expect("enqueue");
    }
    b.server.node_fault(FROZEN, NodeFault::Freeze);
    let until = Instant::now() + config.claim.ttl * 3 / 2;
    let (mut completed, mut failed) = (0, 0);
    // Paced, so the rounds span the whole freeze (the suspect mark on the frozen node
    // lapses within it and the node is tried again).
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = q.stats().await;
        match q.claim("w").await {
            Ok(Some(job)) => match job.complete().await {
                Ok(()) => completed += 1,
                Err(_) => failed += 1,
            },
            Ok(None) => {}
            Err(_) => failed += 1,
        }
    }
    b.server.heal(FROZEN);
    let longest = reads.longest.lock().map(|l| *l).unwrap_or_default();
    let (cut, answered) = (
        reads.cut.load(Ordering::Relaxed),
        reads.answered.load(Ordering::Relaxed),
    );
    let bound = config.claim.effective_request_timeout() + Duration::from_millis(200);
    eprintln!(
        "{}: {completed} jobs completed through the freeze ({failed} calls failed); \
         {answered} reads answered, {cut} cut; the longest waited {longest:?} (bound {bound:?})",
        b.name()
    );
    assert!(
        completed >= 3,
        "{}: the worker completed {completed} jobs while a node was frozen",
        b.name()
    );
    assert!(
        longest <= bound,
        "{}: a queue read waited {longest:?} on the frozen node (bound {bound:?})",
        b.name()
    );
    // A request cut on the frozen node makes the others avoid it, and that first one may be
    // an LWT rather than a read: the server tells whether any reached it.
    let swallowed = b.server.requests_frozen_on(FROZEN);
    assert!(
        swallowed > 0,
        "{}: no queue request reached the frozen node: the scenario did not test anything",
        b.name()
    );
}
