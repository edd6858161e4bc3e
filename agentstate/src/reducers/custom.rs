//! User reducers written as plain functions.

use super::{Reducer, ReducerInfo};
use crate::error::ReduceError;
use std::marker::PhantomData;

/// A reducer made from a function `fn(&T, U) -> Result<T, E>`: given the current value and the
/// update, return the new value or an error. The function is pure (it cannot leave the field
/// half-changed), so a failure is reported as a `reducer_error` and the field keeps its value.
///
/// This is what `#[reducer(with = path::to::function)]` uses.
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
/// # Ok::<(), agentstate::error::ReduceError>(())
/// ```
pub struct FnReducer<F, U> {
    name: &'static str,
    f: F,
    round_trip_idempotent: bool,
    _update: PhantomData<fn(U)>,
}

impl<F, U> FnReducer<F, U> {
    /// The reducer `name`, computed by `f`.
    pub const fn new(name: &'static str, f: F) -> Self {
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

impl<T, U, E, F> Reducer<T> for FnReducer<F, U>
where
    F: Fn(&T, U) -> Result<T, E>,
    E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
{
    type Update = U;
    type Plan = T;
    fn plan(&self, current: &T, update: U) -> Result<T, ReduceError> {
        (self.f)(current, update).map_err(ReduceError::new)
    }
    fn apply(&self, current: &mut T, plan: T) {
        *current = plan;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The reducer's signature is `fn(&T, U)` with `T` the field type, here `Vec<u8>`.
    #[allow(clippy::ptr_arg)]
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
