//! Reading the attributes: `#[reducer(...)]`, `#[agent_state(...)]` and the `#[serde(...)]`
//! options that carry over to the update. Parsing only splits tokens; [`crate::check`] decides
//! what they mean.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::{Attribute, Ident, LitStr};

/// One entry of an attribute list: `name`, `name(args)` or `name = value`.
pub struct Item {
    pub name: Ident,
    pub args: Option<(TokenStream, Span)>,
    pub value: Option<TokenStream>,
}

impl Item {
    /// The span of the whole entry.
    pub fn span(&self) -> Span {
        let mut span = self.name.span();
        if let Some((_, args)) = &self.args {
            span = span.join(*args).unwrap_or(span);
        }
        if let Some(value) = &self.value {
            if let Some(last) = value.clone().into_iter().last() {
                span = span.join(last.span()).unwrap_or(span);
            }
        }
        span
    }
}

/// Splits `tokens` at top-level commas. Commas inside `()`, `[]` and `{}` are inside groups
/// already; those inside `<...>` of a path are kept together too.
pub fn split_commas(tokens: TokenStream) -> Vec<TokenStream> {
    let mut parts = Vec::new();
    let mut current = Vec::new();
    let mut angle = 0usize;
    let mut in_closure_params = false;
    for token in tokens {
        match &token {
            TokenTree::Punct(p) if p.as_char() == '|' => {
                // `|a, b|` closure parameters: a closure starts a part or follows `=`.
                let starts_closure = match current.last() {
                    None => true,
                    Some(TokenTree::Punct(prev)) => prev.as_char() == '=',
                    Some(_) => false,
                };
                if in_closure_params || starts_closure {
                    in_closure_params = !in_closure_params;
                }
            }
            TokenTree::Punct(p) if p.as_char() == '<' => angle += 1,
            TokenTree::Punct(p) if p.as_char() == '>' && angle > 0 => angle -= 1,
            TokenTree::Punct(p) if p.as_char() == ',' && angle == 0 && !in_closure_params => {
                parts.push(current.drain(..).collect());
                continue;
            }
            _ => {}
        }
        current.push(token);
    }
    if !current.is_empty() {
        parts.push(current.into_iter().collect());
    }
    parts
}

/// Parses the entries of an attribute list.
pub fn parse_items(tokens: TokenStream) -> syn::Result<Vec<Item>> {
    let mut items = Vec::new();
    for part in split_commas(tokens) {
        let mut iter = part.clone().into_iter();
        let name = match iter.next() {
            Some(TokenTree::Ident(ident)) => ident,
            Some(other) => {
                return Err(syn::Error::new(
                    other.span(),
                    "expected a name, such as `append` or `bounded_append(max_len = 3)`",
                ))
            }
            None => continue,
        };
        let mut item = Item {
            name,
            args: None,
            value: None,
        };
        match iter.next() {
            None => {}
            Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Parenthesis => {
                item.args = Some((group.stream(), group.span()));
                if let Some(extra) = iter.next() {
                    return Err(syn::Error::new(
                        extra.span(),
                        "unexpected tokens; separate entries with commas",
                    ));
                }
            }
            Some(TokenTree::Punct(p)) if p.as_char() == '=' => {
                let value: TokenStream = iter.collect();
                if value.is_empty() {
                    return Err(syn::Error::new(p.span(), "expected a value after `=`"));
                }
                item.value = Some(value);
            }
            Some(other) => {
                return Err(syn::Error::new(
                    other.span(),
                    "expected `(...)`, `= value` or a comma",
                ))
            }
        }
        items.push(item);
    }
    Ok(items)
}

/// The `#[reducer(...)]` and `#[agent_state(...)]` attributes of a field, and its serde rename.
#[derive(Default)]
pub struct FieldAttrs<'a> {
    pub reducers: Vec<&'a Attribute>,
    pub agent_state: Vec<&'a Attribute>,
    pub serde_rename: Option<String>,
    /// Whether the field has `#[serde(flatten)]`.
    pub serde_flatten: bool,
    /// Every `#[serde(...)]` entry, for `#[agent_state(deserialize)]`.
    pub serde: Vec<Item>,
}

/// Collects a field's attributes.
pub fn field_attrs(attrs: &[Attribute]) -> syn::Result<FieldAttrs<'_>> {
    let mut out = FieldAttrs::default();
    for attr in attrs {
        if attr.path().is_ident("reducer") {
            out.reducers.push(attr);
        } else if attr.path().is_ident("agent_state") {
            out.agent_state.push(attr);
        } else if attr.path().is_ident("serde") {
            if let Some(rename) = serde_string(attr, "rename")? {
                out.serde_rename = Some(rename);
            }
            out.serde_flatten |= serde_flag(attr, "flatten")?;
            out.serde.extend(serde_items(attr)?);
        }
    }
    Ok(out)
}

/// The value of `#[serde(key = "value")]`, if the attribute has it. Other serde options are
/// skipped without being parsed.
pub fn serde_string(attr: &Attribute, key: &str) -> syn::Result<Option<String>> {
    let syn::Meta::List(list) = &attr.meta else {
        return Ok(None);
    };
    for item in parse_items(list.tokens.clone())? {
        if item.name == key {
            if let Some(value) = item.value {
                let lit: LitStr = syn::parse2(value)?;
                return Ok(Some(lit.value()));
            }
        }
    }
    Ok(None)
}

/// The entries of a `#[serde(...)]` attribute (none for another form).
pub fn serde_items(attr: &Attribute) -> syn::Result<Vec<Item>> {
    match &attr.meta {
        syn::Meta::List(list) => parse_items(list.tokens.clone()),
        _ => Ok(Vec::new()),
    }
}

/// Whether `#[serde(...)]` has the option `key` without a value (`flatten`).
pub fn serde_flag(attr: &Attribute, key: &str) -> syn::Result<bool> {
    let syn::Meta::List(list) = &attr.meta else {
        return Ok(false);
    };
    Ok(parse_items(list.tokens.clone())?
        .iter()
        .any(|item| item.name == key && item.value.is_none() && item.args.is_none()))
}

/// The entries of an attribute written as a list (`#[name(...)]`).
pub fn list_items(attr: &Attribute) -> syn::Result<Vec<Item>> {
    match &attr.meta {
        syn::Meta::List(list) => parse_items(list.tokens.clone()),
        other => Err(syn::Error::new(
            other.span(),
            format!(
                "expected `#[{}(...)]`",
                attr.path()
                    .get_ident()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            ),
        )),
    }
}

/// The value of `version = ...` as written: an integer literal's digits, or `None` for anything
/// else (a string, a path, a negative number). [`crate::check`] decides whether it is allowed.
pub fn integer_literal(value: &TokenStream) -> Option<syn::LitInt> {
    syn::parse2::<syn::LitInt>(value.clone()).ok()
}

/// Converts a Rust field name the way serde's `rename_all` does.
pub fn rename_all(rule: &str, field: &str) -> Option<String> {
    let words: Vec<&str> = field.split('_').filter(|w| !w.is_empty()).collect();
    let capitalized = |w: &str| {
        let mut chars = w.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default()
    };
    Some(match rule {
        "lowercase" => field.to_lowercase(),
        "UPPERCASE" => field.to_uppercase(),
        "PascalCase" => words.iter().map(|w| capitalized(w)).collect(),
        "camelCase" => {
            let pascal: String = words.iter().map(|w| capitalized(w)).collect();
            let mut chars = pascal.chars();
            chars
                .next()
                .map(|c| c.to_lowercase().chain(chars).collect())
                .unwrap_or_default()
        }
        "snake_case" => field.to_owned(),
        "SCREAMING_SNAKE_CASE" => field.to_uppercase(),
        "kebab-case" => field.replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => field.to_uppercase().replace('_', "-"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn splits_at_top_level_commas_only() {
        let parts = split_commas(quote!(
            a,
            b(x, y),
            key = |r: &R| (r.a, r.b),
            f = path::<A, B>,
            k = |a, b| a
        ));
        let texts: Vec<String> = parts.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "a",
                "b (x , y)",
                "key = | r : & R | (r . a , r . b)",
                "f = path :: < A , B >",
                "k = | a , b | a"
            ]
        );
    }

    #[test]
    fn renames_like_serde() {
        assert_eq!(
            rename_all("camelCase", "discount_code").unwrap(),
            "discountCode"
        );
        assert_eq!(
            rename_all("PascalCase", "discount_code").unwrap(),
            "DiscountCode"
        );
        assert_eq!(
            rename_all("kebab-case", "discount_code").unwrap(),
            "discount-code"
        );
        assert_eq!(
            rename_all("SCREAMING_SNAKE_CASE", "discount_code").unwrap(),
            "DISCOUNT_CODE"
        );
        assert!(rename_all("Shouty", "x").is_none());
    }
}
