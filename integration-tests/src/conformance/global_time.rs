//! GlobalTime on every backend: non-decreasing across skewed writers, and its named weakness.

use std::sync::Arc;
use std::time::Duration;

use cql_lease::cells::faulty::FaultyCellStore;
use cql_lease::cells::memory::CellOp;
use cql_lease::cells::wall_micros;
use cql_lease::global_time::GlobalTime;
use cql_lease::memory::{Fault, Times};
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lock::{LockBackend, lock_name};

/// A clock `offset_ms` away from this machine's, advancing with tokio time (so paused tests
/// move it too).
fn skewed_clock(offset_ms: i64) -> Arc<dyn Fn() -> i64 + Send + Sync> {
    let (wall, start) = (wall_micros(), Instant::now());
    Arc::new(move || {
        wall + i64::try_from(start.elapsed().as_micros()).unwrap_or(0) + offset_ms * 1000
    })
}

/// Writers whose clocks disagree by seconds update concurrently, with delays and answers
/// that land late; every reading of the time is at least the one before.
pub async fn global_time_never_decreases(b: &dyn LockBackend) {
    let name = lock_name("time");
    let stop = CancellationToken::new();
    let mut writers = Vec::new();
    for offset in [-2_000, -20, -5, 0, 8, 15, 30] {
        let view = FaultyCellStore::new(b.cells());
        view.inject(
            None,
            Fault::Latency(Duration::from_millis(7)),
            Times::Random(0.5),
        );
        view.inject_late_apply(
            Some(CellOp::Write),
            Duration::from_millis(150),
            Times::Random(0.2),
        );
        let time = GlobalTime::with_clock(Arc::new(view), &name, skewed_clock(offset));
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let period = Duration::from_millis(rand::rng().random_range(5..40));
            time.run(period, stop).await;
        }));
    }
    let reader = GlobalTime::new(b.cells(), &name);
    let mut last = 0;
    let first_seen = Instant::now();
    let mut moved = 0;
    while first_seen.elapsed() < Duration::from_secs(3) {
        let now = reader.now().await.unwrap();
        assert!(now >= last, "GlobalTime went back from {last} to {now}");
        if now > last {
            moved += 1;
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    stop.cancel();
    for w in writers {
        w.await.unwrap();
    }
    assert!(moved > 10, "the time hardly moved ({moved} steps)");
}

/// The weakness the original design names: a writer whose clock ran an hour ahead writes once and
/// dies; the other writers' times are lower, so the value stands still (frozen) until their
/// clocks catch up.
pub async fn global_time_freezes_behind_a_dead_fast_clock(b: &dyn LockBackend) {
    let name = lock_name("frozen");
    let ahead = GlobalTime::with_clock(b.cells(), &name, skewed_clock(3_600_000));
    let honest = GlobalTime::with_clock(b.cells(), &name, skewed_clock(0));
    honest.try_update().await.unwrap();
    let before = honest.now().await.unwrap();
    let frozen = ahead
        .try_update()
        .await
        .unwrap()
        .expect("the fast clock writes");
    assert!(frozen > before);
    drop(ahead); // the fast writer dies
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            honest.try_update().await.unwrap(),
            None,
            "a lower time was written"
        );
        assert_eq!(honest.now().await.unwrap(), frozen, "the value moved");
    }
    assert!(honest.lag().await.unwrap() > Duration::from_secs(3_500));
    // Once an honest clock passes it, time moves again.
    let caught_up = GlobalTime::with_clock(b.cells(), &name, skewed_clock(3_700_000));
    caught_up.try_update().await.unwrap();
    assert!(honest.now().await.unwrap() > frozen);
}
