//! Registered statements: what strict mode accepts, and the label each one is counted and
//! targeted by.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// The statements the `scylla` driver sends on its own when connecting and after DDL; always
/// registered, under the label `driver`.
pub const DRIVER_STATEMENTS: &[&str] = &[
    "SELECT host_id, rpc_address, data_center, rack, tokens FROM system.peers",
    "SELECT host_id, rpc_address, data_center, rack, tokens, cluster_name FROM system.local WHERE key='local'",
    "SELECT keyspace_name, replication, durable_writes FROM system_schema.keyspaces",
    "SELECT schema_version FROM system.local WHERE key='local'",
    "SELECT host_id FROM system.local WHERE key='local'",
    "SELECT peer, rpc_address, schema_version FROM system.peers",
    "SELECT host_id, schema_version FROM system.peers",
];

/// The id the server gives a prepared statement: a hash of its text, so faults can be aimed
/// at a statement before it is prepared.
pub fn statement_id(text: &str) -> Vec<u8> {
    let mut id = Vec::with_capacity(16);
    for salt in [0x5eed_u64, 0xfee1] {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        text.hash(&mut h);
        id.extend_from_slice(&h.finish().to_be_bytes());
    }
    id
}

#[derive(Debug, Clone)]
struct Entry {
    text: String,
    label: String,
    prefix: bool,
}

/// What fault conditions look for in a frame.
#[derive(Debug, Default)]
pub struct Needles {
    /// Prepared statement ids.
    pub ids: Vec<Vec<u8>>,
    /// Statement texts (unprepared queries and batches).
    pub texts: Vec<String>,
}

/// Every registered statement.
#[derive(Debug, Default)]
pub struct Registry {
    entries: Vec<Entry>,
    by_id: HashMap<Vec<u8>, String>,
}

impl Registry {
    /// A registry holding the driver's statements.
    pub fn new() -> Self {
        let mut r = Registry::default();
        for s in DRIVER_STATEMENTS {
            r.add("driver", s, false);
        }
        r
    }

    /// Registers `text` (a prefix when `prefix`) as `label`.
    pub fn add(&mut self, label: &str, text: &str, prefix: bool) {
        if !prefix {
            self.by_id.insert(statement_id(text), label.to_owned());
        }
        self.entries.push(Entry {
            text: text.to_owned(),
            label: label.to_owned(),
            prefix,
        });
    }

    /// The label of a statement text, when registered.
    pub fn label_of(&self, text: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| {
                if e.prefix {
                    text.starts_with(&e.text)
                } else {
                    e.text == text
                }
            })
            .map(|e| e.label.as_str())
    }

    /// The label of a prepared statement id.
    pub fn label_of_id(&self, id: &[u8]) -> Option<&str> {
        self.by_id.get(id).map(String::as_str)
    }

    /// What identifies the requests of `target` in a frame.
    pub fn needles(&self, target: &super::Target) -> Needles {
        use super::Target;
        let mut out = Needles::default();
        let mut push = |text: &str, prefix: bool| {
            if !prefix {
                out.ids.push(statement_id(text));
            }
            out.texts.push(text.to_owned());
        };
        match target {
            Target::Statement(text) => push(text, false),
            Target::Label(label) => {
                for e in self.entries.iter().filter(|e| e.label == *label) {
                    push(&e.text, e.prefix);
                }
            }
            Target::AnyLabel(labels) => {
                for e in self.entries.iter().filter(|e| labels.contains(&e.label)) {
                    push(&e.text, e.prefix);
                }
            }
            Target::AllRegistered => {
                for e in self.entries.iter().filter(|e| e.label != "driver") {
                    push(&e.text, e.prefix);
                }
            }
        }
        out
    }
}
