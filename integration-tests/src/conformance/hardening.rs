//! Lease and election deadlines under faults: nothing is handed out past its deadline,
//! never-sent errors are not read back, own claims are not reported as leaders.

use std::time::Duration;

use cql_election::{Election, ElectionEvent, Timing};
use cql_lease::memory::{Fault, Op, Times};
use cql_lease::{LeaseError, LossReason, StoreError, TryAcquire};
use futures::StreamExt;
use tokio::time::Instant;

use super::election::{election_config, next_elected, slack};
use super::{client, test_config};
use crate::backend::Backend;

/// An acquire answered after the holder's validity is not handed out: the caller gets
/// `Lost { Expired }` and the claim is given back at once, not after its TTL.
pub async fn late_acquire_answer_is_given_back(b: &dyn Backend) {
    let c = super::client_with(b, super::patient_config());
    let late = test_config().renew_deadline() + Duration::from_millis(50);
    b.inject(Some(Op::TryAcquire), Fault::Latency(late), Times::Next(1));
    match c.try_acquire("late-answer", "alice", None).await {
        Err(LeaseError::Lost {
            reason: LossReason::Expired,
            ..
        }) => {}
        Ok(TryAcquire::Acquired(lease)) => panic!(
            "{}: a lease past its deadline was handed out (valid: {})",
            b.name(),
            lease.is_valid()
        ),
        other => panic!("{}: expected Lost(Expired), got {other:?}", b.name()),
    }
    b.sleep(test_config().retry_period).await;
    assert!(
        matches!(
            c.try_acquire("late-answer", "bob", None).await,
            Ok(TryAcquire::Acquired(_))
        ),
        "{}: the late claim was given back well before its TTL",
        b.name()
    );
}

/// While every claim is answered after its deadline, the candidate is never `Elected` (and
/// so never handed a live `stop` token past its deadline); once answers are timely it is.
pub async fn late_election_win_is_not_elected(b: &dyn Backend) {
    let config = Timing {
        request_timeout: Some(election_config().renew_deadline() * 2),
        ..election_config()
    };
    let e = Election::new(b.store(), "late-win", config).expect("election");
    let late = election_config().renew_deadline() + Duration::from_millis(50);
    b.inject(Some(Op::TryAcquire), Fault::Latency(late), Times::Always);
    let mut c = e.campaign("a", None).expect("campaign");
    let until = Instant::now() + late * 3;
    while let Ok(event) = tokio::time::timeout_at(until, c.next()).await {
        if let Some(ElectionEvent::Elected {
            stop, must_stop_by, ..
        }) = event
        {
            panic!(
                "{}: Elected for a late claim (stop cancelled: {}, past deadline: {})",
                b.name(),
                stop.is_cancelled(),
                Instant::now() >= must_stop_by
            );
        }
    }
    assert!(!c.is_leader());
    b.clear_faults();
    let (_, at, stop) = next_elected(&mut c).await;
    assert!(!stop.is_cancelled() && c.is_leader());
    assert!(at < Instant::now() + election_config().lease_duration);
    c.resign().await.expect("resign");
}

/// A request that never left the client (no connection, no node) is a definite failure:
/// no read-back, so a poll during an outage costs one attempt, not `resolve_timeout`.
pub async fn never_sent_errors_are_not_read_back(b: &dyn Backend) {
    // Over the wire the injected `Unavailable` is a server answer to a sent LWT, which is
    // rightly an unknown outcome (the driver-side cases are unit-tested in cql-lease): this
    // scenario belongs to the embedded backend only, and is not in `lease_suite!`.
    assert!(
        b.simulated_time(),
        "{}: never-sent errors can only be injected on the embedded backend",
        b.name()
    );
    let c = client(b);
    b.inject(None, Fault::Unavailable, Times::Always);
    let before = b.calls();
    let started = Instant::now();
    let err = c
        .try_acquire("outage", "alice", None)
        .await
        .expect_err("unavailable");
    let calls = b.calls().since(before);
    assert!(
        matches!(
            err,
            LeaseError::Store {
                source: StoreError::Unavailable(_),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!((calls.try_acquire, calls.read), (1, 0), "{calls:?}");
    assert!(started.elapsed() < test_config().resolve_timeout);
    b.clear_faults();
}

/// A candidate whose lost term's claim outlives what it knows (a renewal applied but its
/// answer was lost, the read-back failing) never reports itself as another leader while that
/// claim holds the lease, and is elected again when the background release frees it,
/// `ttl - validity` after the deadline (the margin a slow holder keeps), not when the late
/// renewal's TTL runs out.
pub async fn own_lost_term_is_freed_not_reported(b: &dyn Backend) {
    let config = Timing {
        lease_duration: Duration::from_secs(4),
        renew_period: Duration::from_millis(400),
        retry_period: Duration::from_millis(200),
        max_clock_skew: Duration::from_secs(1),
        resolve_timeout: Duration::from_secs(4),
        request_timeout: None,
    };
    let margin = config.lease_duration - config.renew_deadline();
    let e = Election::new(b.store(), "orphan", config).expect("election");
    let mut c = e.campaign("a", None).expect("campaign");
    let (term, _, _) = next_elected(&mut c).await;
    let deadline = c.term_deadline().expect("a leader has a term deadline");
    // The next renewal applies and its answer is lost; every later one fails, and so does
    // every read-back: the store keeps the claim past what the candidate knows.
    b.inject(Some(Op::Renew), Fault::TimeoutAfterApply, Times::Next(1));
    b.inject(Some(Op::Renew), Fault::Unavailable, Times::Always);
    b.inject(Some(Op::Read), Fault::Unavailable, Times::Always);
    match c.next().await {
        Some(ElectionEvent::Deposed { term: t, .. }) if t == term => {}
        other => panic!("expected Deposed, got {other:?}"),
    }
    b.clear_faults();
    // The watch keeps the lost term's last deadline.
    let deposed_at = *deadline.borrow();
    let freed_at = deposed_at + margin;
    // The late renewal holds the claim until about `renew_interval` after that.
    let bound = freed_at + config.retry_period + slack(b);
    loop {
        match tokio::time::timeout_at(bound, c.next()).await {
            Ok(Some(ElectionEvent::LeaderChanged { leader })) => {
                let me = leader.as_ref().is_some_and(|l| l.candidate == "a");
                assert!(
                    !me,
                    "{}: reported its own claim as another leader",
                    b.name()
                );
            }
            Ok(Some(ElectionEvent::Elected { term: next, .. })) => {
                assert!(next > term);
                // The store counts a TTL exactly only on simulated time.
                assert!(
                    !b.simulated_time() || Instant::now() >= freed_at,
                    "{}: elected again {:?} after the deadline, within the {margin:?} margin",
                    b.name(),
                    Instant::now() - deposed_at
                );
                break;
            }
            Ok(other) => panic!("expected Elected, got {other:?}"),
            Err(_) => panic!(
                "{}: not elected within {:?} of the deadline: the lost term's claim was \
                 not released",
                b.name(),
                bound - deposed_at
            ),
        }
    }
    c.resign().await.expect("resign");
}

/// While a leader is healthy, the election's Paxos load is its renewals alone: followers and
/// observers poll with plain reads, whatever their number.
pub async fn idle_election_costs_only_renewals(b: &dyn Backend) {
    let config = election_config();
    let e = Election::new(b.store(), "idle-cost", config).expect("election");
    let mut leader = e.campaign("leader", None).expect("campaign");
    next_elected(&mut leader).await;
    let followers: Vec<_> = (0..4)
        .map(|i| e.campaign(&format!("f{i}"), None).expect("campaign"))
        .collect();
    let observers: Vec<_> = (0..3).map(|_| e.observe()).collect();
    b.sleep(config.retry_period * 2).await;
    let before = b.calls();
    let periods = 5;
    b.sleep(config.renew_period * periods).await;
    let calls = b.calls().since(before);
    assert_eq!(
        (calls.try_acquire, calls.read, calls.release),
        (0, 0, 0),
        "{}: idle followers and observers sent Paxos rounds: {calls:?}",
        b.name()
    );
    assert!(
        calls.renew.abs_diff(u64::from(periods)) <= 1,
        "{}: {calls:?}",
        b.name()
    );
    drop((followers, observers));
    leader.resign().await.expect("resign");
}
