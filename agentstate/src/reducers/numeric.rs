//! `add`: a number summed with each update (LangGraph's `Annotated[int, operator.add]`).

use super::json::kind_of;
use super::{Merges, Reducer, ReducerInfo};
use crate::error::ReduceError;
use serde_json::{Number, Value};

/// `add`: the update is added to the value, on integers, floats and JSON numbers.
///
/// On an integer a sum out of the type's range is a `reducer_error` naming both numbers and
/// the type, and the field keeps its value: checked, not saturating or wrapping, because a
/// counter stuck at its maximum (or wrapped to zero) would be a wrong count that looks right.
/// On a float the sum is IEEE addition (it may reach infinity, as in Python).
///
/// LangGraph's `operator.add` also concatenates lists: that is [`append`](super::Append) here;
/// `add` takes numbers only. Not round-trip idempotent: merging an update twice adds it twice.
///
/// Two updates compose into their sum, so `a.then(b)` and parallel branches add both. For
/// integers, when that sum is itself out of range the two updates cannot be combined (merged
/// one at a time, the first may bring the value back in range). For floats `(x + a) + b` and
/// `x + (a + b)` may differ in the last bit.
///
/// ```
/// use agentstate::reducers::{Add, Reducer};
///
/// let mut steps: u8 = 250;
/// Add.reduce(&mut steps, 5)?;
/// assert_eq!(steps, 255);
/// let err = Add.reduce(&mut steps, 1).unwrap_err();
/// assert_eq!(err.to_string(), "adding 1 to 255 overflows u8 (its range is 0 to 255)");
/// assert_eq!(steps, 255, "the field keeps its value");
///
/// let mut cost = 0.5_f64;
/// Add.reduce(&mut cost, 0.25)?;
/// assert_eq!(cost, 0.75);
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Add;

impl ReducerInfo for Add {
    fn name(&self) -> &'static str {
        "add"
    }
    fn round_trip_idempotent(&self) -> bool {
        false
    }
}

macro_rules! integers {
    ($($t:ty),*) => {$(
        impl Merges<$t> for Add {
            type Update = $t;
            type Plan = $t;
        }

        impl Reducer<$t> for Add {
            fn plan(&self, current: &$t, update: $t) -> Result<$t, ReduceError> {
                current.checked_add(update).ok_or_else(|| {
                    ReduceError::msg(format!(
                        "adding {update} to {current} overflows {} (its range is {} to {})",
                        stringify!($t),
                        <$t>::MIN,
                        <$t>::MAX
                    ))
                })
            }
            fn apply(&self, current: &mut $t, plan: $t) {
                *current = plan;
            }
            fn compose(&self, first: $t, second: $t) -> Option<$t> {
                first.checked_add(second)
            }
        }
    )*};
}

integers!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);

macro_rules! floats {
    ($($t:ty),*) => {$(
        impl Merges<$t> for Add {
            type Update = $t;
            type Plan = $t;
        }

        impl Reducer<$t> for Add {
            fn plan(&self, current: &$t, update: $t) -> Result<$t, ReduceError> {
                Ok(current + update)
            }
            fn apply(&self, current: &mut $t, plan: $t) {
                *current = plan;
            }
            fn compose(&self, first: $t, second: $t) -> Option<$t> {
                Some(first + second)
            }
        }
    )*};
}

floats!(f32, f64);

/// The sum of two JSON numbers: exact for integers (an `i64` or `u64` result; beyond both an
/// error), a float when either is one (an error if it is not finite, which JSON cannot hold).
fn sum(a: &Number, b: &Number) -> Result<Number, ReduceError> {
    let int = |n: &Number| n.as_i64().map(i128::from).or(n.as_u64().map(i128::from));
    if let (Some(x), Some(y)) = (int(a), int(b)) {
        let total = x + y;
        return i64::try_from(total)
            .map(Number::from)
            .or_else(|_| u64::try_from(total).map(Number::from))
            .map_err(|_| {
                ReduceError::msg(format!(
                    "adding {b} to {a} overflows a JSON integer (its range is {} to {})",
                    i64::MIN,
                    u64::MAX
                ))
            });
    }
    let (x, y) = (
        a.as_f64().unwrap_or(f64::NAN),
        b.as_f64().unwrap_or(f64::NAN),
    );
    Number::from_f64(x + y).ok_or_else(|| {
        ReduceError::msg(format!(
            "adding {b} to {a} gives {}, which JSON cannot hold",
            x + y
        ))
    })
}

fn number<'a>(value: &'a Value, what: &str) -> Result<&'a Number, ReduceError> {
    match value {
        Value::Number(n) => Ok(n),
        other => Err(ReduceError::msg(format!(
            "{what} must be a number, got {}",
            kind_of(other)
        ))),
    }
}

impl Merges<Value> for Add {
    type Update = Value;
    type Plan = Number;
}

/// On a JSON value: numbers; `null` (what `Value::default()` is) counts as 0.
impl Reducer<Value> for Add {
    fn plan(&self, current: &Value, update: Value) -> Result<Number, ReduceError> {
        let update = number(&update, "the update")?;
        match current {
            Value::Null => Ok(update.clone()),
            current => sum(number(current, "the current value")?, update),
        }
    }
    fn apply(&self, current: &mut Value, plan: Number) {
        *current = Value::Number(plan);
    }
    fn compose(&self, first: Value, second: Value) -> Option<Value> {
        match (&first, &second) {
            (Value::Number(a), Value::Number(b)) => sum(a, b).ok().map(Value::Number),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integers_add_and_overflow_is_an_error_that_changes_nothing() {
        let mut n: i64 = -3;
        Add.reduce(&mut n, 5).unwrap();
        assert_eq!(n, 2);
        let mut max = i32::MAX - 1;
        let err = Add.reduce(&mut max, 2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "adding 2 to 2147483646 overflows i32 (its range is -2147483648 to 2147483647)"
        );
        assert_eq!(max, i32::MAX - 1);
        let mut low: u32 = 0;
        assert!(Add.reduce(&mut low, u32::MAX).is_ok());
        assert_eq!(Reducer::<u8>::compose(&Add, 200, 55), Some(255));
        assert_eq!(Reducer::<u8>::compose(&Add, 200, 56), None);
        assert!(!Add.round_trip_idempotent());
        assert_eq!(Add.name(), "add");
    }

    #[test]
    fn json_numbers_add_exactly_as_integers_and_as_floats_otherwise() {
        let mut v = Value::Null;
        Add.reduce(&mut v, json!(2)).unwrap();
        Add.reduce(&mut v, json!(-5)).unwrap();
        assert_eq!(v, json!(-3));
        Add.reduce(&mut v, json!(0.5)).unwrap();
        assert_eq!(v, json!(-2.5));
        let mut big = json!(u64::MAX - 1);
        Add.reduce(&mut big, json!(1)).unwrap();
        assert_eq!(big, json!(u64::MAX));
        let err = Add.reduce(&mut big, json!(1)).unwrap_err();
        assert!(
            err.to_string().contains("overflows a JSON integer"),
            "{err}"
        );
        assert_eq!(big, json!(u64::MAX));
        let mut text = json!("3");
        let err = Add.reduce(&mut text, json!(1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the current value must be a number, got a string"
        );
        let err = Add.reduce(&mut v, json!([1])).unwrap_err();
        assert_eq!(err.to_string(), "the update must be a number, got a list");
        let mut huge = json!(f64::MAX);
        assert!(Add.reduce(&mut huge, json!(f64::MAX)).is_err());
        assert_eq!(
            Reducer::<Value>::compose(&Add, json!(1), json!(2)),
            Some(json!(3))
        );
        assert_eq!(Reducer::<Value>::compose(&Add, json!(1), json!("2")), None);
    }
}
