//! What a work queue records: items enqueued, claimed, completed, failed and discarded,
//! candidates tried per claim, claims held, store round trips, and depth from stats.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::Arc;

use cql_lease::memory::{Fault, Times};
use cql_lease::metrics::capture::Capture;
use cql_lease::metrics::{
    CLAIM_ATTEMPTS, CLAIMED, COMPLETED, DEPTH, DISCARDED, ENQUEUED, FAILED, HELD, OLDEST_AGE,
    STORE_REQUESTS, UNKNOWN_OUTCOMES,
};
use cql_workqueue::memory::{MemoryQueueStore, QueueOp};
use cql_workqueue::{JobState, QueueConfig, WorkQueue};

const MAIL: [(&str, &str); 1] = [("queue", "mail")];

fn depth(capture: &Capture, state: &str) -> f64 {
    capture.gauge(DEPTH, &[("queue", "mail"), ("state", state)])
}

#[tokio::test(start_paused = true)]
async fn a_queue_records_its_items_on_their_way_through() {
    let capture = Capture::default();
    let _installed = capture.install();
    let config = QueueConfig {
        choice: 1,
        ..QueueConfig::default()
    };
    let queue = WorkQueue::new(Arc::new(MemoryQueueStore::new()), "mail", config).unwrap();
    for payload in ["a", "b", "c"] {
        queue.enqueue(payload).await.unwrap();
    }
    assert_eq!(capture.counter(ENQUEUED, &MAIL), 3);
    queue.stats().await.unwrap();
    assert_eq!(depth(&capture, "available"), 3.0);
    assert!(capture.gauge(OLDEST_AGE, &MAIL) > 0.0);

    let job = queue.claim("w").await.unwrap().expect("a");
    assert_eq!(capture.counter(CLAIMED, &MAIL), 1);
    assert_eq!(capture.gauge(HELD, &[("kind", "queue_claim")]), 1.0);
    job.complete().await.unwrap();
    assert_eq!(capture.counter(COMPLETED, &MAIL), 1);
    assert_eq!(capture.gauge(HELD, &[("kind", "queue_claim")]), 0.0);

    let job = queue.claim("w").await.unwrap().expect("b");
    assert_eq!(job.fail("boom").await.unwrap(), JobState::Retryable);
    assert_eq!(capture.counter(FAILED, &MAIL), 1);
    let job = queue.claim("w").await.unwrap().expect("c");
    job.discard("bad").await.unwrap();
    assert_eq!(capture.counter(DISCARDED, &MAIL), 1);
    assert_eq!(capture.counter(CLAIMED, &MAIL), 3);
    assert_eq!(capture.counter(COMPLETED, &MAIL), 1);
    assert_eq!(capture.counter(FAILED, &MAIL), 1);

    let tried = capture.histogram(CLAIM_ATTEMPTS, &MAIL);
    assert_eq!(tried.len(), 3, "{tried:?}");
    assert!(tried.iter().all(|n| *n >= 1.0), "{tried:?}");
    let claims = [
        ("store", "queue"),
        ("operation", "claim"),
        ("outcome", "applied"),
    ];
    assert_eq!(capture.counter(STORE_REQUESTS, &claims), 3);

    // The entries the claims were found by are removed in the background.
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    queue.stats().await.unwrap();
    assert_eq!(depth(&capture, "available"), 0.0);
    assert_eq!(depth(&capture, "scheduled"), 1.0);
    assert_eq!(depth(&capture, "dead"), 1.0);
    assert_eq!(capture.gauge(OLDEST_AGE, &MAIL), 0.0);
}

#[tokio::test(start_paused = true)]
async fn a_lost_completion_read_back_counts_as_resolved() {
    let capture = Capture::default();
    let _installed = capture.install();
    let store = Arc::new(MemoryQueueStore::new());
    let queue = WorkQueue::new(store.clone(), "mail", QueueConfig::default()).unwrap();
    queue.enqueue("a").await.unwrap();
    let job = queue.claim("w").await.unwrap().expect("a");
    store.inject(
        Some(QueueOp::Complete),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    job.complete().await.unwrap();

    let lost = [
        ("store", "queue"),
        ("operation", "complete"),
        ("outcome", "unknown"),
    ];
    assert_eq!(capture.counter(STORE_REQUESTS, &lost), 1);
    assert_eq!(
        capture.counter(UNKNOWN_OUTCOMES, &[("result", "resolved")]),
        1
    );
    assert_eq!(
        capture.counter(UNKNOWN_OUTCOMES, &[("result", "unresolved")]),
        0
    );
    assert_eq!(capture.counter(COMPLETED, &MAIL), 1);
}
