//! The limits a [`Started`](super::Started) carries, as the annotated fn
//! that awaited [`started`](super::started) had them in force.

use core::time::Duration;

use crate::Layer;
use crate::context::StreamFrame;
use crate::time_limits::Total;

/// The limits a started stream carries after the first content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) read: Option<Duration>,
    pub(crate) total: Option<Total>,
    pub(crate) layer: Layer,
}

impl Limits {
    /// No limit (outside any annotated fn).
    pub(crate) const NONE: Limits = Limits {
        read: None,
        total: None,
        layer: Layer::Provider,
    };

    /// Whether any limit is set.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.read.is_some() || self.total.is_some()
    }
}

impl From<StreamFrame> for Limits {
    fn from(frame: StreamFrame) -> Limits {
        Limits {
            read: frame.read,
            total: frame.total,
            layer: frame.layer,
        }
    }
}
