//! Contender ids: unique per incarnation by construction, reused per slot, ordered like libQtCassandra's
//! 002's `host/pid` tie-break.
//!
//! Why an incarnation part: plain cells keep whatever carries the highest client timestamp.
//! If a process restarted under the same id with its clock now behind, its predecessor's
//! deletes (timestamped by the faster clock) would hide its new cells, acknowledged yet
//! invisible, and the bakery would let two in. A random part drawn per [`Contenders`] keeps
//! every incarnation's cells apart; the bakery also reads its ticket back
//! ([`LockError::Shadowed`](super::LockError::Shadowed)).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::config::check_text;
use crate::error::InvalidArgument;

/// Longest process key, in bytes.
const MAX_PROCESS_LEN: usize = 64;

/// Length of the random incarnation part, in hex digits.
const INCARNATION_LEN: usize = 8;

/// A contender's id: `process/incarnation/slot`, e.g. `worker-7/3f9a01c2/000003`. Ids compare
/// as strings, which orders them by process key, then incarnation, then slot (zero-padded):
/// the bakery's tie-break, as libQtCassandra's `host/pid` (any total order that every contender
/// agrees on will do).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContenderId(String);

impl ContenderId {
    /// The id as a cell name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ContenderId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Hands out contender ids for one process key and one incarnation (drawn at random when the
/// `Contenders` is made): concurrent acquisitions through the same lock object get different
/// slots; a slot is reused once its previous holder's cells are gone, so a contender's cell
/// names (and their tombstones) do not pile up. Reusing a slot is safe because the same
/// process's [`ClientClock`](crate::cells::ClientClock) stamps the new cells after the old
/// deletes.
#[derive(Debug, Clone)]
pub struct Contenders {
    process: String,
    free: Arc<Mutex<Slots>>,
}

#[derive(Debug, Default)]
struct Slots {
    free: BTreeSet<u32>,
    next: u32,
}

impl Contenders {
    /// Ids under `process` (a name for logs and the tie-break order, e.g. `worker-7`;
    /// `[A-Za-z0-9_.:/-]`, at most 64 bytes), followed by a random incarnation, so two
    /// `Contenders` never hand out the same id even when given the same key (a restarted
    /// process, two lock objects in one process).
    ///
    /// # Errors
    /// [`InvalidArgument`] for an empty, long or badly formed key.
    pub fn new(process: &str) -> Result<Self, InvalidArgument> {
        check_text("process key", process, MAX_PROCESS_LEN)?;
        if !process
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:/-".contains(c))
        {
            return Err(InvalidArgument::Invalid {
                field: "process key",
                reason: "use letters, digits and _.:/- only".into(),
            });
        }
        Ok(Contenders {
            process: format!("{process}/{}", incarnation()),
            free: Arc::default(),
        })
    }

    /// A random process key (unique with overwhelming probability).
    pub fn random() -> Self {
        Contenders {
            process: format!("{}/{}", incarnation(), incarnation()),
            free: Arc::default(),
        }
    }

    /// Takes the lowest free slot; it is returned when the [`Slot`] drops.
    pub(crate) fn take(&self) -> Slot {
        let number = match self.free.lock() {
            Ok(mut slots) => match slots.free.pop_first() {
                Some(n) => n,
                None => {
                    slots.next += 1;
                    slots.next - 1
                }
            },
            Err(_) => rand::random(),
        };
        Slot {
            id: ContenderId(format!("{}/{number:06}", self.process)),
            number,
            pool: Arc::clone(&self.free),
        }
    }
}

/// A fresh random incarnation part: 8 hex digits.
fn incarnation() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..INCARNATION_LEN].to_owned()
}

/// A contender id in use; back in the pool on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) id: ContenderId,
    number: u32,
    pool: Arc<Mutex<Slots>>,
}

impl Slot {
    /// A slot for an id chosen by the caller (unique per use, e.g. a claim id), outside any
    /// pool.
    pub(crate) fn detached(id: &str) -> Slot {
        Slot {
            id: ContenderId(id.to_owned()),
            number: 0,
            pool: Arc::default(),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut slots) = self.pool.lock() {
            slots.free.insert(self.number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_unique_while_taken_then_reused() {
        let c = Contenders::new("h1/42").unwrap();
        let a = c.take();
        let b = c.take();
        assert_ne!(a.id, b.id);
        assert!(a.id < b.id);
        let a_id = a.id.clone();
        drop(a);
        assert_eq!(c.take().id, a_id);
        assert!(Contenders::new("bad key").is_err());
        // Same key, another incarnation: never the same id, still ordered by key first.
        let again = Contenders::new("h1/42").unwrap().take();
        assert_ne!(again.id, a_id);
        assert!(again.id.as_str().starts_with("h1/42/"));
        assert!(Contenders::new("h2").unwrap().take().id > again.id);
        assert!(Contenders::new("").is_err());
    }
}
