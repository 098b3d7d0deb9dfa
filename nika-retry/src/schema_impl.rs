//! The JSON Schemas (feature `schema`) of the types and fields a task's keys
//! are read into: the `retry:` block's, and the `timeout:` and `budget:`
//! fields of a task policy. Beside `serde_impl`, which reads them; the
//! [`schema`](crate::schema) module puts them together.

use std::borrow::Cow;

use crate::serde_impl::{Backoff, Category, RetryBlock};
use crate::vocab::config::RetryConfig;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

#[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
impl JsonSchema for RetryConfig {
    fn schema_name() -> Cow<'static, str> {
        "RetryConfig".into()
    }

    /// As the `retry:` block it reads from.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        RetryBlock::json_schema(generator)
    }
}

impl JsonSchema for Backoff {
    fn schema_name() -> Cow<'static, str> {
        "Backoff".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                { "enum": ["constant", "linear", "exponential"] },
                { "type": "number", "minimum": 1.0 }
            ]
        })
    }
}

impl JsonSchema for Category {
    fn schema_name() -> Cow<'static, str> {
        "RetryOn".into()
    }

    /// Only the categories that may be retried: the others are refused.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "enum": ["transient", "rate_limited"] })
    }
}

/// `timeout:`: a duration with a unit, above zero, as humantime reads it (or null).
pub(crate) fn timeout(_: &mut SchemaGenerator) -> Schema {
    const UNIT: &str = "nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|\
        minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|\
        months|month|M|years|year|yrs|yr|y";
    // Whole or decimal numbers, each with a unit; some digit not zero.
    let pattern = format!(r"^(?=.*[1-9])\s*(?:\d+(?:\.\d+)?\s*(?:{UNIT})\s*)+$");
    json_schema!({
        "type": ["string", "null"],
        "pattern": pattern
    })
}

/// `budget:`: a whole number of attempts, at least 1. Left out, it is 9,
/// raised to a loop's own attempts (the field is `None` then).
pub(crate) fn budget(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "integer",
        "format": "uint32",
        "minimum": 1,
        "default": crate::vocab::config::DEFAULT_BUDGET
    })
}
