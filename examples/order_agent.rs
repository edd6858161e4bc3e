//! The seed's OrderState: an AgentState extension whose nodes return messages and partial
//! updates. Run with `cargo run --example order_agent`.

use agentstate::message::{Message, Role, ToolCall};
use agentstate::state::AgentStateUpdateSetters;
use agentstate::{AgentState, State};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;

/// AgentFlow's `class OrderState(AgentState)`, typed.
// `deserialize`: the derive generates `Deserialize`, reading the base's keys in the same pass
// (serde's derive would buffer the whole conversation first).
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize)]
#[agent_state(deserialize)]
pub struct OrderState {
    #[agent_state(base)]
    #[serde(flatten)]
    base: agentstate::state::AgentState,
    order_id: Option<String>,
    #[reducer(append)]
    cart: Vec<BTreeMap<String, u32>>,
    confirmed: bool,
    discount_code: Option<String>,
}

/// A node reads the state and returns a partial update.
type Node = fn(&OrderState) -> OrderStateUpdate;

fn item(sku: &str, qty: u32) -> BTreeMap<String, u32> {
    BTreeMap::from([(sku.to_string(), qty)])
}

/// The user asks for two items.
fn intake(_: &OrderState) -> OrderStateUpdate {
    OrderStateUpdate::default()
        .context(vec![Message::text_message(
            "Two coffees and a croissant, please. Code SPRING10.",
            Role::User,
        )])
        .order_id(Some("ORD-001".to_string()))
}

/// The assistant fills the cart through a tool call.
fn build_cart(_: &OrderState) -> OrderStateUpdate {
    let call = ToolCall::new(
        "call_1",
        "add_to_cart",
        serde_json::json!({"items": ["coffee", "croissant"]}),
    );
    OrderStateUpdate::default()
        .context(vec![
            Message::text_message("Adding them to your cart.", Role::Assistant)
                .with_tool_calls(vec![call]),
            Message::tool_result("call_1", "cart updated"),
        ])
        .cart(vec![item("coffee", 2), item("croissant", 1)])
        .discount_code(Some("SPRING10".to_string()))
}

/// The order is confirmed.
fn confirm(state: &OrderState) -> OrderStateUpdate {
    let items: u32 = state.cart.iter().flat_map(|i| i.values()).sum();
    OrderStateUpdate::default()
        .context(vec![Message::text_message(
            format!(
                "Order {} confirmed: {items} items.",
                state.order_id.as_deref().unwrap_or("?")
            ),
            Role::Assistant,
        )])
        .confirmed(true)
}

fn show(step: &str, state: &OrderState) {
    println!("after {step}:");
    for m in state.context.iter() {
        let role = serde_json::to_value(m.role).unwrap_or_default();
        println!("  {:<9} {}", role.as_str().unwrap_or("?"), m.text());
    }
    println!(
        "  order_id={:?} cart={:?} confirmed={} discount_code={:?} step={}",
        state.order_id, state.cart, state.confirmed, state.discount_code, state.execution_meta.step
    );
}

fn main() -> Result<(), agentstate::Error> {
    let mut state = OrderState::default();
    let nodes: [(&str, Node); 3] = [
        ("intake", intake),
        ("build_cart", build_cart),
        ("confirm", confirm),
    ];
    for (name, node) in nodes {
        state.set_current_node(name);
        let update = node(&state);
        state.merge(update)?;
        state.advance_step();
        show(name, &state);
    }
    state.complete();

    // An update from JSON (a model's tool call, say) with a wrong type or an unknown key never
    // gets in: `from_json` refuses it, naming the field.
    for bad in [json!({"confirmed": "yes"}), json!({"confirmd": true})] {
        let err = OrderStateUpdate::from_json(bad).unwrap_err();
        println!("a malformed update is refused: {err} ({})", err.category());
    }
    println!("status: {:?}", state.execution_meta.status);
    Ok(())
}
