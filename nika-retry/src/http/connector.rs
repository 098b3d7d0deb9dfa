//! The connect limit of a `#[timeout(connect = …)]` fn, for reqwest (feature
//! `reqwest`): reqwest has no connect step that the body could wrap in
//! [`connect`](crate::connect), so the limit goes into the client's connector.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::connect::{Connect, connect};

/// The error a connector fails with: reqwest's own error type for them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A `reqwest::ClientBuilder` whose connector is bounded by the connect limit
/// of the `#[timeout(connect = …)]` fn that sets up the connection.
///
/// Set the client's other options on the builder as usual. When an attempt
/// of a fn with a connect limit opens a new connection through this client,
/// setting it up (DNS, TCP, TLS) gets that long and then fails with a
/// [`TimeoutError`](crate::TimeoutError) of boundary
/// [`Connect`](crate::Boundary::Connect) inside the `reqwest::Error`
/// (transient: the next attempt reconnects; [`TimeoutError::find`](crate::TimeoutError::find)
/// gives it back). A request that reuses a pooled connection sets nothing
/// up; outside such a fn, connecting is unbounded (or bounded by reqwest's
/// own `connect_timeout`, which then applies as well).
///
/// ```
/// use nika_retry::{retry, timeout, Classify, TimeoutError};
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// enum HttpError {
///     #[error(transparent)]
///     #[category(transparent)]
///     Request(#[from] reqwest::Error),
///     #[error(transparent)]
///     #[category(transparent)]
///     Timeout(#[from] TimeoutError),
/// }
///
/// struct Transport {
///     client: reqwest::Client,
/// }
///
/// impl Transport {
///     fn new() -> Result<Transport, reqwest::Error> {
///         let client = nika_retry::http::client_builder().build()?;
///         Ok(Transport { client })
///     }
///
///     #[retry(layer = "http")]
///     #[timeout(connect = "10s", read = "120s")]
///     async fn get(&self, url: &str) -> Result<String, HttpError> {
///         Ok(self.client.get(url).send().await?.text().await?)
///     }
/// }
/// ```
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().connector_layer(ConnectLayer::new())
}

/// The tower layer behind [`client_builder`], for a client built otherwise:
/// `reqwest::Client::builder().connector_layer(ConnectLayer::new())`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnectLayer {
    _private: (),
}

impl ConnectLayer {
    /// The layer.
    pub const fn new() -> ConnectLayer {
        ConnectLayer { _private: () }
    }
}

impl<S> tower_layer::Layer<S> for ConnectLayer {
    type Service = ConnectService<S>;

    fn layer(&self, inner: S) -> ConnectService<S> {
        ConnectService { inner }
    }
}

/// The connector service [`ConnectLayer`] wraps around reqwest's.
#[derive(Clone, Debug)]
pub struct ConnectService<S> {
    inner: S,
}

impl<S, R> tower_service::Service<R> for ConnectService<S>
where
    S: tower_service::Service<R>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Connecting<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    /// Called by reqwest from inside the poll of the attempt that needs the
    /// connection, where the attempt's connect limit is in force.
    fn call(&mut self, request: R) -> Self::Future {
        crate::ambient::connect::connector_used();
        Connecting {
            inner: connect(self.inner.call(request)),
        }
    }
}

pin_project_lite::pin_project! {
    /// A connection being set up under the connect limit.
    pub struct Connecting<F> {
        #[pin]
        inner: Connect<F>,
    }
}

impl<F, T, E> Future for Connecting<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx).map(|out| match out {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(e.into()),
            Err(timeout) => Err(Box::new(timeout) as BoxError),
        })
    }
}
