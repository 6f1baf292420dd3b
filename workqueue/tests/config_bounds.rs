//! Durations given to a queue are bounded where they are validated, and a drain's grace may be
//! as long as a `Duration` can be: no setting or argument panics on a deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_lease::{InvalidArgument, MAX_DURATION};
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::{QueueConfig, WorkQueue};
use futures::StreamExt;

/// Sets one duration field of a config.
type SetDuration = fn(&mut QueueConfig, Duration);

/// Every duration of a `QueueConfig` besides its timing is refused above 20 years (the
/// timing's own bound), with `InvalidArgument::Invalid` naming the field; every one at the
/// bound is accepted.
#[test]
fn queue_durations_over_twenty_years_are_refused_naming_the_field() {
    let ok = QueueConfig::default();
    let cases: [(&str, SetDuration); 6] = [
        ("retry_backoff", |c, d| c.retry_backoff = d),
        ("max_retry_backoff", |c, d| c.max_retry_backoff = d),
        ("bucket_width", |c, d| c.bucket_width = d),
        ("cursor_refresh", |c, d| c.cursor_refresh = d),
        ("cold_start", |c, d| c.cold_start = d),
        ("done_retention", |c, d| c.done_retention = d),
    ];
    for (field, set) in cases {
        for over in [Duration::MAX, MAX_DURATION + Duration::from_nanos(1)] {
            let mut bad = ok;
            set(&mut bad, over);
            // The backoff's own order check must not be what refuses it.
            bad.max_retry_backoff = bad.max_retry_backoff.max(bad.retry_backoff);
            match bad.validate() {
                Err(InvalidArgument::Invalid { reason, .. }) => {
                    assert!(reason.contains(field), "{field}: {reason}");
                }
                other => panic!("{field} {over:?} accepted: {other:?}"),
            }
        }
    }
    let mut longest = ok;
    for (_, set) in cases {
        set(&mut longest, MAX_DURATION);
    }
    assert_eq!(longest.validate(), Ok(()));
}

/// `drain(Duration::MAX)` does not panic: a grace too long to add to the clock has no
/// deadline, so a drain with nothing in flight ends at once and one with a job in flight
/// ends when that job finishes.
#[tokio::test(start_paused = true)]
async fn a_drain_with_an_unbounded_grace_waits_for_the_jobs() {
    let queue = WorkQueue::new(
        Arc::new(MemoryQueueStore::new()),
        "mail",
        QueueConfig::default(),
    )
    .unwrap();

    let idle = queue.worker("idle").unwrap();
    let report = idle.drain_handle().drain(Duration::MAX).await;
    assert_eq!(report.unfinished, 0);

    queue.enqueue("a").await.unwrap();
    let mut worker = queue.worker("busy").unwrap();
    let drain = worker.drain_handle();
    let job = worker.next().await.expect("a job");
    let draining = tokio::spawn(async move { drain.drain(Duration::MAX).await });
    // Long past any grace a caller would give: still waiting for the job.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(!draining.is_finished());
    job.complete().await.unwrap();
    let report = draining.await.expect("drain must not panic");
    assert_eq!(report.unfinished, 0);
}

/// A `cursor_refresh` of zero (every claim pass a rescan from the cursor) is refused,
/// naming the field.
#[test]
fn a_cursor_refresh_of_zero_is_refused() {
    let config = QueueConfig {
        cursor_refresh: Duration::ZERO,
        ..QueueConfig::default()
    };
    let refused = config.validate();
    assert!(
        matches!(&refused, Err(e) if e.to_string().contains("cursor_refresh")),
        "{refused:?}"
    );
}
