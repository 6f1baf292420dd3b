//! How a server is set up, and why it may fail to start.

use std::time::Duration;

use super::auth::Credentials;
use super::engine::Flavor;
use super::tls::TlsOptions;

/// How the server is set up. `ServerOptions::default()` is a strict Cassandra with
/// Cassandra's default thresholds; start from [`ServerOptions::strict`] or
/// [`ServerOptions::lenient`] and adjust with the `with_*` methods (fields may be added, so
/// the struct cannot be built literally outside this crate).
///
/// ```
/// use cql_test_server::{Flavor, ServerOptions};
/// let options = ServerOptions::strict(Flavor::Scylla)
///     .with_tombstone_thresholds(100, 1000)
///     .with_gc_grace_seconds(60);
/// assert_eq!(options.tombstone_failure_threshold, 1000);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerOptions {
    /// Cassandra or ScyllaDB behaviour where they differ.
    pub flavor: Flavor,
    /// Refuse, with an error naming it, any statement that was not registered (the driver's
    /// own statements are always registered).
    pub strict: bool,
    /// A read scanning more tombstones than this records a warning (Cassandra: 1000).
    pub tombstone_warn_threshold: u64,
    /// A read scanning more tombstones than this fails with `ReadFailure` (Cassandra: 100000).
    pub tombstone_failure_threshold: u64,
    /// How long, in seconds of the server clock, tombstones are kept (Cassandra: 864000).
    pub gc_grace_seconds: i64,
    /// Paxos contention as a Cassandra 4.0 coordinator meets it (Paxos v1), in real time:
    /// each LWT or SERIAL read runs rounds on its partition, each lasting `paxos_round`; a
    /// round pre-empted by a newer ballot of the partition (another round that started
    /// while it was in flight) is counted as contended, backs off a random time below
    /// `paxos_backoff` and retries with a new ballot, and past `cas_contention_timeout`
    /// since the request arrived the request is answered with a CAS `WriteTimeout` (a
    /// `ReadTimeout` for a SERIAL read). Backing-off requests hold neither the engine nor
    /// their connection. Default: on for [`Flavor::Cassandra`]; off for
    /// [`Flavor::Scylla`] (ScyllaDB's coordinators queue the LWTs of a partition behind a
    /// lock of their own rather than let them duel, which is not modelled). Off, every LWT
    /// is answered at once and only counted.
    pub paxos_contention: bool,
    /// How long one Paxos round takes. With `paxos_contention`: from its prepare to its
    /// proposal, the time in which a newer ballot pre-empts it, timed to a fraction of a
    /// millisecond (on the real clock, not Tokio's). Default 500 µs: with it a lone client's
    /// lease lock runs at about the rate it reaches on a local Cassandra 4.0 node (about 600
    /// acquisitions a second, two LWTs each). Without `paxos_contention`: an LWT on a
    /// partition within this time of another one's start counts as contended.
    pub paxos_round: Duration,
    /// With `paxos_contention`: a pre-empted round sleeps a uniformly random time below
    /// this before retrying (Cassandra: below 100 ms). Default 100 ms.
    pub paxos_backoff: Duration,
    /// With `paxos_contention`: how long a request may keep retrying pre-empted rounds,
    /// from its arrival, before it is answered with a timeout (Cassandra's
    /// `cas_contention_timeout_in_ms`, default 1 s).
    pub cas_contention_timeout: Duration,
    /// When set, an LWT that finds this many other rounds of its partition in flight (or
    /// more) answers with a CAS `WriteTimeout` at once, as a contended Paxos round does when
    /// `cas_contention_timeout` runs out. Default `None`.
    pub cas_contention_budget: Option<u32>,
    /// A round timed out by contention still applies (when its condition holds) before
    /// answering the timeout, as a real contended round may: the outcome is unknown to the
    /// client. Default `false`: a timed-out round never applies.
    pub cas_timeout_applies: bool,
    /// Scylla mode: tablets keyspaces accept LWTs, as ScyllaDB 2025.4 and later do.
    /// Default `false` (ScyllaDB 6.0 to 2025.3 refuse them).
    pub lwt_on_tablets: bool,
    /// Nodes served, each on its own loopback address, over one shared store (default 1).
    /// Each node's `system.local` and `system.peers` describe the whole cluster, so the
    /// driver connects to every node and spreads requests; faults can target one node.
    pub nodes: usize,
    /// Password authentication (Cassandra's `PasswordAuthenticator`) for this one user:
    /// every connection must log in before any request is served. Default `None`: no
    /// authentication.
    pub credentials: Option<Credentials>,
    /// TLS on every node's port (client-to-node encryption, with or without client
    /// certificates), with a certificate for the addresses bound, issued at start by the
    /// options' CA. Default `None`: plain TCP.
    pub tls: Option<TlsOptions>,
    /// Serve from a thread of its own (a single-threaded Tokio runtime) rather than from
    /// tasks of the caller's runtime: apart from the client's runtime, though still on the
    /// same machine's cores, and with one thread of parallelism. A benchmark wants it: the
    /// engine runs every statement under one lock, and on the caller's runtime a statement
    /// waiting for that lock blocks one of the client's worker threads. Default `false`:
    /// tests keep the server on their own runtime, where Tokio's paused time reaches it.
    pub own_thread: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            flavor: Flavor::Cassandra,
            strict: true,
            tombstone_warn_threshold: 1000,
            tombstone_failure_threshold: 100_000,
            gc_grace_seconds: 864_000,
            paxos_contention: true,
            paxos_round: Duration::from_micros(500),
            paxos_backoff: Duration::from_millis(100),
            cas_contention_timeout: Duration::from_secs(1),
            cas_contention_budget: None,
            cas_timeout_applies: false,
            lwt_on_tablets: false,
            nodes: 1,
            credentials: None,
            tls: None,
            own_thread: false,
        }
    }
}

impl ServerOptions {
    /// A lenient server (any statement the parser understands) of `flavor`.
    pub fn lenient(flavor: Flavor) -> Self {
        ServerOptions {
            flavor,
            strict: false,
            paxos_contention: flavor == Flavor::Cassandra,
            ..ServerOptions::default()
        }
    }

    /// A strict server of `flavor`.
    pub fn strict(flavor: Flavor) -> Self {
        ServerOptions {
            flavor,
            paxos_contention: flavor == Flavor::Cassandra,
            ..ServerOptions::default()
        }
    }

    /// Sets `tombstone_warn_threshold` and `tombstone_failure_threshold`.
    pub fn with_tombstone_thresholds(self, warn: u64, fail: u64) -> Self {
        ServerOptions {
            tombstone_warn_threshold: warn,
            tombstone_failure_threshold: fail,
            ..self
        }
    }

    /// Sets the default `gc_grace_seconds` of new tables.
    pub fn with_gc_grace_seconds(self, seconds: i64) -> Self {
        ServerOptions {
            gc_grace_seconds: seconds,
            ..self
        }
    }

    /// Sets `cas_contention_budget` (`None`: contended rounds never time out).
    pub fn with_cas_contention_budget(self, budget: Option<u32>) -> Self {
        ServerOptions {
            cas_contention_budget: budget,
            ..self
        }
    }

    /// Turns the Paxos contention model on or off (`paxos_contention`). Off: every LWT is
    /// answered at once, for tests that need LWTs on one partition to never slow each other.
    pub fn with_paxos_contention(self, on: bool) -> Self {
        ServerOptions {
            paxos_contention: on,
            ..self
        }
    }

    /// Sets the longest back-off after a pre-empted round (`paxos_backoff`).
    pub fn with_paxos_backoff(self, backoff: Duration) -> Self {
        ServerOptions {
            paxos_backoff: backoff,
            ..self
        }
    }

    /// Sets how long a request may retry contended rounds (`cas_contention_timeout`).
    pub fn with_cas_contention_timeout(self, timeout: Duration) -> Self {
        ServerOptions {
            cas_contention_timeout: timeout,
            ..self
        }
    }

    /// Sets how long a Paxos round takes (`paxos_round`).
    pub fn with_paxos_round(self, round: Duration) -> Self {
        ServerOptions {
            paxos_round: round,
            ..self
        }
    }

    /// Sets `cas_timeout_applies`: a round timed out by contention may still apply.
    pub fn with_cas_timeout_applies(self, applies: bool) -> Self {
        ServerOptions {
            cas_timeout_applies: applies,
            ..self
        }
    }

    /// Serves `nodes` nodes (at least one) over one shared store.
    pub fn with_nodes(self, nodes: usize) -> Self {
        ServerOptions {
            nodes: nodes.max(1),
            ..self
        }
    }

    /// Requires password authentication as `user` / `password` (`credentials`).
    pub fn with_password_auth(self, user: &str, password: &str) -> Self {
        ServerOptions {
            credentials: Some(Credentials {
                user: user.to_owned(),
                password: password.to_owned(),
            }),
            ..self
        }
    }

    /// Serves every node over TLS (`tls`).
    pub fn with_tls(self, tls: TlsOptions) -> Self {
        ServerOptions {
            tls: Some(tls),
            ..self
        }
    }

    /// Serves from a thread of its own (`own_thread`).
    pub fn with_own_thread(self) -> Self {
        ServerOptions {
            own_thread: true,
            ..self
        }
    }

    /// Sets `lwt_on_tablets` (Scylla mode: ScyllaDB 2025.4+, LWTs on tablets keyspaces).
    pub fn with_lwt_on_tablets(self, accepted: bool) -> Self {
        ServerOptions {
            lwt_on_tablets: accepted,
            ..self
        }
    }
}

/// Why the server could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// Every loopback address tried was taken (by other servers of this or another
    /// process).
    NoFreeAddress {
        /// Addresses tried.
        tried: usize,
        /// The last bind error.
        last: String,
    },
    /// The TLS certificate could not be made.
    Tls(String),
    /// The server's own thread (`own_thread`) could not be started, or ended early.
    Thread(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::NoFreeAddress { tried, last } => write!(
                f,
                "the CQL test server found no free loopback address ({tried} tried; last error: {last})"
            ),
            StartError::Tls(e) => write!(f, "the CQL test server's TLS: {e}"),
            StartError::Thread(e) => write!(f, "the CQL test server's own thread: {e}"),
        }
    }
}

impl std::error::Error for StartError {}
