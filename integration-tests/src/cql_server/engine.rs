//! Tables, rows and cells with Cassandra's liveness rules: per-cell write timestamps and TTLs
//! counted in whole seconds, and a row marker written only by `INSERT`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use scylla_cql::frame::response::error::DbError;

use super::clock::ServerClock;
use super::parser::TableRef;
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
    fn is_live(&self, now_sec: i64) -> bool {
        self.expires_at_sec.is_none_or(|at| now_sec < at)
    }
}

/// A regular cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Its value.
    pub value: Value,
    /// Its liveness.
    pub live: Liveness,
}

/// A row: an optional marker and cells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// The row marker (`INSERT` only).
    pub marker: Option<Liveness>,
    /// Regular cells by column.
    pub cells: HashMap<String, Cell>,
}

impl Row {
    /// The live part of the row at `now_sec`; `None` when nothing is live.
    pub fn live(&self, now_sec: i64) -> Option<Row> {
        let marker = self.marker.filter(|m| m.is_live(now_sec));
        let cells: HashMap<_, _> = self
            .cells
            .iter()
            .filter(|(_, c)| c.live.is_live(now_sec))
            .map(|(k, c)| (k.clone(), c.clone()))
            .collect();
        (marker.is_some() || !cells.is_empty()).then_some(Row { marker, cells })
    }
}

/// A table with a single-column partition key.
#[derive(Debug, Clone)]
pub struct Table {
    /// Columns in declaration order.
    pub columns: Vec<(String, CqlType)>,
    /// The partition key column.
    pub partition_key: String,
    /// Default TTL in seconds (0: none).
    pub default_ttl: i32,
    /// Rows by encoded key, with the key value.
    pub rows: BTreeMap<Vec<u8>, (Value, Row)>,
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

    /// `SELECT *` order: the key, then regular columns by name.
    pub fn wildcard(&self) -> Vec<(String, CqlType)> {
        let mut regular: Vec<_> = self
            .columns
            .iter()
            .filter(|(n, _)| *n != self.partition_key)
            .cloned()
            .collect();
        regular.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<_> = self
            .columns
            .iter()
            .filter(|(n, _)| *n == self.partition_key)
            .cloned()
            .collect();
        out.extend(regular);
        out
    }
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
    /// Keyspace names.
    pub keyspaces: HashSet<String>,
    last_timestamp: i64,
}

impl Engine {
    /// An engine with the system tables a driver reads on connect.
    pub fn new(flavor: Flavor, clock: Arc<ServerClock>, address: IpAddr) -> Self {
        let mut engine = Engine {
            flavor,
            clock,
            tables: HashMap::new(),
            keyspaces: HashSet::new(),
            last_timestamp: 0,
        };
        let text = || CqlType::Text;
        let set = || CqlType::Set(Box::new(CqlType::Text));
        let host_id = Value::Uuid(*b"cql-test-server!");
        let schema_version = Value::Uuid(*b"schema-version-1");
        engine.system_table(
            "system",
            "local",
            "key",
            vec![
                ("key", text()),
                ("host_id", CqlType::Uuid),
                ("rpc_address", CqlType::Inet),
                ("broadcast_address", CqlType::Inet),
                ("listen_address", CqlType::Inet),
                ("data_center", text()),
                ("rack", text()),
                ("tokens", set()),
                ("cluster_name", text()),
                ("schema_version", CqlType::Uuid),
                ("partitioner", text()),
                ("release_version", text()),
            ],
            vec![vec![
                Value::Text("local".into()),
                host_id,
                Value::Inet(address),
                Value::Inet(address),
                Value::Inet(address),
                Value::Text("datacenter1".into()),
                Value::Text("rack1".into()),
                Value::Set(vec![Value::Text("0".into())]),
                Value::Text("cql-test-server".into()),
                schema_version,
                Value::Text("org.apache.cassandra.dht.Murmur3Partitioner".into()),
                Value::Text("4.1.0".into()),
            ]],
        );
        engine.system_table(
            "system",
            "peers",
            "peer",
            vec![
                ("peer", CqlType::Inet),
                ("host_id", CqlType::Uuid),
                ("rpc_address", CqlType::Inet),
                ("data_center", text()),
                ("rack", text()),
                ("tokens", set()),
                ("schema_version", CqlType::Uuid),
            ],
            vec![],
        );
        engine.system_table(
            "system_schema",
            "keyspaces",
            "keyspace_name",
            vec![
                ("keyspace_name", text()),
                ("durable_writes", CqlType::Boolean),
                (
                    "replication",
                    CqlType::Map(Box::new(text()), Box::new(text())),
                ),
            ],
            vec![],
        );
        // Read by a driver that fetches schema metadata; empty, as on a node whose keyspaces
        // hold no user-defined types, views or described tables.
        let list = || CqlType::List(Box::new(CqlType::Text));
        for (name, columns) in [
            (
                "tables",
                vec![("keyspace_name", text()), ("table_name", text())],
            ),
            (
                "views",
                vec![
                    ("keyspace_name", text()),
                    ("view_name", text()),
                    ("base_table_name", text()),
                ],
            ),
            (
                "types",
                vec![
                    ("keyspace_name", text()),
                    ("type_name", text()),
                    ("field_names", list()),
                    ("field_types", list()),
                ],
            ),
            (
                "columns",
                vec![
                    ("keyspace_name", text()),
                    ("table_name", text()),
                    ("column_name", text()),
                    ("kind", text()),
                    ("position", CqlType::Int),
                    ("type", text()),
                ],
            ),
        ] {
            engine.system_table("system_schema", name, "keyspace_name", columns, vec![]);
        }
        for ks in ["system", "system_schema"] {
            engine.add_keyspace(
                ks,
                vec![(
                    "class".into(),
                    "org.apache.cassandra.locator.LocalStrategy".into(),
                )],
            );
        }
        engine
    }

    fn system_table(
        &mut self,
        ks: &str,
        name: &str,
        pk: &str,
        columns: Vec<(&str, CqlType)>,
        rows: Vec<Vec<Value>>,
    ) {
        let columns: Vec<(String, CqlType)> = columns
            .into_iter()
            .map(|(n, t)| (n.to_owned(), t))
            .collect();
        let mut table = Table {
            columns: columns.clone(),
            partition_key: pk.into(),
            default_ttl: 0,
            rows: BTreeMap::new(),
            system: true,
        };
        for values in rows {
            let mut row = Row {
                marker: Some(Liveness {
                    timestamp: 0,
                    expires_at_sec: None,
                }),
                cells: HashMap::new(),
            };
            let mut key = Value::Null;
            for ((name, _), value) in columns.iter().zip(values) {
                if name == pk {
                    key = value;
                } else {
                    row.cells.insert(
                        name.clone(),
                        Cell {
                            value,
                            live: Liveness {
                                timestamp: 0,
                                expires_at_sec: None,
                            },
                        },
                    );
                }
            }
            table.rows.insert(key.key_bytes(), (key, row));
        }
        self.keyspaces.insert(ks.into());
        self.tables.insert((ks.into(), name.into()), table);
    }

    /// Registers a keyspace and its `system_schema.keyspaces` row.
    pub fn add_keyspace(&mut self, name: &str, replication: Vec<(String, String)>) {
        self.keyspaces.insert(name.to_owned());
        if let Some(t) = self
            .tables
            .get_mut(&("system_schema".into(), "keyspaces".into()))
        {
            let key = Value::Text(name.to_owned());
            let live = Liveness {
                timestamp: 0,
                expires_at_sec: None,
            };
            let map = Value::Map(
                replication
                    .into_iter()
                    .map(|(k, v)| (Value::Text(k), Value::Text(v)))
                    .collect(),
            );
            let row = Row {
                marker: Some(live),
                cells: HashMap::from([
                    ("replication".to_owned(), Cell { value: map, live }),
                    (
                        "durable_writes".to_owned(),
                        Cell {
                            value: Value::Bool(true),
                            live,
                        },
                    ),
                ]),
            };
            t.rows.insert(key.key_bytes(), (key, row));
        }
    }

    /// Resolves a table reference.
    pub fn table_key(&self, t: &TableRef) -> Result<(String, String), DbErr> {
        let ks = t
            .keyspace
            .clone()
            .ok_or_else(|| DbErr::invalid("No keyspace has been specified"))?;
        if !self.keyspaces.contains(&ks) {
            return Err(DbErr::invalid(format!("Keyspace {ks} does not exist")));
        }
        let key = (ks, t.table.clone());
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

    /// The live row under `pk`, if any.
    pub fn live_row(&self, key: &(String, String), pk: &Value) -> Option<Row> {
        let now = self.clock.now_secs();
        self.tables
            .get(key)?
            .rows
            .get(&pk.key_bytes())
            .and_then(|(_, row)| row.live(now))
    }
}
