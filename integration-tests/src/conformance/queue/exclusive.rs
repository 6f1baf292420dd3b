//! The contention scenario: many workers, random crashes and failures, and the history
//! checker's verdict that no item was ever worked on by two workers at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::FencingToken;
use cql_lease::memory::{Fault, Times};
use cql_workqueue::JobState;
use cql_workqueue::memory::QueueOp;
use rand::Rng;
use tokio::time::Instant;

use super::{queue, test_config};
use crate::backend::Backend;
use crate::history::{Tenure, check_exclusive};

/// Many workers, random crashes and failures: no item is ever worked on by two workers at
/// once, tokens grow per item, and every item ends completed or discarded.
pub async fn claims_are_exclusive_under_contention(b: &dyn Backend) {
    let q = queue(b, "contended");
    let items = if b.simulated_time() { 60 } else { 12 };
    for n in 0..items {
        q.enqueue(&format!("job {n}")).await.expect("enqueue");
    }
    if b.supports_faults() {
        // Some claims lapse mid-work: their workers must stop before anyone else claims.
        let stall = Fault::Latency(test_config().lease_duration);
        b.inject_queue(Some(QueueOp::Heartbeat), stall, Times::Random(0.2));
        b.inject_queue(
            Some(QueueOp::Claim),
            Fault::TimeoutAfterApply,
            Times::Random(0.05),
        );
    }
    let history: Arc<Mutex<HashMap<String, Vec<Tenure>>>> = Arc::default();
    let finished = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (q, history, finished) = (q.clone(), Arc::clone(&history), Arc::clone(&finished));
        tasks.push(tokio::spawn(async move {
            loop {
                let Ok(Some(job)) = q.claim(&format!("w{w}")).await else {
                    // Done when every item left is discarded (a crashed last attempt is
                    // discarded inside `claim`).
                    let left = q.items().await.unwrap_or_default();
                    if left.iter().all(|i| i.state == JobState::Discarded) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let start = Instant::now();
                let (work, roll) = {
                    let mut rng = rand::rng();
                    (
                        Duration::from_millis(rng.random_range(0..3000)),
                        rng.random_range(0..10),
                    )
                };
                let stop = job.cancellation_token();
                tokio::select! {
                    _ = tokio::time::sleep(work) => {}
                    _ = stop.cancelled() => {}
                }
                let id = job.id().to_string();
                let token = job.token();
                let end = match roll {
                    0 => job.abandon(),
                    1 => {
                        let at = Instant::now();
                        if let Ok(JobState::Discarded) = job.fail("unlucky").await {
                            finished.fetch_add(1, Ordering::SeqCst);
                        }
                        at
                    }
                    _ => {
                        let at = Instant::now();
                        if job.complete().await.is_ok() {
                            finished.fetch_add(1, Ordering::SeqCst);
                        }
                        at
                    }
                };
                record(&history, id, format!("w{w}"), token, start, end);
            }
        }));
    }
    for task in tasks {
        task.await.expect("worker");
    }
    b.clear_faults();
    let history = history.lock().expect("history").clone();
    for (id, tenures) in &history {
        if let Err(violation) = check_exclusive(tenures) {
            panic!("{}: item {id}: {violation}", b.name());
        }
    }
    let left = q.items().await.expect("items");
    assert!(
        left.iter().all(|i| i.state == JobState::Discarded),
        "{left:?}"
    );
    // Every item was completed or discarded at least once (delivery is at least once).
    assert!(finished.load(Ordering::SeqCst) + left.len() >= items);
    assert!(
        history.len() >= items,
        "only {} items were ever worked on",
        history.len()
    );
}

fn record(
    history: &Mutex<HashMap<String, Vec<Tenure>>>,
    id: String,
    holder: String,
    token: FencingToken,
    start: Instant,
    end: Instant,
) {
    if let Ok(mut history) = history.lock() {
        history.entry(id).or_default().push(Tenure {
            holder,
            token,
            start,
            end,
        });
    }
}
