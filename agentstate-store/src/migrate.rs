//! Migrations: functions that upgrade the JSON of a thread written by one version of a state
//! type (schema fingerprint `from`) to another (`to`), applied when a thread is loaded.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

type Upgrade = Arc<dyn Fn(Value) -> Result<Value, String> + Send + Sync>;

/// One step from schema `from` to schema `to`: how a state's JSON and how an update's JSON
/// change.
///
/// ```
/// use agentstate_store::migrate::Migration;
/// use serde_json::{json, Value};
///
/// // Version 2 renamed `notes` to `context_summary`.
/// fn rename(mut value: Value) -> Result<Value, String> {
///     if let Some(map) = value.as_object_mut() {
///         if let Some(notes) = map.remove("notes") {
///             map.insert("context_summary".into(), notes);
///         }
///     }
///     Ok(value)
/// }
/// let step = Migration::new(0x1111, 0x2222, rename, rename);
/// assert_eq!(step.upgrade_state(json!({"notes": "x"})).unwrap(), json!({"context_summary": "x"}));
/// ```
#[derive(Clone)]
pub struct Migration {
    from: u64,
    to: u64,
    state: Upgrade,
    update: Upgrade,
}

impl std::fmt::Debug for Migration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Migration({:016x} -> {:016x})", self.from, self.to)
    }
}

impl Migration {
    /// A step from fingerprint `from` to `to` (see
    /// [`fingerprint`](crate::record::fingerprint)): `state` upgrades a state's JSON (the
    /// initial state, snapshots), `update` an update's JSON (each entry, each branch of a
    /// parallel step).
    pub fn new(
        from: u64,
        to: u64,
        state: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
        update: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        Migration {
            from,
            to,
            state: Arc::new(state),
            update: Arc::new(update),
        }
    }

    /// Upgrades a state's JSON.
    pub fn upgrade_state(&self, value: Value) -> Result<Value, String> {
        (self.state)(value)
    }

    /// Upgrades an update's JSON.
    pub fn upgrade_update(&self, value: Value) -> Result<Value, String> {
        (self.update)(value)
    }
}

/// The registered migrations, keyed by `(from, to)`.
#[derive(Debug, Clone, Default)]
pub struct Migrations {
    steps: HashMap<u64, Migration>,
}

impl Migrations {
    /// Registers a step; a later step from the same fingerprint replaces it.
    pub fn add(&mut self, step: Migration) {
        self.steps.insert(step.from, step);
    }

    /// The steps leading from `from` to `to`, or `None` if there is no such chain.
    pub fn path(&self, from: u64, to: u64) -> Option<Vec<&Migration>> {
        let mut path = Vec::new();
        let mut at = from;
        while at != to {
            let step = self.steps.get(&at)?;
            if path.len() > self.steps.len() {
                return None; // a cycle
            }
            path.push(step);
            at = step.to;
        }
        Some(path)
    }
}
