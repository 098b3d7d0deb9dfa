//! The policy of a layer for any [`tower`](https://docs.rs/tower) service
//! (feature `tower`): a hyper or tonic client, a tower stack. The same
//! engine as `#[retry]`, not a second copy of it: a request through a
//! [`RetryLayer`] is a call of the layer, with everything an annotated fn's
//! call shares — the task scope, the attempt budget across nested layers
//! (a `RetryLayer` for `http` under a provider fn's attempt: 3 × 3 at most),
//! the token bucket, the [`Upstream`] (holds,
//! pacing, `cost`), [`current_attempt`](crate::current_attempt) with its
//! idempotency key inside the inner service, the events and the layer
//! reports.
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//! use http::{Request, Response};
//! use nika_retry::tower::RetryLayer;
//! use nika_retry::upstream::Held;
//! use nika_retry::{Classify, Layer, TimeoutError};
//! use tower::ServiceBuilder;
//!
//! /// The inner service's error: what `Classify` reads, and the two
//! /// failures of the layer itself (a time limit, an upstream's hold).
//! #[derive(Debug, thiserror::Error, Classify)]
//! enum Fault {
//!     #[error("connection reset")]
//!     #[category(transient)]
//!     Reset,
//!     #[error(transparent)]
//!     #[category(transparent)]
//!     Timeout(#[from] TimeoutError),
//!     #[error(transparent)]
//!     #[category(transparent)]
//!     Held(#[from] Held),
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let sent = Arc::new(AtomicU32::new(0));
//! let server = {
//!     let sent = sent.clone();
//!     tower::service_fn(move |_: Request<String>| {
//!         // A 503 first, then a 200: the layer sends the request twice.
//!         let status = if sent.fetch_add(1, Ordering::SeqCst) == 0 { 503 } else { 200 };
//!         async move { Ok::<_, Fault>(Response::builder().status(status).body(String::new()).unwrap()) }
//!     })
//! };
//! let mut client = ServiceBuilder::new()
//!     .layer(RetryLayer::new(Layer::Http))
//!     .service(server);
//! let request = Request::get("http://localhost/").body(String::new()).unwrap();
//! let response = client.ready().await.unwrap().call(request).await.unwrap();
//! assert_eq!(response.status(), 200);
//! assert_eq!(sent.load(Ordering::SeqCst), 2);
//! # }
//! ```
//!
//! # What it sends again
//!
//! A request is replayed by its [`Protocol`]: by default ([`Http`]) an
//! `http::Request` whose body is `Clone` (`String`, `Bytes`, http-body-util's
//! `Full`), idempotent as its method is (RFC 9110), its responses judged by
//! their status and headers as [`http::classify_response`](crate::http)
//! does (`x-should-retry`, `Retry-After`, `retry-after-ms`, 429 / 503 / 408
//! refused), their rate-limit headers given to the upstream. A body that
//! is not `Clone` (a stream) takes [`RetryLayer::replay_body`]: the request
//! is then sent once where the fn says `None`, and if its failure would
//! have been retried the event says why not
//! ([`GiveUp::NotReplayable`](crate::engine::GiveUp::NotReplayable), at
//! WARN). Any other `Clone` request takes [`Cloned`].
//!
//! A response that is a failure not retried (or not any more) is handed
//! back as it came, the service's error likewise: the wrapped service keeps
//! the inner service's `Response` and `Error` types, as `tower::retry`
//! does. The error type must classify ([`Classify`](crate::Classify)) and
//! hold the layer's own failures: `From<TimeoutError>` (its
//! [`Timeouts`]) and `From<Held>` (its upstream's hold longer than it
//! waits).
//!
//! # Where the limits stop: the body
//!
//! The layer returns once the headers are in: `attempt` bounds each attempt
//! up to them, and a body read after the layer returned is held to `read`
//! and `total` only with [`ReadBody`] right below the layer
//! ([`RetryLayer::read_body`]): [`ReadBody::LIMITS`] holds it past the
//! layer's return, [`ReadBody::WHOLE`] reads it inside the attempt (a cut
//! or a stall is retried), [`ReadBody::first_content_when`] holds a
//! streamed body inside the attempt until its first content (retried before
//! it, never after). Its response is an `http::Response` of a
//! [`TimedBody`], whose errors are the service's (which then holds the
//! body's: [`FromBodyError`]).
//!
//! # Per request
//!
//! An `http::Request`'s extensions [`Idempotent`] and [`Cost`] win over
//! [`RetryLayer::idempotent`] and [`RetryLayer::cost`] for that request: a
//! chat completion `POST` marked `Idempotent::YES` through a client whose
//! payments are not, a cost from the prompt's size
//! ([`Protocol::extensions`]).
//!
//! # Cancellation and traces
//!
//! Dropping the response future drops the attempt in flight: nothing more
//! is sent. With feature `tracing`, each attempt runs in a span of its own
//! (`attempt`, target `nika_retry`), OpenTelemetry's one span per physical
//! request, which carries `http.request.resend_count` on the attempts after
//! the first and `gen_ai.response.time_to_first_chunk` (seconds) when the
//! attempt awaits a stream's first content
//! ([`stream::started`](crate::stream::started)).

mod bounds;
mod protocol;
mod read_body;
mod service;

use std::sync::Arc;

use crate::adapter::{Options, Sites};
use crate::upstream::Upstream;
use crate::vocab::config::RetryConfig;
use crate::vocab::layer::Layer;

pub use crate::adapter::{Cost, FromBodyError, Idempotent, ReadBody, TimedBody, Timeouts};
pub use bounds::{CloneService, FromHeld, FromTimeoutError, SendFuture};
#[cfg(feature = "tonic")]
pub use protocol::Tonic;
pub use protocol::{Cloned, Http, HttpBody, Protocol};
pub use read_body::ReadBodyService;
pub use service::{Ready, ResponseFuture, RetryService};

/// The name of the layer's calls in events and layer reports.
static SITES: Sites = Sites::new("nika_retry::tower::RetryLayer");

/// A `tower` layer that sends each request by the policy of a [`Layer`]:
/// its defaults ([`RetryConfig::for_layer`]) unless [`config`](RetryLayer::config)
/// says otherwise, as `#[retry(layer = …)]` does (the `tool` layer never
/// retries by itself).
///
/// ```
/// use std::time::Duration;
/// use nika_retry::tower::{RetryLayer, Timeouts};
/// use nika_retry::upstream::Upstream;
/// use nika_retry::{Layer, RetryConfig};
///
/// let layer = RetryLayer::new(Layer::Provider)
///     .config(RetryConfig::for_layer(Layer::Provider).with_max_attempts(5).unwrap())
///     .timeouts(Timeouts::NONE.with_read(Duration::from_secs(30)))
///     .upstream(Upstream::new("openai/gpt-4o"))
///     .idempotent(true);
/// # let _ = layer;
/// ```
#[derive(Clone, Debug)]
pub struct RetryLayer<P = Http> {
    options: Arc<Options>,
    protocol: P,
}

impl RetryLayer {
    /// The layer of `layer`, with its defaults, for `http::Request`s whose
    /// body is `Clone` ([`Http`]).
    pub fn new(layer: Layer) -> RetryLayer {
        RetryLayer {
            options: Arc::new(Options::new(&SITES, layer)),
            protocol: Http,
        }
    }
}

impl<P> RetryLayer<P> {
    fn with(mut self, change: impl FnOnce(Options) -> Options) -> Self {
        let options = Arc::unwrap_or_clone(self.options);
        self.options = Arc::new(change(options));
        self
    }

    /// `config` in place of the layer's defaults, as `#[retry(config = …)]`
    /// (a task scope's `retry:` still wins, except on layer `http`).
    #[must_use]
    pub fn config(self, config: RetryConfig) -> Self {
        self.with(|o| o.config(config))
    }

    /// The time limits of each request, as `#[timeout]`'s: `attempt`,
    /// `read` (inactivity), `total`. They hold up to the response's headers;
    /// the body read after the layer returned is held to `read` and `total`
    /// only with [`read_body`](RetryLayer::read_body) (or [`ReadBody`] right
    /// below the layer): without it, a body that stalls after its headers
    /// waits as long as the inner client lets it.
    #[must_use]
    pub fn timeouts(self, timeouts: Timeouts) -> Self {
        self.with(|o| o.timeouts(timeouts))
    }

    /// The upstream the requests share (its holds, its pacing), as
    /// `#[retry(upstream = …)]`; each response's rate-limit headers go to
    /// it. Without one, they go to the upstream in force around the request
    /// (an annotated fn's).
    #[must_use]
    pub fn upstream(self, upstream: Upstream) -> Self {
        self.with(|o| o.upstream(upstream))
    }

    /// What one attempt spends of the upstream's token limit, as
    /// `#[retry(cost = …)]` (only with [`upstream`](RetryLayer::upstream)).
    /// A request's own [`Cost`] extension wins for that request (a cost
    /// from its prompt's size).
    #[must_use]
    pub fn cost(self, cost: u32) -> Self {
        self.with(|o| o.cost(cost))
    }

    /// Whether a request may be sent again whatever its attempt reached, as
    /// `#[retry(idempotent = …)]`: `false` retries only what certainly had
    /// no effect. Without it, the [`Protocol`]'s (an `http::Request`'s
    /// method, RFC 9110: a `POST` is not). A request's own [`Idempotent`]
    /// extension wins for that request: a chat completion `POST` marked
    /// `Idempotent::YES` through a client whose payments are not.
    #[must_use]
    pub fn idempotent(self, idempotent: bool) -> Self {
        self.with(|o| o.idempotent(idempotent))
    }

    /// The same options, requests replayed and responses read by `protocol`.
    #[must_use]
    pub fn protocol<Q>(self, protocol: Q) -> RetryLayer<Q> {
        RetryLayer {
            options: self.options,
            protocol,
        }
    }

    /// This layer with [`ReadBody`] right below it (where the attempt is in
    /// force): each response's body read as `read` says, held to
    /// [`timeouts`](RetryLayer::timeouts)' `read` and `total` past the
    /// layer's return. Without it, the limits end at the headers: a body
    /// read after the layer returned is not held to them.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::tower::{ReadBody, RetryLayer, Timeouts};
    /// use nika_retry::Layer;
    ///
    /// let layer = RetryLayer::new(Layer::Provider)
    ///     .timeouts(Timeouts::NONE.with_read(Duration::from_secs(30)))
    ///     .read_body(ReadBody::WHOLE);
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn read_body(self, read: ReadBody) -> tower_layer::Stack<ReadBody, Self> {
        tower_layer::Stack::new(read, self)
    }

    /// The same options for `http::Request`s whose body `copy` replays:
    /// `None` sends the request once ([`HttpBody`]).
    ///
    /// ```
    /// use nika_retry::tower::RetryLayer;
    /// use nika_retry::Layer;
    ///
    /// /// A body that is whole, or streamed.
    /// enum Body { Whole(String), Streamed(std::fs::File) }
    ///
    /// let layer = RetryLayer::new(Layer::Http).replay_body(|body: &Body| match body {
    ///     Body::Whole(text) => Some(Body::Whole(text.clone())),
    ///     Body::Streamed(_) => None,
    /// });
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn replay_body<B, F>(self, copy: F) -> RetryLayer<HttpBody<F>>
    where
        F: Fn(&B) -> Option<B>,
    {
        self.protocol(HttpBody(copy))
    }
}

impl<S, P: Clone> tower_layer::Layer<S> for RetryLayer<P> {
    type Service = RetryService<S, P>;

    fn layer(&self, inner: S) -> RetryService<S, P> {
        RetryService::new(inner, Arc::clone(&self.options), self.protocol.clone())
    }
}

#[cfg(test)]
mod tests;
