//! Fencing tokens.
//!
//! A lease can be lost while its holder is paused (GC, swap, a stalled VM): the holder wakes
//! up believing it still owns the lease and sends a write. A fencing token makes that write
//! harmless. Every acquisition of a lease name gets a token strictly greater than every token
//! issued for that name before, including after the lease expired or was released; a renewal
//! keeps its token. The resource being protected remembers the highest token it has seen and
//! refuses anything older.
//!
//! With a Cassandra/ScyllaDB table as the resource, do it in the same LWT that performs the
//! write, the way Temporal guards shard ownership with `range_id`:
//!
//! ```text
//! -- one row per protected resource, carrying the highest token that has written to it
//! UPDATE jobs SET state = ?, fence = ? WHERE id = ? IF fence <= ?     -- bind token, token
//! -- first write of a brand-new row:
//! UPDATE jobs SET state = ?, fence = ? WHERE id = ? IF fence = null
//! ```
//!
//! `[applied] = false` means a newer holder has already written: stop acting. For other
//! resources pass the token along (an HTTP header, a column, a file-name suffix) and compare
//! it there.

use serde::{Deserialize, Serialize};

/// A fencing token: strictly increasing per lease name across all acquisitions.
///
/// A `Copy` wrapper of the stored `i64`: compare tokens with `<`/`>`, print them
/// (`Display`), serialize them (serde), and bind [`FencingToken::get`] in your own
/// statements. Leases, lease locks and queue claims hand one out; an election's term is one.
///
/// ```
/// use cql_lease::FencingToken;
/// let older = FencingToken::new(7);
/// let newer = FencingToken::new(8);
/// assert!(newer > older);
/// assert_eq!(newer.get(), 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FencingToken(i64);

impl FencingToken {
    /// Wraps a raw value (as stored in the database).
    pub const fn new(value: i64) -> Self {
        FencingToken(value)
    }

    /// The raw value, to bind in your own statements.
    pub const fn get(self) -> i64 {
        self.0
    }
}

impl std::fmt::Display for FencingToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
