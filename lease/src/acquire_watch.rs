//! What a waiter of [`LeaseClient::acquire`] has seen of the lease and its line, and the
//! pace of its looks that follows from it.

use std::time::Duration;

use tokio::time::Instant;

use super::PLACES_READ;
use crate::client::LeaseClient;
use crate::store::StoredLease;

/// The timer's resolution.
pub(super) const TICK: Duration = Duration::from_millis(1);

/// What a waiter has seen so far.
pub(super) struct Watch {
    /// The holder seen last (reported with a timeout).
    pub(super) last_holder: Option<Box<StoredLease>>,
    /// The current holder's id and when this waiter first saw it.
    pub(super) holder_since: Option<(String, Instant)>,
    /// Since when the lease has read free, if it does.
    pub(super) free_since: Option<Instant>,
    /// The last place read and when.
    pub(super) last_place: Option<(usize, Instant)>,
    /// Estimated time between hand-overs, from the line moving (until it moved: three
    /// looks' time, a release, a look and a claim).
    pub(super) hand_over: Option<Duration>,
    /// How long a look (the reads together) took, smoothed.
    pub(super) look: Duration,
    /// Known to stand first (nobody joins ahead but through clock skew: read no more).
    pub(super) first: bool,
    /// The lease reads as an abandoned claim of this client (any place may give it back).
    pub(super) own_orphan: bool,
    /// A claim of ours was refused while the lease read free: no new one before this (the
    /// plain reads lag the LWTs, e.g. at a level that does not overlap their commits).
    pub(super) cool_until: Option<Instant>,
}

impl Watch {
    pub(super) fn new(retry_interval: Duration, hand_over: Option<Duration>) -> Self {
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
    pub(super) fn saw_lease(
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
    pub(super) fn may_propose(&self, place: usize, patience: Duration, now: Instant) -> bool {
        if self.cool_until.is_some_and(|until| now < until) {
            return false;
        }
        let free_for = self.free_since.map_or(Duration::ZERO, |since| now - since);
        self.own_orphan
            || place == 0
            || free_for >= patience * u32::try_from(place).unwrap_or(u32::MAX)
    }

    /// Our claim found `holder`.
    pub(super) fn refused(&mut self, client: &LeaseClient, holder: StoredLease, now: Instant) {
        let seen = self.free_since.is_some();
        self.saw_lease(client, Some(holder), now);
        if seen {
            // The read said free and the claim said held: reads lag; pace the claims.
            self.cool_until = Some(now + self.look.max(TICK) * 8);
        }
    }

    pub(super) fn looked(&mut self, took: Duration, first_look: bool) {
        self.look = if first_look {
            took
        } else {
            (self.look * 3 + took) / 4
        };
    }

    pub(super) fn saw_place(&mut self, place: usize, now: Instant) {
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
    pub(super) fn delay(&self, place: usize, retry_interval: Duration, now: Instant) -> Duration {
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

/// The place of the ticket `mine` in a line whose first tickets (at most [`PLACES_READ`])
/// are `tickets`: counted by order, not by finding the ticket, so a ticket that sorts before
/// where the read started (a hint moved past it) stands first, as the line orders it; one
/// after every ticket read stands that far back, `PLACES_READ` meaning "at least".
pub(super) fn place_in(tickets: &[String], mine: &str) -> usize {
    let ahead = tickets.partition_point(|cell| cell.as_str() < mine);
    if ahead == tickets.len() && ahead >= PLACES_READ {
        PLACES_READ
    } else {
        ahead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tickets(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    /// A ticket that sorts before every ticket read (the read started at a head hint that
    /// had moved past it) stands first, as the line orders it, not last.
    #[test]
    fn a_ticket_before_where_the_read_started_stands_first() {
        assert_eq!(place_in(&tickets(&["b", "c", "d"]), "a"), 0);
    }

    /// A ticket among those read stands where it sorts; one after them all, that far back.
    #[test]
    fn a_ticket_stands_where_it_sorts_among_those_read() {
        let read = tickets(&["b", "c", "d"]);
        assert_eq!(place_in(&read, "b"), 0);
        assert_eq!(place_in(&read, "d"), 2);
        assert_eq!(place_in(&read, "e"), 3);
    }

    /// A ticket after a full read of [`PLACES_READ`] tickets stands at least that far back.
    #[test]
    fn a_ticket_after_a_full_read_stands_at_least_that_far_back() {
        let read: Vec<String> = (0..PLACES_READ).map(|i| format!("{i:04}")).collect();
        assert_eq!(place_in(&read, "9999"), PLACES_READ);
    }
}
