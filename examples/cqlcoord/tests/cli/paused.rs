//! A holder whose store stops answering its renewals (a paused store): its command must be
//! dead before the lease is free for anyone else.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cql_lease::LeaseStore;
use cql_lease::scylla::{Replication, ScyllaLeaseStore, ScyllaOptions, cql};
use cql_test_server::{Flavor, Target, Times, WireFault};
use tokio::process::Command;

use crate::common::{KEYSPACE, cqlcoord, scratch, server, text, wait_for_line};

/// The lease (lock or election) name `command` must hold.
pub const NAME: &str = "paused";

fn wall_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos()
}

/// Runs the cqlcoord command that `holder` sets up (it must hold the lease [`NAME`], stored
/// in the row `row`: `lock/paused` or `election/paused`) with a
/// command that logs a beat every 50 ms and ignores SIGTERM (logging it); once it beats,
/// delays every renewal by 30 s, watches the lease with SERIAL reads on another connection
/// (which the fault spares), and checks: SIGTERM came first, the last beat is before the
/// lease was seen free, cqlcoord exits 125 naming status 137 (SIGKILL). Returns its stderr.
pub async fn stopped_in_time(test: &str, row: &str, holder: impl FnOnce(&mut Command)) -> String {
    let (server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let beats = scratch(&format!("{test}-paused")).join("beats");
    let script = format!(
        "trap 'echo term >> {b}' TERM; while :; do date +%s%N >> {b}; sleep 0.05; done",
        b = beats.display()
    );
    let mut command = cqlcoord(&hosts);
    command.args(["--request-timeout", "1s"]);
    holder(&mut command);
    command
        .args([
            "--ttl",
            "5s",
            "--renew-interval",
            "1s",
            "--retry-interval",
            "200ms",
        ])
        .args(["--kill-grace", "1s", "--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = command.spawn().expect("spawn");
    wait_for_line(&beats, |l| !l.is_empty()).await;

    let options = ScyllaOptions {
        keyspace: KEYSPACE.into(),
        replication: Replication::Simple(1),
        request_timeout: Some(Duration::from_secs(2)),
        ..ScyllaOptions::default()
    };
    let store = ScyllaLeaseStore::new(Arc::new(server.session().await), options.clone())
        .await
        .expect("store");
    assert!(store.read(row).await.expect("read").is_some(), "held");
    server.inject(
        Target::Statement(options.render(cql::RENEW)),
        WireFault::Latency(Duration::from_secs(30)),
        Times::Always,
    );
    let mut free_at = None;
    for _ in 0..400 {
        if let Ok(None) = store.read(row).await {
            free_at = Some(wall_nanos());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let free_at = free_at.expect("the lease never lapsed");
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("cqlcoord exits")
        .expect("wait");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("status 137"), "{stderr}");
    let log = std::fs::read_to_string(&beats).expect("beats");
    assert!(log.lines().any(|l| l == "term"), "SIGTERM first: {log}");
    let last_beat: u128 = log
        .lines()
        .filter_map(|l| l.parse().ok())
        .max()
        .expect("beats");
    assert!(
        last_beat < free_at,
        "the command ran {} ms after the lease was free",
        (last_beat - free_at) / 1_000_000
    );
    eprintln!(
        "{test}: the command stopped {} ms before the lease was free",
        (free_at - last_beat) / 1_000_000
    );
    stderr
}
