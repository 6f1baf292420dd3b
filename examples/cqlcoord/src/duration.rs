//! Durations on the command line, parsed by `humantime`: `500ms`, `15s`, `1.5s`, `2m`,
//! `1h 30m`. A unit is required (`0` alone is accepted), and durations cannot be negative.

use std::time::Duration;

/// Parses a duration flag's value.
///
/// # Errors
/// A one-line message: negative, a bare number without a unit, or humantime's complaint.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    // Duration flags take values that start with '-' (so `--ttl -5s` reaches this message
    // rather than clap's "unexpected argument"); one that is not a number is a flag.
    if let Some(rest) = text.strip_prefix('-') {
        if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            return Err(format!("{text:?}: durations cannot be negative"));
        }
        return Err(format!(
            "{text:?} is not a duration: give the value right after the flag, e.g. 15s"
        ));
    }
    if text != "0" && !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "{text:?} has no unit: add one, e.g. {text}s or {text}ms"
        ));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration ({e}; e.g. 500ms, 15s, 1.5s, 2m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_errors() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(matches!(parse_duration("-5s"), Err(e) if e.contains("negative")));
        assert!(matches!(parse_duration("--try"), Err(e) if e.contains("right after the flag")));
        assert!(matches!(parse_duration("1.5"), Err(e) if e.contains("1.5s")));
        for bad in ["", "s", "5x", "1.2.3s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
