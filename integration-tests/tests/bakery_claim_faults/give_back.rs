//! Giving back an undone bakery claim's attempt: fenced like a finish, yet given back
//! whenever its cells still stand and whether or not its high-water mark has landed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cql_lease::FencingToken;
use cql_lease::cells::memory::CellOp;
use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::store::{ClaimOutcome, ItemClaim};
use cql_workqueue::{ClaimMode, ItemId, ItemKey, JobState, QueueConfig, WorkQueue};
use integration_tests::conformance::queue::queue_config;

use super::slow_rows::wrapped;
use super::{bakery_queue, first_claim_cut, on_writes};

fn bakery_config(max_attempts: i32) -> QueueConfig {
    QueueConfig {
        claim_mode: ClaimMode::Bakery,
        max_attempts,
        ..queue_config()
    }
}

/// Safety. An undone claim's give-back is fenced like a finish: sent only
/// while its ticket's cells stand for the write's flight, checked again after its read of
/// the row. A give-back whose row read answers after A's number expired and B claimed and
/// completed the item writes nothing: the item stays done and is not claimable again.
#[tokio::test(start_paused = true)]
async fn stale_give_back_never_overwrites_next_holders_completion() {
    let store = wrapped(Duration::from_secs(5));
    let config = bakery_config(3);
    let a = WorkQueue::new(Arc::clone(&store.tweaked) as _, "g", config).expect("queue A");
    let b = WorkQueue::new(Arc::clone(&store.tweaked) as _, "g", config).expect("queue B");
    let id = a.enqueue("run me once").await.expect("enqueue");
    let key = ItemKey {
        partition: "g".into(),
        id,
    };
    // A's claim, made through A's store handle (what `WorkQueue::claim` sends first).
    let outcome = a
        .store()
        .claim(ItemClaim {
            key: &key,
            claim_id: "A/claim-1",
            seen_attempt: 0,
            ttl: Duration::from_secs(2),
        })
        .await
        .expect("claim");
    assert_eq!(outcome, ClaimOutcome::Claimed);
    // A undoes it (never handed out); its read of the row answers late.
    store.items.armed.store(true, Ordering::SeqCst);
    let undo = tokio::spawn({
        let a_store = Arc::clone(a.store());
        let key = key.clone();
        async move {
            a_store
                .unclaim(&key, "A/claim-1", JobState::Available, 0)
                .await
        }
    });
    // A's number expires by its TTL (2 s); B claims and completes.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let job = loop {
        if let Some(job) = b.claim("B").await.expect("claim B") {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(job.token() > cql_lease::FencingToken::new(1), "B's token");
    job.complete().await.expect("B completes");
    let done = b.store().read(&key).await.expect("read").expect("row");
    assert_eq!(done.state, JobState::Done, "B's completion landed");
    // A's give-back ends.
    let undone = undo.await.expect("join");
    let item = b.store().read(&key).await.expect("read").expect("row");
    let again = b.claim("C").await.expect("claim C");
    assert!(
        item.state == JobState::Done && again.is_none(),
        "A's give-back (answer {undone:?}) overwrote B's completion: row state {:?}, attempt {}, \
         requeued_at {}, payload {:?}; claimable again: {:?}",
        item.state,
        item.attempt,
        item.requeued_at,
        String::from_utf8_lossy(&item.payload),
        again.as_ref().map(|j| j.payload().to_owned())
    );
}

/// Attempt budget. A claim whose high-water mark is applied only after its
/// give-back read the number row (every send of the mark answered late) still gives its
/// attempt back: the give-back writes the row's attempt as the number whether or not the
/// mark has landed yet. With `max_attempts = 1` the never-delivered item's first delivery
/// is attempt 1.
#[tokio::test(start_paused = true)]
async fn late_landing_high_water_mark_still_gives_the_attempt_back() {
    let mem = Arc::new(MemoryQueueStore::new());
    let config = bakery_config(1);
    let q = WorkQueue::new(Arc::clone(&mem) as _, "h", config).expect("queue");
    let id = q.enqueue("run me once").await.expect("enqueue");
    let key = ItemKey {
        partition: "h".into(),
        id,
    };
    // Row reads a little slow, so the fault can be armed between the number and the mark.
    mem.cells().inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    // Choosing mark and number written: every later write (the mark's sends) lands late.
    let late = |mem: &MemoryQueueStore| {
        mem.cells()
            .inject_late_apply(Some(CellOp::Write), Duration::from_secs(3), Times::Always);
    };
    let outcome = first_claim_cut(&q, &mem, &key, late).await;
    assert!(
        matches!(outcome, Ok(ClaimOutcome::Lost) | Err(_)),
        "the first claim should not count: {outcome:?}"
    );
    // The straggling marks land; nobody else ever drew on the item.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let job = q.claim("worker").await.expect("claim");
    let item = q.store().read(&key).await.expect("read").expect("row");
    assert!(
        job.as_ref().is_some_and(|j| j.attempts_used() == 1),
        "never delivered, yet its first delivery is refused or not attempt 1: job attempts {:?}; \
         row {:?} attempt {} requeued_at {} error {:?}",
        job.as_ref().map(|j| j.attempts_used()),
        item.state,
        item.attempt,
        item.requeued_at,
        item.last_error
    );
}

/// Attempt budget. A claim undone after its validity ran out (a parked job
/// lost at its deadline) but while its cells still stand is still remembered, even after
/// another claim of the process won meanwhile, and gives its attempt back: with
/// `max_attempts = 1` the never-delivered item is delivered as attempt 1.
#[tokio::test(start_paused = true)]
async fn undone_claim_past_its_validity_still_gives_its_attempt_back() {
    let mem = Arc::new(MemoryQueueStore::new());
    let config = bakery_config(1);
    let q = WorkQueue::new(Arc::clone(&mem) as _, "p", config).expect("queue");
    let first = q.enqueue("one").await.expect("enqueue");
    let second = q.enqueue("two").await.expect("enqueue");
    let key = |id: ItemId| ItemKey {
        partition: "p".into(),
        id,
    };
    let (k1, k2) = (key(first), key(second));
    let claim = |k: ItemKey, id: &'static str| {
        let store = Arc::clone(q.store());
        async move {
            store
                .claim(ItemClaim {
                    key: &k,
                    claim_id: id,
                    seen_attempt: 0,
                    ttl: Duration::from_secs(2),
                })
                .await
                .expect("claim")
        }
    };
    assert_eq!(claim(k1.clone(), "w/x").await, ClaimOutcome::Claimed);
    // X's validity (1 s) runs out unrenewed; its cells still stand (TTL 2 s).
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(claim(k2.clone(), "w/y").await, ClaimOutcome::Claimed);
    let undone = q
        .store()
        .unclaim(&k1, "w/x", JobState::Available, 0)
        .await
        .expect("unclaim");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Only item 1 is due: item 2 is still claimed by Y (never renewed, it lapses too, so
    // take whatever comes and look for item 1).
    let mut delivered = Vec::new();
    while let Some(job) = q.claim("worker").await.expect("claim") {
        delivered.push((job.id().clone(), job.attempts_used()));
    }
    let item = q.store().read(&k1).await.expect("read").expect("row");
    assert!(
        delivered
            .iter()
            .any(|(id, used)| *id == k1.id && *used == 1),
        "X was undone (unclaim answered {undone:?}) and never delivered, yet item 1 was not \
         delivered as attempt 1: delivered {delivered:?}; row {:?} attempt {} requeued_at {} \
         error {:?}",
        item.state,
        item.attempt,
        item.requeued_at,
        item.last_error
    );
}

/// The give-back's other half: an undone claim whose high-water mark never lands (every
/// send refused) still has its attempt given back, and the row's attempt, now its number,
/// keeps the next draw above it (the draw's floor), so the item is not stranded with a
/// number nobody can take. With `max_attempts = 1` its first delivery is attempt 1, token 2.
#[tokio::test(start_paused = true)]
async fn unlanded_high_water_mark_neither_strands_nor_spends_the_item() {
    let mem = Arc::new(MemoryQueueStore::new());
    let q = bakery_queue(&mem, "n", 1);
    let id = q.enqueue("run me once").await.expect("enqueue");
    mem.cells().inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let key = ItemKey {
        partition: "n".into(),
        id,
    };
    let outcome = first_claim_cut(&q, &mem, &key, on_writes(Fault::Unavailable)).await;
    assert!(
        matches!(outcome, Ok(ClaimOutcome::Lost) | Err(_)),
        "a claim whose mark never landed must not count: {outcome:?}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let job = q.claim("worker").await.expect("claim");
    assert!(
        job.as_ref()
            .is_some_and(|j| j.attempts_used() == 1 && j.token() == FencingToken::new(2)),
        "the item must be delivered as attempt 1 with token 2: {:?}",
        job.as_ref().map(|j| (j.attempts_used(), j.token()))
    );
}

/// Liveness. An undone claim whose give-back fails (its row read refused) still withdraws
/// its ticket: the error is reported, and another process claims the item at once instead
/// of skipping it until the ticket's TTL runs out.
#[tokio::test(start_paused = true)]
async fn failed_give_back_still_withdraws_its_ticket() {
    let mem = Arc::new(MemoryQueueStore::new());
    let q = WorkQueue::new(Arc::clone(&mem) as _, "p", bakery_config(3)).expect("queue");
    let other = WorkQueue::new(Arc::clone(&mem) as _, "p", bakery_config(3)).expect("queue");
    let id = q.enqueue("one").await.expect("enqueue");
    let key = ItemKey {
        partition: "p".into(),
        id,
    };
    let claimed = q
        .store()
        .claim(ItemClaim {
            key: &key,
            claim_id: "w/x",
            seen_attempt: 0,
            ttl: Duration::from_secs(60),
        })
        .await
        .expect("claim");
    assert_eq!(claimed, ClaimOutcome::Claimed);
    mem.plain_items().inject(
        Some(cql_workqueue::memory::PlainOp::Read),
        Fault::Unavailable,
        Times::Always,
    );
    let undone = q.store().unclaim(&key, "w/x", JobState::Available, 0).await;
    mem.plain_items().clear_faults();
    assert!(
        undone.is_err(),
        "the give-back's read was refused: {undone:?}"
    );
    let started = tokio::time::Instant::now();
    let job = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(job) = other.claim("worker").await.expect("claim") {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the item is claimable well before the ticket's 60 s TTL");
    assert_eq!(job.id(), &key.id, "claimed after {:?}", started.elapsed());
    job.complete().await.expect("complete");
}
