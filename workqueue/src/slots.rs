//! How processes that read the same index head share it out without coordinating: items are
//! spread over slots by a hash of their id, and every slot belongs to one of the processes a
//! process knows of (rendezvous hashing over their claim tags, so processes that know the
//! same others agree on the split). A process learns another's tag from the claims it meets
//! (an item it read, or lost, held by that process), forgets it after `forget` without
//! meeting it, and leaves the other's items alone: it does not even read them. What it passed
//! over is taken ("stolen") only by the slot's runner-up (second by weight), so a slot has one
//! thief, and only once the item still waits `steal_age` after it was first passed (its owner
//! may be dead, or just behind), and either the thief is idle or the item lags: it lies
//! before (in index order) the newest of the thief's own entries handed out, i.e. the owner
//! is behind the thief's own work, busy or not. Owners that keep pace take their items within
//! `steal_age` of the thief passing them, so under a uniform backlog little is stolen; a slow
//! or dead owner's items are taken by a busy runner-up too. No item depends on another process
//! staying alive: a dead owner's items go to its runner-up, and once it is forgotten to a new
//! owner.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;
use tracing::debug;

use crate::item::IndexEntry;

/// Slots items are spread over by a hash of their id: enough that a few processes get
/// about equal shares.
const SLOTS: usize = 256;

/// Most passed-over entries remembered (older ones are forgotten first; a forgotten entry is
/// passed again, and stolen later, when it is seen again).
const MAX_PASSED: usize = 1 << 16;

fn fnv(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// An entry's slot: a hash of its item id.
pub(crate) fn slot(entry: &IndexEntry) -> usize {
    (fnv(entry.id.as_str().bytes()) % SLOTS as u64) as usize
}

/// A process's weight for `slot`: the highest weight among the processes known owns it.
fn weight(tag: &str, slot: usize) -> u64 {
    // A final mixing step: FNV alone spreads the last byte poorly.
    let mut h = fnv(tag.bytes().chain((slot as u16).to_le_bytes()));
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// The process tag in a claim id `"{worker}/{tag}-{random}"`.
pub(crate) fn claim_tag(claim_id: &str) -> Option<&str> {
    let (_, rest) = claim_id.rsplit_once('/')?;
    rest.split_once('-').map(|(tag, _)| tag)
}

/// This process's share of the slots and what it passed over.
#[derive(Debug)]
pub(crate) struct Slots {
    tag: String,
    /// Where this process's claimers start in a buffer: while it owns every slot (it met no
    /// one yet), processes reading the same head then start on different items.
    home: usize,
    inner: std::sync::Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Other processes met, by tag, with when they were last met.
    others: HashMap<String, Instant>,
    /// Per slot, whether it is this process's.
    own: Vec<bool>,
    /// Per slot, whether this process is its runner-up (the one that steals from it).
    second: Vec<bool>,
    /// Entries of other processes' slots passed over, by seq, with when first passed.
    passed: HashMap<String, Instant>,
    /// The newest (by seq, i.e. index order) of this process's own entries handed out: how
    /// far its own work got.
    front: String,
}

impl Slots {
    /// The slots of a process whose claims carry `tag`; it owns every slot until it meets
    /// another process.
    pub(crate) fn new(tag: &str) -> Slots {
        Slots {
            tag: tag.to_owned(),
            home: rand::random::<u64>() as usize % SLOTS,
            inner: std::sync::Mutex::new(Inner {
                others: HashMap::new(),
                own: vec![true; SLOTS],
                second: vec![false; SLOTS],
                passed: HashMap::new(),
                front: String::new(),
            }),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Processes sharing the queue as far as this one knows: itself and those it met.
    pub(crate) fn processes(&self) -> usize {
        self.inner().others.len() + 1
    }

    /// Whether `entry` lies in this process's share.
    pub(crate) fn owns(&self, entry: &IndexEntry) -> bool {
        self.inner().own[slot(entry)]
    }

    /// Another process's `entry` seen by a scan: whether to take it anyway (this process is
    /// the slot's runner-up, it first passed it over at least `steal_age` ago, and it is
    /// `idle` or the entry lags behind its own work). Otherwise it is remembered as passed
    /// over (by the runner-up).
    pub(crate) fn steal(&self, entry: &IndexEntry, idle: bool, steal_age: Duration) -> bool {
        let mut inner = self.inner();
        if !inner.second[slot(entry)] {
            return false;
        }
        let now = Instant::now();
        if inner.passed.len() >= MAX_PASSED && !inner.passed.contains_key(&entry.seq) {
            inner.passed.clear();
        }
        let first = *inner.passed.entry(entry.seq.clone()).or_insert(now);
        now.duration_since(first) >= steal_age && (idle || entry.seq < inner.front)
    }

    /// This process handed `entry` to a claimer: its own work got that far (stolen entries
    /// lie behind it and do not count).
    pub(crate) fn handed_out(&self, entry: &IndexEntry) {
        let mut inner = self.inner();
        if inner.own[slot(entry)] && entry.seq > inner.front {
            inner.front.clone_from(&entry.seq);
        }
    }

    /// Whether some entry passed over has waited `steal_age` and, unless `idle`, lags behind
    /// this process's own work (a rescan from the cursor then takes it if still there).
    pub(crate) fn has_stale(&self, idle: bool, steal_age: Duration) -> bool {
        let inner = self.inner();
        inner
            .passed
            .iter()
            .any(|(seq, first)| first.elapsed() >= steal_age && (idle || *seq < inner.front))
    }

    /// A scan from the cursor that read everything up to the scanner's horizon saw only
    /// `seen` of the entries passed over before: the others left the index (their owners
    /// took them).
    pub(crate) fn keep_passed(&self, seen: impl Fn(&str) -> bool) {
        self.inner().passed.retain(|seq, _| seen(seq));
    }

    /// Met a claim `claim_id` (an item it holds, or a claim that beat ours). Returns whether
    /// this process's share changed (a process it did not know).
    pub(crate) fn met(&self, claim_id: &str) -> bool {
        let Some(tag) = claim_tag(claim_id) else {
            return false;
        };
        if tag == self.tag {
            return false;
        }
        let mut inner = self.inner();
        let new = inner
            .others
            .insert(tag.to_owned(), Instant::now())
            .is_none();
        if new {
            inner.share_out(&self.tag);
            debug!(
                tag,
                processes = inner.others.len() + 1,
                "met another process"
            );
        }
        new
    }

    /// Forgets the processes not met for `forget` (their slots come back), and entries
    /// passed over that long ago (seen again, they are passed again).
    pub(crate) fn fade(&self, forget: Duration) {
        let mut inner = self.inner();
        let known = inner.others.len();
        inner.others.retain(|_, met| met.elapsed() < forget);
        inner.passed.retain(|_, first| first.elapsed() < forget);
        if inner.others.len() != known {
            inner.share_out(&self.tag);
            debug!(
                processes = inner.others.len() + 1,
                "forgot processes not met"
            );
        }
    }

    /// Which buffered candidate to hand out next: one at random among the first `choice`
    /// (strictly the first with `choice = 1`) in this order: this process's own entries in
    /// ring order of their slots from its home slot, then stolen ones, newest first (their
    /// owner works from the oldest).
    pub(crate) fn pick(&self, buffer: &VecDeque<IndexEntry>, choice: usize) -> usize {
        if choice <= 1 {
            return 0;
        }
        let own = self.inner().own.clone();
        let mut order: Vec<(bool, usize, usize)> = buffer
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let s = slot(e);
                if own[s] {
                    (false, (s + SLOTS - self.home) % SLOTS, i)
                } else {
                    (true, 0, usize::MAX - i)
                }
            })
            .collect();
        order.sort_unstable();
        let among = choice.min(order.len());
        let (stolen, _, i) = order[rand::rng().random_range(0..among)];
        if stolen { usize::MAX - i } else { i }
    }
}

impl Inner {
    /// Recomputes this process's share from the processes it knows. What it passed over is
    /// passed again (anew) under the new share.
    fn share_out(&mut self, tag: &str) {
        self.passed.clear();
        for s in 0..SLOTS {
            let mine = (weight(tag, s), tag);
            let above = self
                .others
                .keys()
                .filter(|other| (weight(other, s), other.as_str()) > mine)
                .count();
            self.own[s] = above == 0;
            self.second[s] = above == 1;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

    use super::*;
    use crate::item::{EntryKind, ItemId};

    fn entry(n: usize) -> IndexEntry {
        let id = ItemId::from_stored(format!("item-{n}"));
        IndexEntry::new(id, n as i64, EntryKind::Run, true, 0, 60_000_000)
    }

    /// Processes that met each other split the slots: every entry belongs to exactly one,
    /// and the shares are about equal.
    #[test]
    fn processes_that_met_share_every_slot_once() {
        let tags = ["0a0b0c0d", "11223344", "deadbeef", "01234567"];
        let slots: Vec<Slots> = tags.iter().map(|t| Slots::new(t)).collect();
        for (i, s) in slots.iter().enumerate() {
            for (j, other) in tags.iter().enumerate() {
                assert_eq!(s.met(&format!("w/{other}-x")), i != j);
            }
            assert!(!s.met(&format!("p{i}w/{}-y", tags[(i + 1) % 4])), "known");
        }
        let mut shares = [0; 4];
        for n in 0..4000 {
            let e = entry(n);
            let owners: Vec<usize> = (0..4).filter(|&i| slots[i].owns(&e)).collect();
            assert_eq!(owners.len(), 1, "entry {n}: owners {owners:?}");
            shares[owners[0]] += 1;
            let thieves = (0..4)
                .filter(|&i| slots[i].inner().second[slot(&e)])
                .count();
            assert_eq!(thieves, 1, "entry {n}: one runner-up");
        }
        assert!(shares.iter().all(|&s| s > 600), "{shares:?}");
    }

    /// Another process's entry is stolen once it has waited, by an idle process or by a busy
    /// one whose own work got past it (its owner lags), not by a busy one behind it.
    #[tokio::test(start_paused = true)]
    async fn passed_entries_are_stolen_when_waited_and_idle_or_lagging() {
        let slots = Slots::new("0a0b0c0d");
        assert!(slots.met("w/11223344-x"));
        let mut theirs = (0..200).map(entry).filter(|e| !slots.owns(e));
        let (older, newer) = (theirs.next().unwrap(), theirs.last().unwrap());
        let mut mine = (0..200).map(entry).filter(|e| slots.owns(e));
        let own_middle = mine
            .find(|e| e.seq > older.seq && e.seq < newer.seq)
            .unwrap();
        let age = Duration::from_millis(500);
        assert!(!slots.steal(&older, true, age), "just passed");
        assert!(!slots.steal(&newer, false, age), "just passed");
        assert!(!slots.has_stale(true, age));
        tokio::time::advance(age).await;
        assert!(slots.has_stale(true, age));
        assert!(
            !slots.has_stale(false, age),
            "nothing of its own handed out"
        );
        assert!(!slots.steal(&older, false, age), "busy, not ahead of it");
        slots.handed_out(&older); // not its own: does not count
        assert!(!slots.steal(&older, false, age), "busy, not ahead of it");
        slots.handed_out(&own_middle);
        assert!(slots.has_stale(false, age));
        assert!(
            slots.steal(&older, false, age),
            "busy, its own work got past it"
        );
        assert!(
            !slots.steal(&newer, false, age),
            "busy, ahead of its own work"
        );
        assert!(slots.steal(&newer, true, age), "idle and waited");
        slots.keep_passed(|_| false);
        assert!(!slots.has_stale(true, age), "gone from the index");
    }

    /// A process not met for `forget` is forgotten: its slots come back.
    #[tokio::test(start_paused = true)]
    async fn forgotten_processes_give_their_slots_back() {
        let slots = Slots::new("0a0b0c0d");
        slots.met("w/11223344-x");
        let theirs = (0..100).map(entry).find(|e| !slots.owns(e)).unwrap();
        tokio::time::advance(Duration::from_secs(10)).await;
        slots.fade(Duration::from_secs(20));
        assert!(!slots.owns(&theirs));
        tokio::time::advance(Duration::from_secs(10)).await;
        slots.fade(Duration::from_secs(20));
        assert!(slots.owns(&theirs));
    }
}
