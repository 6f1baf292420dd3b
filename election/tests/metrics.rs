//! What an election records: `is_leader` per election goes 1 then 0, and terms are counted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_election::{Election, ElectionEvent, Timing};
use cql_lease::MemoryStore;
use cql_lease::metrics::capture::Capture;
use cql_lease::metrics::{IS_LEADER, TERMS};
use futures::StreamExt;

#[tokio::test(start_paused = true)]
async fn is_leader_follows_the_terms_of_each_election() {
    let capture = Capture::default();
    let _installed = capture.install();
    let config = Timing {
        lease_duration: Duration::from_secs(10),
        renew_period: Duration::from_secs(3),
        ..Timing::default()
    };
    let store = Arc::new(MemoryStore::new());
    let election = Election::new(store.clone(), "billing", config).unwrap();
    let other = Election::new(store, "reports", config).unwrap();
    let billing = [("election", "billing")];
    assert_eq!(capture.gauge(IS_LEADER, &billing), 0.0);

    let mut a = election.campaign("node-a", None).unwrap();
    let mut b = election.campaign("node-b", None).unwrap();
    let Some(ElectionEvent::Elected { .. }) = a.next().await else {
        panic!("node-a campaigned first");
    };
    assert_eq!(capture.gauge(IS_LEADER, &billing), 1.0);
    assert_eq!(capture.counter(TERMS, &billing), 1);
    assert_eq!(capture.gauge(IS_LEADER, &[("election", "reports")]), 0.0);

    a.resign().await.unwrap();
    assert_eq!(capture.gauge(IS_LEADER, &billing), 0.0);
    loop {
        match b.next().await.expect("node-b's campaign goes on") {
            ElectionEvent::Elected { .. } => break,
            _ => continue,
        }
    }
    assert_eq!(capture.gauge(IS_LEADER, &billing), 1.0);
    assert_eq!(capture.counter(TERMS, &billing), 2);

    let mut c = other.campaign("node-c", None).unwrap();
    let Some(ElectionEvent::Elected { .. }) = c.next().await else {
        panic!("nobody else campaigns for reports");
    };
    assert_eq!(capture.gauge(IS_LEADER, &[("election", "reports")]), 1.0);
    b.resign().await.unwrap();
    c.resign().await.unwrap();
    assert_eq!(capture.gauge(IS_LEADER, &billing), 0.0);
    assert_eq!(capture.gauge(IS_LEADER, &[("election", "reports")]), 0.0);
    assert_eq!(capture.counter(TERMS, &[]), 3);
}
