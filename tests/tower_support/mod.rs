//! What the tests of the `tower` layer share: hyper-util's legacy client
//! as the inner service, its error classified, the layer over it.
#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use nika_retry::http::{status_category, status_reached};
use nika_retry::tower::{Protocol, RetryLayer};
use nika_retry::upstream::Held;
use nika_retry::{
    Classify, ErrorCategory, Layer, Reached, RetryConfig, TimeoutError, current_attempt,
};
use tower::{Service, ServiceBuilder, ServiceExt};

/// The inner service's error: hyper-util's, the layer's own two, and a
/// status an annotated fn above turns into an error.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(transparent)]
    Client(#[from] hyper_util::client::legacy::Error),
    #[error(transparent)]
    Timeout(#[from] TimeoutError),
    #[error(transparent)]
    Held(#[from] Held),
    #[error("HTTP {0}")]
    Status(u16),
    /// The response body failed (`ReadBody`): cut, reset.
    #[error(transparent)]
    Body(#[from] hyper::Error),
}

impl Classify for HttpError {
    fn category(&self) -> ErrorCategory {
        match self {
            // A connection that failed or broke: the transport's to retry.
            HttpError::Client(_) => ErrorCategory::Transient,
            HttpError::Timeout(e) => e.category(),
            HttpError::Held(e) => e.category(),
            HttpError::Status(s) => status_category(*s),
            HttpError::Body(_) => ErrorCategory::Transient,
        }
    }

    fn timeout(&self) -> Option<&TimeoutError> {
        match self {
            HttpError::Timeout(e) => Some(e),
            _ => None,
        }
    }

    fn reached(&self) -> Reached {
        match self {
            HttpError::Client(e) if e.is_connect() => Reached::No,
            HttpError::Timeout(e) => e.reached(),
            HttpError::Held(e) => e.reached(),
            HttpError::Status(s) => status_reached(*s),
            HttpError::Client(_) | HttpError::Body(_) => Reached::Maybe,
        }
    }
}

pub type Body = Full<Bytes>;

/// hyper-util's client, plain HTTP/1.
pub fn client() -> Client<HttpConnector, Body> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// `layer` over hyper-util's client, each request stamped with its
/// attempt's idempotency key (read in the inner service's `call`).
pub fn through<P>(
    layer: RetryLayer<P>,
) -> impl Service<Request<Body>, Response = Response<Incoming>, Error = HttpError, Future: Send>
+ Clone
+ Send
+ 'static
where
    P: Protocol<Request<Body>, Response<Incoming>> + Clone + Send + Sync + 'static,
{
    ServiceBuilder::new()
        .layer(layer)
        .map_request(stamp)
        .map_err(HttpError::from)
        .service(client())
}

/// The `Idempotency-Key` of the attempt in force, as a transport sends it.
fn stamp(mut request: Request<Body>) -> Request<Body> {
    if let Some(attempt) = current_attempt() {
        let key = attempt.idempotency_key.to_string();
        request.headers_mut().insert(
            "idempotency-key",
            key.parse().expect("a key is a header value"),
        );
    }
    request
}

pub fn request(method: Method, url: &str) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(url)
        .body(Full::new(Bytes::from_static(b"ping")))
        .expect("a valid request")
}

/// The status of `request` through `service`.
pub async fn status<S>(service: &mut S, request: Request<Body>) -> Result<u16, HttpError>
where
    S: Service<Request<Body>, Response = Response<Incoming>, Error = HttpError>,
{
    let response = service.ready().await?.call(request).await?;
    Ok(response.status().as_u16())
}

/// A layer's defaults with backoffs of 1 ms, for tests that count requests
/// rather than time them.
pub fn quick(layer: Layer) -> RetryConfig {
    RetryConfig::for_layer(layer)
        .with_initial_backoff(Duration::from_millis(1))
        .and_then(|c| c.with_max_backoff(Duration::from_millis(1)))
        .expect("a valid config")
}
