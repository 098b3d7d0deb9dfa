//! Generates the retry loop from a validated [`Plan`]. Cannot fail.
//!
//! The shape, for `async fn f(args) -> R { body }`:
//!
//! ```text
//! async fn f(args) -> R {
//!     let mut call = Call::new({ const SITE: &Site = &Overrides { .. }.site(layer, "f"); SITE }, total);
//!     loop {
//!         let delay = {
//!             let arg = arg.clone();                  // for each clone(arg)
//!             let result = call.attempt(async {       // or call.timed(limits, …)
//!                 if let Some(ret) = None::<R> { return ret; } // pins the output to R
//!                 body
//!             }).await;
//!             match call.next(&result, || config, self_type) {
//!                 Some(delay) => delay,
//!                 None => return result,
//!             }
//!         };
//!         sleep(delay).await;
//!     }
//! }
//! ```
//!
//! `#[timeout]` alone runs the same `async` block once:
//! `once(site, total, limits, async { … }, into_error).await`.
//!
//! The body stays a non-`move` `async` block, so it can borrow `&mut self`
//! and the arguments afresh on every attempt; the user's signature, docs and
//! attributes are re-emitted untouched. Every generated local is named with
//! `Span::mixed_site()` and the `const` lives in a block of its own, so
//! nothing generated is reachable from the body.

use std::time::Duration;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, Signature, Stmt, Type};

use super::item::{self, Body, SelfArg};
use super::validate::{Category, Layer, Limit, Plan, Settings, Timeouts};
use crate::krate;

pub(crate) fn expand(plan: Plan) -> TokenStream {
    let Plan {
        item,
        mut body,
        output,
        layer,
        settings,
        timeouts,
        alone,
        absorbed,
        params,
        krate,
    } = plan;
    let ItemFn {
        attrs,
        vis,
        mut sig,
        block,
    } = item;
    // A cloned argument is re-bound per attempt (`let mut x = x.clone()`), so
    // the binding it came from no longer needs `mut`: drop it there to avoid
    // an unused-mut warning on the user's signature.
    for (name, _) in settings.clones.iter().filter(|(_, is_mut)| *is_mut) {
        unmut(&mut sig, &mut body, name);
    }
    // `self` cannot be bound again: the body of a native `async fn` names
    // each attempt's clone of it by another name, as async-trait's does.
    // `(binding, source)`: each attempt's clone of `self`, and what it clones.
    let self_alias = match &params.receiver {
        Some(SelfArg::ByValue { alias, .. })
            if settings.clones.iter().any(|(n, _)| n == "self") =>
        {
            Some(match alias {
                Some(alias) => (alias.clone(), alias.to_token_stream()),
                // Validation has renamed `self` in the body.
                None => (item::self_alias(), quote!(self)),
            })
        }
        _ => None,
    };

    let call = Ident::new("__nika_call", Span::mixed_site());
    let delay = Ident::new("__nika_delay", Span::mixed_site());
    let ret = Ident::new("__nika_ret", Span::mixed_site());

    let total = limit_tokens(&krate, timeouts.as_ref().and_then(|t| t.total.as_ref()));
    let site = site(&krate, layer, &settings, &sig.ident);
    // Evaluated only when an attempt fails, in a closure handed to `next`.
    let config = match &settings.config {
        Some(expr) => {
            let krate = krate::at(&krate, expr.span());
            quote_spanned!(expr.span()=> || #krate::__private::IntoConfig::into_config(#expr))
        }
        None => quote!(#krate::__private::NO_CONFIG),
    };
    let clones = settings.clones.iter().map(|(name, is_mut)| {
        let mutability = is_mut.then(|| quote!(mut));
        match (&self_alias, name == "self") {
            (Some((alias, source)), true) => {
                quote_spanned!(name.span()=> let #mutability #alias = ::core::clone::Clone::clone(&#source);)
            }
            _ => quote_spanned!(name.span()=> let #mutability #name = ::core::clone::Clone::clone(&#name);),
        }
    });
    // The first statement pins the block's output to the fn's return type, as
    // a plain `async fn` has it, so that the tail and every `return` coerce
    // to it (`&String` to `&str`, `Box<T>` to `Box<dyn Trait>`) and `?` infers.
    let pin_output = quote! {
        if let ::core::option::Option::Some(#ret) = ::core::option::Option::None::<#output> {
            #[allow(unreachable_code)]
            return #ret;
        }
    };
    let attempt_block = match &body {
        // The block's statements, not the block: as the tail of the async
        // block, a one-line body `{ Ok(x) }` would get rustc's unused-braces
        // warning on the user's own braces.
        Body::Async => {
            let stmts = &block.stmts;
            quote!(async { #pin_output #(#stmts)* })
        }
        Body::AsyncTrait { rest, .. } => quote!(async { #pin_output #(#rest)* }),
    };
    // Spanned at the error type of `Result<T, E>` (or at the return type),
    // so that a missing `Classify` or `From<TimeoutError>` is reported there.
    let span = error_type(&output).unwrap_or(&output).span();
    let result = Ident::new("__nika_result", Span::mixed_site().located_at(span));
    // The receiver is located there too: a method call's error is reported at its first token.
    let call_at = Ident::new("__nika_call", Span::mixed_site().located_at(span));
    let attempt = match &timeouts {
        Some(timeouts) => {
            let limits = attempt_limits(&krate, timeouts);
            quote_spanned!(span=> #call_at.timed(#limits, #attempt_block))
        }
        None => quote_spanned!(span=> #call_at.attempt(#attempt_block)),
    };
    // A method names its impl's type in the events.
    let self_type = match sig.receiver() {
        Some(_) => quote!(::core::option::Option::Some(
            ::core::any::type_name::<Self> as fn() -> &'static str
        )),
        None => quote!(::core::option::Option::None),
    };
    // A braced argument: its span is the user's, where rustc reports a bound on it.
    let next = quote_spanned!(span=> #call_at.next({ &#result }, #config, #self_type));

    let keep_imports = absorbed.iter().map(item::keep_import);
    let run = if alone {
        // `#[timeout]` alone: one run under the limits, no loop.
        let limits = attempt_limits(&krate, timeouts.as_ref().unwrap_or(&Timeouts::default()));
        let krate_at = krate::at(&krate, span);
        // Named at the error type, where a missing `From<TimeoutError>` is reported.
        let into_error = quote_spanned!(span=> #krate_at::__private::FromTimeout::from_timeout);
        quote! {
            #(#keep_imports)*
            #krate::__private::once(#site, #total, #limits, #attempt_block, #into_error).await
        }
    } else {
        quote! {
            #(#keep_imports)*
            let mut #call = #krate::__private::Call::new(#site, #total);
            loop {
                let #delay = {
                    #(#clones)*
                    let #result = #attempt.await;
                    match #next {
                        ::core::option::Option::Some(#delay) => #delay,
                        ::core::option::Option::None => return #result,
                    }
                };
                #krate::__private::sleep(#delay).await;
            }
        }
    };
    let new_body = match body {
        Body::Async => run,
        Body::AsyncTrait { prologue, .. } => quote! {
            ::std::boxed::Box::pin(async move {
                #(#prologue)*
                #run
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

/// Removes `mut` from the binding `name` (`self` for the receiver): in the
/// signature, or in the `#[async_trait]` prologue that moves it into the future.
fn unmut(sig: &mut Signature, body: &mut Body, name: &Ident) {
    for input in &mut sig.inputs {
        match input {
            FnArg::Typed(typed) => item::unmut(&mut typed.pat, name),
            FnArg::Receiver(receiver) if name == "self" => receiver.mutability = None,
            FnArg::Receiver(_) => {}
        }
    }
    if let Body::AsyncTrait { prologue, .. } = body {
        for stmt in prologue {
            let Stmt::Local(local) = stmt else { continue };
            let moves_self = item::moves_self(local);
            match &mut local.pat {
                Pat::Ident(p) if moves_self && name == "self" => p.mutability = None,
                _ if moves_self => {}
                pat => item::unmut(pat, name),
            }
        }
    }
}

/// The `&'static Site`: the layer defaults with the literals applied, in a
/// `const` of a block of its own, which the body cannot see.
fn site(krate: &syn::Path, layer: Layer, settings: &Settings, name: &Ident) -> TokenStream {
    let layer = layer_tokens(krate, layer);
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
        quote!(#krate::CategorySet::EMPTY #(.with(#krate::ErrorCategory::#names))*)
    }));
    let name = name.to_string();
    let site = Ident::new("__NIKA_SITE", Span::mixed_site());
    quote! {
        {
            const #site: &#krate::__private::Site = &#krate::__private::Overrides {
                max_attempts: #attempts,
                initial_backoff: #backoff,
                max_backoff: #max_backoff,
                multiplier: #multiplier,
                jitter: #jitter,
                retry_on: #on,
            }
            .site(#layer, ::core::concat!(::core::module_path!(), "::", #name));
            #site
        }
    }
}

/// A limit: `None`, a literal, or an expression (`Duration` / `Option<Duration>`).
fn limit_tokens(krate: &syn::Path, limit: Option<&Limit>) -> TokenStream {
    match limit {
        None => quote!(::core::option::Option::None),
        Some(Limit::Literal(d)) => {
            let d = duration(*d);
            quote!(::core::option::Option::Some(#d))
        }
        Some(Limit::Expr(expr)) => {
            let krate = krate::at(krate, expr.span());
            quote_spanned!(expr.span()=> #krate::__private::IntoLimit::into_limit(#expr))
        }
    }
}

/// The per-attempt limits, built as each attempt starts.
fn attempt_limits(krate: &syn::Path, timeouts: &Timeouts) -> TokenStream {
    let connect = limit_tokens(krate, timeouts.connect.as_ref());
    let read = limit_tokens(krate, timeouts.read.as_ref());
    let attempt = limit_tokens(krate, timeouts.attempt.as_ref());
    quote! {
        #krate::__private::Timeouts {
            connect: #connect,
            read: #read,
            attempt: #attempt,
        }
    }
}

fn layer_tokens(krate: &syn::Path, layer: Layer) -> TokenStream {
    let variant = match layer {
        Layer::Http => quote!(Http),
        Layer::Provider => quote!(Provider),
        Layer::Tool => quote!(Tool),
        Layer::Task => quote!(Task),
    };
    quote!(#krate::Layer::#variant)
}

fn duration(d: Duration) -> TokenStream {
    let secs = Literal::u64_suffixed(d.as_secs());
    let nanos = Literal::u32_suffixed(d.subsec_nanos());
    quote!(::core::time::Duration::new(#secs, #nanos))
}

use quote::ToTokens as _;
