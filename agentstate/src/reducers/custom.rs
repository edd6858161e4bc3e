//! User reducers written as plain functions, and how their updates combine: in order.

use super::{Merges, Reducer, ReducerInfo};
use crate::error::ReduceError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::marker::PhantomData;

/// A reducer made from a function `fn(&T, U) -> Result<T, E>`: given the current value and the
/// update, return the new value or an error. The function is pure (it cannot leave the field
/// half-changed), so a failure is reported as a `reducer_error` and the field keeps its value.
///
/// This is what `#[reducer(with = path::to::function)]` uses, wrapped in [`InOrder`] so that
/// two updates of the field combine by running the function on each in turn.
///
/// ```
/// use agentstate::reducers::{FnReducer, Reducer};
///
/// fn max_of(current: &u32, update: u32) -> Result<u32, std::convert::Infallible> {
///     Ok((*current).max(update))
/// }
///
/// let high_water = FnReducer::new("max_of", max_of);
/// let mut peak = 3;
/// high_water.reduce(&mut peak, 7)?;
/// high_water.reduce(&mut peak, 5)?;
/// assert_eq!(peak, 7);
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
pub struct FnReducer<F, U> {
    name: &'static str,
    f: F,
    round_trip_idempotent: bool,
    _update: PhantomData<fn(U)>,
}

impl<F, U> FnReducer<F, U> {
    /// The reducer `name`, computed by `f`.
    pub const fn new<T, E>(name: &'static str, f: F) -> Self
    where
        F: Fn(&T, U) -> Result<T, E>,
    {
        FnReducer {
            name,
            f,
            round_trip_idempotent: false,
            _update: PhantomData,
        }
    }

    /// Declares that merging an already merged value again changes nothing (by default a
    /// function reducer is assumed not to be).
    pub const fn idempotent(mut self) -> Self {
        self.round_trip_idempotent = true;
        self
    }
}

impl<F: Clone, U> Clone for FnReducer<F, U> {
    fn clone(&self) -> Self {
        FnReducer {
            name: self.name,
            f: self.f.clone(),
            round_trip_idempotent: self.round_trip_idempotent,
            _update: PhantomData,
        }
    }
}

impl<F, U> std::fmt::Debug for FnReducer<F, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnReducer")
            .field("name", &self.name)
            .finish()
    }
}

impl<F, U> ReducerInfo for FnReducer<F, U> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn round_trip_idempotent(&self) -> bool {
        self.round_trip_idempotent
    }
}

impl<T, U, F> Merges<T> for FnReducer<F, U> {
    type Update = U;
    type Plan = T;
}

impl<T, U, E, F> Reducer<T> for FnReducer<F, U>
where
    F: Fn(&T, U) -> Result<T, E>,
    E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
{
    fn plan(&self, current: &T, update: U) -> Result<T, ReduceError> {
        (self.f)(current, update).map_err(ReduceError::new)
    }
    fn apply(&self, current: &mut T, plan: T) {
        *current = plan;
    }
}

/// The updates of a field whose reducer cannot combine two updates into one (a user function),
/// applied one after the other: what the update of a `#[reducer(with = f)]` field carries. Made
/// from one update (`Steps::from(u)`, or a setter given `u`); [`InOrder`] extends it when two
/// updates compose (`a.then(b)`, parallel branches in one step, several node outputs), and
/// plans it by running the function on each in turn.
///
/// In JSON one update is written as itself; several as `{"__steps__": [first, second, ...]}`
/// (what a journal of composed updates holds).
///
/// ```
/// use agentstate::reducers::Steps;
///
/// let mut steps = Steps::from(100);
/// steps.push(200);
/// assert_eq!(steps.iter().copied().collect::<Vec<_>>(), [100, 200]);
/// assert_eq!(serde_json::to_value(&steps)?, serde_json::json!({"__steps__": [100, 200]}));
/// assert_eq!(serde_json::to_value(Steps::from(5))?, serde_json::json!(5));
/// let back: Steps<i32> = serde_json::from_value(serde_json::json!({"__steps__": [100, 200]}))?;
/// assert_eq!(back, steps);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steps<U> {
    first: U,
    rest: Vec<U>,
}

/// The JSON key of several steps.
const STEPS_KEY: &str = "__steps__";

impl<U> Steps<U> {
    /// Adds an update after the others.
    pub fn push(&mut self, update: U) {
        self.rest.push(update);
    }

    /// The updates, in order.
    pub fn iter(&self) -> impl Iterator<Item = &U> {
        std::iter::once(&self.first).chain(&self.rest)
    }

    /// How many updates there are (at least one).
    #[allow(clippy::len_without_is_empty)] // never empty
    pub fn len(&self) -> usize {
        1 + self.rest.len()
    }

    /// The first update.
    pub fn first(&self) -> &U {
        &self.first
    }
}

impl<U> From<U> for Steps<U> {
    fn from(first: U) -> Self {
        Steps {
            first,
            rest: Vec::new(),
        }
    }
}

impl<U: Serialize> Serialize for Steps<U> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if self.rest.is_empty() {
            return self.first.serialize(serializer);
        }
        struct All<'a, U>(&'a Steps<U>);
        impl<U: Serialize> Serialize for All<'_, U> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.0.iter())
            }
        }
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(STEPS_KEY, &All(self))?;
        map.end()
    }
}

/// Read through a `serde_json::Value`, which tells one update from `{"__steps__": [...]}`.
impl<'de, U: serde::de::DeserializeOwned> Deserialize<'de> for Steps<U> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let value = Value::deserialize(deserializer)?;
        let several = match &value {
            Value::Object(map) if map.len() == 1 => map.get(STEPS_KEY).is_some(),
            _ => false,
        };
        if !several {
            return U::deserialize(value)
                .map(Steps::from)
                .map_err(D::Error::custom);
        }
        let Some(Value::Array(items)) = value.get(STEPS_KEY).cloned() else {
            return Err(D::Error::custom(format!(
                "`{STEPS_KEY}` must be a list of updates"
            )));
        };
        let mut items = items.into_iter().map(U::deserialize);
        let first = match items.next() {
            Some(first) => first.map_err(D::Error::custom)?,
            None => {
                return Err(D::Error::custom(format!(
                    "`{STEPS_KEY}` must hold at least one update"
                )))
            }
        };
        let rest = items.collect::<Result<_, _>>().map_err(D::Error::custom)?;
        Ok(Steps { first, rest })
    }
}

/// A reducer whose updates are [`Steps`]: each step is planned with `R` on the value the
/// previous one gave, so two updates combine by applying one after the other. The derive wraps
/// a `#[reducer(with = f)]` function in it, so that `a.then(b)`, parallel branches writing the
/// field in one step and several node outputs all work: the function runs on each update in
/// order, and if one fails the merge fails and the field keeps its value.
///
/// ```
/// use agentstate::reducers::{FnReducer, InOrder, Reducer, Steps};
///
/// fn capped(current: &u32, add: u32) -> Result<u32, String> {
///     let total = current + add;
///     if total > 10 { Err(format!("{total} is over the cap of 10")) } else { Ok(total) }
/// }
///
/// let reducer = InOrder(FnReducer::new("capped", capped));
/// let both = reducer.compose(Steps::from(3), Steps::from(4)).expect("steps always compose");
/// let mut value = 1;
/// reducer.reduce(&mut value, both)?;
/// assert_eq!(value, 8);
/// let err = reducer.reduce(&mut value, Steps::from(5)).unwrap_err();
/// assert_eq!(err.to_string(), "13 is over the cap of 10");
/// assert_eq!(value, 8);
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InOrder<R>(pub R);

impl<R: ReducerInfo> ReducerInfo for InOrder<R> {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn params(&self) -> serde_json::Map<String, Value> {
        self.0.params()
    }
    fn round_trip_idempotent(&self) -> bool {
        self.0.round_trip_idempotent()
    }
}

impl<T, R: Merges<T, Plan = T>> Merges<T> for InOrder<R> {
    type Update = Steps<R::Update>;
    type Plan = T;
}

impl<T, R: Reducer<T> + Merges<T, Plan = T>> Reducer<T> for InOrder<R> {
    fn plan(&self, current: &T, update: Steps<R::Update>) -> Result<T, ReduceError> {
        let Steps { first, rest } = update;
        let mut value = self.0.plan(current, first)?;
        for step in rest {
            value = self.0.plan(&value, step)?;
        }
        Ok(value)
    }
    fn apply(&self, current: &mut T, plan: T) {
        *current = plan;
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.rest.push(second.first);
        first.rest.extend(second.rest);
        Some(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[expect(
        clippy::ptr_arg,
        reason = "FnReducer<Vec<u8>> takes fn(&Vec<u8>, Vec<u8>)"
    )]
    fn only_grow(current: &Vec<u8>, update: Vec<u8>) -> Result<Vec<u8>, String> {
        if update.len() < current.len() {
            return Err(format!(
                "{} items would shrink to {}",
                current.len(),
                update.len()
            ));
        }
        Ok(update)
    }

    #[test]
    fn failures_leave_the_value_alone_and_keep_the_message() {
        let reducer = FnReducer::new("only_grow", only_grow);
        let mut v = vec![1, 2];
        reducer.reduce(&mut v, vec![1, 2, 3]).unwrap();
        let err = reducer.reduce(&mut v, vec![9]).unwrap_err();
        assert_eq!(err.to_string(), "3 items would shrink to 1");
        assert_eq!(v, [1, 2, 3]);
        assert_eq!(reducer.name(), "only_grow");
        assert!(!reducer.round_trip_idempotent());
        assert!(reducer.idempotent().round_trip_idempotent());
    }
}
