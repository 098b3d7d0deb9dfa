//! Parses the arguments of `#[retry(...)]` and `#[timeout(...)]` into raw,
//! spanned arguments. What the values mean is `validate`'s job.

use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Token};

/// One argument as written.
pub(crate) enum Arg {
    /// `key = value`, `key: value`, `key(a, b)` or a bare `key`.
    Keyed(KeyArg),
    /// A value without a key, such as `#[timeout("5s")]`.
    Positional(Expr),
}

/// An argument with its key.
pub(crate) struct KeyArg {
    pub(crate) key: Ident,
    pub(crate) value: Value,
    /// `key: value`, read as `key = value` once reported.
    pub(crate) colon: Option<Token![:]>,
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
        if !input.peek(Ident::peek_any) || input.peek2(Token![::]) || input.peek2(Token![.]) {
            return Ok(Arg::Positional(input.parse()?));
        }
        let key = input.call(Ident::parse_any)?;
        let mut colon = None;
        let value = if input.peek(Token![=]) || (input.peek(Token![:]) && !input.peek(Token![::])) {
            let sign = if input.peek(Token![=]) {
                let eq: Token![=] = input.parse()?;
                syn::spanned::Spanned::span(&eq)
            } else {
                let c: Token![:] = input.parse()?;
                colon = Some(c);
                syn::spanned::Spanned::span(&c)
            };
            // Said at the sign: syn would say "unexpected end of input" at
            // the closing parenthesis, or over the whole attribute, depending
            // on which attribute expands first.
            if input.is_empty() || input.peek(Token![,]) {
                let sign_text = if colon.is_some() { ":" } else { "=" };
                return Err(syn::Error::new(
                    sign,
                    format!("`{key}` needs a value after `{sign_text}`"),
                ));
            }
            Value::Expr(input.parse()?)
        } else if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            Value::List(content.parse_terminated(Ident::parse_any, Token![,])?)
        } else {
            Value::Flag
        };
        Ok(Arg::Keyed(KeyArg { key, value, colon }))
    }
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let args = Punctuated::<Arg, Token![,]>::parse_terminated(input)?;
        Ok(Args(args.into_iter().collect()))
    }
}

impl Arg {
    /// The key, for an argument that has one.
    pub(crate) fn key(&self) -> Option<&Ident> {
        match self {
            Arg::Keyed(arg) => Some(&arg.key),
            Arg::Positional(_) => None,
        }
    }
}

impl Args {
    /// The path of a well-formed `crate = "path"`, to recognise the sibling
    /// attributes by; validation reports a malformed one.
    pub(crate) fn crate_path(&self) -> Option<syn::Path> {
        self.0.iter().find_map(|arg| match arg {
            Arg::Keyed(KeyArg {
                key,
                value: Value::Expr(expr),
                ..
            }) if key == "crate" => lit_str(expr)?.parse().ok(),
            _ => None,
        })
    }

    /// Whether every argument is one of `keys` (true for no arguments).
    pub(crate) fn only(&self, keys: &[&str]) -> bool {
        self.0
            .iter()
            .all(|arg| arg.key().is_some_and(|key| keys.iter().any(|k| key == k)))
    }
}

/// The string literal `expr` is, if it is one.
pub(crate) fn lit_str(expr: &Expr) -> Option<&syn::LitStr> {
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(arg: &Arg) -> &KeyArg {
        match arg {
            Arg::Keyed(arg) => arg,
            Arg::Positional(_) => panic!("positional"),
        }
    }

    #[test]
    fn parses_every_argument_shape() {
        let args: Args = syn::parse_str(
            r#"layer = "provider", attempts = 5, on = [transient], clone(req, body), config = self.cfg.clone(), verbose"#,
        )
        .unwrap();
        let keys: Vec<_> = args.0.iter().map(|a| keyed(a).key.to_string()).collect();
        assert_eq!(
            keys,
            ["layer", "attempts", "on", "clone", "config", "verbose"]
        );
        assert!(matches!(keyed(&args.0[3]).value, Value::List(ref l) if l.len() == 2));
        assert!(matches!(keyed(&args.0[5]).value, Value::Flag));
        assert!(matches!(
            keyed(&args.0[4]).value,
            Value::Expr(Expr::MethodCall(_))
        ));
    }

    #[test]
    fn a_positional_value_and_a_colon_still_parse() {
        let args: Args = syn::parse_str(r#""5s", layer: "provider", self.limit"#).unwrap();
        assert!(matches!(args.0[0], Arg::Positional(_)));
        let layer = keyed(&args.0[1]);
        assert!(layer.colon.is_some() && matches!(layer.value, Value::Expr(_)));
        assert!(matches!(args.0[2], Arg::Positional(Expr::Field(_))));
    }

    #[test]
    fn a_key_without_a_value_is_refused_naming_it() {
        for (text, message) in [
            ("layer = ", "`layer` needs a value after `=`"),
            ("layer = , attempts = 3", "`layer` needs a value after `=`"),
            ("attempts:", "`attempts` needs a value after `:`"),
        ] {
            let err = syn::parse_str::<Args>(text).err().map(|e| e.to_string());
            assert_eq!(err.as_deref(), Some(message), "{text}");
        }
    }

    #[test]
    fn empty_arguments_parse_to_nothing() {
        let args: Args = syn::parse_str("").unwrap();
        assert!(args.0.is_empty());
        assert!(args.only(&["layer"]));
    }
}
