//! Checks the attributes against the fn and the layer rules of ADR-019
//! (docs/layers.md), and turns them into a [`Plan`] that expansion cannot
//! fail on. Every mistake is reported, each at the token the user wrote.

use proc_macro2::{Span, TokenStream};
use syn::{Attribute, Ident, ItemFn, Meta, ReturnType, Type};

mod keys;
mod retry;
mod timeout;

use self::retry::retry_settings;
use self::timeout::{Place, timeout_plan};
use super::attrs::{self, ExpandedBy, Kind};
use super::body::{self, Body};
use super::moves;
use super::params::{Params, SelfArg};
use super::parse::{Args, KeyArg, lit_str};
use super::plan::{Plan, Run, Settings};
use crate::errors::Errors;
use crate::krate;
use crate::vocab::{self, RETRY_KEYS, TIMEOUT_KEYS};

/// One attribute as written: a span to point at, and its keyed arguments,
/// with the unknown and repeated keys and the positional values dropped
/// (and reported).
struct Written {
    span: TokenStream,
    args: Vec<KeyArg>,
}

/// Builds the plan of `item`, annotated with `own` (the attribute being
/// expanded, with its arguments, whose `crate = "…"` is `krate`) and any
/// sibling nika-retry attributes.
pub(crate) fn plan(
    own: Kind,
    own_args: syn::Result<Args>,
    mut item: ItemFn,
    krate: Option<&syn::Path>,
) -> syn::Result<Plan> {
    // The other attributes of the fn say nothing once it is not the user's any more.
    if let Some(expanded) = attrs::already_expanded(&item) {
        return Err(syn::Error::new(
            Span::call_site(),
            expanded_message(expanded, own),
        ));
    }
    let mut errors = Errors::default();
    let name = Ident::new(own.name(), Span::call_site());
    let mut found = vec![(own, quote::quote!(#name), own_args)];
    let siblings = attrs::take_sibling_attrs(&mut item, krate);
    let absorbed = siblings
        .iter()
        .map(|(_, attr)| attr.path().clone())
        .collect();
    for (kind, attr) in siblings {
        found.push((kind, quote::quote!(#attr), sibling_args(&attr)));
    }

    let (mut retry, mut timeout) = (None, None);
    // A #[retry] whose arguments did not parse (reported) still names the
    // layer, so that a #[timeout] beside it is not taken to be alone.
    let mut retry_unparsed = false;
    for (kind, span, args) in found {
        let Some(args) = errors.take(args) else {
            retry_unparsed |= kind == Kind::Retry;
            continue;
        };
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

    let beside_retry = retry.is_some() || retry_unparsed;
    // `#[timeout]` or `#[timeout(layer = …)]`: the layer's default limits.
    let bare = timeout
        .as_ref()
        .is_some_and(|(_, args): &(_, Args)| args.only(&["layer", "crate"]));
    let mut retry = retry.map(|(span, args)| Written {
        args: keys::known_unique_keys(&mut errors, args, &RETRY_KEYS, "retry", true),
        span,
    });
    let mut timeout = timeout.map(|(span, args)| Written {
        args: keys::known_unique_keys(&mut errors, args, &TIMEOUT_KEYS, "timeout", !beside_retry),
        span,
    });
    let krate = crate_path(&mut errors, [&mut retry, &mut timeout]);
    let fn_shape = check_fn(&mut errors, &item, own);
    let params = fn_shape.as_ref().map(|(body, _)| Params::of(&item, body));
    let (layer, run) = match (retry, timeout) {
        (Some(retry), timeout) => {
            let (layer, settings) = retry_settings(&mut errors, retry, params.as_ref());
            // Checked whatever the layer, so that an unknown layer hides no other mistake.
            let timeouts =
                timeout.map(|t| timeout_plan(&mut errors, t, bare, Place::BesideRetry(layer)).1);
            let moved = match (&fn_shape, &params) {
                (Some((body, _)), Some(params)) => moved_args(&item, body, params, &settings),
                _ => Vec::new(),
            };
            let run = Run::Loop {
                settings,
                timeouts,
                moved,
            };
            (layer, Some(run))
        }
        // Beside a #[retry] whose arguments did not parse: checked, not run.
        (None, Some(timeout)) if beside_retry => {
            timeout_plan(&mut errors, timeout, bare, Place::BesideRetry(None));
            (None, None)
        }
        (None, Some(timeout)) => {
            let renamed = attrs::retry_by_another_name(&item);
            let place = Place::Alone { renamed };
            let (layer, timeouts) = timeout_plan(&mut errors, timeout, bare, place);
            (layer, Some(Run::Once(timeouts)))
        }
        // The attribute's own arguments did not parse: reported above.
        (None, None) => (None, None),
    };
    errors.finish(())?;
    let (Some(layer), Some(run), Some((body, output)), Some(params)) =
        (layer, run, fn_shape, params)
    else {
        unreachable!("each of these is `None` only once an error is recorded");
    };
    Ok(Plan {
        item,
        body,
        output,
        layer,
        run,
        absorbed,
        params,
        krate,
    })
}

/// The uses in the body that move a by-value argument (or `self`) that is
/// neither `mut` (refused already) nor in `clone(…)`.
fn moved_args(item: &ItemFn, body: &Body, params: &Params, settings: &Settings) -> Vec<Ident> {
    let listed = |name: &str| settings.clones.iter().any(|c| c.name == name);
    let mut candidates: Vec<Ident> = params
        .bindings
        .iter()
        .filter(|b| b.mutability.is_none() && !b.by_ref && !listed(&b.ident.to_string()))
        .filter(|b| b.ty.as_ref().is_some_and(moves::checkable))
        .map(|b| b.ident.clone())
        .collect();
    let receiver_type = item.sig.receiver().map(|r| &*r.ty);
    if let (
        Some(SelfArg::ByValue {
            mutability: None,
            alias,
        }),
        Some(ty),
    ) = (&params.receiver, receiver_type)
    {
        if !listed("self") && moves::checkable(ty) {
            // The body's name for it: async-trait's `__self`, or `self`.
            candidates.push(
                alias
                    .clone()
                    .unwrap_or_else(|| Ident::new("self", Span::call_site())),
            );
        }
    }
    let stmts = match body {
        Body::Async => &item.block.stmts,
        Body::AsyncTrait { rest, .. } => rest,
    };
    moves::moved(stmts, &candidates)
}

/// `crate = "path"` from either attribute (taken out of their arguments), else `::nika_retry`.
fn crate_path(errors: &mut Errors, attrs: [&mut Option<Written>; 2]) -> syn::Path {
    let mut found: Option<(syn::Path, String)> = None;
    for written in attrs.into_iter().flatten() {
        let (given, rest): (Vec<_>, _) = std::mem::take(&mut written.args)
            .into_iter()
            .partition(|a| a.key == "crate");
        written.args = rest;
        // At most one per attribute: `known_unique_keys` reported the others.
        for arg in given {
            let example = vocab::example(&RETRY_KEYS, "crate").unwrap_or_default();
            let Some(expr) = keys::value_expr(errors, &arg, example) else {
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
        ExpandedBy::Instrument => {
            // What would fall outside the span: a retry loop's attempts and
            // events, or (`#[timeout]`, with or without a loop) the limits'.
            let outside = match own {
                Kind::Retry => {
                    "it would open one span per attempt and leave the retry events outside it"
                }
                Kind::Timeout => {
                    "its span would open inside the time limits and leave their warnings \
                     (and, beside #[retry], the retry events) outside it"
                }
            };
            format!(
                "#[tracing::instrument] is written above #[{name}]: {outside}; write #[{name}] \
                 above #[instrument], so that one span covers the whole call"
            )
        }
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
        body::async_trait_body(item)
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
        Some(Body::AsyncTrait { output, .. }) => body::erase_impl_trait(output),
        _ => body::erase_impl_trait(ret),
    };
    Some((async_trait.unwrap_or(Body::Async), output))
}
