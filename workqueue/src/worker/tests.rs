//! The stream's side of a parked claim: a job whose claim was lost while it waited is
//! undone, not handed out, and its loss spends no attempt.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use futures::StreamExt;

use super::search::{Pending, Slot};
use super::{InFlight, Tracker};
use crate::memory::{MemoryQueueStore, QueueOp};
use crate::{JobState, QueueConfig, WorkQueue};

/// A claim made for a worker and lost (heartbeats failing past its deadline) before it was
/// handed out: the heartbeat's own hand-back undoes it (attempt number restored), and a poll
/// that finds it parked does not hand it out, recognises the claim as undone (placing a run
/// entry, so the item is claimable at once) and claims the item afresh as attempt 1.
#[tokio::test(start_paused = true)]
async fn a_claim_lost_while_parked_is_undone_and_not_handed_out() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = WorkQueue::new(store.clone(), "parked-lost", QueueConfig::default()).unwrap();
    queue.enqueue("work").await.unwrap();
    let job = queue.claim_undelivered("w").await.unwrap().expect("a job");
    store.inject(Some(QueueOp::Heartbeat), Fault::Unavailable, Times::Always);
    let validity = queue.config().timing.renew_deadline();
    // Past the deadline, not yet at the claim's store expiry (where its check entry is).
    tokio::time::sleep(validity + Duration::from_millis(100)).await;
    store.clear_faults();
    assert!(!job.is_held(), "the claim is lost");
    let item = queue.items().await.unwrap().remove(0);
    assert!(
        item.claim.is_none() && item.attempt == 0 && item.state == JobState::Available,
        "a lost undelivered claim spent an attempt: {item:?}"
    );

    // Parked in a worker's slot as if its search had found it and nobody took it yet.
    let mut worker = queue.worker("w").unwrap();
    let slot = Arc::<Slot>::default();
    Pending::put(&slot, job);
    worker.pending = Some(Pending::parked(slot));
    // At once: the undo placed a run entry (the check entry is not due for a while).
    let job = tokio::time::timeout(Duration::from_millis(200), worker.next())
        .await
        .expect("claimable at once")
        .expect("a job");
    assert!(
        job.is_held() && job.attempt() == 1 && !job.cancellation_token().is_cancelled(),
        "a dead or spent job was handed out: {job:?} held {}",
        job.is_held()
    );
    job.complete().await.unwrap();
}

/// The heartbeat of a claim not handed out yet hands it back as undelivered (attempt number
/// restored) after a worker checked that the claim holds and before it marked the job
/// delivered (the race between `Worker::hand_out` and the heartbeat, forced in that order):
/// the delivery is refused, so attempt 1's token is never handed out by this claim, and the
/// next claim of the item gets attempt 1 as the only holder of that token.
#[tokio::test(start_paused = true)]
async fn a_claim_handed_back_before_delivery_is_refused_delivery() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = WorkQueue::new(store.clone(), "parked-race", QueueConfig::default()).unwrap();
    queue.enqueue("work").await.unwrap();
    let job = queue.claim_undelivered("w").await.unwrap().expect("a job");
    assert!(job.is_held(), "the worker's check passes here");
    store.inject(Some(QueueOp::Heartbeat), Fault::Unavailable, Times::Always);
    let validity = queue.config().timing.renew_deadline();
    tokio::time::sleep(validity + Duration::from_millis(100)).await;
    store.clear_faults();
    let item = queue.items().await.unwrap().remove(0);
    assert!(
        item.claim.is_none() && item.attempt == 0,
        "the heartbeat handed the claim back as undelivered: {item:?}"
    );
    // The worker, past its check, now delivers.
    assert!(
        !job.deliver(),
        "delivered attempt {} after its hand-back restored attempt 0",
        job.attempt()
    );
    job.undeliver();
    // The undo runs in a spawned task.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let next = queue.claim("w").await.unwrap().expect("claimable again");
    assert_eq!(next.attempt(), 1, "the only holder of attempt 1");
    next.complete().await.unwrap();
}

/// Only a job handed out counts as ended: claims that found nothing (an idle worker polls
/// all the time) or were undone do not, so a client waiting for a quiet moment sees one.
#[test]
fn only_jobs_handed_out_count_as_ended() {
    let tracker = Arc::new(Tracker::default());
    drop(InFlight::new(&tracker));
    assert_eq!(tracker.ended.load(Ordering::SeqCst), 0);
    let mut job = InFlight::new(&tracker);
    job.hand_out();
    drop(job);
    assert_eq!(tracker.ended.load(Ordering::SeqCst), 1);
    assert_eq!(tracker.count.load(Ordering::SeqCst), 0);
}
