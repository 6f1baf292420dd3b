//! Compound primary keys through the real driver: clustering order, slices, `IN`, `LIMIT`,
//! `ORDER BY`, paging and static columns.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod common;

use common::{fails, int, ints, run, setup, text};
use cql_test_server::{Flavor, ServerOptions};
use futures::TryStreamExt;
use scylla::errors::DbError;
use scylla::statement::unprepared::Statement;

const TABLES: &[&str] = &[
    "CREATE TABLE ks.up (p text, c int, v text, s text static, PRIMARY KEY (p, c))",
    "CREATE TABLE ks.down (p text, c int, v text, PRIMARY KEY (p, c)) WITH CLUSTERING ORDER BY (c DESC)",
    "CREATE TABLE ks.two (p text, a int, b int, v text, PRIMARY KEY (p, a, b))",
];

async fn fill(s: &scylla::client::session::Session, table: &str) {
    for c in 1..=5 {
        run(
            s,
            &format!("INSERT INTO ks.{table} (p, c, v) VALUES ('x', {c}, 'v{c}')"),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_come_in_clustering_order_and_slices_select_ranges() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), TABLES).await;
    fill(&s, "up").await;
    fill(&s, "down").await;
    let q = |t: &str, w: &str| format!("SELECT c FROM ks.{t} WHERE p = 'x'{w}");
    assert_eq!(ints(&run(&s, &q("up", "")).await), [1, 2, 3, 4, 5]);
    assert_eq!(ints(&run(&s, &q("down", "")).await), [5, 4, 3, 2, 1]);
    assert_eq!(ints(&run(&s, &q("up", " AND c > 2")).await), [3, 4, 5]);
    assert_eq!(
        ints(&run(&s, &q("up", " AND c >= 2 AND c < 4")).await),
        [2, 3]
    );
    assert_eq!(ints(&run(&s, &q("down", " AND c > 2")).await), [5, 4, 3]);
    assert_eq!(ints(&run(&s, &q("down", " AND c <= 2")).await), [2, 1]);
    assert_eq!(ints(&run(&s, &q("up", " AND c = 3")).await), [3]);
    assert_eq!(ints(&run(&s, &q("up", " LIMIT 2")).await), [1, 2]);
    assert_eq!(ints(&run(&s, &q("up", " AND c > 1 LIMIT 2")).await), [2, 3]);
    assert_eq!(
        ints(&run(&s, &q("up", " ORDER BY c DESC LIMIT 2")).await),
        [5, 4]
    );
    assert_eq!(
        ints(&run(&s, &q("down", " ORDER BY c ASC")).await),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(
        ints(&run(&s, &q("down", " ORDER BY c DESC LIMIT 1")).await),
        [5]
    );
    let (e, _) = fails(&s, "SELECT c FROM ks.up WHERE p = 'x' AND v = 'v1'").await;
    assert_eq!(e, DbError::Invalid);
    let (e, _) = fails(&s, "SELECT c FROM ks.up WHERE p = 'x' LIMIT 0").await;
    assert_eq!(e, DbError::Invalid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clustering_columns_take_an_equality_prefix_then_a_range() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), TABLES).await;
    for a in 1..=2 {
        for b in 1..=3 {
            run(
                &s,
                &format!("INSERT INTO ks.two (p, a, b, v) VALUES ('x', {a}, {b}, 'v')"),
            )
            .await;
        }
    }
    let rows = run(
        &s,
        "SELECT a, b FROM ks.two WHERE p = 'x' AND a = 2 AND b >= 2",
    )
    .await;
    assert_eq!(rows, vec![vec![int(2), int(2)], vec![int(2), int(3)]]);
    let rows = run(&s, "SELECT b FROM ks.two WHERE p = 'x' AND a > 1").await;
    assert_eq!(ints(&rows), [1, 2, 3]);
    let (e, _) = fails(&s, "SELECT b FROM ks.two WHERE p = 'x' AND b = 1").await;
    assert_eq!(e, DbError::Invalid, "b cannot be restricted without a");
    let (e, _) = fails(&s, "SELECT b FROM ks.two WHERE p = 'x' AND a > 1 AND b = 1").await;
    assert_eq!(e, DbError::Invalid, "nothing after a range");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_on_the_partition_key_reads_several_partitions() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), TABLES).await;
    for p in ["x", "y", "z"] {
        run(
            &s,
            &format!("INSERT INTO ks.up (p, c, v) VALUES ('{p}', 1, '{p}')"),
        )
        .await;
    }
    let mut got: Vec<_> = run(&s, "SELECT v FROM ks.up WHERE p IN ('x', 'z')")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    got.sort_by_key(|v| format!("{v:?}"));
    assert_eq!(got, vec![text("x"), text("z")]);
    let prepared = s
        .prepare("SELECT v FROM ks.up WHERE p IN (?, ?) AND c = ?")
        .await
        .expect("prepare");
    let rows = s
        .execute_unpaged(&prepared, ("y", "nope", 1))
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    assert_eq!(rows.rows_num(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_pages_through_a_partition() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), TABLES).await;
    for c in 0..25 {
        run(
            &s,
            &format!("INSERT INTO ks.up (p, c, v) VALUES ('x', {c}, 'v')"),
        )
        .await;
    }
    let mut statement = Statement::new("SELECT c FROM ks.up WHERE p = 'x'");
    statement.set_page_size(10);
    // Page by page: the driver's paging state carries the position.
    let (page, state) = s
        .query_single_page(
            statement.clone(),
            (),
            scylla::response::PagingState::start(),
        )
        .await
        .expect("first page");
    let first: Vec<i32> = page
        .into_rows_result()
        .unwrap()
        .rows::<(i32,)>()
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(first, (0..10).collect::<Vec<_>>());
    let scylla::response::PagingStateResponse::HasMorePages { state } = state else {
        panic!("a full page must say there is more");
    };
    let (page, _) = s
        .query_single_page(statement.clone(), (), state)
        .await
        .expect("second page");
    let second: Vec<i32> = page
        .into_rows_result()
        .unwrap()
        .rows::<(i32,)>()
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(second, (10..20).collect::<Vec<_>>());
    // The whole stream, across pages, with a LIMIT that spans pages.
    let mut limited = Statement::new("SELECT c FROM ks.up WHERE p = 'x' LIMIT 13");
    limited.set_page_size(5);
    let all: Vec<(i32,)> = s
        .query_iter(limited, ())
        .await
        .expect("pager")
        .rows_stream::<(i32,)>()
        .unwrap()
        .try_collect()
        .await
        .expect("rows");
    assert_eq!(
        all.into_iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..13).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_columns_are_shared_by_the_partition() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), TABLES).await;
    run(
        &s,
        "INSERT INTO ks.up (p, c, v, s) VALUES ('x', 1, 'a', 'shared')",
    )
    .await;
    run(&s, "INSERT INTO ks.up (p, c, v) VALUES ('x', 2, 'b')").await;
    let rows = run(&s, "SELECT c, s FROM ks.up WHERE p = 'x'").await;
    assert_eq!(
        rows,
        vec![vec![int(1), text("shared")], vec![int(2), text("shared")]]
    );
    run(&s, "UPDATE ks.up SET s = 'new' WHERE p = 'x'").await;
    run(&s, "DELETE FROM ks.up WHERE p = 'x' AND c >= 1").await;
    // No live row left: one row with the static value and null clustering.
    let rows = run(&s, "SELECT c, v, s FROM ks.up WHERE p = 'x'").await;
    assert_eq!(rows, vec![vec![None, None, text("new")]]);
    let (e, _) = fails(
        &s,
        "CREATE TABLE ks.bad (p text PRIMARY KEY, s text static)",
    )
    .await;
    assert_eq!(e, DbError::Invalid);
}
