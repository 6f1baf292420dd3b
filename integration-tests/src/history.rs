//! A checker for histories of exclusive tenures (who held what, when, with which token).

use cql_lease::FencingToken;
use tokio::time::Instant;

/// One holder's time in office, on the test process's monotonic clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenure {
    /// Who held it.
    pub holder: String,
    /// The acquisition's fencing token (or election term).
    pub token: FencingToken,
    /// When it learned it held the lease.
    pub start: Instant,
    /// When it stopped acting (released, or its deadline).
    pub end: Instant,
}

/// Checks that no two tenures overlap and that tokens strictly increase with time.
pub fn check_exclusive(tenures: &[Tenure]) -> Result<(), String> {
    let mut by_token = tenures.to_vec();
    by_token.sort_by_key(|t| t.token);
    for pair in by_token.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.token == b.token {
            return Err(format!("token {} issued twice: {a:?} and {b:?}", a.token));
        }
        if a.end > b.start {
            return Err(format!(
                "overlap: {} held token {} until {:?} after {} took token {} at {:?}",
                a.holder, a.token, a.end, b.holder, b.token, b.start
            ));
        }
    }
    for t in tenures {
        if t.end < t.start {
            return Err(format!("tenure ends before it starts: {t:?}"));
        }
    }
    Ok(())
}

/// Checks that no two tenures overlap in time, whatever their tokens (for locks that give
/// no fencing token): sorted by start, each must end before the next begins.
pub fn check_disjoint(tenures: &[Tenure]) -> Result<(), String> {
    let mut by_start = tenures.to_vec();
    by_start.sort_by_key(|t| (t.start, t.end));
    for t in &by_start {
        if t.end < t.start {
            return Err(format!("tenure ends before it starts: {t:?}"));
        }
    }
    for pair in by_start.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.end > b.start {
            return Err(format!(
                "overlap: {} held until {:?} after {} started at {:?}",
                a.holder, a.end, b.holder, b.start
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn tenure(token: i64, start: u64, end: u64, base: Instant) -> Tenure {
        Tenure {
            holder: format!("h{token}"),
            token: FencingToken::new(token),
            start: base + Duration::from_millis(start),
            end: base + Duration::from_millis(end),
        }
    }

    #[test]
    fn accepts_a_clean_history_and_rejects_bad_ones() {
        let base = Instant::now();
        assert!(check_exclusive(&[tenure(2, 10, 20, base), tenure(1, 0, 10, base)]).is_ok());
        assert!(check_exclusive(&[tenure(1, 0, 11, base), tenure(2, 10, 20, base)]).is_err());
        assert!(check_exclusive(&[tenure(2, 0, 5, base), tenure(1, 10, 20, base)]).is_err());
        assert!(check_exclusive(&[tenure(1, 0, 5, base), tenure(1, 10, 20, base)]).is_err());
        assert!(check_disjoint(&[tenure(1, 10, 20, base), tenure(1, 0, 10, base)]).is_ok());
        assert!(check_disjoint(&[tenure(2, 0, 11, base), tenure(1, 10, 20, base)]).is_err());
    }
}
