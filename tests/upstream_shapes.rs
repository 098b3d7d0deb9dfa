//! `upstream = …` on the shapes real crates write (docs/attributes.md, "Writing the body"),
//! each run as a user would: every one waits out a hold set by hand before
//! its first attempt, and returns what its body returned.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use nika_retry::retry as with_retries;
use nika_retry::upstream::{Held, Upstream};
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

impl Client {
    /// A coercing return: the body's `Box<String>` becomes `Box<dyn Display>`.
    #[with_retries(layer = "provider", upstream = self.upstream)]
    async fn coercing(&self) -> Result<Box<dyn Display + Send>, Error> {
        Ok(Box::new(String::from("coerced")))
    }

    /// A `mut` argument, cloned for each attempt.
    #[with_retries(layer = "provider", upstream = &self.upstream, clone(prompt))]
    async fn mut_arg(&self, mut prompt: String) -> Result<String, Error> {
        prompt.push('!');
        Ok(prompt)
    }

    // `#[instrument]` above `#[retry]` is refused at compile time (one span
    // per attempt): tests/ui/fail has that case. Beside `#[timeout]`:
    #[with_retries(layer = "provider", upstream = self.upstream)]
    #[timeout(read = "120s", total = "1m")]
    async fn timed(&self, n: u32) -> Result<u32, Error> {
        Ok(n + 1)
    }

    #[with_retries(layer = "http", upstream = self.upstream)]
    #[instrument(skip(self))]
    async fn instrument_below(&self, n: u32) -> Result<u32, Error> {
        Ok(n * 2)
    }

    #[with_retries(layer = "provider", upstream = self.upstream)]
    async fn arc(self: Arc<Self>) -> Result<usize, Error> {
        Ok(Arc::strong_count(&self))
    }
}

#[async_trait::async_trait]
trait Complete {
    async fn complete(&self, prompt: &str) -> Result<String, Error>;
}

#[async_trait::async_trait]
impl Complete for Client {
    #[with_retries(layer = "provider", upstream = self.upstream)]
    async fn complete(&self, prompt: &str) -> Result<String, Error> {
        Ok(prompt.to_uppercase())
    }
}

const HOLD: Duration = Duration::from_secs(3);

/// Runs `call` after holding `client`'s upstream for [`HOLD`]; returns its
/// output and checks that it waited exactly that long.
async fn held<T>(client: &Client, call: impl std::future::Future<Output = T>) -> T {
    client.upstream.hold_for(HOLD);
    let start = Instant::now();
    let out = call.await;
    assert_eq!(
        start.elapsed(),
        HOLD,
        "the first attempt waited the hold out"
    );
    out
}

#[tokio::test(start_paused = true)]
async fn every_shape_waits_out_the_hold_and_returns_its_body() {
    let client = Arc::new(Client {
        upstream: Upstream::new("shapes"),
    });
    let coerced = held(&client, client.coercing()).await.unwrap();
    assert_eq!(coerced.to_string(), "coerced");
    let prompt = String::from("hi");
    assert_eq!(held(&client, client.mut_arg(prompt)).await.unwrap(), "hi!");
    assert_eq!(held(&client, client.timed(1)).await.unwrap(), 2);
    assert_eq!(held(&client, client.instrument_below(4)).await.unwrap(), 8);
    assert_eq!(held(&client, client.clone().arc()).await.unwrap(), 2);
    assert_eq!(held(&client, client.complete("hi")).await.unwrap(), "HI");
}

/// A provider that may run without an upstream: `upstream = …` of type
/// `Option<Upstream>` or `Option<&Upstream>` (`None`: the call is alone).
struct MaybeShared {
    upstream: Option<Upstream>,
}

impl MaybeShared {
    fn upstream(&self) -> Option<&Upstream> {
        self.upstream.as_ref()
    }

    /// Which upstream the body sees in force.
    fn seen() -> Option<String> {
        nika_retry::upstream::current().map(|u| u.name().to_owned())
    }

    /// A field: `Option<Upstream>`.
    #[with_retries(layer = "provider", upstream = self.upstream)]
    async fn field(&self) -> Result<Option<String>, Error> {
        Ok(Self::seen())
    }

    /// A method call: `Option<&Upstream>`.
    #[with_retries(layer = "provider", upstream = self.upstream())]
    #[timeout(total = "1m")]
    async fn method(&self) -> Result<Option<String>, Error> {
        Ok(Self::seen())
    }

    #[with_retries(layer = "provider", upstream = self.upstream.as_ref())]
    #[instrument(skip(self))]
    async fn borrowed(&self) -> Result<Option<String>, Error> {
        Ok(Self::seen())
    }

    #[with_retries(layer = "provider", upstream = self.upstream.clone())]
    async fn arc(self: Arc<Self>) -> Result<Option<String>, Error> {
        Ok(Self::seen())
    }
}

#[async_trait::async_trait]
impl Complete for MaybeShared {
    #[with_retries(layer = "provider", upstream = self.upstream.as_ref())]
    async fn complete(&self, prompt: &str) -> Result<String, Error> {
        Ok(format!("{prompt} {:?}", Self::seen()))
    }
}

/// A generic fn taking its upstream as an `Option<&Upstream>` argument.
#[with_retries(layer = "provider", upstream = upstream)]
async fn generic<T>(upstream: Option<&Upstream>, tag: T) -> Result<Option<String>, Error>
where
    T: Display + Send,
{
    Ok(MaybeShared::seen().map(|name| format!("{name}{tag}")))
}

#[tokio::test(start_paused = true)]
async fn an_option_upstream_waits_when_some_and_is_alone_when_none() {
    let shared = Arc::new(MaybeShared {
        upstream: Some(Upstream::new("shared")),
    });
    let some = Some("shared".to_owned());
    let client = Client {
        upstream: shared.upstream.clone().unwrap(),
    };
    assert_eq!(held(&client, shared.field()).await.unwrap(), some);
    assert_eq!(held(&client, shared.method()).await.unwrap(), some);
    assert_eq!(held(&client, shared.borrowed()).await.unwrap(), some);
    assert_eq!(held(&client, shared.clone().arc()).await.unwrap(), some);
    let completed = held(&client, shared.complete("hi")).await.unwrap();
    assert_eq!(completed, "hi Some(\"shared\")");
    let upstream = Some(&client.upstream);
    let tagged = held(&client, generic(upstream, 1)).await.unwrap();
    assert_eq!(tagged.as_deref(), Some("shared1"));

    // `None`: alone. The hold on `shared` is not waited, nothing is in force.
    let alone = Arc::new(MaybeShared { upstream: None });
    client.upstream.hold_for(HOLD);
    let start = Instant::now();
    assert_eq!(alone.field().await.unwrap(), None);
    assert_eq!(alone.method().await.unwrap(), None);
    assert_eq!(alone.borrowed().await.unwrap(), None);
    assert_eq!(alone.clone().arc().await.unwrap(), None);
    assert_eq!(alone.complete("hi").await.unwrap(), "hi None");
    assert_eq!(generic(None, 1).await.unwrap(), None);
    assert_eq!(start.elapsed(), Duration::ZERO, "no call waited");
}
