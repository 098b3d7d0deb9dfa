//! Procedural macros of `nika-retry`.
#![forbid(unsafe_code)]
