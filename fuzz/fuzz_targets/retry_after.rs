//! See `nika_retry_fuzz::retry_after` (`fuzz/src/retry_after.rs`) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nika_retry_fuzz::retry_after::check(data));
