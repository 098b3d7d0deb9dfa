//! The keys of `#[timeout(...)]`, checked against the fn's layer.

use std::time::Duration;

use syn::{Expr, ExprLit, Lit};

use super::keys::{duration, known_unique_keys, value_expr};
use super::{AttemptBoundary, Layer, Limit, TIMEOUT_KEYS, Timeouts, Written};
use crate::errors::Errors;

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

/// Checks every key of `#[timeout(...)]`; with the layer unknown (`None`),
/// all but the layer rules.
pub(super) fn timeout_plan(
    errors: &mut Errors,
    timeout: Written,
    layer: Option<Layer>,
) -> Timeouts {
    let bare = timeout.args.0.is_empty();
    let args = known_unique_keys(errors, timeout.args, &TIMEOUT_KEYS, "timeout");
    let mut out = Timeouts::default();
    if bare {
        let Some(layer) = layer else { return out };
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
