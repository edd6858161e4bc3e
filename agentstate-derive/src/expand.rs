//! Code generation: the update struct, its setters, and the `State` implementation.

use crate::ast::{DefaultValue, Field, Input, Key, Kind, MaxLen, Reducer, Role};
use crate::check;
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::{DeriveInput, Ident, Index};

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
                    _: ::agentstate::update::Combine,
                ) -> ::core::result::Result<#update, ::agentstate::Error> {
                    ::core::result::Result::Ok(first)
                }
                fn schema() -> ::agentstate::schema::Schema {
                    ::agentstate::schema::Schema::describe(::std::vec::Vec::new())
                }
            }
        };
    }
}

/// Setter names that would shadow the update's derived trait methods get a `set_` prefix.
const SHADOWING: &[&str] = &[
    "default",
    "clone",
    "eq",
    "ne",
    "fmt",
    "serialize",
    "deserialize",
];

fn setter_name(field: &Ident) -> Ident {
    let name = field.to_string();
    if SHADOWING.contains(&name.as_str()) {
        format_ident!("set_{}", name)
    } else {
        field.clone()
    }
}

struct Gen<'a> {
    k: &'a TokenStream,
}

impl Gen<'_> {
    /// The reducer's type, with `()` standing for a key function (whose type cannot be
    /// written): enough to name the update and plan types through `Merges`.
    fn reducer_type(&self, field: &Field, r: &Reducer) -> TokenStream {
        let k = self.k;
        let ty = field.ty;
        match &r.kind {
            Kind::LastWriteWins => quote!(#k::reducers::LastWriteWins),
            Kind::ReplaceValue => quote!(#k::reducers::ReplaceValue),
            Kind::Append => quote!(#k::reducers::Append),
            Kind::Merge => quote!(#k::reducers::Merge),
            Kind::ConcatFlatten => quote!(#k::reducers::ConcatFlatten),
            Kind::MergeAll => quote!(#k::reducers::MergeAll),
            Kind::AddMessages => quote!(#k::reducers::AddMessages),
            Kind::ReplaceMessages => quote!(#k::reducers::ReplaceMessages),
            Kind::AppendItems => quote!(#k::reducers::AppendItems),
            Kind::UpsertMessages => quote!(#k::reducers::UpsertMessages),
            Kind::BoundedAppend(_) => quote!(#k::reducers::BoundedAppend),
            Kind::DedupeAppend(None) => quote!(#k::reducers::DedupeAppend<#k::reducers::Identity>),
            Kind::DedupeAppend(Some(_)) => quote!(#k::reducers::DedupeAppend<()>),
            Kind::MergeByKey(_) => quote!(#k::reducers::MergeByKey<()>),
            Kind::Nested => quote!(#k::reducers::Nested),
            Kind::With { update, .. } => {
                let u = update
                    .as_ref()
                    .map_or_else(|| ty.to_token_stream(), ToTokens::to_token_stream);
                quote!(#k::reducers::FnReducer<(), #u>)
            }
        }
    }

    /// An expression building the field's reducer.
    fn reducer_expr(&self, field: &Field, r: &Reducer) -> TokenStream {
        let k = self.k;
        match &r.kind {
            Kind::BoundedAppend(MaxLen::Literal(n)) => {
                let n = *n as usize;
                quote!(#k::reducers::BoundedAppend::__checked(#n))
            }
            Kind::BoundedAppend(MaxLen::Const(path)) => {
                quote!(#k::reducers::BoundedAppend::__checked((#path) as usize))
            }
            Kind::DedupeAppend(None) => quote!(#k::reducers::DedupeAppend::new()),
            Kind::DedupeAppend(Some(_)) | Kind::MergeByKey(_) => {
                let f = key_reducer_fn(field.ident);
                quote!(Self::#f())
            }
            Kind::With {
                function,
                update,
                idempotent,
            } => {
                let u = update
                    .as_ref()
                    .map_or_else(|| field.ty.to_token_stream(), ToTokens::to_token_stream);
                let name = &r.name;
                let idempotent = idempotent.then(|| quote!(.idempotent()));
                quote!(#k::reducers::FnReducer::<_, #u>::new(#name, #function) #idempotent)
            }
            _ => self.reducer_type(field, r),
        }
    }

    /// `<R as Merges<T>>::Update` / `::Plan` of a reduced field.
    fn merges(&self, field: &Field, r: &Reducer, item: &str) -> TokenStream {
        let k = self.k;
        let ty = field.ty;
        let item = Ident::new(item, Span::call_site());
        if let Kind::Nested = r.kind {
            return quote_spanned!(r.span=> <#ty as #k::State>::#item);
        }
        let rty = self.reducer_type(field, r);
        quote_spanned!(r.span=> <#rty as #k::reducers::Merges<#ty>>::#item)
    }

    /// What a field's entry of the update holds, without the `Option`: written from the
    /// field's type alone (no projection through the reducer), so that a reducer that does not
    /// fit its field is reported once, by the `State` impl, and not again by every derive on
    /// the update struct.
    fn update_type(&self, field: &Field) -> Option<TokenStream> {
        let k = self.k;
        let ty = field.ty;
        let r = match &field.role {
            Role::Reduced(r) => r,
            Role::Base => return Some(quote!(<#ty as #k::State>::Update)),
            Role::Skip => return None,
        };
        Some(match &r.kind {
            Kind::ConcatFlatten | Kind::MergeAll => quote!(::std::vec::Vec<#ty>),
            Kind::UpsertMessages => quote!(::std::vec::Vec<#k::reducers::MessageUpdate>),
            Kind::Nested => quote!(<#ty as #k::State>::Update),
            Kind::With {
                update: Some(u), ..
            } => u.to_token_stream(),
            _ => ty.to_token_stream(),
        })
    }
}

/// `tokens` with every span set to `span`, so that an error anywhere in them points at the
/// user's declaration and identical errors from several generated items collapse into one.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            proc_macro2::TokenTree::Group(group) => {
                let mut g =
                    proc_macro2::Group::new(group.delimiter(), respan(group.stream(), span));
                g.set_span(span);
                proc_macro2::TokenTree::Group(g)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

/// Where everything generated for a field points: the field's name, resolved at the derive's
/// call site (so the generated code's own names keep resolving when the field's name comes from
/// a `macro_rules!` argument).
fn field_span(field: &Field) -> Span {
    field.ident.span().resolved_at(Span::call_site())
}

fn key_reducer_fn(field: &Ident) -> Ident {
    format_ident!(
        "__agentstate_reducer_{}",
        field.to_string().trim_start_matches("r#")
    )
}

fn base<'a>(input: &'a Input<'a>) -> Option<(usize, &'a Field<'a>)> {
    input
        .fields
        .iter()
        .enumerate()
        .find(|(_, f)| matches!(f.role, Role::Base))
}

/// `DeserializeFields` (with `Fields = Self`: the struct starts as its `Default`, all `None`)
/// and `Deserialize` for an update or its Overwrites: `arms` read the keys `keys`, `others`
/// is offered every other key. With `map`, it reads a map, as serde's derive does for a
/// struct with a flattened field.
fn key_by_key(
    k: &TokenStream,
    ty: &Ident,
    where_clause: &TokenStream,
    arms: &[TokenStream],
    keys: &[String],
    others: TokenStream,
    map: bool,
) -> TokenStream {
    let serde = quote!(#k::__private::serde);
    let name = ty.to_string();
    let expecting = format!("struct {name}");
    quote! {
        const _: () = {
            #[doc(hidden)]
            #[automatically_derived]
            impl<'de> #k::state::DeserializeFields<'de> for #ty #where_clause {
                type Fields = Self;

                #[inline]
                fn deserialize_field<__A: #serde::de::MapAccess<'de>>(
                    __fields: &mut Self,
                    __key: &str,
                    __map: &mut __A,
                ) -> ::core::result::Result<bool, __A::Error> {
                    match __key {
                        #(#arms)*
                        _ => { #others }
                    }
                }

                #[inline]
                fn finish<__E: #serde::de::Error>(
                    __fields: Self,
                ) -> ::core::result::Result<Self, __E> {
                    ::core::result::Result::Ok(__fields)
                }
            }

            #[automatically_derived]
            impl<'de> #serde::Deserialize<'de> for #ty #where_clause {
                fn deserialize<__D: #serde::Deserializer<'de>>(
                    __deserializer: __D,
                ) -> ::core::result::Result<Self, __D::Error> {
                    const __SHAPE: #k::__private::Shape = #k::__private::Shape {
                        name: #name,
                        fields: &[#(#keys),*],
                        base: #map,
                        deny_unknown_fields: false,
                        expecting: #expecting,
                    };
                    #k::__private::deserialize_state(__deserializer, &__SHAPE)
                }
            }
        };
    }
}

/// `Serialize` for an update or its Overwrites, writing with `body` what serde's derive wrote.
/// A field of the generated update or Overwrites, spanned on the user's field: its doc, its
/// attribute for serde's derives (a generic state's) and its type (`Option<ty>` if `optional`),
/// each part re-spanned once.
fn generated_field(
    span: Span,
    doc: &str,
    serde_attr: Option<TokenStream>,
    ident: &TokenStream,
    ty: &TokenStream,
    optional: bool,
) -> TokenStream {
    let doc = respan(doc.to_token_stream(), span);
    let ty = respan(ty.clone(), span);
    let ty = if optional {
        quote_spanned!(span=> ::core::option::Option<#ty>)
    } else {
        ty
    };
    let serde_attr = serde_attr.map(|a| respan(a, span));
    quote_spanned! {span=>
        #[doc = #doc]
        #serde_attr
        pub #ident: #ty
    }
}

fn serialize_impl(
    k: &TokenStream,
    ty: &Ident,
    where_clause: &TokenStream,
    body: TokenStream,
) -> TokenStream {
    let serde = quote!(#k::__private::serde);
    quote! {
        #[automatically_derived]
        impl #serde::Serialize for #ty #where_clause {
            fn serialize<__S: #serde::Serializer>(
                &self,
                __serializer: __S,
            ) -> ::core::result::Result<__S::Ok, __S::Error> {
                #body
            }
        }
    }
}

/// `#[agent_state(deserialize)]`: the struct's `Deserialize` and `DeserializeFields`, reading
/// the object in one pass and offering the keys it does not know to the base.
fn deserialize_impl(input: &Input, assumed: &TokenStream) -> Option<TokenStream> {
    let de = input.deserialize.as_ref()?;
    let k = &input.krate;
    let name = input.ident;
    let serde = quote!(#k::__private::serde);
    let trait_ = quote!(#k::state::DeserializeFields<'de>);
    let mut slots = Vec::new();
    let mut arms = Vec::new();
    let mut values = Vec::new();
    let mut members = Vec::new();
    let mut expected = Vec::new();
    let mut base_value = None;
    let mut base_fields = None;
    let mut base_bound = None;
    let mut state_call_span = Span::call_site();
    let mut requirements = Vec::new();
    let mut fallback = quote!(::core::result::Result::Ok(false));
    let container_default = de.default.as_ref().map(|d| match d {
        DefaultValue::Trait => quote!(let __default: Self = ::core::default::Default::default();),
        DefaultValue::Path(path) => quote!(let __default: Self = #path();),
    });
    for field in &input.fields {
        let ident = field.ident;
        let ty = field.ty;
        let span = field_span(field);
        let local = format_ident!("__value_{}", ident.to_string().trim_start_matches("r#"));
        members.push(quote!(#ident: #local));
        if let Role::Base = field.role {
            // The base's `DeserializeFields` is required in three places, each spanned on the
            // field, so that its absence is one error there. The fields struct takes the base's
            // fields as a parameter, so that its declaration requires nothing.
            let bty = ty;
            slots.push(quote!(#ident: __B));
            base_fields = Some(respan(quote!(<#bty as #trait_>::Fields), span));
            base_bound = Some(respan(quote!(#bty: #trait_,), span));
            state_call_span = span;
            fallback = respan(
                quote!(<#bty as #trait_>::deserialize_field(&mut __fields.#ident, __key, __map)),
                span,
            );
            base_value = Some(respan(
                quote!(let #local = <#bty as #trait_>::finish(__fields.#ident)?;),
                span,
            ));
            continue;
        }
        // A field that updates carry is read through `FieldValue`, which the impls assume (as
        // the update's do): a type that is not `Deserialize` is reported once, by the
        // requirement.
        let value = matches!(field.role, Role::Reduced(_));
        if value {
            requirements.push(respan(quote!(#ty: #k::__private::FieldValue), span));
        }
        let missing = match (&field.default, &de.default) {
            (Some(DefaultValue::Trait), _) => quote!(::core::default::Default::default()),
            (Some(DefaultValue::Path(path)), _) => quote!(#path()),
            (None, Some(_)) => quote!(__default.#ident),
            (None, None) if field.skip_deserializing => {
                quote!(::core::default::Default::default())
            }
            (None, None) if value => {
                let json = &field.json_name;
                quote!(#k::__private::missing_field_value(#json)?)
            }
            (None, None) => {
                let json = &field.json_name;
                quote!(#k::__private::missing_field(#json)?)
            }
        };
        if field.skip_deserializing {
            values.push(quote!(let #local = #missing;));
            continue;
        }
        let json = &field.json_name;
        expected.push(json);
        slots.push(respan(quote!(#ident: ::core::option::Option<#ty>), span));
        let read = if value {
            quote!(#k::__private::deserialize_field_value)
        } else {
            quote!(#k::__private::deserialize_value)
        };
        arms.push(quote! {
            #json => #read(&mut __fields.#ident, #json, __map),
        });
        values.push(quote! {
            let #local = match __fields.#ident {
                ::core::option::Option::Some(__value) => __value,
                ::core::option::Option::None => #missing,
            };
        });
    }
    let expecting = &de.expecting;
    let serde_name = &de.name;
    let has_base = base_value.is_some();
    // Where a base without `DeserializeFields` is reported: on the base field.
    let call = respan(
        quote!(#k::__private::deserialize_state(__deserializer, &__SHAPE)),
        state_call_span,
    );
    let fields_param = base_fields.unwrap_or_else(|| quote!(()));
    let deny = de.deny_unknown_fields;
    let vis = input.vis;
    Some(quote! {
        const _: () = {
            #[doc(hidden)]
            #[derive(::core::default::Default)]
            #vis struct __AgentStateFields<__B> {
                #(#slots,)*
                __agentstate_base: ::core::marker::PhantomData<__B>,
            }

            #[automatically_derived]
            impl<'de> #trait_ for #name where #assumed #base_bound #(#requirements,)* {
                type Fields = __AgentStateFields<#fields_param>;

                #[inline]
                fn deserialize_field<__A: #serde::de::MapAccess<'de>>(
                    __fields: &mut Self::Fields,
                    __key: &str,
                    __map: &mut __A,
                ) -> ::core::result::Result<bool, __A::Error> {
                    match __key {
                        #(#arms)*
                        _ => #fallback,
                    }
                }

                #[inline]
                fn finish<__E: #serde::de::Error>(
                    __fields: Self::Fields,
                ) -> ::core::result::Result<Self, __E> {
                    #container_default
                    #(#values)*
                    #base_value
                    ::core::result::Result::Ok(#name { #(#members,)* })
                }
            }

            #[automatically_derived]
            impl<'de> #serde::Deserialize<'de> for #name where #assumed #(#requirements,)* {
                fn deserialize<__D: #serde::Deserializer<'de>>(
                    __deserializer: __D,
                ) -> ::core::result::Result<Self, __D::Error> {
                    const __SHAPE: #k::__private::Shape = #k::__private::Shape {
                        name: #serde_name,
                        fields: &[#(#expected),*],
                        base: #has_base,
                        deny_unknown_fields: #deny,
                        expecting: #expecting,
                    };
                    #call
                }
            }
        };
    })
}

fn expand(input: &Input) -> TokenStream {
    let k = &input.krate;
    let g = Gen { k };
    let name = input.ident;
    let vis = input.vis;
    let update = &input.update;
    let generics = input.generics;
    let (impl_g, ty_g, _) = generics.split_for_impl();
    // What each field needs is stated once per field, spanned on the field: that its reducer
    // fits its type (or that a nested field is a state) in the where clause of the impls that
    // use it, where it is then assumed, so that no use repeats it (rustc reports one predicate at
    // one span once); that its type is a field value (`FieldValue`) in serde's impls on the
    // update where serde derives them (the generated `Serialize` and `Deserialize` call
    // functions whose serde bounds report a field's type at the field). A non-generic struct
    // also states all of it first, in a struct of its own, so that
    // the first error is the one naming the requirement: the traits carry
    // `#[diagnostic::on_unimplemented]` messages with a hint. (A constant or item cannot name a
    // generic struct's parameters: a generic struct gets the where clauses only.)
    let generic = !generics.params.is_empty();
    let mut fits: Vec<TokenStream> = Vec::new();
    let mut key_fits: Vec<TokenStream> = Vec::new();
    let mut message_fits: Vec<TokenStream> = Vec::new();
    let mut asserts: Vec<TokenStream> = Vec::new();
    let mut extends: Option<TokenStream> = None;
    let mut values: Vec<TokenStream> = Vec::new();
    // A base's or nested state's update is a field of this update.
    let mut state_preds: Vec<TokenStream> = Vec::new();
    for field in &input.fields {
        let ty = field.ty;
        let span = field_span(field);
        let state_pred = || {
            [
                respan(quote!(#ty: #k::State), span),
                respan(
                    quote!(<#ty as #k::State>::Update: #k::__private::FieldTraits),
                    span,
                ),
            ]
        };
        let r = match &field.role {
            Role::Skip => continue,
            Role::Base => {
                fits.push(respan(quote!(#ty: #k::State), span));
                // The base's update has the setters trait only if the base says it may be
                // extended: stated here, and on the `Extends` impl, at the field.
                extends = Some(respan(quote!(#ty: #k::update::Extensible), span));
                state_preds.extend(state_pred());
                continue;
            }
            Role::Reduced(r) => r,
        };
        if let Kind::Nested = r.kind {
            state_preds.extend(state_pred());
        }
        // Only the assertion and serde's derived impls (which use it) state the field value's
        // traits.
        values.push(respan(quote!(#ty: #k::__private::FieldValue), span));
        let rty = g.reducer_type(field, r);
        let uty = g.update_type(field);
        let pred = match r.kind {
            Kind::Nested => quote!(#ty: #k::State),
            Kind::DedupeAppend(Some(_)) | Kind::MergeByKey(_) | Kind::With { .. } => {
                quote!(#rty: #k::reducers::Merges<#ty, Update = #uty>)
            }
            _ => {
                quote!(#rty: #k::reducers::Reducer<#ty> + #k::reducers::Merges<#ty, Update = #uty>)
            }
        };
        let pred = respan(pred, span);
        // Only the key functions and the messages setters use a field's reducer outside the
        // `State` impl: their items state their own fields' fits, not every field's.
        match r.kind {
            Kind::DedupeAppend(Some(_)) | Kind::MergeByKey(_) => key_fits.push(pred.clone()),
            Kind::AddMessages | Kind::ReplaceMessages => message_fits.push(pred.clone()),
            _ => {}
        }
        fits.push(pred);
    }
    if !generic && (!fits.is_empty() || !values.is_empty()) {
        let assertion = format_ident!("__AgentStateRequirementsOf{}", name);
        asserts.push(quote! {
            #[doc(hidden)]
            #[allow(dead_code, non_camel_case_types)]
            struct #assertion where #(#values,)* #(#fits,)* #extends;
        });
    }
    let own_preds = generics.where_clause.as_ref().map(|w| {
        let p = w.predicates.iter();
        quote!(#(#p,)*)
    });
    // A nested field's or a base's update is a field of this update, written
    // `<T as State>::Update`: when `T` is not a state, every item naming it (the update, its
    // derives, the impls) would report it again. A non-generic struct states it plainly once,
    // in the assertion above, and every other item assumes it under a `for<'_>` binder, which
    // rustc does not check where it is written. (Only for these fields: assuming every field's
    // traits and reducer this way gives one error per mistake for them too, but tripled the
    // release build of a 20-state crate, benches/compile_time.sh.)
    let assumed = if generic || state_preds.is_empty() {
        TokenStream::new()
    } else {
        let preds = state_preds.iter().map(|pred| {
            let span = pred
                .clone()
                .into_iter()
                .next()
                .map_or_else(Span::call_site, |t| t.span());
            let binder = respan(quote!(for<'__agentstate>), span);
            quote!(#binder #pred,)
        });
        quote!(#(#preds)*)
    };
    let where_c = quote!(where #own_preds #assumed #(#fits,)*);
    let plain_where = quote!(where #own_preds #assumed);
    // The `Update` impl and the update's inherent `from_json`/`then` need only that the state is
    // one, and that the update is one: a non-generic struct assumes that under a binder (not
    // checked where written, like `assumed` above) instead of restating every field's fit, which
    // only the `State` impl needs (the update's `prepare` uses its messages fields' fits).
    let (update_where, forward_where) = if generic {
        (where_c.clone(), where_c.clone())
    } else {
        (
            quote!(where #own_preds #assumed for<'__agentstate> #name: #k::State<Update = #update>, #(#message_fits,)*),
            quote!(where #own_preds #assumed for<'__agentstate> #update: #k::update::Update,),
        )
    };
    let serde_crate = format!("{}::__private::serde", k.to_string().replace(' ', ""));
    let present = format!("{}::update::present", k.to_string().replace(' ', ""));
    // Overwrites and the base's update are flattened: read through a JSON value (see
    // `agentstate::update::flattened`).
    let present_flattened = format!(
        "{}::update::present_flattened",
        k.to_string().replace(' ', "")
    );
    let flattened = format!("{}::update::flattened", k.to_string().replace(' ', ""));

    // The overwrite slot of the update: `overwrite` unless a field already has that name.
    let ow = if input.fields.iter().any(|f| f.ident == "overwrite") {
        format_ident!("__overwrite")
    } else {
        format_ident!("overwrite")
    };
    let ow_struct = format_ident!("{}Overwrite", update);
    let mut ow_fields = Vec::new();
    let mut ow_defaults = Vec::new();
    let mut ow_arms = Vec::new();
    let mut ow_keys = Vec::new();
    let mut update_arms = Vec::new();
    let mut update_keys: Vec<String> = Vec::new();

    // A non-generic state's update reads its object in one pass through `DeserializeFields`:
    // its own keys, then its Overwrites' keys, then its base's update's, each value read where
    // it is (so an error's JSON path is exact), and writes it with a `Serialize` of its own.
    // serde's derives, with `flatten` and a `deserialize_with` per field, were the largest
    // generated items. A base written with generic arguments may have a serde-derived update:
    // then serde's derives read and write it.
    let base_update = base(input).map(|(_, b)| (b.ident, b.ty));
    let base_is_generic = base_update.is_some_and(|(_, ty)| {
        ty.to_token_stream()
            .into_iter()
            .any(|t| matches!(t, proc_macro2::TokenTree::Punct(p) if p.as_char() == '<'))
    });
    let fields_de = !generic && !base_is_generic;
    // The generated `Serialize`s: the update's entries (its own, its base's flattened, its
    // Overwrites'), and the Overwrites' fields on their own.
    let mut update_ser = Vec::new();
    let mut ow_in_update_ser = Vec::new();
    let mut ow_ser = Vec::new();
    let mut ow_set = Vec::new();
    // The generated `PartialEq`s (non-generic structs): a field value compares through
    // `FieldValue`, which the impls assume, so a type that is not `PartialEq` is reported once,
    // under the requirement's message, not again by a derived `==`.
    let mut update_eq = Vec::new();
    let mut ow_eq = Vec::new();

    // The update struct.
    let mut update_fields = Vec::new();
    let mut defaults = Vec::new();
    let mut setters = Vec::new();
    let mut trait_setters = Vec::new();
    // The setters trait, for the updates of states that extend this one: only on the states
    // that say they may be extended (it repeats every setter, a tenth of a user's rebuild).
    let with_trait = input.extensible && !generic;
    let mut serde_bounds = Vec::new();
    let mut prepares = Vec::new();
    for field in &input.fields {
        let ident = field.ident;
        let fspan = field_span(field);
        let Some(uty) = g.update_type(field) else {
            continue;
        };
        if generic {
            serde_bounds.push(uty.to_string());
        }
        let json = &field.json_name;
        let setter = setter_name(ident);
        // The field's entries in the generated structs and `Serialize`s point at the field:
        // their parts carry its span, each re-spanned once, and `quote_spanned!` the rest.
        let sk = respan(k.clone(), fspan);
        let sident = respan(ident.to_token_stream(), fspan);
        let sjson = respan(json.to_token_stream(), fspan);
        match &field.role {
            Role::Base => {
                let doc = format!(
                    "Updates of the base state `{}`; in JSON its fields sit beside this state's own.",
                    field.ty.to_token_stream()
                );
                let serde_attr =
                    (!fields_de).then(|| quote!(#[serde(flatten, deserialize_with = #flattened)]));
                update_fields.push(generated_field(
                    fspan, &doc, serde_attr, &sident, &uty, false,
                ));
                update_ser.push(quote_spanned!(fspan=>
                    #sk::__private::serialize_flattened(&mut __map, &self.#sident)?;
                ));
                update_eq.push(quote!(self.#ident == __other.#ident));
                defaults.push(quote!(#ident: ::core::default::Default::default()));
                // The base's part of the update prepares its own messages fields.
                let ty = field.ty;
                prepares.push(quote! {
                    <#ty as #k::State>::prepare_update(&mut self.#ident);
                });
                let doc = format!("Sets the update of the base state (`{ident}`).");
                // A setter uses no requirement of its field that its impl does not state: it
                // keeps the spans of the field's name and type (re-spanning costs the derive).
                setters.push(quote! {
                    #[doc = #doc]
                    #[must_use]
                    pub fn #setter(mut self, value: impl #k::update::IntoField<#uty>) -> Self {
                        self.#ident = #k::update::IntoField::into_field(value);
                        self
                    }
                });
            }
            Role::Reduced(r) => {
                // serde's derived impls on the update (when serde derives them for a non-generic
                // struct: its base is generic; a generic one's has its own bounds) state the
                // field's requirement too, spanned on the field: they then assume it rather
                // than report its parts again.
                let bound = (!generic && !fields_de).then(|| {
                    format!(
                        "{}: {}::__private::FieldValue",
                        field.ty.to_token_stream(),
                        k.to_string().replace(' ', "")
                    )
                });
                let bound = bound.as_slice();
                let doc = format!(
                    "Merged into `{ident}` with `{}`; `None` leaves the field alone.",
                    r.name
                );
                let serde_attr = (!fields_de).then(|| {
                    quote! {
                        #[serde(
                            default,
                            rename = #json,
                            skip_serializing_if = "::core::option::Option::is_none",
                            deserialize_with = #present
                            #(, bound = #bound)*
                        )]
                    }
                });
                update_fields.push(generated_field(
                    fspan, &doc, serde_attr, &sident, &uty, true,
                ));
                // A field value (the update holds the field's own type) is compared, written
                // and read through `FieldValue`, which the impls assume: a type missing one of
                // its traits is reported once, by the requirement.
                let value = uty.to_string() == field.ty.to_token_stream().to_string();
                let written = if value {
                    quote_spanned!(fspan=> &#sk::__private::value(&self.#sident))
                } else {
                    quote_spanned!(fspan=> &self.#sident)
                };
                update_ser.push(quote_spanned!(fspan=>
                    #sk::__private::serialize_entry(&mut __map, #sjson, #written)?;
                ));
                update_eq.push(if value {
                    quote!(#k::__private::option_eq(&self.#ident, &__other.#ident))
                } else {
                    quote!(self.#ident == __other.#ident)
                });
                defaults.push(quote!(#ident: ::core::option::Option::None));
                let read = if value {
                    quote!(#k::__private::deserialize_field_value)
                } else {
                    quote!(#k::__private::deserialize_value)
                };
                update_arms.push(quote! {
                    #json => #read(&mut __fields.#ident, #json, __map),
                });
                update_keys.push(json.clone());
                // Messages in a JSON messages update get their ids when the update is made.
                if let Kind::Nested = r.kind {
                    // A nested state's update prepares its own messages fields.
                    let ty = field.ty;
                    prepares.push(quote! {
                        if let ::core::option::Option::Some(value) = &mut self.#ident {
                            <#ty as #k::State>::prepare_update(value);
                        }
                    });
                }
                let prepares_messages = matches!(r.kind, Kind::AddMessages | Kind::ReplaceMessages);
                let prepare = prepares_messages.then(|| {
                    let rty = g.reducer_type(field, r);
                    let ty = field.ty;
                    prepares.push(quote! {
                        if let ::core::option::Option::Some(value) = &mut self.#ident {
                            #k::reducers::Reducer::<#ty>::prepare(&#rty, value);
                        }
                    });
                    quote!(#k::reducers::Reducer::<#ty>::prepare(&#rty, &mut value);)
                });
                // Into this update, and (the setters trait's) into the base's part of an
                // extending state's update.
                let into = |target: TokenStream| match &prepare {
                    Some(prepare) => quote! {
                        let mut value = #k::update::IntoField::into_field(value);
                        #prepare
                        #target.#ident = ::core::option::Option::Some(value);
                    },
                    None => quote! {
                        #target.#ident =
                            ::core::option::Option::Some(#k::update::IntoField::into_field(value));
                    },
                };
                let set = into(quote!(self));
                let doc = format!("Sets the value merged into `{ident}` (with `{}`).", r.name);
                // Only a messages setter uses its field's reducer (to prepare): on the field.
                let spanned = |tokens| {
                    if prepares_messages {
                        respan(tokens, fspan)
                    } else {
                        tokens
                    }
                };
                setters.push(spanned(quote! {
                    #[doc = #doc]
                    #[must_use]
                    pub fn #setter(mut self, value: impl #k::update::IntoField<#uty>) -> Self {
                        #set
                        self
                    }
                }));
                if with_trait {
                    let set_in_base =
                        into(quote!(#k::update::Extends::<#update>::base_update(&mut self)));
                    trait_setters.push(spanned(quote! {
                        #[doc = #doc]
                        #[must_use]
                        fn #setter(mut self, value: impl #k::update::IntoField<#uty>) -> Self {
                            #set_in_base
                            self
                        }
                    }));
                }
                let ty = field.ty;
                if generic {
                    serde_bounds.push(ty.to_token_stream().to_string());
                }
                let ow_json = format!("{json}.__overwrite__");
                let doc = format!(
                    "Replaces `{ident}` with this value, bypassing its reducer `{}`.",
                    r.name
                );
                let serde_attr = (!fields_de).then(|| {
                    quote! {
                        #[serde(
                            default,
                            rename = #ow_json,
                            skip_serializing_if = "::core::option::Option::is_none",
                            deserialize_with = #present_flattened
                            #(, bound = #bound)*
                        )]
                    }
                });
                let (sow_json, sow) = (
                    respan(ow_json.to_token_stream(), fspan),
                    respan(ow.to_token_stream(), fspan),
                );
                ow_fields.push(generated_field(
                    fspan,
                    &doc,
                    serde_attr,
                    &sident,
                    &ty.to_token_stream(),
                    true,
                ));
                ow_in_update_ser.push(quote_spanned!(fspan=>
                    #sk::__private::serialize_entry(&mut __map, #sow_json, &#sk::__private::value(&self.#sow.#sident))?;
                ));
                ow_ser.push(quote_spanned!(fspan=>
                    #sk::__private::serialize_field(&mut __state, #sow_json, &#sk::__private::value(&self.#sident))?;
                ));
                ow_set.push(quote!(+ self.#ident.is_some() as usize));
                ow_eq.push(quote!(#k::__private::option_eq(&self.#ident, &__other.#ident)));
                ow_defaults.push(quote!(#ident: ::core::option::Option::None));
                ow_arms.push(quote! {
                    #ow_json => #k::__private::deserialize_field_value(&mut __fields.#ident, #ow_json, __map),
                });
                ow_keys.push(ow_json);
                let ow_setter = format_ident!(
                    "overwrite_{}",
                    ident.to_string().trim_start_matches("r#"),
                    span = fspan
                );
                setters.push(quote! {
                    #[doc = #doc]
                    #[must_use]
                    pub fn #ow_setter(mut self, value: impl #k::update::IntoField<#ty>) -> Self {
                        self.#ow.#ident = ::core::option::Option::Some(#k::update::IntoField::into_field(value));
                        self
                    }
                });
                if with_trait {
                    trait_setters.push(quote! {
                        #[doc = #doc]
                        #[must_use]
                        fn #ow_setter(mut self, value: impl #k::update::IntoField<#ty>) -> Self {
                            #k::update::Extends::<#update>::base_update(&mut self).#ow.#ident =
                                ::core::option::Option::Some(#k::update::IntoField::into_field(value));
                            self
                        }
                    });
                }
            }
            Role::Skip => {}
        }
    }

    let ow_doc = "Overwrites: each replaces its field, bypassing the field's reducer (an update's ordinary entry for the field then merges on top). In JSON `{\"field\": {\"__overwrite__\": value}}`.";
    let serde_attr = (!fields_de).then(|| quote!(#[serde(flatten)]));
    update_fields.push(quote! {
        #[doc = #ow_doc]
        #serde_attr
        pub #ow: #ow_struct #ty_g
    });
    defaults.push(quote!(#ow: ::core::default::Default::default()));
    update_eq.push(quote!(self.#ow == __other.#ow));

    // A generic state whose parameters all sit in skipped fields still uses them.
    let type_params: Vec<&Ident> = generics.type_params().map(|p| &p.ident).collect();
    let lifetimes: Vec<_> = generics.lifetimes().map(|l| &l.lifetime).collect();
    if !type_params.is_empty() || !lifetimes.is_empty() {
        let phantom = quote! {
            #[doc(hidden)]
            #[serde(skip)]
            pub __agentstate_params: ::core::marker::PhantomData<fn() -> (#(&#lifetimes (),)* #(#type_params,)*)>
        };
        update_fields.push(phantom.clone());
        ow_fields.push(phantom);
        defaults.push(quote!(__agentstate_params: ::core::marker::PhantomData));
        ow_defaults.push(quote!(__agentstate_params: ::core::marker::PhantomData));
    }
    let serde_bound = (!generics.params.is_empty()).then(|| {
        let de: Vec<String> = serde_bounds
            .iter()
            .map(|t| format!("{t}: {serde_crate}::Deserialize<'de>"))
            .collect();
        let ser: Vec<String> = serde_bounds
            .iter()
            .map(|t| format!("{t}: {serde_crate}::Serialize"))
            .collect();
        let de = de.join(", ");
        let ser = ser.join(", ");
        quote!(#[serde(bound(serialize = #ser, deserialize = #de))])
    });

    let where_clause = &plain_where;
    let serde = quote!(#k::__private::serde);
    let update_doc = format!(
        "A partial update of [`{name}`]: each field is `None` (left alone) or the value merged \
         through that field's reducer. Generated by `#[derive(AgentState)]`."
    );
    // serde's derives, for a generic state's update and Overwrites.
    let serde_derives = (!fields_de).then(|| {
        quote! {
            #[derive(#k::__private::serde::Serialize, #k::__private::serde::Deserialize)]
            #[serde(crate = #serde_crate)]
            #serde_bound
        }
    });
    // The generated impls of a non-generic update and its Overwrites assume each field value's
    // traits (see `FieldValue`).
    let value_where = quote!(where #own_preds #assumed #(#values,)*);
    let update_de_impl = if fields_de {
        let trait_ = quote!(#k::state::DeserializeFields<'de>);
        let base_arm = match base_update {
            Some((ident, ty)) => quote! {
                <<#ty as #k::State>::Update as #trait_>::deserialize_field(&mut __fields.#ident, __key, __map)
            },
            None => quote!(::core::result::Result::Ok(false)),
        };
        let others = quote! {
            if <#ow_struct as #trait_>::deserialize_field(&mut __fields.#ow, __key, __map)? {
                return ::core::result::Result::Ok(true);
            }
            #base_arm
        };
        let impls = key_by_key(
            k,
            update,
            &value_where,
            &update_arms,
            &update_keys,
            others,
            true,
        );
        let write = serialize_impl(
            k,
            update,
            &value_where,
            quote! {
                let mut __map = #serde::Serializer::serialize_map(__serializer, ::core::option::Option::None)?;
                #(#update_ser)*
                #(#ow_in_update_ser)*
                #serde::ser::SerializeMap::end(__map)
            },
        );
        quote!(#impls #write)
    } else {
        TokenStream::new()
    };
    // A generic struct derives `PartialEq` (its field types' requirements are its own bounds).
    let derived_eq = (!fields_de).then(|| quote!(, ::core::cmp::PartialEq));
    let eq_impl = |ty: &Ident, eqs: &[TokenStream]| {
        fields_de.then(|| {
            quote! {
                #[automatically_derived]
                impl ::core::cmp::PartialEq for #ty #value_where {
                    #[inline]
                    fn eq(&self, __other: &Self) -> bool {
                        true #(&& #eqs)*
                    }
                }
            }
        })
    };
    let update_eq = eq_impl(update, &update_eq);
    let ow_eq_impl = eq_impl(&ow_struct, &ow_eq);
    let update_struct = quote! {
        #[doc = #update_doc]
        #[derive(::core::fmt::Debug, ::core::clone::Clone #derived_eq)]
        #serde_derives
        #vis struct #update #generics #where_clause {
            #(#update_fields,)*
        }

        #update_de_impl
        #update_eq
    };

    let ow_struct_doc = format!("The overwrites of a [`{update}`]: each field, when set, replaces the state's field, bypassing its reducer.");
    // A non-generic struct's Overwrites read their keys through `DeserializeFields`, one
    // match over the keys (serde's derive, with a `deserialize_with` per field, is about 1,200
    // lines of code per state; most of a state's expansion).
    let ow_de_impl = if fields_de {
        let others = quote!(::core::result::Result::Ok(false));
        let impls = key_by_key(
            k,
            &ow_struct,
            &value_where,
            &ow_arms,
            &ow_keys,
            others,
            false,
        );
        // serde's derive writes a struct without a flattened field as a struct.
        let state = if ow_ser.is_empty() {
            quote!(__state)
        } else {
            quote!(mut __state)
        };
        let name = ow_struct.to_string();
        let write = serialize_impl(
            k,
            &ow_struct,
            &value_where,
            quote! {
                let #state = #serde::Serializer::serialize_struct(__serializer, #name, 0 #(#ow_set)*)?;
                #(#ow_ser)*
                #serde::ser::SerializeStruct::end(__state)
            },
        );
        quote!(#impls #write)
    } else {
        TokenStream::new()
    };
    let overwrite_struct = quote! {
        #[doc = #ow_struct_doc]
        #[derive(::core::fmt::Debug, ::core::clone::Clone #derived_eq)]
        #serde_derives
        #vis struct #ow_struct #generics #where_clause {
            #(#ow_fields,)*
        }

        #ow_de_impl
        #ow_eq_impl
    };

    let setters_trait = (with_trait && !trait_setters.is_empty()).then(|| {
        // A messages setter prepares through its reducer: the fits of those fields.
        let where_c = quote!(where #own_preds #assumed #(#message_fits,)*);
        let trait_name = format_ident!("{}Setters", update);
        let doc = format!(
            "The setters of [`{update}`] on the update of a state that extends [`{name}`] \
             (`#[agent_state(base)]`); bring this trait into scope to chain them."
        );
        quote! {
            #[doc = #doc]
            #vis trait #trait_name: #k::update::Extends<#update> + ::core::marker::Sized #where_c {
                #(#trait_setters)*
            }

            impl<__U: #k::update::Extends<#update>> #trait_name for __U #where_c {}
        }
    });
    let extensible_impl = input.extensible.then(|| {
        quote! {
            #[automatically_derived]
            impl #impl_g #k::update::Extensible for #name #ty_g #plain_where {}
        }
    });

    // The State implementation.
    let mut plan_types = Vec::new();
    let mut plans = Vec::new();
    let mut applies = Vec::new();
    let mut schema = Vec::new();
    let mut own_names = Vec::new();
    let mut key_fns = Vec::new();
    let mut checks = Vec::new();
    let mut composes = Vec::new();
    let mut composed = Vec::new();
    let mut composed_ow = Vec::new();
    for field in &input.fields {
        let ident = field.ident;
        let fspan = field_span(field);
        let ty = field.ty;
        let json = &field.json_name;
        if let Role::Skip = field.role {
            continue;
        }
        // Everything here points at the field: the tokens interpolated below carry its span
        // already, each re-spanned once, and `quote_spanned!` gives it to the rest (cheaper
        // for the derive than re-spanning every fragment).
        let index = Index {
            index: plan_types.len() as u32,
            span: fspan,
        };
        let k = &respan(k.clone(), fspan);
        let sty = respan(ty.to_token_stream(), fspan);
        let sident = respan(ident.to_token_stream(), fspan);
        let sjson = respan(json.to_token_stream(), fspan);
        let sow = respan(ow.to_token_stream(), fspan);
        match &field.role {
            Role::Skip => continue,
            Role::Base => {
                plan_types.push(quote_spanned!(fspan=> <#sty as #k::State>::Plan));
                plans.push(
                    quote_spanned!(fspan=> #k::State::plan(&self.#sident, __update.#sident)?),
                );
                applies.push(
                    quote_spanned!(fspan=> #k::State::apply(&mut self.#sident, __plan.#index)),
                );
                composed.push(quote_spanned!(fspan=>
                    #sident: <#sty as #k::State>::compose(__a.#sident, __b.#sident, __how)?
                ));
                // The base's fields come first, as in `FIELDS`.
                schema.insert(0, quote_spanned! {fspan=>
                    ::core::iter::Extend::extend(&mut __fields, <#sty as #k::State>::schema().into_fields());
                });
            }
            Role::Reduced(r) => {
                own_names.push((json.clone(), ident));
                let plan_ty = g.merges(field, r, "Plan");
                let splan_ty = respan(plan_ty.clone(), fspan);
                plan_types.push(quote_spanned!(fspan=> #k::__private::FieldPlan<#sty, #splan_ty>));
                let (ow_var, u_var) = (
                    format_ident!("__ow_{}", ident.to_string().trim_start_matches("r#")),
                    format_ident!("__u_{}", ident.to_string().trim_start_matches("r#")),
                );
                let (sow_var, su_var) = (
                    format_ident!("{}", ow_var, span = fspan),
                    format_ident!("{}", u_var, span = fspan),
                );
                composed.push(quote_spanned!(fspan=> #sident: #su_var));
                composed_ow.push(quote!(#ident: #ow_var));
                let reducer_name = respan(r.name.to_token_stream(), fspan);
                let lww = respan(
                    matches!(r.kind, Kind::LastWriteWins | Kind::ReplaceValue).to_token_stream(),
                    fspan,
                );
                let expr = (!matches!(r.kind, Kind::Nested))
                    .then(|| respan(g.reducer_expr(field, r), fspan));
                let combine = match &expr {
                    None => {
                        quote_spanned!(fspan=> #k::__private::compose_nested::<#sty>(#sjson, __how))
                    }
                    Some(expr) => {
                        quote_spanned!(fspan=> #k::__private::compose_with::<#sty, _>(#sjson, &#expr))
                    }
                };
                composes.push(quote_spanned! {fspan=>
                    let (#sow_var, #su_var) = #k::__private::compose_field(
                        #sjson, #reducer_name, #lww, __how,
                        (__a.#sow.#sident, __a.#sident),
                        (__b.#sow.#sident, __b.#sident),
                        #combine,
                    )?;
                });
                let Some(expr) = expr else {
                    plans.push(quote_spanned! {fspan=>
                        #k::__private::plan_nested(#sjson, &self.#sident, __update.#sow.#sident, __update.#sident)?
                    });
                    applies.push(quote_spanned! {fspan=>
                        #k::__private::apply_nested(&mut self.#sident, __plan.#index)
                    });
                    schema.push(quote_spanned! {fspan=>
                        __fields.push(#k::schema::FieldSchema::nested::<#sty>(#sjson));
                    });
                    continue;
                };
                plans.push(quote_spanned! {fspan=>
                    #k::__private::plan_field::<#sty, _>(#sjson, &#expr, &self.#sident, __update.#sow.#sident, __update.#sident)?
                });
                applies.push(quote_spanned! {fspan=>
                    #k::__private::apply_field::<#sty, _>(&#expr, &mut self.#sident, __plan.#index)
                });
                schema.push(quote_spanned! {fspan=>
                    __fields.push(#k::schema::FieldSchema::of(#sjson, &#expr));
                });
                if let Kind::BoundedAppend(MaxLen::Const(path)) = &r.kind {
                    let message = format!(
                        "reducer_configuration_invalid: bounded_append's max_len for field `{ident}` must be at least 1"
                    );
                    checks.push(
                        quote_spanned! {path.segments.last().map_or(r.span, |s| s.ident.span())=>
                            const _: () = ::core::assert!((#path) as i128 >= 1, #message);
                        },
                    );
                }
                let key = match &r.kind {
                    Kind::DedupeAppend(Some(key)) => Some((key, quote!(DedupeAppend::by))),
                    Kind::MergeByKey(key) => Some((key, quote!(MergeByKey::new))),
                    _ => None,
                };
                if let Some((key, constructor)) = key {
                    let f = key_reducer_fn(ident);
                    let label = key.label();
                    let item = quote!(<#ty as #k::reducers::ListField>::Item);
                    // A key field's requirements point at the key in the attribute; the
                    // tokens of a key function are the user's and keep their spans.
                    let key_span = match key {
                        Key::Field(item_field) => item_field.span().resolved_at(Span::call_site()),
                        Key::Function(_) => fspan,
                    };
                    let key_fn = match key {
                        Key::Field(item_field) => respan(
                            quote! {
                                #k::__private::by_field::<#item, _, _>(|__item: &#item| &__item.#item_field)
                            },
                            key_span,
                        ),
                        Key::Function(tokens) => {
                            let by_value =
                                respan(quote!(#k::reducers::by_value::<#item, _, _>), fspan);
                            quote!(#by_value(#tokens))
                        }
                    };
                    let update_ty = g.merges(field, r, "Update");
                    let signature = respan(
                        quote!(#[inline] fn #f() -> impl #k::reducers::Reducer<#ty, Update = #update_ty, Plan = #plan_ty>),
                        key_span,
                    );
                    let constructor = respan(quote!(#k::reducers::#constructor), key_span);
                    let label = respan(quote!(.named(#label)), key_span);
                    key_fns.push(quote! {
                        #signature {
                            #constructor(#key_fn #label)
                        }
                    });
                }
            }
        }
    }

    let base = base(input);
    let fields_const = {
        let own: Vec<&String> = own_names.iter().map(|(n, _)| n).collect();
        match base {
            Some((_, b)) if generics.params.is_empty() => {
                let bty = b.ty;
                quote! {{
                    const __BASE: &[&str] = <#bty as #k::State>::FIELDS;
                    const __OWN: &[&str] = &[#(#own),*];
                    const __LEN: usize = __BASE.len() + __OWN.len();
                    const __ALL: [&str; __LEN] = #k::__private::concat_fields::<__LEN>(__BASE, __OWN);
                    &__ALL
                }}
            }
            _ => quote!(&[#(#own),*]),
        }
    };

    let base_items = base.map(|(_, b)| {
        let bty = b.ty;
        let ident = b.ident;
        // A constant cannot name the struct's type parameters, so generic states skip this check.
        let duplicates: Vec<TokenStream> = if generics.params.is_empty() {
            own_names.iter().map(|(json, field)| {
                let message = format!(
                    "conflicting_reducers: field `{json}` is already declared by the base state `{}`; an extension cannot declare it again",
                    bty.to_token_stream().to_string().replace(' ', "")
                );
                quote_spanned! {field.span()=>
                    const _: () = ::core::assert!(!#k::__private::contains(<#bty as #k::State>::FIELDS, #json), #message);
                }
            }).collect()
        } else {
            Vec::new()
        };
        quote! {
            #(#duplicates)*

            #[automatically_derived]
            impl #impl_g ::core::ops::Deref for #name #ty_g #plain_where {
                type Target = #bty;
                fn deref(&self) -> &#bty {
                    &self.#ident
                }
            }

            #[automatically_derived]
            impl #impl_g ::core::ops::DerefMut for #name #ty_g #plain_where {
                fn deref_mut(&mut self) -> &mut #bty {
                    &mut self.#ident
                }
            }

            #[automatically_derived]
            impl #impl_g #k::update::Extends<<#bty as #k::State>::Update> for #update #ty_g #plain_where #extends {
                fn base_update(&mut self) -> &mut <#bty as #k::State>::Update {
                    &mut self.#ident
                }
            }
        }
    });

    let key_impl = (!key_fns.is_empty()).then(|| {
        quote! {
            impl #impl_g #name #ty_g where #own_preds #assumed #(#key_fits,)* {
                #(#key_fns)*
            }
        }
    });

    // Messages: into the named field, or through the base (an AgentState extension's default).
    let messages_target = input.messages.as_ref().and_then(|m| input.fields.iter().find(|f| f.ident == m)).or_else(|| {
        input.fields.iter().find(|f| {
            matches!(f.role, Role::Base)
                && matches!(f.ty, syn::Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "AgentState"))
        })
    });
    let messages_impl = messages_target.map(|f| {
        let ident = f.ident;
        let body = match f.role {
            Role::Base => quote!(#k::output::MessagesUpdate::add_messages(&mut self.#ident, messages);),
            _ => quote! {
                let messages = ::core::iter::Iterator::map(::core::iter::IntoIterator::into_iter(messages), ::core::convert::Into::into);
                match &mut self.#ident {
                    ::core::option::Option::Some(existing) => ::core::iter::Extend::extend(existing, messages),
                    ::core::option::Option::None => {
                        self.#ident = ::core::option::Option::Some(::core::iter::FromIterator::from_iter(messages));
                    }
                }
            },
        };
        quote! {
            #[automatically_derived]
            impl #impl_g #k::output::MessagesUpdate for #update #ty_g #plain_where {
                fn add_messages(&mut self, messages: ::std::vec::Vec<#k::message::Message>) {
                    #body
                }
            }
        }
    });
    let phantom_init = (!type_params.is_empty() || !lifetimes.is_empty())
        .then(|| quote!(__agentstate_params: ::core::marker::PhantomData,));
    let state_prepare = (!prepares.is_empty()).then(|| {
        quote! {
            #[inline]
            fn prepare_update(update: &mut Self::Update) {
                #k::update::Update::prepare(update)
            }
        }
    });
    let prepare_fn = (!prepares.is_empty()).then(|| {
        quote! {
            #[inline]
            fn prepare(&mut self) {
                #(#prepares)*
            }
        }
    });

    let deserialize = deserialize_impl(input, &assumed);
    // The setters use no reducer but a messages field's (to prepare its messages): their impl
    // states only those fields' fits, so that each setter is not checked under every field's.
    let setters_where = quote!(where #own_preds #assumed #(#message_fits,)*);

    quote! {
        #(#asserts)*

        #deserialize

        #update_struct

        #overwrite_struct

        #setters_trait
        #extensible_impl

        const _: () = {
            #[automatically_derived]
            impl #impl_g ::core::default::Default for #update #ty_g #plain_where {
                fn default() -> Self {
                    Self { #(#defaults,)* }
                }
            }

            #[automatically_derived]
            impl #impl_g ::core::default::Default for #ow_struct #ty_g #plain_where {
                fn default() -> Self {
                    Self { #(#ow_defaults,)* }
                }
            }

            impl #impl_g #update #ty_g #setters_where {
                #(#setters)*
            }

            impl #impl_g #update #ty_g #forward_where {

                /// Parses a JSON update strictly: unknown keys and values that do not fit are
                /// `state_validation_error`s naming the field (see `agentstate::update::Update`).
                #[inline]
                pub fn from_json(value: #k::__private::serde_json::Value) -> ::core::result::Result<Self, #k::Error>
                where
                    for<'__agentstate> Self: #k::__private::serde::de::DeserializeOwned,
                {
                    <Self as #k::update::Update>::from_json(value)
                }

                /// Parses a JSON update, ignoring and returning unknown keys.
                #[inline]
                pub fn from_json_lenient(
                    value: #k::__private::serde_json::Value,
                ) -> ::core::result::Result<(Self, ::std::vec::Vec<::std::string::String>), #k::Error>
                where
                    for<'__agentstate> Self: #k::__private::serde::de::DeserializeOwned,
                {
                    <Self as #k::update::Update>::from_json_lenient(value)
                }

                /// One update whose effect equals merging `self` then `next`.
                #[inline]
                pub fn then(self, next: Self) -> ::core::result::Result<Self, #k::Error> {
                    <Self as #k::update::Update>::then(self, next)
                }
            }

            #[automatically_derived]
            impl #impl_g #k::update::Update for #update #ty_g #update_where {
                type State = #name #ty_g;
                #prepare_fn
            }

            #messages_impl

            #key_impl

            #base_items

            #[automatically_derived]
            impl #impl_g #k::State for #name #ty_g #where_c {
                type Update = #update #ty_g;
                type Plan = (#(#plan_types,)*);
                const FIELDS: &'static [&'static str] = #fields_const;

                #[inline]
                fn plan(&self, __update: Self::Update) -> ::core::result::Result<Self::Plan, #k::Error> {
                    #(#checks)*
                    ::core::result::Result::Ok((#(#plans,)*))
                }

                #[inline]
                fn apply(&mut self, __plan: Self::Plan) {
                    #(#applies;)*
                }

                #[inline]
                fn compose(
                    __a: Self::Update,
                    __b: Self::Update,
                    __how: #k::update::Combine,
                ) -> ::core::result::Result<Self::Update, #k::Error> {
                    #(#composes)*
                    ::core::result::Result::Ok(#update {
                        #(#composed,)*
                        #ow: #ow_struct { #(#composed_ow,)* #phantom_init },
                        #phantom_init
                    })
                }

                #state_prepare

                #[inline]
                fn schema() -> #k::schema::Schema {
                    let mut __fields = ::std::vec::Vec::new();
                    #(#schema)*
                    #k::schema::Schema::describe(__fields)
                }
            }
        };
    }
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
