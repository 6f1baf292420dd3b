//! Waiters of one process at one lease share their looks: a crowd reads the lease about as
//! often as a single waiter, and a release made in the process hands the lease on without a
//! look.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

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
