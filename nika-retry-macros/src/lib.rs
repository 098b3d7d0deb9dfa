//! Procedural macros of [`nika-retry`](https://docs.rs/nika-retry): `#[retry]`,
//! `#[timeout]` and `#[derive(Classify)]`. Use them through `nika_retry`,
//! which re-exports them and documents them.
#![forbid(unsafe_code)]

mod call;
mod classify;
mod duration;
mod errors;
mod krate;
mod suggest;
mod vocab;

#[cfg(test)]
mod reference;
#[cfg(test)]
mod snapshots;

use proc_macro::TokenStream;

/// Retries an async fn by the policy of its layer. See `nika_retry::retry`.
#[proc_macro_attribute]
pub fn retry(args: TokenStream, input: TokenStream) -> TokenStream {
    call::expand(call::Kind::Retry, args.into(), input.into()).into()
}

/// Bounds an async fn's attempts and whole call in time. See `nika_retry::timeout`.
#[proc_macro_attribute]
pub fn timeout(args: TokenStream, input: TokenStream) -> TokenStream {
    call::expand(call::Kind::Timeout, args.into(), input.into()).into()
}

/// Derives `nika_retry::Classify` from `#[category(...)]` attributes. See `nika_retry::Classify`.
#[proc_macro_derive(Classify, attributes(category))]
pub fn derive_classify(input: TokenStream) -> TokenStream {
    classify::derive(input.into()).into()
}
