//! Leader election scenarios: chaos history, failover times, observers, self-demotion.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_election::{
    Campaign, DeposeReason, Election, ElectionConfig, ElectionError, ElectionEvent,
};
use cql_lease::FencingToken;
use cql_lease::memory::{Fault, Op, Times};
use futures::StreamExt;
use tokio::time::Instant;

use crate::backend::Backend;
use crate::history::{Tenure, check_exclusive};

/// Election timing used by the suite (the same as the lease suite's).
pub fn election_config() -> ElectionConfig {
    let lease = super::test_config();
    ElectionConfig {
        lease_ttl: lease.ttl,
        renew_interval: lease.renew_interval,
        retry_interval: Duration::from_millis(200),
        max_clock_skew: lease.max_clock_skew,
    }
}

fn election(b: &dyn Backend, name: &str) -> Election {
    Election::new(b.store(), name, election_config()).expect("election")
}

/// Slack for real-time runs: scheduling and one local round trip.
fn slack(b: &dyn Backend) -> Duration {
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
async fn first_elected(campaigns: &mut [Campaign]) -> (usize, FencingToken, Instant) {
    let mut streams: Vec<_> = campaigns
        .iter_mut()
        .enumerate()
        .map(|(i, c)| Box::pin(async move { (i, next_elected(c).await) }))
        .collect();
    let ((i, (term, at, _)), _, _) = futures::future::select_all(streams.drain(..)).await;
    (i, term, at)
}

/// A leader "a" elected on `name`, with followers "b" and "c" campaigning for `settle`.
async fn leader_and_two_followers(
    b: &dyn Backend,
    name: &str,
    settle: Duration,
) -> (
    Campaign,
    FencingToken,
    tokio_util::sync::CancellationToken,
    Vec<Campaign>,
) {
    let e = election(b, name);
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
        leader_and_two_followers(b, "crash", election_config().renew_interval * 2).await;
    let crashed_at = Instant::now();
    leader.abort().await;
    assert!(stop.is_cancelled());
    let (_, next, at) = first_elected(&mut others).await;
    assert!(next > term);
    let bound = election_config().takeover_bound() + election_config().retry_interval + slack(b);
    assert!(
        at - crashed_at <= bound,
        "failover took {:?} > {bound:?}",
        at - crashed_at
    );
}

/// A resigned leader is replaced within one poll interval plus one LWT.
pub async fn resign_failover_is_one_poll(b: &dyn Backend) {
    let (mut leader, term, stop, mut others) =
        leader_and_two_followers(b, "resign", election_config().retry_interval * 3).await;
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
    let bound = election_config().retry_interval + slack(b);
    assert!(
        at - resigned_at <= bound,
        "took {:?} > {bound:?}",
        at - resigned_at
    );
}

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
            .campaign(candidate, Some(format!("{candidate}:80")))
            .expect("campaign");
        terms.push(next_elected(&mut c).await.0);
        b.sleep(election_config().retry_interval * 3).await;
        c.resign().await.expect("resign");
        b.sleep(election_config().retry_interval * 3).await;
    }
    let mut seen = Vec::new();
    while let Ok(Some(change)) =
        tokio::time::timeout(election_config().retry_interval * 2, observer.next()).await
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

/// A leader whose renewals fail stops before its lease can expire; the next leader comes after.
pub async fn failing_leader_self_demotes_before_expiry(b: &dyn Backend) {
    let e = election(b, "self-demote");
    let mut leader = e.campaign("a", None).expect("campaign");
    let (term, _, stop) = next_elected(&mut leader).await;
    let mut follower = e.campaign("b", None).expect("b");
    b.sleep(election_config().renew_interval * 2).await;
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

/// `proclaim` changes the leader's value within the same term; followers get `NotLeader`.
pub async fn proclaim_keeps_the_term(b: &dyn Backend) {
    let e = election(b, "proclaim");
    let mut leader = e.campaign("a", Some("old".into())).expect("campaign");
    let (term, ..) = next_elected(&mut leader).await;
    let follower = e.campaign("b", None).expect("b");
    leader.proclaim(Some("new".into())).await.expect("proclaim");
    let now = e.leader().await.expect("leader").expect("some");
    assert_eq!((now.term, now.value.as_deref()), (term, Some("new")));
    b.sleep(election_config().retry_interval).await;
    assert!(matches!(
        follower.proclaim(Some("x".into())).await,
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
    let bad = ElectionConfig {
        renew_interval: Duration::from_secs(30),
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
        e.campaign("a", Some("v".repeat(cql_lease::MAX_VALUE_LEN + 1))),
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

/// What the chaos driver does to the current leader.
#[derive(Debug, Clone, Copy)]
enum Chaos {
    Crash,
    Resign,
    Outage,
}

/// Five candidates, many terms, random crashes, resignations and store outages: the terms
/// never overlap, increase with time, and each holder stopped before the next was elected.
pub async fn terms_never_overlap_under_chaos(b: &dyn Backend) {
    let target = if b.simulated_time() { 100 } else { 8 };
    let e = election(b, "chaos");
    let history: Arc<Mutex<Vec<Tenure>>> = Arc::default();
    let (leader_tx, mut leader_rx) =
        tokio::sync::watch::channel::<Option<(usize, FencingToken)>>(None);
    let mut actions = Vec::new();
    let mut tasks = Vec::new();
    for slot in 0..5 {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Chaos>();
        actions.push(tx);
        let (e, history, leader_tx) = (e.clone(), Arc::clone(&history), leader_tx.clone());
        tasks.push(tokio::spawn(async move {
            // A term this leader never acted in (its stop token was cancelled before the
            // Elected event was handled) leaves no tenure. The stop instant is recorded just
            // before the token is cancelled, so a leader that saw the token uncancelled acted
            // at least until it started.
            let record = |term: FencingToken, since: Option<Instant>, end: Instant| {
                if let Some(start) = since {
                    history.lock().expect("history").push(Tenure {
                        holder: format!("c{slot}"),
                        token: term,
                        start,
                        end: end.max(start),
                    });
                }
            };
            loop {
                let mut campaign = e.campaign(&format!("c{slot}"), None).expect("campaign");
                // The term held now: (term, when this leader started acting, its stop token).
                let mut current: Option<(
                    FencingToken,
                    Option<Instant>,
                    tokio_util::sync::CancellationToken,
                )> = None;
                let mut last_term: Option<FencingToken> = None;
                let mut handle = |event: ElectionEvent, current: &mut Option<_>| match event {
                    ElectionEvent::Elected { term, stop, .. } => {
                        assert!(last_term.is_none_or(|t| term > t));
                        last_term = Some(term);
                        // A leader acts once it has handled Elected and only while `stop` is
                        // not cancelled. (The claim's send time is earlier than its effect:
                        // a claim queued while the previous leader resigned is legitimate.)
                        let since = (!stop.is_cancelled()).then(Instant::now);
                        *current = Some((term, since, stop));
                        leader_tx.send_replace(Some((slot, term)));
                    }
                    ElectionEvent::Deposed {
                        term, stopped_at, ..
                    } => {
                        let Some((t, start, stop)) = current.take() else {
                            panic!("Deposed without its Elected")
                        };
                        assert_eq!(t, term, "Deposed for another term than the Elected");
                        assert!(stop.is_cancelled());
                        record(term, start, stopped_at);
                    }
                    ElectionEvent::LeaderChanged { .. } => {}
                };
                loop {
                    tokio::select! {
                        event = campaign.next() => match event {
                            Some(event) => handle(event, &mut current),
                            None => return,
                        },
                        action = rx.recv() => match action {
                            Some(Chaos::Crash) => {
                                campaign.abort().await;
                                let crashed_at = Instant::now();
                                // Events the actor sent before the crash (a Deposed, say) come first.
                                while let Some(event) = campaign.next().await {
                                    handle(event, &mut current);
                                }
                                // A crashed process stops acting at the crash.
                                if let Some((term, start, stop)) = current.take() {
                                    assert!(stop.is_cancelled());
                                    record(term, start, crashed_at);
                                }
                                break;
                            }
                            Some(Chaos::Resign) | None => {
                                let done = action.is_none();
                                let _ = campaign.resign().await;
                                while let Some(event) = campaign.next().await {
                                    handle(event, &mut current);
                                }
                                assert!(current.is_none(), "resigned without Deposed");
                                if done {
                                    return;
                                }
                                break;
                            }
                            Some(Chaos::Outage) => {}
                        },
                    }
                }
                tokio::time::sleep(election_config().retry_interval * 2).await;
            }
        }));
    }
    let mut rng_state = 0x2545_f491_u64;
    let mut roll = move |n: u64| {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state % n
    };
    let mut last_term = None;
    while history.lock().expect("history").len() < target {
        let _ = leader_rx
            .wait_for(|l| l.is_some_and(|(_, t)| Some(t) != last_term))
            .await;
        let Some((slot, term)) = *leader_rx.borrow() else {
            continue;
        };
        last_term = Some(term);
        b.sleep(election_config().renew_interval * roll(4) as u32)
            .await;
        match roll(5) {
            0 | 1 => {
                let _ = actions[slot].send(Chaos::Crash);
            }
            2 | 3 => {
                let _ = actions[slot].send(Chaos::Resign);
            }
            _ if b.supports_faults() => {
                b.inject(Some(Op::Renew), Fault::Unavailable, Times::Always);
                b.sleep(election_config().lease_ttl + election_config().retry_interval)
                    .await;
                b.clear_faults();
                let _ = actions[slot].send(Chaos::Outage);
            }
            _ => {
                let _ = actions[slot].send(Chaos::Resign);
            }
        }
    }
    drop(actions);
    for task in tasks {
        task.await.expect("slot task");
    }
    b.sleep(Duration::from_millis(10)).await;
    let history = history.lock().expect("history").clone();
    assert!(history.len() >= target, "only {} terms", history.len());
    if let Err(violation) = check_exclusive(&history) {
        panic!("{}: {violation}", b.name());
    }
}
