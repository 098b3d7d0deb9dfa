//! `Classify::timeout` of a derived type: the variants that hold a
//! `TimeoutError`, found by delegation (`transparent`) or by their one field.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Fields, Ident, Member, Type};

use super::ast::{Input, Shape};
use super::valid::{Rule, Source};
use crate::krate;

/// The `fn timeout` of the impl, or nothing (the trait's `None`) when no
/// variant can hold a timeout.
pub(crate) fn method(input: &Input, rules: &[Rule], krate: &syn::Path) -> TokenStream {
    let arms: Vec<TokenStream> = rules
        .iter()
        .filter_map(|rule| arm(input, rule, krate))
        .collect();
    if arms.is_empty() {
        return TokenStream::new();
    }
    let rest = (arms.len() < rules.len()).then(|| quote!(_ => ::core::option::Option::None,));
    quote! {
        fn timeout(&self) -> ::core::option::Option<&#krate::TimeoutError> {
            match self { #(#arms)* #rest }
        }
    }
}

fn arm(input: &Input, rule: &Rule, krate: &syn::Path) -> Option<TokenStream> {
    let path = match rule.variant {
        Some(v) => quote!(Self::#v),
        None => quote!(Self),
    };
    let (member, ty, call) = match &rule.source {
        Source::Transparent(field) => {
            let k = krate::at(krate, field.ty.span());
            let binding = binding(field.ty);
            let call = quote_spanned!(field.ty.span()=> #k::Classify::timeout({ #binding }));
            (field.member.clone(), field.ty, call)
        }
        _ => {
            let (member, ty) = timeout_field(fields_of(input, rule.variant)?)?;
            let k = krate::at(krate, ty.span());
            let binding = binding(ty);
            // Another crate's type of that name gives `None`, as before. One
            // of the two traits goes unused: the import is the macro's, so
            // that the lint never points at the user's field.
            let site = Span::mixed_site();
            let import = quote_spanned! {site=>
                #[allow(unused_imports)]
                use #krate::__private::{NotOurTimeout as _, OurTimeout as _};
            };
            let call = quote_spanned! {ty.span()=> {
                #import
                (&&#k::__private::TimeoutProbe(#binding)).timeout_field()
            }};
            (member, ty, call)
        }
    };
    let binding = binding(ty);
    Some(quote!(#path { #member: #binding, .. } => #call,))
}

/// Named as the other methods name a field, at its type for error spans.
fn binding(ty: &Type) -> Ident {
    Ident::new("__nika_field", Span::mixed_site().located_at(ty.span()))
}

/// The fields of `variant` (`None`: the struct's).
fn fields_of<'a>(input: &Input<'a>, variant: Option<&Ident>) -> Option<&'a Fields> {
    match &input.shape {
        Shape::Struct(body) => Some(body.fields),
        Shape::Enum(variants) => variants
            .iter()
            .find(|v| v.ident == variant)
            .map(|v| v.fields),
    }
}

/// The one field, if there is exactly one and its type is written
/// `TimeoutError` (any path ending so, without generics).
fn timeout_field(fields: &Fields) -> Option<(Member, &Type)> {
    let mut iter = fields.iter();
    let (field, None) = (iter.next()?, iter.next()) else {
        return None;
    };
    let Type::Path(path) = &field.ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    if path.qself.is_some() || last.ident != "TimeoutError" || !last.arguments.is_none() {
        return None;
    }
    let member = field
        .ident
        .clone()
        .map_or(Member::Unnamed(0.into()), Member::Named);
    Some((member, &field.ty))
}
