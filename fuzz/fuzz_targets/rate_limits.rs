//! See `nika_retry_fuzz::rate_limits` (`fuzz/src/rate_limits.rs`) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nika_retry_fuzz::rate_limits::check(data));
