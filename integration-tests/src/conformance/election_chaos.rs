//! Leader election under chaos: random crashes, resignations and outages, checked against
//! the history of terms.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_election::ElectionEvent;
use cql_lease::FencingToken;
use cql_lease::memory::{Fault, Op, Times};
use futures::StreamExt;
use tokio::time::Instant;

use super::election::{election, election_config};
use crate::backend::Backend;
use crate::history::{Tenure, check_exclusive};

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
                tokio::time::sleep(election_config().retry_period * 2).await;
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
        b.sleep(election_config().renew_period * roll(4) as u32)
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
                b.sleep(election_config().lease_duration + election_config().retry_period)
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
