//! From the connection flags to a driver session and the stores' options.

use std::sync::Arc;

use cql_lease::cells::scylla::CellOptions;
use cql_lease::scylla::{LwtRouting, Replication, ScyllaOptions};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::statement::{Consistency, SerialConsistency};

use crate::cli::{Connection, Level, SerialLevel};
use crate::error::CliError;

impl Level {
    fn consistency(self) -> Consistency {
        match self {
            Level::One => Consistency::One,
            Level::Two => Consistency::Two,
            Level::Three => Consistency::Three,
            Level::Quorum => Consistency::Quorum,
            Level::All => Consistency::All,
            Level::LocalQuorum => Consistency::LocalQuorum,
            Level::EachQuorum => Consistency::EachQuorum,
            Level::LocalOne => Consistency::LocalOne,
        }
    }
}

impl Connection {
    /// The lease store's options (keyspace, lease table, levels, timeout), checked.
    ///
    /// # Errors
    /// Bad identifiers, or LOCAL_* levels without `--local-dc`.
    pub fn lease_options(&self, replication: Replication) -> Result<ScyllaOptions, CliError> {
        self.options(&self.lease_table, replication)
    }

    /// The work queue's options (its table base name).
    ///
    /// # Errors
    /// As [`Connection::lease_options`].
    pub fn queue_options(&self, replication: Replication) -> Result<ScyllaOptions, CliError> {
        self.options(&self.queue_table, replication)
    }

    /// The plain-cell locks' options, at the library's level for cells (`local-quorum` is
    /// widened to `QUORUM` unless the serial level is `local-serial`).
    ///
    /// # Errors
    /// As [`Connection::lease_options`].
    pub fn cell_options(&self, replication: Replication) -> Result<CellOptions, CliError> {
        let options = self.options(&self.cell_table, replication)?;
        Ok(options.cells_in(options.table.clone()))
    }

    fn options(&self, table: &str, replication: Replication) -> Result<ScyllaOptions, CliError> {
        let local = matches!(self.consistency, Level::LocalQuorum | Level::LocalOne)
            || self.serial_consistency == SerialLevel::LocalSerial;
        if local && self.local_dc.is_none() {
            return Err(CliError::usage(
                "LOCAL_* consistency levels need --local-dc (the data centre they are local to)",
            ));
        }
        let serial = match self.serial_consistency {
            SerialLevel::Serial => SerialConsistency::Serial,
            SerialLevel::LocalSerial => SerialConsistency::LocalSerial,
        };
        let options = ScyllaOptions {
            keyspace: self.keyspace.clone(),
            table: table.to_owned(),
            replication,
            consistency: self.consistency.consistency(),
            serial_consistency: serial,
            // Asking for LOCAL_SERIAL on the command line is the explicit opt-in the library
            // wants for per-data-centre Paxos.
            per_datacenter_paxos: serial == SerialConsistency::LocalSerial,
            request_timeout: Some(self.request_timeout),
            // LWTs rotate over the nodes (of the local data centre when one is given), so a
            // retry after a timeout lands on another coordinator.
            lwt_routing: match &self.local_dc {
                Some(dc) => LwtRouting::RoundRobinInDatacenter(dc.clone()),
                None => LwtRouting::RoundRobin,
            },
        };
        options.validate()?;
        Ok(options)
    }

    /// Connects: contact points, credentials, TLS, the local data centre, the timeout.
    ///
    /// # Errors
    /// Bad TLS files (exit 2), or no node reachable (exit 1).
    pub async fn session(&self) -> Result<Arc<Session>, CliError> {
        let mut builder = SessionBuilder::new().known_nodes(self.hosts.iter().map(|h| {
            if h.contains(':') {
                h.clone()
            } else {
                format!("{h}:9042")
            }
        }));
        match (&self.user, &self.password) {
            (Some(user), Some(password)) => builder = builder.user(user, password),
            (None, None) => {}
            _ => return Err(CliError::usage("--user and --password go together")),
        }
        match &self.tls_ca {
            Some(ca) => {
                let config = crate::tls::client_config(
                    ca,
                    self.tls_cert.as_deref(),
                    self.tls_key.as_deref(),
                )?;
                builder = builder.tls_context(Some(config));
            }
            None if self.tls_cert.is_some() || self.tls_key.is_some() => {
                return Err(CliError::usage("--tls-cert/--tls-key need --tls-ca"));
            }
            None => {}
        }
        let mut policy = DefaultPolicy::builder();
        if let Some(dc) = &self.local_dc {
            // LOCAL_* levels only mean something when requests go to the local data centre.
            policy = policy
                .prefer_datacenter(dc.clone())
                .permit_dc_failover(false);
        }
        let profile = ExecutionProfile::builder()
            .load_balancing_policy(policy.build())
            .request_timeout(Some(self.request_timeout))
            .consistency(self.consistency.consistency())
            .build();
        let session = builder
            .default_execution_profile_handle(profile.into_handle())
            .connection_timeout(self.request_timeout)
            // Keyspaces and token ring only (routing keeps working): a short-lived tool has
            // no use for every table's columns and types.
            .fetch_full_schema_metadata(false)
            .build()
            .await
            .map_err(|e| CliError::store(format!("connecting to {}: {e}", self.hosts.join(","))))?;
        Ok(Arc::new(session))
    }
}

/// Parses `simple:RF` or `DC:RF[,DC:RF...]`.
///
/// # Errors
/// A one-line usage message.
pub fn parse_replication(text: &str) -> Result<Replication, CliError> {
    let bad = || {
        CliError::usage(format!(
            "--replication {text:?}: use simple:RF or DC:RF[,DC:RF...]"
        ))
    };
    let factor = |rf: &str| rf.trim().parse::<u32>().map_err(|_| bad());
    if let Some(rf) = text.strip_prefix("simple:") {
        return Ok(Replication::Simple(factor(rf)?));
    }
    let dcs = text
        .split(',')
        .map(|pair| {
            let (dc, rf) = pair.split_once(':').ok_or_else(bad)?;
            Ok((dc.trim().to_owned(), factor(rf)?))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    let replication = Replication::NetworkTopology(dcs);
    replication.to_cql()?;
    Ok(replication)
}
