//! `Retry-After` and the other server wait hints: arbitrary text and bytes.
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use nika_retry::http::{parse_retry_after, retry_hint};

/// Wed, 21 Oct 2015 07:28:00 GMT
const FIXED: u64 = 1_445_412_480;

const NAMES: [&str; 5] = [
    "retry-after",
    "Retry-After-Ms",
    "x-amz-retry-after",
    "GRPC-RETRY-PUSHBACK-MS",
    "x-other",
];

fn check_retry_after(text: &str, now: SystemTime) {
    let got = parse_retry_after(text, now);
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        // Delta-seconds: exactly the u64, or a hint too long (Duration::MAX) when it does not fit.
        let expected = trimmed.parse::<u64>().map_or(Duration::MAX, Duration::from_secs);
        assert_eq!(got, Some(expected), "{text:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    // First 8 bytes: a fuzzed `now` (seconds since the epoch, any u64 that the
    // platform's SystemTime can hold).
    let (now_bytes, rest) = data.split_at(data.len().min(8));
    let mut buf = [0u8; 8];
    buf[..now_bytes.len()].copy_from_slice(now_bytes);
    let secs = u64::from_le_bytes(buf);
    let fuzzed_now = UNIX_EPOCH
        .checked_add(Duration::from_secs(secs))
        .unwrap_or(UNIX_EPOCH);
    let fixed_now = UNIX_EPOCH + Duration::from_secs(FIXED);

    // The whole input as text, if it is UTF-8, and the rest after `now`.
    for text in [core::str::from_utf8(data).ok(), core::str::from_utf8(rest).ok()]
        .into_iter()
        .flatten()
    {
        check_retry_after(text, fixed_now);
        check_retry_after(text, fuzzed_now);
    }

    // Headers: split the rest on 0xFF; each piece is one header's raw bytes,
    // under a name picked by its first byte.
    let headers: Vec<(&str, &[u8])> = rest
        .split(|&b| b == 0xFF)
        .map(|piece| match piece.split_first() {
            Some((&tag, value)) => (NAMES[usize::from(tag) % NAMES.len()], value),
            None => (NAMES[0], piece),
        })
        .collect();
    let _ = retry_hint(&headers[..], fixed_now);
    let _ = retry_hint(&headers[..], fuzzed_now);
    // The same raw bytes under each name alone.
    for name in NAMES {
        let one = [(name, rest)];
        let _ = retry_hint(&one[..], fixed_now);
        let _ = retry_hint(&one[..], fuzzed_now);
    }
});
