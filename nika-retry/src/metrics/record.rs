//! What the runtime records, at the places it decides (feature
//! `opentelemetry`; `off.rs` has the same names, doing nothing): a call's
//! end ([`CallClock`]), an attempt's wait at its upstream
//! ([`waited`]), a pushback ([`refused`], [`held`]), a stream's first
//! content ([`FirstChunk`]).
//!
//! Every attribute of the success path is a `&'static str` (the layer, the
//! fn's path, the outcome), so a record allocates nothing once the SDK has
//! seen its set; the upstream's name is copied, on the paths that wait or
//! are pushed back only.

use core::time::Duration;

use opentelemetry::KeyValue;
use tokio::time::Instant;

use super::instruments::instruments;
use super::names;
use crate::engine::{Failure, Outcome};
use crate::events::upstream::{HoldReason, UpstreamEvent, WaitReason};
use crate::time::Nanos;
use crate::vocab::category::ErrorCategory;
use crate::vocab::layer::Layer;
use crate::vocab::site::Site;

/// How a call ended, for its `nika_retry.outcome` and `error.type`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum End {
    /// Its first attempt succeeded.
    Success,
    /// A later attempt succeeded.
    Recovered,
    /// Its last attempt failed, and the engine gave up (`GaveUp` or `BudgetExhausted`).
    Failed(Outcome, ErrorCategory),
    /// Its upstream was held past what it waits: `Held`, without an attempt.
    Held,
}

impl End {
    fn outcome(self) -> &'static str {
        match self {
            End::Success => "success",
            End::Recovered => "recovered",
            End::Failed(outcome, _) => outcome.as_str(),
            End::Held => "held",
        }
    }

    fn error_type(self) -> Option<&'static str> {
        match self {
            End::Success | End::Recovered => None,
            End::Failed(_, category) => Some(category.as_str()),
            End::Held => Some("held"),
        }
    }
}

/// What a call keeps for its metrics beside its start (the call's own
/// `start`, which [`CallClock::start`] sets as it is made): how long it
/// has had no attempt in flight (its backoff sleeps, its waits at its
/// upstream), in 8 bytes.
#[derive(Debug)]
pub(crate) struct CallClock {
    idle: Nanos,
}

impl CallClock {
    /// A call with no time without an attempt yet.
    #[inline(always)]
    pub(crate) const fn new() -> CallClock {
        CallClock { idle: Nanos::ZERO }
    }

    /// The start of a call made now: now (without the feature, none until
    /// the call needs one).
    #[inline(always)]
    pub(crate) fn start() -> Option<Instant> {
        Some(Instant::now())
    }

    /// The call sleeps or waits `d` with no attempt in flight.
    #[inline]
    pub(crate) fn idle(&mut self, d: Duration) {
        self.idle = self.idle.plus(Nanos::new(Some(d)));
    }

    /// The call of `site` that started at `start` ended after `attempts`
    /// attempts, as `end` says: its duration, its attempts and, if it had
    /// any, its time with no attempt in flight.
    #[inline(never)]
    pub(crate) fn ended(&self, start: Option<Instant>, site: &Site, attempts: u32, end: End) {
        let instruments = instruments();
        let duration = start.map_or(Duration::ZERO, |start| start.elapsed());
        let common = [
            KeyValue::new(names::LAYER, site.layer.as_str()),
            KeyValue::new(names::OPERATION, site.operation),
            KeyValue::new(names::OUTCOME, end.outcome()),
        ];
        let failed;
        let attributes: &[KeyValue] = match end.error_type() {
            None => &common,
            Some(error) => {
                let [layer, operation, outcome] = common;
                failed = [
                    layer,
                    operation,
                    outcome,
                    KeyValue::new(names::ERROR_TYPE, error),
                ];
                &failed
            }
        };
        instruments
            .call_duration
            .record(duration.as_secs_f64(), attributes);
        instruments
            .call_attempts
            .record(u64::from(attempts), attributes);
        if let Some(idle) = self.idle.get().filter(|idle| !idle.is_zero()) {
            instruments
                .retry_delay
                .record(idle.as_secs_f64(), attributes);
        }
    }
}

/// The name of an upstream (`name`, and `static_name` when it was given
/// as a `&'static str`), as an attribute: no allocation for the latter.
fn upstream_name(name: &str, static_name: Option<&'static str>) -> KeyValue {
    match static_name {
        Some(name) => KeyValue::new(names::UPSTREAM_NAME, name),
        None => KeyValue::new(names::UPSTREAM_NAME, name.to_owned()),
    }
}

/// An attempt waited `waited` at the upstream named `name` (`static_name`
/// as [`upstream_name`] reads it) before it started, for `reason`.
#[cold]
#[inline(never)]
pub(crate) fn waited(
    name: &str,
    static_name: Option<&'static str>,
    waited: Duration,
    reason: Option<WaitReason>,
) {
    let reason = match reason {
        Some(WaitReason::Held) => "held",
        Some(WaitReason::Paced) => "paced",
        Some(WaitReason::ColdStart) => "cold_start",
        // Every wait says why; a bounded word if one did not.
        None => "unknown",
    };
    instruments().upstream_wait.record(
        waited.as_secs_f64(),
        &[
            upstream_name(name, static_name),
            KeyValue::new(names::WAIT_REASON, reason),
        ],
    );
}

/// An attempt through the upstream named `name` failed with `failure`: a
/// pushback if the server refused it (rate limited) or said when to come
/// back (a hint).
#[inline]
pub(crate) fn refused(name: &str, static_name: Option<&'static str>, failure: &Failure) {
    let reason = if failure.category == ErrorCategory::RateLimited {
        "rate_limited"
    } else if failure.retry_after.is_some() {
        "server_hint"
    } else {
        return;
    };
    pushback(upstream_name(name, static_name), reason);
}

/// A hold of an upstream started or grew: a pushback of its own unless an
/// attempt's failure caused it (that one was counted by [`refused`]).
#[inline]
pub(crate) fn held(event: &UpstreamEvent) {
    let reason = match event.reason {
        HoldReason::ServerHint => return,
        HoldReason::RateLimitHeaders => "rate_limit_headers",
        HoldReason::Breaker => "breaker",
        HoldReason::ByHand => "by_hand",
    };
    // A hold is rare, and its event owns the name already.
    pushback(
        KeyValue::new(names::UPSTREAM_NAME, event.upstream.clone()),
        reason,
    );
}

#[cold]
#[inline(never)]
fn pushback(upstream: KeyValue, reason: &'static str) {
    instruments().pushbacks.add(
        1,
        &[upstream, KeyValue::new(names::PUSHBACK_REASON, reason)],
    );
}

/// A stream opened by the fn of `site` resumes.
#[cold]
#[inline(never)]
pub(crate) fn resumed(site: &Site) {
    instruments().resumes.add(
        1,
        &[
            KeyValue::new(names::LAYER, site.layer.as_str()),
            KeyValue::new(names::OPERATION, site.operation),
        ],
    );
}

/// The operation a stream's frame names, for its time to first chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamOf(&'static str);

impl StreamOf {
    /// The frame of the annotated fn `operation`.
    #[inline(always)]
    pub(crate) const fn new(operation: &'static str) -> StreamOf {
        StreamOf(operation)
    }
}

/// Where a stream was awaited: the layer and the operation of its annotated
/// fn, if any; kept by [`Starting`](crate::stream::Starting) until its first content.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FirstChunk(Option<(Layer, &'static str)>);

impl FirstChunk {
    /// A stream awaited outside any annotated fn (until it finds one).
    #[inline(always)]
    pub(crate) const fn outside() -> FirstChunk {
        FirstChunk(None)
    }

    /// A stream under the frame of the fn `of`, of `layer`.
    #[inline]
    pub(crate) fn of(layer: Layer, of: StreamOf) -> FirstChunk {
        FirstChunk(Some((layer, of.0)))
    }

    /// The stream's first content came `after` the start of its call.
    #[inline(never)]
    pub(crate) fn came(self, after: Duration) {
        let secs = after.as_secs_f64();
        let first_chunk = &instruments().first_chunk;
        match self.0 {
            Some((layer, operation)) => first_chunk.record(
                secs,
                &[
                    KeyValue::new(names::LAYER, layer.as_str()),
                    KeyValue::new(names::OPERATION, operation),
                ],
            ),
            None => first_chunk.record(secs, &[]),
        }
    }
}
