//! Paxos per partition: rounds and contention counted, the contention budget, SERIAL reads,
//! and ScyllaDB's refusal of LWTs on tablets keyspaces. The contention model itself (rounds
//! that duel, back off and time out) is in `paxos_contention.rs`.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod common;

use std::time::Duration;

use common::{fails, run, setup};
use cql_test_server::{Flavor, ServerOptions};
use scylla::errors::{DbError, ExecutionError, RequestAttemptError, WriteType};
use scylla::statement::Consistency;
use scylla::statement::unprepared::Statement;

const TABLE: &str = "CREATE TABLE ks.t (k text PRIMARY KEY, v int)";

fn part(k: &str) -> (String, String, String) {
    ("ks".into(), "t".into(), k.into())
}

/// Without the contention model: every LWT is answered at once, and one that starts within
/// `paxos_round` of another of its partition counts as contended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_and_contention_are_counted_per_partition() {
    let options = ServerOptions::lenient(Flavor::Cassandra)
        .with_paxos_contention(false)
        .with_paxos_round(Duration::from_secs(3600));
    let (server, s) = setup(options, &[TABLE]).await;
    run(&s, "UPDATE ks.t SET v = 1 WHERE k = 'hot' IF v = null").await;
    run(&s, "UPDATE ks.t SET v = 2 WHERE k = 'hot' IF v = 1").await;
    run(&s, "UPDATE ks.t SET v = 1 WHERE k = 'cold' IF v = null").await;
    let mut serial = Statement::new("SELECT v FROM ks.t WHERE k = 'hot'");
    serial.set_consistency(Consistency::Serial);
    s.query_unpaged(serial, ()).await.unwrap();
    run(&s, "SELECT v FROM ks.t WHERE k = 'hot'").await; // plain read: no round
    let stats = server.paxos();
    assert_eq!(stats.rounds[&part("hot")], 3);
    assert_eq!(stats.rounds[&part("cold")], 1);
    // Every round on `hot` after the first started while an earlier one held the partition.
    assert_eq!(stats.contended[&part("hot")], 2);
    assert_eq!(stats.contended.get(&part("cold")), None);
    assert_eq!(stats.total_rounds(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_contention_budget_a_round_times_out_without_applying() {
    let options = ServerOptions::lenient(Flavor::Cassandra)
        .with_paxos_contention(false)
        .with_paxos_round(Duration::from_secs(3600))
        .with_cas_contention_budget(Some(1));
    let (server, s) = setup(options, &[TABLE]).await;
    run(&s, "UPDATE ks.t SET v = 1 WHERE k = 'hot' IF v = null").await;
    match s
        .query_unpaged("UPDATE ks.t SET v = 2 WHERE k = 'hot' IF v = 1", ())
        .await
    {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::WriteTimeout { write_type, .. },
            _,
        ))) => assert_eq!(write_type, WriteType::Cas),
        other => panic!("a contended round should time out: {other:?}"),
    }
    assert_eq!(server.paxos().timeouts, 1);
    let rows = run(&s, "SELECT v FROM ks.t WHERE k = 'hot'").await;
    assert_eq!(
        rows[0][0],
        common::int(1),
        "the timed-out round did not apply"
    );
    run(&s, "UPDATE ks.t SET v = 1 WHERE k = 'other' IF v = null").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_refuses_lwts_on_tablets_keyspaces_only() {
    let (server, s) = setup(ServerOptions::lenient(Flavor::Scylla), &[]).await;
    for ddl in [
        "CREATE KEYSPACE tab WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1}",
        "CREATE KEYSPACE vn WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1} AND tablets = {'enabled': false}",
        "CREATE TABLE tab.t (k text PRIMARY KEY, v int)",
        "CREATE TABLE vn.t (k text PRIMARY KEY, v int)",
    ] {
        run(&s, ddl).await;
    }
    let (error, message) = fails(&s, "UPDATE tab.t SET v = 1 WHERE k = 'a' IF v = null").await;
    assert_eq!(error, DbError::Invalid);
    assert!(
        message.contains("LWT is not yet supported with tablets"),
        "{message}"
    );
    run(&s, "UPDATE tab.t SET v = 1 WHERE k = 'a'").await; // plain writes work
    run(&s, "UPDATE vn.t SET v = 1 WHERE k = 'a' IF v = null").await;
    // What a client reads to tell: `initial_tablets` is set for tablets keyspaces.
    let rows = run(
        &s,
        "SELECT keyspace_name, initial_tablets FROM system_schema.scylla_keyspaces",
    )
    .await;
    assert!(
        rows.contains(&vec![common::text("tab"), common::int(0)]),
        "{rows:?}"
    );
    assert!(rows.contains(&vec![common::text("vn"), None]), "{rows:?}");
    assert_eq!(server.paxos().total_rounds(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_knows_no_tablets() {
    let (_server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[]).await;
    let (error, _) = fails(
        &s,
        "CREATE KEYSPACE x WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1} AND tablets = {'enabled': false}",
    )
    .await;
    assert_eq!(error, DbError::SyntaxError);
    let (error, _) = fails(
        &s,
        "SELECT initial_tablets FROM system_schema.scylla_keyspaces",
    )
    .await;
    assert_eq!(error, DbError::Invalid);
}

/// A contention timeout carries the serial level the request asked for; by default it never
/// applies, and with `cas_timeout_applies` it may have (an unknown outcome, as on a cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contention_timeout_names_the_serial_level_and_may_have_applied() {
    for applies in [false, true] {
        let options = ServerOptions::lenient(Flavor::Cassandra)
            .with_paxos_contention(false)
            .with_paxos_round(Duration::from_secs(3600))
            .with_cas_contention_budget(Some(1))
            .with_cas_timeout_applies(applies);
        let (_server, s) = setup(options, &[TABLE]).await;
        run(&s, "UPDATE ks.t SET v = 1 WHERE k = 'hot' IF v = null").await;
        let mut lwt = Statement::new("UPDATE ks.t SET v = 2 WHERE k = 'hot' IF v = 1");
        lwt.set_serial_consistency(Some(scylla::statement::SerialConsistency::LocalSerial));
        match s.query_unpaged(lwt, ()).await {
            Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
                DbError::WriteTimeout { consistency, .. },
                _,
            ))) => assert_eq!(consistency, Consistency::LocalSerial),
            other => panic!("a contended round should time out: {other:?}"),
        }
        let rows = run(&s, "SELECT v FROM ks.t WHERE k = 'hot'").await;
        let expected = if applies { 2 } else { 1 };
        assert_eq!(rows[0][0], common::int(expected), "applies: {applies}");
    }
}

/// ScyllaDB 2025.4 and later accept LWTs on tablets keyspaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_2025_4_accepts_lwts_on_tablets() {
    let options = ServerOptions::lenient(Flavor::Scylla).with_lwt_on_tablets(true);
    let (server, s) = setup(options, &[]).await;
    for ddl in [
        "CREATE KEYSPACE tab WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1}",
        "CREATE TABLE tab.t (k text PRIMARY KEY, v int)",
    ] {
        run(&s, ddl).await;
    }
    let rows = run(
        &s,
        "SELECT initial_tablets FROM system_schema.scylla_keyspaces WHERE keyspace_name = 'tab'",
    )
    .await;
    assert_eq!(rows, vec![vec![common::int(0)]], "a tablets keyspace");
    run(&s, "UPDATE tab.t SET v = 1 WHERE k = 'a' IF v = null").await;
    assert_eq!(server.paxos().total_rounds(), 1);
}
