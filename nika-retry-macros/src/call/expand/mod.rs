//! Generates the run of the body from a validated [`Plan`]. Cannot fail.
//!
//! `#[retry]` (beside a `#[timeout]` or not) loops, for
//! `async fn f(args) -> R { body }`:
//!
//! ```text
//! async fn f(args) -> R {
//!     let mut call = Call::new({ const SITE: &Site = &Overrides { .., ..NONE }.site(layer, "f"); SITE });
//!     // with #[timeout]: TimedCall::new(SITE, total), which adds what the limits share
//!     call.said_idempotent(|| idempotent);        // for idempotent = …, once per call
//!     loop {
//!         let until = {
//!             let result = {
//!                 let arg = arg.clone();              // for each clone(arg)
//!                 let result = call.attempt(async {   // or call.timed(limits, …, from_timeout)
//!                     if let Some(ret) = None::<R> { return ret; } // pins the output to R
//!                     body
//!                 }).await;
//!                 result
//!             }; // the clones end here: `config` reads the caller's arguments
//!             match call.next(&result, || config, self_type) {
//!                 Some(until) => until,                // the backoff from the failure's clock read
//!                 None => return result,
//!             }
//!         };
//!         sleep(until).await;
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

mod literals;

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    Block, FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, Signature, Stmt, Type,
};

use super::attrs;
use super::body::Body;
use super::params::{self, Params, SelfArg};
use super::plan::{Plan, Run, Settings, Timeouts};
use super::receiver;
use crate::krate;

pub(crate) fn expand(plan: Plan) -> TokenStream {
    let Plan {
        item,
        mut body,
        output,
        layer,
        run,
        absorbed,
        params,
        krate,
    } = plan;
    let ItemFn {
        attrs,
        vis,
        mut sig,
        mut block,
    } = item;
    // Spanned at the error type of `Result<T, E>` (or at the return type),
    // so that a missing `Classify` or `From<TimeoutError>` is reported there.
    let at = name_span(error_type(&output).unwrap_or(&output));
    let run = match &run {
        Run::Loop {
            settings,
            timeouts,
            moved,
        } => {
            let clones = clones(settings, &params, &mut sig, &mut body, &mut block);
            let common = Common {
                krate: &krate,
                at,
                site: literals::site(&krate, layer, Some(settings), &sig.ident),
                attempt: attempt_block(&body, &block, &output),
            };
            let is_method = sig.receiver().is_some();
            let checks = moved.iter().map(|arg| {
                let krate = krate::at(&krate, arg.span());
                quote_spanned!(arg.span()=> #krate::__private::MovedByEachAttempt::moved_by_each_attempt(|| &#arg);)
            });
            let streamed = names_started(&output);
            let run = retry_loop(
                common,
                settings,
                timeouts.as_ref(),
                clones,
                is_method,
                streamed,
            );
            quote!(#(#checks)* #run)
        }
        Run::Once(timeouts) => {
            let common = Common {
                krate: &krate,
                at,
                site: literals::site(&krate, layer, None, &sig.ident),
                attempt: attempt_block(&body, &block, &output),
            };
            once(common, timeouts, names_started(&output))
        }
    };
    let keep_imports = absorbed.iter().map(attrs::keep_import);
    let run = quote!(#(#keep_imports)* #run);
    let new_body = match body {
        Body::Async => run,
        Body::AsyncTrait { prologue, .. } => quote! {
            ::std::boxed::Box::pin(async move {
                #(#prologue)*
                #run
            })
        },
    };
    let mut out = quote!(#(#attrs)* #vis #sig);
    block
        .brace_token
        .surround(&mut out, |tokens| tokens.extend(new_body));
    out
}

/// What the loop and the single run share.
struct Common<'a> {
    krate: &'a syn::Path,
    /// The error type's span, where rustc reports a bound the error type misses.
    at: Span,
    /// The `&'static Site` of the fn.
    site: TokenStream,
    /// The body as a non-`move` `async` block, its output pinned to the fn's.
    attempt: TokenStream,
}

/// `#[retry]`: the loop of attempts, each with its clones of `clone(…)`.
fn retry_loop(
    common: Common,
    settings: &Settings,
    timeouts: Option<&Timeouts>,
    clones: Vec<TokenStream>,
    is_method: bool,
    streamed: bool,
) -> TokenStream {
    let Common {
        krate,
        at,
        site,
        attempt,
    } = common;
    let call = Ident::new("__nika_call", Span::mixed_site());
    let until = Ident::new("__nika_until", Span::mixed_site());
    // With an upstream, each attempt has it in force for `upstream::current()`.
    let attempt = match &settings.upstream {
        Some(_) => {
            let turn = Ident::new("__nika_turn", Span::mixed_site());
            quote!(#krate::__private::WithUpstream::new(&#turn, #attempt))
        }
        None => attempt,
    };
    let result = Ident::new("__nika_result", Span::mixed_site().located_at(at));
    // The receiver is located at the error type too: a method call's error
    // is reported at its first token.
    let call_at = Ident::new("__nika_call", Span::mixed_site().located_at(at));
    // A fn that returns a started stream has its frame in force from the
    // first poll (`streamed`); any other asks for it only if a stream does.
    let new = if streamed {
        quote!(streamed)
    } else {
        quote!(new)
    };
    // Only a fn with `#[timeout]` holds what its time limits share.
    let (new_call, attempt) = match timeouts {
        Some(timeouts) => {
            let total = literals::limit(krate, timeouts.total.as_ref());
            let limits = literals::attempt_limits(krate, timeouts);
            let into_error = into_error(krate, at);
            (
                quote!(#krate::__private::TimedCall::#new(#site, #total)),
                quote_spanned!(at=> #call_at.timed(#limits, #attempt, #into_error)),
            )
        }
        None => (
            quote!(#krate::__private::Call::#new(#site)),
            quote_spanned!(at=> #call_at.attempt(#attempt)),
        ),
    };
    // Evaluated only when an attempt fails, in a closure handed to `next`.
    let config = match &settings.config {
        Some(expr) => {
            let krate = krate::at(krate, expr.span());
            quote_spanned!(expr.span()=> || #krate::__private::IntoConfig::into_config(#expr))
        }
        None => quote!(#krate::__private::NO_CONFIG),
    };
    // A method names its impl's type in the events.
    let self_type = if is_method {
        quote!(::core::option::Option::Some(
            ::core::any::type_name::<Self> as fn() -> &'static str
        ))
    } else {
        quote!(::core::option::Option::None)
    };
    // A braced argument: its span is the user's, where rustc reports a bound on it.
    let (upstream, pass, next) = match &settings.upstream {
        None => (
            None,
            TokenStream::new(),
            quote_spanned!(at=> #call_at.next({ &#result }, #config, #self_type)),
        ),
        Some(upstream) => {
            let (upstream, pass, turn) =
                upstream_pass(krate, at, &call, upstream, settings.cost.as_ref());
            let next = quote_spanned!(at=>
                #call_at.next_after(&mut #turn, { &#result }, #config, #self_type)
            );
            (Some(upstream), pass, next)
        }
    };
    // Evaluated once per call, before any clone of `clone(…)` shadows an
    // argument it reads, so that the calls nested in every attempt know it.
    let idempotent = settings.idempotent.as_ref().map(|expr| {
        // `-> bool`: a value of another type is reported at the expression
        // as "expected `bool`"; the braces this needs are not the user's.
        quote_spanned! {expr.span()=>
            #[allow(unused_braces)]
            #call.said_idempotent(|| -> bool { #expr });
        }
    });
    // The clones live in a block of their own around the attempt: `config`
    // (and the upstream, the idempotence, evaluated before) read the
    // caller's arguments, never a clone the body moved.
    let attempt = if clones.is_empty() {
        quote!(#attempt.await)
    } else {
        quote!({
            #(#clones)*
            let #result = #attempt.await;
            #result
        })
    };
    let attempts = quote! {
        loop {
            #pass
            let #until = {
                let #result = #attempt;
                match #next {
                    ::core::option::Option::Some(#until) => #until,
                    ::core::option::Option::None => return #result,
                }
            };
            #krate::__private::sleep(#until).await;
        }
    };
    // The upstream, evaluated once per call, is bound for the loop by a
    // `match`: its scrutinee's temporaries (`self.upstream.clone()`) live
    // to the end of the `match`, as long as the loop.
    let attempts = match upstream {
        Some(UpstreamOnce { upstream, value }) => quote! {
            match #upstream {
                mut #value => #attempts
            }
        },
        None => attempts,
    };
    quote! {
        let mut #call = #new_call;
        #idempotent
        #attempts
    }
}

/// `upstream = EXPR` as the call's place at it (an `AtUpstream`),
/// evaluated once per call, and the name it is bound to for the loop.
struct UpstreamOnce {
    upstream: TokenStream,
    value: Ident,
}

/// `upstream = EXPR`: the upstream, evaluated once per call, and each
/// attempt's pass through it, which returns `Held` through the error
/// type's `From<Held>` when the hold is longer than the call waits.
/// Returns the two and the turn's name (the loop's binding).
fn upstream_pass(
    krate: &syn::Path,
    at: Span,
    call: &Ident,
    upstream: &syn::Expr,
    cost: Option<&syn::Expr>,
) -> (UpstreamOnce, TokenStream, Ident) {
    let turn = Ident::new("__nika_turn", Span::mixed_site());
    let held = Ident::new("__nika_held", Span::mixed_site());
    // A value of the wrong type is reported at the expression the user
    // wrote: the bound's argument is `&(EXPR)`, its `&` spanned at the
    // expression's first token and its parentheses at its last, all of the
    // user's hygiene (a generated name in it would widen rustc's span to
    // the whole attribute).
    let tokens = upstream.to_token_stream();
    let first = tokens
        .clone()
        .into_iter()
        .next()
        .map_or_else(|| upstream.span(), |token| token.span());
    let last = tokens
        .into_iter()
        .last()
        .map_or(first, |token| token.span());
    let mut parenthesised = proc_macro2::Group::new(
        proc_macro2::Delimiter::Parenthesis,
        upstream.to_token_stream(),
    );
    parenthesised.set_span(last);
    let at_expr = krate::at(krate, first);
    let as_upstream = quote_spanned!(first=>
        #at_expr::__private::AsUpstream::as_upstream(&#parenthesised)
    );
    let private = quote!(#krate::__private);
    // The call's turn, idle between attempts: an open upstream's attempt
    // writes nothing to it.
    let turn_at = match cost {
        None => quote!(#private::AtUpstream::new(#as_upstream)),
        // `cost = EXPR`, evaluated once per call; a value of the wrong type
        // is reported at the expression, by `IntoCost`'s bound.
        Some(cost) => {
            let at_cost = krate::at(krate, cost.span());
            // A bare integer (`cost = 200`) would fall back to `i32`, which
            // `IntoCost` refuses: a literal without a suffix is a `u32`.
            let bare_integer = matches!(
                cost,
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(int), .. }) if int.suffix().is_empty()
            );
            let cost = if bare_integer {
                quote_spanned!(cost.span()=> <u32 as #at_cost::__private::IntoCost>::into_cost(#cost))
            } else {
                quote_spanned!(cost.span()=> #at_cost::__private::IntoCost::into_cost(#cost))
            };
            quote!(#private::AtUpstream::with_cost(#as_upstream, #cost))
        }
    };
    let at_error = krate::at(krate, at);
    let from_held = quote_spanned!(at=> #at_error::__private::FromHeld::from_held(#held));
    // An attempt admitted at once starts without a future; one refused
    // until an instant after the wait.
    let until = Ident::new("__nika_admitted_at", Span::mixed_site());
    let pass = quote! {
        if let ::core::option::Option::Some(#until) = #turn.admit() {
            match #call.wait_at(&mut #turn, #until).await {
                ::core::result::Result::Ok(()) => {}
                ::core::result::Result::Err(#held) => {
                    return ::core::result::Result::Err(#from_held);
                }
            }
        }
    };
    let once = UpstreamOnce {
        upstream: turn_at,
        value: turn.clone(),
    };
    (once, pass, turn)
}

/// `#[timeout]` alone: one run under the limits, no loop; `streamed`: the
/// fn returns a `Started`, so its frame is in force from the first poll.
fn once(common: Common, timeouts: &Timeouts, streamed: bool) -> TokenStream {
    let Common {
        krate,
        at,
        site,
        attempt,
    } = common;
    let total = literals::limit(krate, timeouts.total.as_ref());
    let limits = literals::attempt_limits(krate, timeouts);
    let into_error = into_error(krate, at);
    let streamed = streamed.then(|| quote!(.streamed()));
    quote! {
        #krate::__private::once(#site, #total, #limits, #attempt, #into_error) #streamed .await
    }
}

/// `FromTimeout::from_timeout`, which turns an expiry into the fn's error,
/// named at the error type: a missing `From<TimeoutError>` is reported
/// there, with the message that says what to add, and nowhere in the runtime.
fn into_error(krate: &syn::Path, at: Span) -> TokenStream {
    let krate = krate::at(krate, at);
    quote_spanned!(at=> #krate::__private::FromTimeout::from_timeout)
}

/// The body as a non-`move` `async` block. Its first statement pins the
/// block's output to the fn's return type, as a plain `async fn` has it, so
/// that the tail and every `return` coerce to it (`&String` to `&str`,
/// `Box<T>` to `Box<dyn Trait>`) and `?` infers.
fn attempt_block(body: &Body, block: &Block, output: &Type) -> TokenStream {
    let ret = Ident::new("__nika_ret", Span::mixed_site());
    let pin_output = quote! {
        if let ::core::option::Option::Some(#ret) = ::core::option::Option::None::<#output> {
            #[allow(unreachable_code)]
            return #ret;
        }
    };
    // The block's statements, not the block: as the tail of the async
    // block, a one-line body `{ Ok(x) }` would get rustc's unused-braces
    // warning on the user's own braces.
    let stmts = match body {
        Body::Async => &block.stmts,
        Body::AsyncTrait { rest, .. } => rest,
    };
    quote!(async { #pin_output #(#stmts)* })
}

/// The statements that bind each attempt's clones of `clone(…)`. A cloned
/// `mut` binding is re-bound `mut` per attempt, so the binding it came from
/// loses its `mut` (no unused-mut warning on the user's signature); a cloned
/// `self` in a native `async fn` is renamed in the body, since `self`
/// cannot be bound again, as async-trait's `__self`.
fn clones(
    settings: &Settings,
    params: &Params,
    sig: &mut Signature,
    body: &mut Body,
    block: &mut Block,
) -> Vec<TokenStream> {
    for cloned in settings.clones.iter().filter(|c| c.was_mut) {
        unmut(sig, body, &cloned.name);
    }
    // `(binding, source)`: each attempt's clone of `self`, and what it clones.
    let self_clone = match (&params.receiver, settings.clone_of_self()) {
        (Some(SelfArg::ByValue { alias, .. }), Some(_)) => Some(match alias {
            Some(alias) => (alias.clone(), alias.to_token_stream()),
            None => {
                receiver::rename_self(block);
                (receiver::self_alias(), quote!(self))
            }
        }),
        _ => None,
    };
    settings
        .clones
        .iter()
        .map(|cloned| {
            let name = &cloned.name;
            let mutability = cloned.was_mut.then(|| quote!(mut));
            match &self_clone {
                Some((alias, source)) if name == "self" => quote_spanned! {name.span()=>
                    let #mutability #alias = ::core::clone::Clone::clone(&#source);
                },
                _ => quote_spanned! {name.span()=>
                    let #mutability #name = ::core::clone::Clone::clone(&#name);
                },
            }
        })
        .collect()
}

/// The span of the type's name: the last segment of a path (`Error` in
/// `std::fmt::Error`), else its first token (a span cannot cover several
/// tokens on stable Rust).
fn name_span(ty: &Type) -> Span {
    match ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .map_or_else(|| ty.span(), |segment| segment.ident.span()),
        _ => ty.span(),
    }
}

/// Whether a type names `Started` (`Result<Started<S>, E>`, `Started<S>`
/// nested in any generic argument): the fn returns a stream it started, so
/// its call puts its frame in force from the first poll. An alias that hides
/// it is only the slower path: the stream then asks for the frame.
fn names_started(ty: &Type) -> bool {
    let Type::Path(path) = ty else {
        return false;
    };
    path.path.segments.iter().any(|segment| {
        segment.ident == "Started"
            || match &segment.arguments {
                PathArguments::AngleBracketed(args) => args.args.iter().any(|arg| match arg {
                    GenericArgument::Type(inner) => names_started(inner),
                    _ => false,
                }),
                _ => false,
            }
    })
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
            FnArg::Typed(typed) => params::unmut(&mut typed.pat, name),
            FnArg::Receiver(receiver) if name == "self" => receiver.mutability = None,
            FnArg::Receiver(_) => {}
        }
    }
    if let Body::AsyncTrait { prologue, .. } = body {
        for stmt in prologue {
            let Stmt::Local(local) = stmt else { continue };
            let moves_self = params::moves_self(local);
            match &mut local.pat {
                Pat::Ident(p) if moves_self && name == "self" => p.mutability = None,
                _ if moves_self => {}
                pat => params::unmut(pat, name),
            }
        }
    }
}
