//! Leases with fencing tokens on Paxos lightweight transactions.
//!
//! A lease is a named, exclusive, time-limited claim with an owner and an optional value.
//! [`LeaseClient`] acquires it; a [`Lease`] is renewed or released by hand, or handed to a
//! keep-alive that returns a [`LeaseGuard`]. Every acquisition carries a [`FencingToken`]
//! greater than every earlier one for the same name (see [`fencing`]).
//!
//! Two backends implement [`LeaseStore`]: [`scylla::ScyllaLeaseStore`] for ScyllaDB and
//! Cassandra 4/5, and [`MemoryStore`], in-process with fault injection.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use cql_lease::{LeaseClient, LeaseConfig, MemoryStore};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
//! let config = LeaseConfig {
//!     ttl: Duration::from_secs(10),
//!     renew_interval: Duration::from_secs(3),
//!     ..LeaseConfig::default()
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
pub mod hold;
mod keepalive;
mod lease;
pub mod lock;
pub mod memory;
pub mod metrics;
pub mod namespace;
mod orphans;
pub mod scylla;
mod store;
mod target;
pub mod timed;
mod waiting_line;

pub use client::{LeaseClient, TryAcquire};
pub use config::{
    LeaseConfig, MAX_NAME_LEN, MAX_OWNER_LEN, MAX_TTL_SECS, MAX_VALUE_LEN, check_len, check_name,
    check_owner_and_value, check_text,
};
pub use counting::{CallCounts, CountingStore};
pub use error::{InvalidArgument, LeaseError, LossReason, StoreError};
pub use fencing::FencingToken;
pub use keepalive::LeaseGuard;
pub use lease::Lease;
pub use memory::MemoryStore;
pub use store::{AcquireOutcome, CasOutcome, Claim, LeaseStore, StoredLease};
