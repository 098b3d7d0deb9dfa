//! [`rate_limits`]: what a response's rate-limit headers say is left.

use core::time::Duration;
use std::time::SystemTime;

use super::Headers;

/// What a response's rate-limit headers say: at most `remaining` more
/// requests before `reset` from now (0: none until then).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use nika_retry::http::{rate_limits, RateLimits};
///
/// let headers = [("ratelimit", "\"default\";r=50;t=30")];
/// let limits: RateLimits = rate_limits(&headers[..], SystemTime::now()).unwrap();
/// assert_eq!((limits.remaining, limits.reset), (50, Duration::from_secs(30)));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimits {
    /// Requests left before `reset`.
    pub remaining: u32,
    /// When the count resets, from the response.
    pub reset: Duration,
}

/// One limit a dialect reports: `remaining` of it until `reset`; `requests`
/// when it counts requests (tokens only ever hold when none are left).
struct Limit {
    remaining: u64,
    reset: Duration,
    requests: bool,
}

/// Reads the rate-limit headers of a response as `now` (the response's
/// time; the response's `Date` where it shows the server's clock more than
/// a second away) sees them: OpenAI's `x-ratelimit-remaining-{requests,tokens}` with
/// `x-ratelimit-reset-*` (a Go duration: `6m0s`, `1s`, `12ms`), Anthropic's
/// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{remaining,reset}`
/// (the reset an RFC 3339 instant), and the IETF `RateLimit` field (`r=`
/// remaining, `t=` seconds).
///
/// Any limit with nothing left wins (the latest reset among them); else the
/// requests left, if a dialect counts them. `None` when no header says
/// anything usable: an unparsable, negative or past value is ignored,
/// never a panic.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use nika_retry::http::{rate_limits, RateLimits};
///
/// let openai = [
///     ("x-ratelimit-remaining-requests", "59"),
///     ("x-ratelimit-reset-requests", "1s"),
///     ("x-ratelimit-remaining-tokens", "0"),
///     ("x-ratelimit-reset-tokens", "6m0s"),
/// ];
/// let limits = rate_limits(&openai[..], SystemTime::now()).unwrap();
/// assert_eq!((limits.remaining, limits.reset), (0, Duration::from_secs(360)), "tokens ran out");
///
/// assert_eq!(rate_limits(&[("x-ratelimit-reset-requests", "soon")][..], SystemTime::now()), None);
/// ```
pub fn rate_limits<H: Headers + ?Sized>(headers: &H, now: SystemTime) -> Option<RateLimits> {
    rate_limits_at(headers, server_now(headers, now))
}

/// [`rate_limits`], read against the server's now already decided.
pub(crate) fn rate_limits_at<H: Headers + ?Sized>(
    headers: &H,
    now: SystemTime,
) -> Option<RateLimits> {
    let openai = OPENAI.iter().filter_map(|&(remaining, reset, requests)| {
        Some(Limit {
            remaining: count(header(headers, remaining)?)?,
            reset: go_duration(header(headers, reset)?)?,
            requests,
        })
    });
    let anthropic = ANTHROPIC
        .iter()
        .filter_map(|&(remaining, reset, requests)| {
            let at = rfc3339(header(headers, reset)?.trim())?;
            Some(Limit {
                remaining: count(header(headers, remaining)?)?,
                reset: at.duration_since(now).ok()?,
                requests,
            })
        });
    let ietf = header(headers, "ratelimit").into_iter().flat_map(ietf);
    let limits = openai
        .chain(anthropic)
        .chain(ietf)
        .filter(|l| !l.reset.is_zero());
    let mut spent: Option<Duration> = None;
    let mut requests: Option<RateLimits> = None;
    for limit in limits {
        if limit.remaining == 0 {
            spent = Some(spent.map_or(limit.reset, |s| s.max(limit.reset)));
        } else if limit.requests {
            let remaining = u32::try_from(limit.remaining).unwrap_or(u32::MAX);
            let tighter = requests.is_none_or(|r| remaining < r.remaining);
            if tighter {
                requests = Some(RateLimits {
                    remaining,
                    reset: limit.reset,
                });
            }
        }
    }
    match spent {
        Some(reset) => Some(RateLimits {
            remaining: 0,
            reset,
        }),
        None => requests,
    }
}

/// `(remaining, reset, counts requests)` header names of OpenAI's dialect.
const OPENAI: [(&str, &str, bool); 2] = [
    (
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
        true,
    ),
    (
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
        false,
    ),
];

/// The same for Anthropic's.
const ANTHROPIC: [(&str, &str, bool); 4] = [
    (
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
        true,
    ),
    (
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-tokens-reset",
        false,
    ),
    (
        "anthropic-ratelimit-input-tokens-remaining",
        "anthropic-ratelimit-input-tokens-reset",
        false,
    ),
    (
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-reset",
        false,
    ),
];

pub(super) fn header<'h, H: Headers + ?Sized>(headers: &'h H, name: &str) -> Option<&'h str> {
    headers
        .header(name)
        .and_then(|v| core::str::from_utf8(v).ok())
}

/// A count: digits only (no sign, no fraction).
pub(super) fn count(value: &str) -> Option<u64> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Past u64: as many as can be, not an error.
    Some(value.parse().unwrap_or(u64::MAX))
}

/// A Go-style duration: `6m0s`, `1h2m3.5s`, `12ms`, `250us`; `0` alone.
pub(super) fn go_duration(value: &str) -> Option<Duration> {
    let mut rest = value.trim();
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        let number: f64 = number.parse().ok().filter(|n: &f64| n.is_finite())?;
        total = total.checked_add(Duration::try_from_secs_f64(number * scale).ok()?)?;
        rest = tail;
    }
    Some(total)
}

/// An RFC 3339 instant, in UTC (`Z`) or at an offset (`+02:00`).
/// The instant a response's own instants (Anthropic's resets, a
/// `Retry-After` date) are read against: `now`, the machine's clock when
/// the response arrived, unless the response's `Date` shows the server's
/// clock elsewhere by more than `Date`'s second of resolution; then the
/// `Date` ([`server_now_by`]).
pub(super) fn server_now<H: Headers + ?Sized>(headers: &H, now: SystemTime) -> SystemTime {
    server_now_by(now, date_lag(headers, now))
}

/// `Date`'s resolution, a second, in nanoseconds: a clock that agrees
/// with this one writes a `Date` up to that far behind.
pub(crate) const DATE_RESOLUTION: i64 = 1_000_000_000;

/// How far a response's `Date` is behind `now`, in nanoseconds (negative:
/// ahead); `None` without a `Date` that can be read.
pub(crate) fn date_lag<H: Headers + ?Sized>(headers: &H, now: SystemTime) -> Option<i64> {
    let date = header(headers, "date").and_then(|v| httpdate::parse_http_date(v.trim()).ok())?;
    let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    Some(match now.duration_since(date) {
        Ok(behind) => nanos(behind),
        Err(ahead) => -nanos(ahead.duration()),
    })
}

/// The server's now, as a `Date`'s `lag` behind `now` shows it (one
/// response's; an upstream's decided with its recent ones): `now` while
/// the lag lies within `Date`'s second of resolution (a clock that agrees
/// with this one writes a `Date` up to a second behind, never ahead), else
/// `now - lag`, the `Date` itself. The server's true now is at least that,
/// so an instant read against it is never read early: every estimate errs
/// on the server's side. A server 1.5 s behind would otherwise have every
/// reset of a 1 s window read as past (and the limit's window as unknown);
/// one 1.5 s ahead, every reset 1.5 s late.
pub(crate) fn server_now_by(now: SystemTime, lag: Option<i64>) -> SystemTime {
    let by = |lag: i64| Duration::from_nanos(lag.unsigned_abs());
    match lag {
        Some(lag) if lag >= DATE_RESOLUTION => now.checked_sub(by(lag)),
        Some(lag) if lag < 0 => now.checked_add(by(lag)),
        _ => None,
    }
    .unwrap_or(now)
}

pub(super) fn rfc3339(value: &str) -> Option<SystemTime> {
    let Some((local, zone)) = value
        .len()
        .checked_sub(6)
        .filter(|&at| value.is_char_boundary(at))
        .map(|at| value.split_at(at))
        .filter(|(_, zone)| zone.starts_with(['+', '-']))
    else {
        return humantime::parse_rfc3339(value).ok();
    };
    let (hours, minutes) = zone[1..].split_once(':')?;
    let [hours, minutes] = [hours, minutes].map(|n| count(n).filter(|_| n.len() == 2));
    let offset =
        Duration::from_secs(hours.filter(|&h| h < 24)? * 3600 + minutes.filter(|&m| m < 60)? * 60);
    // humantime reads UTC only: read the local time as UTC, then shift it.
    let local = humantime::parse_rfc3339(&format!("{local}Z")).ok()?;
    if zone.starts_with('+') {
        local.checked_sub(offset)
    } else {
        local.checked_add(offset)
    }
}

/// The IETF `RateLimit` field: a list of policies, one limit each
/// (`"minute";r=50;t=30, "day";r=0;t=3600`); the draft's older single
/// `limit=100, remaining=50, reset=30`, whose commas part the parameters,
/// when no member is a limit by itself.
fn ietf(value: &str) -> impl Iterator<Item = Limit> + '_ {
    let mut members = value.split(',').filter_map(ietf_params).peekable();
    let whole = members
        .peek()
        .is_none()
        .then(|| ietf_params(value))
        .flatten();
    members.chain(whole)
}

/// The first `r`/`remaining` and `t`/`reset` among `;`- or `,`-separated
/// parameters.
fn ietf_params(value: &str) -> Option<Limit> {
    let mut remaining = None;
    let mut reset = None;
    for param in value.split([';', ',']) {
        let Some((key, val)) = param.split_once('=') else {
            continue;
        };
        let val = val.trim();
        match key.trim() {
            "r" | "remaining" => remaining = remaining.or(count(val)),
            "t" | "reset" => reset = reset.or(count(val)),
            _ => {}
        }
    }
    Some(Limit {
        remaining: remaining?,
        reset: Duration::from_secs(reset?),
        requests: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    fn read(headers: &[(&str, &str)]) -> Option<(u32, Duration)> {
        rate_limits(headers, now()).map(|l| (l.remaining, l.reset))
    }

    /// Anthropic's reset 3 s after `now()` by the machine's clock, beside
    /// the server's `Date` `date_offset` seconds from `now()`.
    fn reset_beside_a_date(date_offset: i64) -> Option<Duration> {
        let date = now()
            .checked_add(Duration::from_secs(date_offset.max(0).unsigned_abs()))
            .and_then(|t| t.checked_sub(Duration::from_secs(date_offset.min(0).unsigned_abs())))
            .unwrap();
        let date = httpdate::fmt_http_date(date);
        let at = humantime::format_rfc3339(now() + Duration::from_secs(3)).to_string();
        let headers = [
            ("anthropic-ratelimit-requests-remaining", "4"),
            ("anthropic-ratelimit-requests-reset", at.as_str()),
            ("date", date.as_str()),
        ];
        rate_limits(&headers[..], now()).map(|l| l.reset)
    }

    #[test]
    fn an_instant_is_read_against_the_date_of_a_server_whose_clock_is_elsewhere() {
        // The same clock (a `Date` of this second): the machine's now.
        assert_eq!(reset_beside_a_date(0), Some(Duration::from_secs(3)));
        // 2 s behind: the reset is 5 s from the server's now, not 3.
        assert_eq!(reset_beside_a_date(-2), Some(Duration::from_secs(5)));
        // 2 s ahead: 1 s, not 3; 5 s ahead, the reset is past: ignored.
        assert_eq!(reset_beside_a_date(2), Some(Duration::from_secs(1)));
        assert_eq!(reset_beside_a_date(5), None);
        // A `Date` that cannot be read changes nothing.
        let at = humantime::format_rfc3339(now() + Duration::from_secs(3)).to_string();
        let headers = [
            ("anthropic-ratelimit-requests-remaining", "4"),
            ("anthropic-ratelimit-requests-reset", at.as_str()),
            ("date", "yesterday"),
        ];
        assert_eq!(read(&headers), Some((4, Duration::from_secs(3))));
    }

    #[test]
    fn go_durations() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("6m0s", Some(ms(360_000))),
            ("1s", Some(ms(1000))),
            ("12ms", Some(ms(12))),
            ("1h2m3.5s", Some(ms(3_723_500))),
            ("250us", Some(Duration::from_micros(250))),
            ("0", Some(Duration::ZERO)),
            ("", None),
            ("-1s", None),
            ("1", None),
            ("1d", None),
            ("s", None),
            ("1.2.3s", None),
            ("99999999999999999999999h", None),
        ] {
            assert_eq!(go_duration(text), want, "{text:?}");
        }
    }

    #[test]
    fn openai_requests_left_and_tokens_spent() {
        let headers = [
            ("x-ratelimit-remaining-requests", "3"),
            ("x-ratelimit-reset-requests", "20s"),
        ];
        assert_eq!(read(&headers), Some((3, Duration::from_secs(20))));
        let headers = [
            ("x-ratelimit-remaining-requests", "3"),
            ("x-ratelimit-reset-requests", "20s"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "1m"),
        ];
        assert_eq!(read(&headers), Some((0, Duration::from_secs(60))));
        let tokens_left = [
            ("x-ratelimit-remaining-tokens", "10"),
            ("x-ratelimit-reset-tokens", "1m"),
        ];
        assert_eq!(
            read(&tokens_left),
            None,
            "tokens left do not bound the requests"
        );
    }

    #[test]
    fn anthropic_instants_against_the_responses_time() {
        let at = |s: u64| humantime::format_rfc3339(now() + Duration::from_secs(s)).to_string();
        let (in_30, in_90) = (at(30), at(90));
        let headers = [
            ("anthropic-ratelimit-requests-remaining", "7"),
            ("anthropic-ratelimit-requests-reset", in_30.as_str()),
        ];
        assert_eq!(read(&headers), Some((7, Duration::from_secs(30))));
        let headers = [
            ("anthropic-ratelimit-output-tokens-remaining", "0"),
            ("anthropic-ratelimit-output-tokens-reset", in_90.as_str()),
        ];
        assert_eq!(read(&headers), Some((0, Duration::from_secs(90))));
        let past = humantime::format_rfc3339(now() - Duration::from_secs(5)).to_string();
        let headers = [
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", past.as_str()),
        ];
        assert_eq!(read(&headers), None, "a past reset holds nothing");
    }

    #[test]
    fn ietf_field_both_spellings() {
        assert_eq!(
            read(&[("RateLimit", "\"default\";r=0;t=12")]),
            Some((0, Duration::from_secs(12)))
        );
        assert_eq!(
            read(&[("ratelimit", "limit=100, remaining=50, reset=30")]),
            Some((50, Duration::from_secs(30)))
        );
        assert_eq!(read(&[("ratelimit", "\"default\";r=5")]), None, "no reset");
    }

    #[test]
    fn rfc3339_at_an_offset() {
        let at = |text| rfc3339(text).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(at("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(at("2023-11-15T00:43:20+02:30"), Some(1_700_000_000));
        assert_eq!(at("2023-11-14T15:13:20-07:00"), Some(1_700_000_000));
        for bad in [
            "2023-11-14T22:13:20+2:300",
            "2023-11-14T22:13:20+25:00",
            "+01:00",
            "2023-11-14T22:13:20",
        ] {
            assert_eq!(at(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ietf_policies_each_a_limit() {
        let field = "\"minute\";r=50;t=30, \"hour\";r=7;t=900";
        assert_eq!(
            read(&[("RateLimit", field)]),
            Some((7, Duration::from_secs(900)))
        );
        let field = "\"minute\";r=50;t=30, \"day\";r=0;t=3600, \"hour\";r=0;t=60";
        assert_eq!(
            read(&[("RateLimit", field)]),
            Some((0, Duration::from_secs(3600))),
            "the spent policy that lasts longest"
        );
    }

    #[test]
    fn garbage_changes_nothing() {
        for value in ["-3", "1e9", "", " ", "NaN", "٣", "18446744073709551616000"] {
            let headers = [
                ("x-ratelimit-remaining-requests", value),
                ("x-ratelimit-reset-requests", "1s"),
            ];
            let got = read(&headers);
            assert!(
                got.is_none() || got == Some((u32::MAX, Duration::from_secs(1))),
                "{value:?}: {got:?}"
            );
        }
        let far = [("ratelimit", "r=0;t=99999999999999999999")];
        assert_eq!(
            read(&far).map(|r| r.0),
            Some(0),
            "a huge reset is read, the upstream caps it"
        );
    }
}
