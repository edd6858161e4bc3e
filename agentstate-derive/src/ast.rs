//! The model the derive works on: a struct, its fields, and how each field merges.

use proc_macro2::{Span, TokenStream};
use syn::{Generics, Ident, Path, Type, Visibility};

/// A `#[derive(AgentState)]` struct, parsed.
pub struct Input<'a> {
    pub ident: &'a Ident,
    pub vis: &'a Visibility,
    pub generics: &'a Generics,
    /// The update type's name (`<Name>Update` unless `#[agent_state(update = ...)]`).
    pub update: Ident,
    /// The runtime crate's path (`::agentstate` unless `#[agent_state(crate = ...)]`).
    pub krate: TokenStream,
    /// The field that receives messages (`#[agent_state(messages = field)]`, or by default the
    /// one `add_messages` field of a `Vec<Message>` or `MessageList`, see
    /// `check::default_messages`).
    pub messages: Option<Ident>,
    /// `#[agent_state(deserialize)]`: the derive generates the struct's `Deserialize`.
    pub deserialize: Option<Deserialize>,
    /// `#[agent_state(extensible)]`: other states may extend this one (`#[agent_state(base)]`);
    /// the derive implements `Extensible` and, on a non-generic struct, generates the setters
    /// trait of its update, `<Update>Setters`.
    pub extensible: bool,
    /// `#[agent_state(version = N)]`: the schema version the state declares.
    pub version: Option<u32>,
    pub fields: Vec<Field<'a>>,
}

/// What the generated `Deserialize` needs from the struct's serde attributes.
pub struct Deserialize {
    /// `#[serde(default)]` or `#[serde(default = "path")]` on the struct.
    pub default: Option<DefaultValue>,
    /// `#[serde(deny_unknown_fields)]`.
    pub deny_unknown_fields: bool,
    /// The struct's serde name (`#[serde(rename = "...")]`, or its own).
    pub name: String,
    /// What serde's errors say was expected: `struct Name`, or `#[serde(expecting = "...")]`.
    pub expecting: String,
}

/// serde's `default` (a field's or the struct's): `Default::default()` or a function.
pub enum DefaultValue {
    Trait,
    Path(Path),
}

/// One named field.
pub struct Field<'a> {
    pub ident: &'a Ident,
    pub ty: &'a Type,
    /// `ty` as tokens, made once: each place the expansion writes the type clones this (a
    /// handle), instead of printing the type again.
    pub tokens: TokenStream,
    /// The field's JSON key (after `rename` / `rename_all`).
    pub json_name: String,
    pub role: Role,
    /// `#[serde(default)]` / `#[serde(default = "path")]` (read under `#[agent_state(deserialize)]`).
    pub default: Option<DefaultValue>,
    /// `#[serde(skip)]` / `#[serde(skip_deserializing)]` (read under `#[agent_state(deserialize)]`).
    pub skip_deserializing: bool,
}

/// How a field takes part in merges.
#[allow(clippy::large_enum_variant)] // built once per field, at compile time
pub enum Role {
    /// Merged by a reducer.
    Reduced(Reducer),
    /// The base state this struct extends (`#[agent_state(base)]`).
    Base,
    /// Never touched by updates (`#[agent_state(skip)]`).
    Skip,
}

/// A reducer declared on a field.
pub struct Reducer {
    /// The reducer's name as written (or `last_write_wins` for a field without attribute).
    pub name: String,
    /// Where the declaration is, for spans of errors in generated code.
    pub span: Span,
    pub kind: Kind,
}

/// The reducers the derive knows, with their checked parameters.
#[allow(clippy::large_enum_variant)] // built once per field, at compile time
pub enum Kind {
    LastWriteWins,
    ReplaceValue,
    Append,
    Merge,
    ConcatFlatten,
    MergeAll,
    AddMessages,
    ReplaceMessages,
    AppendItems,
    UpsertMessages,
    Add,
    BoundedAppend(MaxLen),
    DedupeAppend(Option<Key>),
    MergeByKey(Key),
    Nested,
    With {
        function: Path,
        update: Option<Type>,
        idempotent: bool,
    },
}

/// `bounded_append`'s bound: a literal checked by the macro, or a const checked by the compiler.
pub enum MaxLen {
    Literal(u64),
    Const(Path),
}

/// A key of `dedupe_append` / `merge_by_key`.
pub enum Key {
    /// `key = id`: a field of the item, borrowed.
    Field(Ident),
    /// `key = path::to::function` or `key = |item| ...`: tokens carried through unparsed, so
    /// closures need no `full` syn; the key is returned by value.
    Function(TokenStream),
}

impl Key {
    /// How the key shows in the schema.
    pub fn label(&self) -> String {
        match self {
            Key::Field(ident) => ident.to_string(),
            Key::Function(tokens) => tokens.to_string(),
        }
    }
}
