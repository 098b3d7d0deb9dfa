//! docs/comparisons.md's side by side: tower's own retry with the
//! policy a user writes, reqwest-retry's `RetryTransientMiddleware` with its
//! `ExponentialBackoff`, and this crate's tower layer and reqwest
//! middleware, each on the same fault scripts (`tests/peers/scripts.rs`)
//! against the loopback fault server, on the paused clock. Each cell of
//! That page's table is one test here, named `<row>_<contender>`.
//!
//! The peers are configured as their docs show (3 attempts each, as this
//! crate's layers); what they lack is not a setting a user missed.

#[path = "peers/scripts.rs"]
mod scripts;

use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::Outcome;
use nika_retry::reqwest_middleware::Retry;
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Upstream;
use nika_retry::{Layer, RetryConfig};
use nika_retry_tests::EventLog;
use nika_retry_tests::fault::FaultServer;
use nika_retry_tests::logs::{Clock, logged};
use scripts::{HINT, SIBLINGS};
use tracing::Level;

/// `tower::retry::Retry` with the policy a user writes (tower's docs'
/// `Attempts`, plus a 5xx check and a doubling backoff), over hyper-util's
/// client.
mod tower_retry {
    use std::time::Duration;

    use bytes::Bytes;
    use http::{Request, Response};
    use http_body_util::Full;
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;
    use tower::ServiceExt;
    use tower::retry::{Policy, Retry};

    use super::scripts::Streamed;

    /// N attempts in all; a 5xx or an error is retried after 250 ms, then
    /// 500 ms, …
    #[derive(Clone)]
    pub struct Attempts {
        left: u32,
        backoff: Duration,
    }

    impl Attempts {
        pub fn new(attempts: u32) -> Attempts {
            Attempts {
                left: attempts,
                backoff: Duration::from_millis(250),
            }
        }
    }

    /// What `clone_request` can do with a body: clone a buffered one; a
    /// stream it cannot, and tower then sends the request once.
    pub trait Replay: Sized {
        fn replay(request: &Request<Self>) -> Option<Request<Self>>;
    }

    impl Replay for Full<Bytes> {
        fn replay(request: &Request<Self>) -> Option<Request<Self>> {
            Some(request.clone())
        }
    }

    impl Replay for Streamed {
        fn replay(_: &Request<Self>) -> Option<Request<Self>> {
            None
        }
    }

    impl<B: Replay, R, E> Policy<Request<B>, Response<R>, E> for Attempts {
        type Future = tokio::time::Sleep;

        fn retry(
            &mut self,
            _: &mut Request<B>,
            result: &mut Result<Response<R>, E>,
        ) -> Option<Self::Future> {
            let failed = result
                .as_ref()
                .map_or(true, |response| response.status().is_server_error());
            if !failed || self.left <= 1 {
                return None;
            }
            self.left -= 1;
            let sleep = tokio::time::sleep(self.backoff);
            self.backoff *= 2;
            Some(sleep)
        }

        fn clone_request(&mut self, request: &Request<B>) -> Option<Request<B>> {
            B::replay(request)
        }
    }

    pub type Inner<B> = Client<HttpConnector, B>;

    /// hyper-util's client for bodies of type `B`.
    pub fn inner<B>() -> Inner<B>
    where
        B: hyper::body::Body + Send + Unpin + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Client::builder(TokioExecutor::new()).build_http()
    }

    /// The client with one `Retry` of 3 attempts.
    pub fn client<B>() -> Retry<Attempts, Inner<B>>
    where
        B: hyper::body::Body + Send + Unpin + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Retry::new(Attempts::new(3), inner())
    }

    /// `request` through `service`: the status, or the error's text.
    pub async fn send<S, B, R>(service: S, request: Request<B>) -> Result<u16, String>
    where
        S: tower::Service<Request<B>, Response = Response<R>>,
        S::Error: std::fmt::Display,
    {
        let response = service.oneshot(request).await;
        response
            .map(|response| response.status().as_u16())
            .map_err(|e| e.to_string())
    }

    /// A `GET` of `url` with an empty buffered body.
    pub fn get(url: &str) -> Request<Full<Bytes>> {
        Request::get(url)
            .body(Full::default())
            .expect("a valid request")
    }
}

/// reqwest-retry's `RetryTransientMiddleware` with `ExponentialBackoff`
/// (its defaults: from 1 s, doubling, full jitter) and 2 retries.
mod reqwest_retry {
    use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
    use reqwest_retry::RetryTransientMiddleware;
    use reqwest_retry::policies::ExponentialBackoff;

    /// A client with `layers` retry middlewares stacked (as a library's and
    /// the application's both add one).
    pub fn client(layers: usize) -> ClientWithMiddleware {
        (0..layers)
            .fold(ClientBuilder::new(reqwest::Client::new()), |builder, _| {
                let policy = ExponentialBackoff::builder().build_with_max_retries(2);
                builder.with(RetryTransientMiddleware::new_with_policy(policy))
            })
            .build()
    }

    /// A `GET` of `url`: the status, or the error's text.
    pub async fn get(client: &ClientWithMiddleware, url: &str) -> Result<u16, String> {
        let response = client.get(url).send().await;
        response
            .map(|response| response.status().as_u16())
            .map_err(|e| format!("{e:#}"))
    }
}

/// This crate's `tower::RetryLayer` over the same hyper-util client, its
/// error mapped to one that classifies and holds the layer's own failures
/// (as a user writes it once for a client).
mod layer {
    use nika_retry::tower::{RetryLayer, RetryService};
    use nika_retry::upstream::Held;
    use nika_retry::{Classify, TimeoutError};
    use tower::ServiceExt;
    use tower::util::MapErr;

    use super::tower_retry::{Inner, inner};

    #[derive(Debug, thiserror::Error, Classify)]
    pub enum ClientError {
        #[error(transparent)]
        #[category(transient)]
        Client(#[from] hyper_util::client::legacy::Error),
        #[error(transparent)]
        #[category(transparent)]
        Timeout(#[from] TimeoutError),
        #[error(transparent)]
        #[category(transparent)]
        Held(#[from] Held),
    }

    pub type Client<B> = MapErr<Inner<B>, fn(hyper_util::client::legacy::Error) -> ClientError>;

    /// hyper-util's client, its errors as [`ClientError`].
    pub fn client<B>() -> Client<B>
    where
        B: hyper::body::Body + Send + Unpin + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        inner().map_err(ClientError::from as fn(_) -> _)
    }

    /// The client under one layer.
    pub fn under<B, P: Clone>(layer: RetryLayer<P>) -> RetryService<Client<B>, P>
    where
        B: hyper::body::Body + Send + Unpin + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        tower::Layer::layer(&layer, client())
    }
}

/// This crate's `reqwest_middleware::Retry` (its layers' defaults).
mod middleware {
    use nika_retry::reqwest_middleware::Retry;
    use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

    /// A client with these middlewares, outermost first.
    pub fn client(retries: impl IntoIterator<Item = Retry>) -> ClientWithMiddleware {
        retries
            .into_iter()
            .fold(
                ClientBuilder::new(reqwest::Client::new()),
                |builder, retry| builder.with(retry),
            )
            .build()
    }
}

// Row: `Retry-After` honoured (a 503 asking for 2 s, then a 200).

#[tokio::test(start_paused = true)]
async fn retry_after_tower_retry() {
    let server = FaultServer::start(scripts::retry_after()).await;
    let status = tower_retry::send(tower_retry::client(), tower_retry::get(&server.url("/")))
        .await
        .expect("a response");
    assert_eq!(status, 200);
    assert_eq!(server.requests(), 2);
    // Its own backoff, 250 ms: 1.75 s before the server asked.
    assert!(scripts::gap(&server) < Duration::from_secs(HINT));
}

#[tokio::test(start_paused = true)]
async fn retry_after_reqwest_retry() {
    let server = FaultServer::start(scripts::retry_after()).await;
    let status = reqwest_retry::get(&reqwest_retry::client(1), &server.url("/"))
        .await
        .expect("a response");
    assert_eq!(status, 200);
    assert_eq!(server.requests(), 2);
    // The first retry's backoff is drawn from [0, 1 s]: always before the
    // 2 s the server asked for (reqwest-middleware#146).
    assert!(scripts::gap(&server) <= Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn retry_after_middleware() {
    let server = FaultServer::start(scripts::retry_after()).await;
    let client = middleware::client([Retry::new(Layer::Http)]);
    let status = reqwest_retry::get(&client, &server.url("/")).await;
    assert_eq!(status, Ok(200));
    assert_eq!(server.requests(), 2);
    assert!(scripts::gap(&server) >= Duration::from_secs(HINT));
}

#[tokio::test(start_paused = true)]
async fn retry_after_layer() {
    let server = FaultServer::start(scripts::retry_after()).await;
    let service = layer::under(RetryLayer::new(Layer::Http));
    let status = tower_retry::send(service, tower_retry::get(&server.url("/"))).await;
    assert_eq!(status, Ok(200));
    assert_eq!(server.requests(), 2);
    assert!(scripts::gap(&server) >= Duration::from_secs(HINT));
}

// Row: a 429 that holds the sibling calls (a limit window of 2 s; the
// first call alone, then 4 more once its 429 is in).

#[tokio::test(start_paused = true)]
async fn siblings_tower_retry() {
    let server = FaultServer::start(scripts::limit_window()).await;
    let statuses = scripts::siblings(
        || scripts::first_answered(&server),
        || tower_retry::send(tower_retry::client(), tower_retry::get(&server.url("/"))),
    )
    .await;
    // A 429 is not a 5xx: each call meets the limit, none retries it.
    assert!(statuses.iter().all(|s| s == &Ok(429)), "{statuses:?}");
    assert_eq!(server.requests(), SIBLINGS);
    assert_eq!(server.limited(), SIBLINGS);
}

#[tokio::test(start_paused = true)]
async fn siblings_reqwest_retry() {
    let server = FaultServer::start(scripts::limit_window()).await;
    let (client, url) = (reqwest_retry::client(1), server.url("/"));
    scripts::siblings(
        || scripts::first_answered(&server),
        || reqwest_retry::get(&client, &url),
    )
    .await;
    // Each call alone: its 429, a retry within 1 s (inside the window,
    // another 429), a third attempt within 2 s more.
    assert_eq!(server.requests(), 3 * SIBLINGS);
    assert!(server.limited() >= 2 * SIBLINGS, "{}", server.limited());
}

#[tokio::test(start_paused = true)]
async fn siblings_middleware() {
    let server = FaultServer::start(scripts::limit_window()).await;
    let upstream = Upstream::new("loopback");
    let client = middleware::client([Retry::new(Layer::Provider).upstream(upstream.clone())]);
    let url = server.url("/");
    let statuses = scripts::siblings(
        || upstream.held_for().is_some(),
        || reqwest_retry::get(&client, &url),
    )
    .await;
    assert!(statuses.iter().all(|s| s == &Ok(200)), "{statuses:?}");
    // One 429 held them all: the first call's retry and the 4 siblings
    // start once the hold is over.
    assert_eq!(server.limited(), 1);
    assert_eq!(server.requests(), SIBLINGS + 1);
}

#[tokio::test(start_paused = true)]
async fn siblings_layer() {
    let server = FaultServer::start(scripts::limit_window()).await;
    let upstream = Upstream::new("loopback");
    let service = layer::under(RetryLayer::new(Layer::Provider).upstream(upstream.clone()));
    let url = server.url("/");
    let statuses = scripts::siblings(
        || upstream.held_for().is_some(),
        || tower_retry::send(service.clone(), tower_retry::get(&url)),
    )
    .await;
    assert!(statuses.iter().all(|s| s == &Ok(200)), "{statuses:?}");
    assert_eq!(server.limited(), 1);
    assert_eq!(server.requests(), SIBLINGS + 1);
}

// Row: a budget across nested layers (3 layers of 3 attempts each, every
// request a 503).

#[tokio::test(start_paused = true)]
async fn nested_tower_retry() {
    let server = FaultServer::start(scripts::always_unavailable()).await;
    let service = tower::ServiceBuilder::new()
        .retry(tower_retry::Attempts::new(3))
        .retry(tower_retry::Attempts::new(3))
        .service(tower_retry::client());
    let status = tower_retry::send(service, tower_retry::get(&server.url("/"))).await;
    assert_eq!(status, Ok(503));
    assert_eq!(server.requests(), 27);
}

#[tokio::test(start_paused = true)]
async fn nested_reqwest_retry() {
    let server = FaultServer::start(scripts::always_unavailable()).await;
    let status = reqwest_retry::get(&reqwest_retry::client(3), &server.url("/")).await;
    // Each layer's give-up hands the 503 back to the one above, which
    // retries it.
    assert_eq!(status, Ok(503));
    assert_eq!(server.requests(), 27);
}

/// This crate's three layers, outermost first: a task's (3 attempts, said
/// in its config), a provider's, an http one.
fn three_layers() -> [Retry; 3] {
    let task = RetryConfig::for_layer(Layer::Task)
        .with_max_attempts(3)
        .expect("3 attempts");
    [
        Retry::new(Layer::Task).config(task),
        Retry::new(Layer::Provider),
        Retry::new(Layer::Http),
    ]
}

#[tokio::test(start_paused = true)]
async fn nested_layer() {
    let server = FaultServer::start(scripts::always_unavailable()).await;
    let task = RetryConfig::for_layer(Layer::Task)
        .with_max_attempts(3)
        .expect("3 attempts");
    let service = tower::ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Task).config(task))
        .layer(RetryLayer::new(Layer::Provider))
        .layer(RetryLayer::new(Layer::Http))
        .service(layer::client());
    let request = tower_retry::send(service, tower_retry::get(&server.url("/")));
    let (status, log) = EventLog::record(request).await;
    assert_eq!(status, Ok(503));
    // The budget of the outermost call: 9, not 3 × 3 × 3.
    assert_eq!(server.requests(), 9);
    assert!(
        log.outline()
            .iter()
            .any(|(_, o)| *o == Outcome::BudgetExhausted)
    );
}

#[tokio::test(start_paused = true)]
async fn nested_middleware() {
    let server = FaultServer::start(scripts::always_unavailable()).await;
    let client = middleware::client(three_layers());
    let (status, log) = EventLog::record(reqwest_retry::get(&client, &server.url("/"))).await;
    assert_eq!(status, Ok(503));
    // The budget of the outermost call: 9, not 3 × 3 × 3.
    assert_eq!(server.requests(), 9);
    assert!(
        log.outline()
            .iter()
            .any(|(_, o)| *o == Outcome::BudgetExhausted)
    );
}

// Row: a body that cannot be replayed (a stream; a 503, then a 200).

#[tokio::test(start_paused = true)]
async fn streamed_body_tower_retry() {
    let server = FaultServer::start(scripts::unavailable_then_ok()).await;
    let request = http::Request::put(server.url("/"))
        .body(scripts::streamed())
        .expect("a valid request");
    let status = tower_retry::send(tower_retry::client(), request).await;
    // `clone_request` said `None`: sent once, its 503 handed back, and
    // nothing says that it was not retried, nor why.
    assert_eq!(status, Ok(503));
    assert_eq!(server.requests(), 1);
    assert_eq!(server.hits()[0].body, scripts::PAYLOAD);
}

#[tokio::test(start_paused = true)]
async fn streamed_body_reqwest_retry() {
    let server = FaultServer::start(scripts::unavailable_then_ok()).await;
    let body = reqwest::Body::wrap_stream(scripts::byte_stream());
    let response = reqwest_retry::client(1)
        .put(server.url("/"))
        .body(body)
        .send()
        .await;
    // Refused before it is sent: not even once.
    let error = response.expect_err("a streamed body is refused");
    assert!(error.to_string().contains("not cloneable"), "{error}");
    assert_eq!(server.requests(), 0);
}

#[tokio::test(start_paused = true)]
async fn streamed_body_layer() {
    let server = FaultServer::start(scripts::unavailable_then_ok()).await;
    // A stream cannot be copied: the layer is told so.
    let retry = RetryLayer::new(Layer::Http).replay_body(|_: &scripts::Streamed| None);
    let request = http::Request::put(server.url("/"))
        .body(scripts::streamed())
        .expect("a valid request");
    let (status, log) = EventLog::record(tower_retry::send(layer::under(retry), request)).await;
    assert_eq!(status, Ok(503));
    assert_eq!(server.requests(), 1);
    assert_eq!(server.hits()[0].body, scripts::PAYLOAD);
    let reasons: Vec<_> = log.events().iter().map(|e| e.reason).collect();
    assert_eq!(reasons, [Some(GiveUp::NotReplayable)]);
}

#[tokio::test(start_paused = true)]
async fn streamed_body_middleware() {
    let server = FaultServer::start(scripts::unavailable_then_ok()).await;
    let body = reqwest::Body::wrap_stream(scripts::byte_stream());
    let client = middleware::client([Retry::new(Layer::Http)]);
    let request = client.put(server.url("/")).body(body).send();
    let (response, log) = EventLog::record(request).await;
    // Sent once, its 503 handed back, and the event says why.
    assert_eq!(response.expect("a response").status().as_u16(), 503);
    assert_eq!(server.requests(), 1);
    let reasons: Vec<_> = log.events().iter().map(|e| e.reason).collect();
    assert_eq!(reasons, [Some(GiveUp::NotReplayable)]);
}

// Row: an event per decision (3 attempts, each a 503: two retries and a
// give-up), read from what a `tracing` subscriber prints at DEBUG.

#[test]
fn events_tower_retry() {
    let (requests, text) = logged(Level::DEBUG, Clock::Paused, async {
        let server = FaultServer::start(scripts::always_unavailable()).await;
        let status =
            tower_retry::send(tower_retry::client(), tower_retry::get(&server.url("/"))).await;
        assert_eq!(status, Ok(503));
        server.requests()
    });
    assert_eq!(requests, 3);
    assert_eq!(scripts::retry_lines(&text), Vec::<&str>::new(), "{text}");
}

#[test]
fn events_reqwest_retry() {
    let (requests, text) = logged(Level::DEBUG, Clock::Paused, async {
        let server = FaultServer::start(scripts::always_unavailable()).await;
        let status = reqwest_retry::get(&reqwest_retry::client(1), &server.url("/")).await;
        assert_eq!(status, Ok(503));
        server.requests()
    });
    assert_eq!(requests, 3);
    // A line per retry; none for the give-up, no category, no layer.
    let lines = scripts::retry_lines(&text);
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines.iter().all(|l| l.contains("Retry attempt")), "{text}");
}

#[test]
fn events_layer() {
    let (requests, text) = logged(Level::DEBUG, Clock::Paused, async {
        let server = FaultServer::start(scripts::always_unavailable()).await;
        let service = layer::under(RetryLayer::new(Layer::Http));
        let status = tower_retry::send(service, tower_retry::get(&server.url("/"))).await;
        assert_eq!(status, Ok(503));
        server.requests()
    });
    assert_eq!(requests, 3);
    let lines = scripts::retry_lines(&text);
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[2].contains("gave_up"), "{text}");
}

#[test]
fn events_middleware() {
    let (requests, text) = logged(Level::DEBUG, Clock::Paused, async {
        let server = FaultServer::start(scripts::always_unavailable()).await;
        let client = middleware::client([Retry::new(Layer::Http)]);
        let status = reqwest_retry::get(&client, &server.url("/")).await;
        assert_eq!(status, Ok(503));
        server.requests()
    });
    assert_eq!(requests, 3);
    // Two retries and the give-up, each with its layer and category.
    let lines = scripts::retry_lines(&text);
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains("layer=\"http\"") || l.contains("layer=http")),
        "{text}"
    );
    assert!(
        lines[2].contains("gave up") || lines[2].contains("gave_up"),
        "{text}"
    );
}
