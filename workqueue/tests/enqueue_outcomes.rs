//! What an enqueue's result says about its item: `Ok` once the item is written (whatever
//! fails after), a plain error only when nothing was added, and an unknown outcome naming
//! the item when a send of it may have applied.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_lease::StoreError;
use cql_lease::memory::{Fault, Times};
use cql_lease::metrics::capture::Capture;
use cql_lease::metrics::{ENQUEUE_UPKEEP_DEFERRED, ENQUEUED};
use cql_workqueue::memory::{MemoryQueueStore, PlainOp, QueueOp};
use cql_workqueue::{
    ClaimMode, ItemId, ItemKey, JobState, NewItem, QueueConfig, QueueError, WorkQueue,
};

const NAME: &str = "mail";

fn queue_on(store: &Arc<MemoryQueueStore>, config: QueueConfig) -> WorkQueue {
    WorkQueue::new(store.clone(), NAME, config).unwrap()
}

fn key_of(id: &ItemId) -> ItemKey {
    ItemKey {
        partition: NAME.to_owned(),
        id: id.clone(),
    }
}

/// Claims and completes every job found, then keeps looking for `quiet` (several rescans
/// from the cursor): the payloads processed, in order.
async fn process_all(queue: &WorkQueue, quiet: Duration) -> Vec<String> {
    let mut done = Vec::new();
    let mut idle_since = tokio::time::Instant::now();
    while idle_since.elapsed() < quiet {
        match queue.claim("w").await.unwrap() {
            Some(job) => {
                done.push(job.payload().to_owned());
                job.complete().await.unwrap();
                idle_since = tokio::time::Instant::now();
            }
            None => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    done
}

/// Holds every enqueue LWT for a second and, once the index entries are placed and the
/// LWTs are on their way, makes every index and cursor call fail: the rows are written,
/// and everything after them (the cursor re-read, the entry upkeep) fails.
async fn fail_index_after_the_rows(store: &Arc<MemoryQueueStore>, rows: usize) {
    store.inject(
        Some(QueueOp::Enqueue),
        Fault::Latency(Duration::from_secs(1)),
        Times::Next(rows),
    );
    tokio::spawn({
        let store = store.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            store.inject(Some(QueueOp::Index), Fault::Unavailable, Times::Always);
        }
    });
}

/// An enqueue whose item row was written and whose upkeep after it (the cursor re-read)
/// fails reports success: the item exists, its upkeep is retried in the background and
/// counted, and the item is processed exactly once.
#[tokio::test(start_paused = true)]
async fn a_failure_after_the_item_is_written_is_reported_as_enqueued() {
    let capture = Capture::default();
    let _installed = capture.install();
    let store = Arc::new(MemoryQueueStore::new());
    let queue = queue_on(&store, QueueConfig::default());
    fail_index_after_the_rows(&store, 1).await;

    let id = queue
        .enqueue("welcome ada")
        .await
        .expect("the item was written: the enqueue must say so");

    let row = queue
        .store()
        .read(&key_of(&id))
        .await
        .unwrap()
        .expect("row");
    assert_eq!(
        (row.state, row.payload.as_slice()),
        (JobState::Available, b"welcome ada".as_slice())
    );
    let mail = [("queue", NAME)];
    assert_eq!(capture.counter(ENQUEUED, &mail), 1);
    assert_eq!(capture.counter(ENQUEUE_UPKEEP_DEFERRED, &mail), 1);

    // The index comes back; the background upkeep finishes and the item is found.
    tokio::time::sleep(Duration::from_secs(3)).await;
    store.clear_faults();
    let done = process_all(&queue, Duration::from_secs(10)).await;
    assert_eq!(done, ["welcome ada"], "processed exactly once");
    let row = queue
        .store()
        .read(&key_of(&id))
        .await
        .unwrap()
        .expect("row");
    assert_eq!((row.state, row.attempt), (JobState::Done, 1));
}

/// The same per item of a batch: every item written is reported `Ok` although the upkeep
/// after each failed, and each is processed exactly once.
#[tokio::test(start_paused = true)]
async fn a_batch_reports_each_written_item_as_enqueued() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = queue_on(&store, QueueConfig::default());
    fail_index_after_the_rows(&store, 3).await;

    let results = queue
        .enqueue_batch(["a", "b", "c"].map(NewItem::text))
        .await;

    assert_eq!(results.len(), 3);
    for result in &results {
        let enqueued = result.as_ref().expect("every item was written");
        let row = queue.store().read(&key_of(enqueued.id())).await.unwrap();
        assert_eq!(row.map(|r| r.state), Some(JobState::Available));
    }
    store.clear_faults();
    let mut done = process_all(&queue, Duration::from_secs(10)).await;
    done.sort();
    assert_eq!(done, ["a", "b", "c"], "each processed exactly once");
}

/// An enqueue whose item write fails (definitely not applied, on every send until
/// `resolve_timeout`) returns a plain store error, and nothing is stored: no item, no
/// index entry.
#[tokio::test(start_paused = true)]
async fn a_failed_item_write_is_a_plain_error_and_stores_nothing() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = queue_on(&store, QueueConfig::default());
    store.inject(Some(QueueOp::Enqueue), Fault::Unavailable, Times::Always);

    let outcome = queue.enqueue("welcome bob").await;

    assert!(
        matches!(
            outcome,
            Err(QueueError::Store {
                source: StoreError::Unavailable(_),
                ..
            })
        ),
        "{outcome:?}"
    );
    store.clear_faults();
    assert!(queue.items().await.unwrap().is_empty());
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.available, stats.scheduled), (0, 0), "{stats:?}");
    assert!(process_all(&queue, Duration::from_secs(5)).await.is_empty());
}

/// The same per item of a batch: each item whose write failed is a plain error, and none
/// is stored.
#[tokio::test(start_paused = true)]
async fn a_batch_reports_each_failed_write_as_not_enqueued() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = queue_on(&store, QueueConfig::default());
    store.inject(Some(QueueOp::Enqueue), Fault::Unavailable, Times::Always);

    let results = queue.enqueue_batch(["a", "b"].map(NewItem::text)).await;

    assert!(
        results
            .iter()
            .all(|r| matches!(r, Err(QueueError::Store { .. }))),
        "{results:?}"
    );
    store.clear_faults();
    assert!(queue.items().await.unwrap().is_empty());
}

/// An item write that times out on every send (it may or may not have applied) is never
/// reported as a plain failure: the error says the outcome is unknown and names the item,
/// which a caller can look up.
#[tokio::test(start_paused = true)]
async fn a_write_timeout_is_an_unknown_outcome_naming_the_item() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = queue_on(&store, QueueConfig::default());
    store.inject(
        Some(QueueOp::Enqueue),
        Fault::TimeoutWithoutApply,
        Times::Always,
    );

    let outcome = queue.enqueue("welcome eve").await;

    let Err(QueueError::OutcomeUnknown { id, .. }) = outcome else {
        panic!("a write timeout must be an unknown outcome: {outcome:?}");
    };
    store.clear_faults();
    assert_eq!(queue.store().read(&key_of(&id)).await.unwrap(), None);
}

/// A write that applied but whose answer was lost, then sends that fail: the outcome is
/// unknown (not a plain failure, though the last send definitely failed), and the item it
/// names exists and is processed exactly once.
#[tokio::test(start_paused = true)]
async fn a_lost_answer_then_failures_is_an_unknown_outcome_and_the_item_is_found() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = queue_on(&store, QueueConfig::default());
    store.inject(
        Some(QueueOp::Enqueue),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    store.inject(Some(QueueOp::Enqueue), Fault::Unavailable, Times::Always);

    let outcome = queue.enqueue("welcome joe").await;

    let Err(QueueError::OutcomeUnknown { id, .. }) = outcome else {
        panic!("an applied write whose answer was lost is not a failure: {outcome:?}");
    };
    store.clear_faults();
    let row = queue
        .store()
        .read(&key_of(&id))
        .await
        .unwrap()
        .expect("row");
    assert_eq!(row.state, JobState::Available);
    let done = process_all(&queue, Duration::from_secs(10)).await;
    assert_eq!(done, ["welcome joe"], "found and processed exactly once");
}

/// In the bakery claim mode the row is a plain write, which may land even when its sends
/// fail as unavailable (cut twice by the request timeout): such a failure is an unknown
/// outcome naming the item, never a plain "not added".
#[tokio::test(start_paused = true)]
async fn a_failed_plain_row_write_is_an_unknown_outcome() {
    let store = Arc::new(MemoryQueueStore::new());
    let config = QueueConfig {
        claim_mode: ClaimMode::Bakery,
        ..QueueConfig::default()
    };
    let queue = queue_on(&store, config);
    store
        .plain_items()
        .inject(Some(PlainOp::Write), Fault::Unavailable, Times::Always);

    let outcome = queue.enqueue("welcome kim").await;

    assert!(
        matches!(outcome, Err(QueueError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
}
