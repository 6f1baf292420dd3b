//! The work queue's statements on the strict CQL test server: each one is known and
//! exercised by a plain workload, and a statement altered without teaching the server is
//! refused, naming it.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::scylla::cql;
use cql_workqueue::store::{EntryKind, IndexEntry};
use cql_workqueue::{Enqueued, ItemId, NewItem, QueueConfig, WallClock, WorkQueue};
use integration_tests::backend::Backend;
use integration_tests::conformance::patient_config;
use integration_tests::conformance::queue::{queue, queue_config};
use integration_tests::wire_backend::{WireBackend, register_queue};
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_queue_statement_is_known_and_exercised() {
    let b = WireBackend::start(Flavor::Cassandra).await;
    let q = queue(&b, "all");
    q.enqueue("one").await.expect("enqueue");
    q.enqueue("two").await.expect("enqueue");
    // A lost claim answer is resolved by a SERIAL read.
    b.inject_queue(
        Some(QueueOp::Claim),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let job = q.claim("w").await.expect("claim").expect("item");
    // Held past a renew interval: heartbeats.
    tokio::time::sleep(queue_config().timing.renew_period + Duration::from_millis(500)).await;
    let failed = job.id().clone();
    job.discard("boom").await.expect("discard");
    assert_eq!(q.dead_letters().await.expect("dead letters").len(), 1);
    assert!(q.requeue_dead(&failed).await.expect("requeue"));
    // A claim answered after its deadline is undone (a patient client waits for the
    // answer; the default request timeout would make it a lost answer instead).
    let patient = WorkQueue::new(
        b.queue_store().expect("store"),
        "all",
        QueueConfig {
            timing: patient_config(),
            ..queue_config()
        },
    )
    .expect("queue");
    b.inject_queue(
        Some(QueueOp::Claim),
        Fault::Latency(patient_config().renew_deadline() + Duration::from_millis(500)),
        Times::Next(1),
    );
    let _ = patient.claim("w").await.expect("claim");
    let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut purged = false;
    loop {
        assert!(
            tokio::time::Instant::now() < give_up,
            "the requeued item never came back"
        );
        let Some(job) = q.claim("w").await.expect("claim") else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        if job.id() == &failed {
            job.complete().await.expect("complete");
            break;
        }
        let other = job.id().clone();
        job.discard("poison").await.expect("discard");
        assert!(q.purge_dead(&other).await.expect("purge"));
        purged = true;
    }
    if !purged {
        let job = loop {
            assert!(
                tokio::time::Instant::now() < give_up,
                "the second item never came back"
            );
            if let Some(job) = q.claim("w").await.expect("claim") {
                break job;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let other = job.id().clone();
        job.discard("poison").await.expect("discard");
        assert!(q.purge_dead(&other).await.expect("purge"));
    }
    // A delayed item far ahead records its bucket; stats read the bucket directory.
    let far = std::time::SystemTime::now() + Duration::from_secs(86_400);
    q.enqueue_at("tomorrow", Some(far)).await.expect("enqueue");
    assert_eq!(q.stats().await.expect("stats").scheduled, 1);
    q.items().await.expect("items");
    // A unique job whose done window (1 s) is over starts again on its row.
    let short = WorkQueue::new(
        b.queue_store().expect("store"),
        "unique",
        QueueConfig {
            done_retention: Duration::from_secs(1),
            ..queue_config()
        },
    )
    .expect("queue");
    let nightly = || NewItem::text("nightly").unique("nightly");
    short.enqueue_item(nightly()).await.expect("enqueue");
    let job = loop {
        if let Some(job) = short.claim("w").await.expect("claim") {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    job.complete().await.expect("complete");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(matches!(
        short.enqueue_item(nightly()).await.expect("enqueue"),
        Enqueued::New(_)
    ));
    // A snooze: a reschedule that gives its attempt back.
    let snoozed =
        WorkQueue::new(b.queue_store().expect("store"), "snoozed", queue_config()).expect("queue");
    snoozed.enqueue("later").await.expect("enqueue");
    let job = loop {
        if let Some(job) = snoozed.claim("w").await.expect("claim") {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    job.snooze(Duration::from_secs(60)).await.expect("snooze");
    // The bakery claim mode's plain item rows.
    let plain = WorkQueue::new(
        b.queue_store().expect("store"),
        "plain",
        QueueConfig {
            claim_mode: cql_workqueue::ClaimMode::Bakery,
            ..queue_config()
        },
    )
    .expect("queue");
    plain.enqueue("plain").await.expect("enqueue");
    let job = loop {
        if let Some(job) = plain.claim("w").await.expect("claim") {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    job.complete().await.expect("complete");
    // A rescan once the processed items' check entries are closed (a claim TTL later)
    // deletes their stretch as one range.
    let dense =
        WorkQueue::new(b.queue_store().expect("store"), "dense", queue_config()).expect("queue");
    let batch = (0..300).map(|n| NewItem::text(&format!("dense {n}")));
    for result in dense.enqueue_batch(batch).await {
        result.expect("enqueue");
    }
    while let Some(job) = dense.claim("w").await.expect("claim") {
        job.complete().await.expect("complete");
    }
    let config = queue_config();
    let ttl = config.timing.store_ttl();
    tokio::time::sleep(ttl + config.cursor_lag() + config.cursor_refresh).await;
    assert!(dense.claim("w").await.expect("claim").is_none());
    tokio::time::sleep(Duration::from_millis(500)).await;
    seal_both_ways(&b).await;
    b.after_scenario();
    let executed = b.server.executed();
    for template in cql::ALL {
        let text = cql_lease::scylla::cql::render(template, "coordination", "work_items");
        assert!(
            executed.contains(&text),
            "queue statement never executed: {template}\nexecuted: {executed:#?}"
        );
    }
}

/// Index upkeep's two seals: an entry without a row, and a leftover run entry of a unique
/// key's done row, both met by a scanner whose clock reads them as older than any enqueue's
/// window.
async fn seal_both_ways(b: &WireBackend) {
    let q = queue(b, "seals");
    q.enqueue_item(NewItem::text("once").unique("once"))
        .await
        .expect("enqueue");
    let job = loop {
        if let Some(job) = q.claim("w").await.expect("claim") {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    job.complete().await.expect("complete");
    // A dead letter whose requeue's entry is left over.
    q.enqueue_item(NewItem::text("poison").unique("poison"))
        .await
        .expect("enqueue");
    let job = loop {
        if let Some(job) = q.claim("w").await.expect("claim") {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    job.discard("bad").await.expect("discard");
    let store = b.queue_store().expect("store");
    let width = i64::try_from(queue_config().bucket_width.as_micros()).expect("width");
    let now = cql_workqueue::clock::now_micros();
    // "once": a revival's entry names the done row's current attempt.
    for (id, attempt) in [("once", 1), ("gave-up", 0), ("poison", 1)] {
        let entry = IndexEntry::new(
            ItemId::unique(id),
            now,
            EntryKind::Run,
            true,
            attempt,
            width,
        );
        store.put_entry("seals", &entry, now).await.expect("entry");
    }
    let later = q.with_clock(WallClock::skewed(120_000_000));
    assert!(later.claim("w").await.expect("claim").is_none());
    let row = |id: &str| {
        let key = cql_workqueue::ItemKey {
            partition: "seals".into(),
            id: ItemId::unique(id),
        };
        let store = store.clone();
        async move { store.read(&key).await.expect("read").expect("row") }
    };
    assert_eq!(row("gave-up").await.origin, cql_workqueue::store::SWEPT);
    // The done row's attempt was raised (1 claim, then the seal).
    assert_eq!(row("once").await.attempt, 2);
    assert_eq!(row("poison").await.attempt, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_queue_statement_is_refused_by_name() {
    let server = CqlTestServer::start(ServerOptions::strict(Flavor::Cassandra))
        .await
        .expect("server");
    register_queue(&server, "coordination", "work_items");
    let session = server.session().await;
    let altered = cql_lease::scylla::cql::render(cql::SCAN_INDEX, "coordination", "work_items")
        .replace("seq > ?", "seq >= ?");
    match session.prepare(altered.clone()).await {
        Err(e) => assert!(e.to_string().contains(&altered), "{e}"),
        Ok(_) => panic!("an altered statement must be refused"),
    }
    let refused = server.refused();
    assert!(
        !refused.is_empty() && refused.iter().all(|r| *r == altered),
        "{refused:?}"
    );
    match session
        .query_unpaged(altered.clone(), ("p", 1_i64, "x", "y", 1))
        .await
    {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Invalid,
            m,
        ))) => {
            assert!(m.contains(&altered), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

/// Every LWT of an item (enqueue, claim, complete) is a Paxos round of that item's own
/// partition: no two items share Paxos state, and the index and cursor see no LWT at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_item_is_its_own_partition_of_paxos_rounds() {
    let b = WireBackend::start(Flavor::Cassandra).await;
    let q = queue(&b, "hot");
    for n in 0..3 {
        q.enqueue(&format!("job {n}")).await.expect("enqueue");
    }
    let mut claimed = 0;
    while claimed < 3 {
        match q.claim("w").await.expect("claim") {
            Some(job) => {
                job.complete().await.expect("complete");
                claimed += 1;
            }
            None => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let paxos = b.server.paxos();
    assert_eq!(paxos.rounds.len(), 3, "one partition per item: {paxos:?}");
    for ((_, table, _), rounds) in &paxos.rounds {
        assert_eq!(table, "work_items", "{paxos:?}");
        assert_eq!(*rounds, 3, "enqueue, claim, complete: {paxos:?}");
    }
}
