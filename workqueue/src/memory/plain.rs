//! The embedded store's plain item rows for the bakery claim mode: last write wins by
//! client timestamp, with faults and a round-trip count.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use cql_lease::StoreError;
use cql_lease::memory::{Fault, FaultRules, Times};
use tracing::{debug, instrument};

use crate::bakery::PlainItemStore;
use crate::item::{ItemKey, StoredItem};

/// A plain item-row operation, for aiming faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlainOp {
    /// [`PlainItemStore::write_item`]
    Write,
    /// [`PlainItemStore::read_item`]
    Read,
}

/// In-process plain item rows (see [`PlainItemStore`]).
#[derive(Debug, Default)]
pub struct MemoryPlainItems {
    rows: Mutex<HashMap<(String, String), (StoredItem, i64)>>,
    faults: FaultRules<PlainOp>,
    calls: [AtomicU64; 2],
}

impl MemoryPlainItems {
    /// Adds a fault rule for `op` (all operations when `None`).
    pub fn inject(&self, op: Option<PlainOp>, fault: Fault, times: Times) {
        debug!(?op, ?fault, ?times, "plain item fault injected");
        self.faults.add(op, fault, times);
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.faults.clear();
    }

    /// Calls served so far: `(writes, reads)`.
    pub fn calls(&self) -> (u64, u64) {
        (
            self.calls[0].load(Ordering::Relaxed),
            self.calls[1].load(Ordering::Relaxed),
        )
    }

    fn slot(key: &ItemKey) -> (String, String) {
        (key.partition.clone(), key.id.as_str().to_owned())
    }
}

#[async_trait]
impl PlainItemStore for MemoryPlainItems {
    #[instrument(level = "debug", skip(self, item), fields(id = %item.key.id))]
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        self.calls[0].fetch_add(1, Ordering::Relaxed);
        self.faults
            .around(PlainOp::Write, || {
                let mut rows = self
                    .rows
                    .lock()
                    .map_err(|_| StoreError::Unavailable("plain rows lock poisoned".into()))?;
                let slot = Self::slot(&item.key);
                let mut stored = item.clone();
                stored.claim = None;
                match rows.get(&slot) {
                    Some((_, seen)) if *seen > ts => {}
                    _ => {
                        rows.insert(slot, (stored, ts));
                    }
                }
                Ok(())
            })
            .await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.calls[1].fetch_add(1, Ordering::Relaxed);
        self.faults
            .around(PlainOp::Read, || {
                let rows = self
                    .rows
                    .lock()
                    .map_err(|_| StoreError::Unavailable("plain rows lock poisoned".into()))?;
                Ok(rows.get(&Self::slot(key)).cloned())
            })
            .await
    }
}
