//! What the layer knows of a kind of request and its response: how to keep
//! a request for another attempt, whether it is idempotent, and how to read
//! a response's status ([`Protocol`]).

use http::{HeaderMap, Request, Response};

/// What a [`RetryLayer`](super::RetryLayer) knows of the requests it sends
/// and their responses, as `tower::retry::Policy::clone_request` does for
/// tower's own: a copy of the request for the next attempt (`None`: it is
/// sent once, and if its failure would have been retried, the event says
/// why not: [`GiveUp::NotReplayable`](crate::engine::GiveUp::NotReplayable)),
/// whether the request is idempotent, and the status and headers of a
/// response (a status of 400 or more is a failure, judged as
/// [`http::classify_response`](crate::http) does).
///
/// Given: [`Http`] (the default: an `http::Request` whose body is `Clone`),
/// [`HttpBody`] (an `http::Request` whose body a fn copies, or not) and
/// [`Cloned`] (any `Clone` request, whose responses are never failures).
///
/// ```
/// use nika_retry::tower::Protocol;
///
/// /// A job queue's requests: replayed, not idempotent.
/// #[derive(Clone)]
/// struct Enqueue(String);
///
/// #[derive(Clone)]
/// struct Queue;
///
/// impl Protocol<Enqueue, ()> for Queue {
///     fn replay(&self, request: &Enqueue) -> Option<Enqueue> {
///         Some(request.clone())
///     }
///     fn idempotent(&self, _: &Enqueue) -> Option<bool> {
///         Some(false)
///     }
/// }
/// # let _ = Queue.replay(&Enqueue("job".into()));
/// ```
#[diagnostic::on_unimplemented(
    message = "`nika_retry::tower::RetryLayer` does not know how to replay `{Req}` with `{Self}`",
    label = "the layer's protocol",
    note = "the default protocol, `Http`, replays an `http::Request<B>` whose body `B` is `Clone`, its responses `http::Response`s",
    note = "for any other request that is `Clone`, use `.protocol(nika_retry::tower::Cloned)`; for a body that is not `Clone`, `.replay_body(|body| …)` (`None`: sent once)"
)]
pub trait Protocol<Req, Res> {
    /// A copy of `request` for the next attempt, made before it is sent;
    /// `None`: it is sent once.
    fn replay(&self, request: &Req) -> Option<Req>;

    /// Whether `request` may be sent again whatever its attempt reached;
    /// `None` (the default): as the calls around it say (idempotent unless
    /// an annotated call around it is not). The layer's
    /// [`idempotent`](super::RetryLayer::idempotent) wins over it.
    fn idempotent(&self, request: &Req) -> Option<bool> {
        let _ = request;
        None
    }

    /// The status and headers of `response`, for the layer to judge it (a
    /// status of 400 or more is a failure) and give its rate-limit headers
    /// to the upstream; `None` (the default): a response is a success.
    fn head<'r>(&self, response: &'r Res) -> Option<(u16, &'r HeaderMap)> {
        let _ = response;
        None
    }
}

/// The default [`Protocol`]: an `http::Request` whose body is `Clone`,
/// replayed whole (its extensions included), idempotent as its method is
/// (RFC 9110: `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT`, `DELETE`), its
/// responses judged by their status and headers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Http;

impl<B: Clone, R> Protocol<Request<B>, Response<R>> for Http {
    fn replay(&self, request: &Request<B>) -> Option<Request<B>> {
        Some(request.clone())
    }

    fn idempotent(&self, request: &Request<B>) -> Option<bool> {
        Some(request.method().is_idempotent())
    }

    fn head<'r>(&self, response: &'r Response<R>) -> Option<(u16, &'r HeaderMap)> {
        Some((response.status().as_u16(), response.headers()))
    }
}

/// [`Http`] for a body that is not `Clone`, or not always: the fn gives a
/// copy of the body for the next attempt, or `None` (a stream: the request
/// is sent once). Built by [`RetryLayer::replay_body`](super::RetryLayer::replay_body).
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpBody<F>(pub F);

impl<B, R, F> Protocol<Request<B>, Response<R>> for HttpBody<F>
where
    F: Fn(&B) -> Option<B>,
{
    fn replay(&self, request: &Request<B>) -> Option<Request<B>> {
        let body = (self.0)(request.body())?;
        let mut copy = Request::new(body);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }

    fn idempotent(&self, request: &Request<B>) -> Option<bool> {
        Some(request.method().is_idempotent())
    }

    fn head<'r>(&self, response: &'r Response<R>) -> Option<(u16, &'r HeaderMap)> {
        Some((response.status().as_u16(), response.headers()))
    }
}

/// Any request that is `Clone`, replayed by its clone; its idempotence as
/// the calls around say; its responses never failures (only the service's
/// errors are, through `Classify`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cloned;

impl<Req: Clone, Res> Protocol<Req, Res> for Cloned {
    fn replay(&self, request: &Req) -> Option<Req> {
        Some(request.clone())
    }
}
