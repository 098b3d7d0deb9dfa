//! `cost = …` on the shapes real crates write, each run as a user would:
//! an upstream declaring 100 tokens a second, drained by one call, makes
//! the next call that says it costs 100 wait one second of refill (paused
//! clock), and a call that costs 1 go at once. The cost reads the fn's own
//! arguments, a `clone(…)` one the body moves included.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use nika_retry::retry as with_retries;
use nika_retry::upstream::{Held, Quota, Upstream};
use nika_retry::{Classify, TimeoutError, timeout};
use tokio::time::Instant;
use tracing::instrument;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

struct Client {
    upstream: Upstream,
}

/// What a prompt spends: its characters.
fn tokens(prompt: &str) -> u32 {
    u32::try_from(prompt.len()).unwrap_or(u32::MAX)
}

fn consume(prompt: String) -> String {
    prompt.to_uppercase()
}

impl Client {
    fn new() -> Client {
        let quota = Quota::per(Duration::from_secs(1)).tokens(100);
        Client {
            upstream: Upstream::new("cost-shapes").with_quota(quota),
        }
    }

    /// Spends the whole bucket; a bare integer, as a user writes it (a
    /// `u32`, not the `i32` an unsuffixed literal falls back to).
    #[with_retries(layer = "provider", upstream = self.upstream, cost = 100)]
    async fn drain(&self) -> Result<(), Error> {
        Ok(())
    }

    /// A coercing return: the body's `Box<String>` becomes `Box<dyn Display>`.
    #[with_retries(layer = "provider", upstream = self.upstream, cost = tokens(prompt))]
    async fn coercing(&self, prompt: &str) -> Result<Box<dyn Display + Send>, Error> {
        Ok(Box::new(prompt.to_owned()))
    }

    /// A `mut` argument the body moves, cloned for each attempt; the cost
    /// reads the caller's value.
    #[with_retries(layer = "provider", upstream = self.upstream, cost = tokens(&prompt), clone(prompt))]
    async fn moved(&self, mut prompt: String) -> Result<String, Error> {
        prompt.push('!');
        Ok(consume(prompt))
    }

    /// A `u64` cost, beside `#[timeout]`.
    #[with_retries(layer = "provider", upstream = &self.upstream, cost = n)]
    #[timeout(read = "120s", total = "1m")]
    async fn timed(&self, n: u64) -> Result<u64, Error> {
        Ok(n + 1)
    }

    #[with_retries(layer = "provider", upstream = self.upstream, cost = *n)]
    #[instrument(skip(self))]
    async fn instrument_below(&self, n: &u32) -> Result<u32, Error> {
        Ok(n * 2)
    }

    #[with_retries(layer = "provider", upstream = self.upstream, cost = n)]
    async fn arc(self: Arc<Self>, n: u32) -> Result<u32, Error> {
        Ok(n)
    }

    /// A generic fn; an `Option` upstream.
    #[with_retries(layer = "provider", upstream = Some(&self.upstream), cost = tokens(&item.to_string()))]
    async fn generic<T: Display + Send + Sync>(&self, item: &T) -> Result<String, Error> {
        Ok(item.to_string())
    }
}

#[async_trait::async_trait]
trait Complete {
    async fn complete(&self, prompt: &str) -> Result<String, Error>;
}

#[async_trait::async_trait]
impl Complete for Client {
    #[with_retries(layer = "provider", upstream = self.upstream, cost = tokens(prompt))]
    async fn complete(&self, prompt: &str) -> Result<String, Error> {
        Ok(prompt.to_uppercase())
    }
}

/// Runs `call` on a freshly drained upstream; how long it waited.
async fn after_drain<T>(
    client: &Client,
    call: impl std::future::Future<Output = T>,
) -> (T, Duration) {
    client
        .drain()
        .await
        .expect("the first call of a full bucket goes");
    let start = Instant::now();
    let out = call.await;
    (out, start.elapsed())
}

/// A wait of about one second of refill (100 tokens at 100 a second).
fn waited_for_refill(waited: Duration) {
    assert!(
        waited >= Duration::from_millis(990) && waited <= Duration::from_millis(1_100),
        "waited {waited:?}, not the refill of 100 tokens"
    );
}

const HUNDRED: &str = "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789";

#[tokio::test(start_paused = true)]
async fn each_shape_waits_for_the_tokens_its_cost_says() {
    assert_eq!(HUNDRED.len(), 100);
    let client = Client::new();
    let (out, waited) = after_drain(&client, client.coercing(HUNDRED)).await;
    assert_eq!(out.unwrap().to_string(), HUNDRED);
    waited_for_refill(waited);

    let client = Client::new();
    let (out, waited) = after_drain(&client, client.moved(HUNDRED[..99].to_owned())).await;
    assert_eq!(out.unwrap(), format!("{}!", &HUNDRED[..99]));
    // 99 tokens: the refill of 99, within the bound.
    assert!(waited >= Duration::from_millis(980), "{waited:?}");

    let client = Client::new();
    let (out, waited) = after_drain(&client, client.timed(100)).await;
    assert_eq!(out.unwrap(), 101);
    waited_for_refill(waited);

    let client = Client::new();
    let (out, waited) = after_drain(&client, client.instrument_below(&100)).await;
    assert_eq!(out.unwrap(), 200);
    waited_for_refill(waited);

    let client = Arc::new(Client::new());
    let (out, waited) = after_drain(&client, client.clone().arc(100)).await;
    assert_eq!(out.unwrap(), 100);
    waited_for_refill(waited);

    let client = Client::new();
    let (out, waited) = after_drain(&client, client.generic(&HUNDRED)).await;
    assert_eq!(out.unwrap(), HUNDRED);
    waited_for_refill(waited);

    let client = Client::new();
    let (out, waited) = after_drain(&client, client.complete(HUNDRED)).await;
    assert_eq!(out.unwrap(), HUNDRED.to_uppercase());
    waited_for_refill(waited);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_costs_little_goes_at_once_where_a_costly_one_waits() {
    let client = Client::new();
    client.drain().await.unwrap();
    // The bucket refills 1 token in 10 ms: a cost of 1 waits at most that,
    // and the declared quota's margin for the way to the server (25 ms).
    let start = Instant::now();
    client.timed(1).await.unwrap();
    assert!(
        start.elapsed() <= Duration::from_millis(35),
        "{:?}",
        start.elapsed()
    );
}
