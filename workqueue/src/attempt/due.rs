//! What a candidate's item calls for before any claim: whether it is due, and otherwise the
//! upkeep of its entry (dropped, moved ahead, or dead-lettered), each deletion that rests on
//! a plain read fenced (the row sealed) or settled by a SERIAL read first.

use tracing::{info, warn};

use crate::config::micros;
use crate::error::QueueError;
use crate::item::{EntryKind, IndexEntry, ItemKey, JobState, StoredItem};
use crate::queue::WorkQueue;
use crate::store::Seal;

impl WorkQueue {
    /// Whether the item behind a due entry may be claimed now; otherwise the entry is
    /// dropped or moved to where the item next needs looking at (a run entry of an item
    /// another claimer holds is left to that claimer, which replaces it).
    pub(super) async fn due(
        &self,
        entry: &IndexEntry,
        item: &StoredItem,
    ) -> Result<bool, QueueError> {
        match item.state {
            // A recent run entry of a unique key's done row may be its next job's, whose
            // revival is on its way (its entry goes in first): left alone until older than
            // any enqueue's window, as an entry without a row is. Other rows are never
            // revived: their leftover entries (a copy's twin, a failed removal) go at once.
            // A revival's entry names the attempt it is conditioned on, the row's current
            // one; an entry naming an older attempt (a duplicate enqueue's, a copy's twin)
            // cannot be a revival that may still apply.
            JobState::Done
                if entry.kind == EntryKind::Run
                    && entry.id.as_str().starts_with("u:")
                    && entry.attempt >= item.attempt
                    && entry.pos >= self.now() - self.enqueue_window() =>
            {
                Ok(false)
            }
            // An older run entry of a unique key's done row: a revival may still be on its
            // way (given up as of unknown outcome, or its Paxos round still retrying). The
            // row's attempt number is raised first, so such a revival can no longer apply.
            JobState::Done
                if entry.kind == EntryKind::Run
                    && entry.id.as_str().starts_with("u:")
                    && entry.attempt >= item.attempt =>
            {
                let seen = Seal::Done {
                    attempt: item.attempt,
                    origin: &item.origin,
                };
                if self.sealed(&item.key, seen).await {
                    self.remove(entry).await;
                }
                Ok(false)
            }
            JobState::Done => {
                self.remove(entry).await;
                Ok(false)
            }
            // A run entry naming the discarded attempt is a requeue's, placed before its LWT
            // (no other path leaves one): while it may be in flight the entry stays, as a
            // revival's does, else the requeued item would be left without an entry.
            JobState::Discarded
                if entry.kind == EntryKind::Run
                    && entry.attempt == item.attempt
                    && entry.pos >= self.now() - self.enqueue_window() =>
            {
                Ok(false)
            }
            // A requeue's entry older than its window: its LWT may have been given up as of
            // unknown outcome and still be on its way (a Paxos round retrying, a proposal
            // accepted but not committed). The row's attempt number is raised first (its
            // Paxos round completes any accepted proposal), so such a requeue can no longer
            // apply; the entry goes only if the item stayed discarded.
            JobState::Discarded
                if entry.kind == EntryKind::Run && entry.attempt == item.attempt =>
            {
                let seen = Seal::Discarded {
                    attempt: item.attempt,
                };
                if self.sealed(&item.key, seen).await {
                    self.dead_letter(entry).await?;
                }
                Ok(false)
            }
            JobState::Discarded => {
                self.dead_letter(entry).await?;
                Ok(false)
            }
            // An entry left by an earlier job of this row (its removal failed, or its
            // claimer crashed first): the row was revived or requeued since, and its current
            // job has its own entry (attempt `requeued_at` or later), which may lie ahead (a
            // delayed job). Acting on this one would start it early. A check entry names the
            // claim's attempt, a run entry the attempts already used. Not in the bakery
            // mode: it has no revivals, its requeues are available at once, and it moves
            // `requeued_at` when it gives an undone claim's attempt back, which would make
            // the item's own entry look stale and leave it without one. A snooze raises
            // `requeued_at` to its claim's attempt when that was the job's first: then the
            // snoozed claim's own check entry (the item's only one, should the entry the
            // snooze places have failed) names the row's attempt, and is not stale.
            _ if self.config.claim_mode == crate::ClaimMode::Lwt
                && (entry.attempt < item.requeued_at
                    || (entry.kind == EntryKind::Check
                        && entry.attempt == item.requeued_at
                        && !(item.state == JobState::Retryable
                            && entry.attempt == item.attempt))) =>
            {
                self.remove(entry).await;
                Ok(false)
            }
            _ if item.claim.is_some() => {
                if entry.kind == EntryKind::Check {
                    // Still held: look again when this claim could have lapsed.
                    let later = self.check_entry(&item.key.id, item.attempt);
                    self.replace(entry, &later).await?;
                }
                Ok(false)
            }
            // Not due yet by our clock: a retry's back-off, or a delayed item met through an
            // entry that is not its own (a duplicate enqueue's, placed before its LWT found
            // the row). Immediate items store run_at `AT_ONCE`, so their enqueuer's clock
            // never holds them back.
            _ if item.run_at > self.now() => {
                let run = self.entry(
                    &item.key.id,
                    item.run_at,
                    EntryKind::Run,
                    false,
                    item.attempt,
                );
                self.replace(entry, &run).await?;
                Ok(false)
            }
            _ => Ok(true),
        }
    }

    /// An entry whose item does not exist: an enqueue may still be writing it, so only an
    /// entry older than any enqueue's window goes, and only once the row is sealed: a plain
    /// (or even SERIAL) read that finds no row does not stop an enqueue still on its way
    /// (a coordinator retrying its Paxos round, a cut plain write landing late) from
    /// writing it afterwards, which would leave an item with no entry.
    pub(super) async fn drop_orphan(&self, entry: &IndexEntry) {
        if entry.pos >= self.now() - self.enqueue_window() {
            return;
        }
        if self.sealed(&self.key(entry.id.clone()), Seal::Absent).await {
            info!(id = %entry.id, "orphan index entry removed, its row sealed");
            self.remove(entry).await;
        }
    }

    /// Whether [`QueueStore::seal`](crate::store::QueueStore::seal) stands (logged otherwise: the
    /// entry stays for a later look).
    async fn sealed(&self, key: &ItemKey, seen: Seal<'_>) -> bool {
        match self.store.seal(key, seen).await {
            Ok(cql_lease::CasOutcome::Applied) => true,
            Ok(cql_lease::CasOutcome::NotApplied) => {
                info!(id = %key.id, "the row changed before it was sealed; its entry kept");
                false
            }
            Err(error) => {
                warn!(id = %key.id, %error, "row not sealed; its entry kept for now");
                false
            }
        }
    }

    /// How long after its position an entry may still be an enqueue's in progress: its
    /// entry placement and its row's resends may each take up to `resolve_timeout`, the
    /// last send two request timeouts (sent twice) after a pause, and clocks differ by up
    /// to the skew (in the lag).
    pub(crate) fn enqueue_window(&self) -> i64 {
        let claim = &self.config.timing;
        2 * micros(claim.resolve_timeout)
            + 2 * micros(claim.effective_request_timeout())
            + micros(claim.retry_period)
            + micros(self.config.cursor_lag())
    }

    /// Moves a discarded item's entry to the dead letters.
    pub(crate) async fn dead_letter(&self, entry: &IndexEntry) -> Result<(), QueueError> {
        self.put_dead(&entry.id).await?;
        self.remove(entry).await;
        Ok(())
    }
}
