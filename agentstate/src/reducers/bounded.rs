//! `bounded_append(max_len)`: append, then drop the oldest items beyond a bound.

use super::{Merges, Reducer, ReducerInfo};
use crate::error::{Error, ReduceError};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::num::NonZeroUsize;

/// `bounded_append(max_len)`: concatenates the list and the update, then drops items from the
/// front until at most `max_len` remain.
///
/// - An update longer than `max_len` keeps only its last `max_len` items.
/// - An empty update leaves the list unchanged, even when it is over the bound.
/// - `max_len` must be at least 1: [`BoundedAppend::new`] returns a
///   `reducer_configuration_invalid` error otherwise.
///
/// On a `VecDeque<T>` a merge of `k` items costs O(k) whatever the list's length; on a `Vec<T>`
/// dropping from the front shifts the list (O(n)).
///
/// ```
/// use agentstate::reducers::{BoundedAppend, Reducer};
/// use std::collections::VecDeque;
///
/// let last_three = BoundedAppend::new(3)?;
/// let mut recent = VecDeque::from(vec![1, 2]);
/// last_three.reduce(&mut recent, VecDeque::from(vec![3, 4]))?;
/// assert_eq!(recent, [2, 3, 4]);
/// last_three.reduce(&mut recent, VecDeque::from(vec![5, 6, 7, 8]))?;
/// assert_eq!(recent, [6, 7, 8]);
///
/// assert_eq!(BoundedAppend::new(0).unwrap_err().category(), "reducer_configuration_invalid");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundedAppend {
    max_len: NonZeroUsize,
}

impl BoundedAppend {
    /// The reducer for lists of at most `max_len` items; `max_len <= 0` is
    /// `reducer_configuration_invalid`.
    pub fn new(max_len: i64) -> Result<Self, Error> {
        usize::try_from(max_len)
            .ok()
            .and_then(NonZeroUsize::new)
            .map(Self::with_max_len)
            .ok_or_else(|| {
                Error::configuration(
                    "bounded_append",
                    format!("max_len must be at least 1, got {max_len}"),
                )
            })
    }

    /// The reducer for a bound that is already known to be valid.
    pub const fn with_max_len(max_len: NonZeroUsize) -> Self {
        BoundedAppend { max_len }
    }

    /// For generated code, whose bound the derive has checked already: a bound of 0 (which it
    /// never passes) would be treated as 1.
    #[doc(hidden)]
    pub const fn __checked(max_len: usize) -> Self {
        match NonZeroUsize::new(max_len) {
            Some(max_len) => BoundedAppend { max_len },
            None => BoundedAppend {
                max_len: NonZeroUsize::MIN,
            },
        }
    }

    /// The bound.
    pub fn max_len(&self) -> usize {
        self.max_len.get()
    }

    /// How many items to drop from the front of a list of `current` items before appending
    /// `incoming` items, and how many of the incoming items to skip.
    fn evictions(&self, current: usize, incoming: usize) -> (usize, usize) {
        let max = self.max_len.get();
        if incoming == 0 {
            (0, 0)
        } else if incoming >= max {
            (current, incoming - max)
        } else {
            ((current + incoming).saturating_sub(max), 0)
        }
    }
}

impl ReducerInfo for BoundedAppend {
    fn name(&self) -> &'static str {
        "bounded_append"
    }
    fn params(&self) -> Map<String, Value> {
        Map::from_iter([("max_len".to_owned(), Value::from(self.max_len.get()))])
    }
    fn round_trip_idempotent(&self) -> bool {
        false
    }
}

impl<T> Merges<Vec<T>> for BoundedAppend {
    type Update = Vec<T>;
    type Plan = Vec<T>;
}

impl<T> Reducer<Vec<T>> for BoundedAppend {
    fn plan(&self, _current: &Vec<T>, update: Vec<T>) -> Result<Vec<T>, ReduceError> {
        Ok(update)
    }
    fn apply(&self, current: &mut Vec<T>, mut plan: Vec<T>) {
        let (drop_current, skip_incoming) = self.evictions(current.len(), plan.len());
        current.drain(..drop_current);
        plan.drain(..skip_incoming);
        current.extend(plan);
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

impl<T> Merges<VecDeque<T>> for BoundedAppend {
    type Update = VecDeque<T>;
    type Plan = VecDeque<T>;
}

impl<T> Reducer<VecDeque<T>> for BoundedAppend {
    fn plan(
        &self,
        _current: &VecDeque<T>,
        update: VecDeque<T>,
    ) -> Result<VecDeque<T>, ReduceError> {
        Ok(update)
    }
    fn apply(&self, current: &mut VecDeque<T>, plan: VecDeque<T>) {
        let (drop_current, skip_incoming) = self.evictions(current.len(), plan.len());
        if drop_current == current.len() {
            current.clear();
        } else {
            for _ in 0..drop_current {
                current.pop_front();
            }
        }
        current.extend(plan.into_iter().skip(skip_incoming));
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounded(n: i64) -> BoundedAppend {
        BoundedAppend::new(n).unwrap()
    }

    #[test]
    fn truncates_from_the_front_after_concatenating() {
        let mut v: Vec<&str> = vec![];
        bounded(3)
            .reduce(&mut v, vec!["a", "b", "c", "d", "e"])
            .unwrap();
        assert_eq!(v, ["c", "d", "e"]);
    }

    #[test]
    fn bound_is_cumulative_across_merges() {
        let mut v = vec![];
        let mut d: VecDeque<&str> = VecDeque::new();
        for pair in [["1", "2"], ["3", "4"], ["5", "6"]] {
            bounded(4).reduce(&mut v, pair.to_vec()).unwrap();
            bounded(4).reduce(&mut d, pair.to_vec().into()).unwrap();
        }
        assert_eq!(v, ["3", "4", "5", "6"]);
        assert_eq!(d, ["3", "4", "5", "6"]);
    }

    #[test]
    fn update_larger_than_bound_evicts_everything_before_it() {
        let mut v = vec!["seed-1", "seed-2"];
        let mut d = VecDeque::from(v.clone());
        bounded(2)
            .reduce(&mut v, vec!["a", "b", "c", "d", "e"])
            .unwrap();
        bounded(2)
            .reduce(&mut d, vec!["a", "b", "c", "d", "e"].into())
            .unwrap();
        assert_eq!(v, ["d", "e"]);
        assert_eq!(d, ["d", "e"]);
    }

    #[test]
    fn empty_update_is_a_no_op_even_over_the_bound() {
        let mut v = vec!["a", "b", "c", "d", "e"];
        bounded(3).reduce(&mut v, vec![]).unwrap();
        assert_eq!(v, ["a", "b", "c", "d", "e"]);
        // A non-empty update brings an over-bound list back under the bound.
        bounded(3).reduce(&mut v, vec!["f"]).unwrap();
        assert_eq!(v, ["d", "e", "f"]);
    }

    #[test]
    fn exact_fit_keeps_everything() {
        let mut d = VecDeque::from(vec![1, 2]);
        bounded(3).reduce(&mut d, vec![3].into()).unwrap();
        assert_eq!(d, [1, 2, 3]);
        bounded(1).reduce(&mut d, vec![4].into()).unwrap();
        assert_eq!(d, [4]);
    }

    #[test]
    fn non_positive_bounds_are_configuration_errors() {
        for bad in [0, -1, i64::MIN] {
            let err = BoundedAppend::new(bad).unwrap_err();
            assert_eq!(err.category(), "reducer_configuration_invalid");
            assert!(err.to_string().contains(&format!("got {bad}")), "{err}");
        }
        assert_eq!(bounded(7).params()["max_len"], 7);
        assert_eq!(bounded(7).max_len(), 7);
    }
}
