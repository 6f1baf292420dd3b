//! What a process knows of the index's density, so that no read walks more than a bounded
//! number of tombstones (Cassandra warns past 1,000 in one read and fails it past 100,000).
//!
//! A read's tombstones are the entries written into its slice and deleted since. Entries
//! are written once and deleted once, so a slice holds at most as many tombstones as
//! entries were ever written into it. A process counts the entries it sees (each read
//! returns the live ones) and, apart, the check entries it places itself, and puts a *mark*
//! at the position of every [`MARK_EVERY`]-th of each: a read then ends at the second mark
//! past its start, so it spans fewer than `2 x MARK_EVERY` counted entries of each kind,
//! however many have died since. A check entry placed here stands for one per process: processes share the work
//! out evenly (`slots`), and the others' are never seen. Just before this process's first
//! scan (`cursor_lag` + [`BLIND_EXTRA`]), where it counted nothing and the fleet's rescans
//! may not have compacted yet, reads span at most [`BLIND_SLICE`] of positions; further
//! back, the fleet's rescans compacted.
//! Stretches a read found dead are range-deleted (see `compact`), after which a read walks
//! one range tombstone there instead of a row each.

use std::collections::BTreeSet;

/// Counted entries between two marks.
pub(crate) const MARK_EVERY: usize = 128;

/// Widest slice of positions (microseconds) a read spans where this process counted no
/// entries: 100 ms holds 1,000 entries only at 10,000 index writes a second into one
/// queue.
pub(crate) const BLIND_SLICE: i64 = 100_000;

/// How much more than the cursor lag the blind stretch before a first scan covers. The
/// fleet's rescans compact what is closed, and a busy fleet rescans at least every
/// `RESCAN_AFTER` candidates: what lies further back, uncompacted, is at most what the fleet
/// handed out in the rest of a rescan's interval beyond this second (`RESCAN_AFTER` items
/// at most, whatever the rate).
pub(crate) const BLIND_EXTRA: std::time::Duration = std::time::Duration::from_secs(1);

/// The marks of one process (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Positions (wall-clock micros) of marks.
    marks: BTreeSet<i64>,
    /// Entries seen since the last mark of that stream.
    seen: usize,
    /// Check entries placed (weighted) since the last mark of that stream: they lie a claim
    /// TTL ahead, elsewhere than the entries being seen, so they keep a count of their own.
    placed: usize,
    /// The highest seq each bucket was read to: entries beyond it are counted when seen.
    frontier: Option<(i64, String)>,
    /// From this position on, entries were counted as reads returned them: the clock at
    /// this process's first scan.
    known_from: Option<i64>,
    /// From here to `known_from`, reads span [`BLIND_SLICE`] at most.
    blind_from: i64,
}

impl Ledger {
    /// The first scan starts knowing nothing below `from`, the last `blind` of it not yet
    /// compacted by the fleet.
    pub(crate) fn start(&mut self, from: i64, blind: i64) {
        if self.known_from.is_none() {
            self.known_from = Some(from);
            self.blind_from = from.saturating_sub(blind);
        }
    }

    /// Adds `weight` entries at `pos` to the count `counted`, a mark after every
    /// [`MARK_EVERY`].
    fn count(marks: &mut BTreeSet<i64>, counted: &mut usize, pos: i64, weight: usize) {
        *counted += weight;
        if *counted >= MARK_EVERY {
            *counted = 0;
            marks.insert(pos);
        }
    }

    /// Entries a read returned in `bucket`, by a reader whose clock reads `now`: those
    /// beyond the frontier and not ahead of `now` are counted. The frontier never passes
    /// the clock, so entries written later behind an entry seen ahead are counted too (the
    /// entries ahead are counted when a read reaches them, or by their placer).
    pub(crate) fn saw<'a>(
        &mut self,
        bucket: i64,
        now: i64,
        seqs: impl Iterator<Item = (&'a str, i64)>,
    ) {
        for (seq, pos) in seqs.filter(|(_, pos)| *pos <= now) {
            let beyond = self
                .frontier
                .as_ref()
                .is_none_or(|(b, s)| (bucket, seq) > (*b, s.as_str()));
            if beyond {
                Self::count(&mut self.marks, &mut self.seen, pos, 1);
                self.frontier = Some((bucket, seq.to_owned()));
            }
        }
    }

    /// A check entry this process placed at `pos` (ahead of every read, so never seen live
    /// if its job ends in time), standing for one of each of the `processes` sharing the
    /// queue.
    pub(crate) fn placed(&mut self, pos: i64, processes: usize) {
        Self::count(&mut self.marks, &mut self.placed, pos, processes.max(1));
    }

    /// Where a read starting after position `from` should end, at most `end`: at the second
    /// mark past `from`, and within [`BLIND_SLICE`] where nothing was counted before the
    /// first scan.
    pub(crate) fn slice_end(&self, from: i64, end: i64) -> i64 {
        let second = self.marks.range(from.saturating_add(1)..).nth(1).copied();
        let end = second.map_or(end, |m| m.min(end));
        let Some(known_from) = self.known_from else {
            return end;
        };
        if from < self.blind_from {
            end.min(self.blind_from)
        } else if from < known_from {
            end.min(from.saturating_add(BLIND_SLICE)).min(known_from)
        } else {
            end
        }
    }

    /// Whether a read starting after position `from` is a blind slice (see [`BLIND_SLICE`]).
    pub(crate) fn blind(&self, from: i64) -> bool {
        self.known_from
            .is_some_and(|known_from| self.blind_from <= from && from < known_from)
    }

    /// Whether a mark lies in `from < pos < to`: a stretch found dead there held at least a
    /// mark's worth of entries, worth one range deletion.
    pub(crate) fn marked_between(&self, from: i64, to: i64) -> bool {
        from < to
            && self
                .marks
                .range(from.saturating_add(1)..to)
                .next()
                .is_some()
    }

    /// A stretch range-deleted: its marks no longer stand for tombstones.
    pub(crate) fn compacted(&mut self, from: i64, to: i64) {
        if from < to {
            let gone: Vec<i64> = self
                .marks
                .range(from.saturating_add(1)..to)
                .copied()
                .collect();
            for m in gone {
                self.marks.remove(&m);
            }
        }
    }

    /// Forgets marks below the cursor: no read starts there any more.
    pub(crate) fn forget_below(&mut self, cursor: i64) {
        self.marks = self.marks.split_off(&cursor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_ends_at_the_second_mark_past_its_start() {
        let mut ledger = Ledger::default();
        ledger.start(0, 0);
        let seqs: Vec<(String, i64)> = (1..=400).map(|p| (format!("{p:020}-run"), p)).collect();
        ledger.saw(0, i64::MAX, seqs.iter().map(|(s, p)| (s.as_str(), *p)));
        assert_eq!(ledger.slice_end(0, 1_000), 256);
        assert_eq!(ledger.slice_end(128, 1_000), 384);
        assert_eq!(ledger.slice_end(300, 1_000), 1_000);
        assert_eq!(ledger.slice_end(0, 100), 100);
    }

    #[test]
    fn entries_seen_again_are_not_counted_again() {
        let mut ledger = Ledger::default();
        ledger.start(0, 0);
        let seqs: Vec<(String, i64)> = (1..=200).map(|p| (format!("{p:020}-run"), p)).collect();
        for _ in 0..3 {
            ledger.saw(0, i64::MAX, seqs.iter().map(|(s, p)| (s.as_str(), *p)));
        }
        assert_eq!(ledger.marks.len(), 1);
    }

    #[test]
    fn just_before_the_first_scan_a_read_spans_a_blind_slice() {
        let mut ledger = Ledger::default();
        ledger.start(10_000_000, 1_000_000);
        assert_eq!(ledger.slice_end(0, i64::MAX), 9_000_000);
        assert_eq!(
            ledger.slice_end(9_000_000, i64::MAX),
            9_000_000 + BLIND_SLICE
        );
        assert_eq!(ledger.slice_end(9_990_000, i64::MAX), 10_000_000);
    }

    #[test]
    fn own_check_entries_are_counted() {
        let mut ledger = Ledger::default();
        ledger.start(0, 0);
        for p in 1..=300 {
            ledger.placed(p, 2);
        }
        assert_eq!(ledger.slice_end(0, 1_000), 128);
        assert!(ledger.marked_between(0, 200));
        ledger.compacted(0, 200);
        assert!(!ledger.marked_between(0, 200));
    }
}
