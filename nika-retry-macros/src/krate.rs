//! The path generated code names nika-retry by: `::nika_retry`, or the
//! `crate = "path"` the user gave for a renamed dependency.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;

/// The path without `crate = "…"`.
pub(crate) fn default() -> syn::Path {
    syn::parse_quote!(::nika_retry)
}

/// The path of `crate = "path"`, or an error at the string.
pub(crate) fn from_lit(lit: &syn::LitStr) -> syn::Result<syn::Path> {
    lit.parse().map_err(|_| {
        syn::Error::new_spanned(
            lit,
            format!(
                "`{}` is not a path; write the name the dependency has here, e.g. crate = \"nr\"",
                lit.value()
            ),
        )
    })
}

/// The error for a `crate = …` whose value is not a string.
pub(crate) const NOT_A_STRING: &str = "write the path as a string: crate = \"nika_retry\"";

/// `krate` with every token spanned at `span`, for the paths of a call whose
/// type errors rustc reports at the user's token: a path spanned at the
/// attribute would add a second label there. Both the default path and one
/// the user wrote resolve where the user's tokens do.
pub(crate) fn at(krate: &syn::Path, span: Span) -> TokenStream {
    krate
        .to_token_stream()
        .into_iter()
        .map(|mut tree: TokenTree| {
            tree.set_span(span);
            tree
        })
        .collect()
}
