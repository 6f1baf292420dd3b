//! The faults a test can prime, what they aim at, and how often they fire.

use std::time::Duration;

/// A fault the server can inject on a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFault {
    /// Answer late (the statement runs after the delay).
    Latency(Duration),
    /// `Unavailable`, not applied.
    Unavailable,
    /// A CAS `WriteTimeout` after applying.
    CasTimeoutAfterApply,
    /// A CAS `WriteTimeout` without applying.
    CasTimeoutWithoutApply,
    /// The connection breaks after the statement applied.
    DropConnectionAfterApply,
    /// The connection breaks before the statement runs.
    DropConnectionWithoutApply,
}

/// How often an injected fault fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Times {
    /// Every matching request.
    Always,
    /// The next `n` matching requests.
    Next(usize),
    /// Each matching request with this probability.
    Random(f64),
}

/// Which requests a fault is aimed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every statement registered under this label (prepared or not, alone or first in a
    /// batch).
    Label(String),
    /// Requests carrying this exact statement text (or its prepared id).
    Statement(String),
    /// Every statement registered under any of these labels.
    AnyLabel(Vec<String>),
    /// Every registered statement except the driver's own.
    AllRegistered,
}
