//! Each poll of an attempt of a [`Call`](super::call::Call): the call's
//! attempt put in force ([`CallState::enter`]), what the loops and the
//! scope around it say read on its first poll, and the body polled
//! ([`Attempt`]).

use core::future::Future;
use core::num::NonZeroU32;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use super::state::{Call, CallState};
use super::violation;
use crate::ambient::exchange::{self, Outer};
use crate::ambient::{AttemptSlot, Budget, Frame, SiteOf, StreamFrame, Swap};
use crate::metrics::StreamOf;
use crate::task;
use crate::time::Total;
use crate::vocab::key::IdempotencyKey;

impl CallState {
    /// Puts the call's attempt in force for one poll, until the guard drops
    /// (a panic included). Inlined into the poll, always: a guard returned
    /// from a call comes back through memory, and reading it stalls the
    /// CPU's store forwarding on every call. `framed`: the call's stream
    /// frame is in force too ([`frame`](CallState::frame)).
    #[inline(always)]
    pub(super) fn enter(&mut self, framed: bool) -> Entered<'_> {
        let outer = match self.max_attempts {
            Some(resolved) => {
                let slot = self.slot(resolved, framed);
                exchange::install(self.budget, slot, &mut self.key)
            }
            None => self.enter_first(framed),
        };
        Entered { call: self, outer }
    }

    /// [`enter`](CallState::enter) on the call's first poll: what is around
    /// the call is read in the access that puts its attempt in force, unless
    /// a task policy is in force or the call breaks the layer rule
    /// ([`resolve`](CallState::resolve), then the exchange).
    #[inline(always)]
    fn enter_first(&mut self, framed: bool) -> Outer {
        let max_attempts = self.site.config.attempts();
        let slot = self.slot(max_attempts, framed);
        let default = Budget::new(task::DEFAULT_BUDGET, 1);
        match exchange::install_first(self.site.layer, slot, default, &mut self.key) {
            Some((outer, budget)) => {
                (self.budget, self.max_attempts) = (budget, Some(max_attempts));
                outer
            }
            None => self.enter_resolving(framed),
        }
    }

    /// [`enter_first`](CallState::enter_first) under a task policy or
    /// breaking the layer rule: out of line, the rare path.
    #[cold]
    #[inline(never)]
    fn enter_resolving(&mut self, framed: bool) -> Outer {
        let max_attempts = self.resolve();
        let slot = self.slot(max_attempts, framed);
        exchange::install(self.budget, slot, &mut self.key)
    }

    /// The slot of the call's attempt, of `max_attempts`; `framed`, with
    /// its stream frame in force.
    #[inline(always)]
    fn slot(&self, max_attempts: NonZeroU32, framed: bool) -> AttemptSlot {
        let slot = AttemptSlot::new(
            self.site.layer,
            self.attempt,
            max_attempts.get(),
            self.key != IdempotencyKey::UNDRAWN,
        )
        .saying(self.idempotent);
        if framed { slot.with_stream() } else { slot }
    }

    /// The call's frame for the streams its attempt awaits, with the
    /// attempt's `read` limit and the call's `total` deadline: put in force
    /// for its polls once a stream has asked for it.
    #[cold]
    #[inline(never)]
    pub(super) fn frame(
        &self,
        read: Option<Duration>,
        total: Option<Total>,
    ) -> Option<StreamFrame> {
        Some(StreamFrame {
            start: self.start,
            read,
            total,
            layer: self.site.layer,
            of: StreamOf::new(self.site.operation),
            site: Some(SiteOf(self.site)),
        })
    }

    /// What the loops and the scope around the call say about it, read once,
    /// on its first poll under a task policy or breaking the layer rule (the
    /// others read it in [`exchange::install_first`]): the budget it owns if
    /// it is the outermost retried call (the task's, which always holds, or
    /// the default), its layer's token bucket, and the attempts it allows
    /// (the task's `retry:` over the site's).
    #[inline(always)]
    fn resolve(&mut self) -> NonZeroU32 {
        let (scoped, nested, breaks) = exchange::around(self.site.layer);
        if scoped {
            return self.resolve_in_scope(nested, breaks);
        }
        if !nested {
            self.budget = Some(Budget::new(task::DEFAULT_BUDGET, 1));
        } else if breaks {
            // Only a nested call that breaks the rule leaves this path (ADR-006).
            violation::check(self.site);
        }
        *self.max_attempts.insert(self.site.config.attempts())
    }

    /// [`resolve`](CallState::resolve) under a task policy.
    #[cold]
    #[inline(never)]
    fn resolve_in_scope(&mut self, nested: bool, breaks: bool) -> NonZeroU32 {
        let scope = task::in_force(self.site.layer);
        if !nested {
            self.budget = Some(match scope.budget {
                Some(total) => Budget::explicit(total, 1),
                None => Budget::new(task::DEFAULT_BUDGET, 1),
            });
        } else if breaks {
            violation::check(self.site);
        }
        self.bucket = scope.bucket;
        *self.max_attempts.insert(
            scope
                .max_attempts
                .unwrap_or_else(|| self.site.config.attempts()),
        )
    }
}

/// One poll of an attempt with its call's attempt in force: puts the outer
/// one back when dropped.
pub(super) struct Entered<'a> {
    pub(super) call: &'a mut CallState,
    outer: Outer,
}

impl Drop for Entered<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let call = &mut *self.call;
        let owns_budget = call.budget.is_some();
        // The site by reference: read only if the poll has violations to report.
        let budget = exchange::restore(
            self.outer,
            &mut call.key,
            owns_budget,
            &mut call.streams,
            &call.site,
            |site, layer, count| violation::report(layer, site.operation, count),
        );
        if budget.is_some() {
            call.budget = budget;
        }
    }
}

pin_project_lite::pin_project! {
    /// One attempt, polled with the call's context in force.
    pub struct Attempt<'a, F> {
        #[pin]
        pub(super) fut: F,
        pub(super) call: &'a mut Call,
    }
}

impl<F: Future> Future for Attempt<'_, F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let call = this.call;
        let polled = if call.streams {
            poll_framed(call, this.fut, cx)
        } else {
            let _entered = call.enter(false);
            this.fut.poll(cx)
        };
        if polled.is_pending() {
            call.went_pending();
        }
        polled
    }
}

/// A poll of an attempt whose call has its stream frame in force too: out
/// of line, so that the polls of the calls that await no stream keep their
/// registers.
#[cold]
#[inline(never)]
fn poll_framed<F: Future>(
    call: &mut CallState,
    fut: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    let mut frame = call.frame(None, None);
    let _frame = Swap::<Frame>::new(&mut frame);
    let _entered = call.enter(true);
    fut.poll(cx)
}
