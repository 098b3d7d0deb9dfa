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
use super::item::{self, Body, ExpandedBy, Kind, Params};
use super::parse::{Arg, Args, lit_str};
use crate::errors::Errors;
use crate::krate;

const LAYERS: [&str; 4] = ["http", "provider", "tool", "task"];
const RETRY_KEYS: [&str; 10] = [
    "layer",
    "attempts",
    "backoff",
    "max_backoff",
    "multiplier",
    "jitter",
    "on",
    "config",
    "clone",
    "crate",
];
const TIMEOUT_KEYS: [&str; 6] = ["connect", "read", "attempt", "total", "layer", "crate"];
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
#[derive(Default)]
pub(crate) struct Settings {
    pub(crate) attempts: Option<u32>,
    pub(crate) backoff: Option<Duration>,
    pub(crate) max_backoff: Option<Duration>,
    pub(crate) multiplier: Option<f64>,
    pub(crate) jitter: Option<f32>,
    pub(crate) on: Option<Vec<Category>>,
    pub(crate) config: Option<Expr>,
    /// Arguments cloned per attempt (`self` for the receiver), with whether they were `mut`.
    pub(crate) clones: Vec<(Ident, bool)>,
}

/// The validated `#[retry]` and `#[timeout]` of one fn.
pub(crate) struct Plan {
    /// The fn, without its nika-retry attributes.
    pub(crate) item: ItemFn,
    pub(crate) body: Body,
    /// The attempt's output type, with `impl Trait` erased.
    pub(crate) output: Type,
    pub(crate) layer: Layer,
    pub(crate) settings: Settings,
    /// `None` without `#[timeout]`.
    pub(crate) timeouts: Option<Timeouts>,
    /// `#[timeout]` without `#[retry]`: one run, no loop.
    pub(crate) alone: bool,
    /// The paths of the sibling attributes absorbed, so their imports count as used.
    pub(crate) absorbed: Vec<syn::Path>,
    pub(crate) params: Params,
    /// `crate = "path"`, else `::nika_retry`.
    pub(crate) krate: syn::Path,
}

/// One attribute as written: a span to point at, and its arguments, with
/// the unknown and repeated keys dropped (and reported).
struct Written {
    span: TokenStream,
    args: Vec<Arg>,
}

/// Builds the plan of `item`, annotated with `own` (the attribute being
/// expanded, with its arguments, whose `crate = "…"` is `krate`) and any
/// sibling nika-retry attributes.
pub(crate) fn plan(
    own: (Kind, TokenStream),
    mut item: ItemFn,
    krate: Option<&syn::Path>,
) -> syn::Result<Plan> {
    // The other attributes of the fn say nothing once it is not the user's any more.
    if let Some(expanded) = item::already_expanded(&item) {
        return Err(syn::Error::new(
            Span::call_site(),
            expanded_message(expanded, own.0),
        ));
    }
    let mut errors = Errors::default();
    let mut written: Vec<(Kind, TokenStream, Args)> = Vec::new();
    // The attributes whose arguments did not parse (reported): still written,
    // so that a #[timeout] beside such a #[retry] is not taken to be alone.
    let mut unparsed: Vec<Kind> = Vec::new();
    let name = Ident::new(own.0.name(), Span::call_site());
    let mut found = vec![(own.0, quote::quote!(#name), syn::parse2(own.1))];
    let siblings = item::take_sibling_attrs(&mut item, krate);
    let absorbed = siblings
        .iter()
        .map(|(_, attr)| attr.path().clone())
        .collect();
    for (kind, attr) in siblings {
        found.push((kind, quote::quote!(#attr), sibling_args(&attr)));
    }
    for (kind, span, args) in found {
        match errors.take(args) {
            Some(args) => written.push((kind, span, args)),
            None => unparsed.push(kind),
        }
    }

    let (mut retry, mut timeout) = (None, None);
    for (kind, span, args) in written {
        let slot = match kind {
            Kind::Retry => &mut retry,
            Kind::Timeout => &mut timeout,
        };
        if slot.is_some() {
            let name = kind.name();
            errors.spanned(
                &span,
                format!(
                    "#[{name}] appears twice on this fn; merge the two into one #[{name}(...)]"
                ),
            );
        } else {
            *slot = Some((span, args));
        }
    }

    // A #[retry] names the layer, even one whose arguments did not parse.
    let beside_retry = retry.is_some() || unparsed.contains(&Kind::Retry);
    // `#[timeout]` or `#[timeout(layer = …)]`: the layer's default limits.
    let bare = timeout.as_ref().is_some_and(|(_, args): &(_, Args)| {
        args.0.iter().all(|a| a.key == "layer" || a.key == "crate")
    });
    let mut retry = retry.map(|(span, args)| Written {
        args: keys::known_unique_keys(&mut errors, args, &RETRY_KEYS, "retry", true),
        span,
    });
    let mut timeout = timeout.map(|(span, args)| Written {
        args: keys::known_unique_keys(&mut errors, args, &TIMEOUT_KEYS, "timeout", !beside_retry),
        span,
    });
    let krate = crate_path(&mut errors, [&mut retry, &mut timeout]);
    let fn_shape = check_fn(&mut errors, &item, own.0);
    let params = fn_shape.as_ref().map(|(body, _)| Params::of(&item, body));
    let (layer, settings, timeouts, alone) = match (retry, timeout) {
        (Some(retry), timeout) => {
            let (layer, settings) = retry_settings(&mut errors, retry, params.as_ref());
            // Checked whatever the layer, so that an unknown layer hides no other mistake.
            let timeouts = timeout.map(|t| timeout_plan(&mut errors, t, bare, Some(layer)).1);
            (layer, settings, timeouts, false)
        }
        (None, Some(timeout)) => {
            // Beside a #[retry] that did not parse, the layer is its, unknown.
            let retry = beside_retry.then_some(None);
            let (layer, timeouts) = timeout_plan(&mut errors, timeout, bare, retry);
            (layer, Settings::default(), Some(timeouts), !beside_retry)
        }
        // The attribute's own arguments did not parse: reported above.
        (None, None) => (None, Settings::default(), None, false),
    };
    if let Some((Body::Async, _)) = &fn_shape {
        rename_self(&mut errors, &mut item, &settings);
    }
    errors.finish(())?;
    let (Some(layer), Some((body, output)), Some(params)) = (layer, fn_shape, params) else {
        unreachable!("each of these is `None` only once an error is recorded");
    };
    Ok(Plan {
        item,
        body,
        output,
        layer,
        settings,
        timeouts,
        alone,
        absorbed,
        params,
        krate,
    })
}

/// `crate = "path"` from either attribute (taken out of their arguments), else `::nika_retry`.
fn crate_path(errors: &mut Errors, attrs: [&mut Option<Written>; 2]) -> syn::Path {
    let mut found: Option<(syn::Path, String)> = None;
    for written in attrs.into_iter().flatten() {
        let (given, rest) = std::mem::take(&mut written.args)
            .into_iter()
            .partition::<Vec<_>, _>(|a| a.key == "crate");
        written.args = rest;
        // At most one per attribute: `known_unique_keys` reported the others.
        for arg in given {
            let Some(expr) = keys::value_expr(errors, &arg) else {
                continue;
            };
            let Some(lit) = lit_str(expr) else {
                errors.spanned(expr, krate::NOT_A_STRING);
                continue;
            };
            let Some(path) = errors.take(krate::from_lit(lit)) else {
                continue;
            };
            let text = quote::ToTokens::to_token_stream(&path).to_string();
            match &found {
                Some((_, first)) if *first != text => errors.spanned(
                    &arg.key,
                    format!("`crate` is `{first}` on the other attribute; give it once, on either"),
                ),
                Some(_) => {}
                None => found = Some((path, text)),
            }
        }
    }
    found.map_or_else(krate::default, |(path, _)| path)
}

/// With `clone(self)` in a native `async fn`, renames `self` in the body
/// (`self` cannot be bound again by each attempt's clone), as async-trait
/// does; the expansion binds the clone under [`item::self_alias`].
fn rename_self(errors: &mut Errors, item: &mut ItemFn, settings: &Settings) {
    let Some((at, _)) = settings.clones.iter().find(|(name, _)| name == "self") else {
        return;
    };
    match item::rename_self(&item.block, &item::self_alias()) {
        Ok(block) => *item.block = block,
        Err(error) => errors.spanned(
            at,
            format!(
                "clone(self) renames `self` in the body so that each attempt binds its own clone, \
                 and this body has a `self` that cannot be renamed ({error}); move the item or \
                 statement that names `self` this way out of the fn, or clone what the body needs \
                 from `&self` instead"
            ),
        ),
    }
}

fn sibling_args(attr: &Attribute) -> syn::Result<Args> {
    match &attr.meta {
        Meta::Path(_) => Ok(Args(vec![])),
        // Spans a missing value at the closing parenthesis of this attribute.
        Meta::List(list) => list.parse_args(),
        Meta::NameValue(nv) => Err(syn::Error::new_spanned(
            nv,
            "write the arguments in parentheses, e.g. #[timeout(read = \"120s\")]",
        )),
    }
}

/// Why `#[retry]` / `#[timeout]` cannot run inside a body that another
/// attribute above has rewritten, and which order to write instead.
fn expanded_message(expanded: ExpandedBy, own: Kind) -> String {
    let name = own.name();
    match expanded {
        ExpandedBy::Us => format!(
            "this #[{name}] is below a nika-retry attribute that has already expanded the fn, \
             which did not know it as nika-retry's: only #[{name}], #[nika_retry::{name}] and paths \
             with a `crate` argument are, so that other crates' #[{name}] attributes are left alone; \
             import it under its own name (`use my::{name};`, then #[{name}(…)]), \
             name the crate it comes through (#[my::{name}(…, crate = \"my\")]), \
             or put it above the other one"
        ),
        ExpandedBy::Instrument => format!(
            "#[tracing::instrument] is written above #[{name}]: it would open one span per attempt \
             and leave the retry events outside it; write #[{name}] above #[instrument], \
             so that one span covers the whole call"
        ),
        ExpandedBy::Tokio => format!(
            "#[tokio::test] or #[tokio::main] is written above #[{name}] and has already made the fn \
             a blocking one; write #[{name}] above #[tokio::test] / #[tokio::main]"
        ),
    }
}

/// Checks that the fn is async (or an `#[async_trait]` method) and returns
/// something, and finds the attempt's output type.
fn check_fn(errors: &mut Errors, item: &ItemFn, own: Kind) -> Option<(Body, Type)> {
    let name = own.name();
    let is_async = item.sig.asyncness.is_some();
    let async_trait = if is_async {
        None
    } else {
        item::async_trait_body(item)
    };
    if !is_async && async_trait.is_none() {
        errors.spanned(
            item.sig.fn_token,
            format!("#[{name}] works on `async fn` only; write `async fn` (it also works inside #[async_trait] impls)"),
        );
        return None;
    }
    let ReturnType::Type(_, ret) = &item.sig.output else {
        errors.spanned(
            &item.sig.ident,
            format!("#[{name}] needs a fn that returns `Result<T, E>`; this one returns `()`"),
        );
        return None;
    };
    // An `#[async_trait]` method returns a boxed future; its attempt, the output.
    let output = match &async_trait {
        Some(Body::AsyncTrait { output, .. }) => item::erase_impl_trait(output),
        _ => item::erase_impl_trait(ret),
    };
    Some((async_trait.unwrap_or(Body::Async), output))
}
