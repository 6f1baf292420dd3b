//! Fault injection for the embedded store.

use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;

use crate::error::StoreError;

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
    /// [`crate::LeaseStore::peek`]
    Peek,
}

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The call takes this much longer (on tokio time) before it is executed.
    Latency(Duration),
    /// The call takes a random time longer, uniform below this bound, drawn per call: with a
    /// [`Fault::Latency`] rule, round trips that vary as a network's do. (The conformance
    /// suite's wire backend, whose test server delays by a fixed time, applies the mean.)
    LatencyUpTo(Duration),
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
struct Rule<O> {
    op: Option<O>,
    fault: Fault,
    times: Times,
}

/// Fault rules aimed at the operations `O` of an embedded store: every latency rule that
/// fires adds up, then the first failure rule that fires wins. Other crates' embedded stores
/// (the work queue's) use it with their own operation type.
#[derive(Debug)]
pub struct FaultRules<O> {
    rules: Mutex<Vec<Rule<O>>>,
}

impl<O> Default for FaultRules<O> {
    fn default() -> Self {
        FaultRules {
            rules: Mutex::new(Vec::new()),
        }
    }
}

impl<O: Copy + PartialEq + std::fmt::Debug> FaultRules<O> {
    /// Adds a rule for `op` (every operation when `None`).
    pub fn add(&self, op: Option<O>, fault: Fault, times: Times) {
        if let Ok(mut rules) = self.rules.lock() {
            rules.push(Rule { op, fault, times });
        }
    }

    /// Removes every rule.
    pub fn clear(&self) {
        if let Ok(mut rules) = self.rules.lock() {
            rules.clear();
        }
    }

    /// The faults that fire for one call of `op`: latency first, then at most one failure.
    pub fn draw(&self, op: O) -> (Duration, Option<Fault>) {
        let Ok(mut rules) = self.rules.lock() else {
            return (Duration::ZERO, None);
        };
        let mut latency = Duration::ZERO;
        let mut failure = None;
        for rule in rules.iter_mut() {
            if rule.op.is_some_and(|o| o != op) {
                continue;
            }
            let is_latency = matches!(rule.fault, Fault::Latency(_) | Fault::LatencyUpTo(_));
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
                    Fault::LatencyUpTo(d) => {
                        // Whole nanoseconds below the bound (a float product may round up to it).
                        let bound = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                        if bound > 0 {
                            latency += Duration::from_nanos(rand::rng().random_range(0..bound));
                        }
                    }
                    other => failure = Some(other),
                }
            }
        }
        rules.retain(|r| !matches!(r.times, Times::Next(0)));
        (latency, failure)
    }

    /// Runs one call of `op` with its faults: sleeps the latency (tokio time), then runs
    /// `apply` (or not) and reports the failure the way a real store would.
    ///
    /// # Errors
    /// `apply`'s error; otherwise the injected failure: [`StoreError::Unavailable`] (not
    /// applied), [`StoreError::Unknown`] for a timeout (applied or not, as injected).
    ///
    /// # Cancel safety
    /// Cancel-safe: `apply` runs after the only await, synchronously, so a dropped call
    /// either applied in full or not at all (unlike a real store, where a dropped request may
    /// still be applied; tests that need that use a wrapper store).
    pub async fn around<T>(
        &self,
        op: O,
        apply: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let (latency, failure) = self.draw(op);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        match failure {
            None | Some(Fault::Latency(_) | Fault::LatencyUpTo(_)) => apply(),
            Some(Fault::Unavailable) => Err(StoreError::Unavailable(format!("injected on {op:?}"))),
            Some(Fault::TimeoutWithoutApply) => Err(StoreError::Unknown(format!(
                "injected timeout, not applied, on {op:?}"
            ))),
            Some(Fault::TimeoutAfterApply) => {
                apply()?;
                Err(StoreError::Unknown(format!(
                    "injected timeout, applied, on {op:?}"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bounded random latency adds to a fixed one, varies from call to call, and stays
    /// below its bound; it is never taken for a failure.
    #[test]
    fn latency_up_to_varies_below_its_bound() {
        let faults: FaultRules<Op> = FaultRules::default();
        faults.add(
            None,
            Fault::Latency(Duration::from_millis(4)),
            Times::Always,
        );
        faults.add(
            None,
            Fault::LatencyUpTo(Duration::from_millis(2)),
            Times::Always,
        );
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let (latency, failure) = faults.draw(Op::Read);
            assert_eq!(failure, None);
            assert!(latency >= Duration::from_millis(4), "{latency:?}");
            assert!(latency < Duration::from_millis(6), "{latency:?}");
            seen.insert(latency);
        }
        assert!(seen.len() > 100, "{} distinct latencies", seen.len());
    }

    /// `LatencyUpTo(d)` draws uniformly *below* `d`, as documented, never `d` itself, even at
    /// a 1 ns bound. A draw `d.mul_f64(u)` rounded to the nearest nanosecond would give `d`
    /// whenever `u > 1 - 0.5 ns / d`: half of the draws at a 1 ns bound, about 1 in 4 000 000
    /// at 2 ms (enough for `latency_up_to_varies_below_its_bound`, 200 draws against a strict
    /// `< 6 ms`, to fail about once in 20 000 runs).
    #[test]
    fn latency_up_to_never_draws_its_own_bound() {
        let faults: FaultRules<Op> = FaultRules::default();
        let bound = Duration::from_nanos(1);
        faults.add(None, Fault::LatencyUpTo(bound), Times::Always);
        let at_bound = (0..200)
            .filter(|_| faults.draw(Op::Read).0 >= bound)
            .count();
        assert_eq!(
            at_bound, 0,
            "{at_bound} of 200 draws reached the bound {bound:?}"
        );
    }
}
