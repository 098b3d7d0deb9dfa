//! Without feature `opentelemetry`: the names `record.rs` gives the
//! runtime, each doing nothing, and its types empty, so that a call pays
//! nothing for metrics it does not record.

use core::time::Duration;

use tokio::time::Instant;

use crate::engine::{Failure, Outcome};
use crate::events::upstream::{UpstreamEvent, WaitReason};
use crate::vocab::category::ErrorCategory;
use crate::vocab::layer::Layer;
use crate::vocab::site::Site;

/// How a call ended (read only with the feature).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug)]
pub(crate) enum End {
    Success,
    Recovered,
    Failed(Outcome, ErrorCategory),
    Held,
}

/// Nothing: no clock read, no byte in the call.
#[derive(Debug)]
pub(crate) struct CallClock;

impl CallClock {
    #[inline(always)]
    pub(crate) const fn new() -> CallClock {
        CallClock
    }

    /// No start read as the call is made: the call reads the clock when
    /// it needs it.
    #[inline(always)]
    pub(crate) fn start() -> Option<Instant> {
        None
    }

    #[inline(always)]
    pub(crate) fn idle(&mut self, _: Duration) {}

    #[inline(always)]
    pub(crate) fn ended(&self, _: Option<Instant>, _: &Site, _: u32, _: End) {}
}

#[inline(always)]
pub(crate) fn waited(_: &str, _: Option<&'static str>, _: Duration, _: Option<WaitReason>) {}

#[inline(always)]
pub(crate) fn refused(_: &str, _: Option<&'static str>, _: &Failure) {}

#[inline(always)]
pub(crate) fn held(_: &UpstreamEvent) {}

#[inline(always)]
pub(crate) fn resumed(_: &Site) {}

/// Nothing: no byte in a stream's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamOf;

impl StreamOf {
    #[inline(always)]
    pub(crate) const fn new(_: &'static str) -> StreamOf {
        StreamOf
    }
}

/// Nothing: no byte in a `Starting`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FirstChunk;

impl FirstChunk {
    /// A stream awaited outside any annotated fn (until it finds one).
    #[inline(always)]
    pub(crate) const fn outside() -> FirstChunk {
        FirstChunk
    }

    #[inline(always)]
    pub(crate) fn of(_: Layer, _: StreamOf) -> FirstChunk {
        FirstChunk
    }

    #[inline(always)]
    pub(crate) fn came(self, _: Duration) {}
}
