//! [`Carried`]: the limits a [`Started`](super::Started) carries, as the
//! annotated fn that awaited [`started`](super::started) had them in force.

use crate::ambient::StreamFrame;
use crate::time::Total;
use crate::vocab::layer::Layer;
use core::time::Duration;

/// The limits a started stream carries after the first content: at least
/// one of `read` and `total` (a frame with neither carries nothing: `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Carried {
    pub(crate) read: Option<Duration>,
    pub(crate) total: Option<Total>,
    pub(crate) layer: Layer,
}

impl Carried {
    /// What `frame` gives a stream to carry, if any limit.
    #[inline]
    pub(crate) fn of(frame: StreamFrame) -> Option<Carried> {
        (frame.read.is_some() || frame.total.is_some()).then_some(Carried {
            read: frame.read,
            total: frame.total,
            layer: frame.layer,
        })
    }
}
