//! What every key of both attributes shares: unknown and repeated keys,
//! `key = value` shape, examples for the messages, duration literals.

use std::time::Duration;

use syn::{Expr, Ident, LitStr};

use super::super::parse::{Arg, Args, KeyArg, Value, lit_str};
use crate::duration::parse_duration;
use crate::errors::Errors;
use crate::suggest::unknown;
use crate::vocab::{self, Key, Layer};

/// Drops (and reports) unknown and repeated keys and values without a key;
/// reports `key: value` and keeps it as `key = value`. `takes_layer`: the
/// attribute names the fn's layer (#[retry], or #[timeout] alone).
pub(super) fn known_unique_keys(
    errors: &mut Errors,
    args: Args,
    keys: &[Key],
    attr: &str,
    takes_layer: bool,
) -> Vec<KeyArg> {
    let mut kept: Vec<KeyArg> = Vec::new();
    for arg in args.0 {
        let arg = match (layer_without_key(&arg), arg) {
            (Some((layer, at)), _) => {
                if !takes_layer {
                    errors.spanned(
                        &at,
                        format!("the layer is named once per fn, in #[retry]; remove \"{layer}\" from #[{attr}]"),
                    );
                    continue;
                }
                // Reported, then read as the layer, so that no "missing `layer`" follows.
                errors.spanned(
                    &at,
                    format!("name the layer with its key: #[{attr}(layer = \"{layer}\")]"),
                );
                let span = syn::spanned::Spanned::span(&at);
                let text = LitStr::new(layer, span);
                KeyArg {
                    key: Ident::new("layer", span),
                    value: Value::Expr(syn::parse_quote!(#text)),
                    colon: None,
                }
            }
            (None, Arg::Positional(expr)) => {
                errors.spanned(&expr, positional(attr, &expr));
                continue;
            }
            (None, Arg::Keyed(arg)) => arg,
        };
        let name = arg.key.to_string();
        let Some(example) = vocab::example(keys, &name) else {
            // Its hint shows the key to write, with its `=`: no word on a `:`.
            let message = match elsewhere(attr, &name, &arg.value) {
                Some(hint) => format!("unknown #[{attr}] key `{name}`: {hint}"),
                None => unknown(
                    &format!("#[{attr}] key"),
                    &name,
                    "keys",
                    &vocab::names(keys),
                ),
            };
            errors.spanned(&arg.key, message);
            continue;
        };
        if let Some(colon) = &arg.colon {
            errors.spanned(
                colon,
                format!("write `{name} = …` with `=`, not `:`, e.g. {example}"),
            );
        }
        if kept.iter().any(|k| k.key == arg.key) {
            errors.spanned(&arg.key, format!("`{name}` is set twice; keep one"));
        } else {
            kept.push(arg);
        }
    }
    kept
}

/// A layer name written without its key, `"provider"` or `provider`
/// alone, and the tokens to point at.
fn layer_without_key(arg: &Arg) -> Option<(&'static str, proc_macro2::TokenStream)> {
    let (name, at) = match arg {
        Arg::Positional(expr) => (string(expr)?, quote::ToTokens::to_token_stream(expr)),
        Arg::Keyed(KeyArg {
            key,
            value: Value::Flag,
            ..
        }) => (key.to_string(), quote::ToTokens::to_token_stream(key)),
        Arg::Keyed(_) => return None,
    };
    Layer::from_name(&name).map(|layer| (layer.name(), at))
}

fn string(expr: &Expr) -> Option<String> {
    lit_str(expr).map(LitStr::value)
}

/// What to write for a value given without its key.
fn positional(attr: &str, expr: &Expr) -> String {
    match (attr, string(expr)) {
        ("timeout", Some(limit)) => format!(
            "name the limit: #[timeout(attempt = \"{limit}\")] bounds each attempt, \
             #[timeout(total = \"{limit}\")] the whole call with its retries"
        ),
        ("timeout", None) => "name the limit: #[timeout(attempt = …)] bounds each attempt, \
             #[timeout(total = …)] the whole call with its retries"
            .to_owned(),
        _ => "#[retry] takes `key = value` arguments, e.g. #[retry(layer = \"provider\", attempts = 3)]"
            .to_owned(),
    }
}

/// Where a key that this attribute does not take belongs, if it is known
/// elsewhere: the other attribute, or the task YAML's `retry:` block.
fn elsewhere(attr: &str, name: &str, value: &Value) -> Option<String> {
    let written = match value {
        Value::Expr(expr) => Some(quote::ToTokens::to_token_stream(expr).to_string()),
        _ => None,
    };
    let or = |default: &str| written.clone().unwrap_or_else(|| default.to_owned());
    let layer =
        Layer::from_name(name).map(|_| format!("to name the layer, write layer = \"{name}\""));
    match (attr, name) {
        (_, _) if layer.is_some() => layer,
        ("retry", "timeout") => Some(format!(
            "time limits go in #[timeout] beside #[retry]: #[timeout(attempt = {})] bounds each attempt, \
             #[timeout(total = …)] the whole call",
            or("\"30s\"")
        )),
        ("retry", "connect" | "read" | "attempt" | "total") => Some(format!(
            "`{name}` is a key of #[timeout]; write #[timeout({name} = {})] beside #[retry]",
            or("…")
        )),
        ("retry", "delay_ms") => Some(format!(
            "`delay_ms` is the key of a task's YAML `retry:` block; here write backoff = \"{}ms\"",
            or("500")
        )),
        ("retry", "max_attempts" | "retries" | "max_retries") => {
            Some("write attempts = N (it counts the first attempt), e.g. attempts = 3".to_owned())
        }
        ("retry", "delay" | "initial_backoff" | "min_backoff") => {
            Some("write the first wait as backoff = \"250ms\"".to_owned())
        }
        ("retry", "max_delay" | "max_delay_ms") => Some("write max_backoff = \"4s\"".to_owned()),
        ("retry", "retry_on") => Some("write on = [transient, rate_limited]".to_owned()),
        (
            "timeout",
            "attempts" | "backoff" | "max_backoff" | "multiplier" | "jitter" | "on" | "config"
            | "clone" | "upstream" | "cost",
        ) => Some(format!("`{name}` is a key of #[retry]; write it there")),
        ("timeout", "idempotent") => Some(
            "`idempotent` is a key of #[retry]: #[timeout] alone runs the body once and never \
             retries it, so there is no repeat to guard; write #[retry(layer = …, idempotent = …)] \
             if the fn retries, or remove it"
                .to_owned(),
        ),
        ("timeout", "timeout") => Some(
            "name the limit: attempt = \"30s\" bounds each attempt, total = \"5m\" the whole call"
                .to_owned(),
        ),
        ("timeout", "connect_timeout" | "read_timeout") => Some(format!(
            "write {} = \"…\"",
            name.trim_end_matches("_timeout")
        )),
        _ => None,
    }
}

/// The expression of `key = expr`, or an error saying how to write the
/// key (`example`, its example).
pub(super) fn value_expr<'a>(
    errors: &mut Errors,
    arg: &'a KeyArg,
    example: &str,
) -> Option<&'a Expr> {
    let name = &arg.key;
    match &arg.value {
        Value::Expr(expr) => Some(expr),
        Value::Flag => {
            errors.spanned(name, format!("`{name}` needs a value, e.g. {example}"));
            None
        }
        Value::List(list) => {
            errors.spanned(list, format!("`{name}` takes `=`, e.g. {example}"));
            None
        }
    }
}

pub(super) fn duration(errors: &mut Errors, expr: &Expr) -> Option<Duration> {
    match lit_str(expr) {
        Some(s) => match parse_duration(&s.value()) {
            Ok(d) => Some(d),
            Err(message) => {
                errors.spanned(expr, message);
                None
            }
        },
        None => {
            errors.spanned(
                expr,
                "write the duration as a string literal, e.g. \"250ms\", \"4s\", \"2m\"",
            );
            None
        }
    }
}
