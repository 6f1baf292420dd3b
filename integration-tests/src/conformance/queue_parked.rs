//! A `Worker`'s claim that no poll has taken yet ("parked": the `next()` that asked for it
//! was dropped) is bounded: it is undone, spending no attempt, at the latest one renew
//! interval after it landed, at once when the worker is drained, and never handed out lost.

use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::{JobState, StoredItem, WorkQueue, Worker};
use futures::StreamExt;

use super::queue::queue;
use crate::backend::Backend;

/// How much slower the claim is made, so that `next()` can be dropped while it is under way.
const SLOW_CLAIM: Duration = Duration::from_millis(100);

/// Drops one `next()` while its claim is under way (the claim is slow) and lets the claim
/// land: the job is then parked in the stream, its heartbeat running.
async fn park_a_claim(b: &dyn Backend, worker: &mut Worker) {
    b.inject_queue(
        Some(QueueOp::Claim),
        Fault::Latency(SLOW_CLAIM),
        Times::Next(1),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(10), worker.next())
            .await
            .is_err(),
        "{}: next() must be cut mid-claim",
        b.name()
    );
    // The claim lands and is parked.
    b.sleep(SLOW_CLAIM * 2).await;
    b.clear_faults();
}

/// The only item of `q`.
async fn only_item(q: &WorkQueue) -> StoredItem {
    let mut items = q.items().await.expect("items");
    assert_eq!(items.len(), 1, "{items:?}");
    items.remove(0)
}

/// Asserts the item is unclaimed, available and has spent no attempt (an undo, not a lapse:
/// a lapsed claim keeps its attempt number).
async fn assert_undone(b: &dyn Backend, q: &WorkQueue, what: &str) {
    let item = only_item(q).await;
    // The bakery mode cannot lower its high-water mark: it gives the attempt back by
    // counting from one later.
    let spent = match b.claim_mode() {
        cql_workqueue::ClaimMode::Lwt => item.attempt,
        cql_workqueue::ClaimMode::Bakery => item.attempts_used(),
    };
    assert!(
        item.claim.is_none() && spent == 0 && item.state == JobState::Available,
        "{}: {what}: {item:?}",
        b.name()
    );
}

/// A live stream that is not polled (its consumer busy in the other arm of a `select!`)
/// gives its parked claim back within one renew interval: the item is claimable by another
/// worker at once as attempt 1, long before a claim's TTL.
pub async fn parked_claim_is_undone_within_a_bound(b: &dyn Backend) {
    let q = queue(b, "parked-bound");
    q.enqueue("work").await.expect("enqueue");
    let mut worker = q.worker("w1").expect("worker");
    park_a_claim(b, &mut worker).await;
    b.sleep(q.config().timing.renew_period + Duration::from_millis(800))
        .await;
    assert_undone(b, &q, "a parked claim of a live, unpolled stream").await;
    let job = q
        .claim("w2")
        .await
        .expect("claim")
        .expect("claimable at once");
    let attempt = match b.claim_mode() {
        cql_workqueue::ClaimMode::Lwt => job.attempt(),
        cql_workqueue::ClaimMode::Bakery => job.attempts_used(),
    };
    assert_eq!(attempt, 1, "{}", b.name());
    job.complete().await.expect("complete");
    drop(worker);
}

/// Draining a worker undoes its parked claim, and the drain returns only once that is done:
/// right after a drain that reports nothing unfinished, the worker holds nothing.
pub async fn drained_worker_keeps_no_claim(b: &dyn Backend) {
    let q = queue(b, "parked-drain");
    q.enqueue("work").await.expect("enqueue");
    let mut worker = q.worker("w1").expect("worker");
    let drain = worker.drain_handle();
    park_a_claim(b, &mut worker).await;
    let report = drain.drain(Duration::from_secs(5)).await;
    assert_eq!(report.unfinished, 0, "{}: nothing left in flight", b.name());
    assert_undone(b, &q, "right after a drain").await;
    assert!(worker.next().await.is_none(), "{}", b.name());
}

/// Store blips on heartbeats (each longer than a claim's validity) while claims sit parked,
/// four times over with `max_attempts` 3: no parked claim spends an attempt, none is handed
/// out lost, and the item is not discarded as "attempts exhausted"; the next poll hands out
/// a live job as attempt 1.
pub async fn parked_claims_lost_spend_no_attempt(b: &dyn Backend) {
    let q = queue(b, "parked-lost");
    q.enqueue("work").await.expect("enqueue");
    let mut worker = q.worker("w1").expect("worker");
    for round in 0..4 {
        park_a_claim(b, &mut worker).await;
        b.inject_queue(Some(QueueOp::Heartbeat), Fault::Unavailable, Times::Always);
        b.sleep(q.config().timing.lease_duration + Duration::from_millis(500))
            .await;
        b.clear_faults();
        assert_undone(b, &q, &format!("round {round}")).await;
    }
    let job = tokio::time::timeout(Duration::from_secs(3), worker.next())
        .await
        .expect("an answer")
        .expect("a job");
    assert!(
        job.is_held() && job.attempt() == 1 && !job.cancellation_token().is_cancelled(),
        "{}: handed out {job:?}, held {}",
        b.name(),
        job.is_held()
    );
    job.complete().await.expect("complete");
}
