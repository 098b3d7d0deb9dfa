//! Checks the attributes against the fn and the layer rules of ADR-019, and
//! turns them into a [`Plan`] that expansion cannot fail on. Every mistake is
//! reported, each at the token the user wrote.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use syn::{Attribute, Expr, Ident, ItemFn, Meta, ReturnType, Type};

mod keys;
mod retry;
mod timeout;

use self::retry::retry_settings;
use self::timeout::timeout_plan;
use super::item::{self, Body, Kind};
use super::parse::Args;
use crate::errors::Errors;

const LAYERS: [&str; 4] = ["http", "provider", "tool", "task"];
const RETRY_KEYS: [&str; 9] = [
    "layer",
    "attempts",
    "backoff",
    "max_backoff",
    "multiplier",
    "jitter",
    "on",
    "config",
    "clone",
];
const TIMEOUT_KEYS: [&str; 5] = ["connect", "read", "attempt", "total", "layer"];
/// Mirrors `nika_retry::MAX_ATTEMPTS`.
const MAX_ATTEMPTS: u64 = 10;

/// A layer of ADR-019, as far as the macro needs to know it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Layer {
    Http,
    Provider,
    Tool,
    Task,
}

impl Layer {
    fn from_name(name: &str) -> Option<Layer> {
        Some(match name {
            "http" => Layer::Http,
            "provider" => Layer::Provider,
            "tool" => Layer::Tool,
            "task" => Layer::Task,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        LAYERS[self as usize]
    }

    /// `(initial_backoff, max_backoff)` of `RetryConfig::for_layer`; the UI tests
    /// `backoff_above_default_max*` pin that the two stay in step.
    fn default_backoffs(self) -> (Duration, Duration) {
        match self {
            Layer::Http => (Duration::from_millis(250), Duration::from_secs(4)),
            _ => (Duration::from_secs(1), Duration::from_secs(16)),
        }
    }
}

/// A category that `on = [...]` may name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Category {
    Transient,
    RateLimited,
}

/// A time limit: a literal checked here, or an expression evaluated per call.
pub(crate) enum Limit {
    Literal(Duration),
    Expr(Expr),
}

/// The validated `#[timeout]`.
#[derive(Default)]
pub(crate) struct Timeouts {
    pub(crate) connect: Option<Limit>,
    pub(crate) read: Option<Limit>,
    pub(crate) attempt: Option<Limit>,
    pub(crate) total: Option<Limit>,
}

/// The validated `#[retry(...)]` keys.
pub(crate) struct Settings {
    pub(crate) layer: Layer,
    pub(crate) attempts: Option<u32>,
    pub(crate) backoff: Option<Duration>,
    pub(crate) max_backoff: Option<Duration>,
    pub(crate) multiplier: Option<f64>,
    pub(crate) jitter: Option<f32>,
    pub(crate) on: Option<Vec<Category>>,
    pub(crate) config: Option<Expr>,
    /// Arguments cloned per attempt, with whether they were `mut`.
    pub(crate) clones: Vec<(Ident, bool)>,
}

impl Settings {
    /// The settings of a fn without `#[retry]`: its layer, no overrides.
    fn layer_only(layer: Layer) -> Settings {
        Settings {
            layer,
            attempts: None,
            backoff: None,
            max_backoff: None,
            multiplier: None,
            jitter: None,
            on: None,
            config: None,
            clones: Vec::new(),
        }
    }
}

/// The validated `#[retry]` and `#[timeout]` of one fn.
pub(crate) struct Plan {
    /// The fn, without its nika-retry attributes.
    pub(crate) item: ItemFn,
    pub(crate) body: Body,
    /// The attempt's output type, with `impl Trait` erased.
    pub(crate) output: Type,
    pub(crate) settings: Settings,
    /// `None` without `#[timeout]`.
    pub(crate) timeouts: Option<Timeouts>,
    /// `#[timeout]` without `#[retry]`: one run, no loop.
    pub(crate) alone: bool,
    /// The paths of the sibling attributes absorbed, so their imports count as used.
    pub(crate) absorbed: Vec<syn::Path>,
}

/// One attribute as written: a span to point at, and its arguments.
struct Written {
    span: TokenStream,
    args: Args,
}

/// Builds the plan of `item`, annotated with `own` (the attribute being
/// expanded, with its arguments) and any sibling nika-retry attributes.
pub(crate) fn plan(own: (Kind, TokenStream), mut item: ItemFn) -> syn::Result<Plan> {
    let mut errors = Errors::default();
    let mut written: Vec<(Kind, Written)> = Vec::new();
    if let Some(args) = errors.take(syn::parse2(own.1)) {
        let name = Ident::new(own.0.name(), Span::call_site());
        written.push((
            own.0,
            Written {
                span: quote::quote!(#name),
                args,
            },
        ));
    }
    let siblings = item::take_sibling_attrs(&mut item);
    let absorbed = siblings
        .iter()
        .map(|(_, attr)| attr.path().clone())
        .collect();
    for (kind, attr) in siblings {
        if let Some(args) = errors.take(sibling_args(&attr)) {
            written.push((
                kind,
                Written {
                    span: quote::quote!(#attr),
                    args,
                },
            ));
        }
    }

    let (mut retry, mut timeout) = (None, None);
    for (kind, attr) in written {
        let slot = match kind {
            Kind::Retry => &mut retry,
            Kind::Timeout => &mut timeout,
        };
        if slot.is_some() {
            let name = kind.name();
            errors.spanned(
                &attr.span,
                format!(
                    "#[{name}] appears twice on this fn; merge the two into one #[{name}(...)]"
                ),
            );
        } else {
            *slot = Some(attr);
        }
    }

    let fn_shape = check_fn(&mut errors, &item);
    let (settings, timeouts, alone) = match (retry, timeout) {
        (Some(retry), timeout) => {
            let settings = retry_settings(&mut errors, retry, &item);
            let timeouts = match (&settings, timeout) {
                (Some(s), Some(t)) => timeout_plan(&mut errors, t, Some(s.layer)).map(|(_, t)| t),
                _ => None,
            };
            (settings, timeouts, false)
        }
        (None, Some(timeout)) => match timeout_plan(&mut errors, timeout, None) {
            Some((layer, timeouts)) => (Some(Settings::layer_only(layer)), Some(timeouts), true),
            None => (None, None, true),
        },
        (None, None) => (None, None, false),
    };
    match (settings, fn_shape) {
        (Some(settings), Some((body, output))) if errors.is_empty() => Ok(Plan {
            item,
            body,
            output,
            settings,
            timeouts,
            alone,
            absorbed,
        }),
        _ => Err(errors
            .finish(())
            .err()
            .unwrap_or_else(|| syn::Error::new(Span::call_site(), "invalid #[retry]"))),
    }
}

fn sibling_args(attr: &Attribute) -> syn::Result<Args> {
    match &attr.meta {
        Meta::Path(_) => Ok(Args(vec![])),
        Meta::List(list) => syn::parse2(list.tokens.clone()),
        Meta::NameValue(nv) => Err(syn::Error::new_spanned(
            nv,
            "write the arguments in parentheses, e.g. #[timeout(read = \"120s\")]",
        )),
    }
}

/// Checks that the fn is async (or an `#[async_trait]` method) and returns
/// something, and finds the attempt's output type.
fn check_fn(errors: &mut Errors, item: &ItemFn) -> Option<(Body, Type)> {
    let is_async = item.sig.asyncness.is_some();
    let async_trait = if is_async {
        None
    } else {
        item::async_trait_body(item)
    };
    if !is_async && async_trait.is_none() {
        errors.spanned(
            item.sig.fn_token,
            "#[retry] works on `async fn` only; write `async fn` (it also works inside #[async_trait] impls)",
        );
        return None;
    }
    let ReturnType::Type(_, ret) = &item.sig.output else {
        errors.spanned(
            &item.sig.ident,
            "#[retry] needs a fn that returns `Result<T, E>`; this one returns `()`",
        );
        return None;
    };
    match async_trait {
        Some(body) => {
            let output = match &body {
                Body::AsyncTrait { output, .. } => item::erase_impl_trait(output),
                Body::Async => item::erase_impl_trait(ret),
            };
            Some((body, output))
        }
        None => Some((Body::Async, item::erase_impl_trait(ret))),
    }
}
