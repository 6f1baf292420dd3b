//! A tombstone's life after it is written: counted by the reads that walk it (Cassandra's
//! warn and failure thresholds), then purged once `gc_grace_seconds` have passed.

use scylla_cql::frame::response::error::DbError;

use super::engine::{DbErr, Engine, Partition};
use super::exec::Request;

/// Whether a tombstone written (or a cell expired) at `at_sec` may be purged at `now`:
/// Cassandra drops it only once that second is strictly before `now - gc_grace`.
pub fn purgeable(at_sec: i64, gc_grace: i64, now: i64) -> bool {
    at_sec < now.saturating_sub(gc_grace)
}

impl Engine {
    /// Records a read's tombstones. Past the failure threshold the read fails as a Cassandra
    /// coordinator fails it (`ReadFailure` at the request's consistency); past the warning
    /// threshold the warning is recorded and returned, to be sent to the client.
    pub(super) fn record_read(
        &mut self,
        request: &Request,
        tombstones: u64,
        live: u64,
    ) -> Result<Option<String>, DbErr> {
        let text = &request.text;
        let stats = &mut self.tombstone_stats;
        stats.reads.push((text.clone(), tombstones, live));
        stats.max = stats.max.max(tombstones);
        stats.total += tombstones;
        if tombstones > self.options.tombstone_failure_threshold {
            stats.failures += 1;
            return Err(DbErr {
                error: DbError::ReadFailure {
                    consistency: request.consistency,
                    received: 0,
                    required: 1,
                    numfailures: 1,
                    data_present: false,
                },
                message: format!(
                    "Operation failed - received 0 responses and 1 failures: READ_TOO_MANY_TOMBSTONES from /{}:7000",
                    self.address()
                ),
            });
        }
        if tombstones > self.options.tombstone_warn_threshold {
            let warning = format!(
                "Read {live} live rows and {tombstones} tombstone cells for query {text} (see tombstone_warn_threshold)"
            );
            stats.warnings.push(warning.clone());
            return Ok(Some(warning));
        }
        Ok(None)
    }

    /// Purges the tombstones past `gc_grace_seconds` in the partitions a read visits, at
    /// most once per partition and server second. A purge visits the whole partition, which
    /// a storage engine does in the background (compaction), not per read: done on every
    /// read it made each read of a large partition cost its size. Once a second loses
    /// nothing: what is written in second `now` (deleted at `now`, or expiring at `now + 1`
    /// or later) is not purgeable before `now + 1` (with a grace of zero or more).
    pub(super) fn purge(&mut self, key: &(String, String), partitions: &[Vec<u8>], now: i64) {
        let Some(table) = self.tables.get_mut(key) else {
            return;
        };
        let grace = table.gc_grace;
        for pk in partitions {
            // Nothing that died here is past the grace yet: a purge would walk the whole
            // partition for nothing (a storage engine purges in background compactions).
            if let Some(p) = table.partitions.get_mut(pk)
                && (p.purged_at != Some(now) || grace < 0)
                && p.earliest_death.is_some_and(|at| purgeable(at, grace, now))
            {
                purge_partition(p, grace, now);
                p.purged_at = Some(now);
            }
        }
    }
}

/// Like compaction, merges each purgeable deletion with what it shadows before dropping it:
/// the older cells and markers go with it, so no shadowed write comes back (no zombies).
fn purge_partition(p: &mut Partition, grace: i64, now: i64) {
    let gone = |at: i64| purgeable(at, grace, now);
    if let Some(d) = p.deletion.filter(|d| gone(d.at_sec)) {
        for row in std::iter::once(&mut p.statics).chain(p.rows.values_mut()) {
            row.shadow(d.timestamp);
        }
        p.deletion = None;
    }
    let (expired, kept) = std::mem::take(&mut p.ranges)
        .into_iter()
        .partition::<Vec<_>, _>(|r| gone(r.deletion.at_sec));
    p.ranges = kept;
    for r in expired {
        for (ck, row) in p.rows.iter_mut() {
            if r.slice.contains(ck) {
                row.shadow(r.deletion.timestamp);
            }
        }
    }
    for row in std::iter::once(&mut p.statics).chain(p.rows.values_mut()) {
        if let Some(d) = row.deletion.filter(|d| gone(d.at_sec)) {
            row.shadow(d.timestamp);
            row.deletion = None;
        }
        row.cells
            .retain(|_, c| c.dead_since(now).is_none_or(|at| !gone(at)));
    }
    p.rows
        .retain(|_, r| r.deletion.is_some() || r.marker.is_some() || !r.cells.is_empty());
    p.earliest_death = earliest_death(p);
}

/// The earliest second at which anything left in `p` that a purge drops died or dies (row
/// markers are kept by it: they do not count).
fn earliest_death(p: &Partition) -> Option<i64> {
    let rows = std::iter::once(&p.statics).chain(p.rows.values());
    let in_rows = rows.flat_map(|row| {
        let cells = row.cells.values().filter_map(|c| c.live.expires_at_sec);
        cells.chain(row.deletion.map(|d| d.at_sec))
    });
    let ranges = p.ranges.iter().map(|r| r.deletion.at_sec);
    in_rows
        .chain(ranges)
        .chain(p.deletion.map(|d| d.at_sec))
        .min()
}

#[cfg(test)]
mod tests {
    use super::purgeable;

    #[test]
    fn a_tombstone_is_purged_only_strictly_after_gc_grace() {
        // Written at second 100 with gc_grace 10: kept through second 110, gone at 111.
        assert!(!purgeable(100, 10, 109));
        assert!(!purgeable(100, 10, 110));
        assert!(purgeable(100, 10, 111));
    }
}
