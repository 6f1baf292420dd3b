//! Plain writes: consistency levels recorded, `USING TIMESTAMP` and last-write-wins,
//! server and client timestamps, `writetime()` / `ttl()`, multi-partition batches.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod common;

use common::{fails, run, setup, text};
use cql_test_server::{Flavor, ServerOptions};
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
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

/// Equal timestamps, Cassandra: an expiring cell beats a plain one, the later expiry beats
/// the earlier one, and values compare as signed bytes ('é' = 0xC3.. is below 'z').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_breaks_timestamp_ties_by_expiry_then_signed_bytes() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    let read = |k: &str| format!("SELECT v FROM ks.t WHERE k = '{k}'");
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 AND TTL 1000 SET v = 'a' WHERE k = 'x'",
    )
    .await;
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 SET v = 'b' WHERE k = 'x'",
    )
    .await;
    assert_eq!(run(&s, &read("x")).await[0][0], text("a"), "expiring wins");
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 AND TTL 2000 SET v = 'a' WHERE k = 'x'",
    )
    .await;
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 AND TTL 1000 SET v = 'c' WHERE k = 'x'",
    )
    .await;
    assert_eq!(
        run(&s, &read("x")).await[0][0],
        text("a"),
        "later expiry wins"
    );
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 SET v = 'z' WHERE k = 'y'",
    )
    .await;
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 SET v = 'é' WHERE k = 'y'",
    )
    .await;
    assert_eq!(run(&s, &read("y")).await[0][0], text("z"), "signed bytes");
}

/// Equal timestamps, ScyllaDB: the greater value as unsigned bytes wins, even over an
/// expiring cell ('é' = 0xC3.. is above 'z').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_breaks_timestamp_ties_by_unsigned_bytes_first() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Scylla), &[TABLE]).await;
    let read = |k: &str| format!("SELECT v FROM ks.t WHERE k = '{k}'");
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 AND TTL 1000 SET v = 'a' WHERE k = 'x'",
    )
    .await;
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 SET v = 'b' WHERE k = 'x'",
    )
    .await;
    assert_eq!(
        run(&s, &read("x")).await[0][0],
        text("b"),
        "greater value wins"
    );
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 SET v = 'z' WHERE k = 'y'",
    )
    .await;
    run(
        &s,
        "UPDATE ks.t USING TIMESTAMP 5 SET v = 'é' WHERE k = 'y'",
    )
    .await;
    assert_eq!(run(&s, &read("y")).await[0][0], text("é"), "unsigned bytes");
    run(&s, "DELETE v FROM ks.t USING TIMESTAMP 5 WHERE k = 'y'").await;
    assert!(
        run(&s, &read("y")).await.is_empty(),
        "a tombstone still wins"
    );
}

/// A coordinator checks the level against the kind of statement: no read at `ANY`, no
/// plain write at a serial level, no serial level for the commit of a conditional write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn levels_are_checked_per_kind_of_statement() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    let at = |cql: &str, level| {
        let mut st = Statement::new(cql.to_owned());
        st.set_consistency(level);
        st
    };
    let refused = |r: Result<_, ExecutionError>| match r {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Invalid,
            m,
        ))) => m,
        other => panic!("should be refused as Invalid: {other:?}"),
    };
    let read = "SELECT v FROM ks.t WHERE k = 'a'";
    let m = refused(s.query_unpaged(at(read, Consistency::Any), ()).await);
    assert!(m.contains("ANY"), "{m}");
    for level in [Consistency::Serial, Consistency::LocalSerial] {
        let write = "UPDATE ks.t SET v = 'x' WHERE k = 'a'";
        let m = refused(s.query_unpaged(at(write, level), ()).await);
        assert!(m.contains("conditional updates"), "{m}");
        let lwt = "UPDATE ks.t SET v = 'x' WHERE k = 'a' IF v = null";
        refused(s.query_unpaged(at(lwt, level), ()).await);
        s.query_unpaged(at(read, level), ())
            .await
            .expect("a serial read is fine");
    }
    s.query_unpaged(
        at("UPDATE ks.t SET v = 'x' WHERE k = 'a'", Consistency::Any),
        (),
    )
    .await
    .expect("a plain write at ANY is fine");
}

/// An empty partition key has no token: refused in reads and writes, as Cassandra does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_partition_key_is_refused() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    for cql in [
        "SELECT v FROM ks.t WHERE k = ''",
        "SELECT v FROM ks.t WHERE k IN ('a', '')",
        "UPDATE ks.t SET v = 'x' WHERE k = ''",
        "INSERT INTO ks.t (k, v) VALUES ('', 'x')",
        "UPDATE ks.t SET v = 'x' WHERE k = '' IF v = null",
    ] {
        let (error, message) = fails(&s, cql).await;
        assert_eq!(
            (error, message.as_str()),
            (DbError::Invalid, "Key may not be empty"),
            "{cql}"
        );
    }
}
