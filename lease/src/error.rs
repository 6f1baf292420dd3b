//! Error types: what the caller did wrong, what the store said, and what is unknown.

use std::time::Duration;

use crate::store::StoredLease;

/// Bad input, rejected before any store call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidArgument {
    /// A lease name, owner or candidate id was empty.
    #[error("{field} must not be empty")]
    Empty {
        /// Which argument.
        field: &'static str,
    },
    /// A lease name, owner or value was longer than allowed.
    #[error("{field} is {len} bytes long; at most {max} are allowed")]
    TooLong {
        /// Which argument.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// A string contained a control character (names and owners are printed in logs and CLIs).
    #[error("{field} contains a control character")]
    ControlCharacter {
        /// Which argument.
        field: &'static str,
    },
    /// A plain lease name starts with a prefix reserved for the rows of lease locks or
    /// elections (see [`crate::namespace`]).
    #[error(
        "lease name {name:?} starts with {prefix:?}, which is reserved ({used_by} store their leases under it)"
    )]
    ReservedPrefix {
        /// The name given.
        name: String,
        /// The reserved prefix it starts with.
        prefix: &'static str,
        /// Who stores rows under that prefix.
        used_by: &'static str,
    },
    /// A setting is malformed (an identifier, a replication map).
    #[error("{field} is invalid: {reason}")]
    Invalid {
        /// Which setting.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A timing parameter is out of range.
    #[error("invalid timing: {0}")]
    Timing(String),
}

/// What a store backend reports when a call did not produce a definite answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The write may or may not have been applied (e.g. a CAS write timeout or a connection
    /// lost after the request was sent). Callers resolve it with a linearizable read.
    #[error("outcome unknown: {0}")]
    Unknown(String),
    /// The call was definitely not applied (no replica was reached, or it was a read).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store rejected the request itself (syntax, schema, permissions). Not retryable.
    #[error("request rejected by the store: {0}")]
    Rejected(String),
}

impl StoreError {
    /// Whether the write behind this error may have been applied.
    pub fn is_unknown(&self) -> bool {
        matches!(self, StoreError::Unknown(_))
    }
}

/// Why a holder lost (or gave up) a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LossReason {
    /// A renewal found the lease held by someone else, or gone.
    NotHolder,
    /// No renewal completed before the local deadline (slow store, paused process).
    Expired,
    /// Renewals failed with store errors until the local deadline passed.
    Unreachable,
    /// The holder released it.
    Released,
}

impl std::fmt::Display for LossReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LossReason::NotHolder => f.write_str("held by another acquisition, or gone"),
            LossReason::Expired => f.write_str("expired before a renewal succeeded"),
            LossReason::Unreachable => f.write_str("store unreachable until the deadline"),
            LossReason::Released => f.write_str("released"),
        }
    }
}

/// The error type of every lease operation.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LeaseError {
    /// Bad input or configuration; nothing was sent to the store.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// `acquire` gave up waiting.
    #[error("timed out after {waited:?} waiting for lease {name:?}")]
    Timeout {
        /// The lease name.
        name: String,
        /// How long it waited.
        waited: Duration,
        /// The holder seen last, if any.
        last_holder: Option<Box<StoredLease>>,
    },
    /// The caller no longer holds the lease (renew or release found another holder, or none).
    #[error("lease {name:?} is no longer held: {reason}")]
    Lost {
        /// The lease name.
        name: String,
        /// Why.
        reason: LossReason,
    },
    /// A store call failed with a definite answer (not applied).
    #[error("store error on lease {name:?}: {source}")]
    Store {
        /// The lease name.
        name: String,
        /// The store's error.
        source: StoreError,
    },
    /// A write's outcome is unknown: it may have been applied. Either the read-back failed
    /// too (it did not settle within the resolve timeout, or the store refused it: `source`
    /// is then [`StoreError::Rejected`], see [`LeaseError::is_refusal`]), or every answer was
    /// lost and the read-backs found nothing yet while the writes may still land (`source`
    /// is [`StoreError::Unknown`]). If it applied, the library has asked the store to delete
    /// it (best effort) or releases it on sight, and the TTL bounds it anyway.
    #[error("outcome of {operation} on lease {name:?} is unknown: {source}")]
    OutcomeUnknown {
        /// The lease name.
        name: String,
        /// The operation.
        operation: &'static str,
        /// The last store error.
        source: StoreError,
    },
}

impl LeaseError {
    /// Whether the store refused a request of the call ([`StoreError::Rejected`]: syntax,
    /// schema, permissions), the claim itself ([`LeaseError::Store`]) or the read-back that
    /// was to settle its lost answer ([`LeaseError::OutcomeUnknown`]): asking again cannot
    /// change the answer, so a retrying caller should stop. In the second case the claim may
    /// still have been written; it is released in the background and on sight, as any claim
    /// whose outcome stayed unknown.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            LeaseError::Store {
                source: StoreError::Rejected(_),
                ..
            } | LeaseError::OutcomeUnknown {
                source: StoreError::Rejected(_),
                ..
            }
        )
    }

    pub(crate) fn store(name: &str, source: StoreError) -> Self {
        LeaseError::Store {
            name: name.to_owned(),
            source,
        }
    }
}
