//! The by-value arguments a retried body moves, where the macro can tell.
//!
//! Each attempt runs the body again, so an argument the body moves must be
//! `Copy` or cloned per attempt (`clone(arg)`); otherwise rustc reports
//! "value moved here, in previous iteration of loop" at the attribute.
//! Whether a type is `Copy` only rustc knows, so this module finds the
//! uses, and the expansion checks `Copy` at each of them with a bound whose
//! message names `clone(…)`: a `Copy` argument compiles as before.
//!
//! Found only where a use is sure to be a move of the argument: its bare
//! name passed to a call (`send(body)`, `Ok(body)`, `x.push(body)`) or as a
//! whole `let` initializer (`let b = body;`). A method's receiver (autoref),
//! a field, a macro's tokens and a name that the body binds again anywhere
//! (a shadowing `let`, a closure parameter, a match arm, a name a macro may
//! bind) are left alone; so is an argument whose type is a reference or
//! holds a reference or names a lifetime (a `&mut` is reborrowed, not moved;
//! an alias with a lifetime may be one; a `Pin<&mut T>` is not cloned).

use std::collections::HashSet;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, ExprCall, ExprMethodCall, Ident, Item, Local, Macro, Pat, PatIdent, Stmt, Type};

/// Whether an argument of type `ty` can be checked: no reference and no
/// lifetime anywhere in it (`&mut T`, `Pin<&mut T>`, `Writer<'a>`), nor a
/// macro.
pub(crate) fn checkable(ty: &Type) -> bool {
    fn borrows(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|tree| match tree {
            TokenTree::Punct(p) => matches!(p.as_char(), '&' | '\''),
            TokenTree::Group(g) => borrows(g.stream()),
            _ => false,
        })
    }
    !matches!(ty, Type::Macro(_) | Type::Verbatim(_))
        && !borrows(quote::ToTokens::to_token_stream(ty))
}

/// The first use of each of `candidates` that moves it, as the body's
/// token (spanned where the user wrote it), in the order of `candidates`.
pub(crate) fn moved(stmts: &[Stmt], candidates: &[Ident]) -> Vec<Ident> {
    let mut finder = Finder {
        candidates,
        moved: Vec::new(),
        bound: HashSet::new(),
    };
    for stmt in stmts {
        finder.visit_stmt_mut(&mut stmt.clone());
    }
    candidates
        .iter()
        .filter(|c| !finder.bound.contains(&c.to_string()))
        .filter_map(|c| finder.moved.iter().find(|m| *m == c).cloned())
        .collect()
}

struct Finder<'a> {
    candidates: &'a [Ident],
    /// Uses that move a candidate, in body order.
    moved: Vec<Ident>,
    /// Every name the body binds, or a macro in it might.
    bound: HashSet<String>,
}

impl Finder<'_> {
    /// `expr` if it is the bare name of a candidate.
    fn candidate(&self, expr: &Expr) -> Option<Ident> {
        let Expr::Path(path) = expr else {
            return None;
        };
        if path.qself.is_some() || !path.attrs.is_empty() {
            return None;
        }
        let ident = path.path.get_ident()?;
        self.candidates.contains(ident).then(|| ident.clone())
    }

    fn record(&mut self, expr: &Expr) {
        if let Some(ident) = self.candidate(expr) {
            self.moved.push(ident);
        }
    }
}

impl VisitMut for Finder<'_> {
    fn visit_expr_call_mut(&mut self, call: &mut ExprCall) {
        for arg in &call.args {
            self.record(arg);
        }
        visit_mut::visit_expr_call_mut(self, call);
    }

    fn visit_expr_method_call_mut(&mut self, call: &mut ExprMethodCall) {
        for arg in &call.args {
            self.record(arg);
        }
        visit_mut::visit_expr_method_call_mut(self, call);
    }

    fn visit_local_mut(&mut self, local: &mut Local) {
        // `let b = arg;` or `let b: T = arg;`: a pattern that binds the whole
        // value by value (`let _ = arg;` and destructuring may not move it).
        let pat = match &local.pat {
            Pat::Type(typed) => &*typed.pat,
            pat => pat,
        };
        let whole = matches!(
            pat,
            Pat::Ident(PatIdent {
                by_ref: None,
                subpat: None,
                ..
            })
        );
        if let (true, Some(init)) = (whole, &local.init) {
            self.record(&init.expr);
        }
        visit_mut::visit_local_mut(self, local);
    }

    fn visit_pat_ident_mut(&mut self, pat: &mut PatIdent) {
        self.bound.insert(pat.ident.to_string());
        visit_mut::visit_pat_ident_mut(self, pat);
    }

    fn visit_macro_mut(&mut self, mac: &mut Macro) {
        // A macro may bind a name it is given (`tokio::pin!(x)`).
        fn idents(tokens: TokenStream, out: &mut HashSet<String>) {
            for tree in tokens {
                match tree {
                    TokenTree::Ident(ident) => {
                        out.insert(ident.to_string());
                    }
                    TokenTree::Group(group) => idents(group.stream(), out),
                    _ => {}
                }
            }
        }
        idents(mac.tokens.clone(), &mut self.bound);
    }

    fn visit_item_mut(&mut self, _: &mut Item) {
        // A nested item cannot see the fn's arguments.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved_in(block: syn::Block, names: &[&str]) -> Vec<String> {
        let candidates: Vec<Ident> = names
            .iter()
            .map(|n| Ident::new(n, proc_macro2::Span::call_site()))
            .collect();
        moved(&block.stmts, &candidates)
            .iter()
            .map(Ident::to_string)
            .collect()
    }

    #[test]
    fn a_name_passed_to_a_call_or_let_is_moved() {
        let block: syn::Block = syn::parse_quote!({
            let n = body.len();
            send(req).await?;
            let kept = key;
            client.push(item);
            Ok(Response::new(n))
        });
        assert_eq!(
            moved_in(block, &["body", "req", "key", "item", "n"]),
            ["req", "key", "item"]
        );
    }

    #[test]
    fn receivers_fields_references_and_shadowed_names_are_not() {
        let block: syn::Block = syn::parse_quote!({
            body.consume();
            send(&req);
            send(cfg.url);
            let _ = key;
            let Wrapper { a, .. } = item;
            let other = other;
            take(other);
            let f = |shadow| take(shadow);
            tokio::pin!(pinned);
            take(pinned);
            fn nested(inner: String) -> usize {
                take(inner)
            }
            Ok(())
        });
        let names = [
            "body", "req", "cfg", "key", "item", "other", "shadow", "pinned", "inner",
        ];
        assert!(moved_in(block, &names).is_empty());
    }

    #[test]
    fn references_and_lifetimes_are_not_checked() {
        let yes: [Type; 4] = [
            syn::parse_quote!(String),
            syn::parse_quote!(Vec<u8>),
            syn::parse_quote!(impl Into<String>),
            syn::parse_quote!((String, u32)),
        ];
        let no: [Type; 4] = [
            syn::parse_quote!(&mut Vec<u8>),
            syn::parse_quote!(&str),
            syn::parse_quote!(Cow<'a, str>),
            syn::parse_quote!(Writer<'_>),
        ];
        let pinned: Type = syn::parse_quote!(Pin<&mut Conn>);
        assert!(!checkable(&pinned));
        assert!(yes.iter().all(checkable));
        assert!(!no.iter().any(checkable));
    }
}
