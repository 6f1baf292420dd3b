//! Leader election on [`cql_lease`] leases, for services that need exactly one active
//! instance.
//!
//! [`Election::campaign`] starts an actor that tries to take the election's lease every
//! retry interval, keeps it alive while leading, and reports [`ElectionEvent`]s on a stream.
//! The term of a leader is its lease's fencing token: strictly increasing, so it fences
//! writes from a deposed leader. [`Election::observe`] and [`Election::leader`] watch without
//! campaigning.
//!
//! The `scylla` feature (on by default) only builds `cql-lease`'s ScyllaDB/Cassandra backend;
//! with `default-features = false` elections run on the embedded store without the driver.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use futures::StreamExt;
//! use cql_election::{Election, Timing, ElectionEvent};
//! use cql_lease::MemoryStore;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
//! let timing = Timing { lease_duration: Duration::from_secs(10), renew_period: Duration::from_secs(3), ..Timing::default() };
//! let election = Election::new(Arc::new(MemoryStore::new()), "billing-scheduler", timing)?;
//! let mut a = election.campaign("node-a", None)?;
//! let mut b = election.campaign("node-b", None)?;
//! let Some(ElectionEvent::Elected { term, .. }) = a.next().await else { unreachable!() };
//! let Some(ElectionEvent::LeaderChanged { leader: Some(leader) }) = b.next().await else { unreachable!() };
//! assert_eq!((leader.candidate.as_str(), leader.term), ("node-a", term));
//!
//! a.resign().await?; // node-b takes over within one retry interval
//! let Some(ElectionEvent::Elected { term: next, .. }) = b.next().await else { unreachable!() };
//! assert!(next > term);
//! # Ok::<(), cql_election::ElectionError>(())
//! # }).unwrap();
//! ```

mod actor;
mod campaign;
mod error;
mod event;
mod observe;

use std::sync::Arc;

use cql_lease::namespace::Namespace;
use cql_lease::{LeaseClient, LeaseStore};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use campaign::{Campaign, CampaignHandle};
/// The timing type every primitive shares (re-exported from [`cql_lease`]).
pub use cql_lease::Timing;
pub use error::ElectionError;
pub use event::{DeposeReason, ElectionEvent, Leader};
pub use observe::Observer;

// `ElectionError` crosses `tokio::spawn` and converts into `Box<dyn Error + Send + Sync>`.
const _: () = {
    const fn thread_safe_error<E: std::error::Error + Clone + Send + Sync + 'static>() {}
    thread_safe_error::<ElectionError>();
};

/// One named election on a lease store. Cheap to clone.
///
/// Make one per election name in a process and call [`Election::campaign`] on it (or on a
/// clone) once per candidate; candidates in other processes make their own `Election` with
/// the same store and name. It must be created and used inside a Tokio runtime (each
/// campaign and observer runs in a spawned task).
///
/// ```
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use cql_election::{Election, Timing, ElectionEvent};
/// use cql_lease::MemoryStore;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let election = Election::new(Arc::new(MemoryStore::new()), "reports", Timing::default())?;
/// let mut watcher = election.observe();
/// assert_eq!(watcher.next().await, Some(None)); // nobody leads yet
///
/// let mut campaign = election.campaign("node-a", Some("10.0.0.1:80"))?;
/// let Some(ElectionEvent::Elected { term, .. }) = campaign.next().await else { unreachable!() };
/// let leader = election.leader().await?.expect("node-a leads");
/// assert_eq!((leader.candidate.as_str(), leader.term), ("node-a", term));
/// let seen = watcher.next().await.flatten().expect("the observer sees it");
/// assert_eq!(seen.term, term);
/// campaign.resign().await?;
/// # Ok::<(), cql_election::ElectionError>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct Election {
    client: LeaseClient,
    name: Arc<str>,
}

impl Election {
    /// An election named `name` on `store`; validates the name and the timing.
    ///
    /// Its lease is stored in the election name space: the election `X` is the row
    /// `election/X` (see [`cql_lease::namespace`]), apart from the plain lease `X` and the
    /// lease lock `X`. Events, errors and [`Election::name`] say `X`.
    ///
    /// # Errors
    /// [`ElectionError::InvalidArgument`] for a bad name or timing.
    pub fn new(
        store: Arc<dyn LeaseStore>,
        name: impl Into<String>,
        timing: Timing,
    ) -> Result<Self, ElectionError> {
        let name = name.into();
        Namespace::Election.check_name(&name)?;
        timing.validate()?;
        let client = LeaseClient::new(store, timing)?.in_namespace(Namespace::Election);
        Ok(Election {
            client,
            name: name.into(),
        })
    }

    /// The election's name, as given (its lease is stored as `election/` and this name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Starts campaigning as `candidate` with `value` (e.g. its address). Errors on a bad
    /// candidate id or value, before anything is sent.
    ///
    /// The campaign runs in a spawned task, which renews the lease while leading whether or
    /// not the returned stream is polled; [`Campaign::resign`] (elected or not) or dropping
    /// the [`Campaign`] ends it.
    pub fn campaign(
        &self,
        candidate: &str,
        value: Option<&str>,
    ) -> Result<Campaign, ElectionError> {
        cql_lease::check_owner_and_value(candidate, value)?;
        let (events_tx, events) = mpsc::unbounded_channel();
        let (commands_tx, commands) = mpsc::channel(8);
        let (leading_tx, leading) = watch::channel(false);
        let (term_tx, term) = watch::channel(None);
        let shutdown = CancellationToken::new();
        let actor = actor::Actor {
            client: self.client.clone(),
            name: self.name.to_string(),
            candidate: candidate.to_owned(),
            value: value.map(str::to_owned),
            events: events_tx,
            commands,
            leading: leading_tx,
            term: term_tx,
            shutdown: shutdown.clone(),
        };
        let task = tokio::spawn(actor.run());
        Ok(Campaign::new(
            events,
            commands_tx,
            leading,
            term,
            shutdown,
            task,
        ))
    }

    /// Watches leader changes without campaigning.
    pub fn observe(&self) -> Observer {
        Observer::start(self.client.clone(), self.name.to_string())
    }

    /// The current leader: one SERIAL read.
    ///
    /// # Errors
    /// [`ElectionError`] wrapping the lease error when the read failed.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn leader(&self) -> Result<Option<Leader>, ElectionError> {
        Ok(self.client.holder(&self.name).await?.map(Leader::from))
    }
}
