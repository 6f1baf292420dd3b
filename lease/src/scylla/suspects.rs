//! Coordinators that just left a request unanswered, and the routing that sends the next
//! requests elsewhere for a while.
//!
//! A frozen node (a paused process, a stalled disk) accepts requests and never answers, so
//! the driver sees no error and keeps choosing it. The request timeout cuts each such request,
//! but every new request that lands there waits again: a candidate's poll, then its LWT, then
//! the SERIAL read-back that settles the LWT's lost answer. So the request that was cut
//! remembers which coordinator it was waiting on, and the load-balancing policies of this
//! library rank that node after the others of its data centre for [`SUSPECT_FOR`] request
//! timeouts. The mark only reorders a plan, it never removes a node: with every node suspect
//! the order is the usual one, and an LWT or a read is exactly as correct on any coordinator
//! (the lost-answer resolution does not depend on where a request went). A node that
//! answers is cleared at once, a healed node comes back when its mark expires.
//!
//! How the cut request learns its coordinator: [`bounded`] runs it with a task-local slot,
//! and the policies write each node they hand to the driver into it (the driver builds the
//! plan inside the request's future, on the same task). The marks are per process and per
//! node (host id and address): a node frozen for one store is frozen for all.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use scylla::cluster::{ClusterState, NodeRef};
use scylla::errors::RequestAttemptError;
use scylla::policies::load_balancing::{FallbackPlan, LoadBalancingPolicy, RoutingInfo};
use scylla::routing::Shard;
use tokio::time::Instant;
use tracing::{debug, warn};
use uuid::Uuid;

/// How many of its own timeouts a request that was cut keeps its coordinator suspect:
/// long enough to cover a lease's takeover window with the derived timeouts (a third of the
/// validity each), short enough that a healed node serves again soon.
pub const SUSPECT_FOR: u32 = 8;

type NodeKey = (Uuid, SocketAddr);

fn key(node: NodeRef<'_>) -> NodeKey {
    (
        node.host_id,
        SocketAddr::new(node.address.ip(), node.address.port()),
    )
}

/// Suspect nodes of this process and until when.
static SUSPECTS: LazyLock<Mutex<HashMap<NodeKey, Instant>>> = LazyLock::new(Mutex::default);

tokio::task_local! {
    /// The coordinator the current bounded request is waiting on, if it has not answered.
    static WAITING_ON: Arc<Mutex<Option<NodeKey>>>;
}

fn set_waiting_on(node: Option<NodeKey>) {
    let _ = WAITING_ON.try_with(|slot| {
        if let Ok(mut slot) = slot.lock() {
            *slot = node;
        }
    });
}

/// Whether `node` is marked suspect now.
pub(crate) fn suspect(node: NodeRef<'_>) -> bool {
    let Ok(suspects) = SUSPECTS.lock() else {
        return false;
    };
    suspects
        .get(&key(node))
        .is_some_and(|until| *until > Instant::now())
}

fn mark(node: NodeKey, for_: Duration) {
    let now = Instant::now();
    if let Ok(mut suspects) = SUSPECTS.lock() {
        suspects.retain(|_, until| *until > now);
        suspects.insert(node, now + for_);
    }
    warn!(node = %node.1, avoided_for = ?for_, "coordinator left a request unanswered; routing around it");
}

fn clear(node: NodeRef<'_>) {
    if let Ok(mut suspects) = SUSPECTS.lock()
        && suspects.remove(&key(node)).is_some()
    {
        debug!(node = %node.address.ip(), "suspect coordinator answered again");
    }
}

/// Runs `request` for at most `limit`. If it is cut, the coordinator it was waiting on (as
/// written by this library's load-balancing policies) is suspect for [`SUSPECT_FOR`] times
/// `limit`: the next requests of the process go to other nodes of its data centre first.
/// Nested calls share the outer call's slot, so whichever cuts the request marks the node.
///
/// # Errors
/// [`tokio::time::error::Elapsed`] when `limit` passed first; `request` was dropped (a write
/// it sent has an unknown outcome).
///
/// # Cancel safety
/// As cancel-safe as `request`.
pub async fn bounded<F: Future>(
    limit: Duration,
    request: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    let (slot, result) = match WAITING_ON.try_with(Arc::clone) {
        Ok(outer) => (outer, tokio::time::timeout(limit, request).await),
        Err(_) => {
            let slot = Arc::default();
            let result = WAITING_ON
                .scope(Arc::clone(&slot), tokio::time::timeout(limit, request))
                .await;
            (slot, result)
        }
    };
    if result.is_err() {
        let waited_on = slot.lock().ok().and_then(|mut s| s.take());
        if let Some(node) = waited_on {
            mark(node, limit.saturating_mul(SUSPECT_FOR));
        }
    }
    result
}

/// Orders `plan` so that suspect nodes come after the other nodes of their data centre
/// (never after another data centre's: a `LOCAL_*` level means the coordinator's), and
/// records each node as it is handed to the driver.
pub(crate) fn demoted<'a>(
    plan: impl Iterator<Item = (NodeRef<'a>, Option<Shard>)>,
) -> FallbackPlan<'a> {
    let mut plan: Vec<_> = plan.collect();
    let mut datacenters: Vec<Option<&str>> = Vec::new();
    let mut group = |node: NodeRef<'a>| {
        let dc = node.datacenter.as_deref();
        match datacenters.iter().position(|d| *d == dc) {
            Some(i) => i,
            None => {
                datacenters.push(dc);
                datacenters.len() - 1
            }
        }
    };
    let keys: Vec<(usize, bool)> = plan
        .iter()
        .map(|(node, _)| (group(node), suspect(node)))
        .collect();
    let mut order: Vec<usize> = (0..plan.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    let mut slots: Vec<Option<(NodeRef<'a>, Option<Shard>)>> = plan.drain(..).map(Some).collect();
    let ordered: Vec<_> = order.into_iter().filter_map(|i| slots[i].take()).collect();
    recorded(ordered)
}

/// Hands `plan` over as is, recording each node as the driver takes it.
pub(crate) fn recorded<'a>(plan: Vec<(NodeRef<'a>, Option<Shard>)>) -> FallbackPlan<'a> {
    Box::new(plan.into_iter().inspect(|(node, _)| {
        set_waiting_on(Some(key(node)));
    }))
}

/// The driver got an answer from `node` (or gave up on it): the request no longer waits on
/// it. A success (`alive`) also clears its mark; an error may be a dead connection.
pub(crate) fn answered(node: NodeRef<'_>, alive: bool) {
    set_waiting_on(None);
    if alive {
        clear(node);
    }
}

/// The policy of reads: the session's own (token-aware by default), with suspect nodes
/// moved after the others of their data centre.
#[derive(Debug)]
pub(crate) struct AvoidSuspects {
    inner: Arc<dyn LoadBalancingPolicy>,
}

impl AvoidSuspects {
    pub(crate) fn new(inner: Arc<dyn LoadBalancingPolicy>) -> Self {
        AvoidSuspects { inner }
    }
}

impl LoadBalancingPolicy for AvoidSuspects {
    fn pick<'a>(
        &'a self,
        _request: &'a RoutingInfo,
        _cluster: &'a ClusterState,
    ) -> Option<(NodeRef<'a>, Option<Shard>)> {
        // The whole plan is made in `fallback`, where suspects can be moved back.
        None
    }

    fn fallback<'a>(
        &'a self,
        request: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> FallbackPlan<'a> {
        let picked = self.inner.pick(request, cluster);
        let rest = self
            .inner
            .fallback(request, cluster)
            .filter(move |(node, _)| picked.is_none_or(|(p, _)| !Arc::ptr_eq(p, node)));
        demoted(picked.into_iter().chain(rest))
    }

    fn on_request_success(&self, request: &RoutingInfo, latency: Duration, node: NodeRef<'_>) {
        answered(node, true);
        self.inner.on_request_success(request, latency, node);
    }

    fn on_request_failure(
        &self,
        request: &RoutingInfo,
        latency: Duration,
        node: NodeRef<'_>,
        error: &RequestAttemptError,
    ) {
        answered(node, false);
        self.inner.on_request_failure(request, latency, node, error);
    }

    fn name(&self) -> String {
        format!("cql-lease suspect-avoiding {}", self.inner.name())
    }
}
