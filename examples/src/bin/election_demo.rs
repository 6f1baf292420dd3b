//! Leader election, the main job: several candidates elect a leader, the leader is killed,
//! another takes over after the lease runs out; later a leader resigns and the next one takes
//! over within a poll interval. Every event prints with a timestamp and its term.
//!
//! Embedded (default): four candidates and an observer in this process.
//! On a cluster, one candidate per OS process:
//! `election_demo --scylla HOST:PORT --candidate node-1 [--crash-after SECS] [--run-for SECS]`

use std::time::Duration;

use cql_election::{CampaignHandle, Election, ElectionEvent, Timing};
use examples::{Flags, Target};
use futures::StreamExt;
use tokio::time::Instant;

fn describe(event: &ElectionEvent) -> String {
    match event {
        ElectionEvent::Elected { term, value, .. } => {
            format!("ELECTED   term {term} value {value:?}")
        }
        ElectionEvent::Deposed { term, reason, .. } => {
            format!("DEPOSED   term {term} ({reason:?})")
        }
        ElectionEvent::LeaderChanged { leader: Some(l) } => {
            format!(
                "follows   {} (term {}, value {:?})",
                l.candidate, l.term, l.value
            )
        }
        ElectionEvent::LeaderChanged { leader: None } => "follows   nobody".to_owned(),
    }
}

/// The command line (see the module documentation).
#[derive(Debug, clap::Parser)]
#[command(about = "Leader election: candidates elect a leader, the leader is killed, another takes over.", long_about = None)]
struct Cli {
    /// A cluster: one candidate per OS process (default: the embedded store, four candidates).
    #[arg(long = "scylla", value_name = "HOST:PORT")]
    scylla: Option<String>,
    /// This process's candidate id (required with --scylla).
    #[arg(long = "candidate", value_name = "NAME")]
    candidate: Option<String>,
    /// With --scylla: crash (exit without resigning) after this many seconds.
    #[arg(long = "crash-after", value_name = "SECS")]
    crash_after: Option<String>,
    /// With --scylla: resign and exit after this many seconds.
    #[arg(long = "run-for", value_name = "SECS")]
    run_for: Option<String>,
}

impl Flags for Cli {
    fn get(&self, name: &str) -> Option<&str> {
        match name {
            "scylla" => self.scylla.as_deref(),
            "candidate" => self.candidate.as_deref(),
            "crash-after" => self.crash_after.as_deref(),
            "run-for" => self.run_for.as_deref(),
            _ => None,
        }
    }
}
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = <Cli as clap::Parser>::parse();
    let config = Timing {
        lease_duration: Duration::from_secs(3),
        renew_period: Duration::from_secs(1),
        retry_period: Duration::from_millis(500),
        max_clock_skew: Duration::from_millis(200),
        resolve_timeout: Duration::from_secs(3),
        request_timeout: None,
    };
    let store = args.target().open().await?;
    let started = Instant::now();
    let at = move || format!("{:>6.2}s", started.elapsed().as_secs_f64());
    println!(
        "lease ttl {:?} (a leader acts {:?} past each renewal), renew every {:?}, poll every {:?}; a crashed leader is replaced within {:?}",
        config.lease_duration,
        config.renew_deadline(),
        config.renew_period,
        config.retry_period,
        config.takeover_bound() + config.retry_period,
    );
    if let Target::Scylla(_) = args.target() {
        let candidate = args
            .get("candidate")
            .ok_or("--candidate NAME is required with --scylla")?;
        let election = Election::new(store, "election-demo", config)?;
        return run_one(
            election,
            candidate,
            args.seconds("crash-after")?,
            args.seconds("run-for")?,
            at,
        )
        .await;
    }

    let election = Election::new(
        store,
        format!("election-demo-{}", std::process::id()),
        config,
    )?;
    let mut observer = election.observe();
    tokio::spawn({
        async move {
            while let Some(leader) = observer.next().await {
                match leader {
                    Some(l) => println!(
                        "{} observer  leader is {} (term {}, value {:?})",
                        at(),
                        l.candidate,
                        l.term,
                        l.value
                    ),
                    None => println!("{} observer  no leader", at()),
                }
            }
        }
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut handles: Vec<Option<CampaignHandle>> = Vec::new();
    for i in 1..=4 {
        let mut campaign = election.campaign(
            &format!("node-{i}"),
            Some(format!("10.0.0.{i}:7000").as_str()),
        )?;
        handles.push(Some(campaign.handle()));
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(event) = campaign.next().await {
                println!("{} node-{i}    {}", at(), describe(&event));
                if matches!(event, ElectionEvent::Elected { .. }) && tx.send(i).is_err() {
                    return;
                }
            }
        });
    }
    let mut leader = rx.recv().await.ok_or("no leader")?;
    println!(
        "{} --- killing the leader node-{leader} (no release: its lease must run out)",
        at()
    );
    if let Some(c) = handles[leader - 1].take() {
        c.abort().await;
    }
    leader = rx.recv().await.ok_or("no leader")?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("{} --- node-{leader} resigns gracefully", at());
    if let Some(c) = handles[leader - 1].take() {
        c.resign().await?;
    }
    leader = rx.recv().await.ok_or("no leader")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("{} --- node-{leader} proclaims a new address", at());
    if let Some(c) = &handles[leader - 1] {
        c.proclaim(Some("10.0.9.9:7000")).await?;
    }
    tokio::time::sleep(config.retry_period * 2).await;
    println!("{} --- shutting down: every campaign resigns", at());
    for c in handles.into_iter().flatten() {
        c.resign().await?;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    println!("{} done; leader now: {:?}", at(), election.leader().await?);
    Ok(())
}

/// One candidate of a multi-process election on a cluster.
async fn run_one(
    election: Election,
    candidate: &str,
    crash_after: Option<Duration>,
    run_for: Option<Duration>,
    at: impl Fn() -> String,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut campaign = election.campaign(
        candidate,
        Some(format!("{candidate}:{}", std::process::id()).as_str()),
    )?;
    let stop_at = run_for.map(|d| Instant::now() + d);
    loop {
        let until_stop = stop_at.map_or(Duration::from_secs(3600), |s| {
            s.saturating_duration_since(Instant::now())
        });
        tokio::select! {
            event = campaign.next() => {
                let Some(event) = event else { break };
                println!("{} {candidate}  {}", at(), describe(&event));
                if let (ElectionEvent::Elected { .. }, Some(after)) = (&event, crash_after) {
                    tokio::time::sleep(after).await;
                    println!("{} {candidate}  crashing while leading (exit without releasing)", at());
                    std::process::exit(1);
                }
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = tokio::time::sleep(until_stop) => break,
        }
    }
    campaign.resign().await?;
    println!("{} {candidate}  resigned", at());
    Ok(())
}
