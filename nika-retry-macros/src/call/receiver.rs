//! `clone(self)` in a native `async fn`: `self` cannot be bound again by
//! each attempt's clone, so the body's `self` is renamed, as async-trait's
//! `ReplaceSelf` does, and each attempt binds its clone under that name.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use syn::visit_mut::{self, VisitMut};
use syn::{Block, ExprPath, Ident, Item, Macro};

/// The name each attempt's clone of a by-value `self` has in the body.
pub(crate) fn self_alias() -> Ident {
    Ident::new("__nika_self", Span::mixed_site())
}

/// Renames the receiver `self` in `block` to [`self_alias`]. A path that
/// starts with `self::` and every nested item (a `use` tree, a `pub(self)`,
/// a nested `fn` or `impl` with its own `self`) are left alone; inside a
/// macro's tokens, which syn cannot read, every `self` but those of a
/// `self::` path or a `$self` fragment is renamed. A local `macro_rules!`
/// may name the fn's `self`, so its tokens are renamed too.
pub(crate) fn rename_self(block: &mut Block) {
    ReplaceSelf(self_alias()).visit_block_mut(block);
}

struct ReplaceSelf(Ident);

impl ReplaceSelf {
    /// The alias, located at the `self` it replaces, so errors point there.
    fn alias_at(&self, span: Span) -> Ident {
        let mut alias = self.0.clone();
        alias.set_span(self.0.span().located_at(span));
        alias
    }

    fn rename_tokens(&self, tokens: TokenStream) -> TokenStream {
        let mut out = Vec::new();
        let mut trees = tokens.into_iter().peekable();
        let mut after_dollar = false;
        while let Some(tree) = trees.next() {
            let was_after_dollar = std::mem::replace(
                &mut after_dollar,
                matches!(&tree, TokenTree::Punct(p) if p.as_char() == '$'),
            );
            out.push(match tree {
                TokenTree::Ident(ident) if ident == "self" && !was_after_dollar => {
                    let starts_path =
                        matches!(trees.peek(), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                    if starts_path {
                        TokenTree::Ident(ident)
                    } else {
                        TokenTree::Ident(self.alias_at(ident.span()))
                    }
                }
                TokenTree::Group(group) => {
                    let mut renamed =
                        Group::new(group.delimiter(), self.rename_tokens(group.stream()));
                    renamed.set_span(group.span());
                    TokenTree::Group(renamed)
                }
                other => other,
            });
        }
        out.into_iter().collect()
    }
}

impl VisitMut for ReplaceSelf {
    fn visit_expr_path_mut(&mut self, expr: &mut ExprPath) {
        // `self` alone; `self::item` names the module.
        if expr.qself.is_none() && expr.path.is_ident("self") {
            let segment = &mut expr.path.segments[0];
            segment.ident = self.alias_at(segment.ident.span());
        }
        visit_mut::visit_expr_path_mut(self, expr);
    }

    fn visit_item_mut(&mut self, item: &mut Item) {
        if let Item::Macro(item) = item {
            if item.mac.path.is_ident("macro_rules") {
                self.visit_macro_mut(&mut item.mac);
            }
        }
    }

    fn visit_macro_mut(&mut self, mac: &mut Macro) {
        mac.tokens = self.rename_tokens(std::mem::take(&mut mac.tokens));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::ToTokens;

    /// `block` with `self` renamed, as text.
    fn renamed(mut block: Block) -> String {
        rename_self(&mut block);
        block.to_token_stream().to_string()
    }

    #[test]
    fn self_is_renamed_except_in_paths_and_nested_items() {
        let text = renamed(syn::parse_quote!({
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
            let g = move || self.len();
            take(self)
        }));
        assert!(text.contains("self :: double"), "{text}");
        assert!(text.contains("fn clone (& self)"), "{text}");
        assert!(text.contains("\"{}\" , __nika_self . name"), "{text}");
        assert!(text.contains("__nika_self . len ()"), "{text}");
        assert!(text.contains("take (__nika_self)"), "{text}");
    }

    #[test]
    fn self_in_use_trees_and_visibilities_is_left_alone() {
        let text = renamed(syn::parse_quote!({
            use std::fmt::{self, Write};
            struct Local {
                pub(self) n: u8,
            }
            pub(self) fn helper() {}
            take(self)
        }));
        assert!(text.contains("fmt :: { self , Write }"), "{text}");
        assert!(text.contains("pub (self) n"), "{text}");
        assert!(text.contains("pub (self) fn helper"), "{text}");
        assert!(text.contains("take (__nika_self)"), "{text}");
    }

    #[test]
    fn a_local_macro_rules_is_renamed_but_its_fragments_are_not() {
        let text = renamed(syn::parse_quote!({
            macro_rules! name {
                ($self:ident) => {
                    self.name.clone()
                };
            }
            Ok(name!(x))
        }));
        assert!(text.contains("($ self : ident)"), "{text}");
        assert!(text.contains("__nika_self . name . clone ()"), "{text}");
    }
}
