//! What an enqueue takes and answers: the item (payload, when it may run, unique key) and
//! whether it was added.

use std::time::SystemTime;

use cql_lease::{InvalidArgument, MAX_DURATION, check_text};
use serde::Serialize;

use crate::config::MAX_PAYLOAD_LEN;
use crate::error::QueueError;
use crate::item::{ItemId, JobState};

/// Longest unique key, in bytes.
pub const MAX_UNIQUE_KEY_LEN: usize = 256;

/// An item to enqueue: its payload (text, bytes or JSON), when it may run, and an optional
/// unique key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewItem {
    pub(crate) payload: Vec<u8>,
    pub(crate) run_at: Option<SystemTime>,
    pub(crate) unique_key: Option<String>,
}

impl NewItem {
    /// A text payload.
    pub fn text(payload: &str) -> Self {
        Self::bytes(payload.as_bytes().to_vec())
    }

    /// A raw payload.
    pub fn bytes(payload: impl Into<Vec<u8>>) -> Self {
        NewItem {
            payload: payload.into(),
            run_at: None,
            unique_key: None,
        }
    }

    /// `value` as JSON (read it back with [`crate::Job::json`]).
    ///
    /// # Errors
    ///
    /// [`QueueError::Payload`] when `value` cannot be serialized.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Self, QueueError> {
        serde_json::to_vec(value)
            .map(Self::bytes)
            .map_err(|e| QueueError::Payload(e.to_string()))
    }

    /// Not to be run before `at` (wall clock), at most 20 years ahead
    /// ([`cql_lease::MAX_DURATION`], the longest TTL Cassandra accepts; later is refused
    /// at the enqueue with [`QueueError::InvalidArgument`], nothing written). Without it the
    /// item is immediate: eligible as soon as a worker sees it, whatever the enqueuer's
    /// clock says.
    pub fn run_at(mut self, at: SystemTime) -> Self {
        self.run_at = Some(at);
        self
    }

    /// A unique job: while an item with this key exists, and for
    /// [`QueueConfig::done_retention`](crate::QueueConfig::done_retention) after it
    /// completed, another enqueue of the key is reported as [`Enqueued::Duplicate`] and adds
    /// nothing; after that window a new enqueue starts a new job on the same row (its attempt
    /// numbers, the fencing tokens, keep growing). A resent enqueue (the same call, its first
    /// answer lost) is recognised by its origin and never brings a completed job back.
    pub fn unique(mut self, key: &str) -> Self {
        self.unique_key = Some(key.to_owned());
        self
    }

    pub(crate) fn check(&self) -> Result<(), QueueError> {
        if self.payload.is_empty() {
            return Err(InvalidArgument::Empty { field: "payload" }.into());
        }
        if self.payload.len() > MAX_PAYLOAD_LEN {
            return Err(InvalidArgument::TooLong {
                field: "payload",
                len: self.payload.len(),
                max: MAX_PAYLOAD_LEN,
            }
            .into());
        }
        if let Some(key) = &self.unique_key {
            check_text("unique key", key, MAX_UNIQUE_KEY_LEN)?;
        }
        if let Some(at) = self.run_at
            && at
                .duration_since(SystemTime::now())
                .is_ok_and(|ahead| ahead > MAX_DURATION)
        {
            return Err(InvalidArgument::Invalid {
                field: "run_at",
                reason: format!("more than {} s (20 years) ahead", MAX_DURATION.as_secs()),
            }
            .into());
        }
        Ok(())
    }
}

/// What an enqueue did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// A new item.
    New(ItemId),
    /// The unique key's item already exists, in this state; nothing was added.
    Duplicate {
        /// The existing item.
        id: ItemId,
        /// Its state.
        state: JobState,
    },
}

impl Enqueued {
    /// The item's id (new or existing).
    pub fn id(&self) -> &ItemId {
        match self {
            Enqueued::New(id) | Enqueued::Duplicate { id, .. } => id,
        }
    }
}
