//! `leader`, `observe` and `elect`.

use std::time::Duration;

use cql_election::{Election, ElectionEvent, Leader, Timing};
use futures::StreamExt;
use serde_json::json;

use crate::child::{Ended, Stopped, hold, shutdown_on_signals, spawn, supervise};
use crate::cli::{Connection, Stopping, TimingArgs};
use crate::error::CliError;

/// `leader NAME`: one SERIAL read; exit 124 when nobody leads.
///
/// # Errors
/// Bad flags (2), store failures (1).
pub async fn leader(connection: &Connection, name: &str, json: bool) -> Result<i32, CliError> {
    let store = crate::stores::leases(connection).await?;
    let election = Election::new(store, name, Timing::default())?;
    let leader = election.leader().await?;
    println!("{}", describe(leader.as_ref(), json));
    Ok(if leader.is_some() {
        0
    } else {
        crate::error::EXIT_NOT_OBTAINED
    })
}

/// `observe NAME`: one line per leader change until SIGTERM / SIGINT (then exit 0).
///
/// One SERIAL read every `retry_interval`. A read that fails is reported on stderr at once
/// (then every 30 s while it goes on failing, and when reads work again): the observer keeps
/// trying, but an operator watching it must not take silence for "no change".
///
/// # Errors
/// Bad flags (2), no connection at start (1).
pub async fn observe(
    connection: &Connection,
    name: &str,
    json: bool,
    retry_interval: Duration,
) -> Result<i32, CliError> {
    let store = crate::stores::leases(connection).await?;
    let election = Election::new(store, name, Timing::default())?;
    let shutdown = shutdown_on_signals()?;
    let mut last: Option<Option<(String, i64, Option<String>)>> = None;
    let mut failing_since: Option<tokio::time::Instant> = None;
    let mut reported_at = tokio::time::Instant::now();
    loop {
        let read = tokio::select! {
            read = election.leader() => read,
            _ = shutdown.cancelled() => return Ok(0),
        };
        match read {
            Ok(leader) => {
                if failing_since.take().is_some() {
                    eprintln!("cqlcoord: reading the leader of {name:?} again");
                }
                let key = leader
                    .as_ref()
                    .map(|l| (l.candidate.clone(), l.term.get(), l.value.clone()));
                if last.as_ref() != Some(&key) {
                    println!("{}", describe(leader.as_ref(), json));
                    last = Some(key);
                }
            }
            Err(e) => {
                let now = tokio::time::Instant::now();
                let first = failing_since.is_none();
                if first || now.duration_since(reported_at) >= REPORT_EVERY {
                    eprintln!(
                        "cqlcoord: cannot read the leader of {name:?}: {}; retrying every {}",
                        CliError::store(e),
                        humantime::format_duration(retry_interval)
                    );
                    reported_at = now;
                }
                failing_since.get_or_insert(now);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(retry_interval) => {}
            _ = shutdown.cancelled() => return Ok(0),
        }
    }
}

/// How often a failure that goes on is reported again.
const REPORT_EVERY: Duration = Duration::from_secs(30);

fn describe(leader: Option<&Leader>, json: bool) -> String {
    match (leader, json) {
        (None, false) => "no leader".to_owned(),
        (None, true) => json!({ "leader": null }).to_string(),
        (Some(l), false) => format!(
            "leader={} term={} value={}",
            l.candidate,
            l.term,
            l.value.as_deref().unwrap_or("-")
        ),
        (Some(l), true) => {
            json!({ "leader": l.candidate, "term": l.term.get(), "value": l.value }).to_string()
        }
    }
}

/// How long a resignation after a lost term may take: the term is over anyway.
const RESIGN_BUDGET: Duration = Duration::from_secs(2);

/// What `elect` runs and how.
#[derive(Debug)]
pub struct Elect {
    /// Election name.
    pub name: String,
    /// Candidate id.
    pub candidate: String,
    /// Value to lead with.
    pub value: Option<String>,
    /// Campaign again after losing a term.
    pub recampaign: bool,
    /// Term timing.
    pub timing: TimingArgs,
    /// Stopping the command.
    pub stopping: Stopping,
    /// The command.
    pub command: Vec<String>,
}

/// `elect NAME --candidate ID -- CMD`: the command runs only while elected.
///
/// Policy: the command starts on `Elected` with `CQLCOORD_ELECTION`, `CQLCOORD_CANDIDATE`
/// and `CQLCOORD_TERM` (the term, a fencing token) in its environment. When the term ends
/// the command is stopped (SIGTERM, SIGKILL one grace later, both before the term's local
/// deadline, which the campaign's renewals move forward: the `Elected` event's `deadline`
/// watch, no extra request);
/// then cqlcoord exits 125, or campaigns again with `--recampaign`. When the command exits on
/// its own, cqlcoord resigns and exits with its status. On SIGTERM/SIGINT
/// it stops the command, resigns and exits with the command's status (0 if none ran).
///
/// # Errors
/// Without a command it prints `NAME term N` on stdout when elected and leads until
/// SIGINT/SIGTERM (then resigns, exit 0) or the term is lost (as with a command).
///
/// # Errors
/// Bad flags (2), store failures (1), a lost term without `--recampaign` (125).
pub async fn elect(connection: &Connection, args: Elect) -> Result<i32, CliError> {
    // No command, nothing to stop: the grace does not narrow the timing.
    let grace = if args.command.is_empty() {
        Duration::ZERO
    } else {
        args.stopping.kill_grace
    };
    let config = args.timing.election(grace)?;
    let store = crate::stores::leases(connection).await?;
    let election = Election::new(store, &args.name, config)?;
    let shutdown = shutdown_on_signals()?;
    let mut campaign = election.campaign(&args.candidate, args.value.as_deref())?;
    loop {
        let event = tokio::select! {
            event = campaign.next() => event,
            _ = shutdown.cancelled() => {
                let _ = campaign.resign().await;
                return Ok(0);
            }
        };
        match event {
            Some(ElectionEvent::Elected {
                term,
                stop,
                deadline,
                ..
            }) => {
                if stop.is_cancelled() {
                    // The term ended before this process took the event: the command must
                    // not start outside it. Then as for a term lost while it ran.
                    let _ = campaign.resign().await;
                    if !args.recampaign {
                        return Err(CliError::lost(format!(
                            "term {term} of {:?} ended before its command started",
                            args.name
                        )));
                    }
                    eprintln!(
                        "cqlcoord: term {term} ended before its command started; campaigning again"
                    );
                    campaign = election.campaign(&args.candidate, args.value.as_deref())?;
                    continue;
                }
                eprintln!("cqlcoord: elected {} term {term}", args.name);
                let deadline = move || *deadline.borrow();
                let ended = if args.command.is_empty() {
                    // Like `etcdctl elect NAME`: say so, lead until interrupted.
                    println!("{} term {term}", args.name);
                    let why = hold(&deadline, &stop, &shutdown).await;
                    Ended {
                        status: std::process::ExitStatus::default(),
                        stopped: Some(why),
                    }
                } else {
                    let env = [
                        ("CQLCOORD_ELECTION", args.name.clone()),
                        ("CQLCOORD_CANDIDATE", args.candidate.clone()),
                        ("CQLCOORD_TERM", term.to_string()),
                    ];
                    let child = match spawn(&args.command, &env, None).await {
                        Ok(child) => child,
                        Err(e) => {
                            let _ = campaign.resign().await;
                            return Err(e);
                        }
                    };
                    supervise(child, &deadline, &stop, &shutdown, grace).await?
                };
                match ended.stopped {
                    Some(Stopped::Lost) if args.recampaign => {
                        eprintln!(
                            "cqlcoord: term {term} ended; command stopped (status {}); campaigning again",
                            ended.code()
                        );
                        // The command may have been stopped on this process's own reckoning
                        // while the campaign still leads: end that term for sure (a term
                        // without its command must not go on), then start afresh.
                        let _ = campaign.resign().await;
                        campaign = election.campaign(&args.candidate, args.value.as_deref())?;
                    }
                    Some(Stopped::Lost) => {
                        // Reported before resigning, which may wait on a store that stopped
                        // answering.
                        let error = CliError::lost(if args.command.is_empty() {
                            format!("term {term} of {:?} ended", args.name)
                        } else {
                            format!(
                                "term {term} of {:?} ended; command stopped (status {})",
                                args.name,
                                ended.code()
                            )
                        });
                        eprintln!("cqlcoord: {error}");
                        let _ = tokio::time::timeout(RESIGN_BUDGET, campaign.resign()).await;
                        return Ok(error.code);
                    }
                    None | Some(Stopped::Signal) => {
                        campaign.resign().await?;
                        if args.command.is_empty() {
                            eprintln!("cqlcoord: resigned from {}", args.name);
                        }
                        return Ok(crate::error::child_status(ended.code()));
                    }
                }
            }
            Some(ElectionEvent::Deposed { term, reason, .. }) => {
                eprintln!("cqlcoord: deposed from term {term}: {reason:?}");
            }
            Some(ElectionEvent::LeaderChanged { leader }) => {
                eprintln!("cqlcoord: following: {}", describe(leader.as_ref(), false));
            }
            None => return Err(CliError::store("the campaign ended")),
        }
    }
}
