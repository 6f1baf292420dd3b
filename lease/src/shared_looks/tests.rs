//! Tests of the shared looks.

use std::sync::atomic::AtomicUsize;

use super::*;

/// How long a look under way is waited for in these tests.
const PATIENCE: Duration = Duration::from_secs(1);

/// Waiters that want a newer look than the latest wait for the one under way and share
/// it: one read serves them all.
#[tokio::test(start_paused = true)]
async fn waiters_wanting_a_look_share_the_one_under_way() {
    let shared = Arc::new(SharedLooks::<u32>::default());
    let made = Arc::new(AtomicUsize::new(0));
    let after = Some(Instant::now());
    tokio::time::advance(Duration::from_millis(1)).await;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (shared, made) = (Arc::clone(&shared), Arc::clone(&made));
            tokio::spawn(async move {
                shared
                    .look(after, PATIENCE, async || {
                        made.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        7
                    })
                    .await
                    .seen
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.ok(), Some(7));
    }
    assert_eq!(made.load(Ordering::SeqCst), 1);
}

/// A waiter whose look is dropped half-way (its future cancelled) records nothing: the
/// waiters queued behind it make their own look instead of waiting for ever.
#[tokio::test(start_paused = true)]
async fn a_look_cancelled_half_way_leaves_the_others_to_make_their_own() {
    let shared = Arc::new(SharedLooks::<u32>::default());
    let maker = {
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            shared
                .look(None, PATIENCE, async || {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    1
                })
                .await
                .seen
        })
    };
    tokio::time::sleep(Duration::from_millis(1)).await;
    let other = {
        let shared = Arc::clone(&shared);
        tokio::spawn(async move { shared.look(None, PATIENCE, async || 2).await.seen })
    };
    tokio::time::sleep(Duration::from_millis(1)).await;
    maker.abort();
    let seen = tokio::time::timeout(Duration::from_secs(1), other).await;
    assert_eq!(seen.ok().and_then(Result::ok), Some(2));
}

/// A waiter whose look is under way but whose future is no longer polled (kept, not
/// dropped) holds the others up for at most the patience once: the next waiter makes its
/// own look, and later looks do not wait on the stalled one again.
#[tokio::test(start_paused = true)]
async fn a_look_left_unpolled_holds_the_others_up_for_at_most_the_patience() {
    let shared = Arc::new(SharedLooks::<u32>::default());
    let mut stalled = Box::pin(shared.look(None, PATIENCE, async || {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        1
    }));
    // Polled into its read, then set aside for good.
    assert!(futures::poll!(stalled.as_mut()).is_pending());
    let started = Instant::now();
    let other = shared.look(None, PATIENCE, async || 2);
    let seen = tokio::time::timeout(PATIENCE * 10, other)
        .await
        .map(|l| l.seen);
    assert_eq!(seen.ok(), Some(2), "held up by the stalled look");
    assert!(started.elapsed() <= PATIENCE, "{:?}", started.elapsed());
    let floor = Some(Instant::now());
    tokio::time::advance(Duration::from_millis(1)).await;
    let again = Instant::now();
    assert_eq!(shared.look(floor, PATIENCE, async || 3).await.seen, 3);
    assert_eq!(
        again.elapsed(),
        Duration::ZERO,
        "waited on the stalled look again"
    );
    drop(stalled);
}

/// A look sent before what a waiter asks for is not served to it, however recent.
#[tokio::test(start_paused = true)]
async fn a_look_sent_before_the_floor_is_not_served() {
    let shared = SharedLooks::<u32>::default();
    assert_eq!(shared.look(None, PATIENCE, async || 1).await.seen, 1);
    let floor = Some(Instant::now());
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(shared.look(floor, PATIENCE, async || 2).await.seen, 2);
    assert_eq!(shared.look(floor, PATIENCE, async || 3).await.seen, 2);
}

/// The registry forgets leases nobody waits for, without sweeping at every call when
/// many are waited for.
#[test]
fn the_registry_forgets_leases_nobody_waits_for() {
    let registry = Registry::<u32>::new();
    let store = StoreId(1);
    let held: Vec<_> = (0..SWEEP_AT)
        .map(|i| registry.of(store, &format!("held-{i}")))
        .collect();
    for i in 0..SWEEP_AT {
        drop(registry.of(store, &format!("dropped-{i}")));
    }
    assert!(registry.remembered() <= 2 * SWEEP_AT + 1);
    assert!(
        registry.remembered() > held.len() + 1,
        "swept at every call"
    );
    drop(held);
    for i in 0..4 * SWEEP_AT {
        drop(registry.of(store, &format!("late-{i}")));
    }
    assert!(
        registry.remembered() <= 2 * SWEEP_AT + 1,
        "{}",
        registry.remembered()
    );
}
