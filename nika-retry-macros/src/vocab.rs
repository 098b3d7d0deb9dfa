//! The words the macros share with the runtime crate: its layers and
//! categories, the keys each attribute takes (with the example its messages
//! show), and the runtime values the macros check literals against.
//!
//! A layer or a category writes itself as the variant name of the runtime's
//! enum (`Http`, `RateLimited`), so the expansion says
//! `#krate::Layer::#layer`.

use std::time::Duration;

use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, TokenStreamExt};

// ---- What the runtime crate holds, mirrored. `tests/ui/pass/runtime_mirrors.rs`
// compiles a fn at each of these values and asserts the runtime's beside them;
// the fail cases `attempts_above_ten`, `backoff_above_default_max_*` and
// `max_backoff_below_default_backoff_*` pin the other side of each boundary.

/// `nika_retry::MAX_ATTEMPTS`.
pub(crate) const MAX_ATTEMPTS: u64 = 10;
/// `initial_backoff` and `max_backoff` of `RetryConfig::for_layer(Layer::Http)`.
const HTTP_BACKOFFS: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(4));
/// The same for the other layers.
const OTHER_BACKOFFS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(16));
/// The `connect` limit of a bare `#[timeout]` on an `http` fn (ADR-019, docs/layers.md).
pub(crate) const HTTP_CONNECT: Duration = Duration::from_secs(10);
/// The `read` limit of a bare `#[timeout]` on an `http` fn.
pub(crate) const HTTP_READ: Duration = Duration::from_secs(120);

/// A layer of ADR-019 (docs/layers.md): `nika_retry::Layer`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Layer {
    Http,
    Provider,
    Tool,
    Task,
}

impl Layer {
    const ALL: [Layer; 4] = [Layer::Http, Layer::Provider, Layer::Tool, Layer::Task];
    /// The names `layer = "…"` takes, in the runtime's order.
    pub(crate) const NAMES: [&'static str; 4] = ["http", "provider", "tool", "task"];

    pub(crate) fn from_name(name: &str) -> Option<Layer> {
        Layer::ALL.into_iter().find(|layer| layer.name() == name)
    }

    pub(crate) fn name(self) -> &'static str {
        Layer::NAMES[self as usize]
    }

    /// `(initial_backoff, max_backoff)` of `RetryConfig::for_layer(self)`.
    pub(crate) fn default_backoffs(self) -> (Duration, Duration) {
        match self {
            Layer::Http => HTTP_BACKOFFS,
            Layer::Provider | Layer::Tool | Layer::Task => OTHER_BACKOFFS,
        }
    }

    fn variant(self) -> &'static str {
        ["Http", "Provider", "Tool", "Task"][self as usize]
    }
}

impl ToTokens for Layer {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.append(Ident::new(self.variant(), Span::call_site()));
    }
}

/// A category of `nika_retry::ErrorCategory`, as `#[category(…)]` names it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Category {
    Transient,
    RateLimited,
    Auth,
    NotFound,
    Permanent,
}

impl Category {
    const ALL: [Category; 5] = [
        Category::Transient,
        Category::RateLimited,
        Category::Auth,
        Category::NotFound,
        Category::Permanent,
    ];
    /// The snake-case names, in the runtime's declaration order.
    pub(crate) const NAMES: [&'static str; 5] = [
        "transient",
        "rate_limited",
        "auth",
        "not_found",
        "permanent",
    ];

    pub(crate) fn from_name(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == name)
    }

    pub(crate) fn name(self) -> &'static str {
        Category::NAMES[self as usize]
    }

    /// The category `on = [...]` may name, if this is one.
    pub(crate) fn retryable(self) -> Option<Retryable> {
        match self {
            Category::Transient => Some(Retryable::Transient),
            Category::RateLimited => Some(Retryable::RateLimited),
            Category::Auth | Category::NotFound | Category::Permanent => None,
        }
    }

    fn variant(self) -> &'static str {
        ["Transient", "RateLimited", "Auth", "NotFound", "Permanent"][self as usize]
    }
}

impl ToTokens for Category {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.append(Ident::new(self.variant(), Span::call_site()));
    }
}

/// A category that `#[retry(on = [...])]` may name: the retryable ones.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Retryable {
    Transient,
    RateLimited,
}

impl From<Retryable> for Category {
    fn from(r: Retryable) -> Category {
        match r {
            Retryable::Transient => Category::Transient,
            Retryable::RateLimited => Category::RateLimited,
        }
    }
}

impl ToTokens for Retryable {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        Category::from(*self).to_tokens(tokens);
    }
}

/// What a failed attempt reached, as `#[category(reached = …)]` names it:
/// `nika_retry::Reached`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Reach {
    No,
    Refused,
    Maybe,
}

impl Reach {
    const ALL: [Reach; 3] = [Reach::No, Reach::Refused, Reach::Maybe];
    /// The names `reached = …` takes, in the runtime's order.
    pub(crate) const NAMES: [&'static str; 3] = ["no", "refused", "maybe"];

    pub(crate) fn from_name(name: &str) -> Option<Reach> {
        Reach::ALL
            .into_iter()
            .find(|r| Reach::NAMES[*r as usize] == name)
    }
}

impl ToTokens for Reach {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let variant = ["No", "Refused", "Maybe"][*self as usize];
        tokens.append(Ident::new(variant, Span::call_site()));
    }
}

/// A key of `#[retry]` or `#[timeout]`, with the example its messages show.
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) example: &'static str,
}

const fn key(name: &'static str, example: &'static str) -> Key {
    Key { name, example }
}

/// The keys of `#[retry(...)]`.
pub(crate) const RETRY_KEYS: [Key; 13] = [
    key("layer", "layer = \"provider\""),
    key("attempts", "attempts = 3"),
    key("backoff", "backoff = \"250ms\""),
    key("max_backoff", "max_backoff = \"4s\""),
    key("multiplier", "multiplier = 4.0"),
    key("jitter", "jitter = 0.5"),
    key("on", "on = [transient, rate_limited]"),
    key("config", "config = self.retry.clone()"),
    key("clone", "clone(arg)"),
    key("upstream", "upstream = self.upstream"),
    key("cost", "cost = request.tokens"),
    key("idempotent", "idempotent = false"),
    key("crate", "crate = \"nika_retry\""),
];

/// The keys of `#[timeout(...)]`.
pub(crate) const TIMEOUT_KEYS: [Key; 6] = [
    key("connect", "connect = \"10s\""),
    key("read", "read = \"120s\""),
    key("attempt", "attempt = \"30s\""),
    key("total", "total = \"5m\""),
    key("layer", "layer = \"task\""),
    key("crate", "crate = \"nika_retry\""),
];

/// The names of `keys`, for "unknown key" messages.
pub(crate) fn names(keys: &[Key]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

/// The example of the key `name` among `keys`.
pub(crate) fn example(keys: &[Key], name: &str) -> Option<&'static str> {
    keys.iter().find(|k| k.name == name).map(|k| k.example)
}

/// The keys of `#[category(...)]`: the categories, then the other keys.
pub(crate) const CATEGORY_KEYS: [&str; 13] = [
    "transient",
    "rate_limited",
    "auth",
    "not_found",
    "permanent",
    "transparent",
    "http_status",
    "from",
    "retry_after",
    "retry_after_ms",
    "reached",
    "default",
    "crate",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for layer in Layer::ALL {
            assert_eq!(Layer::from_name(layer.name()), Some(layer));
        }
        for c in Category::ALL {
            assert_eq!(Category::from_name(c.name()), Some(c));
            assert!(CATEGORY_KEYS.contains(&c.name()));
        }
        assert_eq!(Layer::from_name("database"), None);
        for name in Reach::NAMES {
            let reach = Reach::from_name(name).unwrap();
            assert_eq!(Reach::NAMES[reach as usize], name);
        }
        let reaches = Reach::ALL;
        assert_eq!(quote::quote!(#(#reaches)*).to_string(), "No Refused Maybe");
        let (layers, categories) = (Layer::ALL, Category::ALL);
        assert_eq!(
            quote::quote!(#(#layers)*).to_string(),
            "Http Provider Tool Task"
        );
        assert_eq!(
            quote::quote!(#(#categories)*).to_string(),
            "Transient RateLimited Auth NotFound Permanent"
        );
    }

    /// An example shows the key it is the example of, never another.
    #[test]
    fn each_key_has_its_own_example() {
        for key in RETRY_KEYS.iter().chain(&TIMEOUT_KEYS) {
            let rest = key.example.strip_prefix(key.name).unwrap_or_default();
            assert!(
                rest.starts_with(" = ") || rest.starts_with('('),
                "{}: {}",
                key.name,
                key.example
            );
        }
    }
}
