//! The load-balancing policy of LWTs: a strict rotation over the nodes, so that a request
//! sent again after a timeout goes to another coordinator.

use std::sync::atomic::{AtomicUsize, Ordering};

use std::time::Duration;

use scylla::cluster::{ClusterState, NodeRef};
use scylla::errors::RequestAttemptError;
use scylla::policies::load_balancing::{FallbackPlan, LoadBalancingPolicy, RoutingInfo};
use scylla::routing::Shard;

use super::suspects;

/// Each plan starts one node further than the previous one (in the order of the driver's
/// node list, nodes of `datacenter` first when set; nodes without a connection last). The
/// driver's default policy rotates by a random shift instead, so a retry would land on the
/// node that just timed out again one time in N. A node suspect of leaving a request
/// unanswered (see [`suspects`]) goes after the others of its rank.
#[derive(Debug, Default)]
pub(super) struct Rotation {
    next: AtomicUsize,
    datacenter: Option<String>,
}

impl Rotation {
    pub(super) fn new(datacenter: Option<String>) -> Self {
        Rotation {
            next: AtomicUsize::new(0),
            datacenter,
        }
    }
}

impl LoadBalancingPolicy for Rotation {
    fn pick<'a>(
        &'a self,
        _request: &'a RoutingInfo,
        _cluster: &'a ClusterState,
    ) -> Option<(NodeRef<'a>, Option<Shard>)> {
        // The plan is made in `fallback`, once per request, so the rotation moves once.
        None
    }

    fn fallback<'a>(
        &'a self,
        _request: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> FallbackPlan<'a> {
        let nodes = cluster.get_nodes_info();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let rotated = (0..nodes.len()).map(move |i| &nodes[(start + i) % nodes.len()]);
        let rank = |node: NodeRef<'_>| {
            let remote = match &self.datacenter {
                Some(dc) => node.datacenter.as_deref() != Some(dc.as_str()),
                None => false,
            };
            let unusable = !(node.is_enabled() && node.is_connected());
            // After the data centre: a suspect local node beats any remote one.
            (unusable, remote, suspects::suspect(node))
        };
        let mut plan: Vec<NodeRef<'a>> = rotated.collect();
        // Stable: the rotation order is kept within each rank.
        plan.sort_by_key(|node| rank(node));
        suspects::recorded(plan.into_iter().map(|node| (node, None)).collect())
    }

    fn on_request_success(&self, _request: &RoutingInfo, _latency: Duration, node: NodeRef<'_>) {
        suspects::answered(node, true);
    }

    fn on_request_failure(
        &self,
        _request: &RoutingInfo,
        _latency: Duration,
        node: NodeRef<'_>,
        _error: &RequestAttemptError,
    ) {
        suspects::answered(node, false);
    }

    fn name(&self) -> String {
        "cql-lease LWT rotation".into()
    }
}
