//! Stratification (ADR-006, `docs/layers.md`): a retry loop that starts inside an attempt of
//! a loop of the same or a lower layer is reported, as a
//! [`LayerViolation`], to the observers in force where it started and, once
//! per pair of fns in the process, as a `tracing` warning.
//!
//! A call that is not nested pays nothing: the check runs where a nested
//! call reads what is around it on its first poll. There the inner call
//! knows the outer attempt's layer but not its fn, which only the outer call
//! holds; so the inner call counts the violation on the outer attempt (in
//! its slot of the context) and leaves its half of the report here, and the
//! outer call completes it with its name when the poll ends, in the rare
//! part of its `restore` (`ambient::exchange`). Reports wait on a stack: a call's own are the
//! last ones when its poll ends, those of the calls nested deeper having
//! been completed by their own outer calls first.

use super::site::Site;
use crate::ambient::exchange;
use crate::ambient::violations::{self, Pending};
use crate::events::{LayerViolation, observers};
use crate::vocab::layer::Layer;

/// On the first poll of a call of `inner` nested in another's attempt: if
/// that breaks the stratification, leaves the report for the outer call.
#[cold]
#[inline(never)]
pub(crate) fn check(inner: &'static Site) {
    #[cfg(test)]
    tests::CHECKS.with(|n| n.set(n.get() + 1));
    let Some(outer_layer) = exchange::count_violation(|outer| !inner.layer.may_nest_in(outer))
    else {
        return;
    };
    let observers = observers::current();
    violations::leave(Pending {
        inner_layer: inner.layer,
        inner_operation: inner.operation,
        outer_layer,
        observers,
    });
}

/// At the end of a poll of an attempt of `outer_operation` at `outer_layer`
/// during which `count` loops broke the stratification inside it: reports
/// them, in the order they started.
#[cold]
#[inline(never)]
pub(crate) fn report(outer_layer: Layer, outer_operation: &'static str, count: u32) {
    let reports = violations::take_last(count);
    // Unwinding: an observer must not panic twice.
    if std::thread::panicking() {
        return;
    }
    for Pending {
        inner_layer,
        inner_operation,
        outer_layer: seen,
        observers,
    } in reports
    {
        debug_assert_eq!(seen, outer_layer, "a report completed by the wrong call");
        let violation = LayerViolation {
            outer_layer,
            outer_operation,
            inner_layer,
            inner_operation,
        };
        warn_once(&violation);
        for observer in observers.iter().rev() {
            observer.on_layer_violation(&violation);
        }
    }
}

/// The `tracing` warning, once per pair of fns in the process.
fn warn_once(violation: &LayerViolation) {
    if violations::first_warning(violation.outer_operation, violation.inner_operation) {
        warn(violation);
    }
}

/// The warning itself (nothing without the `tracing` feature).
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
fn warn(violation: &LayerViolation) {
    #[cfg(feature = "tracing")]
    {
        let why = if violation.outer_layer == violation.inner_layer {
            "two loops of one layer nested multiply their attempts"
        } else {
            "the layers are upside down: the higher layer's loop belongs around the lower one's"
        };
        tracing::warn!(
            target: "nika_retry",
            outer_layer = violation.outer_layer.as_str(),
            outer_operation = violation.outer_operation,
            inner_layer = violation.inner_layer.as_str(),
            inner_operation = violation.inner_operation,
            "layer violation (ADR-006): {violation}: {why}; retry at one place and call the \
             other without its loop (said once per pair of fns)"
        );
    }
}

#[cfg(test)]
mod tests {
    use core::cell::Cell;
    use core::future::Future;
    use nika_retry_macros::{Classify, retry};

    std::thread_local! {
        /// How many times a call on this thread ran the violation check.
        pub(super) static CHECKS: Cell<u32> = const { Cell::new(0) };
    }

    #[derive(Debug, Classify)]
    #[category(transient, crate = "crate")]
    struct Busy;

    #[retry(layer = "http", backoff = "1ms", crate = "crate")]
    async fn request(fail: bool) -> Result<(), Busy> {
        if fail { Err(Busy) } else { Ok(()) }
    }

    #[retry(layer = "provider", backoff = "1ms", crate = "crate")]
    async fn complete() -> Result<(), Busy> {
        request(false).await
    }

    #[retry(layer = "http", backoff = "1ms", crate = "crate")]
    async fn nested_request() -> Result<(), Busy> {
        request(false).await
    }

    /// The checks `fut` ran (the runtime is current-thread).
    async fn checks_during(fut: impl Future<Output = Result<(), Busy>>) -> u32 {
        let before = CHECKS.with(Cell::get);
        let _ = fut.await;
        CHECKS.with(Cell::get) - before
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn only_a_call_that_breaks_the_rule_runs_the_check() {
        assert_eq!(checks_during(request(false)).await, 0, "not nested");
        assert_eq!(checks_during(request(true)).await, 0, "not nested, retried");
        assert_eq!(
            checks_during(complete()).await,
            0,
            "http under provider: the normal shape"
        );
        assert_eq!(checks_during(nested_request()).await, 1, "http under http");
    }
}
