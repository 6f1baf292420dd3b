//! Failover of periodic jobs: three schedulers campaign, the leader is killed (no
//! resignation) again and again, and a worker runs every tick's item. Prints how late the
//! first tick after each kill ran (the failover gap), how late the other ticks ran, and
//! whether any tick was lost or run twice.
//!
//! Default: the embedded stores on simulated (paused) tokio time with the default election
//! timing (15 s lease) and a 1 s tick. `--wire`: the scylla backend over the CQL test server,
//! real time; `--scylla HOST:PORT`: a cluster, real time; both with a 2 s lease and a 500 ms
//! tick.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_election::{Election, Timing};
use cql_lease::LeaseStore;
use cql_lease::scylla::{Replication, ScyllaLeaseStore, ScyllaOptions};
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use cql_workqueue::periodic::{PeriodicJob, Schedule, Scheduler};
use cql_workqueue::store::QueueStore;
use cql_workqueue::{JobError, NewItem, QueueClient, QueueConfig, TypedJob, WorkQueue};

/// The command line (see the module documentation).
#[derive(Debug, clap::Parser)]
#[command(about = "Failover gap of periodic jobs under leader kills.", long_about = None)]
struct Cli {
    /// The scylla backend over the CQL test server, real time.
    #[arg(long)]
    wire: bool,
    /// A cluster at HOST:PORT, real time.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "wire")]
    scylla: Option<String>,
    /// How many times the leader is killed.
    #[arg(long, default_value_t = 10)]
    kills: usize,
    /// Ticks between kills.
    #[arg(long, default_value_t = 5)]
    ticks_between: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = <Cli as clap::Parser>::parse();
    if cli.kills == 0 || cli.ticks_between == 0 {
        return Err("--kills and --ticks-between must be at least 1".into());
    }
    let short = Timing {
        lease_duration: Duration::from_secs(2),
        renew_period: Duration::from_millis(500),
        retry_period: Duration::from_millis(250),
        max_clock_skew: Duration::ZERO,
        resolve_timeout: Duration::from_secs(2),
        request_timeout: None,
    };
    if !cli.wire && cli.scylla.is_none() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()?;
        let leases: Arc<dyn LeaseStore> = Arc::new(cql_lease::MemoryStore::new());
        let queues: Arc<dyn QueueStore> = Arc::new(cql_workqueue::memory::MemoryQueueStore::new());
        let setup = Setup {
            label: "embedded stores, simulated time".into(),
            leases,
            queues,
            timing: Timing::default(),
            tick: Duration::from_secs(1),
        };
        return runtime.block_on(bench(&cli, setup));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (session, label, _server) = match &cli.scylla {
            Some(addr) => {
                let session = scylla::client::session_builder::SessionBuilder::new()
                    .known_node(addr)
                    .build()
                    .await?;
                (
                    Arc::new(session),
                    format!("cluster at {addr}, real time"),
                    None,
                )
            }
            None => {
                let server =
                    CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra)).await?;
                let session = Arc::new(server.session().await);
                (
                    session,
                    "scylla backend over the CQL test server, real time".to_owned(),
                    Some(server),
                )
            }
        };
        let options = ScyllaOptions {
            keyspace: "cql_periodic_bench".into(),
            table: "leases".into(),
            replication: Replication::Simple(1),
            ..ScyllaOptions::default()
        };
        options.create_schema(&session).await?;
        let leases: Arc<dyn LeaseStore> =
            Arc::new(ScyllaLeaseStore::new(Arc::clone(&session), options.clone()).await?);
        let queue_options = ScyllaOptions {
            table: cql_workqueue::scylla::DEFAULT_TABLE.into(),
            ..options
        };
        cql_workqueue::scylla::ScyllaQueueStore::create_schema(&session, &queue_options).await?;
        let queues: Arc<dyn QueueStore> =
            Arc::new(cql_workqueue::scylla::ScyllaQueueStore::new(session, queue_options).await?);
        let setup = Setup {
            label,
            leases,
            queues,
            timing: short,
            tick: Duration::from_millis(500),
        };
        bench(&cli, setup).await
    })
}

struct Setup {
    label: String,
    leases: Arc<dyn LeaseStore>,
    queues: Arc<dyn QueueStore>,
    timing: Timing,
    tick: Duration,
}

fn now_ms() -> i64 {
    cql_workqueue::clock::now_micros() / 1000
}

async fn bench(cli: &Cli, setup: Setup) -> Result<(), Box<dyn std::error::Error>> {
    // A name of its own per run, so that runs on a cluster do not meet each other's ticks.
    let run = format!("periodic-bench-{}", now_ms());
    let queue = WorkQueue::new(setup.queues, &run, QueueConfig::default())?;
    let election = Election::new(setup.leases, run.clone(), setup.timing)?;
    let tick = setup.tick;
    let job = || {
        PeriodicJob::new(
            "tick",
            Schedule::every(tick).unwrap_or_else(|_| unreachable!()),
            |at| NewItem::json(&at),
        )
    };
    // When each tick's item ran, by tick time (ms).
    let ran: Arc<Mutex<BTreeMap<i64, Vec<i64>>>> = Arc::default();
    let client = {
        let ran = Arc::clone(&ran);
        QueueClient::builder("bench-runner")
            .queue(
                queue.clone(),
                8,
                move |job: TypedJob<std::time::SystemTime>| {
                    let ran = Arc::clone(&ran);
                    async move {
                        let tick = cql_workqueue::clock::micros_of(job.args) / 1000;
                        ran.lock()
                            .map_err(|_| JobError::failed("poisoned"))?
                            .entry(tick)
                            .or_default()
                            .push(now_ms());
                        Ok(())
                    }
                },
            )
            .start()?
    };
    let start = |n: usize| -> Result<Scheduler, Box<dyn std::error::Error>> {
        Ok(
            Scheduler::builder(queue.clone(), election.clone(), &format!("node-{n}"))
                .job(job())
                .start()?,
        )
    };
    let mut schedulers = (0..3).map(start).collect::<Result<Vec<_>, _>>()?;
    let mut kills = Vec::new();
    for n in 0..cli.kills {
        tokio::time::sleep(tick * cli.ticks_between).await;
        let leader = loop {
            if let Some(at) = schedulers.iter().position(Scheduler::is_leader) {
                break at;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        kills.push(now_ms());
        schedulers.swap_remove(leader).abort().await;
        schedulers.push(start(3 + n)?);
    }
    tokio::time::sleep(tick * cli.ticks_between + setup.timing.lease_duration).await;
    for scheduler in schedulers {
        scheduler.stop().await;
    }
    client.run_until_empty(Duration::from_secs(10)).await?;
    let ran = ran.lock().map_err(|_| "poisoned")?.clone();
    report(&setup.label, setup.timing, tick, &kills, &ran);
    Ok(())
}

fn report(
    label: &str,
    timing: Timing,
    tick: Duration,
    kills: &[i64],
    ran: &BTreeMap<i64, Vec<i64>>,
) {
    let step = i64::try_from(tick.as_millis()).unwrap_or(i64::MAX);
    let ticks: Vec<i64> = ran.keys().copied().collect();
    let lost: i64 = ticks
        .windows(2)
        .map(|pair| (pair[1] - pair[0]) / step - 1)
        .sum();
    let doubled = ran.values().filter(|runs| runs.len() > 1).count();
    // How late each tick ran (its first run).
    let late = |tick: i64| {
        ran.get(&tick)
            .and_then(|runs| runs.first())
            .map(|at| at - tick)
    };
    let firsts: Vec<i64> = kills
        .iter()
        .filter_map(|kill| ticks.iter().find(|tick| **tick > *kill))
        .copied()
        .collect();
    let mut gaps: Vec<i64> = firsts.iter().filter_map(|tick| late(*tick)).collect();
    let mut steady: Vec<i64> = ticks
        .iter()
        .filter(|tick| {
            kills.iter().all(|kill| {
                **tick <= *kill || **tick > kill + timing.lease_duration.as_millis() as i64 * 2
            })
        })
        .filter_map(|tick| late(*tick))
        .collect();
    gaps.sort_unstable();
    steady.sort_unstable();
    let secs = |ms: i64| ms as f64 / 1000.0;
    let lease = timing.lease_duration.as_secs_f64();
    println!("periodic jobs under leader kills: {label}");
    println!(
        "election lease {:?}, renew {:?}, retry {:?}; a tick every {tick:?}; {} kills, three schedulers",
        timing.lease_duration,
        timing.renew_period,
        timing.retry_period,
        kills.len()
    );
    println!(
        "ticks run: {}, lost: {lost}, run twice: {doubled}",
        ticks.len()
    );
    let line = |name: &str, values: &[i64]| {
        if let (Some(min), Some(max)) = (values.first(), values.last()) {
            let median = values[values.len() / 2];
            println!(
                "{name}: min {:.2} s, median {:.2} s, max {:.2} s (median {:.2} lease durations)",
                secs(*min),
                secs(median),
                secs(*max),
                secs(median) / lease
            );
        }
    };
    line("first tick after a kill ran late by", &gaps);
    line("other ticks ran late by", &steady);
}
