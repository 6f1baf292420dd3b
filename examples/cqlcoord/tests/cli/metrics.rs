//! `--metrics-addr`: a running command serves the libraries' metrics for Prometheus.

use std::process::Stdio;
use std::time::Duration;

use cql_test_server::Flavor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{cqlcoord, run, scratch, server, text};

/// TTL 3 s, renew every 0.5 s, retries every 0.2 s, SIGKILL 0.5 s after SIGTERM.
const TIMING: [&str; 8] = [
    "--ttl",
    "3s",
    "--renew-interval",
    "500ms",
    "--retry-interval",
    "200ms",
    "--kill-grace",
    "500ms",
];

/// Runs until the file `$0` exists.
const WAIT_FOR_FILE: &str = "while [ ! -e \"$0\" ]; do sleep 0.05; done";

/// A port nobody listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// One `GET /metrics`; the body, or `None` while nothing listens yet.
async fn scrape(addr: &str) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The value of the series `name` carrying every label of `labels`, in an exposition.
fn value(body: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    body.lines().find_map(|line| {
        let (series, number) = line.rsplit_once(' ')?;
        let rest = series.strip_prefix(name)?;
        let labelled = rest.is_empty() || rest.starts_with('{');
        let all = labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        (labelled && all).then(|| number.parse().ok()).flatten()
    })
}

/// Scrapes every 50 ms (up to 30 s) until `done` holds for the body; returns it.
async fn scrape_until(addr: &str, done: impl Fn(&str) -> bool) -> String {
    let mut last = None;
    for _ in 0..600 {
        if let Some(body) = scrape(addr).await {
            if done(&body) {
                return body;
            }
            last = Some(body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not seen within 30 s; last scrape: {last:?}");
}

/// Starts `cqlcoord --metrics-addr ADDR ARGS -- sh -c WAIT_FOR_FILE DONE`.
fn spawn(hosts: &str, addr: &str, args: &[&str], done: &str) -> tokio::process::Child {
    let mut command = cqlcoord(hosts);
    command
        .args(["--metrics-addr", addr])
        .args(args)
        .args(TIMING)
        .args(["--", "sh", "-c", WAIT_FOR_FILE, done])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command.spawn().expect("spawn")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_and_a_leader_show_in_the_scraped_metrics() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let dir = scratch("metrics");
    let done = dir.join("done");
    let done = done.to_str().expect("utf-8");

    let lock_addr = format!("127.0.0.1:{}", free_port());
    let lock = [
        "lock",
        "scraped",
        "--algorithm",
        "lease",
        "--timeout",
        "30s",
    ];
    let lock = spawn(&hosts, &lock_addr, &lock, done);
    let elect_addr = format!("127.0.0.1:{}", free_port());
    let elect = ["elect", "scraped-election", "--candidate", "a"];
    let elect = spawn(&hosts, &elect_addr, &elect, done);

    // Held, and renewed at least once.
    let held = scrape_until(&lock_addr, |body| {
        value(body, "cqlcoord_keepalive_renew_duration_seconds_count", &[]).is_some()
    })
    .await;
    let acquired = value(
        &held,
        "cqlcoord_locks_acquired_total",
        &[("algorithm", "lease")],
    );
    assert_eq!(acquired, Some(1.0), "{held}");
    assert_eq!(
        value(&held, "cqlcoord_leases_held", &[("kind", "lease")]),
        Some(1.0),
        "{held}"
    );
    let claims = [
        ("store", "lease"),
        ("operation", "try_acquire"),
        ("outcome", "applied"),
    ];
    assert_eq!(
        value(&held, "cqlcoord_store_requests_total", &claims),
        Some(1.0),
        "{held}"
    );
    let waits = value(
        &held,
        "cqlcoord_lock_wait_duration_seconds_count",
        &[("algorithm", "lease")],
    );
    assert_eq!(waits, Some(1.0), "{held}");
    assert!(
        held.contains("# HELP cqlcoord_store_requests_total"),
        "{held}"
    );
    let histogram = "# TYPE cqlcoord_keepalive_renew_duration_seconds histogram";
    assert!(held.contains(histogram), "{held}");

    let leading = scrape_until(&elect_addr, |body| {
        let election = [("election", "scraped-election")];
        value(body, "cqlcoord_election_is_leader", &election) == Some(1.0)
    })
    .await;
    let terms = value(
        &leading,
        "cqlcoord_election_terms_started_total",
        &[("election", "scraped-election")],
    );
    assert_eq!(terms, Some(1.0), "{leading}");

    std::fs::write(done, "").expect("done");
    for child in [lock, elect] {
        let out = child.wait_with_output().await.expect("wait");
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
}

#[tokio::test]
async fn a_bad_or_taken_metrics_address_is_a_usage_error() {
    let nowhere = "127.0.0.1:1";
    let out = run(
        nowhere,
        &["--metrics-addr", "localhost", "leader", "x"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--metrics-addr"),
        "{}",
        text(&out.stderr)
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("address").to_string();
    let out = run(nowhere, &["--metrics-addr", &addr, "leader", "x"], None).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("--metrics-addr {addr}")),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
