//! The work queue under chaos: three processes of workers that get killed, stall past their
//! claims and lose answers, over a store that drops index writes. Checked per item: no two
//! tenures overlap, no token is issued twice, and no item is lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::{ItemId, ItemKey, JobState, WallClock};
use rand::Rng;
use tokio::time::Instant;

use super::queue::queue;
use super::test_config;
use crate::backend::Backend;
use crate::history::{Tenure, check_exclusive};

type History = Arc<Mutex<HashMap<String, Vec<Tenure>>>>;

/// Chaos run with the per-item history checker: zero lost items, zero reused tokens.
pub async fn chaos_loses_nothing_and_never_reuses_tokens(b: &dyn Backend) {
    let q = queue(b, "chaos");
    let items = if b.simulated_time() { 40 } else { 10 };
    let mut ids = Vec::new();
    for n in 0..items {
        ids.push(q.enqueue(&format!("job {n}")).await.expect("enqueue"));
    }
    // Stalls past the claim (a heartbeat held up for a whole TTL), lost answers, index
    // writes and scans that fail.
    b.inject_queue(
        Some(QueueOp::Heartbeat),
        Fault::Latency(test_config().lease_duration),
        Times::Random(0.2),
    );
    for op in [QueueOp::Claim, QueueOp::Complete, QueueOp::Reschedule] {
        b.inject_queue(Some(op), Fault::TimeoutAfterApply, Times::Random(0.05));
    }
    b.inject_queue(
        Some(QueueOp::Index),
        Fault::Unavailable,
        Times::Random(0.05),
    );

    let history: History = Arc::default();
    let all_done = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for p in 0..3 {
        // Each process has its own dispatcher.
        let process = q.with_clock(WallClock::system());
        for w in 0..4 {
            let (q, history, all_done) =
                (process.clone(), Arc::clone(&history), Arc::clone(&all_done));
            tasks.push(tokio::spawn(work(
                q,
                format!("p{p}w{w}"),
                history,
                all_done,
            )));
        }
    }
    let store = Arc::clone(q.store());
    let give_up = Instant::now() + Duration::from_secs(if b.simulated_time() { 600 } else { 120 });
    let lost = loop {
        b.sleep(Duration::from_millis(500)).await;
        let open = open_items(&store, &ids).await;
        if open.is_empty() {
            break open;
        }
        if Instant::now() > give_up {
            break open;
        }
    };
    all_done.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.expect("worker");
    }
    b.clear_faults();
    assert!(
        lost.is_empty(),
        "{}: items never finished: {lost:?}",
        b.name()
    );
    let history = history.lock().expect("history").clone();
    for (id, tenures) in &history {
        if let Err(violation) = check_exclusive(tenures) {
            panic!("{}: item {id}: {violation}", b.name());
        }
    }
    assert_eq!(history.len(), items, "some items were never worked on");
}

/// Items not yet done or dead.
async fn open_items(
    store: &Arc<dyn cql_workqueue::store::QueueStore>,
    ids: &[ItemId],
) -> Vec<ItemId> {
    let mut open = Vec::new();
    for id in ids {
        let key = ItemKey {
            partition: "chaos".into(),
            id: id.clone(),
        };
        match store.read(&key).await {
            Ok(Some(item)) if matches!(item.state, JobState::Done | JobState::Discarded) => {}
            _ => open.push(id.clone()),
        }
    }
    open
}

async fn work(
    q: cql_workqueue::WorkQueue,
    name: String,
    history: History,
    all_done: Arc<AtomicBool>,
) {
    while !all_done.load(Ordering::SeqCst) {
        let Ok(Some(job)) = q.claim(&name).await else {
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
        // Acting stops when told to, or now.
        let end = job.lost_at().unwrap_or_else(Instant::now);
        match roll {
            0 => {
                job.abandon();
            }
            1 => {
                let _ = job.fail("unlucky").await;
            }
            _ => {
                let _ = job.complete().await;
            }
        }
        if let Ok(mut history) = history.lock() {
            history.entry(id).or_default().push(Tenure {
                holder: name.clone(),
                token,
                start,
                end,
            });
        }
    }
}
