//! A queue's counts and dead letters as the dashboard reads them: a bounded number of reads
//! per refresh whatever the queue holds.
//!
//! [`WorkQueue::stats`] reads the whole live index: exact, but its cost grows with the queue.
//! The dashboard reads it the same way ([`WorkQueue::read_index`]: no read walks more
//! tombstones than the workers' scans do) with at most [`INDEX_READS`] requests: first the
//! current and next buckets and the far ones the bucket directory records (where new, running
//! and delayed items are), then the buckets from the cursor on, oldest first (where a backlog
//! waits when the workers are behind or down). It reads the dead-letter ids in one page of
//! [`DEAD_PAGE`]; past those bounds the counts are shown as lower bounds ("≥").

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cql_workqueue::{ItemId, JobState, QueueError, QueueStats, WorkQueue};

/// Index and bucket-directory reads per queue and refresh at most. Around now the index
/// holds a tombstone per job processed lately (the check entries of finished jobs up to a
/// claim TTL ahead, claimed items' entries just behind), so it is read there in slices of
/// 100 ms of positions: 201 reads at the default claim TTL (20 s, and one more where a
/// bucket starts in it). The other 119 read a cursor up to an hour behind through to now
/// (60 empty one-minute buckets), the far buckets, and pages of 64 entries.
pub const INDEX_READS: usize = 320;
/// Dead-letter ids read per refresh (one request).
pub const DEAD_PAGE: u32 = 1_000;
/// Dead letters shown on a queue's page (one item read each).
pub const DEAD_SHOWN: usize = 50;
/// Requests one queue's counts cost at most: the cursor, the dead letters' ids and
/// [`INDEX_READS`].
pub const QUEUE_READS: usize = 2 + INDEX_READS;

/// A queue's counts; `complete` is false when a bound stopped the reading (the counts are
/// then lower bounds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Items a worker may claim now.
    pub available: u64,
    /// Items waiting for their time (delayed or retrying).
    pub scheduled: u64,
    /// Items claimed.
    pub running: u64,
    /// Dead letters.
    pub dead: u64,
    /// How long the oldest available item read has waited (a lower bound when the counts
    /// are).
    pub oldest_available_age: Option<Duration>,
    /// How far the queue's cursor is behind now, `None` when it was never written (no
    /// worker scanned yet). Workers that keep up keep it seconds behind; more means a backlog
    /// holds it, or they are down.
    pub cursor_lag: Option<Duration>,
    /// Every index entry and dead letter was read.
    pub complete: bool,
    /// The first dead letters' ids (oldest first).
    pub dead_ids: Vec<ItemId>,
}

/// One dead letter as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    /// Its id.
    pub id: ItemId,
    /// Its attempts.
    pub attempts: i32,
    /// Why it was discarded.
    pub last_error: Option<String>,
    /// Its payload, as text (lossy), cut to 200 characters.
    pub payload: String,
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, micros)
}

fn store_error(operation: &'static str) -> impl Fn(cql_lease::StoreError) -> QueueError {
    move |source| QueueError::Store { operation, source }
}

/// Reads `queue`'s counts with at most [`QUEUE_READS`] requests.
///
/// # Errors
/// A read failed.
pub async fn summary(queue: &WorkQueue) -> Result<Summary, QueueError> {
    let (store, name, config) = (queue.store(), queue.name(), queue.config());
    let now = now_micros();
    let stored = store
        .read_cursor(name)
        .await
        .map_err(store_error("read cursor"))?;
    // A cursor never written: scans start `cold_start` back, as the workers' do.
    let cursor = if stored > 0 {
        stored
    } else {
        now - micros(config.cold_start)
    };
    let index = queue.read_index(cursor, INDEX_READS).await?;
    let dead_ids = store
        .list_dead(name, "", DEAD_PAGE)
        .await
        .map_err(store_error("list dead letters"))?;
    let complete = index.complete && dead_ids.len() < DEAD_PAGE as usize;
    let counts = QueueStats::from_entries(index.entries, now);
    Ok(Summary {
        available: counts.available,
        scheduled: counts.scheduled,
        running: counts.running,
        dead: dead_ids.len() as u64,
        oldest_available_age: counts.oldest_available_age,
        cursor_lag: (stored > 0)
            .then(|| Duration::from_micros(u64::try_from(now - stored).unwrap_or(0))),
        complete,
        dead_ids,
    })
}

/// The first [`DEAD_SHOWN`] of `ids` with their attempts and errors: one plain item read
/// each. Ids whose item is no dead letter any more (requeued meanwhile) are left out; unlike
/// [`WorkQueue::dead_letters`] nothing is deleted (the dashboard reads only).
///
/// # Errors
/// A read failed.
pub async fn letters(queue: &WorkQueue, ids: &[ItemId]) -> Result<Vec<Letter>, QueueError> {
    let reads = ids.iter().take(DEAD_SHOWN).map(|id| async move {
        let item = queue
            .store()
            .peek(&cql_workqueue::ItemKey {
                partition: queue.name().to_owned(),
                id: id.clone(),
            })
            .await
            .map_err(store_error("read dead letter"))?;
        Ok::<_, QueueError>(item.filter(|i| i.state == JobState::Discarded).map(|item| {
            let payload = String::from_utf8_lossy(&item.payload);
            Letter {
                id: id.clone(),
                attempts: item.attempt,
                last_error: item.last_error,
                payload: payload.chars().take(200).collect(),
            }
        }))
    });
    let read = futures::future::try_join_all(reads).await?;
    Ok(read.into_iter().flatten().collect())
}

/// Whether `id` has the form of an item id: `{20 digits}-{32 hex digits}` (a plain item) or
/// `u:{key}` (a unique job, key of 1 to [`cql_workqueue::MAX_UNIQUE_KEY_LEN`] bytes with no
/// control characters).
pub fn well_formed_id(id: &str) -> bool {
    if let Some(key) = id.strip_prefix("u:") {
        return !key.is_empty()
            && key.len() <= cql_workqueue::MAX_UNIQUE_KEY_LEN
            && !key.chars().any(char::is_control);
    }
    match id.split_once('-') {
        Some((micros, uuid)) => {
            micros.len() == 20
                && micros.bytes().all(|b| b.is_ascii_digit())
                && uuid.len() == 32
                && uuid.bytes().all(|b| b.is_ascii_hexdigit())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids are checked for their two forms before anything is sent for them.
    #[test]
    fn only_item_ids_of_the_two_stored_forms_are_well_formed() {
        assert!(well_formed_id(
            "00001700000000000000-0123456789abcdef0123456789abcdef"
        ));
        assert!(well_formed_id("u:nightly-report"));
        for bad in [
            "",
            "u:",
            "x",
            "123-abc",
            "00001700000000000000-0123456789abcdef0123456789abcdeg",
            "u:a\nb",
        ] {
            assert!(!well_formed_id(bad), "{bad:?}");
        }
        assert!(!well_formed_id(&format!("u:{}", "k".repeat(300))));
    }
}
