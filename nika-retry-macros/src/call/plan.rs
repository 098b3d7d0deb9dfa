//! What validation hands to expansion: the attributes of one fn, checked,
//! in types that hold only the combinations that make sense (as
//! tokio-macros' `FinalConfig`), so that expansion cannot fail.

use std::time::Duration;

use syn::{Expr, Ident, ItemFn, Type};

use super::body::Body;
use super::params::Params;
use crate::vocab::{Layer, Retryable};

/// The validated `#[retry]` and `#[timeout]` of one fn.
pub(crate) struct Plan {
    /// The fn, without its nika-retry attributes.
    pub(crate) item: ItemFn,
    pub(crate) body: Body,
    /// The attempt's output type, with `impl Trait` erased.
    pub(crate) output: Type,
    pub(crate) layer: Layer,
    pub(crate) run: Run,
    /// The paths of the sibling attributes absorbed, so their imports count as used.
    pub(crate) absorbed: Vec<syn::Path>,
    pub(crate) params: Params,
    /// `crate = "path"`, else `::nika_retry`.
    pub(crate) krate: syn::Path,
}

/// How the body runs.
// One value per macro invocation: boxing the larger variant would save nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Run {
    /// `#[retry]`: a loop of attempts, each bounded by the limits of a
    /// `#[timeout]` beside it, if any.
    Loop {
        settings: Settings,
        timeouts: Option<Timeouts>,
        /// Uses in the body that move a by-value argument not in
        /// `clone(…)` (see `moves`), each checked `Copy` where it is.
        moved: Vec<Ident>,
    },
    /// `#[timeout]` alone: one bounded run, never retried.
    Once(Timeouts),
}

/// The validated keys of `#[retry(...)]`; `None` keeps the layer default.
#[derive(Default)]
pub(crate) struct Settings {
    pub(crate) attempts: Option<u32>,
    pub(crate) backoff: Option<Duration>,
    pub(crate) max_backoff: Option<Duration>,
    pub(crate) multiplier: Option<f64>,
    pub(crate) jitter: Option<f32>,
    pub(crate) on: Option<Vec<Retryable>>,
    pub(crate) config: Option<Expr>,
    /// `upstream = EXPR`: the shared upstream every attempt passes first.
    pub(crate) upstream: Option<Expr>,
    /// `cost = EXPR`: what one attempt spends of the upstream's token limit.
    pub(crate) cost: Option<Expr>,
    /// `idempotent = false | true | EXPR`, said once as the call starts;
    /// `None` without the key (the call then inherits a `false` from the
    /// call its attempts are nested in).
    pub(crate) idempotent: Option<Expr>,
    /// The arguments of `clone(…)`, in the order written.
    pub(crate) clones: Vec<Cloned>,
}

/// An argument of `clone(…)`: cloned from the caller's value for each attempt.
pub(crate) struct Cloned {
    /// The binding (`self` for the receiver), spanned where `clone(…)` names it.
    pub(crate) name: Ident,
    /// Whether the binding was `mut`: the clone is, and the binding need not be.
    pub(crate) was_mut: bool,
}

impl Settings {
    /// The `clone(self)`, if any.
    pub(crate) fn clone_of_self(&self) -> Option<&Cloned> {
        self.clones.iter().find(|c| c.name == "self")
    }
}

/// The validated `#[timeout]`.
#[derive(Default)]
pub(crate) struct Timeouts {
    pub(crate) connect: Option<Limit>,
    pub(crate) read: Option<Limit>,
    pub(crate) attempt: Option<Limit>,
    pub(crate) total: Option<Limit>,
}

/// A time limit: a literal checked here, or an expression evaluated per call.
pub(crate) enum Limit {
    Literal(Duration),
    Expr(Expr),
}
