//! One-line bodies, as users write them, compile without a warning (the
//! user's braces are not the tail block of a generated one).
#![deny(warnings)]

use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
pub enum Error {
    #[error("busy")]
    #[category(transient)]
    Busy,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

fn helper() -> Result<u32, Error> { Err(Error::Busy) }

#[retry(layer = "provider")]
pub async fn retried() -> Result<u32, Error> { Ok(7) }

#[retry(layer = "provider")]
pub async fn a_call() -> Result<u32, Error> { helper() }

#[retry(layer = "provider")]
#[timeout(attempt = "1s")]
pub async fn timed() -> Result<u32, Error> { Ok(7) }

#[timeout(layer = "task", total = "1s")]
pub async fn alone() -> Result<u32, Error> { Ok(7) }

pub struct Client(u32);

impl Client {
    #[retry(layer = "provider")]
    pub async fn method(&self) -> Result<u32, Error> { Ok(self.0) }
}

fn main() {}
