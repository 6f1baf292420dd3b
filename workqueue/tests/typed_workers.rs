//! Typed workers (`Worker::run`): the handler's answer ends the job, a panic is a failed
//! attempt, and a payload of the wrong shape is a dead letter at once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::{
    ItemId, ItemKey, JobError, JobState, QueueConfig, TypedJob, WorkQueue, Worker,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Email {
    to: String,
}

fn queue(max_attempts: i32) -> WorkQueue {
    let config = QueueConfig {
        max_attempts,
        ..QueueConfig::default()
    };
    WorkQueue::new(Arc::new(MemoryQueueStore::new()), "mail", config).unwrap()
}

async fn enqueue(queue: &WorkQueue, to: &str) -> ItemId {
    queue.enqueue_json(&Email { to: to.into() }).await.unwrap()
}

/// Runs `worker` in a task until nothing is left waiting, running or scheduled, then drains
/// it and checks that `run` returned.
async fn run_until_idle<F>(queue: &WorkQueue, worker: Worker, run: F)
where
    F: FnOnce(Worker) -> tokio::task::JoinHandle<()>,
{
    let drain = worker.drain_handle();
    let task = run(worker);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let stats = queue.stats().await.unwrap();
        if stats.available + stats.running + stats.scheduled == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still busy: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = drain.drain(Duration::from_secs(10)).await;
    assert_eq!(report.unfinished, 0);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("run returns once drained")
        .unwrap();
}

/// The stored states of `ids`' rows.
async fn states(queue: &WorkQueue, ids: &[&ItemId]) -> Vec<JobState> {
    let mut states = Vec::new();
    for id in ids {
        let key = ItemKey {
            partition: queue.name().to_owned(),
            id: (*id).clone(),
        };
        states.push(queue.store().read(&key).await.unwrap().unwrap().state);
    }
    states
}

/// A handler that returns `Ok(())` completes its job: it runs once and the item is done.
#[tokio::test(start_paused = true)]
async fn ok_completes_the_job() {
    let queue = queue(3);
    let id = enqueue(&queue, "ada@example.com").await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let worker = queue.worker("w").unwrap();
    run_until_idle(&queue, worker, |worker| {
        let seen = seen.clone();
        tokio::spawn(worker.run(2, move |job: TypedJob<Email>| {
            let seen = seen.clone();
            async move {
                assert!(job.is_held());
                assert!(!job.cancellation_token().is_cancelled());
                seen.lock()
                    .unwrap()
                    .push((job.args.to.clone(), job.attempt()));
                Ok(())
            }
        }))
    })
    .await;
    assert_eq!(*seen.lock().unwrap(), [("ada@example.com".to_owned(), 1)]);
    assert_eq!(states(&queue, &[&id]).await, [JobState::Done]);
    assert!(queue.dead_letters().await.unwrap().is_empty());
}

/// An `Err` is a failed attempt: the job is retried (the next attempt sees the error) and
/// completes once the handler succeeds.
#[tokio::test(start_paused = true)]
async fn err_is_retried_until_the_handler_succeeds() {
    let queue = queue(5);
    let id = enqueue(&queue, "ada@example.com").await;
    let errors = Arc::new(Mutex::new(Vec::new()));
    let worker = queue.worker("w").unwrap();
    run_until_idle(&queue, worker, |worker| {
        let errors = errors.clone();
        tokio::spawn(worker.run(1, move |job: TypedJob<Email>| {
            let errors = errors.clone();
            async move {
                errors
                    .lock()
                    .unwrap()
                    .push(job.last_error().map(str::to_owned));
                if job.attempt() < 3 {
                    return Err(JobError::failed(format!("smtp down {}", job.attempt())));
                }
                Ok(())
            }
        }))
    })
    .await;
    assert_eq!(
        *errors.lock().unwrap(),
        [
            None,
            Some("smtp down 1".to_owned()),
            Some("smtp down 2".to_owned())
        ]
    );
    assert_eq!(states(&queue, &[&id]).await, [JobState::Done]);
}

/// An `Err` on every attempt dead-letters the job after `max_attempts` claims, with the
/// last error.
#[tokio::test(start_paused = true)]
async fn err_dead_letters_after_max_attempts() {
    let queue = queue(3);
    enqueue(&queue, "ada@example.com").await;
    let calls = Arc::new(AtomicUsize::new(0));
    let worker = queue.worker("w").unwrap();
    run_until_idle(&queue, worker, |worker| {
        let calls = calls.clone();
        tokio::spawn(worker.run(1, move |_job: TypedJob<Email>| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(JobError::failed("smtp down")) }
        }))
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let dead = queue.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempt, 3);
    assert_eq!(dead[0].last_error.as_deref(), Some("smtp down"));
}

/// `JobError::Cancel` discards the job at once, with attempts left: one call, a dead letter.
#[tokio::test(start_paused = true)]
async fn cancel_discards_at_once() {
    let queue = queue(5);
    enqueue(&queue, "nobody").await;
    let calls = Arc::new(AtomicUsize::new(0));
    let worker = queue.worker("w").unwrap();
    run_until_idle(&queue, worker, |worker| {
        let calls = calls.clone();
        tokio::spawn(worker.run(1, move |job: TypedJob<Email>| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                Err(JobError::cancel(format!(
                    "no such address: {}",
                    job.args.to
                )))
            }
        }))
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let dead = queue.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempt, 1);
    assert_eq!(
        dead[0].last_error.as_deref(),
        Some("cancelled: no such address: nobody")
    );
}

/// A panicking handler is caught: its attempt counts as failed with the panic's message
/// (seen by the next attempt), and the worker keeps running other jobs and the retry.
#[tokio::test(start_paused = true)]
async fn a_panic_is_a_failed_attempt_and_the_worker_keeps_running() {
    let queue = queue(3);
    let panics = enqueue(&queue, "panics@example.com").await;
    let fine = enqueue(&queue, "fine@example.com").await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let worker = queue.worker("w").unwrap();
    run_until_idle(&queue, worker, |worker| {
        let seen = seen.clone();
        tokio::spawn(worker.run(1, move |job: TypedJob<Email>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push((
                    job.args.to.clone(),
                    job.attempt(),
                    job.last_error().map(str::to_owned),
                ));
                if job.args.to.starts_with("panics") && job.attempt() == 1 {
                    panic!("template missing");
                }
                Ok(())
            }
        }))
    })
    .await;
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("fine@example.com".to_owned(), 1, None),
            ("panics@example.com".to_owned(), 1, None),
            (
                "panics@example.com".to_owned(),
                2,
                Some("handler panicked: template missing".to_owned())
            ),
        ]
    );
    assert_eq!(
        states(&queue, &[&panics, &fine]).await,
        [JobState::Done, JobState::Done]
    );
}

/// A payload that does not decode as the handler's type never reaches the handler: it is
/// discarded at once with the decoding error, whatever attempts are left.
#[tokio::test(start_paused = true)]
async fn a_bad_payload_is_discarded() {
    let queue = queue(5);
    queue.enqueue("not json").await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let worker = queue.worker("w").unwrap();
    run_until_idle(&queue, worker, |worker| {
        let calls = calls.clone();
        tokio::spawn(worker.run(1, move |_job: TypedJob<Email>| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        }))
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let dead = queue.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempt, 1);
    let error = dead[0].last_error.as_deref().unwrap();
    assert!(
        error.starts_with("payload: ") && error.contains("Email"),
        "{error}"
    );
}
