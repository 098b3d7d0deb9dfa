//! [`TaskPolicy`]: what a workflow task says about retries and time, as
//! data (`task` puts it in force; the ambient state stores it).

use crate::vocab::bucket::TokenBucket;
use crate::vocab::config::RetryConfig;
use crate::vocab::layer::Layer;
use core::time::Duration;

/// What a workflow task says about retries and time.
///
/// Deserialises (feature `serde`) from the task's YAML mapping, reading its
/// optional `retry:`, `timeout:` and `budget:` keys and ignoring the task's
/// other keys (so it can be `#[serde(flatten)]`ed into a task type, though
/// flattening loses a bad value's key path and position in the error: parse
/// `TaskPolicy` on its own from the same text to keep them); the `retry:`
/// block itself rejects unknown keys:
///
/// ```yaml
/// retry: { max_attempts: 3, delay_ms: 500, backoff: exponential }
/// timeout: 30s
/// ```
///
/// Every key is described in the workflow YAML reference
/// (`docs/workflow-yaml.md`); feature `schema` generates its JSON Schema
/// (`nika_retry::schema::task_policy()`).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(
    feature = "schema",
    derive(schemars::JsonSchema),
    schemars(
        description = "A workflow task's retry:, timeout: and budget: keys (docs/workflow-yaml.md); the task's other keys are not checked here."
    )
)]
pub struct TaskPolicy {
    /// The task's `retry:` block: replaces the provider, tool and task layers' policies.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(
            description = "The task's retry policy, for the provider, tool and task layers (never http): max_attempts, delay_ms, backoff, jitter, max_delay_ms, retry_on, max_retry_after_ms."
        )
    )]
    pub retry: Option<RetryConfig>,
    /// The task's `timeout:`: bounds the whole scope.
    #[cfg_attr(
        feature = "serde",
        serde(
            default,
            with = "crate::serde_impl::opt_duration",
            skip_serializing_if = "Option::is_none"
        )
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(
            schema_with = "crate::schema_impl::timeout",
            description = "How long the whole task may take, retries and sleeps included, at every layer: a duration with a unit, such as 30s, 2m or 1h 30m."
        )
    )]
    pub timeout: Option<Duration>,
    /// Attempts the nested retry loops of one outermost call may make in
    /// all, which always holds; `None`, the default, allows
    /// [`DEFAULT_BUDGET`](crate::task::DEFAULT_BUDGET) (9), or the `max_attempts` of a loop that allows
    /// more by itself (a lone `attempts = 10` makes 10 attempts).
    #[cfg_attr(
        feature = "serde",
        serde(
            default,
            deserialize_with = "crate::serde_impl::budget",
            skip_serializing_if = "Option::is_none"
        )
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(
            schema_with = "crate::schema_impl::budget",
            description = "Attempts the nested retry loops of one outermost call may make in all, every layer counted, http included; a budget set here always holds. Without it: 9, raised to a loop's own max_attempts."
        )
    )]
    pub budget: Option<u32>,
    #[cfg_attr(feature = "serde", serde(skip))]
    buckets: [Option<TokenBucket>; Layer::ALL.len()],
}

impl Default for TaskPolicy {
    fn default() -> Self {
        TaskPolicy::new()
    }
}

impl TaskPolicy {
    /// No `retry:`, no `timeout:`, the default budget.
    pub const fn new() -> TaskPolicy {
        TaskPolicy {
            retry: None,
            timeout: None,
            budget: None,
            buckets: [const { None }; Layer::ALL.len()],
        }
    }

    /// Sets the task's `retry:` policy.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryConfig) -> TaskPolicy {
        self.retry = Some(retry);
        self
    }

    /// Sets the task's `timeout:`.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> TaskPolicy {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the attempt budget of the nested retry loops (at least 1): the
    /// attempts of one outermost call in all, whatever the loops allow.
    #[must_use]
    pub fn with_budget(mut self, budget: u32) -> TaskPolicy {
        self.budget = Some(budget.max(1));
        self
    }

    /// Shares `bucket` among every call of `layer` in the scope.
    #[must_use]
    pub fn with_token_bucket(mut self, layer: Layer, bucket: TokenBucket) -> TaskPolicy {
        self.buckets[layer as usize] = Some(bucket);
        self
    }

    /// The token bucket of `layer`, if one is set.
    pub fn token_bucket(&self, layer: Layer) -> Option<&TokenBucket> {
        self.buckets[layer as usize].as_ref()
    }
}
