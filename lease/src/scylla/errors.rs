//! Maps driver errors onto what the lease layer needs to know: applied, not, or unknown.

use scylla::errors::{DbError, ExecutionError, RequestAttemptError};

use crate::error::StoreError;

/// Classifies a driver error. For a write, anything that may have reached a coordinator is
/// [`StoreError::Unknown`]: a CAS can time out after its proposal was accepted, and even an
/// `Unavailable` can come from the commit phase of a round that will later be completed.
///
/// Only errors raised before the request left this process, or refusals that say it was not
/// executed, are [`StoreError::Unavailable`] (a definite "not applied", so no read-back):
/// an empty query plan, a connection pool without a usable connection, no free stream id,
/// a request that could not be serialized, an unprepared statement, a bootstrapping node,
/// and a rate limit applied by the coordinator. LWTs are sent with a fall-through retry
/// policy, so the last attempt's error is the only attempt's error.
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
            // The coordinator refused before executing anything.
            DbError::Unprepared { .. } | DbError::IsBootstrapping => StoreError::Unavailable(text),
            DbError::RateLimitReached {
                rejected_by_coordinator: true,
                ..
            } => StoreError::Unavailable(text),
            _ if is_write => StoreError::Unknown(text),
            _ => StoreError::Unavailable(text),
        },
        // Never sent: no node, no connection, or the request could not be built.
        ExecutionError::EmptyPlan
        | ExecutionError::ConnectionPoolError(_)
        | ExecutionError::BadQuery(_)
        | ExecutionError::PrepareError(_)
        | ExecutionError::LastAttemptError(
            RequestAttemptError::UnableToAllocStreamId
            | RequestAttemptError::SerializationError(_)
            | RequestAttemptError::CqlRequestSerialization(_),
        ) => StoreError::Unavailable(text),
        _ if is_write => StoreError::Unknown(text),
        _ => StoreError::Unavailable(text),
    }
}

#[cfg(test)]
mod tests {
    use scylla::errors::{ConnectionPoolError, WriteType};
    use scylla::frame::types::Consistency;

    use super::*;

    fn db(error: DbError) -> ExecutionError {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(error, "test".into()))
    }

    #[test]
    fn never_sent_is_a_definite_failure_even_for_a_write() {
        for error in [
            ExecutionError::EmptyPlan,
            ExecutionError::ConnectionPoolError(ConnectionPoolError::Initializing),
            ExecutionError::LastAttemptError(RequestAttemptError::UnableToAllocStreamId),
            db(DbError::IsBootstrapping),
        ] {
            let text = error.to_string();
            assert!(
                matches!(classify(error, true), StoreError::Unavailable(_)),
                "{text}"
            );
        }
    }

    #[test]
    fn anything_after_sending_is_unknown_for_a_write() {
        for error in [
            db(DbError::WriteTimeout {
                consistency: Consistency::Quorum,
                received: 1,
                required: 2,
                write_type: WriteType::Cas,
            }),
            db(DbError::Unavailable {
                consistency: Consistency::Quorum,
                required: 2,
                alive: 1,
            }),
            ExecutionError::RequestTimeout(std::time::Duration::from_secs(1)),
        ] {
            let text = error.to_string();
            assert!(
                matches!(classify(error, true), StoreError::Unknown(_)),
                "{text}"
            );
        }
        assert!(matches!(
            classify(db(DbError::SyntaxError), true),
            StoreError::Rejected(_)
        ));
    }
}
