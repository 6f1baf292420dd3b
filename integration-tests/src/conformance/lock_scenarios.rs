//! The lock suite's scenarios (see [`super::lock`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::LossReason;
use cql_lease::cells::memory::CellOp;
use cql_lease::lock::{LockError, LockGuard, LockOptions};
use cql_lease::memory::{Fault, Op, Times};
use rand::Rng;
use tokio::time::Instant;

use super::lock::{
    Algo, LockBackend, SHADOW_BACKOFF, contender, lock_name, lock_options, try_contender,
};
use crate::history::{Tenure, check_disjoint, check_exclusive};

const LONG: Duration = Duration::from_secs(600);

/// Slack on top of `ttl + skew` for a waiter to notice a free lock: its poll, its retry
/// and, for the shadow lock, its back-off.
fn notice_slack() -> Duration {
    let o = lock_options();
    o.poll_interval * 2 + o.timing.retry_period * 2 + SHADOW_BACKOFF
}

/// Size and timing of a contention run: always 64 contenders with the same faults. On
/// simulated time four rounds each with the suite's timing. In real time (over the wire,
/// where every poll is a real request to one debug-built server on a shared machine) as many
/// rounds as fit in about ten seconds on a loaded machine: two for the lease lock, one for
/// the fair lock (polls), the bakery (each entrant reads every lower ticket: O(n²) reads)
/// and the shadow-row lock (collisions and the original design's growing back-offs). Timing there has room for a loaded
/// machine: TTL 4 s, renewal every second, a poll every 50 ms (the next in line of the fair
/// lock paces itself by its place in the queue, from about one round trip up to that),
/// retries after 20 ms, reads retried for 6 s.
fn plan(b: &dyn LockBackend, algo: Algo) -> (usize, usize, LockOptions) {
    if b.simulated_time() {
        return (64, 4, lock_options());
    }
    let mut o = lock_options();
    o.timing.lease_duration = Duration::from_secs(4);
    o.timing.renew_period = Duration::from_secs(1);
    o.timing.retry_period = Duration::from_millis(20);
    o.timing.resolve_timeout = Duration::from_secs(6);
    o.poll_interval = Duration::from_millis(50);
    let rounds = match algo {
        Algo::Lease => 2,
        Algo::Fair | Algo::Bakery | Algo::Shadow => 1,
    };
    (64, rounds, o)
}

/// 64 contenders × rounds, with delays and lost answers: no two holders' validity windows
/// overlap (a window ends at release or at the moment the holder was told to stop). The
/// lease lock's fencing tokens must also strictly increase from one holder to the next.
pub async fn exclusive_under_contention(b: &dyn LockBackend, algo: Algo) {
    let (contenders, rounds, options) = plan(b, algo);
    let began = Instant::now();
    let name = lock_name("contention");
    if algo == Algo::Lease && b.supports_faults() {
        let l = b.leases();
        l.inject(
            Some(Op::TryAcquire),
            Fault::TimeoutAfterApply,
            Times::Random(0.03),
        );
        l.inject(
            Some(Op::TryAcquire),
            Fault::TimeoutWithoutApply,
            Times::Random(0.03),
        );
        l.inject(
            Some(Op::Release),
            Fault::TimeoutAfterApply,
            Times::Random(0.05),
        );
        l.inject(
            None,
            Fault::Latency(Duration::from_millis(2)),
            Times::Random(0.5),
        );
    }
    let history = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..contenders {
        // Arrival clocks disagree by up to 100 ms (fair lock), so the queue order is not
        // the real order and the main row must keep them apart.
        let skew = Duration::from_millis(rand::rng().random_range(0..100));
        let c = try_contender(b, algo, i, options, Some(skew)).expect("contender");
        c.view.inject(
            None,
            Fault::Latency(Duration::from_millis(3)),
            Times::Random(0.5),
        );
        c.view.inject(
            Some(CellOp::Write),
            Fault::TimeoutAfterApply,
            Times::Random(0.04),
        );
        c.view.inject(
            Some(CellOp::Write),
            Fault::TimeoutWithoutApply,
            Times::Random(0.03),
        );
        c.view.inject(
            Some(CellOp::ReadRow),
            Fault::Unavailable,
            Times::Random(0.02),
        );
        c.view.inject_late_apply(
            Some(CellOp::Write),
            Duration::from_millis(40),
            Times::Random(0.03),
        );
        c.view.inject_late_apply(
            Some(CellOp::Delete),
            Duration::from_millis(40),
            Times::Random(0.03),
        );
        let (history, name) = (Arc::clone(&history), name.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                // A lock waits out store trouble itself, until its own timeout.
                let guard = c.lock.lock(&name, Some(LONG)).await.expect("lock");
                let start = Instant::now();
                assert!(guard.is_held());
                let guard_token = guard.token().unwrap_or(cql_lease::FencingToken::new(0));
                let hold = Duration::from_millis(rand::rng().random_range(0..15));
                tokio::time::sleep(hold).await;
                let end = guard.lost_at().unwrap_or_else(Instant::now);
                let _ = guard.release().await;
                history.lock().unwrap().push(Tenure {
                    holder: format!("c{i}"),
                    token: guard_token,
                    start,
                    end,
                });
                let pause = Duration::from_millis(rand::rng().random_range(0..10));
                tokio::time::sleep(pause).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("contender panicked");
    }
    b.leases().clear_faults();
    let history = history.lock().unwrap().clone();
    // A figure, not an assertion: how long the run took.
    eprintln!(
        "{} / {algo:?}: {} entries in {:?}",
        b.name(),
        history.len(),
        began.elapsed()
    );
    assert_eq!(history.len(), contenders * rounds);
    let checked = match algo {
        Algo::Lease => check_exclusive(&history),
        _ => check_disjoint(&history),
    };
    if let Err(e) = checked {
        panic!("{} / {algo:?}: {e}", b.name());
    }
}

/// A holder that crashes (stops renewing, never releases) blocks the others no longer than
/// TTL + skew, and nobody enters while its validity lasts.
pub async fn crashed_holder_frees_within_ttl(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("crash");
    let (a, c) = (contender(b, algo, 0), contender(b, algo, 1));
    let guard = a.lock.lock(&name, Some(LONG)).await.unwrap();
    let a_valid_until = guard.must_stop_by();
    let crashed_at = guard.abandon();
    let next = c.lock.lock(&name, Some(LONG)).await.unwrap();
    let entered = Instant::now();
    let bound = lock_options().timing.takeover_bound() + notice_slack();
    assert!(
        entered >= a_valid_until,
        "{algo:?}: entered while the crashed holder was valid"
    );
    assert!(
        entered - crashed_at <= bound,
        "{algo:?}: waited {:?} > ttl + skew + slack {bound:?}",
        entered - crashed_at
    );
    next.release().await.unwrap();
}

/// A guard kept for one and a half TTLs is still held, renewed, and excludes others.
pub async fn renewed_guard_outlives_its_ttl(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("renew");
    let (a, c) = (contender(b, algo, 0), contender(b, algo, 1));
    let guard = a.lock.lock(&name, Some(LONG)).await.unwrap();
    tokio::time::sleep(lock_options().timing.lease_duration * 3 / 2).await;
    assert!(guard.is_held(), "{algo:?}: lost while renewing");
    assert!(
        guard.renewals() >= 3,
        "{algo:?}: {} renewals",
        guard.renewals()
    );
    assert!(
        c.lock.try_lock(&name).await.unwrap().is_none(),
        "{algo:?}: not exclusive after TTL"
    );
    guard.release().await.unwrap();
}

/// When renewals fail, the holder is told to stop (watch false, token cancelled) no later
/// than the moment anyone else enters.
pub async fn loss_is_signalled_before_anyone_enters(b: &dyn LockBackend, algo: Algo) {
    if algo == Algo::Lease && !b.supports_faults() {
        return;
    }
    let name = lock_name("loss");
    let (a, c) = (contender(b, algo, 0), contender(b, algo, 1));
    let guard = a.lock.lock(&name, Some(LONG)).await.unwrap();
    let mut held = guard.held();
    let token = guard.cancellation_token();
    match algo {
        Algo::Lease => b
            .leases()
            .inject(Some(Op::Renew), Fault::Unavailable, Times::Always),
        _ => a
            .view
            .inject(Some(CellOp::Write), Fault::Unavailable, Times::Always),
    }
    let next = c.lock.lock(&name, Some(LONG)).await.unwrap();
    let entered = Instant::now();
    b.leases().clear_faults();
    assert!(
        token.is_cancelled() && !*held.borrow_and_update(),
        "{algo:?}: not told"
    );
    let lost_at = guard.lost_at().expect("loss recorded");
    assert!(
        lost_at <= entered,
        "{algo:?}: told at {lost_at:?}, after the next holder entered at {entered:?}"
    );
    assert_eq!(guard.loss_reason(), Some(LossReason::Unreachable));
    next.release().await.unwrap();
}

/// `lock` gives up with a typed error and leaves nothing behind.
pub async fn timeout_is_a_typed_error(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("timeout");
    let (a, w, c) = (
        contender(b, algo, 0),
        contender(b, algo, 1),
        contender(b, algo, 2),
    );
    let guard = a.lock.lock(&name, Some(LONG)).await.unwrap();
    let e = w
        .lock
        .lock(&name, Some(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::Timeout { .. }), "{algo:?}: {e:?}");
    guard.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        c.lock.try_lock(&name).await.unwrap().is_some(),
        "{algo:?}: the timed-out waiter left cells behind"
    );
}

/// `lock` with a zero timeout is one attempt, as `try_lock`: a held lock is a timeout at once
/// and leaves nothing behind, a free one is taken.
pub async fn a_zero_timeout_is_one_attempt(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("zero");
    let (a, z, c) = (
        contender(b, algo, 0),
        contender(b, algo, 1),
        contender(b, algo, 2),
    );
    let guard = a.lock.lock(&name, Some(LONG)).await.unwrap();
    let asked = Instant::now();
    let e = z.lock.lock(&name, Some(Duration::ZERO)).await.unwrap_err();
    assert!(matches!(e, LockError::Timeout { .. }), "{algo:?}: {e:?}");
    if b.simulated_time() {
        assert_eq!(
            asked.elapsed(),
            Duration::ZERO,
            "{algo:?}: a zero timeout slept"
        );
    }
    guard.release().await.unwrap();
    let got = c.lock.lock(&name, Some(Duration::ZERO)).await;
    assert!(got.is_ok(), "{algo:?}: free lock not taken: {got:?}");
}

/// `try_lock` on a held lock answers "held" without waiting, and leaves nothing behind.
pub async fn try_lock_answers_at_once_when_held(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("try");
    let (a, t, c) = (
        contender(b, algo, 0),
        contender(b, algo, 1),
        contender(b, algo, 2),
    );
    let guard = a.lock.lock(&name, Some(LONG)).await.unwrap();
    let asked = Instant::now();
    assert!(t.lock.try_lock(&name).await.unwrap().is_none());
    if b.simulated_time() {
        assert_eq!(asked.elapsed(), Duration::ZERO, "{algo:?}: try_lock slept");
    }
    guard.release().await.unwrap();
    let got = c.lock.try_lock(&name).await.unwrap();
    assert!(got.is_some(), "{algo:?}: free lock not taken by try_lock");
}

/// Dropping the guard releases the lock, long before its TTL.
pub async fn drop_releases(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("drop");
    let (a, c) = (contender(b, algo, 0), contender(b, algo, 1));
    let guard = a.lock.lock(&name, Some(LONG)).await.unwrap();
    let token = guard.cancellation_token();
    drop(guard);
    assert!(token.is_cancelled());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        c.lock.try_lock(&name).await.unwrap().is_some(),
        "{algo:?}: drop did not release"
    );
}

/// Contenders arriving at distinct times are granted in arrival order.
pub async fn grants_in_arrival_order(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("order");
    // A contender arrives when its place is written (a ticket drawn, a cell queued): apart
    // by more than that takes, a few round trips on a node of a busy machine.
    let spacing = if b.simulated_time() {
        Duration::from_millis(50)
    } else {
        Duration::from_millis(300)
    };
    let first = contender(b, algo, 0)
        .lock
        .lock(&name, Some(LONG))
        .await
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 1..=8 {
        let (c, name, order) = (contender(b, algo, i), name.clone(), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let guard: LockGuard = c.lock.lock(&name, Some(LONG)).await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(10)).await;
            guard.release().await.unwrap();
        }));
        tokio::time::sleep(spacing).await;
    }
    first.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        (1..=8).collect::<Vec<_>>(),
        "{algo:?}"
    );
}

/// Simultaneous shadow-row contenders collide (ConcurrentAttempt) and retry until all
/// have held the lock.
pub async fn concurrent_attempts_happen_and_are_retried(b: &dyn LockBackend, algo: Algo) {
    let name = lock_name("shadow");
    let mut tasks = Vec::new();
    let mut stats = Vec::new();
    for i in 0..8 {
        let c = contender(b, algo, i);
        c.view.inject(
            None,
            Fault::Latency(Duration::from_millis(2)),
            Times::Always,
        );
        stats.push(c.shadow.clone().expect("shadow lock"));
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            let guard = c.lock.lock(&name, Some(LONG)).await.unwrap();
            guard.release().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let count = |f: fn(&cql_lease::lock::ShadowStats) -> u64| {
        stats.iter().map(|s| f(s.stats())).sum::<u64>()
    };
    let concurrent = count(|s| {
        s.concurrent_attempts
            .load(std::sync::atomic::Ordering::Relaxed)
    });
    let successes = count(|s| s.successes.load(std::sync::atomic::Ordering::Relaxed));
    assert!(
        concurrent > 0,
        "no ConcurrentAttempt among 8 simultaneous contenders"
    );
    assert_eq!(successes, 8);
}

/// The fair lock's queue reads start at the head they saw last: a long history of dequeued
/// cells is not walked again on every read.
pub async fn queue_reads_skip_the_dead_prefix(b: &dyn LockBackend, algo: Algo) {
    let Some(before) = b.tombstones_walked() else {
        return;
    };
    let name = lock_name("tombstones");
    let c = contender(b, algo, 0);
    let rounds: u64 = if b.simulated_time() { 200 } else { 30 };
    for _ in 0..rounds {
        c.lock
            .lock(&name, Some(LONG))
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    let walked = b.tombstones_walked().unwrap() - before;
    // Walking from the start would cost about rounds²/2 here.
    assert!(
        walked <= 3 * rounds,
        "{walked} tombstones walked in {rounds} acquisitions"
    );
}
