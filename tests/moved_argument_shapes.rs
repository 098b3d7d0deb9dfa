//! `idempotent = EXPR` and `config = EXPR` reading an argument of
//! `clone(…)` that the body moves (issue 44.2): a transport that takes its
//! request by value and hands it to `execute(request)`, as
//! `reqwest::Client::execute` takes one. Each expression reads the
//! caller's request, never a clone an attempt moved, on the shapes real
//! crates write: the request by value, `self` by value, a destructured
//! argument, `#[async_trait]`, `#[instrument]` below, a renamed import,
//! generics, `self: Arc<Self>`.
//!
//! The method says whether the call is idempotent (`GET`: yes, `POST`:
//! no); a header says how many attempts its config allows. Every shape
//! meets the same lost answers (`Reached::Maybe`): a `POST` is tried once,
//! a `GET` as often as its header says.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use http::{Method, Request};
use nika_retry::retry as with_retries;
use nika_retry::{Classify, Layer, RetryConfig};
use tracing::instrument;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("answer lost")]
    #[category(transient, reached = maybe)]
    Lost,
}

/// Loses the answer to its first `lost` requests, then answers with the
/// request's body; counts requests.
struct Client {
    requests: AtomicU32,
    lost: u32,
}

/// The config a request asks for: `x-attempts` attempts, 1 ms apart.
fn config_for<B>(request: &Request<B>) -> Option<RetryConfig> {
    let attempts = request.headers().get("x-attempts")?.to_str().ok()?;
    RetryConfig::for_layer(Layer::Http)
        .with_max_attempts(attempts.parse().ok()?)
        .and_then(|c| c.with_initial_backoff(Duration::from_millis(1)))
        .ok()
}

impl Client {
    fn new(lost: u32) -> Arc<Client> {
        Arc::new(Client {
            requests: AtomicU32::new(0),
            lost,
        })
    }

    /// Takes the request by value, as `reqwest::Client::execute` does.
    async fn execute<B: Into<String>>(&self, request: Request<B>) -> Result<String, Error> {
        if self.requests.fetch_add(1, Ordering::Relaxed) < self.lost {
            return Err(Error::Lost);
        }
        Ok(request.into_body().into())
    }

    #[with_retries(layer = "http", clone(request),
        idempotent = request.method().is_idempotent(), config = config_for(&request))]
    async fn by_value(&self, request: Request<String>) -> Result<String, Error> {
        self.execute(request).await
    }

    #[with_retries(layer = "http", clone(request),
        idempotent = request.method().is_idempotent(), config = config_for(&request))]
    async fn destructured(&self, (request, tag): (Request<String>, u32)) -> Result<String, Error> {
        Ok(format!("{}{tag}", self.execute(request).await?))
    }

    #[with_retries(layer = "http", clone(request),
        idempotent = request.method().is_idempotent(), config = config_for(&request))]
    #[instrument(skip(self, request))]
    async fn instrumented(&self, request: Request<String>) -> Result<String, Error> {
        self.execute(request).await
    }

    #[with_retries(layer = "http", clone(request),
        idempotent = request.method().is_idempotent(), config = config_for(&request))]
    async fn generic<B>(&self, request: Request<B>) -> Result<String, Error>
    where
        B: Clone + Into<String> + Send,
    {
        self.execute(request).await
    }

    #[with_retries(layer = "http", clone(request),
        idempotent = request.method().is_idempotent(), config = config_for(&request))]
    async fn arc(self: Arc<Self>, request: Request<String>) -> Result<String, Error> {
        self.execute(request).await
    }
}

/// `self` by value: the call is the request.
#[derive(Clone)]
struct Call {
    client: Arc<Client>,
    request: Request<String>,
}

impl Call {
    #[with_retries(layer = "http", clone(self),
        idempotent = self.request.method().is_idempotent(), config = config_for(&self.request))]
    async fn send(self) -> Result<String, Error> {
        self.client.execute(self.request).await
    }
}

#[async_trait::async_trait]
trait Execute {
    async fn send(&self, request: Request<String>) -> Result<String, Error>;
}

#[async_trait::async_trait]
impl Execute for Client {
    #[with_retries(layer = "http", clone(request),
        idempotent = request.method().is_idempotent(), config = config_for(&request))]
    async fn send(&self, request: Request<String>) -> Result<String, Error> {
        self.execute(request).await
    }
}

fn request(method: Method, attempts: u32) -> Request<String> {
    Request::builder()
        .method(method)
        .uri("http://127.0.0.1/mail")
        .header("x-attempts", attempts.to_string())
        .body("sent".to_owned())
        .unwrap()
}

/// Each shape's (name, succeeded, requests), on a fresh client losing its
/// first `lost` answers to `request()`.
async fn every_shape(
    lost: u32,
    request: impl Fn() -> Request<String>,
) -> Vec<(&'static str, bool, u32)> {
    let mut seen = Vec::new();
    macro_rules! shape {
        ($name:literal, |$c:ident| $call:expr) => {{
            let $c = Client::new(lost);
            let ok = $call.await.is_ok();
            seen.push(($name, ok, $c.requests.load(Ordering::Relaxed)));
        }};
    }
    shape!("by_value", |c| c.by_value(request()));
    shape!("destructured", |c| c.destructured((request(), 1)));
    shape!("instrumented", |c| c.instrumented(request()));
    shape!("generic", |c| c.generic(request()));
    shape!("arc", |c| c.clone().arc(request()));
    shape!("self_by_value", |c| Call {
        client: c.clone(),
        request: request(),
    }
    .send());
    shape!("async_trait", |c| Execute::send(&*c, request()));
    seen
}

#[tokio::test(start_paused = true)]
async fn a_post_whose_answer_was_lost_is_sent_once() {
    for (shape, ok, requests) in every_shape(1, || request(Method::POST, 3)).await {
        assert_eq!(
            (ok, requests),
            (false, 1),
            "{shape}: POST is not idempotent"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_get_is_retried_as_often_as_its_own_config_says() {
    for (shape, ok, requests) in every_shape(2, || request(Method::GET, 3)).await {
        assert_eq!((ok, requests), (true, 3), "{shape}: 3 attempts, 2 lost");
    }
    for (shape, ok, requests) in every_shape(2, || request(Method::GET, 2)).await {
        assert_eq!((ok, requests), (false, 2), "{shape}: 2 attempts, 2 lost");
    }
}
