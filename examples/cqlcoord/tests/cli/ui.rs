//! `cqlcoord ui` as a process: where it may listen, what it serves, and what one refresh
//! costs the cluster.

use std::time::Duration;

use cql_test_server::{CqlTestServer, Flavor};

use crate::common::{http, run, run_env, server, start_ui, text};

/// Per-queue request bound of one overview refresh (the dashboard's `QUEUE_READS`: the
/// cursor, the dead letters, and at most 320 index and bucket-directory reads).
const QUEUE_READS: u64 = 322;

/// Requests the stores sent (the driver's own metadata queries are not counted).
fn store_requests(server: &CqlTestServer) -> u64 {
    ["lease", "cells", "queue"]
        .iter()
        .map(|l| server.calls(l))
        .sum()
}

/// Requests sent to the cluster while one `GET /api/overview` is answered.
async fn one_refresh(server: &CqlTestServer, addr: &str) -> u64 {
    let before = store_requests(server);
    let (status, body) = http(addr, "GET", "/api/overview", &[]).await;
    assert_eq!(status, 200, "{body}");
    store_requests(server) - before
}

/// A non-loopback `--listen` without `--allow-remote` is refused with a usage error (exit 2)
/// before anything is sent or served.
#[tokio::test]
async fn a_non_loopback_listen_address_is_refused_without_allow_remote() {
    let out = run(
        "127.0.0.1:1",
        &["ui", "--listen", "0.0.0.0:0", "--queue", "jobs"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("--allow-remote"),
        "{stderr}"
    );
    let short = run("127.0.0.1:1", &["ui", "--write-token", "short"], None).await;
    assert_eq!(short.status.code(), Some(2), "{}", text(&short.stderr));
}

/// One overview refresh showing E elections, L locks and Q queues sends at most
/// E + L + 322·Q requests, with 1,000 items in a queue as with none, and shows those items
/// completely.
#[tokio::test]
async fn one_overview_refresh_costs_a_bounded_number_of_requests_whatever_a_queue_holds() {
    let (server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    // A read answers the requests of the next half refresh (250 ms): the test waits that out.
    let args = [
        "--refresh",
        "500ms",
        "--election",
        "primary",
        "--election",
        "standby",
        "--lock",
        "db",
        "--lock",
        "cron",
        "--lease",
        "slot",
        "--queue",
        "jobs",
        "--queue",
        "mail",
        "--queue",
        "reports",
    ];
    let (_ui, addr) = start_ui(&hosts, &args).await;
    let (status, page) = http(&addr, "GET", "/", &[]).await;
    assert_eq!(status, 200);
    assert!(page.contains("/static/app.js"), "{page}");
    let bound = 2 + 2 + 1 + 3 * QUEUE_READS;
    let empty = one_refresh(&server, &addr).await;
    assert!(
        empty > 0 && empty <= bound,
        "{empty} requests, bound {bound}"
    );
    let items: String = (0..1000).map(|i| format!("job {i}\n")).collect();
    let out = run(&hosts, &["queue", "push", "jobs"], Some(&items)).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let full = one_refresh(&server, &addr).await;
    assert!(
        full <= bound,
        "{full} requests with 1,000 items, bound {bound}"
    );
    let (_, body) = http(&addr, "GET", "/api/overview", &[]).await;
    let overview: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let jobs = &overview["queues"][0];
    assert_eq!(jobs["name"], "jobs", "{body}");
    assert_eq!(jobs["available"], 1000, "{body}");
    assert_eq!(jobs["complete"], true, "{body}");
    assert!(
        body.contains(&format!("at most {bound} requests")),
        "{body}"
    );
    eprintln!("one overview refresh: {empty} requests, {full} with 1,000 items (bound {bound})");
}

/// Fifty pages refreshing the overview at once cost the cluster at most two refreshes'
/// requests: they wait for the read in flight and share its answer.
#[tokio::test]
async fn fifty_concurrent_overview_requests_cost_at_most_two_refreshes() {
    let (server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let args = ["--election", "primary", "--lock", "db", "--queue", "jobs"];
    let (_ui, addr) = start_ui(&hosts, &args).await;
    let one = one_refresh(&server, &addr).await;
    assert!(one > 0);
    // Past the half refresh (1 s of the default 2 s) that one read answers.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = store_requests(&server);
    let requests = (0..50).map(|_| async {
        let (status, body) = http(&addr, "GET", "/api/overview", &[]).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"queues\""), "{body}");
    });
    futures::future::join_all(requests).await;
    let fifty = store_requests(&server) - before;
    assert!(
        fifty <= 2 * one,
        "50 concurrent requests: {fifty}, one refresh: {one}"
    );
    eprintln!("50 concurrent overview requests: {fifty} requests (one refresh: {one})");
}

/// A write token of six CJK characters (18 bytes) is refused at start (exit 2), saying that
/// a token is at least 16 visible ASCII characters.
#[tokio::test]
async fn a_write_token_of_six_cjk_characters_is_refused_at_start() {
    let out = run(
        "127.0.0.1:1",
        &["ui", "--write-token", "秘密合言葉鍵"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--write-token")
            && stderr.contains("at least 16 characters, each visible ASCII"),
        "{stderr}"
    );
}

/// With `--metrics` the dashboard also serves the libraries' metrics for Prometheus at
/// `/metrics`: the requests its own refreshes sent are counted there.
#[tokio::test]
async fn with_metrics_the_dashboard_serves_prometheus_metrics_beside_the_pages() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let (_ui, addr) = start_ui(&hosts, &["--metrics", "--queue", "jobs"]).await;
    let (status, _) = http(&addr, "GET", "/api/overview", &[]).await;
    assert_eq!(status, 200);
    let (status, body) = http(&addr, "GET", "/metrics", &[]).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("cqlcoord_store_requests_total{")
            && body.contains("operation=\"read_cursor\""),
        "{body}"
    );
    let (_plain, plain) = start_ui(&hosts, &["--queue", "jobs"]).await;
    assert_eq!(http(&plain, "GET", "/metrics", &[]).await.0, 404);
}

/// Refusals name what the user gave and what to give: a queue name too long is a "queue
/// name", a listen address that is no IP address gets an example, and a bad token from the
/// environment names the variable; an empty `CQLCOORD_UI_TOKEN` is no token (read-only).
#[tokio::test]
async fn refusals_at_start_name_what_was_given() {
    let long = "q".repeat(10_000);
    let refusals = [
        (
            vec!["ui", "--queue", long.as_str()],
            vec![],
            "--queue: queue name",
        ),
        (
            vec!["ui", "--listen", "dash:8080"],
            vec![],
            "e.g. 127.0.0.1:8080",
        ),
        (
            vec!["ui", "--queue", "jobs"],
            vec![("CQLCOORD_UI_TOKEN", "short")],
            "CQLCOORD_UI_TOKEN",
        ),
    ];
    for (args, env, says) in refusals {
        let out = run_env("127.0.0.1:1", &args, &env, None).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // Past the flags: an empty token is taken as none, and only the cluster is missing.
    let out = run_env(
        "127.0.0.1:1",
        &["ui", "--listen", "localhost:0", "--queue", "jobs"],
        &[("CQLCOORD_UI_TOKEN", "")],
        None,
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("token"), "{stderr}");
}

/// A refused write says which header (or form field) it lacked, and a queue's page states
/// its own cost per refresh.
#[tokio::test]
async fn a_refused_write_names_what_it_lacked_and_a_queue_page_states_its_cost() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let token = "0123456789abcdef0123";
    let (_ui, addr) = start_ui(&hosts, &["--write-token", token, "--queue", "jobs"]).await;
    let path =
        "/api/queues/jobs/dead/00001795768910821178-c04f6595f9fe49c88a8c9e11bf428f58/requeue";
    let (status, body) = http(&addr, "POST", path, &[]).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("X-CQLCOORD-CSRF: 1"), "{body}");
    let (status, body) = http(&addr, "POST", path, &[("X-CQLCOORD-CSRF", "1")]).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("X-CQLCOORD-TOKEN") && body.contains("form field token"),
        "{body}"
    );
    let (status, body) = http(&addr, "GET", "/api/queues/jobs", &[]).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("Each refresh of this page sends at most"),
        "{body}"
    );
}
