//! What an enqueue's answer says about its item: an error only when nothing was added (an
//! unknown outcome naming the item when a send of it may have applied).

use std::time::Duration;

use cql_lease::StoreError;
use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::{JobState, QueueError, WorkQueue};

use super::queue::{claim_soon, queue};
use crate::backend::Backend;

/// Claims and completes every job found until none is found for a while: the payloads.
async fn process_all(b: &dyn Backend, q: &WorkQueue) -> Vec<String> {
    let mut done = Vec::new();
    while let Some(job) = claim_soon(b, q, "w").await {
        done.push(job.payload().to_owned());
        job.complete().await.expect("complete");
    }
    done
}

/// An enqueue whose item write fails on every send (a definite failure on the embedded
/// store; over the wire an unavailable LWT is an unknown outcome, as Cassandra may throw it
/// after the proposal was accepted) returns an error, and nothing is stored: no item, no
/// index entry left to find.
pub async fn a_failed_item_write_is_an_error_and_stores_nothing(b: &dyn Backend) {
    let q = queue(b, "enqueue-failed");
    b.inject_queue(Some(QueueOp::Enqueue), Fault::Unavailable, Times::Always);
    let outcome = q.enqueue("welcome bob").await;
    b.clear_faults();
    assert!(
        matches!(
            outcome,
            Err(QueueError::Store {
                source: StoreError::Unavailable(_),
                ..
            } | QueueError::OutcomeUnknown { .. })
        ),
        "{outcome:?}"
    );
    assert!(q.items().await.expect("items").is_empty());
    if matches!(outcome, Err(QueueError::Store { .. })) {
        // Definitely not added: not even an index entry is left.
        let stats = q.stats().await.expect("stats");
        assert_eq!((stats.available, stats.scheduled), (0, 0), "{stats:?}");
    }
    // An unknown outcome leaves the entry that would have found the item; it finds none.
    assert!(process_all(b, &q).await.is_empty());
}

/// An item write that times out on every send without applying is reported as an unknown
/// outcome naming the item (never a plain failure), and that item does not exist.
pub async fn a_write_timeout_is_an_unknown_outcome_naming_the_item(b: &dyn Backend) {
    let q = queue(b, "enqueue-timeout");
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::TimeoutWithoutApply,
        Times::Always,
    );
    let outcome = q.enqueue("welcome eve").await;
    b.clear_faults();
    let Err(QueueError::OutcomeUnknown { id, .. }) = outcome else {
        panic!("a write timeout must be an unknown outcome: {outcome:?}");
    };
    assert!(
        q.items()
            .await
            .expect("items")
            .iter()
            .all(|item| item.key.id != id),
        "the item named does not exist"
    );
}

/// A write that applied but whose answer was lost, while every read that could settle it
/// fails: the outcome is unknown (not a failure), and the item it names exists and is
/// processed exactly once.
pub async fn a_lost_answer_left_unsettled_is_an_unknown_outcome_and_the_item_is_found(
    b: &dyn Backend,
) {
    let q = queue(b, "enqueue-lost");
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    b.inject_queue(Some(QueueOp::Read), Fault::Unavailable, Times::Always);
    let outcome = q.enqueue("welcome joe").await;
    b.clear_faults();
    let Err(QueueError::OutcomeUnknown { id, .. }) = outcome else {
        panic!("an applied write whose answer was lost is not a failure: {outcome:?}");
    };
    let items = q.items().await.expect("items");
    let item = items
        .iter()
        .find(|item| item.key.id == id)
        .expect("the item exists");
    assert_eq!(item.state, JobState::Available);
    b.sleep(Duration::from_millis(100)).await;
    assert_eq!(
        process_all(b, &q).await,
        ["welcome joe"],
        "processed exactly once"
    );
}
