//! `#[agent_state(deserialize)]` under `#![deny(warnings, missing_docs)]`: a public base and a
//! public extension of it.
#![deny(warnings, missing_docs)]

use agentstate::AgentState;

/// A base of our own.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize)]
#[agent_state(deserialize, extensible)]
pub struct Base {
    /// A note.
    pub note: String,
}

/// Extends `Base`.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize)]
#[agent_state(deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Order {
    /// The base.
    #[agent_state(base)]
    #[serde(flatten)]
    pub base: Base,
    /// Confirmed?
    #[serde(default)]
    pub is_confirmed: bool,
}

fn main() {
    let order: Order = serde_json::from_str(r#"{"note": "n", "isConfirmed": true}"#).unwrap();
    assert_eq!(order.base.note, "n");
    assert!(order.is_confirmed);
    assert!(serde_json::from_str::<Order>(r#"{"note": "n", "other": 1}"#).is_err());
}
