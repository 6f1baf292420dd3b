//! The system tables a driver reads on connect, and the keyspace rows of `system_schema`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use super::engine::{
    Cell, Clustering, Engine, Flavor, KeyspaceInfo, Liveness, Partition, Row, Table,
};
use super::values::{CqlType, Value};

/// The name under which node `node` keeps its view of a per-node system table
/// (`local`, `peers`): node 0 under the plain name, so a one-node server looks as before.
pub(super) fn per_node(table: &str, node: usize) -> String {
    match (table, node) {
        (_, 0) => table.to_owned(),
        ("local" | "peers", n) => format!("{table}@{n}"),
        _ => table.to_owned(),
    }
}

/// One node of the served cluster, as `system.local` and `system.peers` describe it.
struct NodeRow {
    index: usize,
    address: IpAddr,
    token: i64,
}

impl NodeRow {
    fn new(index: usize, addresses: &[IpAddr]) -> Self {
        // Tokens spread evenly over the Murmur3 ring, so each node owns an equal range.
        let step = u64::MAX / addresses.len().max(1) as u64;
        let token = i64::MIN.wrapping_add((step.wrapping_mul(index as u64)) as i64);
        NodeRow {
            index,
            address: addresses[index],
            token,
        }
    }

    fn host_id(&self) -> Value {
        let mut id = *b"cql-test-server!";
        if self.index > 0 {
            id[14] = (self.index >> 8) as u8;
            id[15] = self.index as u8;
        }
        Value::Uuid(id)
    }

    fn tokens(&self) -> Value {
        Value::Set(vec![Value::Text(self.token.to_string())])
    }
}

const FOREVER: Liveness = Liveness {
    timestamp: 0,
    expires_at_sec: None,
};

impl Engine {
    pub(super) fn install_system_tables(&mut self) {
        let text = || CqlType::Text;
        let set = || CqlType::Set(Box::new(CqlType::Text));
        let schema_version = Value::Uuid(*b"schema-version-1");
        let nodes: Vec<NodeRow> = (0..self.addresses.len())
            .map(|i| NodeRow::new(i, &self.addresses))
            .collect();
        for node in &nodes {
            self.system_table(
                "system",
                &per_node("local", node.index),
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
                    node.host_id(),
                    Value::Inet(node.address),
                    Value::Inet(node.address),
                    Value::Inet(node.address),
                    Value::Text("datacenter1".into()),
                    Value::Text("rack1".into()),
                    node.tokens(),
                    Value::Text("cql-test-server".into()),
                    schema_version.clone(),
                    Value::Text("org.apache.cassandra.dht.Murmur3Partitioner".into()),
                    Value::Text(match self.flavor {
                        Flavor::Cassandra => "4.1.0".into(),
                        // What ScyllaDB reports for compatibility.
                        Flavor::Scylla => "3.0.8".into(),
                    }),
                ]],
            );
            // Every other node, as this one sees it.
            let peers = nodes
                .iter()
                .filter(|peer| peer.index != node.index)
                .map(|peer| {
                    vec![
                        Value::Inet(peer.address),
                        peer.host_id(),
                        Value::Inet(peer.address),
                        Value::Text("datacenter1".into()),
                        Value::Text("rack1".into()),
                        peer.tokens(),
                        schema_version.clone(),
                    ]
                })
                .collect();
            self.system_table(
                "system",
                &per_node("peers", node.index),
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
                peers,
            );
        }
        self.system_table(
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
                vec![
                    ("keyspace_name", text()),
                    ("table_name", text()),
                    ("default_time_to_live", CqlType::Int),
                ],
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
            self.system_table("system_schema", name, "keyspace_name", columns, vec![]);
        }
        if self.flavor == Flavor::Scylla {
            self.system_table(
                "system_schema",
                "scylla_keyspaces",
                "keyspace_name",
                vec![("keyspace_name", text()), ("initial_tablets", CqlType::Int)],
                vec![],
            );
        }
        for ks in ["system", "system_schema"] {
            self.add_keyspace(
                ks,
                vec![(
                    "class".into(),
                    "org.apache.cassandra.locator.LocalStrategy".into(),
                )],
                false,
            );
        }
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
        self.keyspaces.entry(ks.into()).or_default();
        self.tables.insert(
            (ks.into(), name.into()),
            Table {
                columns,
                partition_key: pk.into(),
                clustering: Vec::new(),
                statics: HashSet::new(),
                default_ttl: 0,
                gc_grace: 0,
                partitions: BTreeMap::new(),
                system: true,
            },
        );
        for values in rows {
            self.system_row(ks, name, values);
        }
    }

    /// Writes one row of a system table, values in column order.
    fn system_row(&mut self, ks: &str, name: &str, values: Vec<Value>) {
        let Some(table) = self.tables.get_mut(&(ks.into(), name.into())) else {
            return;
        };
        let mut row = Row {
            marker: Some(FOREVER),
            deletion: None,
            cells: HashMap::new(),
        };
        let mut key = Value::Null;
        for ((column, _), value) in table.columns.iter().zip(values) {
            if *column == table.partition_key {
                key = value;
            } else if value != Value::Null {
                row.cells.insert(
                    column.clone(),
                    Cell {
                        value: Some(value),
                        live: FOREVER,
                    },
                );
            }
        }
        let mut partition = Partition::new(key.clone());
        partition.rows.insert(Clustering::default(), row);
        table.partitions.insert(key.key_bytes(), partition);
    }

    /// Registers a keyspace and its `system_schema` rows.
    pub fn add_keyspace(&mut self, name: &str, replication: Vec<(String, String)>, tablets: bool) {
        self.keyspaces
            .insert(name.to_owned(), KeyspaceInfo { tablets });
        let map = Value::Map(
            replication
                .into_iter()
                .map(|(k, v)| (Value::Text(k), Value::Text(v)))
                .collect(),
        );
        self.system_row(
            "system_schema",
            "keyspaces",
            vec![Value::Text(name.to_owned()), Value::Bool(true), map],
        );
        if self.flavor == Flavor::Scylla {
            // ScyllaDB shows a tablets keyspace by a non-null `initial_tablets` (0: let the
            // balancer choose).
            let initial = if tablets { Value::Int(0) } else { Value::Null };
            self.system_row(
                "system_schema",
                "scylla_keyspaces",
                vec![Value::Text(name.to_owned()), initial],
            );
        }
    }
}
