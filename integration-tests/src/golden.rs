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
        "lease.release",
        "UPDATE {keyspace}.{table} USING TTL ? SET holder = ?, owner = ?, value = ?, lease_ttl = ? WHERE name = ? IF holder = ? AND fence = ?",
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
        "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_plain (key text PRIMARY KEY, payload blob, state text, attempt int, run_at bigint, last_error text, origin text, requeued_at int, stamp bigint)",
    ),
    (
        "queue.plain_write",
        "INSERT INTO {keyspace}.{table}_plain (key, payload, state, attempt, run_at, last_error, origin, requeued_at, stamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?",
    ),
    (
        "queue.plain_read",
        "SELECT payload, state, attempt, run_at, last_error, origin, requeued_at, stamp FROM {keyspace}.{table}_plain WHERE key = ?",
    ),
    (
        "queue.schema",
        "CREATE TABLE IF NOT EXISTS {keyspace}.{table} (key text PRIMARY KEY, payload blob, state text, attempt int, claim text, run_at bigint, last_error text, origin text, requeued_at int)",
    ),
    (
        "queue.schema",
        "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_index (part text, seq text, id text, kind text, immediate boolean, attempt int, PRIMARY KEY (part, seq))",
    ),
    (
        "queue.schema",
        "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_cursor (queue text PRIMARY KEY, pos bigint)",
    ),
    (
        "queue.schema",
        "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_dead (queue text, id text, PRIMARY KEY (queue, id))",
    ),
    (
        "queue.schema",
        "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_buckets (queue text, bucket bigint, PRIMARY KEY (queue, bucket))",
    ),
    (
        "queue.enqueue",
        "INSERT INTO {keyspace}.{table} (key, payload, state, attempt, run_at, origin) VALUES (?, ?, 'available', 0, ?, ?) IF NOT EXISTS",
    ),
    (
        "queue.enqueue",
        "INSERT INTO {keyspace}.{table} (key, attempt, run_at, origin) VALUES (?, 0, 0, ?) IF NOT EXISTS",
    ),
    (
        "queue.revive",
        "UPDATE {keyspace}.{table} SET attempt = ? WHERE key = ? IF attempt = ? AND origin = ?",
    ),
    (
        "queue.reschedule",
        "UPDATE {keyspace}.{table} SET attempt = ? WHERE key = ? IF state = 'discarded' AND attempt = ?",
    ),
    (
        "queue.revive",
        "UPDATE {keyspace}.{table} SET state = 'available', payload = ?, run_at = ?, origin = ?, last_error = null, requeued_at = ? WHERE key = ? IF state = null AND attempt = ? AND origin = ?",
    ),
    (
        "queue.claim",
        "UPDATE {keyspace}.{table} USING TTL ? SET claim = ? WHERE key = ? IF claim = null AND attempt = ? AND state IN ('available', 'retryable', 'running')",
    ),
    (
        "queue.claim_mark",
        "UPDATE {keyspace}.{table} SET state = 'running', attempt = ? WHERE key = ?",
    ),
    (
        "queue.heartbeat",
        "UPDATE {keyspace}.{table} USING TTL ? SET claim = ? WHERE key = ? IF claim = ?",
    ),
    (
        "queue.complete",
        "UPDATE {keyspace}.{table} USING TTL ? SET state = 'done', claim = null, payload = null, last_error = null WHERE key = ? IF claim = ?",
    ),
    (
        "queue.reschedule",
        "UPDATE {keyspace}.{table} SET claim = null, state = ?, run_at = ?, last_error = ? WHERE key = ? IF claim = ?",
    ),
    (
        "queue.reschedule",
        "UPDATE {keyspace}.{table} SET claim = null, state = ?, run_at = ?, last_error = ?, requeued_at = ? WHERE key = ? IF claim = ?",
    ),
    (
        "queue.unclaim",
        "UPDATE {keyspace}.{table} SET claim = null, state = ?, attempt = ? WHERE key = ? IF claim = ?",
    ),
    (
        "queue.reschedule",
        "UPDATE {keyspace}.{table} SET state = 'available', run_at = ?, requeued_at = ? WHERE key = ? IF state = 'discarded' AND attempt = ?",
    ),
    (
        "queue.reschedule",
        "UPDATE {keyspace}.{table} USING TTL ? SET state = 'done', payload = null, last_error = null WHERE key = ? IF state = 'discarded' AND attempt = ?",
    ),
    (
        "queue.read",
        "SELECT key, payload, state, attempt, claim, run_at, last_error, origin, requeued_at FROM {keyspace}.{table} WHERE key = ?",
    ),
    (
        "queue.index",
        "INSERT INTO {keyspace}.{table}_index (part, seq, id, kind, immediate, attempt) VALUES (?, ?, ?, ?, ?, ?) USING TIMESTAMP ?",
    ),
    (
        "queue.index",
        "DELETE FROM {keyspace}.{table}_index USING TIMESTAMP ? WHERE part = ? AND seq = ?",
    ),
    (
        "queue.index_range",
        "DELETE FROM {keyspace}.{table}_index USING TIMESTAMP ? WHERE part = ? AND seq > ? AND seq < ?",
    ),
    (
        "queue.scan",
        "SELECT seq, id, kind, immediate, attempt FROM {keyspace}.{table}_index WHERE part = ? AND seq > ? AND seq < ? LIMIT ?",
    ),
    (
        "queue.index_read",
        "SELECT pos FROM {keyspace}.{table}_cursor WHERE queue = ?",
    ),
    (
        "queue.index",
        "UPDATE {keyspace}.{table}_cursor USING TIMESTAMP ? SET pos = ? WHERE queue = ?",
    ),
    (
        "queue.index",
        "INSERT INTO {keyspace}.{table}_buckets (queue, bucket) VALUES (?, ?) USING TTL ? AND TIMESTAMP ?",
    ),
    (
        "queue.index_read",
        "SELECT bucket FROM {keyspace}.{table}_buckets WHERE queue = ? AND bucket > ? LIMIT ?",
    ),
    (
        "queue.index",
        "INSERT INTO {keyspace}.{table}_dead (queue, id) VALUES (?, ?) USING TIMESTAMP ?",
    ),
    (
        "queue.index",
        "DELETE FROM {keyspace}.{table}_dead USING TIMESTAMP ? WHERE queue = ? AND id = ?",
    ),
    (
        "queue.index_read",
        "SELECT id FROM {keyspace}.{table}_dead WHERE queue = ? AND id > ? LIMIT ?",
    ),
];
