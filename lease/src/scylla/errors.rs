//! Maps driver errors onto what the lease layer needs to know: applied, not, or unknown.

use scylla::errors::{DbError, ExecutionError, RequestAttemptError};

use crate::error::StoreError;

/// Classifies a driver error. For a write, anything that may have reached a coordinator is
/// [`StoreError::Unknown`]: a CAS can time out after its proposal was accepted, and even an
/// `Unavailable` can come from the commit phase of a round that will later be completed.
pub fn classify(error: ExecutionError, is_write: bool) -> StoreError {
    let text = error.to_string();
    match &error {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, _)) => match db {
            DbError::SyntaxError
            | DbError::Invalid
            | DbError::AlreadyExists { .. }
            | DbError::Unauthorized
            | DbError::AuthenticationError
            | DbError::ConfigError
            | DbError::ProtocolError
            | DbError::FunctionFailure { .. } => StoreError::Rejected(text),
            DbError::Unprepared { .. } | DbError::IsBootstrapping if !is_write => {
                StoreError::Unavailable(text)
            }
            _ if is_write => StoreError::Unknown(text),
            _ => StoreError::Unavailable(text),
        },
        // Never sent: no node, no connection, or the request could not be built.
        ExecutionError::EmptyPlan
        | ExecutionError::ConnectionPoolError(_)
        | ExecutionError::BadQuery(_)
        | ExecutionError::PrepareError(_) => StoreError::Unavailable(text),
        _ if is_write => StoreError::Unknown(text),
        _ => StoreError::Unavailable(text),
    }
}
