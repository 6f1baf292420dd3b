//! Leader election scenarios: shared helpers, failover times and self-demotion. The API
//! scenarios are in `election_api`, the chaos history in `election_chaos`.

use std::time::Duration;

use cql_election::{Campaign, DeposeReason, Election, ElectionEvent, Timing};
use cql_lease::FencingToken;
use cql_lease::memory::{Fault, Op, Times};
use futures::StreamExt;
use tokio::time::Instant;

use crate::backend::Backend;

/// Election timing used by the suite (the same as the lease suite's).
pub fn election_config() -> Timing {
    let lease = super::test_config();
    Timing {
        retry_period: Duration::from_millis(200),
        resolve_timeout: lease.lease_duration,
        ..lease
    }
}

/// An election on the backend's store with [`election_config`].
pub fn election(b: &dyn Backend, name: &str) -> Election {
    Election::new(b.store(), name, election_config()).expect("election")
}

/// Slack for real-time runs: scheduling and one local round trip.
pub fn slack(b: &dyn Backend) -> Duration {
    if b.simulated_time() {
        Duration::ZERO
    } else {
        Duration::from_millis(150)
    }
}

/// Waits for the next `Elected` of a campaign, skipping `LeaderChanged`.
pub async fn next_elected(
    c: &mut Campaign,
) -> (FencingToken, Instant, tokio_util::sync::CancellationToken) {
    loop {
        match c.next().await {
            Some(ElectionEvent::Elected { term, stop, .. }) => return (term, Instant::now(), stop),
            Some(ElectionEvent::LeaderChanged { .. }) => {}
            other => panic!("expected Elected, got {other:?}"),
        }
    }
}

/// The first of several campaigns to be elected: its index, term and arrival time.
pub async fn first_elected(campaigns: &mut [Campaign]) -> (usize, FencingToken, Instant) {
    let mut streams: Vec<_> = campaigns
        .iter_mut()
        .enumerate()
        .map(|(i, c)| Box::pin(async move { (i, next_elected(c).await) }))
        .collect();
    let ((i, (term, at, _)), _, _) = futures::future::select_all(streams.drain(..)).await;
    (i, term, at)
}

/// A leader's campaign, its term and stop token, and its followers' campaigns.
pub type LeaderAndFollowers = (
    Campaign,
    FencingToken,
    tokio_util::sync::CancellationToken,
    Vec<Campaign>,
);

/// A leader "a" elected on `name`, with followers "b" and "c" campaigning for `settle`.
pub async fn leader_and_two_followers(
    b: &dyn Backend,
    name: &str,
    settle: Duration,
) -> LeaderAndFollowers {
    leader_and_two_followers_of(b, &election(b, name), settle).await
}

/// [`leader_and_two_followers`] in the election `e`.
pub async fn leader_and_two_followers_of(
    b: &dyn Backend,
    e: &Election,
    settle: Duration,
) -> LeaderAndFollowers {
    let mut leader = e.campaign("a", None).expect("campaign");
    let (term, _, stop) = next_elected(&mut leader).await;
    let others = vec![
        e.campaign("b", None).expect("b"),
        e.campaign("c", None).expect("c"),
    ];
    b.sleep(settle).await;
    (leader, term, stop, others)
}

/// A crashed leader is replaced within the lease TTL plus skew plus one poll interval.
pub async fn crash_failover_is_bounded(b: &dyn Backend) {
    let (leader, term, stop, mut others) =
        leader_and_two_followers(b, "crash", election_config().renew_period * 2).await;
    let crashed_at = Instant::now();
    leader.abort().await;
    assert!(stop.is_cancelled());
    let (_, next, at) = first_elected(&mut others).await;
    assert!(next > term);
    let bound = election_config().takeover_bound() + election_config().retry_period + slack(b);
    assert!(
        at - crashed_at <= bound,
        "failover took {:?} > {bound:?}",
        at - crashed_at
    );
}

/// A resigned leader is replaced within one poll interval plus one LWT.
pub async fn resign_failover_is_one_poll(b: &dyn Backend) {
    let (mut leader, term, stop, mut others) =
        leader_and_two_followers(b, "resign", election_config().retry_period * 3).await;
    leader.resign().await.expect("resign");
    let resigned_at = Instant::now();
    assert!(stop.is_cancelled());
    assert!(
        matches!(leader.next().await, Some(ElectionEvent::Deposed { reason: DeposeReason::Resigned, term: t, stopped_at }) if t == term && stopped_at <= resigned_at)
    );
    assert!(
        leader.next().await.is_none(),
        "the campaign ends after resigning"
    );
    let (_, next, at) = first_elected(&mut others).await;
    assert!(next > term);
    let bound = election_config().retry_period + slack(b);
    assert!(
        at - resigned_at <= bound,
        "took {:?} > {bound:?}",
        at - resigned_at
    );
}

/// A leader whose renewals fail stops before its lease can expire; the next leader comes after.
pub async fn failing_leader_self_demotes_before_expiry(b: &dyn Backend) {
    let e = election(b, "self-demote");
    let mut leader = e.campaign("a", None).expect("campaign");
    let (term, _, stop) = next_elected(&mut leader).await;
    let mut follower = e.campaign("b", None).expect("b");
    b.sleep(election_config().renew_period * 2).await;
    b.inject(Some(Op::Renew), Fault::Unavailable, Times::Always);
    let leading = leader.leading();
    stop.cancelled().await;
    let stopped_at = Instant::now();
    assert!(
        !*leading.borrow(),
        "the leading watch flips before the token"
    );
    match leader.next().await {
        Some(ElectionEvent::Deposed {
            term: t,
            reason,
            stopped_at: at,
        }) => {
            assert_eq!(t, term);
            assert_eq!(reason, DeposeReason::StoreUnreachable);
            assert!(
                at <= stopped_at,
                "stopped_at is when the leader was told, before its token fired"
            );
        }
        other => panic!("expected Deposed, got {other:?}"),
    }
    let (next, elected_at, _) = next_elected(&mut follower).await;
    b.clear_faults();
    assert!(next > term);
    assert!(elected_at > stopped_at);
    leader.abort().await;
}
