//! `election_bench --frozen RUNS`: the time an election spends without a leader while one
//! node of a three-node CQL test server is frozen (accepts, never answers) for twice the
//! lease TTL, with a healthy leader, and with a leader that crashes during the freeze. For
//! the crash it also prints how long after the lease was free the next leader came (the
//! store counts TTLs in whole seconds, so the lease lapses anywhere in the last second of
//! its TTL and the leaderless time alone hides the candidates' own delay); an observer on a
//! session that does not know the frozen node tells when the lease was free.

use std::sync::Arc;
use std::time::Duration;

use cql_election::{Campaign, Election, ElectionEvent, Timing};
use cql_lease::LeaseStore as _;
use cql_lease::namespace::Namespace;
use cql_lease::scylla::{ScyllaLeaseStore, ScyllaOptions};
use cql_test_server::{CqlTestServer, Flavor, NodeFault, ServerOptions};
use futures::StreamExt;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::host_filter::AllowListHostFilter;
use tokio::time::Instant;

/// The node frozen in each run.
const FROZEN: usize = 1;

/// Runs `runs` rounds of both cases with `config` and prints min / median / max.
///
/// # Errors
/// When the server, the schema or an election cannot be set up.
pub async fn bench(config: Timing, runs: usize) -> Result<(), Box<dyn std::error::Error>> {
    let server =
        CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra).with_nodes(3)).await?;
    let session = Arc::new(server.session().await);
    let healthy: Vec<_> = (0..3)
        .filter(|&i| i != FROZEN)
        .map(|i| server.addresses()[i])
        .collect();
    let observer_session = Arc::new(
        SessionBuilder::new()
            .known_node_addr(healthy[0])
            .host_filter(Arc::new(AllowListHostFilter::new(healthy)?))
            .fetch_schema_metadata(false)
            .build()
            .await?,
    );
    let freeze = config.lease_duration * 2;
    println!(
        "one node of 3 frozen for {freeze:?}; lease ttl {:?}, renew {:?}, retry {:?}, request timeout {:?}; {runs} runs",
        config.lease_duration,
        config.renew_period,
        config.retry_period,
        config.effective_request_timeout()
    );
    let (mut healthy, mut crashed, mut after_free) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        for crash in [false, true] {
            let options = ScyllaOptions {
                keyspace: "bench".into(),
                table: format!("frozen_{run}_{crash}"),
                ..ScyllaOptions::default()
            };
            options.create_schema(&session).await?;
            let observer =
                ScyllaLeaseStore::new(Arc::clone(&observer_session), options.clone()).await?;
            let store = Arc::new(ScyllaLeaseStore::new(Arc::clone(&session), options).await?);
            let election = Election::new(store, "frozen", config)?;
            let (leaderless, late) =
                one_run(&server, &election, &config, freeze, crash, &observer).await?;
            if crash { &mut crashed } else { &mut healthy }.push(leaderless);
            after_free.extend(late);
        }
    }
    println!("\n| leaderless time, one node frozen | min | median | max |");
    println!("|---|---|---|---|");
    for (what, samples) in [
        ("healthy leader", &mut healthy),
        ("leader crash during the freeze", &mut crashed),
        ("leader crash: lease free to next leader", &mut after_free),
    ] {
        if samples.is_empty() {
            continue;
        }
        samples.sort();
        println!(
            "| {what} | {:.3} s | {:.3} s | {:.3} s |",
            samples[0].as_secs_f64(),
            samples[samples.len() / 2].as_secs_f64(),
            samples[samples.len() - 1].as_secs_f64()
        );
    }
    println!(
        "(crash bound without a frozen node: TTL + skew + retry = {:.3} s)",
        (config.takeover_bound() + config.retry_period).as_secs_f64()
    );
    Ok(())
}

/// Three candidates; freezes a node, crashes the leader a quarter into the freeze if
/// `crash`, heals it, and returns how long no candidate led from the freeze until a TTL
/// after it ended (sampled every 5 ms), and, after a crash, how long after `observer` saw
/// the lease free the next leader came.
async fn one_run(
    server: &CqlTestServer,
    election: &Election,
    config: &Timing,
    freeze: Duration,
    crash: bool,
    observer: &ScyllaLeaseStore,
) -> Result<(Duration, Option<Duration>), Box<dyn std::error::Error>> {
    let mut leader = election.campaign("a", None)?;
    let term = loop {
        if let Some(ElectionEvent::Elected { term, .. }) = leader.next().await {
            break term;
        }
    };
    let (mut crashed, mut free_at, mut next_at) = (false, None, None);
    let mut others: Vec<Campaign> =
        vec![election.campaign("b", None)?, election.campaign("c", None)?];
    tokio::time::sleep(config.retry_period * 2).await;
    server.node_fault(FROZEN, NodeFault::Freeze);
    let start = Instant::now();
    let end = start + freeze + config.lease_duration;
    let mut leader = Some(leader);
    let mut leaderless = Duration::ZERO;
    let mut last = start;
    while Instant::now() < end {
        let now = Instant::now();
        if crash
            && now >= start + freeze / 4
            && let Some(l) = leader.take()
        {
            l.abort().await;
            crashed = true;
        }
        if crashed && free_at.is_none() {
            // The election's row: its name in the election name space.
            let row = Namespace::Election.stored_name(election.name());
            match observer.peek(&row).await {
                Ok(Some(lease)) if lease.token == term => {}
                Ok(_) => free_at = Some(Instant::now()),
                Err(_) => {}
            }
        }
        if now >= start + freeze {
            server.heal(FROZEN);
        }
        let leading = leader.as_ref().is_some_and(Campaign::is_leader)
            || others.iter().any(Campaign::is_leader);
        if !leading {
            leaderless += now - last;
        } else if crashed && next_at.is_none() {
            next_at = Some(now);
        }
        last = now;
        // Keep the campaigns' event streams drained.
        for c in others.iter_mut().chain(leader.iter_mut()) {
            while let Some(Some(_)) = futures::FutureExt::now_or_never(c.next()) {}
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.heal(FROZEN);
    for c in others.iter().chain(leader.iter()) {
        c.abort().await;
    }
    let late = match (free_at, next_at) {
        (Some(free), Some(next)) => Some(next.saturating_duration_since(free)),
        _ => None,
    };
    Ok((leaderless, late))
}
