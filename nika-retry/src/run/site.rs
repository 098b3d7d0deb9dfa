//! The `const` each annotated fn resolves to, and its per-attempt limits.

use core::time::Duration;

use crate::ambient::ConnectLimit;
use crate::time::TimeLimited;
use crate::vocab::category::CategorySet;
use crate::vocab::config::RetryConfig;
use crate::vocab::layer::Layer;
use crate::vocab::timeout_error::Boundary;

pub use crate::vocab::site::Site;

/// The literal keys of `#[retry(...)]`; `None` keeps the layer default.
#[derive(Debug, Default)]
pub struct Overrides {
    /// `attempts = N`
    pub max_attempts: Option<u32>,
    /// `backoff = "…"`
    pub initial_backoff: Option<Duration>,
    /// `max_backoff = "…"`
    pub max_backoff: Option<Duration>,
    /// `multiplier = F`
    pub multiplier: Option<f64>,
    /// `jitter = F`
    pub jitter: Option<f32>,
    /// `on = [...]`
    pub retry_on: Option<CategorySet>,
}

impl Overrides {
    /// Nothing overridden.
    pub const NONE: Overrides = Overrides {
        max_attempts: None,
        initial_backoff: None,
        max_backoff: None,
        multiplier: None,
        jitter: None,
        retry_on: None,
    };

    /// The site of `operation` at `layer`, with these overrides applied to the layer defaults.
    /// Values were checked by the macro; `const` so that the result is computed by rustc.
    pub const fn site(self, layer: Layer, operation: &'static str) -> Site {
        let mut config = RetryConfig::for_layer(layer);
        if let Some(v) = self.max_attempts {
            config.max_attempts = v;
        }
        if let Some(v) = self.initial_backoff {
            config.initial_backoff = v;
        }
        if let Some(v) = self.max_backoff {
            config.max_backoff = v;
        }
        if let Some(v) = self.multiplier {
            config.multiplier = v;
        }
        if let Some(v) = self.jitter {
            config.jitter = v;
        }
        if let Some(v) = self.retry_on {
            config.retry_on = v;
        }
        Site {
            layer,
            operation,
            config,
        }
    }
}

/// The per-attempt limits of `#[timeout(...)]`, from literals or from
/// expressions evaluated as each attempt starts.
// Not the adapters' public `Timeouts`: `total` bounds the call, not an
// attempt (it goes to `TimedCall::new` or `once`), `connect` is
// `#[timeout]`'s alone, and generated code builds this one field by field,
// which `Timeouts` (`#[non_exhaustive]`) forbids; `Timeouts::attempt_limits`
// is where the two meet.
#[derive(Clone, Copy, Debug)]
pub struct AttemptLimits {
    /// `connect = …`: bounds what the body wraps in `nika_retry::connect`
    /// and the connector of a client from `nika_retry::http::client_builder`.
    pub connect: Option<Duration>,
    /// `read = …`: cuts an attempt that has gone this long without progress.
    pub read: Option<Duration>,
    /// `attempt = …`: bounds each attempt's whole duration.
    pub attempt: Option<Duration>,
}

impl AttemptLimits {
    /// No limit: what generated code completes the limits the user wrote with.
    pub const NONE: AttemptLimits = AttemptLimits {
        connect: None,
        read: None,
        attempt: None,
    };

    /// `fut` under the `attempt` and `read` limits, and the `connect` limit
    /// to put in force while it is polled, for an attempt at `layer`.
    #[inline]
    pub(crate) fn arm<F>(self, fut: F, layer: Layer) -> (TimeLimited<F>, Option<ConnectLimit>) {
        let deadline = TimeLimited::new(fut, layer)
            .after(self.attempt, Boundary::Attempt)
            .inactive(self.read);
        (deadline, ConnectLimit::new(self.connect, layer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_without_overrides_is_its_layers_defaults() {
        // Growth included: `RetryConfig::for_layer` sets it, and no key of
        // `#[retry]` changes it.
        for layer in Layer::ALL {
            let site = Overrides::NONE.site(layer, "tests::site");
            assert_eq!(site.config, RetryConfig::for_layer(layer), "{layer}");
        }
    }
}
