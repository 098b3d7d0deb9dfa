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
    let krate = attr::crate_path(&input.attrs);
    let result = ast::Input::from_syn(&input).and_then(|ast| {
        let rules = valid::rules(&ast)?;
        Ok(expand::expand(
            &ast,
            &rules,
            krate.as_ref().map_err(Clone::clone)?,
        ))
    });
    let krate = krate.unwrap_or_else(|_| syn::parse_quote!(::nika_retry));
    match result {
        Ok(tokens) => tokens,
        Err(error) => with_fallback(error, expand::fallback(&input, &krate)),
    }
}
