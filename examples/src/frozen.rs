//! `election_bench --frozen RUNS`: the time an election spends without a leader while one
//! node of a three-node CQL test server is frozen (accepts, never answers) for twice the
//! lease TTL, with a healthy leader, and with a leader that crashes during the freeze.

use std::sync::Arc;
use std::time::Duration;

use cql_election::{Campaign, Election, ElectionConfig, ElectionEvent};
use cql_lease::scylla::{ScyllaLeaseStore, ScyllaOptions};
use cql_test_server::{CqlTestServer, Flavor, NodeFault, ServerOptions};
use futures::StreamExt;
use tokio::time::Instant;

/// The node frozen in each run.
const FROZEN: usize = 1;

/// Runs `runs` rounds of both cases with `config` and prints min / median / max.
///
/// # Errors
/// When the server, the schema or an election cannot be set up.
pub async fn bench(config: ElectionConfig, runs: usize) -> Result<(), Box<dyn std::error::Error>> {
    let server =
        CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra).with_nodes(3)).await?;
    let session = Arc::new(server.session().await);
    let freeze = config.lease_ttl * 2;
    println!(
        "one node of 3 frozen for {freeze:?}; lease ttl {:?}, renew {:?}, retry {:?}, request timeout {:?}; {runs} runs",
        config.lease_ttl,
        config.renew_interval,
        config.retry_interval,
        config.lease_config().effective_request_timeout()
    );
    let (mut healthy, mut crashed) = (Vec::new(), Vec::new());
    for run in 0..runs {
        for crash in [false, true] {
            let options = ScyllaOptions {
                keyspace: "bench".into(),
                table: format!("frozen_{run}_{crash}"),
                ..ScyllaOptions::default()
            };
            options.create_schema(&session).await?;
            let store = Arc::new(ScyllaLeaseStore::new(Arc::clone(&session), options).await?);
            let election = Election::new(store, "frozen", config)?;
            let leaderless = one_run(&server, &election, &config, freeze, crash).await?;
            if crash { &mut crashed } else { &mut healthy }.push(leaderless);
        }
    }
    println!("\n| leaderless time, one node frozen | min | median | max |");
    println!("|---|---|---|---|");
    for (what, samples) in [
        ("healthy leader", &mut healthy),
        ("leader crash during the freeze", &mut crashed),
    ] {
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
        (config.takeover_bound() + config.retry_interval).as_secs_f64()
    );
    Ok(())
}

/// Three candidates; freezes a node, crashes the leader a quarter into the freeze if
/// `crash`, heals it, and returns how long no candidate led from the freeze until a TTL
/// after it ended (sampled every 5 ms).
async fn one_run(
    server: &CqlTestServer,
    election: &Election,
    config: &ElectionConfig,
    freeze: Duration,
    crash: bool,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let mut leader = election.campaign("a", None)?;
    while !matches!(leader.next().await, Some(ElectionEvent::Elected { .. })) {}
    let mut others: Vec<Campaign> =
        vec![election.campaign("b", None)?, election.campaign("c", None)?];
    tokio::time::sleep(config.retry_interval * 2).await;
    server.node_fault(FROZEN, NodeFault::Freeze);
    let start = Instant::now();
    let end = start + freeze + config.lease_ttl;
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
        }
        if now >= start + freeze {
            server.heal(FROZEN);
        }
        let leading = leader.as_ref().is_some_and(Campaign::is_leader)
            || others.iter().any(Campaign::is_leader);
        if !leading {
            leaderless += now - last;
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
    Ok(leaderless)
}
