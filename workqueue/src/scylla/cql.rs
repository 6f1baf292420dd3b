//! Every CQL statement the work queue's scylla backend sends, as shared constants (the CQL
//! test server must recognise exactly these).
//!
//! # Table layout
//!
//! ```text
//! CREATE TABLE work_items (          -- LWT writes only; one partition per item
//!     key text PRIMARY KEY,           -- queue '/' id
//!     payload blob, state text,       -- available | running | retryable | discarded | done
//!     attempt int,                    -- claims so far: the fencing token; never deleted
//!     claim text,                     -- the live claim's unique id (TTL'd)
//!     run_at bigint, last_error text,
//!     origin text,                    -- the enqueue call that wrote the row
//!     requeued_at int)                -- attempt number when last requeued from dead letters
//! CREATE TABLE work_items_index (    -- plain writes only, USING TIMESTAMP (client, monotonic)
//!     part text, seq text,            -- part: queue '/' bucket; seq: "{pos:020}-{kind}-{id}-{r}"
//!     id text, kind text, immediate boolean, attempt int,
//!     PRIMARY KEY (part, seq))
//! CREATE TABLE work_items_cursor (queue text PRIMARY KEY, pos bigint)   -- USING TIMESTAMP pos
//! CREATE TABLE work_items_dead (queue text, id text, PRIMARY KEY (queue, id))
//! CREATE TABLE work_items_buckets (queue text, bucket bigint, PRIMARY KEY (queue, bucket))
//!                                     -- index buckets far ahead, TTL'd, for stats
//! ```
//!
//! A claim is a conditional batch on one row: the TTL'd `claim` cell (the lease) and, without
//! TTL, the state and the next attempt number, conditioned on no live claim and on the attempt
//! the claimer saw. Completion rewrites the state as `done` with a TTL and nulls the payload;
//! the `INSERT`'s row marker and `attempt` stay, so `IF NOT EXISTS` refuses a resent enqueue.
//! Partition keys are single text columns (`queue/id`, `queue/bucket`) rather than composite
//! keys, so the CQL test server serves them too.

/// Creates the item table if missing.
pub const CREATE_ITEMS: &str = "CREATE TABLE IF NOT EXISTS {keyspace}.{table} (key text PRIMARY KEY, payload blob, state text, attempt int, claim text, run_at bigint, last_error text, origin text, requeued_at int)";
/// Creates the index table if missing.
pub const CREATE_INDEX: &str = "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_index (part text, seq text, id text, kind text, immediate boolean, attempt int, PRIMARY KEY (part, seq))";
/// Creates the cursor table if missing.
pub const CREATE_CURSOR: &str =
    "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_cursor (queue text PRIMARY KEY, pos bigint)";
/// Creates the dead-letter table if missing.
pub const CREATE_DEAD: &str = "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_dead (queue text, id text, PRIMARY KEY (queue, id))";

/// Creates the bucket directory table if missing.
pub const CREATE_BUCKETS: &str = "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_buckets (queue text, bucket bigint, PRIMARY KEY (queue, bucket))";

/// Creates the bakery mode's item table if missing: plain writes only, `stamp` = the
/// write's client timestamp (the next write of the row goes above it). Its bakery cells live
/// in `{table}_cells`, a [`cql_lease::cells::scylla`] table.
pub const CREATE_PLAIN: &str = "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_plain (key text PRIMARY KEY, payload blob, state text, attempt int, run_at bigint, last_error text, origin text, requeued_at int, stamp bigint)";

/// Writes a whole bakery-mode row. Binds: key, payload, state, attempt, run_at, last_error,
/// origin, requeued_at, stamp, timestamp (= stamp).
pub const WRITE_PLAIN: &str = "INSERT INTO {keyspace}.{table}_plain (key, payload, state, attempt, run_at, last_error, origin, requeued_at, stamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?";

/// Reads a bakery-mode row. Binds: key.
pub const READ_PLAIN: &str = "SELECT payload, state, attempt, run_at, last_error, origin, requeued_at, stamp FROM {keyspace}.{table}_plain WHERE key = ?";

/// Adds an item. Binds: key, payload, run_at, origin.
pub const ENQUEUE: &str = "INSERT INTO {keyspace}.{table} (key, payload, state, attempt, run_at, origin) VALUES (?, ?, 'available', 0, ?, ?) IF NOT EXISTS";

/// Starts a new job on the row of a completed unique item whose done marker expired. Binds:
/// payload, run_at, origin, requeued_at, key, seen attempt, seen origin.
pub const REVIVE: &str = "UPDATE {keyspace}.{table} SET state = 'available', payload = ?, run_at = ?, origin = ?, last_error = null, requeued_at = ? WHERE key = ? IF state = null AND attempt = ? AND origin = ?";

/// The lease half of a claim. Binds: ttl, claim, key, seen attempt.
pub const CLAIM_LEASE: &str = "UPDATE {keyspace}.{table} USING TTL ? SET claim = ? WHERE key = ? IF claim = null AND attempt = ? AND state IN ('available', 'retryable', 'running')";

/// The numbering half of a claim, batched with [`CLAIM_LEASE`]. Binds: attempt, key.
pub const CLAIM_MARK: &str =
    "UPDATE {keyspace}.{table} SET state = 'running', attempt = ? WHERE key = ?";

/// Renews a claim. Binds: ttl, claim, key, claim.
pub const HEARTBEAT: &str =
    "UPDATE {keyspace}.{table} USING TTL ? SET claim = ? WHERE key = ? IF claim = ?";

/// Marks an item done. Binds: ttl, key, claim.
pub const COMPLETE: &str = "UPDATE {keyspace}.{table} USING TTL ? SET state = 'done', claim = null, payload = null, last_error = null WHERE key = ? IF claim = ?";

/// Ends a claim without completing. Binds: state, run_at, last_error, key, claim.
pub const RESCHEDULE: &str = "UPDATE {keyspace}.{table} SET claim = null, state = ?, run_at = ?, last_error = ? WHERE key = ? IF claim = ?";

/// Ends a claim without completing and gives its attempt back (a snooze). Binds: state,
/// run_at, last_error, requeued_at, key, claim.
pub const SNOOZE: &str = "UPDATE {keyspace}.{table} SET claim = null, state = ?, run_at = ?, last_error = ?, requeued_at = ? WHERE key = ? IF claim = ?";

/// Undoes a claim never handed to a worker. Binds: state, attempt, key, claim.
pub const UNCLAIM: &str =
    "UPDATE {keyspace}.{table} SET claim = null, state = ?, attempt = ? WHERE key = ? IF claim = ?";

/// Requeues a dead letter; attempts count again from `attempt`. Binds: run_at, requeued_at,
/// key, attempt.
pub const REQUEUE: &str = "UPDATE {keyspace}.{table} SET state = 'available', run_at = ?, requeued_at = ? WHERE key = ? IF state = 'discarded' AND attempt = ?";

/// Purges a dead letter, as read (a later dead letter of the same item is not purged by a
/// purge still on its way). Binds: ttl, key, attempt.
pub const PURGE: &str = "UPDATE {keyspace}.{table} USING TTL ? SET state = 'done', payload = null, last_error = null WHERE key = ? IF state = 'discarded' AND attempt = ?";

/// Fences off an enqueue still on its way: an empty row whose state is already gone (done,
/// retention over), written only if no row exists. Binds: key, origin.
pub const SEAL_ABSENT: &str = "INSERT INTO {keyspace}.{table} (key, attempt, run_at, origin) VALUES (?, 0, 0, ?) IF NOT EXISTS";

/// Fences off a revival still on its way: a done row's attempt number raised by one.
/// Binds: attempt + 1, key, seen attempt, seen origin.
pub const SEAL_DONE: &str =
    "UPDATE {keyspace}.{table} SET attempt = ? WHERE key = ? IF attempt = ? AND origin = ?";

/// Fences off a requeue still on its way: a discarded row's attempt number raised by one.
/// Binds: attempt + 1, key, seen attempt.
pub const SEAL_DISCARDED: &str = "UPDATE {keyspace}.{table} SET attempt = ? WHERE key = ? IF state = 'discarded' AND attempt = ?";

/// Reads one item (SERIAL for `read`, the consistency level for `peek`). Binds: key.
pub const READ: &str = "SELECT key, payload, state, attempt, claim, run_at, last_error, origin, requeued_at FROM {keyspace}.{table} WHERE key = ?";

/// Places an index entry. Binds: part, seq, id, kind, immediate, attempt, timestamp.
pub const PUT_ENTRY: &str = "INSERT INTO {keyspace}.{table}_index (part, seq, id, kind, immediate, attempt) VALUES (?, ?, ?, ?, ?, ?) USING TIMESTAMP ?";

/// Removes an index entry. Binds: timestamp, part, seq.
pub const DELETE_ENTRY: &str =
    "DELETE FROM {keyspace}.{table}_index USING TIMESTAMP ? WHERE part = ? AND seq = ?";

/// Removes every index entry of a slice of a bucket as one range tombstone. Binds:
/// timestamp, part, after, before.
pub const DELETE_RANGE: &str =
    "DELETE FROM {keyspace}.{table}_index USING TIMESTAMP ? WHERE part = ? AND seq > ? AND seq < ?";

/// Reads a slice of a bucket. Binds: part, after, before, limit.
pub const SCAN_INDEX: &str = "SELECT seq, id, kind, immediate, attempt FROM {keyspace}.{table}_index WHERE part = ? AND seq > ? AND seq < ? LIMIT ?";

/// Reads the cursor. Binds: queue.
pub const READ_CURSOR: &str = "SELECT pos FROM {keyspace}.{table}_cursor WHERE queue = ?";

/// Raises the cursor (its value is its write timestamp). Binds: timestamp, pos, queue.
pub const ADVANCE_CURSOR: &str =
    "UPDATE {keyspace}.{table}_cursor USING TIMESTAMP ? SET pos = ? WHERE queue = ?";

/// Records an index bucket far ahead (TTL'd: past its time the scans read it anyway).
/// Binds: queue, bucket, ttl, timestamp.
pub const PUT_BUCKET: &str = "INSERT INTO {keyspace}.{table}_buckets (queue, bucket) VALUES (?, ?) USING TTL ? AND TIMESTAMP ?";

/// Lists recorded buckets above one. Binds: queue, after, limit.
pub const LIST_BUCKETS: &str =
    "SELECT bucket FROM {keyspace}.{table}_buckets WHERE queue = ? AND bucket > ? LIMIT ?";

/// Records a dead letter. Binds: queue, id, timestamp.
pub const PUT_DEAD: &str =
    "INSERT INTO {keyspace}.{table}_dead (queue, id) VALUES (?, ?) USING TIMESTAMP ?";

/// Removes a dead letter. Binds: timestamp, queue, id.
pub const DELETE_DEAD: &str =
    "DELETE FROM {keyspace}.{table}_dead USING TIMESTAMP ? WHERE queue = ? AND id = ?";

/// Lists dead letters. Binds: queue, after, limit.
pub const LIST_DEAD: &str =
    "SELECT id FROM {keyspace}.{table}_dead WHERE queue = ? AND id > ? LIMIT ?";

/// Every statement template the backend sends.
pub const ALL: &[&str] = &[
    CREATE_PLAIN,
    WRITE_PLAIN,
    READ_PLAIN,
    CREATE_ITEMS,
    CREATE_INDEX,
    CREATE_CURSOR,
    CREATE_DEAD,
    CREATE_BUCKETS,
    ENQUEUE,
    REVIVE,
    CLAIM_LEASE,
    CLAIM_MARK,
    HEARTBEAT,
    COMPLETE,
    RESCHEDULE,
    SNOOZE,
    UNCLAIM,
    REQUEUE,
    PURGE,
    SEAL_ABSENT,
    SEAL_DONE,
    SEAL_DISCARDED,
    READ,
    PUT_ENTRY,
    DELETE_ENTRY,
    DELETE_RANGE,
    SCAN_INDEX,
    READ_CURSOR,
    ADVANCE_CURSOR,
    PUT_BUCKET,
    LIST_BUCKETS,
    PUT_DEAD,
    DELETE_DEAD,
    LIST_DEAD,
];
