//! Work-queue benchmark: enqueue N items, then process them with P processes of W workers
//! (claim + complete), and print throughput, LWTs per item by kind, reads per item,
//! tombstones passed over per claim pass and the hottest partition's LWTs.
//!
//! `cargo run --release -p examples --bin queue_bench -- --items 1000,10000,100000,1000000`
//! runs on the embedded store, which counts what the store serves. `--wire true` runs the
//! scylla backend over the real CQL wire against the CQL test server, which counts Paxos rounds
//! per partition and tombstones per read; the server runs on a thread of its own, apart from
//! the benchmark's runtime though on the same cores (`--server-thread shared` puts its tasks
//! on the benchmark's runtime, as before). With `--scylla HOST:PORT` it runs against a cluster
//! (throughput only: the driver does not see tombstones or Paxos rounds).
//!
//! Every run reports the most tombstones one index read walked and how many reads walked
//! more than Cassandra's warning threshold (1,000): from the test server's counts, or on a
//! node from `nodetool tablestats` polled through the run (`--nodetool "CMD ARGS"`).
//!
//! `--steady RATE --minutes M` enqueues RATE items a second while the same processes work
//! them off, for M minutes, and prints the rates and the worst read minute by minute.
//!
//! `--claim-mode lwt|bakery` compares the claim modes instead: processed items/s, store
//! round trips per item (every statement or call the store served during processing) and
//! claim attempts per item (claim LWTs, or bakery draws), e.g.
//! `queue_bench --wire true --items 1000 --processes 1 --workers 8 --claim-mode bakery`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cql_workqueue::memory::StoreCounts;
use cql_workqueue::{ClaimMode, NewItem, QueueConfig, WallClock, WorkQueue};
use examples::tombstones::{self, NodetoolWatch};
use examples::{Flags, open_queue_store, queue_steady};
use futures::StreamExt;
use integration_tests::backend::Backend;
use integration_tests::wire_backend::WireBackend;

/// The command line (see the module documentation).
#[derive(Debug, clap::Parser)]
#[command(about = "Work-queue benchmark: enqueue N items, then process them with P processes of W workers.", long_about = None)]
struct Cli {
    /// A real cluster instead of the embedded store (throughput only).
    #[arg(long = "scylla", value_name = "HOST:PORT")]
    scylla: Option<String>,
    /// `true`: the scylla backend over the CQL wire against the CQL test server.
    #[arg(long = "wire", value_name = "true")]
    wire: Option<String>,
    /// Item counts, comma separated [default: 1000,10000,100000].
    #[arg(long = "items", value_name = "N,N,...")]
    items: Option<String>,
    /// Processes [default: 4].
    #[arg(long = "processes", value_name = "P")]
    processes: Option<String>,
    /// Workers per process [default: 16].
    #[arg(long = "workers", value_name = "W")]
    workers: Option<String>,
    /// Compare the claim modes instead: this one.
    #[arg(long = "claim-mode", value_name = "lwt|bakery")]
    claim_mode: Option<String>,
    /// Where the CQL test server's tasks run [default: own].
    #[arg(long = "server-thread", value_name = "own|shared")]
    server_thread: Option<String>,
    /// Width of one index bucket, in seconds [default: the queue's default].
    #[arg(long = "bucket-secs", value_name = "S")]
    bucket_secs: Option<u64>,
    /// With `--scylla`: a nodetool command line, polled for the index table's worst read.
    #[arg(long = "nodetool", value_name = "CMD")]
    nodetool: Option<String>,
    /// Steady state instead: enqueue this many items a second while processing them.
    #[arg(long = "steady", value_name = "ITEMS_PER_SEC")]
    steady: Option<u64>,
    /// With `--scylla`: first measure the node's LWT ceiling for this many seconds (64 tasks
    /// looping `UPDATE ... IF` on partitions of their own), to compare the queue's rate to.
    #[arg(long = "lwt-ceiling", value_name = "SECONDS")]
    lwt_ceiling: Option<u64>,
    /// Minutes of steady state [default: 5].
    #[arg(long = "minutes", value_name = "M", default_value_t = 5)]
    minutes: u64,
}

impl Flags for Cli {
    fn get(&self, name: &str) -> Option<&str> {
        match name {
            "scylla" => self.scylla.as_deref(),
            "wire" => self.wire.as_deref(),
            "items" => self.items.as_deref(),
            "processes" => self.processes.as_deref(),
            "workers" => self.workers.as_deref(),
            "claim-mode" => self.claim_mode.as_deref(),
            "server-thread" => self.server_thread.as_deref(),
            _ => None,
        }
    }
}
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = <Cli as clap::Parser>::parse();
    // `shared`: the server's tasks on this runtime, as the benchmark ran before (a
    // statement's engine lock then blocks one of this runtime's worker threads).
    let shared_runtime = match args.get("server-thread") {
        None | Some("own") => false,
        Some("shared") => true,
        Some(other) => return Err(format!("--server-thread own|shared, not {other}").into()),
    };
    let mode = match args.get("claim-mode") {
        None => None,
        Some("lwt") => Some(ClaimMode::Lwt),
        Some("bakery") => Some(ClaimMode::Bakery),
        Some(other) => return Err(format!("--claim-mode lwt|bakery, not {other}").into()),
    };
    let wire = args.get("wire") == Some("true");
    if let (Some(seconds), Some(addr)) = (args.lwt_ceiling, args.get("scylla")) {
        let rate = examples::lwt_ceiling::measure(addr, "cql_queue_demo", 64, seconds).await?;
        eprintln!(
            "LWT ceiling: {rate:.0} LWTs/s (64 tasks, {seconds} s); a third of it: {:.0}",
            rate / 3.0
        );
        let plain =
            examples::lwt_ceiling::measure_plain(addr, "cql_queue_demo", 64, seconds).await?;
        eprintln!("plain writes into one partition: {plain:.0}/s (64 tasks, {seconds} s)");
    }
    let sizes: Vec<usize> = args
        .get("items")
        .unwrap_or("1000,10000,100000")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let processes: usize = args.get("processes").unwrap_or("4").parse()?;
    let workers: usize = args.get("workers").unwrap_or("16").parse()?;
    if mode.is_some() {
        println!(
            "| claim mode | workers | items | processed items/s | store round trips/item | claim attempts/item | LWTs/item |"
        );
        println!("|---|---|---|---|---|---|---|");
    } else {
        println!(
            "| items | enqueue items/s | processed items/s | processed/enqueue | LWTs/item enqueue·claim·heartbeat·finish | reads/item | tombstones/claim pass | most tombstones in one read (reads over 1,000) | claim passes/item | hottest partition LWTs (share of all) |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
    }
    for (run, &n) in sizes.iter().enumerate() {
        let server = if wire {
            let flavor = cql_test_server::Flavor::Cassandra;
            Some(if shared_runtime {
                WireBackend::start(flavor).await
            } else {
                WireBackend::start_own_thread(flavor).await
            })
        } else {
            None
        };
        let (store, memory) = match &server {
            Some(server) => (server.queue_store().ok_or("no queue store")?, None),
            None => open_queue_store(&args.target()).await?,
        };
        let defaults = QueueConfig::default();
        let config = QueueConfig {
            claim_mode: mode.unwrap_or_default(),
            bucket_width: args
                .bucket_secs
                .map_or(defaults.bucket_width, Duration::from_secs),
            ..defaults
        };
        // A name of its own per invocation: a cluster keeps what earlier runs left.
        let name = format!(
            "bench-{}-{run}",
            cql_workqueue::clock::now_micros() / 1_000_000
        );
        let queue = WorkQueue::new(store, &name, config)?;
        let round_trips = || match (&server, &memory) {
            (Some(server), _) => Some(examples::wire_round_trips(&server.server)),
            (None, Some(memory)) => Some(examples::memory_round_trips(memory)),
            _ => None,
        };
        let counts = || match &server {
            Some(server) => server.queue_counts(),
            None => memory.as_ref().map(|m| m.counts()),
        };
        let (keyspace, table) = ("cql_queue_demo", "work_items_index");
        let nodetool = args.nodetool.clone();
        let watch = nodetool.as_ref().map(|cmd| {
            let every = Duration::from_secs(30);
            NodetoolWatch::start(cmd.clone(), keyspace.into(), table.into(), every)
        });
        if let Some(rate) = args.steady {
            let processes = (0..processes)
                .map(|_| queue.with_clock(WallClock::system()))
                .collect();
            let mut seen_reads = 0;
            // The test server's reads of this minute; a node's last five minutes; the
            // embedded store's whole run.
            let worst = || match (&server, &nodetool) {
                (Some(server), _) => {
                    let reads = server.server.tombstones().reads;
                    let worst = reads[seen_reads.min(reads.len())..]
                        .iter()
                        .map(|r| r.1)
                        .max();
                    seen_reads = reads.len();
                    Some(worst.unwrap_or(0))
                }
                (None, Some(cmd)) => tombstones::nodetool_max(cmd, keyspace, table).ok(),
                _ => counts().map(|c| c.max_tombstones_scanned),
            };
            queue_steady::run(queue, processes, workers, rate, args.minutes, worst).await?;
            continue;
        }
        let started = Instant::now();
        // Each enqueue a task of its own, as each claimer is below: both phases' client side
        // runs on every worker thread of the runtime, not the enqueues on `main`'s alone.
        let enqueued: Vec<_> = futures::stream::iter(0..n)
            .map(|i| {
                let queue = queue.clone();
                tokio::spawn(async move {
                    queue
                        .enqueue_item(NewItem::text(&format!("item {i}")))
                        .await
                })
            })
            .buffer_unordered(64)
            .collect()
            .await;
        for result in enqueued {
            result??;
        }
        let enqueue_rate = n as f64 / started.elapsed().as_secs_f64();
        let before = counts();
        let trips_before = round_trips();
        let mut handles = Vec::new();

        let done = Arc::new(AtomicU64::new(0));
        let passes = Arc::new(AtomicU64::new(0));
        // Claims that failed (a store error), by their message's last words.
        let errors = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<
            String,
            u64,
        >::new()));
        let started = Instant::now();
        // When the run passed each tenth of its items: a rate that falls as the run grows
        // shows a cost that grows with the data (as a per-read purge of whole partitions did).
        let tenths = Arc::new(std::sync::Mutex::new(vec![None; 11]));
        // Micros spent in `claim()` calls that got a job, and in `complete()`.
        let phases = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let mut tasks = Vec::new();
        for p in 0..processes {
            let process = queue.with_clock(WallClock::system());
            handles.push(process.clone());
            for w in 0..workers {
                let (q, done, passes) = (process.clone(), Arc::clone(&done), Arc::clone(&passes));
                let (tenths, phases) = (Arc::clone(&tenths), Arc::clone(&phases));
                let errors = Arc::clone(&errors);
                tasks.push(tokio::spawn(async move {
                    let name = format!("p{p}w{w}");
                    while done.load(Ordering::SeqCst) < n as u64 {
                        passes.fetch_add(1, Ordering::Relaxed);
                        let claim_started = Instant::now();
                        match q.claim(&name).await {
                            Ok(Some(job)) => {
                                let complete_started = Instant::now();
                                let claimed = complete_started - claim_started;
                                let completed = job.complete().await;
                                for (phase, took) in
                                    phases.iter().zip([claimed, complete_started.elapsed()])
                                {
                                    phase.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
                                }
                                if completed.is_ok() {
                                    let now_done = done.fetch_add(1, Ordering::SeqCst) + 1;
                                    if now_done.is_multiple_of((n as u64 / 10).max(1))
                                        && let Ok(mut t) = tenths.lock()
                                        && let Some(slot) =
                                            t.get_mut((now_done * 10 / n as u64) as usize)
                                    {
                                        *slot = Some(started.elapsed());
                                    }
                                }
                            }
                            Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
                            Err(error) => {
                                let text = error.to_string();
                                let cause = text.rsplit(": ").next().unwrap_or(&text).to_owned();
                                if let Ok(mut errors) = errors.lock() {
                                    *errors.entry(cause).or_default() += 1;
                                }
                                // As after an empty claim: a failing store is not hammered.
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                    }
                }));
            }
        }
        for task in tasks {
            task.await?;
        }
        let process_rate = n as f64 / started.elapsed().as_secs_f64();
        if let Ok(errors) = errors.lock() {
            for (cause, count) in errors.iter() {
                eprintln!("{n} items: {count} claims failed with: {cause}");
            }
        }
        let tenths = tenths.lock().map(|t| t.clone()).unwrap_or_default();
        if let (Some(Some(first)), Some(Some(ninth)), Some(Some(last))) =
            (tenths.get(1), tenths.get(9), tenths.get(10))
        {
            let tenth = n as f64 / 10.0;
            let ms = |i: usize| phases[i].load(Ordering::Relaxed) as f64 / 1000.0 / n as f64;
            eprintln!(
                "{n} items: processed {:.0} items/s over the first tenth, {:.0} over the last; \
                 per item {:.1} ms in claim(), {:.1} ms in complete() ({} claimers)",
                tenth / first.as_secs_f64(),
                tenth / (*last - *ninth).as_secs_f64(),
                ms(0),
                ms(1),
                processes * workers,
            );
        }
        if let Some(mode) = mode {
            let attempts: u64 = handles.iter().map(WorkQueue::claim_attempts).sum();
            let trips = match (trips_before, round_trips()) {
                (Some(a), Some(b)) => format!("{:.1}", (b - a) as f64 / n as f64),
                _ => "n/a".into(),
            };
            let lwts = match (&before, counts()) {
                (Some(a), Some(b)) => format!("{:.2}", (b.lwts() - a.lwts()) as f64 / n as f64),
                _ => "n/a".into(),
            };
            println!(
                "| {mode:?} | {} | {n} | {process_rate:.0} | {trips} | {:.2} | {lwts} |",
                processes * workers,
                attempts as f64 / n as f64
            );
            continue;
        }
        let passes = passes.load(Ordering::Relaxed) as f64;
        let row = match (before, counts()) {
            (Some(before), Some(after)) => {
                let per = |a: u64, b: u64| (a - b) as f64 / n as f64;
                eprintln!(
                    "{n} items, processing per item: {:.2} item reads, {:.2} index scans \
                     ({:.1} tombstones each), {:.2} cursor reads, {:.2} index writes",
                    per(
                        after.peeks + after.serial_reads,
                        before.peeks + before.serial_reads
                    ),
                    per(after.index_scans, before.index_scans),
                    (after.tombstones_scanned - before.tombstones_scanned) as f64
                        / (after.index_scans - before.index_scans).max(1) as f64,
                    per(after.other_reads, before.other_reads),
                    per(after.plain_writes, before.plain_writes),
                );
                figures(n as f64, passes, &before, &after)
            }
            _ => {
                let worst = match (&watch, &nodetool) {
                    (Some(watch), Some(cmd)) => {
                        let max = watch.max(cmd, keyspace, table).await;
                        format!("{max} (node, 5-minute windows)")
                    }
                    _ => "n/a".into(),
                };
                format!("n/a (cluster) | n/a | n/a | {worst} | n/a | n/a")
            }
        };
        println!(
            "| {n} | {enqueue_rate:.0} | {process_rate:.0} | {:.0} % | {row} |",
            100.0 * process_rate / enqueue_rate
        );
    }
    Ok(())
}

/// The count columns; enqueue LWTs are the whole run's (the enqueue phase is before `before`).
fn figures(n: f64, passes: f64, before: &StoreCounts, after: &StoreCounts) -> String {
    let per = |a: u64, b: u64| (a - b) as f64 / n;
    format!(
        "{:.2}·{:.2}·{:.2}·{:.2} | {:.2} | {:.2} | {} ({}) | {:.2} | {} ({:.5} %)",
        after.enqueue_lwts as f64 / n,
        per(after.claim_lwts, before.claim_lwts),
        per(after.heartbeat_lwts, before.heartbeat_lwts),
        per(after.finish_lwts, before.finish_lwts),
        after.reads() as f64 / n,
        (after.tombstones_scanned - before.tombstones_scanned) as f64 / passes,
        after.max_tombstones_scanned,
        after.tombstone_warnings,
        passes / n,
        after.hottest_partition_lwts,
        100.0 * after.hottest_partition_lwts as f64 / after.lwts().max(1) as f64,
    )
}
