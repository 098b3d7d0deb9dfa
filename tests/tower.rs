//! `nika_retry::tower::RetryLayer` over hyper-util's client, against the
//! fault server on 127.0.0.1: each layer's defaults, a layer under an
//! annotated provider fn (one budget, one idempotency key), cancellation,
//! a body that cannot be replayed and one that `replay_body` copies, time
//! limits, and the upstream: the layer's own, or the calls' around it.

mod tower_support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use nika_retry::engine::GiveUp;
use nika_retry::events::{EventLog, Outcome, observe};
use nika_retry::tower::{RetryLayer, Timeouts};
use nika_retry::upstream::{HoldReason, Upstream};
use nika_retry::{Boundary, Layer, retry};
use nika_retry_tests::fault::{Fault, FaultServer};
use tower::ServiceBuilder;
use tower_support::{Body, HttpError, quick, request, status, through};

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

#[tokio::test]
async fn a_task_scope_opts_the_tool_layer_in_and_its_token_bucket_is_the_layers() {
    use nika_retry::TokenBucket;
    use nika_retry::task::{TaskPolicy, scope};

    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    let retry = quick(Layer::Tool).with_max_attempts(2).unwrap();
    let policy = TaskPolicy::new().with_retry(retry);
    let mut service = through(RetryLayer::new(Layer::Tool));
    let sent = status(&mut service, request(Method::GET, &server.url("/")));
    assert_eq!(scope(policy, sent).await.unwrap(), 200);
    assert_eq!(server.requests(), 2, "opted in by the task");

    // A bucket that cannot pay for one retry (a retry costs 5).
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    let policy = TaskPolicy::new().with_token_bucket(Layer::Provider, TokenBucket::new(4));
    let log = Arc::new(EventLog::new());
    let layer = RetryLayer::new(Layer::Provider).config(quick(Layer::Provider));
    let mut service = through(layer);
    let sent = status(&mut service, request(Method::GET, &server.url("/")));
    assert_eq!(
        observe(log.clone(), scope(policy, sent)).await.unwrap(),
        503
    );
    assert_eq!(server.requests(), 1);
    assert_eq!(log.events()[0].reason, Some(GiveUp::TokenBucketEmpty));
}

#[tokio::test]
async fn a_body_that_replay_body_copies_is_sent_again_with_the_requests_head() {
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    // `Full` is `Clone`, but through `HttpBody`: its copy, not `Http`'s.
    let layer = RetryLayer::new(Layer::Http)
        .config(quick(Layer::Http))
        .replay_body(|body: &Body| Some(body.clone()));
    let mut service = through(layer);
    let mut request = request(Method::PUT, &server.url("/v1/files"));
    let headers = request.headers_mut();
    headers.insert("authorization", "Bearer sk-test".parse().unwrap());
    headers.insert("content-type", "text/plain".parse().unwrap());
    assert_eq!(status(&mut service, request).await.unwrap(), 200);
    let hits = server.hits();
    assert_eq!(hits.len(), 2, "the 503 was retried");
    // Each attempt's copy carries the caller's request, not just its body.
    for hit in &hits {
        assert_eq!(hit.path, "/v1/files");
        assert_eq!(hit.body, "ping");
        assert_eq!(hit.header("authorization"), Some("Bearer sk-test"));
        assert_eq!(hit.header("content-type"), Some("text/plain"));
    }
}

#[tokio::test(start_paused = true)]
async fn an_attempt_limit_is_the_inner_errors_timeout_and_each_attempt_has_its_own() {
    let server = FaultServer::start([Fault::Hang]).await;
    let limit = Duration::from_millis(500);
    let layer = RetryLayer::new(Layer::Http)
        .config(quick(Layer::Http))
        .timeouts(Timeouts::NONE.with_attempt(limit));
    let mut service = through(layer);
    let sent = status(&mut service, request(Method::GET, &server.url("/")));
    // Bounded: a limit that never cuts fails here, not at the server's end.
    let error = tokio::time::timeout(Duration::from_secs(30), sent).await;
    let Ok(Err(HttpError::Timeout(timeout))) = error else {
        panic!("not the layer's limit: {error:?}")
    };
    assert_eq!(
        (timeout.boundary(), timeout.limit()),
        (Boundary::Attempt, limit)
    );
    // A limit of each attempt is retried: 3 attempts, each cut at 500 ms.
    assert_eq!(server.requests(), 3);
}

#[tokio::test]
async fn a_429_holds_the_upstream_for_a_sibling_request() {
    let server = FaultServer::start([retry_after(429, "1"), Fault::ok("a"), Fault::ok("b")]).await;
    let upstream = Upstream::new("tests/tower");
    let layer = RetryLayer::new(Layer::Provider).upstream(upstream.clone());
    let url = server.url("/");
    let mut first = through(layer.clone());
    let mut sibling = through(layer);
    let (a, b) = tokio::join!(status(&mut first, request(Method::GET, &url)), async {
        // Once the 429 is in: the sibling meets the hold.
        while server.requests() == 0 || upstream.held_for().is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        status(&mut sibling, request(Method::GET, &url)).await
    });
    assert_eq!((a.unwrap(), b.unwrap()), (200, 200));
    let hits = server.hits();
    assert_eq!(hits.len(), 3);
    for later in &hits[1..] {
        assert!(
            later.at - hits[0].at >= Duration::from_millis(990),
            "{:?}",
            later.at - hits[0].at
        );
    }
}

#[tokio::test]
async fn a_success_s_rate_limit_headers_go_to_the_upstream() {
    let spent = [
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "30s"),
    ];
    let headers = spent
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    let server = FaultServer::start([Fault::WithHeaders(200, headers.collect())]).await;
    let upstream = Upstream::new("tests/tower-headers");
    let mut service = through(RetryLayer::new(Layer::Provider).upstream(upstream.clone()));
    assert_eq!(
        status(&mut service, request(Method::GET, &server.url("/")))
            .await
            .unwrap(),
        200
    );
    let held = upstream
        .held_for()
        .expect("none left: held until the reset");
    assert!(held > Duration::from_secs(25), "{held:?}");
}

/// A 200 that spends the last request until a reset 30 minutes away.
fn last_request_for_30_minutes() -> Fault {
    let headers = [
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "30m0s"),
    ];
    let headers = headers.map(|(k, v)| (k.to_owned(), v.to_owned()));
    Fault::WithHeaders(200, headers.to_vec())
}

/// A provider fn that names an upstream, over a layer that names none.
#[retry(layer = "provider", upstream = upstream, backoff = "1ms")]
async fn provider_over_a_bare_layer(upstream: &Upstream, url: &str) -> Result<u16, HttpError> {
    let mut service = through(RetryLayer::new(Layer::Http));
    status(&mut service, request(Method::GET, url)).await
}

#[tokio::test]
async fn without_an_upstream_of_its_own_the_layer_observes_for_the_call_around_it() {
    let server = FaultServer::start([last_request_for_30_minutes(), Fault::ok("hi")]).await;
    let upstream = Upstream::new("tests/tower-around");
    let url = server.url("/");
    assert_eq!(
        provider_over_a_bare_layer(&upstream, &url).await.unwrap(),
        200
    );
    // The layer gave the headers to the fn's upstream: none left for 30
    // minutes, longer than a provider call waits (60 s).
    let next = provider_over_a_bare_layer(&upstream, &url).await;
    let Err(HttpError::Held(held)) = next else {
        panic!("not held by the first response's headers: {next:?}")
    };
    assert_eq!(held.reason(), HoldReason::RateLimitHeaders);
    assert_eq!(server.requests(), 1, "the held call sent nothing");
}

/// An http fn whose transport is a provider layer: upside down.
#[retry(layer = "http", backoff = "1ms")]
async fn upside_down(url: &str) -> Result<u16, HttpError> {
    let mut service = through(RetryLayer::new(Layer::Provider));
    status(&mut service, request(Method::GET, url)).await
}

#[tokio::test]
async fn a_provider_layer_under_an_http_fn_is_reported() {
    let server = FaultServer::start([Fault::ok("hi")]).await;
    let log = Arc::new(EventLog::new());
    assert_eq!(
        observe(log.clone(), upside_down(&server.url("/")))
            .await
            .unwrap(),
        200
    );
    let violations = log.violations();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(
        (violations[0].outer_layer, violations[0].inner_layer),
        (Layer::Http, Layer::Provider)
    );
    assert_eq!(
        violations[0].inner_operation,
        "nika_retry::tower::RetryLayer"
    );
}

/// Anthropic's reset instants, answers in 50–150 ms, a rolling window:
/// the layer reads each response's headers as its attempt's, so an
/// instant bounds the window from when that request left (read from the
/// response, the window looked shorter by the answer's time, and the
/// burst sent at its end met the server before it freed it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_reads_a_reset_instant_from_when_its_request_left() {
    use nika_retry_tests::fault::quota::{Config, Dialect, Kind, QuotaServer};
    let config = Config::per(Duration::from_secs(2))
        .requests(5)
        .tokens(1_000_000)
        .kind(Kind::Rolling)
        .dialect(Dialect::Anthropic)
        .generation(Duration::from_millis(50), Duration::from_millis(150));
    let server = QuotaServer::start(config).await;
    let upstream = Upstream::new("tests/tower-instants");
    let service = through(RetryLayer::new(Layer::Provider).upstream(upstream));
    let url = server.url("/v1/complete");
    let calls = (0..25).map(|_| {
        let mut service = service.clone();
        let request = request(Method::POST, &url);
        async move { status(&mut service, request).await }
    });
    let all = futures_util::future::join_all(calls);
    let results = tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("every request ends");
    let counts = server.counts();
    assert!(results.iter().all(|r| matches!(r, Ok(200))), "{counts:?}");
    // 5 windows of 5: none refused (1–5 were, each run, before).
    assert!(counts.limited <= 1, "{counts:?}");
}
