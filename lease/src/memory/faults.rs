//! Fault injection for the embedded store.

use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;

/// A store operation, for counting calls and aiming faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// [`crate::LeaseStore::try_acquire`]
    TryAcquire,
    /// [`crate::LeaseStore::renew`]
    Renew,
    /// [`crate::LeaseStore::release`]
    Release,
    /// [`crate::LeaseStore::read`]
    Read,
}

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The call takes this much longer (on tokio time) before it is executed.
    Latency(Duration),
    /// The call fails without being applied (like `Unavailable`).
    Unavailable,
    /// The write is applied, then the answer is lost (like a CAS write timeout).
    TimeoutAfterApply,
    /// The answer is lost and the write is not applied.
    TimeoutWithoutApply,
}

/// How often a fault fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Times {
    /// On every matching call until cleared.
    Always,
    /// On the next `n` matching calls.
    Next(usize),
    /// On each matching call with this probability.
    Random(f64),
}

#[derive(Debug)]
struct Rule {
    op: Option<Op>,
    fault: Fault,
    times: Times,
}

/// The active fault rules; the first rule matching a call fires.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    rules: Mutex<Vec<Rule>>,
}

impl Faults {
    pub(crate) fn add(&self, op: Option<Op>, fault: Fault, times: Times) {
        if let Ok(mut rules) = self.rules.lock() {
            rules.push(Rule { op, fault, times });
        }
    }

    pub(crate) fn clear(&self) {
        if let Ok(mut rules) = self.rules.lock() {
            rules.clear();
        }
    }

    /// The faults that fire for one call of `op`: latency first, then at most one failure.
    pub(crate) fn draw(&self, op: Op) -> (Duration, Option<Fault>) {
        let Ok(mut rules) = self.rules.lock() else {
            return (Duration::ZERO, None);
        };
        let mut latency = Duration::ZERO;
        let mut failure = None;
        for rule in rules.iter_mut() {
            if rule.op.is_some_and(|o| o != op) {
                continue;
            }
            let is_latency = matches!(rule.fault, Fault::Latency(_));
            if !is_latency && failure.is_some() {
                continue;
            }
            let fires = match &mut rule.times {
                Times::Always => true,
                Times::Next(0) => false,
                Times::Next(n) => {
                    *n -= 1;
                    true
                }
                Times::Random(p) => rand::rng().random_bool(p.clamp(0.0, 1.0)),
            };
            if fires {
                match rule.fault {
                    Fault::Latency(d) => latency += d,
                    other => failure = Some(other),
                }
            }
        }
        rules.retain(|r| !matches!(r.times, Times::Next(0)));
        (latency, failure)
    }
}
