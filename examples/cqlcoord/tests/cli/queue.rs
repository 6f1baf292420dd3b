//! `queue push | work | stats | dead`: a round trip through every state.

use cql_test_server::Flavor;

use crate::common::{run, scratch, server, text};

const WORK_TIMING: [&str; 8] = [
    "--ttl",
    "4s",
    "--renew-interval",
    "1s",
    "--retry-interval",
    "200ms",
    "--kill-grace",
    "500ms",
];

async fn stats(hosts: &str) -> serde_json::Value {
    let out = run(hosts, &["queue", "stats", "mail", "--json"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("json")
}

fn counts(stats: &serde_json::Value) -> [u64; 4] {
    ["available", "scheduled", "running", "dead"].map(|k| stats[k].as_u64().expect(k))
}

async fn work(hosts: &str, jobs: &str, log: &str) -> String {
    let mut args = vec![
        "queue",
        "work",
        "mail",
        "--max-jobs",
        jobs,
        "--max-attempts",
        "1",
    ];
    args.extend(WORK_TIMING);
    // Logs payload, attempt and token; fails on the payload "bad".
    let script = "read p; echo \"$p $CQLCOORD_JOB_ATTEMPT $CQLCOORD_FENCING_TOKEN\" >> \"$0\"; [ \"$p\" != bad ]";
    args.extend(["--", "sh", "-c", script, log]);
    let out = run(hosts, &args, None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_work_stats_and_dead_letters_round_trip() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let dir = scratch("queue");
    let log = dir.join("jobs");
    let log = log.to_str().expect("utf-8");

    // Stdin lines (empty ones skipped), a unique key pushed twice, a delayed item.
    let (lines, keyed, delayed) = tokio::join!(
        run(&hosts, &["queue", "push", "mail"], Some("ada\n\nbad\n")),
        run(
            &hosts,
            &["queue", "push", "mail", "--key", "bob", "bob"],
            None
        ),
        run(
            &hosts,
            &["queue", "push", "mail", "--delay", "50s", "later"],
            None
        ),
    );
    for out in [&lines, &keyed, &delayed] {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let ids: Vec<String> = text(&lines.stdout).lines().map(str::to_owned).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(text(&keyed.stdout).trim(), "u:bob");
    let out = run(
        &hosts,
        &["queue", "push", "mail", "--key", "bob", "bob again"],
        None,
    )
    .await;
    assert_eq!(text(&out.stdout).trim(), "u:bob duplicate (available)");
    assert_eq!(counts(&stats(&hosts).await), [3, 1, 0, 0]);

    // Three jobs: two succeed, "bad" fails its only attempt and becomes a dead letter.
    let report = work(&hosts, "3", log).await;
    let mut ran: Vec<String> = std::fs::read_to_string(log)
        .expect("log")
        .lines()
        .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    ran.sort();
    assert_eq!(ran, ["ada 1", "bad 1", "bob 1"], "{report}");
    assert!(
        report.contains(&format!("job {} failed: dead letter", ids[1])),
        "{report}"
    );
    assert_eq!(counts(&stats(&hosts).await), [0, 1, 0, 1]);
    let out = run(&hosts, &["queue", "dead", "mail"], None).await;
    let dead = text(&out.stdout);
    assert_eq!(dead.lines().count(), 1, "{dead}");
    assert!(
        dead.starts_with(&ids[1])
            && dead.contains("last_error=exit status 1")
            && dead.ends_with("payload=bad\n"),
        "{dead}"
    );

    // Requeued, it runs again with its attempt count going on (and fails again).
    let out = run(
        &hosts,
        &["queue", "dead", "mail", "--requeue", &ids[1]],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(counts(&stats(&hosts).await), [1, 1, 0, 0]);
    let out = run(
        &hosts,
        &["queue", "dead", "mail", "--requeue", &ids[1]],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(124), "not a dead letter any more");
    work(&hosts, "1", log).await;
    let last = std::fs::read_to_string(log).expect("log");
    assert!(
        last.lines().last().expect("a line").starts_with("bad 2 "),
        "{last}"
    );
    assert_eq!(counts(&stats(&hosts).await), [0, 1, 0, 1]);

    let out = run(&hosts, &["queue", "dead", "mail", "--purge"], None).await;
    assert_eq!(text(&out.stdout).trim(), format!("purged {}", ids[1]));
    assert_eq!(counts(&stats(&hosts).await), [0, 1, 0, 0]);
}

/// `--concurrency 2` runs two jobs at once: each job waits (up to a minute) until both have
/// started, which one worker alone could never see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_runs_jobs_at_once() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let dir = scratch("queue-concurrency");
    let log = dir.join("log");
    let log = log.to_str().expect("utf-8");
    for payload in ["one", "two"] {
        let out = run(&hosts, &["queue", "push", "pair", payload], None).await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let script = "echo start >> \"$0\"; i=0; \
                  while [ \"$(grep -c start \"$0\")\" -lt 2 ]; do \
                  sleep 0.05; i=$((i+1)); [ $i -gt 1200 ] && exit 1; done; echo end >> \"$0\"";
    let mut args = vec![
        "queue",
        "work",
        "pair",
        "--concurrency",
        "2",
        "--max-jobs",
        "2",
        "--max-attempts",
        "1",
    ];
    args.extend(WORK_TIMING);
    args.extend(["--", "sh", "-c", script, log]);
    let out = run(&hosts, &args, None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = std::fs::read_to_string(log).expect("log");
    assert_eq!(lines.matches("end").count(), 2, "{lines}");
    let out = run(&hosts, &["queue", "stats", "pair", "--json"], None).await;
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(counts(&stats), [0, 0, 0, 0], "both done: {stats}");

    let out = run(
        &hosts,
        &["queue", "work", "pair", "--concurrency", "0", "--", "true"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// `--order oldest-first` takes the items in the order they were pushed (with `spread`, the
/// default, a worker picks among the first four at random).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oldest_first_keeps_the_push_order() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let dir = scratch("queue-order");
    let log = dir.join("log");
    let log = log.to_str().expect("utf-8");
    let payloads = ["p1", "p2", "p3", "p4", "p5", "p6"];
    for payload in payloads {
        let out = run(&hosts, &["queue", "push", "fifo", payload], None).await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let mut args = vec![
        "queue",
        "work",
        "fifo",
        "--order",
        "oldest-first",
        "--max-jobs",
        "6",
    ];
    args.extend(WORK_TIMING);
    args.extend(["--", "sh", "-c", "cat >> \"$0\"; echo >> \"$0\"", log]);
    let out = run(&hosts, &args, None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let order: Vec<String> = std::fs::read_to_string(log)
        .expect("log")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(order, payloads, "not in push order");
}

/// An idle `queue work` says once on stderr that it waits for items, then runs the item
/// pushed meanwhile and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_says_it_waits_for_items() {
    use std::process::Stdio;
    use tokio::io::{AsyncBufReadExt, BufReader};

    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let mut args = vec!["queue", "work", "idle", "--max-jobs", "1"];
    args.extend(WORK_TIMING);
    args.extend(["--", "true"]);
    let mut worker = crate::common::cqlcoord(&hosts)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(worker.stderr.take().expect("stderr")).lines();
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
        .await
        .expect("a line within a minute")
        .expect("read")
        .expect("a line before EOF");
    assert_eq!(first, "cqlcoord: waiting for items on \"idle\"");
    let out = run(&hosts, &["queue", "push", "idle", "job"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut rest = Vec::new();
    while let Some(line) = lines.next_line().await.expect("read") {
        rest.push(line);
    }
    let status = worker.wait().await.expect("wait");
    assert_eq!(status.code(), Some(0), "{rest:?}");
    assert!(
        rest.iter().all(|l| !l.contains("waiting for items")),
        "{rest:?}"
    );
}

/// `--max-jobs 0` and an empty `--key` are refused by the flag parser, one line, exit 2,
/// before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_max_jobs_and_an_empty_key_are_usage_errors() {
    for (args, needle) in [
        (
            vec!["queue", "work", "q", "--max-jobs", "0", "--", "true"],
            "invalid value '0' for '--max-jobs <MAX_JOBS>'",
        ),
        (
            vec!["queue", "push", "q", "x", "--key", ""],
            "invalid value '' for '--key <KEY>': unique key must not be empty (see --help)",
        ),
    ] {
        let out = run("127.0.0.1:1", &args, None).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
