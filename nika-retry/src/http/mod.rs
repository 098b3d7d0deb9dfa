//! HTTP status classification and server retry hints (`Retry-After` and friends).
//!
//! These are the L1 building blocks: the transport maps a status to an
//! [`ErrorCategory`] with [`status_category`] and reads the server's wait hint
//! with [`retry_hint`]. None of them can panic on what a server sends.

use crate::vocab::category::ErrorCategory;
use crate::vocab::reached::Reached;
use core::time::Duration;
use std::collections::HashMap;
use std::time::SystemTime;

#[cfg(feature = "reqwest")]
mod connector;
mod limit_fields;
mod rate_limits;
#[cfg(feature = "reqwest")]
mod reqwest;

#[cfg(feature = "reqwest")]
pub use self::reqwest::{classify_response, response_reached};
#[cfg(feature = "reqwest")]
pub use connector::{ConnectLayer, ConnectService, Connecting, client_builder};
pub(crate) use limit_fields::rate_limit_fields_at;
pub use limit_fields::{LimitFields, RateLimitFields, rate_limit_fields};
pub(crate) use rate_limits::{DATE_RESOLUTION, date_lag, rate_limits_at, server_now_by};
pub use rate_limits::{RateLimits, rate_limits};

/// The category of an HTTP status code.
///
/// 429 → `RateLimited`; 408 and 500–599 → `Transient`; 401 and 403 → `Auth`;
/// 404 and 410 → `NotFound`; everything else (success codes included) → `Permanent`.
///
/// ```
/// use nika_retry::{http::status_category, ErrorCategory};
///
/// assert_eq!(status_category(503), ErrorCategory::Transient);
/// assert_eq!(status_category(429), ErrorCategory::RateLimited);
/// assert_eq!(status_category(400), ErrorCategory::Permanent);
/// ```
pub const fn status_category(status: u16) -> ErrorCategory {
    match status {
        429 => ErrorCategory::RateLimited,
        408 | 500..=599 => ErrorCategory::Transient,
        401 | 403 => ErrorCategory::Auth,
        404 | 410 => ErrorCategory::NotFound,
        _ => ErrorCategory::Permanent,
    }
}

/// Whether a response of `status` says that the server did not act on the
/// request: 429 (rate limited), 503 (unavailable) and 408 (request timeout)
/// are [`Reached::Refused`], every other [`Reached::Maybe`] (a 500, 502 or
/// 504 may come after the work was done). The companion of
/// [`status_category`], for a call that is not idempotent.
///
/// ```
/// use nika_retry::{http::status_reached, Reached};
///
/// assert_eq!(status_reached(503), Reached::Refused);
/// assert_eq!(status_reached(502), Reached::Maybe);
/// ```
pub const fn status_reached(status: u16) -> Reached {
    match status {
        408 | 429 | 503 => Reached::Refused,
        _ => Reached::Maybe,
    }
}

/// The category of a response: its status's, unless the server said
/// otherwise with `x-should-retry: true` or `false` (as the OpenAI and
/// Anthropic APIs do), which wins over the status.
///
/// `true` keeps a retryable status's category (429 stays `RateLimited`) and
/// makes any other `Transient`; `false` makes it `Permanent`. Any other
/// value is ignored.
///
/// ```
/// use nika_retry::{http::response_category, ErrorCategory};
///
/// assert_eq!(response_category(503, &[("x-should-retry", "false")]), ErrorCategory::Permanent);
/// assert_eq!(response_category(409, &[("X-Should-Retry", "true")]), ErrorCategory::Transient);
/// assert_eq!(response_category(429, &[("x-should-retry", "true")]), ErrorCategory::RateLimited);
/// assert_eq!(response_category(503, &[("x-should-retry", "maybe")]), ErrorCategory::Transient);
/// ```
pub fn response_category<H: Headers + ?Sized>(status: u16, headers: &H) -> ErrorCategory {
    let category = status_category(status);
    match headers.header("x-should-retry").map(<[u8]>::trim_ascii) {
        Some(v) if v.eq_ignore_ascii_case(b"true") && !category.is_retryable() => {
            ErrorCategory::Transient
        }
        Some(v) if v.eq_ignore_ascii_case(b"false") => ErrorCategory::Permanent,
        _ => category,
    }
}

/// Parses a `Retry-After` value (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.
///
/// A date in the past (before 1970 included) gives zero; delta-seconds too
/// large for the clock give [`Duration::MAX`], a hint too long that makes
/// the call give up rather than be ignored; a negative, fractional or
/// unparsable value gives `None`. `now` is the wall clock to measure a date
/// against (pass `SystemTime::now()`).
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use nika_retry::http::parse_retry_after;
///
/// let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
/// assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
/// assert_eq!(
///     parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
///     Some(Duration::from_secs(30))
/// );
/// assert_eq!(parse_retry_after("99999999999999999999999", now), Some(Duration::MAX));
/// assert_eq!(parse_retry_after("soon", now), None);
/// ```
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Some(wait) = whole(value, Duration::from_secs) {
        return Some(wait);
    }
    match httpdate::parse_http_date(value) {
        Ok(date) => Some(date.duration_since(now).unwrap_or(Duration::ZERO)),
        Err(_) if valid_date_before_1970(value) => Some(Duration::ZERO),
        Err(_) => None,
    }
}

/// Whether `value` is an IMF-fixdate or asctime date with a year before
/// 1970, which `httpdate` cannot represent. The Gregorian calendar repeats
/// every 400 years, weekdays and leap days included, so the date is valid
/// exactly when the same date 400·k years later is. (RFC 850 dates have two
/// year digits, read as 1970–2069.)
fn valid_date_before_1970(value: &str) -> bool {
    let year_at = match value.len() {
        29 => 12..16, // Sun, 06 Nov 1994 08:49:37 GMT
        24 => 20..24, // Sun Nov  6 08:49:37 1994
        _ => return false,
    };
    let mut date = [0u8; 29];
    let date = &mut date[..value.len()];
    date.copy_from_slice(value.as_bytes());
    let year = &mut date[year_at];
    if !year.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let y = year.iter().fold(0u32, |y, d| y * 10 + u32::from(d - b'0'));
    if y >= 1970 {
        return false;
    }
    let shifted = y + 400 * (1970 - y).div_ceil(400);
    for (i, digit) in year.iter_mut().rev().enumerate() {
        *digit = b'0' + (shifted / 10u32.pow(i as u32) % 10) as u8;
    }
    core::str::from_utf8(date).is_ok_and(|d| httpdate::parse_http_date(d).is_ok())
}

/// Parses a millisecond hint (`retry-after-ms: 1500`, decimals allowed).
/// Too large for the clock, it is `Duration::MAX`, as in `Retry-After`.
fn parse_millis(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Some(wait) = whole(value, Duration::from_millis) {
        return Some(wait);
    }
    // Only plain decimals: `f64::from_str` would also take "inf", "NaN" and exponents.
    if !value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let ms: f64 = value.parse().ok()?;
    Some(Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::MAX))
}

/// A whole number of `unit`s, if `value` is all digits: one too large for
/// the clock is `Duration::MAX`, a hint too long to wait (the call gives up)
/// rather than no hint (the backoff would then apply).
fn whole(value: &str, unit: fn(u64) -> Duration) -> Option<Duration> {
    (!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()))
        .then(|| value.parse().map_or(Duration::MAX, unit))
}

/// Reads the server's wait hint from response headers.
///
/// In order, the first present and valid one wins: `retry-after-ms` (the LLM
/// providers' header), `x-amz-retry-after` (ms), `grpc-retry-pushback-ms`,
/// then `Retry-After`. Names match case-insensitively. A `Retry-After` date
/// is read against `now`, or against the response's `Date` where that shows
/// the server's clock more than a second away from `now`.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use nika_retry::http::retry_hint;
///
/// let headers = [("Retry-After", "7"), ("retry-after-ms", "1500")];
/// assert_eq!(retry_hint(&headers[..], SystemTime::now()), Some(Duration::from_millis(1500)));
/// ```
pub fn retry_hint<H: Headers + ?Sized>(headers: &H, now: SystemTime) -> Option<Duration> {
    let text = |name| {
        headers
            .header(name)
            .and_then(|v| core::str::from_utf8(v).ok())
    };
    [
        "retry-after-ms",
        "x-amz-retry-after",
        "grpc-retry-pushback-ms",
    ]
    .into_iter()
    .find_map(|name| text(name).and_then(parse_millis))
    .or_else(|| {
        let now = rate_limits::server_now(headers, now);
        text("retry-after").and_then(|v| parse_retry_after(v, now))
    })
}

/// Response headers that [`retry_hint`] can read.
///
/// Implemented for slices, arrays and vectors of `(name, value)` pairs, for
/// `HashMap`s of them, and (feature `reqwest`) for `http::HeaderMap`.
pub trait Headers {
    /// The value of the first header called `name` (lowercase), compared case-insensitively.
    fn header(&self, name: &str) -> Option<&[u8]>;
}

impl<K: AsRef<str>, V: AsRef<[u8]>> Headers for [(K, V)] {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }
}

impl<K: AsRef<str>, V: AsRef<[u8]>, const N: usize> Headers for [(K, V); N] {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self[..].header(name)
    }
}

impl<K: AsRef<str>, V: AsRef<[u8]>> Headers for Vec<(K, V)> {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self[..].header(name)
    }
}

/// The header map of the `http` crate, which reqwest and the `tower`
/// layer's `http::Response` share.
#[cfg(any(feature = "reqwest", feature = "tower"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "reqwest", feature = "tower"))))]
impl Headers for ::http::HeaderMap {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.get(name).map(|v| v.as_bytes())
    }
}

impl<K: AsRef<str>, V: AsRef<[u8]>, S> Headers for HashMap<K, V, S> {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    /// Wed, 21 Oct 2015 07:28:00 GMT
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    #[test]
    fn statuses_map_as_designed() {
        assert_eq!(status_category(429), ErrorCategory::RateLimited);
        for s in [408, 500, 502, 503, 504, 599] {
            assert_eq!(status_category(s), ErrorCategory::Transient, "{s}");
        }
        for s in [401, 403] {
            assert_eq!(status_category(s), ErrorCategory::Auth, "{s}");
        }
        for s in [404, 410] {
            assert_eq!(status_category(s), ErrorCategory::NotFound, "{s}");
        }
        for s in [0, 200, 301, 400, 402, 409, 422, 499, 600, u16::MAX] {
            assert_eq!(status_category(s), ErrorCategory::Permanent, "{s}");
        }
    }

    #[test]
    fn only_429_503_and_408_say_refused() {
        for s in [408, 429, 503] {
            assert_eq!(status_reached(s), Reached::Refused, "{s}");
        }
        for s in [0, 200, 400, 404, 409, 500, 502, 504, u16::MAX] {
            assert_eq!(status_reached(s), Reached::Maybe, "{s}");
        }
    }

    #[test]
    fn retry_after_seconds() {
        assert_eq!(parse_retry_after("0", now()), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(" 30 ", now()),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("18446744073709551615", now()),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn retry_after_dates_in_all_three_formats() {
        let in_30s = Some(Duration::from_secs(30));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now()),
            in_30s
        );
        assert_eq!(
            parse_retry_after("Wednesday, 21-Oct-15 07:28:30 GMT", now()),
            in_30s
        );
        assert_eq!(parse_retry_after("Wed Oct 21 07:28:30 2015", now()), in_30s);
    }

    #[test]
    fn retry_after_date_in_the_past_is_zero() {
        assert_eq!(
            parse_retry_after("Tue, 20 Oct 2015 07:28:00 GMT", now()),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn retry_after_garbage_and_negative_are_none() {
        for bad in [
            "",
            "soon",
            "-1",
            "+5",
            "1.5",
            "1e3",
            "Wed, 32 Oct 2015 07:28:00 GMT",
            "\u{0}",
        ] {
            assert_eq!(parse_retry_after(bad, now()), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_seconds_too_large_for_the_clock_are_a_hint_too_long() {
        for huge in [
            "18446744073709551616",
            "99999999999999999999999",
            &"9".repeat(500),
        ] {
            assert_eq!(
                parse_retry_after(huge, now()),
                Some(Duration::MAX),
                "{huge:?}"
            );
        }
        let headers = [("retry-after", "99999999999999999999999")];
        assert_eq!(retry_hint(&headers, now()), Some(Duration::MAX));
    }

    #[test]
    fn retry_after_dates_before_1970_are_in_the_past() {
        for old in [
            "Wed, 01 Jan 1969 00:00:00 GMT",
            "Sat, 01 Jan 0000 00:00:00 GMT",
            "Wed, 31 Dec 1969 23:59:59 GMT",
            "Thu, 29 Feb 1968 12:00:00 GMT",
            "Sun Jul 20 20:17:40 1969",
            "Sun Nov  6 08:49:37 1594",
        ] {
            assert_eq!(
                parse_retry_after(old, now()),
                Some(Duration::ZERO),
                "{old:?}"
            );
        }
        for invalid in [
            "Thu, 01 Jan 1969 00:00:00 GMT", // a Wednesday
            "Fri, 29 Feb 1969 12:00:00 GMT", // not a leap year
            "Mon, 32 Jan 1900 00:00:00 GMT",
            "Thu, 01 Jan 19x9 00:00:00 GMT",
            "Sun Nov 31 08:49:37 1594",
        ] {
            assert_eq!(parse_retry_after(invalid, now()), None, "{invalid:?}");
        }
    }

    #[test]
    fn x_should_retry_wins_over_the_status() {
        let says = |value: &'static str| [("x-should-retry", value)];
        assert_eq!(
            response_category(503, &says("false")),
            ErrorCategory::Permanent
        );
        assert_eq!(
            response_category(429, &says(" FALSE ")),
            ErrorCategory::Permanent
        );
        assert_eq!(
            response_category(400, &says("true")),
            ErrorCategory::Transient
        );
        assert_eq!(
            response_category(401, &says("True")),
            ErrorCategory::Transient
        );
        assert_eq!(
            response_category(429, &says("true")),
            ErrorCategory::RateLimited
        );
        assert_eq!(
            response_category(503, &says("true")),
            ErrorCategory::Transient
        );
        assert_eq!(
            response_category(400, &says("yes")),
            ErrorCategory::Permanent
        );
        let none: [(&str, &str); 0] = [];
        assert_eq!(response_category(503, &none), ErrorCategory::Transient);
    }

    #[test]
    fn millisecond_hints() {
        assert_eq!(parse_millis("1500"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_millis("2.5"), Some(Duration::from_micros(2500)));
        for bad in ["", "-5", "inf", "NaN", "1e400", "1.2.3", "."] {
            assert_eq!(parse_millis(bad), None, "{bad:?}");
        }
        let huge = "9".repeat(400);
        assert_eq!(parse_millis(&huge), Some(Duration::MAX), "too long to wait");
        assert_eq!(parse_millis(&format!("{huge}.5")), Some(Duration::MAX));
    }

    #[test]
    fn hint_headers_in_precedence_order() {
        let all = [
            ("Retry-After", "9"),
            ("grpc-retry-pushback-ms", "3000"),
            ("X-Amz-Retry-After", "2000"),
            ("retry-after-ms", "1000"),
        ];
        assert_eq!(retry_hint(&all, now()), Some(Duration::from_millis(1000)));
        assert_eq!(
            retry_hint(&all[..3], now()),
            Some(Duration::from_millis(2000))
        );
        assert_eq!(
            retry_hint(&all[..2], now()),
            Some(Duration::from_millis(3000))
        );
        assert_eq!(retry_hint(&all[..1], now()), Some(Duration::from_secs(9)));
        assert_eq!(retry_hint(&all[..0], now()), None);
    }

    #[test]
    fn an_invalid_hint_falls_through_to_the_next() {
        let headers = vec![("retry-after-ms", "-1"), ("retry-after", "4")];
        assert_eq!(retry_hint(&headers, now()), Some(Duration::from_secs(4)));
        let map: HashMap<&str, &[u8]> = [("retry-after", &b"\xff"[..])].into_iter().collect();
        assert_eq!(retry_hint(&map, now()), None);
    }

    #[test]
    fn a_map_of_headers_is_read_like_a_list() {
        let map: HashMap<String, Vec<u8>> = [
            ("Retry-After".to_owned(), b"12".to_vec()),
            ("x-other".to_owned(), b"3".to_vec()),
        ]
        .into_iter()
        .collect();
        assert_eq!(map.header("retry-after"), Some(&b"12"[..]));
        assert_eq!(retry_hint(&map, now()), Some(Duration::from_secs(12)));
    }
}
