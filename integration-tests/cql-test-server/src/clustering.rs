//! Clustering keys in table order (ASC/DESC per column), slices of them, and range
//! tombstones.

use super::engine::Deletion;
use super::values::Value;

/// A clustering key component and its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// The value.
    pub value: Value,
    /// Declared `DESC`.
    pub desc: bool,
}

/// A clustering key (empty for tables without clustering columns), ordered as the table
/// declares: by each component in turn, reversed for `DESC` ones.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Clustering(pub Vec<Component>);

impl Ord for Clustering {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        compare_prefix(&self.0, &other.0)
    }
}

impl PartialOrd for Clustering {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Compares two clustering prefixes component by component, in table order; a shorter
/// prefix that matches so far compares equal.
pub fn compare_prefix(a: &[Component], b: &[Component]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let ord = x.value.total_cmp(&y.value);
        let ord = if x.desc { ord.reverse() } else { ord };
        if ord != std::cmp::Ordering::Equal {
            return ord;
        }
    }
    std::cmp::Ordering::Equal
}

/// One end of a range of clustering keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// No limit.
    Unbounded,
    /// Up to and including keys with this prefix.
    Inclusive(Vec<Component>),
    /// Up to, excluding, keys with this prefix.
    Exclusive(Vec<Component>),
}

/// A range of clustering keys, in table order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// Lower end.
    pub start: Bound,
    /// Upper end.
    pub end: Bound,
}

impl Slice {
    /// Whether `key` falls in the slice.
    pub fn contains(&self, key: &Clustering) -> bool {
        use std::cmp::Ordering::*;
        let after_start = match &self.start {
            Bound::Unbounded => true,
            Bound::Inclusive(p) => compare_prefix(&key.0, p) != Less,
            Bound::Exclusive(p) => compare_prefix(&key.0, p) == Greater,
        };
        let before_end = match &self.end {
            Bound::Unbounded => true,
            Bound::Inclusive(p) => compare_prefix(&key.0, p) != Greater,
            Bound::Exclusive(p) => compare_prefix(&key.0, p) == Less,
        };
        after_start && before_end
    }

    /// Whether every key of `other` falls in this slice.
    pub fn covers(&self, other: &Slice) -> bool {
        use std::cmp::Ordering::*;
        let starts_no_later = match (&self.start, &other.start) {
            (Bound::Unbounded, _) => true,
            (_, Bound::Unbounded) => false,
            (Bound::Exclusive(a), Bound::Inclusive(b)) => compare_prefix(a, b) == Less,
            (
                Bound::Inclusive(a) | Bound::Exclusive(a),
                Bound::Inclusive(b) | Bound::Exclusive(b),
            ) => compare_prefix(a, b) != Greater,
        };
        let ends_no_earlier = match (&self.end, &other.end) {
            (Bound::Unbounded, _) => true,
            (_, Bound::Unbounded) => false,
            (Bound::Exclusive(a), Bound::Inclusive(b)) => compare_prefix(a, b) == Greater,
            (
                Bound::Inclusive(a) | Bound::Exclusive(a),
                Bound::Inclusive(b) | Bound::Exclusive(b),
            ) => compare_prefix(a, b) != Less,
        };
        starts_no_later && ends_no_earlier
    }
}

/// The rows of a partition `slice` can hold, as bounds for a `BTreeMap` range over a table of
/// `columns` clustering columns, or `None` when it holds none. Only bounds on every
/// clustering column narrow it (a prefix bound compares equal to many keys): callers still
/// check each row against the slice.
pub fn seek_bounds(
    slice: &Slice,
    columns: usize,
) -> Option<(std::ops::Bound<Clustering>, std::ops::Bound<Clustering>)> {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let bound = |b: &Bound| match b {
        Bound::Inclusive(x) if x.len() == columns => Included(Clustering(x.clone())),
        Bound::Exclusive(x) if x.len() == columns => Excluded(Clustering(x.clone())),
        _ => Unbounded,
    };
    let (start, end) = (bound(&slice.start), bound(&slice.end));
    let empty = match (&start, &end) {
        (Included(a), Included(b)) => a > b,
        (Included(a) | Excluded(a), Included(b) | Excluded(b)) => a >= b,
        _ => false,
    };
    // An empty slice holds nothing (and BTreeMap refuses inverted ranges).
    (!empty).then_some((start, end))
}

/// A range tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    /// The deleted range.
    pub slice: Slice,
    /// When and at which timestamp.
    pub deletion: Deletion,
}
