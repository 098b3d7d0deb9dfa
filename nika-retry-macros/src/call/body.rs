//! The body of the annotated fn: a plain `async fn`'s block or the future
//! `#[async_trait]` made of it, and the attempt's output type.

use syn::visit_mut::VisitMut;
use syn::{Expr, GenericArgument, ItemFn, PathArguments, ReturnType, Stmt, Type, TypeParamBound};

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

#[cfg(test)]
mod tests {
    use super::*;
    use quote::ToTokens;

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
    fn impl_trait_is_erased() {
        let ty: Type = syn::parse_quote!(Result<impl Iterator<Item = u8>, E>);
        assert_eq!(
            erase_impl_trait(&ty).to_token_stream().to_string(),
            "Result < _ , E >"
        );
    }
}
