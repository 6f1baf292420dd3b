//! Tables, rows and cells with Cassandra's liveness rules: per-cell write timestamps and TTLs
//! counted in whole seconds, and a row marker written only by `INSERT`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use scylla_cql::frame::response::error::DbError;

use super::ServerOptions;
use super::clock::ServerClock;
pub use super::clustering::{Bound, Clustering, Component, RangeTombstone, Slice, compare_prefix};
use super::parser::TableRef;
use super::stats::{PartitionId, PaxosTracker, TombstoneStats};
use super::values::{CqlType, Value};

/// Which database the server imitates where they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// A failed LWT returns the conditioned columns; an applied one only `[applied]`.
    Cassandra,
    /// Every LWT returns `[applied]` plus the old values of those columns.
    Scylla,
}

/// An error answer, with its message.
#[derive(Debug, Clone)]
pub struct DbErr {
    /// The protocol error.
    pub error: DbError,
    /// The message.
    pub message: String,
}

impl DbErr {
    /// `Invalid`
    pub fn invalid(message: impl Into<String>) -> Self {
        DbErr {
            error: DbError::Invalid,
            message: message.into(),
        }
    }
    /// `SyntaxError`
    pub fn syntax(message: impl Into<String>) -> Self {
        DbErr {
            error: DbError::SyntaxError,
            message: message.into(),
        }
    }
}

/// When a cell or marker was written and when it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// Write timestamp, microseconds.
    pub timestamp: i64,
    /// First second at which it is dead (`None`: never).
    pub expires_at_sec: Option<i64>,
}

impl Liveness {
    /// Whether it is still live at `now_sec`.
    pub fn is_live(&self, now_sec: i64) -> bool {
        self.expires_at_sec.is_none_or(|at| now_sec < at)
    }
}

/// A deletion: everything written at or before `timestamp` is shadowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deletion {
    /// Timestamp of the delete, microseconds.
    pub timestamp: i64,
    /// Server second it was written: purged `gc_grace_seconds` later.
    pub at_sec: i64,
}

/// A regular cell: a value, or a tombstone (`value: None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Its value; `None` for a cell tombstone.
    pub value: Option<Value>,
    /// Its liveness (for a tombstone, `expires_at_sec` is when it was written).
    pub live: Liveness,
}

impl Cell {
    /// The live value at `now_sec`.
    pub fn live_value(&self, now_sec: i64) -> Option<&Value> {
        self.value.as_ref().filter(|_| self.live.is_live(now_sec))
    }

    /// The second from which this cell is a tombstone, if it is one (deleted or expired).
    pub fn dead_since(&self, now_sec: i64) -> Option<i64> {
        match (&self.value, self.live.expires_at_sec) {
            (None, at) => Some(at.unwrap_or(now_sec)),
            (Some(_), Some(at)) if now_sec >= at => Some(at),
            _ => None,
        }
    }

    /// Last write wins: the higher timestamp. On a tie the rules differ. Cassandra: a
    /// tombstone or expiring cell beats a plain one, then a tombstone beats an expiring
    /// cell, then the later local deletion (or expiry) time, then the greater value as
    /// signed bytes. ScyllaDB: a tombstone beats a value (two tombstones: the later
    /// deletion), then the greater value as unsigned bytes, then an expiring cell, then the
    /// later expiry.
    pub fn wins_over(&self, other: &Cell, flavor: Flavor) -> bool {
        if self.live.timestamp != other.live.timestamp {
            return self.live.timestamp > other.live.timestamp;
        }
        let (a_tomb, b_tomb) = (self.value.is_none(), other.value.is_none());
        let (a_ldt, b_ldt) = (self.live.expires_at_sec, other.live.expires_at_sec);
        let bytes = |c: &Cell| c.value.as_ref().and_then(Value::encode).unwrap_or_default();
        match flavor {
            Flavor::Cassandra => {
                if a_ldt.is_some() != b_ldt.is_some() {
                    return a_ldt.is_some();
                }
                if a_tomb != b_tomb {
                    return a_tomb;
                }
                if a_ldt != b_ldt {
                    return a_ldt > b_ldt;
                }
                let signed = |b: Vec<u8>| b.into_iter().map(|x| x as i8).collect::<Vec<_>>();
                signed(bytes(self)) >= signed(bytes(other))
            }
            Flavor::Scylla => {
                if a_tomb != b_tomb {
                    return a_tomb;
                }
                if a_tomb {
                    return a_ldt >= b_ldt;
                }
                match bytes(self).cmp(&bytes(other)) {
                    std::cmp::Ordering::Equal => match (a_ldt, b_ldt) {
                        (Some(a), Some(b)) => a >= b,
                        (a, _) => a.is_some(),
                    },
                    ord => ord.is_gt(),
                }
            }
        }
    }
}

/// A row: an optional marker, an optional row deletion, and cells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// The row marker (`INSERT` only).
    pub marker: Option<Liveness>,
    /// A row tombstone.
    pub deletion: Option<Deletion>,
    /// Cells by column (live, expired or deleted).
    pub cells: HashMap<String, Cell>,
}

impl Row {
    /// The live part of the row at `now_sec` with everything written at or before `shadow`
    /// removed; `None` when nothing is live.
    pub fn live(&self, now_sec: i64, shadow: i64) -> Option<Row> {
        let marker = self
            .marker
            .filter(|m| m.is_live(now_sec) && m.timestamp > shadow);
        let cells: HashMap<_, _> = self
            .cells
            .iter()
            .filter(|(_, c)| c.live.timestamp > shadow && c.live_value(now_sec).is_some())
            .map(|(k, c)| (k.clone(), c.clone()))
            .collect();
        (marker.is_some() || !cells.is_empty()).then_some(Row {
            marker,
            deletion: None,
            cells,
        })
    }
}

/// A partition: its key, an optional partition deletion, range tombstones, the static row
/// and the clustered rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// The partition key value.
    pub key: Value,
    /// A partition tombstone.
    pub deletion: Option<Deletion>,
    /// Range tombstones.
    pub ranges: Vec<RangeTombstone>,
    /// Static cells.
    pub statics: Row,
    /// Rows by clustering key.
    pub rows: BTreeMap<Clustering, Row>,
    /// The server second of the last purge (see `tombstone::purge`).
    pub purged_at: Option<i64>,
    /// The earliest second at which anything here died or dies (a deletion written, a
    /// cell's TTL running out), as far as is known: no purge can drop anything before it
    /// passes `gc_grace_seconds` (see `tombstone::purge`). `None`: nothing ever will.
    pub earliest_death: Option<i64>,
}

impl Partition {
    /// An empty partition.
    pub fn new(key: Value) -> Self {
        Partition {
            key,
            deletion: None,
            ranges: Vec::new(),
            statics: Row::default(),
            rows: BTreeMap::new(),
            purged_at: None,
            earliest_death: None,
        }
    }

    /// The highest deletion timestamp covering the row at `key` (partition, ranges, row).
    pub fn shadow(&self, key: &Clustering, row: Option<&Row>) -> i64 {
        let mut shadow = self.deletion.map_or(i64::MIN, |d| d.timestamp);
        for r in &self.ranges {
            if r.slice.contains(key) {
                shadow = shadow.max(r.deletion.timestamp);
            }
        }
        if let Some(d) = row.and_then(|r| r.deletion) {
            shadow = shadow.max(d.timestamp);
        }
        shadow
    }

    /// [`Partition::shadow`] counting only `ranges` (those a read's slice overlaps): rows
    /// outside them cannot be covered by the others.
    pub fn shadow_among(
        &self,
        ranges: &[&RangeTombstone],
        key: &Clustering,
        row: Option<&Row>,
    ) -> i64 {
        let mut shadow = self.deletion.map_or(i64::MIN, |d| d.timestamp);
        for r in ranges {
            if r.slice.contains(key) {
                shadow = shadow.max(r.deletion.timestamp);
            }
        }
        if let Some(d) = row.and_then(|r| r.deletion) {
            shadow = shadow.max(d.timestamp);
        }
        shadow
    }

    /// Notes that something here died, or will die, at second `at`.
    pub fn dies_at(&mut self, at: i64) {
        self.earliest_death = Some(self.earliest_death.map_or(at, |e| e.min(at)));
    }

    /// The live row at `key`.
    pub fn live_row(&self, key: &Clustering, now_sec: i64) -> Option<Row> {
        let row = self.rows.get(key)?;
        row.live(now_sec, self.shadow(key, Some(row)))
    }

    /// The live static cells.
    pub fn live_statics(&self, now_sec: i64) -> Option<Row> {
        let shadow = self.deletion.map_or(i64::MIN, |d| d.timestamp);
        self.statics.live(now_sec, shadow)
    }
}

/// A table.
#[derive(Debug, Clone)]
pub struct Table {
    /// Columns in declaration order.
    pub columns: Vec<(String, CqlType)>,
    /// The partition key column.
    pub partition_key: String,
    /// Clustering columns, `true` when `DESC`.
    pub clustering: Vec<(String, bool)>,
    /// Static columns.
    pub statics: HashSet<String>,
    /// Default TTL in seconds (0: none).
    pub default_ttl: i32,
    /// Seconds tombstones are kept.
    pub gc_grace: i64,
    /// Partitions by encoded key.
    pub partitions: BTreeMap<Vec<u8>, Partition>,
    /// System tables refuse writes.
    pub system: bool,
}

impl Table {
    /// A column's type.
    pub fn column_type(&self, name: &str) -> Result<&CqlType, DbErr> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .ok_or_else(|| DbErr::invalid(format!("Undefined column name {name}")))
    }

    /// Whether `name` is part of the primary key.
    pub fn is_key(&self, name: &str) -> bool {
        name == self.partition_key || self.clustering.iter().any(|(c, _)| c == name)
    }

    /// `SELECT *` order: the partition key, clustering columns, then the others by name.
    pub fn wildcard(&self) -> Vec<(String, CqlType)> {
        let mut out: Vec<(String, CqlType)> = Vec::new();
        let mut push = |n: &str| {
            if let Some(c) = self.columns.iter().find(|(c, _)| c == n) {
                out.push(c.clone());
            }
        };
        push(&self.partition_key);
        for (c, _) in &self.clustering {
            push(c);
        }
        let mut regular: Vec<_> = self
            .columns
            .iter()
            .filter(|(n, _)| !self.is_key(n))
            .cloned()
            .collect();
        regular.sort_by(|a, b| a.0.cmp(&b.0));
        out.extend(regular);
        out
    }
}

/// How a keyspace was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyspaceInfo {
    /// Its tables are distributed by tablets (ScyllaDB): LWTs are refused.
    pub tablets: bool,
}

/// All keyspaces and tables.
#[derive(Debug)]
pub struct Engine {
    /// The imitated database.
    pub flavor: Flavor,
    /// The clock TTLs run on.
    pub clock: Arc<ServerClock>,
    /// Tables by (keyspace, table).
    pub tables: HashMap<(String, String), Table>,
    /// Keyspaces by name.
    pub keyspaces: HashMap<String, KeyspaceInfo>,
    /// Thresholds and defaults.
    pub options: ServerOptions,
    /// Tombstones scanned by reads.
    pub tombstone_stats: TombstoneStats,
    /// Paxos rounds per partition (shared with the contention model, which runs rounds
    /// without holding the engine).
    pub paxos: Arc<PaxosTracker>,
    /// Plain (non-conditional) modifications per partition, a batch counting once per
    /// statement.
    pub plain_writes: HashMap<PartitionId, u64>,
    /// Every node's address, in node order (node 0 first).
    pub addresses: Vec<IpAddr>,
    /// The node serving the request being executed: `system.local` and `system.peers` are
    /// that node's view.
    pub node: usize,
    last_timestamp: i64,
}

impl Engine {
    /// An engine with the system tables a driver reads on connect.
    pub fn new(options: &ServerOptions, clock: Arc<ServerClock>, addresses: Vec<IpAddr>) -> Self {
        let mut engine = Engine {
            flavor: options.flavor,
            clock,
            tables: HashMap::new(),
            keyspaces: HashMap::new(),
            options: options.clone(),
            tombstone_stats: TombstoneStats::default(),
            paxos: Arc::default(),
            plain_writes: HashMap::new(),
            addresses,
            node: 0,
            last_timestamp: 0,
        };
        engine.install_system_tables();
        engine
    }

    /// The address of the node serving the current request, as errors name it.
    pub fn address(&self) -> IpAddr {
        self.addresses
            .get(self.node)
            .or(self.addresses.first())
            .copied()
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
    }

    /// Resolves a table reference.
    pub fn table_key(&self, t: &TableRef) -> Result<(String, String), DbErr> {
        let ks = t
            .keyspace
            .clone()
            .ok_or_else(|| DbErr::invalid("No keyspace has been specified"))?;
        if !self.keyspaces.contains_key(&ks) {
            return Err(DbErr::invalid(format!("Keyspace {ks} does not exist")));
        }
        let table = match ks.as_str() {
            "system" => super::system::per_node(&t.table, self.node),
            _ => t.table.clone(),
        };
        let key = (ks, table);
        if !self.tables.contains_key(&key) {
            return Err(DbErr::invalid(format!("unconfigured table {}", t.table)));
        }
        Ok(key)
    }

    /// The table behind a resolved key.
    pub fn table(&self, key: &(String, String)) -> Result<&Table, DbErr> {
        self.tables
            .get(key)
            .ok_or_else(|| DbErr::invalid(format!("unconfigured table {}", key.1)))
    }

    /// A write timestamp strictly above every earlier one (as Paxos ballots are).
    pub fn next_timestamp(&mut self) -> i64 {
        self.last_timestamp = self.clock.now_micros().max(self.last_timestamp + 1);
        self.last_timestamp
    }
}
