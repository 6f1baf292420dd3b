//! The work-queue benchmark's steady state: items enqueued at a fixed rate while the same
//! processes work them off, for minutes, reported minute by minute (so a cost that grows
//! with the queue's age shows as a falling rate or a growing worst read).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cql_workqueue::{NewItem, WorkQueue};

/// What one minute of a steady run did.
#[derive(Debug, Clone, Copy)]
pub struct Minute {
    /// Items enqueued in it.
    pub enqueued: u64,
    /// Items completed in it.
    pub processed: u64,
    /// Most tombstones one index read walked in it, when the store tells.
    pub worst_read: Option<u64>,
}

/// Enqueues `rate` items a second through `enqueuer` and works them off with `workers`
/// claimers on each of `processes`, for `minutes`; `worst_read` says, when called once a
/// minute, the most tombstones one read walked since its last call. Prints a row a minute.
///
/// # Errors
///
/// When an enqueue fails.
pub async fn run(
    enqueuer: WorkQueue,
    processes: Vec<WorkQueue>,
    workers: usize,
    rate: u64,
    minutes: u64,
    mut worst_read: impl FnMut() -> Option<u64>,
) -> Result<Vec<Minute>, Box<dyn std::error::Error>> {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let processed = Arc::new(AtomicU64::new(0));
    let enqueued = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (p, process) in processes.iter().enumerate() {
        for w in 0..workers {
            let (q, stop, processed) = (process.clone(), Arc::clone(&stop), Arc::clone(&processed));
            tasks.push(tokio::spawn(async move {
                let name = format!("p{p}w{w}");
                while !stop.load(Ordering::Relaxed) {
                    match q.claim(&name).await {
                        Ok(Some(job)) => {
                            if job.complete().await.is_ok() {
                                processed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Ok(None) | Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
            }));
        }
    }
    // Enqueues in ticks of 10 ms, each its share of the rate, 64 at a time.
    let feeder = {
        let (stop, enqueued) = (Arc::clone(&stop), Arc::clone(&enqueued));
        tokio::spawn(async move {
            let started = Instant::now();
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let due = (started.elapsed().as_secs_f64() * rate as f64) as u64;
                let batch: Vec<NewItem> = (sent..due)
                    .map(|i| NewItem::text(&format!("steady {i}")))
                    .collect();
                sent = due;
                for chunk in batch.chunks(64) {
                    for result in enqueuer.enqueue_batch(chunk.iter().cloned()).await {
                        if result.is_ok() {
                            enqueued.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        })
    };
    println!(
        "| minute | enqueued | processed | processed items/s | backlog | most tombstones in one read |"
    );
    println!("|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    let (mut last_enqueued, mut last_processed) = (0, 0);
    for minute in 1..=minutes {
        tokio::time::sleep(Duration::from_secs(60)).await;
        let (e, p) = (
            enqueued.load(Ordering::Relaxed),
            processed.load(Ordering::Relaxed),
        );
        let row = Minute {
            enqueued: e - last_enqueued,
            processed: p - last_processed,
            worst_read: worst_read(),
        };
        (last_enqueued, last_processed) = (e, p);
        println!(
            "| {minute} | {} | {} | {:.0} | {} | {} |",
            row.enqueued,
            row.processed,
            row.processed as f64 / 60.0,
            e.saturating_sub(p),
            row.worst_read.map_or("n/a".into(), |w| w.to_string()),
        );
        rows.push(row);
    }
    stop.store(true, Ordering::Relaxed);
    feeder.await?;
    for task in tasks {
        task.await?;
    }
    Ok(rows)
}
