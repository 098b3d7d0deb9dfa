//! The keys of `#[retry(...)]` and the layer rules they must keep.

use syn::{Expr, ExprLit, Ident, Lit};

use super::super::params::{Params, SelfArg};
use super::super::parse::{KeyArg, Value, lit_str};
use super::super::plan::{Cloned, Settings};
use super::Written;
use super::keys::{duration, value_expr};
use crate::errors::Errors;
use crate::suggest::{did_you_mean, unknown};
use crate::vocab::{self, Category, Layer, MAX_ATTEMPTS, RETRY_KEYS, Retryable};

/// The example of a key of `#[retry]` that validation has kept.
fn example(key: &str) -> &'static str {
    vocab::example(&RETRY_KEYS, key).unwrap_or_default()
}

/// Checks every key of `#[retry(...)]`, and the fn's `mut` arguments
/// against `clone(…)`. The layer is `None` if missing or unknown; the other
/// keys are checked all the same, as far as they do not depend on it.
pub(super) fn retry_settings(
    errors: &mut Errors,
    retry: Written,
    params: Option<&Params>,
) -> (Option<Layer>, Settings) {
    let args = retry.args;
    let layer = match args.iter().find(|a| a.key == "layer") {
        Some(arg) => value_expr(errors, arg, example("layer")).and_then(|e| parse_layer(errors, e)),
        None => {
            errors.spanned(
                &retry.span,
                "missing `layer`: write #[retry(layer = \"http\" | \"provider\" | \"tool\" | \"task\")]",
            );
            None
        }
    };
    let mut s = Settings::default();
    let mut backoff_expr = None;
    let mut has_clone = false;
    for arg in &args {
        let name = arg.key.to_string();
        if layer == Some(Layer::Tool)
            && !matches!(
                name.as_str(),
                "layer" | "clone" | "upstream" | "cost" | "idempotent"
            )
        {
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
            has_clone = true;
            if let Some(params) = params {
                s.clones = clone_list(errors, arg, params);
            }
            continue;
        }
        let Some(expr) = value_expr(errors, arg, example(&name)) else {
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
            "upstream" => s.upstream = Some(expr.clone()),
            "cost" => s.cost = Some(expr.clone()),
            "idempotent" => s.idempotent = idempotent(errors, expr),
            _ => {} // `layer`, handled above.
        }
    }
    if let Some(params) = params {
        mut_without_clone(errors, params, &s.clones, has_clone);
    }
    if s.upstream.is_none()
        && let Some(cost) = args.iter().find(|a| a.key == "cost")
    {
        errors.spanned(
            &cost.key,
            "`cost` is what one attempt spends of its upstream's token limit, and this fn \
             names no upstream; add one, e.g. #[retry(layer = \"provider\", \
             upstream = self.upstream, cost = request.tokens)], or remove `cost`",
        );
    }
    if let Some(layer) = layer {
        backoff_below_max(errors, &s, layer, backoff_expr, &args);
    }
    (layer, s)
}

fn backoff_below_max(
    errors: &mut Errors,
    s: &Settings,
    layer: Layer,
    backoff_expr: Option<&Expr>,
    args: &[KeyArg],
) {
    let (default_initial, default_max) = layer.default_backoffs();
    let initial = s.backoff.unwrap_or(default_initial);
    let max = s.max_backoff.unwrap_or(default_max);
    if initial <= max {
        return;
    }
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

/// The arguments of `clone(…)`: names the arguments bind, or `self` by value.
fn clone_list(errors: &mut Errors, arg: &KeyArg, params: &Params) -> Vec<Cloned> {
    let Value::List(list) = &arg.value else {
        errors.spanned(
            &arg.key,
            "write the arguments to clone per attempt as clone(arg, …)",
        );
        return Vec::new();
    };
    let mut out: Vec<Cloned> = Vec::new();
    for name in list {
        if out.iter().any(|c| c.name == *name) {
            errors.spanned(
                name,
                format!("`{name}` is listed twice in clone(…); keep one"),
            );
            continue;
        }
        if name == "self" {
            match &params.receiver {
                Some(SelfArg::ByValue { mutability, .. }) => out.push(Cloned {
                    name: name.clone(),
                    was_mut: mutability.is_some(),
                }),
                Some(SelfArg::Borrowed) => errors.spanned(
                    name,
                    "`self` is borrowed here (`&self`, `&mut self`, `Pin<&mut Self>`): each attempt \
                     borrows it afresh, so there is nothing to clone; remove `self` from clone(…)",
                ),
                None => errors.spanned(
                    name,
                    "this fn has no `self`; clone(…) lists the by-value arguments to clone for each attempt",
                ),
            }
            continue;
        }
        match params.binding(name) {
            Some(b) if b.by_ref => errors.spanned(
                name,
                format!(
                    "`{name}` is bound by `ref`: a borrow of the argument, which cannot be cloned back into it; \
                     bind it by value (`{name}` or `mut {name}`) to clone it per attempt"
                ),
            ),
            Some(b) if b.is_exclusive_borrow() => errors.spanned(
                name,
                format!(
                    "`{name}` is a `&mut` borrow of the caller's state, which each attempt reborrows \
                     afresh: there is nothing to clone (a `&mut` cannot be); remove `{name}` from clone(…)"
                ),
            ),
            Some(b) => out.push(Cloned {
                name: name.clone(),
                was_mut: b.mutability.is_some(),
            }),
            None => {
                let names: Vec<String> = params.bindings.iter().map(|b| format!("`{}`", b.ident)).collect();
                let there = match (names.is_empty(), &params.receiver) {
                    (true, Some(SelfArg::ByValue { .. })) => "its only one is `self`".to_owned(),
                    (true, _) => "it has none".to_owned(),
                    (false, _) => format!("it has {}", names.join(", ")),
                };
                errors.spanned(
                    name,
                    format!("`{name}` is not an argument of this fn ({there}); clone(…) lists the arguments to clone for each attempt"),
                );
            }
        }
    }
    out
}

/// A `mut` argument not in `clone(…)` would carry one attempt's changes into the next.
fn mut_without_clone(errors: &mut Errors, params: &Params, clones: &[Cloned], has_clone: bool) {
    let listed = |name: &str| clones.iter().any(|c| c.name == name);
    let fix = |name: &str| {
        if has_clone {
            format!("add `{name}` to the clone(…) of #[retry]")
        } else {
            format!("add clone({name}) to #[retry]")
        }
    };
    for b in &params.bindings {
        let name = b.ident.to_string();
        match b.mutability {
            Some(mutability) if b.by_ref => errors.spanned(
                mutability,
                format!(
                    "`ref mut {name}` lets an attempt change the argument that the next attempt starts from; \
                     bind it by value (`mut {name}`) and {}, so that each attempt gets the caller's value",
                    fix(&name)
                ),
            ),
            // `mut x: &mut T`: the caller's state, which each attempt reborrows.
            Some(_) if b.is_exclusive_borrow() => {}
            Some(mutability) if !listed(&name) => errors.spanned(
                mutability,
                format!(
                    "`{name}` is `mut`: each attempt would start from what the attempt before left in it; \
                     {} so that each attempt gets the caller's value, or drop the `mut`",
                    fix(&name)
                ),
            ),
            _ => {}
        }
    }
    if let Some(SelfArg::ByValue {
        mutability: Some(mutability),
        ..
    }) = &params.receiver
    {
        if !listed("self") {
            errors.spanned(
                mutability,
                format!(
                    "`mut self`: each attempt would start from what the attempt before left in it; \
                     {} so that each attempt gets the caller's value, or drop the `mut`",
                    fix("self")
                ),
            );
        }
    }
}

pub(super) fn parse_layer(errors: &mut Errors, expr: &Expr) -> Option<Layer> {
    let text = match (lit_str(expr), bare_ident(expr)) {
        (Some(s), _) => s.value(),
        (None, Some(name)) => {
            errors.spanned(
                expr,
                format!("write the layer as a string: layer = \"{name}\""),
            );
            return None;
        }
        (None, None) => {
            errors.spanned(expr, "write the layer as a string: layer = \"http\" | \"provider\" | \"tool\" | \"task\"");
            return None;
        }
    };
    let layer = Layer::from_name(&text);
    if layer.is_none() {
        errors.spanned(expr, unknown("layer", &text, "layers", &Layer::NAMES));
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

/// `idempotent = false | true` or a `bool` expression, kept (a `true`
/// said stands against a call around it that is not idempotent); another
/// literal is refused.
fn idempotent(errors: &mut Errors, expr: &Expr) -> Option<Expr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(_), ..
        }) => Some(expr.clone()),
        Expr::Lit(_) => {
            errors.spanned(
                expr,
                "`idempotent` takes a `bool`: idempotent = false for a call that a repeat could \
                 repeat the effect of (a mail, a payment), or an expression evaluated once per \
                 call, e.g. idempotent = request.method().is_idempotent()",
            );
            None
        }
        _ => Some(expr.clone()),
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

fn categories(errors: &mut Errors, expr: &Expr, layer: Option<Layer>) -> Option<Vec<Retryable>> {
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
    for elem in &array.elems {
        let Some(name) = bare_ident(elem).map(Ident::to_string) else {
            errors.spanned(elem, "write a category name: transient or rate_limited");
            continue;
        };
        if matches!(name.as_str(), "timeout" | "timeouts" | "timed_out") {
            errors.spanned(
                elem,
                "a timeout is not a category of its own: an attempt cut by its `connect`, `read` or \
                 `attempt` limit classifies as `transient`, so on = [transient] retries it \
                 (a `total` timeout is `permanent`: the call is over)",
            );
            continue;
        }
        let Some(category) = Category::from_name(&name) else {
            errors.spanned(
                elem,
                format!(
                    "unknown category `{name}` (`on` takes transient and rate_limited){}",
                    did_you_mean(&name, &Category::NAMES)
                ),
            );
            continue;
        };
        match category.retryable() {
            Some(Retryable::RateLimited) if layer == Some(Layer::Http) => errors.spanned(
                elem,
                "layer `http` leaves `rate_limited` (429) to the provider layer, so that it cannot mask rate limits (ADR-019); \
                 retry it with #[retry(layer = \"provider\")]",
            ),
            Some(retryable) => out.push(retryable),
            None => errors.spanned(
                elem,
                format!(
                    "`{name}` errors are never retryable: the same request fails the same way again; \
                     `on` takes transient and rate_limited"
                ),
            ),
        }
    }
    // Partial if an element was wrong: reported, so the plan is not built.
    Some(out)
}

/// `name` in `layer = name` or `on = [name]`.
fn bare_ident(expr: &Expr) -> Option<&Ident> {
    match expr {
        Expr::Path(p) => p.path.get_ident(),
        _ => None,
    }
}
