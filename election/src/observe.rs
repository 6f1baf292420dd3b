//! Watching the leader without campaigning.

use std::pin::Pin;
use std::task::{Context, Poll};

use cql_lease::{FencingToken, LeaseClient};
use futures::Stream;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::debug;

use crate::event::Leader;

/// A stream of leader changes: the current leader first (or `None`), then each change, in
/// term order and without duplicates. It polls every retry interval (jittered) with one
/// plain read at the regular consistency level ([`cql_lease::LeaseClient::peek`]): no Paxos
/// round, so observers do not contend with the leader's renewals. A leader whose whole term
/// fits between two polls can be missed, and a change is seen once its commit reached the
/// replicas read (at once with the default `QUORUM`). Use [`crate::Election::leader`] for a
/// linearizable answer.
pub struct Observer {
    changes: mpsc::UnboundedReceiver<Option<Leader>>,
    _stop: DropGuard,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").finish_non_exhaustive()
    }
}

impl Observer {
    pub(crate) fn start(client: LeaseClient, name: String) -> Self {
        let (tx, changes) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let cancelled = stop.clone();
        tokio::spawn(async move {
            let mut delays = client.poll_delays();
            // (holder's term, present) last reported; never go back to an older term.
            let mut last: Option<Option<Leader>> = None;
            let mut highest = FencingToken::new(i64::MIN);
            loop {
                match client.peek(&name).await {
                    Ok(holder) => {
                        let leader = holder.map(Leader::from);
                        let older = leader.as_ref().is_some_and(|l| l.term < highest);
                        if !older && last.as_ref() != Some(&leader) {
                            if let Some(l) = &leader {
                                highest = l.term;
                            }
                            debug!(election = %name, ?leader, "leader changed");
                            if tx.send(leader.clone()).is_err() {
                                return;
                            }
                            last = Some(leader);
                        }
                    }
                    Err(error) => debug!(election = %name, %error, "observer read failed"),
                }
                let delay = delays.next().unwrap_or(client.config().retry_period);
                tokio::select! {
                    _ = cancelled.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        });
        Observer {
            changes,
            _stop: stop.drop_guard(),
        }
    }
}

impl Stream for Observer {
    type Item = Option<Leader>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Option<Leader>>> {
        self.changes.poll_recv(cx)
    }
}
