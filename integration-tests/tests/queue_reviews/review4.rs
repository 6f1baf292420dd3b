//! Review 4 of the work queue (placement of index entries, slot sharing): each test was a
//! finding that failed on the code it was written against, for the reason in its doc
//! comment, and now guards the fix: the fleet clock and copies that never replace the
//! original (`workqueue/src/placement.rs`), the row sealed before index upkeep deletes an
//! item's last entry (`QueueStore::seal`), and an enqueue window that covers every send of
//! an enqueue (the orphan scenario with a slow LWT now passes by the window alone).

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

/// SAFETY: an item is lost with correct clocks, no fault and no crash.
///
/// `keep_ahead_of_cursor` moves an immediate entry whose position is more than
/// `2 x cursor_lag + cursor_refresh` above the stored cursor *back* to `cursor + lag`. That
/// is meant for enqueuers whose clock is ahead, but the stored cursor is also that far back
/// whenever nobody rescanned for a few seconds (all workers busy, or none running) or a
/// backlog holds it at its oldest entry. Interleaving (skew 0, lag 1 s, refresh 1 s):
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
/// The item's row is available and its only entry lies below the cursor: no scan ever
/// reads it again. The same move runs after a requeue and after a hand-back
/// (`after_finish`), with the same race.
#[tokio::test(start_paused = true)]
async fn finding_entry_moved_back_to_stale_cursor_is_passed_and_item_lost() {
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

/// DOCS/ORDER: with `choice = 1` items come out in position order, and the README says
/// immediate items are placed at their enqueue time and that only items of an enqueuer whose
/// clock is ahead by more than `2 x cursor_lag + cursor_refresh` are moved back to the cursor
/// (and may run before older items). But the move back compares with the *stored* cursor,
/// not with the clock: after a few seconds without a rescan (or under a backlog older than
/// that, which holds the cursor at its oldest entry), every new immediate item of a correct
/// clock is moved in front of items enqueued before it.
#[tokio::test(start_paused = true)]
async fn finding_correct_clock_item_jumps_ahead_of_older_items() {
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

/// SAFETY (cancel safety of `enqueue_item`): an enqueue whose row LWT applies later than
/// `enqueue_window` after its entry's position, dropped (a caller's timeout) or crashing while
/// it places the entry again, leaves an existing, available item with no index entry.
///
/// The docs say: "Dropped midway, the item may or may not exist; if it exists it is findable"
/// and the README: "a crash at any later step leaves the item findable". Interleaving (LWT
/// mode, resolve 2 s, lag 1 s, so `enqueue_window` = 3 s):
/// 1. E places its entry at t0 (in time) and sends the row's `IF NOT EXISTS`, which is slow
///    (a coordinator queue; it has not reached Paxos yet);
/// 2. at its next rescan after t0 + 3 s a scanner finds the entry older than
///    `enqueue_window` with no row; its SERIAL read finds none (no proposal was accepted
///    yet), so it deletes the entry;
/// 3. at t0 + 4.8 s the LWT applies: E sees the entry is old and places it again
///    (`place_in_time`), but is dropped before that write lands.
///
/// Nothing else holds an entry for the item. (A sweep that fences the row before deleting
/// the entry, e.g. its own `IF NOT EXISTS` done marker, would make the late LWT fail.)
#[tokio::test(start_paused = true)]
async fn finding_orphan_sweep_then_late_lwt_then_drop_loses_item() {
    use cql_lease::memory::{Fault, Times};
    use cql_workqueue::NewItem;
    use cql_workqueue::memory::QueueOp;

    let b = MemoryBackend::new();
    let base = queue_config();
    let config = QueueConfig {
        claim: cql_lease::LeaseConfig {
            // The slow LWT is not cut by the request timeout (with the default one, the
            // last resend before `resolve_timeout` can apply as late).
            request_timeout: Some(Duration::from_secs(5)),
            ..base.claim
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

/// SAFETY (unique-key revival): a revival whose LWT outcome is unknown, committed after a
/// scanner removed its run entry, leaves a live job that no scan finds; the next enqueue of
/// the key is told `Duplicate { state: Available }` and removes its own entry too.
///
/// `due` leaves a done row's run entry alone for `enqueue_window` (a revival may be on its
/// way), then removes it on a plain read that still shows `done`. Unlike `drop_orphan` (no
/// row) and the discarded-row rule, there is no SERIAL read first, so a revival proposal
/// accepted but not yet committed is not completed before the entry goes. Interleaving
/// (resolve 2 s, lag 1 s, `done_retention` 1 s):
/// 1. the key's first job completes; its done marker expires;
/// 2. E enqueues the key again: places its run entry, sends the revive LWT, whose answer is
///    lost (accepted, not committed); its resends fail (replicas unreachable), so after
///    `resolve_timeout` it returns `OutcomeUnknown`, leaving the entry;
/// 3. a scanner meets the entry older than `enqueue_window` on a row that reads `done`, and
///    removes it;
/// 4. the revival is committed (here at +4.5 s): the row is available, with no entry.
#[tokio::test(start_paused = true)]
async fn finding_revival_committed_after_done_entry_swept_is_lost() {
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
/// plain row write is cut, and applied after the scanner's orphan sweep, leaves an item with
/// no entry; no crash needed.
///
/// `drop_orphan` settles "no row" with a SERIAL read in the LWT mode; in the bakery mode that
/// read is a plain read, which cannot stop a write already on its way. Interleaving (resolve
/// 2 s, lag 1 s): E places its entry at t0 and writes the row; the write's answer is lost
/// (the write is still with a coordinator, or only a hint holds it) and E's resends fail, so
/// E returns `OutcomeUnknown` at t0 + 2 s ("the item may exist"; the docs promise it is
/// findable if it does); at its next rescan after t0 + 3 s a scanner reads no row and removes
/// the entry; at t0 + 4.5 s the first write lands.
#[tokio::test(start_paused = true)]
async fn finding_bakery_enqueue_row_landing_after_orphan_sweep_is_lost() {
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
        (JobState::Done, cql_workqueue::SWEPT)
    );
}

/// SAFETY (LWT mode, no crash): the sweep of
/// `finding_orphan_sweep_then_late_lwt_then_drop_loses_item`, with an enqueue LWT that a
/// coordinator applies after its answer was lost. The enqueuer's resends fail until
/// `resolve_timeout`, so it returns `OutcomeUnknown` ("the item may exist"; findable if it
/// does, say its docs) and never re-places its entry; a scanner's SERIAL read after
/// `enqueue_window` (3 s) finds no row (the proposal has not been made yet) and removes the
/// entry; the LWT applies at 4.5 s. With the default timing a send the client itself still
/// waits for can apply that late: the last send before `resolve_timeout` (10 s) may take the
/// request timeout (validity / 3 = 4.5 s), past `enqueue_window` = 10 s + `cursor_lag` (2 s).
#[tokio::test(start_paused = true)]
async fn finding_enqueue_lwt_applied_after_orphan_sweep_is_lost() {
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
        (JobState::Done, cql_workqueue::SWEPT)
    );
}
