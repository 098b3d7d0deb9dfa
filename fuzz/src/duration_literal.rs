//! The attributes' duration literals (`"250ms"`, `"2m 30s"`), checked
//! against arithmetic done here on generated numbers and units.

#[allow(dead_code)]
#[path = "../../nika-retry-macros/src/duration.rs"]
mod duration;

use duration::parse_duration;

/// Every unit spelling the literals take, with its length in nanoseconds
/// (a month is 30.44 days and a year 365.25 days, as documented).
const UNITS: [(&str, u128); 22] = [
    ("ns", 1),
    ("nsec", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("msec", 1_000_000),
    ("s", SEC),
    ("sec", SEC),
    ("seconds", SEC),
    ("m", 60 * SEC),
    ("min", 60 * SEC),
    ("minutes", 60 * SEC),
    ("h", 3_600 * SEC),
    ("hr", 3_600 * SEC),
    ("hours", 3_600 * SEC),
    ("d", 86_400 * SEC),
    ("days", 86_400 * SEC),
    ("w", 604_800 * SEC),
    ("weeks", 604_800 * SEC),
    ("M", 2_630_016 * SEC),
    ("months", 2_630_016 * SEC),
    ("y", 31_557_600 * SEC),
];

const SEC: u128 = 1_000_000_000;

/// The longest `Duration` in nanoseconds.
const MAX_NS: u128 = u64::MAX as u128 * SEC + (SEC - 1);

/// Checks both readings of `data`: as arbitrary text, and as the recipe
/// of a generated literal.
pub fn check(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        check_text(text);
    }
    check_generated(data);
}

/// Arbitrary text: never a panic; an `Ok` is positive; an `Err` says why;
/// a number without a unit is refused.
fn check_text(text: &str) {
    match parse_duration(text) {
        Ok(d) => assert!(!d.is_zero(), "{text:?}"),
        Err(message) => assert!(!message.is_empty(), "{text:?}"),
    }
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        let err = parse_duration(text).expect_err(text);
        assert!(err.contains("has no unit"), "{text:?}: {err}");
    }
}

/// Up to four terms, `<number><unit>`, each from 10 bytes: 8 for the
/// number (shifted right by the 9th, so that every magnitude comes up) and
/// the 10th for the unit and the separator. The expected duration is the
/// sum of number × unit length.
fn check_generated(data: &[u8]) {
    let mut text = String::new();
    let mut total: u128 = 0;
    // A term too long for a u64 of its unit's base (nanoseconds below a
    // second, seconds above) may be refused as an overflow although the sum fits.
    let mut grey = false;
    for chunk in data.chunks(10).take(4) {
        let mut raw = [0u8; 8];
        let len = chunk.len().min(8);
        raw[..len].copy_from_slice(&chunk[..len]);
        let shift = u32::from(chunk.get(8).copied().unwrap_or(0) % 64);
        let n = u64::from_le_bytes(raw) >> shift;
        let pick = chunk.get(9).copied().unwrap_or(0);
        let (unit, ns) = UNITS[usize::from(pick) % UNITS.len()];
        if !text.is_empty() && pick < 128 {
            text.push(' ');
        }
        text.push_str(&format!("{n}{unit}"));
        let term = u128::from(n) * ns;
        if ns < SEC && term > u128::from(u64::MAX - 1_000_000_000) {
            grey = true;
        }
        total = total.saturating_add(term);
    }
    if text.is_empty() {
        return;
    }
    let got = parse_duration(&text);
    match got {
        Ok(d) => assert_eq!(d.as_nanos(), total, "{text:?}"),
        Err(ref message) if total == 0 => {
            assert!(message.contains("is zero"), "{text:?}: {message}")
        }
        Err(ref message) if total > MAX_NS || grey => {
            assert!(message.contains("overflows"), "{text:?}: {message}")
        }
        Err(message) => panic!("{text:?} = {total} ns was refused: {message}"),
    }
    if total > MAX_NS {
        assert!(
            got.is_err(),
            "{text:?} = {total} ns does not fit a Duration"
        );
    }
}
