//! Work-queue claims under faults and cancellation: late claims are undone, every exit of a
//! job cancels its token, and dropped futures leave no claim and spend no attempt.

use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::{JobState, QueueConfig, QueueError, StoredItem, WorkQueue};
use futures::StreamExt;

use super::cancel_safety::cut_points;
use super::queue::queue;
use super::test_config;
use crate::backend::Backend;

/// How long a read-back of a lost claim answer is made to take.
const READ_BACK: Duration = Duration::from_millis(200);

/// The only item of `q`.
async fn only_item(q: &WorkQueue) -> StoredItem {
    let mut items = q.items().await.expect("items");
    assert_eq!(items.len(), 1, "{items:?}");
    items.remove(0)
}

/// Asserts the item is unclaimed and has spent no attempt.
async fn assert_untouched(b: &dyn Backend, q: &WorkQueue, what: &str) {
    b.clear_faults();
    b.sleep(READ_BACK + Duration::from_millis(300)).await;
    let item = only_item(q).await;
    // The bakery mode cannot lower its high-water mark: it gives the attempt back by
    // counting from one later.
    let spent = match b.claim_mode() {
        cql_workqueue::ClaimMode::Lwt => item.attempt,
        cql_workqueue::ClaimMode::Bakery => item.attempts_used(),
    };
    assert!(
        item.claim.is_none() && spent == 0 && item.state == JobState::Available,
        "{}: {what} left {item:?}",
        b.name()
    );
}

/// A claim answered after its deadline is undone at once, reported as no job, and spends no
/// attempt.
pub async fn late_claim_is_undone(b: &dyn Backend) {
    let q = super::queue::queue_with(
        b,
        "late-claim",
        QueueConfig {
            timing: super::patient_config(),
            ..super::queue::queue_config()
        },
    );
    q.enqueue("work").await.expect("enqueue");
    let late = test_config().renew_deadline() + Duration::from_millis(50);
    b.inject_queue(Some(QueueOp::Claim), Fault::Latency(late), Times::Next(1));
    // The late claim is never handed out. The same pass may claim the item afresh once the
    // late claim is undone: that claim has a deadline of its own and the late one spent no
    // attempt, so it is attempt 1.
    if let Some(job) = q.claim("w").await.expect("claim") {
        assert!(
            job.attempt() == 1 && job.is_held() && !job.cancellation_token().is_cancelled(),
            "{}: a job past its deadline was handed out (attempt {}, held: {}, cancelled: {})",
            b.name(),
            job.attempt(),
            job.is_held(),
            job.cancellation_token().is_cancelled()
        );
        job.complete().await.expect("complete");
        return;
    }
    assert_untouched(b, &q, "a late claim").await;
    let job = q.claim("w").await.expect("claim").expect("item");
    assert_eq!(job.attempt(), 1);
    job.complete().await.expect("complete");
}

/// `complete` whose outcome stays unknown still tells the worker to stop.
pub async fn every_job_exit_cancels_its_token(b: &dyn Backend) {
    let q = queue(b, "exits");
    q.enqueue("work").await.expect("enqueue");
    let job = q.claim("w").await.expect("claim").expect("item");
    let (token, held) = (job.cancellation_token(), job.held());
    b.inject_queue(
        Some(QueueOp::Complete),
        Fault::TimeoutWithoutApply,
        Times::Always,
    );
    b.inject_queue(Some(QueueOp::Read), Fault::Unavailable, Times::Always);
    let result = job.complete().await;
    assert!(
        matches!(result, Err(QueueError::OutcomeUnknown { .. })),
        "{result:?}"
    );
    assert!(token.is_cancelled() && !*held.borrow(), "{}", b.name());
    b.clear_faults();
}

/// `claim`, the `Worker` stream, `complete`, `fail` and `enqueue`, dropped at every cut-off
/// point: no claim remains, no attempt is spent (a claim never handed over is undone, not
/// counted), and an item is enqueued at most once.
pub async fn dropped_queue_futures_leave_no_claim(b: &dyn Backend) {
    let mut dropped = 0;
    for (n, cut) in cut_points().enumerate() {
        let lose_next_claim = || {
            b.clear_faults();
            b.inject_queue(
                Some(QueueOp::Claim),
                Fault::TimeoutAfterApply,
                Times::Next(1),
            );
            b.inject_queue(
                Some(QueueOp::Read),
                Fault::Latency(READ_BACK),
                Times::Next(1),
            );
        };

        let q = queue(b, &format!("cut-claim-{n}"));
        q.enqueue("work").await.expect("enqueue");
        lose_next_claim();
        match tokio::time::timeout(cut, q.claim("w")).await {
            Err(_) => {
                dropped += 1;
                assert_untouched(b, &q, &format!("claim dropped after {cut:?}")).await;
            }
            Ok(job) => job
                .expect("claim")
                .expect("item")
                .complete()
                .await
                .expect("complete"),
        }

        let q = queue(b, &format!("cut-worker-{n}"));
        q.enqueue("work").await.expect("enqueue");
        lose_next_claim();
        let mut worker = q.worker("w").expect("worker");
        match tokio::time::timeout(cut, worker.next()).await {
            Err(_) => {
                drop(worker);
                assert_untouched(b, &q, &format!("worker dropped after {cut:?}")).await;
            }
            Ok(job) => job.expect("a job").complete().await.expect("complete"),
        }

        let q = queue(b, &format!("cut-complete-{n}"));
        q.enqueue("work").await.expect("enqueue");
        let job = q.claim("w").await.expect("claim").expect("item");
        b.inject_queue(
            Some(QueueOp::Complete),
            Fault::TimeoutWithoutApply,
            Times::Next(1),
        );
        b.inject_queue(
            Some(QueueOp::Read),
            Fault::Latency(READ_BACK),
            Times::Next(1),
        );
        if tokio::time::timeout(cut, job.complete()).await.is_err() {
            b.clear_faults();
            b.sleep(READ_BACK + Duration::from_millis(300)).await;
            let items = q.items().await.expect("items");
            assert!(
                items.iter().all(|i| i.claim.is_none()),
                "{}: complete dropped after {cut:?} left {items:?}",
                b.name()
            );
        }

        let q = queue(b, &format!("cut-fail-{n}"));
        q.enqueue("work").await.expect("enqueue");
        let job = q.claim("w").await.expect("claim").expect("item");
        let token = job.cancellation_token();
        b.inject_queue(
            Some(QueueOp::Reschedule),
            Fault::TimeoutWithoutApply,
            Times::Next(1),
        );
        b.inject_queue(
            Some(QueueOp::Read),
            Fault::Latency(READ_BACK),
            Times::Next(1),
        );
        let _ = tokio::time::timeout(cut, job.fail("boom")).await;
        assert!(token.is_cancelled());
        b.clear_faults();
        b.sleep(READ_BACK + Duration::from_millis(300)).await;
        let item = only_item(&q).await;
        assert!(
            item.claim.is_none(),
            "{}: fail dropped after {cut:?} left {item:?}",
            b.name()
        );

        let q = queue(b, &format!("cut-enqueue-{n}"));
        b.inject_queue(
            Some(QueueOp::Enqueue),
            Fault::TimeoutAfterApply,
            Times::Next(1),
        );
        let _ = tokio::time::timeout(cut, q.enqueue("work")).await;
        b.clear_faults();
        let items = q.items().await.expect("items");
        assert!(
            items.len() <= 1,
            "{}: enqueue dropped after {cut:?} added {items:?}",
            b.name()
        );
    }
    assert!(dropped > 0, "some cut-off points fell inside the futures");
}

/// How a [`dropped_worker_next_keeps_or_undoes_the_claim`] round goes on after the drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterDrop {
    /// The stream is dropped at once.
    DropStream,
    /// The stream lives on unpolled past a claim's TTL, then is dropped.
    IdleThenDrop,
    /// The stream is polled again at once.
    PollAgain,
    /// The stream lives on unpolled past the park bound (one renew interval) but not a
    /// claim's TTL, and is still alive when the item is checked.
    IdleWhileLive,
}

/// A `Worker` whose `next()` future is dropped at a cut-off point mid-claim: the claim in
/// progress is neither left behind nor counted twice. Polling the stream again at once hands
/// the job out as attempt 1, still held. Left unpolled, the parked claim is undone within one
/// renew interval although the stream lives on (well before a claim's TTL could explain it);
/// dropping the stream undoes it too. Undone means: no claim, no attempt spent, and the item
/// claimable at once by another worker as attempt 1.
pub async fn dropped_worker_next_keeps_or_undoes_the_claim(b: &dyn Backend) {
    let mut dropped = 0;
    for after in [
        AfterDrop::DropStream,
        AfterDrop::IdleThenDrop,
        AfterDrop::PollAgain,
        AfterDrop::IdleWhileLive,
    ] {
        for (n, cut) in cut_points().enumerate() {
            let q = queue(b, &format!("cut-next-{after:?}-{n}"));
            q.enqueue("work").await.expect("enqueue");
            b.clear_faults();
            b.inject_queue(
                Some(QueueOp::Claim),
                Fault::TimeoutAfterApply,
                Times::Next(1),
            );
            b.inject_queue(
                Some(QueueOp::Read),
                Fault::Latency(READ_BACK),
                Times::Next(1),
            );
            let mut worker = q.worker("w").expect("worker");
            let what = format!("next() dropped after {cut:?}, then {after:?}");
            let job = match tokio::time::timeout(cut, worker.next()).await {
                Ok(job) => job.expect("a job"),
                Err(_) => {
                    dropped += 1;
                    b.clear_faults();
                    match after {
                        AfterDrop::PollAgain => tokio::time::timeout(READ_BACK * 5, worker.next())
                            .await
                            .expect("the claim made meanwhile is handed out")
                            .expect("a job"),
                        AfterDrop::DropStream
                        | AfterDrop::IdleThenDrop
                        | AfterDrop::IdleWhileLive => {
                            match after {
                                // Longer than a claim's TTL: a claim nobody keeps alive would lapse.
                                AfterDrop::IdleThenDrop => {
                                    b.sleep(
                                        q.config().timing.lease_duration
                                            + Duration::from_millis(500),
                                    )
                                    .await;
                                }
                                // The claim lands after the read-back, then waits one renew
                                // interval at most; less than a TTL in all.
                                AfterDrop::IdleWhileLive => {
                                    b.sleep(READ_BACK + q.config().timing.renew_period).await;
                                }
                                _ => {}
                            }
                            if after != AfterDrop::IdleWhileLive {
                                drop(worker);
                            }
                            assert_untouched(b, &q, &what).await;
                            // Claimable at once: not hidden until a claim's TTL.
                            let job = q.claim("w2").await.expect("claim");
                            let job = job.unwrap_or_else(|| panic!("{}: {what}: hidden", b.name()));
                            assert_eq!(job.attempt(), 1, "{}: {what}", b.name());
                            job.complete().await.expect("complete");
                            continue;
                        }
                    }
                }
            };
            assert!(
                job.attempt() == 1 && job.is_held() && !job.cancellation_token().is_cancelled(),
                "{}: {what}: an attempt spent or the claim lost: {job:?}",
                b.name()
            );
            job.complete().await.expect("complete");
            drop(worker);
            assert!(q.items().await.expect("items").is_empty(), "{}", b.name());
        }
    }
    assert!(dropped > 0, "some cut-off points fell inside the claim");
}
