//! `#[retry]` and `#[timeout]`: one expansion for both, whichever is written first.
//!
//! The outer attribute runs first and absorbs the other from the fn's
//! attributes, so the order in which they are written does not matter.

mod expand;
mod item;
mod parse;
mod validate;

use proc_macro2::TokenStream;
use syn::ItemFn;

pub(crate) use item::Kind;

use crate::errors::with_fallback;

/// Expands `#[retry(args)]` or `#[timeout(args)]` on `input`.
pub(crate) fn expand(kind: Kind, args: TokenStream, input: TokenStream) -> TokenStream {
    let item: ItemFn = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(error) => return with_fallback(not_a_fn(kind, &input).unwrap_or(error), input),
    };
    match validate::plan((kind, args), item.clone()) {
        Ok(plan) => expand::expand(plan),
        Err(error) => with_fallback(error, strip_own_attrs(item)),
    }
}

/// The fn as written, without nika-retry attributes: emitted beside the
/// errors so that the rest of the crate (and the IDE) still sees it.
fn strip_own_attrs(mut item: ItemFn) -> ItemFn {
    item::take_sibling_attrs(&mut item);
    item
}

/// A clearer error for a trait method declaration without a body.
fn not_a_fn(kind: Kind, input: &TokenStream) -> Option<syn::Error> {
    let decl: syn::TraitItemFn = syn::parse2(input.clone()).ok()?;
    decl.default.is_none().then(|| {
        syn::Error::new_spanned(
            &decl.sig,
            format!(
                "#[{}] goes on the method in the `impl` block, which has the body to retry, not on the trait's declaration",
                kind.name()
            ),
        )
    })
}
