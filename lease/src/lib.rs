//! Leases with fencing tokens on Paxos lightweight transactions.
//!
//! A lease is a named, exclusive, time-limited claim with an owner and an optional value.
//! [`LeaseClient`] acquires it; a [`Lease`] is renewed or released by hand, or handed to a
//! keep-alive that returns a [`LeaseGuard`]. Every acquisition carries a [`FencingToken`]
//! greater than every earlier one for the same name (see [`fencing`]).
//!
//! Two backends implement [`LeaseStore`]: `scylla::ScyllaLeaseStore` for ScyllaDB and
//! Cassandra 4/5 (the `scylla` feature, on by default), and [`MemoryStore`], in-process with fault injection.
//!
//! # Features
//!
//! `scylla` (on by default) builds the ScyllaDB/Cassandra backends (`scylla`,
//! `cells::scylla`) and the driver. A program on the embedded [`MemoryStore`] alone depends
//! on this crate with `default-features = false` and does not build the driver.
//!
//! # Runtime, settings and errors
//!
//! Every call must run inside a Tokio runtime with its drivers enabled (`#[tokio::main]`, or
//! a runtime `Builder` with `enable_all()`): keep-alives and hand-backs are spawned tasks and
//! deadlines are Tokio timers. Either runtime flavour works; the application's own `tokio`
//! needs only the features its code uses (`macros` and `rt-multi-thread` for
//! `#[tokio::main]`).
//!
//! [`Timing::default`] (lease duration 15 s, renewal every 5 s, retry 2 s, 0.5 s clock skew)
//! suits any cluster. Every error type ([`LeaseError`], [`StoreError`], [`InvalidArgument`],
//! [`lock::LockError`], [`hold::HoldError`]) is `Clone + Send + Sync + 'static`, so it
//! crosses `tokio::spawn` and `?` converts it into `Box<dyn Error + Send + Sync>`.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use cql_lease::{LeaseClient, Timing, MemoryStore};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
//! let config = Timing {
//!     lease_duration: Duration::from_secs(10),
//!     renew_period: Duration::from_secs(3),
//!     ..Timing::default()
//! };
//! let client = LeaseClient::new(Arc::new(MemoryStore::new()), config)?;
//!
//! let first = client.acquire("scheduler", "node-a", Some("10.0.0.1:7000"), None).await?;
//! let first_token = first.token();
//! first.release().await?;
//!
//! let guard = client.acquire("scheduler", "node-b", None, Some(Duration::from_secs(5))).await?.keep_alive();
//! assert!(guard.token() > first_token);
//! tokio::time::sleep(Duration::from_secs(60)).await; // renewed in the background
//! assert!(guard.is_held() && guard.renewals() >= 15);
//! guard.release().await?;
//! # Ok::<(), cql_lease::LeaseError>(())
//! # }).unwrap();
//! ```

mod acquire;
pub mod cells;
mod client;
mod config;
mod counting;
mod error;
pub mod fencing;
pub mod global_time;
mod hand_over;
pub mod hold;
mod keepalive;
mod lease;
pub mod lock;
pub mod memory;
pub mod metrics;
pub mod namespace;
mod orphans;
#[cfg(feature = "scylla")]
pub mod scylla;
mod shared_looks;
mod store;
mod target;
pub mod timed;
mod waiting_line;

pub use client::{LeaseClient, TryAcquire};
pub use config::{
    MAX_DURATION, MAX_NAME_LEN, MAX_OWNER_LEN, MAX_TTL_SECS, MAX_VALUE_LEN, MIN_RENEW_DEADLINE,
    Timing, check_len, check_name, check_owner_and_value, check_text,
};
pub use counting::{CallCounts, CountingStore};
pub use error::{InvalidArgument, LeaseError, LossReason, StoreError};
pub use fencing::FencingToken;
pub use keepalive::LeaseGuard;
pub use lease::Lease;
pub use memory::MemoryStore;
pub use store::{AcquireOutcome, CasOutcome, Claim, LeaseStore, StoredLease};

// The error types cross `tokio::spawn` and convert into `Box<dyn Error + Send + Sync>`: this
// stops compiling if one of them ever loses `Send`, `Sync` or `'static`.
const _: () = {
    const fn thread_safe_error<E: std::error::Error + Clone + Send + Sync + 'static>() {}
    thread_safe_error::<LeaseError>();
    thread_safe_error::<StoreError>();
    thread_safe_error::<InvalidArgument>();
    thread_safe_error::<lock::LockError>();
    thread_safe_error::<hold::HoldError>();
    #[cfg(feature = "scylla")]
    thread_safe_error::<scylla::SchemaError>();
};
