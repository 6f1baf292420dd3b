//! Tombstones as Cassandra keeps and counts them: row, range, cell and expired-TTL
//! tombstones, `gc_grace_seconds`, and the warn and failure thresholds.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod common;

use std::time::Duration;

use common::{ints, run, setup};
use cql_test_server::{Flavor, ServerOptions};
use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::statement::batch::{Batch, BatchType};

const TABLE: &str = "CREATE TABLE ks.q (p text, id int, v text, w text, PRIMARY KEY (p, id))";

/// The classic queue anti-pattern: 5000 items in one partition, the first 4999 consumed
/// (deleted), and the consumer's `LIMIT 1` read walks every tombstone to find the live one.
async fn queue_of_5000_with_4999_consumed(s: &Session) {
    let insert = s
        .prepare("INSERT INTO ks.q (p, id, v) VALUES ('queue', ?, 'job')")
        .await
        .unwrap();
    let delete = s
        .prepare("DELETE FROM ks.q WHERE p = 'queue' AND id = ?")
        .await
        .unwrap();
    for chunk in (0..5000).collect::<Vec<i32>>().chunks(500) {
        let mut batch = Batch::new(BatchType::Unlogged);
        let values: Vec<(i32,)> = chunk.iter().map(|i| (*i,)).collect();
        for _ in chunk {
            batch.append_statement(insert.clone());
        }
        s.batch(&batch, values).await.unwrap();
    }
    for chunk in (0..4999).collect::<Vec<i32>>().chunks(500) {
        let mut batch = Batch::new(BatchType::Unlogged);
        let values: Vec<(i32,)> = chunk.iter().map(|i| (*i,)).collect();
        for _ in chunk {
            batch.append_statement(delete.clone());
        }
        s.batch(&batch, values).await.unwrap();
    }
}

const HEAD: &str = "SELECT id FROM ks.q WHERE p = 'queue' LIMIT 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_read_walks_every_consumed_item_and_warns() {
    let (server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    queue_of_5000_with_4999_consumed(&s).await;
    assert_eq!(ints(&run(&s, HEAD).await), [4999]);
    let stats = server.tombstones();
    assert_eq!(stats.last(), Some(4999));
    assert_eq!(stats.max, 4999);
    assert_eq!(
        stats.warnings,
        [format!(
            "Read 1 live rows and 4999 tombstone cells for query {HEAD} (see tombstone_warn_threshold)"
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_failure_threshold_the_read_fails_as_cassandra_fails_it() {
    let options = ServerOptions::lenient(Flavor::Cassandra).with_tombstone_thresholds(100, 1000);
    let (server, s) = setup(options, &[TABLE]).await;
    queue_of_5000_with_4999_consumed(&s).await;
    match s.query_unpaged(HEAD, ()).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::ReadFailure { numfailures, .. },
            message,
        ))) => {
            assert_eq!(numfailures, 1);
            assert!(message.contains("TOMBSTONES"), "{message}");
        }
        other => panic!("the read should fail with ReadFailure: {other:?}"),
    }
    assert_eq!(server.tombstones().failures, 1);
    // A read that starts past the tombstones walks none.
    assert_eq!(
        ints(
            &run(
                &s,
                "SELECT id FROM ks.q WHERE p = 'queue' AND id > 4998 LIMIT 1"
            )
            .await
        ),
        [4999]
    );
    assert_eq!(server.tombstones().last(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_tombstone_is_counted() {
    let (server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    for id in 0..10 {
        run(
            &s,
            &format!("INSERT INTO ks.q (p, id, v, w) VALUES ('k', {id}, 'a', 'b')"),
        )
        .await;
    }
    let all = "SELECT id FROM ks.q WHERE p = 'k'";
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(0));
    // A cell tombstone, and a null write (also a cell tombstone).
    run(&s, "DELETE v FROM ks.q WHERE p = 'k' AND id = 0").await;
    run(&s, "UPDATE ks.q SET w = null WHERE p = 'k' AND id = 1").await;
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(2));
    // A row tombstone.
    run(&s, "DELETE FROM ks.q WHERE p = 'k' AND id = 2").await;
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(3));
    // A range tombstone: two markers; the rows under it are gone.
    run(&s, "DELETE FROM ks.q WHERE p = 'k' AND id >= 5 AND id < 8").await;
    assert_eq!(ints(&run(&s, all).await), [0, 1, 3, 4, 8, 9]);
    assert_eq!(server.tombstones().last(), Some(5));
    // Expired TTL cells count once the TTL ran out.
    run(
        &s,
        "UPDATE ks.q USING TTL 5 SET v = 'x' WHERE p = 'k' AND id = 9",
    )
    .await;
    // (TTLs count whole seconds of real time too: 5 s, not 1, so that it cannot run out
    // before this read.)
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(5));
    server.clock().advance(Duration::from_secs(6));
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(6));
    // A slice that stops before the tombstones does not walk them.
    run(&s, "SELECT id FROM ks.q WHERE p = 'k' AND id > 8").await;
    assert_eq!(
        server.tombstones().last(),
        Some(1),
        "only the expired cell of row 9"
    );
    let stats = server.tombstones();
    assert_eq!(stats.max, 6);
    assert_eq!(stats.total, stats.reads.iter().map(|r| r.1).sum::<u64>());
    assert!(stats.warnings.is_empty());
}

/// A range tombstone merges the row tombstones under it, and a newer one covering older ones
/// merges those too, as Cassandra merges its range tombstones when reads merge their
/// sources: a read then walks two markers for the whole stretch, not a tombstone per row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_covering_range_tombstone_is_walked_once() {
    let (server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    for id in 0..100 {
        run(
            &s,
            &format!("INSERT INTO ks.q (p, id, v, w) VALUES ('k', {id}, 'a', 'b')"),
        )
        .await;
    }
    for id in 0..99 {
        run(&s, &format!("DELETE FROM ks.q WHERE p = 'k' AND id = {id}")).await;
    }
    let all = "SELECT id FROM ks.q WHERE p = 'k'";
    assert_eq!(ints(&run(&s, all).await), [99]);
    assert_eq!(server.tombstones().last(), Some(99), "a row tombstone each");
    run(&s, "DELETE FROM ks.q WHERE p = 'k' AND id > 10 AND id < 50").await;
    run(&s, all).await;
    assert_eq!(
        server.tombstones().last(),
        Some(99 - 39 + 2),
        "39 rows merged, 2 markers"
    );
    // A newer deletion covering the first: one range met.
    run(&s, "DELETE FROM ks.q WHERE p = 'k' AND id >= 0 AND id < 99").await;
    assert_eq!(ints(&run(&s, all).await), [99]);
    assert_eq!(
        server.tombstones().last(),
        Some(2),
        "one range, its two markers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_stay_for_gc_grace_seconds_of_the_server_clock() {
    let (server, s) = setup(
        ServerOptions::lenient(Flavor::Cassandra),
        &["CREATE TABLE ks.g (p text, id int, v text, PRIMARY KEY (p, id)) WITH gc_grace_seconds = 100"],
    )
    .await;
    for id in 0..3 {
        run(
            &s,
            &format!("INSERT INTO ks.g (p, id, v) VALUES ('k', {id}, 'a')"),
        )
        .await;
        run(&s, &format!("DELETE FROM ks.g WHERE p = 'k' AND id = {id}")).await;
    }
    let all = "SELECT id FROM ks.g WHERE p = 'k'";
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(3));
    server.clock().advance(Duration::from_secs(99));
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(3));
    server.clock().advance(Duration::from_secs(2));
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_partition_hides_older_writes_only() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    run(
        &s,
        "INSERT INTO ks.q (p, id, v) VALUES ('k', 1, 'a') USING TIMESTAMP 10",
    )
    .await;
    run(&s, "DELETE FROM ks.q USING TIMESTAMP 20 WHERE p = 'k'").await;
    run(
        &s,
        "INSERT INTO ks.q (p, id, v) VALUES ('k', 2, 'b') USING TIMESTAMP 15",
    )
    .await;
    assert!(
        run(&s, "SELECT id FROM ks.q WHERE p = 'k'")
            .await
            .is_empty()
    );
    run(
        &s,
        "INSERT INTO ks.q (p, id, v) VALUES ('k', 3, 'c') USING TIMESTAMP 25",
    )
    .await;
    assert_eq!(
        ints(&run(&s, "SELECT id FROM ks.q WHERE p = 'k'").await),
        [3]
    );
}

/// A purged deletion takes what it shadowed with it (Cassandra merges before purging): a
/// write older than the deletion must not come back once the tombstone is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_shadowed_write_comes_back_after_the_purge() {
    let (server, s) = setup(
        ServerOptions::lenient(Flavor::Cassandra),
        &["CREATE TABLE ks.z (p text, id int, v text, PRIMARY KEY (p, id)) WITH gc_grace_seconds = 10"],
    )
    .await;
    run(&s, "DELETE FROM ks.z USING TIMESTAMP 20 WHERE p = 'k'").await;
    run(
        &s,
        "INSERT INTO ks.z (p, id, v) VALUES ('k', 1, 'old') USING TIMESTAMP 15",
    )
    .await;
    run(
        &s,
        "DELETE FROM ks.z USING TIMESTAMP 40 WHERE p = 'k' AND id >= 5",
    )
    .await;
    run(
        &s,
        "INSERT INTO ks.z (p, id, v) VALUES ('k', 6, 'old') USING TIMESTAMP 30",
    )
    .await;
    run(
        &s,
        "DELETE FROM ks.z USING TIMESTAMP 60 WHERE p = 'k' AND id = 8",
    )
    .await;
    run(
        &s,
        "INSERT INTO ks.z (p, id, v) VALUES ('k', 8, 'old') USING TIMESTAMP 50",
    )
    .await;
    let all = "SELECT id FROM ks.z WHERE p = 'k'";
    assert!(run(&s, all).await.is_empty());
    server.clock().advance(Duration::from_secs(12));
    assert!(run(&s, all).await.is_empty(), "zombie rows after the purge");
    assert!(run(&s, all).await.is_empty());
}

/// Cassandra counts rows and range markers, not the partition tombstone; a row or range
/// deletion shadowed by a newer partition deletion is merged away and not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_tombstone_and_what_it_shadows_are_not_counted() {
    let (server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    let all = "SELECT id FROM ks.q WHERE p = 'k'";
    run(
        &s,
        "DELETE FROM ks.q USING TIMESTAMP 10 WHERE p = 'k' AND id = 1",
    )
    .await;
    run(
        &s,
        "DELETE FROM ks.q USING TIMESTAMP 10 WHERE p = 'k' AND id > 5",
    )
    .await;
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(3), "a row and a range");
    run(&s, "DELETE FROM ks.q USING TIMESTAMP 20 WHERE p = 'k'").await;
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(0));
    run(
        &s,
        "DELETE FROM ks.q USING TIMESTAMP 30 WHERE p = 'k' AND id = 2",
    )
    .await;
    run(&s, all).await;
    assert_eq!(server.tombstones().last(), Some(1), "a newer row deletion");
}

/// Over the warning threshold the client gets Cassandra's warning in the response; over
/// the failure threshold the `ReadFailure` carries the request's consistency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_sees_the_warning_and_the_failure_at_its_level() {
    let options = ServerOptions::lenient(Flavor::Cassandra).with_tombstone_thresholds(2, 4);
    let (_server, s) = setup(options, &[TABLE]).await;
    for id in 0..4 {
        run(&s, &format!("DELETE FROM ks.q WHERE p = 'k' AND id = {id}")).await;
    }
    let read = "SELECT id FROM ks.q WHERE p = 'k'";
    let result = s.query_unpaged(read, ()).await.unwrap();
    let warnings: Vec<&str> = result.warnings().collect();
    assert_eq!(
        warnings,
        [format!(
            "Read 0 live rows and 4 tombstone cells for query {read} (see tombstone_warn_threshold)"
        )]
    );
    run(&s, "DELETE FROM ks.q WHERE p = 'k' AND id = 9").await;
    let mut quorum = scylla::statement::unprepared::Statement::new(read);
    quorum.set_consistency(scylla::statement::Consistency::LocalQuorum);
    match s.query_unpaged(quorum, ()).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::ReadFailure { consistency, .. },
            message,
        ))) => {
            assert_eq!(consistency, scylla::statement::Consistency::LocalQuorum);
            assert!(
                message.contains("READ_TOO_MANY_TOMBSTONES from /"),
                "{message}"
            );
        }
        other => panic!("the read should fail with ReadFailure: {other:?}"),
    }
}
