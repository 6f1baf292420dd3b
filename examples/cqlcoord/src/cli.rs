//! The command line: connection flags shared by every command, and the commands.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::duration::parse_duration;

/// Leases, elections, locks and work queues on ScyllaDB / Cassandra, from the shell.
#[derive(Debug, Parser)]
#[command(
    name = "cqlcoord",
    version,
    about,
    propagate_version = true,
    arg_required_else_help = true,
    after_help = crate::error::EXIT_CODES_HELP
)]
pub struct Cli {
    /// Connection flags.
    #[command(flatten)]
    pub connection: Connection,
    /// Serve the libraries' metrics for Prometheus at http://HOST:PORT/metrics while the
    /// command runs.
    #[arg(
        long,
        global = true,
        env = "CQLCOORD_METRICS_ADDR",
        value_name = "HOST:PORT",
        help_heading = "Global options"
    )]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How to reach the cluster: shared by every command (listed under their own heading, after
/// each command's own flags).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct Connection {
    /// Contact points, comma separated (`host:port`; port 9042 if omitted).
    #[arg(
        long,
        global = true,
        env = "CQLCOORD_HOSTS",
        value_delimiter = ',',
        default_value = "127.0.0.1:9042"
    )]
    pub hosts: Vec<String>,
    /// Keyspace holding every table.
    #[arg(
        long,
        global = true,
        env = "CQLCOORD_KEYSPACE",
        default_value = "coordination"
    )]
    pub keyspace: String,
    /// Local data centre: preferred by load balancing, and required by LOCAL_* levels.
    #[arg(long, global = true, env = "CQLCOORD_LOCAL_DC")]
    pub local_dc: Option<String>,
    /// Commit level of LWTs and level of plain reads and writes.
    #[arg(long, global = true, value_parser = parse_level, default_value = "quorum")]
    pub consistency: Level,
    /// Paxos level of LWTs and SERIAL reads. `local-serial` runs one Paxos per data centre:
    /// guarantees then hold only among clients of one data centre.
    #[arg(long, global = true, value_enum, default_value = "serial")]
    pub serial_consistency: SerialLevel,
    /// User name for password authentication.
    #[arg(long, global = true, env = "CQLCOORD_USER")]
    pub user: Option<String>,
    /// Password (prefer the CQLCOORD_PASSWORD variable: flags show in `ps`).
    #[arg(long, global = true, env = "CQLCOORD_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// CA certificate(s) (PEM) to verify the nodes with; enables TLS.
    #[arg(long, global = true, env = "CQLCOORD_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate chain (PEM) for mutual TLS; needs --tls-key and --tls-ca.
    #[arg(long, global = true, env = "CQLCOORD_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// Client private key (PEM) for mutual TLS.
    #[arg(long, global = true, env = "CQLCOORD_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Client-side timeout of one request (an LWT past it has an unknown outcome, resolved by
    /// a SERIAL read-back).
    #[arg(long, global = true, value_parser = parse_duration, allow_hyphen_values = true, default_value = "5s")]
    pub request_timeout: Duration,
    /// Table of leases (and elections, and the lease lock).
    #[arg(long, global = true, default_value = "leases")]
    pub lease_table: String,
    /// Table of the plain-cell locks (fair, bakery).
    #[arg(long, global = true, default_value = "lock_cells")]
    pub cell_table: String,
    /// Base name of the work-queue tables.
    #[arg(long, global = true, default_value = "work_items")]
    pub queue_table: String,
}

/// Regular consistency levels. ANY is refused: it is for writes only, and every command
/// reads (LWT read-backs, lock cells, queue scans).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Level {
    /// ONE.
    One,
    /// TWO.
    Two,
    /// THREE.
    Three,
    /// QUORUM (the default: spans every data centre).
    Quorum,
    /// ALL.
    All,
    /// LOCAL_QUORUM (needs --local-dc).
    LocalQuorum,
    /// EACH_QUORUM.
    EachQuorum,
    /// LOCAL_ONE (needs --local-dc).
    LocalOne,
}

/// `--consistency`: a [`Level`], with a clear refusal of ANY and SERIAL levels.
fn parse_level(text: &str) -> Result<Level, String> {
    match text.to_ascii_lowercase().replace('_', "-").as_str() {
        "any" => Err(
            "ANY cannot be used: it is a write-only level and every command also \
                      reads (use one, quorum, local-quorum, each-quorum or all)"
                .to_owned(),
        ),
        "serial" | "local-serial" => Err(format!(
            "{text} is a serial level: give it with --serial-consistency"
        )),
        other => Level::from_str(other, true).map_err(|_| {
            format!(
                "{text:?} is not a consistency level (one of: {})",
                Level::value_variants()
                    .iter()
                    .filter_map(|l| l.to_possible_value().map(|v| v.get_name().to_owned()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }),
    }
}

/// A value parser refusing empty strings and control characters, naming `what` (`lock
/// name`, `election name`, ...) rather than the library's field.
pub fn text_of(what: &'static str) -> impl Fn(&str) -> Result<String, String> + Clone {
    move |text: &str| {
        if text.is_empty() {
            Err(format!("{what} must not be empty"))
        } else if text.chars().any(char::is_control) {
            Err(format!("{what} contains a control character"))
        } else {
            Ok(text.to_owned())
        }
    }
}

/// Serial consistency levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SerialLevel {
    /// SERIAL: one Paxos across every data centre.
    Serial,
    /// LOCAL_SERIAL: one Paxos per data centre (needs --local-dc).
    LocalSerial,
}

/// Timing of a lease, lock, election term or job claim.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Timing options")]
pub struct TimingArgs {
    /// TTL written to the store: the longest others wait for a crashed holder.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "15s")]
    pub ttl: Duration,
    /// How often the holder renews. Default: derived from --ttl, at most 5s (half the room
    /// ttl - 1s - max-clock-skew - kill-grace - 250ms leaves). With a command:
    /// renew-interval + kill-grace + 250ms must be under ttl - 1s - max-clock-skew.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub renew_interval: Option<Duration>,
    /// Pause between attempts while waiting.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "1s")]
    pub retry_interval: Duration,
    /// Largest wall-clock difference assumed between database nodes.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "500ms")]
    pub max_clock_skew: Duration,
}

/// How a supervised command is stopped.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Timing options")]
pub struct Stopping {
    /// Time between SIGTERM and SIGKILL. Unless a renewal moved the holder's local deadline,
    /// SIGTERM goes out this long plus 250 ms before it (at once on loss), and SIGKILL 250 ms
    /// before it at the latest.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "2s")]
    pub kill_grace: Duration,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or print the schema.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Inspect and repair leases.
    #[command(subcommand)]
    Lease(LeaseCommand),
    /// Print the current leader of an election (one SERIAL read).
    Leader {
        /// Election name.
        #[arg(value_parser = text_of("election name"))]
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print leader changes as they happen, one line each.
    Observe {
        /// Election name.
        #[arg(value_parser = text_of("election name"))]
        name: String,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
        /// How often to look (jittered).
        #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "1s")]
        retry_interval: Duration,
    },
    /// Campaign, and run a command only while elected; without a command, print the term
    /// when elected and lead until interrupted (SIGINT/SIGTERM resign).
    Elect {
        /// Election name.
        #[arg(value_parser = text_of("election name"))]
        name: String,
        /// The command and its arguments (none: lead until interrupted).
        #[arg(last = true, num_args = 1..)]
        command: Vec<String>,
        /// This candidate's id.
        #[arg(long, value_parser = text_of("candidate"))]
        candidate: String,
        /// Value to lead with (e.g. an address).
        #[arg(long)]
        value: Option<String>,
        /// After losing the term, stop the command and campaign again (default: exit 125).
        #[arg(long)]
        recampaign: bool,
        /// Lease timing of the term.
        #[command(flatten)]
        timing: TimingArgs,
        /// Stopping the command.
        #[command(flatten)]
        stopping: Stopping,
    },
    /// Run a command while holding a lock; without a command, print the lock's name (and
    /// fencing token) once held and hold it until interrupted (SIGINT/SIGTERM release it).
    Lock {
        /// Lock name.
        #[arg(value_parser = text_of("lock name"))]
        name: String,
        /// The command and its arguments (none: hold until interrupted).
        #[arg(last = true, num_args = 1..)]
        command: Vec<String>,
        /// Give up waiting after this long (exit 124). Default: wait until interrupted, at
        /// most a year. `0` is the same as --try.
        #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
        timeout: Option<Duration>,
        /// One attempt, no waiting: exit 124 at once if the lock is held.
        #[arg(long = "try", conflicts_with = "timeout")]
        try_once: bool,
        /// Algorithm: `lease` (LWT, fencing token), `fair` or `bakery` (plain cells, no token).
        #[arg(long, value_enum, default_value = "lease")]
        algorithm: Algorithm,
        /// Owner declared on the lease lock (default: host name and process id).
        #[arg(long)]
        owner: Option<String>,
        /// Lock timing.
        #[command(flatten)]
        timing: TimingArgs,
        /// Stopping the command.
        #[command(flatten)]
        stopping: Stopping,
    },
    /// Work queues.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Try the CLI without a database: start the bundled CQL test server (in memory, in this
    /// process), create the schema, print the `export` line to use, and serve until
    /// interrupted. Everything is lost when it stops.
    Dev {
        /// Imitate ScyllaDB where it differs (default: Cassandra).
        #[arg(long)]
        scylla_mode: bool,
    },
    /// Serve a web dashboard of the elections, locks, leases and queues named: leaders,
    /// holders, counts and dead letters, refreshed live; read-only unless --write-token is
    /// given (docs/ui.md).
    Ui(crate::ui::UiArgs),
}

/// Lock algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Algorithm {
    /// One LWT per acquisition; passes a fencing token.
    Lease,
    /// Fair queue lock on plain cells; no fencing token.
    Fair,
    /// Lamport's bakery on plain cells; no fencing token.
    Bakery,
}

/// `queue work --order`: how a claim picks among the available items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Order {
    /// The oldest available item first (the work queue's `ClaimOrder::OldestFirst`).
    OldestFirst,
    /// At random among the first few (the work queue's default `ClaimOrder::Spread`).
    Spread,
}

/// `schema ...`.
#[derive(Debug, Subcommand)]
pub enum SchemaCommand {
    /// Create the keyspace and every table if missing (tablets off on ScyllaDB).
    Create {
        /// `simple:RF`, or `DC:RF[,DC:RF...]` for NetworkTopologyStrategy.
        #[arg(long, default_value = "simple:3")]
        replication: String,
    },
    /// Print the CQL that `schema create` sends.
    Print {
        /// As for `schema create`.
        #[arg(long, default_value = "simple:3")]
        replication: String,
    },
}

/// `lease get|release --of`: whose lease a name is. Plain leases, lease locks and elections
/// keep their leases apart (the rows `NAME`, `lock/NAME`, `election/NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LeaseOf {
    /// A plain lease (`lease acquire`).
    Lease,
    /// A lease lock (`lock --algorithm lease`).
    Lock,
    /// An election (`elect`, `leader`).
    Election,
}

impl From<LeaseOf> for cql_lease::namespace::Namespace {
    fn from(of: LeaseOf) -> Self {
        match of {
            LeaseOf::Lease => Self::Lease,
            LeaseOf::Lock => Self::Lock,
            LeaseOf::Election => Self::Election,
        }
    }
}

/// `lease ...`.
#[derive(Debug, Subcommand)]
pub enum LeaseCommand {
    /// Show the holder (one SERIAL read).
    Get {
        /// Lease name (a lease lock's or an election's with --of).
        #[arg(value_parser = text_of("lease name"))]
        name: String,
        /// Whose lease: a plain lease, a lease lock's or an election's.
        #[arg(long, value_enum, default_value = "lease")]
        of: LeaseOf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Take the lease once and leave it held until its TTL (prints token and holder id).
    Acquire {
        /// Lease name (not starting with `lock/` or `election/`: reserved).
        #[arg(value_parser = text_of("lease name"))]
        name: String,
        /// Declared owner.
        #[arg(long, value_parser = text_of("owner"))]
        owner: String,
        /// Value stored with it.
        #[arg(long)]
        value: Option<String>,
        /// TTL written to the store.
        #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "15s")]
        ttl: Duration,
        /// Wait this long for a held lease to free up (default: one attempt).
        #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
        wait: Option<Duration>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Release the lease: the given holder's, or whoever holds it now (repair).
    Release {
        /// Lease name (a lease lock's or an election's with --of).
        #[arg(value_parser = text_of("lease name"))]
        name: String,
        /// Whose lease: a plain lease, a lease lock's or an election's.
        #[arg(long, value_enum, default_value = "lease")]
        of: LeaseOf,
        /// Release only if this holder id holds it.
        #[arg(long)]
        holder: Option<String>,
    },
}

/// `queue ...`.
#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Add an item (or one per non-empty line of standard input when no payload is given).
    Push {
        /// Queue name.
        #[arg(value_parser = text_of("queue name"))]
        name: String,
        /// Unique key: a second push with the same key adds nothing.
        #[arg(long, value_parser = text_of("unique key"))]
        key: Option<String>,
        /// Not to run before this long from now (at most 20 years).
        #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
        delay: Option<Duration>,
        /// The payload; read from standard input, one item per line (empty lines skipped),
        /// when absent.
        #[arg(value_parser = text_of("item payload"))]
        payload: Option<String>,
    },
    /// Run a command per job: payload on stdin, exit 0 completes, anything else fails. Exits
    /// 0 once stopped (signal or --max-jobs), whatever the jobs' own statuses.
    Work {
        /// Queue name.
        #[arg(value_parser = text_of("queue name"))]
        name: String,
        /// The command and its arguments.
        #[arg(last = true, required = true, num_args = 1..)]
        command: Vec<String>,
        /// Jobs run at once (each its own claim and command).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        concurrency: u32,
        /// Which available item a claim takes: `oldest-first` (strict order, workers contend
        /// for the head) or `spread` (at random among the first 4, so workers rarely collide).
        #[arg(long, value_enum, default_value = "spread")]
        order: Order,
        /// Worker id (default: host name and process id).
        #[arg(long)]
        worker: Option<String>,
        /// Stop after this many jobs, at least 1 (default: until SIGTERM / SIGINT).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        max_jobs: Option<u64>,
        /// Claims an item gets before a failure discards it (a dead letter).
        #[arg(long, default_value_t = 5)]
        max_attempts: i32,
        /// First retry back-off (doubles per attempt).
        #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "1s")]
        retry_backoff: Duration,
        /// Claim timing.
        #[command(flatten)]
        timing: TimingArgs,
        /// Stopping the command.
        #[command(flatten)]
        stopping: Stopping,
    },
    /// Items by state (scheduled ones however far ahead) and the oldest available item's age.
    Stats {
        /// Queue name.
        #[arg(value_parser = text_of("queue name"))]
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List dead letters, or requeue one, or purge them all.
    Dead {
        /// Queue name.
        #[arg(value_parser = text_of("queue name"))]
        name: String,
        /// Put this dead letter back in the queue.
        #[arg(long, conflicts_with = "purge")]
        requeue: Option<String>,
        /// Delete every dead letter for good.
        #[arg(long)]
        purge: bool,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
}
