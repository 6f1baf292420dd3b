//! Which item a claim takes: `ClaimOrder::OldestFirst` keeps enqueue order for one worker;
//! `ClaimOrder::Spread` stays the default.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::Arc;

use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::{ClaimOrder, QueueConfig, WorkQueue};
use futures::StreamExt;

fn oldest_first() -> QueueConfig {
    QueueConfig {
        order: ClaimOrder::OldestFirst,
        ..QueueConfig::default()
    }
}

/// With `ClaimOrder::OldestFirst`, one worker processes items in the order they were
/// enqueued (more of them than one scan reads, so across refills of its candidates).
#[tokio::test(start_paused = true)]
async fn oldest_first_with_one_worker_processes_items_in_enqueue_order() {
    let queue = WorkQueue::new(Arc::new(MemoryQueueStore::new()), "jobs", oldest_first()).unwrap();
    let count = 2 * queue.config().scan_limit as usize + 5;
    let enqueued: Vec<String> = (0..count).map(|n| format!("job-{n}")).collect();
    for payload in &enqueued {
        queue.enqueue(payload).await.unwrap();
    }

    let worker = queue.worker("only").unwrap();
    let shutdown = worker.shutdown_token();
    let processed: Vec<String> = worker
        .take(count)
        .then(|job| async move {
            let payload = job.payload().to_owned();
            job.complete().await.unwrap();
            payload
        })
        .collect()
        .await;
    shutdown.cancel();

    assert_eq!(processed, enqueued);
}

/// The default order is unchanged: spread among the first `choice` candidates.
#[test]
fn spread_stays_the_default() {
    let config = QueueConfig::default();
    assert_eq!((config.order, config.choice), (ClaimOrder::Spread, 4));
}
