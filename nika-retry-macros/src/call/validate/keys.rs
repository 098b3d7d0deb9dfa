//! What every key of both attributes shares: unknown and repeated keys,
//! `key = value` shape, examples for the messages, duration literals.

use std::time::Duration;

use syn::{Expr, Ident, LitStr};

use super::super::parse::{Arg, Args, Value, lit_str};
use super::LAYERS;
use crate::duration::parse_duration;
use crate::errors::Errors;
use crate::suggest::unknown;

/// Drops (and reports) unknown and repeated keys and values without a key;
/// reports `key: value` and keeps it as `key = value`. `takes_layer`: the
/// attribute names the fn's layer (#[retry], or #[timeout] alone).
pub(super) fn known_unique_keys(
    errors: &mut Errors,
    args: Args,
    keys: &[&str],
    attr: &str,
    takes_layer: bool,
) -> Vec<Arg> {
    let mut kept: Vec<Arg> = Vec::new();
    for mut arg in args.0 {
        if let Some(layer) = layer_without_key(&arg) {
            if !takes_layer {
                errors.spanned(
                    &arg.key,
                    format!("the layer is named once per fn, in #[retry]; remove \"{layer}\" from #[{attr}]"),
                );
                continue;
            }
            // Reported, then read as the layer, so that no "missing `layer`" follows.
            errors.spanned(
                &arg.key,
                format!("name the layer with its key: #[{attr}(layer = \"{layer}\")]"),
            );
            let text = syn::LitStr::new(&layer, arg.key.span());
            arg.key = Ident::new("layer", arg.key.span());
            arg.value = Value::Expr(syn::parse_quote!(#text));
        } else if let Value::Positional(expr) = &arg.value {
            errors.spanned(expr, positional(attr, expr));
            continue;
        }
        let name = arg.key.to_string();
        if let Some(colon) = &arg.colon {
            errors.spanned(
                colon,
                format!(
                    "write `{name} = …` with `=`, not `:`, e.g. {}",
                    example(&name)
                ),
            );
        }
        if !keys.contains(&name.as_str()) {
            let message = match elsewhere(attr, &name, &arg.value) {
                Some(hint) => format!("unknown #[{attr}] key `{name}`: {hint}"),
                None => unknown(&format!("#[{attr}] key"), &name, "keys", keys),
            };
            errors.spanned(&arg.key, message);
        } else if kept.iter().any(|k| k.key == arg.key) {
            errors.spanned(&arg.key, format!("`{name}` is set twice; keep one"));
        } else {
            kept.push(arg);
        }
    }
    kept
}

/// A layer name written without its key: `"provider"` or `provider` alone.
fn layer_without_key(arg: &Arg) -> Option<String> {
    let name = match &arg.value {
        Value::Positional(expr) => string(expr)?,
        Value::Flag => arg.key.to_string(),
        _ => return None,
    };
    LAYERS.contains(&name.as_str()).then_some(name)
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
    let layer = LAYERS
        .contains(&name)
        .then(|| format!("to name the layer, write layer = \"{name}\""));
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
            | "clone",
        ) => Some(format!("`{name}` is a key of #[retry]; write it there")),
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

/// The expression of `key = expr`, or an error saying how to write the key.
pub(super) fn value_expr<'a>(errors: &mut Errors, arg: &'a Arg) -> Option<&'a Expr> {
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
        Value::Positional(_) => None,
    }
}

pub(super) fn example(key: &str) -> &'static str {
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
        "crate" => "crate = \"nika_retry\"",
        "clone" => "clone(arg)",
        _ => "total = \"5m\"",
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
