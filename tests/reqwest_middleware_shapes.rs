//! `nika_retry::reqwest_middleware::Retry` as a new user chains it, against
//! the fault server on 127.0.0.1 (paused clock): beside another middleware,
//! above it and below it; with `.with_init` putting an extension on every
//! request; a POST whose text body is replayed on each attempt. Each shape
//! is checked by what the server and the other middleware saw.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use nika_retry::Layer;
use nika_retry::reqwest_middleware::Retry;
use nika_retry_tests::fault::{Fault, FaultServer};
use reqwest_middleware::{ClientBuilder, Extension, Middleware, Next};

/// Counts the requests that pass it, and the `Tag` each carried.
#[derive(Clone, Default)]
struct Count {
    passed: Arc<AtomicU32>,
    tagged: Arc<AtomicU32>,
}

#[derive(Clone)]
struct Tag;

#[async_trait::async_trait]
impl Middleware for Count {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.passed.fetch_add(1, Ordering::SeqCst);
        if extensions.get::<Tag>().is_some() {
            self.tagged.fetch_add(1, Ordering::SeqCst);
        }
        next.run(request, extensions).await
    }
}

fn script() -> [Fault; 3] {
    [Fault::Status(503), Fault::Status(502), Fault::ok("ok")]
}

#[tokio::test(start_paused = true)]
async fn a_middleware_above_retry_sees_one_request_and_one_below_sees_each_attempt() {
    let server = FaultServer::start(script()).await;
    let count = Count::default();
    let above = ClientBuilder::new(reqwest::Client::new())
        .with(count.clone())
        .with(Retry::new(Layer::Http))
        .build();
    let response = above.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requests(), 3);
    assert_eq!(count.passed.load(Ordering::SeqCst), 1);

    let server = FaultServer::start(script()).await;
    let count = Count::default();
    let below = ClientBuilder::new(reqwest::Client::new())
        .with(Retry::new(Layer::Http))
        .with(count.clone())
        .build();
    let response = below.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requests(), 3);
    assert_eq!(count.passed.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn an_extension_from_with_init_reaches_every_attempt() {
    let server = FaultServer::start(script()).await;
    let count = Count::default();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with_init(Extension(Tag))
        .with(Retry::new(Layer::Http))
        .with(count.clone())
        .build();
    let response = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        count.tagged.load(Ordering::SeqCst),
        3,
        "each attempt's copy holds it"
    );

    // One given on the request itself, likewise.
    let server = FaultServer::start(script()).await;
    let count = Count::default();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(Retry::new(Layer::Http))
        .with(count.clone())
        .build();
    let response = client
        .get(server.url("/"))
        .with_extension(Tag)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(count.tagged.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_post_s_json_text_body_is_replayed_whole_on_each_attempt() {
    // 503 and 502 with `idempotent(true)`: the POST is retried after both
    // (without it, only after the 503, which certainly had no effect).
    let server = FaultServer::start(script()).await;
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(Retry::new(Layer::Http).idempotent(true))
        .build();
    let body = serde_json::json!({"to": "ana", "text": "hi"}).to_string();
    let response = client
        .post(server.url("/mail"))
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let hits = server.hits();
    assert_eq!(hits.len(), 3);
    assert!(hits.iter().all(|h| h.body == body), "{hits:?}");
}
