//! The lock scenarios with a frozen node: a lease lock's, a fair lock's and a bakery lock's
//! guard kept through the freeze, and a crashed lock holder replaced in bound.

use std::sync::Arc;
use std::time::Duration;

use cql_lease::cells::CellStore;
use cql_lease::cells::scylla::{CellOptions, ScyllaCellStore};
use cql_lease::lock::{BakeryLock, FairLock, LeaseLock, Lock, LockOptions};
use cql_lease::namespace::Namespace;
use cql_lease::scylla::ScyllaOptions;
use cql_test_server::NodeFault;
use tokio::time::Instant;

use super::{FROZEN, assert_bounded_waits, kept_config, through_a_freeze};
use crate::backend::Backend;
use crate::conformance::election::slack;
use crate::conformance::{client, client_with, test_config};
use crate::wire_backend::WireBackend;
use crate::wire_lock_backend::register_cells;

/// A lease lock's guard stays held through the freeze: its renewals go around the frozen
/// node.
pub async fn lock_guard_is_kept_through_a_frozen_node(b: &WireBackend) {
    let lock = LeaseLock::new(client_with(b, kept_config()), "w").expect("lease lock");
    let guard = lock
        .lock("frozen-lock", Some(Duration::from_secs(5)))
        .await
        .expect("lock");
    let token = guard.cancellation_token();
    let (slowest, cut) =
        through_a_freeze(b, Namespace::Lock, "frozen-lock", "the lock guard", || {
            guard.is_held() && !token.is_cancelled()
        })
        .await;
    assert_bounded_waits(b, slowest, cut);
    guard.release().await.expect("release after the freeze");
}

/// A lease lock's holder crashing while a node is frozen: another contender waiting in
/// `lock` gets it within the plain bound (TTL plus skew plus one retry interval, plus the
/// suite's slack).
pub async fn crashed_lock_holder_is_replaced_in_bound_with_a_frozen_node(b: &WireBackend) {
    let name = "frozen-lock-crash";
    let first = LeaseLock::new(client(b), "a").expect("lease lock");
    let guard = first
        .lock(name, Some(Duration::from_secs(5)))
        .await
        .expect("lock");
    let token = guard.token();
    let second = LeaseLock::new(client(b), "b").expect("lease lock");
    let timing = test_config();
    b.server.node_fault(FROZEN, NodeFault::Freeze);
    let crashed_at = guard.abandon();
    let next = second.lock(name, Some(timing.takeover_bound() * 5)).await;
    let at = Instant::now();
    b.server.heal(FROZEN);
    let next = next.unwrap_or_else(|e| {
        panic!(
            "{}: no new holder after the crash with a node frozen: {e}",
            b.name()
        )
    });
    assert!(next.token() > token);
    let swallowed = b.server.requests_frozen_on(FROZEN);
    let bound = timing.takeover_bound() + timing.retry_period + slack(b);
    eprintln!(
        "{}: the lock changed hands {:?} after the crash (bound {bound:?}); {swallowed} \
         requests went to the frozen node",
        b.name(),
        at - crashed_at
    );
    assert!(
        at - crashed_at <= bound,
        "{}: the lock changed hands {:?} after the crash > {bound:?}",
        b.name(),
        at - crashed_at
    );
    // The waiting contender has two reads in flight at a time (the lease and its waiting
    // line): once they were cut on the frozen node, the node is avoided for `SUSPECT_FOR` of
    // their timeouts, which a slowed machine may see end once within the takeover (without
    // the avoidance a waiter meets the node again at every few polls, dozens of times).
    assert!(
        swallowed <= 3,
        "{}: {swallowed} requests went to the frozen node (at most three expected)",
        b.name()
    );
    next.release().await.expect("release after the freeze");
}

/// A fair lock's guard stays held through the freeze, and the lock still excludes others.
pub async fn fair_lock_guard_is_kept_through_a_frozen_node(b: &WireBackend) {
    plain_guard_through_a_freeze(b, "fair-lock", |cells, options| {
        Arc::new(FairLock::new(cells, options).expect("fair lock"))
    })
    .await;
}

/// A bakery lock's guard stays held through the freeze, and the lock still excludes others.
pub async fn bakery_lock_guard_is_kept_through_a_frozen_node(b: &WireBackend) {
    plain_guard_through_a_freeze(b, "bakery-lock", |cells, options| {
        Arc::new(BakeryLock::new(cells, options).expect("bakery lock"))
    })
    .await;
}

/// The cell store on the cluster with the library's defaults (replication 3, QUORUM, no
/// driver-side timeout: the lock timing bounds every request).
async fn cluster_cells(b: &WireBackend) -> Arc<dyn CellStore> {
    register_cells(&b.server, "coordination", "lock_cells");
    let session = Arc::new(b.server.session().await);
    let options = CellOptions {
        location: ScyllaOptions {
            keyspace: "coordination".into(),
            table: "lock_cells".into(),
            ..CellOptions::default().location
        },
        ..CellOptions::default()
    };
    ScyllaCellStore::create_schema(&session, &options)
        .await
        .expect("cell schema");
    Arc::new(
        ScyllaCellStore::new(session, options)
            .await
            .expect("prepare cells"),
    )
}

/// A plain-cell lock guard (its renewal rewrites each of its cells, each write bounded and
/// sent again elsewhere on its own) is kept through the freeze; another contender is refused
/// during and after it, and gets the lock once the guard is released.
async fn plain_guard_through_a_freeze(
    b: &WireBackend,
    what: &str,
    make: impl Fn(Arc<dyn CellStore>, LockOptions) -> Arc<dyn Lock>,
) {
    let options = LockOptions {
        timing: kept_config(),
        ..LockOptions::default()
    };
    let cells = cluster_cells(b).await;
    let (mine, other) = (make(cells.clone(), options), make(cells, options));
    let name = format!("frozen-{what}");
    let guard = mine
        .lock(&name, Some(Duration::from_secs(5)))
        .await
        .expect("lock");
    let token = guard.cancellation_token();
    b.server.node_fault(FROZEN, NodeFault::Freeze);
    let during = other.try_lock(&name).await;
    assert!(
        matches!(during, Ok(None)),
        "{}: {what}: another contender got {during:?} while the guard was held and a node frozen",
        b.name()
    );
    let (slowest, cut) = through_a_freeze(b, Namespace::Lease, &name, what, || {
        guard.is_held() && !token.is_cancelled()
    })
    .await;
    assert_bounded_waits(b, slowest, cut);
    let after = other.try_lock(&name).await;
    assert!(
        matches!(after, Ok(None)) && guard.is_held(),
        "{}: {what}: after the freeze another contender got {after:?} (guard held: {})",
        b.name(),
        guard.is_held()
    );
    guard.release().await.expect("release after the freeze");
    let next = other
        .lock(&name, Some(Duration::from_secs(5)))
        .await
        .expect("the lock is free once released");
    next.release().await.expect("release");
}
