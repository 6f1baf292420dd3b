//! Review findings on the LWT-free ("bakery") claim mode, each shown by a test that FAILS on
//! the code as reviewed (named `finding_*`; see the review report). They drive the embedded
//! store on paused tokio time with fault injection, so they are fast and deterministic.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_lease::cells::memory::CellOp;
use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::{MemoryQueueStore, PlainOp, QueueOp};
use cql_workqueue::{
    ClaimMode, ClaimOutcome, ItemClaim, ItemKey, JobState, QueueConfig, WorkQueue,
};
use integration_tests::conformance::queue::queue_config;

fn bakery_queue(mem: &Arc<MemoryQueueStore>, name: &str, max_attempts: i32) -> WorkQueue {
    let config = QueueConfig {
        claim_mode: ClaimMode::Bakery,
        max_attempts,
        ..queue_config()
    };
    WorkQueue::new(Arc::clone(mem) as _, name, config).expect("queue")
}

/// Lets a spawned claim run until the bakery cell store has served `writes` more writes
/// (choosing mark, then number), then arms `fault` on every later cell write: the next one
/// is the claim's high-water-mark write.
async fn arm_after_writes(mem: &MemoryQueueStore, base: u64, writes: u64, fault: Fault) {
    while mem.cells().calls(CellOp::Write) < base + writes {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    mem.cells()
        .inject(Some(CellOp::Write), fault, Times::Always);
}

/// F1. A claim whose high-water-mark write is applied but whose answer is lost is reported
/// `Lost` and withdrawn without giving its attempt back (`unclaim` is never reached; the
/// same happens when the claim future is dropped during that write: `unclaim` sees
/// `recorded == false` and skips the `requeued_at` bump). The mark landed, so the next claim
/// takes attempt 2 and the first delivery already counts two attempts: with
/// `max_attempts = 1` the item is dead-lettered without ever reaching a worker. The README
/// says an undone claim's attempt "is given back by counting attempts from one later".
#[tokio::test(start_paused = true)]
async fn finding_lost_high_water_answer_spends_an_attempt_never_delivered() {
    let mem = Arc::new(MemoryQueueStore::new());
    let q = bakery_queue(&mem, "f1", 1);
    let id = q.enqueue("run me once").await.expect("enqueue");
    let key = ItemKey {
        partition: "f1".into(),
        id: id.clone(),
    };
    // Every row read of the cells is a little slow, so the test can arm the fault between
    // the number's write and the high-water mark's.
    mem.cells().inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let base = mem.cells().calls(CellOp::Write);
    let store = Arc::clone(q.store());
    let first = tokio::spawn({
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
    arm_after_writes(&mem, base, 2, Fault::TimeoutAfterApply).await;
    let outcome = first.await.expect("join");
    mem.cells().clear_faults();
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

/// F2. The queue bounds the whole bakery claim (choosing, reads, number, waits for choosers,
/// high-water mark: many round trips) by ONE request timeout (`validity / 3` by default),
/// like a single LWT. When the cut falls while the high-water mark's write is outstanding
/// (applied, answers lost, being re-sent), the claim's read-back finds the ticket live and
/// recorded and reports `Claimed`, but `BakeryStore.held` still has it as unrecorded, so
/// `heartbeat` (and `complete`) answer `NotApplied`: the job is handed to a worker with a
/// token, then taken away at its first renewal, and its work cannot be completed; the item
/// waits for the number's TTL and the attempt is spent.
#[tokio::test(start_paused = true)]
async fn finding_claim_cut_during_high_water_write_is_delivered_but_unholdable() {
    let mem = Arc::new(MemoryQueueStore::new());
    let q = bakery_queue(&mem, "f2", 3);
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
        // Not delivered at all: the scenario did not arise (the finding is not shown).
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

/// F3. `Job::complete` dropped while it settles a lost answer (its write applied: the row
/// is `done`, payload cleared) hands the item back "as a no-op if the write applied" (job.rs)
/// — true in the LWT mode, where the hand-back is conditional on the claim. In the bakery
/// mode the claim is the process's own `held` entry, still there (only a confirmed finish
/// forgets it), so the hand-back's `reschedule` reads the done row and rewrites it
/// `available` with a later timestamp and a new index entry: the completed item comes back
/// and is delivered again with its payload gone (the done write cleared it).
#[tokio::test(start_paused = true)]
async fn finding_dropped_complete_after_lost_answer_resurrects_item_without_payload() {
    dropped_complete_after_lost_answer(ClaimMode::Bakery).await;
}

/// F3 control (passes): the same faults in the LWT mode; its read-back settles the lost answer at
/// once (the claim is gone), so the item stays done.
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
    let q = WorkQueue::new(Arc::clone(&mem) as _, "f3", config).expect("queue");
    let id = q.enqueue("precious payload").await.expect("enqueue");
    let key = ItemKey {
        partition: "f3".into(),
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

/// F4. `finish` (complete/fail/discard and the hand-backs) checks the ticket's validity
/// BEFORE its plain read of the row, then writes what it read with a fresh, later
/// timestamp. The read may take up to a request timeout (`validity / 3` = 4.5 s with the
/// default timing, against a 1.5 s margin between the validity and the TTL), so the write
/// can be SENT after the number expired and another worker reclaimed and completed the
/// item: its later timestamp wins over the new holder's finish. The README says a late
/// finish "can only mark done an item whose work was done, or reschedule/discard it while
/// the new holder works (its own finish then wins, being later)". Here A's failure,
/// written over B's completion, brings the done item back, with its payload gone.
#[tokio::test(start_paused = true)]
async fn finding_finish_read_outlives_ticket_and_overwrites_next_holders_completion() {
    let mem = Arc::new(MemoryQueueStore::new());
    let config = QueueConfig {
        claim: cql_lease::LeaseConfig::default(),
        claim_mode: ClaimMode::Bakery,
        ..queue_config()
    };
    let q = WorkQueue::new(Arc::clone(&mem) as _, "f4", config).expect("queue");
    let id = q.enqueue("precious payload").await.expect("enqueue");
    let key = ItemKey {
        partition: "f4".into(),
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
        "B completed the item, then A's finish (checked before its slow read) overwrote it: \
         A got {a_result:?}; row state {:?}, payload {:?}, last_error {:?}",
        item.state,
        String::from_utf8_lossy(&item.payload),
        item.last_error
    );
}
