//! [`LeaseClient::acquire`]: waiting for a lease without a Paxos stampede.
//!
//! Waiters read; one proposes. A waiter joins the lease's waiting line (`waiting_line.rs`)
//! (one plain write), then looks with plain reads (the lease row and its place in line) and
//! sends an LWT only when the lease reads free and it stands first, so however many wait,
//! about one Paxos round runs per hand-over. Joining before proposing also keeps a crowd
//! that arrives at once in line. Where the store keeps no line
//! ([`LeaseStore::waiting_line`](crate::LeaseStore::waiting_line) is `None`), or the line
//! cannot be read, a waiter still reads before it proposes.
//!
//! Pace: the first two in line read about back to back while a hold is young and less often
//! the longer it lasts (an eighth of its age, at most `retry_period`); the others read
//! less often the further back they stand (three quarters of their place times the time one hand-over
//! took as they watched the line move, and at least an eighth of the hold's age, at most
//! `retry_period`). Liveness does not rest on the line: the waiter at place p proposes
//! too once the lease has read free for p × (`retry_period` + the request timeout), so
//! waiters ahead that crashed or stalled hold the line up that long, not a TTL; a claim
//! that the reads said free and the LWT found held pauses the next claims a few looks
//! (reads that lag the LWTs).
//!
//! Waiters of one process on one lease (the same store, given to any number of clients)
//! share their looks (`shared_looks.rs`): a look is the lease row and the head of its line,
//! read together; one serves every waiter that wants a newer look than its last, so a
//! crowd in one process reads about as much as its first two waiters. A release made in
//! the process wakes the first two at once, and the first claims without reading; behind
//! a holder of their own process, waiters wait for that wake instead of reading (every
//! `retry_period` at most, should the lease be lost without a release), and each posts an
//! offer: that holder's release hands the lease to the first of them in one LWT
//! (`hand_over.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, instrument, warn};

use crate::client::{LeaseClient, TryAcquire};
use crate::config::check_claim;
use crate::error::{InvalidArgument, LeaseError, StoreError};
use crate::hand_over::{Answer, InLine, Posted};
use crate::lease::Lease;
use crate::lock::MAX_LOCK_TIMEOUT;
use crate::shared_looks::Registry;
use crate::store::StoredLease;
use crate::waiting_line::Ticket;

#[path = "acquire_watch.rs"]
mod watch;
use watch::{TICK, Watch, place_in};

/// How many tickets a waiter reads to learn its place: places beyond are paced alike.
pub(crate) const PLACES_READ: usize = 32;

/// What one look at a lease read: the lease row, and the first tickets of its line (`None`
/// when it was not read: no line, or it failed).
#[derive(Debug)]
pub(crate) struct LeaseSeen {
    lease: Result<Option<StoredLease>, StoreError>,
    pub(crate) line: Option<Vec<String>>,
}

/// This process's waiters' looks at leases, shared by lease.
pub(crate) static LEASE_LOOKS: Registry<LeaseSeen> = Registry::new();

impl LeaseClient {
    /// Waits until `name` is acquired: for ever with `timeout` `None`, at most `timeout`
    /// otherwise (an attempt still under way then is dropped, which gives its claim back).
    /// `Some(Duration::ZERO)` is one attempt, [`LeaseClient::try_acquire`], answering a held
    /// lease with [`LeaseError::Timeout`] (as [`Lock::lock`](crate::lock::Lock::lock) does).
    /// That attempt waits for the store's answer (settling a lost one), so it may take
    /// longer than a short nonzero timeout, which cuts the wait at the deadline.
    ///
    /// Waiters wait with plain reads in a FIFO line (kept by the store, see
    /// [`LeaseStore::waiting_line`](crate::LeaseStore::waiting_line)) and only the first in
    /// line sends an LWT, when the lease reads free: many waiters cost about one Paxos
    /// round per hand-over, not one per waiter and poll, and they are served in arrival
    /// order (across processes, as far as their clocks agree). A waiter that crashed
    /// leaves the line within the TTL, and the waiter at place p proposes anyway once the
    /// lease has read free for p × (`retry_period` + the request timeout). The first two
    /// in line read back to back while a hold is young, less often as it ages (at most
    /// every `retry_period`); the others less often the further back they stand. Behind a
    /// holder in the same process, waiters read every `retry_period` only: its release
    /// wakes them, or hands the lease straight to the first of them in its one LWT (when no
    /// waiter of another process stands ahead in line; see [`LeaseStore::hand_over`](crate::LeaseStore::hand_over)).
    ///
    /// # Errors
    /// [`LeaseError::InvalidArgument`] before any store call (a bad name, owner or value, or
    /// a timeout over [`MAX_LOCK_TIMEOUT`](crate::lock::MAX_LOCK_TIMEOUT)); [`LeaseError::Timeout`] when
    /// `timeout` passes; a refusal ([`LeaseError::is_refusal`]), which ends it at once:
    /// [`LeaseError::Store`] when the store refuses the claim, [`LeaseError::OutcomeUnknown`]
    /// when it refuses the read-back of a claim whose answer was lost (that claim may have
    /// applied: it is released in the background and on sight). Other failures of single
    /// reads or attempts are logged and retried; with `Some(Duration::ZERO)`, the one attempt's
    /// errors are returned as [`LeaseClient::try_acquire`] returns them.
    ///
    /// # Cancel safety
    /// Cancel-safe: each attempt is [`LeaseClient::try_acquire`], which gives back a claim
    /// that was sent but not handed over, and a waiter dropped leaves the line (its ticket
    /// is deleted from a task of its own).
    #[instrument(skip(self, value))]
    pub async fn acquire(
        &self,
        name: &str,
        owner: &str,
        value: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Lease, LeaseError> {
        check_claim(self.namespace(), name, owner, value)?;
        if timeout.is_some_and(|timeout| timeout > MAX_LOCK_TIMEOUT) {
            return Err(InvalidArgument::Timing(format!(
                "the timeout must be at most {MAX_LOCK_TIMEOUT:?} (None waits for ever)"
            ))
            .into());
        }
        let key = self.namespace().stored_name(name);
        let started = Instant::now();
        if timeout == Some(Duration::ZERO) {
            return match self.try_acquire(name, owner, value).await? {
                TryAcquire::Acquired(lease) => Ok(lease),
                TryAcquire::Held(holder) => Err(LeaseError::Timeout {
                    name: name.to_owned(),
                    waited: started.elapsed(),
                    last_holder: Some(Box::new(holder)),
                }),
            };
        }
        let hand_over = self.line().and_then(|line| line.hand_over(&key));
        let mut watch = Watch::new(self.config().retry_period, hand_over);
        let waiting = self.wait_and_acquire(name, &key, owner, value, &mut watch);
        let outcome = match timeout {
            Some(timeout) => tokio::time::timeout_at(started + timeout, waiting)
                .await
                .ok(),
            None => Some(waiting.await),
        };
        outcome.unwrap_or_else(|| {
            Err(LeaseError::Timeout {
                name: name.to_owned(),
                waited: started.elapsed(),
                last_holder: watch.last_holder.take(),
            })
        })
    }

    /// Waits in the line of the row `key` (the lease its user calls `name`), then claims.
    async fn wait_and_acquire(
        &self,
        name: &str,
        key: &str,
        owner: &str,
        value: Option<&str>,
        watch: &mut Watch,
    ) -> Result<Lease, LeaseError> {
        let retry = self.config().retry_period;
        let patience = retry + self.config().effective_request_timeout();
        let line = self.line().cloned();
        let shared = LEASE_LOOKS.of(self.store_id(), key);
        let mut ticket: Option<Ticket> = None;
        let mut first_look = true;
        // Only looks sent after this: after joining, so that they see our ticket.
        let mut seen: Option<Instant> = None;
        // Our place at the last look, and whether a release of this process since then lets
        // the first in line claim without looking again.
        let mut last_place: Option<usize> = None;
        let mut woken_by_release = false;
        // How long this waiter last paused between looks.
        let mut paused = Duration::ZERO;
        // This waiter's offer to take the lease from a holder of this process in one LWT,
        // while it stands in line (declared after `in_line`, so it is dropped first).
        let mut in_line: Option<InLine> = None;
        let mut posted: Option<Posted> = None;
        // A hand-over under way answers within one request (the store call is bounded).
        let answer_within = self.config().effective_request_timeout() + retry;
        // A look's reads are bounded by one request timeout each, sent together: one under
        // way longer than twice that is not being polled (see `shared_looks`).
        let look_patience = self.config().effective_request_timeout() * 2;
        loop {
            // Everybody joins first, so that a crowd arriving at once stands in line too
            // instead of proposing together. A line that cannot be joined is waited without.
            if let (Some(line), None) = (&line, &ticket) {
                let give_up_at = Instant::now() + self.config().resolve_timeout;
                let stand = |cell: &str| InLine::new(self.store_id(), key, cell);
                match line.join(key, give_up_at, stand).await {
                    Ok((joined, standing)) => {
                        in_line = Some(standing);
                        ticket = Some(joined);
                        seen = Some(Instant::now());
                    }
                    Err(error) => {
                        warn!(lease = name, %error, "joining the waiting line failed; waiting without it");
                    }
                }
            }
            let released_free = woken_by_release && last_place == Some(0);
            let (free, place) = if released_free {
                // This process just released it: as good as a look saying free, now.
                let now = Instant::now();
                seen = Some(now);
                watch.saw_lease(self, None, now);
                (true, 0)
            } else {
                // The lease and the head of its line, read together, shared with this
                // process's other waiters. The first in line, alone here, reads the lease only.
                let lease_only = watch.first && Arc::strong_count(&shared) == 1;
                // The first two take no look older than half their last pause (or one look's
                // time): they propose next, and an old look could make them sleep past a free
                // lease twice over.
                let floor = (last_place.is_some_and(|place| place <= 1))
                    .then(|| {
                        let recent = Instant::now().checked_sub(watch.look.max(paused / 2));
                        // Nor one sent before a release here: the lease changed since.
                        recent.max(shared.last_release())
                    })
                    .flatten();
                let after = seen.max(floor);
                let look = shared
                    .look(after, look_patience, async || {
                        // One attempt at the line: a slow one must not hold up the lease's
                        // read, which the first in line waits for.
                        let line_until = Instant::now() + self.config().effective_request_timeout();
                        let tickets = async {
                            let line = line.as_ref().filter(|_| !lease_only)?;
                            line.first_tickets(key, PLACES_READ, line_until)
                                .await
                                .map_err(|error| {
                                    warn!(lease = name, %error, "reading the waiting line failed");
                                })
                                .ok()
                        };
                        let (line, lease) =
                            futures::future::join(tickets, self.store().peek(key)).await;
                        LeaseSeen { lease, line }
                    })
                    .await;
                seen = Some(look.sent);
                let now = Instant::now();
                watch.looked(look.took, std::mem::take(&mut first_look));
                let lease = match &look.seen.lease {
                    Ok(lease) => lease.clone(),
                    Err(error) if is_final(error) => {
                        return Err(LeaseError::store(name, error.clone()));
                    }
                    Err(error) => {
                        warn!(lease = name, %error, "reading the lease failed; will retry");
                        tokio::time::sleep(self.poll_delays().next().unwrap_or(retry)).await;
                        continue;
                    }
                };
                let free = watch.saw_lease(self, lease, now);
                // Without a line (none kept, or unreadable now) a waiter counts as second.
                let place = match (&ticket, &look.seen.line) {
                    (None, _) if line.is_none() => 0,
                    (Some(_), _) if watch.first => 0,
                    (Some(ticket), Some(tickets)) => {
                        // By order, not by finding our cell: a ticket that sorts before where
                        // the shared read started (a hint moved past it) stands first, as the
                        // line orders it; one after every ticket read stands that far back.
                        let place = place_in(tickets, ticket.cell());
                        watch.saw_place(place, now);
                        if let (Some(line), Some(hand_over)) = (&line, watch.hand_over) {
                            line.set_hand_over(key, hand_over);
                        }
                        place
                    }
                    _ => 1,
                };
                (free, place)
            };
            last_place = Some(place);
            woken_by_release = false;
            if let Some(lease) = self.answered(&mut posted, &mut ticket) {
                return Ok(lease);
            }
            if let Some(ticket) = ticket.as_mut() {
                ticket
                    .keep_fresh(Instant::now() + self.config().resolve_timeout)
                    .await;
            }
            let now = Instant::now();
            if free && watch.may_propose(place, patience, now) {
                debug!(lease = name, place, "the lease reads free; proposing");
                // The offer is withdrawn while this waiter proposes itself; one a release
                // took already is answered within one request: awaited instead.
                if let Some(offer) = posted.as_mut()
                    && !offer.withdraw()
                    && let Ok(Answer::Granted(granted)) =
                        tokio::time::timeout(answer_within, offer.answer()).await
                    && let Some(lease) = self.take_granted(&mut posted, &mut ticket, granted)
                {
                    return Ok(lease);
                }
                posted = None;
                match self.try_acquire(name, owner, value).await {
                    Ok(TryAcquire::Acquired(lease)) => {
                        if let Some(ticket) = ticket.take() {
                            ticket.leave();
                        }
                        return Ok(lease);
                    }
                    Ok(TryAcquire::Held(holder)) => watch.refused(self, holder, Instant::now()),
                    Err(LeaseError::InvalidArgument(e)) => return Err(e.into()),
                    // Refused, the claim or the read-back of its lost answer: no retry can
                    // change that (a claim that may have applied is given back).
                    Err(error) if error.is_refusal() => return Err(error),
                    Err(error) => {
                        warn!(lease = name, %error, "acquire attempt failed; will retry");
                        tokio::time::sleep(self.poll_delays().next().unwrap_or(retry)).await;
                        continue;
                    }
                }
            }
            if let (Some(in_line), None) = (&in_line, &posted) {
                posted = self.offer(name, key, in_line, owner, value);
            }
            let mut delay = watch.delay(place, retry, Instant::now());
            // Behind a holder of this process, waiters wait for its release to wake them
            // (reading every `retry_period` should it be lost without one).
            let behind_here = !free
                && watch
                    .last_holder
                    .as_ref()
                    .is_some_and(|holder| shared.held_here(&holder.holder_id));
            if behind_here {
                delay = delay.max(retry);
            }
            paused = delay;
            // A release by this process ends the first two's wait at once.
            let released = shared.release_seen();
            tokio::pin!(released);
            released.as_mut().enable();
            if place <= 1
                && shared
                    .last_release()
                    .is_some_and(|at| seen.is_some_and(|seen| at > seen))
            {
                woken_by_release = true;
                continue;
            }
            // The timer's tick is a millisecond: a shorter wait is a yield, after a look
            // that took time. A look that took none (a store in this process, paused time)
            // would make that a busy loop, and a paused clock would never move.
            if delay < TICK && watch.look >= Duration::from_micros(20) {
                tokio::task::yield_now().await;
                continue;
            }
            let answer = async {
                match posted.as_mut() {
                    Some(posted) => posted.answer().await,
                    None => std::future::pending().await,
                }
            };
            let wake = place <= 1 || behind_here;
            let answer = tokio::select! {
                // A hand-over first; a release that lands with the timer wins: it saves a look.
                biased;
                answer = answer => Some(answer),
                () = released, if wake => {
                    woken_by_release = true;
                    None
                }
                () = tokio::time::sleep(delay.max(TICK)) => None,
            };
            // A hand-over under way answers within one request: better than a look.
            let answer = match (answer, posted.as_mut()) {
                (None, Some(offer)) if offer.taken() => {
                    tokio::time::timeout(answer_within, offer.answer())
                        .await
                        .ok()
                }
                (answer, _) => answer,
            };
            match answer {
                Some(Answer::Granted(granted)) => {
                    if let Some(lease) = self.take_granted(&mut posted, &mut ticket, granted) {
                        return Ok(lease);
                    }
                }
                Some(_) => posted = None,
                None => {}
            }
        }
    }
}

/// A store error that cannot be retried (a missing table, a refused request) ends the wait.
fn is_final(error: &StoreError) -> bool {
    matches!(error, StoreError::Rejected(_))
}
