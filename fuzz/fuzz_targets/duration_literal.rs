//! The duration literals of the attributes (`"250ms"`, `"2m 30s"`).
//!
//! The parser lives in the proc-macro crate, which cannot export functions,
//! so its source file is compiled in here.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../nika-retry-macros/src/duration.rs"]
mod duration;

fuzz_target!(|text: &str| {
    match duration::parse_duration(text) {
        Ok(d) => {
            assert!(!d.is_zero(), "{text:?}");
            // Agrees with humantime on what it accepts.
            assert_eq!(humantime::parse_duration(text.trim()).ok(), Some(d), "{text:?}");
        }
        Err(message) => assert!(!message.is_empty(), "{text:?}"),
    }
});
