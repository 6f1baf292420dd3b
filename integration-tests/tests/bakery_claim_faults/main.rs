//! Guarantees of the LWT-free ("bakery") claim mode under faults: a high-water mark whose
//! answer is lost or that is cut by the queue's bound, finishes dropped or late, and numbers
//! left live (here); an undone claim's give-back (`give_back`), also when it is still on the
//! wire as the queue cuts the claim (`give_back_at_the_cut`); a peek older than the draw
//! (`stale_peek`). They drive the embedded store on paused tokio time with fault injection,
//! so they are fast and deterministic.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_lease::cells::memory::CellOp;
use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::{MemoryQueueStore, PlainOp, QueueOp};
use cql_workqueue::store::{ClaimOutcome, ItemClaim};
use cql_workqueue::{ClaimMode, ItemKey, JobState, QueueConfig, WorkQueue};
use integration_tests::conformance::queue::queue_config;

mod give_back;
mod give_back_at_the_cut;
mod slow_rows;
mod stale_peek;

fn bakery_queue(mem: &Arc<MemoryQueueStore>, name: &str, max_attempts: i32) -> WorkQueue {
    let config = QueueConfig {
        claim_mode: ClaimMode::Bakery,
        max_attempts,
        ..queue_config()
    };
    WorkQueue::new(Arc::clone(mem) as _, name, config).expect("queue")
}

/// Sends a first claim of `key` ("w/first-claim") through `q`'s store, lets it write its
/// choosing mark and its number, then runs `arm` (a fault on the cell writes that follow:
/// its high-water mark's), and returns its outcome once the faults are cleared.
async fn first_claim_cut(
    q: &WorkQueue,
    mem: &MemoryQueueStore,
    key: &ItemKey,
    arm: impl FnOnce(&MemoryQueueStore),
) -> Result<ClaimOutcome, cql_lease::StoreError> {
    let base = mem.cells().calls(CellOp::Write);
    let first = tokio::spawn({
        let store = Arc::clone(q.store());
        let key = key.clone();
        async move {
            store
                .claim(ItemClaim {
                    key: &key,
                    claim_id: "w/first-claim",
                    seen_attempt: 0,
                    ttl: Duration::from_secs(2),
                })
                .await
        }
    });
    while mem.cells().calls(CellOp::Write) < base + 2 {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    arm(mem);
    let outcome = first.await.expect("join");
    mem.cells().clear_faults();
    outcome
}

/// Lets a spawned claim run until the bakery cell store has served `writes` more writes
/// (choosing mark, then number), then arms `fault` on every later cell write: the next one
/// is the claim's high-water-mark write.
async fn arm_after_writes(mem: &MemoryQueueStore, base: u64, writes: u64, fault: Fault) {
    while mem.cells().calls(CellOp::Write) < base + writes {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    on_writes(fault)(mem);
}

/// Arms `fault` on every later cell write.
fn on_writes(fault: Fault) -> impl FnOnce(&MemoryQueueStore) {
    move |mem| {
        mem.cells()
            .inject(Some(CellOp::Write), fault, Times::Always)
    }
}

/// A claim whose high-water-mark write is applied but whose answer is lost (until the
/// ticket's validity runs out) is reported `Lost` and withdrawn, and gives its attempt back:
/// the mark landed, so the next claim takes number 2, but attempts are counted from one
/// later (`requeued_at + 1`), and with `max_attempts = 1` the item's first delivery is
/// attempt 1, not a dead letter. (`unclaim` gives back the same way whether or not the mark
/// was confirmed.)
#[tokio::test(start_paused = true)]
async fn lost_high_water_answer_gives_the_attempt_back() {
    let mem = Arc::new(MemoryQueueStore::new());
    let q = bakery_queue(&mem, "lost-mark", 1);
    let id = q.enqueue("run me once").await.expect("enqueue");
    let key = ItemKey {
        partition: "lost-mark".into(),
        id: id.clone(),
    };
    // Every row read of the cells is a little slow, so the test can arm the fault between
    // the number's write and the high-water mark's.
    mem.cells().inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let outcome = first_claim_cut(&q, &mem, &key, on_writes(Fault::TimeoutAfterApply)).await;
    assert!(
        matches!(outcome, Ok(ClaimOutcome::Lost) | Err(_)),
        "the first claim should not count: {outcome:?}"
    );
    // Never delivered to anyone. Now a worker claims it.
    let job = q.claim("worker").await.expect("claim");
    let item = q.store().read(&key).await.expect("read").expect("row");
    assert!(
        job.is_some(),
        "the item was never delivered, yet its first delivery was refused (attempts exhausted): \
         row now {:?} attempt {} requeued_at {} error {:?}",
        item.state,
        item.attempt,
        item.requeued_at,
        item.last_error
    );
    let job = job.expect("job");
    assert_eq!(job.attempts_used(), 1, "first delivery must be attempt 1");
    assert_ne!(item.state, JobState::Discarded);
}

/// A bakery claim cut by the queue's bound (its own deadline, two thirds of the
/// validity) while its high-water mark's write is outstanding (applied, answers lost, being
/// re-sent) is read back; the store shows its number live and recorded, so it is delivered
/// and it is a claim for the store layer too: its heartbeat keeps it and it completes.
#[tokio::test(start_paused = true)]
async fn claim_cut_during_high_water_write_is_delivered_holdable() {
    let mem = Arc::new(MemoryQueueStore::new());
    let q = bakery_queue(&mem, "cut-mark", 3);
    q.enqueue("work").await.expect("enqueue");
    mem.cells().inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let base = mem.cells().calls(CellOp::Write);
    let claim = tokio::spawn({
        let q = q.clone();
        async move { q.claim("worker").await }
    });
    arm_after_writes(&mem, base, 2, Fault::TimeoutAfterApply).await;
    let job = claim.await.expect("join");
    mem.cells().clear_faults();
    let Ok(Some(job)) = job else {
        // Not delivered at all: the scenario did not arise (the test would show nothing).
        panic!("claim did not deliver: {job:?}");
    };
    // A delivered job must be kept by its heartbeat well past a renewal interval.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        job.is_held(),
        "delivered job (token {:?}) lost at its first heartbeat; lost_at {:?}",
        job.token(),
        job.lost_at()
    );
    let done = job.complete().await;
    assert!(
        done.is_ok(),
        "a delivered, held job could not complete: {done:?}"
    );
}

/// `Job::complete` dropped while it settles a lost answer (its write applied: the row
/// is `done`, payload cleared) hands the item back, a no-op since the write applied: the
/// bakery finish writes only over a row whose attempt is below its number, as the LWT
/// mode's hand-back is conditional on the claim. The completed item stays done and is not
/// delivered again.
#[tokio::test(start_paused = true)]
async fn dropped_complete_after_lost_answer_stays_done() {
    dropped_complete_after_lost_answer(ClaimMode::Bakery).await;
}

/// The same in the LWT mode: its read-back settles the lost answer at once (the claim is gone), so
/// the item stays done.
#[tokio::test(start_paused = true)]
async fn control_lwt_mode_lost_complete_answer_stays_done() {
    dropped_complete_after_lost_answer(ClaimMode::Lwt).await;
}

async fn dropped_complete_after_lost_answer(mode: ClaimMode) {
    let mem = Arc::new(MemoryQueueStore::new());
    let config = QueueConfig {
        claim_mode: mode,
        ..queue_config()
    };
    let q = WorkQueue::new(Arc::clone(&mem) as _, "dropped-complete", config).expect("queue");
    let id = q.enqueue("precious payload").await.expect("enqueue");
    let key = ItemKey {
        partition: "dropped-complete".into(),
        id,
    };
    let job = q.claim("worker").await.expect("claim").expect("a job");
    // The done write applies; its answer is lost.
    match mode {
        ClaimMode::Bakery => {
            mem.plain_items().inject(
                Some(PlainOp::Write),
                Fault::TimeoutAfterApply,
                Times::Next(1),
            );
            // Its first read-back fails too (it would settle the lost answer at once), so
            // complete is still settling when the worker shuts down.
            mem.cells()
                .inject(Some(CellOp::ReadRow), Fault::Unavailable, Times::Next(1));
        }
        _ => mem.inject(
            Some(QueueOp::Complete),
            Fault::TimeoutAfterApply,
            Times::Next(1),
        ),
    }
    // The worker shuts down while complete is settling (it waits a retry delay of 50-100 ms).
    let cut = tokio::time::timeout(Duration::from_millis(20), job.complete()).await;
    // (The LWT mode settles the lost answer by its read-back at once: nothing to cut.)
    if matches!(mode, ClaimMode::Bakery) {
        assert!(cut.is_err(), "complete settled too early: {cut:?}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let item = q.store().read(&key).await.expect("read").expect("row");
    let again = q.claim("another").await.expect("claim");
    assert!(
        item.state == JobState::Done && again.is_none(),
        "the completed item came back: state {:?}, payload {:?}, delivered again with payload {:?}",
        item.state,
        String::from_utf8_lossy(&item.payload),
        again.as_ref().map(|j| j.payload().to_owned())
    );
}

/// A late finish never overwrites the next holder's completion: A fails its job just
/// inside its deadline (heartbeats failing) and its read of the row is slow (4.4 s, within
/// a request timeout); meanwhile A's number expires and B reclaims and completes. A's
/// finish is refused: it is sent only with a request timeout of validity left, checked
/// again after the read, and only over a row below A's attempt. (What a write already in
/// flight can still do on a real cluster is in the README.)
#[tokio::test(start_paused = true)]
async fn late_finish_never_overwrites_next_holders_completion() {
    let mem = Arc::new(MemoryQueueStore::new());
    let config = QueueConfig {
        timing: cql_lease::Timing::default(),
        claim_mode: ClaimMode::Bakery,
        ..queue_config()
    };
    let q = WorkQueue::new(Arc::clone(&mem) as _, "late-finish", config).expect("queue");
    let id = q.enqueue("precious payload").await.expect("enqueue");
    let key = ItemKey {
        partition: "late-finish".into(),
        id,
    };
    let t0 = tokio::time::Instant::now();
    let a = q.claim("A").await.expect("claim").expect("a job for A");
    // A's heartbeats cannot reach the store; A finishes just inside its deadline.
    mem.cells()
        .inject(Some(CellOp::Write), Fault::Unavailable, Times::Always);
    tokio::time::sleep_until(t0 + Duration::from_millis(13_300)).await;
    assert!(a.is_held(), "A must still hold its job when it fails it");
    // A's finish reads the row slowly (within one request timeout of 4.5 s).
    mem.plain_items().inject(
        Some(PlainOp::Read),
        Fault::Latency(Duration::from_millis(4_400)),
        Times::Next(1),
    );
    let a_fail = tokio::spawn(async move { a.fail("A's late failure").await });
    tokio::time::sleep_until(t0 + Duration::from_millis(15_100)).await;
    mem.cells().clear_faults();
    // A's number has expired: B claims and completes.
    let b = loop {
        if let Some(job) = q.claim("B").await.expect("claim") {
            break job;
        }
        assert!(
            tokio::time::Instant::now() < t0 + Duration::from_millis(17_500),
            "B never got the item"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        b.token() > cql_lease::FencingToken::new(1),
        "B's token {:?}",
        b.token()
    );
    b.complete().await.expect("B completes");
    let a_result = a_fail.await.expect("join");
    let item = q.store().read(&key).await.expect("read").expect("row");
    assert_eq!(
        item.state,
        JobState::Done,
        "B completed the item, then A's late finish overwrote it: \
         A got {a_result:?}; row state {:?}, payload {:?}, last_error {:?}",
        item.state,
        String::from_utf8_lossy(&item.payload),
        item.last_error
    );
}

/// A candidate whose number row holds a live number (here a finished claim's
/// leftover whose withdrawal failed) is skipped by the claimer's look without a draw (no
/// cell written), as the README says; it is claimable once that number's TTL runs out.
#[tokio::test(start_paused = true)]
async fn item_with_a_leftover_number_is_skipped_without_drawing() {
    let mem = Arc::new(MemoryQueueStore::new());
    let q = bakery_queue(&mem, "d", 3);
    q.enqueue("work").await.expect("enqueue");
    let job = q.claim("A").await.expect("claim").expect("a job for A");
    // A's number cannot be deleted: its withdrawal fails, the cell lives until its TTL.
    mem.cells()
        .inject(Some(CellOp::Delete), Fault::Unavailable, Times::Always);
    let state = job.fail("try again").await.expect("fail");
    assert_eq!(state, JobState::Retryable);
    mem.cells().clear_faults();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let writes = mem.cells().calls(CellOp::Write);
    let b = q.claim("B").await.expect("claim B");
    let drawn = mem.cells().calls(CellOp::Write) - writes;
    assert!(
        b.is_some() || drawn == 0,
        "the item with a live (leftover) number was not skipped: B drew on it ({drawn} cell \
         writes) and got nothing"
    );
}
