//! `queue push | work | stats | dead`.

use std::time::{Duration, SystemTime};

use cql_workqueue::{ClaimOrder, Enqueued, ItemId, JobState, NewItem, QueueConfig, WorkQueue};
use futures::StreamExt;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use crate::child::{Stopped, default_owner, shutdown_on_signals, spawn, supervise};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio_util::sync::CancellationToken;

use crate::cli::{Connection, Order, QueueCommand};
use crate::error::CliError;

/// Runs a `queue` command.
///
/// # Errors
/// Bad flags (2), store failures (1), an unknown dead letter (124).
pub async fn run(connection: &Connection, command: QueueCommand) -> Result<i32, CliError> {
    match command {
        QueueCommand::Push {
            name,
            key,
            delay,
            payload,
        } => {
            let queue = open(connection, &name, QueueConfig::default()).await?;
            let payloads = match payload {
                Some(p) => vec![p],
                None if key.is_some() => {
                    return Err(CliError::usage("--key needs a PAYLOAD argument, not stdin"));
                }
                None => {
                    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
                    let mut all = Vec::new();
                    while let Some(line) = lines
                        .next_line()
                        .await
                        .map_err(|e| CliError::store(format!("reading stdin: {e}")))?
                    {
                        if !line.is_empty() {
                            all.push(line);
                        }
                    }
                    all
                }
            };
            for payload in payloads {
                let mut item = NewItem::text(&payload);
                if let Some(delay) = delay {
                    item = item.run_at(SystemTime::now() + delay);
                }
                if let Some(key) = &key {
                    item = item.unique(key);
                }
                match queue.enqueue_item(item).await? {
                    Enqueued::New(id) => println!("{id}"),
                    Enqueued::Duplicate { id, state } => {
                        println!("{id} duplicate ({})", state.as_str());
                    }
                }
            }
            Ok(0)
        }
        QueueCommand::Work {
            name,
            concurrency,
            order,
            worker,
            max_jobs,
            max_attempts,
            retry_backoff,
            timing,
            stopping,
            command,
        } => {
            let defaults = QueueConfig::default();
            let config = QueueConfig {
                timing: timing.config(stopping.kill_grace)?,
                max_attempts,
                retry_backoff,
                max_retry_backoff: defaults.max_retry_backoff.max(retry_backoff),
                order: match order {
                    Order::OldestFirst => ClaimOrder::OldestFirst,
                    Order::Spread => ClaimOrder::Spread,
                },
                ..defaults
            };
            let queue = open(connection, &name, config).await?;
            let worker = worker.unwrap_or_else(default_owner);
            let shutdown = shutdown_on_signals()?;
            let budget = Budget {
                max: max_jobs,
                taken: AtomicU64::new(0),
            };
            let idle_noticed = AtomicBool::new(false);
            let workers = (0..concurrency).map(|i| {
                let id = if concurrency == 1 {
                    worker.clone()
                } else {
                    format!("{worker}-{i}")
                };
                let (queue, budget, shutdown, command) = (&queue, &budget, &shutdown, &command);
                let idle_noticed = &idle_noticed;
                async move {
                    work(
                        queue,
                        &id,
                        budget,
                        idle_noticed,
                        shutdown,
                        stopping.kill_grace,
                        command,
                    )
                    .await
                }
            });
            for result in futures::future::join_all(workers).await {
                result?;
            }
            Ok(0)
        }
        QueueCommand::Stats { name, json } => {
            let queue = open(connection, &name, QueueConfig::default()).await?;
            let s = queue.stats().await?;
            let age = s.oldest_available_age.map(|a| a.as_secs_f64());
            if json {
                println!(
                    "{}",
                    json!({"queue": name, "available": s.available, "scheduled": s.scheduled,
                           "running": s.running, "dead": s.dead, "oldest_available_age_secs": age})
                );
            } else {
                println!(
                    "available={} scheduled={} running={} dead={} oldest_available_age={}",
                    s.available,
                    s.scheduled,
                    s.running,
                    s.dead,
                    age.map_or("-".to_owned(), |a| format!("{a:.3}s"))
                );
            }
            Ok(0)
        }
        QueueCommand::Dead {
            name,
            requeue,
            purge,
            json,
        } => {
            let queue = open(connection, &name, QueueConfig::default()).await?;
            if let Some(id) = requeue {
                return if queue.requeue_dead(&ItemId::from_stored(id.clone())).await? {
                    println!("requeued {id}");
                    Ok(0)
                } else {
                    Err(CliError::not_obtained(format!(
                        "{id} is not a dead letter of {name:?}"
                    )))
                };
            }
            for dead in queue.dead_letters().await? {
                if purge {
                    if queue.purge_dead(&dead.id).await? {
                        println!("purged {}", dead.id);
                    }
                    continue;
                }
                let payload = String::from_utf8_lossy(&dead.payload);
                if json {
                    println!(
                        "{}",
                        json!({"id": dead.id.as_str(), "attempts": dead.attempt,
                               "last_error": dead.last_error, "payload": payload})
                    );
                } else {
                    println!(
                        "{} attempts={} last_error={} payload={payload}",
                        dead.id,
                        dead.attempt,
                        dead.last_error.as_deref().unwrap_or("-")
                    );
                }
            }
            Ok(0)
        }
    }
}

async fn open(
    connection: &Connection,
    name: &str,
    config: QueueConfig,
) -> Result<WorkQueue, CliError> {
    let store = crate::stores::queue(connection).await?;
    Ok(WorkQueue::new(store, name, config)?)
}

/// `--max-jobs` shared by the `--concurrency` workers: a slot is taken before claiming.
struct Budget {
    max: Option<u64>,
    taken: AtomicU64,
}

impl Budget {
    /// Takes a slot for one more job; false once `max` were taken.
    fn take(&self) -> bool {
        self.taken
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                self.max.is_none_or(|max| n < max).then_some(n + 1)
            })
            .is_ok()
    }
}

/// How long a worker goes without a job before saying it waits for items.
const IDLE_NOTICE: Duration = Duration::from_secs(1);

/// One command per job: the payload on its stdin, `CQLCOORD_QUEUE`, `CQLCOORD_JOB_ID`,
/// `CQLCOORD_JOB_ATTEMPT` and `CQLCOORD_FENCING_TOKEN` (the claim's token) in its
/// environment. Exit 0 completes the job; any other status fails it (retried after the
/// back-off, a dead letter after `max_attempts`). A claim lost while the command runs stops
/// the command (SIGTERM, SIGKILL one grace later) and the job is left to its next claim.
/// SIGTERM/SIGINT stop claiming; a running command is stopped and its job failed.
async fn work(
    queue: &WorkQueue,
    worker_id: &str,
    budget: &Budget,
    idle_noticed: &AtomicBool,
    shutdown: &CancellationToken,
    grace: Duration,
    command: &[String],
) -> Result<i32, CliError> {
    let mut worker = queue.worker(worker_id)?;
    let drain = worker.drain_handle();
    let stop_claiming = worker.shutdown_token();
    while budget.take() {
        // A claim is never dropped midway (that would strand its item): on a signal the
        // worker is told to stop and the claim in flight, if any, finishes. Dropping a
        // `next()` future loses nothing (the search goes on in its own task), so it is
        // simply asked again.
        let job = loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled(), if !stop_claiming.is_cancelled() => {
                    stop_claiming.cancel();
                }
                _ = tokio::time::sleep(IDLE_NOTICE), if !idle_noticed.load(Ordering::Relaxed) => {
                    // An idle worker should not look hung: say so once per process.
                    if !idle_noticed.swap(true, Ordering::Relaxed) {
                        eprintln!("cqlcoord: waiting for items on {:?}", queue.name());
                    }
                }
                job = worker.next() => break job,
            }
        };
        let Some(job) = job else { break };
        if shutdown.is_cancelled() {
            let id = job.id().clone();
            job.fail("worker shut down before running it").await?;
            eprintln!("cqlcoord: job {id} handed back (shutting down)");
            break;
        }
        let env = [
            ("CQLCOORD_QUEUE", queue.name().to_owned()),
            ("CQLCOORD_JOB_ID", job.id().to_string()),
            ("CQLCOORD_JOB_ATTEMPT", job.attempt().to_string()),
            ("CQLCOORD_FENCING_TOKEN", job.token().to_string()),
        ];
        let child = spawn(command, &env, Some(job.payload_bytes().to_vec())).await?;
        let deadline = || job.must_stop_by();
        let ended = supervise(child, &deadline, &job.cancellation_token(), shutdown, grace).await?;
        let id = job.id().clone();
        let outcome = match ended.stopped {
            Some(Stopped::Lost) => {
                eprintln!(
                    "cqlcoord: job {id}: claim lost; command stopped (status {})",
                    ended.code()
                );
                continue;
            }
            Some(Stopped::Signal) => job.fail("interrupted by a signal").await.map(Some),
            None if ended.status.success() => job.complete().await.map(|()| None),
            None => job
                .fail(&format!("exit status {}", ended.code()))
                .await
                .map(Some),
        };
        match outcome {
            Ok(None) => eprintln!("cqlcoord: job {id} done"),
            Ok(Some(JobState::Discarded)) => eprintln!("cqlcoord: job {id} failed: dead letter"),
            Ok(Some(state)) => eprintln!("cqlcoord: job {id} failed: {}", state.as_str()),
            // The claim lapsed meanwhile: the job goes to its next claim.
            Err(e) => eprintln!("cqlcoord: job {id}: {e}"),
        }
    }
    drain.drain(grace).await;
    Ok(0)
}
