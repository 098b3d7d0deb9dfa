//! The exchange a call makes with what is around it, and the words it
//! exchanges: the attempt in force packed in one word ([`AttemptSlot`],
//! with the layer rule as a bit table over it) and the budget of the
//! outermost call ([`Budget`]). One place installs them on each poll of an
//! attempt ([`install`], one access in), restores the outer ones
//! ([`restore`], one access out, with what the loops nested in it left),
//! reads what a failing call decides with ([`around_failure`], one access)
//! and charges the budget a retry takes ([`charge`]): the poll pays for
//! neither of the last two.

use super::CONTEXT;
use crate::vocab::key::IdempotencyKey;
use crate::vocab::layer::Layer;

// # The exchange, each poll of an attempt

/// The attempt being polled, its key (the logical request's: drawn with
/// `draw` if it has none yet) and the budget in force (the outermost
/// call's, whose count is the retries taken across all layers).
pub(crate) fn attempt(
    draw: impl FnOnce() -> IdempotencyKey,
) -> Option<(AttemptSlot, IdempotencyKey, Option<Budget>)> {
    CONTEXT.with(|c| {
        let slot = c.attempt.get();
        if !slot.present() {
            return None;
        }
        let budget = c.budget.get();
        if slot.has_key() {
            return Some((slot, c.key.get(), budget));
        }
        let key = draw();
        c.key.set(key);
        c.attempt.set(slot.with_key());
        Some((slot, key, budget))
    })
}

/// The attempt in force, as a stream that started in it keeps it for a
/// resume: its slot, its key if it has drawn one (a key not yet drawn is
/// drawn by the resume, once, if anyone reads it), and the budget in
/// force. Never draws a key.
pub(crate) fn attempt_as_is() -> Option<(AttemptSlot, Option<IdempotencyKey>, Option<Budget>)> {
    CONTEXT.with(|c| {
        let slot = c.attempt.get();
        let key = slot.has_key().then(|| c.key.get());
        slot.present().then(|| (slot, key, c.budget.get()))
    })
}

/// The layer of the attempt in force, if `breaks(layer)` says that a loop
/// starting inside it breaks the stratification: that attempt's count of
/// violations to report goes up by one (for its [`restore`] to report with
/// its name). `None` past half a million in one poll: that one is not reported.
#[cold]
pub(crate) fn count_violation(breaks: impl FnOnce(Layer) -> bool) -> Option<Layer> {
    CONTEXT.with(|c| {
        let slot = c.attempt.get();
        if !slot.present() || !breaks(slot.layer()) {
            return None;
        }
        c.attempt.set(slot.with_violation()?);
        Some(slot.layer())
    })
}

/// What the loops and the scope around a call at `inner` being polled for
/// the first time say: whether a task policy is in force, whether a budget
/// is (then the call is nested in a retried call), and whether the attempt
/// it is nested in is at a layer that `inner` breaks the stratification
/// under (one bit test: the report is the rare path).
#[inline]
pub(crate) fn around(inner: Layer) -> (bool, bool, bool) {
    CONTEXT.with(|c| {
        let breaks = c.attempt.get().broken_by(inner);
        (c.scoped.get(), c.budget.get().is_some(), breaks)
    })
}

/// What [`install`] replaced, for [`restore`] to put back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outer {
    pub(super) attempt: AttemptSlot,
    /// The budget in force before an owner put its own in (an owner polled
    /// inside another retried call's attempt, say after a first poll outside).
    budget: Option<Budget>,
}

/// Puts a call's attempt in force for one poll, with its budget if it owns
/// one (the outermost call); returns what it replaced, for [`restore`].
///
/// One key per logical request: the owner of the budget holds the key in
/// `key` between its polls and swaps it with the one in force when either
/// attempt has one, so that `key` holds the outer attempt's until
/// [`restore`] swaps them back; a nested call holds none of its own but
/// takes the bit of the attempt around it, and so reads the outermost
/// call's key. Inlined into the poll, where all of it stays in registers: a
/// poll costs one access in and one out.
#[inline(always)]
pub(crate) fn install(
    budget: Option<Budget>,
    slot: AttemptSlot,
    key: &mut IdempotencyKey,
) -> Outer {
    let owner = budget.is_some();
    let outer = CONTEXT.with(|c| {
        let budget = if owner {
            c.budget.replace(budget)
        } else {
            None
        };
        let attempt = c.attempt.get();
        c.attempt.set(if owner {
            slot
        } else {
            slot.sharing_key(attempt)
        });
        Outer { budget, attempt }
    });
    if owner && slot.either_has_key(outer.attempt) {
        swap_key(key);
    }
    outer
}

/// [`install`] on a call's first poll, in the same access as what is
/// around it is read: `slot` at `inner` put in force with, if no budget is
/// (the call is the outermost retried one), the `default` budget it then
/// owns, which it gets back. `None`, with nothing put in force, under a task
/// policy or in an attempt at a layer that `inner` breaks the rule under:
/// the caller reads those ([`around`]), then [`install`]s.
#[inline(always)]
pub(crate) fn install_first(
    inner: Layer,
    slot: AttemptSlot,
    default: Budget,
    key: &mut IdempotencyKey,
) -> Option<(Outer, Option<Budget>)> {
    let (outer, budget) = CONTEXT.with(|c| {
        let attempt = c.attempt.get();
        if c.scoped.get() || attempt.broken_by(inner) {
            return None;
        }
        let owner = c.budget.get().is_none();
        let budget = owner.then_some(default);
        if owner {
            c.budget.set(budget);
            c.attempt.set(slot);
        } else {
            c.attempt.set(slot.sharing_key(attempt));
        }
        Some((
            Outer {
                budget: None,
                attempt,
            },
            budget,
        ))
    })?;
    if budget.is_some() && slot.either_has_key(outer.attempt) {
        swap_key(key);
    }
    Some((outer, budget))
}

/// Puts back what [`install`] replaced, and the call's key (drawn during
/// the poll, perhaps) in `key`; hands the loops that broke the
/// stratification inside the poll to `report`, with `caller` (what the call
/// names itself with: a plain value and a fn pointer rather than a closure,
/// so that the fast path never even computes it) and the layer of the
/// attempt they started in; sets `streams` if a stream in the poll asked
/// for the call's frame; returns the call's budget as the nested loops
/// left it, if it owns it.
#[inline(always)]
pub(crate) fn restore<C>(
    outer: Outer,
    key: &mut IdempotencyKey,
    owns_budget: bool,
    streams: &mut bool,
    caller: C,
    report: fn(C, Layer, u32),
) -> Option<Budget> {
    let (ours, budget) = CONTEXT.with(|c| {
        let ours = c.attempt.replace(outer.attempt);
        let budget = if owns_budget {
            c.budget.replace(outer.budget)
        } else {
            None
        };
        (ours, budget)
    });
    if ours.to_settle(outer.attempt) {
        let violations = settle(ours, outer.attempt, key, owns_budget, streams);
        if violations != 0 {
            report(caller, ours.layer(), violations);
        }
    }
    budget
}

/// The rare part of [`restore`]: the keys to swap back (the owner's), the
/// key a nested attempt drew handed to the attempt around it, a stream's
/// request for the frame; returns the violations to report.
#[cold]
#[inline(never)]
fn settle(
    ours: AttemptSlot,
    outer: AttemptSlot,
    key: &mut IdempotencyKey,
    owner: bool,
    streams: &mut bool,
) -> u32 {
    if owner {
        if ours.either_has_key(outer) {
            swap_key(key);
        }
    } else if ours.has_key() && !outer.has_key() && outer.present() {
        // Drawn in this nested attempt: the request's key, which the
        // attempts around it (up to the owner, which keeps it) now have.
        CONTEXT.with(|c| c.attempt.set(outer.with_key()));
    }
    *streams |= ours.wants_stream();
    ours.violations()
}

/// Swaps `key` with the key in force.
fn swap_key(key: &mut IdempotencyKey) {
    CONTEXT.with(|c| *key = c.key.replace(*key));
}

// # What a failing call reads, and its charge

/// What a failing call reads of what is around it, in one access as it
/// decides: its attempt's last poll has just returned, and nothing ran
/// since, so this is what that poll left in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AroundFailure {
    /// The budget in force (the outermost call's), if any.
    pub(crate) budget: Option<Budget>,
    /// Whether the attempt around the call is not idempotent: a call that
    /// says nothing itself is not either.
    pub(crate) not_idempotent: bool,
    /// Whether a task policy is in force (then its `retry:` may replace the
    /// call's config).
    pub(crate) scoped: bool,
}

/// What is around a call that has just failed.
#[inline]
pub(crate) fn around_failure() -> AroundFailure {
    CONTEXT.with(|c| AroundFailure {
        budget: c.budget.get(),
        not_idempotent: c.attempt.get().not_idempotent(),
        scoped: c.scoped.get(),
    })
}

/// The budget in force (the outermost call's), if any.
pub(crate) fn budget() -> Option<Budget> {
    CONTEXT.with(|c| c.budget.get())
}

/// Charges one retry to the budget of the outermost call: `own`, the
/// call's if it owns it, else the one in force (if any); returns that
/// budget as it is then.
pub(crate) fn charge(own: &mut Option<Budget>) -> Option<Budget> {
    match own {
        Some(budget) => {
            *budget = budget.took_one();
            Some(*budget)
        }
        None => take_from_budget(),
    }
}

/// Counts one retry against the budget in force, if any; returns it as it
/// is then.
pub(super) fn take_from_budget() -> Option<Budget> {
    CONTEXT.with(|c| {
        let taken = c.budget.get().map(Budget::took_one);
        c.budget.set(taken);
        taken
    })
}

// # The budget of the outermost call

/// The attempts shared by the nested retry loops under one outermost call:
/// the total (one plus every retry allowed), whether the task set it, and
/// the attempts used so far (one plus every retry taken, at any layer),
/// packed in one non-zero `u64` (`explicit << 63 | total << 32 | used`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget(core::num::NonZeroU64);

const EXPLICIT: u64 = 1 << 63;

impl Budget {
    /// The default budget of `total`: it never cuts a loop below its own attempts.
    #[inline]
    pub(crate) fn new(total: u32, used: u32) -> Budget {
        Budget::pack(total, used, false)
    }

    /// A budget of `total` that the task set: it always holds.
    pub(crate) fn explicit(total: u32, used: u32) -> Budget {
        Budget::pack(total, used, true)
    }

    #[inline]
    fn pack(total: u32, used: u32, explicit: bool) -> Budget {
        let total = u64::from(total.clamp(1, i32::MAX as u32));
        let flag = if explicit { EXPLICIT } else { 0 };
        let packed = flag | (total << 32) | u64::from(used);
        Budget(core::num::NonZeroU64::new(packed).unwrap_or(core::num::NonZeroU64::MIN))
    }

    pub(super) fn total(self) -> u32 {
        ((self.0.get() & !EXPLICIT) >> 32) as u32
    }
    pub(crate) fn used(self) -> u32 {
        self.0.get() as u32
    }
    pub(super) fn is_explicit(self) -> bool {
        self.0.get() & EXPLICIT != 0
    }
    pub(crate) fn took_one(self) -> Budget {
        Budget::pack(
            self.total(),
            self.used().saturating_add(1),
            self.is_explicit(),
        )
    }
    /// Attempts left for a loop allowing `own_attempts`: a default budget is
    /// raised to them, so that it only ever stops loops from multiplying.
    pub(crate) fn left(self, own_attempts: u32) -> u32 {
        let total = if self.is_explicit() {
            self.total()
        } else {
            self.total().max(own_attempts)
        };
        total.saturating_sub(self.used())
    }
}

// # The attempt in force, in one word

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
/// which its [`restore`] gives: no other poll pays for it.
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
