//! Claims this process gave up on (a lost claim answer read back as "not claimed", an
//! attempt dropped before hand-over, a hand-back that failed): a coordinator may still
//! apply such a claim later, and then nobody works on the item until its TTL runs out. A
//! claimer of this process that finds one of them holding an item hands it back at once.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::claim::HandBack;

/// How many abandoned claims a process remembers (oldest forgotten first).
const MAX_ORPHANS: usize = 256;

/// Abandoned claim ids with how each is handed back.
#[derive(Debug, Default)]
pub(crate) struct Orphans(Mutex<VecDeque<(String, HandBack)>>);

impl Orphans {
    pub(crate) fn insert(&self, claim_id: &str, hand_back: HandBack) {
        if let Ok(mut ids) = self.0.lock()
            && !ids.iter().any(|(id, _)| id == claim_id)
        {
            if ids.len() >= MAX_ORPHANS {
                ids.pop_front();
            }
            ids.push_back((claim_id.to_owned(), hand_back));
        }
    }

    /// Removes `claim_id` and says how to hand it back, if it is one of ours.
    pub(crate) fn take(&self, claim_id: &str) -> Option<HandBack> {
        let mut ids = self.0.lock().ok()?;
        let at = ids.iter().position(|(id, _)| id == claim_id)?;
        ids.remove(at).map(|(_, hand_back)| hand_back)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::JobState;

    #[test]
    fn remembers_and_forgets() {
        let orphans = Orphans::default();
        orphans.insert("a", HandBack::Delivered);
        orphans.insert(
            "b",
            HandBack::Undelivered {
                state: JobState::Available,
                attempt: 3,
            },
        );
        assert!(matches!(orphans.take("a"), Some(HandBack::Delivered)));
        assert!(orphans.take("a").is_none());
        assert!(orphans.take("b").is_some());
        for n in 0..=MAX_ORPHANS {
            orphans.insert(&n.to_string(), HandBack::Delivered);
        }
        assert!(orphans.take("0").is_none(), "the oldest is forgotten");
        assert!(orphans.take(&MAX_ORPHANS.to_string()).is_some());
    }
}
