//! [`StreamFrame`]: the limits a stream awaited in the innermost annotated
//! fn takes, and how it finds them.

use core::cell::Cell;
use core::time::Duration;

use super::{Ambient, AttemptSlot, CONTEXT, STREAM};
use crate::metrics::StreamOf;
use crate::time::Total;
use crate::vocab::layer::Layer;
use crate::vocab::site::Site;

/// What the innermost annotated fn being polled puts in force for a stream
/// awaited in its body ([`stream::started`](crate::stream::started)): when
/// its call started (`None` during the first poll of a `#[timeout]` alone,
/// when "now" is its start), its `read` limit, its `total` deadline and
/// limit, and its layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamFrame {
    pub(crate) start: Option<tokio::time::Instant>,
    pub(crate) read: Option<Duration>,
    pub(crate) total: Option<Total>,
    pub(crate) layer: Layer,
    /// Its fn, for the stream's time to first chunk (feature
    /// `opentelemetry`; nothing without it).
    pub(crate) of: StreamOf,
    /// The fn's retry site, for a stream that resumes after its content
    /// ([`Started::resume_with`](crate::stream::Started::resume_with));
    /// `None` for `#[timeout]` alone, which never retries.
    pub(crate) site: Option<SiteOf>,
}

/// A retry site, compared by address: one `const` per annotated fn.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SiteOf(pub(crate) &'static Site);

impl PartialEq for SiteOf {
    fn eq(&self, other: &SiteOf) -> bool {
        core::ptr::eq(self.0, other.0)
    }
}

impl Eq for SiteOf {}

/// What a stream polled now finds around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameInForce {
    /// No annotated fn: no limit applies.
    Outside,
    /// The innermost call has not put its frame in force: this lookup asked
    /// it to ([`restore`] tells it), and it does from its next poll on.
    NotYet,
    /// The frame of the innermost annotated fn.
    Frame(StreamFrame),
}

/// What a stream polled now finds around it: the frame of the innermost
/// annotated fn, or that it has none yet (then asks for it), or that there
/// is none.
pub(crate) fn stream_frame() -> FrameInForce {
    let asked = CONTEXT.with(|c| {
        let slot = c.attempt.get();
        let asked = slot.askable() && !slot.has_stream();
        if asked {
            c.attempt.set(slot.asking_for_stream());
        }
        asked
    });
    if asked {
        return FrameInForce::NotYet;
    }
    match STREAM.with(Cell::get) {
        Some(frame) => FrameInForce::Frame(frame),
        None => FrameInForce::Outside,
    }
}

/// The place of a call's frame: swapped in for the polls of a call whose
/// attempt slot says `HAS_STREAM` itself.
pub(crate) struct Frame;

impl Ambient for Frame {
    type Value = Option<StreamFrame>;

    // Out of line: only a call whose body awaits a stream swaps a frame,
    // and its 64 bytes inline would crowd the registers of every poll.
    #[cold]
    #[inline(never)]
    fn swap(value: &mut Option<StreamFrame>) {
        STREAM.with(|c| *value = c.replace(*value));
    }
}

/// The mark of a `#[timeout]` alone whose body has not asked for its frame
/// (it has no attempt slot of its own): the slot in force, an outer call's
/// or none, is lent to it for the poll, so that a stream in its body asks it
/// rather than the call around it. The value, [`Alone`], says after the
/// poll whether a stream asked: then the `#[timeout]` alone puts its frame
/// in force from its next poll on ([`OnceFrame`]). One word read and written
/// on each side of the poll, where a frame would be 64 bytes swapped.
pub(crate) struct AloneMark;

/// The value of [`AloneMark`]: what it lent, then whether a stream asked.
#[derive(Debug, Default)]
pub(crate) struct Alone {
    /// The slot it replaced, while in force.
    outer: Option<AttemptSlot>,
    /// After the poll: a stream polled in it asked for its frame.
    pub(crate) asked: bool,
}

impl Ambient for AloneMark {
    type Value = Alone;

    #[inline]
    fn swap(alone: &mut Alone) {
        CONTEXT.with(|c| {
            let slot = c.attempt.get();
            match alone.outer.take() {
                None => {
                    alone.outer = Some(slot);
                    c.attempt.set(slot.lent_to_alone());
                }
                Some(outer) => {
                    alone.asked = slot.wants_stream();
                    c.attempt.set(slot.returned_by_alone(outer));
                }
            }
        });
    }
}

/// The place of the frame of `#[timeout]` alone, once a stream in its body
/// asked for it ([`AloneMark`]): the slot in force (an outer call's) is marked `HAS_STREAM`
/// while it is in force, so that a stream in its body takes this frame, not
/// the call's. The value's `bool` says whether this swap marked the slot,
/// so the swap back unmarks only what it marked (keeping the key bit a poll
/// may have set in the slot since).
pub(crate) struct OnceFrame;

impl Ambient for OnceFrame {
    type Value = (Option<StreamFrame>, bool);

    #[inline]
    fn swap((frame, marked): &mut (Option<StreamFrame>, bool)) {
        Frame::swap(frame);
        CONTEXT.with(|c| {
            let slot: AttemptSlot = c.attempt.get();
            if *marked {
                c.attempt.set(slot.without_stream());
                *marked = false;
            } else if slot.present() && !slot.has_stream() {
                c.attempt.set(slot.with_stream());
                *marked = true;
            }
        });
    }
}
