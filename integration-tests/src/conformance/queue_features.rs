//! Work-queue features: typed payloads, dead letters, stats, graceful drain, batches.

use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::{JobState, NewItem, QueueConfig, QueueError};

use super::queue::{queue, queue_config, queue_with};
use crate::backend::Backend;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Email {
    to: String,
    template: String,
    attempt_limit: u8,
}

/// JSON payloads come back typed; raw bytes come back as given; a payload of the wrong type
/// is a typed error; oversized payloads are refused.
pub async fn typed_and_raw_payloads(b: &dyn Backend) {
    let q = queue(b, "typed");
    let email = Email {
        to: "ada@example.com".into(),
        template: "welcome\nline two".into(),
        attempt_limit: 3,
    };
    q.enqueue_json(&email).await.expect("enqueue json");
    q.enqueue_item(NewItem::bytes(vec![0u8, 159, 146, 150]))
        .await
        .expect("enqueue bytes");
    let mut seen_json = false;
    let mut seen_bytes = false;
    while let Some(job) = q.claim("w").await.expect("claim") {
        if job.payload_bytes() == [0u8, 159, 146, 150] {
            assert!(matches!(job.json::<Email>(), Err(QueueError::Payload(_))));
            seen_bytes = true;
        } else {
            assert_eq!(job.json::<Email>().expect("json"), email);
            seen_json = true;
        }
        job.complete().await.expect("complete");
    }
    assert!(seen_json && seen_bytes);
    let huge = vec![1u8; cql_workqueue::MAX_PAYLOAD_LEN + 1];
    assert!(matches!(
        q.enqueue_item(NewItem::bytes(huge)).await,
        Err(QueueError::InvalidArgument(_))
    ));
}

/// A poisoned job ends in the dead letters with its last error; it can be requeued (its
/// tokens continue to grow) and purged.
pub async fn dead_letters_list_requeue_purge(b: &dyn Backend) {
    let q = queue(b, "dead");
    let poison = q.enqueue("poison").await.expect("enqueue");
    let other = q.enqueue("also poison").await.expect("enqueue");
    let mut last_token = None;
    while q.dead_letters().await.expect("dead letters").len() < 2 {
        match q.claim("w").await.expect("claim") {
            Some(job) => {
                if job.id() == &poison {
                    last_token = Some(job.token());
                }
                let error = format!("boom {}", job.attempt());
                job.fail(&error).await.expect("fail");
            }
            None => b.sleep(Duration::from_millis(200)).await,
        }
    }
    let letters = q.dead_letters().await.expect("dead letters");
    let letter = letters.iter().find(|l| l.id == poison).expect("poison");
    assert_eq!(letter.attempt, queue_config().max_attempts);
    assert_eq!(
        letter.last_error.as_deref(),
        Some(format!("boom {}", queue_config().max_attempts).as_str())
    );
    assert_eq!(letter.payload, b"poison");
    assert!(
        q.claim("w").await.expect("claim").is_none(),
        "dead letter claimed"
    );

    assert!(q.requeue_dead(&poison).await.expect("requeue"));
    assert!(!q.requeue_dead(&poison).await.expect("requeue twice"));
    let job = super::queue::claim_soon(b, &q, "w")
        .await
        .expect("requeued");
    assert_eq!(job.id(), &poison);
    assert!(Some(job.token()) > last_token, "token reused after requeue");
    job.complete().await.expect("complete");

    assert!(q.purge_dead(&other).await.expect("purge"));
    assert!(q.dead_letters().await.expect("dead letters").is_empty());
    assert!(q.items().await.expect("items").is_empty());
}

/// A dead letter's requeue or purge whose answer is lost after it applied is settled by a
/// read-back: the call reports what happened, neither a store error for a change that was
/// made (the LWT cut by the queue's request timeout) nor, asked again, "not a dead letter".
pub async fn dead_letter_requeue_and_purge_settle_lost_answers(b: &dyn Backend) {
    let q = queue(b, "dead-lost");
    let first = q.enqueue("poison").await.expect("enqueue");
    let second = q.enqueue("also poison").await.expect("enqueue");
    while q.dead_letters().await.expect("dead letters").len() < 2 {
        match q.claim("w").await.expect("claim") {
            Some(job) => {
                job.fail("boom").await.expect("fail");
            }
            None => b.sleep(Duration::from_millis(200)).await,
        }
    }
    // `Reschedule` aims at requeue and purge too.
    b.inject_queue(
        Some(QueueOp::Reschedule),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let requeued = q.requeue_dead(&first).await;
    b.clear_faults();
    assert!(
        requeued.expect("requeue with a lost answer"),
        "{}: a requeue that applied was reported as not requeued",
        b.name()
    );
    let job = super::queue::claim_soon(b, &q, "w")
        .await
        .expect("requeued");
    assert_eq!(job.id(), &first);
    job.complete().await.expect("complete");

    b.inject_queue(
        Some(QueueOp::Reschedule),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let purged = q.purge_dead(&second).await;
    b.clear_faults();
    assert!(
        purged.expect("purge with a lost answer"),
        "{}: a purge that applied was reported as not purged",
        b.name()
    );
    assert!(q.dead_letters().await.expect("dead letters").is_empty());
}

/// Stats count items by state (however far ahead they are scheduled) and age the oldest
/// available one, from the index alone.
pub async fn stats_by_state(b: &dyn Backend) {
    // The failed job's retry stays scheduled for longer than stats() takes on a busy node.
    let config = QueueConfig {
        retry_backoff: Duration::from_secs(30),
        max_retry_backoff: Duration::from_secs(60),
        ..queue_config()
    };
    let q = queue_with(b, "stats", config);
    for n in 0..3 {
        q.enqueue(&format!("now {n}")).await.expect("enqueue");
    }
    let soon = cql_workqueue::clock::now_micros() + 5_000_000;
    q.enqueue_at(
        "soon",
        Some(std::time::UNIX_EPOCH + Duration::from_micros(soon as u64)),
    )
    .await
    .expect("enqueue");
    // Far beyond the buckets scans read: counted through the bucket directory.
    for days in [1, 400] {
        let later = std::time::SystemTime::now() + Duration::from_secs(86_400 * days);
        q.enqueue_at("later", Some(later)).await.expect("enqueue");
    }
    b.sleep(Duration::from_millis(300)).await;
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.available, stats.scheduled, stats.running), (3, 3, 0));
    assert!(stats.oldest_available_age.expect("age") >= Duration::from_millis(250));
    assert_eq!(q.items().await.expect("items").len(), 6);
    let job = q.claim("w").await.expect("claim").expect("item");
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.available, stats.running), (2, 1));
    let state = job.fail("x").await.expect("fail");
    assert_eq!(state, JobState::Retryable);
    let stats = q.stats().await.expect("stats");
    assert_eq!(
        (stats.available, stats.scheduled, stats.running, stats.dead),
        (2, 4, 0, 0)
    );
}

/// Draining a worker stops its claims and waits for in-flight jobs; at the deadline jobs
/// still running are told to stop and their items are handed back.
pub async fn graceful_drain(b: &dyn Backend) {
    let q = queue(b, "drain");
    for n in 0..3 {
        q.enqueue(&format!("job {n}")).await.expect("enqueue");
    }
    let mut worker = q.worker("w").expect("worker");
    let drain = worker.drain_handle();
    let quick = worker.next().await.expect("job");
    let slow = worker.next().await.expect("job");
    assert_eq!(drain.in_flight(), 2);
    let quick_task = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        quick.complete().await.expect("complete");
    });
    let slow_stop = slow.cancellation_token();
    let slow_task = tokio::spawn(async move {
        // Works until told to stop, then drops the job (which hands the item back).
        slow_stop.cancelled().await;
        drop(slow);
    });
    let report = drain.drain(Duration::from_millis(500)).await;
    assert_eq!(report.unfinished, 1);
    quick_task.await.expect("quick");
    slow_task.await.expect("slow");
    assert!(
        worker.next().await.is_none(),
        "a drained worker claimed again"
    );
    // The handed-back item and the never-claimed one are claimable by others at once.
    b.sleep(Duration::from_millis(300)).await;
    let mut left = 0;
    while let Some(job) = q.claim("other").await.expect("claim") {
        left += 1;
        job.complete().await.expect("complete");
    }
    assert_eq!(left, 2);
    // A drain with nothing in flight returns at once.
    let idle = q.worker("idle").expect("worker").drain_handle();
    assert_eq!(idle.drain(Duration::from_secs(5)).await.unfinished, 0);
}

/// A batch enqueue adds every item once, in order of results, and reports duplicates.
pub async fn batch_enqueue(b: &dyn Backend) {
    let q = queue(b, "batch");
    let mut batch: Vec<NewItem> = (0..20).map(|n| NewItem::text(&format!("b{n}"))).collect();
    batch.push(NewItem::text("u").unique("k"));
    batch.push(NewItem::text("u again").unique("k"));
    let results = q.enqueue_batch(batch).await;
    assert_eq!(results.len(), 22);
    let new = results
        .iter()
        .filter(|r| matches!(r, Ok(cql_workqueue::Enqueued::New(_))))
        .count();
    assert_eq!(new, 21, "{results:?}");
    assert_eq!(q.items().await.expect("items").len(), 21);
}
