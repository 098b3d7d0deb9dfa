//! The adapters' limits past the headers (`ReadBody`), in both adapters,
//! against the fault server on 127.0.0.1: a body that stalls after its
//! headers ends within `read` (or at `total`) with an error the caller can
//! tell for a `TimeoutError`; a body read whole inside the attempt is
//! retried when cut; a streamed body is held until its first content,
//! retried before it and not after.
//!
//! Real sockets and tokio's real clock with limits of a few hundred ms (a
//! paused clock would jump past a limit while a loopback read is in
//! flight); each call under a guard of 10 s, so that a limit that does not
//! hold fails the test rather than hanging it.

mod tower_support;

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use nika_retry::reqwest_middleware::Retry;
use nika_retry::tower::{ReadBody, RetryLayer, TimedBody, Timeouts};
use nika_retry::{Boundary, Classify, Layer, TimeoutError};
use nika_retry_tests::fault::{Fault, FaultServer, Step};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_support::{Body, HttpError, client, quick, request};

/// What no limit of these tests comes near.
const GUARD: Duration = Duration::from_secs(10);

/// A content event, not the server's `event: meta` (a ping, a usage chunk).
fn is_token(data: &[u8]) -> bool {
    !data.starts_with(b"event: meta")
}

/// The layer's `timeouts` over `read` over hyper-util's client.
fn tower_client(
    layer: Layer,
    timeouts: Timeouts,
    read: ReadBody,
) -> impl Service<
    Request<Body>,
    Response = Response<TimedBody<Incoming, HttpError>>,
    Error = HttpError,
    Future: Send,
> + Clone {
    ServiceBuilder::new()
        .layer(
            RetryLayer::new(layer)
                .config(quick(layer))
                .timeouts(timeouts),
        )
        .layer(read)
        .map_err(HttpError::from)
        .service(client())
}

/// The whole body of a GET to `url` through `service`, under the guard.
async fn tower_get<S>(mut service: S, url: &str) -> Result<Bytes, HttpError>
where
    S: Service<
            Request<Body>,
            Response = Response<TimedBody<Incoming, HttpError>>,
            Error = HttpError,
        >,
{
    let call = async {
        let response = service
            .ready()
            .await?
            .call(request(Method::GET, url))
            .await?;
        Ok(response.into_body().collect().await?.to_bytes())
    };
    tokio::time::timeout(GUARD, call)
        .await
        .expect("a limit that does not hold: the call hung")
}

/// The middleware over reqwest's client.
fn middleware_client(
    layer: Layer,
    timeouts: Timeouts,
    read: ReadBody,
) -> reqwest_middleware::ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(
            Retry::new(layer)
                .config(quick(layer))
                .timeouts(timeouts)
                .read_body(read),
        )
        .build()
}

/// What went wrong with a GET through the middleware: the request, or the
/// body.
#[derive(Debug)]
enum Failed {
    Request(reqwest_middleware::Error),
    Body(reqwest::Error),
}

impl Failed {
    fn timeout(&self) -> Option<&TimeoutError> {
        match self {
            Failed::Request(e) => e.timeout(),
            Failed::Body(e) => e.timeout(),
        }
    }
}

async fn middleware_get(
    client: &reqwest_middleware::ClientWithMiddleware,
    url: &str,
) -> Result<Bytes, Failed> {
    let call = async {
        let response = client.get(url).send().await.map_err(Failed::Request)?;
        response.bytes().await.map_err(Failed::Body)
    };
    tokio::time::timeout(GUARD, call)
        .await
        .expect("a limit that does not hold: the call hung")
}

/// A token, then silence with the connection open.
fn stalls_after_a_token() -> Fault {
    Fault::stream([Step::Event("t1".into()), Step::Stall])
}

/// `read`'s expiry, `total`'s, as the error says.
fn boundary(timeout: Option<&TimeoutError>) -> Option<(Boundary, Duration)> {
    timeout.map(|t| (t.boundary(), t.limit()))
}

const READ: Duration = Duration::from_millis(300);

#[tokio::test]
async fn tower_a_body_that_stalls_after_its_headers_ends_within_read() {
    let server = FaultServer::start([stalls_after_a_token()]).await;
    let service = tower_client(
        Layer::Http,
        Timeouts::NONE
            .with_read(READ)
            .with_total(Duration::from_secs(4)),
        ReadBody::LIMITS,
    );
    let started = Instant::now();
    let error = tower_get(service, &server.url("/")).await.unwrap_err();
    let HttpError::Timeout(timeout) = &error else {
        panic!("not the read limit: {error:?}")
    };
    assert_eq!(boundary(Some(timeout)), Some((Boundary::Read, READ)));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        server.requests(),
        1,
        "a body past the headers is the caller's"
    );
}

#[tokio::test]
async fn tower_a_body_that_keeps_delivering_ends_at_total() {
    // An event every 100 ms: `read` (300 ms) never expires, `total` does.
    let server = FaultServer::start([Fault::steady(Duration::from_millis(100), 100)]).await;
    let total = Duration::from_millis(900);
    let service = tower_client(
        Layer::Http,
        Timeouts::NONE.with_read(READ).with_total(total),
        ReadBody::LIMITS,
    );
    let started = Instant::now();
    let error = tower_get(service, &server.url("/")).await.unwrap_err();
    assert_eq!(boundary(error.timeout()), Some((Boundary::Total, total)));
    let took = started.elapsed();
    assert!(took >= total && took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn tower_a_body_cut_mid_way_is_read_again_whole() {
    let server = FaultServer::start([
        Fault::stream([Step::Event("half".into()), Step::Cut]),
        Fault::ok("the whole answer"),
    ])
    .await;
    let service = tower_client(Layer::Provider, Timeouts::NONE, ReadBody::WHOLE);
    let body = tower_get(service, &server.url("/")).await.unwrap();
    assert_eq!(body, "the whole answer");
    assert_eq!(server.requests(), 2, "the cut failed the attempt");
}

#[tokio::test]
async fn tower_a_body_that_stalls_mid_way_is_cut_by_read_and_read_again_whole() {
    let server = FaultServer::start([stalls_after_a_token(), Fault::ok("whole")]).await;
    let service = tower_client(
        Layer::Provider,
        Timeouts::NONE.with_read(READ),
        ReadBody::WHOLE,
    );
    assert_eq!(tower_get(service, &server.url("/")).await.unwrap(), "whole");
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn tower_a_stream_cut_before_its_first_content_is_sent_again_after_it_is_not() {
    let server = FaultServer::start([
        Fault::stream([Step::Meta("ping".into()), Step::Cut]),
        Fault::stream([
            Step::Meta("usage".into()),
            Step::Event("t1".into()),
            Step::Cut,
        ]),
        Fault::stream(Step::tokens(2)),
    ])
    .await;
    let mut service = tower_client(
        Layer::Provider,
        Timeouts::NONE.with_read(READ),
        ReadBody::first_content_when(is_token),
    );
    let response = tokio::time::timeout(GUARD, async {
        service
            .ready()
            .await?
            .call(request(Method::GET, &server.url("/")))
            .await
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(server.requests(), 2, "the cut before content was retried");
    let body = response.into_body();
    assert!(body.time_to_first_content().is_some());
    let mut frames = Vec::new();
    let mut body = body;
    let error = loop {
        match body.frame().await {
            Some(Ok(frame)) => frames.push(frame.into_data().unwrap()),
            Some(Err(error)) => break error,
            None => panic!("the cut after content is the caller's error"),
        }
    };
    assert!(matches!(error, HttpError::Body(_)), "{error:?}");
    let seen: Vec<u8> = frames.concat();
    assert_eq!(
        seen, b"event: meta\ndata: usage\n\ndata: t1\n\n",
        "held, then content"
    );
    assert_eq!(server.requests(), 2, "nothing sent after the content");
}

#[tokio::test]
async fn tower_a_stream_that_stalls_before_its_first_content_is_cut_and_sent_again() {
    let server = FaultServer::start([
        Fault::stream([Step::Meta("ping".into()), Step::Stall]),
        Fault::stream(Step::tokens(1)),
    ])
    .await;
    let service = tower_client(
        Layer::Provider,
        Timeouts::NONE.with_read(READ),
        ReadBody::first_content_when(is_token),
    );
    let body = tower_get(service, &server.url("/")).await.unwrap();
    assert_eq!(body, "data: t1\n\n");
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn middleware_a_body_that_stalls_after_its_headers_ends_within_read() {
    let server = FaultServer::start([stalls_after_a_token()]).await;
    let client = middleware_client(
        Layer::Http,
        Timeouts::NONE
            .with_read(READ)
            .with_total(Duration::from_secs(4)),
        ReadBody::LIMITS,
    );
    let started = Instant::now();
    let error = middleware_get(&client, &server.url("/")).await.unwrap_err();
    assert!(matches!(error, Failed::Body(_)), "{error:?}");
    assert_eq!(boundary(error.timeout()), Some((Boundary::Read, READ)));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn middleware_a_body_that_keeps_delivering_ends_at_total() {
    let server = FaultServer::start([Fault::steady(Duration::from_millis(100), 100)]).await;
    let total = Duration::from_millis(900);
    let client = middleware_client(
        Layer::Http,
        Timeouts::NONE.with_read(READ).with_total(total),
        ReadBody::LIMITS,
    );
    let response = client.get(server.url("/")).send().await.unwrap();
    // What reqwest keeps of the response is still there.
    assert_eq!(response.url().as_str(), server.url("/"));
    let started = Instant::now();
    let error = tokio::time::timeout(GUARD, response.bytes())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(boundary(error.timeout()), Some((Boundary::Total, total)));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn middleware_a_body_cut_mid_way_is_read_again_whole() {
    let server = FaultServer::start([
        Fault::stream([Step::Event("half".into()), Step::Cut]),
        Fault::ok("the whole answer"),
    ])
    .await;
    let client = middleware_client(Layer::Provider, Timeouts::NONE, ReadBody::WHOLE);
    let body = middleware_get(&client, &server.url("/")).await.unwrap();
    assert_eq!(body, "the whole answer");
    assert_eq!(server.requests(), 2, "the cut failed the attempt");
}

#[tokio::test]
async fn middleware_a_stream_cut_before_its_first_content_is_sent_again_after_it_is_not() {
    let server = FaultServer::start([
        Fault::stream([Step::Meta("ping".into()), Step::Cut]),
        Fault::stream([Step::Event("t1".into()), Step::Cut]),
        Fault::stream(Step::tokens(2)),
    ])
    .await;
    let client = middleware_client(
        Layer::Provider,
        Timeouts::NONE.with_read(READ),
        ReadBody::first_content_when(is_token),
    );
    let mut response = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(server.requests(), 2, "the cut before content was retried");
    let first = response.chunk().await.unwrap().unwrap();
    assert_eq!(first, "data: t1\n\n");
    assert!(
        response.chunk().await.is_err(),
        "the cut after content is the caller's"
    );
    assert_eq!(server.requests(), 2, "nothing sent after the content");
}

#[tokio::test]
async fn middleware_a_held_body_keeps_what_reqwest_says_of_the_response() {
    let server = FaultServer::start([Fault::ok("twelve bytes")]).await;
    for read in [ReadBody::LIMITS, ReadBody::WHOLE] {
        let client = middleware_client(Layer::Http, Timeouts::NONE.with_read(READ), read);
        let response = client.get(server.url("/path")).send().await.unwrap();
        assert_eq!(response.url().as_str(), server.url("/path"));
        assert_eq!(response.content_length(), Some(12));
        assert_eq!(response.remote_addr(), Some(server.addr()));
        assert_eq!(response.bytes().await.unwrap(), "twelve bytes");
    }
}

#[tokio::test]
async fn middleware_without_limits_hands_the_body_back_as_it_came() {
    // No `read`, no `total`: nothing to hold, the body is reqwest's own.
    let server = FaultServer::start([Fault::ok("plain")]).await;
    let client = middleware_client(Layer::Http, Timeouts::NONE, ReadBody::LIMITS);
    assert_eq!(
        middleware_get(&client, &server.url("/")).await.unwrap(),
        "plain"
    );
}
