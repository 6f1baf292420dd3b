//! The dispatcher's scan position after a scan from the cursor, which reads ahead of the
//! process's clock; an entry's move racing a range deletion of the stretch behind it.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use super::ledger;

use cql_lease::memory::{Fault, Times};

use crate::clock::{WallClock, now_micros};
use crate::config::micros;
use crate::item::EntryKind;
use crate::memory::{MemoryQueueStore, QueueOp};
use crate::{QueueConfig, WorkQueue};

/// A scan from the cursor reads up to `lag + cursor_refresh` ahead of the clock; when that
/// reaches into the next bucket, the scan position must not stay there: an item enqueued
/// just after, at the clock (still in the earlier bucket), is claimable at once, not only at
/// the next rescan from the cursor (`cursor_refresh` later).
#[tokio::test(start_paused = true)]
async fn an_item_placed_after_a_scan_reaching_the_next_bucket_is_found_at_once() {
    let config = QueueConfig::default();
    let store = Arc::new(MemoryQueueStore::new());
    let base = WorkQueue::new(store, "edge", config).unwrap();
    // This process's clock reads one second before a bucket boundary: less than the read
    // ahead of a scan from the cursor (`lag` alone is over a second).
    let width = config.bucket_micros();
    let now = now_micros();
    let boundary = (now / width + 1) * width;
    let queue = base.with_clock(WallClock::skewed(
        boundary - micros(Duration::from_secs(1)) - now,
    ));
    assert!(
        micros(config.cursor_lag() + config.cursor_refresh) > micros(Duration::from_secs(1)),
        "the scan from the cursor reaches the next bucket"
    );

    queue.enqueue("first").await.unwrap();
    let first = queue.claim("w").await.unwrap().expect("the first item");
    first.complete().await.unwrap();
    queue.enqueue("second").await.unwrap();
    // Well within `cursor_refresh`: this claim scans on from the position, not the cursor.
    let second = queue
        .claim("w")
        .await
        .unwrap()
        .expect("an item enqueued after the scan is claimable at once");
    assert_eq!(second.payload(), "second");
    second.complete().await.unwrap();
}

/// A move whose new entry lands late, after another process's scan saw the old entry live
/// and range-deleted the dead stretch behind it (where the new entry falls), still leaves
/// the item findable: the late entry is placed again where no deletion reaches, and the old
/// one goes only after that. Real time: positions are wall-clock readings.
#[tokio::test]
async fn a_move_landing_late_behind_a_range_deletion_leaves_the_item_findable() {
    let config = QueueConfig::default();
    let store = Arc::new(MemoryQueueStore::new());
    let base = WorkQueue::new(store.clone(), "late-move", config).unwrap();
    let id = base.enqueue("x").await.unwrap();
    let old = base.live_entries().await.unwrap().pop().expect("its entry");
    // The item is due a little later (a retry's back-off): its entry moves there, and
    // that write is held up.
    let t0 = base.now();
    let to = base.entry(&id, t0 + 300_000, EntryKind::Run, false, 0);
    let hold_up = config.cursor_lag() + Duration::from_millis(500);
    store.inject(
        Some(QueueOp::Index),
        Fault::Latency(hold_up),
        Times::Next(1),
    );
    let mover = {
        let (queue, old, to) = (base.clone(), old.clone(), to.clone());
        tokio::spawn(async move { queue.replace(&old, &to).await })
    };
    tokio::time::sleep(hold_up - Duration::from_millis(200)).await;
    // Another process, which counted a busy stretch after the old entry, scans.
    let scanner = base.with_clock(WallClock::system());
    {
        let mut ledger = scanner.dispatcher.ledger();
        ledger.start(t0 - 10_000_000, 0);
        for k in 1..=20 {
            ledger.placed(t0 + k * 20_000, ledger::MARK_EVERY);
        }
    }
    {
        let mut state = scanner.dispatcher.state.lock().await;
        scanner.refill(&mut state, true).await.unwrap();
        assert!(
            state.buffer.iter().any(|e| e.seq == old.seq),
            "the scanner saw the old entry live"
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        store.counts().range_deletes > 0,
        "the stretch was range-deleted"
    );
    mover.await.unwrap().unwrap();
    let live = base.live_entries().await.unwrap();
    assert!(
        live.iter().any(|e| e.id == id && e.seq != old.seq),
        "the item has an entry where it moved: {live:?}"
    );
    assert_eq!(store.counts().live_entries_range_deleted, 0);
}

/// An enqueuer whose clock is behind the scanners' by more than the cursor lag, writing
/// just after a scanner range-deleted the stretch its entry would fall in (the cursor held
/// back by a live entry far behind), still leaves the item findable: its entry lies below
/// the fleet clock minus the lag, so it is placed again at the fleet's clock.
#[tokio::test]
async fn an_enqueuer_clock_behind_keeps_its_entry_clear_of_range_deletions() {
    let config = QueueConfig::default();
    let store = Arc::new(MemoryQueueStore::new());
    let base = WorkQueue::new(store.clone(), "behind", config).unwrap();
    let t0 = base.now();
    // A live entry 20 s back holds the cursor (a held item's stale entry, a backlog head).
    let pin_id = base.enqueue("pin").await.unwrap();
    let pin = base.entry(&pin_id, t0 - 20_000_000, EntryKind::Run, true, 0);
    base.place(&pin).await.unwrap();
    // A scanner that counted a busy stretch since.
    let scanner = base.with_clock(WallClock::system());
    {
        let mut ledger = scanner.dispatcher.ledger();
        ledger.start(t0 - 30_000_000, 0);
        for k in 1..=40 {
            ledger.placed(t0 - 19_000_000 + k * 500_000, ledger::MARK_EVERY);
        }
    }
    {
        let mut state = scanner.dispatcher.state.lock().await;
        scanner.refill(&mut state, true).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        store.counts().range_deletes > 0,
        "the stretch was range-deleted"
    );
    let behind = base.with_clock(WallClock::skewed(-3_000_000));
    let id = behind.enqueue("late clock").await.unwrap();
    let live = base.live_entries().await.unwrap();
    assert!(
        live.iter().any(|e| e.id == id),
        "the item has no live entry: {live:?}"
    );
}
