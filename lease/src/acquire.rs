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
//! the process wakes the first two at once, and the first claims without reading.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, instrument, warn};

use crate::client::{LeaseClient, TryAcquire};
use crate::config::check_claim;
use crate::error::{LeaseError, StoreError};
use crate::lease::Lease;
use crate::shared_looks::{Look, SharedLooks};
use crate::store::StoredLease;
use crate::waiting_line::Ticket;

/// The timer's resolution.
const TICK: Duration = Duration::from_millis(1);

/// How many tickets a waiter reads to learn its place: places beyond are paced alike.
const PLACES_READ: usize = 32;

/// What a waiter has seen so far.
struct Watch {
    /// The holder seen last (reported with a timeout).
    last_holder: Option<Box<StoredLease>>,
    /// The current holder's id and when this waiter first saw it.
    holder_since: Option<(String, Instant)>,
    /// Since when the lease has read free, if it does.
    free_since: Option<Instant>,
    /// The last place read and when.
    last_place: Option<(usize, Instant)>,
    /// Estimated time between hand-overs, from the line moving (until it moved: three
    /// looks' time, a release, a look and a claim).
    hand_over: Option<Duration>,
    /// How long a look (the reads together) took, smoothed.
    look: Duration,
    /// Known to stand first (nobody joins ahead but through clock skew: read no more).
    first: bool,
    /// The lease reads as an abandoned claim of this client (any place may give it back).
    own_orphan: bool,
    /// A claim of ours was refused while the lease read free: no new one before this (the
    /// plain reads lag the LWTs, e.g. at a level that does not overlap their commits).
    cool_until: Option<Instant>,
}

impl Watch {
    fn new(retry_interval: Duration, hand_over: Option<Duration>) -> Self {
        // A first guess only: replaced by the first look's time.
        Watch {
            last_holder: None,
            holder_since: None,
            free_since: None,
            last_place: None,
            hand_over,
            look: retry_interval / 16,
            first: false,
            own_orphan: false,
            cool_until: None,
        }
    }

    /// Records a read of the lease; whether it reads free (no holder, or an abandoned claim
    /// of this client, which `try_acquire` releases).
    fn saw_lease(
        &mut self,
        client: &LeaseClient,
        lease: Option<StoredLease>,
        now: Instant,
    ) -> bool {
        self.own_orphan = lease
            .as_ref()
            .is_some_and(|holder| client.is_abandoned(&holder.holder_id));
        match lease {
            Some(holder) if !self.own_orphan => {
                self.free_since = None;
                if self.holder_since.as_ref().map(|(id, _)| id) != Some(&holder.holder_id) {
                    self.holder_since = Some((holder.holder_id.clone(), now));
                }
                self.last_holder = Some(Box::new(holder));
                false
            }
            _ => {
                self.holder_since = None;
                self.free_since.get_or_insert(now);
                true
            }
        }
    }

    /// Whether a waiter at `place` proposes now that the lease reads free: the first in
    /// line at once; the one at place p once it has read free for p × `patience` (the
    /// ones ahead crashed or stalled; `patience` covers a claim still under way, contended
    /// rounds backing off included); anyone to give back an abandoned claim of its own
    /// client.
    fn may_propose(&self, place: usize, patience: Duration, now: Instant) -> bool {
        if self.cool_until.is_some_and(|until| now < until) {
            return false;
        }
        let free_for = self.free_since.map_or(Duration::ZERO, |since| now - since);
        self.own_orphan
            || place == 0
            || free_for >= patience * u32::try_from(place).unwrap_or(u32::MAX)
    }

    /// Our claim found `holder`.
    fn refused(&mut self, client: &LeaseClient, holder: StoredLease, now: Instant) {
        let seen = self.free_since.is_some();
        self.saw_lease(client, Some(holder), now);
        if seen {
            // The read said free and the claim said held: reads lag; pace the claims.
            self.cool_until = Some(now + self.look.max(TICK) * 8);
        }
    }

    fn looked(&mut self, took: Duration, first_look: bool) {
        self.look = if first_look {
            took
        } else {
            (self.look * 3 + took) / 4
        };
    }

    fn saw_place(&mut self, place: usize, now: Instant) {
        // Only places read exactly: `PLACES_READ` stands for "that far back or more".
        if let Some((before, at)) = self.last_place
            && place < before
            && before < PLACES_READ
        {
            let per = (now - at) / u32::try_from(before - place).unwrap_or(u32::MAX);
            // Smoothed: one long wait (a slow holder) should not stall the whole line.
            self.hand_over = Some(self.hand_over.map_or(per, |h| (h * 3 + per) / 4));
        }
        if self.last_place.is_none_or(|(before, _)| place != before) {
            self.last_place = Some((place, now));
        }
        self.first |= place == 0;
    }

    /// How long to wait before the next look, at `place`.
    fn delay(&self, place: usize, retry_interval: Duration, now: Instant) -> Duration {
        // A long hold is polled less often, wherever one stands.
        let aged = self
            .holder_since
            .as_ref()
            .map_or(Duration::ZERO, |(_, since)| (now - *since) / 8);
        let delay = if place <= 1 {
            aged
        } else {
            // Three quarters of the expected time to reach the second place: early rather
            // than late, as the line stalls while its next waiter sleeps, but not so often
            // that the reads of the many slow the few that propose.
            let hand_over = self.hand_over.unwrap_or(self.look * 3).max(self.look);
            (hand_over * u32::try_from(place - 1).unwrap_or(u32::MAX) * 3 / 4).max(aged)
        };
        delay.min(retry_interval)
    }
}

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
    /// every `retry_period`); the others less often the further back they stand.
    ///
    /// # Errors
    /// [`LeaseError::InvalidArgument`] before any store call; [`LeaseError::Timeout`] when
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
        let shared = SharedLooks::of(self.store_id(), key);
        let mut ticket: Option<Ticket> = None;
        let mut first_look = true;
        // Only looks sent after this: after joining, so that they see our ticket.
        let mut seen: Option<Instant> = None;
        // Our place at the last look, and whether a release of this process since then lets
        // the first in line claim without looking again.
        let mut last_place: Option<usize> = None;
        let mut woken_by_release = false;
        loop {
            let reads_until = Instant::now() + self.config().resolve_timeout;
            // Everybody joins first, so that a crowd arriving at once stands in line too
            // instead of proposing together. A line that cannot be joined is waited without.
            if let (Some(line), None) = (&line, &ticket) {
                match line.join(key, reads_until).await {
                    Ok(joined) => {
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
                let look = shared
                    .look(seen, async || {
                        let sent = Instant::now();
                        let tickets = async {
                            let line = line.as_ref().filter(|_| !lease_only)?;
                            line.first_tickets(key, PLACES_READ, reads_until)
                                .await
                                .map_err(|error| {
                                    warn!(lease = name, %error, "reading the waiting line failed");
                                })
                                .ok()
                        };
                        let (line, lease) =
                            futures::future::join(tickets, self.store().peek(key)).await;
                        Look {
                            sent,
                            took: sent.elapsed(),
                            lease,
                            line,
                        }
                    })
                    .await;
                seen = Some(look.sent);
                let now = Instant::now();
                watch.looked(look.took, std::mem::take(&mut first_look));
                let lease = match &look.lease {
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
                let place = match (&ticket, &look.line) {
                    (None, _) if line.is_none() => 0,
                    (Some(_), _) if watch.first => 0,
                    (Some(ticket), Some(tickets)) => {
                        // By order, not by finding our cell: a ticket that sorts before where
                        // the shared read started (a hint moved past it) stands first, as the
                        // line orders it; one after every ticket read stands that far back.
                        let ahead = tickets.partition_point(|cell| cell.as_str() < ticket.cell());
                        let place = if ahead == tickets.len() && ahead >= PLACES_READ {
                            PLACES_READ
                        } else {
                            ahead
                        };
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
            if let Some(ticket) = ticket.as_mut() {
                ticket.keep_fresh(reads_until).await;
            }
            let now = Instant::now();
            if free && watch.may_propose(place, patience, now) {
                debug!(lease = name, place, "the lease reads free; proposing");
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
            let delay = watch.delay(place, retry, Instant::now());
            // A release by this process ends the first two's wait at once.
            let released = shared.release_seen();
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
            } else if place <= 1 {
                tokio::select! {
                    () = tokio::time::sleep(delay.max(TICK)) => {}
                    () = released => woken_by_release = true,
                }
            } else {
                tokio::time::sleep(delay.max(TICK)).await;
            }
        }
    }
}

/// A store error that cannot be retried (a missing table, a refused request) ends the wait.
fn is_final(error: &StoreError) -> bool {
    matches!(error, StoreError::Rejected(_))
}
