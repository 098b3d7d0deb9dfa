//! The one loop of the adapters: a request's attempts, driven through the
//! same calls as an annotated fn's (the expansion of `#[retry(upstream =
//! …)]` beside `#[timeout]`), so that every decision is the engine's.

use core::borrow::Borrow;
use core::future::Future;

use super::judge::{Judged, Verdict};
use super::options::Options;
use crate::engine::Failure;
use crate::run::{AtUpstream, TimedCall, WithUpstream, as_attempt, sleep};
use crate::upstream::Held;
use crate::vocab::classify::Classify;
use crate::vocab::timeout_error::TimeoutError;

/// How the service's error type holds what the loop itself fails with:
/// an expired limit of [`Timeouts`](super::Timeouts), and an upstream hold
/// longer than the layer waits.
pub(crate) struct Errors<E> {
    pub(crate) timeout: fn(TimeoutError) -> E,
    pub(crate) held: fn(Held) -> E,
}

impl<E> Clone for Errors<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Errors<E> {}

/// Sends `request` by `options` (borrowed, or owned: an `Arc` the future
/// keeps) until it succeeds or the engine gives up,
/// and returns the last result as it came (a response that is a failure
/// included).
///
/// - `replay` gives, before each attempt, a copy of the request for it to
///   send, the original kept for the next; `None`: the request itself is
///   sent, once (if its failure would have been retried, the event says
///   why not: `GiveUp::NotReplayable`).
/// - `send` starts an attempt; it is called inside the attempt's first
///   poll, with the attempt in force (`current_attempt()`, the upstream's
///   `current()`), so that a service reads them in its `call` too.
/// - `judge` tells a response that is a failure ([`response_failure`](super::response_failure)).
/// - `idempotent`: what the request itself says (an HTTP method's RFC 9110
///   idempotence), when the options say nothing.
///
/// Dropping the future drops the attempt in flight and sends nothing more.
///
/// A fn returning an `async` block rather than an `async fn`: an
/// `async fn` keeps each argument twice in its future (as it came, and as
/// the local it is bound to), the request included. The block keeps the
/// request once (`kept`, the original, which each attempt copies) and the
/// copy in flight.
pub(crate) fn drive<Req, T, E, Fut>(
    options: impl Borrow<Options>,
    request: Req,
    mut replay: impl FnMut(&Req) -> Option<Req>,
    mut send: impl FnMut(Req) -> Fut,
    mut judge: impl FnMut(&T) -> Option<Failure>,
    idempotent: Option<bool>,
    errors: Errors<E>,
) -> impl Future<Output = Result<T, E>>
where
    Fut: Future<Output = Result<T, E>>,
    E: Classify,
{
    let mut kept = Some(request);
    async move {
        let options: &Options = options.borrow();
        let mut call = TimedCall::new(options.site, options.timeouts.total);
        if let Some(idempotent) = options.idempotent.or(idempotent) {
            call.said_idempotent(|| idempotent);
        }
        let upstream = options.upstream.as_ref();
        let mut at = match options.cost {
            Some(cost) => AtUpstream::with_cost(upstream, cost),
            None => AtUpstream::new(upstream),
        };
        #[cfg(feature = "tracing")]
        let mut resends = 0u32;
        loop {
            if let Some(until) = at.admit()
                && let Err(held) = call.wait_at(&mut at, until).await
            {
                return Err((errors.held)(held));
            }
            // The attempt sends a copy and the original stays for the next;
            // one that cannot be copied is sent itself, once.
            let copy = kept.as_ref().and_then(&mut replay);
            let request = copy.or_else(|| kept.take());
            let attempt = WithUpstream::new(
                &at,
                Lazy::Waiting {
                    send: &mut send,
                    request,
                },
            );
            let departed = attempt.departed();
            let timed = call.timed(options.timeouts.attempt_limits(), attempt, errors.timeout);
            #[cfg(feature = "tracing")]
            let result = {
                let span = attempt_span(options, resends);
                resends += 1;
                tracing::Instrument::instrument(timed, span).await
            };
            #[cfg(not(feature = "tracing"))]
            let result = timed.await;
            let until = {
                // The response's headers are its attempt's.
                let failed = as_attempt(&at, departed, || match &result {
                    Ok(response) => judge(response).map(Judged::Response),
                    Err(error) => Some(Judged::Error(error)),
                });
                let config = || options.config.clone();
                // Still kept: a copy was sent, the request can be sent again.
                call.next_after(&mut at, &Verdict(failed, kept.is_some()), config, None)
            };
            match until {
                // A request that could not be kept is never retried (the
                // engine gave up with `NotReplayable`).
                Some(until) if kept.is_some() => {
                    // Not kept across the sleep: the future stays small.
                    drop(result);
                    sleep(until).await;
                }
                _ => return result,
            }
        }
    }
}

/// The span of one attempt, OpenTelemetry's way: one per physical request,
/// `http.request.resend_count` on those after the first, and
/// `gen_ai.response.time_to_first_chunk` (seconds) where the attempt
/// awaits a stream's first content ([`stream::started`](crate::stream::started)).
#[cfg(feature = "tracing")]
fn attempt_span(options: &Options, resends: u32) -> tracing::Span {
    let span = tracing::info_span!(
        target: "nika_retry",
        "attempt",
        layer = options.layer().as_str(),
        operation = options.site.operation,
        http.request.resend_count = tracing::field::Empty,
        gen_ai.response.time_to_first_chunk = tracing::field::Empty,
    );
    if resends > 0 {
        span.record("http.request.resend_count", resends);
    }
    span
}

pin_project_lite::pin_project! {
    /// An attempt that calls `send` on its first poll, with the attempt in
    /// force; the request and the future `send` makes it into share their
    /// bytes.
    #[project = LazyProj]
    enum Lazy<'s, S, Req, Fut> {
        Waiting { send: &'s mut S, request: Option<Req> },
        Running { #[pin] fut: Fut },
    }
}

impl<S, Req, Fut> Future for Lazy<'_, S, Req, Fut>
where
    S: FnMut(Req) -> Fut,
    Fut: Future,
{
    type Output = Fut::Output;

    fn poll(
        mut self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<Fut::Output> {
        let fut = match self.as_mut().project() {
            LazyProj::Running { fut } => return fut.poll(cx),
            LazyProj::Waiting { send, request } => match request.take() {
                Some(request) => send(request),
                None => unreachable!("an attempt starts with its request"),
            },
        };
        self.set(Lazy::Running { fut });
        match self.project() {
            LazyProj::Running { fut } => fut.poll(cx),
            LazyProj::Waiting { .. } => unreachable!("just set"),
        }
    }
}
