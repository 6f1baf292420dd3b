//! ScyllaDB tablets: telling ScyllaDB from Cassandra, and refusing at start-up a keyspace
//! whose tables would refuse every LWT (ScyllaDB 6.0 to 2025.3 with tablets).

use std::future::Future;

use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::value::CqlValue;
use tracing::{debug, warn};

use super::cql;
use super::errors::classify;
use super::schema::{SchemaError, ScyllaOptions};

/// What the server answers to [`cql::SCYLLA_KEYSPACE`] for the keyspace: `None` on
/// Cassandra (no such table), `Some(tablets)` on ScyllaDB.
async fn keyspace_tablets(
    session: &Session,
    options: &ScyllaOptions,
) -> Result<Option<bool>, SchemaError> {
    options.validate()?; // the keyspace name goes into the text: a checked identifier only
    match session
        .query_unpaged(options.render(cql::SCYLLA_KEYSPACE), ())
        .await
    {
        Ok(result) => {
            let tablets = result
                .into_rows_result()
                .ok()
                .and_then(|rows| rows.maybe_first_row::<(Option<CqlValue>,)>().ok().flatten())
                .is_some_and(|(initial,)| initial.is_some());
            Ok(Some(tablets))
        }
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Invalid,
            _,
        ))) => Ok(None),
        Err(e) => Err(SchemaError::Store(classify(e, false))),
    }
}

/// Whether the cluster is ScyllaDB (it has `system_schema.scylla_keyspaces`).
pub(super) async fn is_scylla(
    session: &Session,
    options: &ScyllaOptions,
) -> Result<bool, SchemaError> {
    Ok(keyspace_tablets(session, options).await?.is_some())
}

/// Fails with [`SchemaError::LwtsRejectedByTablets`] when `options.keyspace` uses tablets
/// and a probing SERIAL read (`probe`, on the store's own table) is refused for it. The probe
/// is only sent for a tablets keyspace, so ScyllaDB 2025.4+ (LWTs on tablets) passes.
///
/// # Errors
///
/// [`SchemaError::LwtsRejectedByTablets`] as above; [`SchemaError::Store`] when the cluster
/// could not be asked.
///
/// # Cancel safety
///
/// Cancel-safe: it only reads.
pub async fn check_lwt_support<F, Fut>(
    session: &Session,
    options: &ScyllaOptions,
    probe: F,
) -> Result<(), SchemaError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<(), ExecutionError>>,
{
    if keyspace_tablets(session, options).await? != Some(true) {
        debug!(keyspace = %options.keyspace, "keyspace without tablets: LWTs supported");
        return Ok(());
    }
    match probe().await {
        Ok(()) => {
            debug!(keyspace = %options.keyspace, "tablets keyspace accepts LWTs");
            Ok(())
        }
        Err(e) if e.to_string().contains("not yet supported with tablets") => {
            warn!(keyspace = %options.keyspace, error = %e, "keyspace refuses LWTs");
            Err(SchemaError::LwtsRejectedByTablets {
                keyspace: options.keyspace.clone(),
                message: e.to_string(),
            })
        }
        Err(e) => Err(SchemaError::Store(classify(e, false))),
    }
}
