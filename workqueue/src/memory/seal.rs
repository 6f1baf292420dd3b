//! [`QueueStore::seal`](crate::store::QueueStore::seal) on the embedded store: the fences index
//! upkeep puts up before deleting an item's last entry.

use cql_lease::{CasOutcome, StoreError};

use super::MemoryQueueStore;
use super::calls::{QueueOp, count_lwt};
use super::tables::Row;
use crate::item::{ItemKey, JobState, StoredItem};
use crate::store::{SWEPT, Seal};

impl MemoryQueueStore {
    /// An empty done row if none exists (counted as an enqueue LWT, which it refuses).
    async fn seal_absent(&self, key: &ItemKey) -> Result<CasOutcome, StoreError> {
        self.call(QueueOp::Enqueue, |tables, counter, now| {
            count_lwt(counter, QueueOp::Enqueue, key);
            let slot = (key.partition.clone(), key.id.clone());
            if tables.items.contains_key(&slot) {
                return CasOutcome::NotApplied;
            }
            let item = StoredItem {
                key: key.clone(),
                payload: Vec::new(),
                state: JobState::Done,
                attempt: 0,
                claim: None,
                run_at: crate::store::AT_ONCE,
                last_error: None,
                origin: SWEPT.to_owned(),
                requeued_at: 0,
            };
            // Its state cell already expired, as a done marker past its retention.
            let row = Row {
                item,
                claim_expires_at: None,
                done_expires_at: Some(now),
            };
            tables.items.insert(slot, row);
            CasOutcome::Applied
        })
        .await
    }

    /// A row's attempt number raised by one if it is still as seen (counted as the LWT it
    /// refuses: a revival, or a requeue).
    pub(super) async fn seal_row(
        &self,
        key: &ItemKey,
        seen: Seal<'_>,
    ) -> Result<CasOutcome, StoreError> {
        let (op, attempt) = match seen {
            Seal::Absent => return self.seal_absent(key).await,
            Seal::Done { attempt, .. } => (QueueOp::Revive, attempt),
            Seal::Discarded { attempt } => (QueueOp::Reschedule, attempt),
        };
        self.lwt(
            op,
            key,
            |row, _| match seen {
                Seal::Done { origin, .. } => {
                    row.item.attempt == attempt && row.item.origin == origin
                }
                _ => row.item.state == JobState::Discarded && row.item.attempt == attempt,
            },
            |row, _| row.item.attempt = attempt.saturating_add(1),
        )
        .await
    }
}
