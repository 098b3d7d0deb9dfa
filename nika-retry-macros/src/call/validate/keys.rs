//! What every key of both attributes shares: unknown and repeated keys,
//! `key = value` shape, examples for the messages, duration literals.

use std::time::Duration;

use syn::{Expr, ExprLit, Lit};

use super::super::parse::{Arg, Args, Value};
use crate::duration::parse_duration;
use crate::errors::Errors;
use crate::suggest::unknown;

/// Drops (and reports) unknown and repeated keys.
pub(super) fn known_unique_keys(
    errors: &mut Errors,
    args: Args,
    keys: &[&str],
    attr: &str,
) -> Vec<Arg> {
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
        _ => "total = \"5m\"",
    }
}

pub(super) fn duration(errors: &mut Errors, expr: &Expr) -> Option<Duration> {
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
