//! The other attributes on the annotated fn: the sibling `#[retry]` /
//! `#[timeout]` it absorbs (and other crates' attributes of those names it
//! leaves alone), and the marks that another macro has already expanded it.

use proc_macro2::TokenStream;
use proc_macro2::TokenTree;
use quote::ToTokens;
use syn::{Attribute, ItemFn, Stmt};

use super::body::async_trait_body;

/// Which of the two attributes an attribute is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Retry,
    Timeout,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Retry => "retry",
            Kind::Timeout => "timeout",
        }
    }

    /// Whether `attr` is our `#[retry(...)]` or `#[timeout(...)]`. Other
    /// crates have attributes of these names (`#[ntest::timeout(1000)]`),
    /// which must be left on the fn, so a path is ours only if it is the bare
    /// name, starts with `nika_retry`, starts with `krate` (the `crate = "…"`
    /// of the attribute being expanded), or carries `crate = …` itself. A
    /// re-export (`my::timeout`) without `crate`, or an import under another
    /// name (`use nika_retry::timeout as t`), is not recognised; it then meets
    /// an already expanded fn, which [`already_expanded`] reports.
    fn of(attr: &Attribute, krate: Option<&syn::Path>) -> Option<Kind> {
        let path = attr.path();
        let kind = match path.segments.last()?.ident.to_string().as_str() {
            "retry" => Kind::Retry,
            "timeout" => Kind::Timeout,
            _ => return None,
        };
        let ours = path.segments.len() == 1
            || path.segments[0].ident == "nika_retry"
            || krate.is_some_and(|krate| starts_with(path, krate))
            || gives_key(attr, "crate");
        ours.then_some(kind)
    }
}

/// Whether `path` is `prefix::…`, leading `::` aside.
fn starts_with(path: &syn::Path, prefix: &syn::Path) -> bool {
    path.segments.len() > prefix.segments.len()
        && path
            .segments
            .iter()
            .zip(&prefix.segments)
            .all(|(a, b)| a.ident == b.ident)
}

/// Whether the attribute's arguments say `key = …` (or `key: …`, which
/// validation reports), read from the tokens so that arguments that do not
/// parse still count.
fn gives_key(attr: &Attribute, key: &str) -> bool {
    let syn::Meta::List(list) = &attr.meta else {
        return false;
    };
    let trees: Vec<TokenTree> = list.tokens.clone().into_iter().collect();
    trees.windows(2).any(|w| match (&w[0], &w[1]) {
        (TokenTree::Ident(ident), TokenTree::Punct(p)) => {
            ident == key && matches!(p.as_char(), '=' | ':')
        }
        _ => false,
    })
}

/// An attribute left on the fn (so not recognised as ours) that says
/// `layer = …`: very likely `#[retry]` under another name
/// (`use nika_retry::retry as r;`) or through a re-export without `crate`.
pub(crate) fn retry_by_another_name(item: &ItemFn) -> Option<&Attribute> {
    item.attrs.iter().find(|attr| gives_key(attr, "layer"))
}

/// The other nika-retry attributes found on the fn, removed from its
/// attribute list; `krate` is the `crate = "…"` of the attribute being expanded.
pub(crate) fn take_sibling_attrs(
    item: &mut ItemFn,
    krate: Option<&syn::Path>,
) -> Vec<(Kind, Attribute)> {
    let mut found = Vec::new();
    item.attrs.retain(|attr| match Kind::of(attr, krate) {
        Some(kind) => {
            found.push((kind, attr.clone()));
            false
        }
        None => true,
    });
    found
}

/// `use path as _;` for an absorbed attribute's path, so that its import is
/// still used once the attribute is gone.
pub(crate) fn keep_import(path: &syn::Path) -> Stmt {
    syn::parse_quote!(#[allow(unused_imports)] use #path as _;)
}

/// Whether another attribute has already rewritten this fn's body in a way
/// that `#[retry]` cannot run inside, and which one.
pub(crate) enum ExpandedBy {
    /// A nika-retry attribute above, which did not recognise this one.
    Us,
    /// `#[tracing::instrument]` above: a span per attempt.
    Instrument,
    /// `#[tokio::test]` / `#[tokio::main]` above: no longer an `async fn`.
    Tokio,
}

/// Looks for the marks the expansions of nika-retry, `#[instrument]` and
/// tokio's entry points leave in a body.
pub(crate) fn already_expanded(item: &ItemFn) -> Option<ExpandedBy> {
    let body = item.block.to_token_stream();
    // Every expansion of ours calls `__private::Call` (a retry loop) or
    // `__private::once` (`#[timeout]` alone).
    if calls_private_run(&body) {
        return Some(ExpandedBy::Us);
    }
    if mentions(&body, &|i| {
        i == "__tracing_attr_span" || i == "__tracing_instrument_future"
    }) {
        return Some(ExpandedBy::Instrument);
    }
    // tokio's entry points leave a fn without `async` that calls `block_on`;
    // so does an `#[async_trait]` method whose body calls it itself.
    if item.sig.asyncness.is_none()
        && async_trait_body(item).is_none()
        && mentions(&body, &|i| i == "block_on")
    {
        return Some(ExpandedBy::Tokio);
    }
    None
}

fn calls_private_run(tokens: &TokenStream) -> bool {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    trees.windows(4).any(|w| match (&w[0], &w[3]) {
        (TokenTree::Ident(a), TokenTree::Ident(b)) => {
            a == "__private" && (b == "Call" || b == "once")
        }
        _ => false,
    }) || trees
        .iter()
        .any(|tree| matches!(tree, TokenTree::Group(g) if calls_private_run(&g.stream())))
}

fn mentions(tokens: &TokenStream, is: &dyn Fn(&str) -> bool) -> bool {
    tokens.clone().into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => is(&ident.to_string()),
        TokenTree::Group(group) => mentions(&group.stream(), is),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_of(attr: Attribute, krate: Option<&str>) -> Option<Kind> {
        let krate: Option<syn::Path> = krate.map(|k| syn::parse_str(k).unwrap());
        Kind::of(&attr, krate.as_ref())
    }

    #[test]
    fn our_attributes_are_recognised_by_name_or_crate() {
        assert_eq!(
            kind_of(syn::parse_quote!(#[timeout(attempt = "1s")]), None),
            Some(Kind::Timeout)
        );
        assert_eq!(
            kind_of(syn::parse_quote!(#[retry]), None),
            Some(Kind::Retry)
        );
        assert_eq!(
            kind_of(syn::parse_quote!(#[nika_retry::timeout]), None),
            Some(Kind::Timeout)
        );
        assert_eq!(
            kind_of(
                syn::parse_quote!(#[::nika_retry::retry(layer = "http")]),
                None
            ),
            Some(Kind::Retry)
        );
        // The path of `crate = "nr"` on the attribute being expanded.
        assert_eq!(
            kind_of(
                syn::parse_quote!(#[nr::timeout(attempt = "1s")]),
                Some("nr")
            ),
            Some(Kind::Timeout)
        );
        assert_eq!(
            kind_of(syn::parse_quote!(#[a::b::retry]), Some("::a::b")),
            Some(Kind::Retry)
        );
        // `crate = …` on the sibling itself, even with arguments that do not parse.
        assert_eq!(
            kind_of(
                syn::parse_quote!(#[my::timeout(crate = "my", attempt = )]),
                None
            ),
            Some(Kind::Timeout)
        );
        assert_eq!(kind_of(syn::parse_quote!(#[tokio::test]), None), None);
    }

    #[test]
    fn other_crates_attributes_of_the_same_name_are_left_alone() {
        assert_eq!(
            kind_of(syn::parse_quote!(#[ntest::timeout(1000)]), None),
            None
        );
        assert_eq!(kind_of(syn::parse_quote!(#[x::retry]), None), None);
        assert_eq!(
            kind_of(syn::parse_quote!(#[ntest::timeout(1000)]), Some("nr")),
            None
        );
        // A re-export without `crate`: not recognised (reported once it meets the expanded fn).
        assert_eq!(
            kind_of(syn::parse_quote!(#[my::timeout(attempt = "1s")]), None),
            None
        );
        // `nr::timeout` is not below `nr::x`, nor `a::timeout` below `a::b`.
        assert_eq!(
            kind_of(syn::parse_quote!(#[nr::timeout]), Some("nr::x")),
            None
        );
        assert_eq!(
            kind_of(syn::parse_quote!(#[a::timeout]), Some("a::b")),
            None
        );
    }
}
