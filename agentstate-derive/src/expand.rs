//! Code generation: the update struct, its setters, and the `State` implementation.
//!
//! The generated impls hand each operation a *field list* (a tuple with one element per field)
//! and the runtime's field lists (`agentstate::__private`) do the per-field work: planning,
//! applying, composing, writing, reading, comparing and printing, type-checked once in the
//! runtime instead of once per state in the user's crate. Every item but the two structs and
//! an extensible state's setters trait sits in a `const _: () = { ... };` block that names the
//! runtime `__p` (`use ::agentstate::__private as __p;`). The code is written as text with the
//! user's tokens spliced in (`code.rs`).

use crate::ast::{DefaultValue, Field, Input, Key, Kind, MaxLen, Reducer, Role};
use crate::check;
use crate::code::{lit, respan, tuple, Code};
use proc_macro2::{Delimiter, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use std::fmt::Write as _;
use syn::{DeriveInput, Ident, Type};

/// Expands `#[derive(AgentState)]`.
pub fn derive(input: &DeriveInput) -> TokenStream {
    match check::input(input) {
        Ok(model) => expand(&model),
        Err(errors) => {
            let stub = stub(input);
            let errors = errors.to_compile_error();
            quote!(#errors #stub)
        }
    }
}

/// On error: an empty update type and `State` implementation, so that code using the state
/// reports the derive's errors only, not a cascade of "no such type" errors.
fn stub(input: &DeriveInput) -> TokenStream {
    if !input.generics.params.is_empty() {
        return TokenStream::new();
    }
    let ident = &input.ident;
    let vis = &input.vis;
    let update = format_ident!("{}Update", ident);
    quote! {
        #[derive(::core::default::Default, ::core::fmt::Debug, ::core::clone::Clone, ::core::cmp::PartialEq)]
        #vis struct #update {}

        const _: () = {
            #[automatically_derived]
            impl ::agentstate::State for #ident {
                type Update = #update;
                type Plan = ();
                const FIELDS: &'static [&'static str] = &[];
                fn plan(&self, _: #update) -> ::core::result::Result<(), ::agentstate::Error> {
                    ::core::result::Result::Ok(())
                }
                fn apply(&mut self, _: ()) {}
                fn compose(
                    first: #update,
                    _: #update,
                    _: ::agentstate::__private::Combine,
                ) -> ::core::result::Result<#update, ::agentstate::Error> {
                    ::core::result::Result::Ok(first)
                }
                fn schema() -> ::agentstate::__private::Schema {
                    ::agentstate::__private::Schema::describe(::std::vec::Vec::new())
                }
            }
        };
    }
}

/// Setter names that would shadow the update's trait methods or its own methods get a `set_`
/// prefix.
const SHADOWING: &[&str] = &[
    "default",
    "clone",
    "eq",
    "ne",
    "fmt",
    "serialize",
    "deserialize",
    "from_json",
    "from_json_lenient",
    "then",
];

fn setter_name(field: &Ident) -> String {
    let name = field.to_string();
    if SHADOWING.contains(&name.as_str()) {
        format!("set_{name}")
    } else {
        name
    }
}

/// Where everything generated for a field points: the field's name, resolved at the derive's
/// call site (so the generated code's own names keep resolving when the field's name comes from
/// a `macro_rules!` argument).
fn field_span(field: &Field) -> Span {
    field.ident.span().resolved_at(Span::call_site())
}

fn key_reducer_fn(field: &Ident) -> String {
    format!(
        "__agentstate_reducer_{}",
        field.to_string().trim_start_matches("r#")
    )
}

/// The field's name without `r#`, for names made from it.
fn unraw(field: &Ident) -> String {
    field.to_string().trim_start_matches("r#").to_owned()
}

/// The Overwrite key of a field in an update's JSON.
fn overwrite_key(json: &str) -> String {
    lit(&format!("{json}.__overwrite__"))
}

// ---------------------------------------------------------------------------------------------
// Reduced fields

/// What the generation needs of a reduced field's reducer, written with the runtime's path `p`
/// (`__p` inside the generated `const` block, the full path outside it).
struct Reduced {
    /// The reducer's type, with `()` standing for a key function (whose type cannot be
    /// written): enough to name the update and plan types through `Merges`.
    rty: Code,
    /// An expression building the reducer.
    expr: Code,
    /// What the update carries for the field (inside an `Option`).
    uty: Code,
    /// Whether the update carries the field's own type.
    value: bool,
}

fn reduced(field: &Field, r: &Reducer, p: &str) -> Reduced {
    let ty = &field.tokens;
    let mut rty = Code::default();
    let mut expr = Code::default();
    let mut uty = Code::default();
    let mut value = false;
    match &r.kind {
        Kind::ConcatFlatten | Kind::MergeAll => {
            uty.s("::std::vec::Vec<").t(ty).s(">");
        }
        Kind::UpsertMessages => {
            let _ = write!(uty, "::std::vec::Vec<{p}::MessageUpdate>");
        }
        Kind::Nested => {
            let _ = write!(uty.s("<").t(ty), " as {p}::State>::Update");
        }
        // A user function's updates combine by running it on each in turn (`InOrder`).
        Kind::With { update, .. } => {
            let _ = write!(uty, "{p}::Steps<");
            match update {
                Some(u) => uty.t(u),
                None => uty.t(ty),
            };
            uty.s(">");
        }
        _ => {
            uty.t(ty);
            value = true;
        }
    }
    let simple = match &r.kind {
        Kind::LastWriteWins => "LastWriteWins",
        Kind::ReplaceValue => "ReplaceValue",
        Kind::Append => "Append",
        Kind::Merge => "Merge",
        Kind::ConcatFlatten => "ConcatFlatten",
        Kind::MergeAll => "MergeAll",
        Kind::AddMessages => "AddMessages",
        Kind::ReplaceMessages => "ReplaceMessages",
        Kind::AppendItems => "AppendItems",
        Kind::UpsertMessages => "UpsertMessages",
        Kind::Nested => "Nested",
        Kind::Add => "Add",
        Kind::BoundedAppend(_) => "BoundedAppend",
        Kind::DedupeAppend(None) => "DedupeAppend<__p::Identity>",
        Kind::DedupeAppend(Some(_)) => "DedupeAppend<()>",
        Kind::MergeByKey(_) => "MergeByKey<()>",
        Kind::With { .. } => "",
    };
    let _ = write!(rty, "{p}::{}", simple.replace("__p", p));
    let _ = write!(expr, "{p}::{}", simple.replace("__p", p));
    match &r.kind {
        Kind::BoundedAppend(MaxLen::Literal(n)) => {
            expr = Code::default();
            let _ = write!(expr, "{p}::BoundedAppend::__checked({n}usize)");
        }
        Kind::BoundedAppend(MaxLen::Const(path)) => {
            expr = Code::default();
            let _ = write!(expr, "{p}::BoundedAppend::__checked");
            expr.g(Delimiter::Parenthesis, |g| {
                g.g(Delimiter::Parenthesis, |h| {
                    h.t(path);
                })
                .s(" as usize");
            });
        }
        Kind::DedupeAppend(None) => {
            expr = Code::default();
            let _ = write!(expr, "{p}::DedupeAppend::new()");
        }
        Kind::DedupeAppend(Some(_)) | Kind::MergeByKey(_) => {
            expr = Code::default();
            let _ = write!(expr, "Self::{}()", key_reducer_fn(field.ident));
        }
        Kind::With {
            function,
            update,
            idempotent,
        } => {
            let mut u = Code::default();
            match update {
                Some(update) => u.t(update),
                None => u.t(ty),
            };
            rty = Code::default();
            let _ = write!(rty, "{p}::InOrder<{p}::FnReducer<(), ");
            rty.c(&u).s(">>");
            expr = Code::default();
            let _ = write!(expr, "{p}::InOrder");
            expr.g(Delimiter::Parenthesis, |e| {
                let _ = write!(e, "{p}::FnReducer::<_, ");
                e.c(&u).s(">::new");
                e.g(Delimiter::Parenthesis, |g| {
                    g.s(&lit(&r.name)).s(",").t(function);
                });
                if *idempotent {
                    e.s(".idempotent()");
                }
            });
        }
        _ => {}
    }
    Reduced {
        rty,
        expr,
        uty,
        value,
    }
}

// ---------------------------------------------------------------------------------------------
// The expansion

fn expand(input: &Input) -> TokenStream {
    let gen = Gen::new(input);
    let mut out = Code::default();
    gen.structs(&mut out);
    if input.extensible && !gen.generic {
        gen.setters_trait(&mut out);
    }
    out.s("const _: () =");
    out.g(Delimiter::Brace, |out| {
        let _ = write!(out, "use {}::__private as __p;", gen.k);
        gen.requirements_item(out);
        gen.defaults(out);
        gen.entries(out);
        gen.setters(out);
        gen.json(out);
        gen.update_impl(out);
        gen.messages(out);
        gen.key_fns(out);
        gen.base(out);
        gen.state(out);
        gen.deserialize(out);
    });
    out.s(";");
    match out.finish() {
        Ok(tokens) => tokens,
        Err(message) => syn::Error::new(
            Span::call_site(),
            format!(
                "agentstate-derive generated code that does not lex; please report it: {message}"
            ),
        )
        .to_compile_error(),
    }
}

/// What every item of the expansion needs.
struct Gen<'a> {
    input: &'a Input<'a>,
    /// The runtime crate's path, as text.
    k: String,
    name: String,
    update: String,
    ow_struct: String,
    /// The update's Overwrites field: `overwrite` unless a field already has that name.
    ow: &'static str,
    generic: bool,
    /// The impl's generics and the type's arguments, as text.
    impl_g: String,
    ty_g: String,
    /// Each field, with its reducer's parts for code inside the `const` block.
    fields: Vec<(&'a Field<'a>, Option<Reduced>)>,
    base: Option<&'a Field<'a>>,
    /// A generic struct's `PhantomData` field, which its update and Overwrites carry.
    phantom: Option<String>,
    preds: Preds,
}

/// The where-clause predicates of the generated impls. What each field needs is stated once
/// per field, spanned on the field, in the where clause of each impl whose code uses it (rustc
/// reports one predicate at one span once, and the code then assumes it): that its reducer
/// fits its type (or that a nested field or the base is a state), in the `State` impl; that its
/// type is a field value (`FieldValue`), in the impls of the update's entries. The traits carry
/// `#[diagnostic::on_unimplemented]` messages with a hint.
#[derive(Default)]
struct Preds {
    /// The struct's own where clause.
    own: TokenStream,
    /// Each field's reducer fits its type: the `State` impl.
    fits: TokenStream,
    /// A base or nested state is a state, stated where nothing assumes it (see `assumed`).
    states: TokenStream,
    /// Those of keyed fields: their key functions.
    key_fits: TokenStream,
    /// Those of messages fields: their setters prepare through the reducer.
    message_fits: TokenStream,
    /// Each value the update carries is a `FieldValue`: the update's entries.
    values: TokenStream,
    /// The base is extensible: the update's `Extends` impl.
    extends: TokenStream,
    /// A base's or nested state's update is a field of this update, written
    /// `<T as State>::Update`: when `T` is not a state, every item naming it would report it
    /// again. A non-generic struct states it plainly once, in the `State` impl, and every
    /// other item assumes it under a `for<'_>` binder, which rustc does not check where it is
    /// written. (Only for these fields: assuming every field's requirements this way costs a
    /// release build a third more, the trait solver then working under those assumptions.)
    assumed: TokenStream,
}

impl<'a> Gen<'a> {
    fn new(input: &'a Input<'a>) -> Gen<'a> {
        let generics = input.generics;
        let generic = !generics.params.is_empty();
        let (impl_g, ty_g, _) = generics.split_for_impl();
        let fields: Vec<_> = input
            .fields
            .iter()
            .map(|f| match &f.role {
                Role::Reduced(r) => (f, Some(reduced(f, r, "__p"))),
                _ => (f, None),
            })
            .collect();
        let base = fields
            .iter()
            .find(|(f, _)| matches!(f.role, Role::Base))
            .map(|(f, _)| *f);
        let type_params: Vec<String> = generics
            .type_params()
            .map(|p| format!("{},", p.ident))
            .collect();
        let lifetimes: Vec<String> = generics
            .lifetimes()
            .map(|l| format!("&{} (),", l.lifetime))
            .collect();
        let phantom = (!type_params.is_empty() || !lifetimes.is_empty()).then(|| {
            format!(
                "#[doc(hidden)] pub __agentstate_params: ::core::marker::PhantomData<fn() -> ({}{})>,",
                lifetimes.concat(),
                type_params.concat()
            )
        });
        let update = input.update.to_string();
        let mut gen = Gen {
            input,
            k: input.krate.to_string().replace(' ', ""),
            name: input.ident.to_string(),
            ow_struct: format!("{update}Overwrite"),
            update,
            ow: if input.fields.iter().any(|f| f.ident == "overwrite") {
                "__overwrite"
            } else {
                "overwrite"
            },
            generic,
            impl_g: impl_g.to_token_stream().to_string(),
            ty_g: ty_g.to_token_stream().to_string(),
            fields,
            base,
            phantom,
            preds: Preds::default(),
        };
        gen.preds = gen.requirements();
        gen
    }

    fn requirements(&self) -> Preds {
        let mut preds = Preds::default();
        if let Some(w) = &self.input.generics.where_clause {
            let p = w.predicates.iter();
            preds.own = quote!(#(#p,)*);
        }
        let krate = &self.input.krate;
        for (field, r) in &self.fields {
            let ty = &field.tokens;
            let span = field_span(field);
            let p = respan(quote!(__p), span);
            let state_preds = |assumed: &mut TokenStream| {
                if !self.generic {
                    // Also on the update struct, outside the `const` block: the full path.
                    let full = respan(quote!(#krate::__private), span);
                    let binder = respan(quote!(for<'__agentstate>), span);
                    assumed.extend(quote_spanned! {span=>
                        #binder #ty: #full::State,
                        #binder <#ty as #full::State>::Update: #full::FieldTraits,
                    });
                }
            };
            match (&field.role, r) {
                (Role::Skip, _) => {}
                (Role::Base, _) => {
                    preds.fits.extend(quote_spanned!(span=> #ty: #p::State,));
                    preds.states.extend(quote_spanned!(span=> #ty: #p::State,));
                    preds
                        .extends
                        .extend(quote_spanned!(span=> #ty: #p::Extensible,));
                    state_preds(&mut preds.assumed);
                }
                (Role::Reduced(reducer), Some(r)) => {
                    preds
                        .values
                        .extend(quote_spanned!(span=> #ty: #p::FieldValue,));
                    if let Kind::Nested = reducer.kind {
                        preds.fits.extend(quote_spanned!(span=> #ty: #p::State,));
                        preds.states.extend(quote_spanned!(span=> #ty: #p::State,));
                        state_preds(&mut preds.assumed);
                        continue;
                    }
                    let uty = r.uty.clone().finish().unwrap_or_default();
                    // What the update carries when it is not the field's type (a list of them,
                    // or a function reducer's `Steps`) is a field value too.
                    if let Kind::ConcatFlatten | Kind::MergeAll | Kind::With { .. } = reducer.kind {
                        preds
                            .values
                            .extend(quote_spanned!(span=> #uty: #p::FieldValue,));
                    }
                    let rty = r.rty.clone().finish().unwrap_or_default();
                    // A key function's reducer (and a function's) is named by its types alone.
                    let fit = match reducer.kind {
                        Kind::DedupeAppend(Some(_)) | Kind::MergeByKey(_) | Kind::With { .. } => {
                            quote_spanned!(span=> #p::FitsTypes)
                        }
                        _ => quote_spanned!(span=> #p::Fits),
                    };
                    let (rty, uty) = (respan(rty, span), respan(uty, span));
                    let pred = if r.value {
                        quote_spanned!(span=> #rty: #fit<#ty>,)
                    } else {
                        quote_spanned!(span=> #rty: #fit<#ty, #uty>,)
                    };
                    match reducer.kind {
                        Kind::DedupeAppend(Some(_)) | Kind::MergeByKey(_) => {
                            preds.key_fits.extend(pred.clone())
                        }
                        Kind::AddMessages | Kind::ReplaceMessages => {
                            preds.message_fits.extend(pred.clone())
                        }
                        _ => {}
                    }
                    preds.fits.extend(pred);
                }
                (Role::Reduced(_), None) => {}
            }
        }
        preds
    }

    /// A base's or nested state's `T: State`, stated plainly once: every impl assumes it (see
    /// `Preds::assumed`), so without this item a field that is not a state would compile.
    fn requirements_item(&self, out: &mut Code) {
        if self.generic || self.preds.states.is_empty() {
            return;
        }
        let _ = write!(
            out,
            "#[allow(dead_code, non_camel_case_types)] struct __AgentStateRequirementsOf{} where ",
            self.name.trim_start_matches("r#")
        );
        out.t(&self.preds.states).s(";");
    }

    /// Writes an item's head (`what`) and its where clause: the struct's own predicates, the
    /// assumed ones, and `preds`.
    fn head(&self, out: &mut Code, what: &str, preds: &[&TokenStream]) {
        out.s(what).s(" where ");
        out.t_nonempty(&self.preds.own)
            .t_nonempty(&self.preds.assumed);
        for p in preds {
            out.t_nonempty(p);
        }
    }

    /// `#[automatically_derived] impl<..> TRAIT for TYPE<..>` with its where clause.
    fn trait_impl(&self, out: &mut Code, tr: &str, ty: &str, preds: &[&TokenStream]) {
        let (g, a) = (&self.impl_g, &self.ty_g);
        self.head(
            out,
            &format!("#[automatically_derived] impl{g} {tr} for {ty}{a}"),
            preds,
        );
    }

    fn reduced_fields(&self) -> impl Iterator<Item = (&'a Field<'a>, &'a Reducer, &Reduced)> + '_ {
        self.fields.iter().filter_map(|(f, r)| match (&f.role, r) {
            (Role::Reduced(reducer), Some(r)) => Some((*f, reducer, r)),
            _ => None,
        })
    }

    /// The update struct and its Overwrites.
    fn structs(&self, out: &mut Code) {
        let Gen {
            k,
            name,
            update,
            ow_struct,
            ow,
            ty_g,
            ..
        } = self;
        let vis = self.input.vis.to_token_stream().to_string();
        let generics = self.input.generics;
        let mut fields = Code::default();
        let mut ow_fields = Code::default();
        for (field, r) in &self.fields {
            let ident = field.ident;
            match (&field.role, r) {
                (Role::Base, _) => {
                    let doc = format!(
                        "Updates of the base state `{}`; in JSON its fields sit beside this state's own.",
                        field.ty.to_token_stream()
                    );
                    let _ = write!(fields, "#[doc = {}] pub {ident}: <", lit(&doc));
                    let _ = write!(fields.t(&field.tokens), " as {k}::State>::Update,");
                }
                (Role::Reduced(reducer), Some(_)) => {
                    let doc = format!(
                        "Merged into `{ident}` with `{}`; `None` leaves the field alone.",
                        reducer.name
                    );
                    let uty = reduced(field, reducer, &format!("{k}::__private")).uty;
                    let _ = write!(
                        fields,
                        "#[doc = {}] pub {ident}: ::core::option::Option<",
                        lit(&doc)
                    );
                    fields.c(&uty).s(">,");
                    let doc = format!(
                        "Replaces `{ident}` with this value, bypassing its reducer `{}`.",
                        reducer.name
                    );
                    let _ = write!(
                        ow_fields,
                        "#[doc = {}] pub {ident}: ::core::option::Option<",
                        lit(&doc)
                    );
                    ow_fields.t(&field.tokens).s(">,");
                }
                _ => {}
            }
        }
        let doc = "Overwrites: each replaces its field, bypassing the field's reducer (an update's ordinary entry for the field then merges on top). In JSON `{\"field\": {\"__overwrite__\": value}}`.";
        let _ = write!(fields, "#[doc = {}] pub {ow}: {ow_struct}{ty_g},", lit(doc));
        if let Some(phantom) = &self.phantom {
            fields.s(phantom);
            ow_fields.s(phantom);
        }
        let mut struct_where = TokenStream::new();
        if !self.preds.own.is_empty() || !self.preds.assumed.is_empty() {
            let (own, assumed) = (&self.preds.own, &self.preds.assumed);
            struct_where = quote!(where #own #assumed);
        }
        let doc = format!(
            "A partial update of [`{name}`]: each field is `None` (left alone) or the value merged \
             through that field's reducer. Generated by `#[derive(AgentState)]`."
        );
        let _ = write!(
            out,
            "#[doc = {}] #[must_use = \"an update does nothing until a state merges it\"] {vis} struct {update}",
            lit(&doc)
        );
        out.t(generics).t(&struct_where).g(Delimiter::Brace, |g| {
            g.c(&fields);
        });
        let doc = format!(
            "The Overwrites of a [`{update}`]: each field, when set, replaces the state's field, \
             bypassing its reducer. (Printed with the update, by its `Debug`.)"
        );
        let _ = write!(out, "#[doc = {}] {vis} struct {ow_struct}", lit(&doc));
        out.t(generics).t(&struct_where).g(Delimiter::Brace, |g| {
            g.c(&ow_fields);
        });
    }

    /// `Default` of the update and its Overwrites: every entry `None` (and the base's update
    /// its default); and `Clone`, through `FieldValue` (a derived `Clone` would report a field
    /// type that is not `Clone` again, beside the field's requirement).
    fn defaults(&self, out: &mut Code) {
        let phantom = if self.phantom.is_some() {
            "__agentstate_params: __p::PhantomData,"
        } else {
            ""
        };
        let ow = self.ow;
        let mut entries = String::new();
        let mut overwrites = String::new();
        let mut clones = String::new();
        let mut ow_clones = String::new();
        for (field, _) in &self.fields {
            let ident = field.ident;
            match field.role {
                Role::Base => {
                    let _ = write!(entries, "{ident}: __p::Default::default(),");
                    let _ = write!(clones, "{ident}: __p::Clone::clone(&self.{ident}),");
                }
                Role::Reduced(_) => {
                    let _ = write!(entries, "{ident}: __p::None,");
                    let _ = write!(overwrites, "{ident}: __p::None,");
                    let _ = write!(clones, "{ident}: __p::clone(&self.{ident}),");
                    let _ = write!(ow_clones, "{ident}: __p::clone(&self.{ow}.{ident}),");
                }
                Role::Skip => {}
            }
        }
        let values = &self.preds.values;
        let ow_struct = &self.ow_struct;
        self.trait_impl(out, "__p::Clone", &self.update, &[values]);
        let _ = write!(
            out,
            "{{ #[inline] fn clone(&self) -> Self {{ Self {{ {clones} {ow}: {ow_struct} {{ {ow_clones} {phantom} }}, {phantom} }} }} }}"
        );
        self.trait_impl(out, "__p::Default", &self.update, &[]);
        let _ = write!(
            out,
            "{{ #[inline] fn default() -> Self {{ Self {{ {entries} {ow}: __p::Default::default(), {phantom} }} }} }}"
        );
        self.trait_impl(out, "__p::Default", &self.ow_struct, &[]);
        let _ = write!(
            out,
            "{{ #[inline] fn default() -> Self {{ Self {{ {overwrites} {phantom} }} }} }}"
        );
    }

    /// The update's entries (`UpdateFields`), and the `Serialize`, `Deserialize`, `PartialEq`
    /// and `Debug` that forward to them.
    fn entries(&self, out: &mut Code) {
        let ow = self.ow;
        let mut entries = Vec::new();
        let mut slots = Vec::new();
        let mut ow_entries = Vec::new();
        let mut ow_slots = Vec::new();
        for (field, _) in &self.fields {
            let ident = field.ident;
            let json = lit(&field.json_name);
            match field.role {
                Role::Base => entries.push(Code::text(format!("__p::Base(&self.{ident})"))),
                Role::Reduced(_) => {
                    entries.push(Code::text(format!("({json}, &self.{ident})")));
                    slots.push(Code::text(format!("({json}, &mut self.{ident})")));
                    let key = overwrite_key(&field.json_name);
                    ow_entries.push(Code::text(format!("({key}, &self.{ow}.{ident})")));
                    ow_slots.push(Code::text(format!("({key}, &mut self.{ow}.{ident})")));
                }
                Role::Skip => {}
            }
        }
        // The own entries with the base's part in its place, then the Overwrites; a key no
        // entry takes is offered to the base's part last.
        entries.extend(ow_entries);
        slots.extend(ow_slots);
        if let Some(b) = self.base {
            slots.push(Code::text(format!(
                "__p::base_slots(&mut self.{})",
                b.ident
            )));
        }
        let values = &self.preds.values;
        self.trait_impl(out, "__p::UpdateFields", &self.update, &[values]);
        out.g(Delimiter::Brace, |g| {
            g.s("#[inline] fn entries(&self) -> impl __p::Entries + '_");
            g.g(Delimiter::Brace, |b| tuple(b, entries));
            g.s("#[inline] fn slots(&mut self) -> impl __p::Reads + '_");
            g.g(Delimiter::Brace, |b| tuple(b, slots));
        });
        // Each states the same requirements: an impl that did not would report a missing trait
        // again, at the derive.
        self.trait_impl(out, "__p::Serialize", &self.update, &[values]);
        out.s("{ fn serialize<__S: __p::Serializer>(&self, __s: __S) -> __p::Result<__S::Ok, __S::Error> { __p::serialize_update(self, __s) } }");
        let de_g = {
            let mut g = self.input.generics.clone();
            g.params.insert(0, syn::parse_quote!('de));
            g.split_for_impl().0.to_token_stream().to_string()
        };
        let (update, ty_g) = (&self.update, &self.ty_g);
        self.head(
            out,
            &format!(
                "#[automatically_derived] impl{de_g} __p::Deserialize<'de> for {update}{ty_g}"
            ),
            &[values],
        );
        let _ = write!(
            out,
            "{{ fn deserialize<__D: __p::Deserializer<'de>>(__d: __D) -> __p::Result<Self, __D::Error> {{ __p::deserialize_update(__d, {}) }} }}",
            lit(update)
        );
        self.trait_impl(out, "__p::PartialEq", update, &[values]);
        out.s("{ #[inline] fn eq(&self, __o: &Self) -> bool { __p::eq_updates(self, __o) } }");
        // The entries that are set, not the `None` of every other field.
        self.trait_impl(out, "__p::Debug", update, &[values]);
        let _ = write!(
            out,
            "{{ #[inline] fn fmt(&self, __f: &mut __p::Formatter<'_>) -> __p::FmtResult {{ __p::debug_update(self, __f, {}) }} }}",
            lit(update)
        );
    }

    /// The setters: one per field, one per Overwrite, and the base's part.
    fn setters(&self, out: &mut Code) {
        let ow = self.ow;
        let mut setters = Code::default();
        for (field, r) in &self.fields {
            let ident = field.ident;
            let setter = setter_name(ident);
            match (&field.role, r) {
                (Role::Base, _) => {
                    let doc = format!("Sets the update of the base state (`{ident}`).");
                    let _ = write!(setters, "#[doc = {}] pub fn {setter}", lit(&doc));
                    setters.g(Delimiter::Parenthesis, |a| {
                        a.s("mut self, value: impl __p::IntoField<<")
                            .t(&field.tokens)
                            .s(" as __p::State>::Update>");
                    });
                    let _ = write!(
                        setters,
                        " -> Self {{ self.{ident} = __p::IntoField::into_field(value); self }}"
                    );
                }
                (Role::Reduced(reducer), Some(r)) => {
                    let site = SetterSite {
                        head: "pub fn",
                        p: "__p",
                        target: "self",
                        ow,
                    };
                    reduced_setters(&mut setters, &site, field, reducer, r);
                }
                _ => {}
            }
        }
        // Only a messages setter uses its field's reducer (to prepare): their fits alone.
        let (update, g, a) = (&self.update, &self.impl_g, &self.ty_g);
        self.head(
            out,
            &format!("impl{g} {update}{a}"),
            &[&self.preds.message_fits],
        );
        out.g(Delimiter::Brace, |b| {
            b.c(&setters);
        });
    }

    /// `from_json`, `from_json_lenient` and `then`, without importing the `Update` trait.
    fn json(&self, out: &mut Code) {
        // They need only that the update is one: a non-generic struct assumes it under a binder
        // (not checked where written) instead of restating every field's requirement.
        let update_is = if self.generic {
            self.preds.fits.clone()
        } else {
            quote!(for<'__agentstate> Self: __p::Update,)
        };
        let (update, g, a) = (&self.update, &self.impl_g, &self.ty_g);
        self.head(out, &format!("impl{g} {update}{a}"), &[&update_is]);
        out.s(
            "{ \
             /// Parses a JSON update strictly: unknown keys and values that do not fit are\n\
             /// `state_validation_error`s naming the field (see `agentstate::Update`).\n\
             #[inline] pub fn from_json(value: __p::serde_json::Value) -> __p::Result<Self, __p::Error> \
             where for<'__agentstate> Self: __p::DeserializeOwned { <Self as __p::Update>::from_json(value) } \
             /// Parses a JSON update, ignoring and returning unknown keys.\n\
             #[inline] pub fn from_json_lenient(value: __p::serde_json::Value) -> __p::Result<(Self, __p::Vec<__p::String>), __p::Error> \
             where for<'__agentstate> Self: __p::DeserializeOwned { <Self as __p::Update>::from_json_lenient(value) } \
             /// One update whose effect equals merging `self` then `next`.\n\
             #[inline] pub fn then(self, next: Self) -> __p::Result<Self, __p::Error> { <Self as __p::Update>::then(self, next) } }",
        );
    }

    /// The `Update` impl: `prepare` gives the messages of JSON messages fields (and of a base's
    /// and nested states' parts) their ids when the update is made.
    fn update_impl(&self, out: &mut Code) {
        let mut prepare = Code::default();
        for (field, r) in &self.fields {
            let ident = field.ident;
            match (&field.role, r) {
                (Role::Base, _) => {
                    let _ = write!(
                        prepare.s("<").t(&field.tokens),
                        " as __p::State>::prepare_update(&mut self.{ident});"
                    );
                }
                (Role::Reduced(reducer), Some(r)) => {
                    let inner = match reducer.kind {
                        Kind::Nested => {
                            let mut c = Code::text("<");
                            c.t(&field.tokens)
                                .s(" as __p::State>::prepare_update(value);");
                            c
                        }
                        Kind::AddMessages | Kind::ReplaceMessages => {
                            let mut c = Code::text("__p::Reducer::<");
                            c.t(&field.tokens)
                                .s(">::prepare(&")
                                .c(&r.rty)
                                .s(", value);");
                            c
                        }
                        _ => continue,
                    };
                    let _ = write!(prepare, "if let __p::Some(value) = &mut self.{ident}");
                    prepare.g(Delimiter::Brace, |b| {
                        b.c(&inner);
                    });
                }
                _ => {}
            }
        }
        // `type State` requires that the state is one: a non-generic struct assumes it (the
        // `State` impl states each field's requirement).
        let mut state_is = TokenStream::new();
        if self.generic {
            state_is.extend(self.preds.fits.clone());
        } else {
            let name = self.input.ident;
            state_is.extend(quote!(for<'__agentstate> #name: __p::State<Update = Self>,));
        }
        self.trait_impl(
            out,
            "__p::Update",
            &self.update,
            &[&state_is, &self.preds.message_fits],
        );
        out.g(Delimiter::Brace, |g| {
            let _ = write!(g, "type State = {}{};", self.name, self.ty_g);
            if !prepare.is_empty() {
                g.s("#[inline] fn prepare(&mut self)")
                    .g(Delimiter::Brace, |b| {
                        b.c(&prepare);
                    });
            }
        });
    }

    /// Whether the update prepares anything (its messages fields', its base's or nested
    /// states' parts): then the state's `prepare_update` forwards to it.
    fn prepares(&self) -> bool {
        self.fields.iter().any(|(f, _)| match &f.role {
            Role::Base => true,
            Role::Reduced(r) => matches!(
                r.kind,
                Kind::Nested | Kind::AddMessages | Kind::ReplaceMessages
            ),
            Role::Skip => false,
        })
    }

    /// `MessagesUpdate`: messages into the named field, or through the base (an AgentState
    /// extension's default).
    fn messages(&self, out: &mut Code) {
        let Some(field) = self.messages_field() else {
            return;
        };
        let ident = field.ident;
        let body = match field.role {
            Role::Base => format!("__p::MessagesUpdate::add_messages(&mut self.{ident}, messages);"),
            _ => format!(
                "let messages = __p::Iterator::map(__p::IntoIterator::into_iter(messages), __p::Into::into); \
                 match &mut self.{ident} {{ __p::Some(existing) => __p::Extend::extend(existing, messages), \
                 __p::None => {{ self.{ident} = __p::Some(__p::FromIterator::from_iter(messages)); }} }}"
            ),
        };
        self.trait_impl(out, "__p::MessagesUpdate", &self.update, &[]);
        let _ = write!(
            out,
            "{{ #[inline] fn add_messages(&mut self, messages: __p::Vec<__p::Message>) {{ {body} }} }}"
        );
    }

    /// The field that receives messages: the named (or default) one, or an `AgentState` base.
    fn messages_field(&self) -> Option<&'a Field<'a>> {
        let input = self.input;
        input
            .messages
            .as_ref()
            .and_then(|m| input.fields.iter().find(|f| f.ident == m))
            .or_else(|| {
                input
                    .fields
                    .iter()
                    .find(|f| matches!(f.role, Role::Base) && check::is_agent_state(f.ty))
            })
    }

    /// The key functions of keyed reducers: a closure's type cannot be written, so each returns
    /// its reducer as `impl Reducer`.
    fn key_fns(&self, out: &mut Code) {
        let mut fns = Code::default();
        for (field, reducer, r) in self.reduced_fields() {
            let (key, constructor) = match &reducer.kind {
                Kind::DedupeAppend(Some(key)) => (key, "DedupeAppend::by"),
                Kind::MergeByKey(key) => (key, "MergeByKey::new"),
                _ => continue,
            };
            let ty = &field.tokens;
            let fspan = field_span(field);
            // A key field's requirements point at the key in the attribute; the tokens of a key
            // function are the user's and keep their spans.
            let key_span = match key {
                Key::Field(item_field) => item_field.span().resolved_at(Span::call_site()),
                Key::Function(_) => fspan,
            };
            // The signature points at the key too: the returned reducer's key requirements are
            // reported there, once with the `by_field` call's.
            let _ = write!(fns, "#[inline] fn {}() -> ", key_reducer_fn(field.ident));
            let mut ret = Code::text("impl __p::Reducer<");
            ret.t(ty)
                .s(", Update = ")
                .c(&r.uty)
                .s(", Plan = <")
                .c(&r.rty)
                .s(" as __p::Merges<")
                .t(ty)
                .s(">>::Plan>");
            fns.t(respan(ret.finish().unwrap_or_default(), key_span));
            fns.g(Delimiter::Brace, |b| {
                let _ = write!(b, "__p::{constructor}");
                b.g(Delimiter::Parenthesis, |a| {
                    match key {
                        Key::Field(item_field) => {
                            let item = quote!(<#ty as __p::ListField>::Item);
                            a.t(respan(
                                quote!(__p::by_field::<#item, _, _>(|__item: &#item| &__item.#item_field)),
                                key_span,
                            ));
                        }
                        Key::Function(tokens) => {
                            a.t(respan(
                                quote!(__p::by_value::<<#ty as __p::ListField>::Item, _, _>),
                                fspan,
                            ));
                            a.g(Delimiter::Parenthesis, |f| {
                                f.t(tokens);
                            });
                        }
                    }
                    a.t(respan(quote!(.named), key_span));
                    let _ = write!(a, "({})", lit(&key.label()));
                });
            });
        }
        if !fns.is_empty() {
            let (name, g, a) = (&self.name, &self.impl_g, &self.ty_g);
            self.head(out, &format!("impl{g} {name}{a}"), &[&self.preds.key_fits]);
            out.g(Delimiter::Brace, |b| {
                b.c(&fns);
            });
        }
    }

    /// The base: no field declared twice, `Deref` to it, `Extends` for the update; and
    /// `Extensible` for a state others may extend.
    fn base(&self, out: &mut Code) {
        if let Some(b) = self.base {
            let ident = b.ident;
            let bty = &b.tokens;
            // A constant cannot name a generic struct's parameters: generic states skip this.
            if !self.generic {
                let base_name = b.ty.to_token_stream().to_string().replace(' ', "");
                for (field, _, _) in self.reduced_fields() {
                    let message = format!(
                        "conflicting_reducers: field `{}` is already declared by the base state `{base_name}`; an extension cannot declare it again",
                        field.json_name,
                    );
                    let span = field.ident.span();
                    let json = &field.json_name;
                    out.t(quote_spanned! {span=>
                        const _: () = ::core::assert!(!__p::contains(<#bty as __p::State>::FIELDS, #json), #message);
                    });
                }
            }
            self.trait_impl(out, "__p::Deref", &self.name, &[]);
            out.g(Delimiter::Brace, |g| {
                let _ = write!(
                    g.s("type Target = ").t(bty),
                    "; #[inline] fn deref(&self) -> &Self::Target {{ &self.{ident} }}"
                );
            });
            self.trait_impl(out, "__p::DerefMut", &self.name, &[]);
            let _ = write!(
                out,
                "{{ #[inline] fn deref_mut(&mut self) -> &mut Self::Target {{ &mut self.{ident} }} }}"
            );
            let (update, g, a) = (&self.update, &self.impl_g, &self.ty_g);
            let _ = write!(out, "#[automatically_derived] impl{g} __p::Extends<<");
            let _ = write!(out.t(bty), " as __p::State>::Update> for {update}{a}");
            self.head(out, "", &[&self.preds.extends]);
            out.g(Delimiter::Brace, |g| {
                let _ = write!(
                    g.s("#[inline] fn base_update(&mut self) -> &mut <").t(bty),
                    " as __p::State>::Update {{ &mut self.{ident} }}"
                );
            });
        }
        if self.input.extensible {
            self.trait_impl(out, "__p::Extensible", &self.name, &[]);
            out.s("{}");
        }
    }

    /// The `State` impl: each operation a field list.
    fn state(&self, out: &mut Code) {
        let ow = self.ow;
        let mut plan_types = Vec::new();
        let mut plans = Vec::new();
        let mut applies = Vec::new();
        let mut composes = Vec::new();
        let mut describes = Vec::new();
        let mut own_names = Vec::new();
        let mut own_types = Vec::new();
        for (field, r) in &self.fields {
            let ident = field.ident;
            let ty = &field.tokens;
            match (&field.role, r) {
                (Role::Base, _) => {
                    let mut t = Code::text("<");
                    t.t(ty).s(" as __p::State>::Plan");
                    plan_types.push(t);
                    plans.push(Code::text(format!(
                        "__p::PlanBase(&self.{ident}, &mut __u.{ident})"
                    )));
                    applies.push(Code::text(format!("__p::ApplyBase(&mut self.{ident})")));
                    let mut c = Code::text("__p::ComposeBase::<");
                    let _ = write!(c.t(ty), ">(&mut __a.{ident}, &mut __b.{ident})");
                    composes.push(c);
                    // The base's fields come first, as in `FIELDS`.
                    let mut d = Code::text("__p::DescribeBase::<");
                    d.t(ty).s(">(__p::PhantomData)");
                    describes.insert(0, d);
                }
                (Role::Reduced(reducer), Some(r)) => {
                    let json = lit(&field.json_name);
                    own_names.push(json.clone());
                    own_types.push(lit(&field.tokens.to_string().replace(' ', "")));
                    if let Kind::Nested = reducer.kind {
                        let mut t = Code::text("__p::FieldPlan<");
                        t.t(ty).s(", <").t(ty).s(" as __p::State>::Plan>");
                        plan_types.push(t);
                        plans.push(Code::text(format!(
                            "__p::PlanNested({json}, &self.{ident}, &mut __u.{ow}.{ident}, &mut __u.{ident})"
                        )));
                        applies.push(Code::text(format!("__p::ApplyNested(&mut self.{ident})")));
                        composes.push(Code::text(format!(
                            "__p::ComposeNested({json}, &mut __a.{ow}.{ident}, &mut __a.{ident}, &mut __b.{ow}.{ident}, &mut __b.{ident})"
                        )));
                        let mut d = Code::text("__p::DescribeNested::<");
                        let _ = write!(d.t(ty), ">({json}, __p::PhantomData)");
                        describes.push(d);
                        continue;
                    }
                    let mut t = Code::text("__p::PlanOf<");
                    t.t(ty).s(", ").c(&r.rty).s(">");
                    plan_types.push(t);
                    let call = |leaf: &str, before: &str, after: &str| {
                        let mut c = Code::text(leaf);
                        c.g(Delimiter::Parenthesis, |a| {
                            a.s(before).c(&r.expr).s(after);
                        });
                        c
                    };
                    plans.push(call(
                        "__p::Plan",
                        &format!("{json}, "),
                        &format!(", &self.{ident}, &mut __u.{ow}.{ident}, &mut __u.{ident}"),
                    ));
                    applies.push(call("__p::Apply", "", &format!(", &mut self.{ident}")));
                    // Strict fan-in refuses two writes to a last-value field in one step.
                    let last_value =
                        matches!(reducer.kind, Kind::LastWriteWins | Kind::ReplaceValue);
                    composes.push(call(
                        "__p::Compose",
                        &format!("{json}, "),
                        &format!(", {last_value}, &mut __a.{ow}.{ident}, &mut __a.{ident}, &mut __b.{ow}.{ident}, &mut __b.{ident}"),
                    ));
                    describes.push(call("__p::Describe", &format!("{json}, "), ""));
                    if let Kind::BoundedAppend(MaxLen::Const(path)) = &reducer.kind {
                        let message = format!(
                            "reducer_configuration_invalid: bounded_append's max_len for field `{ident}` must be at least 1"
                        );
                        let span = path
                            .segments
                            .last()
                            .map_or(reducer.span, |s| s.ident.span());
                        out.t(quote_spanned! {span=>
                            const _: () = ::core::assert!((#path) as i128 >= 1, #message);
                        });
                    }
                }
                _ => {}
            }
        }
        let own = own_names.join(",");
        let own_types = own_types.join(",");
        let types = match self.base {
            Some(b) if !self.generic => {
                let mut c = Code::default();
                c.g(Delimiter::Brace, |g| {
                    let _ = write!(
                        g.s("const __BASE: &[&str] = <").t(&b.tokens),
                        " as __p::State>::FIELD_TYPES; const __OWN: &[&str] = &[{own_types}]; \
                         const __LEN: usize = __BASE.len() + __OWN.len(); \
                         const __ALL: [&str; __LEN] = __p::concat_fields::<__LEN>(__BASE, __OWN); &__ALL"
                    );
                });
                c
            }
            _ => Code::text(format!("&[{own_types}]")),
        };
        let fields = match self.base {
            // A constant cannot name a generic struct's parameters: a generic state's `FIELDS`
            // lists its own fields.
            Some(b) if !self.generic => {
                let mut c = Code::default();
                c.g(Delimiter::Brace, |g| {
                    let _ = write!(
                        g.s("const __BASE: &[&str] = <").t(&b.tokens),
                        " as __p::State>::FIELDS; const __OWN: &[&str] = &[{own}]; \
                         const __LEN: usize = __BASE.len() + __OWN.len(); \
                         const __ALL: [&str; __LEN] = __p::concat_fields::<__LEN>(__BASE, __OWN); &__ALL"
                    );
                });
                c
            }
            _ => Code::text(format!("&[{own}]")),
        };
        self.trait_impl(out, "__p::State", &self.name, &[&self.preds.fits]);
        out.g(Delimiter::Brace, |g| {
            let _ = write!(g, "type Update = {}{}; type Plan = ", self.update, self.ty_g);
            tuple(g, plan_types);
            g.s("; const FIELDS: &'static [&'static str] = ")
                .c(&fields)
                .s(";");
            g.s("const FIELD_TYPES: &'static [&'static str] = ")
                .c(&types)
                .s(";");
            if let Some(version) = self.input.version {
                let _ = write!(g, "const SCHEMA_VERSION: u32 = {version};");
            }
            // The messages field's key, for the hint on an unknown key such as `messages`.
            match self.messages_field() {
                Some(f) if matches!(f.role, Role::Base) => {
                    g.s("const MESSAGES: __p::Option<&'static str> = <")
                        .t(&f.tokens)
                        .s(" as __p::State>::MESSAGES;");
                }
                Some(f) => {
                    let _ = write!(
                        g,
                        "const MESSAGES: __p::Option<&'static str> = __p::Some({});",
                        lit(&f.json_name)
                    );
                }
                None => {}
            }
            // The leaves take the update's entries from it; when planning succeeded every one
            // was taken, so what is left (each `None`, a base's part its default) holds nothing
            // to free: forgetting it spares the merge its drop. On an error it is dropped.
            g.s("#[inline] fn plan(&self, mut __u: Self::Update) -> __p::Result<Self::Plan, __p::Error>");
            if self.input.extensible {
                // A base plans in place (`plan_in`), so that an extension does not copy the
                // base's part out of its update.
                g.s("{ let __plan = __p::State::plan_in(self, &mut __u)?; __p::forget(__u); __p::Ok(__plan) }");
                g.s("#[inline] fn plan_in(&self, __u: &mut Self::Update) -> __p::Result<Self::Plan, __p::Error>");
                g.g(Delimiter::Brace, |b| {
                    b.s("__p::Plans::plan")
                        .g(Delimiter::Parenthesis, |a| tuple(a, plans));
                });
            } else {
                g.g(Delimiter::Brace, |b| {
                    b.s("let __plan = __p::Plans::plan")
                        .g(Delimiter::Parenthesis, |a| tuple(a, plans));
                    b.s("?; __p::forget(__u); __p::Ok(__plan)");
                });
            }
            g.s("#[inline] fn apply(&mut self, __plan: Self::Plan)");
            g.g(Delimiter::Brace, |b| {
                b.s("__p::Applies::apply").g(Delimiter::Parenthesis, |a| {
                    tuple(a, applies);
                    a.s(", __plan");
                });
            });
            // `__b`'s entries are taken as `__u`'s are by `plan`.
            g.s("#[inline] fn compose(mut __a: Self::Update, mut __b: Self::Update, __how: __p::Combine) -> __p::Result<Self::Update, __p::Error>");
            g.g(Delimiter::Brace, |b| {
                b.s("__p::Composes::compose").g(Delimiter::Parenthesis, |a| {
                    tuple(a, composes);
                    a.s(", __how");
                });
                b.s("?; __p::forget(__b); __p::Ok(__a)");
            });
            if self.prepares() {
                g.s("#[inline] fn prepare_update(update: &mut Self::Update) { __p::Update::prepare(update) }");
            }
            g.s("#[inline] fn schema() -> __p::Schema");
            g.g(Delimiter::Brace, |b| {
                b.s("__p::schema")
                    .g(Delimiter::Parenthesis, |a| tuple(a, describes));
            });
            if let Some(execution) = self.execution() {
                g.s("#[inline] fn execution(&self) -> __p::Option<(&'static str, &__p::ExecutionState)>");
                g.g(Delimiter::Brace, |b| {
                    b.s(&execution);
                });
            }
        });
    }

    /// The body of `State::execution`: the first field whose type is named `ExecutionState`,
    /// else the base's; `None` (the trait's default) if there is neither.
    fn execution(&self) -> Option<String> {
        let own = self
            .fields
            .iter()
            .find_map(|(field, _)| match (&field.role, field.ty) {
                (Role::Reduced(_), Type::Path(path))
                    if path
                        .path
                        .segments
                        .last()
                        .is_some_and(|s| s.ident == "ExecutionState") =>
                {
                    Some(format!(
                        "__p::Option::Some(({}, &self.{}))",
                        lit(&field.json_name),
                        field.ident
                    ))
                }
                _ => None,
            });
        own.or_else(|| {
            self.fields.iter().find_map(|(field, _)| match field.role {
                Role::Base => Some(format!("__p::State::execution(&self.{})", field.ident)),
                _ => None,
            })
        })
    }

    /// `#[agent_state(deserialize)]`: the struct's `Deserialize` and `DeserializeFields`,
    /// reading the object in one pass and offering the keys it does not know to the base.
    fn deserialize(&self, out: &mut Code) {
        let Some(de) = self.input.deserialize.as_ref() else {
            return;
        };
        let input = self.input;
        let assumed = &self.preds.assumed;
        let mut slots = Code::default();
        let mut arms = Code::default();
        let mut values = Code::default();
        let mut members = String::new();
        let mut expected = Vec::new();
        let mut base_value = Code::default();
        let mut base_fields = Code::text("()");
        let mut base_bound = TokenStream::new();
        let mut call_span = Span::call_site();
        let mut requirements = TokenStream::new();
        let mut fallback = Code::text("__p::Ok(false)");
        let container_default = match &de.default {
            Some(DefaultValue::Trait) => {
                Code::text("let __default: Self = __p::Default::default();")
            }
            Some(DefaultValue::Path(path)) => {
                let mut c = Code::text("let __default: Self = ");
                c.t(path).s("();");
                c
            }
            None => Code::default(),
        };
        for field in &input.fields {
            let ident = field.ident;
            let ty = &field.tokens;
            let span = field_span(field);
            let local = format!("__value_{}", unraw(ident));
            let _ = write!(members, "{ident}: {local},");
            if let Role::Base = field.role {
                // The base's `DeserializeFields` is required in three places, each spanned on
                // the field, so that its absence is one error there. The fields struct takes
                // the base's fields as a parameter, so that its declaration requires nothing.
                let tr = respan(quote!(__p::DeserializeFields<'de>), span);
                let _ = write!(slots, "{ident}: __B,");
                base_fields = Code::default();
                base_fields.t(respan(quote!(<#ty as #tr>::Fields), span));
                base_bound = respan(quote!(#ty: #tr,), span);
                call_span = span;
                fallback = Code::default();
                let _ = write!(
                    fallback.t(respan(quote!(<#ty as #tr>::deserialize_field), span)),
                    "(&mut __fields.{ident}, __key, __map)"
                );
                base_value = Code::default();
                let _ = write!(base_value, "let {local} = ");
                let _ = write!(
                    base_value.t(respan(quote!(<#ty as #tr>::finish), span)),
                    "(__fields.{ident})?;"
                );
                continue;
            }
            // A field that updates carry is read through `FieldValue`, which the impls assume
            // (as the update's do): a type that is not `Deserialize` is reported once, by the
            // requirement.
            let value = matches!(field.role, Role::Reduced(_));
            if value {
                requirements.extend(respan(quote!(#ty: __p::FieldValue,), span));
            }
            let json = lit(&field.json_name);
            let mut missing = Code::default();
            match (&field.default, &de.default) {
                (Some(DefaultValue::Trait), _) => {
                    missing.s("__p::Default::default()");
                }
                (Some(DefaultValue::Path(path)), _) => {
                    missing.t(path).s("()");
                }
                (None, Some(_)) => {
                    let _ = write!(missing, "__default.{ident}");
                }
                (None, None) if field.skip_deserializing => {
                    missing.s("__p::Default::default()");
                }
                (None, None) if value => {
                    let _ = write!(missing, "__p::missing_field_value({json})?");
                }
                (None, None) => {
                    let _ = write!(missing, "__p::missing_field({json})?");
                }
            }
            if field.skip_deserializing {
                let _ = write!(values, "let {local} = ");
                values.c(&missing).s(";");
                continue;
            }
            expected.push(json.clone());
            let _ = write!(slots, "{ident}: __p::Option<");
            slots.t(ty).s(">,");
            let read = if value {
                "__p::deserialize_field_value"
            } else {
                "__p::deserialize_value"
            };
            let _ = write!(
                arms,
                "{json} => {read}(&mut __fields.{ident}, {json}, __map),"
            );
            let _ = write!(values, "let {local} = match __fields.{ident}");
            values.g(Delimiter::Brace, |m| {
                m.s("__p::Some(__value) => __value, __p::None => ")
                    .c(&missing)
                    .s(",");
            });
            values.s(";");
        }
        let has_base = !base_bound.is_empty();
        // Where a base without `DeserializeFields` is reported: on the base field.
        let call = respan(
            quote!(__p::deserialize_state(__deserializer, &__SHAPE)),
            call_span,
        );
        let vis = input.vis.to_token_stream().to_string();
        let _ = write!(
            out,
            "#[doc(hidden)] #[derive(__p::Default)] {vis} struct __AgentStateFields<__B>"
        );
        out.g(Delimiter::Brace, |g| {
            g.c(&slots).s("__agentstate_base: __p::PhantomData<__B>,");
        });
        // The struct's own name, with its span: rustc's notes on this impl point at the struct.
        out.s("#[automatically_derived] impl<'de> __p::DeserializeFields<'de> for ")
            .t(input.ident)
            .s(" where ")
            .t(assumed)
            .t(&base_bound)
            .t(&requirements);
        out.g(Delimiter::Brace, |g| {
            g.s("type Fields = __AgentStateFields<")
                .c(&base_fields)
                .s(">; #[inline] fn deserialize_field<__A: __p::MapAccess<'de>>(__fields: &mut Self::Fields, __key: &str, __map: &mut __A) -> __p::Result<bool, __A::Error>");
            g.g(Delimiter::Brace, |b| {
                b.s("match __key").g(Delimiter::Brace, |m| {
                    m.c(&arms).s("_ => ").c(&fallback).s(",");
                });
            });
            g.s("#[inline] fn finish<__E: __p::DeError>(__fields: Self::Fields) -> __p::Result<Self, __E>");
            g.g(Delimiter::Brace, |b| {
                b.c(&container_default).c(&values).c(&base_value);
                let _ = write!(b, "__p::Ok({} {{ {members} }})", self.name);
            });
        });
        let _ = write!(
            out,
            "#[automatically_derived] impl<'de> __p::Deserialize<'de> for {} where ",
            self.name
        );
        out.t(assumed).t(&requirements);
        out.g(Delimiter::Brace, |g| {
            g.s("fn deserialize<__D: __p::Deserializer<'de>>(__deserializer: __D) -> __p::Result<Self, __D::Error>");
            g.g(Delimiter::Brace, |b| {
                let _ = write!(
                    b,
                    "const __SHAPE: __p::Shape = __p::Shape {{ name: {}, fields: &[{}], base: {has_base}, deny_unknown_fields: {}, expecting: {} }};",
                    lit(&de.name),
                    expected.join(","),
                    de.deny_unknown_fields,
                    lit(&de.expecting),
                );
                b.t(call);
            });
        });
    }

    /// The setters of a base's update, repeated for the updates of the states that extend it:
    /// only on the states that say they may be extended (it repeats every setter: a tenth of a
    /// user's rebuild when every state had it). At the module's level, so written with the
    /// runtime's full path.
    fn setters_trait(&self, out: &mut Code) {
        let Gen {
            k,
            update,
            name,
            ow,
            ..
        } = self;
        let p = format!("{k}::__private");
        let vis = self.input.vis.to_token_stream().to_string();
        let mut methods = Code::default();
        for (field, reducer, _) in self.reduced_fields() {
            let r = reduced(field, reducer, &p);
            let target = format!("{p}::Extends::<{update}>::base_update(&mut self)");
            let site = SetterSite {
                head: "#[must_use] fn",
                p: &p,
                target: &target,
                ow,
            };
            reduced_setters(&mut methods, &site, field, reducer, &r);
        }
        if methods.is_empty() {
            return;
        }
        // The messages setters prepare through their reducers: those fields' fits, with the
        // full path.
        let message_fits: TokenStream = self
            .reduced_fields()
            .filter(|(_, reducer, _)| {
                matches!(reducer.kind, Kind::AddMessages | Kind::ReplaceMessages)
            })
            .map(|(field, reducer, _)| {
                let r = reduced(field, reducer, &p);
                let (rty, ty, krate) = (
                    r.rty.finish().unwrap_or_default(),
                    &field.tokens,
                    &self.input.krate,
                );
                respan(
                    quote!(#rty: #krate::__private::Fits<#ty>,),
                    field_span(field),
                )
            })
            .collect();
        let doc = format!(
            "The setters of [`{update}`] on the update of a state that extends [`{name}`] \
             (`#[agent_state(base)]`); bring this trait into scope to chain them."
        );
        let trait_name = format!("{update}Setters");
        let _ = write!(
            out,
            "#[doc = {}] {vis} trait {trait_name}: {p}::Extends<{update}> + ::core::marker::Sized where ",
            lit(&doc)
        );
        out.t(&message_fits).g(Delimiter::Brace, |g| {
            g.c(&methods);
        });
        let _ = write!(
            out,
            "impl<__U: {p}::Extends<{update}>> {trait_name} for __U where "
        );
        out.t(&message_fits).s("{}");
    }
}

/// Where setters are written: on the update itself, or on the trait that repeats a base's
/// setters for the updates that extend it.
struct SetterSite<'s> {
    /// What precedes each method's name (`pub fn`, or `#[must_use] fn` in a trait).
    head: &'s str,
    /// The runtime's path (`__p`, or the full path at the module's level).
    p: &'s str,
    /// The update the setters set: `self`, or a base's part of an extending update.
    target: &'s str,
    /// The name of the update's Overwrite field.
    ow: &'s str,
}

/// A reduced field's two setters, `set_<field>` (merged with its reducer) and
/// `overwrite_<field>` (bypassing it), written into `out`.
fn reduced_setters(
    out: &mut Code,
    site: &SetterSite<'_>,
    field: &Field,
    reducer: &Reducer,
    r: &Reduced,
) {
    let SetterSite {
        head,
        p,
        target,
        ow,
    } = *site;
    let ident = field.ident;
    let doc = format!(
        "Sets the value merged into `{ident}` (with `{}`); called again, replaces it (`then` combines two updates).",
        reducer.name
    );
    let _ = write!(out, "#[doc = {}] {head} {}", lit(&doc), setter_name(ident));
    out.g(Delimiter::Parenthesis, |a| {
        let _ = write!(a, "mut self, value: impl {p}::IntoField<");
        a.c(&r.uty).s(">");
    });
    out.s(" -> Self").g(Delimiter::Brace, |b| {
        let _ = write!(b, "{target}.{ident} = ");
        if let Kind::AddMessages | Kind::ReplaceMessages = reducer.kind {
            // Messages in a JSON messages update get their ids when the update is made.
            let _ = write!(b, "{p}::prepared::<");
            b.t(&field.tokens).s(", _>(&").c(&r.rty).s(", value); self");
        } else {
            let _ = write!(b, "{p}::set(value); self");
        }
    });
    let doc = format!(
        "Replaces `{ident}` with this value, bypassing its reducer `{}`.",
        reducer.name
    );
    let _ = write!(
        out,
        "#[doc = {}] {head} overwrite_{}",
        lit(&doc),
        unraw(ident)
    );
    out.g(Delimiter::Parenthesis, |a| {
        let _ = write!(a, "mut self, value: impl {p}::IntoField<");
        a.t(&field.tokens).s(">");
    });
    let _ = write!(
        out,
        " -> Self {{ {target}.{ow}.{ident} = {p}::set(value); self }}"
    );
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// Formats generated code with rustfmt so the snapshot is readable and stable.
    fn rustfmt(code: &str) -> String {
        let mut child = Command::new("rustfmt")
            .args(["--edition", "2021", "--emit", "stdout"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("rustfmt is installed with the toolchain (cargo fmt uses it)");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(code.as_bytes())
            .expect("write to rustfmt");
        let out = child.wait_with_output().expect("rustfmt runs");
        assert!(out.status.success(), "rustfmt failed on:\n{code}");
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// One representative struct, expanded, against `tests/expand/research.expanded.rs`.
    /// Set `AGENTSTATE_BLESS=1` to rewrite the snapshot after a deliberate change, and read it.
    #[test]
    fn expansion_snapshot() {
        let input: syn::DeriveInput = syn::parse_str(
            r#"
            #[serde(rename_all = "camelCase")]
            #[agent_state(deserialize)]
            pub struct Research {
                #[reducer(append)]
                notes: Vec<String>,
                #[reducer(bounded_append(max_len = 3))]
                recent: Vec<u32>,
                #[reducer(merge_by_key(key = id))]
                findings: Vec<Finding>,
                #[agent_state(base)]
                #[serde(flatten)]
                base: AgentState,
                #[agent_state(skip)]
                cache: u8,
                title: String,
            }
            "#,
        )
        .expect("valid input");
        let expanded = rustfmt(&super::derive(&input).to_string());
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/expand/research.expanded.rs"
        );
        if std::env::var_os("AGENTSTATE_BLESS").is_some() {
            std::fs::write(path, &expanded).expect("write snapshot");
        }
        let snapshot = std::fs::read_to_string(path).expect("snapshot exists");
        assert_eq!(
            expanded, snapshot,
            "expansion changed; bless with AGENTSTATE_BLESS=1"
        );
    }
}
