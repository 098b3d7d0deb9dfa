//! The path generated code names nika-retry by: `::nika_retry`, or the
//! `crate = "path"` the user gave for a renamed dependency.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;

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
