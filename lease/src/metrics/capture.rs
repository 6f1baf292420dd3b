//! An in-memory recorder for tests (feature `test-metrics`): install it on the test's
//! thread, run the code under test, read back what it recorded.
//!
//! It is a thread-local recorder ([`::metrics::set_default_local_recorder`]), so run the
//! test on a current-thread runtime (`#[tokio::test]`'s default): tasks spawned by the code
//! under test then record on the same thread. Values are read without resetting them.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ::metrics::{
    Counter, Gauge, Histogram, Key, KeyName, LocalRecorderGuard, Metadata, Recorder, SharedString,
    Unit,
};
use metrics_util::registry::{AtomicStorage, Registry};

/// Records every metric in memory. Cheap to clone (clones share the values).
///
/// ```
/// use cql_lease::metrics::capture::Capture;
/// let capture = Capture::default();
/// let _installed = capture.install();
/// metrics::counter!("demo_total", "kind" => "a").increment(2);
/// assert_eq!(capture.counter("demo_total", &[("kind", "a")]), 2);
/// assert_eq!(capture.counter("demo_total", &[("kind", "b")]), 0);
/// ```
#[derive(Clone)]
pub struct Capture {
    registry: Arc<Registry<Key, AtomicStorage>>,
}

impl Default for Capture {
    fn default() -> Self {
        Capture {
            registry: Arc::new(Registry::atomic()),
        }
    }
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").finish_non_exhaustive()
    }
}

/// Whether `key` is named `name` and carries every label of `labels`.
fn matches(key: &Key, name: &str, labels: &[(&str, &str)]) -> bool {
    key.name() == name
        && labels
            .iter()
            .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
}

impl Capture {
    /// Makes this the recorder of the current thread until the guard is dropped.
    pub fn install(&self) -> LocalRecorderGuard<'_> {
        ::metrics::set_default_local_recorder(self)
    }

    /// The sum of the counters named `name` carrying `labels` (other labels free).
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.registry
            .get_counter_handles()
            .into_iter()
            .filter(|(key, _)| matches(key, name, labels))
            .map(|(_, value)| value.load(Ordering::SeqCst))
            .sum()
    }

    /// The sum of the gauges named `name` carrying `labels`.
    pub fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.registry
            .get_gauge_handles()
            .into_iter()
            .filter(|(key, _)| matches(key, name, labels))
            .map(|(_, value)| f64::from_bits(value.load(Ordering::SeqCst)))
            .sum()
    }

    /// Every value recorded in the histograms named `name` carrying `labels`.
    pub fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.registry
            .get_histogram_handles()
            .into_iter()
            .filter(|(key, _)| matches(key, name, labels))
            .flat_map(|(_, bucket)| bucket.data())
            .collect()
    }
}

impl Recorder for Capture {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        self.registry
            .get_or_create_counter(key, |c| Counter::from_arc(Arc::clone(c)))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        self.registry
            .get_or_create_gauge(key, |g| Gauge::from_arc(Arc::clone(g)))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        self.registry
            .get_or_create_histogram(key, |h| Histogram::from_arc(Arc::clone(h)))
    }
}
