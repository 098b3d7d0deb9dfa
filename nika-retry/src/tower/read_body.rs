//! [`ReadBody`] as a `tower` layer: placed right below a
//! [`RetryLayer`](super::RetryLayer), it reads each response's body as its
//! mode says, inside the attempt.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use http::Response;
use http_body::Body;
use tower_service::Service;

use crate::adapter::{FromBodyError, ReadBody, TimedBody};
use crate::stream::StreamError;

impl<S> tower_layer::Layer<S> for ReadBody {
    type Service = ReadBodyService<S>;

    fn layer(&self, inner: S) -> ReadBodyService<S> {
        ReadBodyService {
            inner,
            read: self.clone(),
        }
    }
}

/// A service whose responses' bodies are read by a [`ReadBody`]: built by
/// `ReadBody` as a `tower` layer. Its response is an `http::Response` of a
/// [`TimedBody`]; its error is the inner service's, which holds the body's
/// errors ([`FromBodyError`]) and the limits' (`From<TimeoutError>`).
///
/// ```
/// use nika_retry::tower::ReadBody;
/// use tower::Layer as _;
///
/// # #[derive(Clone)] struct Client;
/// let service = ReadBody::WHOLE.layer(Client);
/// let _client: &Client = service.get_ref();
/// ```
#[derive(Clone)]
pub struct ReadBodyService<S> {
    inner: S,
    read: ReadBody,
}

impl<S> ReadBodyService<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug> fmt::Debug for ReadBodyService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadBodyService")
            .field("inner", &self.inner)
            .field("read", &self.read)
            .finish()
    }
}

impl<S, B, Req> Service<Req> for ReadBodyService<S>
where
    S: Service<Req, Response = Response<B>>,
    S::Future: Send + 'static,
    S::Error: FromBodyError<B::Error> + StreamError + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
{
    type Response = Response<TimedBody<B, S::Error>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let response = self.inner.call(request);
        let read = self.read.clone();
        Box::pin(async move {
            let (parts, body) = response.await?.into_parts();
            let body = read.read(body, parts.status.as_u16() < 400).await?;
            Ok(Response::from_parts(parts, body))
        })
    }
}
