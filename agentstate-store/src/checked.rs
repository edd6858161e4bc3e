//! Reading a typed update in one pass while refusing top-level keys that are not fields of its
//! state: a deserializer that wraps another and checks each key of the outer object as it goes
//! by, so a journal entry is parsed once (a separate pass over its keys would parse it twice).

use agentstate::OVERWRITE_SUFFIX;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use std::fmt;

/// Deserializes a `T` (a struct read from a JSON object) from `inner`, failing on an outer key
/// that is not in `fields` (nor a field's Overwrite, `field.__overwrite__`).
pub(crate) fn deserialize<'de, T, D>(
    inner: D,
    fields: &'static [&'static str],
) -> Result<T, D::Error>
where
    T: de::Deserialize<'de>,
    D: Deserializer<'de>,
{
    T::deserialize(Checked { inner, fields })
}

fn check<E: de::Error>(key: &str, fields: &[&str]) -> Result<(), E> {
    let field = key.strip_suffix(OVERWRITE_SUFFIX).unwrap_or(key);
    if fields.contains(&field) {
        Ok(())
    } else {
        Err(E::custom(format_args!(
            "field `{field}` is not a field of this state"
        )))
    }
}

/// The outer value: its map's keys are checked.
struct Checked<D> {
    inner: D,
    fields: &'static [&'static str],
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Checked<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let fields = self.fields;
        self.inner.deserialize_any(MapVisitor { visitor, fields })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let fields = self.fields;
        self.inner.deserialize_map(MapVisitor { visitor, fields })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        struct_fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let fields = self.fields;
        self.inner
            .deserialize_struct(name, struct_fields, MapVisitor { visitor, fields })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct enum identifier ignored_any
    }
}

/// Accepts only a map (an update is a JSON object), whose keys it checks.
struct MapVisitor<V> {
    visitor: V,
    fields: &'static [&'static str],
}

impl<'de, V: Visitor<'de>> Visitor<'de> for MapVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(CheckedMap {
            map,
            fields: self.fields,
        })
    }
}

struct CheckedMap<A> {
    map: A,
    fields: &'static [&'static str],
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for CheckedMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.map.next_key_seed(KeySeed {
            seed,
            fields: self.fields,
        })
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// A key: whatever deserializes it sees its string after the check.
struct KeySeed<K> {
    seed: K,
    fields: &'static [&'static str],
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, inner: D) -> Result<K::Value, D::Error> {
        self.seed.deserialize(KeyDeserializer {
            inner,
            fields: self.fields,
        })
    }
}

struct KeyDeserializer<D> {
    inner: D,
    fields: &'static [&'static str],
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDeserializer<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let fields = self.fields;
        self.inner.deserialize_any(KeyVisitor { visitor, fields })
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let fields = self.fields;
        self.inner
            .deserialize_identifier(KeyVisitor { visitor, fields })
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let fields = self.fields;
        self.inner.deserialize_str(KeyVisitor { visitor, fields })
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let fields = self.fields;
        self.inner
            .deserialize_string(KeyVisitor { visitor, fields })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum ignored_any
    }
}

/// Checks a key's string, then hands it on.
struct KeyVisitor<V> {
    visitor: V,
    fields: &'static [&'static str],
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        check(v, self.fields)?;
        self.visitor.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        check(v, self.fields)?;
        self.visitor.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        check(&v, self.fields)?;
        self.visitor.visit_string(v)
    }
}

#[cfg(test)]
mod tests {
    use super::deserialize;

    #[derive(serde::Deserialize, Debug, PartialEq, Default)]
    #[serde(default)]
    struct Update {
        a: Option<u32>,
        #[serde(rename = "a.__overwrite__")]
        a_overwrite: Option<u32>,
        b: Option<Vec<String>>,
    }

    fn read(json: &str) -> Result<Update, String> {
        let mut de = serde_json::Deserializer::from_str(json);
        deserialize::<Update, _>(&mut de, &["a", "b"])
            .and_then(|u| de.end().map(|()| u))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn known_keys_read_in_one_pass_and_unknown_ones_are_named() {
        assert_eq!(
            read(r#"{"a": 1, "b": ["x"], "a.__overwrite__": 2}"#).unwrap(),
            Update {
                a: Some(1),
                a_overwrite: Some(2),
                b: Some(vec!["x".into()])
            }
        );
        let err = read(r#"{"a": 1, "lgo": {"deep": [1]}}"#).unwrap_err();
        assert!(
            err.contains("field `lgo` is not a field of this state"),
            "{err}"
        );
        // Only the outer keys are checked; a value's own keys are its type's business.
        assert!(read(r#"[1]"#).is_err());
        assert!(read(r#"{"a": 1} x"#).is_err());
    }

    /// An extension's update flattens its base's: serde reads it through a map of buffered
    /// keys, which are checked too.
    #[test]
    fn a_flattened_base_is_checked_too() {
        #[derive(serde::Deserialize, Debug, PartialEq, Default)]
        #[serde(default)]
        struct Base {
            a: Option<u32>,
        }
        #[derive(serde::Deserialize, Debug, PartialEq, Default)]
        #[serde(default)]
        struct Ext {
            #[serde(flatten)]
            base: Base,
            c: Option<u32>,
        }
        let read = |json: &str| {
            let mut de = serde_json::Deserializer::from_str(json);
            deserialize::<Ext, _>(&mut de, &["a", "c"]).map_err(|e| e.to_string())
        };
        assert_eq!(
            read(r#"{"a": 1, "c": 2}"#).unwrap(),
            Ext {
                base: Base { a: Some(1) },
                c: Some(2)
            }
        );
        let err = read(r#"{"a": 1, "x": 2}"#).unwrap_err();
        assert!(err.contains("field `x`"), "{err}");
    }
}
