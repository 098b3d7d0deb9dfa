//! [`RetryConfig`]: how many attempts, how long to wait between them, what to retry.

use crate::vocab::category::{CategorySet, ErrorCategory};
use crate::vocab::layer::Layer;
use core::num::NonZeroU32;
use core::time::Duration;

/// How the backoff grows from one retry to the next.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Growth {
    /// `initial · multiplier^(n−1)`: the ADR-019 schedules (a multiplier of 1 is constant).
    #[default]
    Exponential,
    /// `initial · n`: the legacy workflow `backoff: linear`.
    Linear,
}

/// A retry policy: the one vocabulary every layer speaks (ADR-019, "Shared types":
/// one `RetryConfig` and `ErrorCategory` across crates, no per-crate retry types).
///
/// Start from a layer's defaults and change what differs; each `with_*`
/// setter checks its value and names the field when it refuses:
///
/// ```
/// use std::time::Duration;
/// use nika_retry::{Layer, RetryConfig};
///
/// let cfg = RetryConfig::for_layer(Layer::Provider)
///     .with_max_attempts(5)?
///     .with_jitter(0.0)?;
/// assert_eq!(cfg.max_attempts, 5);
/// assert_eq!(cfg.initial_backoff, Duration::from_secs(1));
///
/// let err = cfg.with_jitter(1.5).unwrap_err();
/// assert_eq!(err.field(), "jitter");
/// # Ok::<(), nika_retry::ConfigError>(())
/// ```
///
/// The fields are public so a config can be read and built freely; one set
/// out of range by hand is clamped where it is used (attempts to 1..=10,
/// jitter to 0..=1, a multiplier below 1 to 1, an initial backoff above the
/// cap to the cap), never a panic.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub struct RetryConfig {
    /// Attempts in all, counting the first: 3 attempts sleep twice.
    pub max_attempts: u32,
    /// The backoff before the second attempt.
    pub initial_backoff: Duration,
    /// No computed backoff exceeds this, jitter included.
    pub max_backoff: Duration,
    /// The growth factor between backoffs (for [`Growth::Exponential`]).
    pub multiplier: f64,
    /// The fraction of each backoff drawn at random: a delay falls in `[d·(1−jitter), d]`.
    pub jitter: f32,
    /// How the backoff grows.
    pub growth: Growth,
    /// The categories retried: a subset of `Transient` and `RateLimited`.
    pub retry_on: CategorySet,
    /// The longest server hint (`Retry-After`) slept on; a longer one gives up at once.
    pub max_retry_after: Duration,
}

/// The attempt budget nested retry loops share by default: ADR-019's 3 × 3
/// (it accepts http retried 3 times under a provider retried 3 times).
pub const DEFAULT_BUDGET: u32 = 9;

/// The largest `max_attempts` a config may have.
pub const MAX_ATTEMPTS: u32 = 10;

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl RetryConfig {
    /// The defaults of ADR-019 for `layer`: the table "The layers" in the crate
    /// README (`docs/layers.md` says where they come from).
    ///
    /// | layer | attempts | backoffs | jitter | retries | `max_retry_after` |
    /// |---|---|---|---|---|---|
    /// | `http` | 3 | 250 ms, 1 s, 4 s | 50 % | Transient | 30 s |
    /// | `provider` | 3 | 1 s, 4 s, 16 s | 50 % | Transient, RateLimited | 60 s |
    /// | `tool`, `task` | 1 | (1 s, 4 s, 16 s once opted in) | 50 % | Transient, RateLimited | 60 s |
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::{ErrorCategory, Layer, RetryConfig};
    ///
    /// let http = RetryConfig::for_layer(Layer::Http);
    /// assert_eq!(http.max_attempts, 3);
    /// assert_eq!(http.initial_backoff, Duration::from_millis(250));
    /// // 429 is the provider layer's to handle, so http cannot mask a rate limit.
    /// assert!(!http.retry_on.contains(ErrorCategory::RateLimited));
    /// assert_eq!(RetryConfig::for_layer(Layer::Tool).max_attempts, 1);
    /// ```
    pub const fn for_layer(layer: Layer) -> RetryConfig {
        match layer {
            Layer::Http => RetryConfig {
                max_attempts: 3,
                initial_backoff: ms(250),
                max_backoff: ms(4_000),
                multiplier: 4.0,
                jitter: 0.5,
                growth: Growth::Exponential,
                retry_on: CategorySet::TRANSIENT,
                max_retry_after: ms(30_000),
            },
            Layer::Provider | Layer::Tool | Layer::Task => RetryConfig {
                max_attempts: if matches!(layer, Layer::Provider) {
                    3
                } else {
                    1
                },
                initial_backoff: ms(1_000),
                max_backoff: ms(16_000),
                multiplier: 4.0,
                jitter: 0.5,
                growth: Growth::Exponential,
                retry_on: CategorySet::RETRYABLE,
                max_retry_after: ms(60_000),
            },
        }
    }

    /// Sets `max_attempts` (counting the first attempt); refuses 0 and more than 10.
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Result<RetryConfig, ConfigError> {
        if max_attempts == 0 || max_attempts > MAX_ATTEMPTS {
            return Err(ConfigError::new(
                "max_attempts",
                max_attempts,
                "must be between 1 and 10 (it counts the first attempt)",
            ));
        }
        self.max_attempts = max_attempts;
        Ok(self)
    }

    /// Sets `initial_backoff`; refuses one above `max_backoff` (raise that first).
    pub fn with_initial_backoff(mut self, initial: Duration) -> Result<RetryConfig, ConfigError> {
        if initial > self.max_backoff {
            return Err(ConfigError::new(
                "initial_backoff",
                humantime::format_duration(initial),
                "must not exceed max_backoff (set max_backoff first)",
            ));
        }
        self.initial_backoff = initial;
        Ok(self)
    }

    /// Sets `max_backoff`; refuses one below `initial_backoff`.
    pub fn with_max_backoff(mut self, max: Duration) -> Result<RetryConfig, ConfigError> {
        if max < self.initial_backoff {
            return Err(ConfigError::new(
                "max_backoff",
                humantime::format_duration(max),
                "must not be below initial_backoff",
            ));
        }
        self.max_backoff = max;
        Ok(self)
    }

    /// Sets `multiplier`; refuses one below 1 or not finite.
    pub fn with_multiplier(mut self, multiplier: f64) -> Result<RetryConfig, ConfigError> {
        if !(multiplier.is_finite() && multiplier >= 1.0) {
            return Err(ConfigError::new(
                "multiplier",
                multiplier,
                "must be a finite number of at least 1.0",
            ));
        }
        self.multiplier = multiplier;
        Ok(self)
    }

    /// Sets `jitter`; refuses a value outside `0.0..=1.0`.
    pub fn with_jitter(mut self, jitter: f32) -> Result<RetryConfig, ConfigError> {
        if !(0.0..=1.0).contains(&jitter) {
            return Err(ConfigError::new(
                "jitter",
                jitter,
                "must be between 0.0 and 1.0",
            ));
        }
        self.jitter = jitter;
        Ok(self)
    }

    /// Sets `growth`.
    #[must_use]
    pub fn with_growth(mut self, growth: Growth) -> RetryConfig {
        self.growth = growth;
        self
    }

    /// Sets `max_retry_after`, the longest server hint slept on.
    ///
    /// Every value is valid: zero never sleeps on a hint (any wait the
    /// server asks for gives up at once), and a long one is still cut by a
    /// `total` deadline. So it never returns `Err` today; it returns a
    /// `Result` as every `with_*` setter does, so that chains read alike and
    /// a check added later is not a breaking change.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::{Layer, RetryConfig};
    ///
    /// let cfg = RetryConfig::for_layer(Layer::Http).with_max_retry_after(Duration::ZERO)?;
    /// assert_eq!(cfg.max_retry_after, Duration::ZERO);
    /// # Ok::<(), nika_retry::ConfigError>(())
    /// ```
    pub fn with_max_retry_after(mut self, max: Duration) -> Result<RetryConfig, ConfigError> {
        self.max_retry_after = max;
        Ok(self)
    }

    /// Sets the categories retried; refuses `auth`, `not_found` and `permanent`.
    ///
    /// ```
    /// use nika_retry::{ErrorCategory, Layer, RetryConfig};
    ///
    /// let cfg = RetryConfig::for_layer(Layer::Provider);
    /// assert!(cfg.clone().with_retry_on([ErrorCategory::Transient]).is_ok());
    /// let err = cfg.with_retry_on([ErrorCategory::Auth]).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid retry_on `auth`: auth errors are never retryable");
    /// ```
    pub fn with_retry_on(
        mut self,
        categories: impl IntoIterator<Item = ErrorCategory>,
    ) -> Result<RetryConfig, ConfigError> {
        let set: CategorySet = categories.into_iter().collect();
        if let Some(bad) = set.first_unretryable() {
            return Err(ConfigError {
                field: "retry_on",
                value: bad.to_string(),
                reason: match bad {
                    ErrorCategory::Auth => "auth errors are never retryable",
                    ErrorCategory::NotFound => "not_found errors are never retryable",
                    _ => "permanent errors are never retryable",
                },
            });
        }
        self.retry_on = set;
        Ok(self)
    }

    /// Whether this config retries `category` at all.
    pub fn retries(&self, category: ErrorCategory) -> bool {
        self.effective_attempts() > 1 && self.retry_on.contains(category) && category.is_retryable()
    }

    /// `max_attempts` clamped to `1..=10`.
    #[inline]
    pub fn effective_attempts(&self) -> u32 {
        self.max_attempts.clamp(1, MAX_ATTEMPTS)
    }

    /// [`effective_attempts`](RetryConfig::effective_attempts), as the
    /// never-zero count it is.
    #[inline]
    pub(crate) fn attempts(&self) -> NonZeroU32 {
        // Never taken: the clamp's floor is 1.
        NonZeroU32::new(self.effective_attempts()).unwrap_or(NonZeroU32::MIN)
    }
}

/// A value a [`RetryConfig`] setter refused: names the field, the value and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field} `{value}`: {reason}")]
pub struct ConfigError {
    field: &'static str,
    value: String,
    reason: &'static str,
}

impl ConfigError {
    pub(crate) fn new(
        field: &'static str,
        value: impl ToString,
        reason: &'static str,
    ) -> ConfigError {
        ConfigError {
            field,
            value: value.to_string(),
            reason,
        }
    }

    /// The field that was refused, e.g. `"jitter"`.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The refused value, as written.
    pub fn value(&self) -> &str {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_defaults_match_adr_019() {
        let http = RetryConfig::for_layer(Layer::Http);
        assert_eq!(
            (
                http.max_attempts,
                http.initial_backoff,
                http.max_backoff,
                http.multiplier,
                http.jitter
            ),
            (3, ms(250), ms(4000), 4.0, 0.5)
        );
        assert_eq!(http.retry_on, CategorySet::TRANSIENT);
        assert_eq!(http.max_retry_after, ms(30_000));

        let provider = RetryConfig::for_layer(Layer::Provider);
        assert_eq!(
            (
                provider.max_attempts,
                provider.initial_backoff,
                provider.max_backoff
            ),
            (3, ms(1000), ms(16_000))
        );
        assert_eq!(provider.retry_on, CategorySet::RETRYABLE);
        assert_eq!(provider.max_retry_after, ms(60_000));

        for layer in [Layer::Tool, Layer::Task] {
            let cfg = RetryConfig::for_layer(layer);
            assert_eq!(cfg.max_attempts, 1);
            assert!(!cfg.retries(ErrorCategory::Transient));
        }
    }

    #[test]
    fn setters_refuse_out_of_range_values_naming_the_field() {
        let cfg = RetryConfig::for_layer(Layer::Http);
        let cases = [
            (cfg.clone().with_max_attempts(0), "max_attempts", "0"),
            (cfg.clone().with_max_attempts(11), "max_attempts", "11"),
            (cfg.clone().with_jitter(-0.1), "jitter", "-0.1"),
            (cfg.clone().with_jitter(f32::NAN), "jitter", "NaN"),
            (cfg.clone().with_multiplier(0.5), "multiplier", "0.5"),
            (
                cfg.clone().with_multiplier(f64::INFINITY),
                "multiplier",
                "inf",
            ),
            (
                cfg.clone().with_initial_backoff(ms(5000)),
                "initial_backoff",
                "5s",
            ),
            (
                cfg.clone().with_max_backoff(ms(100)),
                "max_backoff",
                "100ms",
            ),
            (
                cfg.clone().with_retry_on([ErrorCategory::Permanent]),
                "retry_on",
                "permanent",
            ),
        ];
        for (result, field, value) in cases {
            let err = result.expect_err(field);
            assert_eq!((err.field(), err.value()), (field, value));
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid {field} `{value}`"))
            );
        }
    }

    #[test]
    fn setters_accept_the_edges() {
        let cfg = RetryConfig::for_layer(Layer::Http)
            .with_max_attempts(10)
            .and_then(|c| c.with_jitter(1.0))
            .and_then(|c| c.with_multiplier(1.0))
            .and_then(|c| c.with_max_backoff(ms(250)))
            .and_then(|c| c.with_initial_backoff(ms(250)))
            .and_then(|c| c.with_retry_on([]))
            .expect("edges are valid");
        assert_eq!(cfg.max_attempts, 10);
        assert!(cfg.retry_on.is_empty());
        assert!(!cfg.retries(ErrorCategory::Transient));
    }

    #[test]
    fn attempts_set_by_hand_are_clamped() {
        let mut cfg = RetryConfig::for_layer(Layer::Http);
        cfg.max_attempts = 0;
        assert_eq!(cfg.effective_attempts(), 1);
        cfg.max_attempts = u32::MAX;
        assert_eq!(cfg.effective_attempts(), 10);
    }

    #[test]
    fn retry_on_refusals_name_the_category() {
        let cfg = RetryConfig::for_layer(Layer::Provider);
        let refusal = |c| cfg.clone().with_retry_on([c]).unwrap_err().to_string();
        assert_eq!(
            refusal(ErrorCategory::Auth),
            "invalid retry_on `auth`: auth errors are never retryable"
        );
        assert_eq!(
            refusal(ErrorCategory::NotFound),
            "invalid retry_on `not_found`: not_found errors are never retryable"
        );
        assert_eq!(
            refusal(ErrorCategory::Permanent),
            "invalid retry_on `permanent`: permanent errors are never retryable"
        );
    }

    #[test]
    fn retries_needs_a_second_attempt_and_a_retried_category() {
        let provider = RetryConfig::for_layer(Layer::Provider);
        assert!(provider.retries(ErrorCategory::Transient));
        assert!(provider.retries(ErrorCategory::RateLimited));
        assert!(!provider.retries(ErrorCategory::Auth));
        let http = RetryConfig::for_layer(Layer::Http);
        assert!(!http.retries(ErrorCategory::RateLimited));
        let once = provider.with_max_attempts(1).unwrap();
        assert!(!once.retries(ErrorCategory::Transient));
    }
}
