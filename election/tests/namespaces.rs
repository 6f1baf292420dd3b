//! An election, a lease lock and a plain lease on one name do not meet: their rows are
//! `election/X`, `lock/X` and `X`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_election::{Election, ElectionError, ElectionEvent};
use cql_lease::lock::{LeaseLock, Lock};
use cql_lease::namespace::Namespace;
use cql_lease::{
    InvalidArgument, LeaseClient, LeaseStore, MAX_NAME_LEN, MemoryStore, Timing, TryAcquire,
};
use futures::StreamExt;

fn config() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(10),
        renew_period: Duration::from_secs(3),
        retry_period: Duration::from_secs(1),
        ..Timing::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_held_plain_lease_makes_nobody_leader_of_the_election_of_the_same_name() {
    let store = Arc::new(MemoryStore::new());
    let leases = LeaseClient::new(store.clone(), Timing::default()).unwrap();
    let TryAcquire::Acquired(lease) = leases.try_acquire("billing", "leaser", None).await.unwrap()
    else {
        panic!("the store is empty");
    };
    let election = Election::new(store.clone(), "billing", config()).unwrap();
    assert_eq!(election.leader().await.unwrap(), None);
    let mut observer = election.observe();
    assert_eq!(
        observer.next().await,
        Some(None),
        "the observer sees no leader"
    );

    // And a candidate is elected while the lease is held.
    let mut campaign = election.campaign("node-a", None).unwrap();
    let Some(ElectionEvent::Elected { term, .. }) = campaign.next().await else {
        panic!("the plain lease must not block the election");
    };
    let leader = election.leader().await.unwrap().expect("node-a leads");
    assert_eq!((leader.candidate.as_str(), leader.term), ("node-a", term));
    assert_eq!(
        leases.holder("billing").await.unwrap().expect("held").owner,
        "leaser"
    );
    campaign.resign().await.unwrap();
    lease.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_election_a_lease_lock_and_a_lease_on_one_name_are_held_at_once_in_their_own_rows() {
    let store = Arc::new(MemoryStore::new());
    let leases = LeaseClient::new(store.clone(), Timing::default()).unwrap();
    let election = Election::new(store.clone(), "jobs", config()).unwrap();
    let mut campaign = election.campaign("candidate", Some("10.0.0.1")).unwrap();
    let Some(ElectionEvent::Elected { term, .. }) = campaign.next().await else {
        panic!("alone in the election");
    };
    let lock = LeaseLock::new(leases.clone(), "locker").unwrap();
    let guard = lock
        .lock("jobs", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    let lease = leases
        .acquire("jobs", "leaser", None, Some(Duration::from_secs(1)))
        .await
        .unwrap();

    let row = |name: &'static str| {
        let store = store.clone();
        async move { store.read(name).await.unwrap().expect(name) }
    };
    let elected = row("election/jobs").await;
    assert_eq!(
        (
            elected.owner.as_str(),
            elected.token,
            elected.value.as_deref()
        ),
        ("candidate", term, Some("10.0.0.1"))
    );
    assert_eq!(row("lock/jobs").await.owner, "locker");
    assert_eq!(row("jobs").await.owner, "leaser");
    assert_eq!(election.name(), "jobs");
    assert_eq!(guard.name(), "jobs");

    // A reader of the election's name space sees the leader, as the election does.
    let reader = leases.in_namespace(Namespace::Election);
    assert_eq!(
        reader.holder("jobs").await.unwrap().expect("led").owner,
        "candidate"
    );

    // The election's term is untouched by the other two going away.
    guard.release().await.unwrap();
    lease.release().await.unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(campaign.is_leader());
    assert_eq!(election.leader().await.unwrap().expect("leads").term, term);
    campaign.resign().await.unwrap();
    assert!(store.read("election/jobs").await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn an_election_may_be_named_like_a_reserved_prefix_and_has_the_full_name_limit() {
    let store = Arc::new(MemoryStore::new());
    for name in ["lock/x".to_owned(), "n".repeat(MAX_NAME_LEN)] {
        let election = Election::new(store.clone(), name.clone(), config()).unwrap();
        let mut campaign = election.campaign("c", None).unwrap();
        let Some(ElectionEvent::Elected { .. }) = campaign.next().await else {
            panic!("alone in the election");
        };
        let stored = format!("election/{name}");
        assert!(store.read(&stored).await.unwrap().is_some(), "{stored}");
        campaign.resign().await.unwrap();
    }
    let error = Election::new(store, "n".repeat(MAX_NAME_LEN + 1), config()).unwrap_err();
    assert!(
        matches!(
            error,
            ElectionError::InvalidArgument(InvalidArgument::TooLong {
                field: "election name",
                max: MAX_NAME_LEN,
                ..
            })
        ),
        "{error:?}"
    );
}
