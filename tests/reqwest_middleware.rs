//! `nika_retry::reqwest_middleware::Retry` in a real reqwest client, against
//! the loopback fault server, on the paused clock: the layers' defaults,
//! `Retry-After`, an upstream's hold shared by sibling requests, a body that
//! cannot be replayed (sent once, its event saying why), cancellation, the
//! budget shared with annotated fns around it, and `current_attempt()` in
//! the middlewares below it; its upstream, its own (shared by its clones)
//! or the calls' around it.

use std::sync::Arc;
use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::{Outcome, observe};
use nika_retry::reqwest_middleware::{Retry, Timeouts};
use nika_retry::upstream::{Held, HoldReason, Upstream};
use nika_retry::{Classify, Layer, RetryConfig, current_attempt, retry};
use nika_retry_tests::EventLog;
use nika_retry_tests::fault::{Fault, FaultServer};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};

const OPERATION: &str = "nika_retry::reqwest_middleware::Retry";

fn client(retry: Retry) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(retry)
        .build()
}

/// A `GET` of `url`: the status.
async fn get(client: &ClientWithMiddleware, url: &str) -> Result<u16, reqwest_middleware::Error> {
    let response = client.get(url).send().await?;
    Ok(response.status().as_u16())
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The gaps between the requests the server saw.
fn gaps(server: &FaultServer) -> Vec<Duration> {
    let hits = server.hits();
    hits.windows(2).map(|w| w[1].at - w[0].at).collect()
}

#[tokio::test(start_paused = true)]
async fn http_makes_3_attempts_250ms_then_1s_apart_and_hands_back_the_last_503() {
    let server = FaultServer::start([Fault::Status(503)]).await;
    let client = client(Retry::new(Layer::Http));
    let (status, log) = EventLog::record(get(&client, &server.url("/"))).await;
    assert_eq!(status.expect("a response"), 503);
    assert_eq!(server.requests(), 3);
    // 50 % jitter below each backoff.
    let gaps = gaps(&server);
    assert!((ms(125)..=ms(251)).contains(&gaps[0]), "{gaps:?}");
    assert!((ms(500)..=ms(1001)).contains(&gaps[1]), "{gaps:?}");
    let outcomes = [Outcome::Retrying, Outcome::Retrying, Outcome::GaveUp];
    assert_eq!(log.outline(), outcomes.map(|o| (Layer::Http, o)).to_vec());
    assert!(log.events().iter().all(|e| e.operation == OPERATION));
}

#[tokio::test(start_paused = true)]
async fn http_leaves_a_429_to_the_layer_above_and_provider_retries_it() {
    let server = FaultServer::start([Fault::Status(429), Fault::ok("ok")]).await;
    let status = get(&client(Retry::new(Layer::Http)), &server.url("/")).await;
    assert_eq!(status.expect("a response"), 429);
    assert_eq!(server.requests(), 1);

    let server = FaultServer::start([Fault::Status(429), Fault::ok("ok")]).await;
    let status = get(&client(Retry::new(Layer::Provider)), &server.url("/")).await;
    assert_eq!(status.expect("a response"), 200);
    assert_eq!(server.requests(), 2);
    // The provider layer's first backoff: 1 s, 50 % jitter.
    assert!((ms(500)..=ms(1001)).contains(&gaps(&server)[0]));
}

#[tokio::test(start_paused = true)]
async fn tool_and_task_never_retry_by_themselves_but_do_with_a_config() {
    for layer in [Layer::Tool, Layer::Task] {
        let server = FaultServer::start([Fault::Status(503), Fault::ok("ok")]).await;
        let status = get(&client(Retry::new(layer)), &server.url("/")).await;
        assert_eq!(status.expect("a response"), 503, "{layer}");
        assert_eq!(server.requests(), 1, "{layer}");

        let server = FaultServer::start([Fault::Status(503), Fault::ok("ok")]).await;
        let config = RetryConfig::for_layer(layer)
            .with_max_attempts(2)
            .expect("2 attempts");
        let status = get(&client(Retry::new(layer).config(config)), &server.url("/")).await;
        assert_eq!(status.expect("a response"), 200, "{layer}");
        assert_eq!(server.requests(), 2, "{layer}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_servers_retry_after_replaces_the_backoff() {
    let server = FaultServer::start([Fault::UnavailableFor(2), Fault::ok("ok")]).await;
    let (status, log) =
        EventLog::record(get(&client(Retry::new(Layer::Http)), &server.url("/"))).await;
    assert_eq!(status.expect("a response"), 200);
    assert_eq!(server.requests(), 2);
    assert!(
        gaps(&server)[0] >= Duration::from_secs(2),
        "{:?}",
        gaps(&server)
    );
    let events = log.events();
    assert_eq!(events[0].delay, Some(Duration::from_secs(2)));
    assert!(events[0].from_hint);
    assert_eq!(events[1].outcome, Outcome::Recovered);
}

#[tokio::test(start_paused = true)]
async fn x_should_retry_false_wins_over_a_503() {
    let headers = vec![("x-should-retry".to_owned(), "false".to_owned())];
    let server = FaultServer::start([Fault::WithHeaders(503, headers), Fault::ok("ok")]).await;
    let status = get(&client(Retry::new(Layer::Http)), &server.url("/")).await;
    assert_eq!(status.expect("a response"), 503);
    assert_eq!(server.requests(), 1);
}

#[tokio::test(start_paused = true)]
async fn one_429_holds_the_sibling_requests_through_the_upstream() {
    let server = FaultServer::start([Fault::LimitWindow {
        window: Duration::from_secs(2),
        retry_after: 2,
    }])
    .await;
    let upstream = Upstream::new("loopback");
    let client = client(Retry::new(Layer::Provider).upstream(upstream.clone()));
    let url = server.url("/");
    let first = get(&client, &url);
    let siblings = async {
        while upstream.held_for().is_none() {
            tokio::time::sleep(ms(1)).await;
        }
        futures_util::future::join_all((0..4).map(|_| get(&client, &url))).await
    };
    let (first, siblings) = tokio::join!(first, siblings);
    assert_eq!(first.expect("a response"), 200);
    assert!(
        siblings.iter().all(|s| matches!(s, Ok(200))),
        "{siblings:?}"
    );
    // One 429; the first call's retry and the 4 siblings after the hold.
    assert_eq!(server.limited(), 1);
    assert_eq!(server.requests(), 6);
}

#[tokio::test(start_paused = true)]
async fn a_streamed_body_is_sent_once_and_its_event_says_why_it_was_not_retried() {
    let server = FaultServer::start([Fault::Status(503), Fault::ok("ok")]).await;
    let stream = futures_util::stream::iter([Ok::<_, std::io::Error>("payload")]);
    let request = client(Retry::new(Layer::Http))
        .put(server.url("/"))
        .body(reqwest::Body::wrap_stream(stream))
        .send();
    let (response, log) = EventLog::record(request).await;
    assert_eq!(response.expect("a response").status().as_u16(), 503);
    assert_eq!(server.requests(), 1);
    assert_eq!(server.hits()[0].body, "payload");
    let events = log.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].outcome, Outcome::GaveUp);
    assert_eq!(events[0].reason, Some(GiveUp::NotReplayable));

    // A buffered body of the same request is replayed.
    let server = FaultServer::start([Fault::Status(503), Fault::ok("ok")]).await;
    let response = client(Retry::new(Layer::Http))
        .put(server.url("/"))
        .body("payload")
        .send()
        .await;
    assert_eq!(response.expect("a response").status().as_u16(), 200);
    assert_eq!(server.requests(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_post_is_not_sent_again_after_a_500_but_is_after_a_503() {
    for (status, requests) in [(500, 1), (503, 2)] {
        let server = FaultServer::start([Fault::Status(status), Fault::ok("ok")]).await;
        let response = client(Retry::new(Layer::Http))
            .post(server.url("/"))
            .body("mail")
            .send()
            .await;
        assert!(response.is_ok());
        assert_eq!(server.requests(), requests, "after a {status}");
    }
    // Said idempotent (the server deduplicates): retried after a 500 too.
    let server = FaultServer::start([Fault::Status(500), Fault::ok("ok")]).await;
    let retry = Retry::new(Layer::Http).idempotent(true);
    let response = client(retry)
        .post(server.url("/"))
        .body("mail")
        .send()
        .await;
    assert_eq!(response.expect("a response").status().as_u16(), 200);
    assert_eq!(server.requests(), 2);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_request_future_sends_nothing_more() {
    let server = FaultServer::start([Fault::Status(503), Fault::ok("ok")]).await;
    let client = client(Retry::new(Layer::Http));
    let url = server.url("/");
    let request = get(&client, &url);
    // Dropped during the backoff after the first 503.
    let cut = tokio::time::timeout(ms(100), request).await;
    assert!(cut.is_err());
    assert_eq!(server.requests(), 1);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(server.requests(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_limit_is_a_timeout_error_in_the_middleware_error() {
    let server = FaultServer::start([Fault::Hang]).await;
    let retry = Retry::new(Layer::Http).timeouts(Timeouts::NONE.with_attempt(ms(500)));
    let error = get(&client(retry), &server.url("/"))
        .await
        .expect_err("every attempt hangs");
    assert_eq!(server.requests(), 3);
    let timeout = error.timeout().expect("a TimeoutError");
    assert_eq!(timeout.limit(), ms(500));
}

/// The error of an annotated fn over the middleware client.
#[derive(Debug, thiserror::Error, Classify)]
enum CallError {
    #[error(transparent)]
    #[category(transparent)]
    Middleware(#[from] reqwest_middleware::Error),
    #[error("HTTP {status}")]
    #[category(http_status = status)]
    Status { status: u16 },
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

#[retry(layer = "provider")]
async fn provider(client: &ClientWithMiddleware, url: &str) -> Result<u16, CallError> {
    let status = get(client, url).await?;
    if status >= 400 {
        return Err(CallError::Status { status });
    }
    Ok(status)
}

#[retry(layer = "task", attempts = 3, jitter = 0.0)]
async fn task(client: &ClientWithMiddleware, url: &str) -> Result<u16, CallError> {
    provider(client, url).await
}

#[tokio::test(start_paused = true)]
async fn under_annotated_fns_the_middleware_spends_their_budget() {
    let server = FaultServer::start([Fault::Status(503)]).await;
    let client = client(Retry::new(Layer::Http));
    // provider (3) over the middleware (3): 3 × 3.
    assert!(provider(&client, &server.url("/")).await.is_err());
    assert_eq!(server.requests(), 9);
    // One level more cannot multiply it: 9, not 3 × 3 × 3.
    let server = FaultServer::start([Fault::Status(503)]).await;
    let (result, log) = EventLog::record(task(&client, &server.url("/"))).await;
    assert!(result.is_err());
    assert_eq!(server.requests(), 9);
    let events = log.events();
    assert!(
        events.iter().any(|e| e.outcome == Outcome::BudgetExhausted),
        "{events:#?}"
    );
    assert!(events.iter().all(|e| e.total_attempts <= 9));
}

/// A middleware below [`Retry`] that sends `current_attempt()` as the
/// Stainless SDKs do: `Idempotency-Key` and `X-Retry-Count`.
struct AttemptHeaders;

#[async_trait::async_trait]
impl Middleware for AttemptHeaders {
    async fn handle(
        &self,
        mut request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let attempt = current_attempt().expect("an attempt in force");
        let headers = request.headers_mut();
        let key = attempt.idempotency_key.to_string();
        headers.insert("idempotency-key", key.parse().expect("a header value"));
        let count = (attempt.attempt - 1).to_string();
        headers.insert("x-retry-count", count.parse().expect("a header value"));
        next.run(request, extensions).await
    }
}

#[tokio::test(start_paused = true)]
async fn the_middlewares_below_read_the_attempt_and_its_idempotency_key() {
    let server =
        FaultServer::start([Fault::Status(503), Fault::Status(503), Fault::ok("ok")]).await;
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(Retry::new(Layer::Http))
        .with(AttemptHeaders)
        .build();
    assert_eq!(
        get(&client, &server.url("/")).await.expect("a response"),
        200
    );
    let hits = server.hits();
    let counts: Vec<_> = hits.iter().map(|h| h.retry_count.as_deref()).collect();
    assert_eq!(counts, [Some("0"), Some("1"), Some("2")]);
    let key = hits[0].idempotency_key.clone().expect("a key");
    assert!(
        hits.iter()
            .all(|h| h.idempotency_key.as_deref() == Some(&key))
    );
    assert!(current_attempt().is_none(), "nothing left in force");
}

#[tokio::test(start_paused = true)]
async fn a_success_after_retries_keeps_the_extensions_of_its_last_attempt() {
    #[derive(Clone, Debug, PartialEq)]
    struct Seen(u32);
    struct Mark;
    #[async_trait::async_trait]
    impl Middleware for Mark {
        async fn handle(
            &self,
            request: reqwest::Request,
            extensions: &mut http::Extensions,
            next: Next<'_>,
        ) -> reqwest_middleware::Result<reqwest::Response> {
            let attempt = current_attempt().map_or(0, |a| a.attempt);
            assert_eq!(extensions.get::<Seen>(), None, "each attempt starts afresh");
            extensions.insert(Seen(attempt));
            next.run(request, extensions).await
        }
    }
    let server = FaultServer::start([Fault::Status(503), Fault::ok("ok")]).await;
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(Retry::new(Layer::Http))
        .with(Mark)
        .build();
    let mut extensions = http::Extensions::new();
    let request = client.get(server.url("/")).build().expect("a request");
    let response = client
        .execute_with_extensions(request, &mut extensions)
        .await;
    assert_eq!(response.expect("a response").status().as_u16(), 200);
    assert_eq!(extensions.get::<Seen>(), Some(&Seen(2)));
}

#[tokio::test(start_paused = true)]
async fn clones_of_the_middleware_share_its_upstream() {
    // `Middleware`: `Send + Sync`.
    fn middleware<M: Middleware + Clone>(m: M) -> M {
        m
    }
    // One 429 (`Retry-After: 2`) for whatever arrives in the first 2 s.
    let server = FaultServer::start([Fault::LimitWindow {
        window: Duration::from_secs(2),
        retry_after: 2,
    }])
    .await;
    let upstream = Upstream::new("loopback");
    let retry = middleware(Retry::new(Layer::Provider).upstream(upstream.clone()));
    let (clone, first) = (client(retry.clone()), client(retry));
    let url = server.url("/");
    let first = get(&first, &url);
    let later = async {
        // Once the first request's 429 is in: the clone's meets the hold.
        while upstream.held_for().is_none() {
            tokio::time::sleep(ms(1)).await;
        }
        get(&clone, &url).await
    };
    let (first, later) = tokio::join!(first, later);
    assert_eq!(
        (first.expect("a response"), later.expect("a response")),
        (200, 200)
    );
    // The clone's request waited out the hold the first one's 429 set.
    let faults: Vec<Fault> = server.hits().into_iter().map(|h| h.fault).collect();
    assert_eq!(server.limited(), 1, "{faults:?}");
    let hits = server.hits();
    let waited = hits[1..].iter().map(|h| h.at - hits[0].at);
    assert!(
        waited.clone().all(|w| w >= Duration::from_secs(2)),
        "{:?}",
        waited.collect::<Vec<_>>()
    );
}

/// A provider fn that names an upstream, over a middleware that names none.
#[retry(layer = "provider", upstream = upstream)]
async fn over_a_bare_middleware(
    client: &ClientWithMiddleware,
    upstream: &Upstream,
    url: &str,
) -> Result<u16, CallError> {
    Ok(get(client, url).await?)
}

#[tokio::test(start_paused = true)]
async fn without_an_upstream_of_its_own_the_middleware_observes_for_the_call_around_it() {
    let headers = [
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "30m0s"),
    ];
    let headers = headers.map(|(k, v)| (k.to_owned(), v.to_owned()));
    let server = FaultServer::start([Fault::WithHeaders(200, headers.to_vec())]).await;
    let upstream = Upstream::new("loopback");
    let client = client(Retry::new(Layer::Http));
    let url = server.url("/");
    let first = over_a_bare_middleware(&client, &upstream, &url).await;
    assert_eq!(first.expect("a response"), 200);
    // None left for 30 minutes: longer than a provider call waits (60 s).
    let next = over_a_bare_middleware(&client, &upstream, &url).await;
    let Err(CallError::Held(held)) = next else {
        panic!("not held by the first response's headers: {next:?}")
    };
    assert_eq!(held.reason(), HoldReason::RateLimitHeaders);
    assert_eq!(server.requests(), 1, "the held call sent nothing");
}

/// A mail sent through the middleware: not idempotent.
#[retry(layer = "provider", idempotent = false)]
async fn send_mail(client: &ClientWithMiddleware, url: &str) -> Result<u16, CallError> {
    let response = client.post(url).body("mail").send().await?;
    Ok(response.status().as_u16())
}

#[tokio::test(start_paused = true)]
async fn a_hold_the_middleware_would_not_wait_never_left_so_a_mail_is_sent_after_it() {
    let server = FaultServer::start([Fault::ok("sent")]).await;
    let upstream = Upstream::new("loopback");
    // Longer than the http layer waits (30 s), within the provider's (60 s).
    upstream.hold_for(Duration::from_secs(40));
    let client = client(Retry::new(Layer::Http).upstream(upstream));
    let started = tokio::time::Instant::now();
    let (sent, log) = EventLog::record(send_mail(&client, &server.url("/"))).await;
    // The middleware's `Held` reached nothing: the mail fn, not idempotent,
    // may send it again once the hold is over.
    assert_eq!(
        sent.expect("sent after the hold"),
        200,
        "{:#?}",
        log.events()
    );
    assert_eq!(server.requests(), 1);
    assert!(
        started.elapsed() >= Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
}

#[retry(layer = "http")]
async fn transport(client: &ClientWithMiddleware, url: &str) -> Result<u16, CallError> {
    Ok(get(client, url).await?)
}

#[tokio::test(start_paused = true)]
async fn layers_upside_down_are_reported_as_for_annotated_fns() {
    let server = FaultServer::start([Fault::ok("ok")]).await;
    // A provider middleware inside an http fn's attempt: the wrong way up.
    let client = client(Retry::new(Layer::Provider));
    // The library's log: it keeps the violations too.
    let log = nika_retry::events::EventLog::new();
    let status = observe(Arc::new(log.clone()), transport(&client, &server.url("/"))).await;
    assert_eq!(status.expect("a response"), 200);
    let seen: Vec<_> = log
        .violations()
        .iter()
        .map(|v| (v.outer_layer, v.inner_layer, v.inner_operation))
        .collect();
    assert_eq!(seen, [(Layer::Http, Layer::Provider, OPERATION)]);

    // The normal shape, an http middleware inside a provider fn: none.
    let client = self::client(Retry::new(Layer::Http));
    let log = nika_retry::events::EventLog::new();
    let status = observe(Arc::new(log.clone()), provider(&client, &server.url("/"))).await;
    assert_eq!(status.expect("a response"), 200);
    assert!(log.violations().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_hold_longer_than_the_layer_waits_fails_at_once_with_held() {
    let server = FaultServer::start([Fault::ok("ok")]).await;
    let upstream = Upstream::new("loopback");
    upstream.hold_for(Duration::from_secs(120));
    // http waits at most 30 s for a server's hint, so not this hold.
    let client = client(Retry::new(Layer::Http).upstream(upstream));
    let error = get(&client, &server.url("/")).await.expect_err("held");
    assert_eq!(server.requests(), 0);
    assert_eq!(error.category(), nika_retry::ErrorCategory::RateLimited);
    let left = error.retry_after().expect("what is left of the hold");
    assert!(left > Duration::from_secs(100), "{left:?}");
    assert!(error.to_string().contains("loopback"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn each_request_spends_the_cost_the_middleware_says_of_a_paced_upstream() {
    use nika_retry::upstream::Quota;
    let server = FaultServer::start([Fault::ok("ok")]).await;
    let url = server.url("/");
    let quota = Quota::per(Duration::from_secs(1)).tokens(100);
    let upstream = Upstream::new("loopback").with_quota(quota);
    // 100 tokens a request: the bucket's whole second.
    let costly = client(
        Retry::new(Layer::Provider)
            .upstream(upstream.clone())
            .cost(100),
    );
    let start = tokio::time::Instant::now();
    assert_eq!(get(&costly, &url).await.expect("a response"), 200);
    assert_eq!(get(&costly, &url).await.expect("a response"), 200);
    assert!(start.elapsed() >= ms(900), "{:?}", start.elapsed());
    // 1 token a request: at most 10 ms of refill each.
    let cheap = client(Retry::new(Layer::Provider).upstream(upstream).cost(1));
    let start = tokio::time::Instant::now();
    assert_eq!(get(&cheap, &url).await.expect("a response"), 200);
    assert!(start.elapsed() <= ms(10), "{:?}", start.elapsed());
    assert_eq!(server.requests(), 3);
}
