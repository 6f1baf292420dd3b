//! Paxos contention as a Cassandra 4.0 coordinator meets it (Paxos v1, `StorageProxy`'s
//! `doPaxos` and `beginAndRepairPaxos`): every round prepares a fresh ballot, newer than any
//! other, so it pre-empts each round of its partition that has not proposed yet; a pre-empted
//! round sleeps a random back-off and retries with a new ballot, until the contention timeout
//! since the request arrived runs out. Later ballots win, so proposers on one partition duel.
//!
//! Known simplifications: a round's prepare, read and propose take `paxos_round` together and
//! its commit is instant, so no round ever finds another's accepted but uncommitted proposal
//! to finish first; prepares never fail (one coordinator clock, so a fresh ballot is always
//! the newest).

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::options::ServerOptions;
use super::stats::{Ballot, PartitionId, PaxosTracker};

/// The contention model of a server, when it has one (`ServerOptions::paxos_contention`).
#[derive(Debug, Clone)]
pub(crate) struct Model {
    /// The partitions' ballots and the counts.
    pub tracker: Arc<PaxosTracker>,
    /// From prepare to propose.
    pub round: Duration,
    /// A pre-empted round sleeps uniformly below this before retrying.
    pub backoff: Duration,
    /// How long a request may retry, from its arrival.
    pub timeout: Duration,
    /// A request that meets this many rounds in flight times out at once.
    pub budget: Option<u32>,
    /// A timed-out write still applies.
    pub timeout_applies: bool,
}

/// A request that ran out of contention time, with the rounds it lost.
#[derive(Debug)]
pub(crate) struct TimedOut {
    pub contentions: usize,
}

impl Model {
    /// The model `options` ask for, over `tracker`; `None` when they turn it off.
    pub(crate) fn of(options: &ServerOptions, tracker: Arc<PaxosTracker>) -> Option<Model> {
        options.paxos_contention.then_some(Model {
            tracker,
            round: options.paxos_round,
            backoff: options.paxos_backoff,
            timeout: options.cas_contention_timeout,
            budget: options.cas_contention_budget,
            timeout_applies: options.cas_timeout_applies,
        })
    }

    /// Runs one Paxos operation on `partition`, arrived at `arrived`: rounds until one is not
    /// pre-empted. After each round's wait, `commit` gets its ballot to propose
    /// ([`Ballot::propose`]) and, when the proposal is accepted, to apply the operation
    /// atomically with it, returning the answer; `None` means pre-empted. Nothing is held
    /// while a round waits or backs off.
    pub(crate) async fn contend<T>(
        &self,
        partition: &PartitionId,
        arrived: Instant,
        mut commit: impl FnMut(Ballot) -> Option<T>,
    ) -> Result<T, TimedOut> {
        self.tracker.operation(partition);
        let mut contentions = 0;
        while arrived.elapsed() < self.timeout {
            let ballot = self.tracker.prepare(partition);
            if let Some(budget) = self.budget
                && ballot.others >= budget as usize
            {
                contentions += ballot.others;
                break;
            }
            if !self.round.is_zero() {
                // A round lasts a fraction of a millisecond on a local node.
                super::fine_timer::sleep(self.round).await;
            }
            if let Some(answer) = commit(ballot) {
                return Ok(answer);
            }
            contentions += 1;
            if !self.backoff.is_zero() {
                let pause = rand::rng().random_range(Duration::ZERO..self.backoff);
                tokio::time::sleep(pause).await;
            }
        }
        self.tracker.timed_out();
        Err(TimedOut { contentions })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

    use super::*;

    fn model(timeout: Duration) -> Model {
        let options = ServerOptions::default().with_cas_contention_timeout(timeout);
        Model::of(&options, Arc::default()).unwrap()
    }

    fn hot() -> PartitionId {
        ("ks".into(), "t".into(), "hot".into())
    }

    /// Two proposers that overlap: the earlier one is pre-empted by the later ballot, backs
    /// off and wins a later round; both operations succeed, each applied once. Back-offs on
    /// paused time; rounds (on the real clock) long enough that the second prepares within
    /// the first's. How often they pre-empt each other after that depends on how the two
    /// wake-ups interleave on a loaded machine, so only the least is asserted.
    #[tokio::test(start_paused = true)]
    async fn the_later_ballot_wins_and_the_earlier_retries() {
        let mut model = model(Duration::from_secs(1));
        model.round = Duration::from_millis(100);
        let first = {
            let model = model.clone();
            tokio::spawn(async move {
                model
                    .contend(&hot(), Instant::now(), |b| b.propose().then_some(()))
                    .await
            })
        };
        tokio::task::yield_now().await; // the first prepares before the second
        model
            .contend(&hot(), Instant::now(), |b| b.propose().then_some(()))
            .await
            .unwrap();
        first.await.unwrap().unwrap();
        let stats = model.tracker.stats();
        assert_eq!(stats.rounds[&hot()], 2);
        assert!(stats.contended[&hot()] >= 1, "{stats:?}");
        assert_eq!(
            stats.attempts[&hot()],
            2 + stats.contended[&hot()],
            "every pre-empted round is retried once: {stats:?}"
        );
        assert_eq!(stats.timeouts, 0);
    }

    /// A proposer pre-empted at every round gives up once the contention timeout has passed,
    /// having backed off between rounds.
    #[tokio::test(start_paused = true)]
    async fn a_proposer_always_pre_empted_times_out() {
        let model = model(Duration::from_millis(300));
        let tracker = Arc::clone(&model.tracker);
        let started = Instant::now();
        let outcome = model
            .contend(&hot(), started, |ballot| {
                // A newer ballot came in during the round.
                drop(tracker.prepare(&hot()));
                ballot.propose().then_some(())
            })
            .await;
        let TimedOut { contentions } = outcome.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(300));
        let stats = model.tracker.stats();
        assert_eq!(stats.timeouts, 1);
        assert_eq!(stats.contended[&hot()] as usize, contentions);
        // Back-offs average 50 ms: a few rounds fit in 300 ms, never hundreds.
        assert!((2..100).contains(&contentions), "{contentions} rounds");
    }
}
