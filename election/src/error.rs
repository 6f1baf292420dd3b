//! Errors of the election API.

use cql_lease::{InvalidArgument, LeaseError};

/// What can go wrong.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ElectionError {
    /// Bad name, candidate id, value or timing; nothing was sent to the store.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// A lease operation failed.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// The campaign is over (resigned, or its actor stopped).
    #[error("the campaign has ended")]
    CampaignEnded,
    /// `proclaim` was called while not leading.
    #[error("not the leader")]
    NotLeader,
}
