//! The Paxos contention model (`ServerOptions::paxos_contention`, on for Cassandra): LWTs and
//! SERIAL reads of one partition duel as on a Cassandra 4.0 node, a pre-empted round backs off
//! and retries, and past the contention timeout the request is answered with a timeout.
//!
//! Rounds here last 100 ms or more, far above what scheduling on a loaded machine adds, so
//! requests sent together overlap, and back-offs are ten times longer, so that duels end as
//! they do on a node (1 ms rounds, back-offs below 100 ms); the assertions are counts and
//! lower bounds on time only.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod common;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{int, run, setup};
use cql_test_server::{CqlTestServer, Flavor, PaxosStats, ServerOptions};
use futures::future::join_all;
use scylla::client::PoolSize;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError, WriteType};
use scylla::response::query_result::QueryResult;
use scylla::statement::unprepared::Statement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::CqlValue;

const TABLE: &str = "CREATE TABLE ks.t (k text PRIMARY KEY, v int)";
/// Requests sent together.
const N: usize = 6;
/// Long enough that requests sent together overlap, even on a loaded machine.
const ROUND: Duration = Duration::from_millis(100);
/// Well above the round: with back-offs shorter than a round, the retries of two proposers
/// keep pre-empting each other.
const BACKOFF: Duration = Duration::from_secs(1);

fn part(k: &str) -> (String, String, String) {
    ("ks".into(), "t".into(), k.into())
}

/// Rounds of `ROUND`; nobody gives up, so every request eventually wins a round.
fn patient() -> ServerOptions {
    ServerOptions::lenient(Flavor::Cassandra)
        .with_paxos_round(ROUND)
        .with_paxos_backoff(BACKOFF)
        .with_cas_contention_timeout(Duration::from_secs(20))
}

/// Sends `N` conditional writes at once, the `i`-th on partition `key(i)`; returns how long
/// until the last was answered, and how many applied.
async fn lwts_together(s: &Session, key: impl Fn(usize) -> String) -> (Duration, usize) {
    let started = Instant::now();
    let answers = join_all((0..N).map(|i| {
        let cql = format!("UPDATE ks.t SET v = {i} WHERE k = '{}' IF v = null", key(i));
        async move { run(s, &cql).await }
    }))
    .await;
    let applied = answers
        .iter()
        .filter(|rows| rows[0][0] == Some(CqlValue::Boolean(true)))
        .count();
    (started.elapsed(), applied)
}

fn count(map: &std::collections::HashMap<(String, String, String), u64>, k: &str) -> u64 {
    map.get(&part(k)).copied().unwrap_or(0)
}

/// Every round of an operation but its last was pre-empted, and no operation gave up: each
/// pre-empted round was retried.
fn assert_every_contended_round_was_retried(stats: &PaxosStats) {
    assert_eq!(stats.timeouts, 0, "{stats:?}");
    assert_eq!(
        stats.total_attempts(),
        stats.total_rounds() + stats.total_contended(),
        "{stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lwts_on_one_partition_contend_and_take_turns() {
    let (server, s) = setup(patient(), &[TABLE]).await;
    let (elapsed, applied) = lwts_together(&s, |_| "hot".into()).await;
    let stats = server.paxos();
    assert_eq!(count(&stats.rounds, "hot"), N as u64, "{stats:?}");
    assert!(count(&stats.contended, "hot") >= 1, "{stats:?}");
    assert_every_contended_round_was_retried(&stats);
    assert_eq!(applied, 1, "one condition held, at the winner's turn");
    // A round wins only if no other round of its partition prepared while it was in flight,
    // so the winning rounds of one partition never overlap.
    assert!(
        elapsed >= ROUND * N as u32,
        "{N} LWTs on one partition in {elapsed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lwts_on_different_partitions_do_not_contend() {
    let (server, s) = setup(patient(), &[TABLE]).await;
    let (_, applied) = lwts_together(&s, |i| format!("k{i}")).await;
    let stats = server.paxos();
    assert_eq!(stats.total_rounds(), N as u64, "{stats:?}");
    assert_eq!(stats.total_attempts(), N as u64, "{stats:?}");
    assert_eq!(stats.total_contended(), 0, "{stats:?}");
    assert_eq!(stats.timeouts, 0);
    assert_eq!(applied, N);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_proposer_is_never_contended() {
    // The default model: 1 ms rounds, 100 ms back-off, 1 s timeout.
    let (server, s) = setup(ServerOptions::lenient(Flavor::Cassandra), &[TABLE]).await;
    let mut serial = Statement::new("SELECT v FROM ks.t WHERE k = 'hot'");
    serial.set_consistency(Consistency::Serial);
    for i in 0..20 {
        run(
            &s,
            &format!("UPDATE ks.t SET v = {i} WHERE k = 'hot' IF EXISTS"),
        )
        .await;
        run(
            &s,
            &format!("INSERT INTO ks.t (k, v) VALUES ('hot', {i}) IF NOT EXISTS"),
        )
        .await;
        s.query_unpaged(serial.clone(), ()).await.unwrap();
    }
    let stats = server.paxos();
    assert_eq!(count(&stats.rounds, "hot"), 60, "{stats:?}");
    assert_eq!(count(&stats.attempts, "hot"), 60, "{stats:?}");
    assert_eq!(stats.total_contended(), 0, "{stats:?}");
    assert_eq!(stats.timeouts, 0);
}

/// Sends `target`, waits until its first round has prepared, then sends `rival` on the same
/// partition, whose newer ballot pre-empts that round; returns both answers.
async fn pre_empt(
    server: &CqlTestServer,
    s: &Session,
    target: Statement,
    rival: Statement,
) -> (
    Result<QueryResult, ExecutionError>,
    Result<QueryResult, ExecutionError>,
) {
    let before = server.paxos().total_attempts();
    let rival = async {
        while server.paxos().total_attempts() == before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        s.query_unpaged(rival, ()).await
    };
    tokio::join!(s.query_unpaged(target, ()), rival)
}

/// Rounds of a second, and a contention timeout far shorter: a request whose first round is
/// pre-empted gives up at its next try.
fn impatient(applies: bool) -> ServerOptions {
    ServerOptions::lenient(Flavor::Cassandra)
        .with_paxos_round(Duration::from_secs(1))
        .with_cas_contention_timeout(Duration::from_millis(100))
        .with_cas_timeout_applies(applies)
}

/// A CAS write timeout at the request's serial level, and the write did not apply; with
/// `cas_timeout_applies` the same timeout may have applied (an unknown outcome to the client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_contention_timeout_an_lwt_answers_a_cas_write_timeout() {
    for applies in [false, true] {
        let (server, s) = setup(impatient(applies), &[TABLE]).await;
        run(&s, "UPDATE ks.t SET v = 1 WHERE k = 'hot'").await;
        let mut lwt = Statement::new("UPDATE ks.t SET v = 2 WHERE k = 'hot' IF v = 1");
        lwt.set_serial_consistency(Some(SerialConsistency::LocalSerial));
        let mut serial = Statement::new("SELECT v FROM ks.t WHERE k = 'hot'");
        serial.set_consistency(Consistency::Serial);
        let (answer, read) = pre_empt(&server, &s, lwt, serial).await;
        match answer {
            Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
                DbError::WriteTimeout {
                    write_type,
                    consistency,
                    ..
                },
                message,
            ))) => {
                assert_eq!(write_type, WriteType::Cas);
                assert_eq!(consistency, Consistency::LocalSerial);
                assert!(message.contains("CAS operation timed out"), "{message}");
            }
            other => panic!("a pre-empted LWT past its timeout should time out: {other:?}"),
        }
        let rows = read.unwrap().into_rows_result().unwrap();
        let (seen,): (i32,) = rows.single_row().unwrap();
        if !applies {
            assert_eq!(seen, 1, "the timed-out write never applied");
        }
        let stats = server.paxos();
        assert_eq!(stats.timeouts, 1, "{stats:?}");
        assert_eq!(count(&stats.contended, "hot"), 1, "{stats:?}");
        assert_eq!(count(&stats.attempts, "hot"), 2, "{stats:?}");
        let rows = run(&s, "SELECT v FROM ks.t WHERE k = 'hot'").await;
        let expected = if applies { 2 } else { 1 };
        assert_eq!(rows[0][0], int(expected), "applies: {applies}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_contention_timeout_a_serial_read_answers_a_read_timeout() {
    let (server, s) = setup(impatient(false), &[TABLE]).await;
    let mut serial = Statement::new("SELECT v FROM ks.t WHERE k = 'hot'");
    serial.set_consistency(Consistency::LocalSerial);
    let lwt = Statement::new("UPDATE ks.t SET v = 1 WHERE k = 'hot' IF v = null");
    let (answer, write) = pre_empt(&server, &s, serial, lwt).await;
    match answer {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::ReadTimeout { consistency, .. },
            _,
        ))) => assert_eq!(consistency, Consistency::LocalSerial),
        other => panic!("a pre-empted SERIAL read past its timeout should time out: {other:?}"),
    }
    write.unwrap();
    assert_eq!(server.paxos().timeouts, 1);
}

/// The driver multiplexes requests on a connection: while an LWT waits for its round, the
/// other requests of its connection are answered, and the engine serves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_lwt_holds_up_no_other_request_of_its_connection() {
    let round = Duration::from_secs(3);
    let options = ServerOptions::lenient(Flavor::Cassandra).with_paxos_round(round);
    let (server, _) = setup(options, &[TABLE]).await;
    let s = Arc::new(
        SessionBuilder::new()
            .known_node_addr(server.address())
            .pool_size(PoolSize::PerHost(NonZeroUsize::new(1).unwrap()))
            .fetch_schema_metadata(false)
            .fetch_full_schema_metadata(false)
            .build()
            .await
            .unwrap(),
    );
    let started = Instant::now();
    let waiting = {
        let s = Arc::clone(&s);
        tokio::spawn(async move {
            run(&s, "UPDATE ks.t SET v = 1 WHERE k = 'hot' IF v = null").await;
        })
    };
    while server.paxos().total_attempts() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    run(&s, "UPDATE ks.t SET v = 7 WHERE k = 'cold'").await;
    let rows = run(&s, "SELECT v FROM ks.t WHERE k = 'cold'").await;
    assert_eq!(rows[0][0], int(7));
    let other_requests_done = started.elapsed();
    assert!(
        !waiting.is_finished() && other_requests_done < round,
        "answered after {other_requests_done:?}, while the LWT's round of {round:?} ran"
    );
    waiting.await.unwrap();
    assert!(started.elapsed() >= round);
}
