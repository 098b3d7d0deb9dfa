//! `#[derive(Classify)]`: attributes → typed input → validated rules → impl.

mod ast;
mod attr;
mod expand;
mod valid;

use proc_macro2::TokenStream;

use crate::errors::with_fallback;

pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let input: syn::DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let result = ast::Input::from_syn(&input)
        .and_then(|ast| valid::rules(&ast).map(|rules| expand::expand(&ast, &rules)));
    match result {
        Ok(tokens) => tokens,
        Err(error) => with_fallback(error, expand::fallback(&input)),
    }
}
