//! Failover and load figures of leader election.
//!
//! Default: the embedded store on simulated (paused) tokio time with the default election
//! timing, 200 runs each. `--wire RUNS`: the scylla backend over the CQL test server in real
//! time, with a short timing. Prints failover after a crash and after a resignation
//! (min / median / max, in seconds and in units of the lease TTL and the retry interval), and
//! the Paxos rounds per second of an idle election for 3, 30 and 300 candidates (3 and 30 on
//! the wire) with 0 and 50 observers. `--frozen RUNS [--request-timeout-ms MS]`: the time
//! without a leader while one node of a three-node CQL test server is frozen (see
//! `examples::frozen`).

use std::sync::Arc;
use std::time::Duration;

use cql_election::{Election, ElectionEvent, Timing};
use cql_lease::scylla::{Replication, ScyllaOptions};
use cql_lease::{CountingStore, LeaseStore, MemoryStore};
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use examples::Flags;
use futures::StreamExt;
use tokio::time::Instant;

type Factory =
    Box<dyn Fn() -> futures::future::BoxFuture<'static, Result<Arc<dyn LeaseStore>, String>>>;

/// The command line (see the module documentation).
#[derive(Debug, clap::Parser)]
#[command(about = "Failover and load figures of leader election.", long_about = None)]
struct Cli {
    /// The scylla backend over the CQL test server in real time, this many runs.
    #[arg(long = "wire", value_name = "RUNS")]
    wire: Option<String>,
    /// Runs on the embedded store, simulated time [default: 200].
    #[arg(long = "runs", value_name = "RUNS")]
    runs: Option<String>,
    /// Time without a leader while one node of three is frozen, this many runs.
    #[arg(long = "frozen", value_name = "RUNS")]
    frozen: Option<String>,
    /// With --frozen: the driver's request timeout.
    #[arg(long = "request-timeout-ms", value_name = "MS")]
    request_timeout_ms: Option<String>,
}

impl Flags for Cli {
    fn get(&self, name: &str) -> Option<&str> {
        match name {
            "wire" => self.wire.as_deref(),
            "runs" => self.runs.as_deref(),
            "frozen" => self.frozen.as_deref(),
            "request-timeout-ms" => self.request_timeout_ms.as_deref(),
            _ => None,
        }
    }
}
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = <Cli as clap::Parser>::parse();
    if let Some(runs) = args.get("frozen") {
        let request_timeout = match args.get("request-timeout-ms") {
            Some(ms) => Some(Duration::from_millis(ms.parse()?)),
            None => None,
        };
        let config = Timing {
            lease_duration: Duration::from_secs(2),
            renew_period: Duration::from_millis(500),
            retry_period: Duration::from_millis(250),
            max_clock_skew: Duration::ZERO,
            resolve_timeout: Duration::from_secs(2),
            request_timeout,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        return runtime.block_on(examples::frozen::bench(config, runs.parse()?));
    }
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
                Timing::default(),
                runs,
                factory,
                Duration::from_secs(600),
                &[3, 30, 300],
            ))
        }
        Some(runs) => {
            let runs = runs.parse()?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let config = Timing {
                lease_duration: Duration::from_secs(2),
                renew_period: Duration::from_millis(500),
                retry_period: Duration::from_millis(250),
                max_clock_skew: Duration::ZERO,
                resolve_timeout: Duration::from_secs(2),
                request_timeout: None,
            };
            runtime.block_on(async move {
                let server = Arc::new(
                    CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra)).await?,
                );
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
                    Duration::from_secs(10),
                    &[3, 30],
                )
                .await
            })
        }
    }
}

async fn bench(
    label: &str,
    config: Timing,
    runs: usize,
    stores: Factory,
    window: Duration,
    fleets: &[usize],
) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "{label}: lease ttl {:?} (leader acts {:?} past each renewal), renew {:?}, retry {:?} (jittered 50-100%), skew {:?}; {runs} runs",
        config.lease_duration,
        config.renew_deadline(),
        config.renew_period,
        config.retry_period,
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
            config.takeover_bound() + config.retry_period,
        ),
        ("resignation", &mut resign, config.retry_period),
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
            max.as_secs_f64() / config.lease_duration.as_secs_f64(),
            max.as_secs_f64() / config.retry_period.as_secs_f64(),
            bound.as_secs_f64(),
        );
    }
    idle_load(&config, &stores, window, fleets).await
}

/// One leader and two followers; the leader crashes (or resigns) at a random point of its
/// renewal cycle; returns the time until a follower is elected.
async fn failover(
    config: &Timing,
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
        .renew_period
        .mul_f64(((run * 7919) % 1000) as f64 / 1000.0);
    tokio::time::sleep(config.renew_period + phase).await;
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

/// Paxos rounds per second of an idle election (a healthy leader) by fleet size: every
/// LWT and every SERIAL read counts as a round; plain reads (followers' and observers'
/// polls) do not contend in Paxos and are shown apart.
async fn idle_load(
    config: &Timing,
    stores: &Factory,
    window: Duration,
    fleets: &[usize],
) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "\n| candidates | observers | Paxos rounds/s | LWTs/s | SERIAL reads/s | plain reads/s |"
    );
    println!("|---|---|---|---|---|---|");
    for &candidates in fleets {
        for observers in [0, 50] {
            let counting = Arc::new(CountingStore::new(stores().await?));
            let election = Election::new(counting.clone(), "idle", *config)?;
            let mut leader = election.campaign("c0", None)?;
            while !matches!(leader.next().await, Some(ElectionEvent::Elected { .. })) {}
            let others = (1..candidates)
                .map(|i| election.campaign(&format!("c{i}"), None))
                .collect::<Result<Vec<_>, _>>()?;
            let watchers: Vec<_> = (0..observers).map(|_| election.observe()).collect();
            // Let every follower and observer see the leader once.
            tokio::time::sleep(config.retry_period * 2).await;
            let (before, peeks) = (counting.calls(), counting.peeks());
            tokio::time::sleep(window).await;
            let calls = counting.calls().since(before);
            let rate = |n: u64| n as f64 / window.as_secs_f64();
            println!(
                "| {candidates} | {observers} | {:.3} | {:.3} | {:.3} | {:.1} |",
                rate(calls.paxos_rounds()),
                rate(calls.writes()),
                rate(calls.read),
                rate(counting.peeks() - peeks),
            );
            drop(watchers);
            drop(others);
            leader.resign().await?;
        }
    }
    println!(
        "(measured over {window:?} each; expected: the leader's renewals only, 1 / renew interval = {:.3}, whatever the fleet)",
        1.0 / config.renew_period.as_secs_f64()
    );
    Ok(())
}
