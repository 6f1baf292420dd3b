//! Running the operator's command under a lock, a term or a job claim, and stopping it in
//! time.
//!
//! The holder's token ([`cql_lease::LockGuard::cancellation_token`] and its kin) fires at
//! the holder's local deadline at the latest. The commands take the kill grace out of that
//! deadline (it is added to the assumed clock skew, see [`crate::cli::Timing::config`]), so
//! SIGTERM at the token and SIGKILL one grace later still land before the real deadline,
//! which is itself before the store can let anyone else in.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::CliError;

/// Why the command was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The lock, term or claim was lost (or its local deadline came).
    Lost,
    /// cqlcoord itself got SIGTERM or SIGINT.
    Signal,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Its exit status.
    pub status: ExitStatus,
    /// `Some` when cqlcoord stopped it.
    pub stopped: Option<Stopped>,
}

impl Ended {
    /// The shell's number for the status: the exit code, or 128 + the signal.
    pub fn code(&self) -> i32 {
        exit_code(self.status)
    }
}

/// The shell's number for an exit status.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Starts `argv` with `env` added; `stdin` bytes are written to its standard input and then
/// closed (`None`: it inherits cqlcoord's). It is killed if cqlcoord drops it.
///
/// # Errors
/// The command could not be started (exit 1, naming it).
pub async fn spawn(
    argv: &[String],
    env: &[(&str, String)],
    stdin: Option<Vec<u8>>,
) -> Result<Child, CliError> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| CliError::usage("no command given after --"))?;
    let mut command = Command::new(program);
    command.args(args).kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command
        .spawn()
        .map_err(|e| CliError::store(format!("cannot start {program:?}: {e}")))?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A command that does not read its input must not block us: write in the background.
        tokio::spawn(async move {
            let _ = pipe.write_all(&bytes).await;
        });
    }
    Ok(child)
}

/// Waits for `child` to exit, or stops it when `lost` or `shutdown` fires: SIGTERM, then
/// SIGKILL `grace` later if it is still running.
///
/// # Errors
/// Waiting on the child failed (exit 1).
pub async fn supervise(
    mut child: Child,
    lost: &CancellationToken,
    shutdown: &CancellationToken,
    grace: Duration,
) -> Result<Ended, CliError> {
    let wait_error = |e: std::io::Error| CliError::store(format!("waiting for the command: {e}"));
    let why = tokio::select! {
        status = child.wait() => {
            return Ok(Ended { status: status.map_err(wait_error)?, stopped: None });
        }
        _ = lost.cancelled() => Stopped::Lost,
        _ = shutdown.cancelled() => Stopped::Signal,
    };
    let kill_at = Instant::now() + grace;
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        // ESRCH: it exited meanwhile; `wait` below collects it.
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let status = tokio::select! {
        status = child.wait() => status,
        _ = tokio::time::sleep_until(kill_at) => {
            // `start_kill` is SIGKILL; an error means it already exited.
            let _ = child.start_kill();
            child.wait().await
        }
    };
    Ok(Ended {
        status: status.map_err(wait_error)?,
        stopped: Some(why),
    })
}

/// A token cancelled on SIGTERM or SIGINT to cqlcoord.
///
/// # Errors
/// The signal handlers could not be installed.
pub fn shutdown_on_signals() -> Result<CancellationToken, CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let token = CancellationToken::new();
    let handler = |e: std::io::Error| CliError::store(format!("installing signal handlers: {e}"));
    let mut term = signal(SignalKind::terminate()).map_err(handler)?;
    let mut int = signal(SignalKind::interrupt()).map_err(handler)?;
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        cancel.cancel();
    });
    Ok(token)
}

/// The owner id used when none is given: host name and process id.
pub fn default_owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    format!("{host}-{}", std::process::id())
}
