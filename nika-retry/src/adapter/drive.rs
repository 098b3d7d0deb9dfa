//! The one loop of the adapters: a request's attempts, driven through the
//! same calls as an annotated fn's (the expansion of `#[retry(upstream =
//! …)]` beside `#[timeout]`), so that every decision is the engine's.

use core::future::Future;

use super::judge::{Judged, Verdict};
use super::options::Options;
use crate::engine::Failure;
use crate::run::{TimedCall, UpstreamTurn, WithUpstream, sleep};
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

/// Sends `request` by `options` until it succeeds or the engine gives up,
/// and returns the last result as it came (a response that is a failure
/// included).
///
/// - `replay` gives, before each attempt, the copy of the request the next
///   attempt would send; `None`: sent once (if its failure would have been
///   retried, the event says why not: `GiveUp::NotReplayable`).
/// - `send` starts an attempt; it is called inside the attempt's first
///   poll, with the attempt in force (`current_attempt()`, the upstream's
///   `current()`), so that a service reads them in its `call` too.
/// - `judge` tells a response that is a failure ([`response_failure`](super::response_failure)).
/// - `idempotent`: what the request itself says (an HTTP method's RFC 9110
///   idempotence), when the options say nothing.
///
/// Dropping the future drops the attempt in flight and sends nothing more.
pub(crate) async fn drive<Req, T, E, Fut>(
    options: &Options,
    mut request: Req,
    mut replay: impl FnMut(&Req) -> Option<Req>,
    mut send: impl FnMut(Req) -> Fut,
    mut judge: impl FnMut(&T) -> Option<Failure>,
    idempotent: Option<bool>,
    errors: Errors<E>,
) -> Result<T, E>
where
    Fut: Future<Output = Result<T, E>>,
    E: Classify,
{
    let mut call = TimedCall::new(options.site, options.timeouts.total);
    if let Some(idempotent) = options.idempotent.or(idempotent) {
        call.said_idempotent(|| idempotent);
    }
    let upstream = options.upstream.as_ref();
    let mut turn = match options.cost {
        Some(cost) => UpstreamTurn::with_cost(upstream, cost),
        None => UpstreamTurn::new(upstream),
    };
    let limits = options.timeouts.attempt_limits();
    #[cfg(feature = "tracing")]
    let mut resends = 0u32;
    loop {
        if !call.pass_open(&turn)
            && let Err(held) = call.pass(&mut turn).await
        {
            return Err((errors.held)(held));
        }
        let spare = replay(&request);
        let send = &mut send;
        let attempt = WithUpstream::new(&turn, async move { send(request).await });
        let timed = call.timed(limits, attempt, errors.timeout);
        #[cfg(feature = "tracing")]
        let result = {
            let span = attempt_span(options, resends);
            resends += 1;
            tracing::Instrument::instrument(timed, span).await
        };
        #[cfg(not(feature = "tracing"))]
        let result = timed.await;
        let until = {
            let failed = match &result {
                Ok(response) => judge(response).map(Judged::Response),
                Err(error) => Some(Judged::Error(error)),
            };
            let config = || options.config.clone();
            call.next_after_kept(&mut turn, &Verdict(failed), config, spare.is_some())
        };
        match (until, spare) {
            (Some(until), Some(spare)) => {
                request = spare;
                sleep(until).await;
            }
            // A request that could not be kept is never retried (the
            // engine gave up with `NotReplayable`).
            _ => return result,
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
