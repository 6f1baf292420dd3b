//! Waiting for a lease: waiters read and stand in line, one proposes per hand-over.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::LeaseClient;
use tokio::time::Instant;

use super::lease_basic::must_acquire;
use super::{client, test_config};
use crate::backend::Backend;

/// How long each waiter holds the lease once it has it.
const HOLD: Duration = Duration::from_millis(30);

/// Starts `owner` waiting for `name`; once granted it records itself, holds [`HOLD`] and
/// releases, `rounds` times.
fn waiter(
    client: LeaseClient,
    name: &'static str,
    owner: String,
    rounds: usize,
    grants: Arc<Mutex<Vec<String>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for _ in 0..rounds {
            let lease = client
                .acquire(name, &owner, None, Some(Duration::from_secs(60)))
                .await
                .unwrap_or_else(|e| panic!("{owner} waiting for {name}: {e}"));
            if let Ok(mut grants) = grants.lock() {
                grants.push(owner.clone());
            }
            tokio::time::sleep(HOLD).await;
            lease.release().await.expect("release");
        }
    })
}

/// Eight waiters on a held lease, three grants each: every grant costs about one LWT
/// (plus one per waiter that found the lease free on arrival), not one per waiter and poll.
pub async fn waiters_propose_once_per_hand_over(b: &dyn Backend) {
    let holder = client(b);
    let lease = must_acquire(&holder, "crowd", "holder").await;
    let before = b.calls();
    let grants = Arc::new(Mutex::new(Vec::new()));
    let (waiters, rounds) = (8, 3);
    let tasks: Vec<_> = (0..waiters)
        .map(|i| waiter(client(b), "crowd", format!("w{i}"), rounds, grants.clone()))
        .collect();
    // Long enough for every waiter to poll several times (retry_interval is 100 ms).
    b.sleep(Duration::from_millis(600)).await;
    lease.release().await.expect("release");
    for task in tasks {
        task.await.expect("waiter");
    }
    let granted = grants.lock().map(|g| g.len()).unwrap_or_default();
    assert_eq!(granted, waiters * rounds);
    let lwts = b.calls().try_acquire - before.try_acquire;
    // Waiters that come back after a release may find the lease free between two grants and
    // try once; a waiter polling with LWTs sends several per grant.
    let bound = granted + waiters * rounds / 2;
    assert!(
        lwts as usize <= bound,
        "{}: {lwts} LWT claims for {granted} grants (at most {bound})",
        b.name()
    );
}

/// Waiters that arrive one after another while the lease is held get it in that order.
pub async fn waiters_are_served_in_arrival_order(b: &dyn Backend) {
    let holder = client(b);
    let lease = must_acquire(&holder, "fifo", "holder").await;
    let grants = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    let arrivals: Vec<String> = (0..5).map(|i| format!("w{i}")).collect();
    for owner in &arrivals {
        tasks.push(waiter(client(b), "fifo", owner.clone(), 1, grants.clone()));
        // Apart by more than a look takes, so the arrival order is well defined.
        b.sleep(Duration::from_millis(60)).await;
    }
    lease.release().await.expect("release");
    for task in tasks {
        task.await.expect("waiter");
    }
    let order = grants.lock().map(|g| g.clone()).unwrap_or_default();
    assert_eq!(order, arrivals, "{}: grants out of arrival order", b.name());
}

/// A waiter that stops (its future dropped at a timeout) leaves the line at once, and one
/// that vanishes without a word (a crash) holds it up for at most `retry_period` after
/// the lease frees, far less than a TTL.
pub async fn departed_waiters_do_not_hold_up_the_line(b: &dyn Backend) {
    let config = test_config();
    let holder = client(b);
    let lease = must_acquire(&holder, "departed", "holder").await;
    // Gives up after a while: its ticket is deleted.
    let quitter = client(b);
    let gave_up = quitter
        .acquire(
            "departed",
            "quitter",
            None,
            Some(Duration::from_millis(250)),
        )
        .await;
    assert!(gave_up.is_err(), "the lease is held: {gave_up:?}");
    // Crashes while waiting: its ticket stays, first in line, until its TTL.
    let crasher = client(b);
    let mut crashing = Box::pin(crasher.acquire("departed", "crasher", None, None));
    let waited = tokio::time::timeout(Duration::from_millis(250), crashing.as_mut()).await;
    assert!(waited.is_err(), "the lease is held");
    std::mem::forget(crashing);
    let survivor = client(b);
    let waiting = tokio::spawn(async move {
        survivor
            .acquire("departed", "survivor", None, Some(Duration::from_secs(30)))
            .await
    });
    b.sleep(Duration::from_millis(300)).await;
    let freed = Instant::now();
    lease.release().await.expect("release");
    let granted = waiting.await.expect("survivor").expect("survivor acquires");
    let took = freed.elapsed();
    assert!(
        took < config.lease_duration / 2,
        "{}: the survivor waited {took:?} behind a crashed waiter",
        b.name()
    );
    granted.release().await.expect("release");
}
