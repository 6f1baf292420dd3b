//! Where index entries are placed, and the sweep of entries whose row write is late: an
//! item that exists keeps an entry a scan finds. Entries are placed by the fleet clock, and
//! a copy never replaces its original (`workqueue/src/placement.rs`); index upkeep seals a
//! row before it deletes an item's last entry (`QueueStore::seal`); and the enqueue window
//! covers every send of an enqueue.

use std::sync::Arc;
use std::time::Duration;

use cql_workqueue::{ItemId, JobState, QueueConfig, WallClock, WorkQueue};
use integration_tests::backend::{Backend, MemoryBackend};
use integration_tests::conformance::queue::{queue_config, queue_store, queue_with};

use super::plain_items::LatePlainWrite;
use super::{
    available_is_findable, bakery_backend, claim_within, enqueue_window, key_of, micros, row_of,
    scan_for,
};
use integration_tests::tweaked::Tweaked;

/// SAFETY: with correct clocks, no fault and no crash, an item enqueued while a rescan from a
/// stale cursor is under way is found: an entry placed near a stale cursor is a copy beside
/// its original, never a move of it.
///
/// The stored cursor is far back whenever nobody rescanned for a few seconds (all workers
/// busy, or none running) or a backlog holds it at its oldest entry. Were an immediate entry
/// whose position is more than `2 x cursor_lag + cursor_refresh` above the stored cursor
/// moved *back* to `cursor + lag`, this interleaving (skew 0, lag 1 s, refresh 1 s) would
/// lose the item:
/// 1. a scan at t0 leaves the cursor at C = t0 - lag; nobody scans for 20 s;
/// 2. process S starts a rescan from C: it reads the bucket of C + lag (empty), then the
///    later buckets one request each;
/// 3. meanwhile the enqueuer E places its entry at its clock (t0 + 20 s, in time), writes the
///    row, reads the cursor (still C), finds its entry "ahead", places a copy at C + lag (in
///    the bucket S already read) and removes the original (in a bucket S has not read yet);
///    its second cursor read still shows C, so it returns `Ok`;
/// 4. S reads the later buckets (empty now), finds nothing live and moves the cursor to its
///    clock minus lag, past C + lag.
///
/// The item's row would be available with its only entry below the cursor, where no scan
/// reads again. Requeues and hand-backs (`after_finish`) place their entries the same way.
#[tokio::test(start_paused = true)]
async fn item_enqueued_during_a_rescan_from_a_stale_cursor_is_found() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "moved-back";
    let e = queue_with(&b, name, config);
    // t0: a scan finds nothing and writes the cursor (t0 - lag).
    assert!(e.claim("warm").await.expect("claim").is_none());
    let cursor = queue_store(&b).read_cursor(name).await.expect("cursor");
    assert!(cursor > 0, "the cursor was written");
    // Nobody scans for a while (workers busy, or none running).
    tokio::time::sleep(Duration::from_secs(20)).await;
    let width = micros(config.bucket_width);
    let moved_to = cursor + micros(config.cursor_lag());
    // Another process whose reads of the buckets after the one E moves into take 100 ms each.
    let slow = Tweaked {
        slow_above: Some(moved_to / width),
        delay: Duration::from_millis(100),
        ..Tweaked::over(&b)
    };
    let s = WorkQueue::new(Arc::new(slow), name, config).expect("queue");
    let enqueue = async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        e.enqueue("lost?").await
    };
    let (scanned, enqueued) = tokio::join!(s.claim("s"), enqueue);
    let id = enqueued.expect("the enqueue returned Ok");
    if let Some(job) = scanned.expect("scan") {
        // The scan found it after all: not lost.
        assert_eq!(job.id(), &id);
        return;
    }
    let key = key_of(name, &id);
    let row = row_of(&b, &key).await;
    assert_eq!(row.state, JobState::Available);
    let after = queue_store(&b).read_cursor(name).await.expect("cursor");
    // Any process, old or new, looks for it for 6 s.
    let fresh = e.with_clock(WallClock::system());
    let found = claim_within(&fresh, "w", 60).await.map(|j| j.id().clone());
    assert_eq!(
        found,
        Some(id),
        "an enqueued, available item is never found: its entry was moved back to {moved_to} \
         and the cursor went on to {after}"
    );
}

/// ORDER: with `choice = 1` items come out in position order, and an immediate item of a
/// correct clock is placed at its enqueue time, after the items enqueued before it, even
/// after seconds without a rescan (or under a backlog that holds the stored cursor at its
/// oldest entry). Only items of an enqueuer whose clock is ahead by more than
/// `2 x cursor_lag + cursor_refresh` are placed nearer the cursor (and may run before older
/// items): placement compares with the fleet clock, not with the stored cursor.
#[tokio::test(start_paused = true)]
async fn correct_clock_item_comes_out_after_older_items() {
    let b = MemoryBackend::new();
    let config = QueueConfig {
        choice: 1,
        ..queue_config()
    };
    let q = queue_with(&b, "order", config);
    assert!(q.claim("warm").await.expect("claim").is_none());
    let first = q.enqueue("first").await.expect("enqueue");
    // No rescan for 10 s (workers busy with long jobs, say).
    tokio::time::sleep(Duration::from_secs(10)).await;
    let second = q.enqueue("second").await.expect("enqueue");
    let job = claim_within(&q, "w", 10).await.expect("a job");
    assert_eq!(
        job.id(),
        &first,
        "the item enqueued 10 s later ({second}) came out first"
    );
}

/// SAFETY (cancel safety of `enqueue_item`): an enqueue whose row LWT is slow, dropped (a
/// caller's timeout) or crashing while it places its entry again, leaves its item findable
/// if it exists, as the docs say ("Dropped midway, the item may or may not exist; if it
/// exists it is findable"): the enqueue window covers every send of an enqueue, so no sweep
/// removes the entry before the LWT has applied or been given up.
///
/// The interleaving that would lose the item with a window shorter than a send (LWT mode,
/// resolve 2 s, lag 1 s, so a window of 3 s):
/// 1. E places its entry at t0 (in time) and sends the row's `IF NOT EXISTS`, which is slow
///    (a coordinator queue; it has not reached Paxos yet);
/// 2. at its next rescan after t0 + 3 s a scanner finds the entry older than
///    `enqueue_window` with no row; its SERIAL read finds none (no proposal was accepted
///    yet), so it deletes the entry;
/// 3. at t0 + 4.8 s the LWT applies: E sees the entry is old and places it again
///    (`place_in_time`), but is dropped before that write lands.
///
/// Nothing else would hold an entry for the item. (The sweep also fences the row before
/// deleting the entry, with its own `IF NOT EXISTS` done marker, so a late LWT fails.)
#[tokio::test(start_paused = true)]
async fn slow_enqueue_lwt_dropped_while_placing_its_entry_leaves_the_item_findable() {
    use cql_lease::memory::{Fault, Times};
    use cql_workqueue::NewItem;
    use cql_workqueue::memory::QueueOp;

    let b = MemoryBackend::new();
    let base = queue_config();
    let config = QueueConfig {
        timing: cql_lease::Timing {
            // The slow LWT is not cut by the request timeout (with the default one, the
            // last resend before `resolve_timeout` can apply as late).
            request_timeout: Some(Duration::from_secs(5)),
            ..base.timing
        },
        ..base
    };
    let name = "late-lwt";
    let e = queue_with(&b, name, config);
    let scanner = e.with_clock(WallClock::system());
    let id = ItemId::unique("late-lwt");
    let key = key_of(name, &id);
    let store = queue_store(&b);
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::Latency(Duration::from_millis(4800)),
        Times::Next(1),
    );
    let enqueue = e.enqueue_item(NewItem::text("x").unique("late-lwt"));
    let other = async {
        let start = tokio::time::Instant::now();
        while start.elapsed() < Duration::from_millis(4500) {
            assert!(scanner.claim("s").await.expect("claim").is_none());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // From now on index writes take 500 ms: E's fresh entry is still on its way when
        // E is dropped.
        b.inject_queue(
            Some(QueueOp::Index),
            Fault::Latency(Duration::from_millis(500)),
            Times::Always,
        );
        loop {
            if store.read(&key).await.expect("read").is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    futures::pin_mut!(enqueue, other);
    let finished = futures::future::select(enqueue, other).await;
    b.clear_faults();
    if let futures::future::Either::Left((outcome, _)) = finished {
        panic!("the enqueue finished before it could be dropped: {outcome:?}");
    }
    let row = store
        .read(&key)
        .await
        .expect("read")
        .expect("the item exists");
    assert_eq!(row.state, JobState::Available);
    let found = claim_within(&scanner, "w", 60)
        .await
        .map(|j| j.id().clone());
    assert_eq!(
        found,
        Some(id),
        "the item exists but has no index entry: the scanner swept its entry as an orphan \
         before the slow LWT applied, and the enqueuer was dropped while re-placing it"
    );
}

/// SAFETY (unique-key revival): a revival whose LWT outcome is unknown and which would be
/// committed after a scanner removed its run entry is refused: the scanner seals the done
/// row (its attempt number raised) before it removes the entry, so no live job is left
/// without an entry, and the key's next enqueue starts its job.
///
/// `due` leaves a done row's run entry alone for `enqueue_window` (a revival may be on its
/// way), then removes it once the row still reads `done`. A plain read cannot complete a
/// revival proposal accepted but not yet committed, hence the seal. Interleaving (resolve
/// 2 s, lag 1 s, `done_retention` 1 s):
/// 1. the key's first job completes; its done marker expires;
/// 2. E enqueues the key again: places its run entry, sends the revive LWT, whose answer is
///    lost (accepted, not committed); its resends fail (replicas unreachable), so after
///    `resolve_timeout` it returns `OutcomeUnknown`, leaving the entry;
/// 3. a scanner meets the entry older than `enqueue_window` on a row that reads `done`, and
///    removes it;
/// 4. the revival's round reaches its replicas (here at +4.5 s) and is refused by the seal.
#[tokio::test(start_paused = true)]
async fn late_revival_after_its_done_entry_was_swept_is_refused() {
    use cql_workqueue::{Enqueued, NewItem, QueueError};

    let b = MemoryBackend::new();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        ..queue_config()
    };
    let name = "late-revival";
    let plain = queue_with(&b, name, config);
    let first = plain
        .enqueue_item(NewItem::text("one").unique("k"))
        .await
        .expect("enqueue");
    let id = first.id().clone();
    let job = claim_within(&plain, "w", 10).await.expect("the first job");
    job.complete().await.expect("complete");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // E: its first revive is committed after the enqueue window (a Paxos round still
    // retrying), its resends do not get through.
    let late_by = enqueue_window(&config) + Duration::from_secs(2);
    let late = Tweaked {
        late_revive: Some(late_by),
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(late), name, config).expect("queue");
    let scanner = plain.with_clock(WallClock::system());
    let enqueue = e.enqueue_item(NewItem::text("two").unique("k"));
    let scan = scan_for(&scanner, late_by + Duration::from_secs(1));
    let (outcome, ()) = tokio::join!(enqueue, scan);
    assert!(
        matches!(outcome, Err(QueueError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
    let key = key_of(name, &id);
    let row = available_is_findable(&scanner, &key).await.expect("row");
    // The scanner sealed the row (its attempt number raised) before removing the entry:
    // the late revival was refused.
    assert_eq!((row.state, row.attempt), (JobState::Done, 2), "{row:?}");
    // The key's next enqueue starts its job, and a scan finds it.
    let again = plain
        .enqueue_item(NewItem::text("three").unique("k"))
        .await
        .expect("enqueue");
    assert!(matches!(again, Enqueued::New(_)), "{again:?}");
    let job = claim_within(&scanner, "w", 60).await.expect("the next job");
    assert_eq!((job.id(), job.payload()), (&id, "three"));
}

/// SAFETY (bakery mode, "nothing lost (every item keeps an index entry)"): an enqueue whose
/// plain row write is cut, and lands after the scanner's orphan sweep, leaves no item
/// without an entry: the sweep's fence, written with a later timestamp, wins over the late
/// row.
///
/// `drop_orphan` settles "no row" with a SERIAL read in the LWT mode; in the bakery mode that
/// read is a plain read, which cannot stop a write already on its way. Interleaving (resolve
/// 2 s, lag 1 s): E places its entry at t0 and writes the row; the write's answer is lost
/// (the write is still with a coordinator, or only a hint holds it) and E's resends fail, so
/// E returns `OutcomeUnknown` at t0 + 2 s ("the item may exist"; the docs promise it is
/// findable if it does); at its next rescan after t0 + 3 s a scanner reads no row, fences
/// the row and removes the entry; at t0 + 4.5 s the first write lands, and loses.
#[tokio::test(start_paused = true)]
async fn bakery_enqueue_row_landing_after_the_orphan_sweep_loses_to_its_fence() {
    use cql_workqueue::QueueError;

    let (b, config) = bakery_backend();
    let name = "late-row";
    let late_by = enqueue_window(&config) + Duration::from_secs(2);
    let late = Tweaked {
        wrap_items: Some(LatePlainWrite::wrapper(late_by)),
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(late), name, config).expect("queue");
    let scanner = queue_with(&b, name, config);
    let scan = scan_for(&scanner, late_by + Duration::from_secs(1));
    let (outcome, ()) = tokio::join!(e.enqueue("x"), scan);
    let Err(QueueError::OutcomeUnknown { id, .. }) = outcome else {
        panic!("expected an unknown outcome: {outcome:?}");
    };
    let key = key_of(name, &id);
    let row = available_is_findable(&scanner, &key).await.expect("row");
    // The sweep's fence (a later timestamp) won over the late row.
    assert_eq!(
        (row.state, row.origin.as_str()),
        (JobState::Done, cql_workqueue::store::SWEPT)
    );
}

/// SAFETY (LWT mode, no crash): an enqueue LWT that a coordinator would apply after the
/// orphan sweep of its entry (its answer lost) is refused by the sweep's `IF NOT EXISTS`
/// fence, so no item is left without an entry. The enqueuer's resends fail until
/// `resolve_timeout`, so it returns `OutcomeUnknown` ("the item may exist"; findable if it
/// does, say its docs) and never re-places its entry; a scanner's SERIAL read after
/// `enqueue_window` (3 s) finds no row (the proposal has not been made yet), fences the row
/// and removes the entry; the LWT reaches its replicas at 4.5 s. With the default timing a
/// send the client itself still waits for can arrive that late: the last send before
/// `resolve_timeout` (10 s) may take the request timeout (validity / 3 = 4.5 s), past an
/// `enqueue_window` of 10 s + `cursor_lag` (2 s).
#[tokio::test(start_paused = true)]
async fn enqueue_lwt_applied_after_the_orphan_sweep_is_refused_by_its_fence() {
    use cql_workqueue::QueueError;

    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "late-enqueue";
    let late_by = enqueue_window(&config) + Duration::from_secs(2);
    let late = Tweaked {
        late_enqueue: Some(late_by),
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(late), name, config).expect("queue");
    let scanner = queue_with(&b, name, config);
    let scan = scan_for(&scanner, late_by + Duration::from_secs(1));
    let (outcome, ()) = tokio::join!(e.enqueue("x"), scan);
    let Err(QueueError::OutcomeUnknown { id, .. }) = outcome else {
        panic!("expected an unknown outcome: {outcome:?}");
    };
    let key = key_of(name, &id);
    let row = available_is_findable(&scanner, &key).await.expect("row");
    // The sweep's `IF NOT EXISTS` fence came first: the late LWT was refused.
    assert_eq!(
        (row.state, row.origin.as_str()),
        (JobState::Done, cql_workqueue::store::SWEPT)
    );
}
