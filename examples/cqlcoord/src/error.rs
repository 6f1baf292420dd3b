//! One error type for every command: a one-line message and the exit code.

use std::fmt;

/// Exit code of a failure to reach or use the store.
pub const EXIT_ERROR: i32 = 1;
/// Exit code of bad flags or files (clap uses it too).
pub const EXIT_USAGE: i32 = 2;
/// Exit code when the lock, lease or item was not obtained (held, timed out, not found).
pub const EXIT_NOT_OBTAINED: i32 = 3;
/// Exit code when a lock or term was lost while the command ran (the command was stopped).
pub const EXIT_LOST: i32 = 4;

/// A failure: printed as `cqlcoord: MESSAGE` on standard error, then exit with `code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// The process exit code.
    pub code: i32,
    /// One line, no trailing newline.
    pub message: String,
}

impl CliError {
    /// A store or runtime failure (exit 1).
    pub fn store(message: impl fmt::Display) -> Self {
        Self::new(EXIT_ERROR, message)
    }

    /// Bad flags or files (exit 2).
    pub fn usage(message: impl fmt::Display) -> Self {
        Self::new(EXIT_USAGE, message)
    }

    /// Not obtained (exit 3).
    pub fn not_obtained(message: impl fmt::Display) -> Self {
        Self::new(EXIT_NOT_OBTAINED, message)
    }

    /// Lost while running (exit 4).
    pub fn lost(message: impl fmt::Display) -> Self {
        Self::new(EXIT_LOST, message)
    }

    fn new(code: i32, message: impl fmt::Display) -> Self {
        // One line, whatever the library's message looks like (the driver's may hold line
        // breaks and runs of indentation).
        let message = message
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        CliError { code, message }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<cql_lease::InvalidArgument> for CliError {
    fn from(e: cql_lease::InvalidArgument) -> Self {
        CliError::usage(e)
    }
}

impl From<cql_lease::scylla::SchemaError> for CliError {
    fn from(e: cql_lease::scylla::SchemaError) -> Self {
        match e {
            cql_lease::scylla::SchemaError::InvalidArgument(e) => CliError::usage(e),
            other => CliError::store(other),
        }
    }
}

impl From<cql_lease::LeaseError> for CliError {
    fn from(e: cql_lease::LeaseError) -> Self {
        match e {
            cql_lease::LeaseError::InvalidArgument(e) => CliError::usage(e),
            e @ cql_lease::LeaseError::Timeout { .. } => CliError::not_obtained(e),
            other => CliError::store(other),
        }
    }
}

impl From<cql_election::ElectionError> for CliError {
    fn from(e: cql_election::ElectionError) -> Self {
        match e {
            cql_election::ElectionError::InvalidArgument(e) => CliError::usage(e),
            other => CliError::store(other),
        }
    }
}

impl From<cql_lease::lock::LockError> for CliError {
    fn from(e: cql_lease::lock::LockError) -> Self {
        use cql_lease::lock::LockError;
        match e {
            LockError::InvalidArgument(e) => CliError::usage(e),
            e @ LockError::Timeout { .. } => CliError::not_obtained(e),
            other => CliError::store(other),
        }
    }
}

impl From<cql_workqueue::QueueError> for CliError {
    fn from(e: cql_workqueue::QueueError) -> Self {
        match e {
            cql_workqueue::QueueError::InvalidArgument(e) => CliError::usage(e),
            other => CliError::store(other),
        }
    }
}
