//! Periodic jobs enqueued by an elected leader: every tick exactly once across leader kills,
//! ticks missed while nobody led run late or are skipped, and bad schedules are refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cql_election::Election;
use cql_workqueue::periodic::{MissedTicks, PeriodicJob, Schedule, Scheduler};
use cql_workqueue::{
    ClaimMode, ItemId, JobError, NewItem, QueueClient, QueueConfig, QueueError, Timing, TypedJob,
    WorkQueue,
};

use super::queue::{queue, queue_config, queue_store};
use crate::backend::Backend;

const TICK: Duration = Duration::from_millis(300);

/// A short lease, so that a killed leader is replaced within a few ticks.
fn election_timing() -> Timing {
    Timing {
        lease_duration: Duration::from_millis(1500),
        renew_period: Duration::from_millis(300),
        retry_period: Duration::from_millis(100),
        ..super::test_config()
    }
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The periodic job of these scenarios: every [`TICK`], its item the tick's time.
fn ticking(missed: MissedTicks) -> PeriodicJob {
    let every = Schedule::every(TICK).expect("schedule");
    PeriodicJob::new("tick", every, |at| NewItem::json(&millis(at))).missed(missed)
}

fn scheduler(
    q: &WorkQueue,
    election: &Election,
    candidate: &str,
    missed: MissedTicks,
) -> Scheduler {
    Scheduler::builder(q.clone(), election.clone(), candidate)
        .job(ticking(missed))
        .start()
        .expect("scheduler")
}

/// The items run, by tick time: the item ids of each run (a worker may run an item twice,
/// at least once being the queue's promise; two ids would be the tick enqueued twice).
type Runs = Arc<Mutex<BTreeMap<u64, Vec<ItemId>>>>;

/// Runs every tick's item, recording it in `runs`.
fn runner(q: &WorkQueue, runs: &Runs) -> QueueClient {
    let runs = Arc::clone(runs);
    QueueClient::builder("runner")
        .queue(q.clone(), 4, move |job: TypedJob<u64>| {
            let runs = Arc::clone(&runs);
            async move {
                let mut runs = runs.lock().expect("runs");
                runs.entry(job.args).or_default().push(job.id().clone());
                Ok::<(), JobError>(())
            }
        })
        .start()
        .expect("runner")
}

/// The ticks run, each checked to have been enqueued once.
fn ticks_enqueued_once(runs: &Runs) -> Vec<u64> {
    let runs = runs.lock().expect("runs").clone();
    for (tick, ids) in &runs {
        let first = &ids[0];
        assert!(
            ids.iter().all(|id| id == first),
            "tick {tick} enqueued more than once: {ids:?}"
        );
    }
    runs.keys().copied().collect()
}

fn now_ms() -> u64 {
    u64::try_from(cql_workqueue::clock::now_micros() / 1000).unwrap_or(0)
}

/// Waits until one of `schedulers` leads; its index.
async fn leader_of(b: &dyn Backend, schedulers: &[Scheduler]) -> usize {
    for _ in 0..200 {
        if let Some(at) = schedulers.iter().position(Scheduler::is_leader) {
            return at;
        }
        b.sleep(Duration::from_millis(50)).await;
    }
    panic!("no scheduler led within 10 s");
}

/// Three schedulers campaign; the leader is killed (no resignation: its lease runs out)
/// six times, each time replaced by a fresh process. Over more than 50 ticks every tick
/// from the first to the last is enqueued and run exactly once: the ticks missed while
/// nobody led are enqueued late by the next leader, and none twice.
pub async fn periodic_ticks_survive_leader_kills(b: &dyn Backend) {
    let q = queue(b, "periodic-kills");
    let election = Election::new(b.store(), "periodic-kills", election_timing()).expect("election");
    let runs: Runs = Arc::default();
    let client = runner(&q, &runs);
    let mut schedulers: Vec<Scheduler> = (0..3)
        .map(|n| scheduler(&q, &election, &format!("node-{n}"), MissedTicks::RunLate))
        .collect();
    for started in 3..9 {
        b.sleep(TICK * 8).await;
        let leader = leader_of(b, &schedulers).await;
        schedulers.swap_remove(leader).abort().await;
        schedulers.push(scheduler(
            &q,
            &election,
            &format!("node-{started}"),
            MissedTicks::RunLate,
        ));
    }
    b.sleep(TICK * 8).await;
    leader_of(b, &schedulers).await;
    for scheduler in schedulers {
        scheduler.stop().await;
    }
    let report = client
        .run_until_empty(Duration::from_secs(5))
        .await
        .expect("run");
    assert_eq!(report.unfinished(), 0);
    let ticks = ticks_enqueued_once(&runs);
    assert!(ticks.len() >= 50, "only {} ticks", ticks.len());
    let step = u64::try_from(TICK.as_millis()).expect("ms");
    let lost: Vec<_> = ticks
        .windows(2)
        .filter(|pair| pair[1] - pair[0] != step)
        .collect();
    assert!(lost.is_empty(), "ticks lost between: {lost:?}");
}

/// A new leader enqueues late the ticks missed within its catch-up window even when the
/// last tick enqueued lies before the window (a failover longer than the window): it looks
/// further back for that tick rather than taking the empty window for a first start.
pub async fn ticks_missed_within_the_window_run_late_after_a_long_failover(b: &dyn Backend) {
    let q = queue(b, "periodic-window");
    let timing = Timing {
        lease_duration: Duration::from_secs(3),
        ..election_timing()
    };
    let election = Election::new(b.store(), "periodic-window", timing).expect("election");
    let window = Duration::from_millis(1500);
    let start = |candidate: &str| {
        Scheduler::builder(q.clone(), election.clone(), candidate)
            .job(ticking(MissedTicks::RunLate))
            .catch_up(window)
            .start()
            .expect("scheduler")
    };
    let runs: Runs = Arc::default();
    let client = runner(&q, &runs);
    let first = start("node-a");
    leader_of(b, std::slice::from_ref(&first)).await;
    b.sleep(TICK * 5).await;
    first.abort().await;
    let second = start("node-b");
    leader_of(b, std::slice::from_ref(&second)).await;
    let elected = now_ms();
    b.sleep(TICK * 4).await;
    second.stop().await;
    client
        .run_until_empty(Duration::from_secs(5))
        .await
        .expect("run");
    let ticks = ticks_enqueued_once(&runs);
    // The ticks well inside the window the new leader had when elected (the margin covers
    // how late this test saw the election).
    let (step, margin) = (u64::try_from(TICK.as_millis()).expect("ms"), 200);
    let window_ms = u64::try_from(window.as_millis()).expect("ms");
    let expected: Vec<u64> = ((elected - window_ms + margin) / step + 1
        ..=(elected - margin) / step)
        .map(|n| n * step)
        .collect();
    assert!(expected.len() >= 2, "{expected:?}");
    let missing: Vec<_> = expected
        .iter()
        .filter(|tick| !ticks.contains(tick))
        .collect();
    assert!(
        missing.is_empty(),
        "missed ticks not run late: {missing:?} (ran {ticks:?})"
    );
}

/// With [`MissedTicks::Skip`] the ticks that came while nobody led are not enqueued by the
/// next leader, and none is enqueued twice.
pub async fn skipped_ticks_stay_skipped(b: &dyn Backend) {
    let q = queue(b, "periodic-skip");
    let election = Election::new(b.store(), "periodic-skip", election_timing()).expect("election");
    let runs: Runs = Arc::default();
    let client = runner(&q, &runs);
    let first = scheduler(&q, &election, "node-a", MissedTicks::Skip);
    leader_of(b, std::slice::from_ref(&first)).await;
    b.sleep(TICK * 5).await;
    first.abort().await;
    // Nobody leads for a while (the killed leader's lease runs out meanwhile).
    b.sleep(TICK * 10).await;
    let second = scheduler(&q, &election, "node-b", MissedTicks::Skip);
    leader_of(b, std::slice::from_ref(&second)).await;
    b.sleep(TICK * 5).await;
    second.stop().await;
    client
        .run_until_empty(Duration::from_secs(5))
        .await
        .expect("run");
    let ticks = ticks_enqueued_once(&runs);
    let step = u64::try_from(TICK.as_millis()).expect("ms");
    let gaps: Vec<u64> = ticks.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(
        gaps.iter().any(|gap| *gap >= step * 8),
        "the ticks while nobody led were skipped: {gaps:?}"
    );
}

/// Bad periodic settings are refused before anything is sent: no job, a name given twice,
/// a catch-up window past half the done retention, a queue without unique keys, a bad
/// interval or cron expression, a candidate id with a control character.
pub async fn bad_periodic_settings_are_refused(b: &dyn Backend) {
    let q = queue(b, "periodic-refused");
    let election =
        Election::new(b.store(), "periodic-refused", election_timing()).expect("election");
    let job = || ticking(MissedTicks::RunLate);
    let build = |q: &WorkQueue| Scheduler::builder(q.clone(), election.clone(), "node");
    let bakery = WorkQueue::new(
        queue_store(b),
        "periodic-bakery",
        QueueConfig {
            claim_mode: ClaimMode::Bakery,
            ..queue_config()
        },
    );
    let refused = [
        build(&q).start(),
        build(&q).job(job()).job(job()).start(),
        build(&q)
            .job(job())
            .catch_up(queue_config().done_retention)
            .start(),
        Scheduler::builder(q.clone(), election.clone(), "node\n")
            .job(job())
            .start(),
    ];
    for (n, outcome) in refused.into_iter().enumerate() {
        assert!(
            matches!(outcome, Err(QueueError::InvalidArgument(_))),
            "case {n}: {outcome:?}"
        );
    }
    assert!(matches!(
        Scheduler::builder(
            bakery.expect("a bakery-mode queue"),
            election.clone(),
            "node"
        )
        .job(job())
        .start(),
        Err(QueueError::InvalidArgument(_))
    ));
    assert!(Schedule::every(Duration::ZERO).is_err());
    assert!(Schedule::cron("61 * * * * *").is_err());
    assert!(
        election.leader().await.expect("leader").is_none(),
        "nobody campaigned"
    );
    let stats = q.stats().await.expect("stats");
    assert_eq!(stats.available + stats.scheduled, 0, "{stats:?}");
}
