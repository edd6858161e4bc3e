//! RFC 6902 JSON Patch, all or nothing, for `STATE_DELTA` and `ACTIVITY_DELTA`.
//!
//! The operations are json-patch's. One thing is ours: a `test` compares numbers by value, as
//! RFC 6902 §4.6 says ("numbers: are considered equal if their values are numerically equal")
//! and as the official client's fast-json-patch does, so `2.0` passes a test for `2`.
//! json-patch compares `serde_json::Value`s structurally, where `2.0` (a float) and `2` (an
//! integer) differ; when one of its `test`s fails, the patch is applied again, operation by
//! operation, on a copy, with the RFC's comparison.

use json_patch::{PatchErrorKind, PatchOperation};
use serde::Deserialize;
use serde_json::{Number, Value};

/// The first failing operation of a patch, and why.
pub(crate) struct PatchFailure {
    pub(crate) operation: Option<usize>,
    pub(crate) reason: String,
}

/// JSON equality as RFC 6902 §4.6 defines it for `test`: numbers by value, objects regardless
/// of key order, arrays element by element.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn numbers_equal(x: &Number, y: &Number) -> bool {
    if x == y {
        return true;
    }
    // Two integers that differ structurally differ in value.
    if let (Some(a), Some(b)) = (x.as_i64(), y.as_i64()) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (x.as_u64(), y.as_u64()) {
        return a == b;
    }
    // An integer against a float, or two floats: equal when both are exactly the same
    // real number. An integer beyond 2^53 compares equal only to the float it converts to
    // exactly.
    match (x.as_f64(), y.as_f64()) {
        (Some(a), Some(b)) if a == b => exact(x, a) && exact(y, b),
        _ => false,
    }
}

/// Whether `f` is exactly the number `n` (not only its nearest float).
fn exact(n: &Number, f: f64) -> bool {
    if let Some(i) = n.as_i64() {
        return (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) && f as i64 == i;
    }
    if let Some(u) = n.as_u64() {
        return (0.0..1.844_674_407_370_955_2e19).contains(&f) && f as u64 == u;
    }
    true
}

fn op_name(op: Option<&PatchOperation>) -> &'static str {
    match op {
        Some(PatchOperation::Add(_)) => "add",
        Some(PatchOperation::Remove(_)) => "remove",
        Some(PatchOperation::Replace(_)) => "replace",
        Some(PatchOperation::Move(_)) => "move",
        Some(PatchOperation::Copy(_)) => "copy",
        Some(PatchOperation::Test(_)) | None => "test",
    }
}

fn failure(
    ops: &[PatchOperation],
    index: usize,
    path: &str,
    why: &dyn std::fmt::Display,
) -> PatchFailure {
    PatchFailure {
        operation: Some(index),
        reason: format!(
            "operation {index} ({} at `{path}`) failed: {why}",
            op_name(ops.get(index))
        ),
    }
}

/// Applies RFC 6902 `ops` to `doc` all or nothing: on error `doc` is unchanged.
pub(crate) fn apply_patch(doc: &mut Value, ops: &[Value]) -> Result<(), PatchFailure> {
    let ops = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            PatchOperation::deserialize(op).map_err(|e| PatchFailure {
                operation: Some(i),
                reason: format!("operation {i} is not a JSON Patch operation: {e}"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // json_patch::patch undoes the applied operations on failure, in place: O(patch). Its undo
    // of a `move` can itself fail (and panic) when the target is an ancestor of the source, so a
    // patch with a `move` goes the careful way, on a copy.
    if !ops.iter().any(|op| matches!(op, PatchOperation::Move(_))) {
        match json_patch::patch(doc, &ops) {
            Ok(()) => return Ok(()),
            Err(e) if !matches!(e.kind, PatchErrorKind::TestFailed) => {
                return Err(failure(&ops, e.operation, e.path.as_str(), &e.kind))
            }
            // A `test` failed structurally; it may still pass by value. `doc` is unchanged.
            Err(_) => {}
        }
    }
    let mut copy = doc.clone();
    for (i, op) in ops.iter().enumerate() {
        if let PatchOperation::Test(test) = op {
            let path = test.path.as_str();
            match copy.pointer(path) {
                None => return Err(failure(&ops, i, path, &PatchErrorKind::InvalidPointer)),
                Some(found) if !json_equal(found, &test.value) => {
                    return Err(failure(&ops, i, path, &PatchErrorKind::TestFailed))
                }
                Some(_) => {}
            }
        } else if let Err(e) = json_patch::patch_unsafe(&mut copy, std::slice::from_ref(op)) {
            return Err(failure(&ops, i, e.path.as_str(), &e.kind));
        }
    }
    *doc = copy;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_equal(&json!(2.0), &json!(2)));
        assert!(json_equal(&json!(-0.0), &json!(0)));
        assert!(json_equal(
            &json!({"a": [1.0, {"b": 2}]}),
            &json!({"a": [1, {"b": 2.0}]})
        ));
        assert!(!json_equal(&json!(2.5), &json!(2)));
        assert!(!json_equal(
            &json!(9007199254740993_u64),
            &json!(9007199254740992.0)
        ));
        assert!(!json_equal(&json!(u64::MAX), &json!(-1)));
        assert!(!json_equal(&json!("2"), &json!(2)));
        assert!(!json_equal(&json!([1]), &json!([1, 1])));
        assert!(!json_equal(&json!({"a": 1}), &json!({"a": 1, "b": 1})));
    }

    #[test]
    fn a_test_by_value_passes_and_a_failing_one_leaves_the_document_alone() {
        let mut doc = json!({"count": 2.0, "items": [1]});
        let patch = [
            json!({"op": "add", "path": "/items/-", "value": 2}),
            json!({"op": "test", "path": "/count", "value": 2}),
            json!({"op": "replace", "path": "/count", "value": 3}),
        ];
        assert!(apply_patch(&mut doc, &patch).is_ok());
        assert_eq!(doc, json!({"count": 3, "items": [1, 2]}));

        let before = doc.clone();
        let patch = [
            json!({"op": "add", "path": "/items/-", "value": 9}),
            json!({"op": "test", "path": "/count", "value": 3.5}),
        ];
        let failure = apply_patch(&mut doc, &patch).unwrap_err();
        assert_eq!(failure.operation, Some(1));
        assert_eq!(
            failure.reason,
            "operation 1 (test at `/count`) failed: value did not match"
        );
        assert_eq!(doc, before);

        // A later operation failing after a test that passed by value: still nothing applied.
        let patch = [
            json!({"op": "add", "path": "/n", "value": 1}),
            json!({"op": "test", "path": "/count", "value": 3.0}),
            json!({"op": "remove", "path": "/missing"}),
        ];
        let failure = apply_patch(&mut doc, &patch).unwrap_err();
        assert_eq!(failure.operation, Some(2));
        assert_eq!(doc, before);
    }
}
