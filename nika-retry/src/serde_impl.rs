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

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::{CategorySet, ConfigError, ErrorCategory, Growth, Layer, RetryConfig};

/// The `retry:` block as written.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RetryBlock {
    max_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backoff: Option<Backoff>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jitter: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_on: Option<Vec<Category>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_retry_after_ms: Option<u64>,
}

/// `backoff:` — a named growth or a multiplier.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Backoff {
    Constant,
    Linear,
    Exponential,
    Multiplier(f64),
}

/// A category in `retry_on:`, by its snake-case name.
struct Category(ErrorCategory);

impl<'de> Deserialize<'de> for Category {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map(Category).map_err(de::Error::custom)
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

impl<'de> Deserialize<'de> for RetryConfig {
    /// From the workflow YAML `retry: { max_attempts, delay_ms, backoff }` block.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let block = RetryBlock::deserialize(d)?;
        RetryConfig::try_from(block).map_err(de::Error::custom)
    }
}

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
    let budget = u32::deserialize(d)?;
    if budget == 0 {
        return Err(de::Error::custom(
            "invalid budget `0`: must be at least 1 (it counts the first attempt)",
        ));
    }
    Ok(Some(budget))
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
