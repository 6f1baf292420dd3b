//! One error type for every command: a one-line message and the exit code.

use std::fmt;

/// Exit code of a failure to reach or use the store.
pub const EXIT_ERROR: i32 = 1;
/// Exit code of bad flags or files (clap uses it too).
pub const EXIT_USAGE: i32 = 2;
/// Exit code when the lock, lease or item was not obtained (held, timed out, not found,
/// nobody leads). In the range 124-127 reserved as `timeout(1)` reserves it, so that it
/// cannot be a supervised command's own status (see [`child_status`]).
pub const EXIT_NOT_OBTAINED: i32 = 124;
/// Exit code when a lock, lease, term or claim was lost while it was held (the command, if
/// any, was stopped).
pub const EXIT_LOST: i32 = 125;
/// Exit code when the command could not be run (not executable, or not found).
pub const EXIT_CANNOT_RUN: i32 = 126;
/// What a command's own status in the reserved range 124-127 is reported as.
pub const EXIT_CHILD_RESERVED: i32 = 123;

/// The exit-code table, shown by `cqlcoord --help` (and in docs/cli.md).
pub const EXIT_CODES_HELP: &str = "\
Exit codes (docs/cli.md):
  0        success (with a command: the command exited 0)
  1        error: the cluster could not be reached or used
  2        usage: bad flags or files (nothing was sent)
  124      not obtained: held by another, timed out waiting, --try failed, nobody leads,
           not the holder named, no such dead letter
  125      lost: the lock, lease or leadership was lost while held (a command is stopped)
  126      the command could not be started (not found or not executable)
  123      the command itself exited 124-127 (reported so: 124-126 always mean cqlcoord's)
  other    with a command: the command's own status (128+N: killed by signal N)";

/// The exit status reported for a supervised command's own status `code`: itself, except
/// the reserved 124-127, reported as [`EXIT_CHILD_RESERVED`] (with a note on stderr).
pub fn child_status(code: i32) -> i32 {
    if (124..=127).contains(&code) {
        eprintln!(
            "cqlcoord: the command exited {code}; reported as {EXIT_CHILD_RESERVED} (124-127 are cqlcoord's)"
        );
        EXIT_CHILD_RESERVED
    } else {
        code
    }
}

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

    /// Not obtained (exit 124).
    pub fn not_obtained(message: impl fmt::Display) -> Self {
        Self::new(EXIT_NOT_OBTAINED, message)
    }

    /// Lost while held (exit 125).
    pub fn lost(message: impl fmt::Display) -> Self {
        Self::new(EXIT_LOST, message)
    }

    /// The command could not be started (exit 126).
    pub fn cannot_run(message: impl fmt::Display) -> Self {
        Self::new(EXIT_CANNOT_RUN, message)
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
