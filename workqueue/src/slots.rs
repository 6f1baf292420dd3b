//! Where a process's claimers look first in a buffer of candidates that other processes read
//! too: items are spread over slots by a hash of their id; a process starts on its home slot,
//! remembers the slots where it met other processes (looked at late from then on), and moves
//! when its home keeps being taken. Nothing is coordinated: it only makes two processes that
//! read the same head unlikely to race for the same items.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng;
use tracing::debug;

use crate::item::IndexEntry;

/// Slots items are spread over by a hash of their id.
const SLOTS: u64 = 16;

/// An entry's slot: a hash of its item id.
pub(crate) fn slot(entry: &IndexEntry) -> u64 {
    let hash = entry
        .id
        .as_str()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    hash % SLOTS
}

/// A process's home slot and what it saw of the others.
#[derive(Debug)]
pub(crate) struct Slots {
    /// This process's home slot: its claimers take the items of the buffer in ring order of
    /// slots from here, so processes that read the same head start on different items. A
    /// process that finds its home slot's items taken by another moves to a random slot.
    home: AtomicU64,
    /// Per slot, how often this process recently found another one's claim there: its
    /// claimers look at the slots others work last.
    foreign: std::sync::Mutex<[u32; SLOTS as usize]>,
}

impl Default for Slots {
    fn default() -> Self {
        Slots {
            home: AtomicU64::new(rand::random::<u64>() % SLOTS),
            foreign: std::sync::Mutex::new([0; SLOTS as usize]),
        }
    }
}

impl Slots {
    /// Which buffered candidate to hand out next: strictly the first with `choice = 1`;
    /// otherwise a random one among the first `choice` in this order: the home slot's, then
    /// by how rarely other processes were seen in their slot, then by ring distance of
    /// their slot from home.
    pub(crate) fn pick(&self, buffer: &VecDeque<IndexEntry>, choice: usize) -> usize {
        if choice <= 1 {
            return 0;
        }
        let home = self.home.load(Ordering::Relaxed);
        let foreign = self.foreign.lock().map(|f| *f).unwrap_or_default();
        let mut order: Vec<(bool, u32, u64, usize)> = buffer
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let s = slot(e);
                (
                    s != home,
                    foreign[s as usize],
                    (s + SLOTS - home) % SLOTS,
                    i,
                )
            })
            .collect();
        order.sort_unstable();
        let among = choice.min(order.len());
        order[rand::rng().random_range(0..among)].3
    }

    /// Another process took an item we were about to claim: its slot is worked by others
    /// (looked at late from now on), and if that keeps happening in our home slot, we move
    /// to the slot where others were seen least.
    pub(crate) fn contended(&self, entry: &IndexEntry) {
        let Ok(mut foreign) = self.foreign.lock() else {
            return;
        };
        let s = slot(entry);
        foreign[s as usize] = foreign[s as usize].saturating_add(1);
        // Once is a neighbour passing through; twice, another process lives here too.
        if s == self.home.load(Ordering::Relaxed) && foreign[s as usize] >= 2 {
            let offset = rand::random::<u64>() % SLOTS;
            let home = (0..SLOTS)
                .map(|i| (i + offset) % SLOTS)
                .min_by_key(|&i| foreign[i as usize])
                .unwrap_or(offset);
            self.home.store(home, Ordering::Relaxed);
            debug!(home, "home slot contended; moved");
        }
    }

    /// Sightings of other processes fade: halved at every rescan from the cursor.
    pub(crate) fn fade(&self) {
        if let Ok(mut foreign) = self.foreign.lock() {
            for n in foreign.iter_mut() {
                *n /= 2;
            }
        }
    }
}
