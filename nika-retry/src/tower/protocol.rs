//! What the layer knows of a kind of request and its response: how to keep
//! a request for another attempt, whether it is idempotent, and how to read
//! a response's status ([`Protocol`]).

use http::{Extensions, HeaderMap, Request, Response};

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
    label = "`{Self}` cannot keep `{Req}` for another attempt",
    note = "`Http` (the default) replays an `http::Request<B>` whose body `B` is `Clone`; `Cloned` replays any request that is `Clone`",
    note = "an `http::Request` whose body is not `Clone` (a stream): `.replay_body(|body: &B| …)`, `None` sending it once; another request type: `.protocol(nika_retry::tower::Cloned)` with `Clone` on `{Req}`, or a `Protocol` of your own"
)]
pub trait Protocol<Req, Res> {
    /// A copy of `request`, made before each attempt: the attempt sends
    /// it, the original stays for the next. `None`: the request itself is
    /// sent, once.
    fn replay(&self, request: &Req) -> Option<Req>;

    /// Whether `request` may be sent again whatever its attempt reached;
    /// `None` (the default): as the calls around it say (idempotent unless
    /// an annotated call around it is not). The layer's
    /// [`idempotent`](super::RetryLayer::idempotent) wins over it.
    fn idempotent(&self, request: &Req) -> Option<bool> {
        let _ = request;
        None
    }

    /// The extensions of `request`, where the layer reads what it says of
    /// itself ([`Idempotent`](crate::Idempotent), [`Cost`](crate::Cost)),
    /// over the layer's options; `None` (the default): it says nothing.
    fn extensions<'r>(&self, request: &'r Req) -> Option<&'r Extensions> {
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
/// (RFC 9110: `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT`, `DELETE`) unless
/// its extensions say ([`Idempotent`](crate::Idempotent), and
/// [`Cost`](crate::Cost)), its responses judged by their status and headers.
///
/// ```
/// use http::{Method, Request, Response, StatusCode};
/// use nika_retry::tower::{Http, Protocol};
///
/// let post = Request::post("http://localhost/mail").body("hi".to_owned()).unwrap();
/// let copy = Protocol::<_, Response<()>>::replay(&Http, &post).unwrap();
/// assert_eq!((copy.method(), copy.body().as_str()), (&Method::POST, "hi"));
/// assert_eq!(Protocol::<_, Response<()>>::idempotent(&Http, &post), Some(false));
///
/// let unavailable = Response::builder().status(StatusCode::SERVICE_UNAVAILABLE).body(()).unwrap();
/// let (status, _) = Protocol::<Request<String>, _>::head(&Http, &unavailable).unwrap();
/// assert_eq!(status, 503);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Http;

// Not recommended: a body that is not `Clone` then reads as the trait's
// own message (which names `.replay_body`), not as "`B: Clone` is not
// satisfied".
#[diagnostic::do_not_recommend]
impl<B: Clone, R> Protocol<Request<B>, Response<R>> for Http {
    fn replay(&self, request: &Request<B>) -> Option<Request<B>> {
        Some(request.clone())
    }

    fn idempotent(&self, request: &Request<B>) -> Option<bool> {
        idempotent(request)
    }

    fn extensions<'r>(&self, request: &'r Request<B>) -> Option<&'r Extensions> {
        Some(request.extensions())
    }

    fn head<'r>(&self, response: &'r Response<R>) -> Option<(u16, &'r HeaderMap)> {
        head(response)
    }
}

// What `Http` and `HttpBody` read of a request and a response, written once:
// the two differ only in how they copy a body.

/// Idempotent as the request's method is (RFC 9110).
fn idempotent<B>(request: &Request<B>) -> Option<bool> {
    Some(request.method().is_idempotent())
}

/// The response's status and headers, for the layer to judge.
fn head<R>(response: &Response<R>) -> Option<(u16, &HeaderMap)> {
    Some((response.status().as_u16(), response.headers()))
}

/// [`Http`] for a body that is not `Clone`, or not always: the fn gives a
/// copy of the body for the next attempt, or `None` (a stream: the request
/// is sent once). Built by [`RetryLayer::replay_body`](super::RetryLayer::replay_body).
///
/// ```
/// use http::{Request, Response};
/// use nika_retry::tower::{HttpBody, Protocol};
///
/// /// A body read from a socket: never copied.
/// struct Streamed;
///
/// let once = HttpBody(|_: &Streamed| None);
/// let request = Request::put("http://localhost/file").body(Streamed).unwrap();
/// assert!(Protocol::<_, Response<()>>::replay(&once, &request).is_none());
/// assert_eq!(Protocol::<_, Response<()>>::idempotent(&once, &request), Some(true));
/// ```
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
        idempotent(request)
    }

    fn extensions<'r>(&self, request: &'r Request<B>) -> Option<&'r Extensions> {
        Some(request.extensions())
    }

    fn head<'r>(&self, response: &'r Response<R>) -> Option<(u16, &'r HeaderMap)> {
        head(response)
    }
}

/// Any request that is `Clone`, replayed by its clone; its idempotence as
/// the calls around say; its responses never failures (only the service's
/// errors are, through `Classify`).
///
/// ```
/// use nika_retry::tower::{Cloned, Protocol};
///
/// assert_eq!(Protocol::<u32, u32>::replay(&Cloned, &7), Some(7));
/// assert_eq!(Protocol::<u32, u32>::idempotent(&Cloned, &7), None);
/// assert!(Protocol::<u32, u32>::head(&Cloned, &200).is_none());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Cloned;

#[diagnostic::do_not_recommend]
impl<Req: Clone, Res> Protocol<Req, Res> for Cloned {
    fn replay(&self, request: &Req) -> Option<Req> {
        Some(request.clone())
    }
}

/// A tonic request replayed by its message (feature `tonic`): its
/// metadata, extensions and message cloned for each attempt, for a layer
/// over a tonic client's call (a generated client's method in a
/// `tower::service_fn`, or `tonic::client::Grpc::unary`). A `Channel`
/// itself takes `http::Request`s whose body is a stream it cannot send
/// twice: retry above it, where the message still is.
///
/// Its responses are never failures: a failed call is the service's error,
/// a [`tonic::Status`] that classifies after gRPC A6 ([`Classify`](crate::Classify)).
/// Its idempotence is the layer's, or the request's own
/// [`Idempotent`](crate::Idempotent) extension (gRPC methods say nothing).
///
/// ```
/// use nika_retry::tower::{Protocol, Tonic};
/// use nika_retry::Idempotent;
///
/// let mut request = tonic::Request::new(String::from("hello"));
/// request.metadata_mut().insert("x-tenant", "acme".parse().unwrap());
/// request.extensions_mut().insert(Idempotent::YES);
/// let copy = Protocol::<_, tonic::Response<String>>::replay(&Tonic, &request).unwrap();
/// assert_eq!(copy.get_ref(), "hello");
/// assert_eq!(copy.metadata().get("x-tenant").unwrap(), "acme");
/// assert_eq!(copy.extensions().get(), Some(&Idempotent::YES));
/// ```
#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
#[derive(Clone, Copy, Debug, Default)]
pub struct Tonic;

// Not recommended: an `http::Request` whose body is not `Clone` reads as
// the trait's own message, not as a list of the protocols it is not.
#[cfg(feature = "tonic")]
#[diagnostic::do_not_recommend]
impl<M: Clone, R> Protocol<tonic::Request<M>, tonic::Response<R>> for Tonic {
    fn replay(&self, request: &tonic::Request<M>) -> Option<tonic::Request<M>> {
        Some(tonic::Request::from_parts(
            request.metadata().clone(),
            request.extensions().clone(),
            request.get_ref().clone(),
        ))
    }

    fn extensions<'r>(&self, request: &'r tonic::Request<M>) -> Option<&'r Extensions> {
        Some(request.extensions())
    }
}
