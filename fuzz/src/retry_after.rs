//! `Retry-After` and the other server wait hints, checked against
//! arithmetic on generated values (civil-date arithmetic done here for the
//! dates) and, for arbitrary text, against digit arithmetic and the shape of
//! a date.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nika_retry::http::{parse_retry_after, retry_hint};

use crate::bytes::Bytes;

/// The first second of the year 10000: HTTP-dates have four year digits.
const YEAR_10000: u64 = 253_402_300_800;
/// The first second of the year 2070: RFC 850's two year digits read as 1970–2069.
const YEAR_2070: u64 = 3_155_760_000;

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const LONG_DAYS: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Checks the input as text, then as the recipe of generated hints.
pub fn check(data: &[u8]) {
    let mut input = Bytes(data);
    let now = UNIX_EPOCH + Duration::from_secs(input.u64() % YEAR_10000);
    if let Ok(text) = std::str::from_utf8(data) {
        check_text(text, now);
    }
    check_delta_seconds(&mut input, now);
    check_date(&mut input, now);
    check_headers(&mut input, now);
    check_raw_headers(input.0, now);
}

/// Arbitrary text: never a panic. All-digit text (once trimmed) is the
/// number its digits spell, computed here digit by digit (past a `u64`, a
/// hint too long). Any other text that gives a wait has the shape of one of
/// RFC 9110's three date formats (its length, weekday and `GMT`), and the
/// wait is at most the distance from `now` to the year 10000 (four year
/// digits). Which dates are read, and their exact waits, `check_date` checks
/// on generated dates.
fn check_text(text: &str, now: SystemTime) {
    let got = parse_retry_after(text, now);
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        let number = trimmed.bytes().try_fold(0u64, |n, digit| {
            n.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
        });
        let wait = number.map_or(Duration::MAX, Duration::from_secs);
        assert_eq!(got, Some(wait), "{text:?}");
        return;
    }
    let Some(wait) = got else {
        return;
    };
    let starts = |days: &[&str], after: &str| {
        days.iter().any(|day| {
            trimmed
                .strip_prefix(day)
                .is_some_and(|t| t.starts_with(after))
        })
    };
    let date_shaped = match trimmed.len() {
        // IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
        29 => starts(&DAYS, ", ") && trimmed.ends_with(" GMT"),
        // asctime: `Sun Nov  6 08:49:37 1994`.
        24 => starts(&DAYS, " "),
        // RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`, weekdays of 6 to 9 letters.
        30..=33 => starts(&LONG_DAYS, ", ") && trimmed.ends_with(" GMT"),
        _ => false,
    };
    assert!(date_shaped, "{text:?} read as a wait of {wait:?}");
    let last = UNIX_EPOCH + Duration::from_secs(YEAR_10000);
    let longest = last.duration_since(now).unwrap_or(Duration::ZERO);
    assert!(wait <= longest, "{text:?}: {wait:?} at {now:?}");
}

/// Generated delta-seconds of any size, with leading zeros and surrounding
/// whitespace, and their invalid variants (signed, fractional, exponent).
fn check_delta_seconds(input: &mut Bytes<'_>, now: SystemTime) {
    let wide = (u128::from(input.u64()) << 64 | u128::from(input.u64())) >> (input.u8() % 128);
    let shape = input.u8();
    let zeros = "0".repeat(usize::from(shape % 3));
    let pad = [" ", "\t", ""][usize::from(shape / 3 % 3)];
    let digits = format!("{zeros}{wide}");
    let text = format!("{pad}{digits}{pad}");
    let got = parse_retry_after(&text, now);
    match u64::try_from(wide) {
        Ok(secs) => assert_eq!(got, Some(Duration::from_secs(secs)), "{text:?}"),
        // Too large for the clock: a hint too long, never ignored.
        Err(_) => assert!(
            got.is_some_and(|d| d >= Duration::from_secs(u64::MAX)),
            "{text:?}: {got:?}"
        ),
    }
    let invalid = match shape / 9 % 4 {
        0 => format!("-{digits}"),
        1 => format!("+{digits}"),
        2 => format!("{digits}.5"),
        _ => format!("{digits}e3"),
    };
    assert_eq!(parse_retry_after(&invalid, now), None, "{invalid:?}");
}

/// The civil date of `secs` since the epoch (a negative count is before
/// it): (year, month 1–12, day 1–31, weekday index into `DAYS`).
pub(crate) fn civil(secs: i64) -> (i64, usize, i64, usize) {
    let days = secs.div_euclid(86_400);
    // Days from civil, inverted (proleptic Gregorian, eras of 400 years).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month as usize, day, days.rem_euclid(7) as usize)
}

/// A date from the input, written by hand in the three formats of RFC 9110
/// (and in the first one by `httpdate`), checked against its distance
/// from `now`; a date before 1970 is in the past; a wrong weekday is no date.
fn check_date(input: &mut Bytes<'_>, now: SystemTime) {
    let secs = input.u64() % YEAR_10000;
    let (year, month, day, wday) = civil(secs as i64);
    let (hh, mm, ss) = (secs / 3_600 % 24, secs / 60 % 60, secs % 60);
    let mon = MONTHS[month - 1];
    let clock = format!("{hh:02}:{mm:02}:{ss:02}");
    let imf = format!("{}, {day:02} {mon} {year} {clock} GMT", DAYS[wday]);
    assert_eq!(
        httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs)),
        imf
    );
    let asctime = format!("{} {mon} {day:>2} {clock} {year}", DAYS[wday]);
    let mut dates = vec![imf, asctime];
    if secs < YEAR_2070 {
        let yy = year % 100;
        dates.push(format!(
            "{}, {day:02}-{mon}-{yy:02} {clock} GMT",
            LONG_DAYS[wday]
        ));
    }
    let date = UNIX_EPOCH + Duration::from_secs(secs);
    let wait = date.duration_since(now).unwrap_or(Duration::ZERO);
    for text in &dates {
        assert_eq!(
            parse_retry_after(text, now),
            Some(wait),
            "{text:?} at {now:?}"
        );
        // One day later, the same weekday is wrong.
        let shifted = DAYS[wday].len();
        let wrong = format!("{}{}", DAYS[(wday + 1) % 7], &text[shifted..]);
        if !text.starts_with(LONG_DAYS[wday]) {
            assert_eq!(parse_retry_after(&wrong, now), None, "{wrong:?}");
        }
    }
    // The same instant 1 000 to 1 969 years before the epoch... as a date
    // before 1970: in the past, a zero wait.
    let back = 86_400 * 365 * (1 + i64::from(input.u8()) * 7);
    let (year, month, day, wday) = civil(secs as i64 % 86_400 - back);
    if (1_000..1_970).contains(&year) {
        let old = format!(
            "{}, {day:02} {} {year} {clock} GMT",
            DAYS[wday],
            MONTHS[month - 1]
        );
        assert_eq!(
            parse_retry_after(&old, now),
            Some(Duration::ZERO),
            "{old:?}"
        );
    }
}

/// The four hint headers, each present or not, valid or not: the first
/// valid one in the documented order wins.
fn check_headers(input: &mut Bytes<'_>, now: SystemTime) {
    const INVALID: [&str; 6] = ["soon", "-1", "+5", "1e3", "inf", "0x10"];
    // Each name, and whether its value counts milliseconds (else seconds).
    let names = [
        ("retry-after-ms", true),
        ("X-Amz-Retry-After", true),
        ("grpc-retry-pushback-ms", true),
        ("Retry-After", false),
    ];
    let mut headers = vec![];
    let mut expected = None;
    for (name, millis) in names {
        let shape = input.u8();
        let n = input.u64() >> 24;
        match shape % 3 {
            0 => {}
            1 => headers.push((
                name,
                INVALID[usize::from(shape / 3) % INVALID.len()].to_owned(),
            )),
            _ => {
                headers.push((name, n.to_string()));
                let wait = if millis {
                    Duration::from_millis(n)
                } else {
                    Duration::from_secs(n)
                };
                expected = expected.or(Some(wait));
            }
        }
    }
    // Header order in the message does not matter.
    if input.u8() % 2 == 1 {
        headers.reverse();
    }
    assert_eq!(retry_hint(&headers[..], now), expected, "{headers:?}");
}

/// Arbitrary header bytes, split on 0xFF, under names picked by their first byte.
fn check_raw_headers(rest: &[u8], now: SystemTime) {
    const NAMES: [&str; 5] = [
        "retry-after",
        "Retry-After-Ms",
        "x-amz-retry-after",
        "GRPC-RETRY-PUSHBACK-MS",
        "x-other",
    ];
    let headers: Vec<(&str, &[u8])> = rest
        .split(|&b| b == 0xFF)
        .map(|piece| match piece.split_first() {
            Some((&tag, value)) => (NAMES[usize::from(tag) % NAMES.len()], value),
            None => (NAMES[0], piece),
        })
        .collect();
    let _ = retry_hint(&headers[..], now);
    for name in NAMES {
        let _ = retry_hint(&[(name, rest)][..], now);
    }
}
