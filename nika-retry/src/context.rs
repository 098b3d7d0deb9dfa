//! What a retry loop needs to know about the loops and scopes around it.
//!
//! It lives in thread-locals that the future owning each piece installs only
//! for the duration of its own `poll` (as `tokio::task_local!` does), so it
//! follows the future across `.await`s and threads, costs no allocation,
//! and is never shared by two tasks. Generated code reads it synchronously,
//! from inside those polls.
//!
//! Everything a call puts in force for one poll of its attempt (the shared
//! budget, the connect limit, the attempt's own number and key) and the
//! marker of a task scope sit in one thread-local, [`Context`], so that a
//! poll costs one access in and one out (and a call's first poll one more,
//! to read what is around it), and nothing else.

use core::cell::{Cell, RefCell};
use core::future::Future;
use core::pin::Pin;
use core::task::{Context as TaskContext, Poll};
use core::time::Duration;
use std::thread::LocalKey;

use crate::Layer;
use crate::engine::site::Site;
use crate::key::IdempotencyKey;
use crate::nanos::Nanos;

/// The connect limit of an attempt, and whether the attempt has reached a
/// connect boundary with it (so that a limit never reached can be reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnectLimit {
    // 8 bytes rather than a `Duration`'s 16: it is held in every attempt's
    // future. Never none: `new` makes it from a limit.
    limit: Nanos,
    pub(crate) layer: Layer,
    /// Set by the connect boundaries that read it.
    pub(crate) reached: bool,
}

impl ConnectLimit {
    /// `limit` of `layer`, not reached yet.
    pub(crate) fn new(limit: Option<Duration>, layer: Layer) -> Option<ConnectLimit> {
        limit.map(|limit| ConnectLimit {
            limit: Nanos::new(Some(limit)),
            layer,
            reached: false,
        })
    }

    /// The limit.
    pub(crate) fn limit(self) -> Duration {
        self.limit.get().unwrap_or_default()
    }
}

/// What the innermost annotated fn being polled puts in force for a stream
/// awaited in its body ([`stream::started`](crate::stream::started)): when
/// its call started (`None` during the first poll of a `#[timeout]` alone,
/// when "now" is its start), its `read` limit, its `total` deadline and
/// limit, and its layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamFrame {
    pub(crate) start: Option<tokio::time::Instant>,
    pub(crate) read: Option<Duration>,
    pub(crate) total: Option<crate::time_limits::Total>,
    pub(crate) layer: Layer,
}

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

    fn total(self) -> u32 {
        ((self.0.get() & !EXPLICIT) >> 32) as u32
    }
    pub(crate) fn used(self) -> u32 {
        self.0.get() as u32
    }
    fn is_explicit(self) -> bool {
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
/// How many loops that break the stratification started inside this
/// attempt during its poll (bits 42–60), each waiting in
/// [`stratification`](crate::stratification) for the outer call's name,
/// which its [`restore`] gives: no other poll pays for it.
const VIOLATIONS: u64 = ((1 << 19) - 1) << VIOLATIONS_SHIFT;
const VIOLATIONS_SHIFT: u32 = 42;
// The flags and the counter each have bits of their own.
const _: () = assert!(VIOLATIONS & (WANTS_STREAM | HAS_STREAM | HAS_KEY | PRESENT) == 0);
// Clear of the counts (bits 0–31) and of the layer (40–41).
const _: () = assert!(WANTS_STREAM & (0xffff_ffff | 3 << 40) == 0);

impl AttemptSlot {
    const NONE: AttemptSlot = AttemptSlot(0);

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

    pub(crate) fn layer(self) -> Layer {
        // Two bits hold the layer.
        const _: () = assert!(Layer::ALL.len() <= 4);
        Layer::ALL[self.layer_index() as usize]
    }
    /// The layer as its index in [`Layer::ALL`] (its discriminant).
    fn layer_index(self) -> u64 {
        (self.0 >> 40) & 3
    }
    pub(crate) fn attempt(self) -> u32 {
        (self.0 & 0xffff) as u32
    }
    pub(crate) fn max_attempts(self) -> u32 {
        ((self.0 >> 16) & 0xffff) as u32
    }
    fn present(self) -> bool {
        self.0 & PRESENT != 0
    }
    fn has_key(self) -> bool {
        self.0 & HAS_KEY != 0
    }
    /// The same attempt, with its key in the key cell.
    fn with_key(self) -> AttemptSlot {
        AttemptSlot(self.0 | HAS_KEY)
    }
    /// The same attempt, with its fn's frame in the stream cell.
    #[inline(always)]
    pub(crate) fn with_stream(self) -> AttemptSlot {
        AttemptSlot(self.0 | HAS_STREAM)
    }
    fn has_stream(self) -> bool {
        self.0 & HAS_STREAM != 0
    }
    /// The violations started inside this attempt's poll and not yet reported.
    fn violations(self) -> u32 {
        ((self.0 & VIOLATIONS) >> VIOLATIONS_SHIFT) as u32
    }
}

/// What is in force for the attempt being polled: one thread-local, a cell
/// per piece, so that a poll moves only the pieces it changes.
struct Context {
    /// The budget of the outermost retried call.
    budget: Cell<Option<Budget>>,
    /// The connect limit of the attempt, its layer, and whether a connect
    /// boundary has read it.
    connect: Cell<Option<ConnectLimit>>,
    /// The innermost attempt.
    attempt: Cell<AttemptSlot>,
    /// Its key, when it has one (`HAS_KEY`).
    key: Cell<IdempotencyKey>,
    /// Whether a task policy is in force (then `task` has it).
    scoped: Cell<bool>,
}

std::thread_local! {
    static CONTEXT: Context = const {
        Context {
            budget: Cell::new(None),
            connect: Cell::new(None),
            attempt: Cell::new(AttemptSlot::NONE),
            key: Cell::new(IdempotencyKey::UNDRAWN),
            scoped: Cell::new(false),
        }
    };
    /// The frame of the innermost annotated fn that has put one in force
    /// (the innermost attempt's when its slot says `HAS_STREAM`). A
    /// thread-local of its own: only calls past their first poll touch it,
    /// and [`Context`] keeps the layout the first poll is tuned for.
    static STREAM: Cell<Option<StreamFrame>> = const { Cell::new(None) };
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

/// Whether a connect boundary has read the connect limit in force.
#[inline]
pub(crate) fn connect_reached() -> bool {
    CONTEXT.with(|c| c.connect.get().is_some_and(|l| l.reached))
}

/// `connect` in force, over the limit around it, until the guard drops: for
/// `#[timeout]` alone, which has no call of its own to enter.
pub(crate) fn enter_connect(connect: ConnectLimit) -> ConnectScope {
    ConnectScope(CONTEXT.with(|c| c.connect.replace(Some(connect))))
}

/// The guard [`enter_connect`] returns: it puts the outer limit back.
pub(crate) struct ConnectScope(Option<ConnectLimit>);

impl Drop for ConnectScope {
    fn drop(&mut self) {
        CONTEXT.with(|c| c.connect.set(self.0));
    }
}

/// The budget in force (the outermost call's), if any.
pub(crate) fn budget() -> Option<Budget> {
    CONTEXT.with(|c| c.budget.get())
}

/// Counts one retry against the budget in force, if any.
pub(crate) fn take_from_budget() {
    CONTEXT.with(|c| c.budget.set(c.budget.get().map(Budget::took_one)));
}

/// The attempt being polled and its key, drawn with `draw` if it has none yet.
pub(crate) fn attempt(
    draw: impl FnOnce() -> IdempotencyKey,
) -> Option<(AttemptSlot, IdempotencyKey)> {
    CONTEXT.with(|c| {
        let slot = c.attempt.get();
        if !slot.present() {
            return None;
        }
        if slot.has_key() {
            return Some((slot, c.key.get()));
        }
        let key = draw();
        c.key.set(key);
        c.attempt.set(slot.with_key());
        Some((slot, key))
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
        let full = slot.0 & VIOLATIONS == VIOLATIONS;
        if !slot.present() || full || !breaks(slot.layer()) {
            return None;
        }
        c.attempt.set(AttemptSlot(slot.0 + (1 << VIOLATIONS_SHIFT)));
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
        let slot = c.attempt.get();
        let breaks = slot.present() && BREAKS >> (slot.layer_index() * 4 + inner as u64) & 1 != 0;
        (c.scoped.get(), c.budget.get().is_some(), breaks)
    })
}

/// [`LayerViolation::breaks`](crate::events::LayerViolation::breaks) as a
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
            if crate::events::LayerViolation::breaks(o, i) {
                table |= 1 << (outer * 4 + inner);
            }
            inner += 1;
        }
        outer += 1;
    }
    table
};

/// What [`install`] replaced, for [`restore`] to put back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outer {
    attempt: AttemptSlot,
    /// The budget in force before an owner put its own in (an owner polled
    /// inside another retried call's attempt, say after a first poll outside).
    budget: Option<Budget>,
}

/// Puts a call's attempt in force for one poll, with its budget if it owns
/// one (the outermost call); returns what it replaced, for [`restore`].
/// If either attempt has a key, `key` (the call's) is swapped with the one
/// in force, so that `key` holds the outer attempt's until [`restore`]
/// swaps them back. Inlined into the poll, where all of it stays in
/// registers: a poll costs one access in and one out.
#[inline(always)]
pub(crate) fn install(
    budget: Option<Budget>,
    slot: AttemptSlot,
    key: &mut IdempotencyKey,
) -> Outer {
    let outer = CONTEXT.with(|c| Outer {
        budget: if budget.is_some() {
            c.budget.replace(budget)
        } else {
            None
        },
        attempt: c.attempt.replace(slot),
    });
    if (slot.0 | outer.attempt.0) & HAS_KEY != 0 {
        swap_key(key);
    }
    outer
}

/// Puts back what [`install`] replaced, and the call's key (drawn during
/// the poll, perhaps) in `key`; reports the loops that broke the
/// stratification inside the poll, as started inside an attempt of `site`
/// (a reference to the call's, so that the fast path does not load it);
/// sets `streams` if a stream in the poll asked for the call's frame;
/// returns the call's budget as the nested loops left it, if it owns it.
#[inline(always)]
pub(crate) fn restore(
    outer: Outer,
    key: &mut IdempotencyKey,
    owns_budget: bool,
    site: &&'static Site,
    streams: &mut bool,
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
    // One test for all, as for the key alone: a call that is not nested
    // has no outer attempt, nothing nested broke the stratification, and
    // no stream asked for a frame.
    if (ours.0 | outer.attempt.0) & (HAS_KEY | VIOLATIONS | WANTS_STREAM) != 0 {
        settle(ours, outer.attempt, key, site, streams);
    }
    budget
}

/// The rare part of [`restore`]: the keys to swap back, the violations to
/// report, a stream's request for the frame.
#[cold]
#[inline(never)]
fn settle(
    ours: AttemptSlot,
    outer: AttemptSlot,
    key: &mut IdempotencyKey,
    site: &&'static Site,
    streams: &mut bool,
) {
    if (ours.0 | outer.0) & HAS_KEY != 0 {
        swap_key(key);
    }
    *streams |= ours.0 & WANTS_STREAM != 0;
    if ours.violations() != 0 {
        crate::stratification::report(ours.layer(), site.operation, ours.violations());
    }
}

/// Swaps `key` with the key in force.
fn swap_key(key: &mut IdempotencyKey) {
    CONTEXT.with(|c| *key = c.key.replace(*key));
}

/// What a stream polled now finds around it: the frame of the innermost
/// annotated fn, or that it has none yet (then asks for it), or that there
/// is none.
pub(crate) fn stream_frame() -> FrameInForce {
    let asked = CONTEXT.with(|c| {
        let slot = c.attempt.get();
        let asked = slot.present() && !slot.has_stream();
        if asked {
            c.attempt.set(AttemptSlot(slot.0 | WANTS_STREAM));
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

/// `frame` in force for the streams polled until the guard drops: a call's,
/// whose attempt slot says `HAS_STREAM` itself.
#[inline]
pub(crate) fn enter_stream(frame: StreamFrame) -> StreamScope {
    StreamScope {
        outer: STREAM.with(|c| c.replace(Some(frame))),
        marked: false,
    }
}

/// [`enter_stream`] for `#[timeout]` alone, which has no attempt slot: the
/// slot in force (an outer call's) is marked `HAS_STREAM` until the guard
/// drops, so that a stream in the body takes this frame, not the call's.
#[inline]
pub(crate) fn enter_stream_marked(frame: StreamFrame) -> StreamScope {
    let marked = CONTEXT.with(|c| {
        let slot = c.attempt.get();
        let marked = slot.present() && !slot.has_stream();
        if marked {
            c.attempt.set(slot.with_stream());
        }
        marked
    });
    StreamScope {
        outer: STREAM.with(|c| c.replace(Some(frame))),
        marked,
    }
}

/// The guard of [`enter_stream`] and [`enter_stream_marked`]: it puts the
/// outer frame back, and unmarks the slot it marked (keeping the key bit a
/// poll may have set in it since).
pub(crate) struct StreamScope {
    outer: Option<StreamFrame>,
    marked: bool,
}

impl Drop for StreamScope {
    #[inline]
    fn drop(&mut self) {
        STREAM.with(|c| c.set(self.outer));
        if self.marked {
            CONTEXT.with(|c| c.attempt.set(AttemptSlot(c.attempt.get().0 & !HAS_STREAM)));
        }
    }
}

/// Marks a task policy in force (or hidden, for `false`) until the guard drops.
pub(crate) fn enter_scope(scoped: bool) -> ScopeMark {
    ScopeMark(CONTEXT.with(|c| c.scoped.replace(scoped)))
}

/// The guard [`enter_scope`] returns.
pub(crate) struct ScopeMark(bool);

impl Drop for ScopeMark {
    fn drop(&mut self) {
        CONTEXT.with(|c| c.scoped.set(self.0));
    }
}

pin_project_lite::pin_project! {
    /// A future that installs `value` in `key` while it is polled: the
    /// mechanism of `task::scope`, `task::carry` and `events::observe`.
    pub struct Scoped<T: 'static, F> {
        #[pin]
        fut: F,
        value: Option<T>,
        key: &'static LocalKey<RefCell<Option<T>>>,
    }
}

impl<T: 'static, F> Scoped<T, F> {
    /// `fut` with `value` installed in `key` (`None` hides an outer value).
    pub(crate) fn new(
        key: &'static LocalKey<RefCell<Option<T>>>,
        value: Option<T>,
        fut: F,
    ) -> Self {
        Scoped { fut, value, key }
    }
}

impl<T: 'static, F: Future> Future for Scoped<T, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        struct SwapBack<'a, T: 'static> {
            key: &'static LocalKey<RefCell<Option<T>>>,
            slot: &'a mut Option<T>,
        }
        impl<T: 'static> Drop for SwapBack<'_, T> {
            fn drop(&mut self) {
                self.key
                    .with(|c| core::mem::swap(&mut *c.borrow_mut(), self.slot));
            }
        }
        let this = self.project();
        let key = *this.key;
        key.with(|c| core::mem::swap(&mut *c.borrow_mut(), this.value));
        let _back = SwapBack {
            key,
            slot: this.value,
        };
        this.fut.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TEST_SITE: &Site = &crate::__private::Overrides::NONE.site(Layer::Http, "t");

    std::thread_local! {
        static NAME: RefCell<Option<&'static str>> = const { RefCell::new(None) };
    }

    fn current() -> Option<&'static str> {
        NAME.with(|c| *c.borrow())
    }

    #[tokio::test]
    async fn scopes_nest_and_restore_across_awaits() {
        let inner = async {
            tokio::task::yield_now().await;
            current()
        };
        let outer = async {
            let before = current();
            let nested = Scoped::new(&NAME, Some("inner"), inner).await;
            tokio::task::yield_now().await;
            (before, nested, current())
        };
        let got = Scoped::new(&NAME, Some("outer"), outer).await;
        assert_eq!(got, (Some("outer"), Some("inner"), Some("outer")));
        assert_eq!(current(), None);
    }

    #[test]
    fn a_default_budget_never_cuts_a_loop_below_its_own_attempts() {
        let default = Budget::new(9, 9);
        assert_eq!((default.left(3), default.left(10)), (0, 1));
        let explicit = Budget::explicit(9, 9);
        assert_eq!((explicit.left(3), explicit.left(10)), (0, 0));
        assert!(explicit.took_one().is_explicit());
        assert_eq!(explicit.took_one().used(), 10);
        assert_eq!(Budget::new(u32::MAX, 0).total(), i32::MAX as u32);
    }

    #[test]
    fn a_poll_writes_its_changes_back_and_restores_the_outer_context() {
        let drawn = IdempotencyKey::from_u128(7);
        let mut outer_key = IdempotencyKey::UNDRAWN;
        let slot = AttemptSlot::new(Layer::Tool, 2, 3, false);
        let outer = install(Some(Budget::new(9, 1)), slot, &mut outer_key);
        assert_eq!(outer.attempt, AttemptSlot::NONE);
        take_from_budget();
        let (seen, first) = attempt(|| drawn).unwrap();
        assert_eq!(
            (seen.layer(), seen.attempt(), seen.max_attempts()),
            (Layer::Tool, 2, 3)
        );
        assert_eq!(first, drawn);
        assert_eq!(attempt(|| unreachable!("drawn once")).unwrap().1, drawn);
        // A nested attempt without a key hides the outer one and puts it back.
        let mut inner_key = IdempotencyKey::UNDRAWN;
        let inner_slot = AttemptSlot::new(Layer::Http, 1, 3, false);
        let inner = install(None, inner_slot, &mut inner_key);
        assert_eq!(inner.attempt, seen.with_key());
        let inner_drawn = attempt(IdempotencyKey::draw).unwrap().1;
        assert_ne!(inner_drawn, drawn);
        assert_eq!(
            restore(inner, &mut inner_key, false, &TEST_SITE, &mut false),
            None
        );
        assert_eq!(inner_key, inner_drawn, "the inner call keeps what it drew");
        assert_eq!(attempt(|| unreachable!("put back")).unwrap().1, drawn);
        // Its next attempt brings its own key back, and hides the outer one again.
        let inner = install(None, inner_slot.with_key(), &mut inner_key);
        assert_eq!(attempt(|| unreachable!("its own")).unwrap().1, inner_drawn);
        restore(inner, &mut inner_key, false, &TEST_SITE, &mut false);
        assert_eq!(inner_key, inner_drawn);
        assert_eq!(attempt(|| unreachable!("put back")).unwrap().1, drawn);
        let back = restore(outer, &mut outer_key, true, &TEST_SITE, &mut false);
        assert_eq!((back, outer_key), (Some(Budget::new(9, 2)), drawn));
        assert_eq!(attempt(IdempotencyKey::draw), None);
        assert_eq!(budget(), None);
    }

    #[test]
    fn an_owner_polled_inside_another_call_puts_that_calls_budget_back() {
        let mut key = IdempotencyKey::UNDRAWN;
        let slot = AttemptSlot::new(Layer::Provider, 1, 3, false);
        let outer = install(Some(Budget::new(9, 4)), slot, &mut key);
        // A call that owns a budget (first polled outside any retried call)
        // now polled inside this attempt: its budget in force, then the outer one back.
        let inner = install(Some(Budget::explicit(3, 1)), slot, &mut key);
        take_from_budget();
        assert_eq!(
            restore(inner, &mut key, true, &TEST_SITE, &mut false),
            Some(Budget::explicit(3, 2))
        );
        assert_eq!(
            budget(),
            Some(Budget::new(9, 4)),
            "the outer budget is back"
        );
        assert_eq!(
            restore(outer, &mut key, true, &TEST_SITE, &mut false),
            Some(Budget::new(9, 4))
        );
        assert_eq!(budget(), None);
    }

    #[test]
    fn violations_counted_on_an_attempt_leave_the_rest_of_it_alone() {
        assert_eq!(count_violation(|_| true), None, "no attempt in force");
        let slot = AttemptSlot::new(Layer::Tool, 2, 3, false);
        let mut key = IdempotencyKey::UNDRAWN;
        let outer = install(None, slot, &mut key);
        assert_eq!(count_violation(|_| false), None, "a normal shape");
        assert_eq!(
            count_violation(|layer| layer == Layer::Tool),
            Some(Layer::Tool)
        );
        assert_eq!(count_violation(|_| true), Some(Layer::Tool));
        let counted = CONTEXT.with(|c| c.attempt.get());
        assert_eq!(
            (counted.violations(), counted.layer(), counted.attempt()),
            (2, Layer::Tool, 2)
        );
        assert_eq!((counted.max_attempts(), counted.has_key()), (3, false));
        // Its restore reports them (none were left to complete here) and
        // puts the outer context back.
        restore(outer, &mut key, false, &TEST_SITE, &mut false);
        assert_eq!(CONTEXT.with(|c| c.attempt.get()), AttemptSlot::NONE);
    }

    #[test]
    fn a_budget_packs_its_total_use_and_kind() {
        let budget = Budget::new(9, 4);
        assert_eq!(
            (budget.total(), budget.used(), budget.is_explicit()),
            (9, 4, false)
        );
        let explicit = Budget::explicit(5, 2).took_one();
        assert_eq!(
            (explicit.total(), explicit.used(), explicit.is_explicit()),
            (5, 3, true)
        );
    }

    #[test]
    fn the_accessors_read_the_frame_in_force() {
        let limit = ConnectLimit::new(Some(Duration::from_secs(2)), Layer::Http);
        {
            let _connect = limit.map(enter_connect);
            assert_eq!(connect_limit(), Some((Duration::from_secs(2), Layer::Http)));
        }
        assert_eq!(connect_limit(), None);

        let slot = AttemptSlot::new(Layer::Http, 1, 3, false);
        let mut key = IdempotencyKey::UNDRAWN;
        let outer = install(Some(Budget::new(9, 3)), slot, &mut key);
        assert_eq!(
            (super::budget(), around(Layer::Http)),
            (Some(Budget::new(9, 3)), (false, true, true))
        );
        restore(outer, &mut key, true, &TEST_SITE, &mut false);
        assert_eq!(super::budget(), None);

        let scoped = || CONTEXT.with(|c| c.scoped.get());
        {
            let _outer = enter_scope(true);
            {
                let _hidden = enter_scope(false);
                assert!(!scoped());
            }
            assert!(scoped(), "the inner mark put the outer one back");
        }
        assert!(!scoped());
    }

    #[test]
    fn the_table_of_breaks_is_the_rule_for_all_sixteen_pairs() {
        for outer in Layer::ALL {
            for inner in Layer::ALL {
                let mut key = IdempotencyKey::UNDRAWN;
                let slot = AttemptSlot::new(outer, 1, 3, false);
                let installed = install(Some(Budget::new(9, 1)), slot, &mut key);
                let (_, nested, breaks) = around(inner);
                restore(installed, &mut key, true, &TEST_SITE, &mut false);
                assert!(nested);
                let rule = crate::events::LayerViolation::breaks(outer, inner);
                assert_eq!(breaks, rule, "{inner} inside {outer}");
            }
        }
        assert!(
            !around(Layer::Http).2,
            "no attempt around: nothing to break"
        );
    }

    #[test]
    fn a_stream_takes_the_innermost_frame_or_waits_for_it() {
        let frame = |ms| StreamFrame {
            start: None,
            read: Some(Duration::from_millis(ms)),
            total: None,
            layer: Layer::Http,
        };
        assert_eq!(stream_frame(), FrameInForce::Outside);
        {
            // `#[timeout]` alone, outside any call.
            let _once = enter_stream_marked(frame(1));
            assert_eq!(stream_frame(), FrameInForce::Frame(frame(1)));
        }
        let mut key = IdempotencyKey::UNDRAWN;
        let slot = AttemptSlot::new(Layer::Provider, 1, 3, false);
        let outer = install(Some(Budget::new(9, 1)), slot, &mut key);
        // A call in its first poll: no frame yet.
        assert_eq!(stream_frame(), FrameInForce::NotYet);
        {
            let _once = enter_stream_marked(frame(2));
            assert_eq!(stream_frame(), FrameInForce::Frame(frame(2)));
            // The body draws the call's key meanwhile: the key bit stays.
            let drawn = attempt(IdempotencyKey::draw).unwrap().1;
            assert_eq!(attempt(|| unreachable!("kept")).unwrap().1, drawn);
        }
        assert_eq!(stream_frame(), FrameInForce::NotYet, "unmarked again");
        assert!(CONTEXT.with(|c| c.attempt.get().has_key()));
        let mut streams = false;
        restore(outer, &mut key, true, &TEST_SITE, &mut streams);
        assert!(streams, "the call is told a stream asked for its frame");
        {
            // A call past its first poll, with its frame in force.
            let outer = install(None, slot.with_stream(), &mut key);
            let _call = enter_stream(frame(3));
            assert_eq!(stream_frame(), FrameInForce::Frame(frame(3)));
            {
                let inner = install(None, slot, &mut key);
                assert_eq!(stream_frame(), FrameInForce::NotYet, "an inner call's turn");
                let mut streams = false;
                restore(inner, &mut key, false, &TEST_SITE, &mut streams);
                assert!(streams, "the inner call is the one asked");
            }
            let mut streams = false;
            restore(outer, &mut key, false, &TEST_SITE, &mut streams);
            assert!(!streams, "the outer call had its frame in force");
        }
        assert_eq!(stream_frame(), FrameInForce::Outside);
    }

    #[test]
    fn a_connect_scope_puts_the_outer_limit_back() {
        let limit = |ms| ConnectLimit::new(Some(Duration::from_millis(ms)), Layer::Http);
        let outer = limit(500).unwrap();
        let _outer = enter_connect(outer);
        {
            let _inner = enter_connect(limit(200).unwrap());
            assert_eq!(
                connect_limit(),
                Some((Duration::from_millis(200), Layer::Http))
            );
            assert!(connect_reached());
        }
        // The outer limit again, as it was: not reached by the inner read.
        assert!(!connect_reached());
        assert_eq!(
            connect_limit(),
            Some((Duration::from_millis(500), Layer::Http))
        );
    }
}
