//! A `mut` binding of a `&mut T` or a `Pin<&mut T>` is the caller's state,
//! which each attempt reborrows: never refused, and nothing to clone. The
//! bodies write through them on every attempt (tests/shapes.rs runs them).
#![deny(warnings)]

use std::io::Write;
use std::pin::Pin;

use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

struct Counter {
    attempts: u32,
}

impl Counter {
    fn bump(self: Pin<&mut Self>) -> u32 {
        let this = self.get_mut();
        this.attempts += 1;
        this.attempts
    }

    /// `mut self` to call `as_mut()`.
    #[retry(layer = "provider", backoff = "1ms")]
    async fn pinned(mut self: Pin<&mut Self>) -> Result<u32, Error> {
        if self.as_mut().bump() < 3 {
            return Err(Error::Flaky);
        }
        Ok(self.attempts)
    }
}

fn record(mut out: impl Write, line: &str) {
    let _ = writeln!(out, "{line}");
}

/// `mut out` to lend `&mut out` as a writer (`Write` for `&mut W`).
#[retry(layer = "provider", backoff = "1ms")]
async fn logged(mut out: &mut Vec<u8>) -> Result<usize, Error> {
    record(&mut out, "attempt");
    if out.len() < 3 * "attempt\n".len() {
        return Err(Error::Flaky);
    }
    Ok(out.len())
}

fn main() {
    let mut counter = Counter { attempts: 0 };
    let mut log = Vec::new();
    let _ = (Pin::new(&mut counter).pinned(), logged(&mut log));
}
