//! Lock scenarios for transient store errors: request timeouts (answers lost, outcome
//! unknown), client-side timeouts of requests that a slow store answers too late, and
//! unavailable replicas, injected in the store itself (the embedded stores, or the CQL test
//! server's cell and lease statements) so that every contender meets them. `lock` keeps
//! trying until its own timeout and `try_lock` within its budget; neither leaves anything
//! held behind.

use std::time::Duration;

use cql_lease::cells::memory::CellOp;
use cql_lease::lock::LockError;
use cql_lease::memory::{Fault, Op, Times};
use tokio::time::Instant;

use super::lock::{Algo, LockBackend, SHADOW_BACKOFF, contender, lock_name, lock_options};

/// Every request to the store (cells and leases) fails with `fault` until healed.
fn store_fails(b: &dyn LockBackend, fault: Fault) {
    b.inject_cells(None, fault, Times::Always);
    b.leases().inject(None, fault, Times::Always);
}

/// How long after the store answers again a waiter may take to notice: its poll, its
/// retry and, for the shadow lock, its back-off (as in the other lock scenarios). In real
/// time (over the wire, on a shared machine) one more TTL of room.
fn notice_slack(b: &dyn LockBackend) -> Duration {
    let o = lock_options();
    let slack = o.poll_interval * 2 + o.timing.retry_period * 2 + SHADOW_BACKOFF;
    if b.simulated_time() {
        slack
    } else {
        slack + o.timing.lease_duration
    }
}

/// After the store healed: a fresh contender gets the lock within the takeover bound (TTL
/// + skew) and the notice slack, so whatever the failed contender wrote is gone or expires.
async fn nothing_left_held(b: &dyn LockBackend, algo: Algo, name: &str, what: &str) {
    let bound = lock_options().timing.takeover_bound() + notice_slack(b);
    let next = contender(b, algo, 9);
    let healed = Instant::now();
    let guard = next.lock.lock(name, Some(bound)).await.unwrap_or_else(|e| {
        panic!(
            "{} / {algo:?}: {what} left the lock held past TTL + slack: {e}",
            b.name()
        )
    });
    assert!(
        healed.elapsed() <= bound,
        "{} / {algo:?}: {what}: the next contender waited {:?}",
        b.name(),
        healed.elapsed()
    );
    guard.release().await.unwrap();
}

/// A waiter rides through store trouble: while another contender holds the lock, every
/// store request first times out after being applied (outcome unknown), then is answered
/// only after the client's request timeout (cut, and applied late), then meets an
/// unavailable replica, each for half a TTL, so longer than any single request is retried
/// (a write is given up after the validity, a TTL minus a second). A `lock` started in the
/// middle of it keeps trying and gets the lock once the store answers again, after the
/// holder (whose renewals failed too) was told to stop; the lock then excludes others.
pub async fn lock_rides_through_store_timeouts(b: &dyn LockBackend, algo: Algo) {
    assert!(b.supports_faults(), "{}: a fault scenario", b.name());
    let timing = lock_options().timing;
    let name = lock_name("rides-through");
    let (h, a, c) = (
        contender(b, algo, 0),
        contender(b, algo, 1),
        contender(b, algo, 2),
    );
    let h_guard = h
        .lock
        .lock(&name, Some(timing.lease_duration))
        .await
        .unwrap();
    let spell = timing.lease_duration / 2;
    store_fails(b, Fault::TimeoutAfterApply);
    let started = Instant::now();
    let waiter = {
        let (lock, name) = (a.lock.clone(), name.clone());
        tokio::spawn(async move { lock.lock(&name, Some(timing.lease_duration * 10)).await })
    };
    tokio::time::sleep(spell).await;
    b.clear_store_faults();
    store_fails(b, Fault::Latency(timing.effective_request_timeout() * 3));
    tokio::time::sleep(spell).await;
    b.clear_store_faults();
    store_fails(b, Fault::Unavailable);
    tokio::time::sleep(spell).await;
    assert!(
        !waiter.is_finished(),
        "{} / {algo:?}: lock() ended during the store trouble: {:?}",
        b.name(),
        waiter.await
    );
    b.clear_store_faults();
    let guard = waiter.await.unwrap().unwrap_or_else(|e| {
        panic!(
            "{} / {algo:?}: lock() did not ride through the store trouble: {e}",
            b.name()
        )
    });
    assert!(
        started.elapsed() >= spell * 3,
        "{} / {algo:?}: entered while the store failed every request",
        b.name()
    );
    assert!(guard.is_held(), "{algo:?}: guard not held");
    assert!(
        !h_guard.is_held(),
        "{} / {algo:?}: the old holder was not told to stop before the waiter entered",
        b.name()
    );
    let other = c.lock.try_lock(&name).await.unwrap();
    assert!(
        other.is_none(),
        "{} / {algo:?}: a second holder got in",
        b.name()
    );
    guard.release().await.unwrap();
    drop(h_guard);
}

/// A store that never answers again: `lock` keeps trying and ends at its own timeout, with
/// the timeout error (not a store error), and leaves nothing held behind.
pub async fn lock_under_endless_store_errors_ends_at_its_timeout(b: &dyn LockBackend, algo: Algo) {
    assert!(b.supports_faults(), "{}: a fault scenario", b.name());
    let timing = lock_options().timing;
    let name = lock_name("endless-errors");
    let a = contender(b, algo, 0);
    store_fails(b, Fault::TimeoutAfterApply);
    // Longer than any single request is retried (a read for the resolve timeout), and not
    // a whole number of them: an attempt still settling a lost answer at the timeout must
    // be cut there, not waited for.
    let timeout = timing.resolve_timeout + timing.renew_deadline();
    let started = Instant::now();
    let got = a.lock.lock(&name, Some(timeout)).await;
    let waited = started.elapsed();
    assert!(
        matches!(got, Err(LockError::Timeout { .. })),
        "{} / {algo:?}: expected the timeout error, got {got:?}",
        b.name()
    );
    assert!(
        waited >= timeout,
        "{} / {algo:?}: gave up after {waited:?}, before its timeout {timeout:?}",
        b.name()
    );
    assert!(
        waited <= timeout + notice_slack(b),
        "{} / {algo:?}: ended {waited:?} after a timeout of {timeout:?}",
        b.name()
    );
    b.clear_store_faults();
    nothing_left_held(b, algo, &name, "a timed-out lock()").await;
}

/// Writes (cell writes, lease claims) time out for longer than one write is retried (the
/// validity) but less than `try_lock`'s budget (the resolve timeout): `try_lock` tries
/// again within its budget and takes the free lock once the store answers.
pub async fn try_lock_rides_through_store_errors_within_its_budget(
    b: &dyn LockBackend,
    algo: Algo,
) {
    assert!(b.supports_faults(), "{}: a fault scenario", b.name());
    let timing = lock_options().timing;
    let name = lock_name("try-rides-through");
    let (a, c) = (contender(b, algo, 0), contender(b, algo, 1));
    let spell = (timing.renew_deadline() + timing.resolve_timeout) / 2;
    b.inject_cells(Some(CellOp::Write), Fault::TimeoutAfterApply, Times::Always);
    b.leases().inject(
        Some(Op::TryAcquire),
        Fault::TimeoutWithoutApply,
        Times::Always,
    );
    let started = Instant::now();
    let attempt = {
        let (lock, name) = (a.lock.clone(), name.clone());
        tokio::spawn(async move { lock.try_lock(&name).await })
    };
    tokio::time::sleep(spell).await;
    b.clear_store_faults();
    let guard = attempt
        .await
        .unwrap()
        .unwrap_or_else(|e| {
            panic!(
                "{} / {algo:?}: try_lock failed on store errors within its budget: {e}",
                b.name()
            )
        })
        .unwrap_or_else(|| panic!("{} / {algo:?}: free lock reported held", b.name()));
    assert!(
        started.elapsed() >= spell,
        "{} / {algo:?}: took the lock while every write failed",
        b.name()
    );
    assert!(guard.is_held());
    assert!(
        c.lock.try_lock(&name).await.unwrap().is_none(),
        "{} / {algo:?}: a second holder got in",
        b.name()
    );
    guard.release().await.unwrap();
}

/// Writes (cell writes and deletes, lease claims) time out for good while reads answer:
/// `try_lock` gives up with `Unreachable` once its budget (the resolve timeout) has passed,
/// not after a whole write retry plus a whole delete retry (validity + takeover bound, more
/// than the budget) of the attempt under way; the attempt cut there leaves nothing held.
pub async fn try_lock_under_write_timeouts_answers_within_its_budget(
    b: &dyn LockBackend,
    algo: Algo,
) {
    assert!(b.supports_faults(), "{}: a fault scenario", b.name());
    let timing = lock_options().timing;
    assert!(
        timing.renew_deadline() + timing.takeover_bound()
            > timing.resolve_timeout + timing.retry_period,
        "the scenario needs one attempt's retries to outlast the budget"
    );
    let name = lock_name("try-budget");
    let a = contender(b, algo, 0);
    b.inject_cells(Some(CellOp::Write), Fault::TimeoutAfterApply, Times::Always);
    b.inject_cells(
        Some(CellOp::Delete),
        Fault::TimeoutAfterApply,
        Times::Always,
    );
    b.leases().inject(
        Some(Op::TryAcquire),
        Fault::TimeoutWithoutApply,
        Times::Always,
    );
    let started = Instant::now();
    let got = a.lock.try_lock(&name).await;
    let waited = started.elapsed();
    assert!(
        matches!(got, Err(LockError::Unreachable { .. })),
        "{} / {algo:?}: expected Unreachable, got {got:?}",
        b.name()
    );
    // In real time (over the wire, on a shared machine) a little room for scheduling, far
    // less than the retries the budget cuts.
    let scheduling = if b.simulated_time() {
        Duration::ZERO
    } else {
        Duration::from_millis(500)
    };
    let budget = timing.resolve_timeout + timing.retry_period;
    assert!(
        waited <= budget + scheduling,
        "{} / {algo:?}: try_lock answered after {waited:?}; its budget is the resolve timeout \
         ({:?}, plus one retry interval)",
        b.name(),
        timing.resolve_timeout
    );
    b.clear_store_faults();
    nothing_left_held(b, algo, &name, "a try_lock cut at its budget").await;
}

/// A store that never answers again: `try_lock` gives up once its budget (the resolve
/// timeout) has passed, with [`LockError::Unreachable`], and leaves nothing held behind.
pub async fn try_lock_under_endless_store_errors_is_unreachable(b: &dyn LockBackend, algo: Algo) {
    assert!(b.supports_faults(), "{}: a fault scenario", b.name());
    let timing = lock_options().timing;
    let name = lock_name("try-endless-errors");
    let a = contender(b, algo, 0);
    store_fails(b, Fault::TimeoutAfterApply);
    let started = Instant::now();
    let got = a.lock.try_lock(&name).await;
    let waited = started.elapsed();
    assert!(
        matches!(got, Err(LockError::Unreachable { .. })),
        "{} / {algo:?}: expected Unreachable, got {got:?}",
        b.name()
    );
    // It kept trying for its budget, less one retry interval at most (no retry would have
    // been started past it).
    assert!(
        waited + timing.retry_period >= timing.resolve_timeout,
        "{} / {algo:?}: gave up after {waited:?}, within its budget",
        b.name()
    );
    b.clear_store_faults();
    nothing_left_held(b, algo, &name, "an unreachable try_lock()").await;
}
