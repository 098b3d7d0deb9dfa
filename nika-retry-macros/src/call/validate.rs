//! Checks the attributes against the fn and the layer rules of ADR-019, and
//! turns them into a [`Plan`] that expansion cannot fail on. Every mistake is
//! reported, each at the token the user wrote.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use syn::{Attribute, Expr, ExprLit, Ident, ItemFn, Lit, Meta, ReturnType, Type};

use super::item::{self, Body, Kind};
use super::parse::{Arg, Args, Value};
use crate::duration::parse_duration;
use crate::errors::Errors;
use crate::suggest::CATEGORIES;
use crate::suggest::{did_you_mean, unknown};

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
const TIMEOUT_KEYS: [&str; 4] = ["connect", "read", "attempt", "total"];
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

/// Which key bounds each attempt.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AttemptBoundary {
    Read,
    Attempt,
}

/// The validated `#[timeout]`.
#[derive(Default)]
pub(crate) struct Timeouts {
    pub(crate) connect: Option<Limit>,
    pub(crate) attempt: Option<(Limit, AttemptBoundary)>,
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
    let Some(retry) = retry else {
        if let Some(timeout) = &timeout {
            errors.spanned(
                &timeout.span,
                "#[timeout] needs a #[retry(layer = \"…\")] on the same fn: the layer owns its timeouts \
                 (for a single attempt, write #[retry(layer = \"task\")])",
            );
        }
        return Err(errors.finish(()).err().unwrap_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "#[timeout] needs a #[retry(layer = \"…\")]",
            )
        }));
    };
    let settings = retry_settings(&mut errors, retry, &item);
    let timeouts = match (&settings, timeout) {
        (Some(s), Some(t)) => Some(timeout_plan(&mut errors, t, s.layer)),
        _ => None,
    };
    match (settings, fn_shape) {
        (Some(settings), Some((body, output))) if errors.is_empty() => Ok(Plan {
            item,
            body,
            output,
            settings,
            timeouts,
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

/// Checks every key of `#[retry(...)]`; `None` if the layer is missing or unknown.
fn retry_settings(errors: &mut Errors, retry: Written, item: &ItemFn) -> Option<Settings> {
    let args = known_unique_keys(errors, retry.args, &RETRY_KEYS, "retry");
    let layer = match args.iter().find(|a| a.key == "layer") {
        Some(arg) => value_expr(errors, arg).and_then(|e| parse_layer(errors, e)),
        None => {
            errors.spanned(
                &retry.span,
                "missing `layer`: write #[retry(layer = \"http\" | \"provider\" | \"tool\" | \"task\")]",
            );
            None
        }
    };
    let layer = layer?;
    let mut s = Settings {
        layer,
        attempts: None,
        backoff: None,
        max_backoff: None,
        multiplier: None,
        jitter: None,
        on: None,
        config: None,
        clones: Vec::new(),
    };
    let mut backoff_expr = None;
    for arg in &args {
        let name = arg.key.to_string();
        if layer == Layer::Tool && !matches!(name.as_str(), "layer" | "clone") {
            errors.spanned(
                &arg.key,
                format!(
                    "layer `tool` never retries by itself: tool failures are semantic and retrying them masks bugs (ADR-019); \
                     remove `{name}` and let the task opt in with its `retry:` block (nika_retry::task::scope)"
                ),
            );
            continue;
        }
        if name == "clone" {
            s.clones = clone_list(errors, arg, item);
            continue;
        }
        let Some(expr) = value_expr(errors, arg) else {
            continue;
        };
        match name.as_str() {
            "attempts" => s.attempts = attempts(errors, expr),
            "backoff" => {
                s.backoff = duration(errors, expr);
                backoff_expr = Some(expr);
            }
            "max_backoff" => s.max_backoff = duration(errors, expr),
            "multiplier" => s.multiplier = multiplier(errors, expr),
            "jitter" => s.jitter = jitter(errors, expr),
            "on" => s.on = categories(errors, expr, layer),
            "config" => s.config = Some(expr.clone()),
            _ => {} // `layer`, handled above.
        }
    }
    let (default_initial, default_max) = layer.default_backoffs();
    let initial = s.backoff.unwrap_or(default_initial);
    let max = s.max_backoff.unwrap_or(default_max);
    if initial > max {
        let (initial, max) = (
            humantime::format_duration(initial),
            humantime::format_duration(max),
        );
        let layer = layer.name();
        match (backoff_expr, args.iter().find(|a| a.key == "max_backoff")) {
            (Some(expr), _) => {
                let whose = if s.max_backoff.is_some() {
                    String::new()
                } else {
                    format!(" (the {layer} default)")
                };
                errors.spanned(
                    expr,
                    format!("backoff `{initial}` exceeds max_backoff `{max}`{whose}; lower backoff or raise max_backoff"),
                );
            }
            (None, Some(key)) => errors.spanned(
                &key.key,
                format!(
                    "max_backoff `{max}` is below the {layer} default backoff `{initial}`; \
                     raise max_backoff to at least {initial} or set a smaller backoff"
                ),
            ),
            (None, None) => {}
        }
    }
    Some(s)
}

/// Drops (and reports) unknown and repeated keys.
fn known_unique_keys(errors: &mut Errors, args: Args, keys: &[&str], attr: &str) -> Vec<Arg> {
    let mut kept: Vec<Arg> = Vec::new();
    for arg in args.0 {
        let name = arg.key.to_string();
        if !keys.contains(&name.as_str()) {
            errors.spanned(
                &arg.key,
                unknown(&format!("#[{attr}] key"), &name, "keys", keys),
            );
        } else if kept.iter().any(|k| k.key == arg.key) {
            errors.spanned(&arg.key, format!("`{name}` is set twice; keep one"));
        } else {
            kept.push(arg);
        }
    }
    kept
}

/// The expression of `key = expr`, or an error saying how to write the key.
fn value_expr<'a>(errors: &mut Errors, arg: &'a Arg) -> Option<&'a Expr> {
    let name = arg.key.to_string();
    match &arg.value {
        Value::Expr(expr) => Some(expr),
        Value::Flag => {
            errors.spanned(
                &arg.key,
                format!("`{name}` needs a value, e.g. {}", example(&name)),
            );
            None
        }
        Value::List(list) => {
            errors.spanned(list, format!("`{name}` takes `=`, e.g. {}", example(&name)));
            None
        }
    }
}

fn clone_list(errors: &mut Errors, arg: &Arg, item: &ItemFn) -> Vec<(Ident, bool)> {
    let Value::List(list) = &arg.value else {
        errors.spanned(
            &arg.key,
            "write the arguments to clone per attempt as clone(arg, …)",
        );
        return Vec::new();
    };
    let arguments = item::argument_names(item);
    let mut out = Vec::new();
    for name in list {
        match arguments.iter().find(|(a, _)| a == name) {
            Some(found) => out.push(found.clone()),
            None => errors.spanned(
                name,
                format!("`{name}` is not a by-value argument of this fn; clone(...) lists the arguments to clone for each attempt"),
            ),
        }
    }
    out
}

fn example(key: &str) -> &'static str {
    match key {
        "layer" => "layer = \"provider\"",
        "attempts" => "attempts = 3",
        "backoff" => "backoff = \"250ms\"",
        "max_backoff" => "max_backoff = \"4s\"",
        "multiplier" => "multiplier = 4.0",
        "jitter" => "jitter = 0.5",
        "on" => "on = [transient, rate_limited]",
        "config" => "config = self.retry.clone()",
        "connect" => "connect = \"10s\"",
        "read" => "read = \"120s\"",
        "attempt" => "attempt = \"30s\"",
        _ => "total = \"5m\"",
    }
}

fn parse_layer(errors: &mut Errors, expr: &Expr) -> Option<Layer> {
    let text = match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => s.value(),
        Expr::Path(p) if p.path.get_ident().is_some() => {
            let name = p.path.segments[0].ident.to_string();
            errors.spanned(
                expr,
                format!("write the layer as a string: layer = \"{name}\""),
            );
            return None;
        }
        _ => {
            errors.spanned(expr, "write the layer as a string: layer = \"http\" | \"provider\" | \"tool\" | \"task\"");
            return None;
        }
    };
    let layer = Layer::from_name(&text);
    if layer.is_none() {
        errors.spanned(expr, unknown("layer", &text, "layers", &LAYERS));
    }
    layer
}

fn attempts(errors: &mut Errors, expr: &Expr) -> Option<u32> {
    let n = match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse::<u64>().ok(),
        _ => None,
    };
    match n {
        Some(n @ 1..=MAX_ATTEMPTS) => Some(n as u32),
        Some(n) => {
            errors.spanned(
                expr,
                format!("attempts must be between 1 and {MAX_ATTEMPTS} (it counts the first attempt); got {n}"),
            );
            None
        }
        None => {
            errors.spanned(
                expr,
                "`attempts` takes an integer literal, e.g. attempts = 3",
            );
            None
        }
    }
}

fn number(errors: &mut Errors, expr: &Expr, key: &str) -> Option<f64> {
    let literal = |expr: &Expr| match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) => f.base10_parse::<f64>().ok(),
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse::<f64>().ok(),
        _ => None,
    };
    let n = match expr {
        // `-0.5` parses as a negation: read it, so that the range check can say what is wrong.
        Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => literal(expr).map(|n| -n),
        _ => literal(expr),
    };
    if n.is_none() {
        errors.spanned(
            expr,
            format!("`{key}` takes a number literal, e.g. {}", example(key)),
        );
    }
    n
}

fn multiplier(errors: &mut Errors, expr: &Expr) -> Option<f64> {
    let m = number(errors, expr, "multiplier")?;
    if m.is_finite() && m >= 1.0 {
        return Some(m);
    }
    errors.spanned(
        expr,
        format!("multiplier must be at least 1.0 (1.0 keeps the backoff constant); got {m}"),
    );
    None
}

fn jitter(errors: &mut Errors, expr: &Expr) -> Option<f32> {
    let j = number(errors, expr, "jitter")?;
    if (0.0..=1.0).contains(&j) {
        return Some(j as f32);
    }
    errors.spanned(expr, format!("jitter must be between 0.0 and 1.0 (the fraction of each backoff drawn at random); got {j}"));
    None
}

fn duration(errors: &mut Errors, expr: &Expr) -> Option<Duration> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => match parse_duration(&s.value()) {
            Ok(d) => Some(d),
            Err(message) => {
                errors.spanned(expr, message);
                None
            }
        },
        _ => {
            errors.spanned(
                expr,
                "write the duration as a string literal, e.g. \"250ms\", \"4s\", \"2m\"",
            );
            None
        }
    }
}

fn categories(errors: &mut Errors, expr: &Expr, layer: Layer) -> Option<Vec<Category>> {
    let Expr::Array(array) = expr else {
        errors.spanned(
            expr,
            "write the categories as a list: on = [transient, rate_limited]",
        );
        return None;
    };
    if array.elems.is_empty() {
        errors.spanned(
            expr,
            "`on = []` retries nothing; name what to retry (on = [transient]), \
             or use layer \"task\" for a single attempt",
        );
        return None;
    }
    let mut out = Vec::new();
    let before = errors.is_empty();
    for elem in &array.elems {
        let name = match elem {
            Expr::Path(p) if p.path.get_ident().is_some() => p.path.segments[0].ident.to_string(),
            _ => {
                errors.spanned(elem, "write a category name: transient or rate_limited");
                continue;
            }
        };
        match name.as_str() {
            "transient" => out.push(Category::Transient),
            "rate_limited" if layer == Layer::Http => errors.spanned(
                elem,
                "layer `http` leaves `rate_limited` (429) to the provider layer, so that it cannot mask rate limits (ADR-019); \
                 retry it with #[retry(layer = \"provider\")]",
            ),
            "rate_limited" => out.push(Category::RateLimited),
            "auth" | "not_found" | "permanent" => errors.spanned(
                elem,
                format!(
                    "`{name}` errors are never retryable: the same request fails the same way again; \
                     `on` takes transient and rate_limited"
                ),
            ),
            _ => errors.spanned(
                elem,
                format!(
                    "unknown category `{name}` (`on` takes transient and rate_limited){}",
                    did_you_mean(&name, &CATEGORIES)
                ),
            ),
        }
    }
    (before == errors.is_empty()).then_some(out)
}

/// A limit: a string literal is checked now, anything else is an expression
/// of type `Duration` or `Option<Duration>` evaluated per call.
fn limit(errors: &mut Errors, expr: &Expr) -> Option<Limit> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(_), ..
        }) => duration(errors, expr).map(Limit::Literal),
        Expr::Lit(_) => {
            errors.spanned(expr, "write the limit as a string literal such as \"30s\", or as an expression of type `Duration`");
            None
        }
        _ => Some(Limit::Expr(expr.clone())),
    }
}

fn timeout_plan(errors: &mut Errors, timeout: Written, layer: Layer) -> Timeouts {
    let args = known_unique_keys(errors, timeout.args, &TIMEOUT_KEYS, "timeout");
    let mut out = Timeouts::default();
    if args.is_empty() && errors.is_empty() {
        if layer == Layer::Http {
            out.connect = Some(Limit::Literal(Duration::from_secs(10)));
            out.attempt = Some((
                Limit::Literal(Duration::from_secs(120)),
                AttemptBoundary::Read,
            ));
        } else {
            errors.spanned(
                &timeout.span,
                format!(
                    "layer `{}` has no default timeouts (only `http` has: connect 10s, read 120s); \
                     write the limit, e.g. #[timeout(attempt = \"30s\")] or #[timeout(total = \"5m\")]",
                    layer.name()
                ),
            );
        }
        return out;
    }
    let position = |key: &str| args.iter().position(|a| a.key == key);
    if let (Some(read), Some(attempt)) = (position("read"), position("attempt")) {
        errors.spanned(
            &args[read.max(attempt)].key,
            "`read` and `attempt` both bound each attempt; keep one",
        );
    }
    for arg in &args {
        let name = arg.key.to_string();
        let owner_ok = match name.as_str() {
            "connect" => layer == Layer::Http,
            "read" => matches!(layer, Layer::Http | Layer::Provider),
            _ => true,
        };
        if !owner_ok {
            let owners = if name == "connect" {
                "the http layer (L1)"
            } else {
                "the http and provider layers"
            };
            errors.spanned(
                &arg.key,
                format!(
                    "`{name}` timeouts belong to {owners}, not to layer `{}` (ADR-019); \
                     bound each attempt with `attempt = \"…\"` or the whole call with `total = \"…\"`",
                    layer.name()
                ),
            );
            continue;
        }
        let Some(value) = value_expr(errors, arg).and_then(|e| limit(errors, e)) else {
            continue;
        };
        match name.as_str() {
            "connect" => out.connect = Some(value),
            "read" => out.attempt = Some((value, AttemptBoundary::Read)),
            "attempt" => out.attempt = Some((value, AttemptBoundary::Attempt)),
            _ => out.total = Some(value),
        }
    }
    out
}
