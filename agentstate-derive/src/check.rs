//! Checks: turns the parsed attributes into the model, reporting every mistake at once.
//!
//! Each message starts with its category: `conflicting_reducers` and
//! `reducer_configuration_invalid` as in OpenArmature, and `state_declaration_invalid` for what
//! is wrong with the struct or its options rather than with a reducer.

use crate::ast::{DefaultValue, Deserialize, Field, Input, Key, Kind, MaxLen, Reducer, Role};
use crate::attr::{self, Item};
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident, Lit};

/// Collects errors so that all of them are reported together.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub fn error(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    pub fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

const REDUCERS: &[&str] = &[
    "last_write_wins",
    "append",
    "merge",
    "bounded_append",
    "dedupe_append",
    "merge_by_key",
    "concat_flatten",
    "merge_all",
    "add_messages",
    "replace_messages",
    "append_items",
    "replace_value",
    "upsert_messages",
    "nested",
    "add",
];

const CONTAINER_OPTIONS: &[&str] = &[
    "update",
    "crate",
    "messages",
    "deserialize",
    "extensible",
    "version",
];
const FIELD_OPTIONS: &[&str] = &["base", "skip"];

/// Reads and checks a derive input.
pub fn input(derive: &DeriveInput) -> syn::Result<Input<'_>> {
    let mut errors = Errors::default();
    let named = match &derive.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(named) => Some(named),
            Fields::Unnamed(fields) => {
                errors.error(
                    fields.span(),
                    "state_declaration_invalid: #[derive(AgentState)] needs a struct with named fields; a tuple struct has no field names to merge by",
                );
                None
            }
            Fields::Unit => {
                errors.error(
                    derive.ident.span(),
                    "state_declaration_invalid: #[derive(AgentState)] needs a struct with named fields; a unit struct has nothing to merge",
                );
                None
            }
        },
        Data::Enum(data) => {
            errors.error(
                data.enum_token.span,
                "state_declaration_invalid: #[derive(AgentState)] works on structs, not enums: a state is a set of fields, each with its reducer",
            );
            None
        }
        Data::Union(data) => {
            errors.error(
                data.union_token.span,
                "state_declaration_invalid: #[derive(AgentState)] works on structs, not unions",
            );
            None
        }
    };

    let mut update = None;
    let mut krate = None;
    let mut messages = None;
    let mut rename_all = None;
    let mut deserialize = None;
    let mut extensible = None;
    let mut version = None;
    let mut serde_container = Vec::new();
    for a in &derive.attrs {
        if a.path().is_ident("reducer") {
            errors.error(
                a.span(),
                "state_declaration_invalid: #[reducer(...)] goes on a field, not on the struct",
            );
        } else if a.path().is_ident("serde") {
            match attr::serde_string(a, "rename_all") {
                Ok(rule) => rename_all = rule.or(rename_all),
                Err(e) => errors.push(e),
            }
            match attr::serde_items(a) {
                Ok(items) => serde_container.extend(items),
                Err(e) => errors.push(e),
            }
        } else if a.path().is_ident("agent_state") {
            let items = match attr::list_items(a) {
                Ok(items) => items,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            for item in items {
                let name = item.name.to_string();
                match (name.as_str(), &item.value) {
                    ("update", Some(value)) => match syn::parse2::<Ident>(value.clone()) {
                        Ok(ident) => update = Some(ident),
                        Err(_) => errors.error(
                            item.span(),
                            "state_declaration_invalid: `update` takes the name of the update type, e.g. #[agent_state(update = ResearchPatch)]",
                        ),
                    },
                    ("crate", Some(value)) => krate = Some(value.clone()),
                    ("deserialize", None) if item.args.is_none() => deserialize = Some(item.name.span()),
                    ("deserialize", _) => errors.error(
                        item.span(),
                        "state_declaration_invalid: `deserialize` takes no value: write #[agent_state(deserialize)]",
                    ),
                    ("extensible", None) if item.args.is_none() => extensible = Some(item.name.span()),
                    ("extensible", _) => errors.error(
                        item.span(),
                        "state_declaration_invalid: `extensible` takes no value: write #[agent_state(extensible)]",
                    ),
                    ("messages", Some(value)) => match syn::parse2::<Ident>(value.clone()) {
                        Ok(ident) => messages = Some(ident),
                        Err(_) => errors.error(
                            item.span(),
                            "state_declaration_invalid: `messages` takes the name of a field, e.g. #[agent_state(messages = history)]",
                        ),
                    },
                    ("version", Some(value)) => match schema_version(value) {
                        Ok(v) => version = Some(v),
                        Err(reason) => errors.error(
                            item.span(),
                            format!("state_declaration_invalid: `version` {reason}, e.g. #[agent_state(version = 2)]"),
                        ),
                    },
                    (known, None) if CONTAINER_OPTIONS.contains(&known) => errors.error(
                        item.span(),
                        format!("state_declaration_invalid: `{known}` needs a value: #[agent_state({known} = ...)]"),
                    ),
                    (field_option, _) if FIELD_OPTIONS.contains(&field_option) => errors.error(
                        item.span(),
                        format!("state_declaration_invalid: `{field_option}` is an option of a field, not of the struct"),
                    ),
                    (unknown, _) => errors.error(
                        item.name.span(),
                        format!(
                            "state_declaration_invalid: unknown agent_state option `{unknown}`{}; the struct takes update, crate, messages, deserialize, extensible and version",
                            suggestion(unknown, CONTAINER_OPTIONS.iter().chain(FIELD_OPTIONS))
                        ),
                    ),
                }
            }
        }
    }

    let deserialize = deserialize.map(|span| {
        if !derive.generics.params.is_empty() {
            errors.error(
                span,
                "state_declaration_invalid: #[agent_state(deserialize)] does not support generic structs; drop it to use serde's derive",
            );
        }
        container_deserialize(derive, &serde_container, &mut errors)
    });

    let mut fields = Vec::new();
    let mut base_seen: Option<&Ident> = None;
    for field in named.into_iter().flat_map(|n| &n.named) {
        let ident = field.ident.as_ref().expect("named field");
        let attrs = match attr::field_attrs(&field.attrs) {
            Ok(attrs) => attrs,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let mut base = None;
        let mut skip = None;
        for a in &attrs.agent_state {
            match attr::list_items(a) {
                Ok(items) => {
                    for item in items {
                        let name = item.name.to_string();
                        if item.value.is_some() || item.args.is_some() {
                            errors.error(
                                item.span(),
                                format!("state_declaration_invalid: `{name}` takes no value: write #[agent_state({name})]"),
                            );
                        }
                        match name.as_str() {
                            "base" => base = Some(item.name.span()),
                            "skip" => skip = Some(item.name.span()),
                            container if CONTAINER_OPTIONS.contains(&container) => errors.error(
                                item.name.span(),
                                format!("state_declaration_invalid: `{container}` is an option of the struct, not of a field"),
                            ),
                            unknown => errors.error(
                                item.name.span(),
                                format!(
                                    "state_declaration_invalid: unknown agent_state option `{unknown}`{}; a field takes base or skip",
                                    suggestion(unknown, FIELD_OPTIONS.iter().chain(CONTAINER_OPTIONS))
                                ),
                            ),
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }

        let mut reducers = Vec::new();
        for a in &attrs.reducers {
            match reducer(a, &mut errors) {
                Some(r) => {
                    let span = r.span;
                    reducers.push((r, span));
                }
                None => reducers.push((
                    Reducer {
                        name: "?".into(),
                        span: a.span(),
                        kind: Kind::LastWriteWins,
                    },
                    a.span(),
                )),
            }
        }
        if reducers.len() > 1 {
            let names: Vec<String> = reducers
                .iter()
                .map(|(r, _)| format!("`{}`", r.name))
                .collect();
            errors.error(
                reducers[1].1,
                format!(
                    "conflicting_reducers: field `{ident}` declares more than one reducer ({}); a field takes exactly one",
                    names.join(" and ")
                ),
            );
        }

        let role = match (base, skip, reducers.into_iter().next()) {
            (Some(span), Some(_), _) => {
                errors.error(span, format!("state_declaration_invalid: field `{ident}` cannot be both the base and skipped"));
                Role::Skip
            }
            (Some(_), None, Some((_, span))) => {
                errors.error(
                    span,
                    format!("conflicting_reducers: field `{ident}` is the base state, which merges through its own fields' reducers; remove #[reducer(...)]"),
                );
                Role::Base
            }
            (Some(span), None, None) => {
                if !attrs.serde_flatten {
                    errors.error(
                        span,
                        format!("state_declaration_invalid: the base field `{ident}` needs #[serde(flatten)]: without it the state saves its base's fields under \"{ident}\" while updates and AgentFlow put them beside this state's own; add #[serde(flatten)] to `{ident}`"),
                    );
                }
                if let Some(first) = base_seen {
                    errors.error(
                        span,
                        format!("state_declaration_invalid: a state extends one base, but `{first}` and `{ident}` are both marked #[agent_state(base)]"),
                    );
                }
                base_seen = Some(ident);
                Role::Base
            }
            (None, Some(_), Some((_, span))) => {
                errors.error(
                    span,
                    format!("state_declaration_invalid: field `{ident}` is skipped, so updates never touch it; remove #[reducer(...)] or #[agent_state(skip)]"),
                );
                Role::Skip
            }
            (None, Some(_), None) => Role::Skip,
            (None, None, Some((r, _))) => Role::Reduced(r),
            (None, None, None) => Role::Reduced(Reducer {
                name: "last_write_wins".into(),
                span: ident.span(),
                kind: Kind::LastWriteWins,
            }),
        };

        let (default, skip_deserializing) = if deserialize.is_some() {
            field_deserialize(&attrs.serde, matches!(role, Role::Base), &mut errors)
        } else {
            (None, false)
        };

        let unraw = ident.to_string().trim_start_matches("r#").to_owned();
        let json_name = attrs
            .serde_rename
            .or_else(|| {
                rename_all
                    .as_deref()
                    .and_then(|rule| attr::rename_all(rule, &unraw))
            })
            .unwrap_or(unraw);
        fields.push(Field {
            ident,
            ty: &field.ty,
            tokens: crate::code::handle(&field.ty),
            json_name,
            role,
            default,
            skip_deserializing,
        });
    }

    if let Some(messages) = &messages {
        match fields.iter().find(|f| f.ident == messages) {
            None if named.is_some() => errors.error(
                messages.span(),
                format!("state_declaration_invalid: #[agent_state(messages = {messages})] names no field of this struct"),
            ),
            Some(Field { role: Role::Skip, .. }) => errors.error(
                messages.span(),
                format!("state_declaration_invalid: the messages field `{messages}` is skipped, so messages could never reach it"),
            ),
            _ => {}
        }
    }

    if messages.is_none() {
        messages = default_messages(&fields, &mut errors);
    }

    errors.finish()?;
    let ident = &derive.ident;
    Ok(Input {
        ident,
        vis: &derive.vis,
        generics: &derive.generics,
        update: update.unwrap_or_else(|| Ident::new(&format!("{ident}Update"), ident.span())),
        krate: krate.unwrap_or_else(|| quote!(::agentstate)),
        messages,
        deserialize,
        extensible: extensible.is_some(),
        version,
        fields,
    })
}

/// Checks `version = ...`: a whole number from 1 to `u32::MAX` (0 is what a state without the
/// option has).
fn schema_version(value: &TokenStream) -> Result<u32, String> {
    let lit = attr::integer_literal(value)
        .ok_or_else(|| format!("takes a whole number, not `{value}`"))?;
    if !matches!(lit.suffix(), "" | "u32") {
        return Err(format!("takes a plain whole number, not `{lit}`"));
    }
    match lit.base10_parse::<u32>() {
        Ok(0) => Err("starts at 1 (0 is the version of a state that declares none)".into()),
        Ok(v) => Ok(v),
        Err(_) => Err(format!(
            "takes a whole number from 1 to {}, not `{lit}`",
            u32::MAX
        )),
    }
}

/// The messages field of a struct without `#[agent_state(messages = ...)]`: its one field merged
/// with `add_messages` whose type is written `Vec<Message>` or `MessageList` (a type alias or a
/// JSON field must be named). None on a state extending `AgentState`, whose messages go into the
/// base's `context`. Two such fields are an error asking to name one.
fn default_messages(fields: &[Field<'_>], errors: &mut Errors) -> Option<Ident> {
    if fields
        .iter()
        .any(|f| matches!(f.role, Role::Base) && is_agent_state(f.ty))
    {
        return None;
    }
    let candidates: Vec<(&Ident, Span)> = fields
        .iter()
        .filter_map(|f| match &f.role {
            Role::Reduced(r) if matches!(r.kind, Kind::AddMessages) && is_message_list(f.ty) => {
                Some((f.ident, r.span))
            }
            _ => None,
        })
        .collect();
    match candidates.as_slice() {
        [] => None,
        [(only, _)] => Some((*only).clone()),
        [(first, _), (second, span), ..] => {
            errors.error(
                *span,
                format!(
                    "state_declaration_invalid: fields `{first}` and `{second}` both merge with add_messages, so neither is the messages field by default (where node outputs' messages and tool messages go); name it, e.g. #[agent_state(messages = {first})]"
                ),
            );
            None
        }
    }
}

/// The last segment of a type path, with its generic arguments.
fn last_segment(ty: &syn::Type) -> Option<&syn::PathSegment> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        _ => None,
    }
}

/// Whether a type is written `AgentState` (`agentstate::state::AgentState`).
pub fn is_agent_state(ty: &syn::Type) -> bool {
    last_segment(ty).is_some_and(|s| s.ident == "AgentState")
}

/// Whether a type is written `MessageList` or `Vec<Message>` (any paths).
fn is_message_list(ty: &syn::Type) -> bool {
    let Some(segment) = last_segment(ty) else {
        return false;
    };
    if segment.ident == "MessageList" {
        return true;
    }
    match &segment.arguments {
        syn::PathArguments::AngleBracketed(args) if segment.ident == "Vec" => {
            matches!(args.args.first(), Some(syn::GenericArgument::Type(item)) if last_segment(item).is_some_and(|s| s.ident == "Message"))
        }
        _ => false,
    }
}

/// The error on a serde option that `#[agent_state(deserialize)]` does not implement.
fn unsupported(item: &Item, errors: &mut Errors) {
    errors.error(
        item.span(),
        format!(
            "state_declaration_invalid: #[serde({})] is not supported with #[agent_state(deserialize)], which generates this state's Deserialize; drop #[agent_state(deserialize)] to use serde's derive (the opt-in supports rename, default, skip, skip_deserializing, flatten on the base, and on the struct default, rename_all, deny_unknown_fields)",
            item.name
        ),
    );
}

/// serde's `default` or `default = "path"`.
fn default_value(item: &Item, errors: &mut Errors) -> Option<DefaultValue> {
    match (&item.value, &item.args) {
        (None, None) => Some(DefaultValue::Trait),
        (Some(value), None) => {
            match syn::parse2::<syn::LitStr>(value.clone()).and_then(|lit| lit.parse::<syn::Path>())
            {
                Ok(path) => Some(DefaultValue::Path(path)),
                Err(_) => {
                    errors.error(item.span(), "state_declaration_invalid: serde's `default = \"...\"` takes the path of a function, as a string");
                    None
                }
            }
        }
        _ => {
            unsupported(item, errors);
            None
        }
    }
}

/// The struct's serde options under `#[agent_state(deserialize)]`.
fn container_deserialize(derive: &DeriveInput, items: &[Item], errors: &mut Errors) -> Deserialize {
    let ident = derive.ident.to_string().trim_start_matches("r#").to_owned();
    let mut out = Deserialize {
        default: None,
        deny_unknown_fields: false,
        expecting: format!("struct {ident}"),
        name: ident,
    };
    let mut expecting = None;
    let string = |item: &Item| {
        item.value
            .as_ref()
            .and_then(|v| syn::parse2::<syn::LitStr>(v.clone()).ok())
            .map(|lit| lit.value())
    };
    for item in items {
        let name = item.name.to_string();
        let plain = item.value.is_none() && item.args.is_none();
        match name.as_str() {
            "default" => out.default = default_value(item, errors),
            "deny_unknown_fields" if plain => out.deny_unknown_fields = true,
            "rename" | "expecting" => match string(item) {
                Some(text) if name == "rename" => out.name = text,
                Some(text) => expecting = Some(text),
                None => unsupported(item, errors),
            },
            "rename_all" if item.value.is_some() => {}
            // Serialization only, or the path of serde.
            "crate" | "into" if item.value.is_some() => {}
            _ => unsupported(item, errors),
        }
    }
    // serde's derive says `struct Name` with the Rust name, renamed or not.
    out.expecting = expecting.unwrap_or(out.expecting);
    out
}

/// A field's serde options under `#[agent_state(deserialize)]`: its default and whether it is
/// skipped.
fn field_deserialize(
    items: &[Item],
    base: bool,
    errors: &mut Errors,
) -> (Option<DefaultValue>, bool) {
    let mut default = None;
    let mut skip = false;
    for item in items {
        let plain = item.value.is_none() && item.args.is_none();
        match item.name.to_string().as_str() {
            "flatten" if base && plain => {}
            "rename" if !base && item.value.is_some() => {}
            "default" if !base => default = default_value(item, errors),
            "skip" | "skip_deserializing" if !base && plain => skip = true,
            // Serialization only.
            "skip_serializing" if plain => {}
            "skip_serializing_if" | "serialize_with" if item.value.is_some() => {}
            _ => unsupported(item, errors),
        }
    }
    (default, skip)
}

/// Reads one `#[reducer(...)]` attribute; `None` when it had errors (already reported).
fn reducer(a: &syn::Attribute, errors: &mut Errors) -> Option<Reducer> {
    let items = match attr::list_items(a) {
        Ok(items) => items,
        Err(e) => {
            errors.push(e);
            return None;
        }
    };
    let mut names = Vec::new();
    let mut with = None;
    let mut update = None;
    let mut idempotent = false;
    let mut ok = true;
    for item in items {
        let name = item.name.to_string();
        match (name.as_str(), &item.value) {
            ("with", Some(value)) => match syn::parse2::<syn::Path>(value.clone()) {
                Ok(path) => with = Some((path, item.name.span())),
                Err(_) => {
                    errors.error(item.span(), "reducer_configuration_invalid: `with` takes the path of a function `fn(&T, U) -> Result<T, E>`");
                    ok = false;
                }
            },
            ("update", Some(value)) => match syn::parse2::<syn::Type>(value.clone()) {
                Ok(ty) => update = Some(ty),
                Err(_) => {
                    errors.error(item.span(), "reducer_configuration_invalid: `update` takes the type a custom reducer's updates carry");
                    ok = false;
                }
            },
            ("idempotent", None) if item.args.is_none() => idempotent = true,
            (_, Some(_)) => {
                errors.error(
                    item.span(),
                    format!("reducer_configuration_invalid: unknown option `{name} = ...`; a custom reducer is written #[reducer(with = path::to::function)]"),
                );
                ok = false;
            }
            _ => names.push(item),
        }
    }
    if let Some((function, span)) = with {
        if let Some(other) = names.first() {
            errors.error(
                other.span(),
                format!("conflicting_reducers: #[reducer(...)] declares both `with = ...` and `{}`; a field takes exactly one reducer", other.name),
            );
            return None;
        }
        return ok.then(|| Reducer {
            name: function
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect::<Vec<_>>()
                .join("::"),
            span,
            kind: Kind::With {
                function,
                update,
                idempotent,
            },
        });
    }
    if update.is_some() || idempotent {
        errors.error(
            a.span(),
            "reducer_configuration_invalid: `update` and `idempotent` describe a custom reducer: add `with = path::to::function`",
        );
        ok = false;
    }
    match names.len() {
        0 => {
            errors.error(a.span(), "reducer_configuration_invalid: #[reducer(...)] needs a reducer name, e.g. #[reducer(append)]");
            None
        }
        1 => {
            let item = names.pop().expect("one");
            let r = known_reducer(item, errors);
            if ok {
                r
            } else {
                None
            }
        }
        _ => {
            let listed: Vec<String> = names.iter().map(|i| format!("`{}`", i.name)).collect();
            errors.error(
                names[1].span(),
                format!("conflicting_reducers: #[reducer(...)] declares {} reducers ({}); a field takes exactly one", names.len(), listed.join(", ")),
            );
            None
        }
    }
}

/// One parameter of a reducer: `name = value`, or a lone value.
struct Param {
    name: Option<Ident>,
    value: TokenStream,
    span: Span,
}

fn params(args: TokenStream) -> Vec<Param> {
    attr::split_commas(args)
        .into_iter()
        .map(|part| {
            let tokens: Vec<TokenTree> = part.clone().into_iter().collect();
            let span = tokens.first().map_or_else(Span::call_site, TokenTree::span);
            match tokens.as_slice() {
                [TokenTree::Ident(name), TokenTree::Punct(eq), rest @ ..]
                    if eq.as_char() == '=' && !rest.is_empty() =>
                {
                    Param {
                        name: Some(name.clone()),
                        value: rest.iter().cloned().collect(),
                        span,
                    }
                }
                _ => Param {
                    name: None,
                    value: part,
                    span,
                },
            }
        })
        .collect()
}

fn known_reducer(item: Item, errors: &mut Errors) -> Option<Reducer> {
    let name = item.name.to_string();
    let span = item.name.span();
    let allowed: &[&str] = match name.as_str() {
        "bounded_append" => &["max_len"],
        "dedupe_append" | "merge_by_key" => &["key"],
        known if REDUCERS.contains(&known) => &[],
        unknown => {
            errors.error(
                span,
                format!(
                    "reducer_configuration_invalid: unknown reducer `{unknown}`{}; the reducers are {}, or `with = path::to::function` for your own",
                    suggestion(unknown, REDUCERS.iter()),
                    REDUCERS.join(", ")
                ),
            );
            return None;
        }
    };
    let mut given: Vec<(String, TokenStream, Span)> = Vec::new();
    let mut ok = true;
    if let Some((args, _)) = item.args {
        for param in params(args) {
            let pname = match (&param.name, allowed) {
                (Some(n), _) => n.to_string(),
                // `bounded_append(50)`: the one parameter, unnamed.
                (None, [only]) => (*only).to_owned(),
                (None, _) => {
                    errors.error(param.span, format!("reducer_configuration_invalid: write the parameters of `{name}` as `name = value`"));
                    ok = false;
                    continue;
                }
            };
            if !allowed.contains(&pname.as_str()) {
                let expected = if allowed.is_empty() {
                    format!("`{name}` takes no parameters")
                } else {
                    format!("`{name}` takes {}", allowed.join(", "))
                };
                errors.error(
                    param.span,
                    format!(
                        "reducer_configuration_invalid: unknown parameter `{pname}`{}; {expected}",
                        suggestion(&pname, allowed.iter())
                    ),
                );
                ok = false;
            } else if given.iter().any(|(g, _, _)| *g == pname) {
                errors.error(
                    param.span,
                    format!("reducer_configuration_invalid: parameter `{pname}` is given twice"),
                );
                ok = false;
            } else {
                given.push((pname, param.value, param.span));
            }
        }
    }
    let param = |n: &str| {
        given
            .iter()
            .find(|(g, _, _)| g == n)
            .map(|(_, v, s)| (v.clone(), *s))
    };
    let kind = match name.as_str() {
        "last_write_wins" => Kind::LastWriteWins,
        "replace_value" => Kind::ReplaceValue,
        "append" => Kind::Append,
        "merge" => Kind::Merge,
        "concat_flatten" => Kind::ConcatFlatten,
        "merge_all" => Kind::MergeAll,
        "add_messages" => Kind::AddMessages,
        "replace_messages" => Kind::ReplaceMessages,
        "append_items" => Kind::AppendItems,
        "upsert_messages" => Kind::UpsertMessages,
        "nested" => Kind::Nested,
        "add" => Kind::Add,
        "bounded_append" => match param("max_len") {
            None => {
                if ok {
                    errors.error(span, "reducer_configuration_invalid: bounded_append needs max_len, e.g. #[reducer(bounded_append(max_len = 50))]");
                }
                return None;
            }
            Some((value, vspan)) => Kind::BoundedAppend(max_len(value, vspan, errors)?),
        },
        "dedupe_append" => Kind::DedupeAppend(match param("key") {
            None => None,
            Some((value, vspan)) => Some(key(value, vspan, errors)?),
        }),
        "merge_by_key" => match param("key") {
            None => {
                if ok {
                    errors.error(span, "reducer_configuration_invalid: merge_by_key needs a key: #[reducer(merge_by_key(key = id))] names a field of the items (a function path or a closure works too)");
                }
                return None;
            }
            Some((value, vspan)) => Kind::MergeByKey(key(value, vspan, errors)?),
        },
        _ => unreachable!("checked against REDUCERS above"),
    };
    ok.then_some(Reducer { name, span, kind })
}

fn max_len(value: TokenStream, span: Span, errors: &mut Errors) -> Option<MaxLen> {
    let tokens: Vec<TokenTree> = value.clone().into_iter().collect();
    let (negative, literal) = match tokens.as_slice() {
        [TokenTree::Punct(minus), TokenTree::Literal(lit)] if minus.as_char() == '-' => {
            (true, lit.clone())
        }
        [TokenTree::Literal(lit)] => (false, lit.clone()),
        _ => {
            return match syn::parse2::<syn::Path>(value) {
                Ok(path) => Some(MaxLen::Const(path)),
                Err(_) => {
                    errors.error(span, "reducer_configuration_invalid: bounded_append's max_len must be a positive integer literal or the path of an integer const");
                    None
                }
            }
        }
    };
    let shown = if negative {
        format!("-{literal}")
    } else {
        literal.to_string()
    };
    match Lit::new(literal) {
        Lit::Int(int) => match int.base10_parse::<u64>() {
            Ok(n) if n >= 1 && !negative && n <= u64::from(u32::MAX) => Some(MaxLen::Literal(n)),
            Ok(n) if n >= 1 && !negative => {
                errors.error(span, format!("reducer_configuration_invalid: bounded_append's max_len of {n} is too large (at most {})", u32::MAX));
                None
            }
            Ok(_) => {
                errors.error(span, format!("reducer_configuration_invalid: bounded_append's max_len must be at least 1, got {shown}"));
                None
            }
            Err(_) => {
                errors.error(span, format!("reducer_configuration_invalid: bounded_append's max_len must be a positive integer, got {shown}"));
                None
            }
        },
        _ => {
            errors.error(span, format!("reducer_configuration_invalid: bounded_append's max_len must be a positive integer, got {shown}"));
            None
        }
    }
}

fn key(value: TokenStream, span: Span, errors: &mut Errors) -> Option<Key> {
    let tokens: Vec<TokenTree> = value.clone().into_iter().collect();
    match tokens.as_slice() {
        [TokenTree::Ident(field)] => Some(Key::Field(field.clone())),
        [TokenTree::Punct(p), ..] if p.as_char() == '|' => Some(Key::Function(value)),
        [TokenTree::Ident(m), TokenTree::Punct(p), ..] if m == "move" && p.as_char() == '|' => {
            Some(Key::Function(value))
        }
        _ => match syn::parse2::<syn::Path>(value.clone()) {
            Ok(path) if path.segments.len() > 1 || path.leading_colon.is_some() => {
                Some(Key::Function(path.into_token_stream()))
            }
            _ => {
                errors.error(span, "reducer_configuration_invalid: a key is the name of a field of the items (`key = id`), a function path (`key = self::key_of`) or a closure (`key = |item: &Item| item.id`)");
                None
            }
        },
    }
}

/// ` (did you mean `x`?)` when a candidate is close to `name`.
fn suggestion<'a>(name: &str, candidates: impl Iterator<Item = &'a &'a str>) -> String {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .map(|c| (distance(name, c), *c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

/// Edit distance where swapping two neighbours counts as one edit.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d: Vec<usize> = (0..(a.len() + 1) * w)
        .map(|k| {
            if k < w {
                k
            } else if k % w == 0 {
                k / w
            } else {
                0
            }
        })
        .collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = best;
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_find_typos() {
        assert_eq!(
            suggestion("apend", REDUCERS.iter()),
            " (did you mean `append`?)"
        );
        assert_eq!(
            suggestion("merge_by_kye", REDUCERS.iter()),
            " (did you mean `merge_by_key`?)"
        );
        assert_eq!(suggestion("frobnicate", REDUCERS.iter()), "");
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
