//! The bakery mode's item rows on scylla: one plain `INSERT ... USING TIMESTAMP` per write,
//! one plain read, at the cells' consistency ([`ScyllaOptions::cells_consistency`]: QUORUM by
//! default, and for `LOCAL_QUORUM` under `SERIAL`).

use std::sync::Arc;

use async_trait::async_trait;
use cql_lease::StoreError;
use cql_lease::scylla::{Kind, SchemaError, ScyllaOptions, classify, prepare};
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use tracing::instrument;

use super::{cql, row_key};
use crate::bakery::PlainItemStore;
use crate::item::{ItemKey, JobState, StoredItem};

/// Plain item rows in `{table}_plain`.
pub(super) struct ScyllaPlainItems {
    session: Arc<Session>,
    write: PreparedStatement,
    read: PreparedStatement,
}

impl ScyllaPlainItems {
    pub(super) async fn new(
        session: Arc<Session>,
        options: &ScyllaOptions,
    ) -> Result<Self, SchemaError> {
        // These rows carry the mode's fencing (a write lands only over a lower attempt), so
        // every read must meet every write, across data centres too: the cells' level.
        let options = ScyllaOptions {
            consistency: options.cells_consistency(),
            ..options.clone()
        };
        // Sent again with the same timestamp after a lost answer: idempotent, as a read is.
        Ok(ScyllaPlainItems {
            write: prepare(&session, &options, cql::WRITE_PLAIN, Kind::Read).await?,
            read: prepare(&session, &options, cql::READ_PLAIN, Kind::Read).await?,
            session,
        })
    }
}

type PlainRow = (
    Option<Vec<u8>>,
    Option<String>,
    Option<i32>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i32>,
    Option<i64>,
);

#[async_trait]
impl PlainItemStore for ScyllaPlainItems {
    #[instrument(level = "debug", skip(self, item), fields(id = %item.key.id))]
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        let values = (
            row_key(&item.key),
            item.payload.as_slice(),
            item.state.as_str(),
            item.attempt,
            item.run_at,
            item.last_error.as_deref(),
            item.origin.as_str(),
            item.requeued_at,
            ts,
            ts,
        );
        self.session
            .execute_unpaged(&self.write, values)
            .await
            .map_err(|e| classify(e, true))?;
        Ok(())
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        let result = self
            .session
            .execute_unpaged(&self.read, (row_key(key),))
            .await
            .map_err(|e| classify(e, false))?;
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Unknown(format!("plain item read: {e}")))?;
        let mut rows = rows
            .rows::<PlainRow>()
            .map_err(|e| StoreError::Unknown(format!("plain item row: {e}")))?;
        let Some(row) = rows.next() else {
            return Ok(None);
        };
        let (payload, state, attempt, run_at, last_error, origin, requeued_at, stamp) =
            row.map_err(|e| StoreError::Unknown(format!("plain item row: {e}")))?;
        let state = JobState::parse(state.as_deref())
            .ok_or_else(|| StoreError::Unknown("plain item row: bad state".into()))?;
        let item = StoredItem {
            key: key.clone(),
            payload: payload.unwrap_or_default(),
            state,
            attempt: attempt.unwrap_or(0),
            claim: None,
            run_at: run_at.unwrap_or(0),
            last_error,
            origin: origin.unwrap_or_default(),
            requeued_at: requeued_at.unwrap_or(0),
        };
        Ok(Some((item, stamp.unwrap_or(0))))
    }
}
