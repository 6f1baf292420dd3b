//! Claims this process gave up on, and the in-flight attempt that records them.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::hold::AttemptGuard;

/// How many abandoned holder ids a client remembers (oldest forgotten first).
const MAX_ORPHANS: usize = 64;

/// Holder ids this process gave up on (a lost answer never settled, a failed background
/// release, an expired term): if one is found holding a lease, it is released on sight
/// rather than reported as somebody else.
#[derive(Debug, Default)]
pub(crate) struct Orphans(Mutex<VecDeque<String>>);

impl Orphans {
    pub(crate) fn insert(&self, holder_id: &str) {
        if let Ok(mut ids) = self.0.lock()
            && !ids.iter().any(|id| id == holder_id)
        {
            if ids.len() >= MAX_ORPHANS {
                ids.pop_front();
            }
            ids.push_back(holder_id.to_owned());
        }
    }

    pub(crate) fn contains(&self, holder_id: &str) -> bool {
        self.0
            .lock()
            .is_ok_and(|ids| ids.iter().any(|id| id == holder_id))
    }

    pub(crate) fn remove(&self, holder_id: &str) {
        if let Ok(mut ids) = self.0.lock() {
            ids.retain(|id| id != holder_id);
        }
    }
}

/// An attempt in flight: if dropped armed (cancelled, or given up unsettled), its claim is
/// released in the background and its holder id remembered as an orphan.
pub(crate) struct Attempt<'a> {
    pub guard: Option<AttemptGuard>,
    pub orphans: &'a Orphans,
    pub holder_id: &'a str,
}

impl Attempt<'_> {
    pub(crate) fn disarm(mut self) {
        if let Some(guard) = self.guard.take() {
            guard.disarm();
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            self.orphans.insert(self.holder_id);
            drop(guard);
        }
    }
}
