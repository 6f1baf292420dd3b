//! Index upkeep seals a row before it deletes the item's last entry (`QueueStore::seal`), so
//! that a write given up on cannot land on it later. A seal raises the row's attempt number:
//! a second seal fences too, the origin stays for resend recognition, and dead letters are
//! sealed against a late requeue. Only a unique key's done row keeps a recent run entry, so
//! a completed plain item leaves no entry behind. Enqueuers paused past their window are in
//! `paused_enqueuer`.

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

/// SAFETY (LWT mode, unique keys): sealing a row that is already sealed fences it again: a
/// revival of a sealed row, sent before the sweep of its entry and landing after it, is
/// refused, or else its item keeps an entry a scan finds.
///
/// A seal raises the row's attempt number, so a revival conditioned on the row as it read
/// before any seal can never apply. Were a seal only to set `origin = SWEPT` "if it still has
/// that attempt and origin", then on a row whose origin is already `SWEPT` (a unique key
/// whose earlier entry was swept: an orphan sealed `IF NOT EXISTS`, or a done row sealed
/// once) it would change nothing, and a revival `IF state = null AND attempt = a AND origin =
/// SWEPT` sent before it would still match afterwards. Interleaving (resolve 2 s, lag 1 s):
/// 1. an enqueue of key `k` is given up (`OutcomeUnknown`); after `enqueue_window` a scanner
///    seals the absent row (done, attempt 0, origin `SWEPT`) and removes the entry; its late
///    LWT is refused;
/// 2. E enqueues `k` again: places a run entry, sends the revive conditioned on
///    `(0, SWEPT)`, whose answer is lost (accepted, not committed); its resends fail, so it
///    returns `OutcomeUnknown` after `resolve_timeout`, leaving its last entry;
/// 3. a scanner meets that entry older than `enqueue_window` on a row that reads done,
///    "seals" it (`(0, SWEPT)` -> `SWEPT`: applied, a no-op) and removes the entry;
/// 4. the revival reaches its replicas, and is refused by the raised attempt.
#[tokio::test(start_paused = true)]
async fn resealing_a_sealed_row_fences_a_late_revival() {
    use cql_workqueue::NewItem;

    let b = MemoryBackend::new();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        ..queue_config()
    };
    let name = "resealed";
    // Later than the sweep of the last entry the revival's resends place.
    let late_by = enqueue_window(&config) + config.timing.resolve_timeout + Duration::from_secs(3);
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
        (JobState::Done, cql_workqueue::store::SWEPT),
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

/// LIVENESS / stats (no fault, correct clocks): a plain item that got a copy (`copy_back`)
/// and ran through one of its two entries leaves no entry behind once it completes: a plain
/// item's entries go as soon as its row reads done (nothing can revive it; only a unique
/// key's done row keeps a recent run entry). So `stats()` stops counting it, and the cursor,
/// which stops at the first live entry, is not held behind it for the `enqueue_window`
/// (default about 30 s), walking all entries (tombstones, on a real cluster) written since.
/// Copies are made, by design, for every immediate item enqueued after the fleet was idle
/// for `2 x cursor_lag + 2 x cursor_refresh` (README, Limits), or by an enqueuer whose clock
/// is ahead of the fleet clock by as much.
///
/// Interleaving: a worker scans once (fleet clock noted), then nobody scans for a few
/// seconds; E enqueues one item, which gets a copy next to the stale fleet clock and keeps
/// its original; the worker claims it through one entry and completes it; the worker keeps
/// scanning for 5 s (several rescans): `stats()` counts nothing available.
#[tokio::test(start_paused = true)]
async fn completed_item_with_a_copy_leaves_stats_and_the_cursor() {
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

/// SAFETY (LWT mode, dead-letter requeue): a requeue given up as of unknown outcome, whose
/// round applies only after index upkeep dead-lettered its item again, either is refused
/// (the item stays a listed dead letter) or leaves its item findable. `due` removes a
/// requeue's run entry older than `enqueue_window` (and records the item as a dead letter
/// again) once a SERIAL read shows it still discarded; such a read "does not stop an
/// enqueue still on its way (a coordinator retrying its Paxos round ...)" (`drop_orphan`),
/// nor a requeue, so upkeep seals the discarded row first, and the late requeue, conditioned
/// on the attempt it read, is refused. Interleaving (resolve 2 s):
/// 1. an item is discarded; `requeue_dead` places its run entry and sends the requeue LWT,
///    whose answer is lost (the round is still retried by its coordinator); its resends fail
///    and its SERIAL read-backs show it discarded, so it returns `OutcomeUnknown` ("the item
///    is then findable either way", say its docs);
/// 2. after `enqueue_window` a scanner meets the run entry; its SERIAL read shows the item
///    discarded, so it records the dead letter and removes the entry;
/// 3. the requeue's round reaches its replicas; unfenced, it would leave the item available
///    with no run entry (and `dead_letters()` would delete its record, as that of an item
///    that is no dead letter).
#[tokio::test(start_paused = true)]
async fn requeue_landing_after_its_entry_was_dead_lettered_is_refused_or_findable() {
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
        // The row was sealed before its entry went, so the late requeue was refused; the
        // item stays a listed dead letter.
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
