//! Running the operator's command under a lock, a term or a job claim, and stopping it in
//! time.
//!
//! The holder's local deadline (`must_stop_by`, on the monotonic clock, moved forward by each
//! successful renewal) is before the store can let anyone else in; at that deadline the
//! libraries cancel the holder's token, and give a claim lost there back only when the store
//! would let it lapse anyway (`1 s + max_clock_skew` later). The command is not stopped *at*
//! the token but before it, so as not to act past the deadline: SIGTERM `grace + KILL_MARGIN`
//! before the deadline if no renewal has moved it by then, SIGKILL `KILL_MARGIN` before it.
//! A command killed late (cqlcoord descheduled) is still alone for `1 s + max_clock_skew`.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::CliError;

/// How long before the holder's deadline SIGKILL goes out: room for cqlcoord's own
/// scheduling delay, so the command is dead by the deadline; the claim is given back
/// `1 s + max_clock_skew` after it at the earliest, so another holder starts at least that
/// much later again.
pub const KILL_MARGIN: Duration = Duration::from_millis(250);

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
/// Unless it shares a terminal as its standard input, it leads a process group of its own, so
/// that stopping it stops whatever it started too (`sh -c 'work & wait'`, pipelines): those
/// must not go on working once the lock, term or claim is given up. On a terminal it stays in
/// cqlcoord's group (the terminal's foreground group), where it can read the terminal and
/// Ctrl-C reaches it; only the command itself is then signalled.
///
/// # Errors
/// The command could not be started (exit 126, naming it).
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
    if stdin.is_some() || !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        command.process_group(0);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command
        .spawn()
        .map_err(|e| CliError::cannot_run(format!("cannot start {program:?}: {e}")))?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A command that does not read its input must not block us: write in the background.
        tokio::spawn(async move {
            let _ = pipe.write_all(&bytes).await;
        });
    }
    Ok(child)
}

/// Waits for `child` to exit, or stops it: SIGTERM, then SIGKILL `grace` later if it is
/// still running, and SIGKILL [`KILL_MARGIN`] before `deadline()` in any case. It is stopped
/// when `grace + KILL_MARGIN` before `deadline()` no renewal has moved the deadline, when
/// `lost` fires, or when `shutdown` does.
///
/// # Errors
/// Waiting on the child failed (exit 1).
pub async fn supervise(
    mut child: Child,
    deadline: &dyn Fn() -> Instant,
    lost: &CancellationToken,
    shutdown: &CancellationToken,
    grace: Duration,
) -> Result<Ended, CliError> {
    let wait_error = |e: std::io::Error| CliError::store(format!("waiting for the command: {e}"));
    let why = loop {
        let before = deadline();
        let term_at = before
            .checked_sub(grace + KILL_MARGIN)
            .unwrap_or_else(Instant::now);
        tokio::select! {
            status = child.wait() => {
                return Ok(Ended { status: status.map_err(wait_error)?, stopped: None });
            }
            _ = lost.cancelled() => break Stopped::Lost,
            _ = shutdown.cancelled() => break Stopped::Signal,
            _ = tokio::time::sleep_until(term_at) => {
                if deadline() <= before {
                    break Stopped::Lost; // not renewed in time: stop before the deadline
                }
            }
        }
    };
    let last_moment = deadline()
        .checked_sub(KILL_MARGIN)
        .unwrap_or_else(Instant::now);
    let kill_at = (Instant::now() + grace).min(last_moment);
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    // Not reaped yet (only `wait` reaps), so its process group can be read.
    let group = pid.is_some_and(|pid| nix::unistd::getpgid(Some(pid)) == Ok(pid));
    // ESRCH: it exited meanwhile; `wait` below collects it.
    signal(pid, group, Signal::SIGTERM);
    let status = tokio::select! {
        status = child.wait() => status,
        _ = tokio::time::sleep_until(kill_at) => {
            signal(pid, group, Signal::SIGKILL);
            // An error means it already exited.
            let _ = child.start_kill();
            child.wait().await
        }
    };
    // Whatever it started and left behind (having ignored SIGTERM, or after the command
    // exited on SIGTERM) goes too. Only to the group: the command's own pid is reaped now.
    if group {
        signal(pid, group, Signal::SIGKILL);
    }
    Ok(Ended {
        status: status.map_err(wait_error)?,
        stopped: Some(why),
    })
}

/// Holds without a command: returns when `lost` fires, when the holder's deadline comes
/// with no renewal having moved it ([`Stopped::Lost`]), or on `shutdown`
/// ([`Stopped::Signal`]).
pub async fn hold(
    deadline: &dyn Fn() -> Instant,
    lost: &CancellationToken,
    shutdown: &CancellationToken,
) -> Stopped {
    loop {
        let before = deadline();
        tokio::select! {
            _ = lost.cancelled() => return Stopped::Lost,
            _ = shutdown.cancelled() => return Stopped::Signal,
            _ = tokio::time::sleep_until(before) => {
                if deadline() <= before {
                    return Stopped::Lost;
                }
            }
        }
    }
}

/// Sends `signal` to the command's process group when it leads one (`group`, see [`spawn`]),
/// else to the command alone. Errors (ESRCH: nothing left) are ignored.
fn signal(pid: Option<Pid>, group: bool, signal: Signal) {
    match pid {
        Some(pid) if group => drop(killpg(pid, signal)),
        Some(pid) => drop(kill(pid, signal)),
        None => {}
    }
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
