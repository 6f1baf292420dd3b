//! Fair-lock waiters of one process on one store share their reads of the queue, and the
//! next in line behind a holder of the same process is told of its release instead of
//! polling for it.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_lease::cells::CellStore;
use cql_lease::cells::faulty::FaultyCellStore;
use cql_lease::cells::memory::MemoryCellStore;
use cql_lease::lock::{FairLock, Lock, LockOptions};
use tokio::time::Instant;

fn options(poll_interval: Duration) -> LockOptions {
    LockOptions {
        poll_interval,
        ..LockOptions::default()
    }
}

/// The store calls made while `waiters` fair-lock waiters (each its own lock object, all
/// on one store handle) wait 20 s behind a holder of the same process, on tokio's paused
/// clock.
async fn calls_while_waiting(waiters: usize) -> u64 {
    let counted = Arc::new(FaultyCellStore::new(Arc::new(MemoryCellStore::new())));
    let store: Arc<dyn CellStore> = counted.clone();
    let lock = |_| FairLock::new(Arc::clone(&store), options(Duration::from_millis(20))).unwrap();
    let held = lock(0).lock("l", None).await.unwrap();
    let before = counted.round_trips();
    let tasks: Vec<_> = (0..waiters)
        .map(|i| {
            let lock = lock(i + 1);
            tokio::spawn(async move { lock.lock("l", Some(Duration::from_secs(20))).await })
        })
        .collect();
    for task in tasks {
        assert!(task.await.unwrap().is_err(), "the lock stayed held");
    }
    // The holder's own renewals are the same whatever the crowd.
    let calls = counted.round_trips() - before;
    held.release().await.unwrap();
    calls
}

/// Sixteen waiters in one process cost the store no more than four times what two cost:
/// beyond the first few in line, they take the reads of the queue others made.
#[tokio::test(start_paused = true)]
async fn a_crowd_in_one_process_reads_the_queue_together() {
    let two = calls_while_waiting(2).await;
    let crowd = calls_while_waiting(16).await;
    assert!(two > 0);
    assert!(
        crowd <= 4 * two,
        "16 waiters made {crowd} store calls, two waiters {two}"
    );
}

/// The next in line behind a holder of the same process takes the lock as soon as the
/// holder's release is confirmed, even after a long hold, when polling would look only
/// every `poll_interval`.
#[tokio::test(start_paused = true)]
async fn a_release_in_the_process_hands_the_lock_on_at_once() {
    let store: Arc<dyn CellStore> = Arc::new(MemoryCellStore::new());
    let poll = Duration::from_secs(2);
    let holder = FairLock::new(Arc::clone(&store), options(poll)).unwrap();
    let waiter = FairLock::new(Arc::clone(&store), options(poll)).unwrap();
    let held = holder.lock("l", None).await.unwrap();
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock("l", None).await.unwrap();
        (Instant::now(), guard)
    });
    // A long hold: a polling waiter would look only every `poll_interval` by now.
    tokio::time::sleep(Duration::from_secs(30)).await;
    held.release().await.unwrap();
    let released = Instant::now();
    let (granted, guard) = waiting.await.unwrap();
    assert!(
        granted - released < Duration::from_millis(100),
        "granted {:?} after the release (poll interval {poll:?})",
        granted - released
    );
    guard.release().await.unwrap();
}

/// A line of waiters in one process moves up as the holders ahead of it leave: each waiter
/// further back looks again once enough of them have gone, instead of at its pace's timer,
/// so a line of short holds is granted one after the other at once, with a few store calls
/// per hand-over.
#[tokio::test(start_paused = true)]
async fn a_line_in_one_process_moves_up_as_the_holders_ahead_leave() {
    let counted = Arc::new(FaultyCellStore::new(Arc::new(MemoryCellStore::new())));
    let store: Arc<dyn CellStore> = counted.clone();
    let poll = Duration::from_secs(2);
    let lock = || FairLock::new(Arc::clone(&store), options(poll)).unwrap();
    let held = lock().lock("l", None).await.unwrap();
    let line = 20;
    let waiters: Vec<_> = (0..line)
        .map(|_| {
            let lock = lock();
            tokio::spawn(async move {
                let guard = lock.lock("l", None).await.unwrap();
                let granted = Instant::now();
                guard.release().await.unwrap();
                granted
            })
        })
        .collect();
    // Everyone queued and settled into its pace.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = counted.round_trips();
    held.release().await.unwrap();
    let released = Instant::now();
    let mut last = released;
    for waiter in waiters {
        last = last.max(waiter.await.unwrap());
    }
    let calls = counted.round_trips() - before;
    // The shortest pause of a pace is poll / 200: a single timer wait on the way shows.
    assert!(
        last - released < poll / 200,
        "the last of {line} waiters was granted {:?} after the first release (poll interval {poll:?})",
        last - released
    );
    assert!(
        calls <= 10 * line as u64,
        "{calls} store calls for {line} hand-overs"
    );
}
