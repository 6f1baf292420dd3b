//! A worker keeps claiming and completing jobs while one node of three is frozen for longer
//! than the claim TTL: every request of the queue (dispatcher scans, cursor and bucket
//! reads, candidate reads, stats) is bounded by the claim timing's request timeout and sent
//! again elsewhere, never left to the driver's 30 s. Wire-only.

use std::sync::Arc;
use std::time::Duration;

use cql_test_server::NodeFault;
use cql_workqueue::WorkQueue;
use tokio::time::Instant;

use super::queue::queue_config;
use crate::backend::Backend;
use crate::tweaked::{ReadTimes, Tweaked};
use crate::wire_backend::WireBackend;

/// The node frozen (the same as the other frozen-node scenarios').
const FROZEN: usize = 1;

/// Jobs enqueued before the freeze; the worker claims and completes them one by one, a
/// round every 50 ms, while node `FROZEN` is frozen for 1.5 claim TTLs, and reads the
/// queue's stats each round.
/// It completes several, no read waits past the request timeout (plus scheduling slack),
/// and some request did reach the frozen node (else the scenario proved nothing).
pub async fn worker_keeps_claiming_through_a_frozen_node(b: &WireBackend) {
    const JOBS: usize = 40;
    let config = queue_config();
    // Every read sent to the store timed (each send on its own: it sits below the queue's
    // own bound), counting the ones cut before they were answered.
    let store = Arc::new(Tweaked {
        time_reads: Some(ReadTimes::default()),
        ..Tweaked::over(b)
    });
    let q = WorkQueue::new(store.clone(), "frozen-queue", config).expect("queue");
    for i in 0..JOBS {
        q.enqueue(&format!("job {i}")).await.expect("enqueue");
    }
    b.server.node_fault(FROZEN, NodeFault::Freeze);
    let until = Instant::now() + config.timing.lease_duration * 3 / 2;
    let (mut completed, mut failed) = (0, 0);
    // Paced, so the rounds span the whole freeze (the suspect mark on the frozen node
    // lapses within it and the node is tried again).
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = q.stats().await;
        match q.claim("w").await {
            Ok(Some(job)) => match job.complete().await {
                Ok(()) => completed += 1,
                Err(_) => failed += 1,
            },
            Ok(None) => {}
            Err(_) => failed += 1,
        }
    }
    b.server.heal(FROZEN);
    let reads = store.time_reads.as_ref().expect("reads timed");
    let (longest, cut, answered) = (reads.longest(), reads.cut(), reads.answered());
    // Each send is cut at the request timeout (a third of the validity) so that its answer
    // can still be acted on; a loaded machine's timers and round trips add to that, but a
    // send that outlived the whole validity was not cut (unbounded, it would wait for the
    // driver's 2 s timeout or the whole freeze).
    let bound = config.timing.renew_deadline();
    eprintln!(
        "{}: {completed} jobs completed through the freeze ({failed} calls failed); \
         {answered} reads answered, {cut} cut; the longest waited {longest:?} (bound {bound:?})",
        b.name()
    );
    assert!(
        completed >= 3,
        "{}: the worker completed {completed} jobs while a node was frozen",
        b.name()
    );
    assert!(
        longest <= bound,
        "{}: a queue read waited {longest:?} on the frozen node (bound {bound:?})",
        b.name()
    );
    // A request cut on the frozen node makes the others avoid it, and that first one may be
    // an LWT rather than a read: the server tells whether any reached it.
    let swallowed = b.server.requests_frozen_on(FROZEN);
    assert!(
        swallowed > 0,
        "{}: no queue request reached the frozen node: the scenario did not test anything",
        b.name()
    );
}
