//! `lock NAME -- CMD`: run a command while holding a lock.

use std::sync::Arc;
use std::time::Duration;

use cql_lease::LeaseClient;
use cql_lease::lock::{BakeryLock, FairLock, LeaseLock, Lock, LockOptions};
use cql_lease::namespace::Namespace;

use crate::child::{Stopped, default_owner, hold, shutdown_on_signals, spawn, supervise};
use crate::cli::{Algorithm, Connection, Stopping, TimingArgs};
use crate::error::CliError;

/// What `lock` runs and how.
#[derive(Debug)]
pub struct LockArgs {
    /// Lock name.
    pub name: String,
    /// Longest wait.
    pub timeout: Option<Duration>,
    /// One attempt, no wait (also `--timeout 0`).
    pub try_once: bool,
    /// Algorithm.
    pub algorithm: Algorithm,
    /// Owner of the lease lock.
    pub owner: Option<String>,
    /// Lock timing.
    pub timing: TimingArgs,
    /// Stopping the command.
    pub stopping: Stopping,
    /// The command; empty: hold until interrupted.
    pub command: Vec<String>,
}

/// How long a release may take once the holder is done: the lock's TTL frees it anyway, so
/// cqlcoord does not keep the operator waiting on a store that stopped answering.
const RELEASE_BUDGET: Duration = Duration::from_secs(2);

/// Releases `guard` within [`RELEASE_BUDGET`], warning on failure.
async fn release(guard: cql_lease::lock::LockGuard) {
    match tokio::time::timeout(RELEASE_BUDGET, guard.release()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("cqlcoord: warning: release: {e} (the TTL frees the lock)"),
        Err(_) => {
            eprintln!("cqlcoord: warning: release did not finish in time (the TTL frees the lock)")
        }
    }
}

/// How long `lock` waits before saying it is waiting.
const WAIT_NOTICE: Duration = Duration::from_secs(1);

/// `" (held by OWNER, token N)"` for a lease lock whose holder one plain read shows; empty
/// otherwise (the plain-cell locks have no single holder record, and a failed read only
/// costs the detail).
async fn holder(leases: Option<&LeaseClient>, name: &str) -> String {
    let Some(client) = leases else {
        return String::new();
    };
    match client.peek(name).await {
        Ok(Some(held)) => format!(" (held by {:?}, token {})", held.owner, held.token),
        _ => String::new(),
    }
}

/// Takes the lock, runs the command with `CQLCOORD_LOCK` (and, for the lease lock,
/// `CQLCOORD_FENCING_TOKEN`) in its environment, stops it (SIGTERM, then SIGKILL one grace
/// later, both before the holder's local deadline) if the lock is not renewed in time or is
/// lost, releases it, and exits with the command's status.
///
/// While it waits for a held lock (past a second) it says so once on stderr. Without a command it prints `NAME` (and ` token N` for the lease lock) on stdout once
/// held, holds the lock until SIGINT/SIGTERM, releases it and exits 0 (like `etcdctl lock`).
///
/// # Errors
/// Bad flags (2), store failures (1), not obtained (124: held with `--try`, or not in time),
/// lost while held (125; the command was stopped).
pub async fn run(connection: &Connection, args: LockArgs) -> Result<i32, CliError> {
    // No command, nothing to stop: the grace does not narrow the timing.
    let grace = if args.command.is_empty() {
        Duration::ZERO
    } else {
        args.stopping.kill_grace
    };
    let timing = args.timing.config(grace)?;
    let options = LockOptions {
        timing,
        // Waiters poll plain cells: often enough to follow a queue, not a busy loop.
        poll_interval: Duration::from_millis(100),
    };
    // The lease lock's client, kept to say who holds the lock while waiting.
    let mut leases = None;
    let lock: Arc<dyn Lock> = match args.algorithm {
        Algorithm::Lease => {
            let client = LeaseClient::new(crate::stores::leases(connection).await?, timing)?;
            let owner = args.owner.clone().unwrap_or_else(default_owner);
            leases = Some(client.in_namespace(Namespace::Lock));
            Arc::new(LeaseLock::new(client, &owner)?)
        }
        Algorithm::Fair => Arc::new(FairLock::new(
            crate::stores::cells(connection).await?,
            options,
        )?),
        Algorithm::Bakery => Arc::new(BakeryLock::new(
            crate::stores::cells(connection).await?,
            options,
        )?),
    };
    let shutdown = shutdown_on_signals()?;
    // `--timeout 0` is one attempt, as `--try` is (and as the library's zero timeout is).
    let try_once = args.try_once || args.timeout.is_some_and(|t| t.is_zero());
    let attempt = async {
        if try_once {
            lock.try_lock(&args.name).await?.ok_or_else(|| {
                CliError::not_obtained(format!("lock {:?} is held (--try)", args.name))
            })
        } else {
            // `Lock::lock` is silent while it waits, and an operator should see that the
            // command is waiting, not hung: one line once the wait passes WAIT_NOTICE. The
            // notice runs beside the lock, never delaying its polls.
            let notice = async {
                tokio::time::sleep(WAIT_NOTICE).await;
                eprintln!(
                    "cqlcoord: waiting for lock {:?}{}",
                    args.name,
                    holder(leases.as_ref(), &args.name).await
                );
                std::future::pending::<std::convert::Infallible>().await
            };
            tokio::select! {
                guard = lock.lock(&args.name, args.timeout) => Ok(guard?),
                never = notice => match never {},
            }
        }
    };
    let guard = tokio::select! {
        guard = attempt => guard?,
        _ = shutdown.cancelled() => {
            return Err(CliError::not_obtained(format!(
                "interrupted while waiting for lock {:?}", args.name
            )));
        }
    };
    if guard.cancellation_token().is_cancelled() {
        // Answered after its deadline (a hold that starts lost): never start the command
        // without the lock, not even for the moment it would take to stop it.
        let reason = guard.loss_reason();
        release(guard).await;
        return Err(CliError::lost(format!(
            "lock {:?} lost before the command started ({})",
            args.name,
            reason.map_or_else(|| "deadline".into(), |r| format!("{r:?}"))
        )));
    }
    let mut env = vec![("CQLCOORD_LOCK", args.name.clone())];
    if let Some(token) = guard.token() {
        env.push(("CQLCOORD_FENCING_TOKEN", token.to_string()));
    }
    eprintln!(
        "cqlcoord: holding lock {} ({}{})",
        args.name,
        guard.algorithm(),
        guard
            .token()
            .map(|t| format!(", token {t}"))
            .unwrap_or_default()
    );
    if args.command.is_empty() {
        // Like `etcdctl lock NAME`: say what is held, hold it until interrupted.
        println!(
            "{}{}",
            args.name,
            guard
                .token()
                .map(|t| format!(" token {t}"))
                .unwrap_or_default()
        );
        let deadline = || guard.must_stop_by();
        let why = hold(&deadline, &guard.cancellation_token(), &shutdown).await;
        if why == Stopped::Lost {
            let reason = guard.loss_reason();
            eprintln!(
                "cqlcoord: lock {:?} lost ({})",
                args.name,
                reason.map_or_else(|| "deadline".into(), |r| format!("{r:?}"))
            );
            release(guard).await;
            return Err(CliError::lost(format!("lock {:?} lost", args.name)));
        }
        release(guard).await;
        eprintln!("cqlcoord: released lock {}", args.name);
        return Ok(0);
    }
    let child = spawn(&args.command, &env, None).await?;
    let deadline = || guard.must_stop_by();
    let ended = supervise(
        child,
        &deadline,
        &guard.cancellation_token(),
        &shutdown,
        grace,
    )
    .await?;
    if ended.stopped == Some(Stopped::Lost) {
        let reason = guard.loss_reason();
        // Reported before the release, which may wait on a store that stopped answering.
        let error = CliError::lost(format!(
            "lock {:?} lost ({}); command stopped (status {})",
            args.name,
            reason
                .map(|r| format!("{r:?}"))
                .unwrap_or_else(|| "deadline".into()),
            ended.code()
        ));
        eprintln!("cqlcoord: {error}");
        release(guard).await;
        return Ok(error.code);
    }
    // The command is done; the lock's TTL frees it anyway if the release fails.
    release(guard).await;
    Ok(crate::error::child_status(ended.code()))
}
