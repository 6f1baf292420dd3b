//! Claims this process gave up on, so that it releases them on sight.

use std::collections::VecDeque;
use std::sync::Mutex;

/// How many abandoned holder ids a client remembers (oldest forgotten first).
const MAX_ORPHANS: usize = 64;

/// Holder ids this process gave up on (a lost answer, settled or not: a coordinator may still
/// apply it; a release that did not end `Ok`; an attempt dropped before hand-over): if one is
/// found holding a lease, it is released on sight rather than reported as somebody else.
/// Filled through [`Holdable::orphaned`](crate::hold::Holdable::orphaned) of the lease target.
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
