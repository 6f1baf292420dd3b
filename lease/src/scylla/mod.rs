//! The ScyllaDB / Cassandra backend, over the `scylla` driver.
//!
//! Statements are in [`cql`], with the table layout and the reasoning behind the token
//! guarantee. Every write is an LWT (`IF ...`), so no cell is written both with and without
//! Paxos. LWTs are marked non-idempotent and never retried by the driver: a lost answer comes
//! back as [`StoreError::Unknown`] and the lease layer resolves it with a SERIAL read.

pub mod cql;
mod errors;
mod rotation;
mod schema;
mod statement;
pub mod suspects;
mod tablets;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use scylla::client::session::Session;
use scylla::statement::batch::Batch;
use scylla::statement::prepared::PreparedStatement;
use tracing::{debug, instrument, warn};

pub use errors::classify;
pub use schema::{Replication, SchemaError, ScyllaOptions, TableSchema, WAITING_SUFFIX};
pub(crate) use statement::read_routing;
pub use statement::{Kind, LwtRouting, LwtRow, lwt_batch, plain_batch, prepare};
pub use tablets::{PROBE_KEY, check_lwt_support};

use crate::cells::CellStore;
use crate::cells::scylla::ScyllaCellStore;
use crate::error::StoreError;
use crate::fencing::FencingToken;
use crate::store::{AcquireOutcome, CasOutcome, Claim, LeaseStore, StoredLease};

/// Rounds of a claim while the lease is seen free but the proposed token was not above the
/// stored one (a brand-new name, or a proposer whose clock is behind the last token).
const MAX_CLAIM_ROUNDS: usize = 4;

/// Lease store on a `scylla` [`Session`]; all statements are prepared once, in [`Self::new`].
///
/// ```no_run
/// use std::sync::Arc;
/// use cql_lease::scylla::{ScyllaLeaseStore, ScyllaOptions};
/// use cql_lease::{LeaseClient, Timing};
/// use scylla::client::session_builder::SessionBuilder;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let session = Arc::new(SessionBuilder::new().known_node("127.0.0.1:9042").build().await?);
/// let options = ScyllaOptions::default();
/// options.create_schema(&session).await?;
/// let store = ScyllaLeaseStore::new(session, options).await?;
/// let client = LeaseClient::new(Arc::new(store), Timing::default())?;
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
pub struct ScyllaLeaseStore {
    session: Arc<Session>,
    proposal_clock: fn() -> i64,
    claim_above: Batch,
    claim_exact: Batch,
    renew: PreparedStatement,
    release: PreparedStatement,
    hand_over: Batch,
    read: PreparedStatement,
    peek: PreparedStatement,
    waiting: Option<Arc<ScyllaCellStore>>,
}

impl std::fmt::Debug for ScyllaLeaseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScyllaLeaseStore").finish_non_exhaustive()
    }
}

impl ScyllaLeaseStore {
    /// Prepares every statement against the existing table (see
    /// [`ScyllaOptions::create_schema`]) and checks that the keyspace accepts LWTs.
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
        let prepare =
            |template: &'static str, kind: Kind| prepare(&session, &options, template, kind);
        let read = prepare(cql::READ, Kind::SerialRead).await?;
        check_lwt_support(&session, &options, || async {
            session
                .execute_unpaged(&read, (tablets::PROBE_KEY,))
                .await
                .map(|_| ())
        })
        .await?;
        let set_fence = prepare(cql::SET_FENCE, Kind::Lwt).await?;
        let claim_batch =
            |claim: PreparedStatement| lwt_batch(&options, [claim, set_fence.clone()]);
        Ok(ScyllaLeaseStore {
            proposal_clock: wall_micros,
            claim_above: claim_batch(prepare(cql::CLAIM_ABOVE, Kind::Lwt).await?),
            claim_exact: claim_batch(prepare(cql::CLAIM_EXACT, Kind::Lwt).await?),
            renew: prepare(cql::RENEW, Kind::Lwt).await?,
            release: prepare(cql::RELEASE, Kind::Lwt).await?,
            hand_over: claim_batch(prepare(cql::HAND_OVER, Kind::Lwt).await?),
            read,
            peek: prepare(cql::PEEK, Kind::Read).await?,
            waiting: waiting_line(&session, &options).await,
            session,
        })
    }
}

impl ScyllaLeaseStore {
    /// Replaces the clock token proposals come from (microseconds since the epoch by
    /// default). The order of tokens never depends on it, only the number of rounds does; tests
    /// use a clock far behind to prove it.
    pub fn with_proposal_clock(mut self, clock: fn() -> i64) -> Self {
        self.proposal_clock = clock;
        self
    }
}

/// The waiting line's store, or none (with a warning) where its table cannot be used: a
/// schema created before the line existed, or a table name too long for the suffix. Leases
/// work without it; only waiting costs more Paxos rounds.
async fn waiting_line(
    session: &Arc<Session>,
    options: &ScyllaOptions,
) -> Option<Arc<ScyllaCellStore>> {
    let waiting = options.waiting_line();
    match ScyllaCellStore::new(Arc::clone(session), waiting.clone()).await {
        Ok(store) => Some(Arc::new(store)),
        Err(error) => {
            warn!(
                table = %waiting.location.table,
                %error,
                "no waiting line (run ScyllaOptions::create_schema to create its table): \
                 waiters on a lease will each propose when it reads free"
            );
            None
        }
    }
}

fn ttl_secs(ttl: Duration) -> i32 {
    i32::try_from(ttl.as_secs()).unwrap_or(i32::MAX)
}

/// Microseconds since the Unix epoch: only a proposal for the next token. The LWT condition,
/// not the clock, guarantees the order; a clock behind costs one more round.
fn wall_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(1)
}

#[async_trait]
impl LeaseStore for ScyllaLeaseStore {
    #[instrument(level = "debug", skip(self, claim), fields(lease = claim.name, owner = claim.owner))]
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        let ttl = ttl_secs(claim.ttl);
        let mut proposal = (self.proposal_clock)();
        // `None`: claim above `proposal`; `Some(x)`: claim only if the stored token is `x`.
        let mut exact: Option<Option<i64>> = None;
        for round in 0..MAX_CLAIM_ROUNDS {
            let (batch, condition, token) = match exact {
                None => (&self.claim_above, Some(proposal), proposal),
                Some(stored) => (&self.claim_exact, stored, proposal),
            };
            let values = (
                (
                    ttl,
                    claim.holder_id,
                    claim.owner,
                    claim.value,
                    ttl,
                    claim.name,
                    condition,
                ),
                (token, claim.name),
            );
            let result = self
                .session
                .batch(batch, values)
                .await
                .map_err(|e| classify(e, true))?;
            let row = LwtRow::parse(result)?;
            debug!(round, applied = row.applied, token, "claim");
            if row.applied {
                return Ok(AcquireOutcome::Acquired {
                    token: FencingToken::new(token),
                });
            }
            if let Some(holder_id) = row.text("holder") {
                return Ok(AcquireOutcome::Held(stored_lease(
                    holder_id,
                    row.text("owner"),
                    row.text("value"),
                    row.bigint("fence"),
                    row.int("lease_ttl"),
                )));
            }
            // Free, but the proposal was not above the stored token (or there is none yet).
            match row.bigint("fence") {
                Some(stored) => {
                    proposal = (self.proposal_clock)().max(stored.saturating_add(1));
                    exact = None;
                }
                None => exact = Some(None),
            }
        }
        Err(StoreError::Unavailable(format!(
            "lease {:?} stayed free but {MAX_CLAIM_ROUNDS} claims lost races",
            claim.name
        )))
    }

    #[instrument(level = "debug", skip(self, claim), fields(lease = claim.name))]
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        let ttl = ttl_secs(claim.ttl);
        let values = (
            ttl,
            claim.holder_id,
            claim.owner,
            claim.value,
            ttl,
            claim.name,
            claim.holder_id,
        );
        let result = self
            .session
            .execute_unpaged(&self.renew, values)
            .await
            .map_err(|e| classify(e, true))?;
        Ok(cas_outcome(LwtRow::parse(result)?))
    }

    #[instrument(level = "debug", skip(self))]
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        let result = self
            .session
            .execute_unpaged(&self.release, (name, holder_id))
            .await
            .map_err(|e| classify(e, true))?;
        Ok(cas_outcome(LwtRow::parse(result)?))
    }

    #[instrument(level = "debug", skip(self, to), fields(lease = to.name, owner = to.owner))]
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        let ttl = ttl_secs(to.ttl);
        let Some(above) = from_token.get().checked_add(1) else {
            return Err(StoreError::Rejected(format!(
                "lease {:?}: no token above {from_token}",
                to.name
            )));
        };
        let token = (self.proposal_clock)().max(above);
        let values = (
            (
                ttl,
                to.holder_id,
                to.owner,
                to.value,
                ttl,
                to.name,
                from_holder_id,
                from_token.get(),
            ),
            (token, to.name),
        );
        let result = self
            .session
            .batch(&self.hand_over, values)
            .await
            .map_err(|e| classify(e, true))?;
        let row = LwtRow::parse(result)?;
        debug!(applied = row.applied, token, "hand-over");
        Ok(row.applied.then(|| FencingToken::new(token)))
    }

    #[instrument(level = "debug", skip(self))]
    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.select(&self.read, name).await
    }

    #[instrument(level = "debug", skip(self))]
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.select(&self.peek, name).await
    }

    fn waiting_line(&self) -> Option<Arc<dyn CellStore>> {
        self.waiting
            .clone()
            .map(|waiting| waiting as Arc<dyn CellStore>)
    }
}

impl ScyllaLeaseStore {
    /// Runs [`cql::READ`] or [`cql::PEEK`] (same columns) for `name`.
    async fn select(
        &self,
        statement: &PreparedStatement,
        name: &str,
    ) -> Result<Option<StoredLease>, StoreError> {
        type ReadRow = (
            Option<String>,
            Option<String>,
            Option<String>,
            Option<i64>,
            Option<i32>,
        );
        let result = self
            .session
            .execute_unpaged(statement, (name,))
            .await
            .map_err(|e| classify(e, false))?;
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Unavailable(format!("read answered without rows: {e}")))?;
        let row: Option<ReadRow> = rows
            .maybe_first_row()
            .map_err(|e| StoreError::Unavailable(format!("unreadable row: {e}")))?;
        Ok(row.and_then(|(holder, owner, value, fence, ttl)| {
            Some(stored_lease(holder?, owner, value, fence, ttl))
        }))
    }
}

/// A held lease from its columns; `ttl_secs` is a TTL in seconds (written or remaining).
fn stored_lease(
    holder_id: String,
    owner: Option<String>,
    value: Option<String>,
    fence: Option<i64>,
    ttl_secs: Option<i32>,
) -> StoredLease {
    StoredLease {
        holder_id,
        owner: owner.unwrap_or_default(),
        value,
        token: FencingToken::new(fence.unwrap_or_default()),
        expires_within: Duration::from_secs(
            u64::try_from(ttl_secs.unwrap_or_default()).unwrap_or_default(),
        ),
    }
}

fn cas_outcome(row: LwtRow) -> CasOutcome {
    if row.applied {
        CasOutcome::Applied
    } else {
        CasOutcome::NotApplied
    }
}
