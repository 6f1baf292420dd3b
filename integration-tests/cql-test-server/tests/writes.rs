//! Plain writes: consistency levels recorded, `USING TIMESTAMP` and last-write-wins,
//! server and client timestamps, `writetime()` / `ttl()`, multi-partition batches.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod common;

use common::{run, setup, text};
use cql_test_server::{Flavor, ServerOptions};
use scylla::statement::Consistency;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::unprepared::Statement;
use scylla::value::CqlValue;

const TABLE: &str = "CREATE TABLE ks.t (k text PRIMARY KEY, v text, n int)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_regular_consistency_succeeds_and_is_recorded() {
    let (server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    let levels = [
        Consistency::Any,
        Consistency::One,
        Consistency::Two,
        Consistency::Three,
        Consistency::Quorum,
        Consistency::All,
        Consistency::LocalQuorum,
        Consistency::EachQuorum,
        Consistency::LocalOne,
    ];
    for level in levels {
        let mut write = Statement::new("UPDATE ks.t SET v = 'x' WHERE k = 'a'");
        write.set_consistency(level);
        s.query_unpaged(write, ()).await.expect("write");
        if level != Consistency::Any {
            let mut read = Statement::new("SELECT v FROM ks.t WHERE k = 'a'");
            read.set_consistency(level);
            s.query_unpaged(read, ()).await.expect("read");
        }
    }
    let used: Vec<Consistency> = server
        .consistencies()
        .into_iter()
        .filter(|c| c.statement.starts_with("UPDATE ks.t"))
        .map(|c| c.consistency)
        .collect();
    assert_eq!(used, levels);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_highest_timestamp_wins_and_ties_go_to_tombstones_then_greater_values() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    let read = "SELECT v, writetime(v) FROM ks.t WHERE k = 'a'";
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 100 SET v = 'new' WHERE k = 'a'",
    )
    .await;
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 50 SET v = 'old' WHERE k = 'a'",
    )
    .await;
    assert_eq!(
        run(&s, read).await,
        vec![vec![text("new"), Some(CqlValue::BigInt(100))]]
    );
    // Same timestamp: the greater value wins, whatever the order of arrival.
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 100 SET v = 'alpha' WHERE k = 'a'",
    )
    .await;
    assert_eq!(run(&s, read).await[0][0], text("new"));
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 100 SET v = 'zulu' WHERE k = 'a'",
    )
    .await;
    assert_eq!(run(&s, read).await[0][0], text("zulu"));
    // Same timestamp as a delete: the tombstone wins.
    run(&s, "DELETE v FROM ks.t USING TIMESTAMP 100 WHERE k = 'a'").await;
    assert!(run(&s, read).await.is_empty());
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 100 SET v = 'again' WHERE k = 'a'",
    )
    .await;
    assert!(run(&s, read).await.is_empty());
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 101 SET v = 'later' WHERE k = 'a'",
    )
    .await;
    assert_eq!(run(&s, read).await[0][0], text("later"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_timestamps_are_used_and_server_timestamps_otherwise() {
    let (server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    let mut write = Statement::new("UPDATE ks.t SET v = 'client' WHERE k = 'c'");
    write.set_timestamp(Some(1_000));
    s.query_unpaged(write, ()).await.unwrap();
    let rows = run(&s, "SELECT writetime(v) FROM ks.t WHERE k = 'c'").await;
    assert_eq!(rows[0][0], Some(CqlValue::BigInt(1_000)));
    run(
        &s,
        "UPDATE ks.t USING TTL 50 SET v = 'server' WHERE k = 's'",
    )
    .await;
    let rows = run(&s, "SELECT writetime(v), ttl(v) FROM ks.t WHERE k = 's'").await;
    let Some(CqlValue::BigInt(ts)) = rows[0][0] else {
        panic!("{rows:?}")
    };
    let now = server.clock().now_micros();
    assert!(ts <= now && ts > now - 60_000_000, "{ts} vs {now}");
    assert!(
        matches!(rows[0][1], Some(CqlValue::Int(49 | 50))),
        "{rows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_of_plain_writes_span_partitions() {
    let (server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    let put = s
        .prepare("UPDATE ks.t SET n = ? WHERE k = ?")
        .await
        .unwrap();
    for kind in [BatchType::Logged, BatchType::Unlogged] {
        let mut batch = Batch::new(kind);
        batch.set_consistency(Consistency::Quorum);
        for _ in 0..3 {
            batch.append_statement(put.clone());
        }
        s.batch(&batch, ((1, "x"), (2, "y"), (3, "z")))
            .await
            .unwrap();
    }
    let rows = run(&s, "SELECT k, n FROM ks.t WHERE k IN ('x', 'y', 'z')").await;
    assert_eq!(rows.len(), 3);
    let batch_levels: Vec<_> = server
        .consistencies()
        .into_iter()
        .filter(|c| c.statement.starts_with("UPDATE ks.t SET n"))
        .map(|c| c.consistency)
        .collect();
    assert_eq!(batch_levels, [Consistency::Quorum, Consistency::Quorum]);
}
