//! A plain lease and a lease lock on the same name are separate rows: `X` and `lock/X`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_lease::lock::{LeaseLock, Lock, LockError};
use cql_lease::namespace::{ELECTION_PREFIX, LOCK_PREFIX, Namespace};
use cql_lease::{
    InvalidArgument, LeaseClient, LeaseError, LeaseStore, MAX_NAME_LEN, MemoryStore, Timing,
    TryAcquire,
};

fn client(store: &Arc<MemoryStore>) -> LeaseClient {
    LeaseClient::new(store.clone(), Timing::default()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_lease_and_a_lease_lock_on_one_name_are_held_at_once_in_their_own_rows() {
    let store = Arc::new(MemoryStore::new());
    let leases = client(&store);
    let lock = LeaseLock::new(client(&store), "locker").unwrap();

    let lease = leases
        .acquire("reports", "leaser", None, Some(Duration::from_secs(1)))
        .await
        .unwrap();
    let guard = lock
        .lock("reports", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!((lease.name(), guard.name()), ("reports", "reports"));

    let plain = store
        .read("reports")
        .await
        .unwrap()
        .expect("the lease's row");
    let locked = store
        .read("lock/reports")
        .await
        .unwrap()
        .expect("the lock's row");
    assert_eq!(
        (plain.owner.as_str(), plain.token),
        ("leaser", lease.token())
    );
    assert_eq!(
        (locked.owner.as_str(), Some(locked.token)),
        ("locker", guard.token())
    );
    assert_eq!(
        store.read("election/reports").await.unwrap(),
        None,
        "no election row"
    );

    // Each is seen only through its own name space.
    let holder = leases.holder("reports").await.unwrap().expect("held");
    assert_eq!(holder.owner, "leaser");
    let lock_reader = leases.in_namespace(Namespace::Lock);
    let holder = lock_reader.holder("reports").await.unwrap().expect("held");
    assert_eq!(holder.owner, "locker");

    // Releasing one leaves the other held.
    guard.release().await.unwrap();
    assert_eq!(store.read("lock/reports").await.unwrap(), None);
    assert!(store.read("reports").await.unwrap().is_some());
    lease.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_held_lease_does_not_block_the_lock_of_the_same_name_nor_the_reverse() {
    let store = Arc::new(MemoryStore::new());
    let lock = LeaseLock::new(client(&store), "locker").unwrap();
    let guard = lock.try_lock("jobs").await.unwrap().expect("free");
    let TryAcquire::Acquired(lease) = client(&store)
        .try_acquire("jobs", "leaser", None)
        .await
        .unwrap()
    else {
        panic!("the lock must not hold the plain lease");
    };
    // Within each name space, the usual exclusion.
    let other = LeaseLock::new(client(&store), "other").unwrap();
    assert!(other.try_lock("jobs").await.unwrap().is_none());
    assert!(matches!(
        client(&store).try_acquire("jobs", "x", None).await.unwrap(),
        TryAcquire::Held(_)
    ));
    guard.release().await.unwrap();
    lease.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_plain_lease_name_with_a_reserved_prefix_is_refused_before_anything_is_written() {
    let store = Arc::new(MemoryStore::new());
    let leases = client(&store);
    for name in ["lock/jobs", "election/jobs"] {
        let refusals = [
            leases.try_acquire(name, "o", None).await.map(|_| ()),
            leases.acquire(name, "o", None, None).await.map(|_| ()),
            leases.holder(name).await.map(|_| ()),
            leases.peek(name).await.map(|_| ()),
        ];
        for refusal in refusals {
            let Err(LeaseError::InvalidArgument(InvalidArgument::ReservedPrefix {
                name: refused,
                prefix,
                ..
            })) = refusal
            else {
                panic!("{name}: expected a refusal, got {refusal:?}");
            };
            assert_eq!(refused, name);
            assert!(prefix == LOCK_PREFIX || prefix == ELECTION_PREFIX);
        }
    }
    assert_eq!(store.calls().paxos_rounds(), 0, "nothing written or read");
    assert_eq!(store.peeks(), 0, "nothing peeked");

    // A lock may be named so: its row is `lock/election/jobs`.
    let lock = LeaseLock::new(leases, "locker").unwrap();
    let guard = lock.try_lock("election/jobs").await.unwrap().expect("free");
    assert_eq!(guard.name(), "election/jobs");
    assert!(store.read("lock/election/jobs").await.unwrap().is_some());
    guard.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn lock_names_have_the_full_name_limit_and_errors_name_the_lock() {
    let store = Arc::new(MemoryStore::new());
    let lock = LeaseLock::new(client(&store), "locker").unwrap();
    let longest = "n".repeat(MAX_NAME_LEN);
    let guard = lock.try_lock(&longest).await.unwrap().expect("free");
    assert_eq!(guard.name(), longest);
    assert!(
        store
            .read(&format!("lock/{longest}"))
            .await
            .unwrap()
            .is_some()
    );
    guard.release().await.unwrap();

    let error = lock.try_lock(&format!("{longest}n")).await.unwrap_err();
    assert!(
        matches!(
            error,
            LockError::InvalidArgument(InvalidArgument::TooLong {
                field: "lock name",
                max: MAX_NAME_LEN,
                ..
            })
        ),
        "{error:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lost_lock_reports_the_name_the_user_gave() {
    let store = Arc::new(MemoryStore::new());
    let lock = LeaseLock::new(client(&store), "locker").unwrap();
    let guard = lock.try_lock("jobs").await.unwrap().expect("free");
    // Somebody repairs the row by hand: the guard loses it and says which lock.
    let held = store.read("lock/jobs").await.unwrap().expect("held");
    store.release("lock/jobs", &held.holder_id).await.unwrap();
    let error = guard.release().await.unwrap_err();
    assert!(
        matches!(&error, LockError::Release { name, .. } if name == "jobs"),
        "{error:?}"
    );
}
