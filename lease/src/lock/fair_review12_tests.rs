//! Review 12 of the fair lock's early claim (commit c0938aa): findings and probes.

#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use super::*;
use crate::cells::faulty::FaultyCellStore;
use crate::cells::memory::{CellOp, MemoryCellStore};
use crate::memory::{Fault, Times};

fn options() -> LockOptions {
    LockOptions {
        timing: crate::LeaseConfig {
            ttl: Duration::from_secs(3),
            renew_interval: Duration::from_millis(500),
            retry_interval: Duration::from_millis(50),
            max_clock_skew: Duration::from_millis(100),
            resolve_timeout: Duration::from_secs(1),
            request_timeout: None,
        },
        poll_interval: Duration::from_millis(20),
    }
}

/// Probe: many contenders under random lost answers, late applies and latency; no two
/// guards held at once.
#[tokio::test(start_paused = true)]
async fn probe_mutual_exclusion_under_faults() {
    const N: usize = 6;
    let memory = MemoryCellStore::new();
    memory.inject(
        None,
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let store: Arc<dyn CellStore> = Arc::new(memory);
    let held: Arc<Mutex<Vec<(usize, LockGuard)>>> = Arc::default();
    let violations = Arc::new(AtomicUsize::new(0));
    let grants = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..N {
        let view = FaultyCellStore::new(Arc::clone(&store));
        view.inject(
            None,
            Fault::Latency(Duration::from_millis(3)),
            Times::Random(0.2),
        );
        view.inject(
            Some(CellOp::Write),
            Fault::TimeoutAfterApply,
            Times::Random(0.05),
        );
        view.inject(
            Some(CellOp::Write),
            Fault::TimeoutWithoutApply,
            Times::Random(0.03),
        );
        view.inject(
            Some(CellOp::Delete),
            Fault::TimeoutAfterApply,
            Times::Random(0.05),
        );
        view.inject(
            Some(CellOp::ReadRow),
            Fault::Unavailable,
            Times::Random(0.05),
        );
        view.inject(
            None,
            Fault::Latency(Duration::from_millis(400)),
            Times::Random(0.01),
        );
        view.inject_late_apply(
            Some(CellOp::Write),
            Duration::from_millis(40),
            Times::Random(0.03),
        );
        view.inject_late_apply(
            Some(CellOp::Delete),
            Duration::from_millis(40),
            Times::Random(0.03),
        );
        let lock = FairLock::new(Arc::new(view), options()).unwrap();
        let (held, violations, grants, errors) = (
            Arc::clone(&held),
            Arc::clone(&violations),
            Arc::clone(&grants),
            Arc::clone(&errors),
        );
        tasks.push(tokio::spawn(async move {
            for round in 0..40u64 {
                let got = if round % 5 == 4 {
                    lock.try_lock("l").await.map(|g| g.ok_or(()))
                } else {
                    lock.lock("l", Duration::from_secs(30)).await.map(Ok)
                };
                let guard = match got {
                    Ok(Ok(g)) => g,
                    Ok(Err(())) => continue,
                    Err(_) => {
                        errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    }
                };
                {
                    let mut h = held.lock().unwrap();
                    h.retain(|(_, g)| g.is_held());
                    if !h.is_empty() {
                        violations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    h.push((i, guard));
                }
                grants.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1 + (round * 7 + i as u64) % 15)).await;
                let mine = {
                    let mut h = held.lock().unwrap();
                    let at = h.iter().position(|(j, _)| *j == i).unwrap();
                    h.remove(at).1
                };
                let _ = mine.release().await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (v, g, e) = (
        violations.load(std::sync::atomic::Ordering::Relaxed),
        grants.load(std::sync::atomic::Ordering::Relaxed),
        errors.load(std::sync::atomic::Ordering::Relaxed),
    );
    eprintln!("grants {g} violations {v} errors {e}");
    assert_eq!(v, 0);
}

/// The lock is free and a `try_lock` is first in the queue; a `lock()` that arrives just
/// after it is next in line, sees the `try_lock`'s main cell and claims early (the new
/// rule). The `try_lock`'s read back then shows that claim: it holds on (the claim is
/// behind it) for its few immediate rounds, and gives up while the next in line is still
/// deleting its claim (a slow coordinator). The thesis's TryGetLock, first on a free lock,
/// owns it; here it reports the lock taken and the waiter behind it gets it instead.
#[tokio::test(start_paused = true)]
async fn finding_try_lock_first_on_a_free_lock_fails_because_the_next_in_line_claims_early() {
    let memory = MemoryCellStore::new();
    memory.inject(
        None,
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let store: Arc<dyn CellStore> = Arc::new(memory);
    let (first_view, next_view) = (
        FaultyCellStore::new(Arc::clone(&store)),
        FaultyCellStore::new(Arc::clone(&store)),
    );
    // The try_lock's reads go through a slower coordinator (3 ms more), the next in
    // line's deletes through one that takes 100 ms.
    first_view.inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(3)),
        Times::Always,
    );
    next_view.inject(
        Some(CellOp::Delete),
        Fault::Latency(Duration::from_millis(100)),
        Times::Always,
    );
    let first = FairLock::new(Arc::new(first_view), LockOptions::default()).unwrap();
    let next = FairLock::new(Arc::new(next_view), LockOptions::default()).unwrap();
    let tried = tokio::spawn(async move { first.try_lock("l").await.unwrap() });
    // Arrives once the try_lock has enqueued (its main-row check and its enqueue done).
    tokio::time::sleep(Duration::from_micros(5_500)).await;
    let queue = store.read_row("l", QUEUE, "", 10).await.unwrap();
    assert_eq!(queue.len(), 1, "the try_lock is queued first: {queue:?}");
    let waiter = tokio::spawn(async move { next.lock("l", Duration::from_secs(10)).await });
    let tried = tried.await.unwrap();
    let failed = tried.is_none();
    if let Some(guard) = tried {
        guard.release().await.unwrap();
    }
    let waited = waiter.await.unwrap().unwrap();
    assert!(
        !failed,
        "try_lock was first in the queue on a free lock, yet failed; the lock() behind it got it \
         (held: {})",
        waited.is_held()
    );
}

/// The next in line polls the main row at a tenth of `poll_interval` (2 ms by default) for
/// as long as the holder holds, and the one behind it polls the queue nearly as often:
/// store calls per acquisition grow with the hold time, without bound (the pace's docs
/// say "a long hold costs a few reads").
#[tokio::test(start_paused = true)]
async fn finding_waiters_store_calls_grow_with_the_hold_time() {
    let memory = MemoryCellStore::new();
    memory.inject(
        None,
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let store: Arc<dyn CellStore> = Arc::new(memory);
    let views: Vec<FaultyCellStore> = (0..3)
        .map(|_| FaultyCellStore::new(Arc::clone(&store)))
        .collect();
    let lock =
        |i: usize| FairLock::new(Arc::new(views[i].clone()), LockOptions::default()).unwrap();
    let holder = lock(0).lock("l", Duration::from_secs(60)).await.unwrap();
    let mut waiters = Vec::new();
    for i in 1..3 {
        let l = lock(i);
        waiters.push(tokio::spawn(async move {
            l.lock("l", Duration::from_secs(60))
                .await
                .unwrap()
                .release()
                .await
        }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before: Vec<u64> = views.iter().map(FaultyCellStore::round_trips).collect();
    // A 10 s hold.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let during: Vec<u64> = views
        .iter()
        .zip(&before)
        .map(|(v, b)| v.round_trips() - b)
        .collect();
    holder.release().await.unwrap();
    for w in waiters {
        w.await.unwrap().unwrap();
    }
    assert!(
        during[1] + during[2] <= 200,
        "waiters' store calls during one 10 s hold: next in line {}, second {}",
        during[1],
        during[2]
    );
}
