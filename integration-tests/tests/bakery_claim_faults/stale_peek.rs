//! A claimer's peek may be older than its draw: the claim re-reads the item row once its
//! number is drawn, and withdraws if the row has moved on; no claim counts on a stale
//! peek.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cql_lease::CasOutcome;
use cql_lease::cells::memory::CellOp;
use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::store::{ClaimOutcome, ItemClaim};
use cql_workqueue::{ClaimMode, ItemKey, JobState, QueueConfig, WorkQueue};
use integration_tests::conformance::queue::queue_config;

use super::slow_rows::wrapped;
use super::{arm_after_writes, bakery_queue};

/// A give-back whose high-water mark never landed writes the row's attempt = its number
/// and relies on the next draw's floor (the claimer's `seen_attempt`) to stay above it.
/// But the floor comes from the claimer's peek, which may predate the give-back: B peeks
/// (attempt 0, nothing live), then A draws 1, its mark is refused, A gives 1 back (row
/// attempt 1) and withdraws; B's draw then reads mark 0, no live ticket, floor 0, takes 1
/// = seen + 1 and is *granted* a claim whose token equals the row's attempt. B holds it
/// throughout, yet its completion is refused (the row is "already finished" at 1): a
/// valid holder's finish is lost and the job is delivered again. The re-read after the draw
/// sees attempt 1 and withdraws: B's next claim draws 2.
#[tokio::test(start_paused = true)]
async fn stale_peek_never_grants_a_given_back_number() {
    let mem = Arc::new(MemoryQueueStore::new());
    let q = bakery_queue(&mem, "r3", 3);
    let id = q.enqueue("work").await.expect("enqueue");
    let key = ItemKey {
        partition: "r3".into(),
        id,
    };
    let store = Arc::clone(q.store());
    // B's candidate look, just before A draws.
    let peeked = store.peek(&key).await.expect("peek").expect("row");
    assert!(peeked.claim.is_none(), "nobody holds the item yet");
    let seen = peeked.attempt;
    assert_eq!(seen, 0);

    // A draws number 1; every send of its high-water mark is refused (never lands).
    mem.cells().inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let base = mem.cells().calls(CellOp::Write);
    let first = tokio::spawn({
        let store = Arc::clone(&store);
        let key = key.clone();
        async move {
            store
                .claim(ItemClaim {
                    key: &key,
                    claim_id: "a/first-claim",
                    seen_attempt: 0,
                    ttl: Duration::from_secs(2),
                })
                .await
        }
    });
    arm_after_writes(&mem, base, 2, Fault::Unavailable).await;
    let outcome = first.await.expect("join");
    mem.cells().clear_faults();
    assert!(
        matches!(outcome, Ok(ClaimOutcome::Lost) | Err(_)),
        "A's claim must not count: {outcome:?}"
    );
    // A withdrew: nothing is live, the mark is still 0.

    // B goes on with what it peeked.
    let b = store
        .claim(ItemClaim {
            key: &key,
            claim_id: "b/second-claim",
            seen_attempt: seen,
            ttl: Duration::from_secs(2),
        })
        .await
        .expect("claim");
    if b != ClaimOutcome::Claimed {
        return; // refused: B would re-peek and draw above the given-back number
    }
    let done = store
        .complete(&key, "b/second-claim", Duration::from_secs(60))
        .await;
    let row = store.read(&key).await.expect("read").expect("row");
    assert!(
        matches!(done, Ok(CasOutcome::Applied)),
        "B was granted the item (token {} = the given-back number, row attempt {}) and held \
         it, yet its completion was refused: {done:?}; row now {:?}",
        seen + 1,
        row.attempt,
        row.state
    );
}

/// The peek reads the item row and the number row as two reads, and takes the item's
/// attempt as the larger of the row's attempt and the mark. C's row read is answered from
/// before B's completion (a replica's answer, slow on the network) while its number-row
/// read runs after B withdrew: C sees the row `available` at attempt 0, mark 1, nothing
/// live, so `seen_attempt` 1. Its draw takes 2 = seen + 1 and the claim is *granted* on an
/// item already completed: the job runs again, and C's finish (row attempt 1 < 2) writes
/// over the done row. The re-read after the draw sees the item done and withdraws.
#[tokio::test(start_paused = true)]
async fn stale_row_peek_never_claims_a_completed_item() {
    let store = wrapped(Duration::from_secs(1));
    let config = QueueConfig {
        claim_mode: ClaimMode::Bakery,
        max_attempts: 3,
        ..queue_config()
    };
    let q = WorkQueue::new(Arc::clone(&store.tweaked) as _, "c", config).expect("queue");
    let id = q.enqueue("run me once").await.expect("enqueue");
    let key = ItemKey {
        partition: "c".into(),
        id,
    };
    let bakery = Arc::clone(q.store());
    // B holds the item (number 1, recorded).
    let b = bakery
        .claim(ItemClaim {
            key: &key,
            claim_id: "b/claim",
            seen_attempt: 0,
            ttl: Duration::from_secs(2),
        })
        .await
        .expect("claim B");
    assert_eq!(b, ClaimOutcome::Claimed);
    // C peeks: its row read is executed now (answer 1 s late), its number-row read 500 ms
    // from now.
    store.items.armed.store(true, Ordering::SeqCst);
    store.inner.cells().inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(500)),
        Times::Next(1),
    );
    let peek = tokio::spawn({
        let bakery = Arc::clone(&bakery);
        let key = key.clone();
        async move { bakery.peek(&key).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    // B completes and withdraws meanwhile.
    let done = bakery
        .complete(&key, "b/claim", Duration::from_secs(60))
        .await
        .expect("complete B");
    assert_eq!(done, CasOutcome::Applied);
    let peeked = peek.await.expect("join").expect("peek").expect("row");
    if !peeked.state.is_claimable() || peeked.claim.is_some() {
        return; // the claimer skips the item
    }
    let c = bakery
        .claim(ItemClaim {
            key: &key,
            claim_id: "c/claim",
            seen_attempt: peeked.attempt,
            ttl: Duration::from_secs(2),
        })
        .await
        .expect("claim C");
    let row = bakery.read(&key).await.expect("read").expect("row");
    assert_ne!(
        c,
        ClaimOutcome::Claimed,
        "a completed item (row {:?} at attempt {}) was claimed again, from a peek that saw \
         it {:?} at attempt {} with payload {:?}",
        row.state,
        row.attempt,
        peeked.state,
        peeked.attempt,
        peeked.payload_text()
    );
    assert_eq!(row.state, JobState::Done);
}
