//! Work-queue scenarios across unequal processes: a slow process's share of the slots must
//! not hold its items back while a fast process works through its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_workqueue::{NewItem, WallClock, WorkQueue};
use tokio::time::Instant;

use super::queue::queue;
use crate::backend::Backend;

/// Items enqueued up front.
const ITEMS: usize = 600;
/// The slow process: one worker, jobs of 100 ms.
const SLOW_JOB: Duration = Duration::from_millis(100);
/// The fast process: eight workers, jobs of 50 ms.
const FAST_WORKERS: usize = 8;
const FAST_JOB: Duration = Duration::from_millis(50);

/// Process A (one worker, 100 ms jobs) and process B (eight workers, 50 ms jobs) share a
/// backlog of 600 items. Each owns about half the slots; B, busy with its own half, still
/// takes A's items that lag behind its own work, so the backlog drains at about the fleet's
/// speed (ideally 600 / (10 + 160 per s) = 3.5 s), not at A's for its half (300 x 100 ms =
/// 30 s; with stealing only once B is idle, measured 8 to 9 s). Every item is processed once.
///
/// On paused time only (run by the embedded backend's tests, in both claim modes): the
/// figures are the virtual time of job sleeps, so the scenario costs a fraction of a second
/// there, while over the wire (real time) it would take seconds of a loaded machine and its
/// bound would turn into a timed assertion.
pub async fn slow_process_does_not_hold_back_its_share(b: &dyn Backend) {
    if !b.simulated_time() {
        eprintln!(
            "{}: slow_process_does_not_hold_back_its_share runs on paused time only; skipped",
            b.name()
        );
        return;
    }
    let q = queue(b, "fleet");
    let batch = (0..ITEMS).map(|n| NewItem::text(&format!("job {n}")));
    for result in q.enqueue_batch(batch).await {
        result.expect("enqueue");
    }
    let started = Instant::now();
    let done = Arc::new(AtomicUsize::new(0));
    let by_item: Arc<Mutex<HashMap<String, Vec<char>>>> = Arc::default();
    let mut tasks = Vec::new();
    for (name, workers, job_time) in [('A', 1, SLOW_JOB), ('B', FAST_WORKERS, FAST_JOB)] {
        // Another process: its own dispatcher and claim tag, on the same store.
        let process = q.with_clock(WallClock::system());
        for w in 0..workers {
            let (q, done, by_item) = (process.clone(), Arc::clone(&done), Arc::clone(&by_item));
            tasks.push(tokio::spawn(work(
                q,
                format!("{name}{w}"),
                job_time,
                done,
                by_item,
                name,
            )));
        }
    }
    for task in tasks {
        task.await.expect("worker");
    }
    let elapsed = started.elapsed();
    let by_item = by_item.lock().expect("lock");
    assert_eq!(by_item.len(), ITEMS, "every item processed");
    assert!(
        by_item.values().all(|runs| runs.len() == 1),
        "an item processed twice"
    );
    let by_a = by_item.values().filter(|runs| runs[0] == 'A').count();
    // A alone on its half of the slots: (ITEMS / 2) x 100 ms.
    let alone = SLOW_JOB * (ITEMS / 2) as u32;
    eprintln!(
        "{}: {ITEMS} items in {elapsed:?} of virtual time ({by_a} by the slow process; its \
         half alone would take {alone:?})",
        b.name()
    );
    assert!(
        elapsed < alone / 5,
        "the backlog took {elapsed:?}, the slow process alone {alone:?} for its half"
    );
}

/// One worker of a process: claims until every item is done, each job taking `job_time`.
async fn work(
    q: WorkQueue,
    worker: String,
    job_time: Duration,
    done: Arc<AtomicUsize>,
    by_item: Arc<Mutex<HashMap<String, Vec<char>>>>,
    process: char,
) {
    while done.load(Ordering::SeqCst) < ITEMS {
        match q.claim(&worker).await.expect("claim") {
            Some(job) => {
                tokio::time::sleep(job_time).await;
                let id = job.id().to_string();
                job.complete().await.expect("complete");
                by_item
                    .lock()
                    .expect("lock")
                    .entry(id)
                    .or_default()
                    .push(process);
                done.fetch_add(1, Ordering::SeqCst);
            }
            None => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}
