//! Interleavings where a scanner's index upkeep races a write still on its way: the item
//! stays findable.

use std::time::{Duration, UNIX_EPOCH};

use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::store::{EntryKind, IndexEntry};
use cql_workqueue::{ItemId, NewItem, WallClock};

use super::queue::{claim_soon, queue_config, queue_store, queue_with};
use crate::backend::Backend;

/// How long the racing write stays in flight. The scanner starts 100 ms into it and must
/// finish its claim before the write lands: a wide window, so that a loaded machine's slow
/// round trips keep the scanner inside it.
const IN_FLIGHT: Duration = Duration::from_secs(1);

/// [`queue_config`] whose requests may stay in flight for [`IN_FLIGHT`]: the library cuts a
/// request at its request timeout (else a third of the 1 s validity), and a cut write would
/// be sent again rather than land late.
fn in_flight_config() -> cql_workqueue::QueueConfig {
    let config = queue_config();
    cql_workqueue::QueueConfig {
        timing: cql_lease::Timing {
            request_timeout: Some(IN_FLIGHT * 2),
            ..config.timing
        },
        ..config
    }
}

/// A dead letter is requeued while another process scans: the scanner reads the requeue's
/// new run entry while the row still reads discarded (the requeue LWT is on its way). The
/// scanner must not treat that entry as a dead letter's leftover and delete it: once the
/// requeue applies, the item is available and must be claimable.
pub async fn requeue_in_flight_keeps_its_entry(b: &dyn Backend) {
    let q = queue_with(b, "requeue-race", in_flight_config());
    let id = q.enqueue("poison").await.expect("enqueue");
    let job = claim_soon(b, &q, "w").await.expect("the job");
    job.discard("bad").await.expect("discard");
    // Another process starts its scan position at the cursor now (nothing to claim), so its
    // next claim, within `cursor_refresh`, scans on from that position without moving the
    // cursor.
    let other = q.with_clock(WallClock::system());
    assert!(other.claim("scanner").await.expect("claim").is_none());
    b.sleep(Duration::from_millis(500)).await;
    // The requeue's LWT is slow (under the request timeout): its run entry is in place first.
    b.inject_queue(
        Some(QueueOp::Reschedule),
        Fault::Latency(IN_FLIGHT),
        Times::Next(1),
    );
    let scanner = async {
        b.sleep(Duration::from_millis(100)).await;
        other
            .claim("scanner")
            .await
            .expect("claim")
            .map(|job| job.id().clone())
    };
    let (requeued, early) = futures::join!(q.requeue_dead(&id), scanner);
    b.clear_faults();
    assert!(requeued.expect("requeue"), "the requeue applied");
    assert_eq!(early, None, "claimed before its requeue applied");
    let job = claim_soon(b, &q, "w").await;
    assert_eq!(
        job.map(|j| j.id().clone()),
        Some(id),
        "the requeued item lost its only index entry"
    );
}

/// An item enqueued with a `run_at` in the past (eligible at once) while its enqueue LWT is
/// slow: a scanner reads its entry before the row exists. The entry's position is its
/// `run_at`, far older than an enqueue's resolve window, so the scanner takes it for an
/// enqueue that died and deletes it; the enqueue then applies, and the cursor (held back by
/// an older entry) is far enough below the entry that the enqueuer's cursor check does not
/// re-place it.
pub async fn past_run_at_enqueue_in_flight_keeps_its_entry(b: &dyn Backend) {
    let config = in_flight_config();
    let q = queue_with(b, "past-run-at", config);
    let width = i64::try_from(config.bucket_width.as_micros()).expect("width");
    let now = cql_workqueue::clock::now_micros();
    // An entry of an enqueue that died long ago (no row): it holds the cursor back.
    let dead = IndexEntry::new(
        ItemId::unique("died"),
        now - 40_000_000,
        EntryKind::Run,
        true,
        0,
        width,
    );
    queue_store(b)
        .put_entry(q.name(), &dead, now)
        .await
        .expect("entry");
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::Latency(IN_FLIGHT),
        Times::Next(1),
    );
    let other = q.with_clock(WallClock::system());
    let scanner = async {
        b.sleep(Duration::from_millis(100)).await;
        other
            .claim("scanner")
            .await
            .expect("claim")
            .map(|job| job.id().clone())
    };
    let half_a_minute_ago =
        UNIX_EPOCH + Duration::from_micros(u64::try_from(now - 30_000_000).expect("positive"));
    let item = NewItem::text("overdue").run_at(half_a_minute_ago);
    let (enqueued, early) = futures::join!(q.enqueue_item(item), scanner);
    b.clear_faults();
    let id = enqueued.expect("enqueue").id().clone();
    assert_eq!(early, None, "claimed before its enqueue applied");
    let job = claim_soon(b, &q, "w").await;
    assert_eq!(
        job.map(|j| j.id().clone()),
        Some(id),
        "the overdue item lost its only index entry"
    );
}

/// A unique job delayed until tomorrow exists; a second enqueue of its key, immediate, places
/// its own entry (at now) before its `IF NOT EXISTS` finds the row, and removes it only after
/// reading the row back. A scanner meeting that entry in between finds the row available, and
/// must not start tomorrow's job now.
pub async fn duplicate_enqueue_entry_does_not_start_delayed_job(b: &dyn Backend) {
    let q = queue_with(b, "dup-early", in_flight_config());
    let tomorrow = std::time::SystemTime::now() + Duration::from_secs(86_400);
    let first = NewItem::text("tomorrow").unique("nightly").run_at(tomorrow);
    let id = q.enqueue_item(first).await.expect("enqueue").id().clone();
    let other = q.with_clock(WallClock::system());
    assert!(other.claim("scanner").await.expect("claim").is_none());
    b.sleep(Duration::from_millis(500)).await;
    // The duplicate's LWT is slow (under the request timeout): its entry is in place first.
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::Latency(IN_FLIGHT),
        Times::Next(1),
    );
    let scanner = async {
        b.sleep(Duration::from_millis(100)).await;
        let job = other.claim("scanner").await.expect("claim");
        job.map(|job| (job.id().clone(), job.payload().to_owned()))
    };
    let again = NewItem::text("now").unique("nightly");
    let (duplicate, early) = futures::join!(q.enqueue_item(again), scanner);
    b.clear_faults();
    assert_eq!(
        duplicate.expect("enqueue"),
        cql_workqueue::Enqueued::Duplicate {
            id,
            state: cql_workqueue::JobState::Available
        }
    );
    assert_eq!(early, None, "a job delayed until tomorrow was started now");
}

/// Dead-letter requeues and purges whose LWT applied but whose answer was lost are settled by
/// reading back (SERIAL), not reported as failures; a dead-letter record written late for an
/// item back in the queue (a scanner's record landing after the requeue deleted it) is not
/// listed, and the listing deletes it (so stats stop counting it).
pub async fn dead_letter_lost_answers_are_settled(b: &dyn Backend) {
    let q = queue_with(b, "dead-lost", queue_config());
    let requeued = q.enqueue("poison").await.expect("enqueue");
    let purged = q.enqueue("poison too").await.expect("enqueue");
    for _ in 0..2 {
        let job = claim_soon(b, &q, "w").await.expect("a job");
        job.discard("bad").await.expect("discard");
    }
    assert_eq!(q.stats().await.expect("stats").dead, 2);

    b.inject_queue(
        Some(QueueOp::Reschedule),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let outcome = q.requeue_dead(&requeued).await;
    b.clear_faults();
    assert!(
        outcome.expect("settled by reading back"),
        "the requeue applied"
    );
    assert!(!q.requeue_dead(&requeued).await.expect("requeue again"));
    // A scanner's record of the old discard lands after the requeue deleted it.
    // Timestamped after the requeue's delete, as by a process whose clock is ahead.
    let late = cql_workqueue::clock::next_micros();
    queue_store(b)
        .put_dead(q.name(), &requeued, late)
        .await
        .expect("late record");
    let listed: Vec<ItemId> = q
        .dead_letters()
        .await
        .expect("list")
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(
        listed,
        vec![purged.clone()],
        "a requeued item listed as dead"
    );
    assert_eq!(
        q.stats().await.expect("stats").dead,
        1,
        "the late record stays"
    );
    let job = claim_soon(b, &q, "w").await.expect("the requeued item");
    assert_eq!((job.id(), job.attempt()), (&requeued, 2));
    job.complete().await.expect("complete");

    b.inject_queue(
        Some(QueueOp::Reschedule),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let outcome = q.purge_dead(&purged).await;
    b.clear_faults();
    assert!(
        outcome.expect("settled by reading back"),
        "the purge applied"
    );
    assert_eq!(
        q.stats().await.expect("stats").dead,
        0,
        "the purged record is gone"
    );
    assert!(q.dead_letters().await.expect("list").is_empty());
}

/// An index entry without a row, older than any enqueue's window (an enqueue given up as of
/// unknown outcome may still have a write on its way): a scanner deletes it only after
/// sealing the row (`IF NOT EXISTS`, counted as an enqueue LWT), so such a write is refused
/// afterwards; the row left is the fence.
pub async fn orphan_entry_goes_after_its_row_is_sealed(b: &dyn Backend) {
    let config = queue_config();
    let q = queue_with(b, "orphan-serial", config);
    let width = i64::try_from(config.bucket_width.as_micros()).expect("width");
    let now = cql_workqueue::clock::now_micros();
    let orphan = IndexEntry::new(
        ItemId::unique("gave-up"),
        now - 40_000_000,
        EntryKind::Run,
        true,
        0,
        width,
    );
    queue_store(b)
        .put_entry(q.name(), &orphan, now)
        .await
        .expect("entry");
    let fences = || b.queue_counts().expect("counts").enqueue_lwts;
    let start = fences();
    assert!(q.claim("w").await.expect("claim").is_none());
    assert_eq!(
        fences() - start,
        1,
        "the orphan entry went without sealing its row"
    );
    let key = cql_workqueue::ItemKey {
        partition: q.name().to_owned(),
        id: ItemId::unique("gave-up"),
    };
    let fence = queue_store(b).read(&key).await.expect("read");
    assert_eq!(
        fence.map(|row| row.origin),
        Some(cql_workqueue::store::SWEPT.to_owned())
    );
    // Gone: another process's scan from the cursor does not meet it again.
    let other = q.with_clock(WallClock::system());
    assert!(other.claim("w").await.expect("claim").is_none());
    assert_eq!(fences() - start, 1, "the orphan entry stayed");
}

/// An enqueue whose index write is applied late (after longer than `cursor_lag`), while
/// another process's scan finds nothing and moves the cursor past the entry's position; the
/// row is then written and the enqueuer dies before it re-reads the cursor (its future is
/// dropped while it resends the row's lost answer). The item exists and must be claimable:
/// an entry that took too long to land is re-placed before the row is written.
pub async fn slow_index_write_then_crash_keeps_the_item_findable(b: &dyn Backend) {
    let config = cql_workqueue::QueueConfig {
        timing: cql_lease::Timing {
            // A long pause before the resend: the window in which the enqueuer dies.
            retry_period: Duration::from_secs(1),
            // Requests may take longer than the slow entry's 1.5 x lag (else a slow write is
            // cut and sent again, landing sooner).
            request_timeout: Some(Duration::from_secs(4)),
            // And the enqueue keeps re-placing a late entry that long (it gives up after
            // `resolve_timeout` of late writes).
            resolve_timeout: Duration::from_secs(4),
            ..queue_config().timing
        },
        ..queue_config()
    };
    let lag = config.cursor_lag();
    let q = queue_with(b, "slow-entry", config);
    let scanner = q.with_clock(WallClock::system());
    // The enqueue's first index call (its entry) is applied after 1.5 x lag (under the wire
    // driver's own 8 s timeout), its row's answer is lost after the row was written. The
    // scanner below looks at 1.125 x lag: its claim has 0.375 x lag to find nothing.
    b.inject_queue(
        Some(QueueOp::Index),
        Fault::Latency(lag * 3 / 2),
        Times::Next(1),
    );
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let id = ItemId::unique("slow-entry");
    let key = cql_workqueue::ItemKey {
        partition: q.name().to_owned(),
        id: id.clone(),
    };
    let store = queue_store(b);
    let enqueue = q.enqueue_item(NewItem::text("late").unique("slow-entry"));
    let crash = async {
        // While the entry is on its way, a scan finds nothing and moves the cursor to its
        // clock minus the lag: past the entry's position.
        b.sleep(lag + lag / 8).await;
        assert!(scanner.claim("scanner").await.expect("claim").is_none());
        // Dies as soon as the row exists.
        loop {
            if store.read(&key).await.expect("read").is_some() {
                return;
            }
            b.sleep(Duration::from_millis(20)).await;
        }
    };
    futures::pin_mut!(enqueue, crash);
    let finished = futures::future::select(enqueue, crash).await;
    b.clear_faults();
    if let futures::future::Either::Left((outcome, _)) = finished {
        panic!("the enqueue finished before it could be cut: {outcome:?}");
    }
    let job = claim_soon(b, &scanner, "w").await;
    assert_eq!(
        job.map(|j| j.id().clone()),
        Some(id),
        "an item whose entry landed late, and whose enqueuer died, cannot be found"
    );
}
