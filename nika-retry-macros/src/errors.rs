//! Collects every error of one macro invocation, so the user sees all of them at once.

use proc_macro2::TokenStream;
use quote::ToTokens;
use std::fmt::Display;

/// An accumulator of `syn::Error`s, merged with `syn::Error::combine`.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Records an error spanned at `tokens`.
    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records an error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// Records every error of `other`.
    pub(crate) fn append(&mut self, other: Errors) {
        if let Some(error) = other.0 {
            self.push(error);
        }
    }

    /// Records the error of `result`, if any, and returns its value.
    pub(crate) fn take<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|e| self.push(e)).ok()
    }

    /// `Ok(value)` if nothing was recorded, else every recorded error.
    pub(crate) fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }

    /// Every recorded error, then `error`.
    pub(crate) fn and(self, error: syn::Error) -> syn::Error {
        match self.0 {
            Some(mut all) => {
                all.combine(error);
                all
            }
            None => error,
        }
    }

    /// Whether nothing was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// The compile errors of `error`, followed by `fallback` so IDEs keep working on the item.
pub(crate) fn with_fallback(error: syn::Error, fallback: impl ToTokens) -> TokenStream {
    let mut out = error.to_compile_error();
    fallback.to_tokens(&mut out);
    out
}
