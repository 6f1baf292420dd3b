//! Leader election on [`cql_lease`] leases, for services that need exactly one active
//! instance.
//!
//! [`Election::campaign`] starts an actor that tries to take the election's lease every
//! retry interval, keeps it alive while leading, and reports [`ElectionEvent`]s on a stream.
//! The term of a leader is its lease's fencing token: strictly increasing, so it fences
//! writes from a deposed leader. [`Election::observe`] and [`Election::leader`] watch without
//! campaigning.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use futures::StreamExt;
//! use cql_election::{Election, ElectionConfig, ElectionEvent};
//! use cql_lease::MemoryStore;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
//! let config = ElectionConfig { lease_ttl: Duration::from_secs(10), renew_interval: Duration::from_secs(3), ..ElectionConfig::default() };
//! let election = Election::new(Arc::new(MemoryStore::new()), "billing-scheduler", config)?;
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
mod config;
mod error;
mod event;
mod observe;

use std::sync::Arc;

use cql_lease::namespace::Namespace;
use cql_lease::{LeaseClient, LeaseStore};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use campaign::{Campaign, CampaignHandle};
pub use config::ElectionConfig;
pub use error::ElectionError;
pub use event::{DeposeReason, ElectionEvent, Leader};
pub use observe::Observer;

/// One named election on a lease store. Cheap to clone.
///
/// ```
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use cql_election::{Election, ElectionConfig, ElectionEvent};
/// use cql_lease::MemoryStore;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let election = Election::new(Arc::new(MemoryStore::new()), "reports", ElectionConfig::default())?;
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
        config: ElectionConfig,
    ) -> Result<Self, ElectionError> {
        let name = name.into();
        Namespace::Election.check_name(&name)?;
        config.validate()?;
        let client =
            LeaseClient::new(store, config.lease_config())?.in_namespace(Namespace::Election);
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
