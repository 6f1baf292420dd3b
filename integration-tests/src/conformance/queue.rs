//! Work-queue scenarios: order, claims as leases, retries, lost answers, crashes.

use std::sync::Arc;
use std::time::Duration;

use cql_lease::InvalidArgument;
use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::{JobState, MAX_PAYLOAD_LEN, NewItem, QueueConfig, QueueError, WorkQueue};
use tokio::time::Instant;

use super::test_config;
use crate::backend::Backend;

/// Settings for the suite: the lease timing of [`test_config`], fast retries.
pub fn queue_config() -> QueueConfig {
    QueueConfig {
        timing: test_config(),
        max_attempts: 3,
        retry_backoff: Duration::from_millis(500),
        max_retry_backoff: Duration::from_secs(2),
        scan_limit: 8,
        bucket_width: Duration::from_secs(10),
        order: cql_workqueue::ClaimOrder::Spread,
        choice: 2,
        cursor_refresh: Duration::from_secs(1),
        cold_start: Duration::from_secs(60),
        done_retention: Duration::from_secs(60),
        claim_mode: cql_workqueue::ClaimMode::Lwt,
    }
}

/// The backend's work-queue store; the suite runs only on backends that have one.
pub fn queue_store(b: &dyn Backend) -> Arc<dyn cql_workqueue::store::QueueStore> {
    match b.queue_store() {
        Some(store) => store,
        None => panic!(
            "{}: no work-queue store; do not run the queue suite here",
            b.name()
        ),
    }
}

/// The next job, claimed within a few seconds (an item placed just behind this process's
/// scan position is found at its next rescan from the cursor, `cursor_refresh` later; on the
/// wire, a claim lapses by the server's clock and its check entry comes due by the client's).
pub async fn claim_soon(
    b: &dyn Backend,
    q: &WorkQueue,
    worker: &str,
) -> Option<cql_workqueue::Job> {
    for _ in 0..60 {
        if let Some(job) = q.claim(worker).await.expect("claim") {
            return Some(job);
        }
        b.sleep(Duration::from_millis(100)).await;
    }
    None
}

/// A queue on the backend's store.
pub fn queue(b: &dyn Backend, name: &str) -> WorkQueue {
    queue_with(b, name, queue_config())
}

/// A queue on the backend's store with `config`, in the backend's claim mode.
pub fn queue_with(b: &dyn Backend, name: &str, config: QueueConfig) -> WorkQueue {
    let config = QueueConfig {
        claim_mode: b.claim_mode(),
        ..config
    };
    WorkQueue::new(queue_store(b), name, config).expect("queue")
}

/// With `choice = 1` items come out oldest first, each claim is attempt 1, and a completed
/// item is gone from the queue.
pub async fn items_are_claimed_oldest_first(b: &dyn Backend) {
    let q = queue_with(
        b,
        "fifo",
        QueueConfig {
            choice: 1,
            ..queue_config()
        },
    );
    let mut ids = Vec::new();
    for n in 0..12 {
        ids.push(q.enqueue(&format!("item {n}")).await.expect("enqueue"));
    }
    for (n, id) in ids.iter().enumerate() {
        let job = q.claim("w").await.expect("claim").expect("an item");
        assert_eq!(job.id(), id);
        assert_eq!(job.payload(), format!("item {n}"));
        assert_eq!(job.attempt(), 1);
        assert!(job.is_held() && !job.cancellation_token().is_cancelled());
        job.complete().await.expect("complete");
    }
    assert!(q.claim("w").await.expect("claim").is_none());
    assert!(q.items().await.expect("items").is_empty());
}

/// A claimed item is nobody else's until its claim lapses; a crashed worker's item is then
/// claimed again with a greater token, and the crashed claim can no longer finish it.
pub async fn crashed_worker_item_is_reclaimed_with_greater_token(b: &dyn Backend) {
    let q = queue(b, "crash");
    q.enqueue("only").await.expect("enqueue");
    let first = q.claim("a").await.expect("claim").expect("item");
    assert!(
        q.claim("b").await.expect("claim").is_none(),
        "claimed twice"
    );
    let token = first.token();
    let crashed_at = first.abandon();
    // Nobody gets it while the store keeps the crashed claim: guaranteed only within the
    // claim's validity counted from when it was sent (the store counts whole seconds), so
    // wait less than that on a real clock.
    b.sleep(test_config().renew_deadline() / 2).await;
    assert!(q.claim("b").await.expect("claim").is_none());
    b.advance_store_clock(test_config().takeover_bound()).await;
    let second = claim_soon(b, &q, "b").await.expect("reclaimed");
    assert!(Instant::now() > crashed_at);
    assert_eq!(second.attempt(), 2);
    assert!(second.token() > token);
    assert_eq!(second.payload(), "only");
    second.complete().await.expect("complete");
    assert!(q.items().await.expect("items").is_empty());
}

/// A claim that lapses while its worker is cut off: the worker is told to stop before anyone
/// else can claim the item, and its late `complete` is refused.
pub async fn lapsed_claim_stops_worker_and_cannot_complete(b: &dyn Backend) {
    let q = queue(b, "lapse");
    q.enqueue("work").await.expect("enqueue");
    let job = q.claim("a").await.expect("claim").expect("item");
    b.inject_queue(Some(QueueOp::Heartbeat), Fault::Unavailable, Times::Always);
    let stop = job.cancellation_token();
    tokio::time::timeout(test_config().lease_duration * 2, stop.cancelled())
        .await
        .expect("the worker was never told to stop");
    let stopped_at = job.lost_at().expect("lost_at");
    b.clear_faults();
    b.advance_store_clock(test_config().takeover_bound()).await;
    let next = loop {
        if let Some(next) = q.claim("b").await.expect("claim") {
            break next;
        }
        b.sleep(test_config().retry_period).await;
    };
    assert!(Instant::now() >= stopped_at);
    assert!(matches!(
        job.complete().await,
        Err(QueueError::ClaimLost { .. })
    ));
    assert_eq!(
        q.items().await.expect("items").len(),
        1,
        "late complete deleted it"
    );
    next.complete().await.expect("complete");
}

/// `fail` retries after the back-off and discards after `max_attempts`; discarded items are
/// kept with their error and never claimed again.
pub async fn failures_retry_with_backoff_then_discard(b: &dyn Backend) {
    let q = queue(b, "retry");
    q.enqueue("flaky").await.expect("enqueue");
    let config = queue_config();
    for attempt in 1..=config.max_attempts {
        let job = loop {
            if let Some(job) = q.claim("w").await.expect("claim") {
                break job;
            }
            b.sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(job.attempt(), attempt);
        if attempt > 1 {
            assert_eq!(
                job.last_error(),
                Some(format!("boom {}", attempt - 1).as_str())
            );
        }
        let failed_at = Instant::now();
        let state = job.fail(&format!("boom {attempt}")).await.expect("fail");
        if attempt < config.max_attempts {
            assert_eq!(state, JobState::Retryable);
            assert!(
                q.claim("w").await.expect("claim").is_none(),
                "retried before back-off"
            );
            b.sleep(config.backoff(attempt).saturating_sub(failed_at.elapsed()) / 2)
                .await;
            assert!(
                q.claim("w").await.expect("claim").is_none(),
                "retried before back-off"
            );
        } else {
            assert_eq!(state, JobState::Discarded);
        }
    }
    b.sleep(config.max_retry_backoff).await;
    assert!(q.claim("w").await.expect("claim").is_none());
    let items = q.items().await.expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].state, JobState::Discarded);
    assert_eq!(items[0].last_error.as_deref(), Some("boom 3"));
}

/// Bad input and settings are typed errors and write nothing.
pub async fn bad_queue_input_is_rejected(b: &dyn Backend) {
    let store = queue_store(b);
    let bad_config = QueueConfig {
        max_attempts: 0,
        ..queue_config()
    };
    assert!(matches!(
        WorkQueue::new(Arc::clone(&store), "q", bad_config),
        Err(QueueError::InvalidArgument(_))
    ));
    let unnamed = WorkQueue::new(Arc::clone(&store), "", queue_config());
    assert!(
        matches!(&unnamed, Err(e) if e.to_string().contains("queue name")),
        "{unnamed:?}"
    );
    let q = WorkQueue::new(store, "bad", queue_config()).expect("queue");
    // Past the longest TTL Cassandra takes: refused before anything is written.
    let too_late = std::time::SystemTime::now() + cql_lease::MAX_DURATION * 2;
    assert!(matches!(
        q.enqueue_item(NewItem::text("x").run_at(too_late)).await,
        Err(QueueError::InvalidArgument(InvalidArgument::Invalid {
            field: "run_at",
            ..
        }))
    ));
    let far = std::time::UNIX_EPOCH + Duration::from_secs(u64::MAX / 4);
    assert!(matches!(
        q.enqueue_item(NewItem::text("x").run_at(far)).await,
        Err(QueueError::InvalidArgument(_))
    ));
    assert!(matches!(
        q.enqueue("").await,
        Err(QueueError::InvalidArgument(InvalidArgument::Empty { .. }))
    ));
    let huge = "x".repeat(MAX_PAYLOAD_LEN + 1);
    assert!(matches!(
        q.enqueue(&huge).await,
        Err(QueueError::InvalidArgument(InvalidArgument::TooLong { .. }))
    ));
    assert!(matches!(
        q.claim("").await,
        Err(QueueError::InvalidArgument(_))
    ));
    assert!(q.worker("bad\nid").is_err());
    assert!(q.items().await.expect("items").is_empty());
}

mod exclusive;
mod index_moves;
mod lost_answers;

pub use exclusive::claims_are_exclusive_under_contention;
pub use index_moves::entry_moves_in_one_request;
pub use lost_answers::{lost_answers_are_resolved, store_refuses_claims_it_must};
