//! `http::rate_limits`: the OpenAI, Anthropic and IETF `RateLimit` headers,
//! checked against values generated here (Go-style durations summed from
//! their parts, RFC 3339 instants written from the civil date of a count
//! of seconds) and, for arbitrary bytes under each header name, against
//! what the raw values allow (a spent limit needs a remaining of zero
//! somewhere; a request count is one a header spells).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nika_retry::http::{LimitFields, RateLimits, rate_limit_fields, rate_limits};

use crate::bytes::Bytes;
use crate::retry_after::civil;

/// The first second of the year 10000: RFC 3339 years have four digits.
const YEAR_10000: u64 = 253_402_300_800;

const REMAINING: [&str; 6] = [
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-output-tokens-remaining",
];
const REQUESTS: [&str; 2] = [
    "x-ratelimit-remaining-requests",
    "anthropic-ratelimit-requests-remaining",
];
const NAMES: [&str; 14] = [
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset",
    "RateLimit",
    "x-other",
];

/// Checks the input as raw header values, then as the recipe of generated ones.
pub fn check(data: &[u8]) {
    let mut input = Bytes(data);
    let now = UNIX_EPOCH + Duration::from_secs(input.u64() % YEAR_10000);
    check_raw(data, now);
    check_limit_fields(data, now);
    check_go_duration(&mut input, now);
    check_rfc3339(&mut input, now);
    check_ietf(&mut input, now);
}

/// How long a read says to hold: a limit with nothing left.
fn spent(read: Option<RateLimits>) -> Option<Duration> {
    read.filter(|r| r.remaining == 0).map(|r| r.reset)
}

/// The requests a read says are left, when some are.
fn left(read: Option<RateLimits>) -> Option<u64> {
    read.filter(|r| r.remaining > 0)
        .map(|r| u64::from(r.remaining))
}

/// A value as the parser sees it: UTF-8, trimmed of any whitespace.
fn text(v: &[u8]) -> Option<&[u8]> {
    std::str::from_utf8(v).ok().map(|t| t.trim().as_bytes())
}

/// All zeros (at least one digit): the only counts that read as spent.
fn zero(v: &[u8]) -> bool {
    text(v).is_some_and(|v| !v.is_empty() && v.iter().all(|&b| b == b'0'))
}

/// The count that all-digit text spells, digit by digit (past `u32`, as
/// [`RateLimits::remaining`] holds it, `u32::MAX`).
fn digits(v: &[u8]) -> Option<u64> {
    let v = text(v)?;
    (!v.is_empty() && v.iter().all(u8::is_ascii_digit)).then(|| {
        v.iter()
            .try_fold(0u64, |n, d| {
                n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })
            .map_or(u64::from(u32::MAX), |n| n.min(u64::from(u32::MAX)))
    })
}

/// The `r=` values of an IETF field, by splitting on every separator.
fn ietf_r(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',' || b == b';')
        .filter_map(|p| p.trim_ascii().strip_prefix(b"r="))
}

/// Arbitrary bytes under each name (pieces split at 0xFF, the first byte
/// choosing the name): never a panic; a spent limit only where some
/// remaining reads zero; a request count only one that a header spells, never zero.
fn check_raw(data: &[u8], now: SystemTime) {
    let headers: Vec<(&str, &[u8])> = data
        .split(|&b| b == 0xFF)
        .filter_map(|piece| piece.split_first())
        .map(|(&tag, value)| (NAMES[usize::from(tag) % NAMES.len()], value))
        .collect();
    let first = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    };
    let read = rate_limits(&headers[..], now);
    let field = first("ratelimit").filter(|v| std::str::from_utf8(v).is_ok());
    if spent(read).is_some() {
        let spent = REMAINING.iter().any(|n| first(n).is_some_and(zero))
            || field.is_some_and(|f| ietf_r(f).any(zero));
        assert!(spent, "{headers:?}: {read:?}");
    }
    if let Some(left) = left(read) {
        let spelled = REQUESTS
            .iter()
            .filter_map(|n| first(n).and_then(digits))
            .chain(field.into_iter().flat_map(|f| ietf_r(f).filter_map(digits)))
            .any(|n| n == left);
        assert!(spelled, "{headers:?}: {read:?}");
    }
    for name in NAMES {
        let _ = rate_limits(&[(name, data)][..], now);
    }
}

/// The limit fields' header names, and the ones they are read beside.
const LIMIT_NAMES: [&str; 12] = [
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-input-tokens-limit",
    "RateLimit-Policy",
    "RateLimit",
    "x-other",
];

/// The count all-digit text spells, saturating at `u64::MAX`.
fn digits64(v: &[u8]) -> Option<u64> {
    let v = text(v)?;
    (!v.is_empty() && v.iter().all(u8::is_ascii_digit)).then(|| {
        v.iter()
            .try_fold(0u64, |n, d| {
                n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })
            .unwrap_or(u64::MAX)
    })
}

/// Arbitrary bytes under the limit fields' names: never a panic; a limit
/// (or a remaining) read from OpenAI's or Anthropic's headers is one their
/// value spells; a policy's quota one that a `q=` spells; a window a `w=`
/// in seconds; no reset an `Instant` could not hold past a day's worth of
/// `MAX_HOLD` (the upstream caps it; the read itself never overflows).
fn check_limit_fields(data: &[u8], now: SystemTime) {
    let headers: Vec<(&str, &[u8])> = data
        .split(|&b| b == 0xFF)
        .filter_map(|piece| piece.split_first())
        .map(|(&tag, value)| (LIMIT_NAMES[usize::from(tag) % LIMIT_NAMES.len()], value))
        .collect();
    let first = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    };
    let fields = rate_limit_fields(&headers[..], now);
    let policy = first("ratelimit-policy").filter(|v| std::str::from_utf8(v).is_ok());
    let params = |key: &'static [u8]| {
        policy.into_iter().flat_map(move |p| {
            p.split(|&b| b == b',' || b == b';')
                .filter_map(move |param| {
                    let (k, v) = param.split_at(param.iter().position(|&b| b == b'=')?);
                    (k.trim_ascii() == key).then(|| digits64(&v[1..])).flatten()
                })
        })
    };
    let spelled = |limit: Option<u64>, names: &[&str], key: &'static [u8]| {
        limit.is_none_or(|l| {
            names.iter().any(|n| first(n).and_then(digits64) == Some(l))
                || params(key).any(|q| q == l)
        })
    };
    let LimitFields {
        limit,
        remaining,
        window,
        ..
    } = fields.requests;
    assert!(
        spelled(
            limit,
            &[
                "x-ratelimit-limit-requests",
                "anthropic-ratelimit-requests-limit"
            ],
            b"q"
        ),
        "{headers:?}: {fields:?}"
    );
    assert!(
        spelled(remaining, &["x-ratelimit-remaining-requests"], b"r")
            || first("ratelimit").is_some(),
        "{headers:?}: {fields:?}"
    );
    assert!(
        window.is_none_or(|w| params(b"w").any(|s| s == w.as_secs())),
        "{headers:?}: {fields:?}"
    );
    let tokens = fields.tokens;
    assert!(
        spelled(
            tokens.limit,
            &[
                "x-ratelimit-limit-tokens",
                "anthropic-ratelimit-tokens-limit",
                "anthropic-ratelimit-input-tokens-limit"
            ],
            b"q"
        ),
        "{headers:?}: {fields:?}"
    );
    for name in LIMIT_NAMES {
        let _ = rate_limit_fields(&[(name, data)][..], now);
    }
}

/// A Go duration written from hours, minutes, seconds (maybe with a
/// fraction) or milliseconds reads as their sum; signed, it is ignored.
fn check_go_duration(input: &mut Bytes<'_>, now: SystemTime) {
    let (h, m, s, ms) = (
        u64::from(input.u8()),
        u64::from(input.u8() % 60),
        u64::from(input.u8() % 60),
        u64::from(input.u8()) * 4,
    );
    let shape = input.u8();
    let (text, want) = match shape % 4 {
        0 => (format!("{h}h{m}m{s}s"), (h * 3600 + m * 60 + s) * 1000),
        1 => (format!("{m}m{s}s"), (m * 60 + s) * 1000),
        2 => (format!("{ms}ms"), ms),
        _ => (format!("{s}.{:03}s", ms % 1000), s * 1000 + ms % 1000),
    };
    let want = Duration::from_millis(want);
    let hold = |reset: &str| {
        spent(rate_limits(
            &[
                ("x-ratelimit-remaining-tokens", "0"),
                ("x-ratelimit-reset-tokens", reset),
            ][..],
            now,
        ))
    };
    // A reset of zero holds nothing.
    if want.is_zero() {
        assert_eq!(hold(&text), None, "{text:?}");
        return;
    }
    let got = hold(&text).unwrap_or_else(|| panic!("{text:?} not read"));
    // A fraction goes through floating point: within a microsecond.
    assert!(
        got.abs_diff(want) <= Duration::from_micros(1),
        "{text:?}: {got:?}"
    );
    assert_eq!(hold(&format!("-{text}")), None, "-{text:?}");
    let allowed = left(rate_limits(
        &[
            (
                "x-ratelimit-remaining-requests",
                &*format!("{}", shape / 4 + 1),
            ),
            ("x-ratelimit-reset-requests", &*text),
        ][..],
        now,
    ));
    assert_eq!(allowed, Some(u64::from(shape / 4) + 1));
}

/// An RFC 3339 instant, in UTC or at an offset, reads as its distance from
/// `now` (none if not after it); an impossible day is no instant.
fn check_rfc3339(input: &mut Bytes<'_>, now: SystemTime) {
    let secs = input.u64() % YEAR_10000;
    let offset_min = i64::from(input.u8() % 48) * 30 - 720;
    let local = secs as i64 + offset_min * 60;
    let write = |at: i64, zone: &str| {
        let (y, mo, d, _) = civil(at);
        let t = at.rem_euclid(86_400);
        format!(
            "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}{zone}",
            t / 3600,
            t / 60 % 60,
            t % 60
        )
    };
    let want = (UNIX_EPOCH + Duration::from_secs(secs))
        .duration_since(now)
        .ok()
        .filter(|d| !d.is_zero());
    let reset = |text: &str| {
        spent(rate_limits(
            &[
                ("anthropic-ratelimit-requests-remaining", "0"),
                ("anthropic-ratelimit-requests-reset", text),
            ][..],
            now,
        ))
    };
    let utc = write(secs as i64, "Z");
    assert_eq!(reset(&utc), want, "{utc:?} at {now:?}");
    if (0..YEAR_10000 as i64).contains(&local) {
        let sign = if offset_min < 0 { '-' } else { '+' };
        let zone = format!(
            "{sign}{:02}:{:02}",
            offset_min.abs() / 60,
            offset_min.abs() % 60
        );
        let shifted = write(local, &zone);
        assert_eq!(reset(&shifted), want, "{shifted:?} at {now:?}");
    }
    let (y, mo, _, _) = civil(secs as i64);
    let impossible = format!("{y:04}-{mo:02}-32T00:00:00Z");
    assert_eq!(reset(&impossible), None, "{impossible:?}");
}

/// An IETF field with a few policies: the spent one with the longest `t`
/// holds; else the fewest requests left is the allowance (a `t` of zero
/// says nothing).
fn check_ietf(input: &mut Bytes<'_>, now: SystemTime) {
    let members: Vec<(u64, u64)> = (0..1 + input.u8() % 4)
        .map(|_| (u64::from(input.u8() % 4), input.u64() >> (input.u8() % 64)))
        .collect();
    let field = members
        .iter()
        .enumerate()
        .map(|(i, (r, t))| format!("\"p{i}\";r={r};t={t}"))
        .collect::<Vec<_>>()
        .join(", ");
    let read = rate_limits(&[("RateLimit", &*field)][..], now);
    let live = || members.iter().filter(|(_, t)| *t > 0);
    let longest = live().filter(|(r, _)| *r == 0).map(|(_, t)| *t).max();
    assert_eq!(spent(read), longest.map(Duration::from_secs), "{field:?}");
    let fewest = live().map(|(r, _)| *r).filter(|r| *r > 0).min();
    let fewest = fewest.filter(|_| longest.is_none());
    assert_eq!(left(read), fewest, "{field:?}");
    let negative = field.replace("t=", "t=-");
    assert_eq!(rate_limits(&[("RateLimit", &*negative)][..], now), None);
}
