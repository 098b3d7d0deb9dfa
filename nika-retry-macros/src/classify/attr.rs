//! Parses `#[category(...)]` into raw, spanned items.

use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Ident, Token};

/// One item of `#[category(...)]`: a bare `flag` or `key = value`.
pub(crate) struct Item {
    pub(crate) key: Ident,
    /// A field name, a tuple index or a category name.
    pub(crate) value: Option<Value>,
}

/// The right-hand side of `key = value`.
pub(crate) enum Value {
    Ident(Ident),
    Index(syn::LitInt),
}

impl Parse for Item {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key = input.call(Ident::parse_any)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            let lookahead = input.lookahead1();
            Some(if lookahead.peek(syn::LitInt) {
                Value::Index(input.parse()?)
            } else if lookahead.peek(Ident::peek_any) {
                Value::Ident(input.call(Ident::parse_any)?)
            } else {
                return Err(lookahead.error());
            })
        } else {
            None
        };
        Ok(Item { key, value })
    }
}

/// Every `#[category(...)]` on an enum, variant or struct, with the attribute kept for spans.
pub(crate) fn category_attrs(attrs: &[Attribute]) -> Vec<syn::Result<(&Attribute, Vec<Item>)>> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("category"))
        .map(|attr| {
            let items = attr.parse_args_with(Punctuated::<Item, Token![,]>::parse_terminated)?;
            Ok((attr, items.into_iter().collect()))
        })
        .collect()
}
