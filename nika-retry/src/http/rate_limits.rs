//! The rate-limit headers of a response, in the three dialects that LLM
//! providers and gateways send: OpenAI's, Anthropic's and the IETF
//! `RateLimit` field. Pure: the reading [`Upstream::observe`] acts on.
//!
//! [`Upstream::observe`]: crate::upstream::Upstream::observe

use core::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Headers;

/// What a response's rate-limit headers say, as [`rate_limits`] reads them.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// A limit is spent (a remaining of 0): nothing more until this long
    /// from now, the longest reset among the spent limits.
    pub exhausted: Option<Duration>,
    /// The fewest requests left before their limit resets, and when it does:
    /// OpenAI's and Anthropic's request counts and the IETF field's `r`.
    pub remaining: Option<(u64, Duration)>,
}

impl RateLimits {
    fn spent(&mut self, reset: Duration) {
        self.exhausted = Some(self.exhausted.map_or(reset, |e| e.max(reset)));
    }

    fn requests(&mut self, left: u64, reset: Duration) {
        if left == 0 {
            return self.spent(reset);
        }
        // The fewest left wins; for the same count, the later reset.
        let fewer = match self.remaining {
            Some((l, r)) => left < l || (left == l && reset > r),
            None => true,
        };
        if fewer {
            self.remaining = Some((left, reset));
        }
    }
}

/// Reads the rate-limit headers of a response.
///
/// - OpenAI: `x-ratelimit-remaining-{requests,tokens}` with
///   `x-ratelimit-reset-{requests,tokens}`, a Go-style duration (`6m0s`,
///   `1s`, `12ms`, `1.5s`);
/// - Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{remaining,reset}`,
///   the reset an RFC 3339 instant (`2026-01-01T00:00:30Z`), measured against `now`;
/// - IETF `RateLimit`: each list member's `r` (remaining) and `t` (seconds
///   to reset): `"default";r=0;t=20`.
///
/// A remaining of 0 with its reset is `exhausted`; the request counts (any
/// remaining of the IETF field) are `remaining`. A pair with a value
/// missing, negative, fractional where a count is meant, or otherwise
/// unparsable is ignored; a reset too large for the clock saturates
/// (an upstream caps any hold, so this is a long hold,
/// never an overflow); a reset in the past is zero. Never panics.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use nika_retry::http::rate_limits;
///
/// let spent = [("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "6m0s")];
/// assert_eq!(rate_limits(&spent[..], SystemTime::now()).exhausted, Some(Duration::from_secs(360)));
///
/// let some_left = [("RateLimit", "\"default\";r=5;t=20")];
/// let read = rate_limits(&some_left[..], SystemTime::now());
/// assert_eq!(read.remaining, Some((5, Duration::from_secs(20))));
/// assert_eq!(read.exhausted, None);
///
/// assert_eq!(rate_limits(&[("RateLimit", "r=-1;t=oops")][..], SystemTime::now()), Default::default());
/// ```
pub fn rate_limits<H: Headers + ?Sized>(headers: &H, now: SystemTime) -> RateLimits {
    let text = |name: &str| {
        headers
            .header(name)
            .and_then(|v| core::str::from_utf8(v).ok())
            .map(str::trim)
    };
    let mut read = RateLimits::default();
    for (kind, requests) in [("requests", true), ("tokens", false)] {
        let left = text(&format!("x-ratelimit-remaining-{kind}")).and_then(count);
        let reset = text(&format!("x-ratelimit-reset-{kind}")).and_then(go_duration);
        pair(&mut read, left, reset, requests);
    }
    for (kind, requests) in [
        ("requests", true),
        ("tokens", false),
        ("input-tokens", false),
        ("output-tokens", false),
    ] {
        let left = text(&format!("anthropic-ratelimit-{kind}-remaining")).and_then(count);
        let reset =
            text(&format!("anthropic-ratelimit-{kind}-reset")).and_then(|v| rfc3339(v, now));
        pair(&mut read, left, reset, requests);
    }
    if let Some(field) = text("ratelimit") {
        for member in field.split(',') {
            let mut left = None;
            let mut reset = None;
            for param in member.split(';') {
                match param.trim().split_once('=') {
                    Some(("r", v)) => left = count(v.trim()),
                    Some(("t", v)) => reset = count(v.trim()).map(Duration::from_secs),
                    _ => {}
                }
            }
            pair(&mut read, left, reset, true);
        }
    }
    read
}

fn pair(read: &mut RateLimits, left: Option<u64>, reset: Option<Duration>, requests: bool) {
    match (left, reset) {
        (Some(0), Some(reset)) => read.spent(reset),
        (Some(left), Some(reset)) if requests => read.requests(left, reset),
        _ => {}
    }
}

/// A count: ASCII digits only; past `u64`, as good as unlimited.
fn count(value: &str) -> Option<u64> {
    (!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()))
        .then(|| value.parse().unwrap_or(u64::MAX))
}

/// A Go `time.Duration` string as OpenAI sends it: `1h2m3.5s`, `12ms`,
/// `20us`/`20µs`, `5ns`; a bare `0` is zero. Saturates at `Duration::MAX`.
fn go_duration(value: &str) -> Option<Duration> {
    if value == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = value;
    let mut total = Duration::ZERO;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let nanos_per: f64 = match unit {
            "h" => 3.6e12,
            "m" => 6e10,
            "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" | "μs" => 1e3,
            "ns" => 1.0,
            _ => return None,
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && frac.is_empty()
            || !whole
                .bytes()
                .chain(frac.bytes())
                .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let n: f64 = format!("{}.{}", if whole.is_empty() { "0" } else { whole }, frac)
            .parse()
            .ok()?;
        let part = Duration::try_from_secs_f64(n * nanos_per / 1e9).unwrap_or(Duration::MAX);
        total = total.saturating_add(part);
        rest = tail;
    }
    Some(total)
}

/// An RFC 3339 instant (`2026-01-01T00:00:30Z`, `…30.5+02:00`), as the time
/// left from `now` until it: zero if past, `None` if not a valid instant.
fn rfc3339(value: &str, now: SystemTime) -> Option<Duration> {
    let b = value.as_bytes();
    let num = |r: core::ops::Range<usize>| -> Option<i64> {
        let s = b.get(r)?;
        s.iter()
            .all(u8::is_ascii_digit)
            .then(|| s.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = |y: i64| y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days_in = [
        31,
        if leap(y) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&mo)
        || d < 1
        || d > days_in[(mo - 1) as usize]
        || h > 23
        || mi > 59
        || s > 60
    {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if sep(i, b".") {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start).min(9)..9 {
            nanos *= 10;
        }
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && sep(i + 3, b":") => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset;
    let now = match now.duration_since(UNIX_EPOCH) {
        Ok(n) => n,
        Err(_) => Duration::ZERO,
    };
    if secs < 0 {
        return Some(Duration::ZERO);
    }
    let at = Duration::new(secs.unsigned_abs(), nanos);
    Some(at.saturating_sub(now))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SystemTime {
        // 2026-01-01T00:00:00Z
        UNIX_EPOCH + Duration::from_secs(1_767_225_600)
    }

    fn read(h: &[(&str, &str)]) -> RateLimits {
        rate_limits(h, now())
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(go_duration("12ms"), Some(Duration::from_millis(12)));
        assert_eq!(
            go_duration("1h2m3.5s"),
            Some(Duration::from_millis(3_723_500))
        );
        assert_eq!(go_duration("0"), Some(Duration::ZERO));
        assert_eq!(go_duration(".5s"), Some(Duration::from_millis(500)));
        assert_eq!(go_duration("20µs"), Some(Duration::from_micros(20)));
        assert_eq!(go_duration("99999999999999999999999h"), Some(Duration::MAX));
        for bad in [
            "", "s", "1", "-1s", "1x", "1..2s", ".s", "1s2", "inf s", "NaNs",
        ] {
            assert_eq!(go_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rfc3339_instants() {
        assert_eq!(
            rfc3339("2026-01-01T00:00:30Z", now()),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            rfc3339("2026-01-01T00:00:30.25Z", now()),
            Some(Duration::from_millis(30_250))
        );
        assert_eq!(
            rfc3339("2026-01-01T01:00:30+01:00", now()),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            rfc3339("2025-12-31T23:59:00-00:00", now()),
            Some(Duration::ZERO)
        );
        assert_eq!(rfc3339("0000-01-01T00:00:00Z", now()), Some(Duration::ZERO));
        assert_eq!(
            rfc3339("9999-12-31T23:59:59Z", now()),
            Some(Duration::from_secs(253_402_300_799 - 1_767_225_600))
        );
        for bad in [
            "",
            "2026-02-30T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00Zjunk",
            "2026-01-01T00:00:00.Z",
            "-026-01-01T00:00:00Z",
            "2026-01-01T00:00:00+1:00",
            "2026-01-01T00:00:00+24:00",
        ] {
            assert_eq!(rfc3339(bad, now()), None, "{bad:?}");
        }
    }

    #[test]
    fn days_match_the_system_calendar() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2026, 1, 1) * 86_400, 1_767_225_600);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
    }

    #[test]
    fn openai_dialect() {
        let r = read(&[
            ("x-ratelimit-remaining-requests", "3"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "12ms"),
        ]);
        assert_eq!(r.remaining, Some((3, Duration::from_secs(1))));
        assert_eq!(r.exhausted, Some(Duration::from_millis(12)));
        // Tokens left are not a request count.
        let r = read(&[
            ("x-ratelimit-remaining-tokens", "7"),
            ("x-ratelimit-reset-tokens", "1s"),
        ]);
        assert_eq!(r, RateLimits::default());
    }

    #[test]
    fn anthropic_dialect() {
        let r = read(&[
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2026-01-01T00:00:20Z"),
            ("anthropic-ratelimit-output-tokens-remaining", "0"),
            (
                "anthropic-ratelimit-output-tokens-reset",
                "2026-01-01T00:00:40Z",
            ),
        ]);
        assert_eq!(r.exhausted, Some(Duration::from_secs(40)));
        assert_eq!(r.remaining, None);
    }

    #[test]
    fn ietf_field() {
        let r = read(&[("RateLimit", "\"minute\";r=9;t=50, \"second\";r=2;t=1")]);
        assert_eq!(r.remaining, Some((2, Duration::from_secs(1))));
        let r = read(&[("ratelimit", "\"default\";r=0;t=20")]);
        assert_eq!(r.exhausted, Some(Duration::from_secs(20)));
    }

    #[test]
    fn absurd_values_change_nothing_or_saturate() {
        for (name, value) in [
            ("x-ratelimit-remaining-requests", "-1"),
            ("x-ratelimit-remaining-requests", "0.5"),
            ("x-ratelimit-reset-requests", "-1s"),
            ("anthropic-ratelimit-requests-reset", "tomorrow"),
            ("ratelimit", "r=0;t=-5"),
            ("ratelimit", "r=0"),
        ] {
            let h = [
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "1s"),
                ("anthropic-ratelimit-requests-remaining", "0"),
                ("anthropic-ratelimit-requests-reset", "2026-01-01T00:00:01Z"),
            ];
            // The bad value replaces its good twin, if any: only the other dialect holds.
            let mut h: Vec<(&str, &str)> = h.into_iter().filter(|(n, _)| *n != name).collect();
            h.insert(0, (name, value));
            let r = read(&h);
            assert!(
                r.exhausted <= Some(Duration::from_secs(1)),
                "{name}: {value}: {r:?}"
            );
        }
        let r = read(&[("ratelimit", "r=0;t=99999999999999999999999")]);
        assert_eq!(r.exhausted, Some(Duration::from_secs(u64::MAX)));
        assert_eq!(
            read(&[("ratelimit", "\u{0};;;=,,r=;t=")]),
            RateLimits::default()
        );
    }
}
