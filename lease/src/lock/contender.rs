//! Contender ids: unique, reused per slot, ordered like seed 002's `host/pid`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::config::check_text;
use crate::error::InvalidArgument;

/// Longest process key, in bytes.
const MAX_PROCESS_LEN: usize = 64;

/// A contender's id: `process/slot`, e.g. `0007-b1e2/000003`. Ids compare as strings, which
/// orders them by process key, then slot (zero-padded): the bakery's tie-break, as seed
/// 002's `host/pid`.
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

/// Hands out contender ids for one process key: concurrent acquisitions through the same
/// lock object get different slots; a slot is reused once its previous holder's cells are
/// gone, so a contender's cell names (and their tombstones) do not pile up.
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
    /// Ids under `process` (e.g. `host-number/pid`; `[A-Za-z0-9_.:/-]`, at most 64 bytes).
    /// Two processes must never share a key.
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
            process: process.to_owned(),
            free: Arc::default(),
        })
    }

    /// A random process key (unique with overwhelming probability).
    pub fn random() -> Self {
        Contenders {
            process: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned(),
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

/// A contender id in use; back in the pool on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) id: ContenderId,
    number: u32,
    pool: Arc<Mutex<Slots>>,
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
        assert!(Contenders::new("").is_err());
    }
}
