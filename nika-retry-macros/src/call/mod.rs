//! `#[retry]` and `#[timeout]`: one expansion for both, whichever is written first.
//!
//! The outer attribute runs first and absorbs the other from the fn's
//! attributes, so the order in which they are written does not matter.

mod attrs;
mod body;
mod expand;
mod moves;
mod params;
mod parse;
mod plan;
mod receiver;
mod validate;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::ItemFn;

pub(crate) use attrs::Kind;

use crate::errors::with_fallback;

/// Expands `#[retry(args)]` or `#[timeout(args)]` on `input`.
pub(crate) fn expand(kind: Kind, args: TokenStream, input: TokenStream) -> TokenStream {
    let item: ItemFn = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(error) => return with_fallback(not_a_fn(kind, &input).unwrap_or(error), input),
    };
    let args = syn::parse2::<parse::Args>(args);
    // Other crates' `retry` / `timeout` attributes are told apart by the crate path.
    let krate = args.as_ref().ok().and_then(parse::Args::crate_path);
    match validate::plan(kind, args, item.clone(), krate.as_ref()) {
        Ok(plan) => expand::expand(plan),
        Err(error) => with_fallback(error, fallback(item, krate.as_ref())),
    }
}

/// The fn as written, without nika-retry attributes: emitted beside the
/// errors so that the rest of the crate (and the IDE) still sees it. The
/// paths of the removed attributes are still named, so their imports do not
/// turn into unused-import warnings on top of the error.
fn fallback(mut item: ItemFn, krate: Option<&syn::Path>) -> ItemFn {
    for (_, attr) in attrs::take_sibling_attrs(&mut item, krate) {
        item.block.stmts.insert(0, attrs::keep_import(attr.path()));
    }
    item
}

/// A clearer error for an attribute on something other than a fn with a body.
fn not_a_fn(kind: Kind, input: &TokenStream) -> Option<syn::Error> {
    let name = kind.name();
    if let Ok(decl) = syn::parse2::<syn::TraitItemFn>(input.clone()) {
        return decl.default.is_none().then(|| {
            syn::Error::new_spanned(
                &decl.sig,
                format!("#[{name}] goes on the method in the `impl` block, which has the body to retry, not on the trait's declaration"),
            )
        });
    }
    let item: syn::Item = syn::parse2(input.clone()).ok()?;
    Some(syn::Error::new_spanned(
        item_keyword(&item)?,
        format!("#[{name}] goes on an `async fn`, not on this item"),
    ))
}

/// The token that says what kind of item `item` is (`struct`, `impl`, …).
fn item_keyword(item: &syn::Item) -> Option<TokenStream> {
    Some(match item {
        syn::Item::Struct(i) => i.struct_token.to_token_stream(),
        syn::Item::Enum(i) => i.enum_token.to_token_stream(),
        syn::Item::Impl(i) => i.impl_token.to_token_stream(),
        syn::Item::Trait(i) => i.trait_token.to_token_stream(),
        syn::Item::Mod(i) => i.mod_token.to_token_stream(),
        syn::Item::Const(i) => i.const_token.to_token_stream(),
        syn::Item::Static(i) => i.static_token.to_token_stream(),
        syn::Item::Type(i) => i.type_token.to_token_stream(),
        _ => return None,
    })
}
