//! `nested`: a field that is itself a state merges with its own update, field by field.

use super::{Merges, ReducerInfo};
use crate::state::State;

/// `#[reducer(nested)]`: the field is a state of its own (usually derived) and merges its own
/// update type recursively, atomically with the outer state. Errors name the field as
/// `outer.inner`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Nested;

impl ReducerInfo for Nested {
    fn name(&self) -> &'static str {
        "nested"
    }
    fn round_trip_idempotent(&self) -> bool {
        false
    }
}

impl<S: State> Merges<S> for Nested {
    type Update = S::Update;
    type Plan = S::Plan;
}
