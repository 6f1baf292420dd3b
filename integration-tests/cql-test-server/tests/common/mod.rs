//! Helpers shared by the facts tests.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use cql_test_server::{CqlTestServer, ServerOptions};
use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::value::{CqlValue, Row};

/// A lenient server with keyspace `ks` and the tables of `ddl`.
pub async fn setup(options: ServerOptions, ddl: &[&str]) -> (CqlTestServer, Session) {
    let server = CqlTestServer::start(options).await;
    let session = server.session().await;
    run(
        &session,
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    )
    .await;
    for statement in ddl {
        run(&session, statement).await;
    }
    (server, session)
}

/// Runs an unprepared statement; its rows as optional values.
pub async fn run(session: &Session, cql: &str) -> Vec<Vec<Option<CqlValue>>> {
    let result = session
        .query_unpaged(cql, ())
        .await
        .unwrap_or_else(|e| panic!("{cql}: {e}"));
    let Ok(rows) = result.into_rows_result() else {
        return Vec::new();
    };
    rows.rows::<Row>()
        .expect("rows")
        .map(|r| r.expect("row").columns)
        .collect()
}

/// The database error `cql` fails with.
pub async fn fails(session: &Session, cql: &str) -> (DbError, String) {
    match session.query_unpaged(cql, ()).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(e, msg))) => (e, msg),
        other => panic!("{cql} should fail with a database error: {other:?}"),
    }
}

/// An int cell.
pub fn int(n: i32) -> Option<CqlValue> {
    Some(CqlValue::Int(n))
}

/// A text cell.
pub fn text(s: &str) -> Option<CqlValue> {
    Some(CqlValue::Text(s.into()))
}

/// The first column of each row, as ints.
pub fn ints(rows: &[Vec<Option<CqlValue>>]) -> Vec<i32> {
    rows.iter()
        .map(|r| match &r[0] {
            Some(CqlValue::Int(n)) => *n,
            other => panic!("not an int: {other:?}"),
        })
        .collect()
}
