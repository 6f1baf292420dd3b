//! The guards' accessors over their [`Hold`](super::Hold), written once for the lease guard
//! and the lock guard.

/// The accessors every guard built on a [`Hold`](super::Hold) (in a field named `hold`) exposes, written
/// once: `held`, `is_held`, `cancellation_token`, `must_stop_by`, `deadline`, `renewals`, `loss_reason`,
/// `lost_at`, `lost`. Expands inside the guard's `impl` block.
macro_rules! hold_accessors {
    () => {
        /// `true` while held; turns `false` once, when the holder must stop.
        pub fn held(&self) -> tokio::sync::watch::Receiver<bool> {
            self.hold.held()
        }

        /// Whether it is still held.
        pub fn is_held(&self) -> bool {
            self.hold.is_held()
        }

        /// Cancelled when the holder must stop acting (loss, local deadline, release or
        /// drop).
        pub fn cancellation_token(&self) -> tokio_util::sync::CancellationToken {
            self.hold.cancellation_token()
        }

        /// The current local deadline; moves forward with each successful renewal.
        pub fn must_stop_by(&self) -> tokio::time::Instant {
            self.hold.must_stop_by()
        }

        /// A watch of the local deadline (`must_stop_by`): it moves forward with each
        /// successful renewal and keeps its last value once lost. Wait on it (`changed()`)
        /// to act on the deadline without polling; the cancellation token still says when
        /// to stop.
        pub fn deadline(&self) -> tokio::sync::watch::Receiver<tokio::time::Instant> {
            self.hold.deadline()
        }

        /// How many renewals have succeeded.
        pub fn renewals(&self) -> u64 {
            self.hold.renewals()
        }

        /// Why it was lost, once it was.
        pub fn loss_reason(&self) -> Option<$crate::error::LossReason> {
            self.hold.loss_reason()
        }

        /// When the holder was told to stop (just before the token was cancelled), once it
        /// was.
        pub fn lost_at(&self) -> Option<tokio::time::Instant> {
            self.hold.lost_at()
        }

        /// Waits until the holder must stop acting.
        ///
        /// # Cancel safety
        /// Cancel-safe: it only waits on the token.
        pub async fn lost(&self) {
            self.hold.lost().await;
        }
    };
}
pub(crate) use hold_accessors;
