//! Connection trouble while a long-running command goes on: said on stderr, not silence.

use std::process::Stdio;
use std::time::Duration;

use cql_test_server::Flavor;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{cqlcoord, server};

/// Starts `cqlcoord ARGS` against a server, waits until it is under way (`ready` on a
/// stdout line, or a moment's work), stops the server, and returns the stderr lines up to
/// the first one satisfying `reported` (within a minute).
async fn stderr_after_the_server_goes(args: &[&str], ready: Option<&str>, reported: &str) {
    let (server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    // One item, so that a worker shows it is under way by running it.
    let out = crate::common::run(&hosts, &["queue", "push", "idle", "one"], None).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::common::text(&out.stderr)
    );
    let mut command = cqlcoord(&hosts);
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    if let Some(ready) = ready {
        let line = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
            .await
            .expect("a line within a minute")
            .expect("read")
            .expect("a line");
        assert!(line.contains(ready), "{line}");
    }
    // A dead node: it stops listening and closes its connections.
    server.node_fault(0, cql_test_server::NodeFault::Down);
    let mut seen = Vec::new();
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = stderr.next_line().await {
            let done = line.contains(reported);
            seen.push(line);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "no {reported:?} on stderr: {seen:?}");
    let _ = child.start_kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_reports_a_lost_connection() {
    stderr_after_the_server_goes(
        &["observe", "quiet", "--retry-interval", "200ms"],
        Some("no leader"),
        "cannot read the leader of \"quiet\"",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_work_reports_a_lost_connection() {
    stderr_after_the_server_goes(
        &[
            "queue",
            "work",
            "idle",
            "--retry-interval",
            "200ms",
            "--",
            "sh",
            "-c",
            "echo ran",
        ],
        Some("ran"),
        "WARN",
    )
    .await;
}
