//! One client running typed workers on several queues: what a handler's answer does to its
//! job, a concurrency per queue, one stop for all, and a batch run until the queues are empty.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::{JobError, NewItem, QueueClient, QueueError, TypedJob, WorkQueue};
use serde::{Deserialize, Serialize};

use super::queue::{claim_soon, queue, queue_config};
use crate::backend::Backend;

/// What a test job asks its handler to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Behave {
    Succeed,
    FailOnce,
    Cancel,
    PanicOnce,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Task {
    name: String,
    behave: Behave,
}

async fn enqueue(q: &WorkQueue, name: &str, behave: Behave) {
    let task = Task {
        name: name.to_owned(),
        behave,
    };
    q.enqueue_item(NewItem::json(&task).expect("json"))
        .await
        .expect("enqueue");
}

/// A handler's answer ends its job: `Ok` completes it, `Failed` retries it, `Cancel` makes
/// it a dead letter at once, a panic is a failed attempt, and a payload that is not a `Task`
/// never reaches the handler; the client runs until nothing is left.
pub async fn typed_handlers_answer_for_their_jobs(b: &dyn Backend) {
    let q = queue(b, "client-typed");
    enqueue(&q, "ok", Behave::Succeed).await;
    enqueue(&q, "flaky", Behave::FailOnce).await;
    enqueue(&q, "hopeless", Behave::Cancel).await;
    enqueue(&q, "crashy", Behave::PanicOnce).await;
    q.enqueue("not a task").await.expect("enqueue");
    let calls: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let handler = {
        let calls = Arc::clone(&calls);
        move |job: TypedJob<Task>| {
            let calls = Arc::clone(&calls);
            async move {
                let call = {
                    let mut calls = calls.lock().expect("calls");
                    let count = calls.entry(job.args.name.clone()).or_default();
                    *count += 1;
                    *count
                };
                match (job.args.behave, call) {
                    (Behave::FailOnce, 1) => Err(JobError::failed("not yet")),
                    (Behave::Cancel, _) => Err(JobError::cancel("no retry can help")),
                    (Behave::PanicOnce, 1) => panic!("handler bug"),
                    _ => Ok(()),
                }
            }
        }
    };
    let client = QueueClient::builder("client-1")
        .queue(q.clone(), 2, handler)
        .start()
        .expect("start");
    let report = client
        .run_until_empty(Duration::from_secs(5))
        .await
        .expect("run until empty");
    assert_eq!(report.unfinished(), 0);
    let calls = calls.lock().expect("calls").clone();
    let expected: HashMap<String, u32> = [("ok", 1), ("flaky", 2), ("hopeless", 1), ("crashy", 2)]
        .map(|(name, n)| (name.to_owned(), n))
        .into();
    assert_eq!(calls, expected, "handler calls per job");
    let dead: Vec<String> = q
        .dead_letters()
        .await
        .expect("dead letters")
        .into_iter()
        .map(|letter| letter.last_error.unwrap_or_default())
        .collect();
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(
        dead.iter().any(|e| e == "cancelled: no retry can help"),
        "{dead:?}"
    );
    assert!(
        dead.iter().any(|e| e.ends_with("Task)")),
        "a decoding error naming the type: {dead:?}"
    );
    let stats = q.stats().await.expect("stats");
    assert_eq!(
        (stats.available, stats.scheduled, stats.running),
        (0, 0, 0),
        "{stats:?}"
    );
}

/// Counts the handlers running at once on one queue and the most ever seen.
#[derive(Debug, Default)]
struct Gauge {
    now: AtomicUsize,
    most: AtomicUsize,
    done: AtomicUsize,
}

fn gauged(
    gauge: &Arc<Gauge>,
    hold: Duration,
) -> impl Fn(TypedJob<u32>) -> futures::future::BoxFuture<'static, Result<(), JobError>>
+ Send
+ Sync
+ 'static {
    let gauge = Arc::clone(gauge);
    move |_job: TypedJob<u32>| {
        let gauge = Arc::clone(&gauge);
        Box::pin(async move {
            let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(hold).await;
            gauge.now.fetch_sub(1, Ordering::SeqCst);
            gauge.done.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    }
}

/// One client runs two queues, each with its own concurrency, which it reaches and never
/// passes, and every job of both runs once.
pub async fn each_queue_runs_at_its_own_concurrency(b: &dyn Backend) {
    let narrow = queue(b, "client-narrow");
    let wide = queue(b, "client-wide");
    for n in 0..8u32 {
        narrow
            .enqueue_item(NewItem::json(&n).expect("json"))
            .await
            .expect("enqueue");
        wide.enqueue_item(NewItem::json(&n).expect("json"))
            .await
            .expect("enqueue");
    }
    let (narrow_gauge, wide_gauge) = (Arc::<Gauge>::default(), Arc::<Gauge>::default());
    let hold = Duration::from_millis(400);
    let client = QueueClient::builder("client-2")
        .queue(narrow.clone(), 1, gauged(&narrow_gauge, hold))
        .queue(wide.clone(), 4, gauged(&wide_gauge, hold))
        .start()
        .expect("start");
    let report = client
        .run_until_empty(Duration::from_secs(5))
        .await
        .expect("run until empty");
    assert_eq!(report.queues.len(), 2);
    assert_eq!(report.unfinished(), 0);
    assert_eq!(narrow_gauge.done.load(Ordering::SeqCst), 8);
    assert_eq!(wide_gauge.done.load(Ordering::SeqCst), 8);
    assert_eq!(narrow_gauge.most.load(Ordering::SeqCst), 1);
    let wide_most = wide_gauge.most.load(Ordering::SeqCst);
    assert!(
        (2..=4).contains(&wide_most),
        "the wide queue ran {wide_most} at once (concurrency 4)"
    );
}

/// One stop drains every queue within one grace period: the jobs still running at the
/// deadline are told to stop, a handler that returns then ends at once and one that ignores
/// it is dropped (its items handed back), and the report says which queue left what.
/// Nothing is claimed after the stop.
pub async fn one_stop_drains_every_queue(b: &dyn Backend) {
    let slow = queue(b, "client-slow");
    let quick = queue(b, "client-quick");
    for n in 0..2u32 {
        slow.enqueue_item(NewItem::json(&n).expect("json"))
            .await
            .expect("enqueue");
    }
    let obedient = queue(b, "client-obedient");
    obedient
        .enqueue_item(NewItem::json(&1u32).expect("json"))
        .await
        .expect("enqueue");
    let quick_gauge = Arc::<Gauge>::default();
    let client = QueueClient::builder("client-3")
        .queue(obedient.clone(), 1, |job: TypedJob<u32>| async move {
            // Works until told to stop, then returns at once.
            job.cancellation_token().cancelled().await;
            Err(JobError::failed("stopped"))
        })
        .queue(slow.clone(), 2, |job: TypedJob<u32>| async move {
            // Works until told to stop, and ignores it.
            job.cancellation_token().cancelled().await;
            std::future::pending::<()>().await;
            Ok(())
        })
        .queue(
            quick.clone(),
            2,
            gauged(&quick_gauge, Duration::from_millis(50)),
        )
        .start()
        .expect("start");
    // Both slow jobs and the obedient one under way.
    for _ in 0..100 {
        let in_flight = client.in_flight();
        if in_flight.get("client-slow") == Some(&2) && in_flight.get("client-obedient") == Some(&1)
        {
            break;
        }
        b.sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        client.in_flight().get("client-slow"),
        Some(&2),
        "slow queue: {:?}",
        slow.stats().await
    );
    let report = client.stop(Duration::from_millis(500)).await;
    assert_eq!(
        report.queues.get("client-slow").map(|r| r.unfinished),
        Some(2)
    );
    assert_eq!(
        report.queues.get("client-obedient").map(|r| r.unfinished),
        Some(1)
    );
    assert_eq!(
        report.queues.get("client-quick").map(|r| r.unfinished),
        Some(0)
    );
    // Stopped: a job enqueued now is not claimed by the client.
    quick
        .enqueue_item(NewItem::json(&9u32).expect("json"))
        .await
        .expect("enqueue");
    b.sleep(Duration::from_secs(1)).await;
    assert_eq!(quick_gauge.done.load(Ordering::SeqCst), 0);
    // The handed-back slow jobs are claimable by others at once.
    for _ in 0..2 {
        let job = claim_soon(b, &slow, "other")
            .await
            .expect("a handed-back job");
        job.complete().await.expect("complete");
    }
    let job = claim_soon(b, &quick, "other").await.expect("the quick job");
    job.complete().await.expect("complete");
}

/// What a client counts in flight has reached its handler: a claim still being made (a slow
/// claim LWT, as on a loaded node) is not counted, since a stop then undoes it instead of
/// running it. So a stop called once both jobs are counted reports both unfinished.
pub async fn in_flight_counts_only_jobs_handed_out(b: &dyn Backend) {
    let q = queue(b, "client-counted");
    for n in 0..2u32 {
        q.enqueue_item(NewItem::json(&n).expect("json"))
            .await
            .expect("enqueue");
    }
    // Each claim takes 300 ms, well within the request timeout.
    b.inject_queue(
        Some(QueueOp::Claim),
        Fault::Latency(Duration::from_millis(300)),
        Times::Always,
    );
    let started = Arc::new(AtomicUsize::new(0));
    let handler = {
        let started = Arc::clone(&started);
        move |job: TypedJob<u32>| {
            started.fetch_add(1, Ordering::SeqCst);
            async move {
                job.cancellation_token().cancelled().await;
                Err(JobError::failed("stopped"))
            }
        }
    };
    let client = QueueClient::builder("client-4")
        .queue(q.clone(), 2, handler)
        .start()
        .expect("start");
    for _ in 0..250 {
        if client.in_flight().get("client-counted") == Some(&2) {
            break;
        }
        b.sleep(Duration::from_millis(20)).await;
    }
    b.clear_faults();
    let report = client.stop(Duration::from_millis(500)).await;
    assert_eq!(
        report.queues.get("client-counted").map(|r| r.unfinished),
        Some(2),
        "counted 2 in flight, {} handlers started",
        started.load(Ordering::SeqCst)
    );
    assert_eq!(started.load(Ordering::SeqCst), 2);
}

/// A client's shutdown token stops claiming on every queue at once.
pub async fn the_shutdown_token_stops_every_queue(b: &dyn Backend) {
    let first = queue(b, "client-first");
    let second = queue(b, "client-second");
    let gauge = Arc::<Gauge>::default();
    let client = QueueClient::builder("client-4")
        .queue(first.clone(), 1, gauged(&gauge, Duration::ZERO))
        .queue(second.clone(), 1, gauged(&gauge, Duration::ZERO))
        .start()
        .expect("start");
    client.shutdown_token().cancel();
    first
        .enqueue_item(NewItem::json(&1u32).expect("json"))
        .await
        .expect("enqueue");
    second
        .enqueue_item(NewItem::json(&2u32).expect("json"))
        .await
        .expect("enqueue");
    b.sleep(Duration::from_secs(1)).await;
    assert_eq!(
        gauge.done.load(Ordering::SeqCst),
        0,
        "a stopped client ran a job"
    );
    assert_eq!(client.stop(Duration::from_secs(1)).await.unfinished(), 0);
    for q in [&first, &second] {
        let stats = q.stats().await.expect("stats");
        assert_eq!((stats.available, stats.running), (1, 0), "{stats:?}");
    }
}

/// Bad settings are refused before anything runs: no queue, a queue given twice, a
/// concurrency of 0, a bad worker id; an item enqueued meanwhile stays available.
pub async fn bad_client_settings_are_refused_before_anything_runs(b: &dyn Backend) {
    let q = queue(b, "client-refused");
    q.enqueue_item(NewItem::json(&1u32).expect("json"))
        .await
        .expect("enqueue");
    let ok = |_job: TypedJob<u32>| async { Ok(()) };
    let refused = [
        QueueClient::builder("w").start(),
        QueueClient::builder("w")
            .queue(q.clone(), 1, ok)
            .queue(q.clone(), 1, ok)
            .start(),
        QueueClient::builder("w").queue(q.clone(), 0, ok).start(),
        QueueClient::builder("").queue(q.clone(), 1, ok).start(),
        QueueClient::builder("w\n").queue(q.clone(), 1, ok).start(),
    ];
    for (n, outcome) in refused.into_iter().enumerate() {
        assert!(
            matches!(outcome, Err(QueueError::InvalidArgument(_))),
            "case {n}: {outcome:?}"
        );
    }
    b.sleep(queue_config().timing.retry_period * 2).await;
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.available, stats.running), (1, 0), "{stats:?}");
}
