//! Leader election scenarios of the public surface: observers, proclaim, input checks,
//! shutdown.

use std::time::Duration;

use cql_election::{Election, ElectionError, ElectionEvent, Timing};
use cql_lease::memory::{Fault, Op, Times};
use futures::StreamExt;
use tokio::time::Instant;

use super::election::{election, election_config, next_elected, slack};
use crate::backend::Backend;

/// Observers see each leader once, in term order.
pub async fn observers_see_every_change_in_order(b: &dyn Backend) {
    let e = election(b, "observed");
    let mut observer = e.observe();
    assert_eq!(
        observer.next().await,
        Some(None),
        "first the current state: no leader"
    );
    let mut terms = Vec::new();
    for candidate in ["a", "b", "c", "d"] {
        let mut c = e
            .campaign(candidate, Some(format!("{candidate}:80").as_str()))
            .expect("campaign");
        terms.push(next_elected(&mut c).await.0);
        b.sleep(election_config().retry_period * 3).await;
        c.resign().await.expect("resign");
        b.sleep(election_config().retry_period * 3).await;
    }
    let mut seen = Vec::new();
    while let Ok(Some(change)) =
        tokio::time::timeout(election_config().retry_period * 2, observer.next()).await
    {
        seen.push(change);
    }
    let seen_terms: Vec<_> = seen.iter().flatten().map(|l| l.term).collect();
    assert_eq!(seen_terms, terms, "every leader once, in order: {seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0] != w[1]),
        "no duplicates: {seen:?}"
    );
    let values: Vec<_> = seen
        .iter()
        .flatten()
        .map(|l| l.value.clone().unwrap_or_default())
        .collect();
    assert_eq!(values, ["a:80", "b:80", "c:80", "d:80"]);
}

/// `proclaim` changes the leader's value within the same term; followers get `NotLeader`.
pub async fn proclaim_keeps_the_term(b: &dyn Backend) {
    let e = election(b, "proclaim");
    let mut leader = e.campaign("a", Some("old")).expect("campaign");
    let (term, ..) = next_elected(&mut leader).await;
    let follower = e.campaign("b", None).expect("b");
    leader.proclaim(Some("new")).await.expect("proclaim");
    let now = e.leader().await.expect("leader").expect("some");
    assert_eq!((now.term, now.value.as_deref()), (term, Some("new")));
    b.sleep(election_config().retry_period).await;
    assert!(matches!(
        follower.proclaim(Some("x")).await,
        Err(ElectionError::NotLeader)
    ));
    leader.resign().await.expect("resign");
}

/// Bad names, candidates and timing are typed errors, and nothing reaches the store.
pub async fn bad_input_is_rejected(b: &dyn Backend) {
    let before = b.calls();
    assert!(matches!(
        Election::new(b.store(), "", election_config()),
        Err(ElectionError::InvalidArgument(_))
    ));
    let bad = Timing {
        renew_period: Duration::from_secs(30),
        ..election_config()
    };
    assert!(matches!(
        Election::new(b.store(), "x", bad),
        Err(ElectionError::InvalidArgument(_))
    ));
    let e = election(b, "bad");
    assert!(matches!(
        e.campaign("", None),
        Err(ElectionError::InvalidArgument(_))
    ));
    assert!(matches!(
        e.campaign("a\tb", None),
        Err(ElectionError::InvalidArgument(_))
    ));
    assert!(matches!(
        e.campaign("a", Some("v".repeat(cql_lease::MAX_VALUE_LEN + 1).as_str())),
        Err(ElectionError::InvalidArgument(_))
    ));
    assert_eq!(b.calls(), before);
}

/// Resigning and dropping leave no lease held and no task running.
pub async fn shutdown_is_clean(b: &dyn Backend) {
    let e = election(b, "shutdown");
    let mut a = e.campaign("a", None).expect("campaign");
    next_elected(&mut a).await;
    a.resign().await.expect("resign");
    assert_eq!(
        e.leader().await.expect("leader"),
        None,
        "no lease left after resign"
    );
    assert!(
        matches!(a.proclaim(None).await, Err(ElectionError::CampaignEnded)),
        "the actor is gone"
    );
    let mut d = e.campaign("d", None).expect("campaign");
    next_elected(&mut d).await;
    drop(d);
    let deadline = Instant::now() + Duration::from_secs(2);
    while e.leader().await.expect("leader").is_some() {
        assert!(
            Instant::now() < deadline,
            "dropping the campaign did not release"
        );
        b.sleep(Duration::from_millis(20)).await;
    }
}

/// The term's deadline watch (the `Elected` event's and the handle's) starts at
/// `must_stop_by`, moves forward with each renewal, stops moving when renewals fail, and the
/// term's token fires by its last value; after the term the handle has none.
pub async fn term_deadline_follows_renewals(b: &dyn Backend) {
    let e = election(b, "deadline");
    let mut c = e.campaign("a", None).expect("campaign");
    let (first, mut deadline) = loop {
        match c.next().await {
            Some(ElectionEvent::Elected {
                must_stop_by,
                deadline,
                ..
            }) => break (must_stop_by, deadline),
            Some(ElectionEvent::LeaderChanged { .. }) => {}
            other => panic!("expected Elected, got {other:?}"),
        }
    };
    assert_eq!(*deadline.borrow_and_update(), first);
    let mut from_handle = c.term_deadline().expect("leading");
    tokio::time::timeout(election_config().renew_period * 3, deadline.changed())
        .await
        .expect("a renewal within three renew intervals")
        .expect("the watch lives while leading");
    let renewed = *deadline.borrow_and_update();
    assert!(renewed > first, "a renewal moves the deadline forward");
    assert_eq!(*from_handle.borrow_and_update(), renewed, "one watch");

    b.inject(Some(Op::Renew), Fault::Unavailable, Times::Always);
    let stop = c.cancellation_token().expect("leading");
    stop.cancelled().await;
    let stopped = Instant::now();
    let last = *deadline.borrow();
    assert!(
        stopped <= last + slack(b),
        "the token fired {:?} after the deadline",
        stopped - last
    );
    loop {
        match c.next().await {
            Some(ElectionEvent::Deposed { .. }) => break,
            Some(ElectionEvent::LeaderChanged { .. }) => {}
            other => panic!("expected Deposed, got {other:?}"),
        }
    }
    assert!(c.term_deadline().is_none(), "no term, no deadline");
    b.clear_faults();
    c.abort().await;
}
