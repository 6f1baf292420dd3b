//! The statements the lease and work-queue backends are expected to send, written out by
//! hand with the label the CQL test server counts and targets each one by.
//!
//! The wire suites teach the server these texts, not the backends' own `cql::ALL`, and a
//! test checks that `cql::ALL` equals them: a statement changed in a backend without
//! updating this list (and so the server's knowledge) fails a test.

/// The lease backend's statement templates (`{keyspace}`, `{table}`, `{replication}`).
pub const LEASE: &[(&str, &str)] = &[
    (
        "lease.schema",
        "SELECT initial_tablets FROM system_schema.scylla_keyspaces WHERE keyspace_name = '{keyspace}'",
    ),
    (
        "lease.schema",
        "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {replication}",
    ),
    (
        "lease.schema",
        "CREATE TABLE IF NOT EXISTS {keyspace}.{table} (name text PRIMARY KEY, holder text, owner text, value text, lease_ttl int, fence bigint)",
    ),
    (
        "lease.try_acquire",
        "UPDATE {keyspace}.{table} USING TTL ? SET holder = ?, owner = ?, value = ?, lease_ttl = ? WHERE name = ? IF holder = null AND owner = null AND value = null AND lease_ttl = null AND fence < ?",
    ),
    (
        "lease.try_acquire",
        "UPDATE {keyspace}.{table} USING TTL ? SET holder = ?, owner = ?, value = ?, lease_ttl = ? WHERE name = ? IF holder = null AND owner = null AND value = null AND lease_ttl = null AND fence = ?",
    ),
    (
        "lease.set_fence",
        "UPDATE {keyspace}.{table} SET fence = ? WHERE name = ?",
    ),
    (
        "lease.renew",
        "UPDATE {keyspace}.{table} USING TTL ? SET holder = ?, owner = ?, value = ?, lease_ttl = ? WHERE name = ? IF holder = ?",
    ),
    (
        "lease.release",
        "DELETE holder, owner, value, lease_ttl FROM {keyspace}.{table} WHERE name = ? IF holder = ?",
    ),
    (
        "lease.read",
        "SELECT holder, owner, value, fence, TTL(holder) FROM {keyspace}.{table} WHERE name = ?",
    ),
    (
        "lease.peek",
        "SELECT holder, owner, value, fence, TTL(owner) FROM {keyspace}.{table} WHERE name = ?",
    ),
];

/// The work-queue backend's statement templates (its keyspace comes from [`LEASE`]).
pub const QUEUE: &[(&str, &str)] = &[
    (
        "queue.schema",
        "CREATE TABLE IF NOT EXISTS {keyspace}.{table} (part text, id text, payload text, state text, attempt int, claim text, run_at bigint, last_error text, PRIMARY KEY (part, id))",
    ),
    (
        "queue.enqueue",
        "INSERT INTO {keyspace}.{table} (part, id, payload, state, attempt, run_at) VALUES (?, ?, ?, 'available', 0, ?) IF NOT EXISTS",
    ),
    (
        "queue.scan",
        "SELECT id, payload, state, attempt, claim, run_at, last_error FROM {keyspace}.{table} WHERE part = ? AND id > ? LIMIT ?",
    ),
    (
        "queue.claim",
        "UPDATE {keyspace}.{table} USING TTL ? SET claim = ? WHERE part = ? AND id = ? IF claim = null AND attempt = ? AND state IN ('available', 'retryable', 'running')",
    ),
    (
        "queue.claim_mark",
        "UPDATE {keyspace}.{table} SET state = 'running', attempt = ? WHERE part = ? AND id = ?",
    ),
    (
        "queue.heartbeat",
        "UPDATE {keyspace}.{table} USING TTL ? SET claim = ? WHERE part = ? AND id = ? IF claim = ?",
    ),
    (
        "queue.complete",
        "DELETE FROM {keyspace}.{table} WHERE part = ? AND id = ? IF claim = ?",
    ),
    (
        "queue.reschedule",
        "UPDATE {keyspace}.{table} SET claim = null, state = ?, run_at = ?, last_error = ? WHERE part = ? AND id = ? IF claim = ?",
    ),
    (
        "queue.unclaim",
        "UPDATE {keyspace}.{table} SET claim = null, state = ?, attempt = ? WHERE part = ? AND id = ? IF claim = ?",
    ),
    (
        "queue.read",
        "SELECT id, payload, state, attempt, claim, run_at, last_error FROM {keyspace}.{table} WHERE part = ? AND id = ?",
    ),
];
