//! Reading an item in the bakery mode: its plain row and its live tickets together, and
//! which ticket (if any) is its claim.

use cql_lease::StoreError;

use super::{BakeryStore, lock_error, ticket_name};
use crate::item::{ItemKey, JobState, StoredItem};

impl BakeryStore {
    /// The row and the live tickets, read together. A ticket is the row's `claim` once its
    /// number is recorded; with `draws`, a draw still under way counts too (see `peek`).
    pub(super) async fn current(
        &self,
        key: &ItemKey,
        draws: bool,
    ) -> Result<Option<(StoredItem, i64)>, StoreError> {
        let name = ticket_name(key);
        let (row, tickets) = futures::try_join!(self.items.read_item(key), async {
            self.bakery.tickets(&name).await.map_err(lock_error)
        })?;
        Ok(row.map(|(mut item, ts)| {
            // The row's attempt is the last one finished (or given back): a ticket at or
            // below it is a claim that is over, whatever its cells still say.
            let finished = i64::from(item.attempt);
            item.attempt = item
                .attempt
                .max(i32::try_from(tickets.high_water).unwrap_or(i32::MAX));
            // A ticket is a claim once its number is recorded (a draw still under way, or a
            // winner whose mark never landed, is not): a claim's read-back relies on it.
            // Only the last recorded number can be held (a later draw is beaten while it
            // lives): a lower live ticket is a leftover whose withdrawal failed. Nor is a
            // ticket this process gave up: its give-back may still be on the wire (a claim
            // cut while giving back is read back here), and would land under the job.
            let recorded = tickets.live.iter().find(|(id, number)| {
                finished < *number
                    && *number == tickets.high_water
                    && !self.held.is_given_up(id, *number)
            });
            if let Some((id, number)) = recorded {
                self.held.recorded(id, *number);
            }
            // With `draws` (a candidate's peek), any live ticket keeps the item from a new
            // draw, the recorded holder named first: the draw would step aside from it (a
            // finished claim's leftover included) until it goes.
            let claim = match recorded {
                None if draws => tickets.live.first(),
                recorded => recorded,
            };
            item.claim = claim.map(|(id, _)| id.clone());
            if item.claim.is_some() && item.state.is_claimable() {
                item.state = JobState::Running;
            }
            (item, ts)
        }))
    }
}
