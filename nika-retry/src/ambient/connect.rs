//! [`ConnectLimit`]: the connect limit of the attempt in force.

use core::time::Duration;

use super::{Ambient, CONTEXT};
use crate::Layer;
use crate::time::Span;

/// The connect limit of an attempt, and whether the attempt has reached a
/// connect boundary with it (so that a limit never reached can be reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnectLimit {
    // 8 bytes rather than a `Duration`'s 16: it is held in every attempt's future.
    limit: Span,
    pub(crate) layer: Layer,
    /// Set by the connect boundaries that read it.
    pub(crate) reached: bool,
}

impl ConnectLimit {
    /// `limit` of `layer`, not reached yet.
    pub(crate) fn new(limit: Option<Duration>, layer: Layer) -> Option<ConnectLimit> {
        limit.map(|limit| ConnectLimit {
            limit: Span::new(limit),
            layer,
            reached: false,
        })
    }

    /// The limit.
    pub(crate) fn limit(self) -> Duration {
        self.limit.get()
    }
}

/// The place of the attempt's connect limit: swapped in for each poll of an
/// attempt that has one (`connect::poll_under`), so that the limit comes
/// back marked if a connect boundary read it.
pub(crate) struct Connect;

impl Ambient for Connect {
    type Value = Option<ConnectLimit>;

    #[inline]
    fn swap(value: &mut Option<ConnectLimit>) {
        CONTEXT.with(|c| *value = c.connect.replace(*value));
    }
}

/// The connect limit of the attempt being polled, noted as reached: what a
/// connect boundary ([`connect`](crate::connect), the reqwest connector) reads.
#[inline]
pub(crate) fn connect_limit() -> Option<(Duration, Layer)> {
    CONTEXT.with(|c| {
        let mut connect = c.connect.get()?;
        connect.reached = true;
        c.connect.set(Some(connect));
        Some((connect.limit(), connect.layer))
    })
}
