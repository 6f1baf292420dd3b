//! Many contenders, many hand-overs: exclusivity and token order, checked on the history.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::memory::{Fault, Op, Times};
use cql_lease::{LeaseClient, TryAcquire};
use rand::Rng;
use tokio::time::Instant;

use super::{client, test_config};
use crate::backend::Backend;
use crate::history::{Tenure, check_exclusive};

/// Size of a contention run.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Concurrent contenders.
    pub contenders: usize,
    /// Acquisitions to reach.
    pub rounds: usize,
    /// Every n-th holder crashes (never releases) and its lease expires; 0 for never.
    pub abandon_every: usize,
    /// Inject lost answers at random on acquire and release.
    pub lost_answers: bool,
}

impl Plan {
    /// The full plan on simulated time; a smaller one in real time over the wire.
    pub fn for_backend(b: &dyn Backend) -> Plan {
        if b.simulated_time() {
            Plan {
                contenders: 64,
                rounds: 200,
                abandon_every: 7,
                lost_answers: true,
            }
        } else {
            Plan {
                contenders: 8,
                rounds: 30,
                abandon_every: 15,
                lost_answers: true,
            }
        }
    }
}

/// Contenders race for one lease; the recorded tenures never overlap and tokens increase.
pub async fn exclusive_under_contention(b: &dyn Backend) {
    run_contention(b, Plan::for_backend(b)).await;
}

/// Runs `plan` and checks the history; returns it.
pub async fn run_contention(b: &dyn Backend, plan: Plan) -> Vec<Tenure> {
    if plan.lost_answers && b.supports_faults() {
        b.inject(
            Some(Op::TryAcquire),
            Fault::TimeoutAfterApply,
            Times::Random(0.03),
        );
        b.inject(
            Some(Op::TryAcquire),
            Fault::TimeoutWithoutApply,
            Times::Random(0.03),
        );
        b.inject(
            Some(Op::Release),
            Fault::TimeoutAfterApply,
            Times::Random(0.05),
        );
    }
    let history = Arc::new(Mutex::new(Vec::new()));
    let acquisitions = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for id in 0..plan.contenders {
        let c = client(b);
        let (history, acquisitions) = (Arc::clone(&history), Arc::clone(&acquisitions));
        tasks.push(tokio::spawn(contender(
            c,
            format!("c{id}"),
            plan,
            history,
            acquisitions,
        )));
    }
    for task in tasks {
        task.await.expect("contender panicked");
    }
    b.clear_faults();
    let history = history.lock().expect("history").clone();
    assert!(
        history.len() >= plan.rounds,
        "{} acquisitions",
        history.len()
    );
    if let Err(violation) = check_exclusive(&history) {
        panic!("{}: {violation}", b.name());
    }
    history
}

async fn contender(
    c: LeaseClient,
    me: String,
    plan: Plan,
    history: Arc<Mutex<Vec<Tenure>>>,
    acquisitions: Arc<AtomicUsize>,
) {
    let ttl = test_config().lease_duration;
    while acquisitions.load(Ordering::SeqCst) < plan.rounds {
        match c.try_acquire("contended", &me, None).await {
            Ok(TryAcquire::Acquired(lease)) => {
                let start = Instant::now();
                if !lease.is_valid() {
                    // The answer came after the deadline (a loaded machine): do not act.
                    let _ = lease.release().await;
                    continue;
                }
                let n = acquisitions.fetch_add(1, Ordering::SeqCst) + 1;
                let hold =
                    Duration::from_millis(rand::rng().random_range(0..ttl.as_millis() as u64 / 8));
                tokio::time::sleep(hold).await;
                let tenure = |end: Instant| Tenure {
                    holder: me.clone(),
                    token: lease.token(),
                    start,
                    end: end.min(lease.must_stop_by()),
                };
                if plan.abandon_every > 0 && n.is_multiple_of(plan.abandon_every) {
                    // Crash: never release; the deadline is where this holder stops.
                    let record = tenure(lease.must_stop_by());
                    history.lock().expect("history").push(record);
                } else {
                    let record = tenure(Instant::now());
                    history.lock().expect("history").push(record);
                    let _ = lease.release().await;
                }
            }
            Ok(TryAcquire::Held(_)) | Err(_) => {
                let pause = rand::rng().random_range(10..60);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
    }
}
