//! What a work item is: its id, its state, its row, and its entries in the order index.

use std::fmt;

/// A work item's id: a random id for plain items (`"{enqueue micros:020}-{uuid}"`), or
/// `"u:{key}"` for a unique job, so a second enqueue of the key lands on the same row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemId(String);

impl ItemId {
    /// A fresh, never-reused id.
    pub fn now() -> Self {
        let micros = crate::clock::next_micros();
        ItemId(format!("{micros:020}-{}", uuid::Uuid::new_v4().simple()))
    }

    /// The id of the unique job `key`.
    pub fn unique(key: &str) -> Self {
        ItemId(format!("u:{key}"))
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

/// Where an item is in its life, after River's job states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting to be claimed.
    Available,
    /// Claimed by a worker; claimable again once the claim's TTL runs out.
    Running,
    /// Failed, to be tried again from `run_at`.
    Retryable,
    /// Failed for the last time (or discarded by its worker): a dead letter, never claimed
    /// again unless requeued.
    Discarded,
    /// Completed (or purged). The row stays as a marker with its attempt number, so a resent
    /// enqueue cannot bring the item back and its tokens are never issued again.
    Done,
}

impl JobState {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Available => "available",
            JobState::Running => "running",
            JobState::Retryable => "retryable",
            JobState::Discarded => "discarded",
            JobState::Done => "done",
        }
    }

    /// Parses the stored text; a row whose state cell expired is done.
    pub fn parse(s: Option<&str>) -> Option<Self> {
        Some(match s {
            Some("available") => JobState::Available,
            Some("running") => JobState::Running,
            Some("retryable") => JobState::Retryable,
            Some("discarded") => JobState::Discarded,
            Some("done") | None => JobState::Done,
            Some(_) => return None,
        })
    }

    /// Whether a worker may claim an item in this state (when nobody's claim is live).
    pub fn is_claimable(self) -> bool {
        matches!(
            self,
            JobState::Available | JobState::Running | JobState::Retryable
        )
    }
}

/// Where an item lives: its own partition, `(queue, id)`, so its Paxos state is its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ItemKey {
    /// The queue's name.
    pub partition: String,
    /// The item's id.
    pub id: ItemId,
}

/// A work item's row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredItem {
    /// Where it lives.
    pub key: ItemKey,
    /// What to do, as given to `enqueue` (empty once done).
    pub payload: Vec<u8>,
    /// Its state.
    pub state: JobState,
    /// Its last attempt number: each claim takes the next number, which is that claim's
    /// fencing token. Never deleted, so never issued twice. Index upkeep's seals (a late
    /// revival or requeue refused) also take a number, so it counts claims plus seals.
    pub attempt: i32,
    /// The live claim's unique id, if a worker holds the item now.
    pub claim: Option<String>,
    /// Not to be run before this wall-clock time, microseconds since the epoch
    /// ([`crate::store::AT_ONCE`] for an item available at once, whatever the clock).
    pub run_at: i64,
    /// The last failure's message.
    pub last_error: Option<String>,
    /// The enqueue call that created the row (settles a lost enqueue answer).
    pub origin: String,
    /// The attempt number when the item was last requeued from the dead letters (0 if
    /// never): its attempts are counted from there, its tokens keep growing.
    pub requeued_at: i32,
}

impl StoredItem {
    /// Attempt numbers used since the item was enqueued or last requeued: its claims, plus
    /// any number a seal took (see [`StoredItem::attempt`]).
    pub fn attempts_used(&self) -> i32 {
        self.attempt - self.requeued_at
    }
}

impl StoredItem {
    /// The payload as text (lossy if it is not UTF-8).
    pub fn payload_text(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }
}

/// What an index entry asks of a claimer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// The item is to be run from `pos` on.
    Run,
    /// The item was claimed; at `pos` its claim may have lapsed: look again.
    Check,
}

impl EntryKind {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Run => "run",
            EntryKind::Check => "check",
        }
    }

    /// Parses the stored text.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "run" => Some(EntryKind::Run),
            "check" => Some(EntryKind::Check),
            _ => None,
        }
    }
}

/// One row of the order index: partition `(queue, bucket)`, clustering `seq`. Written and
/// deleted with plain (non-LWT) writes only; the item rows are written with LWTs only.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexEntry {
    /// The time bucket: `pos / bucket_width`.
    pub bucket: i64,
    /// The clustering key, `"{pos:020}-{kind}-{id}-{random}"`: sorts by position.
    pub seq: String,
    /// The item.
    pub id: ItemId,
    /// Wall-clock micros the entry is placed at.
    pub pos: i64,
    /// What it asks for.
    pub kind: EntryKind,
    /// An immediate item is eligible as soon as it is seen, whatever its position (which
    /// only orders it): eligibility never depends on the enqueuer's clock.
    pub immediate: bool,
    /// The item's attempt number when the entry was placed (the claim condition).
    pub attempt: i32,
}

impl IndexEntry {
    /// An entry for `id` at `pos` in buckets of `bucket_micros`.
    pub fn new(
        id: ItemId,
        pos: i64,
        kind: EntryKind,
        immediate: bool,
        attempt: i32,
        bucket_micros: i64,
    ) -> Self {
        let pos = pos.max(0);
        // The random tail keeps two entries of one item at one position apart (a unique
        // job enqueued twice at once), so deleting one never deletes the other.
        let tail: u32 = rand::random();
        IndexEntry {
            bucket: pos / bucket_micros.max(1),
            seq: format!("{pos:020}-{}-{id}-{tail:08x}", kind.as_str()),
            id,
            pos,
            kind,
            immediate,
            attempt,
        }
    }

    /// The smallest seq at or after `pos` (scans start strictly after it).
    pub fn seq_floor(pos: i64) -> String {
        format!("{:020}", pos.max(0))
    }
}
