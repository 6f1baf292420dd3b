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
//! How the cut request learns its coordinators: [`bounded`] runs it with a task-local set
//! of the nodes it is waiting on; the policies add each node they hand to the driver and
//! remove it when it answers (the driver builds the plan and reports answers inside the
//! request's future, on the same task). A set, not a single slot, because one bounded call
//! may wait on several nodes at once (concurrent requests joined in it, the driver's
//! speculative executions), and each answer must take out only its own node. A call nested
//! in another adds to the enclosing calls' sets too, so whichever is cut marks exactly the
//! nodes still unanswered under it. The marks are per process and per node (host id and
//! address): a node frozen for one store is frozen for all.

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

/// The coordinators one bounded call is waiting on (one entry per request sent and not yet
/// answered), and the call it is nested in.
#[derive(Default)]
struct Waiting {
    pending: Mutex<Vec<NodeKey>>,
    outer: Option<Arc<Waiting>>,
}

impl Waiting {
    /// This call and every call it is nested in.
    fn chain(&self) -> impl Iterator<Item = &Waiting> {
        std::iter::successors(Some(self), |w| w.outer.as_deref())
    }

    fn remove(&self, node: &NodeKey) {
        if let Ok(mut pending) = self.pending.lock()
            && let Some(i) = pending.iter().position(|n| n == node)
        {
            pending.swap_remove(i);
        }
    }
}

tokio::task_local! {
    /// The innermost bounded call of the current request.
    static WAITING_ON: Arc<Waiting>;
}

/// A request was sent to `node`: every enclosing bounded call now waits on it.
fn record(node: NodeKey) {
    let _ = WAITING_ON.try_with(|waiting| {
        for w in waiting.chain() {
            if let Ok(mut pending) = w.pending.lock() {
                pending.push(node);
            }
        }
    });
}

/// `node` answered one request: no enclosing bounded call waits on it for that request.
fn unrecord(node: &NodeKey) {
    let _ = WAITING_ON.try_with(|waiting| {
        for w in waiting.chain() {
            w.remove(node);
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

/// How many marks, expired or not, are kept before the expired ones are swept.
const SWEEP_ABOVE: usize = 64;

fn mark(node: NodeKey, for_: Duration) {
    let now = Instant::now();
    if let Ok(mut suspects) = SUSPECTS.lock() {
        // Expired marks are swept only once there are many: a cluster has few nodes, and
        // a sweep against one clock must not drop marks timed by another (tokio's paused
        // clocks differ from runtime to runtime).
        if suspects.len() >= SWEEP_ABOVE {
            suspects.retain(|_, until| *until > now);
        }
        // A short cut (a request near its deadline gets as little as 50 ms) must not cut
        // short the mark a longer timeout left.
        let until = suspects.entry(node).or_insert(now);
        *until = (*until).max(now + for_);
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

/// Runs `request` for at most `limit`. If it is cut, the coordinators it was still waiting
/// on (as recorded by this library's load-balancing policies) are suspect for
/// [`SUSPECT_FOR`] times `limit`: the next requests of the process go to other nodes of
/// their data centre first. Calls may nest and run concurrently: each is charged only with
/// the requests sent under it and not answered.
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
    let waiting = Arc::new(Waiting {
        pending: Mutex::default(),
        outer: WAITING_ON.try_with(Arc::clone).ok(),
    });
    let result = WAITING_ON
        .scope(Arc::clone(&waiting), tokio::time::timeout(limit, request))
        .await;
    // Whatever is left was sent under this call and is settled here: cut, it is marked;
    // finished, it was a node the driver passed over. Either way the enclosing calls no
    // longer wait on it.
    let left = waiting
        .pending
        .lock()
        .map(|mut p| std::mem::take(&mut *p))
        .unwrap_or_default();
    for node in &left {
        for w in waiting.chain().skip(1) {
            w.remove(node);
        }
    }
    if result.is_err() {
        let mut left = left;
        left.sort_unstable();
        left.dedup();
        for node in left {
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
    Box::new(plan.into_iter().inspect(|(node, _)| record(key(node))))
}

/// The driver got an answer from `node` (or gave up on it): the request no longer waits on
/// it. A success (`alive`) also clears its mark; an error may be a dead connection.
pub(crate) fn answered(node: NodeRef<'_>, alive: bool) {
    unrecord(&key(node));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeKey {
        (Uuid::new_v4(), "127.0.0.1:9042".parse().unwrap())
    }

    fn is_suspect(node: &NodeKey) -> bool {
        SUSPECTS
            .lock()
            .map(|s| s.get(node).is_some_and(|until| *until > Instant::now()))
            .unwrap_or(false)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A request that is sent to `node` and answered after `after` (never when `None`).
    async fn request(node: NodeKey, after: Option<Duration>) {
        record(node);
        match after {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
        unrecord(&node);
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_cut_does_not_shorten_a_longer_mark() {
        let frozen = node();
        assert!(bounded(ms(1000), request(frozen, None)).await.is_err());
        assert!(bounded(ms(50), request(frozen, None)).await.is_err());
        tokio::time::sleep(ms(50) * SUSPECT_FOR).await;
        assert!(
            is_suspect(&frozen),
            "the 50 ms cut replaced the longer mark"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cut_request_marks_the_node_it_waited_on() {
        let frozen = node();
        assert!(bounded(ms(100), request(frozen, None)).await.is_err());
        assert!(is_suspect(&frozen));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_from_another_node_does_not_hide_the_one_still_waited_on() {
        // Two requests joined in one bounded call (a lock's deletes, a speculative
        // execution): the healthy node's answer must not clear the frozen node's wait.
        let (frozen, healthy) = (node(), node());
        let both = async {
            futures::join!(request(frozen, None), async {
                tokio::time::sleep(ms(10)).await;
                request(healthy, Some(ms(10))).await;
            })
        };
        assert!(bounded(ms(100), both).await.is_err());
        assert!(is_suspect(&frozen), "the frozen node was not marked");
        assert!(!is_suspect(&healthy), "the node that answered was marked");
    }

    #[tokio::test(start_paused = true)]
    async fn a_nested_cut_charges_its_own_request_not_a_concurrent_sibling() {
        // Two bounded calls run concurrently inside an outer one: the call cut on the
        // frozen node must not blame the node its sibling happened to send to last.
        let (frozen, healthy) = (node(), node());
        let outer = async {
            futures::join!(bounded(ms(50), request(frozen, None)), async {
                tokio::time::sleep(ms(40)).await;
                bounded(ms(50), request(healthy, Some(ms(20)))).await
            })
        };
        let (cut, answered) = bounded(ms(1000), outer).await.unwrap();
        assert!(cut.is_err() && answered.is_ok());
        assert!(is_suspect(&frozen), "the frozen node was not marked");
        assert!(!is_suspect(&healthy), "a sibling's healthy node was marked");
    }

    #[tokio::test(start_paused = true)]
    async fn an_outer_cut_marks_what_its_nested_call_still_waits_on() {
        // The outer limit is the shorter one (a renewal's budget around the store call).
        let frozen = node();
        let nested = bounded(ms(1000), request(frozen, None));
        assert!(bounded(ms(100), nested).await.is_err());
        assert!(is_suspect(&frozen));
    }

    #[tokio::test(start_paused = true)]
    async fn a_finished_call_leaves_nothing_for_its_enclosing_call_to_blame() {
        // The driver passed over a node (no connection) without an answer; the nested call
        // then succeeded elsewhere. A later cut of the outer call is not that node's doing.
        let passed_over = node();
        let outer = async {
            let _ = bounded(ms(100), async { record(passed_over) }).await;
            std::future::pending::<()>().await;
        };
        assert!(bounded(ms(100), outer).await.is_err());
        assert!(!is_suspect(&passed_over));
    }
}
