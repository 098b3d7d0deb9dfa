//! Checks the `#[category(...)]` attributes and turns each variant into a [`Rule`].

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Fields, Ident, Member, Type};

use super::ast::{Input, Shape, Variant};
use super::attr::{Item, Value, category_attrs};
use super::from;
use crate::errors::Errors;
use crate::suggest::unknown;
use crate::vocab::{CATEGORY_KEYS, Category, Reach};

/// A field named by `key = field`.
pub(crate) struct FieldRef<'a> {
    pub(crate) member: Member,
    pub(crate) ty: &'a Type,
}

/// Where a variant's category comes from.
pub(crate) enum Source<'a> {
    Fixed(Category),
    HttpStatus(FieldRef<'a>),
    Transparent(FieldRef<'a>),
    /// `from = field`: a field of type `ErrorCategory`; beside it, the
    /// `http_status` field that says what the attempt reached.
    Field(FieldRef<'a>, Option<FieldRef<'a>>),
}

/// The unit of a hint field.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum HintUnit {
    /// `retry_after = field`: `Duration` or `Option<Duration>`.
    Duration,
    /// `retry_after_ms = field`: `u64` or `Option<u64>`.
    Millis,
}

/// How one variant (or a struct) classifies.
pub(crate) struct Rule<'a> {
    /// `None` for a struct.
    pub(crate) variant: Option<&'a Ident>,
    pub(crate) source: Source<'a>,
    pub(crate) hint: Option<(HintUnit, FieldRef<'a>)>,
    /// `reached = no | refused | maybe`; `None`: the field's (`transparent`),
    /// the status's (`http_status`), else the timeout's or the category's.
    pub(crate) reached: Option<Reach>,
}

/// Validates every attribute of `input`, reporting all mistakes at once
/// into `errors`.
pub(crate) fn rules<'a>(input: &Input<'a>, errors: &mut Errors) -> Vec<Rule<'a>> {
    let mut default_errors = Errors::default();
    let (variants, default) = match &input.shape {
        Shape::Enum(variants) => (
            variants.iter().collect::<Vec<_>>(),
            enum_default(&mut default_errors, input),
        ),
        Shape::Struct(body) => (vec![body], None),
    };
    // A mistake in the enum's `#[category(default = …)]` is reported once,
    // not again at every variant it would have classified.
    let default_failed = !default_errors.is_empty();
    errors.append(default_errors);
    let mut rules = Vec::new();
    for variant in variants {
        if let Some(rule) = variant_rule(errors, variant, default, input.ident, default_failed) {
            rules.push(rule);
        }
    }
    rules
}

/// The enum-level `#[category(default = …)]`.
fn enum_default(errors: &mut Errors, input: &Input) -> Option<Category> {
    let mut default = None;
    for parsed in category_attrs(input.attrs) {
        let Some((_, items)) = errors.take(parsed) else {
            continue;
        };
        for item in items {
            match (item.key.to_string().as_str(), &item.value) {
                ("default", Some(Value::Ident(name))) => match Category::from_name(&name.to_string()) {
                    Some(c) if default.is_none() => default = Some(c),
                    Some(_) => errors.spanned(&item.key, "`default` is set twice; keep one"),
                    None => errors.spanned(name, unknown_category(&name.to_string())),
                },
                ("default", _) => errors.spanned(&item.key, "write the default as a category: #[category(default = permanent)]"),
                ("crate", _) => {} // Read by `crate_path`.
                _ => errors.spanned(
                    &item.key,
                    "on an enum, #[category(...)] only takes `default = …`; put the category on each variant",
                ),
            }
        }
    }
    default
}

fn unknown_category(name: &str) -> String {
    unknown("category", name, "categories", &Category::NAMES)
}

/// What one variant's attribute said, before the combination checks.
#[derive(Default)]
struct Said<'a> {
    category: Option<(Category, Ident)>,
    transparent: Option<Ident>,
    http_status: Option<(Ident, FieldRef<'a>)>,
    hint: Option<(Ident, HintUnit, FieldRef<'a>)>,
    from: Option<(Ident, FieldRef<'a>)>,
    reached: Option<(Ident, Reach)>,
}

fn variant_rule<'a>(
    errors: &mut Errors,
    variant: &Variant<'a>,
    default: Option<Category>,
    type_name: &Ident,
    default_failed: bool,
) -> Option<Rule<'a>> {
    let mut said = Said::default();
    let mut any_attr: Option<Span> = None;
    let mut count = 0;
    for parsed in category_attrs(variant.attrs) {
        let Some((attr, items)) = errors.take(parsed) else {
            continue;
        };
        count += 1;
        if count > 1 {
            errors.spanned(
                attr,
                "#[category] appears twice here; merge them into one #[category(...)]",
            );
            continue;
        }
        // `crate = …` alone says nothing about the category.
        if items.is_empty() || items.iter().any(|i| i.key != "crate") {
            any_attr = Some(attr.span());
        }
        if items.is_empty() {
            errors.spanned(
                attr,
                "empty #[category()]; name a category, e.g. #[category(transient)]",
            );
        }
        for item in items {
            read_item(errors, &mut said, item, variant);
        }
    }
    let where_ = variant
        .ident
        .map_or_else(|| format!("`{type_name}`"), |v| format!("variant `{v}`"));
    let Said {
        category,
        transparent,
        http_status,
        hint,
        from,
        reached,
    } = said;

    if let Some(flag) = &transparent {
        let others = [
            category.as_ref().map(|(_, key)| key),
            http_status.as_ref().map(|(key, _)| key),
            hint.as_ref().map(|(key, ..)| key),
            from.as_ref().map(|(key, _)| key),
            reached.as_ref().map(|(key, _)| key),
        ];
        for key in others.into_iter().flatten() {
            errors.spanned(
                key,
                format!("`transparent` takes the category, the hint and what the attempt reached from the field; remove `{key}`"),
            );
        }
        let n = variant.fields.len();
        if n != 1 {
            errors.spanned(
                flag,
                format!("`transparent` delegates to the one field of {where_}, which has {n}; classify it with a category instead"),
            );
            return None;
        }
        let field = variant.fields.iter().next()?;
        let member = field
            .ident
            .clone()
            .map_or(Member::Unnamed(0.into()), Member::Named);
        return Some(Rule {
            variant: variant.ident,
            source: Source::Transparent(FieldRef {
                member,
                ty: &field.ty,
            }),
            hint: None,
            reached: None,
        });
    }
    if let Some((key, field)) = from {
        let others = [category.as_ref().map(|(_, key)| key)];
        if from::conflicts(errors, &key, &others, &where_) {
            return None;
        }
        return Some(Rule {
            variant: variant.ident,
            source: Source::Field(field, http_status.map(|(_, status)| status)),
            hint: hint.map(|(_, unit, field)| (unit, field)),
            reached: reached.map(|(_, r)| r),
        });
    }
    if let (Some((c, _)), Some((key, _))) = (&category, &http_status) {
        errors.spanned(
            key,
            format!("{where_} has both `{}` and `http_status`; keep one: a fixed category or the status's", c.name()),
        );
        return None;
    }
    let source = match (category, http_status) {
        (Some((c, _)), None) => Source::Fixed(c),
        (None, Some((_, field))) => Source::HttpStatus(field),
        _ => {
            if let Some((key, ..)) = &hint {
                errors.spanned(
                    key,
                    format!("`{key}` needs a category beside it, e.g. #[category(rate_limited, {key} = field)], #[category(http_status = status, {key} = field)] or #[category(from = category, {key} = field)]"),
                );
                return None;
            }
            if let Some((key, _)) = &reached {
                errors.spanned(
                    key,
                    "`reached` needs a category beside it, e.g. #[category(transient, reached = no)]",
                );
                return None;
            }
            match (default, any_attr) {
                (Some(c), None) => Source::Fixed(c),
                // An error was reported inside the attribute, or in the enum's default.
                (_, Some(_)) => return None,
                (None, None) if default_failed => return None,
                (None, None) => {
                    let at = variant
                        .ident
                        .map_or_else(|| type_name.to_token_stream(), |v| v.to_token_stream());
                    errors.spanned(
                        at,
                        format!(
                            "{where_} has no #[category(...)]; add one (e.g. #[category(transient)]), \
                             or set a default for the unmarked variants on the enum: #[category(default = permanent)]"
                        ),
                    );
                    return None;
                }
            }
        }
    };
    Some(Rule {
        variant: variant.ident,
        source,
        hint: hint.map(|(_, unit, field)| (unit, field)),
        reached: reached.map(|(_, r)| r),
    })
}

fn read_item<'a>(errors: &mut Errors, said: &mut Said<'a>, item: Item, variant: &Variant<'a>) {
    let fields = variant.fields;
    let key = item.key.to_string();
    if let Some(category) = Category::from_name(&key) {
        if item.value.is_some() {
            errors.spanned(
                &item.key,
                format!("`{key}` is a category and takes no value: #[category({key})]"),
            );
        } else if said.category.is_some() {
            errors.spanned(&item.key, "a variant has one category; keep one");
        } else {
            said.category = Some((category, item.key));
        }
        return;
    }
    match key.as_str() {
        "transparent" => match item.value {
            Some(_) => errors.spanned(
                &item.key,
                "`transparent` takes no value: #[category(transparent)]",
            ),
            None => said.transparent = Some(item.key),
        },
        from::KEY => {
            let Some(value) = &item.value else {
                errors.spanned(
                    &item.key,
                    "`from` names a field of type `ErrorCategory`: #[category(from = category)]",
                );
                return;
            };
            let Some(field) = resolve(errors, value, fields) else {
                return;
            };
            if said.from.is_some() {
                errors.spanned(&item.key, "`from` is set twice; keep one");
            } else {
                said.from = Some((item.key, field));
            }
        }
        "http_status" | "retry_after" | "retry_after_ms" => {
            let Some(value) = &item.value else {
                errors.spanned(
                    &item.key,
                    format!("`{key}` names a field: #[category({key} = field)]"),
                );
                return;
            };
            let Some(field) = resolve(errors, value, fields) else {
                return;
            };
            let slot_taken = if key == "http_status" {
                said.http_status.is_some()
            } else {
                said.hint.is_some()
            };
            if slot_taken {
                errors.spanned(
                    &item.key,
                    format!("`{key}` is set twice (or beside another hint); keep one"),
                );
            } else if key == "http_status" {
                said.http_status = Some((item.key, field));
            } else {
                let unit = if key == "retry_after" {
                    HintUnit::Duration
                } else {
                    HintUnit::Millis
                };
                said.hint = Some((item.key, unit, field));
            }
        }
        "reached" => {
            let message = "`reached` says whether the failed attempt may have reached the other side: \
                           #[category(transient, reached = no | refused | maybe)]";
            let name = match &item.value {
                Some(Value::Ident(name)) => name,
                _ => return errors.spanned(&item.key, message),
            };
            match Reach::from_name(&name.to_string()) {
                Some(_) if said.reached.is_some() => {
                    errors.spanned(&item.key, "`reached` is set twice; keep one");
                }
                Some(reach) => said.reached = Some((item.key, reach)),
                None => errors.spanned(
                    name,
                    unknown("`reached` value", &name.to_string(), "values", &Reach::NAMES),
                ),
            }
        }
        // A struct's `#[category]` is the type's own attribute, read by `crate_path`.
        "crate" if variant.ident.is_none() => {}
        "crate" => errors.spanned(
            &item.key,
            "`crate` belongs on the enum, not on a variant: #[category(crate = \"…\")] above `enum`",
        ),
        "default" if variant.ident.is_none() => errors.spanned(
            &item.key,
            "a struct has one category, so it needs no default: write it directly, e.g. #[category(transient)]",
        ),
        "default" => errors.spanned(
            &item.key,
            "`default` belongs on the enum, for the variants without a #[category]",
        ),
        _ => errors.spanned(&item.key, unknown("#[category] key", &key, "keys", &CATEGORY_KEYS)),
    }
}

/// The field `value` names, or an error listing the fields there are.
fn resolve<'a>(errors: &mut Errors, value: &Value, fields: &'a Fields) -> Option<FieldRef<'a>> {
    // What was written, to name it and point at it if there is no such field.
    let (found, shown, at) = match value {
        Value::Str(s) => {
            errors.spanned(s, format!("name the field without quotes: {}", s.value()));
            return None;
        }
        Value::Ident(name) => (
            fields
                .iter()
                .find(|f| f.ident.as_ref() == Some(name))
                .map(|f| FieldRef {
                    member: Member::Named(name.clone()),
                    ty: &f.ty,
                }),
            name.to_string(),
            name.to_token_stream(),
        ),
        Value::Index(index) => (
            index.base10_parse::<usize>().ok().and_then(|i| {
                let field = fields.iter().nth(i).filter(|f| f.ident.is_none())?;
                Some(FieldRef {
                    member: Member::Unnamed(syn::Index {
                        index: i as u32,
                        span: index.span(),
                    }),
                    ty: &field.ty,
                })
            }),
            index.to_string(),
            index.to_token_stream(),
        ),
    };
    if found.is_none() {
        let names: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                f.ident
                    .as_ref()
                    .map_or_else(|| i.to_string(), Ident::to_string)
            })
            .collect();
        let there = if names.is_empty() {
            "it has no fields".to_owned()
        } else {
            format!("fields: {}", names.join(", "))
        };
        errors.spanned(at, format!("no field `{shown}` here; {there}"));
    }
    found
}
