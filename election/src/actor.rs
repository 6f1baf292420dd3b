//! The task behind a campaign: follow, lead, and report.

use cql_lease::{LeaseClient, LeaseGuard, TryAcquire};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

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
    pub term_token: watch::Sender<Option<CancellationToken>>,
    pub shutdown: CancellationToken,
}

enum Next {
    Lead(LeaseGuard),
    Exit,
}

impl Actor {
    pub async fn run(mut self) {
        loop {
            let guard = match self.follow().await {
                Next::Lead(guard) => guard,
                Next::Exit => return,
            };
            if !self.lead(guard).await {
                return;
            }
        }
    }

    fn emit(&self, event: ElectionEvent) {
        debug!(election = %self.name, candidate = %self.candidate, ?event, "event");
        let _ = self.events.send(event);
    }

    /// Tries to take the lease every retry interval until it does, reporting other leaders.
    async fn follow(&mut self) -> Next {
        let mut delays = self.client.poll_delays();
        let mut last_seen: Option<Leader> = None;
        loop {
            match self
                .client
                .try_acquire(&self.name, &self.candidate, self.value.as_deref())
                .await
            {
                Ok(TryAcquire::Acquired(lease)) => {
                    return Next::Lead(lease.keep_alive_with(self.leading.clone()));
                }
                Ok(TryAcquire::Held(holder)) => {
                    let leader = Leader::from(holder);
                    if last_seen.as_ref() != Some(&leader) {
                        last_seen = Some(leader.clone());
                        self.emit(ElectionEvent::LeaderChanged {
                            leader: Some(leader),
                        });
                    }
                }
                Err(error) => warn!(election = %self.name, %error, "campaign attempt failed"),
            }
            let delay = delays.next().unwrap_or(self.client.config().retry_interval);
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => return Next::Exit,
                command = self.commands.recv() => match command {
                    None | Some(Command::Abort) => return Next::Exit,
                    Some(Command::Resign(reply)) => {
                        let _ = reply.send(Ok(()));
                        return Next::Exit;
                    }
                    Some(Command::Proclaim(value, reply)) => {
                        // Not leading: keep the value for when this candidate wins.
                        self.value = value;
                        let _ = reply.send(Err(ElectionError::NotLeader));
                    }
                },
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Leads until the term ends. Returns whether to campaign again.
    async fn lead(&mut self, guard: LeaseGuard) -> bool {
        let term = guard.token();
        let stop = guard.cancellation_token();
        self.term_token.send_replace(Some(stop.clone()));
        info!(election = %self.name, candidate = %self.candidate, %term, "elected");
        self.emit(ElectionEvent::Elected {
            term,
            value: self.value.clone(),
            must_stop_by: guard.must_stop_by(),
            stop,
        });
        let (reason, stopped_at) = loop {
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => {
                    let _ = guard.release().await;
                    self.term_token.send_replace(None);
                    return false;
                }
                _ = guard.lost() => break (
                    guard.loss_reason().as_ref().map_or(DeposeReason::Expired, DeposeReason::from),
                    guard.lost_at().unwrap_or_else(tokio::time::Instant::now),
                ),
                command = self.commands.recv() => match command {
                    None => {
                        let _ = guard.release().await;
                        self.term_token.send_replace(None);
                        return false;
                    }
                    Some(Command::Abort) => {
                        guard.abandon();
                        self.term_token.send_replace(None);
                        return false;
                    }
                    Some(Command::Resign(reply)) => {
                        let stopped_at = guard.stop_acting();
                        let released = guard.release().await.map_err(ElectionError::from);
                        self.term_token.send_replace(None);
                        info!(election = %self.name, candidate = %self.candidate, %term, "resigned");
                        self.emit(ElectionEvent::Deposed { term, reason: DeposeReason::Resigned, stopped_at });
                        let _ = reply.send(released);
                        return false;
                    }
                    Some(Command::Proclaim(value, reply)) => {
                        let result = guard.set_value(value.clone()).await;
                        if result.is_ok() {
                            self.value = value;
                        }
                        let _ = reply.send(result.map_err(ElectionError::from));
                    }
                },
            }
        };
        self.term_token.send_replace(None);
        info!(election = %self.name, candidate = %self.candidate, %term, ?reason, "deposed");
        self.emit(ElectionEvent::Deposed {
            term,
            reason,
            stopped_at,
        });
        true
    }
}
