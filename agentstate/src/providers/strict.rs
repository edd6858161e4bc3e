//! Strict JSON Schemas: a tool's parameters or a structured output's schema rewritten into what
//! a provider's strict mode (constrained decoding) takes, or an error naming the field and the
//! rule it breaks, so that no body is sent only to be rejected.
//!
//! The rewriting follows the providers' documented subsets and their official SDKs' own
//! helpers (`openai` 3.57's `to_strict_json_schema`, `anthropic` 2.14's `transform_schema`):
//!
//! - every object gets `additionalProperties: false`; OpenAI also wants every property in
//!   `required` (a property that accepts `null`, as an `Option` does, stays optional in meaning:
//!   the model writes `null`; one that does not is required, as its Rust type needs a value);
//! - `oneOf` becomes `anyOf` (serde's enums are tagged: the branches never overlap), `const`
//!   becomes a one-value `enum`, a single `allOf` is merged into its schema, a `$ref` with other
//!   keys beside it (schemars' documented fields) is inlined;
//! - Anthropic takes one `type` per schema: `["string", "null"]` becomes an `anyOf`;
//! - annotations the provider does not take (`default`, `examples`, `deprecated`, ...) are left
//!   out; constraints it cannot enforce (string lengths, numeric bounds for Anthropic,
//!   `uniqueItems`, a `format` outside its list) are moved into the description, as the SDKs
//!   do, where the model reads them (the Rust type still checks them when the answer is parsed);
//! - what cannot be expressed at all is an error: a free-form map (`HashMap`, `additionalProperties`
//!   with a schema), a value of any type (`serde_json::Value`), a root that is not an object, a
//!   recursive schema for Anthropic, tuples (`prefixItems`), `not`, `if`/`then`/`else`,
//!   `patternProperties` and the like.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The strict-mode rules of one provider family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// OpenAI Chat's `response_format`, Responses' `text.format`, strict function tools.
    OpenAi,
    /// Anthropic's strict tools and `output_config.format`.
    Anthropic,
}

impl Dialect {
    fn name(self) -> &'static str {
        match self {
            Dialect::OpenAi => "OpenAI's strict mode",
            Dialect::Anthropic => "Anthropic's strict mode",
        }
    }

    /// Whether the provider enforces the string format `format`: OpenAI's documented list,
    /// and `uri` for Anthropic.
    fn enforces_format(self, format: &str) -> bool {
        const FORMATS: [&str; 9] = [
            "date-time",
            "time",
            "date",
            "duration",
            "email",
            "hostname",
            "ipv4",
            "ipv6",
            "uuid",
        ];
        FORMATS.contains(&format) || (self == Dialect::Anthropic && format == "uri")
    }

    /// Whether the provider enforces `keyword` (on a schema of any type).
    fn enforces(self, keyword: &str, value: &Value) -> bool {
        match keyword {
            "pattern" => true,
            "format" => value.as_str().is_some_and(|f| self.enforces_format(f)),
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf"
            | "maxItems" => self == Dialect::OpenAi,
            "minItems" => self == Dialect::OpenAi || matches!(value.as_u64(), Some(0 | 1)),
            _ => false,
        }
    }
}

/// Keywords every strict mode takes as they are.
const STRUCTURE: [&str; 11] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "$ref",
    "$defs",
    "description",
    "title",
];

/// Annotations no strict mode needs: left out.
const ANNOTATIONS: [&str; 10] = [
    "$schema",
    "$id",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentEncoding",
    "contentMediaType",
];

/// Constraints a provider may not enforce: moved into the description when it does not.
const CONSTRAINTS: [&str; 14] = [
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
];

/// Number formats schemars writes (`uint32`, `double`...): the type says enough.
fn number_format(format: &Value) -> bool {
    format.as_str().is_some_and(|f| {
        matches!(f, "int" | "uint" | "float" | "double")
            || f.strip_prefix("int")
                .or_else(|| f.strip_prefix("uint"))
                .is_some_and(|bits| bits.parse::<u8>().is_ok())
    })
}

/// `schema` rewritten for `dialect`'s strict mode, or why it cannot be (naming the field and
/// the rule), as the end of a sentence.
pub(crate) fn strict_schema(schema: &Value, dialect: Dialect) -> Result<Value, String> {
    let root_name = schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("schema")
        .to_owned();
    let fail = |reason: String| reason;
    let mut out = schema.clone();
    let defs: Map<String, Value> = match &mut out {
        Value::Object(map) => match map.remove("$defs").or_else(|| map.remove("definitions")) {
            Some(Value::Object(defs)) => defs,
            Some(_) => {
                return Err(fail(format!(
                    "the `$defs` of `{root_name}` are not an object"
                )))
            }
            None => Map::new(),
        },
        _ => Map::new(),
    };
    let walk = Walk {
        dialect,
        defs: &defs,
        root: &root_name,
    };
    let root_is_object = out.get("type").and_then(Value::as_str) == Some("object");
    if !root_is_object {
        return Err(fail(format!(
            "the root of `{root_name}` is not an object (`\"type\": \"object\"`), which {} requires; wrap it in a struct",
            dialect.name()
        )));
    }
    walk.node(&mut out, &root_name).map_err(fail)?;
    if !defs.is_empty() {
        if dialect == Dialect::Anthropic {
            if let Some(cycle) = recursion(&defs) {
                return Err(fail(format!(
                    "`{cycle}` is recursive (it contains itself), which {} cannot express; bound its depth with distinct types or make the schema not strict",
                    dialect.name()
                )));
            }
        }
        let mut strict_defs = Map::new();
        for (name, def) in &defs {
            let mut def = def.clone();
            walk.node(&mut def, name).map_err(fail)?;
            strict_defs.insert(name.clone(), def);
        }
        if let Value::Object(map) = &mut out {
            map.insert("$defs".into(), Value::Object(strict_defs));
        }
    }
    // Refs written as `#/definitions/X` point at `$defs` now.
    rewrite_refs(&mut out);
    Ok(out)
}

/// The first definition of `defs` that reaches itself through `$ref`s, if any.
fn recursion(defs: &Map<String, Value>) -> Option<String> {
    let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (name, def) in defs {
        let mut refs = BTreeSet::new();
        collect_refs(def, &mut refs);
        edges.insert(name, refs);
    }
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<String> = edges[start].iter().cloned().collect();
        while let Some(next) = stack.pop() {
            if next == *start {
                return Some((*start).to_owned());
            }
            if seen.insert(next.clone()) {
                if let Some(more) = edges.get(next.as_str()) {
                    stack.extend(more.iter().cloned());
                }
            }
        }
    }
    None
}

/// The definition names `value`'s `$ref`s point at.
fn collect_refs(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(name) = map.get("$ref").and_then(Value::as_str).and_then(def_name) {
                out.insert(name.to_owned());
            }
            map.values().for_each(|v| collect_refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// `X` of `#/$defs/X` or `#/definitions/X`.
fn def_name(reference: &str) -> Option<&str> {
    reference
        .strip_prefix("#/$defs/")
        .or_else(|| reference.strip_prefix("#/definitions/"))
}

fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref") {
                if let Some(name) = r.strip_prefix("#/definitions/") {
                    *r = format!("#/$defs/{name}");
                }
            }
            map.values_mut().for_each(rewrite_refs);
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

struct Walk<'d> {
    dialect: Dialect,
    defs: &'d Map<String, Value>,
    /// The root's name, for a `$ref` to `#` (the root: a recursive type).
    root: &'d str,
}

impl Walk<'_> {
    /// Rewrites the schema at `path` (`` `Answer`.items[].city ``) in place, or says why it
    /// cannot be.
    fn node(&self, node: &mut Value, path: &str) -> Result<(), String> {
        let rule = self.dialect.name();
        let map = match node {
            Value::Object(map) => map,
            Value::Bool(true) => {
                return Err(format!(
                    "`{path}` accepts any JSON value, which {rule} cannot express; give it a type"
                ))
            }
            _ => {
                return Err(format!(
                    "`{path}` accepts no value, which {rule} cannot express"
                ))
            }
        };
        for keyword in [
            "not",
            "if",
            "then",
            "else",
            "patternProperties",
            "propertyNames",
            "dependentSchemas",
            "dependentRequired",
            "dependencies",
            "prefixItems",
            "contains",
            "unevaluatedProperties",
            "unevaluatedItems",
            "additionalItems",
        ] {
            if map.contains_key(keyword) {
                let what = if keyword == "prefixItems" {
                    "is a tuple (`prefixItems`)".to_owned()
                } else {
                    format!("uses `{keyword}`")
                };
                return Err(format!(
                    "`{path}` {what}, which {rule} cannot express; use a struct or make the schema not strict"
                ));
            }
        }
        // `$ref` with other keys beside it: inline the definition (its own refs stay refs).
        if let Some(reference) = map.get("$ref").and_then(Value::as_str).map(str::to_owned) {
            if reference == "#" {
                if self.dialect == Dialect::Anthropic {
                    return Err(format!(
                        "`{}` is recursive (it contains itself at `{path}`), which {rule} cannot express; bound its depth with distinct types or make the schema not strict",
                        self.root
                    ));
                }
                // The root cannot be inlined: the reference stands alone.
                map.retain(|k, _| k == "$ref");
                return Ok(());
            }
            let resolved = def_name(&reference)
                .and_then(|name| self.defs.get(name))
                .ok_or_else(|| {
                    format!("`{path}` refers to `{reference}`, which the schema does not define")
                })?;
            if map.keys().all(|k| k == "$ref") {
                return Ok(());
            }
            map.remove("$ref");
            if let Value::Object(def) = resolved {
                for (k, v) in def {
                    map.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        if let Some(all_of) = map.remove("allOf") {
            match all_of {
                Value::Array(mut parts) if parts.len() == 1 => {
                    if let Some(Value::Object(part)) = parts.pop() {
                        for (k, v) in part {
                            map.entry(k).or_insert(v);
                        }
                    }
                    return self.node(node, path);
                }
                _ => {
                    return Err(format!(
                        "`{path}` combines schemas with `allOf`, which {rule} cannot express; use one struct"
                    ))
                }
            }
        }
        if let Some(one_of) = map.remove("oneOf") {
            map.insert("anyOf".into(), one_of);
        }
        if let Some(constant) = map.remove("const") {
            map.entry("enum")
                .or_insert_with(|| Value::Array(vec![constant]));
        }
        // Keywords: kept, left out, moved into the description, or refused.
        let mut moved = Vec::new();
        let keys: Vec<String> = map.keys().cloned().collect();
        for key in keys {
            if STRUCTURE.contains(&key.as_str()) {
                continue;
            }
            let value = &map[&key];
            if key == "format" && number_format(value) || ANNOTATIONS.contains(&key.as_str()) {
                map.remove(&key);
            } else if CONSTRAINTS.contains(&key.as_str()) {
                if !self.dialect.enforces(&key, value) {
                    moved.push(format!("{key}: {value}"));
                    map.remove(&key);
                }
            } else {
                return Err(format!(
                    "`{path}` uses `{key}`, which {rule} does not take; leave it out or make the schema not strict"
                ));
            }
        }
        if !moved.is_empty() {
            let note = format!("{{{}}}", moved.join(", "));
            let text = match map.get("description").and_then(Value::as_str) {
                Some(d) if !d.is_empty() => format!("{d}\n\n{note}"),
                _ => note,
            };
            map.insert("description".into(), Value::String(text));
        }
        // Anthropic takes one type per schema.
        if self.dialect == Dialect::Anthropic {
            if let Some(Value::Array(types)) = map.get("type").cloned() {
                if types.len() == 1 {
                    map.insert("type".into(), types[0].clone());
                } else if !map.contains_key("anyOf") {
                    map.remove("type");
                    let mut branches = Vec::new();
                    for t in types {
                        let mut branch = Map::new();
                        // Keep each type's own keywords with its branch.
                        if t == "object" {
                            for k in ["properties", "required", "additionalProperties"] {
                                if let Some(v) = map.remove(k) {
                                    branch.insert(k.into(), v);
                                }
                            }
                        }
                        if t == "array" {
                            for k in ["items", "minItems", "maxItems"] {
                                if let Some(v) = map.remove(k) {
                                    branch.insert(k.into(), v);
                                }
                            }
                        }
                        if t == "string" {
                            for k in ["pattern", "format"] {
                                if let Some(v) = map.remove(k) {
                                    branch.insert(k.into(), v);
                                }
                            }
                        }
                        branch.insert("type".into(), t);
                        branches.push(Value::Object(branch));
                    }
                    map.insert("anyOf".into(), Value::Array(branches));
                    return self.node(node, path);
                }
            }
        }
        let types: Vec<String> = match map.get("type") {
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        if types.is_empty() && !map.contains_key("anyOf") && !map.contains_key("enum") {
            return Err(format!(
                "`{path}` accepts any JSON value, which {rule} cannot express; give it a type"
            ));
        }
        if types.iter().any(|t| t == "object") || map.contains_key("properties") {
            self.object(map, path)?;
        }
        if types.iter().any(|t| t == "array") {
            match map.get_mut("items") {
                Some(items) => self.node(items, &format!("{path}[]"))?,
                None => {
                    return Err(format!(
                        "`{path}` is a list of any JSON values, which {rule} cannot express; give its items a type"
                    ))
                }
            }
        }
        if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
            for branch in branches.iter_mut() {
                self.node(branch, path)?;
            }
        }
        Ok(())
    }

    /// An object's properties, all closed and (for OpenAI) all required.
    fn object(&self, map: &mut Map<String, Value>, path: &str) -> Result<(), String> {
        let rule = self.dialect.name();
        match map.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(_) => {
                let what = if map
                    .get("properties")
                    .is_some_and(|p| p.as_object().is_some_and(|p| !p.is_empty()))
                {
                    "takes keys beyond its properties (`additionalProperties`, a flattened map)"
                } else {
                    "is a free-form map (`additionalProperties`: a `HashMap` or JSON object)"
                };
                return Err(format!(
                    "`{path}` {what}, which {rule} cannot express (every key must be named); use a list of key-value structs or make the schema not strict"
                ));
            }
        }
        map.insert("additionalProperties".into(), Value::Bool(false));
        let mut names = Vec::new();
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                self.node(property, &format!("{path}.{name}"))?;
                names.push(Value::String(name.clone()));
            }
        } else {
            map.insert("properties".into(), Value::Object(Map::new()));
        }
        if self.dialect == Dialect::OpenAi {
            map.insert("required".into(), Value::Array(names));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn openai(schema: Value) -> Result<Value, String> {
        strict_schema(&schema, Dialect::OpenAi)
    }

    fn anthropic(schema: Value) -> Result<Value, String> {
        strict_schema(&schema, Dialect::Anthropic)
    }

    #[test]
    fn objects_are_closed_and_required() {
        let schema = json!({
            "title": "Answer",
            "type": "object",
            "properties": {
                "city": {"type": "string", "default": "Paris"},
                "note": {"type": ["string", "null"]},
                "count": {"type": "integer", "format": "uint32", "minimum": 0},
            },
            "required": ["city"],
        });
        let strict = openai(schema.clone()).unwrap();
        assert_eq!(strict["additionalProperties"], false);
        assert_eq!(strict["required"], json!(["city", "count", "note"]));
        assert_eq!(strict["properties"]["city"], json!({"type": "string"}));
        assert_eq!(
            strict["properties"]["count"],
            json!({"type": "integer", "minimum": 0})
        );
        let strict = anthropic(schema).unwrap();
        assert_eq!(strict["required"], json!(["city"]));
        assert_eq!(
            strict["properties"]["note"],
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        );
        assert_eq!(
            strict["properties"]["count"],
            json!({"type": "integer", "description": "{minimum: 0}"})
        );
    }

    #[test]
    fn what_cannot_be_expressed_is_an_error() {
        let map = json!({"title": "Scores", "type": "object", "properties": {
            "by_name": {"type": "object", "additionalProperties": {"type": "integer"}}}});
        assert_eq!(
            openai(map).unwrap_err(),
            "`Scores.by_name` is a free-form map (`additionalProperties`: a `HashMap` or JSON object), which OpenAI's strict mode cannot express (every key must be named); use a list of key-value structs or make the schema not strict"
        );
        let any = json!({"type": "object", "properties": {"raw": true}});
        assert!(openai(any)
            .unwrap_err()
            .contains("`schema.raw` accepts any JSON value"));
        let root = json!({"title": "Choice", "oneOf": [{"type": "string"}]});
        assert!(openai(root)
            .unwrap_err()
            .contains("the root of `Choice` is not an object"));
        let recursive = json!({"title": "Tree", "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}});
        assert!(openai(recursive.clone()).is_ok(), "OpenAI takes recursion");
        assert!(anthropic(recursive)
            .unwrap_err()
            .contains("`Node` is recursive"));
        let tuple = json!({"type": "object", "properties": {"pair": {"type": "array", "prefixItems": [{"type": "integer"}]}}});
        assert!(openai(tuple).unwrap_err().contains("is a tuple"));
    }
}
