//! Generates the retry loop from a validated [`Plan`]. Cannot fail.
//!
//! The shape, for `async fn f(args) -> R { body }`:
//!
//! ```text
//! async fn f(args) -> R {
//!     const __NIKA_SITE: &Site = &Overrides { .. }.site(layer, "module::f");
//!     let mut call = Call::new(__NIKA_SITE, total);
//!     loop {
//!         let arg = arg.clone();                      // for each clone(arg)
//!         let result = call.timed(limits, attempt::<R, _>(async { body })).await; // or call.attempt(…)
//!         match call.next(&result, || config) {
//!             Some(delay) => sleep(delay).await,
//!             None => return result,
//!         }
//!     }
//! }
//! ```
//!
//! The body stays a non-`move` `async` block, so it can borrow `&mut self`
//! and the arguments afresh on every attempt; the user's signature, docs and
//! attributes are re-emitted untouched.

use std::time::Duration;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, Signature, Stmt, Type};

use super::item::Body;
use super::validate::{Category, Layer, Limit, Plan, Settings, Timeouts};

pub(crate) fn expand(plan: Plan) -> TokenStream {
    let Plan {
        item,
        body,
        output,
        settings,
        timeouts,
        alone,
        absorbed,
    } = plan;
    let ItemFn {
        attrs,
        vis,
        mut sig,
        block,
    } = item;
    let mut body = body;
    // A cloned argument is re-bound per attempt (`let mut x = x.clone()`), so
    // the binding it came from no longer needs `mut`: drop it there to avoid
    // an unused-mut warning on the user's signature.
    for (name, _) in settings.clones.iter().filter(|(_, is_mut)| *is_mut) {
        unmut(&mut sig, &mut body, name);
    }

    let call = Ident::new("__nika_call", Span::mixed_site());
    let delay = Ident::new("__nika_delay", Span::mixed_site());

    let site = site(&settings, &sig.ident);
    // Evaluated only when an attempt fails, in a closure handed to `next`.
    let config = match &settings.config {
        Some(expr) => {
            quote_spanned!(expr.span()=> || ::nika_retry::__private::IntoConfig::into_config(#expr))
        }
        None => quote!(::nika_retry::__private::NO_CONFIG),
    };
    let total = limit_tokens(timeouts.as_ref().and_then(|t| t.total.as_ref()));
    let clones = settings.clones.iter().map(|(name, is_mut)| {
        let mutability = is_mut.then(|| quote!(mut));
        quote_spanned!(name.span()=> let #mutability #name = ::core::clone::Clone::clone(&#name);)
    });
    let attempt_block = match &body {
        Body::Async => quote!(async #block),
        Body::AsyncTrait { rest, .. } => quote!(async { #(#rest)* }),
    };
    // Spanned at the error type of `Result<T, E>` (or at the return type),
    // so that a missing `Classify` or `From<TimeoutError>` is reported there.
    let span = error_type(&output).unwrap_or(&output).span();
    let result = Ident::new("__nika_result", Span::mixed_site().located_at(span));
    let attempt_block_typed = quote_spanned!(output.span()=> ::nika_retry::__private::attempt::<#output, _>(#attempt_block));
    let attempt = &attempt_block_typed;
    // The receiver is located there too: a method call's error is reported at its first token.
    let call_at = Ident::new("__nika_call", Span::mixed_site().located_at(span));
    let attempt = match &timeouts {
        Some(timeouts) => {
            let limits = attempt_limits(timeouts);
            quote_spanned!(span=> #call_at.timed(#limits, #attempt))
        }
        None => quote_spanned!(span=> #call_at.attempt(#attempt)),
    };
    // A braced argument: its span is the user's, where rustc reports a bound on it.
    // A method names its impl's type in the events.
    let self_type = match sig.receiver() {
        Some(_) => quote!(::core::option::Option::Some(
            ::core::any::type_name::<Self> as fn() -> &'static str
        )),
        None => quote!(::core::option::Option::None),
    };
    let next = quote_spanned!(span=> #call_at.next({ &#result }, #config, #self_type));

    let retry_loop = if alone {
        // `#[timeout]` alone: one run under the limits, no loop.
        let limits = attempt_limits(timeouts.as_ref().unwrap_or(&Timeouts::default()));
        let once = quote_spanned!(span=> ::nika_retry::__private::once);
        quote! {
            #(#[allow(unused_imports)] use #absorbed as _;)*
            #site
            #once(__NIKA_SITE, #total, #limits, #attempt_block_typed).await
        }
    } else {
        quote! {
        #(#[allow(unused_imports)] use #absorbed as _;)*
        #site
        let mut #call = ::nika_retry::__private::Call::new(__NIKA_SITE, #total);
        loop {
            let #delay = {
                #(#clones)*
                let #result = #attempt.await;
                match #next {
                    ::core::option::Option::Some(#delay) => #delay,
                    ::core::option::Option::None => return #result,
                }
            };
            ::nika_retry::__private::sleep(#delay).await;
        }
        }
    };
    let new_body = match body {
        Body::Async => retry_loop,
        Body::AsyncTrait { prologue, .. } => quote! {
            ::std::boxed::Box::pin(async move {
                #(#prologue)*
                #retry_loop
            })
        },
    };
    let brace = block.brace_token;
    let mut out = quote!(#(#attrs)* #vis #sig);
    brace.surround(&mut out, |tokens| tokens.extend(new_body));
    out
}

/// `E` in a return type written `Result<T, E>` (or `path::Result<T, E>`).
fn error_type(output: &Type) -> Option<&Type> {
    let Type::Path(path) = output else {
        return None;
    };
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args
        .args
        .iter()
        .filter(|a| matches!(a, GenericArgument::Type(_)))
        .nth(1)?
    {
        GenericArgument::Type(ty) => Some(ty),
        _ => None,
    }
}

/// Removes `mut` from the binding of argument `name`: in the signature, or in
/// the `#[async_trait]` prologue that moves it into the future.
fn unmut(sig: &mut Signature, body: &mut Body, name: &Ident) {
    let unmut_pat = |pat: &mut Pat| {
        if let Pat::Ident(p) = pat {
            if p.ident == *name {
                p.mutability = None;
            }
        }
    };
    for input in &mut sig.inputs {
        if let FnArg::Typed(typed) = input {
            unmut_pat(&mut typed.pat);
        }
    }
    if let Body::AsyncTrait { prologue, .. } = body {
        for stmt in prologue {
            if let Stmt::Local(local) = stmt {
                unmut_pat(&mut local.pat);
            }
        }
    }
}

/// The `const` holding the layer defaults with the literals applied.
fn site(settings: &Settings, name: &Ident) -> TokenStream {
    let layer = layer(settings.layer);
    let some = |value: Option<TokenStream>| match value {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    };
    let attempts = some(
        settings
            .attempts
            .map(|n| Literal::u32_suffixed(n).into_token_stream()),
    );
    let backoff = some(settings.backoff.map(duration));
    let max_backoff = some(settings.max_backoff.map(duration));
    let multiplier = some(
        settings
            .multiplier
            .map(|m| Literal::f64_suffixed(m).into_token_stream()),
    );
    let jitter = some(
        settings
            .jitter
            .map(|j| Literal::f32_suffixed(j).into_token_stream()),
    );
    let on = some(settings.on.as_ref().map(|on| {
        let names = on.iter().map(|c| match c {
            Category::Transient => quote!(Transient),
            Category::RateLimited => quote!(RateLimited),
        });
        quote!(::nika_retry::CategorySet::EMPTY #(.with(::nika_retry::ErrorCategory::#names))*)
    }));
    let name = name.to_string();
    quote! {
        const __NIKA_SITE: &::nika_retry::__private::Site = &::nika_retry::__private::Overrides {
            max_attempts: #attempts,
            initial_backoff: #backoff,
            max_backoff: #max_backoff,
            multiplier: #multiplier,
            jitter: #jitter,
            retry_on: #on,
        }
        .site(#layer, ::core::concat!(::core::module_path!(), "::", #name));
    }
}

/// A limit: `None`, a literal, or an expression (`Duration` / `Option<Duration>`).
fn limit_tokens(limit: Option<&Limit>) -> TokenStream {
    match limit {
        None => quote!(::core::option::Option::None),
        Some(Limit::Literal(d)) => {
            let d = duration(*d);
            quote!(::core::option::Option::Some(#d))
        }
        Some(Limit::Expr(expr)) => {
            quote_spanned!(expr.span()=> ::nika_retry::__private::IntoLimit::into_limit(#expr))
        }
    }
}

/// The per-attempt limits, built as each attempt starts.
fn attempt_limits(timeouts: &Timeouts) -> TokenStream {
    let connect = limit_tokens(timeouts.connect.as_ref());
    let read = limit_tokens(timeouts.read.as_ref());
    let attempt = limit_tokens(timeouts.attempt.as_ref());
    quote! {
        ::nika_retry::__private::Timeouts {
            connect: #connect,
            read: #read,
            attempt: #attempt,
        }
    }
}

fn layer(layer: Layer) -> TokenStream {
    match layer {
        Layer::Http => quote!(::nika_retry::Layer::Http),
        Layer::Provider => quote!(::nika_retry::Layer::Provider),
        Layer::Tool => quote!(::nika_retry::Layer::Tool),
        Layer::Task => quote!(::nika_retry::Layer::Task),
    }
}

fn duration(d: Duration) -> TokenStream {
    let secs = Literal::u64_suffixed(d.as_secs());
    let nanos = Literal::u32_suffixed(d.subsec_nanos());
    quote!(::core::time::Duration::new(#secs, #nanos))
}

use quote::ToTokens as _;
