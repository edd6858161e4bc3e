//! The reducers that need no parameters and no keys: `last_write_wins`, `replace_value`,
//! `append`, `merge`, `concat_flatten`, `merge_all`.

use super::{Merges, Reducer, ReducerInfo};
use crate::error::ReduceError;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};

/// `last_write_wins`, the default reducer: the update replaces the value. Works on any type.
///
/// ```
/// use agentstate::reducers::{LastWriteWins, Reducer};
/// let mut title = String::from("draft");
/// LastWriteWins.reduce(&mut title, "final".to_string())?;
/// assert_eq!(title, "final");
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LastWriteWins;

/// `replace_value` (AgentFlow): the update replaces the value; the same behaviour as
/// [`LastWriteWins`] under AgentFlow's name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplaceValue;

macro_rules! replacing_reducer {
    ($ty:ty, $name:literal) => {
        impl ReducerInfo for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn round_trip_idempotent(&self) -> bool {
                true
            }
        }

        impl<T> Merges<T> for $ty {
            type Update = T;
            type Plan = T;
        }

        impl<T> Reducer<T> for $ty {
            fn plan(&self, _current: &T, update: T) -> Result<T, ReduceError> {
                Ok(update)
            }
            fn compose(&self, _first: T, second: T) -> Option<T> {
                Some(second)
            }
            fn apply(&self, current: &mut T, plan: T) {
                *current = plan;
            }
        }
    };
}

replacing_reducer!(LastWriteWins, "last_write_wins");
replacing_reducer!(ReplaceValue, "replace_value");

/// `append`: extends a list with the update's items.
///
/// ```
/// use agentstate::reducers::{Append, Reducer};
/// let mut notes = vec!["a".to_string()];
/// Append.reduce(&mut notes, vec!["b".to_string()])?;
/// assert_eq!(notes, ["a", "b"]);
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Append;

impl ReducerInfo for Append {
    fn name(&self) -> &'static str {
        "append"
    }
    fn round_trip_idempotent(&self) -> bool {
        false
    }
}

impl<T> Merges<Vec<T>> for Append {
    type Update = Vec<T>;
    type Plan = Vec<T>;
}

impl<T> Reducer<Vec<T>> for Append {
    fn plan(&self, _current: &Vec<T>, update: Vec<T>) -> Result<Vec<T>, ReduceError> {
        Ok(update)
    }
    fn apply(&self, current: &mut Vec<T>, plan: Vec<T>) {
        current.extend(plan);
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

impl<T> Merges<VecDeque<T>> for Append {
    type Update = VecDeque<T>;
    type Plan = VecDeque<T>;
}

impl<T> Reducer<VecDeque<T>> for Append {
    fn plan(
        &self,
        _current: &VecDeque<T>,
        update: VecDeque<T>,
    ) -> Result<VecDeque<T>, ReduceError> {
        Ok(update)
    }
    fn apply(&self, current: &mut VecDeque<T>, plan: VecDeque<T>) {
        current.extend(plan);
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

/// `merge`: a shallow merge of maps; the update's keys override, keys only in the current map
/// are kept.
///
/// ```
/// use agentstate::reducers::{Merge, Reducer};
/// use std::collections::BTreeMap;
/// let mut meta = BTreeMap::from([("source".to_string(), "seed".to_string())]);
/// Merge.reduce(&mut meta, BTreeMap::from([("stage".to_string(), "draft".to_string())]))?;
/// assert_eq!(meta.len(), 2);
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Merge;

impl ReducerInfo for Merge {
    fn name(&self) -> &'static str {
        "merge"
    }
    fn round_trip_idempotent(&self) -> bool {
        true
    }
}

/// `merge_all`: folds a list of maps onto the map in order; later keys win.
///
/// ```
/// use agentstate::reducers::{MergeAll, Reducer};
/// use std::collections::BTreeMap;
/// let mut registry = BTreeMap::from([("a", 1)]);
/// MergeAll.reduce(&mut registry, vec![BTreeMap::from([("b", 2)]), BTreeMap::from([("a", 3)])])?;
/// assert_eq!(registry, BTreeMap::from([("a", 3), ("b", 2)]));
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeAll;

impl ReducerInfo for MergeAll {
    fn name(&self) -> &'static str {
        "merge_all"
    }
    fn round_trip_idempotent(&self) -> bool {
        false
    }
}

macro_rules! map_reducers {
    ($map:ty, [$($params:tt)*], [$($bounds:tt)*]) => {
        impl<$($params)*> Merges<$map> for Merge where $($bounds)* {
            type Update = $map;
            type Plan = $map;
        }

        impl<$($params)*> Reducer<$map> for Merge where $($bounds)* {
            fn compose(&self, mut first: $map, second: $map) -> Option<$map> {
                first.extend(second);
                Some(first)
            }
            fn plan(&self, _current: &$map, update: $map) -> Result<$map, ReduceError> {
                Ok(update)
            }
            fn apply(&self, current: &mut $map, plan: $map) {
                current.extend(plan);
            }
        }

        impl<$($params)*> Merges<$map> for MergeAll where $($bounds)* {
            type Update = Vec<$map>;
            type Plan = Vec<$map>;
        }

        impl<$($params)*> Reducer<$map> for MergeAll where $($bounds)* {
            fn compose(&self, mut first: Vec<$map>, second: Vec<$map>) -> Option<Vec<$map>> {
                first.extend(second);
                Some(first)
            }
            fn plan(&self, _current: &$map, update: Vec<$map>) -> Result<Vec<$map>, ReduceError> {
                Ok(update)
            }
            fn apply(&self, current: &mut $map, plan: Vec<$map>) {
                for map in plan {
                    current.extend(map);
                }
            }
        }
    };
}

map_reducers!(HashMap<K, V, S>, [K, V, S], [K: Eq + Hash, S: BuildHasher]);
map_reducers!(BTreeMap<K, V>, [K, V], [K: Ord]);
map_reducers!(serde_json::Map<String, serde_json::Value>, [], []);

/// `concat_flatten`: flattens one level of the update (a list of lists) onto the list.
///
/// ```
/// use agentstate::reducers::{ConcatFlatten, Reducer};
/// let mut items = vec!["a"];
/// ConcatFlatten.reduce(&mut items, vec![vec!["b", "c"], vec![], vec!["d"]])?;
/// assert_eq!(items, ["a", "b", "c", "d"]);
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConcatFlatten;

impl ReducerInfo for ConcatFlatten {
    fn name(&self) -> &'static str {
        "concat_flatten"
    }
    fn round_trip_idempotent(&self) -> bool {
        false
    }
}

impl<T> Merges<Vec<T>> for ConcatFlatten {
    type Update = Vec<Vec<T>>;
    type Plan = Vec<Vec<T>>;
}

impl<T> Reducer<Vec<T>> for ConcatFlatten {
    fn plan(&self, _current: &Vec<T>, update: Vec<Vec<T>>) -> Result<Vec<Vec<T>>, ReduceError> {
        Ok(update)
    }
    fn apply(&self, current: &mut Vec<T>, plan: Vec<Vec<T>>) {
        current.extend(plan.into_iter().flatten());
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

impl<T> Merges<VecDeque<T>> for ConcatFlatten {
    type Update = Vec<VecDeque<T>>;
    type Plan = Vec<VecDeque<T>>;
}

impl<T> Reducer<VecDeque<T>> for ConcatFlatten {
    fn plan(
        &self,
        _current: &VecDeque<T>,
        update: Vec<VecDeque<T>>,
    ) -> Result<Vec<VecDeque<T>>, ReduceError> {
        Ok(update)
    }
    fn apply(&self, current: &mut VecDeque<T>, plan: Vec<VecDeque<T>>) {
        current.extend(plan.into_iter().flatten());
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_write_wins_and_replace_value_replace() {
        let mut v = 1;
        LastWriteWins.reduce(&mut v, 2).unwrap();
        assert_eq!(v, 2);
        ReplaceValue.reduce(&mut v, 3).unwrap();
        assert_eq!(v, 3);
        assert!(LastWriteWins.round_trip_idempotent());
        assert_eq!(ReplaceValue.name(), "replace_value");
    }

    #[test]
    fn append_keeps_order_and_duplicates() {
        let mut v = vec!["seed"];
        Append.reduce(&mut v, vec!["x", "y"]).unwrap();
        Append.reduce(&mut v, vec!["z", "x"]).unwrap();
        Append.reduce(&mut v, vec![]).unwrap();
        assert_eq!(v, ["seed", "x", "y", "z", "x"]);
        let mut d = VecDeque::from(vec![1]);
        Append.reduce(&mut d, VecDeque::from(vec![2, 3])).unwrap();
        assert_eq!(d, [1, 2, 3]);
        assert!(!Append.round_trip_idempotent());
    }

    #[test]
    fn merge_is_shallow_and_update_keys_win() {
        let mut m: HashMap<&str, serde_json::Value> = HashMap::from([
            ("source", "seed".into()),
            ("nested", serde_json::json!({"a": 1})),
        ]);
        Merge
            .reduce(
                &mut m,
                HashMap::from([
                    ("stage", "draft".into()),
                    ("nested", serde_json::json!({"b": 2})),
                ]),
            )
            .unwrap();
        assert_eq!(m["source"], "seed");
        assert_eq!(m["stage"], "draft");
        // Shallow: the nested object is replaced, not merged.
        assert_eq!(m["nested"], serde_json::json!({"b": 2}));

        let mut j = serde_json::Map::new();
        j.insert("k".into(), 1.into());
        let mut u = serde_json::Map::new();
        u.insert("k".into(), 2.into());
        Merge.reduce(&mut j, u).unwrap();
        assert_eq!(j["k"], 2);
    }

    #[test]
    fn merge_all_folds_in_order() {
        let mut m = BTreeMap::from([("seed_key", "seed"), ("retained", "prior")]);
        MergeAll
            .reduce(
                &mut m,
                vec![
                    BTreeMap::from([("a", "1")]),
                    BTreeMap::from([("seed_key", "x"), ("b", "2")]),
                    BTreeMap::from([("a", "1 wins")]),
                    BTreeMap::new(),
                ],
            )
            .unwrap();
        assert_eq!(
            m,
            BTreeMap::from([
                ("seed_key", "x"),
                ("retained", "prior"),
                ("a", "1 wins"),
                ("b", "2")
            ])
        );
        assert!(!MergeAll.round_trip_idempotent());
    }

    #[test]
    fn concat_flatten_flattens_one_level() {
        let mut v = vec!["a", "b"];
        ConcatFlatten
            .reduce(&mut v, vec![vec!["c"], vec!["d", "e"], vec![]])
            .unwrap();
        ConcatFlatten.reduce(&mut v, vec![]).unwrap();
        ConcatFlatten.reduce(&mut v, vec![vec![], vec![]]).unwrap();
        assert_eq!(v, ["a", "b", "c", "d", "e"]);
        let mut nested: Vec<Vec<i32>> = vec![];
        ConcatFlatten
            .reduce(&mut nested, vec![vec![vec![1], vec![2]]])
            .unwrap();
        assert_eq!(nested, [vec![1], vec![2]], "only one level is flattened");
    }
}
