//! One node of three frozen (or down) for longer than the lease TTL, on the multi-node CQL
//! test server, in both result modes: leaders, workers and failover ride through it.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use cql_test_server::Flavor;
use integration_tests::backend::Backend as _;
use integration_tests::conformance::frozen_node;
use integration_tests::wire_backend::WireBackend;

async fn cluster(flavor: Flavor) -> WireBackend {
    WireBackend::start_cluster(flavor, 3).await
}

macro_rules! both_modes {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cassandra() {
                let b = cluster(Flavor::Cassandra).await;
                frozen_node::$name(&b).await;
                b.after_scenario();
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn scylla() {
                let b = cluster(Flavor::Scylla).await;
                frozen_node::$name(&b).await;
                b.after_scenario();
            }
        }
    )*};
}

both_modes!(
    leader_keeps_its_term_through_a_frozen_node,
    crashed_leader_is_replaced_in_bound_with_a_frozen_node,
    crashed_leader_is_replaced_in_bound_with_a_down_node,
    leader_keeps_its_term_through_a_down_node,
    worker_keeps_its_claim_through_a_frozen_node,
    worker_keeps_claiming_through_a_frozen_node,
    crashed_worker_item_is_reclaimed_in_bound_with_a_frozen_node,
    lock_guard_is_kept_through_a_frozen_node,
    crashed_lock_holder_is_replaced_in_bound_with_a_frozen_node,
    fair_lock_guard_is_kept_through_a_frozen_node,
    bakery_lock_guard_is_kept_through_a_frozen_node,
);
