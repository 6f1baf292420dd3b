//! A newcomer's first hour with the library, written from the README alone, on the embedded
//! (in-memory) backend: an election with three candidates and a hand-over, a typed work queue
//! drained by four workers (every job done exactly once), and a lease lock with its fencing
//! token.
//!
//! `cargo run -p examples --bin first_hour -- --jobs 100`

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use cql_coordination::Backend;
use cql_coordination::election::{Election, ElectionEvent};
use cql_coordination::lease::lock::{LeaseLock, Lock};
use cql_coordination::lease::{LeaseClient, Timing};
use cql_coordination::workqueue::{NewItem, QueueConfig, WorkQueue};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Try elections, a typed work queue and a lease lock on the embedded backend.
#[derive(Parser)]
struct Args {
    /// How many jobs to enqueue and process.
    #[arg(long, default_value_t = 100)]
    jobs: u32,
    /// How many workers process the queue.
    #[arg(long, default_value_t = 4)]
    workers: usize,
}

#[derive(Serialize, Deserialize)]
struct Thumbnail {
    id: u32,
    path: String,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    election().await?;
    work_queue(args.jobs, args.workers).await?;
    lock().await?;
    println!("all done");
    Ok(())
}

/// Three candidates campaign; the first leader resigns and another one takes over; then the
/// new leader and the candidate still following withdraw.
async fn election() -> Result<(), BoxError> {
    // One `Election` per name and process; every candidate campaigns on it.
    let election = Election::new(
        Backend::embedded().leases(),
        "first-hour",
        Timing::default(),
    )?;
    let (elected_tx, mut elected_rx) = mpsc::unbounded_channel();
    let mut handles = HashMap::new();
    let mut tasks = Vec::new();
    for name in ["node-a", "node-b", "node-c"] {
        let mut campaign = election.campaign(name, None)?;
        // Kept to resign from here; the stream itself moves to the candidate's task.
        handles.insert(name, campaign.handle());
        let elected_tx = elected_tx.clone();
        tasks.push(tokio::spawn(async move {
            // The lease is renewed in the background; reading events only reports them. The
            // stream ends once the candidate has resigned.
            while let Some(event) = campaign.next().await {
                match event {
                    ElectionEvent::Elected { term, .. } => {
                        let _ = elected_tx.send((name, term));
                    }
                    ElectionEvent::Deposed { term, reason, .. } => {
                        println!("  {name}: term {term} over: {reason:?}");
                    }
                    ElectionEvent::LeaderChanged { leader } => {
                        println!("  {name}: following {leader:?}");
                    }
                }
            }
        }));
    }
    drop(elected_tx);

    let wait = Duration::from_secs(30);
    let (first, first_term) = tokio::time::timeout(wait, elected_rx.recv())
        .await?
        .ok_or("no candidate was elected")?;
    println!("election: {first} elected in term {first_term}");
    if let Some(handle) = handles.remove(first) {
        handle.resign().await?;
    }
    println!("election: {first} resigned");
    let (second, second_term) = tokio::time::timeout(wait, elected_rx.recv())
        .await?
        .ok_or("nobody took over after the resignation")?;
    println!("election: {second} took over in term {second_term}");
    if second == first || second_term <= first_term {
        return Err(
            format!("bad hand-over: {first}/{first_term} -> {second}/{second_term}").into(),
        );
    }
    // The new leader and the candidate still following both withdraw with `resign`.
    for (name, handle) in handles {
        handle.resign().await?;
        println!("election: {name} withdrew");
    }
    for task in tasks {
        tokio::time::timeout(wait, task).await??;
    }
    Ok(())
}

/// Enqueues `jobs` typed jobs and processes them with `workers` workers, then drains them.
async fn work_queue(jobs: u32, workers: usize) -> Result<(), BoxError> {
    // `WorkQueue` is `Clone`: each worker task gets a clone, no `Arc` needed.
    let queue = WorkQueue::new(
        Backend::embedded().queues(),
        "thumbnails",
        QueueConfig::default(),
    )?;
    for id in 0..jobs {
        let job = Thumbnail {
            id,
            path: format!("images/{id}.png"),
        };
        queue.enqueue_item(NewItem::json(&job)?).await?;
    }
    println!("queue: enqueued {jobs} jobs");

    let done: Arc<Mutex<HashMap<u32, (u32, String)>>> = Arc::default();
    let (progress_tx, mut progress_rx) = mpsc::unbounded_channel::<()>();
    let mut drains = Vec::new();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let name = format!("worker-{w}");
        let mut worker = queue.worker(&name)?;
        // Taken before the worker moves into its task: the stream never ends by itself.
        drains.push(worker.drain_handle());
        let done = done.clone();
        let progress_tx = progress_tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(job) = worker.next().await {
                let thumb = job.json::<Thumbnail>()?;
                job.complete().await?;
                let mut done = done.lock().map_err(|_| "poisoned")?;
                let entry = done.entry(thumb.id).or_insert((0, name.clone()));
                entry.0 += 1;
                let _ = progress_tx.send(());
            }
            Ok::<(), BoxError>(())
        }));
    }
    drop(progress_tx);

    let mut completed = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while completed < jobs {
        match tokio::time::timeout_at(deadline, progress_rx.recv()).await {
            Ok(Some(())) => completed += 1,
            Ok(None) => return Err("every worker stopped before the queue was drained".into()),
            Err(_) => return Err(format!("only {completed} of {jobs} jobs done in 60 s").into()),
        }
    }
    // Give a duplicate delivery, if any, a moment to show up before counting.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Graceful shutdown: no new claims, running jobs get up to 10 s; then the streams end.
    for drain in &drains {
        let report = drain.drain(Duration::from_secs(10)).await;
        if report.unfinished > 0 {
            return Err(format!("{} jobs unfinished at the drain", report.unfinished).into());
        }
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task).await???;
    }
    println!("queue: {workers} workers drained");

    let done = done.lock().map_err(|_| "poisoned")?;
    let mut per_worker: HashMap<&str, u32> = HashMap::new();
    for (_, worker) in done.values() {
        *per_worker.entry(worker.as_str()).or_default() += 1;
    }
    let missing: Vec<u32> = (0..jobs).filter(|id| !done.contains_key(id)).collect();
    let twice: Vec<u32> = done
        .iter()
        .filter(|(_, (n, _))| *n != 1)
        .map(|(id, _)| *id)
        .collect();
    let mut per_worker: Vec<_> = per_worker.into_iter().collect();
    per_worker.sort();
    println!(
        "queue: {} distinct jobs done, per worker {per_worker:?}",
        done.len()
    );
    if !missing.is_empty() || !twice.is_empty() || done.len() != jobs as usize {
        return Err(
            format!("not exactly once: missing {missing:?}, more than once {twice:?}").into(),
        );
    }
    println!("queue: every one of the {jobs} jobs done exactly once");
    Ok(())
}

/// Takes the README's recommended lock, the lease lock, and prints its fencing token.
async fn lock() -> Result<(), BoxError> {
    let client = LeaseClient::new(Backend::embedded().leases(), Timing::default())?;
    let lock: Arc<dyn Lock> = Arc::new(LeaseLock::new(client, "worker-1")?);
    let guard = lock
        .lock("reports::nightly", Some(Duration::from_secs(5)))
        .await?;
    let token = guard
        .token()
        .ok_or("the lease lock gave no fencing token")?;
    println!("lock: holding reports::nightly with fencing token {token}");
    if lock.try_lock("reports::nightly").await?.is_some() {
        return Err("the lock was taken twice".into());
    }
    guard.release().await?;
    println!("lock: released");
    Ok(())
}
