//! Review 5 of the work queue: the fixes of review 4 (the row sealed before index upkeep
//! deletes an item's last entry, `QueueStore::seal`; the fleet clock and `copy_back`). Each
//! test was a finding that failed on the code it was written against, for the reason in its
//! doc comment, and now guards the fix: a seal raises the row's attempt number (so a second
//! seal fences too, the origin stays for resend recognition, and dead letters are sealed
//! against a late requeue), an enqueue checks its window again after every pause, and only
//! a unique key's done row keeps a recent run entry. Tests whose premise the fix removed
//! (an enqueue told Ok after its window) accept the fixed outcome and check the rest.
//!
//! Here: seals and index upkeep; an enqueuer paused past its window in `review5_paused`.

use std::sync::Arc;
use std::time::Duration;

use cql_workqueue::{ItemId, JobState, QueueConfig, WorkQueue};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_store, queue_with};

use super::{
    claim_within, config_with_default_resolve, enqueue_window, key_of, row_of, scan_for,
    scan_then_idle, unknown_while_scanning,
};
use integration_tests::tweaked::Tweaked;

/// SAFETY (LWT mode, unique keys): sealing a row that is already sealed changes nothing, so
/// it fences off nothing: a revival of a sealed row, conditioned on `origin = SWEPT`, still
/// applies after the sweep of its entry, and leaves a live job that no scan finds.
///
/// `QueueStore::seal(key, Some((attempt, origin)))` sets `origin = SWEPT` "only if it still
/// has that attempt and origin". When the row's origin is already `SWEPT` (a unique key whose
/// earlier entry was swept: an orphan sealed `IF NOT EXISTS`, or a done row sealed once), the
/// update `SET origin = SWEPT IF attempt = a AND origin = SWEPT` applies without changing
/// anything, and a revival `IF state = null AND attempt = a AND origin = SWEPT` sent before it
/// still matches afterwards. Interleaving (resolve 2 s, lag 1 s):
/// 1. an enqueue of key `k` is given up (`OutcomeUnknown`); after `enqueue_window` a scanner
///    seals the absent row (done, attempt 0, origin `SWEPT`) and removes the entry; its late
///    LWT is refused (review 4's fix, working);
/// 2. E enqueues `k` again: places a run entry, sends the revive conditioned on
///    `(0, SWEPT)`, whose answer is lost (accepted, not committed); its resends fail, so it
///    returns `OutcomeUnknown` after `resolve_timeout`, leaving its last entry;
/// 3. a scanner meets that entry older than `enqueue_window` on a row that reads done,
///    "seals" it (`(0, SWEPT)` -> `SWEPT`: applied, a no-op) and removes the entry;
/// 4. the revival is committed: the row is available, with no entry.
///
/// Suggested fix: every seal writes a fresh origin (`SWEPT` plus a unique suffix, recognised
/// by prefix), so a revival conditioned on the row as it was before any seal can never apply.
#[tokio::test(start_paused = true)]
async fn finding_resealing_a_sealed_row_does_not_fence_a_late_revival() {
    use cql_workqueue::NewItem;

    let b = MemoryBackend::new();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        ..queue_config()
    };
    let name = "resealed";
    // Later than the sweep of the last entry the revival's resends place.
    let late_by = enqueue_window(&config) + config.claim.resolve_timeout + Duration::from_secs(3);
    let scanner = queue_with(&b, name, config);
    let id = ItemId::unique("k");
    let key = key_of(name, &id);
    // 1. The key's row sealed by an orphan sweep.
    let lost = Tweaked {
        late_enqueue: Some(late_by),
        ..Tweaked::over(&b)
    };
    let e1 = WorkQueue::new(Arc::new(lost), name, config).expect("queue");
    unknown_while_scanning(
        &e1,
        NewItem::text("one").unique("k"),
        &scanner,
        late_by + Duration::from_secs(1),
    )
    .await;
    let row = row_of(&b, &key).await;
    assert_eq!(
        (row.state, row.origin.as_str()),
        (JobState::Done, cql_workqueue::SWEPT),
        "precondition: the orphan sweep sealed the row"
    );
    // 2.-4. A revival of the sealed row, committed after its entry was swept.
    let late = Tweaked {
        late_revive: Some(late_by),
        ..Tweaked::over(&b)
    };
    let e2 = WorkQueue::new(Arc::new(late), name, config).expect("queue");
    unknown_while_scanning(
        &e2,
        NewItem::text("two").unique("k"),
        &scanner,
        late_by + Duration::from_secs(1),
    )
    .await;
    let row = row_of(&b, &key).await;
    if row.state == JobState::Available {
        let found = claim_within(&scanner, "w", 60)
            .await
            .map(|j| j.id().clone());
        assert_eq!(
            found,
            Some(id),
            "the revived item is available but has no index entry: the sweep's seal of a \
             row already sealed changed nothing, so the late revival still applied"
        );
    }
}

/// LIVENESS / stats (no fault, correct clocks): an item that got a copy (`copy_back`) and
/// ran through it leaves its original entry, and that entry is kept for the whole
/// `enqueue_window` after its position because its row reads done (`due` keeps every recent
/// run entry of a done row, unique key or not, as a possible revival, though only unique keys
/// are ever revived). Until then `stats()` counts the completed item as available (its
/// oldest available age growing), and the cursor, which stops at the first live entry, is
/// held at the original, so every rescan from the cursor walks all entries (tombstones, on
/// a real cluster) written since. The window was enlarged by review 4's fix (default about
/// 30 s), and copies are new with it. Copies are made, by design, for every immediate item
/// enqueued after the fleet was idle for `2 x cursor_lag + 2 x cursor_refresh` (README,
/// Limits), or by an enqueuer whose clock is ahead of the fleet clock by as much.
/// Interleaving: a worker scans once (fleet clock noted), then nobody scans for a few
/// seconds; E enqueues one item, which gets a copy next to the stale fleet clock and keeps
/// its original; the worker claims it through the copy and completes it; the worker keeps
/// scanning for 5 s (several rescans): the queue holds no live item, yet `stats()` counts one
/// available (whichever of the two entries the claim went through, the other is left).
///
/// Suggested fix: keep a done row's recent run entry only for unique keys (`u:`); a plain
/// item's entries go as soon as its row reads done (nothing can revive it), as before.
#[tokio::test(start_paused = true)]
async fn finding_completed_item_with_a_copy_stays_available_in_stats_and_holds_cursor() {
    let b = MemoryBackend::new();
    let config = config_with_default_resolve();
    let name = "copied";
    let worker = queue_with(&b, name, config);
    scan_then_idle(&worker, &config).await;
    let e = queue_with(&b, name, config);
    let id = e.enqueue("x").await.expect("enqueue");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    assert_eq!(job.id(), &id);
    job.complete().await.expect("complete");
    let before = worker.stats().await.expect("stats");
    scan_for(&worker, Duration::from_secs(5)).await;
    let stats = worker.stats().await.expect("stats");
    let cursor = queue_store(&b).read_cursor(name).await.expect("cursor");
    assert_eq!(
        (stats.available, stats.running, stats.scheduled),
        (0, 0, 0),
        "5 s after its only item completed, stats still count it ({stats:?}; right after \
         completion: {before:?}); the cursor is held at {cursor}, behind the completed \
         item's original entry"
    );
}

/// SAFETY (LWT mode, dead-letter requeue): review 4's reasoning, applied to enqueues and
/// revivals but not to requeues. `due` removes a requeue's run entry older than
/// `enqueue_window` (and records the item as a dead letter again) once a SERIAL read shows
/// it still discarded; the fix's own comment (`drop_orphan`) says such a read "does not stop
/// an enqueue still on its way (a coordinator retrying its Paxos round ...)". The same holds
/// for a requeue given up as of unknown outcome. Interleaving (resolve 2 s):
/// 1. an item is discarded; `requeue_dead` places its run entry and sends the requeue LWT,
///    whose answer is lost (the round is still retried by its coordinator); its resends fail
///    and its SERIAL read-backs show it discarded, so it returns `OutcomeUnknown` ("the item
///    is then findable either way", say its docs);
/// 2. after `enqueue_window` a scanner meets the run entry; its SERIAL read shows the item
///    discarded, so it records the dead letter and removes the entry;
/// 3. the requeue applies: the item is available with no run entry (and `dead_letters()`
///    deletes its record, as that of an item that is no dead letter).
///
/// Suggested fix: fence it as enqueues are: before removing the entry, take the row over
/// with an LWT the late requeue is conditioned against (e.g. bump a requeue epoch /
/// `requeued_at` condition, or seal the discarded row's origin), and condition `REQUEUE` on
/// that column too.
#[tokio::test(start_paused = true)]
async fn finding_requeue_applied_after_its_entry_was_dead_lettered_is_lost() {
    use cql_workqueue::QueueError;

    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "late-requeue";
    let worker = queue_with(&b, name, config);
    let id = worker.enqueue("x").await.expect("enqueue");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    job.discard("poison").await.expect("discard");
    let late_by = enqueue_window(&config) + Duration::from_secs(2);
    let late = Tweaked {
        late_requeue: Some(late_by),
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(late), name, config).expect("queue");
    let (outcome, ()) = tokio::join!(
        e.requeue_dead(&id),
        scan_for(&worker, late_by + Duration::from_secs(1))
    );
    assert!(
        matches!(outcome, Err(QueueError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
    let key = key_of(name, &id);
    let row = row_of(&b, &key).await;
    let dead = worker.dead_letters().await.expect("dead letters").len();
    if row.state == JobState::Discarded {
        // Fixed: the row was sealed before its entry went, so the late requeue was
        // refused; the item stays a listed dead letter.
        assert_eq!(dead, 1, "a discarded item not listed as a dead letter");
        return;
    }
    let found = claim_within(&worker, "w", 60).await.map(|j| j.id().clone());
    assert_eq!(
        found,
        Some(id),
        "the requeued item ({:?}, {dead} dead-letter records) is findable by no scan: its \
         run entry was removed on a SERIAL read before the late requeue applied",
        row.state
    );
}

/// A dead letter's requeue whose condition (the attempt number it read) is overtaken by
/// index upkeep sealing the row against an older, given-up requeue: the row still reads
/// discarded, so the requeue is tried again with the new number (not reported as "not a
/// dead letter").
#[tokio::test(start_paused = true)]
async fn requeue_overtaken_by_a_seal_is_tried_again() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "requeue-sealed";
    let worker = queue_with(&b, name, config);
    let id = worker.enqueue("poison").await.expect("enqueue");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    job.discard("poison").await.expect("discard");
    let sealing = Tweaked {
        seal_before_requeue: true,
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(sealing), name, config).expect("queue");
    assert!(
        e.requeue_dead(&id).await.expect("requeue"),
        "reported not a dead letter"
    );
    let job = claim_within(&worker, "w", 60)
        .await
        .expect("the requeued job");
    // Attempt 1 was discarded, 2 skipped by the seal: the next token is 3.
    assert_eq!((job.id(), job.attempt()), (&id, 3));
    assert!(
        worker
            .dead_letters()
            .await
            .expect("dead letters")
            .is_empty()
    );
}
