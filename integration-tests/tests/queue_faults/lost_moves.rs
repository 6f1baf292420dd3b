//! A claim undone after placing its check entry: the claim places the check entry and
//! removes the entry its item was found by only once it is delivered. When the claim fails
//! on the placement's lost answer, or is dropped while the placement is on its way, the
//! found entry is still there, so another process finds the undone item at once, not a
//! claim TTL later.

use std::sync::Arc;
use std::time::Duration;

use cql_workqueue::{JobState, NewItem, QueueConfig, QueueError, WorkQueue};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_with};
use integration_tests::tweaked::Tweaked;

use super::{bakery_backend, claim_within, key_of};

/// The suite's config with hour-wide buckets, so that an entry at the enqueue time and the
/// claim's check entry (one claim TTL later) share a bucket, whatever the wall clock reads
/// when the test runs (where a one-request move would be tempting).
fn one_bucket_config() -> QueueConfig {
    QueueConfig {
        bucket_width: Duration::from_secs(3600),
        ..queue_config()
    }
}

/// An item of queue `name`, enqueued and seen by no scanner yet, and a claimer over a store
/// whose check-entry placements apply and whose answers are lost `after` that long.
async fn item_and_claimer(
    b: &MemoryBackend,
    name: &str,
    after: Duration,
    config: QueueConfig,
) -> (cql_workqueue::ItemKey, WorkQueue) {
    let producer = queue_with(b, name, config);
    let id = producer
        .enqueue_item(NewItem::text("x"))
        .await
        .expect("enqueue")
        .id()
        .clone();
    let lost = Tweaked {
        check_answers_lost_after: Some(after),
        ..Tweaked::over(b)
    };
    let claimer = WorkQueue::new(Arc::new(lost), name, config).expect("queue");
    (key_of(name, &id), claimer)
}

/// The item is available again (its claim undone), and another process that starts looking
/// now finds it well within one claim TTL (2 s here; 15 s with the defaults), as when a
/// claim places its check entry before it removes the old one.
async fn undone_and_found_at_once(
    b: &MemoryBackend,
    name: &str,
    key: &cql_workqueue::ItemKey,
    config: QueueConfig,
) {
    // The guard's undo runs in a spawned task.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let other = queue_with(b, name, config);
    let row = other.store().read(key).await.expect("read").expect("row");
    assert_eq!(row.state, JobState::Available, "{row:?}");
    assert!(row.claim.is_none(), "the claim is undone: {row:?}");
    let found = claim_within(&other, "w2", 8).await;
    assert_eq!(
        found.as_ref().map(|j| j.id()),
        Some(&key.id),
        "the undone item is available, but its only index entry is the undone claim's check \
         entry, due one claim TTL from the claim: nobody can find it until then"
    );
}

/// LIVENESS: a claim whose check entry's placement applied but whose answer was lost fails
/// with a store error; its guard undoes the claim (state and attempt restored), and the
/// entry the item was found by is still there, so another process finds the item at once.
/// Were it gone (a claim moving its entry in one batch), the available item's only entry
/// would be the undone claim's check entry, at the claim's expiry, and no process would find
/// the item for a whole claim TTL (15 s by default) after an error that spent nothing.
///
/// Interleaving: item X enqueued (run entry E, same bucket as any check entry).
/// 1. P claims X: the claim LWT wins (attempt 1);
/// 2. P places C at now + ttl: it applies, its answer is lost ("unknown");
/// 3. `claim` returns `Err(Store "place index entry")`, the guard undoes the claim: X is
///    available, attempt 0, with E beside C;
/// 4. Q starts claiming: its scans read up to its clock and find X (C is not due for 2 s).
#[tokio::test(start_paused = true)]
async fn claim_whose_move_answer_was_lost_leaves_the_undone_item_findable() {
    let b = MemoryBackend::new();
    let name = "move-answer-lost";
    let config = one_bucket_config();
    let (key, claimer) = item_and_claimer(&b, name, Duration::from_millis(250), config).await;
    let outcome = claimer.claim("w1").await;
    assert!(
        matches!(outcome, Err(QueueError::Store { .. })),
        "the claim must fail on the lost placement answer: {:?}",
        outcome.map(|j| j.map(|j| j.id().clone()))
    );
    undone_and_found_at_once(&b, name, &key, config).await;
}

/// LIVENESS (bakery mode): the previous test in the LWT-free claim mode: a claim whose check
/// entry's placement applied and whose answer was lost is undone, and the item is found at
/// once, not a claim TTL later.
#[tokio::test(start_paused = true)]
async fn bakery_claim_whose_move_answer_was_lost_leaves_the_undone_item_findable() {
    let (b, config) = bakery_backend();
    let config = QueueConfig {
        bucket_width: one_bucket_config().bucket_width,
        ..config
    };
    let name = "move-answer-lost-bakery";
    let (key, claimer) = item_and_claimer(&b, name, Duration::from_millis(250), config).await;
    let outcome = claimer.claim("w1").await;
    assert!(
        matches!(outcome, Err(QueueError::Store { .. })),
        "the claim must fail on the lost placement answer: {:?}",
        outcome.map(|j| j.map(|j| j.id().clone()))
    );
    undone_and_found_at_once(&b, name, &key, config).await;
}

/// LIVENESS (cancellation): a `claim` future dropped while its check entry's placement is on
/// its way (sent, and applied: a request cannot be called back) is undone by its guard, as
/// `claim`'s `# Cancel safety` promises ("the claim is undone ... so no attempt is spent"),
/// and the undone item is found at once: the entry its item was found by is removed only
/// once the claim is delivered, and the dropped claimer does not put it back in its buffer.
/// A `tokio::time::timeout` around `claim`, or a `select!` with a shutdown signal, is enough
/// to drop it there.
///
/// Interleaving: item X enqueued (run entry E).
/// 1. P's `claim` wins X's claim LWT, places C at now + ttl, which applies;
/// 2. P's caller drops the `claim` future (a 100 ms timeout) before the answer comes;
/// 3. the guard undoes the claim: X available, attempt 0, E still beside C;
/// 4. Q finds X at once.
#[tokio::test(start_paused = true)]
async fn claim_dropped_during_its_move_leaves_the_undone_item_findable() {
    let b = MemoryBackend::new();
    let name = "move-dropped";
    let config = one_bucket_config();
    let (key, claimer) = item_and_claimer(&b, name, Duration::from_secs(1), config).await;
    let outcome = tokio::time::timeout(Duration::from_millis(100), claimer.claim("w1")).await;
    assert!(
        outcome.is_err(),
        "the claim must still wait for its placement's answer"
    );
    undone_and_found_at_once(&b, name, &key, config).await;
}
