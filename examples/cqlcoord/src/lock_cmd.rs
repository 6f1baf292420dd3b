//! `lock NAME -- CMD`: run a command while holding a lock.

use std::sync::Arc;
use std::time::Duration;

use cql_lease::LeaseClient;
use cql_lease::lock::{BakeryLock, FairLock, LeaseLock, Lock, LockOptions};

use crate::child::{Stopped, default_owner, shutdown_on_signals, spawn, supervise};
use crate::cli::{Algorithm, Connection, Stopping, Timing};
use crate::error::CliError;

/// Waiting "for ever": the longest timeout the locks accept.
const FOREVER: Duration = cql_lease::lock::MAX_LOCK_TIMEOUT;

/// What `lock` runs and how.
#[derive(Debug)]
pub struct LockArgs {
    /// Lock name.
    pub name: String,
    /// Longest wait.
    pub timeout: Option<Duration>,
    /// Algorithm.
    pub algorithm: Algorithm,
    /// Owner of the lease lock.
    pub owner: Option<String>,
    /// Lock timing.
    pub timing: Timing,
    /// Stopping the command.
    pub stopping: Stopping,
    /// The command.
    pub command: Vec<String>,
}

/// Takes the lock, runs the command with `CQLCOORD_LOCK` (and, for the lease lock,
/// `CQLCOORD_FENCING_TOKEN`) in its environment, stops it (SIGTERM, then SIGKILL one grace
/// later, both before the holder's local deadline) if the lock is not renewed in time or is
/// lost, releases it, and exits with the command's status.
///
/// # Errors
/// Bad flags (2), store failures (1), not obtained in time (3), lost while the command ran
/// (4; the command was stopped).
pub async fn run(connection: &Connection, args: LockArgs) -> Result<i32, CliError> {
    let grace = args.stopping.kill_grace;
    let timing = args.timing.config(grace)?;
    let options = LockOptions {
        timing,
        // Waiters poll plain cells: often enough to follow a queue, not a busy loop.
        poll_interval: Duration::from_millis(100),
    };
    let lock: Arc<dyn Lock> = match args.algorithm {
        Algorithm::Lease => {
            let client = LeaseClient::new(crate::stores::leases(connection).await?, timing)?;
            let owner = args.owner.clone().unwrap_or_else(default_owner);
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
    let guard = tokio::select! {
        guard = lock.lock(&args.name, args.timeout.unwrap_or(FOREVER)) => guard?,
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
        let _ = guard.release().await;
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
        let _ = guard.release().await;
        return Err(CliError::lost(format!(
            "lock {:?} lost ({}); command stopped (status {})",
            args.name,
            reason
                .map(|r| format!("{r:?}"))
                .unwrap_or_else(|| "deadline".into()),
            ended.code()
        )));
    }
    if let Err(e) = guard.release().await {
        // The command is done; the lock's TTL frees it anyway.
        eprintln!("cqlcoord: warning: {e}");
    }
    Ok(ended.code())
}
