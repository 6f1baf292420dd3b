//! The `[applied]` rows of LWTs and conditional batches, as Cassandra and ScyllaDB shape
//! them.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod common;

use common::{applied, names, run_named as run, text};
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchType};

async fn setup(flavor: Flavor) -> (CqlTestServer, Session) {
    common::setup(
        ServerOptions::lenient(flavor),
        &["CREATE TABLE ks.t (k text PRIMARY KEY, a text, b text, n int)"],
    )
    .await
}

/// ScyllaDB returns the whole old row for `IF EXISTS` as for `IF NOT EXISTS`, applied or
/// not (null when there is no row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_if_exists_returns_every_column() {
    let (_server, s) = setup(Flavor::Scylla).await;
    run(&s, "INSERT INTO ks.t (k, a) VALUES ('e', '1')").await;
    let r = &run(&s, "UPDATE ks.t SET a = '2' WHERE k = 'e' IF EXISTS").await[0];
    assert_eq!(names(r), ["[applied]", "k", "a", "b", "n"]);
    assert!(applied(r));
    assert_eq!((&r[1].1, &r[2].1), (&text("e"), &text("1")));
    let r = &run(&s, "DELETE FROM ks.t WHERE k = 'none' IF EXISTS").await[0];
    assert_eq!(names(r), ["[applied]", "k", "a", "b", "n"]);
    assert!(
        !applied(r) && r[1..].iter().all(|(_, v)| v.is_none()),
        "{r:?}"
    );
}

/// `[applied]`, p, c, v.
type BatchRow = (bool, Option<String>, Option<i32>, Option<String>);

/// A conditional batch over two rows of a partition: ScyllaDB answers one row per
/// statement; Cassandra, when it fails, one row per existing conditioned row, and
/// `[applied]` alone when it applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_batch_results_are_shaped_per_flavor() {
    for flavor in [Flavor::Cassandra, Flavor::Scylla] {
        let (_server, s) = setup(flavor).await;
        run(
            &s,
            "CREATE TABLE ks.c (p text, c int, v text, PRIMARY KEY (p, c))",
        )
        .await;
        run(&s, "INSERT INTO ks.c (p, c, v) VALUES ('p', 1, 'one')").await;
        run(&s, "INSERT INTO ks.c (p, c, v) VALUES ('p', 2, 'two')").await;
        let mut b = Batch::new(BatchType::Logged);
        b.append_statement("UPDATE ks.c SET v = 'x' WHERE p = 'p' AND c = 1 IF v = 'one'");
        b.append_statement("UPDATE ks.c SET v = 'y' WHERE p = 'p' AND c = 2 IF v = 'nope'");
        b.append_statement("UPDATE ks.c SET v = 'z' WHERE p = 'p' AND c = 3");
        let rows = s
            .batch(&b, ((), (), ()))
            .await
            .expect("batch")
            .into_rows_result()
            .expect("rows");
        let names: Vec<_> = rows
            .column_specs()
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        assert_eq!(names, ["[applied]", "p", "c", "v"], "{flavor:?}");
        let got: Vec<BatchRow> = rows
            .rows()
            .expect("typed")
            .map(|r| r.expect("row"))
            .collect();
        let row = |c: i32, v: &str| (false, Some("p".to_owned()), Some(c), Some(v.to_owned()));
        let expected = match flavor {
            Flavor::Cassandra => vec![row(1, "one"), row(2, "two")],
            _ => vec![row(1, "one"), row(2, "two"), (false, None, None, None)],
        };
        assert_eq!(got, expected, "{flavor:?}");
        let mut ok = Batch::new(BatchType::Logged);
        ok.append_statement("UPDATE ks.c SET v = 'x' WHERE p = 'p' AND c = 1 IF v = 'one'");
        let rows = s
            .batch(&ok, ((),))
            .await
            .expect("batch")
            .into_rows_result()
            .expect("rows");
        let width = rows.column_specs().len();
        assert_eq!(
            width,
            if flavor == Flavor::Cassandra { 1 } else { 4 },
            "{flavor:?}"
        );
    }
}
