//! The lock suite: every algorithm of `cql_lease::lock` through the one `Lock` API, on every
//! backend. Scenarios take an [`Algo`]; [`lock_suite!`](crate::lock_suite) stamps out one
//! test per scenario and algorithm.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::cells::CellStore;
use cql_lease::cells::faulty::FaultyCellStore;
use cql_lease::cells::memory::{CellOp, MemoryCellStore};
use cql_lease::lock::{
    BakeryLock, Contenders, FairLock, LeaseLock, Lock, LockError, LockOptions, ShadowLock,
};
use cql_lease::memory::{Fault, Times};
use cql_lease::{InvalidArgument, LeaseClient};

use super::test_config;
use crate::backend::{Backend, MemoryBackend};

pub use super::lock_hazards::*;
pub use super::lock_scenarios::*;
pub use super::lock_stale::*;
pub use super::lock_transient::*;

/// What the lock suite needs from a backend: a cell store and a lease backend.
#[async_trait]
pub trait LockBackend: Send + Sync {
    /// A label for messages.
    fn name(&self) -> String;
    /// The shared plain-cell store (a fresh namespace per backend).
    fn cells(&self) -> Arc<dyn CellStore>;
    /// The lease backend, for the lease lock.
    fn leases(&self) -> &dyn Backend;
    /// Whether time is simulated (paused): heavy scenarios run at full size only then.
    fn simulated_time(&self) -> bool {
        self.leases().simulated_time()
    }
    /// Whether faults can be injected into the lease store (cell faults are client-side and
    /// work everywhere).
    fn supports_faults(&self) -> bool {
        self.leases().supports_faults()
    }
    /// Tombstones range reads have walked so far, where the store can tell.
    fn tombstones_walked(&self) -> Option<u64> {
        None
    }
    /// Adds a fault, in the store itself (for every contender), for cell-store calls of `op`
    /// (all when `None`). Only where [`LockBackend::supports_faults`].
    fn inject_cells(&self, op: Option<CellOp>, fault: Fault, times: Times);
    /// Removes every fault of the cell store and of the lease store.
    fn clear_store_faults(&self);
}

/// The embedded backend for locks.
#[derive(Debug, Default, Clone)]
pub struct MemoryLockBackend {
    leases: MemoryBackend,
    cells: Arc<MemoryCellStore>,
}

impl MemoryLockBackend {
    /// Empty stores.
    pub fn new() -> Self {
        Self::default()
    }
}

impl LockBackend for MemoryLockBackend {
    fn name(&self) -> String {
        "memory".into()
    }
    fn cells(&self) -> Arc<dyn CellStore> {
        self.cells.clone()
    }
    fn leases(&self) -> &dyn Backend {
        &self.leases
    }
    fn tombstones_walked(&self) -> Option<u64> {
        Some(self.cells.tombstones_walked())
    }
    fn inject_cells(&self, op: Option<CellOp>, fault: Fault, times: Times) {
        self.cells.inject(op, fault, times);
    }
    fn clear_store_faults(&self) {
        self.cells.clear_faults();
        self.leases.clear_faults();
    }
}

/// The algorithms under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    /// `BakeryLock`.
    Bakery,
    /// `FairLock`.
    Fair,
    /// `ShadowLock`.
    Shadow,
    /// `LeaseLock`.
    Lease,
}

/// Lock timing for the suite: short enough for real-time runs.
pub fn lock_options() -> LockOptions {
    LockOptions {
        timing: test_config(),
        poll_interval: Duration::from_millis(20),
    }
}

/// Longest sleep of the shadow lock after AnotherThreadIsOwner in the suite.
pub const SHADOW_BACKOFF: Duration = Duration::from_millis(200);

/// One contender: its lock object and its own view of the cell store (for faults and
/// round-trip counts; unused by the lease lock).
pub struct Contender {
    /// The lock, as the API user sees it.
    pub lock: Arc<dyn Lock>,
    /// Its view of the cell store.
    pub view: FaultyCellStore,
    /// The shadow lock itself, for its statistics.
    pub shadow: Option<ShadowLock>,
}

/// A new contender (its own process key) for `algo` on backend `b`.
pub fn contender(b: &dyn LockBackend, algo: Algo, index: usize) -> Contender {
    contender_with(b, algo, index, lock_options())
}

/// As [`contender`] with other options.
pub fn contender_with(
    b: &dyn LockBackend,
    algo: Algo,
    index: usize,
    options: LockOptions,
) -> Contender {
    try_contender(b, algo, index, options, None).unwrap_or_else(|e| panic!("{}: {e}", b.name()))
}

/// Builds a contender; errors are the constructors' validation. With `skew`, the fair
/// lock's arrival clock is off by `skew - 50 ms`.
pub fn try_contender(
    b: &dyn LockBackend,
    algo: Algo,
    index: usize,
    options: LockOptions,
    skew: Option<Duration>,
) -> Result<Contender, LockError> {
    let view = FaultyCellStore::new(b.cells());
    let store: Arc<dyn CellStore> = Arc::new(view.clone());
    let process = format!(
        "p{index:04}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let contenders = Contenders::new(&process)?;
    let mut shadow = None;
    let lock: Arc<dyn Lock> = match algo {
        Algo::Bakery => Arc::new(BakeryLock::with_contenders(store, options, contenders)?),
        Algo::Fair => {
            let lock = FairLock::with_contenders(store, options, contenders)?;
            Arc::new(match skew {
                // This process's clock is `skew` ahead (or behind): its arrivals sort
                // accordingly, as they would across machines.
                Some(skew) => lock.with_arrival_clock(Arc::new(move || {
                    cql_lease::cells::ClientClock::next() + skew.as_micros() as i64 - 50_000
                })),
                None => lock,
            })
        }
        Algo::Shadow => {
            let lock = ShadowLock::new(store, options)?.with_owner_backoff(SHADOW_BACKOFF);
            shadow = Some(lock.clone());
            Arc::new(lock)
        }
        Algo::Lease => {
            let client = LeaseClient::new(b.leases().store(), options.timing)?;
            Arc::new(LeaseLock::new(client, &process)?)
        }
    };
    Ok(Contender { lock, view, shadow })
}

/// A fresh lock name per scenario run.
pub fn lock_name(scenario: &str) -> String {
    format!("{scenario}-{}", uuid::Uuid::new_v4().simple())
}

/// Bad input is a typed error and nothing reaches the store.
pub async fn bad_input_is_rejected(b: &dyn LockBackend, algo: Algo) {
    let c = contender(b, algo, 0);
    let leases_before = b.leases().calls();
    let long = "n".repeat(300);
    for name in ["", long.as_str(), "a\nb"] {
        let e = c
            .lock
            .lock(name, Some(Duration::from_secs(1)))
            .await
            .unwrap_err();
        assert!(
            matches!(e, LockError::InvalidArgument(_)),
            "{algo:?} {name:?}: {e:?}"
        );
        let e = c.lock.try_lock(name).await.unwrap_err();
        assert!(
            matches!(e, LockError::InvalidArgument(_)),
            "{algo:?} {name:?}: {e:?}"
        );
        let now = tokio::time::Instant::now();
        let e = c
            .lock
            .lock_until(name, now, now + Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(
            matches!(e, LockError::InvalidArgument(_)),
            "{algo:?} {name:?} through lock_until: {e:?}"
        );
    }
    // So long that no deadline can be computed: an error, not a panic.
    let e = c.lock.lock("ok", Some(Duration::MAX)).await.unwrap_err();
    assert!(
        matches!(e, LockError::InvalidArgument(InvalidArgument::Timing(_))),
        "{algo:?}: {e:?}"
    );
    assert_eq!(
        c.view.round_trips(),
        0,
        "{algo:?}: bad input reached the cell store"
    );
    assert_eq!(
        b.leases().calls(),
        leases_before,
        "{algo:?}: bad input reached the lease store"
    );

    let mut bad = lock_options();
    bad.timing.renew_period = bad.timing.renew_deadline();
    assert!(matches!(
        try_contender(b, algo, 1, bad, None).err(),
        Some(LockError::InvalidArgument(InvalidArgument::Timing(_)) | LockError::Lease(_))
    ));
    bad = lock_options();
    bad.poll_interval = Duration::ZERO;
    if algo != Algo::Lease {
        assert!(
            try_contender(b, algo, 1, bad, None).is_err(),
            "{algo:?}: zero poll accepted"
        );
    }
}

/// Stamps out the lock suite: every scenario for every algorithm.
///
/// ```text
/// integration_tests::lock_suite!(#[tokio::test(start_paused = true)], MemoryLockBackend::new());
/// ```
#[macro_export]
macro_rules! lock_suite {
    (#[$attr:meta], $make:expr) => {
        $crate::lock_suite!(#[$attr] #[allow(unused_attributes)], $make);
    };
    (#[$attr:meta] #[$attr2:meta], $make:expr) => {
        $crate::lock_suite!(portable: #[$attr] #[$attr2], $make);
        // Scenarios that need fault injection (the embedded store and the wire).
        $crate::lock_suite!(@cases #[$attr] #[$attr2], $make,
            lock_rides_through_store_timeouts [Bakery, Fair, Shadow, Lease],
            lock_under_endless_store_errors_ends_at_its_timeout [Bakery, Fair, Shadow, Lease],
            try_lock_rides_through_store_errors_within_its_budget [Bakery, Fair, Shadow, Lease],
            try_lock_under_endless_store_errors_is_unreachable [Bakery, Fair, Shadow, Lease],
            try_lock_under_write_timeouts_answers_within_its_budget [Bakery, Fair, Shadow, Lease],
        );
    };
    // Without `portable:` scenarios that inject faults into the stores are generated too;
    // with it (a real cluster) they are not, rather than generated to pass without faults.
    (portable: #[$attr:meta] #[$attr2:meta], $make:expr) => {
        $crate::lock_suite!(@cases #[$attr] #[$attr2], $make,
            bad_input_is_rejected [Bakery, Fair, Shadow, Lease],
            exclusive_under_contention [Bakery, Fair, Shadow, Lease],
            crashed_holder_frees_within_ttl [Bakery, Fair, Shadow, Lease],
            renewed_guard_outlives_its_ttl [Bakery, Fair, Shadow, Lease],
            loss_is_signalled_before_anyone_enters [Bakery, Fair, Shadow, Lease],
            timeout_is_a_typed_error [Bakery, Fair, Shadow, Lease],
            a_zero_timeout_is_one_attempt [Bakery, Fair, Shadow, Lease],
            try_lock_answers_at_once_when_held [Bakery, Fair, Shadow, Lease],
            drop_releases [Bakery, Fair, Shadow, Lease],
            grants_in_arrival_order [Fair, Bakery],
            concurrent_attempts_happen_and_are_retried [Shadow],
            queue_reads_skip_the_dead_prefix [Fair],
            slow_refresh_restarts_the_waiter [Bakery],
            slow_contender_between_read_and_write [Bakery, Shadow],
            reused_contender_key_cannot_hide_a_ticket [Bakery],
            dropped_lock_leaves_no_cell [Bakery, Fair, Shadow],
        );
        mod global_time {
            #[allow(unused_imports)]
            use super::*;
            #[$attr]
            #[$attr2]
            async fn never_decreases() {
                let backend = $make;
                $crate::conformance::global_time::global_time_never_decreases(&backend).await;
            }
            #[$attr]
            #[$attr2]
            async fn freezes_behind_a_dead_fast_clock() {
                let backend = $make;
                $crate::conformance::global_time::global_time_freezes_behind_a_dead_fast_clock(&backend).await;
            }
        }
    };
    (@cases #[$attr:meta] #[$attr2:meta], $make:expr, $($case:ident [$($algo:ident),+]),+ $(,)?) => {
        $(
            #[allow(non_snake_case)]
            mod $case {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[$attr]
                    #[$attr2]
                    async fn $algo() {
                        let backend = $make;
                        $crate::conformance::lock::$case(
                            &backend,
                            $crate::conformance::lock::Algo::$algo,
                        )
                        .await;
                    }
                )+
            }
        )+
    };
}
