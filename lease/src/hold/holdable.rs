//! The [`Holdable`] trait, what a claim must offer for a [`Hold`](super::Hold) to keep it,
//! and the one per-request time budget ([`attempt_budget`]) renewals and plain-cell requests
//! share.

use std::time::Duration;

use async_trait::async_trait;

use super::HoldTiming;
use crate::error::StoreError;
use crate::store::CasOutcome;

/// One claim on the store that a [`Hold`](super::Hold) keeps alive. Object safe.
///
/// Every method is conditional on the claim's unique id, so it can be sent again after a lost
/// answer, and a read-back ([`Holdable::still_held`]) tells whether it applied.
#[async_trait]
pub trait Holdable: Send + Sync + 'static {
    /// A short description for logs, e.g. `lease "scheduler"`.
    fn describe(&self) -> String;

    /// What kind of claim it is, a metrics label (see [`crate::metrics::HELD`]): `lease` by
    /// default, `lock` for the plain-cell locks, `queue_claim` for a work-queue claim.
    fn kind(&self) -> &'static str {
        "lease"
    }

    /// Extends the claim if it is still this one's. One conditional write.
    ///
    /// # Errors
    /// The store's error; [`StoreError::Unknown`] when it may or may not have applied.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the outcome unknown; being conditional on the claim's id,
    /// it may be sent again and is settled by [`Holdable::still_held`].
    async fn renew(&self) -> Result<CasOutcome, StoreError>;

    /// Whether the store still holds this very claim (a linearizable read).
    ///
    /// # Errors
    /// The store's error when the read failed; nothing changed.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read.
    async fn still_held(&self) -> Result<bool, StoreError>;

    /// Ends the claim if it is still this one's. One conditional write.
    ///
    /// # Errors
    /// As [`Holdable::renew`].
    ///
    /// # Cancel safety
    /// As [`Holdable::renew`]; [`release_target`](super::release_target) settles it, and
    /// [`spawn_release`](super::spawn_release) runs it where nobody awaits it.
    async fn release(&self) -> Result<CasOutcome, StoreError>;

    /// Called once by [`release_target`](super::release_target) when a release has settled
    /// with the claim no longer this one's: applied (answered so, or read back as gone after
    /// a lost answer) or refused (an earlier send applied late, or the claim had ended some
    /// other way). For upkeep that must follow the end of the claim however the answer went
    /// (the work queue puts an item's index entry right). The default does nothing.
    ///
    /// # Cancel safety
    /// Runs inside the release; dropped with it, the upkeep may not happen.
    async fn released(&self) {}

    /// Called when this claim may be left in the store with nobody acting on it: a release
    /// that did not end `Ok`, an attempt dropped or given up before hand-over, an attempt
    /// whose answer was lost (a coordinator may still apply it after the read-back). An
    /// implementation remembers the claim's id so that its owner releases it when it next
    /// finds it, rather than taking it for another holder's (the lease client does). The
    /// default does nothing: the claim then waits for its TTL.
    fn orphaned(&self) {}

    /// Whether user code may have acted on this claim (its guard, job or term handed out),
    /// asked once when its [`Hold`](super::Hold) is lost at the deadline without a successful
    /// renewal. `true` (the default, the safe answer) delays the background release to when
    /// the store would let the claim lapse anyway (the deadline plus
    /// [`HoldTiming::ttl_margin`]), so a holder slow to obey the stop signals keeps that
    /// margin to itself; the release still frees a renewal that applied late. `false`
    /// releases at once, and must mean the claim is never handed out from then on (a queue
    /// claim still parked in its worker).
    fn handed_out(&self) -> bool {
        true
    }

    /// How long one renewal may take with `left` before the holder's deadline (which cuts
    /// it anyway). By default half of `left`, at least 50 ms, at most
    /// [`HoldTiming::request_timeout`]: a renewal is one request, given up with time to send
    /// it again. A claim whose renewal is several requests, each bounded and
    /// sent again on its own (the plain-cell locks), may take all of `left`.
    fn renewal_budget(&self, timing: &HoldTiming, left: Duration) -> Duration {
        attempt_budget(timing.request_timeout, left)
    }
}

/// Shortest time one request gets, however close its deadline: below this, attempts would
/// only pile up.
const MIN_ATTEMPT: Duration = Duration::from_millis(50);

/// How long one request may wait when its answer is useless after `left`: half of that (so
/// a request stuck on a frozen coordinator is given up with time to send it again, which
/// goes elsewhere), at least [`MIN_ATTEMPT`], at most `request_timeout`. Shared by the
/// renewals of every [`Hold`](super::Hold) and by every plain-cell request
/// ([`Durable`](crate::cells::durable::Durable)).
pub(crate) fn attempt_budget(request_timeout: Duration, left: Duration) -> Duration {
    request_timeout.min((left / 2).max(MIN_ATTEMPT))
}
