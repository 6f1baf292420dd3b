//! The conformance suite on the embedded backend, with tokio's clock paused.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use integration_tests::backend::MemoryBackend;

integration_tests::lease_suite!(#[tokio::test(start_paused = true)], MemoryBackend::new());
integration_tests::queue_suite!(#[tokio::test(start_paused = true)], MemoryBackend::new());

/// The queue suite again in the LWT-free claim mode.
mod bakery {
    use integration_tests::backend::MemoryBackend;
    integration_tests::queue_suite!(bakery: #[tokio::test(start_paused = true)], MemoryBackend::bakery());
    integration_tests::queue_suite!(bakery_cuts: #[tokio::test(start_paused = true)], MemoryBackend::bakery());
}

/// Unequal processes sharing a backlog, in both claim modes: on paused time only (the
/// scenario's bound is virtual time; over the wire it would be seconds of real time and a
/// timed assertion).
mod fleet {
    use integration_tests::backend::{Backend, MemoryBackend};
    use integration_tests::conformance::queue_fleet;

    #[tokio::test(start_paused = true)]
    async fn slow_process_does_not_hold_back_its_share() {
        let b = MemoryBackend::new();
        queue_fleet::slow_process_does_not_hold_back_its_share(&b).await;
        b.after_scenario();
    }

    #[tokio::test(start_paused = true)]
    async fn slow_process_does_not_hold_back_its_share_bakery() {
        let b = MemoryBackend::bakery();
        queue_fleet::slow_process_does_not_hold_back_its_share(&b).await;
        b.after_scenario();
    }
}

/// Only the embedded backend can fail a request before it is sent (see the scenario).
#[tokio::test(start_paused = true)]
async fn never_sent_errors_are_not_read_back() {
    let backend = MemoryBackend::new();
    integration_tests::conformance::hardening::never_sent_errors_are_not_read_back(&backend).await;
    integration_tests::backend::Backend::after_scenario(&backend);
}

/// Cut-off-point scenarios that need many cut-offs with TTL-long waits between them: on paused
/// time here; over the wire they would add minutes of real time to the suite, and
/// they exercise client-side code that is the same for every backend.
mod cut_points {
    use integration_tests::backend::{Backend, MemoryBackend};
    use integration_tests::conformance::{cancel_safety, queue_hardening, queue_parked};

    #[tokio::test(start_paused = true)]
    async fn dropped_renewals_keep_the_lease_consistent() {
        let b = MemoryBackend::new();
        cancel_safety::dropped_renewals_keep_the_lease_consistent(&b).await;
        b.after_scenario();
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_proclaim_and_resign_keep_the_term_consistent() {
        let b = MemoryBackend::new();
        cancel_safety::dropped_proclaim_and_resign_keep_the_term_consistent(&b).await;
        b.after_scenario();
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_worker_next_keeps_or_undoes_the_claim() {
        let b = MemoryBackend::new();
        queue_hardening::dropped_worker_next_keeps_or_undoes_the_claim(&b).await;
        b.after_scenario();
    }

    /// Four heartbeat blips longer than a claim's TTL each.
    #[tokio::test(start_paused = true)]
    async fn parked_claims_lost_spend_no_attempt() {
        let b = MemoryBackend::new();
        queue_parked::parked_claims_lost_spend_no_attempt(&b).await;
        b.after_scenario();
    }
}

/// A claim handed out and lost at its deadline stays the holder's until the store would let
/// it lapse anyway: exact bounds, on paused time only.
mod stop_margin {
    use integration_tests::backend::{Backend, MemoryBackend};
    use integration_tests::conformance::stop_margin;

    #[tokio::test(start_paused = true)]
    async fn handed_out_lease_stays_until_it_would_lapse() {
        let b = MemoryBackend::new();
        stop_margin::handed_out_lease_stays_until_it_would_lapse(&b).await;
        b.after_scenario();
    }

    #[tokio::test(start_paused = true)]
    async fn applied_renewal_with_lost_answer_is_freed_at_the_margin() {
        let b = MemoryBackend::new();
        stop_margin::applied_renewal_with_lost_answer_is_freed_at_the_margin(&b).await;
        b.after_scenario();
    }

    #[tokio::test(start_paused = true)]
    async fn delivered_job_stays_until_it_would_lapse() {
        let b = MemoryBackend::new();
        stop_margin::delivered_job_stays_until_it_would_lapse(&b).await;
        b.after_scenario();
    }
}
