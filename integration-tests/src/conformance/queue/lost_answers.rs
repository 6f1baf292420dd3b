//! Lost answers to claim, complete and enqueue, settled by reading back, and the store's own
//! claim condition checked without the client's filtering.

use std::sync::Arc;
use std::time::Duration;

use cql_lease::CasOutcome;
use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::store::{ClaimOutcome, ItemClaim};
use cql_workqueue::{JobState, QueueConfig, WorkQueue};

use super::{queue_config, queue_store, queue_with, test_config};
use crate::backend::Backend;

/// Lost answers to claim, complete and enqueue are settled by reading back.
pub async fn lost_answers_are_resolved(b: &dyn Backend) {
    let q = queue_with(
        b,
        "lost",
        QueueConfig {
            choice: 1,
            ..queue_config()
        },
    );
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    q.enqueue("one")
        .await
        .expect("enqueue settles an applied insert");
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::TimeoutWithoutApply,
        Times::Next(1),
    );
    q.enqueue("two")
        .await
        .expect("enqueue settles an unapplied insert");
    assert_eq!(q.items().await.expect("items").len(), 2);

    b.inject_queue(
        Some(QueueOp::Claim),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let one = q
        .claim("w")
        .await
        .expect("claim")
        .expect("applied claim is known");
    assert_eq!((one.payload(), one.attempt()), ("one", 1));
    b.inject_queue(
        Some(QueueOp::Claim),
        Fault::TimeoutWithoutApply,
        Times::Next(1),
    );
    // The unapplied claim on "two" is known as such; "two" stays free and is found again
    // (by this pass's rescan from the cursor, or the next pass).
    let two = match q.claim("w").await.expect("claim") {
        Some(two) => two,
        None => {
            b.sleep(queue_config().cursor_refresh).await;
            q.claim("w")
                .await
                .expect("claim")
                .expect("two is still free")
        }
    };
    assert_eq!((two.payload(), two.attempt()), ("two", 1));

    b.inject_queue(
        Some(QueueOp::Complete),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    one.complete().await.expect("applied complete is known");
    b.inject_queue(
        Some(QueueOp::Complete),
        Fault::TimeoutWithoutApply,
        Times::Next(1),
    );
    two.complete()
        .await
        .expect("unapplied complete is sent again");
    assert!(q.items().await.expect("items").is_empty());
}

/// The store's claim condition on its own: a live claim, a stale attempt number or a missing
/// item each refuse a claim (the client filters these out before asking, the store decides).
pub async fn store_refuses_claims_it_must(b: &dyn Backend) {
    let store = queue_store(b);
    let q = WorkQueue::new(Arc::clone(&store), "conditions", queue_config()).expect("queue");
    q.enqueue("x").await.expect("enqueue");
    let key = q.items().await.expect("items")[0].key.clone();
    let ttl = test_config().store_ttl();
    let claim = |claim_id: &'static str, seen_attempt: i32| ItemClaim {
        key: &key,
        claim_id,
        seen_attempt,
        ttl,
    };
    assert_eq!(
        store.claim(claim("a", 0)).await.expect("claim"),
        ClaimOutcome::Claimed
    );
    // Held: refused even with the right attempt number.
    assert_eq!(
        store.claim(claim("b", 1)).await.expect("claim"),
        ClaimOutcome::Lost
    );
    // Stale number: refused once the claim is gone too.
    b.advance_store_clock(test_config().takeover_bound()).await;
    assert_eq!(
        store.claim(claim("c", 0)).await.expect("claim"),
        ClaimOutcome::Lost
    );
    assert_eq!(
        store.claim(claim("d", 1)).await.expect("claim"),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        store
            .complete(&key, "a", Duration::from_secs(60))
            .await
            .expect("complete"),
        CasOutcome::NotApplied
    );
    assert_eq!(
        store
            .complete(&key, "d", Duration::from_secs(60))
            .await
            .expect("complete"),
        CasOutcome::Applied
    );
    // Done: a claim does not bring it back, and the attempt number stays.
    assert_eq!(
        store.claim(claim("e", 2)).await.expect("claim"),
        ClaimOutcome::Lost
    );
    let done = store.read(&key).await.expect("read").expect("done marker");
    assert_eq!((done.state, done.attempt), (JobState::Done, 2));
}
