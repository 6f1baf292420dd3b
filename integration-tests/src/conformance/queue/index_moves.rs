//! An index entry moved within its bucket (a claim's check entry taking the place of the
//! entry the item was found by): one request that lands whole or not at all.

use cql_workqueue::store::{EntryKind, IndexEntry};
use cql_workqueue::{ItemId, clock};

use super::{queue_config, queue_store};
use crate::backend::Backend;

/// `QueueStore::move_entry` writes the new entry and deletes the old one of the same bucket
/// in one request (a single-partition batch on CQL): afterwards the bucket holds only the
/// new entry.
pub async fn entry_moves_in_one_request(b: &dyn Backend) {
    let store = queue_store(b);
    let width = i64::try_from(queue_config().bucket_width.as_micros()).expect("width");
    // Both positions in one bucket, whatever the time.
    let start = clock::now_micros() / width * width;
    let id = ItemId::unique("moved");
    let old = IndexEntry::new(id.clone(), start + 1, EntryKind::Run, true, 0, width);
    let new = IndexEntry::new(id, start + 2, EntryKind::Check, false, 1, width);
    assert_eq!(old.bucket, new.bucket);
    store
        .put_entry("moves", &old, clock::next_micros())
        .await
        .expect("put");
    let before = b.queue_counts();
    let (ts, delete_ts) = (clock::next_micros(), clock::next_micros());
    let moved = store
        .move_entry("moves", &new, &old.seq, ts, delete_ts)
        .await
        .expect("move");
    assert!(moved, "every backend moves an entry in one request");
    if let (Some(before), Some(after)) = (before, b.queue_counts()) {
        assert_eq!(
            after.plain_writes - before.plain_writes,
            1,
            "one write request for the move"
        );
    }
    let live = store
        .scan_index("moves", new.bucket, "", "~", 10)
        .await
        .expect("scan");
    assert_eq!(live, vec![new], "only the new entry stands");
}
