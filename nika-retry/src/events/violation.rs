//! [`LayerViolation`]: a retry loop that breaks the stratification of the layers.

use crate::vocab::layer::Layer;
use core::fmt;

/// A retry loop started inside an attempt of another loop of the same layer
/// (two `http` loops nested: their attempts multiply) or of a lower one (a
/// `provider` loop inside an `http` attempt: the layers upside down), which
/// breaks the stratification ADR-019 projects (ADR-006; both are
/// summarised in `docs/layers.md`).
///
/// Reported to the observers in force where the inner loop started, through
/// [`RetryObserver::on_layer_violation`](super::RetryObserver::on_layer_violation),
/// each time it happens, once the poll of the outer attempt it started in
/// returns (so of two nested violations, the deeper comes first); and to
/// `tracing` as a warning once per pair of fns in a process.
/// Behaviour does not change: the shared attempt budget already bounds the
/// attempts; the report names the fn to fix.
///
/// The order, low to high: `http` < `provider` = `tool` < `task`. The normal
/// shapes are never reported: `http` under anything above it, `provider` or
/// `tool` under `task`, a `provider` under a `tool` (an LLM used as a tool).
/// A fn with `#[timeout]` alone starts no loop: it is neither side of one.
///
/// ```
/// use nika_retry::events::LayerViolation;
/// # fn check(v: &LayerViolation) {
/// // What an observer sees for a provider fn called from inside an http attempt:
/// // "provider loop my::llm::complete inside an attempt of http loop my::net::post"
/// println!("{v}: move the call out of {}", v.outer_operation);
/// # }
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LayerViolation {
    /// The layer of the loop whose attempt was running.
    pub outer_layer: Layer,
    /// `module::path::fn_name` of that loop's fn.
    pub outer_operation: &'static str,
    /// The layer of the loop that started inside it.
    pub inner_layer: Layer,
    /// `module::path::fn_name` of that loop's fn.
    pub inner_operation: &'static str,
}

impl LayerViolation {
    /// Whether a loop of `inner` started inside an attempt of a loop of
    /// `outer` breaks the stratification: the same layer, or a higher one
    /// inside a lower one. The rule itself is [`Layer::may_nest_in`].
    ///
    /// ```
    /// use nika_retry::Layer::*;
    /// use nika_retry::events::LayerViolation;
    ///
    /// assert!(LayerViolation::breaks(Http, Http));
    /// assert!(LayerViolation::breaks(Http, Provider));
    /// assert!(!LayerViolation::breaks(Provider, Http));
    /// assert!(!LayerViolation::breaks(Tool, Provider), "an LLM used as a tool");
    /// assert!(!LayerViolation::breaks(Task, Tool));
    /// ```
    pub const fn breaks(outer: Layer, inner: Layer) -> bool {
        !inner.may_nest_in(outer)
    }
}

impl fmt::Display for LayerViolation {
    /// `provider loop my::llm::complete inside an attempt of http loop my::net::post`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} loop {} inside an attempt of {} loop {}",
            self.inner_layer, self.inner_operation, self.outer_layer, self.outer_operation
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_of_layers() {
        use Layer::*;
        // (outer, inner): the violations; every other pair is a normal shape.
        let violations = [
            (Http, Http),
            (Http, Provider),
            (Http, Tool),
            (Http, Task),
            (Provider, Provider),
            (Provider, Task),
            (Tool, Tool),
            (Tool, Task),
            (Task, Task),
        ];
        for outer in Layer::ALL {
            for inner in Layer::ALL {
                assert_eq!(
                    LayerViolation::breaks(outer, inner),
                    violations.contains(&(outer, inner)),
                    "{inner} inside {outer}"
                );
            }
        }
    }
}
