//! Snoozed jobs: a snooze puts a job off without spending its attempts, and the job comes
//! back even when the entry its snooze places was not written.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_workqueue::{JobError, NewItem, QueueClient, TypedJob};

use super::queue::{claim_soon, queue, queue_config};
use crate::backend::Backend;

/// A snoozed job runs again once its snooze is over, each time under a new attempt number
/// (a higher fencing token), and its snoozes spend none of its attempts: snoozed more times
/// than `max_attempts`, it still completes instead of becoming a dead letter.
pub async fn a_snoozed_job_runs_again_without_spending_attempts(b: &dyn Backend) {
    let q = queue(b, "client-snooze");
    q.enqueue_item(NewItem::json(&0u32).expect("json"))
        .await
        .expect("enqueue");
    let snooze = Duration::from_millis(300);
    let runs: Arc<Mutex<Vec<(i32, i32, tokio::time::Instant)>>> = Arc::default();
    let handler = {
        let runs = Arc::clone(&runs);
        move |job: TypedJob<u32>| {
            let runs = Arc::clone(&runs);
            async move {
                let mut runs = runs.lock().expect("runs");
                runs.push((
                    job.attempt(),
                    job.attempts_used(),
                    tokio::time::Instant::now(),
                ));
                if runs.len() <= 4 {
                    Err(JobError::snooze(snooze))
                } else {
                    Ok(())
                }
            }
        }
    };
    let client = QueueClient::builder("client-5")
        .queue(q.clone(), 1, handler)
        .start()
        .expect("start");
    client
        .run_until_empty(Duration::from_secs(5))
        .await
        .expect("run until empty");
    let runs = runs.lock().expect("runs").clone();
    assert_eq!(runs.len(), 5, "four snoozes, then done: {runs:?}");
    assert!(
        runs.windows(2).all(|pair| pair[1].0 > pair[0].0),
        "attempt numbers grow: {runs:?}"
    );
    assert!(
        runs.iter().all(|(_, used, _)| *used == 1),
        "snoozes spend no attempt: {runs:?}"
    );
    assert!(
        runs.windows(2).all(|pair| pair[1].2 - pair[0].2 >= snooze),
        "each run waits out its snooze"
    );
    assert!(q.dead_letters().await.expect("dead letters").is_empty());
}

/// A snoozed job whose index upkeep failed after the snooze was written (the worker died
/// there, or the index was unavailable) keeps the claim's check entry as its only entry, and
/// that entry still finds it: the job runs again, its attempt given back.
pub async fn a_snoozed_job_runs_again_when_its_new_entry_was_not_placed(b: &dyn Backend) {
    use cql_lease::memory::{Fault, Times};
    use cql_workqueue::memory::QueueOp;

    let q = queue(b, "snooze-unplaced");
    q.enqueue("later").await.expect("enqueue");
    // The job's first claim: its snooze raises `requeued_at` to this claim's attempt.
    let job = claim_soon(b, &q, "w").await.expect("a job");
    assert_eq!((job.attempt(), job.attempts_used()), (1, 1));
    b.inject_queue(Some(QueueOp::Index), Fault::Unavailable, Times::Always);
    let snoozed = job.snooze(Duration::from_millis(200)).await;
    b.clear_faults();
    assert!(
        snoozed.is_ok(),
        "the snooze itself was written: {snoozed:?}"
    );
    let give_up = tokio::time::Instant::now() + queue_config().timing.lease_duration * 5;
    let again = loop {
        if let Some(job) = q.claim("w").await.expect("claim") {
            break job;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "the snoozed job was never found again"
        );
        b.sleep(Duration::from_millis(200)).await;
    };
    assert_eq!((again.attempt(), again.attempts_used()), (2, 1));
    again.complete().await.expect("complete");
}
