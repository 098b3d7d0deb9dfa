//! The values the expansion hands to the runtime: the fn's `Site` and its
//! limits. Each literal names only what the user wrote; the rest is
//! `..NONE`, which the runtime fills with the layer's defaults.

use std::time::Duration;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::super::plan::{Limit, Settings, Timeouts};
use crate::krate;
use crate::vocab::Layer;

/// The `&'static Site`: the layer defaults with the literals applied, in a
/// `const` of a block of its own, which the body cannot see.
pub(super) fn site(
    krate: &syn::Path,
    layer: Layer,
    settings: Option<&Settings>,
    name: &Ident,
) -> TokenStream {
    let mut fields = Vec::new();
    if let Some(s) = settings {
        let mut set = |field: &str, value: Option<TokenStream>| {
            if let Some(value) = value {
                let field = Ident::new(field, Span::call_site());
                fields.push(quote!(#field: ::core::option::Option::Some(#value)));
            }
        };
        set(
            "max_attempts",
            s.attempts
                .map(|n| Literal::u32_suffixed(n).into_token_stream()),
        );
        set("initial_backoff", s.backoff.map(duration));
        set("max_backoff", s.max_backoff.map(duration));
        set(
            "multiplier",
            s.multiplier
                .map(|m| Literal::f64_suffixed(m).into_token_stream()),
        );
        set(
            "jitter",
            s.jitter
                .map(|j| Literal::f32_suffixed(j).into_token_stream()),
        );
        set(
            "retry_on",
            s.on.as_ref()
                .map(|on| quote!(#krate::CategorySet::EMPTY #(.with(#krate::ErrorCategory::#on))*)),
        );
    }
    let overrides = thin(quote!(#krate::__private::Overrides), fields);
    let name = name.to_string();
    let site = Ident::new("__NIKA_SITE", Span::mixed_site());
    quote! {
        {
            const #site: &#krate::__private::Site = &#overrides
                .site(#krate::Layer::#layer, ::core::concat!(::core::module_path!(), "::", #name));
            #site
        }
    }
}

/// The per-attempt limits, built as each attempt starts.
pub(super) fn attempt_limits(krate: &syn::Path, timeouts: &Timeouts) -> TokenStream {
    let fields = [
        ("connect", &timeouts.connect),
        ("read", &timeouts.read),
        ("attempt", &timeouts.attempt),
    ]
    .into_iter()
    .filter_map(|(field, value)| {
        let value = value.as_ref()?;
        let field = Ident::new(field, Span::call_site());
        let value = limit(krate, Some(value));
        Some(quote!(#field: #value))
    })
    .collect();
    thin(quote!(#krate::__private::AttemptLimits), fields)
}

/// `Type::NONE`, or `Type { fields, ..Type::NONE }`.
fn thin(ty: TokenStream, fields: Vec<TokenStream>) -> TokenStream {
    if fields.is_empty() {
        quote!(#ty::NONE)
    } else {
        quote!(#ty { #(#fields,)* ..#ty::NONE })
    }
}

/// A limit: `None`, a literal, or an expression (`Duration` / `Option<Duration>`).
pub(super) fn limit(krate: &syn::Path, limit: Option<&Limit>) -> TokenStream {
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

fn duration(d: Duration) -> TokenStream {
    let secs = Literal::u64_suffixed(d.as_secs());
    let nanos = Literal::u32_suffixed(d.subsec_nanos());
    quote!(::core::time::Duration::new(#secs, #nanos))
}
