//! [`Layer`]: the architectural layers of ADR-019 (the nika engine's decision
//! that each layer owns the retries and time limits of its own failure mode),
//! each owning its retry policy.

use core::fmt;
use core::str::FromStr;

/// The layer that owns a retry loop (ADR-019; `docs/layers.md` says what it decides).
///
/// | layer | owner | retries by default |
/// |---|---|---|
/// | [`Http`](Layer::Http) (L1) | the HTTP transport | connect / DNS / TLS failures, 503 |
/// | [`Provider`](Layer::Provider) (L2) | the verb crates calling LLM APIs | 5xx and 429 |
/// | [`Tool`](Layer::Tool) (L2) | the tool executor | nothing: tool failures are semantic |
/// | [`Task`](Layer::Task) (L2) | the task runtime | what the task's `retry:` block says |
///
/// ```
/// use nika_retry::Layer;
///
/// assert_eq!(Layer::Provider.to_string(), "provider");
/// assert_eq!("http".parse(), Ok(Layer::Http));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// L1: the HTTP transport (`nika-http`).
    Http,
    /// L2: provider calls from the verb crates.
    Provider,
    /// L2: tool execution. Never retried unless a task opts in.
    Tool,
    /// L2: a workflow task as the runtime runs it.
    Task,
}

impl Layer {
    /// Every layer, from the lowest up.
    pub const ALL: [Layer; 4] = [Layer::Http, Layer::Provider, Layer::Tool, Layer::Task];

    /// The lowercase name, as `Display` writes it and `#[retry(layer = "…")]` spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Layer::Http => "http",
            Layer::Provider => "provider",
            Layer::Tool => "tool",
            Layer::Task => "task",
        }
    }

    /// Whether a retry loop of this layer may start inside an attempt of a
    /// loop of `outer` without breaking the stratification (ADR-006): only
    /// a lower layer inside a higher one, or `provider` and `tool` inside
    /// each other (an LLM used as a tool). The same layer nested multiplies
    /// its attempts; a higher one inside a lower one turns the layers
    /// upside down. The order, low to high: `http` < `provider` = `tool` < `task`.
    ///
    /// ```
    /// use nika_retry::Layer::*;
    ///
    /// assert!(Http.may_nest_in(Provider));
    /// assert!(Provider.may_nest_in(Tool), "an LLM used as a tool");
    /// assert!(Tool.may_nest_in(Task));
    /// assert!(!Http.may_nest_in(Http));
    /// assert!(!Provider.may_nest_in(Http));
    /// ```
    pub const fn may_nest_in(self, outer: Layer) -> bool {
        self as u8 != outer as u8 && self.rank() <= outer.rank()
    }

    /// `http` < `provider` = `tool` < `task`.
    const fn rank(self) -> u8 {
        match self {
            Layer::Http => 0,
            Layer::Provider | Layer::Tool => 1,
            Layer::Task => 2,
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The error of parsing a [`Layer`] from a string that names none.
///
/// The refused text is `.0`. `#[non_exhaustive]`: the crate's rule for
/// public structs (only the crate builds one).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown layer `{0}`; expected one of http, provider, tool, task")]
pub struct ParseLayerError(pub String);

impl FromStr for Layer {
    type Err = ParseLayerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Layer::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| ParseLayerError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_from_str_round_trip_every_layer() {
        for l in Layer::ALL {
            assert_eq!(l.to_string().parse::<Layer>(), Ok(l));
        }
        assert_eq!(format!("{:<6}|", Layer::Http), "http  |", "Display pads");
        assert_eq!(
            "Http".parse::<Layer>(),
            Err(ParseLayerError("Http".to_owned()))
        );
    }
}
