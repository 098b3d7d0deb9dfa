//! The derive input as typed structs that borrow it, so every error keeps its span.

use syn::{Attribute, Data, DeriveInput, Fields, Generics, Ident};

/// A type deriving `Classify`.
pub(crate) struct Input<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) generics: &'a Generics,
    /// The type's own attributes (`#[category(default = …)]` on an enum, the rule on a struct).
    pub(crate) attrs: &'a [Attribute],
    pub(crate) shape: Shape<'a>,
}

pub(crate) enum Shape<'a> {
    Enum(Vec<Variant<'a>>),
    Struct(Variant<'a>),
}

/// A variant, or a struct's body seen as one.
pub(crate) struct Variant<'a> {
    /// `None` for a struct.
    pub(crate) ident: Option<&'a Ident>,
    pub(crate) attrs: &'a [Attribute],
    pub(crate) fields: &'a Fields,
}

impl<'a> Input<'a> {
    pub(crate) fn from_syn(input: &'a DeriveInput) -> syn::Result<Input<'a>> {
        let shape = match &input.data {
            Data::Enum(data) => Shape::Enum(
                data.variants
                    .iter()
                    .map(|v| Variant {
                        ident: Some(&v.ident),
                        attrs: &v.attrs,
                        fields: &v.fields,
                    })
                    .collect(),
            ),
            Data::Struct(data) => Shape::Struct(Variant {
                ident: None,
                attrs: &input.attrs,
                fields: &data.fields,
            }),
            Data::Union(data) => {
                return Err(syn::Error::new_spanned(
                    data.union_token,
                    "Classify derives for enums and structs, not unions",
                ));
            }
        };
        Ok(Input {
            ident: &input.ident,
            generics: &input.generics,
            attrs: &input.attrs,
            shape,
        })
    }
}
