//! What one request says of itself through an adapter: `Idempotent` and
//! `Cost` in its extensions (an `http::Request`'s for the `tower` layer,
//! `with_extension` for the middleware) win over the adapter's options for
//! that request only, against the fault server on 127.0.0.1: a chat `POST`
//! marked idempotent is sent again after a 500, a payment marked not
//! idempotent through a client that says all are is sent once when its
//! answer is lost, and two costs through one client are paced by their
//! own costs.

mod tower_support;

use std::time::Duration;

use http::{Method, Request};
use nika_retry::reqwest_middleware::Retry;
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::{Quota, Upstream};
use nika_retry::{Cost, Idempotent, Layer};
use nika_retry_tests::fault::{Fault, FaultServer};
use tokio::time::Instant;
use tower_support::{Body, quick, request, status, through};

fn marked(method: Method, url: &str, mark: impl Clone + Send + Sync + 'static) -> Request<Body> {
    let mut request = request(method, url);
    request.extensions_mut().insert(mark);
    request
}

#[tokio::test]
async fn tower_a_chat_post_marked_idempotent_is_sent_again_after_a_500() {
    let server = FaultServer::start([Fault::Status(500), Fault::ok("answer")]).await;
    let mut service = through(RetryLayer::new(Layer::Http).config(quick(Layer::Http)));
    let chat = marked(Method::POST, &server.url("/chat"), Idempotent::YES);
    assert_eq!(status(&mut service, chat).await.unwrap(), 200);
    assert_eq!(server.requests(), 2);

    // The same client, a POST that says nothing: a 500 may have acted.
    let server = FaultServer::start([Fault::Status(500), Fault::ok("answer")]).await;
    let post = request(Method::POST, &server.url("/chat"));
    assert_eq!(status(&mut service, post).await.unwrap(), 500);
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn tower_a_payment_marked_not_idempotent_is_sent_once_when_its_answer_is_lost() {
    let server = FaultServer::start([Fault::CommitThenDrop, Fault::ok("paid")]).await;
    // A client whose requests are all idempotent, but for this one.
    let layer = RetryLayer::new(Layer::Http)
        .config(quick(Layer::Http))
        .idempotent(true);
    let mut service = through(layer);
    let payment = marked(Method::PUT, &server.url("/pay"), Idempotent::NO);
    assert!(
        status(&mut service, payment).await.is_err(),
        "the lost answer"
    );
    assert_eq!((server.requests(), server.effects()), (1, 1));

    // The client's own word for a request that says nothing.
    let server = FaultServer::start([Fault::CommitThenDrop, Fault::ok("paid")]).await;
    let put = request(Method::PUT, &server.url("/pay"));
    assert_eq!(status(&mut service, put).await.unwrap(), 200);
    assert_eq!(server.requests(), 2);
}

/// An upstream that refills 100 tokens a second (and starts with 100).
fn metered() -> Upstream {
    Upstream::new("tests/request_marks").with_quota(Quota::per(Duration::from_secs(1)).tokens(100))
}

#[tokio::test]
async fn tower_two_costs_through_one_client_are_paced_by_their_own() {
    let server = FaultServer::start([Fault::ok("a")]).await;
    let mut service = through(RetryLayer::new(Layer::Provider).upstream(metered()));
    let url = server.url("/");
    // Drains the bucket.
    status(&mut service, marked(Method::POST, &url, Cost::new(100)))
        .await
        .unwrap();
    // 1 token: 10 ms of refill.
    let started = Instant::now();
    status(&mut service, marked(Method::POST, &url, Cost::new(1)))
        .await
        .unwrap();
    let small = started.elapsed();
    assert!(small < Duration::from_millis(400), "{small:?}");
    // 100 tokens: a second of refill.
    let started = Instant::now();
    status(&mut service, marked(Method::POST, &url, Cost::new(100)))
        .await
        .unwrap();
    let large = started.elapsed();
    assert!(large >= Duration::from_millis(800), "{large:?}");
}

fn middleware(retry: Retry) -> reqwest_middleware::ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(retry)
        .build()
}

#[tokio::test]
async fn middleware_a_chat_post_marked_idempotent_is_sent_again_after_a_500() {
    let server = FaultServer::start([Fault::Status(500), Fault::ok("answer")]).await;
    let client = middleware(Retry::new(Layer::Http).config(quick(Layer::Http)));
    let response = client
        .post(server.url("/chat"))
        .with_extension(Idempotent::YES)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requests(), 2);

    let server = FaultServer::start([Fault::Status(500), Fault::ok("answer")]).await;
    let response = client.post(server.url("/chat")).send().await.unwrap();
    assert_eq!(response.status(), 500);
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn middleware_a_payment_marked_not_idempotent_is_sent_once_when_its_answer_is_lost() {
    let server = FaultServer::start([Fault::CommitThenDrop, Fault::ok("paid")]).await;
    let client = middleware(
        Retry::new(Layer::Http)
            .config(quick(Layer::Http))
            .idempotent(true),
    );
    let sent = client
        .put(server.url("/pay"))
        .with_extension(Idempotent::NO)
        .send()
        .await;
    assert!(sent.is_err(), "the lost answer");
    assert_eq!((server.requests(), server.effects()), (1, 1));

    let server = FaultServer::start([Fault::CommitThenDrop, Fault::ok("paid")]).await;
    let response = client.put(server.url("/pay")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn middleware_two_costs_through_one_client_are_paced_by_their_own() {
    let server = FaultServer::start([Fault::ok("a")]).await;
    let client = middleware(Retry::new(Layer::Provider).upstream(metered()));
    let url = server.url("/");
    let send = |cost: u32| client.post(&url).with_extension(Cost::new(cost)).send();
    send(100).await.unwrap();
    let started = Instant::now();
    send(1).await.unwrap();
    let small = started.elapsed();
    assert!(small < Duration::from_millis(400), "{small:?}");
    let started = Instant::now();
    send(100).await.unwrap();
    let large = started.elapsed();
    assert!(large >= Duration::from_millis(800), "{large:?}");
}
