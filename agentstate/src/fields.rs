//! What the code of `#[derive(AgentState)]` runs on: a derived state's fields as *field lists*.
//!
//! The generated impls do not spell out per-field code for each operation. They hand this
//! module a tuple with one element per field (a *leaf*: the field's name, reducer and the
//! values involved), in declaration order, and the work (planning a merge, applying it,
//! composing two updates, writing, reading, comparing and printing an update's entries,
//! describing the schema) is done here by the traits below, implemented for the leaves and for
//! tuples of up to 12 field lists (a state with more fields nests them). Written once here,
//! this code is type-checked once, in this crate, instead of once per state in the user's
//! crate: what keeps a crate of many derived states quick to rebuild (`benches/compile_time.sh`).
//!
//! The leaves of `plan` and `compose` borrow the update's slots and take each entry from its
//! slot before anything can fail, so when planning (or composing) succeeds the update holds
//! only `None`s (a base's part its default): the generated code forgets it instead of dropping
//! it, which a merge would otherwise pay for. On an error it is dropped as usual.
//!
//! Not a stable API: only the derive's generated code uses it, through `__private`.

use crate::error::Error;

/// Forgets an update that planning or composing emptied (see the module doc):
/// `core::mem::forget` behind a function, so that clippy's `forget_non_drop` does not fire in
/// the user's crate on a state whose update holds no value with drop glue.
#[inline(always)]
pub fn forget<T>(emptied: T) {
    core::mem::forget(emptied)
}
use crate::keys::{KeyRef, KeyType};
use crate::reducers::{Merges, Reducer};
use crate::schema::FieldSchema;
use crate::state::State;
use crate::update::{
    apply_field, apply_nested, compose_field, compose_nested, compose_with, plan_field,
    plan_nested, Combine, FieldPlan,
};
use serde::de::MapAccess;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// What every field an update can carry needs: the update stores it, compares, clones,
/// prints and (de)serializes it. `#[derive(AgentState)]` requires it per field, on the field.
///
/// Its methods are the traits' methods that the leaves of this module use: the generated impls
/// state `T: FieldValue` (the requirement reported once, at the field) rather than each trait,
/// so a type missing one is not reported again by every impl that would use it.
#[diagnostic::on_unimplemented(
    message = "the field type `{Self}` must implement Clone, PartialEq, Debug, Serialize and Deserialize",
    label = "a field that updates can carry must be Clone + PartialEq + Debug + Serialize + Deserialize",
    note = "derive the missing traits on `{Self}`, or mark the field #[agent_state(skip)] if updates never touch it"
)]
pub trait FieldValue {
    /// `PartialEq::eq`.
    fn field_eq(&self, other: &Self) -> bool;
    /// `Serialize::serialize`.
    fn field_serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error>;
    /// `Deserialize::deserialize`.
    fn field_deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, D::Error>
    where
        Self: Sized;
    /// `Debug::fmt`.
    fn field_fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result;
    /// `Clone::clone`.
    fn field_clone(&self) -> Self
    where
        Self: Sized;
}

// Not looked through: a type missing several of the traits is one error, under the message.
#[diagnostic::do_not_recommend]
impl<T> FieldValue for T
where
    T: Clone + PartialEq + core::fmt::Debug + Serialize + serde::de::DeserializeOwned,
{
    #[inline]
    fn field_eq(&self, other: &Self) -> bool {
        self == other
    }
    #[inline]
    fn field_serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.serialize(serializer)
    }
    #[inline]
    fn field_deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, D::Error> {
        T::deserialize(deserializer)
    }
    #[inline]
    fn field_fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
    #[inline]
    fn field_clone(&self) -> Self {
        self.clone()
    }
}

/// An update's entry cloned through [`FieldValue`] (its `Clone`).
#[inline]
pub fn clone<T: FieldValue>(entry: &Option<T>) -> Option<T> {
    entry.as_ref().map(T::field_clone)
}

/// That a reducer `Self` merges a field of type `T` with updates of type `U`: what the
/// generated `State` impl requires of each field, at the field.
#[diagnostic::on_unimplemented(
    message = "the reducer `{Self}` cannot merge into a field of type `{T}`",
    label = "`{Self}` does not merge into `{T}`",
    note = "the agentstate::reducers docs list the field types each reducer accepts"
)]
pub trait Fits<T, U = T>: Reducer<T> + Merges<T, Update = U> {}

#[diagnostic::do_not_recommend]
impl<R: Reducer<T> + Merges<T, Update = U>, T, U> Fits<T, U> for R {}

/// [`Fits`] for a reducer whose key function's type cannot be written (`MergeByKey<()>`): only
/// the types, through [`Merges`].
#[diagnostic::on_unimplemented(
    message = "the reducer `{Self}` cannot merge into a field of type `{T}`",
    label = "`{Self}` does not merge into `{T}`",
    note = "the agentstate::reducers docs list the field types each reducer accepts"
)]
pub trait FitsTypes<T, U = T>: Merges<T, Update = U> {}

#[diagnostic::do_not_recommend]
impl<R: Merges<T, Update = U>, T, U> FitsTypes<T, U> for R {}

/// A field's plan, as the generated `State::Plan` names it.
pub type PlanOf<T, R> = FieldPlan<T, <R as Merges<T>>::Plan>;

// ---------------------------------------------------------------------------------------------
// Planning

/// Field lists that plan a merge (`State::plan`): everything that can fail, reading only.
pub trait Plans {
    /// The plans, in the list's shape.
    type Plan;
    /// Plans every field, stopping at the first error (nothing has changed then).
    fn plan(self) -> Result<Self::Plan, Error>;
}

/// A reduced field to plan: its name, reducer, current value, and the update's Overwrite and
/// entry, taken from their slots (borrowing the slots rather than moving the values into the
/// list spares a merge a copy of every field's entries).
pub struct Plan<'a, T, R: Merges<T>>(
    pub &'static str,
    pub R,
    pub &'a T,
    pub &'a mut Option<T>,
    pub &'a mut Option<R::Update>,
);

impl<T, R: Reducer<T>> Plans for Plan<'_, T, R> {
    type Plan = FieldPlan<T, R::Plan>;
    #[inline]
    fn plan(self) -> Result<Self::Plan, Error> {
        plan_field(self.0, &self.1, self.2, self.3.take(), self.4.take())
    }
}

/// A nested state field (`#[reducer(nested)]`) to plan.
pub struct PlanNested<'a, S: State>(
    pub &'static str,
    pub &'a S,
    pub &'a mut Option<S>,
    pub &'a mut Option<S::Update>,
);

impl<S: State> Plans for PlanNested<'_, S> {
    type Plan = FieldPlan<S, S::Plan>;
    #[inline]
    fn plan(self) -> Result<Self::Plan, Error> {
        plan_nested(self.0, self.1, self.2.take(), self.3.take())
    }
}

/// The base state (`#[agent_state(base)]`) to plan with its part of the update, planned where
/// it lies ([`State::plan_in`]: a base's part is large, and copying it out costs a merge).
pub struct PlanBase<'a, S: State>(pub &'a S, pub &'a mut S::Update);

impl<S: State> Plans for PlanBase<'_, S> {
    type Plan = S::Plan;
    #[inline]
    fn plan(self) -> Result<Self::Plan, Error> {
        self.0.plan_in(self.1)
    }
}

// ---------------------------------------------------------------------------------------------
// Applying

/// Field lists that apply a plan (`State::apply`); cannot fail.
pub trait Applies<P> {
    /// Applies each field's plan.
    fn apply(self, plan: P);
}

/// A reduced field to apply its plan to: its reducer and the field.
pub struct Apply<'a, T, R>(pub R, pub &'a mut T);

impl<T, R: Reducer<T>> Applies<FieldPlan<T, R::Plan>> for Apply<'_, T, R> {
    #[inline]
    fn apply(self, plan: FieldPlan<T, R::Plan>) {
        apply_field(&self.0, self.1, plan)
    }
}

/// A nested state field to apply its plan to.
pub struct ApplyNested<'a, S>(pub &'a mut S);

impl<S: State> Applies<FieldPlan<S, S::Plan>> for ApplyNested<'_, S> {
    #[inline]
    fn apply(self, plan: FieldPlan<S, S::Plan>) {
        apply_nested(self.0, plan)
    }
}

/// The base state to apply its plan to.
pub struct ApplyBase<'a, S>(pub &'a mut S);

impl<S: State> Applies<S::Plan> for ApplyBase<'_, S> {
    #[inline]
    fn apply(self, plan: S::Plan) {
        self.0.apply(plan)
    }
}

// ---------------------------------------------------------------------------------------------
// Composing

/// Field lists that combine a second update's entries into the first's (`State::compose`).
pub trait Composes {
    /// Combines each field's entries into the first update's.
    fn compose(self, how: Combine) -> Result<(), Error>;
}

/// A reduced field's entries to combine: its name, reducer, whether it is a last-value field
/// (which strict fan-in refuses to combine), the first update's Overwrite and entry (where
/// the result goes), then the second's (taken from it).
pub struct Compose<'a, T, R: Merges<T>>(
    pub &'static str,
    pub R,
    pub bool,
    pub &'a mut Option<T>,
    pub &'a mut Option<R::Update>,
    pub &'a mut Option<T>,
    pub &'a mut Option<R::Update>,
);

impl<T, R: Reducer<T>> Composes for Compose<'_, T, R> {
    #[inline]
    fn compose(self, how: Combine) -> Result<(), Error> {
        let Compose(name, reducer, last_value, ow, entry, ow2, entry2) = self;
        let (o, u) = compose_field(
            name,
            reducer.name(),
            last_value,
            how,
            (ow.take(), entry.take()),
            (ow2.take(), entry2.take()),
            compose_with(name, &reducer),
        )?;
        (*ow, *entry) = (o, u);
        Ok(())
    }
}

/// A nested state field's entries to combine.
pub struct ComposeNested<'a, S: State>(
    pub &'static str,
    pub &'a mut Option<S>,
    pub &'a mut Option<S::Update>,
    pub &'a mut Option<S>,
    pub &'a mut Option<S::Update>,
);

impl<S: State> Composes for ComposeNested<'_, S> {
    #[inline]
    fn compose(self, how: Combine) -> Result<(), Error> {
        let ComposeNested(name, ow, entry, ow2, entry2) = self;
        let (o, u) = compose_field(
            name,
            "nested",
            false,
            how,
            (ow.take(), entry.take()),
            (ow2.take(), entry2.take()),
            compose_nested::<S>(name, how),
        )?;
        (*ow, *entry) = (o, u);
        Ok(())
    }
}

/// The base state's parts of the two updates to combine.
pub struct ComposeBase<'a, S: State>(pub &'a mut S::Update, pub &'a mut S::Update);

impl<S: State> Composes for ComposeBase<'_, S> {
    #[inline]
    fn compose(self, how: Combine) -> Result<(), Error> {
        *self.0 = S::compose(core::mem::take(self.0), core::mem::take(self.1), how)?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Schema

/// Field lists that describe the state's fields (`State::schema`).
pub trait Describes {
    /// Pushes each field's schema, in order.
    fn describe(self, fields: &mut Vec<FieldSchema>);
}

/// A reduced field to describe: its name and reducer.
pub struct Describe<R>(pub &'static str, pub R);

impl<R: crate::reducers::ReducerInfo> Describes for Describe<R> {
    #[inline]
    fn describe(self, fields: &mut Vec<FieldSchema>) {
        fields.push(FieldSchema::of(self.0, &self.1));
    }
}

/// A nested state field to describe.
pub struct DescribeNested<S>(pub &'static str, pub core::marker::PhantomData<S>);

impl<S: State> Describes for DescribeNested<S> {
    #[inline]
    fn describe(self, fields: &mut Vec<FieldSchema>) {
        fields.push(FieldSchema::nested::<S>(self.0));
    }
}

/// The base state to describe: its fields (first in the list).
pub struct DescribeBase<S>(pub core::marker::PhantomData<S>);

impl<S: State> Describes for DescribeBase<S> {
    #[inline]
    fn describe(self, fields: &mut Vec<FieldSchema>) {
        fields.extend(S::schema().into_fields());
    }
}

/// The schema of the fields `list` describes.
#[inline]
pub fn schema<L: Describes>(list: L) -> crate::schema::Schema {
    let mut fields = Vec::new();
    list.describe(&mut fields);
    crate::schema::Schema::describe(fields)
}

// ---------------------------------------------------------------------------------------------
// An update's entries: writing, reading, comparing

/// What the derive implements for a state's update, stating its fields' [`FieldValue`]
/// requirements: its entries, which its `Serialize` writes, its `PartialEq` compares and its
/// `Debug` prints, and its slots, which its `Deserialize` reads keys into (and the update of a
/// state extending this one, for its base's part).
pub trait UpdateFields: Default {
    /// The entries as a field list: each own entry's JSON key and value and the base's part, in
    /// the fields' order, then the Overwrites'.
    fn entries(&self) -> impl Entries + '_;
    /// The slots that keys are read into, as a field list: each own entry's and Overwrite's
    /// JSON key and slot, then the base's part's slots. Made once for an update's object, then
    /// offered each key.
    fn slots(&mut self) -> impl Reads + '_;
}

/// Field lists of an update's entries: written (its `Serialize`), compared (its `PartialEq`)
/// and printed (its `Debug`). One trait rather than three, so that the bounds of the generated
/// `entries()` are one obligation per entry, not three.
pub trait Entries {
    /// Writes the entries that are set into `map`.
    fn write<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error>;
    /// Whether each entry equals the other list's.
    fn eq(&self, other: &Self) -> bool;
    /// Adds each entry that is set to `out`.
    fn print(&self, out: &mut core::fmt::DebugStruct<'_, '_>);
}

/// An update's entry: its JSON key and value, written when set.
///
/// Written as serde's derive writes a field with `skip_serializing_if = "Option::is_none"` into
/// a map (the `Option` itself, so the serializer sees `serialize_some`): the same calls, so the
/// same output in every format.
impl<T: FieldValue> Entries for (&'static str, &Option<T>) {
    #[inline]
    fn write<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        match self.1 {
            Some(value) => map.serialize_entry(self.0, &Some(AsField(value))),
            None => Ok(()),
        }
    }
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        match (self.1, other.1) {
            (Some(a), Some(b)) => a.field_eq(b),
            (None, None) => true,
            _ => false,
        }
    }
    #[inline]
    fn print(&self, out: &mut core::fmt::DebugStruct<'_, '_>) {
        if let Some(value) = self.1 {
            out.field(self.0, &AsDebug(value));
        }
    }
}

/// A base's part of the update, flattened into the update's entries.
pub struct Base<'a, U>(pub &'a U);

impl<U: UpdateFields> Entries for Base<'_, U> {
    #[inline]
    fn write<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        self.0.entries().write(map)
    }
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        eq_updates(self.0, other.0)
    }
    #[inline]
    fn print(&self, out: &mut core::fmt::DebugStruct<'_, '_>) {
        self.0.entries().print(out);
    }
}

/// An update's `Debug`: its name and the entries that are set (an Overwrite under its JSON key,
/// `field.__overwrite__`), not the `None` of every other field.
pub fn debug_update<U: UpdateFields>(
    update: &U,
    f: &mut core::fmt::Formatter<'_>,
    name: &str,
) -> core::fmt::Result {
    let mut out = f.debug_struct(name);
    update.entries().print(&mut out);
    out.finish()
}

/// A field value printed through [`FieldValue`].
struct AsDebug<'a, T>(&'a T);

impl<T: FieldValue> core::fmt::Debug for AsDebug<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.field_fmt(f)
    }
}

/// Whether two updates hold the same entries (their `PartialEq`).
#[inline]
pub fn eq_updates<U: UpdateFields>(a: &U, b: &U) -> bool {
    a.entries().eq(&b.entries())
}

/// A field value serialized through [`FieldValue`].
struct AsField<'a, T>(&'a T);

impl<T: FieldValue> Serialize for AsField<'_, T> {
    #[inline]
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.field_serialize(serializer)
    }
}

/// An update's `Serialize`: a map of the entries that are set, as serde's derive writes a struct
/// with a flattened field.
#[inline]
pub fn serialize_update<U: UpdateFields, S: Serializer>(
    update: &U,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(None)?;
    update.entries().write(&mut map)?;
    map.end()
}

/// Field lists that read an update's entry by its key.
pub trait Reads {
    /// Reads `key`'s value into the entry it names and returns `true`; `false` (reading
    /// nothing) if the key names no entry of the list.
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error>;
}

/// An update's entry to read: its JSON key and slot.
impl<T: FieldValue> Reads for (&'static str, &mut Option<T>) {
    /// Always inlined: the comparison with the entry's key, a constant there, compiles to a
    /// few instructions instead of a call to `memcmp` for every entry a key is offered to.
    #[inline(always)]
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        if key != self.0 {
            return Ok(false);
        }
        read_value(self.0, self.1, map)?;
        Ok(true)
    }
}

/// Reads the value of the entry `name` into its slot; a second value for it is serde's
/// "duplicate field".
#[inline]
fn read_value<'de, T: FieldValue, A: MapAccess<'de>>(
    name: &'static str,
    slot: &mut Option<T>,
    map: &mut A,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(serde::de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value_seed(FieldSeed(core::marker::PhantomData))?);
    Ok(())
}

/// A base's part of the update's slots (its own [`UpdateFields::slots`]), offered the keys no
/// entry of this update took.
pub struct BaseSlots<S>(pub S);

impl<S: Reads> Reads for BaseSlots<S> {
    #[inline]
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        self.0.read(key, map)
    }
}

/// The slots of a base's part of an update, for [`BaseSlots`].
#[inline]
pub fn base_slots<U: UpdateFields>(update: &mut U) -> BaseSlots<impl Reads + '_> {
    BaseSlots(update.slots())
}

/// The seed that reads a field value through [`FieldValue`].
struct FieldSeed<T>(core::marker::PhantomData<T>);

impl<'de, T: FieldValue> serde::de::DeserializeSeed<'de> for FieldSeed<T> {
    type Value = T;
    #[inline]
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        T::field_deserialize(deserializer)
    }
}

/// An update's `Deserialize`: a map, each key offered to the update's entries; unknown keys are
/// ignored (as serde's derive does; `from_json` refuses them before).
#[inline]
pub fn deserialize_update<'de, U: UpdateFields, D: serde::Deserializer<'de>>(
    deserializer: D,
    name: &'static str,
) -> Result<U, D::Error> {
    deserializer.deserialize_map(UpdateVisitor(name, core::marker::PhantomData))
}

struct UpdateVisitor<U>(&'static str, core::marker::PhantomData<U>);

impl<'de, U: UpdateFields> serde::de::Visitor<'de> for UpdateVisitor<U> {
    type Value = U;

    fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        write!(f, "struct {}", self.0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<U, A::Error> {
        let mut update = U::default();
        let mut slots = update.slots();
        while let Some(key) = map.next_key::<crate::state::FieldKey<'de>>()? {
            if !slots.read(&key.0, &mut map)? {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        drop(slots);
        Ok(update)
    }
}

// ---------------------------------------------------------------------------------------------
// Tuples

macro_rules! tuples {
    ($(($($name:ident $plan:ident $i:tt),+))+) => {$(
        impl<$($name: Plans),+> Plans for ($($name,)+) {
            type Plan = ($($name::Plan,)+);
            #[inline]
            fn plan(self) -> Result<Self::Plan, Error> {
                Ok(($(self.$i.plan()?,)+))
            }
        }

        impl<$($name: Applies<$plan>, $plan),+> Applies<($($plan,)+)> for ($($name,)+) {
            #[inline]
            fn apply(self, plan: ($($plan,)+)) {
                $(self.$i.apply(plan.$i);)+
            }
        }

        impl<$($name: Composes),+> Composes for ($($name,)+) {
            #[inline]
            fn compose(self, how: Combine) -> Result<(), Error> {
                $(self.$i.compose(how)?;)+
                Ok(())
            }
        }

        impl<$($name: Describes),+> Describes for ($($name,)+) {
            #[inline]
            fn describe(self, fields: &mut Vec<FieldSchema>) {
                $(self.$i.describe(fields);)+
            }
        }

        impl<$($name: Entries),+> Entries for ($($name,)+) {
            #[inline]
            fn write<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
                $(self.$i.write(map)?;)+
                Ok(())
            }
            #[inline]
            fn eq(&self, other: &Self) -> bool {
                true $(&& self.$i.eq(&other.$i))+
            }
            #[inline]
            fn print(&self, out: &mut core::fmt::DebugStruct<'_, '_>) {
                $(self.$i.print(out);)+
            }
        }

        impl<$($name: Reads),+> Reads for ($($name,)+) {
            #[inline]
            fn read<'de, Acc: MapAccess<'de>>(&mut self, key: &str, map: &mut Acc) -> Result<bool, Acc::Error> {
                $(if self.$i.read(key, map)? { return Ok(true); })+
                Ok(false)
            }
        }
    )+};
}

tuples! {
    (A0 P0 0)
    (A0 P0 0, A1 P1 1)
    (A0 P0 0, A1 P1 1, A2 P2 2)
    (A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3)
    (A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4)
    (A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5)
    (A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6)
    (A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7)
    (A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8)
    (A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8, A9 P9 9)
    (A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8, A9 P9 9, A10 P10 10)
    (A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8, A9 P9 9, A10 P10 10, A11 P11 11)
}

/// The empty list (a state without fields an update touches).
impl Plans for () {
    type Plan = ();
    #[inline]
    fn plan(self) -> Result<(), Error> {
        Ok(())
    }
}
impl Applies<()> for () {
    #[inline]
    fn apply(self, _: ()) {}
}
impl Composes for () {
    #[inline]
    fn compose(self, _: Combine) -> Result<(), Error> {
        Ok(())
    }
}
impl Describes for () {
    #[inline]
    fn describe(self, _: &mut Vec<FieldSchema>) {}
}
impl Entries for () {
    #[inline]
    fn write<M: SerializeMap>(&self, _: &mut M) -> Result<(), M::Error> {
        Ok(())
    }
    #[inline]
    fn eq(&self, _: &Self) -> bool {
        true
    }
    #[inline]
    fn print(&self, _: &mut core::fmt::DebugStruct<'_, '_>) {}
}
impl Reads for () {
    #[inline]
    fn read<'de, A: MapAccess<'de>>(&mut self, _: &str, _: &mut A) -> Result<bool, A::Error> {
        Ok(false)
    }
}

// ---------------------------------------------------------------------------------------------
// What else the generated code calls

/// The value a setter stores: `Some` of what it was given, converted.
#[inline]
pub fn set<T>(value: impl crate::update::IntoField<T>) -> Option<T> {
    Some(value.into_field())
}

/// The value a messages field's setter stores: converted, and prepared by the field's reducer
/// (the ids and timestamps of messages in a JSON update are given when the update is made).
#[inline]
pub fn prepared<T, R: Reducer<T>>(
    reducer: &R,
    value: impl crate::update::IntoField<R::Update>,
) -> Option<R::Update> {
    let mut value = value.into_field();
    reducer.prepare(&mut value);
    Some(value)
}

/// [`FieldValue`]'s traits as supertraits, so that assuming it (in the derive's `for<'_>` where
/// clauses, for a base's and a nested state's update) gives each of them. (`FieldValue` itself
/// has none, so that an unmet requirement is reported under its message, not under one
/// supertrait's.)
pub trait FieldTraits:
    Clone + PartialEq + core::fmt::Debug + Serialize + serde::de::DeserializeOwned
{
}
impl<T> FieldTraits for T where
    T: Clone + PartialEq + core::fmt::Debug + Serialize + serde::de::DeserializeOwned
{
}

/// [`by_field`](crate::keys::by_field), requiring the key's traits under a message that
/// names them (the derive's `key = field`).
#[inline]
pub fn by_field<T, K: ?Sized + KeyType, F: Fn(&T) -> &K>(f: F) -> KeyRef<F, K> {
    crate::keys::by_field(f)
}

/// Whether `names` contains `name` (usable in constants).
pub const fn contains(names: &[&str], name: &str) -> bool {
    let mut i = 0;
    while i < names.len() {
        if str_eq(names[i], name) {
            return true;
        }
        i += 1;
    }
    false
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `a` followed by `b`, as an array of `N = a.len() + b.len()` names.
pub const fn concat_fields<const N: usize>(
    a: &[&'static str],
    b: &[&'static str],
) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < a.len() && i < N {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() && i + j < N {
        out[i + j] = b[j];
        j += 1;
    }
    out
}

/// [`missing_field`](crate::state::missing_field) for a field value read through
/// [`FieldValue`] (`#[agent_state(deserialize)]`).
#[inline]
pub fn missing_field_value<T: FieldValue, E: serde::de::Error>(name: &'static str) -> Result<T, E> {
    T::field_deserialize(crate::state::missing_field_deserializer::<E>(name))
}

/// [`deserialize_value`](crate::state::deserialize_value) for a field value read through
/// [`FieldValue`] (`#[agent_state(deserialize)]`).
#[inline]
pub fn deserialize_field_value<'de, T: FieldValue, A: MapAccess<'de>>(
    slot: &mut Option<T>,
    name: &'static str,
    map: &mut A,
) -> Result<bool, A::Error> {
    read_value(name, slot, map)?;
    Ok(true)
}
