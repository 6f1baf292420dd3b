//! Claiming: one candidate dispatcher per process feeds every worker of a queue handle from
//! shared scans of the order index, so local workers never race each other; a random choice
//! among the first `choice` candidates keeps processes apart.
//!
//! A scan starts at this process's own position (just past what it already handed out);
//! every `cursor_refresh`, or when its own position finds nothing, it starts again at the
//! shared low-watermark cursor and moves that cursor up to the first live entry it saw (but
//! never beyond its clock minus `cursor_lag`). So completed items' tombstones are walked at
//! most about once per process per refresh, and drained buckets are never read again.

use std::collections::{HashSet, VecDeque};

use cql_lease::StoreError;
use rand::Rng;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::debug;

use crate::config::micros;
use crate::error::QueueError;
use crate::item::IndexEntry;
use crate::queue::WorkQueue;

/// The shared scanning state of one process's handle on a queue.
#[derive(Debug)]
pub(crate) struct Dispatcher {
    state: Mutex<ScanState>,
    /// Entries handed to local claimers whose claims are not settled yet (a plain lock: it
    /// is never held across an await, so settling never waits for a scan).
    in_flight: std::sync::Mutex<HashSet<String>>,
    cursor_hint: std::sync::atomic::AtomicI64,
    /// This process's preferred slot: claimers in different processes look at different
    /// items of the same head first (work stealing when their own slot has none).
    home: u64,
}

impl Default for Dispatcher {
    fn default() -> Self {
        Dispatcher {
            state: Mutex::default(),
            in_flight: std::sync::Mutex::default(),
            cursor_hint: std::sync::atomic::AtomicI64::default(),
            home: rand::random::<u64>() % SLOTS,
        }
    }
}

const SLOTS: u64 = 8;

/// Most full index pages one refill reads.
const MAX_PAGES: u32 = 8;

/// An entry's slot: a hash of its item id.
fn slot(entry: &IndexEntry) -> u64 {
    let hash = entry
        .id
        .as_str()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    hash % SLOTS
}

#[derive(Debug, Default)]
struct ScanState {
    /// Next scan: this bucket, after this seq. `None`: start at the cursor.
    position: Option<(i64, String)>,
    buffer: VecDeque<IndexEntry>,
    /// Immediate entries placed ahead of this process's clock already handed out.
    ahead: HashSet<String>,
    last_restart: Option<Instant>,
}

impl Dispatcher {
    /// The highest cursor value this process has seen (enqueues never place behind it).
    pub(crate) fn cursor_hint(&self) -> i64 {
        self.cursor_hint.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn saw_cursor(&self, cursor: i64) {
        self.cursor_hint
            .fetch_max(cursor, std::sync::atomic::Ordering::Relaxed);
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
            let refresh_due = state
                .last_restart
                .is_none_or(|at| at.elapsed() >= self.config.cursor_refresh);
            if refresh_due {
                state.position = None;
            }
            self.refill(&mut state).await?;
        }
        let choice = (self.config.choice as usize).min(state.buffer.len());
        if choice == 0 {
            return Ok(None);
        }
        // With `choice = 1` the order is strict: no slot preference either.
        let window = if choice > 1 {
            (choice * 4).min(state.buffer.len())
        } else {
            0
        };
        let home: Vec<usize> = (0..window)
            .filter(|&i| {
                state
                    .buffer
                    .get(i)
                    .is_some_and(|e| slot(e) == self.dispatcher.home)
            })
            .collect();
        let pick = if home.is_empty() {
            rand::rng().random_range(0..choice)
        } else {
            home[rand::rng().random_range(0..home.len().min(choice))]
        };
        let entry = state.buffer.remove(pick);
        if let (Some(entry), Ok(mut in_flight)) = (&entry, self.dispatcher.in_flight.lock()) {
            in_flight.insert(entry.seq.clone());
        }
        Ok(entry)
    }

    /// A claimer is done with `entry`. `contended`: another process claimed it first, so
    /// the rest of the buffer is probably being worked through by others too: it is dropped
    /// and scanned again from its first entry (claimed items have left the index by then).
    pub(crate) async fn candidate_done(&self, entry: &IndexEntry, contended: bool) {
        if let Ok(mut in_flight) = self.dispatcher.in_flight.lock() {
            in_flight.remove(&entry.seq);
        }
        if !contended {
            return;
        }
        let mut state = self.dispatcher.state.lock().await;
        let first = state
            .buffer
            .iter()
            .map(|e| (e.bucket, e.pos))
            .min()
            .unwrap_or((entry.bucket, entry.pos));
        state.buffer.clear();
        state.ahead.clear();
        if let Some(position) = state.position.as_mut() {
            let rewound = (first.0, IndexEntry::seq_floor(first.1));
            if rewound < *position {
                *position = rewound;
            }
        }
    }

    /// One scan pass into the buffer, from our position or from the cursor.
    async fn refill(&self, state: &mut ScanState) -> Result<(), QueueError> {
        let now = self.now();
        let width = self.config.bucket_micros();
        // Nothing above `now + lag + cursor_refresh` is read: future check entries (and
        // their tombstones) are not walked long before they are due. Immediate entries of
        // clocks further ahead were re-placed below it by their enqueuers.
        let lag = micros(self.config.cursor_lag());
        let from_cursor = state.position.is_none();
        // Between restarts a process reads only up to its clock.
        let horizon = if from_cursor {
            now + lag + micros(self.config.cursor_refresh)
        } else {
            now
        };
        let last_bucket = horizon / width;
        let before = IndexEntry::seq_floor(horizon + 1);
        let (mut bucket, mut after, cursor) = match state.position.take() {
            Some((bucket, after)) => (bucket, after, None),
            None => {
                let cursor = self.read_cursor().await?;
                state.last_restart = Some(Instant::now());
                state.ahead.clear();
                (cursor / width, IndexEntry::seq_floor(cursor), Some(cursor))
            }
        };
        let limit = self.config.scan_limit;
        let mut first_live: Option<i64> = None;
        let mut covered;
        let mut pages = 0;
        loop {
            let page = self
                .store
                .scan_index(self.name(), bucket, &after, &before, limit)
                .await
                .map_err(scan_error)?;
            let full = page.len() == limit as usize;
            let mut blocked = false;
            for entry in page {
                first_live.get_or_insert(entry.pos);
                let in_flight = self
                    .dispatcher
                    .in_flight
                    .lock()
                    .is_ok_and(|set| set.contains(&entry.seq));
                if in_flight {
                    after = entry.seq.clone();
                } else if entry.pos <= now {
                    after = entry.seq.clone();
                    state.buffer.push_back(entry);
                } else if entry.immediate {
                    // Ahead of our clock: eligible, but our position stays at our clock so
                    // entries written later below it are still found.
                    if state.ahead.insert(entry.seq.clone()) {
                        state.buffer.push_back(entry);
                    }
                } else {
                    blocked = true;
                    break;
                }
            }
            covered = blocked || (!full && bucket >= last_bucket);
            // Only full pages count: empty buckets between the cursor and now are cheap.
            pages += u32::from(full);
            if blocked || !state.buffer.is_empty() || covered || pages >= MAX_PAGES {
                break;
            }
            // A full page of entries local claimers are still working on: read on in this
            // bucket; an exhausted bucket: the next one.
            if !full {
                bucket += 1;
                after = String::new();
            }
        }
        if covered {
            // Everything live up to the horizon is buffered (or blocked behind a delayed
            // entry): what is written from now on lands at `now - lag` or later, so the
            // tombstones below it need not be read again.
            let floor = now - lag;
            if (floor / width, IndexEntry::seq_floor(floor)) > (bucket, after.clone()) {
                bucket = floor / width;
                after = IndexEntry::seq_floor(floor);
            }
        }
        debug!(queue = %self.name(), bucket, from_cursor, found = state.buffer.len(), "index scanned");
        if let Some(cursor) = cursor {
            let bucket_start = bucket * width;
            let reached = match first_live {
                Some(pos) => pos,
                None if covered => now - lag,
                None => bucket_start.max(cursor),
            };
            let target = reached.min(now - lag);
            if target > cursor {
                self.store
                    .advance_cursor(self.name(), target)
                    .await
                    .map_err(scan_error)?;
                self.dispatcher.saw_cursor(target);
                debug!(queue = %self.name(), from = cursor, to = target, "cursor advanced");
            }
        }
        state.position = Some((bucket, after));
        Ok(())
    }
}
