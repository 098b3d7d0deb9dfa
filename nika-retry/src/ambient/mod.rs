//! What is in force during one poll: the per-poll state that the futures of
//! annotated fns, task scopes and observers put on the thread while they
//! are polled, and take back when the poll returns (as `tokio::task_local!`
//! does). It follows a future across `.await`s and threads, costs no
//! allocation, and is never shared by two tasks.
//!
//! # One mechanism
//!
//! A scoped value is an [`Ambient`]: a place on the thread and one `swap`
//! with it. A [`Swap`] guard swaps a value in for one poll and back when it
//! drops (a panic included), so the value comes back to its owner as the
//! poll left it. Every scoped value uses it, except the one exchange tuned
//! for the call's own poll ([`exchange`]: one access in, one out), and the
//! observer stack (`events/observers.rs`), which adds to what is around it
//! rather than replacing it.
//!
//! # Every thread-local and process global of the crate
//!
//! All of them are listed here, and defined in this folder but for two
//! that stand beside the module they serve, so that no import runs back
//! up: the observer stack (`events/observers.rs`), which the public
//! `events::observe` fills and `events/` stands below this folder; and the
//! upstream in force (`upstream/handle.rs`'s `in_force`, a place of this folder's
//! kind, [`Ambient`]), which holds the handle of `upstream/`, above it.
//! Nothing else of the crate declares a `thread_local!` or a `static` that
//! changes, but `metrics`, whose instruments (feature `opentelemetry`) are
//! made once per process and then only read (`metrics/instruments.rs`).
//! The one state outside the crate is the random sources it draws from
//! but does not own (the last two rows).
//!
//! | where | what it holds | written by | when |
//! |---|---|---|---|
//! | `CONTEXT.attempt` ([`AttemptSlot`]) | the innermost attempt: layer, number, max, key / frame / stream-request / idempotence bits, violations to report | [`exchange::install`] / [`exchange::restore`]; `current_attempt` (key bit), a stream (request bit), a nested loop (violations), `#[timeout]` alone (its `ALONE` mark; the frame bit once asked) | each poll of an attempt |
//! | `CONTEXT.key` | the logical request's idempotency key (the outermost call's, shared by the attempts nested in it) | the owner's exchange (swap), `current_attempt` (draw) | a poll of an owner where either attempt has a key |
//! | `CONTEXT.budget` ([`Budget`]) | the outermost call's attempt budget | the exchange of the call that owns it; a nested call's retry ([`exchange::charge`], after its one read of what is around it, [`exchange::around_failure`]) | each poll of the outermost call |
//! | `CONTEXT.connect` ([`ConnectLimit`]) | the attempt's connect limit, and whether a boundary read it | a [`Swap`] in `connect::poll_under`; `connect()` and the reqwest connector mark it read | each poll of an attempt with `connect` |
//! | `POLICY`, `CONTEXT.scoped` | the task policy in force, and whether there is one (`scoped`, kept by the same swap) | a [`Swap`] in `task::scope` / `task::carry` | each poll of a scope |
//! | `STREAM` ([`StreamFrame`]) | the limits a stream awaited in the innermost fn takes | a [`Swap`] in the poll of a call or a `#[timeout]` alone, once a stream asked (from the first poll if its fn returns `Started`) | each such poll |
//! | `upstream/handle.rs` (`in_force`): `UPSTREAM` (`InForceUpstream`) | the upstream of the innermost call in force that names one (a handle), and `DEPARTED`, when its attempt left | a [`Swap`] in the poll of such a call's attempt (`run::upstream::WithUpstream`) | each poll of those |
//! | `events/observers.rs`: `OBSERVERS` | the observers of the futures being polled, outermost first (a stack) | `events::observe`, `task::carry` (read by `observers::emit`, `emit_upstream`, `current`) | each poll of those |
//! | [`violations`]`::PENDING` | a nested loop's half of a layer-violation report, until the outer call names itself | `run::violation::check` on the nested call's first poll; `run::violation::report` from the outer call's restore | only when the rule is broken |
//! | [`connect`]`::SEEN_SETTLED` | fns this thread knows are settled about their connect limit | `connect::attempt_ended` (`connect::settle`) | once per fn and thread |
//! | static [`connect`]`::SETTLED` | fns whose connect limit was reached or reported unused | `connect::settle` | once per fn |
//! | static [`connect`]`::CONNECTOR_USED` | a client from `http::client_builder` has connected | its connector (`connect::connector_used`) | its first connection |
//! | static [`violations`]`::WARNED` | pairs of fns already warned about | `run::violation::report` (`violations::first_warning`) | once per pair |
//! | `fastrand`'s thread generator (not ours) | the thread's random source | drawn by the engine's jitter (a `RetryState` not made `with_seed`, as every generated call's: one draw per jittered delay), by `Upstream::new` (its `token`) and by `upstream/mod.rs` and `upstream/fleet.rs` (a probe's spread and its poll interval); reseeded by `engine::seed_thread_jitter`, which moves all of these draws | a retry; an upstream built; a held upstream's wait |
//! | std's `RandomState` keys (not ours) | per-thread SipHash keys | `IdempotencyKey::draw` (`current_attempt`); not moved by `seed_thread_jitter`, so that a seed never makes keys repeat | a key's first read in a call |

use core::cell::{Cell, RefCell};

use crate::vocab::key::IdempotencyKey;
use crate::vocab::policy::TaskPolicy;

pub(crate) mod connect;
pub(crate) mod exchange;
mod frame;
mod scoped;
#[cfg(test)]
mod tests;
pub(crate) mod violations;

pub(crate) use connect::{Connect, ConnectLimit, connect_limit};
pub(crate) use exchange::{
    AroundFailure, AttemptSlot, Budget, Idempotence, around_failure, budget, charge,
};
pub(crate) use frame::{
    Alone, AloneMark, Frame, FrameInForce, OnceFrame, SiteOf, StreamFrame, stream_frame,
};
pub(crate) use scoped::{Policy, Scoped, with_policy};

/// A value put in force on the thread for one poll: its place, and how a
/// value is swapped with it. The types implementing it name the places.
pub(crate) trait Ambient: 'static {
    /// What the place holds.
    type Value;
    /// Swaps `value` with the one in force.
    fn swap(value: &mut Self::Value);
}

/// `A`'s value in force until the guard drops, when the outer one is put
/// back (a panic included) and `value` gets what the poll left in force.
pub(crate) struct Swap<'a, A: Ambient> {
    value: &'a mut A::Value,
}

impl<'a, A: Ambient> Swap<'a, A> {
    /// Puts `value` in force; `value` holds the outer one until the drop.
    #[inline]
    pub(crate) fn new(value: &'a mut A::Value) -> Swap<'a, A> {
        A::swap(value);
        Swap { value }
    }
}

impl<A: Ambient> Drop for Swap<'_, A> {
    #[inline]
    fn drop(&mut self) {
        A::swap(self.value);
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
    /// Whether [`POLICY`] holds one: read with the rest on a call's first
    /// poll, written only by the swap of the policy ([`Policy`]).
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
    /// The task policy in force. A thread-local of its own: a value that
    /// needs dropping would make every access to [`CONTEXT`] check that the
    /// thread-local is alive, on every poll of every call.
    static POLICY: RefCell<Option<TaskPolicy>> = const { RefCell::new(None) };
    /// The frame of the innermost annotated fn that has put one in force
    /// (the innermost attempt's when its slot says `HAS_STREAM`). A
    /// thread-local of its own: only calls past their first poll touch it,
    /// and [`Context`] keeps the layout the first poll is tuned for.
    static STREAM: Cell<Option<StreamFrame>> = const { Cell::new(None) };
}
