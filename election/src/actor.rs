//! The task behind a campaign: follow, lead, and report.

use cql_lease::{LeaseClient, LeaseGuard, TryAcquire};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::campaign::Term;
use crate::error::ElectionError;
use crate::event::{DeposeReason, ElectionEvent, Leader};

/// What a campaign handle asks of its actor.
pub(crate) enum Command {
    Resign(oneshot::Sender<Result<(), ElectionError>>),
    Proclaim(Option<String>, oneshot::Sender<Result<(), ElectionError>>),
    Abort,
}

/// Everything the actor owns.
pub(crate) struct Actor {
    pub client: LeaseClient,
    pub name: String,
    pub candidate: String,
    pub value: Option<String>,
    pub events: mpsc::UnboundedSender<ElectionEvent>,
    pub commands: mpsc::Receiver<Command>,
    pub leading: watch::Sender<bool>,
    pub term: watch::Sender<Option<Term>>,
    pub shutdown: CancellationToken,
}

enum Next {
    Lead(LeaseGuard),
    Exit,
}

impl Actor {
    pub async fn run(mut self) {
        let mut after_term = false;
        loop {
            let guard = match self.follow(after_term).await {
                Next::Lead(guard) => guard,
                Next::Exit => return,
            };
            if !self.lead(guard).await {
                return;
            }
            after_term = true;
        }
    }

    fn emit(&self, event: ElectionEvent) {
        debug!(election = %self.name, candidate = %self.candidate, ?event, "event");
        let _ = self.events.send(event);
    }

    /// Tries to take the lease every retry interval until it does, reporting other leaders.
    /// After a lost term it waits one (jittered) interval first, so a leader that just
    /// failed does not grab the lease back ahead of the others.
    async fn follow(&mut self, after_term: bool) -> Next {
        let mut delays = self.client.poll_delays();
        let mut last_seen: Option<Leader> = None;
        let mut wait_first = after_term;
        let mut highest_seen = None;
        loop {
            if std::mem::take(&mut wait_first)
                && let Some(next) = self.wait(&mut delays).await
            {
                return next;
            }
            // A plain read first: while someone else visibly holds the lease, no Paxos round.
            if let Some(leader) = self.held_by_another().await {
                if highest_seen.is_none_or(|term| leader.term >= term) {
                    highest_seen = Some(leader.term);
                    if last_seen.as_ref() != Some(&leader) {
                        last_seen = Some(leader.clone());
                        self.emit(ElectionEvent::LeaderChanged {
                            leader: Some(leader),
                        });
                    }
                }
                if let Some(next) = self.wait(&mut delays).await {
                    return next;
                }
                continue;
            }
            match self
                .client
                .try_acquire(&self.name, &self.candidate, self.value.as_deref())
                .await
            {
                Ok(TryAcquire::Acquired(lease)) => {
                    let guard = lease.keep_alive_with(self.leading.clone());
                    // Never hand out a term past its deadline: such a guard starts lost and
                    // is given back in the background (remembered for release on sight if
                    // that fails).
                    if guard.is_held() {
                        return Next::Lead(guard);
                    }
                    warn!(election = %self.name, "won a term after its deadline; not leading");
                }
                Ok(TryAcquire::Held(holder)) if holder.owner == self.candidate => {
                    // A claim under this candidate's name that this client does not know
                    // (another process using the same name, or an orphan forgotten after 64
                    // newer ones; the client releases the orphans it knows on sight): never
                    // report itself as another leader; it expires within its TTL.
                    warn!(election = %self.name, "a claim under this candidate's name holds the lease");
                }
                Ok(TryAcquire::Held(holder)) => {
                    let leader = Leader::from(holder);
                    highest_seen = highest_seen.max(Some(leader.term));
                    if last_seen.as_ref() != Some(&leader) {
                        last_seen = Some(leader.clone());
                        self.emit(ElectionEvent::LeaderChanged {
                            leader: Some(leader),
                        });
                    }
                }
                Err(error) => warn!(election = %self.name, %error, "campaign attempt failed"),
            }
            if let Some(next) = self.wait(&mut delays).await {
                return next;
            }
        }
    }

    /// The leader a plain read shows, if it is another candidate's live claim. `None` (free,
    /// this candidate's own or abandoned claim, or the read failed) means: send an LWT.
    async fn held_by_another(&self) -> Option<Leader> {
        match self.client.peek(&self.name).await {
            Ok(Some(holder))
                if holder.owner != self.candidate
                    && !self.client.is_abandoned(&holder.holder_id)
                    && !holder.expires_within.is_zero() =>
            {
                Some(Leader::from(holder))
            }
            Ok(_) => None,
            Err(error) => {
                debug!(election = %self.name, %error, "peek failed; trying the lease");
                None
            }
        }
    }

    /// Waits one poll delay while serving commands; `Some` when the campaign must end.
    async fn wait(
        &mut self,
        delays: &mut impl Iterator<Item = std::time::Duration>,
    ) -> Option<Next> {
        let delay = delays.next().unwrap_or(self.client.config().retry_period);
        let wake = tokio::time::Instant::now() + delay;
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => return Some(Next::Exit),
                command = self.commands.recv() => match command {
                    None | Some(Command::Abort) => return Some(Next::Exit),
                    Some(Command::Resign(reply)) => {
                        let _ = reply.send(Ok(()));
                        return Some(Next::Exit);
                    }
                    Some(Command::Proclaim(value, reply)) => {
                        // Not leading: keep the value for when this candidate wins.
                        self.value = value;
                        let _ = reply.send(Err(ElectionError::NotLeader));
                    }
                },
                _ = tokio::time::sleep_until(wake) => return None,
            }
        }
    }

    /// Leads until the term ends. Returns whether to campaign again.
    async fn lead(&mut self, guard: LeaseGuard) -> bool {
        // The term counter and the `is_leader` gauge, back to 0 whichever way the term ends.
        let _leading = cql_lease::metrics::Leading::start(self.name.as_str());
        let term = guard.token();
        let stop = guard.cancellation_token();
        let deadline = guard.deadline();
        self.term.send_replace(Some(Term {
            stop: stop.clone(),
            deadline: deadline.clone(),
        }));
        info!(election = %self.name, candidate = %self.candidate, %term, "elected");
        self.emit(ElectionEvent::Elected {
            term,
            value: self.value.clone(),
            must_stop_by: guard.must_stop_by(),
            deadline,
            stop,
        });
        let (reason, stopped_at) = loop {
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => {
                    let _ = guard.release().await;
                    self.term.send_replace(None);
                    return false;
                }
                _ = guard.lost() => break (
                    guard.loss_reason().as_ref().map_or(DeposeReason::Expired, DeposeReason::from),
                    guard.lost_at().unwrap_or_else(tokio::time::Instant::now),
                ),
                command = self.commands.recv() => match command {
                    None => {
                        let _ = guard.release().await;
                        self.term.send_replace(None);
                        return false;
                    }
                    Some(Command::Abort) => {
                        guard.abandon();
                        self.term.send_replace(None);
                        return false;
                    }
                    Some(Command::Resign(reply)) => {
                        let stopped_at = guard.stop_acting();
                        let released = guard.release().await.map_err(ElectionError::from);
                        self.term.send_replace(None);
                        info!(election = %self.name, candidate = %self.candidate, %term, "resigned");
                        self.emit(ElectionEvent::Deposed { term, reason: DeposeReason::Resigned, stopped_at });
                        let _ = reply.send(released);
                        return false;
                    }
                    Some(Command::Proclaim(value, reply)) => {
                        let result = guard.set_value(value.as_deref()).await;
                        if result.is_ok() {
                            self.value = value;
                        }
                        let _ = reply.send(result.map_err(ElectionError::from));
                    }
                },
            }
        };
        self.term.send_replace(None);
        // Released in the background; if that fails, the lease client remembers the claim
        // and the next poll that finds it releases it (it never passes for another leader).
        drop(guard);
        info!(election = %self.name, candidate = %self.candidate, %term, ?reason, "deposed");
        self.emit(ElectionEvent::Deposed {
            term,
            reason,
            stopped_at,
        });
        true
    }
}
