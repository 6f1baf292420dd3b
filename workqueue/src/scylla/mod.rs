//! The ScyllaDB / Cassandra backend of the work queue, over the `scylla` driver.
//!
//! It shares [`cql_lease::scylla::ScyllaOptions`] (keyspace, consistency levels, timeouts)
//! with the lease store; its table defaults to `work_items`. Statements and the table layout
//! are in [`cql`].

pub mod cql;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::scylla::{
    Kind, LwtRow, PROBE_KEY, SchemaError, ScyllaOptions, check_lwt_support, classify, lwt_batch,
    prepare,
};
use cql_lease::{CasOutcome, StoreError};
use scylla::client::session::Session;
use scylla::statement::batch::Batch;
use scylla::statement::prepared::PreparedStatement;
use tracing::instrument;

use crate::item::{ItemId, ItemKey, JobState, StoredItem};
use crate::store::{ClaimOutcome, ItemClaim, QueueStore, Reschedule};

/// The default table name.
pub const DEFAULT_TABLE: &str = "work_items";

/// Work-queue store on a `scylla` [`Session`]; statements are prepared once, in [`Self::new`].
///
/// ```no_run
/// use std::sync::Arc;
/// use cql_lease::scylla::ScyllaOptions;
/// use cql_workqueue::scylla::{DEFAULT_TABLE, ScyllaQueueStore};
/// use cql_workqueue::{QueueConfig, WorkQueue};
/// use scylla::client::session_builder::SessionBuilder;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let session = Arc::new(SessionBuilder::new().known_node("127.0.0.1:9042").build().await?);
/// let options = ScyllaOptions { table: DEFAULT_TABLE.into(), ..ScyllaOptions::default() };
/// ScyllaQueueStore::create_schema(&session, &options).await?;
/// let store = ScyllaQueueStore::new(session, options).await?;
/// let queue = WorkQueue::new(Arc::new(store), "emails", QueueConfig::default())?;
/// # let _ = queue;
/// # Ok(())
/// # }
/// ```
pub struct ScyllaQueueStore {
    session: Arc<Session>,
    enqueue: PreparedStatement,
    scan: PreparedStatement,
    claim: Batch,
    heartbeat: PreparedStatement,
    complete: PreparedStatement,
    reschedule: PreparedStatement,
    unclaim: PreparedStatement,
    read: PreparedStatement,
}

impl std::fmt::Debug for ScyllaQueueStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScyllaQueueStore").finish_non_exhaustive()
    }
}

type ItemRow = (
    String,
    Option<String>,
    Option<String>,
    Option<i32>,
    Option<String>,
    Option<i64>,
    Option<String>,
);

impl ScyllaQueueStore {
    /// Creates the keyspace and the item table named by `options` if missing.
    pub async fn create_schema(
        session: &Session,
        options: &ScyllaOptions,
    ) -> Result<(), SchemaError> {
        options.create_schema_with(session, cql::CREATE_TABLE).await
    }

    /// Prepares every statement against the existing table and checks that the keyspace
    /// accepts LWTs.
    ///
    /// # Errors
    ///
    /// [`SchemaError::InvalidArgument`] for bad options; [`SchemaError::Store`] when a
    /// statement cannot be prepared; [`SchemaError::LwtsRejectedByTablets`] when the keyspace
    /// uses ScyllaDB tablets on a version that refuses LWTs on them (6.0 to 2025.3).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only prepares and reads.
    pub async fn new(session: Arc<Session>, options: ScyllaOptions) -> Result<Self, SchemaError> {
        options.validate()?;
        let p = |template: &'static str, kind: Kind| prepare(&session, &options, template, kind);
        let read = p(cql::READ, Kind::SerialRead).await?;
        check_lwt_support(&session, &options, || async {
            session
                .execute_unpaged(&read, (PROBE_KEY, PROBE_KEY))
                .await
                .map(|_| ())
        })
        .await?;
        let claim = lwt_batch(
            &options,
            [
                p(cql::CLAIM_LEASE, Kind::Lwt).await?,
                p(cql::CLAIM_MARK, Kind::Lwt).await?,
            ],
        );
        Ok(ScyllaQueueStore {
            enqueue: p(cql::ENQUEUE, Kind::Lwt).await?,
            scan: p(cql::SCAN, Kind::Read).await?,
            claim,
            heartbeat: p(cql::HEARTBEAT, Kind::Lwt).await?,
            complete: p(cql::COMPLETE, Kind::Lwt).await?,
            reschedule: p(cql::RESCHEDULE, Kind::Lwt).await?,
            unclaim: p(cql::UNCLAIM, Kind::Lwt).await?,
            read,
            session,
        })
    }

    async fn cas(
        &self,
        statement: &PreparedStatement,
        values: impl scylla::serialize::row::SerializeRow,
    ) -> Result<CasOutcome, StoreError> {
        let result = self
            .session
            .execute_unpaged(statement, values)
            .await
            .map_err(|e| classify(e, true))?;
        Ok(if LwtRow::parse(result)?.applied {
            CasOutcome::Applied
        } else {
            CasOutcome::NotApplied
        })
    }

    async fn rows(
        &self,
        statement: &PreparedStatement,
        values: impl scylla::serialize::row::SerializeRow,
        partition: &str,
    ) -> Result<Vec<StoredItem>, StoreError> {
        let result = self
            .session
            .execute_unpaged(statement, values)
            .await
            .map_err(|e| classify(e, false))?;
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Unavailable(format!("read answered without rows: {e}")))?;
        let rows = rows
            .rows::<ItemRow>()
            .map_err(|e| StoreError::Unavailable(format!("unreadable rows: {e}")))?;
        let mut items = Vec::new();
        for row in rows {
            let (id, payload, state, attempt, claim, run_at, last_error) =
                row.map_err(|e| StoreError::Unavailable(format!("unreadable row: {e}")))?;
            // A row without a state is not an item (cannot happen: every write sets it).
            let Some(state) = state.as_deref().and_then(JobState::parse) else {
                continue;
            };
            items.push(StoredItem {
                key: ItemKey {
                    partition: partition.to_owned(),
                    id: ItemId::from_stored(id),
                },
                payload: payload.unwrap_or_default(),
                state,
                attempt: attempt.unwrap_or_default(),
                claim,
                run_at: run_at.unwrap_or_default(),
                last_error,
            });
        }
        Ok(items)
    }
}

fn ttl_secs(ttl: Duration) -> i32 {
    i32::try_from(ttl.as_secs()).unwrap_or(i32::MAX)
}

#[async_trait]
impl QueueStore for ScyllaQueueStore {
    #[instrument(level = "debug", skip(self, payload), fields(partition = %key.partition, id = %key.id))]
    async fn enqueue(
        &self,
        key: &ItemKey,
        payload: &str,
        run_at: i64,
    ) -> Result<CasOutcome, StoreError> {
        let values = (&key.partition, key.id.as_str(), payload, run_at);
        self.cas(&self.enqueue, values).await
    }

    #[instrument(level = "debug", skip(self))]
    async fn scan(
        &self,
        partition: &str,
        after: &str,
        limit: u32,
    ) -> Result<Vec<StoredItem>, StoreError> {
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        self.rows(&self.scan, (partition, after, limit), partition)
            .await
    }

    #[instrument(level = "debug", skip(self, claim), fields(partition = %claim.key.partition, id = %claim.key.id))]
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        let (part, id) = (&claim.key.partition, claim.key.id.as_str());
        let values = (
            (
                ttl_secs(claim.ttl),
                claim.claim_id,
                part,
                id,
                claim.seen_attempt,
            ),
            (claim.seen_attempt.saturating_add(1), part, id),
        );
        let result = self
            .session
            .batch(&self.claim, values)
            .await
            .map_err(|e| classify(e, true))?;
        Ok(if LwtRow::parse(result)?.applied {
            ClaimOutcome::Claimed
        } else {
            ClaimOutcome::Lost
        })
    }

    #[instrument(level = "debug", skip(self), fields(partition = %key.partition, id = %key.id))]
    async fn heartbeat(
        &self,
        key: &ItemKey,
        claim_id: &str,
        ttl: Duration,
    ) -> Result<CasOutcome, StoreError> {
        let values = (
            ttl_secs(ttl),
            claim_id,
            &key.partition,
            key.id.as_str(),
            claim_id,
        );
        self.cas(&self.heartbeat, values).await
    }

    #[instrument(level = "debug", skip(self), fields(partition = %key.partition, id = %key.id))]
    async fn complete(&self, key: &ItemKey, claim_id: &str) -> Result<CasOutcome, StoreError> {
        self.cas(&self.complete, (&key.partition, key.id.as_str(), claim_id))
            .await
    }

    #[instrument(level = "debug", skip(self, to), fields(partition = %key.partition, id = %key.id, state = ?to.state))]
    async fn reschedule(
        &self,
        key: &ItemKey,
        claim_id: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        let values = (
            to.state.as_str(),
            to.run_at,
            to.error,
            &key.partition,
            key.id.as_str(),
            claim_id,
        );
        self.cas(&self.reschedule, values).await
    }

    #[instrument(level = "debug", skip(self), fields(partition = %key.partition, id = %key.id))]
    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        state: JobState,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let values = (
            state.as_str(),
            attempt,
            &key.partition,
            key.id.as_str(),
            claim_id,
        );
        self.cas(&self.unclaim, values).await
    }

    #[instrument(level = "debug", skip(self), fields(partition = %key.partition, id = %key.id))]
    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        let items = self
            .rows(
                &self.read,
                (&key.partition, key.id.as_str()),
                &key.partition,
            )
            .await?;
        Ok(items.into_iter().next())
    }
}
