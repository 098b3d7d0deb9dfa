//! Parses `#[category(...)]` into raw, spanned items.

use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Ident, Token};

use crate::errors::Errors;
use crate::krate;

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
    /// `crate = "path"`.
    Str(syn::LitStr),
}

impl Parse for Item {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key = input.call(Ident::parse_any)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            let lookahead = input.lookahead1();
            Some(if lookahead.peek(syn::LitInt) {
                Value::Index(input.parse()?)
            } else if lookahead.peek(syn::LitStr) {
                Value::Str(input.parse()?)
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

/// `crate = "path"` in the type's own `#[category(...)]`, else
/// `::nika_retry`; a malformed or repeated one is reported into `errors`
/// (and the default is returned, for the fallback impl). Attributes that do
/// not parse are left to validation to report.
pub(crate) fn crate_path(attrs: &[Attribute], errors: &mut Errors) -> syn::Path {
    let mut found: Option<syn::Path> = None;
    let mut given = false;
    let items = category_attrs(attrs).into_iter().flatten();
    for item in items.flat_map(|(_, items)| items) {
        if item.key != "crate" {
            continue;
        }
        if std::mem::replace(&mut given, true) {
            errors.spanned(&item.key, "`crate` is set twice; keep one");
            continue;
        }
        found = match &item.value {
            Some(Value::Str(s)) => errors.take(krate::from_lit(s)),
            _ => {
                errors.spanned(&item.key, krate::NOT_A_STRING);
                None
            }
        };
    }
    found.unwrap_or_else(krate::default)
}
