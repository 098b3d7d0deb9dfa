//! See `nika_retry_fuzz::duration_literal` (`fuzz/src/duration_literal.rs`) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nika_retry_fuzz::duration_literal::check(data));
