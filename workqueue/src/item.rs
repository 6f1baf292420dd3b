//! What a work item is: its id, its state, and its row in the store.

use std::fmt;

/// A work item's id: 20 digits of enqueue time in microseconds since the epoch, a dash and a
/// random suffix. Ids sort by enqueue time, so a partition's rows come out oldest first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemId(String);

impl ItemId {
    /// A fresh id stamped with [`crate::clock::next_micros`] (ordering only, never safety).
    pub fn now() -> Self {
        let micros = crate::clock::next_micros();
        ItemId(format!("{micros:020}-{}", uuid::Uuid::new_v4().simple()))
    }

    /// Wraps an id read from the store.
    pub fn from_stored(id: String) -> Self {
        ItemId(id)
    }

    /// The id as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where an item is in its life, after River's job states. A completed item is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting to be claimed.
    Available,
    /// Claimed by a worker; claimable again once the claim's TTL runs out.
    Running,
    /// Failed, to be tried again from `run_at`.
    Retryable,
    /// Failed for the last time (or discarded by its worker); never claimed again.
    Discarded,
}

impl JobState {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Available => "available",
            JobState::Running => "running",
            JobState::Retryable => "retryable",
            JobState::Discarded => "discarded",
        }
    }

    /// Parses the stored text.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "available" => JobState::Available,
            "running" => JobState::Running,
            "retryable" => JobState::Retryable,
            "discarded" => JobState::Discarded,
            _ => return None,
        })
    }

    /// Whether a worker may claim an item in this state (when nobody's claim is live).
    pub fn is_claimable(self) -> bool {
        !matches!(self, JobState::Discarded)
    }
}

/// Where an item lives: its partition (`queue/shard`) and its id inside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ItemKey {
    /// The partition: the queue name, a slash and the shard number.
    pub partition: String,
    /// The item's id (the clustering key).
    pub id: ItemId,
}

/// A work item's row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredItem {
    /// Where it lives.
    pub key: ItemKey,
    /// What to do, as given to `enqueue`.
    pub payload: String,
    /// Its state.
    pub state: JobState,
    /// How many claims it has had: each claim takes the next number, which is that claim's
    /// fencing token (the bakery ticket of the seeds' work queue, taken by one LWT).
    pub attempt: i32,
    /// The live claim's unique id, if a worker holds the item now.
    pub claim: Option<String>,
    /// Not to be run before this wall-clock time, microseconds since the epoch.
    pub run_at: i64,
    /// The last failure's message.
    pub last_error: Option<String>,
}
