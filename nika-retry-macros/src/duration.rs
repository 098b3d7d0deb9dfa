//! Duration literals of the attributes: `"250ms"`, `"4s"`, `"2m 30s"`.
//!
//! A pure function of the string, so it is unit- and property-tested here.

use std::time::Duration;

/// Parses a duration literal; refuses malformed, zero and overflowing ones
/// with a message that says what to write instead.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(
            "empty duration; write a number with a unit, e.g. \"250ms\", \"4s\", \"2m\"".into(),
        );
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "duration `{trimmed}` has no unit; write e.g. \"{trimmed}ms\" or \"{trimmed}s\""
        ));
    }
    match humantime::parse_duration(trimmed) {
        Ok(d) if d.is_zero() => Err(format!(
            "duration `{trimmed}` is zero; a limit or backoff must be positive"
        )),
        Ok(d) => Ok(d),
        Err(humantime::DurationError::NumberOverflow) => Err(format!(
            "duration `{trimmed}` overflows; the longest is about 584 years"
        )),
        Err(e) => Err(format!(
            "malformed duration `{trimmed}` ({e}); write a number with a unit, e.g. \"250ms\", \"4s\", \"2m\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_the_usual_units() {
        let cases = [
            ("250ms", Duration::from_millis(250)),
            ("4s", Duration::from_secs(4)),
            ("2m", Duration::from_secs(120)),
            ("1h 30m", Duration::from_secs(5400)),
            ("1500us", Duration::from_micros(1500)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses_zero_unitless_malformed_and_overflowing() {
        let cases = [
            ("0s", "is zero"),
            ("0ms", "is zero"),
            ("120", "has no unit"),
            ("", "empty duration"),
            ("fast", "malformed duration"),
            ("4 parsecs", "malformed duration"),
            ("-1s", "malformed duration"),
            ("99999999999999999999999s", "overflows"),
        ];
        for (text, want) in cases {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,24}") {
            let _ = parse_duration(&text);
        }

        #[test]
        fn millisecond_literals_round_trip(ms in 1u64..=u64::MAX / 1_000_000) {
            prop_assert_eq!(parse_duration(&format!("{ms}ms")), Ok(Duration::from_millis(ms)));
        }
    }
}
