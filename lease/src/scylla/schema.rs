//! Where the lease table lives, and how to create it.

use scylla::client::session::Session;
use scylla::statement::{Consistency, SerialConsistency};
use tracing::info;

use super::cql;
use super::errors::classify;
use crate::error::{InvalidArgument, StoreError};

/// Keyspace replication for [`ScyllaOptions::create_schema`](super::ScyllaOptions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replication {
    /// `SimpleStrategy` with one replication factor (single data centre, development).
    Simple(u32),
    /// `NetworkTopologyStrategy` with a factor per data centre.
    NetworkTopology(Vec<(String, u32)>),
}

impl Replication {
    /// The CQL map literal.
    pub fn to_cql(&self) -> Result<String, InvalidArgument> {
        match self {
            Replication::Simple(0) => Err(invalid("replication", "factor must be at least 1")),
            Replication::Simple(rf) => Ok(format!(
                "{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
            )),
            Replication::NetworkTopology(dcs) => {
                if dcs.is_empty() {
                    return Err(invalid("replication", "no data centre given"));
                }
                let mut out = String::from("{'class': 'NetworkTopologyStrategy'");
                for (dc, rf) in dcs {
                    if dc.is_empty()
                        || !dc
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                    {
                        return Err(invalid("replication", "bad data centre name"));
                    }
                    out.push_str(&format!(", '{dc}': {rf}"));
                }
                out.push('}');
                Ok(out)
            }
        }
    }
}

/// Table location and consistency levels of the scylla backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScyllaOptions {
    /// Keyspace name (unquoted identifier: letters, digits, `_`; up to 48 characters).
    pub keyspace: String,
    /// Table name (same rules).
    pub table: String,
    /// Replication used when the schema helper creates the keyspace.
    pub replication: Replication,
    /// Consistency of the commit phase of LWTs. Default `LOCAL_QUORUM`.
    pub consistency: Consistency,
    /// Consistency of the Paxos phase of LWTs and of reads. Default `LOCAL_SERIAL`.
    pub serial_consistency: SerialConsistency,
    /// Client-side timeout of one request; expiry of an LWT leaves its outcome unknown and is
    /// resolved by a read-back. `None` keeps the session's.
    pub request_timeout: Option<std::time::Duration>,
}

impl Default for ScyllaOptions {
    fn default() -> Self {
        ScyllaOptions {
            keyspace: "coordination".into(),
            table: "leases".into(),
            replication: Replication::Simple(3),
            consistency: Consistency::LocalQuorum,
            serial_consistency: SerialConsistency::LocalSerial,
            request_timeout: None,
        }
    }
}

impl ScyllaOptions {
    /// Checks the identifiers.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        check_identifier("keyspace", &self.keyspace)?;
        check_identifier("table", &self.table)?;
        if matches!(
            self.consistency,
            Consistency::Serial | Consistency::LocalSerial
        ) {
            return Err(invalid(
                "consistency",
                "must be a regular level; serial levels go in serial_consistency",
            ));
        }
        Ok(())
    }

    /// A statement template with this keyspace and table.
    pub fn render(&self, template: &str) -> String {
        cql::render(template, &self.keyspace, &self.table)
    }

    /// Creates the keyspace (with `replication`) and the lease table if they are missing.
    pub async fn create_schema(&self, session: &Session) -> Result<(), SchemaError> {
        self.create_schema_with(session, cql::CREATE_TABLE).await
    }

    /// Creates the keyspace and the table of `create_table` (a template with `{keyspace}`
    /// and `{table}`, as other crates' stores have their own tables) if they are missing.
    pub async fn create_schema_with(
        &self,
        session: &Session,
        create_table: &str,
    ) -> Result<(), SchemaError> {
        self.validate()?;
        let replication = self.replication.to_cql()?;
        let keyspace = self
            .render(cql::CREATE_KEYSPACE)
            .replace(cql::REPLICATION, &replication);
        if super::tablets::is_scylla(session, self).await? {
            let without_tablets = format!("{keyspace}{}", cql::WITHOUT_TABLETS);
            info!(statement = %without_tablets, "creating schema (ScyllaDB: tablets off for LWTs)");
            match session.query_unpaged(without_tablets, ()).await {
                Ok(_) => {}
                // A ScyllaDB before tablets (5.x) does not know the option: plain vnodes.
                Err(e) if e.to_string().contains("tablets") => {
                    info!(%keyspace, "this ScyllaDB has no tablets option");
                    session
                        .query_unpaged(keyspace, ())
                        .await
                        .map_err(|e| SchemaError::Store(classify(e, false)))?;
                }
                Err(e) => return Err(SchemaError::Store(classify(e, false))),
            }
            let table = self.render(create_table);
            info!(statement = %table, "creating schema");
            session
                .query_unpaged(table, ())
                .await
                .map_err(|e| SchemaError::Store(classify(e, false)))?;
            return Ok(());
        }
        for statement in [keyspace, self.render(create_table)] {
            info!(%statement, "creating schema");
            session
                .query_unpaged(statement, ())
                .await
                .map_err(|e| SchemaError::Store(classify(e, false)))?;
        }
        Ok(())
    }
}

/// Creating the schema failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    /// Bad options; nothing was sent.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The keyspace refuses LWTs: it uses ScyllaDB tablets, which ScyllaDB 6.0 to 2025.3 do
    /// not support with LWTs. Recreate it with `tablets = {'enabled': false}` (what
    /// [`ScyllaOptions::create_schema`] does) or upgrade to ScyllaDB 2025.4 or later.
    #[error(
        "keyspace {keyspace} uses ScyllaDB tablets and this ScyllaDB refuses LWTs on them ({message}); recreate it with tablets = {{'enabled': false}} or upgrade to ScyllaDB 2025.4+"
    )]
    LwtsRejectedByTablets {
        /// The keyspace.
        keyspace: String,
        /// The server's answer to a probing SERIAL read.
        message: String,
    },
}

fn check_identifier(field: &'static str, name: &str) -> Result<(), InvalidArgument> {
    if name.is_empty() {
        return Err(InvalidArgument::Empty { field });
    }
    if name.len() > 48 {
        return Err(InvalidArgument::TooLong {
            field,
            len: name.len(),
            max: 48,
        });
    }
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_with_letter || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(invalid(field, "use a letter, then letters, digits or '_'"));
    }
    Ok(())
}

fn invalid(field: &'static str, reason: &str) -> InvalidArgument {
    InvalidArgument::Invalid {
        field,
        reason: reason.to_owned(),
    }
}
