//! Cassandra facts the CQL test server must reproduce, checked through the real driver.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::time::Duration;

use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::statement::batch::{Batch, BatchType};
use scylla::value::{CqlValue, Row};

async fn setup(flavor: Flavor) -> (CqlTestServer, Session) {
    let server = CqlTestServer::start(ServerOptions::lenient(flavor)).await;
    let session = server.session().await;
    for ddl in [
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TABLE ks.t (k text PRIMARY KEY, a text, b text, n int)",
    ] {
        session.query_unpaged(ddl, ()).await.expect(ddl);
    }
    (server, session)
}

async fn run(session: &Session, cql: &str) -> Vec<Vec<(String, Option<CqlValue>)>> {
    let result = session
        .query_unpaged(cql, ())
        .await
        .unwrap_or_else(|e| panic!("{cql}: {e}"));
    let Ok(rows) = result.into_rows_result() else {
        return Vec::new();
    };
    let names: Vec<String> = rows
        .column_specs()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    rows.rows::<Row>()
        .expect("rows")
        .map(|r| names.iter().cloned().zip(r.expect("row").columns).collect())
        .collect()
}

async fn fails(session: &Session, cql: &str) -> (DbError, String) {
    match session.query_unpaged(cql, ()).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(e, msg))) => (e, msg),
        other => panic!("{cql} should fail with a database error: {other:?}"),
    }
}

fn text(s: &str) -> Option<CqlValue> {
    Some(CqlValue::Text(s.into()))
}

fn applied(row: &[(String, Option<CqlValue>)]) -> bool {
    row[0] == ("[applied]".into(), Some(CqlValue::Boolean(true)))
}

fn names(row: &[(String, Option<CqlValue>)]) -> Vec<&str> {
    row.iter().map(|(n, _)| n.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_writes_a_row_marker_that_outlives_expired_cells() {
    let (server, s) = setup(Flavor::Cassandra).await;
    run(
        &s,
        "INSERT INTO ks.t (k, a) VALUES ('x', 'v') USING TTL 100",
    )
    .await;
    run(&s, "UPDATE ks.t USING TTL 1 SET a = 'w' WHERE k = 'x'").await;
    server.clock().advance(Duration::from_secs(2));
    let rows = run(&s, "SELECT k, a FROM ks.t WHERE k = 'x'").await;
    assert_eq!(
        rows,
        vec![vec![("k".into(), text("x")), ("a".into(), None)]],
        "the marker keeps the row"
    );
    let r = &run(
        &s,
        "INSERT INTO ks.t (k, a) VALUES ('x', 'z') IF NOT EXISTS",
    )
    .await[0];
    assert!(!applied(r));
    assert_eq!(
        names(r),
        ["[applied]", "k", "a", "b", "n"],
        "a failed IF NOT EXISTS returns every column"
    );
    assert_eq!(r[1].1, text("x"));
    server.clock().advance(Duration::from_secs(100));
    assert!(run(&s, "SELECT k FROM ks.t WHERE k = 'x'").await.is_empty());
    let r = &run(
        &s,
        "INSERT INTO ks.t (k, a) VALUES ('x', 'z') IF NOT EXISTS",
    )
    .await[0];
    assert!(applied(r));
    assert_eq!(
        names(r),
        ["[applied]"],
        "an applied LWT returns only [applied]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_marker_takes_the_table_default_ttl() {
    let (server, s) = setup(Flavor::Cassandra).await;
    run(
        &s,
        "CREATE TABLE ks.d (k text PRIMARY KEY, a text) WITH default_time_to_live = 5",
    )
    .await;
    run(&s, "INSERT INTO ks.d (k, a) VALUES ('x', 'v')").await;
    let rows = run(&s, "SELECT ttl(a) FROM ks.d WHERE k = 'x'").await;
    assert!(
        matches!(rows[0][0].1, Some(CqlValue::Int(4 | 5))),
        "{rows:?}"
    );
    run(&s, "INSERT INTO ks.d (k, a) VALUES ('y', 'v') USING TTL 0").await;
    server.clock().advance(Duration::from_secs(6));
    assert!(
        run(&s, "SELECT k FROM ks.d WHERE k = 'x'").await.is_empty(),
        "marker and cell expired"
    );
    assert_eq!(
        run(&s, "SELECT k FROM ks.d WHERE k = 'y'").await.len(),
        1,
        "TTL 0 overrides the default"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_writes_no_marker_and_if_null_creates_the_row() {
    let (server, s) = setup(Flavor::Cassandra).await;
    run(&s, "UPDATE ks.t USING TTL 1 SET a = 'v' WHERE k = 'y'").await;
    server.clock().advance(Duration::from_secs(2));
    assert!(
        run(&s, "SELECT k FROM ks.t WHERE k = 'y'").await.is_empty(),
        "no marker: the row is gone"
    );
    assert!(applied(
        &run(&s, "INSERT INTO ks.t (k) VALUES ('y') IF NOT EXISTS").await[0]
    ));
    let r = &run(&s, "UPDATE ks.t SET a = 'v' WHERE k = 'z' IF a = null").await[0];
    assert!(applied(r), "IF a = null holds on a missing row");
    assert_eq!(
        run(&s, "SELECT a FROM ks.t WHERE k = 'z'").await,
        vec![vec![("a".into(), text("v"))]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_conditional_writes_return_the_conditioned_columns() {
    let (_server, s) = setup(Flavor::Cassandra).await;
    run(&s, "INSERT INTO ks.t (k, a, b) VALUES ('c', '1', '2')").await;
    let r = &run(&s, "UPDATE ks.t SET a = '9' WHERE k = 'c' IF a = '0'").await[0];
    assert_eq!(
        r,
        &vec![
            ("[applied]".into(), Some(CqlValue::Boolean(false))),
            ("a".into(), text("1"))
        ]
    );
    let r = &run(
        &s,
        "UPDATE ks.t SET a = '9' WHERE k = 'c' IF a = '1' AND b = '2'",
    )
    .await[0];
    assert_eq!(names(r), ["[applied]"]);
    let r = &run(&s, "UPDATE ks.t SET a = '9' WHERE k = 'missing' IF a = '0'").await[0];
    assert_eq!(names(r), ["[applied]"], "no row: nothing to show");
    assert!(!applied(r));
    let r = &run(&s, "DELETE FROM ks.t WHERE k = 'missing' IF EXISTS").await[0];
    assert!(!applied(r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_mode_always_returns_the_old_row() {
    let (_server, s) = setup(Flavor::Scylla).await;
    run(&s, "INSERT INTO ks.t (k, a, b) VALUES ('c', '1', '2')").await;
    let r = &run(&s, "UPDATE ks.t SET a = '9' WHERE k = 'c' IF a = '1'").await[0];
    assert_eq!(
        r,
        &vec![
            ("[applied]".into(), Some(CqlValue::Boolean(true))),
            ("a".into(), text("1"))
        ]
    );
    let r = &run(&s, "UPDATE ks.t SET a = '9' WHERE k = 'new' IF a = null").await[0];
    assert_eq!(
        r,
        &vec![
            ("[applied]".into(), Some(CqlValue::Boolean(true))),
            ("a".into(), None)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_and_comparison_rules_of_conditions() {
    let (_server, s) = setup(Flavor::Cassandra).await;
    run(&s, "INSERT INTO ks.t (k, a) VALUES ('n', 'x')").await;
    assert!(
        !applied(&run(&s, "UPDATE ks.t SET a = 'y' WHERE k = 'n' IF n < 5").await[0]),
        "null < 5 is false"
    );
    assert!(
        applied(&run(&s, "UPDATE ks.t SET n = 3 WHERE k = 'n' IF n != 5").await[0]),
        "null != 5 is true"
    );
    assert!(applied(
        &run(&s, "UPDATE ks.t SET n = 4 WHERE k = 'n' IF n < 4").await[0]
    ));
    assert!(!applied(
        &run(&s, "UPDATE ks.t SET n = 5 WHERE k = 'n' IF n < 4").await[0]
    ));
    assert!(applied(
        &run(&s, "UPDATE ks.t SET n = 6 WHERE k = 'n' IF n IN (null, 4)").await[0]
    ));
    assert_eq!(
        fails(&s, "UPDATE ks.t SET n = 1 WHERE k = 'n' IF n < null")
            .await
            .0,
        DbError::Invalid
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_batches_are_single_partition_with_ttl_per_statement_and_no_timestamp() {
    let (_server, s) = setup(Flavor::Cassandra).await;
    let batch = |statements: &[&str]| {
        let mut b = Batch::new(BatchType::Logged);
        for st in statements {
            b.append_statement(*st);
        }
        b
    };
    let b = batch(&[
        "UPDATE ks.t USING TTL 10 SET a = 'x' WHERE k = 'b' IF a = null",
        "UPDATE ks.t USING TTL 100 SET b = 'y' WHERE k = 'b'",
    ]);
    let result = s.batch(&b, ((), ())).await.expect("batch");
    let rows = result.into_rows_result().expect("rows");
    assert_eq!(rows.first_row::<(bool,)>().expect("[applied]"), (true,));
    let ttls = run(&s, "SELECT ttl(a), ttl(b) FROM ks.t WHERE k = 'b'").await;
    assert!(
        matches!(
            (&ttls[0][0].1, &ttls[0][1].1),
            (Some(CqlValue::Int(9 | 10)), Some(CqlValue::Int(99 | 100)))
        ),
        "{ttls:?}"
    );
    let failed = s
        .batch(&b, ((), ()))
        .await
        .expect("batch")
        .into_rows_result()
        .expect("rows");
    let names: Vec<_> = failed
        .column_specs()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    assert_eq!(
        names,
        ["[applied]", "k", "a"],
        "a failed batch shows the key and conditioned columns"
    );
    let two_partitions = batch(&[
        "UPDATE ks.t SET a = 'x' WHERE k = 'p1' IF a = null",
        "UPDATE ks.t SET a = 'x' WHERE k = 'p2'",
    ]);
    assert!(matches!(
        s.batch(&two_partitions, ((), ())).await,
        Err(ExecutionError::LastAttemptError(
            RequestAttemptError::DbError(DbError::Invalid, _)
        ))
    ));
    let with_timestamp =
        batch(&["UPDATE ks.t USING TIMESTAMP 5 SET a = 'x' WHERE k = 'q' IF a = null"]);
    match s.batch(&with_timestamp, ((),)).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Invalid,
            msg,
        ))) => {
            assert!(msg.contains("custom timestamp"), "{msg}");
        }
        other => panic!("USING TIMESTAMP in a conditional batch must be rejected: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_columns_leaves_the_other_cells() {
    let (_server, s) = setup(Flavor::Cassandra).await;
    run(
        &s,
        "INSERT INTO ks.t (k, a, b, n) VALUES ('d', '1', '2', 3)",
    )
    .await;
    run(&s, "DELETE a, n FROM ks.t WHERE k = 'd'").await;
    let rows = run(&s, "SELECT a, b, n FROM ks.t WHERE k = 'd'").await;
    assert_eq!(
        rows,
        vec![vec![
            ("a".into(), None),
            ("b".into(), text("2")),
            ("n".into(), None)
        ]]
    );
    run(&s, "DELETE FROM ks.t WHERE k = 'd'").await;
    assert!(run(&s, "SELECT a FROM ks.t WHERE k = 'd'").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_keywords_are_not_identifiers_unless_quoted() {
    let (_server, s) = setup(Flavor::Cassandra).await;
    for bad in [
        "CREATE TABLE ks.r (k text PRIMARY KEY, token bigint)",
        "CREATE TABLE ks.r (k text PRIMARY KEY, order int)",
        "SELECT limit FROM ks.t",
    ] {
        assert_eq!(fails(&s, bad).await.0, DbError::SyntaxError, "{bad}");
    }
    run(
        &s,
        "CREATE TABLE ks.r (k text PRIMARY KEY, \"token\" bigint)",
    )
    .await;
    run(&s, "UPDATE ks.r SET \"token\" = 7 WHERE k = 'a'").await;
    assert_eq!(
        run(&s, "SELECT \"token\" FROM ks.r WHERE k = 'a'").await[0][0].1,
        Some(CqlValue::BigInt(7))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_server_names_the_statements_it_does_not_know() {
    let server = CqlTestServer::start(ServerOptions::strict(Flavor::Cassandra)).await;
    let s = server.session().await;
    for (label, ddl) in [
        (
            "schema",
            "CREATE KEYSPACE coordination WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        ),
        (
            "schema",
            "CREATE TABLE coordination.leases (name text PRIMARY KEY, holder text, owner text)",
        ),
        (
            "read",
            "SELECT holder FROM coordination.leases WHERE name = ?",
        ),
    ] {
        server.register(label, ddl);
    }
    for ddl in [
        "CREATE KEYSPACE coordination WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TABLE coordination.leases (name text PRIMARY KEY, holder text, owner text)",
    ] {
        run(&s, ddl).await;
    }
    s.query_unpaged(
        "SELECT holder FROM coordination.leases WHERE name = ?",
        ("x",),
    )
    .await
    .expect("a registered statement runs");
    assert_eq!(server.calls("read"), 1);
    let (error, message) = fails(&s, "SELECT owner FROM coordination.leases").await;
    assert_eq!(error, DbError::Invalid);
    assert!(
        message.contains("SELECT owner FROM coordination.leases"),
        "{message}"
    );
    assert_eq!(server.refused(), ["SELECT owner FROM coordination.leases"]);
}
