//! The policy of a layer for a [`reqwest_middleware`] client (feature
//! `reqwest-middleware`): [`Retry`], a [`Middleware`] that sends each
//! request as an annotated fn of that layer would retry it, through the
//! same engine (the task scope, the attempt budget across layers, the token
//! bucket, the upstream, [`current_attempt`](crate::current_attempt) in the
//! middlewares below it, the events and the layer reports).
//!
//! ```
//! use nika_retry::Layer;
//! use nika_retry::reqwest_middleware::Retry;
//! use nika_retry::upstream::Upstream;
//!
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     // 3 attempts, 250 ms then 1 s (or the server's `Retry-After`), 5xx and
//!     // connection failures; a 429 holds every request through `upstream`
//!     // and is handed back (a client that calls a model itself wants
//!     // `Layer::Provider`, which waits the hint and sends again).
//!     .with(Retry::new(Layer::Http).upstream(Upstream::new("api.example.com")))
//!     .build();
//! # drop(client);
//! ```
//!
//! A response is judged as [`http::classify_response`](crate::http::classify_response)
//! judges it: by its status, unless `x-should-retry` says otherwise, waiting
//! at least its `Retry-After` / `retry-after-ms`; its rate-limit headers (a
//! success's too) go to the upstream. A response that is a failure and is
//! not retried (or not any more) is handed back as it came; an error
//! likewise. A request whose body cannot be cloned
//! ([`reqwest::Request::try_clone`] refuses a streamed body) is sent once,
//! and if its failure would have been retried, its event says why it was
//! not ([`GiveUp::NotReplayable`](crate::engine::GiveUp::NotReplayable)).
//!
//! The body: with `read` or `total` set, it is held to them after the
//! middleware returned ([`ReadBody::LIMITS`], the default); [`Retry::read_body`]
//! reads it whole inside the attempt ([`ReadBody::WHOLE`]) or holds a
//! stream until its first content ([`ReadBody::first_content_when`]). Per
//! request, the extensions [`Idempotent`] and [`Cost`]
//! (`RequestBuilder::with_extension`) win over the middleware's own.
//!
//! Each attempt runs in a `tracing` span `attempt` (target `nika_retry`)
//! carrying OpenTelemetry's `http.request.resend_count` on the attempts
//! after the first.

mod body;
mod classify;

use ::reqwest_middleware::{Middleware, Next};
use http::Extensions;
use reqwest::{Request, Response};

pub use crate::adapter::{Cost, Idempotent, ReadBody, Timeouts};
use crate::adapter::{Errors, Marks, Options, Sites, drive, response_failure};
use crate::upstream::{Held, Upstream};
use crate::vocab::config::RetryConfig;
use crate::vocab::layer::Layer;
use crate::vocab::timeout_error::TimeoutError;

/// The middleware's calls, named in events and layer reports.
static SITES: Sites = Sites::new("nika_retry::reqwest_middleware::Retry");

/// A [`Middleware`] that retries each request by the policy of a
/// [`Layer`], as `#[retry(layer = …)]` and `#[timeout(…)]` on an
/// `async fn` would.
///
/// [`Retry::new`] gives the layer's defaults (`Layer::Http`: 3 attempts,
/// 250 ms then 1 s with 50 % jitter, transient failures only; a 429 is
/// left to the layer above); the builder methods change them. A request is
/// idempotent when its method is (RFC 9110: `GET`, `HEAD`, `OPTIONS`,
/// `TRACE`, `PUT`, `DELETE`) unless [`idempotent`](Retry::idempotent) says
/// otherwise: one that is not is retried only after a failure that
/// certainly had no effect (a refused connection, a 503).
///
/// ```
/// use std::time::Duration;
/// use nika_retry::reqwest_middleware::{Retry, Timeouts};
/// use nika_retry::{Layer, RetryConfig};
///
/// # fn main() -> Result<(), nika_retry::ConfigError> {
/// let retry = Retry::new(Layer::Provider)
///     .config(RetryConfig::for_layer(Layer::Provider).with_max_attempts(5)?)
///     .timeouts(Timeouts::NONE.with_read(Duration::from_secs(120)));
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(retry)
///     .build();
/// # drop(client);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Retry {
    options: Options,
    read: ReadBody,
}

impl Retry {
    /// The defaults of `layer`.
    pub fn new(layer: Layer) -> Retry {
        Retry {
            options: Options::new(&SITES, layer),
            read: ReadBody::LIMITS,
        }
    }

    /// Replaces the layer's defaults with `config` (as `#[retry(config =
    /// …)]`; on `tool` and `task`, it turns retries on as a task's `retry:`
    /// does). A task scope in force still comes first.
    #[must_use]
    pub fn config(self, config: RetryConfig) -> Retry {
        Retry {
            options: self.options.config(config),
            ..self
        }
    }

    /// The time limits of each request ([`Timeouts`]); an expired one is
    /// a [`TimeoutError`] in a [`reqwest_middleware::Error::Middleware`](::reqwest_middleware::Error)
    /// (in the body, read after the middleware returned: the source of
    /// reqwest's error, see [`read_body`](Retry::read_body)). That error
    /// holds an `anyhow::Error`, which records a backtrace where
    /// `RUST_BACKTRACE` or `RUST_LIB_BACKTRACE` asks for one and prints it
    /// with `{:?}`: `RUST_LIB_BACKTRACE=0` keeps it to one line.
    #[must_use]
    pub fn timeouts(self, timeouts: Timeouts) -> Retry {
        Retry {
            options: self.options.timeouts(timeouts),
            ..self
        }
    }

    /// The upstream whose holds every request shares: a server hint holds
    /// them all, the rate-limit headers of each response are read. A hold
    /// longer than the layer waits fails the request at once with
    /// [`Held`] in a [`reqwest_middleware::Error::Middleware`](::reqwest_middleware::Error).
    #[must_use]
    pub fn upstream(self, upstream: Upstream) -> Retry {
        Retry {
            options: self.options.upstream(upstream),
            ..self
        }
    }

    /// What one attempt spends of the upstream's token limit (as
    /// `#[retry(cost = …)]`: prompt tokens plus `max_tokens`, the same for
    /// every request of this middleware); without it, the mean the upstream
    /// learned. Needs [`upstream`](Retry::upstream) to mean anything. A
    /// request's own [`Cost`] (`RequestBuilder::with_extension`) wins for
    /// that request.
    #[must_use]
    pub fn cost(self, cost: u32) -> Retry {
        Retry {
            options: self.options.cost(cost),
            ..self
        }
    }

    /// Whether every request may be sent again whatever its failed attempt
    /// reached, over its method's default (`false` for a `POST` that the
    /// server does not deduplicate). A request's own [`Idempotent`]
    /// (`RequestBuilder::with_extension(Idempotent::YES)`: a chat
    /// completion `POST`) wins for that request.
    ///
    /// ```
    /// use nika_retry::{Idempotent, Layer};
    /// use nika_retry::reqwest_middleware::Retry;
    ///
    /// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
    ///     .with(Retry::new(Layer::Provider))
    ///     .build();
    /// // A chat completion: sent again after a 500 or a lost answer.
    /// let chat = client
    ///     .post("http://localhost/v1/chat/completions")
    ///     .with_extension(Idempotent::YES);
    /// # drop(chat);
    /// ```
    #[must_use]
    pub fn idempotent(self, idempotent: bool) -> Retry {
        Retry {
            options: self.options.idempotent(idempotent),
            ..self
        }
    }

    /// How each response's body is read ([`ReadBody`]): by default
    /// ([`ReadBody::LIMITS`]) it is the caller's once the headers are in,
    /// held to [`timeouts`](Retry::timeouts)' `read` (inactivity since its
    /// last frame) and `total`; [`ReadBody::WHOLE`] reads it inside the
    /// attempt (a cut or a stall is retried); [`ReadBody::FIRST_CONTENT`]
    /// holds a streamed body inside the attempt until its first content.
    /// An expired limit in the body is a `reqwest::Error` from
    /// `Response::bytes` (or `chunk`, `bytes_stream`) whose source is the
    /// [`TimeoutError`] (`Classify::timeout` finds it).
    ///
    /// ```
    /// use nika_retry::Layer;
    /// use nika_retry::reqwest_middleware::{ReadBody, Retry};
    ///
    /// // A completion that is not streamed: a body cut mid-way is retried.
    /// let retry = Retry::new(Layer::Provider).read_body(ReadBody::WHOLE);
    /// # drop(retry);
    /// ```
    #[must_use]
    pub fn read_body(self, read: ReadBody) -> Retry {
        Retry { read, ..self }
    }

    /// The layer whose policy this is.
    pub fn layer(&self) -> Layer {
        self.options.layer()
    }
}

/// How a [`reqwest_middleware::Error`](::reqwest_middleware::Error) holds
/// what the loop fails with itself.
const ERRORS: Errors<::reqwest_middleware::Error> = Errors {
    timeout: |timeout: TimeoutError| ::reqwest_middleware::Error::middleware(timeout),
    held: |held: Held| ::reqwest_middleware::Error::middleware(held),
};

#[async_trait::async_trait]
impl Middleware for Retry {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> ::reqwest_middleware::Result<Response> {
        // Each attempt gets its own copy of the extensions (`next.run`
        // borrows them for the attempt); the last one's are handed back.
        let last = std::sync::Mutex::new(None);
        let original = &*extensions;
        let timeouts = self.options.timeouts;
        let read = self
            .read
            .acts(timeouts.read.is_some() || timeouts.total.is_some());
        let send = |request: Request| {
            let next = next.clone();
            let mut own = original.clone();
            let last = &last;
            async move {
                let result = next.run(request, &mut own).await;
                *last
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(own);
                // The body, inside the attempt: read or held as `read_body`
                // says, then under the limits past the middleware's return.
                match result {
                    Ok(response) if read => body::read(response, &self.read).await,
                    result => result,
                }
            }
        };
        // The method's RFC 9110 idempotence, unless the middleware said.
        let idempotent = Some(request.method().is_idempotent());
        // What the request says of itself (`with_extension`) wins over the
        // middleware, for it.
        let own = Marks::of(extensions).over(&self.options);
        let options = own.as_ref().unwrap_or(&self.options);
        let upstream = options.upstream.as_ref();
        let judge = |response: &Response| {
            response_failure(upstream, response.status().as_u16(), response.headers())
        };
        let replay = Request::try_clone;
        let result = drive(options, request, replay, send, judge, idempotent, ERRORS).await;
        if let Some(own) = last
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            *extensions = own;
        }
        result
    }
}

#[cfg(test)]
mod tests;
