//! An undo or hand-back whose answer was lost, or which applied late: the index upkeep of a
//! claim given back (a run entry in place of its check entry) runs once the release has
//! settled as released, by answer or by read-back (`Holdable::released`), not only on one
//! call answering `Applied`. So the item is found at once; in the bakery mode, a give-back
//! whose answer was lost keeps its ticket, a documented limit shown with its bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cql_lease::StoreError;
use cql_workqueue::StoredItem;
use cql_workqueue::bakery::PlainItemStore;

use cql_workqueue::{ItemKey, JobState, NewItem, QueueConfig, QueueError, WorkQueue};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_with};
use integration_tests::tweaked::Tweaked;

use super::{bakery_backend, claim_within, key_of};

/// Hour-wide buckets: the found entry and the claim's check entry share a bucket.
fn one_bucket(config: QueueConfig) -> QueueConfig {
    QueueConfig {
        bucket_width: Duration::from_secs(3600),
        ..config
    }
}

/// An item of queue `name`, enqueued and seen by no scanner yet, and a claimer over
/// `tweaked` (quirks over `b`'s store).
pub(super) async fn item_and_claimer(
    b: &MemoryBackend,
    name: &str,
    config: QueueConfig,
    tweaked: Tweaked,
) -> (ItemKey, WorkQueue) {
    let producer = queue_with(b, name, config);
    let id = producer
        .enqueue_item(NewItem::text("x"))
        .await
        .expect("enqueue")
        .id()
        .clone();
    let claimer = WorkQueue::new(Arc::new(tweaked), name, config).expect("queue");
    (key_of(name, &id), claimer)
}

/// `claim` must fail on its check entry's lost answer (so its guard undoes the claim).
async fn claim_fails(claimer: &WorkQueue) {
    let outcome = claimer.claim("w1").await;
    assert!(
        matches!(outcome, Err(QueueError::Store { .. })),
        "the claim must fail on the lost placement answer: {:?}",
        outcome.map(|j| j.map(|j| j.id().clone()))
    );
}

/// Why an undone item was not found: its only entry is the check entry.
const ONLY_CHECK_ENTRY: &str = "its only index entry is the undone claim's check entry (due one \
     claim TTL after the claim): the entry it was found by went before the claim was delivered";

/// Once the undo has had `settle` to run, the item reads available and unclaimed, and
/// another process that starts looking then finds it well within one claim TTL (2 s here).
pub(super) async fn undone_and_found_soon(
    b: &MemoryBackend,
    name: &str,
    key: &ItemKey,
    config: QueueConfig,
    settle: Duration,
    why: &str,
) {
    tokio::time::sleep(settle).await;
    let other = queue_with(b, name, config);
    let row = other.store().read(key).await.expect("read").expect("row");
    assert_eq!(row.state, JobState::Available, "{row:?}");
    assert!(row.claim.is_none(), "the claim is undone: {row:?}");
    let found = claim_within(&other, "w2", 8).await;
    assert_eq!(
        found.as_ref().map(|j| j.id()),
        Some(&key.id),
        "the undone item is available and unclaimed, yet not found: {why}"
    );
}

/// A documented bakery limit (README: a give-back whose answer is lost keeps its ticket):
/// the undone item is found once the ticket's cells have expired, within a few claim TTLs.
async fn undone_and_found_after_the_ticket_lapses(
    b: &MemoryBackend,
    name: &str,
    key: &ItemKey,
    config: QueueConfig,
) {
    tokio::time::sleep(config.timing.lease_duration * 3).await;
    let other = queue_with(b, name, config);
    let found = claim_within(&other, "w2", 8).await;
    assert_eq!(
        found.as_ref().map(|j| j.id()),
        Some(&key.id),
        "the undone item is lost, not only delayed"
    );
}

/// LIVENESS (LWT mode): an undo (unclaim) that applies but whose answer is lost leaves the
/// item findable at once. The unclaim returns `Err(Unknown)`, and `release_target` settles
/// it by reading back (`still_held` is false: "released") without calling `release` again.
/// The entry the item was found by is removed only once a claim is delivered, so it is still
/// there: were it gone, the available item's only entry would be the undone claim's check
/// entry, and nobody would find the item for a claim TTL (15 s by default). The lost answer
/// is the same kind of fault (a coordinator timeout) that made the claim fail in the first
/// place, likely on a struggling cluster.
///
/// Interleaving: item X enqueued (run entry E, same bucket as any check entry).
/// 1. P claims X (attempt 1), places C (applies, answer lost): `claim` fails;
/// 2. P's guard sends unclaim: it applies (X available, attempt 0), its answer is lost;
/// 3. read-back: not held -> "released";
/// 4. Q scans and finds X at once, through E.
#[tokio::test(start_paused = true)]
async fn undo_whose_answer_was_lost_leaves_the_item_findable() {
    let b = MemoryBackend::new();
    let name = "undo-answer-lost";
    let config = one_bucket(queue_config());
    let tweaked = Tweaked {
        check_answers_lost_after: Some(Duration::from_millis(250)),
        unclaim_answers_lost: true,
        ..Tweaked::over(&b)
    };
    let (key, claimer) = item_and_claimer(&b, name, config, tweaked).await;
    claim_fails(&claimer).await;
    undone_and_found_soon(
        &b,
        name,
        &key,
        config,
        Duration::from_millis(50),
        ONLY_CHECK_ENTRY,
    )
    .await;
}

/// Plain item rows whose next write, once `armed`, lands and answers "unknown" (a coordinator
/// that timed out although the write reached its replicas).
struct LostWrites {
    inner: Arc<dyn PlainItemStore>,
    armed: Arc<AtomicBool>,
}

#[async_trait::async_trait]
impl PlainItemStore for LostWrites {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        self.inner.write_item(item, ts).await?;
        if self.armed.swap(false, Ordering::SeqCst) {
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        Ok(())
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// A bakery store view whose plain item row writes lose their next answer once `armed`.
fn lost_writes_over(b: &MemoryBackend, armed: &Arc<AtomicBool>, quirks: Tweaked) -> Tweaked {
    let arm = Arc::clone(armed);
    let _ = b;
    Tweaked {
        wrap_items: Some(Box::new(move |inner| {
            Arc::new(LostWrites {
                inner,
                armed: Arc::clone(&arm),
            })
        })),
        ..quirks
    }
}

/// LIVENESS (bakery mode): the previous test in the LWT-free claim mode. Its undo
/// (`unclaim`: the give-back write of the item row, attempt set to the ticket's number)
/// lands and its answer is lost; the read-back (`still_held`) reads the claim as over (a
/// ticket at or below the row's attempt is finished), so `release_target` settles
/// "released"; the entry the item was found by is still there. The ticket left standing
/// is a documented limit (see the next test), so the item is found once the ticket lapses,
/// within a few claim TTLs.
#[tokio::test(start_paused = true)]
async fn bakery_undo_whose_answer_was_lost_delays_the_item_until_its_ticket_lapses() {
    let (b, config) = bakery_backend();
    let config = one_bucket(config);
    let name = "undo-answer-lost-bakery";
    let armed = Arc::new(AtomicBool::new(false));
    let quirks = Tweaked {
        check_answers_lost_after: Some(Duration::from_millis(250)),
        ..Tweaked::over(&b)
    };
    let tweaked = lost_writes_over(&b, &armed, quirks);
    let (key, claimer) = item_and_claimer(&b, name, config, tweaked).await;
    claim_fails(&claimer).await;
    // The guard's undo is spawned, and runs once this task yields: its write is lost.
    armed.store(true, Ordering::SeqCst);
    undone_and_found_after_the_ticket_lapses(&b, name, &key, config).await;
}

/// LIVENESS (LWT mode): an undo whose answer is lost and which lands only after the
/// read-back (a Paxos round its coordinator was still retrying) leaves the item findable at
/// once. The next try finds the claim gone and answers `NotApplied`, so `release_target`
/// ends with `Lost(NotHolder)`; the restore runs whenever the undo ends with the claim not
/// ours (applied, read back as released, or not applied because it is gone), not only on
/// `Applied`, so the undone item's only entry is not the check entry, due a claim TTL later.
///
/// Interleaving: as above to step 1; then
/// 2. P's guard sends unclaim U1: "unknown" at once, not applied yet;
/// 3. read-back: still held -> try again after the retry delay;
/// 4. U1 applies (X available, attempt 0);
/// 5. U2: not applied (the claim is gone) -> Lost, the claim not ours: a run entry is put
///    back, and Q finds X.
#[tokio::test(start_paused = true)]
async fn undo_applied_late_leaves_the_item_findable() {
    let b = MemoryBackend::new();
    let name = "undo-late";
    let config = one_bucket(queue_config());
    let tweaked = Tweaked {
        check_answers_lost_after: Some(Duration::from_millis(250)),
        first_unclaim_late: Some(Duration::from_millis(5)),
        ..Tweaked::over(&b)
    };
    let (key, claimer) = item_and_claimer(&b, name, config, tweaked).await;
    claim_fails(&claimer).await;
    // The retry of the undo comes after a retry delay (100 ms here, jittered).
    undone_and_found_soon(
        &b,
        name,
        &key,
        config,
        Duration::from_millis(400),
        ONLY_CHECK_ENTRY,
    )
    .await;
}

/// LIVENESS (bakery mode, a documented limit): an undo whose give-back write lands but whose
/// answer is lost keeps its ticket until the ticket lapses, and the item is found then. The
/// bakery `unclaim` returns the give-back write's error (`?`) before `forget` and
/// `ticket.withdraw()`; `release_target` reads back, `still_held` reads the claim as over
/// (the row's attempt reached the ticket's number) and settles "released": nobody withdraws
/// the ticket. Its live cells keep every other process's draw off the item ("any live
/// ticket keeps the item from a new draw") until they expire, although the item is
/// available and its entry (here the found entry, never moved) is in place.
///
/// Interleaving (bakery, two-step placement): item X enqueued (run entry E).
/// 1. P draws ticket 1 for X and wins; its check entry's write is slow;
/// 2. P's caller drops `claim` (a timeout): the guard undoes the claim; E stays;
/// 3. the give-back row write lands, its answer is lost: `unclaim` errs, ticket kept;
/// 4. read-back: not held -> "released"; the ticket's cells stay live;
/// 5. Q finds X through E and steps aside from P's live ticket until it lapses.
///
/// Why the ticket stays (README, bakery mode): the give-back is a plain row write sent only
/// while the ticket's cells certainly stand, so that no new draw can race it; withdrawing
/// the ticket while that write may still land would let the next claimer draw the same
/// number under it. The test shows the bound: found once the ticket lapses.
#[tokio::test(start_paused = true)]
async fn bakery_undo_whose_answer_was_lost_keeps_its_ticket_until_it_lapses() {
    let (b, config) = bakery_backend();
    let name = "undo-ticket-left";
    let armed = Arc::new(AtomicBool::new(false));
    let quirks = Tweaked {
        // The claim's check entry (attempt 1) is written slowly: the claim is dropped then.
        slow_first_revival_entry: Some(Duration::from_secs(1)),
        ..Tweaked::over(&b)
    };
    let tweaked = lost_writes_over(&b, &armed, quirks);
    let (key, claimer) = item_and_claimer(&b, name, config, tweaked).await;
    let outcome = tokio::time::timeout(Duration::from_millis(300), claimer.claim("w1")).await;
    assert!(
        outcome.is_err(),
        "the claim must still wait for its check entry"
    );
    // The guard's undo is spawned, and runs once this task yields: its write is lost.
    armed.store(true, Ordering::SeqCst);
    undone_and_found_after_the_ticket_lapses(&b, name, &key, config).await;
}

/// LIVENESS (delivered claims): a dropped `Job` whose hand-back applies with its answer lost
/// leaves its item findable at once. The job hands its claim back (`ClaimTarget::release`,
/// `HandBack::Delivered`: a reschedule to available at once) and puts a run entry in its
/// check entry's place once the hand-back settles as released, by answer or by read-back:
/// keyed on the reschedule call answering `Applied`, the available item's only entry would
/// be the job's check entry, at the claim's expiry (a claim TTL after the claim, 15 s by
/// default, for a job dropped at once).
///
/// Interleaving: item X (run entry E). P claims X (attempt 1; check entry C at + TTL, E
/// removed) and drops the job at once; the hand-back reschedule applies, its answer is
/// lost; read-back: not held -> released -> a run entry in C's place; Q finds X at once.
#[tokio::test(start_paused = true)]
async fn dropped_job_whose_hand_back_answer_was_lost_leaves_the_item_findable() {
    let b = MemoryBackend::new();
    let name = "hand-back-answer-lost";
    let config = queue_config();
    let tweaked = Tweaked {
        reschedule_answers_lost: true,
        ..Tweaked::over(&b)
    };
    let (key, claimer) = item_and_claimer(&b, name, config, tweaked).await;
    let job = claim_within(&claimer, "w1", 10).await.expect("the job");
    drop(job);
    undone_and_found_soon(
        &b,
        name,
        &key,
        config,
        Duration::from_millis(400),
        "its only index entry is the dropped job's check entry (due one claim TTL after the \
         claim): the hand-back applied without putting a run entry back",
    )
    .await;
}
