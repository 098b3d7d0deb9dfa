//! The fn's parameters as the attempts see them: the names they bind, with
//! `mut` and `ref`, and the receiver.

use syn::visit_mut::VisitMut;
use syn::{Expr, FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, Stmt, Token, Type};

use super::body::Body;

/// A name an argument binds, as the body sees it.
#[derive(Clone)]
pub(crate) struct Binding {
    pub(crate) ident: Ident,
    /// Its `mut`, if any.
    pub(crate) mutability: Option<Token![mut]>,
    /// Bound by `ref` / `ref mut`: a borrow of the argument, not a value.
    pub(crate) by_ref: bool,
    /// The argument's type, when the binding is the whole argument (`x: T`,
    /// not `(a, b): (A, B)`).
    pub(crate) ty: Option<Type>,
}

impl Binding {
    /// Bound to a `&mut T` or a `Pin<&mut T>`: the caller's state, which
    /// each attempt reborrows, shared by the attempts by design.
    pub(crate) fn is_exclusive_borrow(&self) -> bool {
        self.ty.as_ref().is_some_and(is_exclusive_borrow)
    }
}

/// Whether `ty` is `&mut T` or `Pin<&mut T>` (by any path to `Pin`).
pub(crate) fn is_exclusive_borrow(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => r.mutability.is_some(),
        Type::Paren(p) => is_exclusive_borrow(&p.elem),
        Type::Group(g) => is_exclusive_borrow(&g.elem),
        Type::Path(p) if p.qself.is_none() => {
            let Some(last) = p.path.segments.last() else {
                return false;
            };
            let PathArguments::AngleBracketed(args) = &last.arguments else {
                return false;
            };
            last.ident == "Pin"
                && matches!(
                    args.args.first(),
                    Some(GenericArgument::Type(Type::Reference(r))) if r.mutability.is_some()
                )
        }
        _ => false,
    }
}

/// `self`, as far as `clone(self)` needs to know it.
pub(crate) enum SelfArg {
    /// `&self`, `&mut self`, `self: &Self`, `self: Pin<&mut Self>`: each
    /// attempt borrows it afresh.
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
                    let borrowed = r.reference.is_some()
                        || matches!(&*r.ty, Type::Reference(_))
                        || is_exclusive_borrow(&r.ty);
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
                    collect_bindings(&typed.pat, Some(&typed.ty), &mut bindings);
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
                    // `let mut x = x;`: the type is the signature's `x`'s.
                    (pat, _) => collect_bindings(pat, moved_arg_type(item, local), &mut bindings),
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

/// The signature's type of the argument that async-trait's `let x = x;` moves.
fn moved_arg_type<'a>(item: &'a ItemFn, local: &syn::Local) -> Option<&'a Type> {
    let init = local.init.as_ref()?;
    let Expr::Path(moved) = &*init.expr else {
        return None;
    };
    item.sig.inputs.iter().find_map(|input| match input {
        FnArg::Typed(typed) => match &*typed.pat {
            Pat::Ident(p) if moved.path.is_ident(&p.ident) => Some(&*typed.ty),
            _ => None,
        },
        FnArg::Receiver(_) => None,
    })
}

/// Every name `pat` binds (`a` and `b` in `(a, mut b): (String, u32)`),
/// with `ty`, the argument's type, for a binding that is the whole argument.
fn collect_bindings(pat: &Pat, ty: Option<&Type>, out: &mut Vec<Binding>) {
    struct Collect<'a>(&'a mut Vec<Binding>);
    impl VisitMut for Collect<'_> {
        fn visit_pat_ident_mut(&mut self, p: &mut syn::PatIdent) {
            self.0.push(Binding {
                ident: p.ident.clone(),
                mutability: p.mutability,
                by_ref: p.by_ref.is_some(),
                ty: None,
            });
            syn::visit_mut::visit_pat_ident_mut(self, p);
        }
    }
    let first = out.len();
    Collect(out).visit_pat_mut(&mut pat.clone());
    if let (Pat::Ident(p), Some(ty)) = (pat, ty) {
        if p.subpat.is_none() {
            out[first].ty = Some(ty.clone());
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::body::async_trait_body;

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
    fn exclusive_borrows_are_mut_references_and_pinned_ones() {
        let yes: [Type; 4] = [
            syn::parse_quote!(&mut Vec<u8>),
            syn::parse_quote!(&'a mut T),
            syn::parse_quote!(Pin<&mut Self>),
            syn::parse_quote!(::core::pin::Pin<&'a mut Conn>),
        ];
        let no: [Type; 5] = [
            syn::parse_quote!(&Vec<u8>),
            syn::parse_quote!(Pin<&Self>),
            syn::parse_quote!(Pin<Box<Self>>),
            syn::parse_quote!(Vec<&mut u8>),
            syn::parse_quote!(String),
        ];
        assert!(yes.iter().all(is_exclusive_borrow));
        assert!(!no.iter().any(is_exclusive_borrow));
    }
}
