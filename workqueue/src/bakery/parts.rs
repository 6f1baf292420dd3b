//! What a backend provides for the bakery claim mode: item rows written only with plain
//! writes, and a plain cell store for the bakery's choosing/number cells.

use std::sync::Arc;

use async_trait::async_trait;
use cql_lease::StoreError;
use cql_lease::cells::CellStore;

use crate::item::{ItemKey, StoredItem};

/// Item rows for the bakery claim mode: a table of their own, written only with plain
/// (non-LWT) writes carrying client timestamps, read at the store's regular (QUORUM) level.
/// Object safe: use it as `Arc<dyn PlainItemStore>`.
#[async_trait]
pub trait PlainItemStore: Send + Sync + 'static {
    /// Writes every column of `item` (its `claim` is not stored) with client timestamp `ts`:
    /// per column, the write with the highest timestamp wins, as Cassandra does.
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError>;

    /// The row (its `claim` is `None`) and the client timestamp of the write it came from.
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError>;
}

/// A backend's parts for [`ClaimMode::Bakery`](crate::ClaimMode::Bakery).
#[derive(Clone)]
pub struct BakeryParts {
    /// The plain item rows.
    pub items: Arc<dyn PlainItemStore>,
    /// The bakery's cells (choosing, number, high-water mark) per item.
    pub cells: Arc<dyn CellStore>,
}

impl std::fmt::Debug for BakeryParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BakeryParts").finish_non_exhaustive()
    }
}
