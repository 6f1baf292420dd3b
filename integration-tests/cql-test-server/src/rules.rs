//! The proxy rules of every node: a node fault first, then the injected faults (newest
//! first), then the base rule that hands every frame to the engine.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use scylla_cql::Consistency;
use scylla_cql::frame::response::error::{DbError, WriteType};
use scylla_proxy::{Condition, Reaction as _, RequestReaction, RequestRule};

use super::faults::{Times, WireFault};
use super::registry::Needles;
use super::wire::{self, Reaction, Shared};

/// A fault of a whole node, whatever the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFault {
    /// Accepts connections and frames and never answers (a paused process: SIGSTOP, a long
    /// GC pause, a stalled disk). Requests already waiting stay unanswered after it ends.
    Freeze,
    /// Answers every frame after this delay (an overloaded node).
    Slow(Duration),
    /// A dead node: it stops listening (a connection is refused) and its open connections
    /// are closed; [`heal`](crate::CqlTestServer::heal) listens on the same address again.
    Down,
}

/// One injected fault, built for any node.
#[derive(Clone)]
pub(super) struct Injected {
    aimed: Condition,
    fault: WireFault,
    times: Times,
    /// Shared by every node, so `Times::Next(n)` fires `n` times in the whole cluster.
    left: Arc<AtomicUsize>,
}

impl Injected {
    pub(super) fn new(needles: Needles, fault: WireFault, times: Times) -> Self {
        let by_id = Condition::any([
            Condition::RequestOpcode(scylla_proxy::RequestOpcode::Execute),
            Condition::RequestOpcode(scylla_proxy::RequestOpcode::Batch),
        ])
        .and(Condition::any(
            needles
                .ids
                .into_iter()
                .map(|id| Condition::BodyContainsCaseSensitive(id.into_boxed_slice())),
        ));
        let by_text = Condition::any([
            Condition::RequestOpcode(scylla_proxy::RequestOpcode::Query),
            Condition::RequestOpcode(scylla_proxy::RequestOpcode::Batch),
        ])
        .and(Condition::any(needles.texts.into_iter().map(|t| {
            Condition::BodyContainsCaseSensitive(t.into_bytes().into_boxed_slice())
        })));
        let left = match times {
            Times::Next(n) => n,
            _ => 0,
        };
        Injected {
            aimed: Condition::any([by_id, by_text]),
            fault,
            times,
            left: Arc::new(AtomicUsize::new(left)),
        }
    }

    /// This fault's rule on `node`.
    fn rule(&self, shared: &Arc<Shared>, node: usize) -> RequestRule {
        let cas_timeout = DbError::WriteTimeout {
            consistency: Consistency::Serial,
            received: 0,
            required: 1,
            write_type: WriteType::Cas,
        };
        let reaction = match self.fault {
            WireFault::Latency(d) => {
                // The delay is decided when the rule matches, so the count is the
                // condition's: per node, and restarted when the node's rules are rebuilt.
                let when = match self.times {
                    Times::Always => Condition::True,
                    Times::Next(n) => Condition::TrueForLimitedTimes(n),
                    Times::Random(p) => Condition::RandomWithProbability(p),
                };
                return RequestRule(self.aimed.clone().and(when), answer_after(shared, node, d));
            }
            WireFault::Unavailable => Reaction::Fail(DbError::Unavailable {
                consistency: Consistency::Serial,
                required: 1,
                alive: 0,
            }),
            WireFault::CasTimeoutAfterApply => Reaction::ApplyThenFail(cas_timeout),
            WireFault::CasTimeoutWithoutApply => Reaction::Fail(cas_timeout),
            WireFault::DropConnectionAfterApply => Reaction::ApplyThenBreak,
            WireFault::DropConnectionWithoutApply => Reaction::Break,
        };
        let when = match self.times {
            Times::Random(p) => Condition::RandomWithProbability(p),
            Times::Always | Times::Next(_) => Condition::True,
        };
        let shared = Arc::clone(shared);
        let left = Arc::clone(&self.left);
        let counted = matches!(self.times, Times::Next(_));
        RequestRule(
            // The aim goes first so only frames aimed at the statement are counted.
            self.aimed.clone().and(when),
            RequestReaction::forge_response(Arc::new(move |frame| {
                let fires = !counted
                    || left
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok();
                let reaction = if fires { &reaction } else { &Reaction::Normal };
                wire::handle(&shared, node, frame, reaction)
            })),
        )
    }
}

/// The rules of `node`: its node fault, the injected faults (newest first), the base rule.
pub(super) fn node_rules(
    shared: &Arc<Shared>,
    node: usize,
    node_fault: Option<NodeFault>,
    injected: &[Injected],
) -> Vec<RequestRule> {
    let mut rules = Vec::with_capacity(injected.len() + 2);
    match node_fault {
        Some(NodeFault::Freeze) => {
            rules.push(RequestRule(Condition::True, swallow(shared, node)));
        }
        Some(NodeFault::Slow(d)) => {
            rules.push(RequestRule(Condition::True, answer_after(shared, node, d)));
        }
        Some(NodeFault::Down) => {
            rules.push(RequestRule(
                Condition::True,
                RequestReaction::drop_connection(),
            ));
        }
        None => {}
    }
    rules.extend(injected.iter().rev().map(|i| i.rule(shared, node)));
    let base = Arc::clone(shared);
    rules.push(RequestRule(
        Condition::True,
        RequestReaction::forge_response(Arc::new(move |frame| {
            wire::handle(&base, node, frame, &Reaction::Normal)
        })),
    ));
    rules
}

/// Drops every frame, counting the requests among them (`requests_frozen_on`).
fn swallow(shared: &Arc<Shared>, node: usize) -> RequestReaction {
    let mut reaction = RequestReaction::drop_frame();
    // The proxy reports each dropped frame on the channel; a task counts them. Without a
    // runtime (never in practice: faults are set from async tests) they are not counted.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        reaction.feedback_channel = Some(tx);
        let shared = Arc::clone(shared);
        runtime.spawn(async move {
            while let Some((frame, _)) = rx.recv().await {
                let frame: scylla_proxy::RequestFrame = frame;
                if matches!(
                    frame.opcode,
                    scylla_proxy::RequestOpcode::Query
                        | scylla_proxy::RequestOpcode::Execute
                        | scylla_proxy::RequestOpcode::Batch
                ) && let Ok(mut counts) = shared.frozen_per_node.lock()
                {
                    *counts.entry(node).or_default() += 1;
                }
            }
        });
    }
    reaction
}

fn answer_after(shared: &Arc<Shared>, node: usize, delay: Duration) -> RequestReaction {
    let shared = Arc::clone(shared);
    RequestReaction::forge_response_with_delay(
        delay,
        Arc::new(move |frame| wire::handle(&shared, node, frame, &Reaction::Normal)),
    )
}
