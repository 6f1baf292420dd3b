//! The work queue on the embedded backend: two producers, a fleet of three workers, one
//! worker killed mid-job (its item is reclaimed by another worker with a higher token), and a
//! poisoned job that fails every attempt and ends in the dead letters.
//!
//! `cargo run -p examples --bin queue_demo` (add `--scylla HOST:PORT` for a cluster).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cql_lease::Timing;
use cql_workqueue::{NewItem, QueueConfig, WorkQueue};
use examples::{Flags, ScyllaFlag, open_queue_store};
use futures::StreamExt;
use serde_json::json;

const ITEMS_PER_PRODUCER: usize = 10;

/// The command line (see the module documentation).
#[derive(Debug, clap::Parser)]
#[command(about = "The work queue: producers, workers, a killed worker's job reclaimed, a poisoned job.", long_about = None)]
struct Cli {
    #[command(flatten)]
    target: ScyllaFlag,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let target = <Cli as clap::Parser>::parse().target.target();
    let (store, _) = open_queue_store(&target).await?;
    let config = QueueConfig {
        timing: Timing {
            lease_duration: Duration::from_secs(3),
            renew_period: Duration::from_millis(500),
            retry_period: Duration::from_millis(100),
            max_clock_skew: Duration::ZERO,
            resolve_timeout: Duration::from_secs(2),
            request_timeout: None,
        },
        max_attempts: 3,
        retry_backoff: Duration::from_millis(200),
        max_retry_backoff: Duration::from_secs(1),
        cursor_refresh: Duration::from_secs(1),
        ..QueueConfig::default()
    };
    let queue = WorkQueue::new(store, "demo", config)?;

    for p in 0..2 {
        let batch = (0..ITEMS_PER_PRODUCER).map(move |n| {
            NewItem::json(&json!({"producer": p, "n": n, "poison": p == 1 && n == 3}))
        });
        let batch: Result<Vec<_>, _> = batch.collect();
        for result in queue.enqueue_batch(batch?).await {
            result?;
        }
        println!("producer {p}: enqueued {ITEMS_PER_PRODUCER} items");
    }
    let total = 2 * ITEMS_PER_PRODUCER;

    let done = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let mut fleet = Vec::new();
    for w in 0..3 {
        let worker = queue.worker(&format!("worker-{w}"))?;
        let drain = worker.drain_handle();
        let (done, killed) = (Arc::clone(&done), Arc::clone(&killed));
        let task = tokio::spawn(worker.for_each_concurrent(2, move |job| {
            let (done, killed) = (Arc::clone(&done), Arc::clone(&killed));
            async move {
                let Ok(item) = job.json::<serde_json::Value>() else {
                    let _ = job.discard("not JSON").await;
                    return;
                };
                if job.attempt() > 1 {
                    println!(
                        "worker-{w}: {item} reclaimed, attempt {} (token {})",
                        job.attempt(),
                        job.token()
                    );
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                if item["poison"] == true {
                    let state = job.fail("poisoned payload").await;
                    println!("worker-{w}: {item} failed -> {state:?}");
                } else if w == 0 && !killed.swap(true, Ordering::SeqCst) {
                    println!(
                        "worker-{w}: killed while working on {item} (token {})",
                        job.token()
                    );
                    job.abandon();
                } else if job.complete().await.is_ok() {
                    done.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
        fleet.push((drain, task));
    }

    while done.load(Ordering::SeqCst) < total - 1 || queue.dead_letters().await?.is_empty() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (drain, task) in fleet {
        let report = drain.drain(Duration::from_secs(2)).await;
        let _ = task.await;
        println!("worker drained: {} unfinished", report.unfinished);
    }
    println!("completed {} items", done.load(Ordering::SeqCst));
    for letter in queue.dead_letters().await? {
        println!(
            "dead letter {}: {} after {} attempts: {:?}",
            letter.id,
            String::from_utf8_lossy(&letter.payload),
            letter.attempt,
            letter.last_error
        );
    }
    println!("stats: {:?}", queue.stats().await?);
    Ok(())
}
