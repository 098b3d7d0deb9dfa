//! Serde for the workflow YAML: the legacy task `retry:` block and `timeout:`.
//!
//! ```yaml
//! retry: { max_attempts: 3, delay_ms: 500, backoff: exponential }
//! timeout: 30s
//! ```
//!
//! `backoff` is `constant`, `linear`, `exponential` (×2) or a number (the
//! multiplier). Beyond the legacy keys, `jitter`, `max_delay_ms`, `retry_on`
//! and `max_retry_after_ms` may be given. Every refusal names the key and the
//! value.

use core::fmt;
use core::time::Duration;

use crate::vocab::category::{CategorySet, ErrorCategory};
use crate::vocab::config::{ConfigError, Growth, RetryConfig};
use crate::vocab::layer::Layer;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The `retry:` block as written. Each key is checked as it is read, so a
/// refusal carries the YAML path and position (`retry.jitter: … at line 3`).
///
/// Its doc comments are the JSON Schema's descriptions (feature `schema`):
/// what an editor shows on hover.
#[derive(Deserialize, Serialize)]
#[cfg_attr(
    feature = "schema",
    derive(schemars::JsonSchema),
    schemars(
        description = "The task's retry policy: replaces the provider layer's and turns the tool and task layers' retries on; never reaches the http layer."
    )
)]
#[serde(
    deny_unknown_fields,
    expecting = "a retry: mapping such as { max_attempts: 3, delay_ms: 500 }"
)]
pub(crate) struct RetryBlock {
    /// Attempts in all, counting the first: 3 tries once and retries at most twice.
    #[serde(deserialize_with = "max_attempts")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 10)))]
    max_attempts: u32,
    /// The backoff before the second attempt, in milliseconds (default 1000).
    #[serde(
        default,
        deserialize_with = "millis::delay_ms",
        skip_serializing_if = "Option::is_none"
    )]
    delay_ms: Option<u64>,
    /// How the backoff grows: constant, linear, exponential (×2, the default) or a multiplier of at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backoff: Option<Backoff>,
    /// The fraction of each backoff drawn at random (default 0.5): a delay falls in [backoff·(1−jitter), backoff].
    #[serde(
        default,
        deserialize_with = "jitter",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0, max = 1.0)))]
    jitter: Option<f32>,
    /// The cap on each backoff, jitter included, in milliseconds (default 16000, or delay_ms if larger).
    #[serde(
        default,
        deserialize_with = "millis::max_delay_ms",
        skip_serializing_if = "Option::is_none"
    )]
    max_delay_ms: Option<u64>,
    /// The failures retried (default both): transient (connection errors, timeouts, 5xx), rate_limited (429).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_on: Option<Vec<Category>>,
    /// The longest server hint (Retry-After) waited on, in milliseconds (default 60000); a longer one gives up at once.
    #[serde(
        default,
        deserialize_with = "millis::max_retry_after_ms",
        skip_serializing_if = "Option::is_none"
    )]
    max_retry_after_ms: Option<u64>,
}

/// `backoff:` — a named growth or a multiplier.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Backoff {
    Constant,
    Linear,
    Exponential,
    Multiplier(f64),
}

/// A category in `retry_on:`, by its snake-case name: `transient` or `rate_limited`.
pub(crate) struct Category(ErrorCategory);

/// The refusal of `value` for `key`, worded as the `RetryConfig` setters word theirs.
fn invalid<E: de::Error>(key: &'static str, value: impl fmt::Display, rule: &'static str) -> E {
    E::custom(ConfigError::new(key, value, rule))
}

/// A number read for `key`: checked against `range` inside the visitor.
struct Number {
    key: &'static str,
    /// What the key holds, for a value of the wrong type.
    expected: &'static str,
    /// Why an in-type value out of range is refused.
    rule: &'static str,
    range: core::ops::RangeInclusive<f64>,
    whole: bool,
}

/// A number as read: exact when it was an integer, and as an `f64`.
type Read = Option<(u64, f64)>;

impl<'de> Visitor<'de> for Number {
    type Value = Read;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expected)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if self.whole && v.fract() != 0.0 {
            return Err(invalid(self.key, v, self.expected));
        }
        if self.range.contains(&v) {
            // `as` saturates; a whole number in range keeps its value.
            Ok(Some((v as u64, v)))
        } else {
            Err(invalid(self.key, v, self.rule))
        }
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        if self.range.contains(&(v as f64)) {
            Ok(Some((v, v as f64)))
        } else {
            Err(invalid(self.key, v, self.rule))
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(invalid(self.key, v, self.rule)),
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Err(invalid(self.key, v, self.expected))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Err(invalid(self.key, v, self.expected))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(invalid(self.key, "[…]", self.expected))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(invalid(self.key, "{…}", self.expected))
    }
}

/// A whole number of `key` (`null` reads as absent).
fn whole<'de, D: Deserializer<'de>>(
    d: D,
    key: &'static str,
    range: core::ops::RangeInclusive<u64>,
    expected: &'static str,
    rule: &'static str,
) -> Result<Option<u64>, D::Error> {
    let visitor = Number {
        key,
        expected,
        rule,
        range: *range.start() as f64..=*range.end() as f64,
        whole: true,
    };
    Ok(d.deserialize_any(visitor)?.map(|(whole, _)| whole))
}

fn max_attempts<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = whole(
        d,
        "max_attempts",
        1..=u64::from(crate::vocab::config::MAX_ATTEMPTS),
        "expected a whole number from 1 to 10",
        "must be between 1 and 10 (it counts the first attempt)",
    )?;
    let n = n.ok_or_else(|| {
        invalid(
            "max_attempts",
            "null",
            "expected a whole number from 1 to 10",
        )
    })?;
    Ok(n as u32)
}

fn jitter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
    let visitor = Number {
        key: "jitter",
        expected: "expected a number from 0.0 to 1.0",
        rule: "must be between 0.0 and 1.0",
        range: 0.0..=1.0,
        whole: false,
    };
    Ok(d.deserialize_any(visitor)?.map(|(_, v)| v as f32))
}

/// The `…_ms` keys: whole milliseconds, 0 or more.
mod millis {
    use super::*;

    fn read<'de, D: Deserializer<'de>>(d: D, key: &'static str) -> Result<Option<u64>, D::Error> {
        whole(
            d,
            key,
            0..=u64::MAX,
            "expected a whole number of milliseconds, such as 500",
            "must be a whole number of milliseconds, 0 or more",
        )
    }

    pub(super) fn delay_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        read(d, "delay_ms")
    }
    pub(super) fn max_delay_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        read(d, "max_delay_ms")
    }
    pub(super) fn max_retry_after_ms<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<u64>, D::Error> {
        read(d, "max_retry_after_ms")
    }
}

impl<'de> Deserialize<'de> for Category {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CategoryVisitor;
        const EXPECTED: &str = "expected transient or rate_limited";
        impl Visitor<'_> for CategoryVisitor {
            type Value = Category;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Category, E> {
                let category: ErrorCategory =
                    v.parse().map_err(|_| invalid("retry_on", v, EXPECTED))?;
                // auth, not_found and permanent: the setter says why not.
                RetryConfig::for_layer(Layer::Task)
                    .with_retry_on([category])
                    .map_err(E::custom)?;
                Ok(Category(category))
            }
        }
        d.deserialize_str(CategoryVisitor)
    }
}

impl Serialize for Category {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
    }
}

impl<'de> Deserialize<'de> for Backoff {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BackoffVisitor;
        const EXPECTED: &str = "constant, linear, exponential or a multiplier of at least 1";
        impl Visitor<'_> for BackoffVisitor {
            type Value = Backoff;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Backoff, E> {
                match v {
                    "constant" => Ok(Backoff::Constant),
                    "linear" => Ok(Backoff::Linear),
                    "exponential" => Ok(Backoff::Exponential),
                    _ => Err(E::custom(format!(
                        "invalid backoff `{v}`: expected {EXPECTED}"
                    ))),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Backoff, E> {
                if v.is_finite() && v >= 1.0 {
                    Ok(Backoff::Multiplier(v))
                } else {
                    Err(E::custom(format!(
                        "invalid backoff `{v}`: expected {EXPECTED}"
                    )))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Backoff, E> {
                self.visit_f64(v as f64)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Backoff, E> {
                self.visit_f64(v as f64)
            }
        }
        d.deserialize_any(BackoffVisitor)
    }
}

impl Serialize for Backoff {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Backoff::Constant => s.serialize_str("constant"),
            Backoff::Linear => s.serialize_str("linear"),
            Backoff::Exponential => s.serialize_str("exponential"),
            Backoff::Multiplier(m) => s.serialize_f64(*m),
        }
    }
}

impl TryFrom<RetryBlock> for RetryConfig {
    type Error = ConfigError;

    fn try_from(block: RetryBlock) -> Result<RetryConfig, ConfigError> {
        let mut cfg = RetryConfig::for_layer(Layer::Task).with_max_attempts(block.max_attempts)?;
        if let Some(ms) = block.delay_ms {
            cfg.initial_backoff = Duration::from_millis(ms);
        }
        // Without `max_delay_ms`, the default cap rises to fit a long legacy delay.
        cfg.max_backoff = match block.max_delay_ms {
            Some(ms) => Duration::from_millis(ms),
            None => cfg.max_backoff.max(cfg.initial_backoff),
        };
        if cfg.initial_backoff > cfg.max_backoff {
            return Err(ConfigError::new(
                "delay_ms",
                cfg.initial_backoff.as_millis(),
                "must not exceed max_delay_ms",
            ));
        }
        cfg = match block.backoff.unwrap_or(Backoff::Exponential) {
            Backoff::Constant => cfg.with_multiplier(1.0)?,
            Backoff::Linear => cfg.with_growth(Growth::Linear),
            Backoff::Exponential => cfg.with_multiplier(2.0)?,
            Backoff::Multiplier(m) => cfg.with_multiplier(m)?,
        };
        if let Some(jitter) = block.jitter {
            cfg = cfg.with_jitter(jitter)?;
        }
        if let Some(on) = block.retry_on {
            cfg = cfg.with_retry_on(on.into_iter().map(|c| c.0))?;
        }
        if let Some(ms) = block.max_retry_after_ms {
            cfg = cfg.with_max_retry_after(Duration::from_millis(ms))?;
        }
        Ok(cfg)
    }
}

impl From<&RetryConfig> for RetryBlock {
    fn from(cfg: &RetryConfig) -> RetryBlock {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let backoff = match cfg.growth {
            Growth::Linear => Backoff::Linear,
            Growth::Exponential if cfg.multiplier == 1.0 => Backoff::Constant,
            Growth::Exponential if cfg.multiplier == 2.0 => Backoff::Exponential,
            Growth::Exponential => Backoff::Multiplier(cfg.multiplier),
        };
        let default_on = cfg.retry_on == CategorySet::RETRYABLE;
        RetryBlock {
            max_attempts: cfg.max_attempts,
            delay_ms: Some(millis(cfg.initial_backoff)),
            backoff: Some(backoff),
            jitter: Some(cfg.jitter),
            max_delay_ms: Some(millis(cfg.max_backoff)),
            retry_on: (!default_on).then(|| cfg.retry_on.iter().map(Category).collect()),
            max_retry_after_ms: Some(millis(cfg.max_retry_after)),
        }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de> Deserialize<'de> for RetryConfig {
    /// From the workflow YAML `retry: { max_attempts, delay_ms, backoff }` block.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let block = RetryBlock::deserialize(d)?;
        RetryConfig::try_from(block).map_err(de::Error::custom)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for RetryConfig {
    /// As a `retry:` block that deserialises back to the same config.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RetryBlock::from(self).serialize(s)
    }
}

/// Parses a `timeout:` value: a duration with a unit, such as `30s` or `2m`.
pub(crate) fn parse_timeout(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "invalid timeout `{text}`: add a unit, e.g. \"{text}s\" or \"{text}ms\""
        ));
    }
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err(format!("invalid timeout `{text}`: must be positive")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!(
            "invalid timeout `{text}`: {e}; write e.g. \"30s\" or \"2m\""
        )),
    }
}

/// `budget:`: the attempts of one outermost call in all, at least 1.
pub(crate) fn budget<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    const EXPECTED: &str = "expected a whole number of attempts, at least 1";
    let n = whole(
        d,
        "budget",
        1..=u64::from(u32::MAX),
        EXPECTED,
        "must be at least 1 (it counts the first attempt)",
    )?;
    Ok(Some(
        n.ok_or_else(|| invalid("budget", "null", EXPECTED))? as u32
    ))
}

/// `Option<Duration>` as a `timeout:` string.
pub(crate) mod opt_duration {
    use super::*;

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        struct TimeoutVisitor;
        impl Visitor<'_> for TimeoutVisitor {
            type Value = Option<Duration>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration with a unit, such as \"30s\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                parse_timeout(v).map(Some).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Err(E::custom(format!(
                    "invalid timeout `{v}`: add a unit, e.g. \"{v}s\" or \"{v}ms\""
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Err(E::custom(format!(
                    "invalid timeout `{v}`: write a positive duration with a unit, e.g. \"30s\""
                )))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Err(E::custom(format!(
                    "invalid timeout `{v}`: write a duration with a unit, e.g. \"1500ms\""
                )))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
        }
        d.deserialize_any(TimeoutVisitor)
    }

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_need_a_unit() {
        assert_eq!(parse_timeout("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_timeout("2m 30s"), Ok(Duration::from_secs(150)));
        assert!(parse_timeout("30").unwrap_err().contains("add a unit"));
        assert!(parse_timeout("0s").unwrap_err().contains("positive"));
        assert!(
            parse_timeout("soon")
                .unwrap_err()
                .starts_with("invalid timeout `soon`")
        );
    }
}
