//! [`RetryService`], what a [`RetryLayer`](super::RetryLayer) wraps a
//! service in, and its [`ResponseFuture`].

use core::fmt;
use core::future::{Future, poll_fn};
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use tower_service::Service;

use super::protocol::Protocol;
use crate::adapter::{Errors, Options, drive, response_failure};
use crate::upstream::Held;
use crate::vocab::classify::Classify;
use crate::vocab::timeout_error::TimeoutError;

/// A service whose requests are sent by the policy of a layer: built by
/// [`RetryLayer`](super::RetryLayer). Its `Response` and `Error` are the
/// inner service's.
#[derive(Clone, Debug)]
pub struct RetryService<S, P = super::Http> {
    inner: S,
    options: Arc<Options>,
    protocol: P,
}

impl<S, P> RetryService<S, P> {
    pub(super) fn new(inner: S, options: Arc<Options>, protocol: P) -> Self {
        RetryService {
            inner,
            options,
            protocol,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, P, Req> Service<Req> for RetryService<S, P>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Classify + From<TimeoutError> + From<Held> + Send,
    P: Protocol<Req, S::Response> + Clone + Send + Sync + 'static,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        // The service made ready goes with the request; a clone takes its
        // place, to be made ready by the next `poll_ready` (tower's way).
        let clone = self.inner.clone();
        let ready = core::mem::replace(&mut self.inner, clone);
        let options = Arc::clone(&self.options);
        let protocol = self.protocol.clone();
        ResponseFuture(Box::pin(async move {
            send(ready, &options, &protocol, request).await
        }))
    }
}

/// A request's attempts through the adapters' loop: the first through the
/// service made ready, each next through a clone of it made ready in turn.
async fn send<S, P, Req>(
    mut ready: S,
    options: &Options,
    protocol: &P,
    request: Req,
) -> Result<S::Response, S::Error>
where
    S: Service<Req> + Clone,
    S::Error: Classify + From<TimeoutError> + From<Held>,
    P: Protocol<Req, S::Response>,
{
    let idempotent = protocol.idempotent(&request);
    let mut first = true;
    let upstream = options.upstream.as_ref();
    drive(
        options,
        request,
        |request| protocol.replay(request),
        move |request| {
            let now = if core::mem::take(&mut first) {
                Ok(ready.call(request))
            } else {
                Err((ready.clone(), request))
            };
            async move {
                match now {
                    Ok(called) => called.await,
                    Err((mut fresh, request)) => {
                        poll_fn(|cx| fresh.poll_ready(cx)).await?;
                        fresh.call(request).await
                    }
                }
            }
        },
        |response| {
            let (status, headers) = protocol.head(response)?;
            response_failure(upstream, status, headers)
        },
        idempotent,
        Errors {
            timeout: <S::Error as From<TimeoutError>>::from,
            held: <S::Error as From<Held>>::from,
        },
    )
    .await
}

/// The future of a [`RetryService`]'s response: its attempts, boxed once
/// per request. Dropping it drops the attempt in flight; nothing more is sent.
#[must_use = "futures do nothing unless polled"]
pub struct ResponseFuture<T, E>(Pin<Box<dyn Future<Output = Result<T, E>> + Send>>);

impl<T, E> Future for ResponseFuture<T, E> {
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl<T, E> fmt::Debug for ResponseFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
