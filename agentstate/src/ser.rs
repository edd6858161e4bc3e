//! What the `Serialize` that `#[derive(AgentState)]` generates for a non-generic state's update
//! and its Overwrites calls: it writes what serde's derive wrote for them (the same calls on the
//! serializer, so the same output in every format), with the per-field code here, compiled
//! once, instead of in every state.

use serde::ser::{self, Impossible, Serialize, SerializeMap, SerializeStruct, Serializer};

/// An update's entry `key` when `value` is set, as serde's derive writes a field with
/// `skip_serializing_if = "Option::is_none"` into a map (the `Option` itself, so
/// `serialize_some`).
#[inline]
pub fn serialize_entry<M: SerializeMap, T: Serialize>(
    map: &mut M,
    key: &'static str,
    value: &Option<T>,
) -> Result<(), M::Error> {
    match value {
        Some(_) => map.serialize_entry(key, value),
        None => Ok(()),
    }
}

/// An Overwrites' field `key` of a struct: the value when set, else `skip_field`, as serde's
/// derive writes a field with `skip_serializing_if = "Option::is_none"`.
#[inline]
pub fn serialize_field<S: SerializeStruct, T: Serialize>(
    state: &mut S,
    key: &'static str,
    value: &Option<T>,
) -> Result<(), S::Error> {
    match value {
        Some(_) => state.serialize_field(key, value),
        None => state.skip_field(key),
    }
}

/// `value` (a base state's update) flattened into `map`, as serde's `#[serde(flatten)]` writes
/// it: a map's or a struct's entries go into `map`. (An enum's tuple or struct variant, which
/// serde buffers, is refused: an update is a struct.)
#[inline]
pub fn serialize_flattened<M: SerializeMap, T: ?Sized + Serialize>(
    map: &mut M,
    value: &T,
) -> Result<(), M::Error> {
    value.serialize(Flatten(map))
}

/// The serializer of [`serialize_flattened`]: the entries of a map or struct into the outer map.
struct Flatten<'a, M>(&'a mut M);

fn not_flat<E: ser::Error>(what: &str) -> E {
    E::custom(format_args!(
        "can only flatten structs and maps (got {what})"
    ))
}

/// The entries of a flattened map or struct, written into the outer map.
struct FlattenEntries<'a, M>(&'a mut M);

impl<M: SerializeMap> SerializeMap for FlattenEntries<'_, M> {
    type Ok = ();
    type Error = M::Error;

    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), M::Error> {
        self.0.serialize_key(key)
    }

    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), M::Error> {
        self.0.serialize_value(value)
    }

    fn serialize_entry<K: ?Sized + Serialize, V: ?Sized + Serialize>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), M::Error> {
        self.0.serialize_entry(key, value)
    }

    fn end(self) -> Result<(), M::Error> {
        Ok(())
    }
}

impl<M: SerializeMap> SerializeStruct for FlattenEntries<'_, M> {
    type Ok = ();
    type Error = M::Error;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), M::Error> {
        self.0.serialize_entry(key, value)
    }

    fn end(self) -> Result<(), M::Error> {
        Ok(())
    }
}

impl<'a, M: SerializeMap> Serializer for Flatten<'a, M> {
    type Ok = ();
    type Error = M::Error;
    type SerializeSeq = Impossible<(), M::Error>;
    type SerializeTuple = Impossible<(), M::Error>;
    type SerializeTupleStruct = Impossible<(), M::Error>;
    type SerializeMap = FlattenEntries<'a, M>;
    type SerializeStruct = FlattenEntries<'a, M>;
    type SerializeTupleVariant = Impossible<(), M::Error>;
    type SerializeStructVariant = Impossible<(), M::Error>;

    fn serialize_bool(self, _: bool) -> Result<(), M::Error> {
        Err(not_flat("a boolean"))
    }
    fn serialize_i8(self, _: i8) -> Result<(), M::Error> {
        Err(not_flat("an integer"))
    }
    fn serialize_i16(self, _: i16) -> Result<(), M::Error> {
        Err(not_flat("an integer"))
    }
    fn serialize_i32(self, _: i32) -> Result<(), M::Error> {
        Err(not_flat("an integer"))
    }
    fn serialize_i64(self, _: i64) -> Result<(), M::Error> {
        Err(not_flat("an integer"))
    }
    fn serialize_u8(self, _: u8) -> Result<(), M::Error> {
        Err(not_flat("an integer"))
    }
    fn serialize_u16(self, _: u16) -> Result<(), M::Error> {
        Err(not_flat("an integer"))
    }
    fn serialize_u32(self, _: u32) -> Result<(), M::Error> {
        Err(not_flat("an integer"))
    }
    fn serialize_u64(self, _: u64) -> Result<(), M::Error> {
        Err(not_flat("an integer"))
    }
    fn serialize_f32(self, _: f32) -> Result<(), M::Error> {
        Err(not_flat("a float"))
    }
    fn serialize_f64(self, _: f64) -> Result<(), M::Error> {
        Err(not_flat("a float"))
    }
    fn serialize_char(self, _: char) -> Result<(), M::Error> {
        Err(not_flat("a char"))
    }
    fn serialize_str(self, _: &str) -> Result<(), M::Error> {
        Err(not_flat("a string"))
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), M::Error> {
        Err(not_flat("a byte array"))
    }
    fn serialize_none(self) -> Result<(), M::Error> {
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), M::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), M::Error> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), M::Error> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), M::Error> {
        self.0.serialize_entry(variant, &())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), M::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), M::Error> {
        self.0.serialize_entry(variant, value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, M::Error> {
        Err(not_flat("a sequence"))
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, M::Error> {
        Err(not_flat("a tuple"))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, M::Error> {
        Err(not_flat("a tuple struct"))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, M::Error> {
        Err(not_flat("a tuple variant"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, M::Error> {
        Ok(FlattenEntries(self.0))
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, M::Error> {
        Ok(FlattenEntries(self.0))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, M::Error> {
        Err(not_flat("a struct variant"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// An outer map with `value` flattened into it, as JSON.
    fn flattened<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
        struct Outer<'a, T>(&'a T);
        impl<T: Serialize> Serialize for Outer<'_, T> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(None)?;
                map.serialize_entry("own", &1)?;
                serialize_flattened(&mut map, self.0)?;
                map.end()
            }
        }
        serde_json::to_string(&Outer(value))
    }

    #[test]
    fn flattens_maps_structs_and_options_and_refuses_scalars() {
        let map = BTreeMap::from([("a", 2), ("b", 3)]);
        assert_eq!(flattened(&map).unwrap(), r#"{"own":1,"a":2,"b":3}"#);
        assert_eq!(flattened(&Some(&map)).unwrap(), r#"{"own":1,"a":2,"b":3}"#);
        assert_eq!(flattened(&None::<u8>).unwrap(), r#"{"own":1}"#);
        assert_eq!(flattened(&()).unwrap(), r#"{"own":1}"#);
        let error = flattened(&5).unwrap_err().to_string();
        assert_eq!(error, "can only flatten structs and maps (got an integer)");
        let error = flattened(&vec![1]).unwrap_err().to_string();
        assert_eq!(error, "can only flatten structs and maps (got a sequence)");
    }
}
