//! The waiter's side of a hand-over: posting its offer, taking the lease handed to it.

use std::sync::Arc;

use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{Answer, Granted, InLine, Posted, post};
use crate::client::{LeaseClient, new_holder_id};
use crate::hold::HoldTiming;
use crate::lease::Lease;
use crate::store::Claim;
use crate::target::LeaseTarget;
use crate::waiting_line::Ticket;

impl LeaseClient {
    /// Posts the offer of a waiter for `name` (stored as `key`) standing `in_line`: a fresh
    /// claim of its own, which a release in this process may hand the
    /// lease to.
    pub(crate) fn offer(
        &self,
        name: &str,
        key: &str,
        in_line: &InLine,
        owner: &str,
        value: Option<&str>,
    ) -> Option<Posted> {
        let holder_id = new_holder_id();
        let claim = Claim {
            name: key,
            holder_id: &holder_id,
            owner,
            value,
            ttl: self.config().store_ttl(),
        };
        let target = Arc::new(LeaseTarget::new(
            Arc::clone(self.store()),
            self.store_id(),
            name,
            claim,
            Arc::clone(self.orphans()),
        ));
        let timing = HoldTiming::from(self.config());
        post(in_line, target, timing)
    }

    /// The lease handed to `posted`, unless its deadline has passed (then it is given back
    /// in the background, and the waiter waits on).
    pub(crate) fn handed_over(&self, posted: &Posted, granted: Granted) -> Option<Lease> {
        let Some(guard) = granted.take_guard() else {
            debug!(lease = %posted.target.name, "the lease handed over was given back already");
            return None;
        };
        let (token, sent_at) = (granted.token, granted.sent_at);
        let must_stop_by = sent_at + self.config().renew_deadline();
        if Instant::now() >= must_stop_by {
            warn!(lease = %posted.target.name, "handed over after its deadline; giving it back");
            return None;
        }
        let target = Arc::clone(&posted.target);
        target.held_here(token);
        info!(lease = %target.name, owner = %target.owner, %token, "lease acquired (handed over)");
        let lease = Lease::new(self.clone(), target, token, must_stop_by);
        guard.disarm();
        Some(lease)
    }
}

impl LeaseClient {
    /// The lease handed to this waiter's offer, if it was. An offer answered otherwise is
    /// dropped, to be posted again.
    pub(crate) fn answered(
        &self,
        posted: &mut Option<Posted>,
        ticket: &mut Option<Ticket>,
    ) -> Option<Lease> {
        let answer = posted.as_mut()?.poll();
        let granted = match answer {
            Answer::Granted(granted) => granted,
            Answer::Declined => {
                *posted = None;
                return None;
            }
            Answer::Waiting => return None,
        };
        self.take_granted(posted, ticket, granted)
    }

    /// Takes the lease handed to `posted`, leaving the line; `None` (the offer dropped, the
    /// claim given back) when its deadline has passed.
    pub(crate) fn take_granted(
        &self,
        posted: &mut Option<Posted>,
        ticket: &mut Option<Ticket>,
        granted: Granted,
    ) -> Option<Lease> {
        let offer = posted.take()?;
        let lease = self.handed_over(&offer, granted)?;
        if let Some(ticket) = ticket.take() {
            ticket.leave();
        }
        Some(lease)
    }
}
