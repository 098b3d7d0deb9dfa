//! Outside input never panics, never overflows and never makes a client
//! sleep forever: property tests over the parsers, and hostile `Retry-After`
//! values from a real server. Where a property checks a value, the expected
//! one comes from how the input was generated (the number written, the
//! instant formatted by hand, the fields chosen), not from the parser's own
//! steps or dependencies; the `*_never_panics` properties check only that no
//! input panics.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nika_retry::Growth;
use nika_retry::http::{parse_retry_after, retry_hint};
use nika_retry::task::TaskPolicy;
use nika_retry_tests::fault::Fault;
use nika_retry_tests::verb::{HttpError, RequestOptions};
use nika_retry_tests::{EventLog, serve};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]

    #[test]
    fn parse_retry_after_never_panics(value in "\\PC{0,40}", secs in 0u64..(1 << 40)) {
        let now = UNIX_EPOCH + Duration::from_secs(secs);
        let _ = parse_retry_after(&value, now);
    }

    /// The expected wait is the number the text was written from, not a
    /// parse of the text: whitespace and leading zeros around any number up
    /// to 2^128, exact when it fits a `u64` of seconds, else a hint too long.
    #[test]
    fn delta_seconds_parse_exactly_or_overflow_to_a_hint_too_long(
        n in any::<u128>(),
        shift in 0u32..128,
        zeros in 0usize..4,
        pad in prop::sample::select(vec!["", " ", "\t", " \t"]),
    ) {
        let n = n >> shift;
        let text = format!("{pad}{}{n}{pad}", "0".repeat(zeros));
        let expected = u64::try_from(n).map_or(Duration::MAX, Duration::from_secs);
        prop_assert_eq!(parse_retry_after(&text, SystemTime::now()), Some(expected), "{:?}", text);
    }

    /// Past 2^128 (40 digits and more): always a hint too long.
    #[test]
    fn delta_seconds_past_any_integer_are_a_hint_too_long(digits in "[1-9][0-9]{39,60}") {
        prop_assert_eq!(parse_retry_after(&digits, SystemTime::now()), Some(Duration::MAX));
    }

    #[test]
    fn http_dates_measure_from_now_and_the_past_is_zero(base in 0u64..4_000_000_000, offset in -1_000_000i64..1_000_000) {
        let now = UNIX_EPOCH + Duration::from_secs(base);
        let at = if offset >= 0 {
            now + Duration::from_secs(offset as u64)
        } else {
            now.checked_sub(Duration::from_secs(offset.unsigned_abs())).filter(|t| *t >= UNIX_EPOCH).unwrap_or(UNIX_EPOCH)
        };
        let date = imf_fixdate(at);
        let expected = at.duration_since(now).unwrap_or(Duration::ZERO);
        prop_assert_eq!(parse_retry_after(&date, now), Some(expected));
    }

    #[test]
    fn signs_and_fractions_are_refused(n in 0u64..u64::MAX, frac in 1u32..1000) {
        let now = SystemTime::now();
        for value in [format!("-{n}"), format!("+{n}"), format!("{n}.{frac}"), format!("{n}e3")] {
            prop_assert_eq!(parse_retry_after(&value, now), None, "{}", value);
        }
    }

    #[test]
    fn retry_hint_never_panics_on_arbitrary_header_bytes(
        name in prop::sample::select(vec!["retry-after-ms", "x-amz-retry-after", "grpc-retry-pushback-ms", "retry-after", "x-other"]),
        value in prop::collection::vec(any::<u8>(), 0..48),
    ) {
        let headers = [(name, value)];
        let _ = retry_hint(&headers, SystemTime::now());
    }

    #[test]
    fn task_policy_yaml_never_panics(text in "\\PC{0,120}") {
        let _ = serde_norway::from_str::<TaskPolicy>(&text);
    }

    /// Validity decided from the generated fields by the reference's rules
    /// (docs/workflow-yaml.md): `max_attempts` 1–10, `delay_ms` 0 or more,
    /// `jitter` 0.0–1.0, `backoff` a name or a multiplier of at least 1.
    /// Accepted exactly when valid, with the values written (and the
    /// documented defaults); refused otherwise, naming an invalid key.
    #[test]
    fn a_retry_block_is_accepted_exactly_when_its_fields_are_in_range(
        attempts in -5i64..20,
        delay in prop::option::of(-10i64..100_000),
        jitter in prop::option::of(-1.0f64..2.0),
        backoff in prop::option::of(prop::sample::select(vec!["constant", "linear", "exponential", "2", "1.5", "0.5", "cubic"])),
    ) {
        let mut yaml = format!("retry: {{ max_attempts: {attempts}");
        if let Some(d) = delay { yaml += &format!(", delay_ms: {d}"); }
        if let Some(j) = jitter { yaml += &format!(", jitter: {j}"); }
        if let Some(b) = backoff { yaml += &format!(", backoff: {b}"); }
        yaml += " }";
        let mut invalid = vec![];
        if !(1..=10).contains(&attempts) { invalid.push("max_attempts"); }
        if delay.is_some_and(|d| d < 0) { invalid.push("delay_ms"); }
        if jitter.is_some_and(|j| !(0.0..=1.0).contains(&j)) { invalid.push("jitter"); }
        if matches!(backoff, Some("0.5" | "cubic")) { invalid.push("backoff"); }
        match serde_norway::from_str::<TaskPolicy>(&yaml) {
            Ok(policy) => {
                prop_assert!(invalid.is_empty(), "{} accepted though {:?} are invalid", yaml, invalid);
                let retry = policy.retry.unwrap();
                let delay = Duration::from_millis(delay.map_or(1_000, |d| d as u64));
                prop_assert_eq!(
                    (retry.max_attempts, retry.initial_backoff, retry.jitter),
                    (attempts as u32, delay, jitter.map_or(0.5, |j| j as f32)),
                    "{}", yaml
                );
                // `linear` is a growth of its own; the others a multiplier (×2 by default).
                let growth = match backoff {
                    Some("linear") => Err(Growth::Linear),
                    Some("constant") => Ok(1.0),
                    Some("1.5") => Ok(1.5),
                    _ => Ok(2.0),
                };
                match growth {
                    Err(linear) => prop_assert_eq!(retry.growth, linear, "{}", yaml),
                    Ok(m) => prop_assert_eq!((retry.growth, retry.multiplier), (Growth::Exponential, m), "{}", yaml),
                }
                // The default cap, 16 s, rises to a longer delay.
                prop_assert_eq!(retry.max_backoff, delay.max(Duration::from_secs(16)), "{}", yaml);
            }
            Err(e) => {
                let e = e.to_string();
                prop_assert!(!invalid.is_empty(), "{} refused: {}", yaml, e);
                prop_assert!(invalid.iter().any(|k| e.contains(k)), "{}: {} names none of {:?}", yaml, e, invalid);
            }
        }
    }
}

/// `at` as an IMF-fixdate (RFC 9110 §5.6.7), written from the calendar by
/// hand rather than by the `httpdate` crate the parser itself uses, so that
/// a date the two got wrong alike would fail: days to a civil date by Howard
/// Hinnant's `civil_from_days`.
fn imf_fixdate(at: SystemTime) -> String {
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = at.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let (days, time) = (secs / 86_400, secs % 86_400);
    // 1970-01-01 was a Thursday.
    let weekday = WEEKDAYS[(days % 7) as usize];
    // Years counted from 0000-03-01, so that a leap day ends its year.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let march_based = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * march_based + 2) / 5 + 1;
    let month = (march_based + 2) % 12;
    let year = era * 400 + year_of_era + u64::from(month < 2);
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        MONTHS[month as usize],
        time / 3_600,
        time / 60 % 60,
        time % 60
    )
}

#[test]
fn the_oracles_dates_are_the_calendars() {
    let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
    // RFC 9110's own example, a leap day, the epoch, the far end of the range above.
    assert_eq!(
        imf_fixdate(at(784_111_777)),
        "Sun, 06 Nov 1994 08:49:37 GMT"
    );
    assert_eq!(
        imf_fixdate(at(951_782_400)),
        "Tue, 29 Feb 2000 00:00:00 GMT"
    );
    assert_eq!(imf_fixdate(at(0)), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(
        imf_fixdate(at(4_001_000_000)),
        "Sat, 13 Oct 2096 20:53:20 GMT"
    );
}

/// A server cannot make the client sleep forever, spin, or panic.
#[tokio::test]
async fn hostile_retry_after_values_from_a_real_server() {
    let cases: [(&str, &str); 7] = [
        ("huge", "99999999999"),
        ("overflowing", "99999999999999999999999999"),
        ("negative", "-30"),
        ("non-numeric", "tomorrow"),
        ("fractional", "1.5"),
        ("past date", "Thu, 01 Jan 1970 00:00:00 GMT"),
        ("far-future date", "Fri, 31 Dec 9999 23:59:59 GMT"),
    ];
    for (what, value) in cases {
        let script = [Fault::UnavailableRaw(value.to_owned())];
        let (server, transport) = serve(script, RequestOptions::fast_retries()).await;
        let (out, log) = EventLog::record(transport.post("/", "x")).await;
        let err = out.unwrap_err();
        assert!(
            matches!(err, HttpError::Status { status: 503, .. }),
            "{what}: {err:?}"
        );
        // The sleeps the call took, and whether they were the server's.
        let sleeps: Vec<_> = log
            .events()
            .iter()
            .filter_map(|e| e.delay.map(|d| (d, e.from_hint)))
            .collect();
        let ms = Duration::from_millis;
        match what {
            // Above the 30 s cap (or the clock): not slept on; the call gives up at once.
            "huge" | "overflowing" | "far-future date" => {
                assert_eq!((server.requests(), sleeps), (1, vec![]), "{what}")
            }
            // In the past: a wait of zero.
            "past date" => assert_eq!(
                sleeps,
                [(Duration::ZERO, true), (Duration::ZERO, true)],
                "{what}"
            ),
            // Unparsable: ignored, so the backoff applies (10 ms, 40 ms).
            _ => assert_eq!(sleeps, [(ms(10), false), (ms(40), false)], "{what}"),
        }
    }
}
