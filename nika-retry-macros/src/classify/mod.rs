pub(crate) fn derive(input: proc_macro2::TokenStream) -> proc_macro2::TokenStream { let _ = input; proc_macro2::TokenStream::new() }
