//! Partial updates: what a node returns and a state merges.
//!
//! An update has one optional entry per state field; `None` leaves the field alone. In JSON an
//! absent key leaves the field alone, while `null` for an `Option` field sets it to `None`:
//! [`present`] makes that distinction for `Option<Option<T>>` entries.

use serde::{Deserialize, Deserializer};

/// Deserializes an update entry that is present in the JSON: `null` becomes `Some(None)` for an
/// `Option` field, where serde alone would read it as "absent". Use it with
/// `#[serde(default, deserialize_with = "agentstate::update::present")]`.
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct Update {
///     #[serde(default, deserialize_with = "agentstate::update::present")]
///     summary: Option<Option<String>>,
/// }
/// let cleared: Update = serde_json::from_str(r#"{"summary": null}"#)?;
/// assert_eq!(cleared.summary, Some(None));
/// let untouched: Update = serde_json::from_str("{}")?;
/// assert_eq!(untouched.summary, None);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Implemented by the update of a state that extends another (`#[agent_state(base)]`), for the
/// base state's update type `U`: gives access to the base's part of the update, so that the
/// base's generated setters trait (`<U>Setters`, e.g. `AgentStateUpdateSetters`) works on the
/// extended update.
pub trait Extends<U> {
    /// The base state's part of this update.
    fn base_update(&mut self) -> &mut U;
}
