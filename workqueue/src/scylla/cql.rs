//! Every CQL statement the work queue's scylla backend sends, as shared constants (the CQL
//! test server recognises exactly these).
//!
//! # Table layout
//!
//! ```text
//! CREATE TABLE work_items (
//!     part       text,    -- queue name '/' shard number
//!     id         text,    -- 20-digit enqueue micros '-' random: sorts by enqueue time
//!     payload    text,
//!     state      text,    -- available | running | retryable | discarded
//!     attempt    int,     -- claims so far; the claim's fencing token
//!     claim      text,    -- the live claim's unique id              (TTL'd)
//!     run_at     bigint,  -- not before, wall-clock micros
//!     last_error text,
//!     PRIMARY KEY (part, id)
//! )
//! ```
//!
//! Every write is an LWT, so no cell is written both with and without Paxos. A claim is a
//! conditional batch on one row: the TTL'd `claim` cell (the lease) and, without TTL, the
//! state and the next attempt number, conditioned on no live claim and on the attempt the
//! claimer saw, so two workers can never take the same number. `INSERT` writes a row marker,
//! so a row outlives its expired claim; a completed item is deleted.

/// Creates the item table if missing.
pub const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS {keyspace}.{table} (part text, id text, payload text, state text, attempt int, claim text, run_at bigint, last_error text, PRIMARY KEY (part, id))";

/// Adds an item. Binds: part, id, payload, run_at.
pub const ENQUEUE: &str = "INSERT INTO {keyspace}.{table} (part, id, payload, state, attempt, run_at) VALUES (?, ?, ?, 'available', 0, ?) IF NOT EXISTS";

/// Reads a page of a partition, oldest first; a plain read (a hint). Binds: part, after, limit.
pub const SCAN: &str = "SELECT id, payload, state, attempt, claim, run_at, last_error FROM {keyspace}.{table} WHERE part = ? AND id > ? LIMIT ?";

/// The lease half of a claim. Binds: ttl, claim, part, id, seen attempt.
pub const CLAIM_LEASE: &str = "UPDATE {keyspace}.{table} USING TTL ? SET claim = ? WHERE part = ? AND id = ? IF claim = null AND attempt = ? AND state IN ('available', 'retryable', 'running')";

/// The numbering half of a claim, batched with [`CLAIM_LEASE`]. Binds: attempt, part, id.
pub const CLAIM_MARK: &str =
    "UPDATE {keyspace}.{table} SET state = 'running', attempt = ? WHERE part = ? AND id = ?";

/// Renews a claim. Binds: ttl, claim, part, id, claim.
pub const HEARTBEAT: &str =
    "UPDATE {keyspace}.{table} USING TTL ? SET claim = ? WHERE part = ? AND id = ? IF claim = ?";

/// Deletes a finished item. Binds: part, id, claim.
pub const COMPLETE: &str = "DELETE FROM {keyspace}.{table} WHERE part = ? AND id = ? IF claim = ?";

/// Ends a claim without completing. Binds: state, run_at, last_error, part, id, claim.
pub const RESCHEDULE: &str = "UPDATE {keyspace}.{table} SET claim = null, state = ?, run_at = ?, last_error = ? WHERE part = ? AND id = ? IF claim = ?";

/// Undoes a claim never handed to a worker. Binds: state, attempt, part, id, claim.
pub const UNCLAIM: &str = "UPDATE {keyspace}.{table} SET claim = null, state = ?, attempt = ? WHERE part = ? AND id = ? IF claim = ?";

/// Reads one item at SERIAL / LOCAL_SERIAL. Binds: part, id.
pub const READ: &str = "SELECT id, payload, state, attempt, claim, run_at, last_error FROM {keyspace}.{table} WHERE part = ? AND id = ?";

/// Every statement template the backend sends.
pub const ALL: &[&str] = &[
    CREATE_TABLE,
    ENQUEUE,
    SCAN,
    CLAIM_LEASE,
    CLAIM_MARK,
    HEARTBEAT,
    COMPLETE,
    RESCHEDULE,
    UNCLAIM,
    READ,
];
