//! The limits a [`Started`](super::Started) carries, as the annotated fn
//! that awaited [`started`](super::started) had them in force.

use core::time::Duration;

use tokio::time::Instant;

use crate::Layer;

/// What the call around a stream puts in force for it: its start (`None`
/// while it is in its first poll, when "now" is its start), the fn's `read`
/// limit, the call's `total` deadline and limit, and the layer that owns them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamFrame {
    pub(crate) start: Option<Instant>,
    pub(crate) read: Option<Duration>,
    pub(crate) total: Option<(Instant, Duration)>,
    pub(crate) layer: Layer,
}

/// What a stream's first poll finds around it.
#[allow(dead_code)] // until the engine hook puts frames in force
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Around {
    /// No annotated fn: no limit applies.
    Outside,
    /// The innermost call is in its first poll and has not put its frame in
    /// force yet: it will on its next poll.
    NotYet,
    /// The frame of the innermost annotated fn.
    Frame(StreamFrame),
}

/// The limits a started stream carries after the first content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) read: Option<Duration>,
    pub(crate) total: Option<(Instant, Duration)>,
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

/// The frame in force for a stream polled now.
pub(crate) fn around() -> Around {
    // Wired to the call's context by the engine hook.
    Around::Outside
}
