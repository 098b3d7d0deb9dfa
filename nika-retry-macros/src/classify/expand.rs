//! Generates the `Classify` impl from validated [`Rule`]s.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Generics, Ident, Type};

use super::ast::Input;
use super::valid::{HintUnit, Rule, Source};
use crate::krate;

pub(crate) fn expand(input: &Input, rules: &[Rule], krate: &syn::Path) -> TokenStream {
    // Located at the field's type, so a type error in a generated call points there.
    let bind = |ty: &Type| Ident::new("__nika_field", Span::mixed_site().located_at(ty.span()));
    let path = |rule: &Rule| match rule.variant {
        Some(v) => quote!(Self::#v),
        None => quote!(Self),
    };

    let category_arms = rules.iter().map(|rule| {
        let path = path(rule);
        match &rule.source {
            Source::Fixed(c) => quote!(#path { .. } => #krate::ErrorCategory::#c,),
            Source::HttpStatus(field) => {
                let (member, binding) = (&field.member, bind(field.ty));
                let k = krate::at(krate, field.ty.span());
                let call =
                    quote_spanned!(field.ty.span()=> #k::__private::status_category({ #binding }));
                quote!(#path { #member: #binding, .. } => #call,)
            }
            Source::Transparent(field) => {
                let (member, binding) = (&field.member, bind(field.ty));
                let k = krate::at(krate, field.ty.span());
                let call = quote_spanned!(field.ty.span()=> #k::Classify::category({ #binding }));
                quote!(#path { #member: #binding, .. } => #call,)
            }
            Source::Field(field, _) => {
                let (member, binding) = (&field.member, bind(field.ty));
                let call = super::from::call(krate, field.ty, &binding);
                quote!(#path { #member: #binding, .. } => #call,)
            }
        }
    });

    let mut hint_arms: Vec<TokenStream> = Vec::new();
    for rule in rules {
        let path = path(rule);
        let arm = match (&rule.source, &rule.hint) {
            (Source::Transparent(field), _) => {
                let (member, binding) = (&field.member, bind(field.ty));
                let k = krate::at(krate, field.ty.span());
                let call =
                    quote_spanned!(field.ty.span()=> #k::Classify::retry_after({ #binding }));
                quote!(#path { #member: #binding, .. } => #call,)
            }
            (_, Some((unit, field))) => {
                let (member, binding) = (&field.member, bind(field.ty));
                let helper = match unit {
                    HintUnit::Duration => "hint_duration",
                    HintUnit::Millis => "hint_millis",
                };
                let helper = Ident::new(helper, field.ty.span());
                let k = krate::at(krate, field.ty.span());
                let call = quote_spanned!(field.ty.span()=> #k::__private::#helper({ #binding }));
                quote!(#path { #member: #binding, .. } => #call,)
            }
            _ => continue,
        };
        hint_arms.push(arm);
    }
    if hint_arms.len() < rules.len() {
        hint_arms.push(quote!(_ => ::core::option::Option::None,));
    }

    let category_body = if rules.is_empty() {
        quote!(match *self {})
    } else {
        quote!(match self { #(#category_arms)* })
    };
    let hint_body = if rules.is_empty() {
        quote!(match *self {})
    } else {
        quote!(match self { #(#hint_arms)* })
    };

    let timeout = super::timeout::method(input, rules, krate);
    let reached = reached_method(rules, krate);
    let ident = input.ident;
    let generics = with_bounds(input.generics, rules, krate);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::Classify for #ident #ty_generics #where_clause {
            fn category(&self) -> #krate::ErrorCategory {
                #category_body
            }

            fn retry_after(&self) -> ::core::option::Option<::core::time::Duration> {
                #hint_body
            }

            #timeout

            #reached
        }
    }
}

/// `fn reached`: a variant's `reached = …`, its field's (`transparent`),
/// its status's (`http_status`); any other variant says what its timeout
/// says if it holds one (a `connect` limit never left), else what its
/// category does by default.
fn reached_method(rules: &[Rule], krate: &syn::Path) -> TokenStream {
    let bind = |ty: &Type| Ident::new("__nika_field", Span::mixed_site().located_at(ty.span()));
    let mut arms: Vec<TokenStream> = Vec::new();
    for rule in rules {
        let path = match rule.variant {
            Some(v) => quote!(Self::#v),
            None => quote!(Self),
        };
        let arm = match (&rule.source, rule.reached) {
            (_, Some(reach)) => quote!(#path { .. } => #krate::Reached::#reach,),
            (Source::Transparent(field), None) => {
                let (member, binding) = (&field.member, bind(field.ty));
                let k = krate::at(krate, field.ty.span());
                let call = quote_spanned!(field.ty.span()=> #k::Classify::reached({ #binding }));
                quote!(#path { #member: #binding, .. } => #call,)
            }
            (Source::HttpStatus(field) | Source::Field(_, Some(field)), None) => {
                let (member, binding) = (&field.member, bind(field.ty));
                let k = krate::at(krate, field.ty.span());
                let call =
                    quote_spanned!(field.ty.span()=> #k::__private::status_reached({ #binding }));
                quote!(#path { #member: #binding, .. } => #call,)
            }
            _ => continue,
        };
        arms.push(arm);
    }
    if arms.len() < rules.len() {
        arms.push(quote! {
            _ => match #krate::Classify::timeout(self) {
                ::core::option::Option::Some(timeout) => #krate::Classify::reached(timeout),
                ::core::option::Option::None => {
                    #krate::Reached::default_for(#krate::Classify::category(self))
                }
            },
        });
    }
    let body = if rules.is_empty() {
        quote!(match *self {})
    } else {
        quote!(match self { #(#arms)* })
    };
    quote! {
        fn reached(&self) -> #krate::Reached {
            #body
        }
    }
}

/// The type's generics plus `Field: Classify` for each transparent field whose type uses a type parameter.
fn with_bounds(generics: &Generics, rules: &[Rule], krate: &syn::Path) -> Generics {
    let params: Vec<&Ident> = generics.type_params().map(|p| &p.ident).collect();
    let mut generics = generics.clone();
    for rule in rules {
        if let Source::Transparent(field) = &rule.source {
            if mentions_any(field.ty, &params) {
                let ty = field.ty;
                generics.make_where_clause().predicates.push({
                    let krate = krate::at(krate, ty.span());
                    syn::parse_quote_spanned!(ty.span()=> #ty: #krate::Classify)
                });
            }
        }
    }
    generics
}

fn mentions_any(ty: &Type, params: &[&Ident]) -> bool {
    fn walk(tokens: TokenStream, params: &[&Ident]) -> bool {
        tokens.into_iter().any(|tree| match tree {
            proc_macro2::TokenTree::Ident(i) => params.iter().any(|p| **p == i),
            proc_macro2::TokenTree::Group(g) => walk(g.stream(), params),
            _ => false,
        })
    }
    walk(quote!(#ty), params)
}

/// The impl emitted beside the errors, so that uses of the type do not add a cascade of their own.
pub(crate) fn fallback(input: &syn::DeriveInput, krate: &syn::Path) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::Classify for #ident #ty_generics #where_clause {
            fn category(&self) -> #krate::ErrorCategory {
                ::core::unreachable!()
            }
        }
    }
}
