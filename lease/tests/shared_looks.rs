//! Waiters of one process at one lease share their looks: a crowd reads the lease about as
//! often as a single waiter, and a release made in the process hands the lease on without a
//! look.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_lease::cells::faulty::FaultyCellStore;
use cql_lease::cells::memory::{CellOp, MemoryCellStore};
use cql_lease::memory::{Fault, Times};
use cql_lease::{CountingStore, LeaseClient, LeaseStore, MemoryStore, Timing};

fn timing() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(10),
        renew_period: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
        ..Timing::default()
    }
}

/// Peeks made while `waiters` clients (each its own, on one store) wait 20 s for a held
/// lease, on tokio's paused clock.
async fn peeks_while_waiting(waiters: usize) -> u64 {
    let counted = Arc::new(CountingStore::new(
        Arc::new(MemoryStore::new()) as Arc<dyn LeaseStore>
    ));
    let store: Arc<dyn LeaseStore> = counted.clone();
    let holder = LeaseClient::new(store.clone(), timing()).unwrap();
    let held = holder
        .acquire("x", "holder", None, None)
        .await
        .unwrap()
        .keep_alive();
    let before = counted.peeks();
    let tasks: Vec<_> = (0..waiters)
        .map(|i| {
            let client = LeaseClient::new(store.clone(), timing()).unwrap();
            tokio::spawn(async move {
                client
                    .acquire("x", &format!("w{i}"), None, Some(Duration::from_secs(20)))
                    .await
            })
        })
        .collect();
    for task in tasks {
        assert!(task.await.unwrap().is_err(), "the lease stayed held");
    }
    let peeks = counted.peeks() - before;
    held.release().await.unwrap();
    peeks
}

/// Sixteen waiters in one process read the lease no more than twice as often as one does.
#[tokio::test(start_paused = true)]
async fn a_crowd_in_one_process_reads_about_as_often_as_one_waiter() {
    let one = peeks_while_waiting(1).await;
    let crowd = peeks_while_waiting(16).await;
    assert!(one > 0);
    assert!(
        crowd <= 2 * one,
        "16 waiters peeked {crowd} times, one waiter {one}"
    );
}

/// The first waiter in line claims as soon as a holder in the same process releases: the
/// hand-over costs no look in between.
#[tokio::test(start_paused = true)]
async fn a_release_in_the_process_hands_over_without_a_look() {
    let counted = Arc::new(CountingStore::new(
        Arc::new(MemoryStore::new()) as Arc<dyn LeaseStore>
    ));
    let store: Arc<dyn LeaseStore> = counted.clone();
    let holder = LeaseClient::new(store.clone(), timing()).unwrap();
    let waiter = LeaseClient::new(store, timing()).unwrap();
    let held = holder.acquire("x", "holder", None, None).await.unwrap();
    let waiting = tokio::spawn(async move { waiter.acquire("x", "waiter", None, None).await });
    // Long enough for the waiter to stand first and slow its looks to the retry period.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let peeks = counted.peeks();
    held.release().await.unwrap();
    let next = waiting.await.unwrap().expect("the waiter gets the lease");
    assert_eq!(
        counted.peeks(),
        peeks,
        "a look came between the release and the claim"
    );
    next.release().await.unwrap();
}

/// A waiting line whose reads hang does not hold up the first in line: a look gives the
/// line one request's time, so a release elsewhere is claimed within about that, not the
/// many retries of a resolve timeout.
#[tokio::test(start_paused = true)]
async fn a_slow_line_read_does_not_hold_up_the_first_in_line() {
    let line = Arc::new(FaultyCellStore::new(Arc::new(MemoryCellStore::new())));
    let memory = Arc::new(MemoryStore::with_waiting_line(line.clone()));
    // The holder is another process: its release wakes nobody here.
    let elsewhere: Arc<dyn LeaseStore> = Arc::new(CountingStore::new(memory.clone()));
    let here: Arc<dyn LeaseStore> = memory;
    let held = LeaseClient::new(elsewhere, timing())
        .unwrap()
        .acquire("x", "holder", None, None)
        .await
        .unwrap();
    let waiters: Vec<_> = (0..2)
        .map(|i| {
            let client = LeaseClient::new(here.clone(), timing()).unwrap();
            tokio::spawn(async move { client.acquire("x", &format!("w{i}"), None, None).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    line.inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_secs(3600)),
        Times::Always,
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let released = tokio::time::Instant::now();
    held.release().await.unwrap();
    let request = timing().effective_request_timeout();
    let (first, _, others) = futures::future::select_all(waiters).await;
    let first = first.unwrap().expect("a waiter gets the lease");
    assert!(
        released.elapsed() <= request * 2,
        "claimed {:?} after the release (a request times out after {request:?})",
        released.elapsed()
    );
    first.release().await.unwrap();
    for waiter in others {
        waiter.abort();
    }
}

/// A waiter behind a holder of its own process reads the lease at most about once per
/// retry period, however young the hold: the holder's release wakes it.
#[tokio::test(start_paused = true)]
async fn a_waiter_behind_a_holder_here_waits_for_its_release() {
    let counted = Arc::new(CountingStore::new(
        Arc::new(MemoryStore::new()) as Arc<dyn LeaseStore>
    ));
    let store: Arc<dyn LeaseStore> = counted.clone();
    let holder = LeaseClient::new(store.clone(), timing()).unwrap();
    let waiter = LeaseClient::new(store, timing()).unwrap();
    let held = holder.acquire("x", "holder", None, None).await.unwrap();
    let waiting = tokio::spawn(async move { waiter.acquire("x", "waiter", None, None).await });
    tokio::time::sleep(Duration::from_millis(1)).await;
    let before = counted.peeks();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let peeks = counted.peeks() - before;
    let retry = timing().retry_period;
    assert!(
        peeks <= 5 * 1000 / u64::try_from(retry.as_millis()).unwrap() + 2,
        "{peeks} peeks in 5 s behind a holder here (retry period {retry:?})"
    );
    held.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();
}
