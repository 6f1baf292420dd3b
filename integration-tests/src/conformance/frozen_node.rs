//! Availability with one node of three frozen (a paused process: accepted connections, no
//! answers) for longer than the lease TTL, quorum intact: holders keep their claims, nobody
//! waits on the frozen node past the request timeout, and a crashed leader is replaced in
//! bounded time. The same for a node that is down (connections refused). Wire-only: it needs
//! the CQL test server's node faults.

use std::sync::Arc;
use std::time::Duration;

use cql_lease::LeaseStore as _;
use cql_lease::namespace::Namespace;
use cql_lease::scylla::{ScyllaLeaseStore, ScyllaOptions};
use cql_test_server::NodeFault;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::host_filter::AllowListHostFilter;
use tokio::time::Instant;

use super::election::{
    election_config, first_elected, leader_and_two_followers, leader_and_two_followers_of, slack,
};
use super::queue::{queue, queue_config, queue_with};
use super::{client, test_config};
use crate::backend::Backend;
use crate::wire_backend::WireBackend;

pub use super::frozen_queue::worker_keeps_claiming_through_a_frozen_node;

/// The node frozen in every scenario (any one of three would do: LWTs rotate over all).
const FROZEN: usize = 1;

/// The lease timing of the guards and claims kept through a freeze. With the suite's 2 s
/// TTL a renewal cut on the frozen node (at a third of the 1 s validity) leaves one resend
/// about 300 ms, which a loaded machine's round trips can eat; a 4 s TTL gives the library
/// its own margin (a cut at 1 s, 2 s left), as a cluster's longer TTLs do.
pub(crate) fn kept_config() -> cql_lease::Timing {
    cql_lease::Timing {
        lease_duration: Duration::from_secs(4),
        renew_period: Duration::from_millis(800),
        ..test_config()
    }
}

/// An election whose leader keeps its term through a freeze: [`kept_config`]'s timing.
fn kept_election(b: &WireBackend, name: &str) -> cql_election::Election {
    let kept = kept_config();
    let config = cql_election::Timing {
        lease_duration: kept.lease_duration,
        renew_period: kept.renew_period,
        ..election_config()
    };
    cql_election::Election::new(b.store(), name, config).expect("election")
}

/// How long the node stays frozen: half again the TTL of the guards kept through it.
fn freeze_length() -> Duration {
    kept_config().lease_duration * 3 / 2
}

/// Freezes [`FROZEN`] for [`freeze_length`], checking `still_held` every 50 ms and timing a
/// linearizable read of `name` each time. Returns (the slowest read, how many were cut by
/// the request timeout).
async fn through_a_freeze(
    b: &WireBackend,
    namespace: Namespace,
    name: &str,
    what: &str,
    still_held: impl Fn() -> bool,
) -> (Duration, usize) {
    let c = client(b).in_namespace(namespace);
    b.server.node_fault(FROZEN, NodeFault::Freeze);
    let until = Instant::now() + freeze_length();
    let (mut slowest, mut cut) = (Duration::ZERO, 0);
    while Instant::now() < until {
        let sent = Instant::now();
        if c.holder(name).await.is_err() {
            cut += 1;
        }
        slowest = slowest.max(sent.elapsed());
        assert!(
            still_held(),
            "{}: {what} lost while one node of three was frozen ({:?} into the freeze)",
            b.name(),
            freeze_length() - (until - Instant::now().min(until))
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    b.server.heal(FROZEN);
    (slowest, cut)
}

/// No read waited on the frozen node past its deadline, and some request did reach it (else
/// the scenario proved nothing). Which one varies: once a request was cut there (a renewal,
/// or one of these reads), the others avoid the node.
fn assert_bounded_waits(b: &WireBackend, slowest: Duration, cut: usize) {
    let swallowed = b.server.requests_frozen_on(FROZEN);
    // The library cuts a read at the request timeout (a third of the validity) so that its
    // answer can still be acted on; a loaded machine's timers and round trips add to that,
    // but a read that outlived the whole validity was not cut. Unbounded, it would wait
    // for the driver's 2 s timeout or the whole freeze.
    let bound = test_config().renew_deadline();
    assert!(
        slowest <= bound,
        "{}: a read waited {slowest:?} on the frozen node (bound {bound:?})",
        b.name()
    );
    assert!(
        swallowed > 0,
        "{}: no request reached the frozen node ({cut} reads cut): the scenario did not test \
         anything",
        b.name()
    );
}

/// A leader keeps its term through the freeze, and the followers stay followers.
pub async fn leader_keeps_its_term_through_a_frozen_node(b: &WireBackend) {
    let e = kept_election(b, "frozen-leader");
    let (leader, term, stop, others) =
        leader_and_two_followers_of(b, &e, kept_config().renew_period).await;
    let (slowest, cut) = through_a_freeze(
        b,
        Namespace::Election,
        "frozen-leader",
        "the leader's term",
        || leader.is_leader() && !stop.is_cancelled(),
    )
    .await;
    assert_bounded_waits(b, slowest, cut);
    assert!(
        others.iter().all(|c| !c.is_leader()),
        "{}: a follower took over term {term:?} from a live leader",
        b.name()
    );
}

/// A leader crashing while a node is frozen is replaced within the usual bound (TTL plus
/// skew plus one retry interval, plus the suite's scheduling slack): the followers' requests
/// cut on the frozen node during the takeover window leave it suspect, so their claims after
/// the expiry, and the read-backs of lost answers, go to the live nodes.
///
/// The followers also meet the frozen node at most once each (the test server counts the
/// requests it swallowed).
///
/// The store counts a TTL in whole seconds (as Cassandra does), so the lease may lapse up to
/// a second before `TTL` after the crash and the bound from the crash alone hides a slow
/// takeover. So an observer that cannot reach the frozen node also times the moment the
/// lease is free, and the new leader must follow it within one retry interval plus slack.
pub async fn crashed_leader_is_replaced_in_bound_with_a_frozen_node(b: &WireBackend) {
    crash_failover_with(b, NodeFault::Freeze, "frozen-crash").await;
}

/// The same with a node down (connections refused, its open ones closed).
pub async fn crashed_leader_is_replaced_in_bound_with_a_down_node(b: &WireBackend) {
    crash_failover_with(b, NodeFault::Down, "down-crash").await;
}

/// A leader keeps its term while a node is down for longer than the lease TTL, the
/// followers stay followers, and the healed node serves again.
pub async fn leader_keeps_its_term_through_a_down_node(b: &WireBackend) {
    let e = kept_election(b, "down-leader");
    let (leader, term, stop, others) =
        leader_and_two_followers_of(b, &e, kept_config().renew_period).await;
    b.server.node_fault(FROZEN, NodeFault::Down);
    let until = Instant::now() + freeze_length();
    while Instant::now() < until {
        assert!(
            leader.is_leader() && !stop.is_cancelled(),
            "{}: the leader lost term {term:?} while one node of three was down",
            b.name()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    b.server.heal(FROZEN);
    assert!(
        others.iter().all(|c| !c.is_leader()),
        "{}: a follower took over term {term:?} from a live leader",
        b.name()
    );
    // The driver reconnects to the healed node in the background.
    let before = b.server.requests_on(FROZEN);
    let c = client(b).in_namespace(Namespace::Election);
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.server.requests_on(FROZEN) == before && Instant::now() < deadline {
        let _ = c.holder("down-leader").await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        b.server.requests_on(FROZEN) > before,
        "{}: the healed node got no request within 10 s",
        b.name()
    );
    assert!(leader.is_leader(), "{}: the leader lost its term", b.name());
}

/// A leader crashing while node [`FROZEN`] is under `fault`: see
/// [`crashed_leader_is_replaced_in_bound_with_a_frozen_node`].
async fn crash_failover_with(b: &WireBackend, fault: NodeFault, name: &'static str) {
    let (leader, term, _stop, mut others) =
        leader_and_two_followers(b, name, election_config().renew_period * 2).await;
    let observer = healthy_observer(b).await;
    b.server.node_fault(FROZEN, fault);
    let crashed_at = Instant::now();
    leader.abort().await;
    let row = Namespace::Election.stored_name(name).into_owned();
    let freed = tokio::spawn(async move {
        loop {
            match observer.peek(&row).await {
                Ok(Some(lease)) if lease.token == term => {}
                _ => return Instant::now(),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let elected = tokio::time::timeout(
        election_config().takeover_bound() * 5,
        first_elected(&mut others),
    )
    .await;
    b.server.heal(FROZEN);
    let Ok((_, next, at)) = elected else {
        panic!(
            "{}: no new leader within {:?} of the crash with a node {fault:?}",
            b.name(),
            election_config().takeover_bound() * 5
        );
    };
    assert!(next > term);
    let free_at = freed.await.expect("observer");
    let swallowed = b.server.requests_frozen_on(FROZEN);
    let bound = election_config().takeover_bound() + election_config().retry_period + slack(b);
    let after_free = election_config().retry_period + slack(b);
    eprintln!(
        "{}: failover with a node {fault:?} took {:?} (bound {bound:?}), {:?} after the \
         lease was free (bound {after_free:?}); {swallowed} requests went to the frozen node",
        b.name(),
        at - crashed_at,
        at.saturating_duration_since(free_at)
    );
    assert!(
        at - crashed_at <= bound,
        "{}: failover with a node {fault:?} took {:?} > {bound:?}",
        b.name(),
        at - crashed_at
    );
    // Each follower has one request in flight at a time: once one request was cut on the
    // frozen node it is avoided, so each follower meets it at most once (without the
    // avoidance, one request in three keeps landing there).
    let followers = others.len() as u64;
    assert!(
        fault != NodeFault::Freeze || swallowed <= followers,
        "{}: {swallowed} requests went to the frozen node (at most one per follower expected)",
        b.name()
    );
    assert!(
        at.saturating_duration_since(free_at) <= after_free,
        "{}: the new leader came {:?} after the lease was free (> {after_free:?})",
        b.name(),
        at.saturating_duration_since(free_at)
    );
}

/// A lease store on a session of its own that only knows the nodes other than [`FROZEN`]:
/// it sees the lease's state without ever waiting on the frozen node.
async fn healthy_observer(b: &WireBackend) -> ScyllaLeaseStore {
    let healthy: Vec<_> = (0..b.server.addresses().len())
        .filter(|&i| i != FROZEN)
        .map(|i| b.server.addresses()[i])
        .collect();
    let session = SessionBuilder::new()
        .known_node_addr(healthy[0])
        .host_filter(Arc::new(
            AllowListHostFilter::new(healthy).expect("host filter"),
        ))
        .fetch_schema_metadata(false)
        .fetch_full_schema_metadata(false)
        .build()
        .await
        .expect("observer session");
    let options = ScyllaOptions {
        keyspace: "coordination".into(),
        table: "leases".into(),
        ..ScyllaOptions::default()
    };
    ScyllaLeaseStore::new(Arc::new(session), options)
        .await
        .expect("observer store")
}

/// A worker's claim stays held through the freeze (its heartbeats go around the frozen
/// node), and completes afterwards.
pub async fn worker_keeps_its_claim_through_a_frozen_node(b: &WireBackend) {
    let config = cql_workqueue::QueueConfig {
        timing: kept_config(),
        ..queue_config()
    };
    let q = queue_with(b, "frozen-worker", config);
    q.enqueue("work").await.expect("enqueue");
    let job = q.claim("w").await.expect("claim").expect("a job");
    let token = job.cancellation_token();
    let (slowest, cut) = through_a_freeze(
        b,
        Namespace::Lease,
        "frozen-worker",
        "the worker's claim",
        || job.is_held() && !token.is_cancelled(),
    )
    .await;
    assert_bounded_waits(b, slowest, cut);
    job.complete().await.expect("complete after the freeze");
}

/// A worker crashing while a node is frozen: its item is claimed by another worker within
/// the plain bound (claim TTL plus skew plus one retry interval, plus the suite's slack),
/// as a crashed leader is replaced. The other worker polls every 50 ms from the crash on,
/// so its requests meet the frozen node early, and the suspect mark keeps its claims after
/// the expiry away from it.
pub async fn crashed_worker_item_is_reclaimed_in_bound_with_a_frozen_node(b: &WireBackend) {
    let q = queue(b, "frozen-crash-worker");
    q.enqueue("work").await.expect("enqueue");
    let first = q.claim("a").await.expect("claim").expect("a job");
    let token = first.token();
    b.server.node_fault(FROZEN, NodeFault::Freeze);
    let crashed_at = first.abandon();
    let timing = test_config();
    let reclaimed = tokio::time::timeout(timing.takeover_bound() * 5, async {
        loop {
            if let Ok(Some(job)) = q.claim("b").await {
                return (job, Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    b.server.heal(FROZEN);
    let (second, at) = reclaimed.unwrap_or_else(|_| {
        panic!(
            "{}: the crashed worker's item was not claimed within {:?} with a node frozen",
            b.name(),
            timing.takeover_bound() * 5
        )
    });
    assert!(second.token() > token);
    let swallowed = b.server.requests_frozen_on(FROZEN);
    let bound = timing.takeover_bound() + timing.retry_period + slack(b);
    eprintln!(
        "{}: the crashed worker's item was claimed again after {:?} (bound {bound:?}); {swallowed} \
         requests went to the frozen node",
        b.name(),
        at - crashed_at
    );
    assert!(
        at - crashed_at <= bound,
        "{}: the crashed worker's item was claimed again after {:?} > {bound:?}",
        b.name(),
        at - crashed_at
    );
    assert!(
        swallowed > 0,
        "{}: no request reached the frozen node: the scenario did not test anything",
        b.name()
    );
    second.complete().await.expect("complete");
}

mod locks;

pub use locks::{
    bakery_lock_guard_is_kept_through_a_frozen_node,
    crashed_lock_holder_is_replaced_in_bound_with_a_frozen_node,
    fair_lock_guard_is_kept_through_a_frozen_node, lock_guard_is_kept_through_a_frozen_node,
};
