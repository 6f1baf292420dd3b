//! The behaviour suite, written once and run against every backend.
//!
//! Each scenario is an `async fn(&dyn Backend)` that panics when the behaviour is wrong.
//! [`lease_suite!`](crate::lease_suite) stamps out one `#[tokio::test]` per scenario for a
//! backend factory; later primitives add their scenarios here the same way.

pub mod cancel_safety;
pub mod contention;
pub mod election;
pub mod election_api;
pub mod election_chaos;
pub mod frozen_node;
pub mod frozen_queue;
pub mod global_time;
pub mod hardening;
pub mod late_apply;
pub mod lease_basic;
pub mod lease_faults;
pub mod lease_waiting;
pub mod lock;
pub mod lock_hazards;
pub mod lock_scenarios;
pub mod lock_stale;
pub mod lock_transient;
pub mod queue;
pub mod queue_bakery;
pub mod queue_bakery_convoy;
pub mod queue_chaos;
pub mod queue_client;
pub mod queue_enqueue;
pub mod queue_features;
pub mod queue_fleet;
pub mod queue_hardening;
pub mod queue_orphans;
pub mod queue_parked;
pub mod queue_periodic;
pub mod queue_scale;
pub mod queue_snooze;
pub mod queue_tombstones;
pub mod queue_unique;
pub mod queue_upkeep_races;
pub mod stop_margin;

use std::time::Duration;

use cql_lease::{LeaseClient, Timing};

use crate::backend::Backend;

/// Timing used by the suite: short enough for real-time runs, long enough that a loaded
/// two-core machine or a real node stays within it. A 4 s TTL leaves a 3 s validity (the
/// store counts TTLs in whole seconds) and derives a 1 s request timeout: with a 2 s TTL
/// (333 ms per request) starved test processes lost leases and claims they still held.
pub fn test_config() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(4),
        renew_period: Duration::from_millis(800),
        retry_period: Duration::from_millis(100),
        max_clock_skew: Duration::ZERO,
        resolve_timeout: Duration::from_secs(4),
        request_timeout: None,
    }
}

/// [`test_config`] with requests that wait past their deadline (twice the validity), for
/// scenarios about answers that arrive late: with the derived request timeout such a
/// request is given up and read back long before.
pub fn patient_config() -> Timing {
    let config = test_config();
    Timing {
        request_timeout: Some(config.renew_deadline() * 2),
        ..config
    }
}

/// A client on the backend's store with [`test_config`].
pub fn client(backend: &dyn Backend) -> LeaseClient {
    client_with(backend, test_config())
}

/// A client on the backend's store with `config`.
pub fn client_with(backend: &dyn Backend, config: Timing) -> LeaseClient {
    match LeaseClient::new(backend.store(), config) {
        Ok(client) => client,
        Err(e) => panic!("{}: test config rejected: {e}", backend.name()),
    }
}

/// Stamps out the lease and election scenarios as tests. `$make` builds a backend (an
/// expression that may `.await`), `$attr` is the test attribute to use.
///
/// With `portable:` first, only the scenarios that need no fault injection are generated
/// (a real cluster): a scenario that cannot do its work is not generated, rather than
/// generated to pass without doing it.
///
/// ```text
/// integration_tests::lease_suite!(#[tokio::test(start_paused = true)], MemoryBackend::new());
/// integration_tests::lease_suite!(portable: #[tokio::test] #[ignore = "..."], RealCluster::from_env().await);
/// ```
#[macro_export]
macro_rules! lease_suite {
    (portable: #[$attr:meta] $(#[$more:meta])*, $make:expr) => {
        $crate::lease_suite!(@tests {#[$attr] $(#[$more])*}, $make,
            lease_basic::acquire_hold_release,
            lease_basic::tokens_increase_across_release_and_expiry,
            lease_basic::expiry_then_takeover,
            lease_basic::renew_after_expiry_fails,
            lease_basic::non_owner_cannot_renew_or_release,
            lease_basic::renew_keeps_token_and_updates_value,
            lease_basic::acquire_waits_and_times_out,
            lease_basic::bad_input_is_rejected_before_any_store_call,
            lease_basic::store_call_costs,
            lease_basic::keepalive_survives_renewals,
            lease_basic::guard_drop_releases,
            contention::exclusive_under_contention,
            lease_waiting::waiters_propose_once_per_hand_over,
            lease_waiting::waiters_are_served_in_arrival_order,
            lease_waiting::departed_waiters_do_not_hold_up_the_line,
            election::crash_failover_is_bounded,
            election::resign_failover_is_one_poll,
            election_api::observers_see_every_change_in_order,
            election_api::proclaim_keeps_the_term,
            election_api::bad_input_is_rejected,
            election_api::shutdown_is_clean,
            election_chaos::terms_never_overlap_under_chaos,
            hardening::idle_election_costs_only_renewals,
        );
    };
    (#[$attr:meta] $(#[$more:meta])*, $make:expr) => {
        $crate::lease_suite!(portable: #[$attr] $(#[$more])*, $make);
        // Scenarios that need fault injection (the memory and wire backends).
        $crate::lease_suite!(@tests {#[$attr] $(#[$more])*}, $make,
            lease_faults::keepalive_signals_loss_before_expiry_when_store_unavailable,
            lease_faults::lost_answer_of_applied_acquire_is_resolved,
            lease_faults::lost_answer_of_unapplied_acquire_is_resolved,
            lease_faults::unresolvable_acquire_leaves_no_lease_behind,
            lease_faults::lost_answers_on_renew_and_release_are_resolved,
            election::failing_leader_self_demotes_before_expiry,
            election_api::term_deadline_follows_renewals,
            hardening::late_acquire_answer_is_given_back,
            hardening::late_election_win_is_not_elected,
            hardening::own_lost_term_is_freed_not_reported,
            late_apply::late_applied_acquire_is_released_on_sight,
            late_apply::late_applied_campaign_does_not_mislead_peers,
            late_apply::failed_releases_are_released_on_sight,
            cancel_safety::dropped_lease_futures_leave_no_lease,
            cancel_safety::dropped_campaign_leaves_no_lease,
        );
    };
    (@tests $attrs:tt, $make:expr, $($module:ident :: $case:ident),+ $(,)?) => {
        $( $crate::lease_suite!(@one $attrs, $make, $module :: $case); )+
    };
    (@one {$(#[$attr:meta])*}, $make:expr, $module:ident :: $case:ident) => {
        $(#[$attr])*
        async fn $case() {
            let backend = $make;
            $crate::conformance::$module::$case(&backend).await;
            $crate::backend::Backend::after_scenario(&backend);
        }
    };
}

/// Stamps out the work-queue scenarios, like [`lease_suite!`](crate::lease_suite) (with
/// `portable:` for a backend without fault injection).
#[macro_export]
macro_rules! queue_suite {
    // The LWT-free claim mode: every scenario that does not test LWT-only behaviour (unique
    // keys, LWT counts per item, conditional finishes read back after a lost answer), plus
    // its own (the 64-claimer convoy as draws per item and writes per number partition). The backend asserts after each that the store saw no LWT.
    // Cut-off points of the bakery mode's client code, many in sequence: on paused time only
    // (over the wire they take ~35 s of real time each).
    (bakery_cuts: #[$attr:meta] $(#[$more:meta])*, $make:expr) => {
        $crate::lease_suite!(@tests {#[$attr] $(#[$more])*}, $make,
            queue_hardening::dropped_queue_futures_leave_no_claim,
        );
    };
    (bakery: #[$attr:meta] $(#[$more:meta])*, $make:expr) => {
        $crate::lease_suite!(@tests {#[$attr] $(#[$more])*}, $make,
            queue::items_are_claimed_oldest_first,
            queue::crashed_worker_item_is_reclaimed_with_greater_token,
            queue::failures_retry_with_backoff_then_discard,
            queue::claims_are_exclusive_under_contention,
            queue_scale::claim_passes_skip_tombstones,
            queue_tombstones::no_index_read_walks_a_thousand_tombstones,
            queue_tombstones::stats_reads_walk_at_most_a_thousand_tombstones,
            queue_scale::skewed_enqueuer_clocks,
            queue_features::typed_and_raw_payloads,
            queue_features::dead_letters_list_requeue_purge,
            queue_features::stats_by_state,
            queue_features::graceful_drain,
            queue_bakery::unique_keys_and_mode_mismatch_are_refused,
            queue_bakery::resent_enqueue_cannot_undo_a_completion,
            queue_bakery::one_winner_among_simultaneous_claims,
            queue_bakery_convoy::bakery_convoy_with_64_claimers,
            queue::lapsed_claim_stops_worker_and_cannot_complete,
            queue::lost_answers_are_resolved,
            queue_chaos::chaos_loses_nothing_and_never_reuses_tokens,
            queue_hardening::late_claim_is_undone,
            queue_parked::parked_claim_is_undone_within_a_bound,
            queue_parked::drained_worker_keeps_no_claim,
            queue_client::typed_handlers_answer_for_their_jobs,
            queue_snooze::a_snoozed_job_runs_again_without_spending_attempts,
        );
    };
    (portable: #[$attr:meta] $(#[$more:meta])*, $make:expr) => {
        $crate::lease_suite!(@tests {#[$attr] $(#[$more])*}, $make,
            queue::items_are_claimed_oldest_first,
            queue::crashed_worker_item_is_reclaimed_with_greater_token,
            queue::failures_retry_with_backoff_then_discard,
            queue::store_refuses_claims_it_must,
            queue::entry_moves_in_one_request,
            queue::bad_queue_input_is_rejected,
            queue::claims_are_exclusive_under_contention,
            queue_scale::claim_passes_skip_tombstones,
            queue_tombstones::no_index_read_walks_a_thousand_tombstones,
            queue_tombstones::stats_reads_walk_at_most_a_thousand_tombstones,
            queue_scale::no_convoy_with_64_claimers,
            queue_scale::resent_enqueue_after_completion_is_refused,
            queue_scale::skewed_enqueuer_clocks,
            queue_features::typed_and_raw_payloads,
            queue_features::dead_letters_list_requeue_purge,
            queue_features::stats_by_state,
            queue_features::graceful_drain,
            queue_features::batch_enqueue,
            queue_unique::unique_key_reopens_after_done_window,
            queue_orphans::late_applied_claim_is_handed_back_at_once,
            queue_client::typed_handlers_answer_for_their_jobs,
            queue_client::each_queue_runs_at_its_own_concurrency,
            queue_client::one_stop_drains_every_queue,
            queue_client::the_shutdown_token_stops_every_queue,
            queue_client::bad_client_settings_are_refused_before_anything_runs,
            queue_snooze::a_snoozed_job_runs_again_without_spending_attempts,
            queue_periodic::periodic_ticks_survive_leader_kills,
            queue_periodic::skipped_ticks_stay_skipped,
            queue_periodic::ticks_missed_within_the_window_run_late_after_a_long_failover,
            queue_periodic::bad_periodic_settings_are_refused,
        );
    };
    (#[$attr:meta] $(#[$more:meta])*, $make:expr) => {
        $crate::queue_suite!(portable: #[$attr] $(#[$more])*, $make);
        // Scenarios that need fault injection (the memory and wire backends).
        $crate::lease_suite!(@tests {#[$attr] $(#[$more])*}, $make,
            queue::lapsed_claim_stops_worker_and_cannot_complete,
            queue::lost_answers_are_resolved,
            queue_features::dead_letter_requeue_and_purge_settle_lost_answers,
            queue_chaos::chaos_loses_nothing_and_never_reuses_tokens,
            queue_hardening::late_claim_is_undone,
            queue_hardening::every_job_exit_cancels_its_token,
            queue_hardening::dropped_queue_futures_leave_no_claim,
            queue_parked::parked_claim_is_undone_within_a_bound,
            queue_parked::drained_worker_keeps_no_claim,
            queue_unique::unique_enqueue_race_reports_true_state,
            queue_unique::stale_check_entry_does_not_start_revived_job_early,
            queue_unique::revival_in_flight_keeps_its_entry,
            queue_upkeep_races::requeue_in_flight_keeps_its_entry,
            queue_upkeep_races::past_run_at_enqueue_in_flight_keeps_its_entry,
            queue_upkeep_races::duplicate_enqueue_entry_does_not_start_delayed_job,
            queue_upkeep_races::dead_letter_lost_answers_are_settled,
            queue_upkeep_races::orphan_entry_goes_after_its_row_is_sealed,
            queue_upkeep_races::slow_index_write_then_crash_keeps_the_item_findable,
            queue_snooze::a_snoozed_job_runs_again_when_its_new_entry_was_not_placed,
            queue_client::in_flight_counts_only_jobs_handed_out,
            queue_enqueue::a_failed_item_write_is_an_error_and_stores_nothing,
            queue_enqueue::a_write_timeout_is_an_unknown_outcome_naming_the_item,
            queue_enqueue::a_lost_answer_left_unsettled_is_an_unknown_outcome_and_the_item_is_found,
        );
    };
}
