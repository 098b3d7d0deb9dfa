//! [`AttemptSlot`]: the attempt in force, packed in one word, and the layer
//! rule as a bit table over it.

use crate::vocab::layer::Layer;

/// The attempt being polled, as [`current_attempt`](crate::current_attempt)
/// reports it, packed in one `u64` (0: none), so that putting it in force
/// and taking it back are one store and one load: a wider value written
/// field by field and read back whole stalls the CPU's store forwarding,
/// which a ready attempt would pay on every call. Its key lives in a cell
/// of its own, touched only by a call that has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AttemptSlot(u64);

const PRESENT: u64 = 1 << 63;
/// The key cell holds this attempt's key.
const HAS_KEY: u64 = 1 << 62;
/// The stream cell holds the frame of this attempt's fn.
const HAS_STREAM: u64 = 1 << 61;
/// A stream polled in this attempt asked for its fn's frame, which the fn
/// then puts in force from its next poll on: a call whose body awaits no
/// stream never does.
const WANTS_STREAM: u64 = 1 << 39;
/// A `#[timeout]` alone is being polled here without its frame in force (it
/// has no slot of its own): a stream polled in its body asks it, not the
/// attempt around it (which it may be outside of: then only this bit is set).
const ALONE: u64 = 1 << 38;
/// This attempt's call is not idempotent, or is nested in one that is not
/// and says nothing itself: a call nested in it without `idempotent = …`
/// is not idempotent either (README, "Calls with side effects").
const NOT_IDEMPOTENT: u64 = 1 << 37;
/// This attempt's call says `idempotent = true` (or an expression that was
/// `true`): it does not inherit [`NOT_IDEMPOTENT`] from the attempt around it.
const SAYS_IDEMPOTENT: u64 = 1 << 36;
// The two sit side by side, the one `SAYS_IDEMPOTENT` masks above it.
const _: () = assert!(SAYS_IDEMPOTENT << 1 == NOT_IDEMPOTENT);
/// The bits a `#[timeout]` alone takes over for its poll, and gives back.
const LENT_TO_ALONE: u64 = HAS_STREAM | WANTS_STREAM | ALONE;
/// How many loops that break the stratification started inside this
/// attempt during its poll (bits 42–60), each waiting in
/// [`violation`](crate::run::violation) for the outer call's name,
/// which its [`restore`](super::exchange::restore) gives: no other poll pays for it.
const VIOLATIONS: u64 = ((1 << 19) - 1) << VIOLATIONS_SHIFT;
const VIOLATIONS_SHIFT: u32 = 42;
// The flags and the counter each have bits of their own.
const _: () = assert!(VIOLATIONS & (WANTS_STREAM | HAS_STREAM | HAS_KEY | PRESENT) == 0);
// Clear of the counts (bits 0–31) and of the layer (40–41).
const _: () = assert!(
    (WANTS_STREAM | ALONE | NOT_IDEMPOTENT | SAYS_IDEMPOTENT) & (0xffff_ffff | 3 << 40) == 0
);

/// What a call says about repeating its attempts (`#[retry(idempotent = …)]`),
/// as its slot carries it to the calls nested in its attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Idempotence {
    /// No `idempotent` key: idempotent, unless nested in a call that is not.
    Unsaid = 0,
    /// `idempotent = true`, said: it stands whatever the calls around it say.
    Said = 1,
    /// `idempotent = false`.
    Not = 2,
}

impl Idempotence {
    /// `idempotent = value`, said.
    #[inline(always)]
    pub(crate) fn said(value: bool) -> Idempotence {
        if value {
            Idempotence::Said
        } else {
            Idempotence::Not
        }
    }
}

impl AttemptSlot {
    pub(super) const NONE: AttemptSlot = AttemptSlot(0);

    /// Attempt `attempt` of `max_attempts` at `layer` (both at most 65 535).
    #[inline]
    pub(crate) fn new(layer: Layer, attempt: u32, max_attempts: u32, has_key: bool) -> Self {
        let key = if has_key { HAS_KEY } else { 0 };
        AttemptSlot(
            PRESENT
                | key
                | (layer as u64) << 40
                | u64::from(max_attempts.min(0xffff)) << 16
                | u64::from(attempt.min(0xffff)),
        )
    }

    /// The same attempt, with what its call says about repeating it.
    #[inline(always)]
    pub(crate) fn saying(self, idempotence: Idempotence) -> AttemptSlot {
        // `Said` is bit 36, `Not` bit 37.
        AttemptSlot(self.0 | u64::from(idempotence as u8) << 36)
    }
    /// Whether a call nested in this attempt that says nothing about
    /// repeating its own is not idempotent: this call is not, or it said
    /// nothing and is nested in one that is not.
    pub(crate) fn not_idempotent(self) -> bool {
        self.0 & NOT_IDEMPOTENT != 0
    }

    pub(crate) fn layer(self) -> Layer {
        // Two bits hold the layer.
        const _: () = assert!(Layer::ALL.len() <= 4);
        Layer::ALL[self.layer_index() as usize]
    }
    /// The layer as its index in [`Layer::ALL`] (its discriminant).
    pub(super) fn layer_index(self) -> u64 {
        (self.0 >> 40) & 3
    }
    pub(crate) fn attempt(self) -> u32 {
        (self.0 & 0xffff) as u32
    }
    pub(crate) fn max_attempts(self) -> u32 {
        ((self.0 >> 16) & 0xffff) as u32
    }
    pub(super) fn present(self) -> bool {
        self.0 & PRESENT != 0
    }
    pub(super) fn has_key(self) -> bool {
        self.0 & HAS_KEY != 0
    }
    /// The same attempt, with its key in the key cell.
    pub(super) fn with_key(self) -> AttemptSlot {
        AttemptSlot(self.0 | HAS_KEY)
    }
    /// The same attempt, with its fn's frame in the stream cell.
    #[inline(always)]
    pub(crate) fn with_stream(self) -> AttemptSlot {
        AttemptSlot(self.0 | HAS_STREAM)
    }
    pub(super) fn has_stream(self) -> bool {
        self.0 & HAS_STREAM != 0
    }
    /// The same attempt, no longer saying its fn's frame is in force.
    pub(super) fn without_stream(self) -> AttemptSlot {
        AttemptSlot(self.0 & !HAS_STREAM)
    }
    /// The same attempt, asking its fn for its frame.
    pub(super) fn asking_for_stream(self) -> AttemptSlot {
        AttemptSlot(self.0 | WANTS_STREAM)
    }
    /// Whether a stream polled in this attempt asked for its fn's frame.
    pub(super) fn wants_stream(self) -> bool {
        self.0 & WANTS_STREAM != 0
    }
    /// Whether a stream polled now has someone to ask for a frame: the
    /// attempt's fn, or a `#[timeout]` alone.
    pub(super) fn askable(self) -> bool {
        self.0 & (PRESENT | ALONE) != 0
    }
    /// The slot as a `#[timeout]` alone without its frame in force puts it
    /// for its poll: a stream in its body asks it for its frame.
    pub(super) fn lent_to_alone(self) -> AttemptSlot {
        AttemptSlot(self.0 & !LENT_TO_ALONE | ALONE)
    }
    /// The slot as that `#[timeout]` alone gives it back: the stream bits of
    /// `before` it, the rest (a key drawn, violations counted) as the poll left it.
    pub(super) fn returned_by_alone(self, before: AttemptSlot) -> AttemptSlot {
        AttemptSlot(self.0 & !LENT_TO_ALONE | before.0 & LENT_TO_ALONE)
    }
    /// The same attempt, with the key bit of `outer`, the attempt it is
    /// nested in: they share the key in the key cell; and `outer`'s
    /// [`NOT_IDEMPOTENT`], unless this one [`SAYS_IDEMPOTENT`].
    #[inline(always)]
    pub(super) fn sharing_key(self, outer: AttemptSlot) -> AttemptSlot {
        let inward = outer.0 & NOT_IDEMPOTENT & !((self.0 & SAYS_IDEMPOTENT) << 1);
        AttemptSlot(self.0 | (outer.0 & HAS_KEY) | inward)
    }
    /// Whether either of two attempts has a key in the key cell.
    #[inline(always)]
    pub(super) fn either_has_key(self, other: AttemptSlot) -> bool {
        (self.0 | other.0) & HAS_KEY != 0
    }
    /// Whether the end of a poll has more to do than put `outer` back: a key
    /// to swap, violations to report, a stream's request. One test for all:
    /// a call that is not nested has no outer attempt, nothing nested broke
    /// the stratification, and no stream asked for a frame.
    #[inline(always)]
    pub(super) fn to_settle(self, outer: AttemptSlot) -> bool {
        (self.0 | outer.0) & (HAS_KEY | VIOLATIONS | WANTS_STREAM) != 0
    }
    /// The same attempt with one more violation to report, unless its count is full.
    pub(super) fn with_violation(self) -> Option<AttemptSlot> {
        (self.0 & VIOLATIONS != VIOLATIONS).then_some(AttemptSlot(self.0 + (1 << VIOLATIONS_SHIFT)))
    }
    /// Whether a loop of `inner` started inside this attempt breaks the
    /// stratification (one bit test: the report is the rare path).
    #[inline]
    pub(super) fn broken_by(self, inner: Layer) -> bool {
        self.present() && BREAKS >> (self.layer_index() * 4 + inner as u64) & 1 != 0
    }
    /// The violations started inside this attempt's poll and not yet reported.
    pub(super) fn violations(self) -> u32 {
        ((self.0 & VIOLATIONS) >> VIOLATIONS_SHIFT) as u32
    }
}
/// The negation of [`Layer::may_nest_in`] as a
/// table: bit `outer * 4 + inner`, the layers as the slot numbers them.
const BREAKS: u64 = {
    let mut table = 0;
    let mut outer = 0;
    while outer < 4 {
        let mut inner = 0;
        while inner < 4 {
            let (o, i) = (Layer::ALL[outer], Layer::ALL[inner]);
            // The slot numbers a layer as its discriminant, `inner` too.
            assert!(o as usize == outer && i as usize == inner);
            if !i.may_nest_in(o) {
                table |= 1 << (outer * 4 + inner);
            }
            inner += 1;
        }
        outer += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(said: Idempotence) -> AttemptSlot {
        AttemptSlot::new(Layer::Http, 1, 3, false).saying(said)
    }

    #[test]
    fn not_idempotent_goes_inward_unless_the_inner_says_true() {
        let outer = AttemptSlot::new(Layer::Tool, 2, 3, true).saying(Idempotence::Not);
        assert!(outer.not_idempotent());
        let unsaid = slot(Idempotence::Unsaid).sharing_key(outer);
        assert!(unsaid.not_idempotent(), "inherited");
        assert!(unsaid.has_key(), "and the key bit, as before");
        assert!(!slot(Idempotence::Said).sharing_key(outer).not_idempotent());
        assert!(slot(Idempotence::Not).sharing_key(outer).not_idempotent());
        // Two levels down, through an inner that said nothing.
        let below = slot(Idempotence::Unsaid).sharing_key(unsaid);
        assert!(below.not_idempotent());
        // Outside any call that is not idempotent, nothing is inherited.
        let open = AttemptSlot::new(Layer::Tool, 1, 3, false);
        assert!(!slot(Idempotence::Unsaid).sharing_key(open).not_idempotent());
        // The counts and the layer are untouched.
        assert_eq!(
            (unsaid.layer(), unsaid.attempt(), unsaid.max_attempts()),
            (Layer::Http, 1, 3)
        );
    }
}
