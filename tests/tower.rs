//! `nika_retry::tower::RetryLayer` over hyper-util's client, against the
//! fault server on 127.0.0.1: each layer's defaults, a layer under an
//! annotated provider fn (one budget, one idempotency key), cancellation,
//! and a body that cannot be replayed.

mod tower_support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use nika_retry::engine::GiveUp;
use nika_retry::events::{EventLog, Outcome, observe};
use nika_retry::tower::RetryLayer;
use nika_retry::{Layer, retry};
use nika_retry_tests::fault::{Fault, FaultServer};
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_support::{HttpError, quick, request, status, through};

fn retry_after(status: u16, seconds: &str) -> Fault {
    Fault::WithHeaders(status, vec![("retry-after".into(), seconds.into())])
}

#[tokio::test]
async fn http_sends_3_attempts_on_5xx_and_leaves_429_alone() {
    let server =
        FaultServer::start([Fault::Status(503), Fault::Status(502), Fault::ok("hi")]).await;
    let mut service = through(RetryLayer::new(Layer::Http));
    assert_eq!(
        status(&mut service, request(Method::GET, &server.url("/")))
            .await
            .unwrap(),
        200
    );
    assert_eq!(server.requests(), 3);

    let server = FaultServer::start([Fault::Status(500)]).await;
    assert_eq!(
        status(&mut service, request(Method::GET, &server.url("/")))
            .await
            .unwrap(),
        500
    );
    assert_eq!(server.requests(), 3, "3 attempts, the last 500 handed back");

    let server = FaultServer::start([retry_after(429, "1"), Fault::ok("hi")]).await;
    assert_eq!(
        status(&mut service, request(Method::GET, &server.url("/")))
            .await
            .unwrap(),
        429
    );
    assert_eq!(server.requests(), 1, "429 is the provider's");
}

#[tokio::test]
async fn provider_retries_429_waiting_out_retry_after() {
    let server = FaultServer::start([retry_after(429, "1"), Fault::ok("hi")]).await;
    let mut service = through(RetryLayer::new(Layer::Provider));
    let started = tokio::time::Instant::now();
    assert_eq!(
        status(&mut service, request(Method::GET, &server.url("/")))
            .await
            .unwrap(),
        200
    );
    assert_eq!(server.requests(), 2);
    let hits = server.hits();
    let waited = hits[1].at - hits[0].at;
    assert!(waited >= Duration::from_secs(1), "{waited:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the hint, not the 1 s..4 s backoff"
    );
}

#[tokio::test]
async fn tool_never_retries_by_itself() {
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    let log = Arc::new(EventLog::new());
    let mut service = through(RetryLayer::new(Layer::Tool));
    let sent = status(&mut service, request(Method::GET, &server.url("/")));
    assert_eq!(observe(log.clone(), sent).await.unwrap(), 503);
    assert_eq!(server.requests(), 1);
    assert_eq!(log.events()[0].reason, Some(GiveUp::NotOptedIn));
}

#[tokio::test]
async fn a_connection_refused_is_retried_even_for_a_post() {
    let port = nika_retry_tests::fault::closed_port().await;
    let log = Arc::new(EventLog::new());
    let layer = RetryLayer::new(Layer::Http).config(quick(Layer::Http));
    let mut service = through(layer);
    let url = format!("http://{port}/");
    let sent = status(&mut service, request(Method::POST, &url));
    assert!(matches!(
        observe(log.clone(), sent).await,
        Err(HttpError::Client(_))
    ));
    let outcomes: Vec<Outcome> = log.events().iter().map(|e| e.outcome).collect();
    assert_eq!(
        outcomes,
        [Outcome::Retrying, Outcome::Retrying, Outcome::GaveUp]
    );
}

/// A provider fn whose transport is the layer: a 5xx that the http layer
/// gave up on is the provider's to retry.
#[retry(layer = "provider", backoff = "1ms")]
async fn complete(url: &str) -> Result<u16, HttpError> {
    let layer = RetryLayer::new(Layer::Http).config(quick(Layer::Http));
    let mut service = through(layer);
    match status(&mut service, request(Method::POST, url)).await? {
        s if s >= 500 => Err(HttpError::Status(s)),
        s => Ok(s),
    }
}

#[tokio::test]
async fn under_a_provider_fn_the_budget_and_the_key_are_the_calls() {
    let server = FaultServer::start([Fault::Status(503)]).await;
    let log = Arc::new(EventLog::new());
    let got = observe(log.clone(), complete(&server.url("/"))).await;
    assert!(matches!(got, Err(HttpError::Status(503))), "{got:?}");
    // 3 × 3, not 3 × 3 × 3: one budget for the provider call and its layer.
    assert_eq!(server.requests(), 9);
    let keys: Vec<Option<String>> = server
        .hits()
        .into_iter()
        .map(|h| h.idempotency_key)
        .collect();
    assert!(keys[0].is_some(), "current_attempt() in the inner service");
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    assert!(
        log.violations().is_empty(),
        "http under provider is the normal shape"
    );
}

#[tokio::test]
async fn dropping_the_response_future_sends_nothing_more() {
    // During an attempt: the request hangs, the future is dropped.
    let server = FaultServer::start([Fault::Hang]).await;
    let mut service = through(RetryLayer::new(Layer::Http));
    let sent = status(&mut service, request(Method::GET, &server.url("/")));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), sent)
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.requests(), 1);
    // During a backoff: a 503, then a 10 s wait the future is dropped in.
    let server = FaultServer::start([Fault::Status(503)]).await;
    let slow = RetryLayer::new(Layer::Http).config(
        nika_retry::RetryConfig::for_layer(Layer::Http)
            .with_max_backoff(Duration::from_secs(10))
            .and_then(|c| c.with_initial_backoff(Duration::from_secs(10)))
            .unwrap()
            .with_jitter(0.0)
            .unwrap(),
    );
    let mut service = through(slow);
    let sent = status(&mut service, request(Method::GET, &server.url("/")));
    assert!(
        tokio::time::timeout(Duration::from_secs(2), sent)
            .await
            .is_err()
    );
    assert_eq!(server.requests(), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.requests(), 1, "nothing sent after the drop");
}

#[tokio::test]
async fn a_body_that_cannot_be_replayed_is_sent_once_and_its_event_says_so() {
    type Streamed = BoxBody<Bytes, std::convert::Infallible>;
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    let layer = RetryLayer::new(Layer::Http).replay_body(|_: &Streamed| None);
    let mut service = ServiceBuilder::new()
        .layer(layer)
        .map_err(HttpError::from)
        .service(
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Streamed>(),
        );
    let body = http_body_util::Full::new(Bytes::from_static(b"streamed")).boxed();
    let request = Request::post(server.url("/")).body(body).unwrap();
    let log = Arc::new(EventLog::new());
    let sent = async { service.ready().await?.call(request).await };
    let response = observe(log.clone(), sent).await.unwrap();
    assert_eq!(response.status(), 503, "handed back as it came");
    assert_eq!(server.requests(), 1);
    let events = log.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, Some(GiveUp::NotReplayable));
    assert!(
        events[0].to_string().contains("cannot be sent again"),
        "{}",
        events[0]
    );
}
