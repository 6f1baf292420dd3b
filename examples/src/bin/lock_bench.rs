//! Lock benchmark: every lock algorithm at 1, 4, 16 and 64 contenders, then how each scales.
//!
//! # Backends
//!
//! Default: the scylla backends over the CQL test server, real time. `--scylla HOST:PORT`: a
//! real cluster (keyspace `lock_bench`, replication factor 1; the lease table is
//! `lock_bench.leases`, the cell locks' table `lock_bench.lock_cells`). `--memory`: the
//! embedded stores with `--latency-us` (default 300) added to every call; with `--virtual` as
//! well, on tokio's paused clock, each call's delay drawn within `--jitter-pct` (default 20)
//! of it: figures then count round trips only, free of the machine's CPU and load (the timer
//! still rounds each delay up to a whole millisecond). `--latency-ms L`: the CQL test server
//! answers every request L ms late (each on its own, as a LAN and a quorum of replicas would;
//! the tokio timer rounds each delay up to its next millisecond tick).
//!
//! # Other flags
//!
//! `--seconds S` per measurement (default 5); `--runs N` measurements per row (default 1;
//! each column printed is the median of the runs); `--contenders 1,4,16,64`;
//! `--algorithms bakery,fair,shadow,lease,acquire`; `--hold-ms` and `--think-ms` (default 0):
//! how long each contender holds the lock, and pauses before asking again.
//! `--nodetool PATH` (with `--scylla`): reads the node's Paxos counters through
//! `PATH sjk mx -b <bean> -mg -f Count` (Cassandra's JMX; `nodetool` itself will do).
//!
//! # Algorithms
//!
//! `bakery`, `fair`, `shadow`: the cell locks. `lease`: the [`LeaseLock`]. `acquire`: the
//! code the lease lock wraps, called directly: [`LeaseClient::acquire`] then
//! [`Lease::release`] (no renewals: holds are meant to stay well under the TTL of 5 s).
//! Each contender is its own lock object (its own process key or lease client), loops
//! lock → hold → release → think on a lock name fresh to the measurement, and counts its
//! acquisitions.
//!
//! # Columns
//!
//! Acquisitions per second; wait for the lock p50 / p99; store round trips per acquisition
//! (every call of every contender made inside the measuring window, waiting and renewing
//! included, over the acquisitions granted inside it); LWTs per acquisition (the lease
//! store's conditional writes and SERIAL reads among those calls, as the client sent them;
//! 0 for the cell locks, which use no LWT); Paxos rounds per acquisition, as the server
//! counted them (every round attempted, including the retries of contended rounds inside
//! the coordinator): the CQL test server's own count, or a real node's prepare phases on the
//! lease table with `--nodetool`, `n/a` otherwise; and Jain's fairness index over the
//! contenders' acquisition counts (1 = perfectly even, 1/n = one contender got them all).
//!
//! After the table, a scaling summary per algorithm: the rate at the highest contender
//! count over the rate at 1, Jain's index and wait p99 (against the fair lock's) at the
//! highest count, and Paxos rounds per acquisition there; for `fair`, `lease` and `acquire`
//! a verdict against their targets at 64 contenders.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::cells::CellStore;
use cql_lease::cells::faulty::FaultyCellStore;
use cql_lease::cells::memory::MemoryCellStore;
use cql_lease::cells::scylla::{CellOptions, ScyllaCellStore};
use cql_lease::lock::{
    BakeryLock, Contenders, FairLock, LeaseLock, Lock, LockGuard, LockOptions, ShadowLock,
};
use cql_lease::memory::{Fault, Times};
use cql_lease::scylla::{Replication, ScyllaLeaseStore, ScyllaOptions};
use cql_lease::{
    AcquireOutcome, CallCounts, CasOutcome, Claim, CountingStore, FencingToken, Lease, LeaseClient,
    LeaseStore, MemoryStore, StoreError, StoredLease, Timing,
};
use cql_test_server::{CqlTestServer, Flavor, NodeFault, ServerOptions};
use examples::Flags;
use scylla::client::session_builder::SessionBuilder;
use scylla::statement::Consistency;
use tokio::time::Instant;

/// The bench's keyspace on a cluster.
const KEYSPACE: &str = "lock_bench";
/// The lease table, whose Paxos counters `--nodetool` reads.
const LEASE_TABLE: &str = "leases";
/// Every algorithm, in the table's order.
const ALGORITHMS: &str = "bakery,fair,shadow,lease,acquire";

struct Stores {
    cells: Arc<dyn CellStore>,
    /// What the lease contenders call: the gate over the counted store.
    leases: Arc<WindowGate>,
    counted: Arc<CountingStore<dyn LeaseStore>>,
    paxos: PaxosSource,
    label: String,
    /// Each contender on handles of its own (`--apart`).
    apart: bool,
}

/// Where the Paxos round counts come from.
enum PaxosSource {
    /// The CQL test server's own counters (kept here, which also keeps the server running).
    TestServer(Box<CqlTestServer>),
    /// A node's JMX, through `PATH sjk mx`, for this bean.
    Nodetool { path: String, bean: String },
    /// None; the reason, for the header.
    Unavailable(&'static str),
}

impl PaxosSource {
    /// What the column shows, for the header.
    fn describe(&self) -> String {
        let outside = "lease-store LWTs and SERIAL reads sent outside the window (normally \
                       only the last holder's release) are subtracted at one round each";
        match self {
            PaxosSource::TestServer(_) => format!(
                "the CQL test server's count of rounds attempted, read before the window \
                 opens and after every contender stopped; {outside}"
            ),
            PaxosSource::Nodetool { path, bean } => format!(
                "prepare phases of {KEYSPACE}.{LEASE_TABLE} on the node `{path}` reaches \
                 (`{bean}`, Count: one per round attempted with replication factor 1, \
                 contended retries included; a larger cluster shows only that node's share), \
                 read before the window opens and after every contender stopped (each reading \
                 takes seconds, while the bench waits); {outside}, so the figure is close, \
                 not exact"
            ),
            PaxosSource::Unavailable(why) => format!("n/a: {why}"),
        }
    }

    /// Rounds so far; `None` without a source, or (with a warning) when the reading failed.
    async fn rounds(&self) -> Option<u64> {
        match self {
            PaxosSource::TestServer(server) => Some(server.paxos().total_attempts()),
            PaxosSource::Nodetool { path, bean } => match read_jmx_count(path, bean).await {
                Ok(count) => Some(count),
                Err(e) => {
                    eprintln!("Paxos rounds not read: {e}");
                    None
                }
            },
            PaxosSource::Unavailable(_) => None,
        }
    }
}

/// Runs `path sjk mx -b bean -mg -f Count`, which prints the bean's name, then the count.
async fn read_jmx_count(path: &str, bean: &str) -> Result<u64, String> {
    let command = format!("{path} sjk mx -b {bean} -mg -f Count");
    let (path, bean) = (path.to_owned(), bean.to_owned());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&path)
            .args(["sjk", "mx", "-b", &bean, "-mg", "-f", "Count"])
            .stdin(std::process::Stdio::null())
            .output()
    })
    .await
    .map_err(|e| format!("{command}: {e}"))?
    .map_err(|e| format!("{command}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // sjk exits 0 even when the bean is missing, so the count's line is the proof.
    stdout
        .lines()
        .rev()
        .find_map(|line| line.trim().parse().ok())
        .filter(|_| output.status.success())
        .ok_or_else(|| {
            format!(
                "{command}: no count in its output ({}): {} {}",
                output.status,
                stdout.trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            )
        })
}

/// Refuses new claims once the measuring window has closed: contenders still waiting then
/// stop at once instead of each taking the lock once more after it, work the window did not
/// ask for that the server's Paxos counters would include. A refused claim is never sent
/// (the gate sits above the counting store) and ends `acquire` at once, as any refusal
/// does. Everything else passes: renewals, releases and reads settle what was claimed
/// inside the window.
struct WindowGate {
    inner: Arc<dyn LeaseStore>,
    closed: AtomicBool,
}

impl WindowGate {
    fn set_closed(&self, closed: bool) {
        self.closed.store(closed, Ordering::SeqCst);
    }
}

#[async_trait]
impl LeaseStore for WindowGate {
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(StoreError::Rejected(
                "the measuring window has closed".into(),
            ));
        }
        self.inner.try_acquire(claim).await
    }
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.inner.renew(claim).await
    }
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.inner.release(name, holder_id).await
    }
    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.inner.read(name).await
    }
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(StoreError::Rejected(
                "the measuring window has closed".into(),
            ));
        }
        self.inner.hand_over(from_holder_id, from_token, to).await
    }
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.inner.peek(name).await
    }
    fn waiting_line(&self) -> Option<Arc<dyn cql_lease::cells::CellStore>> {
        self.inner.waiting_line()
    }
}

/// The gated store under a handle of its own (`--apart`): the library shares waiters' looks
/// by store handle, so a contender on its own handle waits as one in its own process would.
struct Apart(Arc<WindowGate>);

#[async_trait::async_trait]
impl LeaseStore for Apart {
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        self.0.try_acquire(claim).await
    }
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.0.renew(claim).await
    }
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.0.release(name, holder_id).await
    }
    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.0.read(name).await
    }
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        self.0.hand_over(from_holder_id, from_token, to).await
    }
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.0.peek(name).await
    }
    fn waiting_line(&self) -> Option<Arc<dyn cql_lease::cells::CellStore>> {
        self.0.waiting_line()
    }
}

/// Wraps the lease store: counted, behind the window's gate.
fn gated(store: Arc<dyn LeaseStore>) -> (Arc<WindowGate>, Arc<CountingStore<dyn LeaseStore>>) {
    let counted = Arc::new(CountingStore::new(store));
    let gate = Arc::new(WindowGate {
        inner: counted.clone(),
        closed: AtomicBool::new(false),
    });
    (gate, counted)
}

fn options() -> LockOptions {
    LockOptions {
        timing: Timing {
            lease_duration: Duration::from_secs(5),
            renew_period: Duration::from_secs(1),
            retry_period: Duration::from_millis(50),
            max_clock_skew: Duration::from_millis(100),
            resolve_timeout: Duration::from_secs(2),
            request_timeout: None,
        },
        poll_interval: Duration::from_millis(20),
    }
}

async fn open(args: &Cli) -> Result<Stores, Box<dyn std::error::Error>> {
    let latency_ms = args.get("latency-ms").map(str::parse::<u64>).transpose()?;
    if latency_ms.is_some() && (args.get("memory").is_some() || args.get("scylla").is_some()) {
        return Err("--latency-ms delays the CQL test server; --memory takes --latency-us".into());
    }
    if args.get("nodetool").is_some() && args.get("scylla").is_none() {
        return Err("--nodetool reads a real node's counters: add --scylla HOST:PORT".into());
    }
    let is_virtual = args.get("virtual").is_some();
    if is_virtual && args.get("memory").is_none() {
        return Err("--virtual runs the embedded stores: add --memory".into());
    }
    if args.get("jitter-pct").is_some() && !is_virtual {
        return Err("--jitter-pct varies the delays of --virtual: add it".into());
    }
    if is_virtual
        && args
            .get("latency-us")
            .is_some_and(|us| us.parse() == Ok(0u64))
    {
        // Stores that never wait never let the paused clock move: the window would not end.
        return Err("--virtual needs a delay: --latency-us above 0".into());
    }
    if args.get("memory").is_some() {
        let latency = Duration::from_micros(args.get("latency-us").map_or(Ok(300), str::parse)?);
        let cells = MemoryCellStore::new();
        let leases = MemoryStore::new();
        // Virtual time: each call's delay drawn uniformly within the spread around the mean,
        // so that answers do not all land on one tick.
        let spread = if is_virtual {
            let pct = args.get("jitter-pct").map_or(Ok(20), str::parse::<u32>)?;
            if pct > 100 {
                return Err("--jitter-pct is at most 100".into());
            }
            f64::from(pct) / 100.0
        } else {
            0.0
        };
        let fixed = latency.mul_f64(1.0 - spread);
        let varying = latency.mul_f64(2.0 * spread);
        for (delay, fault) in [
            (fixed, Fault::Latency(fixed)),
            (varying, Fault::LatencyUpTo(varying)),
        ] {
            if !delay.is_zero() {
                cells.inject(None, fault, Times::Always);
                leases.inject(None, fault, Times::Always);
            }
        }
        let label = if is_virtual {
            format!(
                "embedded stores, {latency:?} ± {:.0} % per call, virtual time (paused clock)",
                spread * 100.0
            )
        } else {
            format!("embedded stores, {latency:?} per call, real time")
        };
        let (leases, counted) = gated(Arc::new(leases));
        return Ok(Stores {
            cells: Arc::new(cells),
            leases,
            counted,
            paxos: PaxosSource::Unavailable("the embedded stores run no Paxos"),
            label,
            apart: false,
        });
    }
    let (session, server, mut label) = match args.get("scylla") {
        Some(addr) => (
            SessionBuilder::new().known_node(addr).build().await?,
            None,
            format!("ScyllaDB/Cassandra at {addr}"),
        ),
        None => {
            let server = CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra)).await?;
            let session = server.session().await;
            (
                session,
                Some(server),
                "CQL test server (Cassandra mode), real time".into(),
            )
        }
    };
    let session = Arc::new(session);
    let location = ScyllaOptions {
        keyspace: KEYSPACE.into(),
        table: LEASE_TABLE.into(),
        replication: Replication::Simple(1),
        request_timeout: Some(Duration::from_secs(2)),
        ..ScyllaOptions::default()
    };
    location.create_schema(&session).await?;
    let leases = ScyllaLeaseStore::new(Arc::clone(&session), location.clone()).await?;
    let cell_options = CellOptions {
        location: ScyllaOptions {
            table: "lock_cells".into(),
            ..location
        },
        consistency: Consistency::Quorum,
    };
    ScyllaCellStore::create_schema(&session, &cell_options).await?;
    let cells = ScyllaCellStore::new(session, cell_options).await?;
    if let (Some(server), Some(ms)) = (&server, latency_ms) {
        // Set up first, then slow every answer down: the delay is per request (scylla-proxy
        // answers each delayed frame from its own task), not a queue.
        server.node_fault(0, NodeFault::Slow(Duration::from_millis(ms)));
        label.push_str(&format!(", every answer {ms} ms late"));
    }
    let paxos = match (server, args.get("nodetool")) {
        (Some(server), _) => PaxosSource::TestServer(Box::new(server)),
        (None, Some(path)) => {
            let bean = format!(
                "org.apache.cassandra.metrics:type=Table,keyspace={KEYSPACE},\
                 scope={LEASE_TABLE},name=CasPrepareLatency"
            );
            // One reading now: a wrong path or a node without this bean fails here, not
            // after the first measurement.
            read_jmx_count(path, &bean).await?;
            PaxosSource::Nodetool {
                path: path.to_owned(),
                bean,
            }
        }
        (None, None) => PaxosSource::Unavailable(
            "a real cluster's counts are read over JMX: pass --nodetool PATH",
        ),
    };
    let (leases, counted) = gated(Arc::new(leases));
    Ok(Stores {
        cells: Arc::new(cells),
        leases,
        counted,
        paxos,
        label,
        apart: false,
    })
}

/// One contender: a lock object, or a lease client called directly.
enum Contender {
    Lock(Arc<dyn Lock>),
    // Boxed: a client is large next to an `Arc`.
    Acquire {
        client: Box<LeaseClient>,
        owner: String,
    },
}

/// What a contender holds.
enum Held {
    Guard(LockGuard),
    Lease(Lease),
}

impl Contender {
    async fn acquire(&self, name: &str, timeout: Duration) -> Result<Held, String> {
        match self {
            Contender::Lock(lock) => lock
                .lock(name, Some(timeout))
                .await
                .map(Held::Guard)
                .map_err(|e| e.to_string()),
            Contender::Acquire { client, owner } => client
                .acquire(name, owner, None, Some(timeout))
                .await
                .map(Held::Lease)
                .map_err(|e| e.to_string()),
        }
    }
}

impl Held {
    async fn release(self) {
        // A failed release leaves the lease to its TTL, on a name no later measurement uses.
        let _ = match self {
            Held::Guard(guard) => guard.release().await.map_err(|e| e.to_string()),
            Held::Lease(lease) => lease.release().await.map_err(|e| e.to_string()),
        };
    }
}

fn make(
    algorithm: &str,
    stores: &Stores,
    store: Arc<dyn CellStore>,
    i: usize,
) -> Result<Contender, Box<dyn std::error::Error>> {
    let contenders = Contenders::new(&format!("bench{i:03}"))?;
    let owner = format!("bench{i:03}");
    let client = || {
        let leases: Arc<dyn LeaseStore> = if stores.apart {
            Arc::new(Apart(stores.leases.clone()))
        } else {
            stores.leases.clone()
        };
        LeaseClient::new(leases, options().timing)
    };
    let lock: Arc<dyn Lock> = match algorithm {
        "bakery" => Arc::new(BakeryLock::with_contenders(store, options(), contenders)?),
        "fair" => Arc::new(FairLock::with_contenders(store, options(), contenders)?),
        "shadow" => Arc::new(ShadowLock::new(store, options())?),
        "lease" => Arc::new(LeaseLock::new(client()?, &owner)?),
        "acquire" => {
            return Ok(Contender::Acquire {
                client: Box::new(client()?),
                owner,
            });
        }
        other => {
            return Err(format!("unknown algorithm {other} (known: {ALGORITHMS})").into());
        }
    };
    Ok(Contender::Lock(lock))
}

#[derive(Debug, Clone, Copy)]
struct Row {
    per_second: f64,
    p50: Duration,
    p99: Duration,
    round_trips: f64,
    lwts: f64,
    /// Server-side Paxos rounds per acquisition, when there is a source.
    paxos: Option<f64>,
    jain: f64,
}

/// Where the measuring window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    Pending,
    Open,
    Closed,
}

/// How long a contender still waiting after the window may take to give up before its
/// attempt is dropped (cancel-safe for every algorithm): the lease contenders end at once
/// on the gate's refusal, the cell locks on their next grant.
const STOP_GRACE: Duration = Duration::from_secs(5);

async fn measure(
    stores: &Stores,
    algorithm: &str,
    n: usize,
    seconds: Duration,
    (hold, think): (Duration, Duration),
) -> Result<Row, Box<dyn std::error::Error>> {
    // A fresh lock name per measurement: on the CQL test server a read walks its whole
    // partition (dead cells included, for the hour of gc_grace), so reusing a name makes each
    // run slower than the one before; on a cluster it keeps every row's lease history apart.
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let name = format!("{algorithm}-{n}-{}-{run}", std::process::id());
    let window = tokio::sync::watch::Sender::new(Window::Pending);
    let mut tasks = Vec::new();
    let mut views = Vec::new();
    // One counted handle on the cells for all contenders, as one process has, or one each
    // (`--apart`): the library shares waiters' reads by store handle.
    let mut shared: Option<Arc<dyn CellStore>> = None;
    for i in 0..n {
        let cells = match &shared {
            Some(cells) if !stores.apart => Arc::clone(cells),
            _ => {
                let view = FaultyCellStore::new(Arc::clone(&stores.cells));
                let cells: Arc<dyn CellStore> = Arc::new(view.clone());
                views.push(view);
                shared = Some(Arc::clone(&cells));
                cells
            }
        };
        let contender = make(algorithm, stores, cells, i)?;
        let (name, mut window) = (name.clone(), window.subscribe());
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            // Everyone starts with the window.
            let _ = window.wait_for(|w| *w != Window::Pending).await;
            let mut closed = window.clone();
            let given_up = async move {
                let _ = closed.wait_for(|w| *w == Window::Closed).await;
                tokio::time::sleep(STOP_GRACE).await;
            };
            tokio::pin!(given_up);
            while *window.borrow() == Window::Open {
                let asked = Instant::now();
                let granted = tokio::select! {
                    granted = contender.acquire(&name, Duration::from_secs(60)) => granted,
                    () = &mut given_up => break,
                };
                let open = *window.borrow() == Window::Open;
                match granted {
                    Ok(held) if !open => {
                        held.release().await;
                        break; // granted after the window: not counted
                    }
                    Ok(held) => {
                        waits.push(asked.elapsed());
                        if !hold.is_zero() {
                            tokio::time::sleep(hold).await;
                        }
                        held.release().await;
                        if !think.is_zero() {
                            tokio::time::sleep(think).await;
                        }
                    }
                    // After the window, the gate's refusal is how a lease contender stops.
                    Err(_) if !open => break,
                    Err(e) => eprintln!("{name}: {e}"),
                }
            }
            waits
        }));
    }
    // Store calls are counted inside the window only, like the acquisitions: work for
    // acquisitions granted after it would otherwise inflate the per-acquisition cost.
    let trips = |views: &[FaultyCellStore]| {
        let cells: u64 = views.iter().map(FaultyCellStore::round_trips).sum();
        // Plain reads of the lease and its waiting line's reads and writes count as trips.
        let plain = stores.counted.peeks() + stores.counted.line_calls();
        (cells, stores.counted.calls(), plain)
    };
    let lwts = |calls: CallCounts| calls.paxos_rounds();
    // The server's counters bracket the window from outside (a JMX reading takes seconds);
    // the lease calls between each reading and the window's edge are known to the client.
    let ahead = lwts(stores.counted.calls());
    let rounds_before = stores.paxos.rounds().await;
    stores.leases.set_closed(false);
    let (cells_before, leases_before, peeks_before) = trips(&views);
    let started = Instant::now();
    window.send_replace(Window::Open);
    tokio::time::sleep(seconds).await;
    // Closed for the contenders first: one refused after this stops quietly.
    window.send_replace(Window::Closed);
    stores.leases.set_closed(true);
    let elapsed = started.elapsed();
    let (cells_after, leases_after, peeks_after) = trips(&views);
    let lease_calls = leases_after.since(leases_before);
    let trips =
        cells_after - cells_before + lease_calls.paxos_rounds() + peeks_after - peeks_before;
    let mut counts = Vec::new();
    let mut waits = Vec::new();
    for t in tasks {
        let w = t.await?;
        counts.push(w.len() as f64);
        waits.extend(w);
    }
    let rounds_after = stores.paxos.rounds().await;
    let outside = lwts(leases_before) - ahead + lwts(stores.counted.calls()) - lwts(leases_after);
    waits.sort();
    let total = waits.len().max(1) as f64;
    let pick = |q: f64| {
        waits
            .get(((waits.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    let sum: f64 = counts.iter().sum();
    let squares: f64 = counts.iter().map(|c| c * c).sum();
    Ok(Row {
        per_second: waits.len() as f64 / elapsed.as_secs_f64(),
        p50: pick(0.5),
        p99: pick(0.99),
        round_trips: trips as f64 / total,
        lwts: lwts(lease_calls) as f64 / total,
        paxos: rounds_before.zip(rounds_after).map(|(before, after)| {
            after.saturating_sub(before).saturating_sub(outside) as f64 / total
        }),
        jain: if squares > 0.0 {
            sum * sum / (counts.len() as f64 * squares)
        } else {
            0.0
        },
    })
}

/// The median of each column over the runs (each column on its own).
fn median_row(runs: &[Row]) -> Row {
    fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        v[v.len() / 2]
    }
    Row {
        per_second: median(runs.iter().map(|r| r.per_second).collect()),
        p50: median(runs.iter().map(|r| r.p50).collect()),
        p99: median(runs.iter().map(|r| r.p99).collect()),
        round_trips: median(runs.iter().map(|r| r.round_trips).collect()),
        lwts: median(runs.iter().map(|r| r.lwts).collect()),
        // A run without a reading leaves the median unknown.
        paxos: runs
            .iter()
            .map(|r| r.paxos)
            .collect::<Option<Vec<_>>>()
            .map(median),
        jain: median(runs.iter().map(|r| r.jain).collect()),
    }
}

fn paxos_cell(paxos: Option<f64>) -> String {
    paxos.map_or_else(|| "n/a".into(), |p| format!("{p:.1}"))
}

/// The contender count the targets are set at.
const TARGET_CONTENDERS: usize = 64;

/// A target: its label, and whether it was met (`None`: not measured).
type Check = (&'static str, Option<bool>);

/// The targets at 64 contenders, for the algorithms that have some.
fn targets(
    algorithm: &str,
    rate_ratio: Option<f64>,
    row: &Row,
    p99_ratio: Option<f64>,
) -> Option<(&'static str, Vec<Check>)> {
    let scaled = ("rate ≥ 0.7x", rate_ratio.map(|r| r >= 0.7));
    match algorithm {
        "fair" => Some((
            "≥ 0.7x its rate at 1, Jain ≥ 0.99",
            vec![scaled, ("Jain ≥ 0.99", Some(row.jain >= 0.99))],
        )),
        "lease" | "acquire" => Some((
            "≥ 0.7x its rate at 1, Jain ≥ 0.95, p99 ≤ 2x fair's, ≤ 4 Paxos rounds/acq",
            vec![
                scaled,
                ("Jain ≥ 0.95", Some(row.jain >= 0.95)),
                ("p99 ≤ 2x fair's", p99_ratio.map(|r| r <= 2.0)),
                ("≤ 4 Paxos rounds/acq", row.paxos.map(|p| p <= 4.0)),
            ],
        )),
        _ => None,
    }
}

/// `met`, or which targets were missed, or which could not be judged.
fn verdict(checks: &[Check]) -> String {
    let list = |want: Option<bool>| {
        checks
            .iter()
            .filter(|(_, met)| *met == want)
            .map(|(label, _)| *label)
            .collect::<Vec<_>>()
    };
    let (missed, unknown) = (list(Some(false)), list(None));
    if !missed.is_empty() {
        format!("missed: {}", missed.join(", "))
    } else if !unknown.is_empty() {
        format!("not judged: no figure for {}", unknown.join(", "))
    } else {
        "met".into()
    }
}

/// Per algorithm: how it holds up from 1 contender to the highest count measured, with the
/// verdicts against the targets when that count is 64.
fn print_scaling(rows: &[(String, usize, Row)]) {
    let Some(top) = rows.iter().map(|(_, n, _)| *n).max() else {
        return;
    };
    let at = |algorithm: &str, n: usize| {
        rows.iter()
            .find(|(a, m, _)| a == algorithm && *m == n)
            .map(|(_, _, row)| *row)
    };
    let fair = at("fair", top);
    println!();
    println!(
        "Scaling, {top} contenders against 1 (rate ratio: acquisitions/s at {top} over those \
         at 1; p99 ratio: wait p99 over the fair lock's at {top}). Targets at \
         {TARGET_CONTENDERS}: fair ≥ 0.7x, Jain ≥ 0.99; lease and acquire ≥ 0.7x, \
         Jain ≥ 0.95, p99 ≤ 2x the fair lock's, ≤ 4 Paxos rounds/acq."
    );
    println!(
        "| algorithm | rate ratio | Jain, {top} | p99 ratio | Paxos rounds/acq, {top} | targets | verdict |"
    );
    println!("|---|---:|---:|---:|---:|---|---|");
    let mut seen = Vec::new();
    for (algorithm, _, _) in rows {
        if seen.contains(algorithm) {
            continue;
        }
        seen.push(algorithm.clone());
        let Some(row) = at(algorithm, top) else {
            continue;
        };
        let rate_ratio =
            at(algorithm, 1).map(|one| row.per_second / one.per_second.max(f64::MIN_POSITIVE));
        let p99_ratio = fair
            .filter(|fair| !fair.p99.is_zero())
            .map(|fair| row.p99.as_secs_f64() / fair.p99.as_secs_f64());
        let ratio = |r: Option<f64>| r.map_or_else(|| "n/a".into(), |r| format!("{r:.2}x"));
        let (goal, judged) = match targets(algorithm, rate_ratio, &row, p99_ratio) {
            Some((goal, checks)) if top == TARGET_CONTENDERS => (goal, verdict(&checks)),
            Some((goal, _)) => (
                goal,
                format!("not judged: targets are set at {TARGET_CONTENDERS}"),
            ),
            None => ("none", "-".into()),
        };
        println!(
            "| {algorithm} | {} | {:.3} | {} | {} | {goal} | {judged} |",
            ratio(rate_ratio),
            row.jain,
            ratio(p99_ratio),
            paxos_cell(row.paxos),
        );
    }
}

/// The command line (see the module documentation).
#[derive(Debug, clap::Parser)]
#[command(about = "Lock benchmark: every lock algorithm at 1, 4, 16 and 64 contenders, then how each scales.", long_about = None)]
struct Cli {
    /// A real cluster (keyspace lock_bench, replication factor 1) instead of the CQL test server.
    #[arg(long = "scylla", value_name = "HOST:PORT")]
    scylla: Option<String>,
    /// With --scylla: read the node's Paxos counters through `PATH sjk mx` (Cassandra's JMX).
    #[arg(long = "nodetool", value_name = "PATH")]
    nodetool: Option<String>,
    /// Seconds per measurement [default: 5].
    #[arg(long = "seconds", value_name = "S")]
    seconds: Option<String>,
    /// Contender counts, comma separated [default: 1,4,16,64].
    #[arg(long = "contenders", value_name = "N,N,...")]
    contenders: Option<String>,
    /// Algorithms, comma separated [default: bakery,fair,shadow,lease,acquire].
    #[arg(long = "algorithms", value_name = "A,A,...")]
    algorithms: Option<String>,
    /// With --memory: microseconds added to every store call [default: 300].
    #[arg(long = "latency-us", value_name = "US")]
    latency_us: Option<String>,
    /// The CQL test server answers every request this many ms late [default: 0].
    #[arg(long = "latency-ms", value_name = "MS")]
    latency_ms: Option<String>,
    /// How long each contender holds the lock [default: 0].
    #[arg(long = "hold-ms", value_name = "MS")]
    hold_ms: Option<String>,
    /// How long each contender pauses before asking again [default: 0].
    #[arg(long = "think-ms", value_name = "MS")]
    think_ms: Option<String>,
    /// Measurements per row; each column printed is the median [default: 1].
    #[arg(long = "runs", value_name = "N")]
    runs: Option<String>,
    /// With --virtual: each call's delay drawn within this percentage [default: 20].
    #[arg(long = "jitter-pct", value_name = "PCT")]
    jitter_pct: Option<String>,
    /// The embedded stores (with --latency-us per call) instead of the CQL test server.
    #[arg(long = "memory")]
    memory: bool,
    /// With --memory: tokio's paused clock, counting round trips only.
    #[arg(long = "virtual")]
    r#virtual: bool,
    /// Each contender on store handles of its own, as if each ran in a process of its own:
    /// waiters then share no reads of the lease or the lock's queue (by default they share
    /// one handle per store, as the tasks of one process do).
    #[arg(long = "apart")]
    apart: bool,
}

impl Flags for Cli {
    fn get(&self, name: &str) -> Option<&str> {
        match name {
            "scylla" => self.scylla.as_deref(),
            "nodetool" => self.nodetool.as_deref(),
            "seconds" => self.seconds.as_deref(),
            "contenders" => self.contenders.as_deref(),
            "algorithms" => self.algorithms.as_deref(),
            "latency-us" => self.latency_us.as_deref(),
            "latency-ms" => self.latency_ms.as_deref(),
            "hold-ms" => self.hold_ms.as_deref(),
            "think-ms" => self.think_ms.as_deref(),
            "runs" => self.runs.as_deref(),
            "jitter-pct" => self.jitter_pct.as_deref(),
            "memory" => self.memory.then_some(""),
            "virtual" => self.r#virtual.then_some(""),
            "apart" => self.apart.then_some(""),
            _ => None,
        }
    }
}
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = <Cli as clap::Parser>::parse();
    let seconds = args.seconds("seconds")?.unwrap_or(Duration::from_secs(5));
    let contenders: Vec<usize> = args
        .get("contenders")
        .unwrap_or("1,4,16,64")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let algorithms: Vec<String> = args
        .get("algorithms")
        .unwrap_or(ALGORITHMS)
        .split(',')
        .map(str::to_owned)
        .collect();
    if let Some(unknown) = algorithms
        .iter()
        .find(|a| !ALGORITHMS.split(',').any(|known| known == *a))
    {
        return Err(format!("unknown algorithm {unknown} (known: {ALGORITHMS})").into());
    }
    let ms = |name: &str| -> Result<Duration, Box<dyn std::error::Error>> {
        Ok(Duration::from_millis(
            args.get(name).map_or(Ok(0), str::parse)?,
        ))
    };
    let pace = (ms("hold-ms")?, ms("think-ms")?);
    let runs: usize = args.get("runs").map_or(Ok(1), str::parse)?;
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    // Virtual time: one thread on a paused clock that jumps to the next timer whenever every
    // task waits, so only the stores' delays pass.
    let runtime = if args.get("virtual").is_some() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
    };
    runtime.block_on(async {
        let mut stores = open(&args).await?;
        stores.apart = args.apart;
        println!(
            "lock_bench on {}, {seconds:?} per row, hold {:?}, think {:?}, median of {runs} run(s)",
            stores.label, pace.0, pace.1
        );
        println!(
            "round trips/acq: every store call (cell and waiting-line reads and writes, LWTs, SERIAL and plain \
             reads) made inside the window, over the acquisitions granted in it. LWTs/acq: \
             the lease store's conditional writes and SERIAL reads among them, as the client \
             sent them. Paxos rounds/acq: {}.",
            stores.paxos.describe()
        );
        println!(
            "| algorithm | contenders | acquisitions/s | wait p50 | wait p99 | round trips/acq | LWTs/acq | Paxos rounds/acq | Jain |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        let mut rows = Vec::new();
        for algorithm in &algorithms {
            for &n in &contenders {
                let mut all = Vec::with_capacity(runs);
                for _ in 0..runs {
                    all.push(measure(&stores, algorithm, n, seconds, pace).await?);
                    // Let the last holders' releases and the TTLs of stragglers settle.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                let row = median_row(&all);
                println!(
                    "| {algorithm} | {n} | {:.1} | {:.1} ms | {:.1} ms | {:.1} | {:.1} | {} | {:.3} |",
                    row.per_second,
                    row.p50.as_secs_f64() * 1e3,
                    row.p99.as_secs_f64() * 1e3,
                    row.round_trips,
                    row.lwts,
                    paxos_cell(row.paxos),
                    row.jain
                );
                rows.push((algorithm.clone(), n, row));
            }
        }
        print_scaling(&rows);
        Ok(())
    })
}
