//! Parses the arguments of `#[retry(...)]` and `#[timeout(...)]` into raw,
//! spanned key/value pairs. What the values mean is `validate`'s job.

use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Token};

/// One `key = value`, `key(a, b)` or bare `key` argument.
pub(crate) struct Arg {
    pub(crate) key: Ident,
    pub(crate) value: Value,
}

/// What follows the key.
pub(crate) enum Value {
    /// `key = expr` (a literal is an `Expr::Lit`).
    Expr(Expr),
    /// `key(a, b)`.
    List(Punctuated<Ident, Token![,]>),
    /// `key` alone.
    Flag,
}

/// The comma-separated arguments of one attribute.
pub(crate) struct Args(pub(crate) Vec<Arg>);

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key = input.call(Ident::parse_any)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Value::Expr(input.parse()?)
        } else if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            Value::List(content.parse_terminated(Ident::parse_any, Token![,])?)
        } else {
            Value::Flag
        };
        Ok(Arg { key, value })
    }
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let args = Punctuated::<Arg, Token![,]>::parse_terminated(input)?;
        Ok(Args(args.into_iter().collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_argument_shape() {
        let args: Args = syn::parse_str(
            r#"layer = "provider", attempts = 5, on = [transient], clone(req, body), config = self.cfg.clone(), verbose"#,
        )
        .unwrap();
        let keys: Vec<_> = args.0.iter().map(|a| a.key.to_string()).collect();
        assert_eq!(
            keys,
            ["layer", "attempts", "on", "clone", "config", "verbose"]
        );
        assert!(matches!(args.0[3].value, Value::List(ref l) if l.len() == 2));
        assert!(matches!(args.0[5].value, Value::Flag));
        assert!(matches!(args.0[4].value, Value::Expr(Expr::MethodCall(_))));
    }

    #[test]
    fn empty_arguments_parse_to_nothing() {
        let args: Args = syn::parse_str("").unwrap();
        assert!(args.0.is_empty());
    }
}
