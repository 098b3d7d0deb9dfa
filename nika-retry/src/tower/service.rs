//! [`RetryService`], what a [`RetryLayer`](super::RetryLayer) wraps a
//! service in, and its [`ResponseFuture`].

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use tower_service::Service;

use super::bounds::{CloneService, FromHeld, FromTimeoutError, SendFuture};
use super::protocol::Protocol;
use crate::adapter::{Errors, Marks, Options, drive, response_failure};
use crate::vocab::classify::Classify;

/// A service whose requests are sent by the policy of a layer: built by
/// [`RetryLayer`](super::RetryLayer). Its `Response` and `Error` are the
/// inner service's.
///
/// ```
/// use nika_retry::tower::{Cloned, RetryLayer};
/// use nika_retry::Layer;
/// use tower::Layer as _;
///
/// # #[derive(Clone)] struct Client;
/// let service = RetryLayer::new(Layer::Http).protocol(Cloned).layer(Client);
/// let _client: &Client = service.get_ref();
/// let _client: Client = service.into_inner();
/// ```
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

    /// What `tower::ServiceExt::ready` does: waits until the inner service
    /// is ready. Here, so that a method call on the layered service
    /// (`service.ready()`, `.call(…)`, `.oneshot(…)`) names what the layer
    /// needs of the inner service that it lacks, as
    /// `ServiceExt::oneshot(service, request)` does, rather than rustc's
    /// "the method exists but its trait bounds were not satisfied".
    ///
    /// ```
    /// use nika_retry::tower::RetryLayer;
    /// use nika_retry::{Classify, Layer, TimeoutError};
    /// use nika_retry::upstream::Held;
    /// use tower::Layer as _;
    ///
    /// #[derive(Debug, thiserror::Error, Classify)]
    /// enum Fault {
    ///     #[error(transparent)]
    ///     #[category(transparent)]
    ///     Timeout(#[from] TimeoutError),
    ///     #[error(transparent)]
    ///     #[category(transparent)]
    ///     Held(#[from] Held),
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let server = tower::service_fn(|n: http::Request<u32>| async move {
    ///     Ok::<_, Fault>(http::Response::new(*n.body() + 1))
    /// });
    /// let mut service = RetryLayer::new(Layer::Http).layer(server);
    /// let response = service.ready().await.unwrap().call(http::Request::new(1)).await.unwrap();
    /// assert_eq!(*response.body(), 2);
    /// # }
    /// ```
    pub fn ready<Req>(&mut self) -> Ready<'_, S, P, Req>
    where
        S: Service<Req>,
    {
        Ready {
            service: Some(self),
            request: PhantomData,
        }
    }

    /// [`Service::call`], here so that a method call names what the layer
    /// needs (see [`ready`](RetryService::ready)).
    pub fn call<Req>(&mut self, request: Req) -> ResponseFuture<S::Response, S::Error>
    where
        S: Service<Req> + CloneService + Send + 'static,
        S::Future: SendFuture,
        S::Response: Send,
        S::Error: Classify + FromTimeoutError + FromHeld + Send,
        P: Protocol<Req, S::Response> + Clone + Send + Sync + 'static,
        Req: Send + 'static,
    {
        <Self as Service<Req>>::call(self, request)
    }

    /// What `tower::ServiceExt::oneshot` does: waits until the service is
    /// ready, then sends `request`. Here so that a method call names what
    /// the layer needs (see [`ready`](RetryService::ready)).
    pub fn oneshot<Req>(mut self, request: Req) -> ResponseFuture<S::Response, S::Error>
    where
        S: Service<Req> + CloneService + Send + 'static,
        S::Future: SendFuture,
        S::Response: Send,
        S::Error: Classify + FromTimeoutError + FromHeld + Send,
        P: Protocol<Req, S::Response> + Clone + Send + Sync + 'static,
        Req: Send + 'static,
    {
        ResponseFuture(Box::pin(async move {
            core::future::poll_fn(|cx| self.inner.poll_ready(cx)).await?;
            <Self as Service<Req>>::call(&mut self, request).await
        }))
    }
}

/// The future of [`RetryService::ready`]: the service, once its inner
/// service is ready.
#[must_use = "futures do nothing unless polled"]
pub struct Ready<'a, S, P, Req> {
    service: Option<&'a mut RetryService<S, P>>,
    request: PhantomData<fn(Req)>,
}

impl<'a, S: Service<Req>, P, Req> Future for Ready<'a, S, P, Req> {
    type Output = Result<&'a mut RetryService<S, P>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(service) = self.service.as_mut() else {
            panic!("`Ready` polled after it completed");
        };
        if let Err(error) = core::task::ready!(service.inner.poll_ready(cx)) {
            return Poll::Ready(Err(error));
        }
        match self.service.take() {
            Some(service) => Poll::Ready(Ok(service)),
            None => unreachable!("taken once, just above"),
        }
    }
}

impl<S, P, Req> fmt::Debug for Ready<'_, S, P, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ready").finish_non_exhaustive()
    }
}

impl<S, P, Req> Service<Req> for RetryService<S, P>
where
    S: Service<Req> + CloneService + Send + 'static,
    S::Future: SendFuture,
    S::Response: Send,
    S::Error: Classify + FromTimeoutError + FromHeld + Send,
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
        let clone = self.inner.clone_service();
        let ready = core::mem::replace(&mut self.inner, clone);
        let idempotent = self.protocol.idempotent(&request);
        let replay = self.protocol.clone();
        let judge = self.protocol.clone();
        let upstream = self.options.upstream.clone();
        // What the request says of itself wins over the layer, for it.
        let marks = self.protocol.extensions(&request).map(Marks::of);
        let options = match marks.and_then(|marks| marks.over(&self.options)) {
            Some(own) => Arc::new(own),
            None => Arc::clone(&self.options),
        };
        // The loop's future itself, boxed: no `async` block around it to
        // keep a second copy of its arguments.
        let fut = drive(
            options,
            request,
            move |request| replay.replay(request),
            attempts(ready),
            move |response| {
                let (status, headers) = judge.head(response)?;
                response_failure(upstream.as_ref(), status, headers)
            },
            idempotent,
            Errors {
                timeout: <S::Error as FromTimeoutError>::from_timeout,
                held: <S::Error as FromHeld>::from_held,
            },
        );
        ResponseFuture(Box::pin(fut))
    }
}

/// How each attempt is sent: the first through the service made ready,
/// each next through a clone of it made ready in turn.
fn attempts<S, Req>(mut ready: S) -> impl FnMut(Req) -> Attempt<S, Req>
where
    S: Service<Req> + CloneService,
{
    let mut first = true;
    move |request| {
        if core::mem::take(&mut first) {
            Attempt::Called {
                fut: ready.call(request),
            }
        } else {
            Attempt::Readying {
                service: ready.clone_service(),
                request: Some(request),
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// One attempt's send: the service's future, or a clone of the service
    /// being made ready for it. One or the other, so that the request and
    /// the service's future share their bytes.
    #[project = AttemptProj]
    enum Attempt<S: Service<Req>, Req> {
        Called { #[pin] fut: S::Future },
        Readying { service: S, request: Option<Req> },
    }
}

impl<S: Service<Req>, Req> Future for Attempt<S, Req> {
    type Output = Result<S::Response, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let fut = match self.as_mut().project() {
                AttemptProj::Called { fut } => return fut.poll(cx),
                AttemptProj::Readying { service, request } => {
                    if let Err(e) = core::task::ready!(service.poll_ready(cx)) {
                        return Poll::Ready(Err(e));
                    }
                    let Some(request) = request.take() else {
                        unreachable!("an attempt is called once")
                    };
                    service.call(request)
                }
            };
            self.set(Attempt::Called { fut });
        }
    }
}

/// The future of a [`RetryService`]'s response: its attempts, boxed once
/// per request (see [`RetryLayer`](super::RetryLayer)'s example). Dropping
/// it drops the attempt in flight; nothing more is sent.
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
