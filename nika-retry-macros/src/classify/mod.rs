//! `#[derive(Classify)]`: attributes → typed input → validated rules → impl.

mod ast;
mod attr;
mod expand;
mod from;
mod timeout;
mod valid;

use proc_macro2::TokenStream;

use crate::errors::{Errors, with_fallback};

pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let input: syn::DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    // Computed once: the fallback impl beside the errors names the crate too.
    let mut errors = Errors::default();
    let krate = attr::crate_path(&input.attrs, &mut errors);
    let expanded = match ast::Input::from_syn(&input) {
        Ok(ast) => {
            let rules = valid::rules(&ast, &mut errors);
            errors
                .finish(rules)
                .map(|rules| expand::expand(&ast, &rules, &krate))
        }
        // A union, reported beside any mistake in its `crate = …`.
        Err(error) => Err(errors.and(error)),
    };
    expanded.unwrap_or_else(|error| with_fallback(error, expand::fallback(&input, &krate)))
}
