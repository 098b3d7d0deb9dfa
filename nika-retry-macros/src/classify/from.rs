//! `#[category(from = field)]`: the category a field holds, decided at run
//! time (as `http::classify_response` decides it, honouring the server's
//! `x-should-retry` over the status). It stands in for a fixed category,
//! and combines with a hint key and with `http_status`, which then says
//! only what the attempt reached (a 429, 503 or 408 refused).

use proc_macro2::TokenStream;
use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::{Ident, Type};

use crate::errors::Errors;
use crate::krate;

/// The key, as the attribute writes it.
pub(crate) const KEY: &str = "from";

/// Reports a second source of the category beside `from` (a category
/// name); `true` if there was one.
pub(crate) fn conflicts(
    errors: &mut Errors,
    from: &Ident,
    others: &[Option<&Ident>],
    where_: &str,
) -> bool {
    let mut any = false;
    for other in others.iter().flatten() {
        any = true;
        errors.spanned(
            other,
            format!(
                "{where_} takes its category from the field named by `{from}`; remove `{other}` \
                 (keep `from = field` for a category decided at run time, as `classify_response` returns it)"
            ),
        );
    }
    any
}

/// The category arm's call on the bound field of type `ty`, spanned at that
/// type so that a field of another type is an error there.
pub(crate) fn call(krate: &syn::Path, ty: &Type, binding: &Ident) -> TokenStream {
    let k = krate::at(krate, ty.span());
    quote_spanned!(ty.span()=> #k::__private::category_from({ #binding }))
}
