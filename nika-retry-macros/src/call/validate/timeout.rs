//! The keys of `#[timeout(...)]`, checked against the fn's layer.

use std::time::Duration;

use syn::{Attribute, Expr};

use super::super::parse::{KeyArg, lit_str};
use super::super::plan::{Limit, Timeouts};
use super::Written;
use super::keys::{duration, value_expr};
use super::retry::parse_layer;
use crate::errors::Errors;
use crate::vocab::{self, HTTP_CONNECT, HTTP_READ, Layer, TIMEOUT_KEYS};

/// The example of a key of `#[timeout]` that validation has kept.
fn example(key: &str) -> &'static str {
    vocab::example(&TIMEOUT_KEYS, key).unwrap_or_default()
}

/// Where the `#[timeout]` stands.
pub(super) enum Place<'a> {
    /// Without a `#[retry]` it recognises: it names the layer itself.
    /// `renamed`: an attribute below it that carries `layer = …`, very
    /// likely `#[retry]` under a name it cannot recognise.
    Alone { renamed: Option<&'a Attribute> },
    /// Beside a `#[retry]`, which names the layer (`None`: missing or unknown).
    BesideRetry(Option<Layer>),
}

/// A limit: a string literal is checked now, anything else is an expression
/// of type `Duration` or `Option<Duration>` evaluated per call.
fn limit(errors: &mut Errors, expr: &Expr) -> Option<Limit> {
    match expr {
        _ if lit_str(expr).is_some() => duration(errors, expr).map(Limit::Literal),
        Expr::Lit(_) => {
            errors.spanned(expr, "write the limit as a string literal such as \"30s\", or as an expression of type `Duration`");
            None
        }
        _ => Some(Limit::Expr(expr.clone())),
    }
}

/// The limits of `#[timeout]` and the layer they belong to: the one
/// `#[retry]` names, or else the one `#[timeout]` names itself. With the
/// layer unknown, every key is still checked but for the layer rules.
pub(super) fn timeout_plan(
    errors: &mut Errors,
    timeout: Written,
    bare: bool,
    place: Place,
) -> (Option<Layer>, Timeouts) {
    let mut args = timeout.args;
    let layer_arg = args
        .iter()
        .position(|a| a.key == "layer")
        .map(|i| args.remove(i));
    let layer = match (place, layer_arg) {
        (Place::BesideRetry(layer), None) => layer,
        (Place::BesideRetry(layer), Some(arg)) => {
            let named = layer.map_or_else(String::new, |l| format!("(layer = \"{}\")", l.name()));
            errors.spanned(
                &arg.key,
                format!(
                    "the layer is named once per fn, and #[retry{named}] names it; \
                     remove `layer` from #[timeout]"
                ),
            );
            layer
        }
        (Place::Alone { .. }, Some(arg)) => {
            value_expr(errors, &arg, example("layer")).and_then(|e| parse_layer(errors, e))
        }
        (
            Place::Alone {
                renamed: Some(attr),
            },
            None,
        ) => {
            errors.spanned(attr, renamed_retry(attr));
            None
        }
        (Place::Alone { renamed: None }, None) => {
            errors.spanned(
                &timeout.span,
                "#[timeout] without #[retry] needs the layer whose limits these are: \
                 write #[timeout(layer = \"http\" | \"provider\" | \"tool\" | \"task\", …)]; \
                 the body then runs once, bounded, and is never retried",
            );
            None
        }
    };
    (layer, limits(errors, &timeout.span, args, bare, layer))
}

/// Why an attribute that names a layer below a lone `#[timeout]` is very
/// likely `#[retry]` under another name, and what to write.
fn renamed_retry(attr: &Attribute) -> String {
    let names: Vec<String> = attr
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let written = names.join("::");
    let fix = if names.len() > 1 {
        format!(
            "add `crate = …` with the path nika-retry is reached by, which #[timeout] recognises \
             it by (#[{written}(…, crate = \"nika_retry\")])"
        )
    } else {
        "import it under its own name (`use nika_retry::retry;`, then #[retry(…)])".to_owned()
    };
    format!(
        "#[{written}(layer = …)] is very likely #[retry] under another name, which the #[timeout] \
         above it cannot tell from another crate's attribute, so #[timeout] stands alone, without \
         a layer; {fix}, or write #[{written}(…)] above #[timeout]"
    )
}

/// The limit keys of `#[timeout]` for a fn of `layer`.
fn limits(
    errors: &mut Errors,
    span: &proc_macro2::TokenStream,
    args: Vec<KeyArg>,
    bare: bool,
    layer: Option<Layer>,
) -> Timeouts {
    let mut out = Timeouts::default();
    if bare {
        let Some(layer) = layer else { return out };
        if layer == Layer::Http {
            out.connect = Some(Limit::Literal(HTTP_CONNECT));
            out.read = Some(Limit::Literal(HTTP_READ));
        } else {
            errors.spanned(
                span,
                format!(
                    "layer `{}` has no default timeouts (only `http` has: connect {}s, read {}s); \
                     write the limit, e.g. #[timeout(attempt = \"30s\")] or #[timeout(total = \"5m\")]",
                    layer.name(),
                    HTTP_CONNECT.as_secs(),
                    HTTP_READ.as_secs(),
                ),
            );
        }
        return out;
    }
    let mut keys = Vec::new();
    for arg in &args {
        let name = arg.key.to_string();
        let owner_ok = match (name.as_str(), layer) {
            (_, None) => true,
            ("connect", Some(layer)) => layer == Layer::Http,
            ("read", Some(layer)) => matches!(layer, Layer::Http | Layer::Provider),
            _ => true,
        };
        if let (false, Some(layer)) = (owner_ok, layer) {
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
        let Some(value) = value_expr(errors, arg, example(&name)).and_then(|e| limit(errors, e))
        else {
            continue;
        };
        if let Limit::Literal(d) = value {
            keys.push((name.clone(), d, &arg.key));
        }
        match name.as_str() {
            "connect" => out.connect = Some(value),
            "read" => out.read = Some(value),
            "attempt" => out.attempt = Some(value),
            _ => out.total = Some(value),
        }
    }
    check_order(errors, &keys);
    out
}

/// The limits nest: a connection is set up within an attempt that makes no
/// progress meanwhile, and an attempt runs within the call. A literal limit
/// above the one that encloses it could never take effect.
fn check_order(errors: &mut Errors, literals: &[(String, Duration, &syn::Ident)]) {
    let find = |key: &str| literals.iter().find(|(k, ..)| k == key);
    let pairs = [
        (
            "connect",
            "read",
            "a connection being set up makes no progress, so `read` expires first",
        ),
        (
            "connect",
            "attempt",
            "the connection is set up within the attempt",
        ),
        (
            "connect",
            "total",
            "the connection is set up within the call",
        ),
        ("read", "attempt", "`attempt` ends the attempt first"),
        ("attempt", "total", "`total` ends the call first"),
    ];
    for (inner, outer, why) in pairs {
        let (Some((_, small, key)), Some((_, big, _))) = (find(inner), find(outer)) else {
            continue;
        };
        if small > big {
            errors.spanned(
                key,
                format!(
                    "`{inner}` ({}) is above `{outer}` ({}), so it could never take effect: {why}; \
                     lower `{inner}` to at most {} or raise `{outer}`",
                    humantime::format_duration(*small),
                    humantime::format_duration(*big),
                    humantime::format_duration(*big),
                ),
            );
        }
    }
}
