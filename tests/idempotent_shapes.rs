//! `idempotent = …` on the shapes real crates write (docs/attributes.md, "Writing the
//! body"), each run as a user would: an attempt whose answer was lost
//! (`Reached::Maybe`) is not retried when the fn is not idempotent, and is
//! when it is; a refused connection (`Reached::No`) is retried either way.

use std::fmt::Display;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use nika_retry::retry as with_retries;
use nika_retry::{Classify, TimeoutError, timeout};
use tracing::instrument;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("answer lost")]
    #[category(transient, reached = maybe)]
    Lost,
    #[error("connection refused")]
    #[category(transient, reached = no)]
    Refused,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// Fails its first attempt with `first`, then succeeds; counts attempts.
struct Mailer {
    attempts: AtomicU32,
    first: fn() -> Error,
    dedups: bool,
}

impl Mailer {
    fn new(first: fn() -> Error, dedups: bool) -> Arc<Mailer> {
        Arc::new(Mailer {
            attempts: AtomicU32::new(0),
            first,
            dedups,
        })
    }

    fn attempt(&self) -> Result<(), Error> {
        match self.attempts.fetch_add(1, Ordering::Relaxed) {
            0 => Err((self.first)()),
            _ => Ok(()),
        }
    }

    /// A coercing return.
    #[with_retries(layer = "tool", idempotent = self.dedups)]
    async fn coercing(&self) -> Result<Box<dyn Display + Send>, Error> {
        self.attempt()?;
        Ok(Box::new(String::from("sent")))
    }

    /// A `mut` argument, cloned for each attempt.
    #[with_retries(layer = "tool", idempotent = self.dedups, clone(to))]
    async fn mut_arg(&self, mut to: String) -> Result<String, Error> {
        to.push('!');
        self.attempt()?;
        Ok(to)
    }

    #[with_retries(layer = "http", idempotent = self.dedups)]
    #[instrument(skip(self))]
    async fn instrument_below(&self, n: u32) -> Result<u32, Error> {
        self.attempt()?;
        Ok(n * 2)
    }

    #[with_retries(layer = "http", idempotent = self.dedups)]
    #[timeout(connect = "1s", read = "30s")]
    async fn timed(&self) -> Result<(), Error> {
        self.attempt()
    }

    #[with_retries(layer = "tool", idempotent = self.dedups)]
    async fn arc(self: Arc<Self>) -> Result<usize, Error> {
        self.attempt()?;
        Ok(Arc::strong_count(&self))
    }
}

#[async_trait::async_trait]
trait Deliver {
    async fn send(&self, to: &str) -> Result<String, Error>;
}

#[async_trait::async_trait]
impl Deliver for Mailer {
    #[with_retries(layer = "tool", idempotent = self.dedups)]
    async fn send(&self, to: &str) -> Result<String, Error> {
        self.attempt()?;
        Ok(to.to_owned())
    }
}

/// A task that opts its tool calls in to 3 attempts, as a workflow would.
async fn opted_in<T, F: Future<Output = Result<T, Error>>>(f: F) -> Result<T, Error> {
    let yaml = "retry: { max_attempts: 3, delay_ms: 10, backoff: constant }";
    let policy: nika_retry::task::TaskPolicy = serde_norway::from_str(yaml).unwrap();
    nika_retry::task::scope(policy, f).await
}

/// Runs every shape on a fresh mailer failing first with `first`; returns
/// each shape's (succeeded, attempts).
async fn every_shape(first: fn() -> Error, dedups: bool) -> Vec<(&'static str, bool, u32)> {
    let mut seen = Vec::new();
    macro_rules! shape {
        ($name:literal, |$m:ident| $call:expr) => {{
            let $m = Mailer::new(first, dedups);
            let ok = opted_in($call).await.is_ok();
            seen.push(($name, ok, $m.attempts.load(Ordering::Relaxed)));
        }};
    }
    shape!("coercing", |m| m.coercing());
    shape!("mut_arg", |m| m.mut_arg("ops@example.com".into()));
    shape!("instrument_below", |m| m.instrument_below(2));
    shape!("timed", |m| m.timed());
    shape!("arc", |m| m.clone().arc());
    shape!("async_trait", |m| m.send("ops@example.com"));
    seen
}

#[tokio::test(start_paused = true)]
async fn a_lost_answer_is_not_retried_unless_the_fn_is_idempotent() {
    for (shape, ok, attempts) in every_shape(|| Error::Lost, false).await {
        assert_eq!((ok, attempts), (false, 1), "{shape}: not idempotent");
    }
    for (shape, ok, attempts) in every_shape(|| Error::Lost, true).await {
        assert_eq!((ok, attempts), (true, 2), "{shape}: idempotent");
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_retried_either_way() {
    for dedups in [false, true] {
        for (shape, ok, attempts) in every_shape(|| Error::Refused, dedups).await {
            assert_eq!((ok, attempts), (true, 2), "{shape}: idempotent = {dedups}");
        }
    }
}
