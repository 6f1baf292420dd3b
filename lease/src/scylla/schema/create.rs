//! Creating the schema: the keyspace and each table a helper lists.

use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use tracing::info;

use super::super::cql;
use super::super::errors::classify;
use super::{SchemaError, ScyllaOptions};

impl ScyllaOptions {
    /// Creates the keyspace and the table of `create_table` (a template with `{keyspace}`
    /// and `{table}`, as other crates' stores have their own tables) if they are missing.
    ///
    /// # Errors
    ///
    /// [`SchemaError::InvalidArgument`] for bad options (nothing is sent);
    /// [`SchemaError::Store`] when the cluster refuses or fails a statement, including a
    /// ScyllaDB that refuses `tablets = {'enabled': false}` for another reason than not
    /// knowing the option.
    ///
    /// # Cancel safety
    ///
    /// Every statement is idempotent (`IF NOT EXISTS`): a cancelled call can be repeated.
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
        let run = |statement: String| async move {
            info!(%statement, "creating schema");
            session.query_unpaged(statement, ()).await.map(|_| ())
        };
        if super::super::tablets::is_scylla(session, self).await? {
            // ScyllaDB 6.0 to 2025.3 refuse LWTs on tablets, their default: turn them off.
            match run(format!("{keyspace}{}", cql::WITHOUT_TABLETS)).await {
                Ok(()) => {}
                // Only a ScyllaDB before tablets (5.x), which does not know the option, gets
                // plain vnodes; any other refusal is an error, never a silent tablets keyspace.
                Err(e) if is_unknown_tablets_option(&e) => {
                    info!(%keyspace, "this ScyllaDB has no tablets option");
                    run(keyspace)
                        .await
                        .map_err(|e| SchemaError::Store(classify(e, false)))?;
                }
                Err(e) => return Err(SchemaError::Store(classify(e, false))),
            }
        } else {
            run(keyspace)
                .await
                .map_err(|e| SchemaError::Store(classify(e, false)))?;
        }
        run(self.render(create_table))
            .await
            .map_err(|e| SchemaError::Store(classify(e, false)))
    }
}

/// One table a schema helper creates: where it lives and its `CREATE TABLE` template. The
/// helpers' lists of them ([`ScyllaOptions::tables`] and the other stores' `tables`) are what
/// they create, so tools that print or name the schema stay in step with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// The keyspace, base table name, replication and levels it is created with.
    pub location: ScyllaOptions,
    /// The `CREATE TABLE IF NOT EXISTS {keyspace}.{table}...` template.
    pub template: &'static str,
}

impl TableSchema {
    /// The table's name: the base name with whatever suffix the template adds (`_index`).
    pub fn name(&self) -> String {
        let after_keyspace = self
            .template
            .split_once("{keyspace}.")
            .map_or("", |(_, rest)| rest);
        let raw = after_keyspace
            .split(|c: char| c.is_whitespace() || c == '(')
            .next()
            .unwrap_or_default();
        raw.replace("{table}", &self.location.table)
    }

    /// The `CREATE TABLE` statement, rendered for its keyspace and table.
    pub fn statement(&self) -> String {
        self.location.render(self.template)
    }

    /// Creates the keyspace and this table if they are missing (see
    /// [`ScyllaOptions::create_schema_with`]).
    ///
    /// # Errors
    /// As [`ScyllaOptions::create_schema_with`].
    ///
    /// # Cancel safety
    /// Every statement is idempotent (`IF NOT EXISTS`): a cancelled call can be repeated.
    pub async fn create(&self, session: &Session) -> Result<(), SchemaError> {
        self.location
            .create_schema_with(session, self.template)
            .await
    }
}

/// Whether `error` is how a ScyllaDB without tablets (5.x) refuses the `tablets` keyspace
/// option: a syntax error naming the unknown property.
pub(super) fn is_unknown_tablets_option(error: &ExecutionError) -> bool {
    matches!(
        error,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(DbError::SyntaxError, message))
            if message.contains("Unknown property 'tablets'")
    )
}
