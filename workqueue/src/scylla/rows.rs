//! Decoding the rows the scylla backend reads.

use cql_lease::StoreError;
use scylla::response::query_result::QueryResult;

use crate::item::{EntryKind, IndexEntry, ItemId, ItemKey, JobState, StoredItem};

fn unreadable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("unreadable rows: {e}"))
}

type ItemRow = (
    String,
    Option<Vec<u8>>,
    Option<String>,
    Option<i32>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i32>,
);

pub(super) fn item(result: QueryResult, queue: &str) -> Result<Option<StoredItem>, StoreError> {
    let rows = result.into_rows_result().map_err(unreadable)?;
    let Some(row) = rows.maybe_first_row::<ItemRow>().map_err(unreadable)? else {
        return Ok(None);
    };
    let (row_key, payload, state, attempt, claim, run_at, last_error, origin, requeued_at) = row;
    let id = row_key
        .strip_prefix(queue)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(&row_key)
        .to_owned();
    let state = JobState::parse(state.as_deref())
        .ok_or_else(|| StoreError::Unavailable(format!("unknown state {state:?}")))?;
    Ok(Some(StoredItem {
        key: ItemKey {
            partition: queue.to_owned(),
            id: ItemId::from_stored(id),
        },
        payload: payload.unwrap_or_default(),
        state,
        attempt: attempt.unwrap_or_default(),
        claim,
        run_at: run_at.unwrap_or_default(),
        last_error,
        origin: origin.unwrap_or_default(),
        requeued_at: requeued_at.unwrap_or_default(),
    }))
}

type EntryRow = (
    String,
    Option<String>,
    Option<String>,
    Option<bool>,
    Option<i32>,
);

pub(super) fn entries(result: QueryResult, bucket: i64) -> Result<Vec<IndexEntry>, StoreError> {
    let rows = result.into_rows_result().map_err(unreadable)?;
    let mut entries = Vec::new();
    for row in rows.rows::<EntryRow>().map_err(unreadable)? {
        let (seq, id, kind, immediate, attempt) = row.map_err(unreadable)?;
        let pos = seq.get(..20).and_then(|p| p.parse::<i64>().ok());
        let kind = kind.as_deref().and_then(EntryKind::parse);
        let (Some(pos), Some(kind), Some(id)) = (pos, kind, id) else {
            continue; // not an entry this code wrote
        };
        entries.push(IndexEntry {
            bucket,
            seq,
            id: ItemId::from_stored(id),
            pos,
            kind,
            immediate: immediate.unwrap_or(false),
            attempt: attempt.unwrap_or_default(),
        });
    }
    Ok(entries)
}

pub(super) fn cursor(result: QueryResult) -> Result<i64, StoreError> {
    let rows = result.into_rows_result().map_err(unreadable)?;
    Ok(rows
        .maybe_first_row::<(Option<i64>,)>()
        .map_err(unreadable)?
        .and_then(|(pos,)| pos)
        .unwrap_or(0))
}

pub(super) fn ids(result: QueryResult) -> Result<Vec<ItemId>, StoreError> {
    let rows = result.into_rows_result().map_err(unreadable)?;
    let mut ids = Vec::new();
    for row in rows.rows::<(String,)>().map_err(unreadable)? {
        ids.push(ItemId::from_stored(row.map_err(unreadable)?.0));
    }
    Ok(ids)
}

pub(super) fn buckets(result: QueryResult) -> Result<Vec<i64>, StoreError> {
    let rows = result.into_rows_result().map_err(unreadable)?;
    let mut buckets = Vec::new();
    for row in rows.rows::<(i64,)>().map_err(unreadable)? {
        buckets.push(row.map_err(unreadable)?.0);
    }
    Ok(buckets)
}
