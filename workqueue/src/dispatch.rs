//! Claiming: one candidate dispatcher per process feeds every worker of a queue handle from
//! shared scans of the order index, so local workers never race each other; processes share
//! the head out by slots of item ids (see `slots`), and an idle process takes what others
//! left waiting.
//!
//! A scan starts at this process's own position (just past what it already handed out);
//! every `cursor_refresh`, or when its own position finds nothing, it starts again at the
//! shared low-watermark cursor and moves that cursor up to the first live entry it saw (but
//! never beyond its clock minus `cursor_lag`). So completed items' tombstones are walked at
//! most about once per process per refresh, and drained buckets are never read again.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use cql_lease::StoreError;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::error::QueueError;
use crate::item::IndexEntry;
use crate::orphans::Orphans;
use crate::queue::WorkQueue;
use crate::slots::Slots;
use ledger::Ledger;
pub(crate) use ledger::{BLIND_EXTRA, BLIND_SLICE};

/// The shared scanning state of one process's handle on a queue.
#[derive(Debug)]
pub(crate) struct Dispatcher {
    state: Mutex<ScanState>,
    /// Entries handed to local claimers whose claims are not settled yet (a plain lock: it
    /// is never held across an await, so settling never waits for a scan).
    in_flight: std::sync::Mutex<HashSet<String>>,
    cursor_hint: AtomicI64,
    /// This process's abandoned claims, handed back on sight.
    pub(crate) orphans: Arc<Orphans>,
    /// In every claim id this process makes, so it tells its own claims from others'.
    pub(crate) tag: String,
    /// Index buckets far ahead this process recorded in the bucket directory.
    far_buckets: std::sync::Mutex<BTreeSet<i64>>,
    /// Claims in progress in this process.
    active: Arc<AtomicUsize>,
    /// Where this process's claimers look first.
    pub(crate) slots: Slots,
    /// Claims sent by this process (claim LWTs, or bakery draws).
    pub(crate) claim_attempts: std::sync::atomic::AtomicU64,
    /// Where this process counted index entries (see `ledger`).
    pub(crate) ledger: std::sync::Mutex<Ledger>,
    /// Candidates handed out since the last rescan from the cursor.
    pub(super) handed_out: AtomicUsize,
}

/// Counts one claim in progress while it lives.
pub(crate) struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Default for Dispatcher {
    fn default() -> Self {
        let tag = format!("{:08x}", rand::random::<u32>());
        Dispatcher {
            state: Mutex::default(),
            in_flight: std::sync::Mutex::default(),
            cursor_hint: AtomicI64::default(),
            orphans: Arc::default(),
            slots: Slots::new(&tag),
            tag,
            far_buckets: std::sync::Mutex::default(),
            active: Arc::default(),
            claim_attempts: std::sync::atomic::AtomicU64::default(),
            ledger: std::sync::Mutex::default(),
            handed_out: AtomicUsize::default(),
        }
    }
}

/// Candidates a refill reads per local claimer (when the head holds that many).
const READ_AHEAD: usize = 8;

/// Most full index pages one refill reads.
const MAX_PAGES: u32 = 8;

/// Most index reads one refill makes (slices included): the next refill goes on from there.
const MAX_READS: u32 = 64;

/// Candidates the fleet hands out between two rescans from the cursor, shared out among the
/// processes this one knows: each rescan range-deletes what died in the closed part of the
/// index since the last one, so a process joining later walks about that many entries'
/// tombstones where nobody counted for it.
const RESCAN_AFTER: usize = 256;

/// How long another process's entry waits, after this process first passed it over, before
/// this process takes it when idle (its owner may be dead, or behind).
const STEAL_AGE: std::time::Duration = std::time::Duration::from_millis(500);

#[derive(Debug, Default)]
struct ScanState {
    /// Next scan: this bucket, after this seq. `None`: start at the cursor.
    position: Option<(i64, String)>,
    buffer: VecDeque<IndexEntry>,
    /// Immediate entries placed ahead of this process's clock already handed out.
    ahead: HashSet<String>,
    last_restart: Option<Instant>,
    /// The clock reading this process last wrote into the fleet clock: range deletions stay
    /// below it minus the cursor lag, where every placer's check keeps entries clear of
    /// (`placement`).
    noted: Option<i64>,
    /// The last rescan from the cursor took as many of others' entries as it keeps: more may
    /// lag, so the next refill rescans at once instead of after `STEAL_AGE`.
    steal_more: bool,
}

impl Dispatcher {
    /// The highest cursor value this process has seen (enqueues never place behind it).
    pub(crate) fn cursor_hint(&self) -> i64 {
        self.cursor_hint.load(Ordering::Relaxed)
    }

    pub(crate) fn saw_cursor(&self, cursor: i64) {
        self.cursor_hint.fetch_max(cursor, Ordering::Relaxed);
    }

    /// A new claim id for `worker`: `"{worker}/{process tag}-{random}"`.
    pub(crate) fn claim_id(&self, worker: &str) -> String {
        format!("{worker}/{}-{}", self.tag, uuid::Uuid::new_v4().simple())
    }

    /// Whether `claim_id` was made by this process.
    pub(crate) fn is_own_claim(&self, claim_id: &str) -> bool {
        claim_id.rsplit_once('/').is_some_and(|(_, rest)| {
            rest.starts_with(&self.tag) && rest.as_bytes().get(self.tag.len()) == Some(&b'-')
        })
    }

    /// One more claim in progress, until the returned value is dropped.
    pub(crate) fn active(&self) -> Active {
        self.active.fetch_add(1, Ordering::Relaxed);
        Active(Arc::clone(&self.active))
    }

    /// Whether far bucket `bucket` still needs recording (remembered from now on); buckets
    /// up to `current` are forgotten (scans from the cursor reach them).
    pub(crate) fn note_far_bucket(&self, bucket: i64, current: i64) -> bool {
        let Ok(mut noted) = self.far_buckets.lock() else {
            return true;
        };
        *noted = noted.split_off(&(current + 1));
        noted.insert(bucket)
    }

    /// A bucket whose recording failed: record it again next time.
    pub(crate) fn forget_far_bucket(&self, bucket: i64) {
        if let Ok(mut noted) = self.far_buckets.lock() {
            noted.remove(&bucket);
        }
    }
}

fn scan_error(source: StoreError) -> QueueError {
    QueueError::Store {
        operation: "scan index",
        source,
    }
}

impl WorkQueue {
    /// The next candidate for one claim attempt, or `None` when nothing is eligible now.
    pub(crate) async fn next_candidate(&self) -> Result<Option<IndexEntry>, QueueError> {
        let mut state = self.dispatcher.state.lock().await;
        if state.buffer.is_empty() {
            let slots = &self.dispatcher.slots;
            let handed = self.dispatcher.handed_out.load(Ordering::Relaxed);
            let refresh_due = state
                .last_restart
                .is_none_or(|at| at.elapsed() >= self.config.cursor_refresh)
                || handed * slots.processes() >= RESCAN_AFTER;
            // A rescan from the cursor takes what others left waiting, at most once per
            // `STEAL_AGE` (at once after one that took all it could): busy or not, entries
            // lagging behind this process's own work (a slower or dead owner); idle, any.
            let rescanned = |state: &ScanState| {
                !state.steal_more
                    && state
                        .last_restart
                        .is_some_and(|at| at.elapsed() < STEAL_AGE)
            };
            if refresh_due || (!rescanned(&state) && slots.has_stale(false, STEAL_AGE)) {
                state.position = None;
            }
            self.refill(&mut state, false).await?;
            if state.buffer.is_empty() && !rescanned(&state) && slots.has_stale(true, STEAL_AGE) {
                state.position = None;
                self.refill(&mut state, true).await?;
            }
        }
        if state.buffer.is_empty() {
            return Ok(None);
        }
        let pick = self
            .dispatcher
            .slots
            .pick(&state.buffer, self.config.pick_among());
        let entry = state.buffer.remove(pick);
        if let Some(entry) = &entry {
            self.dispatcher.handed_out.fetch_add(1, Ordering::Relaxed);
            self.dispatcher.slots.handed_out(entry);
            if let Ok(mut in_flight) = self.dispatcher.in_flight.lock() {
                in_flight.insert(entry.seq.clone());
            }
        }
        Ok(entry)
    }

    /// A claimer is done with `entry`.
    pub(crate) fn candidate_done(&self, entry: &IndexEntry) {
        if let Ok(mut in_flight) = self.dispatcher.in_flight.lock() {
            in_flight.remove(&entry.seq);
        }
    }

    /// Another process had `entry`'s item (held by claim `holder`, when known): read so
    /// before any LWT, or the LWT lost. That process is known from now on (its share of the
    /// slots is left to it), and the buffered candidates outside this process's share (stolen
    /// ones, or a share just given up) are dropped: they are left to their owners, passed
    /// over, and taken again only when this process is idle and they still wait.
    pub(crate) async fn candidate_contended(&self, entry: &IndexEntry, holder: Option<&str>) {
        self.candidate_done(entry);
        let slots = &self.dispatcher.slots;
        if let Some(holder) = holder {
            slots.met(holder);
        }
        let mut state = self.dispatcher.state.lock().await;
        state.buffer.retain(|e| {
            slots.owns(e) || {
                slots.steal(e, false, STEAL_AGE);
                false
            }
        });
        // A lost claim with no holder to be seen (not applied after all, or already
        // finished): the entry is read again from the index at the next refill, not left to
        // the next rescan from the cursor.
        if holder.is_none()
            && let Some(position) = state.position.as_mut()
        {
            let rewound = (entry.bucket, IndexEntry::seq_floor(entry.pos));
            if rewound < *position {
                *position = rewound;
            }
        }
    }

    /// A claimer's attempt on `entry` failed (a store error): the entry goes back to the
    /// front of the buffer.
    pub(crate) async fn candidate_failed(&self, entry: &IndexEntry) {
        if let Ok(mut in_flight) = self.dispatcher.in_flight.lock() {
            in_flight.remove(&entry.seq);
        }
        self.dispatcher
            .state
            .lock()
            .await
            .buffer
            .push_front(entry.clone());
    }
}

mod compact;
mod ledger;
mod scan;
#[cfg(test)]
mod tests;
