//! Every CQL statement the scylla backend sends, as shared constants.
//!
//! `{keyspace}` and `{table}` are substituted at start-up. The CQL test server in
//! `integration-tests` recognises exactly these texts and nothing else, so a statement added
//! here without teaching the server fails the conformance suite.
//!
//! # Table layout
//!
//! ```text
//! CREATE TABLE leases (
//!     name      text PRIMARY KEY,
//!     holder    text,    -- unique id of the acquisition           (TTL'd)
//!     owner     text,    -- declared owner                         (TTL'd)
//!     value     text,    -- holder's value, e.g. its address       (TTL'd)
//!     lease_ttl int,     -- the TTL written, in seconds            (TTL'd)
//!     fence     bigint   -- highest fencing token ever issued: never expires, never deleted
//! )
//! ```
//!
//! Why the token only grows: `fence` is written without TTL by the same conditional batch that
//! claims the lease, and the claim's condition requires the stored `fence` to be lower than the
//! new one. Release deletes only the TTL'd columns, expiry removes only the TTL'd columns, so
//! the last token survives both and the next claim must exceed it. All writes to the table are
//! LWTs (Paxos), so the condition is checked and applied atomically, linearizably.
//!
//! Why `UPDATE` and not `INSERT ... IF NOT EXISTS`: an `INSERT` writes a row marker, and a row
//! whose `fence` outlives its TTL'd cells would still "exist" for `IF NOT EXISTS` forever.
//! `UPDATE` writes no marker, and `IF holder = null` holds on a missing row.
//!
//! The claim's condition names `owner`, `value` and `lease_ttl` too (they are null whenever
//! `holder` is, since they are always written and deleted together) only so that a failed
//! claim returns them: a contender learns who holds the lease from the one LWT it sent.

/// Placeholder for the keyspace name.
pub const KEYSPACE: &str = "{keyspace}";
/// Placeholder for the table name.
pub const TABLE: &str = "{table}";
/// Placeholder for the replication map in [`CREATE_KEYSPACE`].
pub const REPLICATION: &str = "{replication}";

/// Creates the keyspace if missing.
pub const CREATE_KEYSPACE: &str =
    "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {replication}";

/// Creates the lease table if missing.
pub const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS {keyspace}.{table} (name text PRIMARY KEY, holder text, owner text, value text, lease_ttl int, fence bigint)";

/// Claim when free, with a token above the stored one. Binds: ttl, holder, owner, value,
/// lease_ttl, name, proposed token. Fails on a brand-new name (`null < x` is false).
pub const CLAIM_ABOVE: &str = "UPDATE {keyspace}.{table} USING TTL ? SET holder = ?, owner = ?, value = ?, lease_ttl = ? WHERE name = ? IF holder = null AND owner = null AND value = null AND lease_ttl = null AND fence < ?";

/// Claim when free and the stored token equals the bound one (null for a brand-new name).
/// Same binds as [`CLAIM_ABOVE`].
pub const CLAIM_EXACT: &str = "UPDATE {keyspace}.{table} USING TTL ? SET holder = ?, owner = ?, value = ?, lease_ttl = ? WHERE name = ? IF holder = null AND owner = null AND value = null AND lease_ttl = null AND fence = ?";

/// Records the new token, without TTL; batched with a claim. Binds: token, name.
pub const SET_FENCE: &str = "UPDATE {keyspace}.{table} SET fence = ? WHERE name = ?";

/// Renews (and may change the value) only for the current holder. Binds: ttl, holder, owner,
/// value, lease_ttl, name, holder.
pub const RENEW: &str = "UPDATE {keyspace}.{table} USING TTL ? SET holder = ?, owner = ?, value = ?, lease_ttl = ? WHERE name = ? IF holder = ?";

/// Releases only for the current holder, keeping `fence`. Binds: name, holder.
pub const RELEASE: &str =
    "DELETE holder, owner, value, lease_ttl FROM {keyspace}.{table} WHERE name = ? IF holder = ?";

/// Hands the lease from its holder straight to the next one, batched with [`SET_FENCE`]
/// (the new token). Binds: ttl, holder, owner, value, lease_ttl, name, the holder handing
/// over, its token.
pub const HAND_OVER: &str = "UPDATE {keyspace}.{table} USING TTL ? SET holder = ?, owner = ?, value = ?, lease_ttl = ? WHERE name = ? IF holder = ? AND fence = ?";

/// Reads the holder; sent at SERIAL or LOCAL_SERIAL consistency. Binds: name.
pub const READ: &str =
    "SELECT holder, owner, value, fence, TTL(holder) FROM {keyspace}.{table} WHERE name = ?";

/// Peeks at the holder: a plain read at the regular consistency level (no Paxos round), for
/// followers' and observers' polls. Binds: name. (`TTL(owner)`: written with the holder.)
pub const PEEK: &str =
    "SELECT holder, owner, value, fence, TTL(owner) FROM {keyspace}.{table} WHERE name = ?";

/// Reads how the keyspace distributes its tables; the table exists only on ScyllaDB, where a
/// non-null `initial_tablets` means tablets (LWTs refused by ScyllaDB 6.0 to 2025.3). No bind
/// markers, so it is sent without preparing (Cassandra refuses it as an unknown table).
pub const SCYLLA_KEYSPACE: &str =
    "SELECT initial_tablets FROM system_schema.scylla_keyspaces WHERE keyspace_name = '{keyspace}'";

/// Appended to [`CREATE_KEYSPACE`] on ScyllaDB, so that LWTs work on 6.0 to 2025.3 (tablets,
/// the default there, refuse them). Cassandra rejects the option, so it is never sent there.
pub const WITHOUT_TABLETS: &str = " AND tablets = {'enabled': false}";

/// Every statement template the backend sends.
pub const ALL: &[&str] = &[
    SCYLLA_KEYSPACE,
    CREATE_KEYSPACE,
    CREATE_TABLE,
    CLAIM_ABOVE,
    CLAIM_EXACT,
    SET_FENCE,
    RENEW,
    RELEASE,
    HAND_OVER,
    READ,
    PEEK,
];

/// Substitutes the keyspace and table names into a template.
pub fn render(template: &str, keyspace: &str, table: &str) -> String {
    template.replace(KEYSPACE, keyspace).replace(TABLE, table)
}
