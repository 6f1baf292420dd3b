//! The [plain-cell](super) contender as the [hold](crate::hold) machine sees it: renewal
//! rewrites every cell, release deletes them all.

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tracing::debug;

use super::{Cells, Owned};
use crate::cells::ClientClock;
use crate::error::StoreError;
use crate::hold::{HoldTiming, Holdable};
use crate::store::CasOutcome;

#[async_trait]
impl Holdable for Cells {
    fn describe(&self) -> String {
        format!("lock {:?} ({})", self.lock, self.id())
    }

    fn kind(&self) -> &'static str {
        "lock"
    }

    async fn renew(&self) -> Result<CasOutcome, StoreError> {
        self.rewrite_all().await.map(|()| CasOutcome::Applied)
    }

    /// A renewal is one write per cell, each bounded and sent again on its own until the
    /// cell's validity runs out: cutting the whole renewal earlier would only start the
    /// cells over with fresh timestamps.
    fn renewal_budget(&self, _timing: &HoldTiming, left: Duration) -> Duration {
        left
    }

    /// While held: every owned cell is still in the store (one gone means the lock may be
    /// lost). Once a release began: *some* cell whose delete was not confirmed still stands
    /// (only those stay owned), so the release is sent again rather than taken for done.
    async fn still_held(&self) -> Result<bool, StoreError> {
        let owned: Vec<Owned> = self.owned.lock().map(|o| o.clone()).unwrap_or_default();
        if owned.is_empty() {
            return Ok(false);
        }
        let give_up_at = Instant::now() + self.options.timing.effective_request_timeout();
        let reads = owned
            .iter()
            .map(|o| self.durable.read_cell(self.at(o.row, &o.cell), give_up_at));
        let mut present = Vec::new();
        for found in futures::future::join_all(reads).await {
            present.push(found?.is_some());
        }
        Ok(if self.releasing.load(Ordering::Relaxed) {
            present.iter().any(|p| *p)
        } else {
            present.iter().all(|p| *p)
        })
    }

    async fn release(&self) -> Result<CasOutcome, StoreError> {
        self.releasing.store(true, Ordering::Relaxed);
        let owned: Vec<Owned> = self.owned.lock().map(|o| o.clone()).unwrap_or_default();
        let timestamp = ClientClock::next();
        let give_up_at = Instant::now() + self.options.timing.effective_request_timeout();
        // All at once: a hand-over waits for the last of them. Each is sent again (same
        // timestamp) until confirmed or its time is up.
        let deletes = owned.iter().map(|o| {
            self.durable
                .delete(self.at(o.row, &o.cell), timestamp, give_up_at)
        });
        let results = futures::future::join_all(deletes).await;
        let mut failed = None;
        if let Ok(mut left) = self.owned.lock() {
            for (o, result) in owned.iter().zip(results) {
                match result {
                    Ok(()) => {
                        left.retain(|x| !(x.row == o.row && x.cell == o.cell));
                        self.main_changed(o.row, false);
                    }
                    Err(error) => {
                        debug!(lock = %self.lock, cell = %o.cell, %error, "release delete not confirmed");
                        failed.get_or_insert(error);
                    }
                }
            }
        }
        match failed {
            // The cells still owned are those not confirmed deleted: `still_held` reads
            // them, and the hold machine sends the release again while one stands.
            Some(error) => Err(error),
            None => Ok(CasOutcome::Applied),
        }
    }
}
