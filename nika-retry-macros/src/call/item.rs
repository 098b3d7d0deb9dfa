//! The annotated fn: its parts, the `#[retry]`/`#[timeout]` attributes on it,
//! and the shape of its body (a plain `async fn` or an `#[async_trait]` method).

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit_mut::VisitMut;
use syn::{
    Attribute, Block, Expr, FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, ReturnType,
    Stmt, Token, Type, TypeParamBound,
};

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
            || gives_crate(attr);
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

/// Whether the attribute's arguments say `crate = …` (or `crate: …`, which
/// validation reports), read from the tokens so that arguments that do not
/// parse still count.
fn gives_crate(attr: &Attribute) -> bool {
    let syn::Meta::List(list) = &attr.meta else {
        return false;
    };
    let trees: Vec<TokenTree> = list.tokens.clone().into_iter().collect();
    trees.windows(2).any(|w| match (&w[0], &w[1]) {
        (TokenTree::Ident(key), TokenTree::Punct(p)) => {
            key == "crate" && matches!(p.as_char(), '=' | ':')
        }
        _ => false,
    })
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

/// How the body is to be run once per attempt.
pub(crate) enum Body {
    /// A native `async fn`: the fn's whole block is the attempt.
    Async,
    /// An `#[async_trait]` method: `Box::pin(async move { prologue; rest })`;
    /// the prologue (argument moves) runs once, `rest` once per attempt.
    AsyncTrait {
        prologue: Vec<Stmt>,
        rest: Vec<Stmt>,
        output: Box<Type>,
    },
}

/// Recognises the body `#[async_trait]` generates, as tracing's `#[instrument]` does.
pub(crate) fn async_trait_body(item: &ItemFn) -> Option<Body> {
    let [Stmt::Expr(Expr::Call(call), None)] = item.block.stmts.as_slice() else {
        return None;
    };
    let Expr::Path(func) = &*call.func else {
        return None;
    };
    let names: Vec<String> = func
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if !names.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
        return None;
    }
    let Some(Expr::Async(block)) = call.args.first() else {
        return None;
    };
    block.capture?;
    let output = future_output(&item.sig.output)?;
    let stmts = &block.block.stmts;
    let split = stmts
        .iter()
        .position(|s| !is_prologue(s))
        .unwrap_or(stmts.len());
    Some(Body::AsyncTrait {
        prologue: stmts[..split].to_vec(),
        rest: stmts[split..].to_vec(),
        output: Box::new(output),
    })
}

/// The statements async-trait puts before the body, which must run once,
/// not per attempt: `let x = x;` and `let (a, b) = { let __arg1 = __arg1; __arg1 };`
/// (an argument moved into the future), `let __self = self;`, and
/// `if let Some(r) = None::<R> { return r; }` (its type hint).
fn is_prologue(stmt: &Stmt) -> bool {
    match stmt {
        Stmt::Local(local) => local.init.as_ref().is_some_and(|init| {
            init.diverge.is_none()
                && match &*init.expr {
                    Expr::Path(p) => p.path.get_ident().is_some(),
                    Expr::Block(b) => b.block.stmts.iter().all(|s| match s {
                        Stmt::Local(_) => is_prologue(s),
                        Stmt::Expr(Expr::Path(p), None) => p.path.get_ident().is_some(),
                        _ => false,
                    }),
                    _ => false,
                }
        }),
        Stmt::Expr(Expr::If(expr_if), _) => {
            matches!(&*expr_if.cond, Expr::Let(_)) && expr_if.else_branch.is_none()
        }
        _ => false,
    }
}

/// `R` in a return type of the form `Pin<Box<dyn Future<Output = R> + Send + 'a>>`.
fn future_output(output: &ReturnType) -> Option<Type> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let mut found = None;
    find_output(ty, &mut found);
    found
}

fn find_output(ty: &Type, found: &mut Option<Type>) {
    match ty {
        Type::Path(path) => {
            for segment in &path.path.segments {
                if let PathArguments::AngleBracketed(args) = &segment.arguments {
                    for arg in &args.args {
                        match arg {
                            GenericArgument::Type(inner) => find_output(inner, found),
                            GenericArgument::AssocType(assoc) if assoc.ident == "Output" => {
                                *found = Some(assoc.ty.clone());
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        Type::TraitObject(object) => {
            for bound in &object.bounds {
                if let TypeParamBound::Trait(t) = bound {
                    let seg = t.path.segments.last();
                    if let Some(PathArguments::AngleBracketed(args)) = seg.map(|s| &s.arguments) {
                        for arg in &args.args {
                            if let GenericArgument::AssocType(assoc) = arg {
                                if assoc.ident == "Output" {
                                    *found = Some(assoc.ty.clone());
                                }
                            }
                        }
                    }
                }
            }
        }
        Type::Paren(p) => find_output(&p.elem, found),
        Type::Group(g) => find_output(&g.elem, found),
        _ => {}
    }
}

/// The declared return type with every `impl Trait` replaced by `_`, so it
/// can name the attempt's output type (tracing-attributes does the same).
pub(crate) fn erase_impl_trait(ty: &Type) -> Type {
    struct Erase;
    impl VisitMut for Erase {
        fn visit_type_mut(&mut self, ty: &mut Type) {
            if let Type::ImplTrait(t) = ty {
                *ty = Type::Infer(syn::TypeInfer {
                    underscore_token: syn::Token![_](syn::spanned::Spanned::span(&t.impl_token)),
                });
                return;
            }
            syn::visit_mut::visit_type_mut(self, ty);
        }
    }
    let mut ty = ty.clone();
    Erase.visit_type_mut(&mut ty);
    ty
}

/// A name an argument binds, as the body sees it.
#[derive(Clone)]
pub(crate) struct Binding {
    pub(crate) ident: Ident,
    /// Its `mut`, if any.
    pub(crate) mutability: Option<Token![mut]>,
    /// Bound by `ref` / `ref mut`: a borrow of the argument, not a value.
    pub(crate) by_ref: bool,
}

/// `self`, as far as `clone(self)` needs to know it.
pub(crate) enum SelfArg {
    /// `&self`, `&mut self`, `self: &Self`: each attempt borrows it afresh.
    Borrowed,
    /// `self`, `mut self`, `self: Arc<Self>`: one value, moved by the body.
    ByValue {
        mutability: Option<Token![mut]>,
        /// The name the body uses for it: async-trait's `__self`; `None` in
        /// a native `async fn`, where the body says `self`.
        alias: Option<Ident>,
    },
}

/// The fn's arguments as the attempts see them.
pub(crate) struct Params {
    pub(crate) bindings: Vec<Binding>,
    pub(crate) receiver: Option<SelfArg>,
}

impl Params {
    /// A native `async fn`'s bindings come from its signature; an
    /// `#[async_trait]` method's from the prologue, which keeps the `mut`
    /// that async-trait took off the signature.
    pub(crate) fn of(item: &ItemFn, body: &Body) -> Params {
        let mut bindings = Vec::new();
        let mut receiver = None;
        for input in &item.sig.inputs {
            match input {
                FnArg::Receiver(r) => {
                    let borrowed = r.reference.is_some() || matches!(&*r.ty, Type::Reference(_));
                    receiver = Some(if borrowed {
                        SelfArg::Borrowed
                    } else {
                        SelfArg::ByValue {
                            mutability: r.mutability,
                            alias: None,
                        }
                    });
                }
                // async-trait moves the by-value ones in its prologue, not the references.
                FnArg::Typed(typed)
                    if matches!(body, Body::Async) || matches!(&*typed.ty, Type::Reference(_)) =>
                {
                    collect_bindings(&typed.pat, &mut bindings);
                }
                FnArg::Typed(_) => {}
            }
        }
        if let Body::AsyncTrait { prologue, .. } = body {
            for stmt in prologue {
                let Stmt::Local(local) = stmt else { continue };
                let moves_self = moves_self(local);
                match (&local.pat, &mut receiver) {
                    (Pat::Ident(p), Some(SelfArg::ByValue { mutability, alias })) if moves_self => {
                        *mutability = p.mutability;
                        *alias = Some(p.ident.clone());
                    }
                    _ if moves_self => {}
                    (pat, _) => collect_bindings(pat, &mut bindings),
                }
            }
        }
        Params { bindings, receiver }
    }

    pub(crate) fn binding(&self, name: &Ident) -> Option<&Binding> {
        self.bindings.iter().find(|b| b.ident == *name)
    }
}

/// Whether `local` is async-trait's `let __self = self;`.
pub(crate) fn moves_self(local: &syn::Local) -> bool {
    local
        .init
        .as_ref()
        .is_some_and(|init| matches!(&*init.expr, Expr::Path(p) if p.path.is_ident("self")))
}

/// Every name `pat` binds (`a` and `b` in `(a, mut b): (String, u32)`).
fn collect_bindings(pat: &Pat, out: &mut Vec<Binding>) {
    struct Collect<'a>(&'a mut Vec<Binding>);
    impl VisitMut for Collect<'_> {
        fn visit_pat_ident_mut(&mut self, p: &mut syn::PatIdent) {
            self.0.push(Binding {
                ident: p.ident.clone(),
                mutability: p.mutability,
                by_ref: p.by_ref.is_some(),
            });
            syn::visit_mut::visit_pat_ident_mut(self, p);
        }
    }
    Collect(out).visit_pat_mut(&mut pat.clone());
}

/// Removes the `mut` of the binding `name` in `pat`.
pub(crate) fn unmut(pat: &mut Pat, name: &Ident) {
    struct Unmut<'a>(&'a Ident);
    impl VisitMut for Unmut<'_> {
        fn visit_pat_ident_mut(&mut self, p: &mut syn::PatIdent) {
            if p.ident == *self.0 {
                p.mutability = None;
            }
            syn::visit_mut::visit_pat_ident_mut(self, p);
        }
    }
    Unmut(name).visit_pat_mut(pat);
}

/// The name each attempt's clone of a by-value `self` has in a native
/// `async fn`'s body, which [`rename_self`] gives it.
pub(crate) fn self_alias() -> Ident {
    Ident::new("__nika_self", Span::mixed_site())
}

/// `block` with the receiver `self` renamed `alias`, as async-trait does,
/// so that each attempt can bind its own clone of it (`self` itself cannot
/// be bound again). `self::path`s, `use` declarations, `pub(self)` and
/// nested items, which have their own `self`, are left alone. The error is
/// the re-parse's, for a `self` in a place none of these foresee.
pub(crate) fn rename_self(block: &Block, alias: &Ident) -> syn::Result<Block> {
    syn::parse2(rename_self_in(block.to_token_stream(), alias))
}

fn rename_self_in(tokens: TokenStream, alias: &Ident) -> TokenStream {
    let mut out = TokenStream::new();
    let mut trees = tokens.into_iter().peekable();
    // Inside the header of a nested `fn name`, `impl` or `trait`, up to its body.
    let mut in_item = false;
    // Inside a `use` declaration, up to its `;`: `use a::{self}`.
    let mut in_use = false;
    // Just after `pub`: `pub(self)`.
    let mut after_pub = false;
    while let Some(tree) = trees.next() {
        let was_after_pub = std::mem::take(&mut after_pub);
        let tree = match tree {
            TokenTree::Punct(p) if in_use && p.as_char() == ';' => {
                in_use = false;
                TokenTree::Punct(p)
            }
            tree if in_use => tree,
            TokenTree::Ident(ident) if ident == "use" && !in_item => {
                in_use = true;
                TokenTree::Ident(ident)
            }
            TokenTree::Ident(ident) if ident == "pub" => {
                after_pub = true;
                TokenTree::Ident(ident)
            }
            TokenTree::Group(group)
                if was_after_pub && group.delimiter() == Delimiter::Parenthesis =>
            {
                TokenTree::Group(group)
            }
            TokenTree::Ident(ident) if ident == "impl" || ident == "trait" => {
                in_item = true;
                TokenTree::Ident(ident)
            }
            TokenTree::Ident(ident) if ident == "fn" => {
                // `fn name` is an item; `fn(u8) -> u8` a type.
                in_item |= matches!(trees.peek(), Some(TokenTree::Ident(_)));
                TokenTree::Ident(ident)
            }
            TokenTree::Ident(ident) if ident == "self" && !in_item => {
                let is_path =
                    matches!(trees.peek(), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                if is_path {
                    TokenTree::Ident(ident)
                } else {
                    let mut renamed = alias.clone();
                    renamed.set_span(alias.span().located_at(ident.span()));
                    TokenTree::Ident(renamed)
                }
            }
            TokenTree::Group(group) if in_item => {
                in_item = group.delimiter() != Delimiter::Brace;
                TokenTree::Group(group)
            }
            TokenTree::Group(group) => {
                let mut renamed =
                    Group::new(group.delimiter(), rename_self_in(group.stream(), alias));
                renamed.set_span(group.span());
                TokenTree::Group(renamed)
            }
            other => other,
        };
        out.extend([tree]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::ToTokens;

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

    #[test]
    fn finds_the_output_of_a_boxed_future() {
        let ret: ReturnType = syn::parse_quote! {
            -> ::core::pin::Pin<Box<dyn ::core::future::Future<Output = Result<u8, E>> + ::core::marker::Send + 'async_trait>>
        };
        let out = future_output(&ret).unwrap();
        assert_eq!(out.to_token_stream().to_string(), "Result < u8 , E >");
    }

    #[test]
    fn splits_an_async_trait_body_into_prologue_and_attempt() {
        let item: ItemFn = syn::parse_quote! {
            fn call<'a>(&'a self, x: u8) -> Pin<Box<dyn Future<Output = Result<u8, E>> + Send + 'a>> {
                Box::pin(async move {
                    if let ::core::option::Option::Some(__ret) = ::core::option::Option::None::<Result<u8, E>> {
                        #[allow(unreachable_code)]
                        return __ret;
                    }
                    let __self = self;
                    let x = x;
                    let __ret: Result<u8, E> = { Ok(x) };
                    #[allow(unreachable_code)]
                    __ret
                })
            }
        };
        let Some(Body::AsyncTrait { prologue, rest, .. }) = async_trait_body(&item) else {
            panic!("not recognised");
        };
        assert_eq!((prologue.len(), rest.len()), (3, 2));
    }

    #[test]
    fn a_plain_fn_is_not_async_trait() {
        let item: ItemFn = syn::parse_quote! { fn f() -> u8 { 1 } };
        assert!(async_trait_body(&item).is_none());
    }

    #[test]
    fn self_is_renamed_except_in_paths_and_nested_items() {
        let block: Block = syn::parse_quote!({
            let f: fn(u8) -> u8 = self::double;
            fn nested(x: &Self) -> u8 {
                x.n
            }
            impl Clone for Inner {
                fn clone(&self) -> Self {
                    Inner
                }
            }
            format!("{}", self.name);
            take(self)
        });
        let text = renamed(&block);
        assert!(text.contains("self :: double"), "{text}");
        assert!(text.contains("fn clone (& self)"), "{text}");
        assert!(text.contains("__nika_self . name"), "{text}");
        assert!(text.contains("take (__nika_self)"), "{text}");
    }

    /// `block` with `self` renamed, as text.
    fn renamed(block: &Block) -> String {
        let alias = Ident::new("__nika_self", proc_macro2::Span::call_site());
        rename_self(block, &alias)
            .unwrap()
            .to_token_stream()
            .to_string()
    }

    #[test]
    fn self_in_use_trees_and_visibilities_is_left_alone() {
        let block: Block = syn::parse_quote!({
            use std::fmt::{self, Write};
            struct Local {
                pub(self) n: u8,
            }
            pub(self) fn helper() {}
            take(self)
        });
        let text = renamed(&block);
        assert!(text.contains("fmt :: { self , Write }"), "{text}");
        assert!(text.contains("pub (self) n"), "{text}");
        assert!(text.contains("pub (self) fn helper"), "{text}");
        assert!(text.contains("take (__nika_self)"), "{text}");
    }

    #[test]
    fn async_trait_bindings_come_from_the_prologue() {
        let item: ItemFn = syn::parse_quote! {
            fn call<'a>(self, __arg1: (String, u32), s: String) -> Pin<Box<dyn Future<Output = Result<u8, E>> + Send + 'a>> {
                Box::pin(async move {
                    let mut __self = self;
                    let (mut a, b) = { let __arg1 = __arg1; __arg1 };
                    let mut s = s;
                    let __ret: Result<u8, E> = { Ok(1) };
                    __ret
                })
            }
        };
        let body = async_trait_body(&item).unwrap();
        let params = Params::of(&item, &body);
        let names: Vec<_> = params
            .bindings
            .iter()
            .map(|b| (b.ident.to_string(), b.mutability.is_some()))
            .collect();
        assert_eq!(
            names,
            [("a".into(), true), ("b".into(), false), ("s".into(), true)]
        );
        assert!(matches!(
            params.receiver,
            Some(SelfArg::ByValue { mutability: Some(_), alias: Some(ref a) }) if a == "__self"
        ));
    }

    #[test]
    fn impl_trait_is_erased() {
        let ty: Type = syn::parse_quote!(Result<impl Iterator<Item = u8>, E>);
        assert_eq!(
            erase_impl_trait(&ty).to_token_stream().to_string(),
            "Result < _ , E >"
        );
    }
}
