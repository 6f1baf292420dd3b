//! Failover and load figures of leader election.
//!
//! Default: the embedded store on simulated (paused) tokio time with the default election
//! timing, 200 runs each. `--wire RUNS`: the scylla backend over the CQL test server in real
//! time, with a short timing. Prints failover after a crash and after a resignation
//! (min / median / max, in seconds and in units of the lease TTL and the retry interval), and
//! store operations per second of an idle leader, a follower and an observer.

use std::sync::Arc;
use std::time::Duration;

use cql_election::{Election, ElectionConfig, ElectionEvent};
use cql_lease::scylla::{Replication, ScyllaOptions};
use cql_lease::{CountingStore, LeaseStore, MemoryStore};
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use examples::Args;
use futures::StreamExt;
use tokio::time::Instant;

type Factory =
    Box<dyn Fn() -> futures::future::BoxFuture<'static, Result<Arc<dyn LeaseStore>, String>>>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse(&["wire", "runs"])?;
    match args.get("wire") {
        None => {
            let runs = args.get("runs").map_or(Ok(200), str::parse)?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()?;
            let factory: Factory = Box::new(|| {
                Box::pin(async { Ok(Arc::new(MemoryStore::new()) as Arc<dyn LeaseStore>) })
            });
            runtime.block_on(bench(
                "embedded store, simulated time",
                ElectionConfig::default(),
                runs,
                factory,
                Duration::from_secs(600),
            ))
        }
        Some(runs) => {
            let runs = runs.parse()?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let config = ElectionConfig {
                lease_ttl: Duration::from_secs(2),
                renew_interval: Duration::from_millis(500),
                retry_interval: Duration::from_millis(250),
                max_clock_skew: Duration::ZERO,
            };
            runtime.block_on(async move {
                let server =
                    Arc::new(CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra)).await);
                let session = Arc::new(server.session().await);
                let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
                let factory: Factory = Box::new(move || {
                    let (session, counter, _server) = (
                        Arc::clone(&session),
                        Arc::clone(&counter),
                        Arc::clone(&server),
                    );
                    Box::pin(async move {
                        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let options = ScyllaOptions {
                            keyspace: "bench".into(),
                            table: format!("leases_{n}"),
                            replication: Replication::Simple(1),
                            request_timeout: Some(Duration::from_secs(2)),
                            ..ScyllaOptions::default()
                        };
                        options
                            .create_schema(&session)
                            .await
                            .map_err(|e| e.to_string())?;
                        let store = cql_lease::scylla::ScyllaLeaseStore::new(session, options)
                            .await
                            .map_err(|e| e.to_string())?;
                        Ok(Arc::new(store) as Arc<dyn LeaseStore>)
                    })
                });
                bench(
                    "scylla backend over the CQL test server, real time",
                    config,
                    runs,
                    factory,
                    Duration::from_secs(20),
                )
                .await
            })
        }
    }
}

async fn bench(
    label: &str,
    config: ElectionConfig,
    runs: usize,
    stores: Factory,
    window: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "{label}: lease ttl {:?} (leader acts {:?} past each renewal), renew {:?}, retry {:?} (jittered 50-100%), skew {:?}; {runs} runs",
        config.lease_ttl,
        config.lease_config().validity(),
        config.renew_interval,
        config.retry_interval,
        config.max_clock_skew
    );
    let mut crash = Vec::new();
    let mut resign = Vec::new();
    for run in 0..runs {
        crash.push(failover(&config, stores().await?, run, true).await?);
        resign.push(failover(&config, stores().await?, run, false).await?);
    }
    println!(
        "\n| failover after | min | median | max | max in TTLs | max in retry intervals | bound |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (what, samples, bound) in [
        (
            "leader crash",
            &mut crash,
            config.takeover_bound() + config.retry_interval,
        ),
        ("resignation", &mut resign, config.retry_interval),
    ] {
        samples.sort();
        let (min, med, max) = (
            samples[0],
            samples[samples.len() / 2],
            samples[samples.len() - 1],
        );
        println!(
            "| {what} | {:.3} s | {:.3} s | {:.3} s | {:.2} | {:.2} | {:.3} s |",
            min.as_secs_f64(),
            med.as_secs_f64(),
            max.as_secs_f64(),
            max.as_secs_f64() / config.lease_ttl.as_secs_f64(),
            max.as_secs_f64() / config.retry_interval.as_secs_f64(),
            bound.as_secs_f64(),
        );
    }
    idle_load(&config, stores().await?, window).await
}

/// One leader and two followers; the leader crashes (or resigns) at a random point of its
/// renewal cycle; returns the time until a follower is elected.
async fn failover(
    config: &ElectionConfig,
    store: Arc<dyn LeaseStore>,
    run: usize,
    crash: bool,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let election = Election::new(store, format!("bench-{run}"), *config)?;
    let mut leader = election.campaign("leader", None)?;
    while !matches!(leader.next().await, Some(ElectionEvent::Elected { .. })) {}
    let mut followers = vec![
        election.campaign("f1", None)?,
        election.campaign("f2", None)?,
    ];
    // A pseudo-random phase within the renewal cycle, reproducible per run.
    let phase = config
        .renew_interval
        .mul_f64(((run * 7919) % 1000) as f64 / 1000.0);
    tokio::time::sleep(config.renew_interval + phase).await;
    let started = Instant::now();
    if crash {
        leader.abort().await;
    } else {
        leader.resign().await?;
    }
    let started = if crash { started } else { Instant::now() };
    let elected = followers.iter_mut().map(|f| {
        Box::pin(
            async move { while !matches!(f.next().await, Some(ElectionEvent::Elected { .. })) {} },
        )
    });
    futures::future::select_all(elected).await;
    let took = started.elapsed();
    for f in &followers {
        f.resign().await?;
    }
    Ok(took)
}

/// Store operations per second of an idle leader, a follower and an observer.
async fn idle_load(
    config: &ElectionConfig,
    store: Arc<dyn LeaseStore>,
    window: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let counted = |s: &Arc<dyn LeaseStore>| Arc::new(CountingStore::new(Arc::clone(s)));
    let (leader_store, follower_store, observer_store) =
        (counted(&store), counted(&store), counted(&store));
    let leader = Election::new(leader_store.clone(), "idle", *config)?.campaign("leader", None)?;
    let mut leader = leader;
    while !matches!(leader.next().await, Some(ElectionEvent::Elected { .. })) {}
    let follower =
        Election::new(follower_store.clone(), "idle", *config)?.campaign("follower", None)?;
    let mut observer = Election::new(observer_store.clone(), "idle", *config)?.observe();
    let (l0, f0, o0) = (
        leader_store.calls(),
        follower_store.calls(),
        observer_store.calls(),
    );
    let drain = async { while observer.next().await.is_some() {} };
    let _ = tokio::time::timeout(window, drain).await;
    let per_second = |c: cql_lease::CallCounts| {
        (
            c.writes() as f64 / window.as_secs_f64(),
            c.read as f64 / window.as_secs_f64(),
        )
    };
    println!("\n| idle role | LWTs per second | SERIAL reads per second |");
    println!("|---|---|---|");
    for (role, calls) in [
        ("leader", leader_store.calls().since(l0)),
        ("follower", follower_store.calls().since(f0)),
        ("observer", observer_store.calls().since(o0)),
    ] {
        let (writes, reads) = per_second(calls);
        println!("| {role} | {writes:.3} | {reads:.3} |");
    }
    println!(
        "(measured over {:?}; expected: leader 1 / renew interval = {:.3}, follower and observer about 1 / (0.75 x retry interval) = {:.3})",
        window,
        1.0 / config.renew_interval.as_secs_f64(),
        1.0 / (0.75 * config.retry_interval.as_secs_f64())
    );
    leader.resign().await?;
    follower.resign().await?;
    Ok(())
}
