//! `serde_json::Value` fields of a derived state: they start as `null` and merge from there, and
//! a JSON messages update gets its ids when it is made, so merges and replays are exact.

use agentstate::Journal;
use agentstate::Update;
use agentstate::{AgentState, State};
use serde_json::{json, Value};

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[agent_state(extensible)]
struct Notebook {
    #[reducer(append)]
    notes: Value,
    #[reducer(merge)]
    facts: Value,
    #[reducer(add_messages)]
    messages: Value,
    #[reducer(replace_messages)]
    shown: Value,
}

fn user_message(text: &str) -> Value {
    json!([{"role": "user", "content": [{"type": "text", "text": text}]}])
}

#[test]
fn value_fields_merge_from_their_default() {
    let mut state = Notebook::default();
    assert!(state.notes.is_null());
    state
        .merge(
            NotebookUpdate::default()
                .notes(json!(["a"]))
                .facts(json!({"k": 1})),
        )
        .unwrap();
    state
        .merge(NotebookUpdate::default().notes(json!(["b"])))
        .unwrap();
    assert_eq!(state.notes, json!(["a", "b"]));
    assert_eq!(state.facts, json!({"k": 1}));
}

#[test]
fn a_json_messages_update_gets_its_ids_when_it_is_made() {
    let update = NotebookUpdate::default()
        .messages(user_message("hi"))
        .shown(user_message("shown"));
    let id = update.messages.as_ref().unwrap()[0]["message_id"].clone();
    assert!(id.is_string(), "the setter gave the message an id");
    assert!(update.shown.as_ref().unwrap()[0]["message_id"].is_string());

    // add_messages is declared round-trip idempotent: merging the update twice adds it once.
    let mut state = Notebook::default();
    state.merge(update.clone()).unwrap();
    let once = state.clone();
    state.merge(update.clone()).unwrap();
    assert_eq!(state, once);
    assert_eq!(state.messages[0]["message_id"], id);

    // from_json prepares too, and a journal replays the recorded updates to an equal state.
    let parsed = NotebookUpdate::from_json(json!({"messages": user_message("again")})).unwrap();
    assert!(parsed.messages.as_ref().unwrap()[0]["message_id"].is_string());
    let mut journal = Journal::new(Notebook::default());
    journal.merge(update).unwrap();
    journal.merge(parsed).unwrap();
    let saved = serde_json::to_string(journal.updates()).unwrap();
    let updates: Vec<NotebookUpdate> = serde_json::from_str(&saved).unwrap();
    let rebuilt = Journal::replay(Notebook::default(), updates).unwrap();
    assert_eq!(&rebuilt, journal.state());
    assert_eq!(rebuilt.messages.as_array().unwrap().len(), 2);
}

#[test]
fn an_update_built_otherwise_can_be_prepared_by_hand() {
    let mut update = NotebookUpdate {
        messages: Some(user_message("literal")),
        ..Default::default()
    };
    assert!(update.messages.as_ref().unwrap()[0]
        .get("message_id")
        .is_none());
    update.prepare();
    let prepared = update.clone();
    update.prepare();
    assert_eq!(update, prepared, "preparing twice changes nothing");
    let mut state = Notebook::default();
    state.merge(update.clone()).unwrap();
    state.merge(update).unwrap();
    assert_eq!(state.messages.as_array().unwrap().len(), 1);
}

/// A state extending `Notebook`, and one holding it as a nested state.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Journaled {
    #[agent_state(base)]
    #[serde(flatten)]
    notebook: Notebook,
    title: String,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Desk {
    #[reducer(nested)]
    notebook: Notebook,
}

#[test]
fn a_base_and_a_nested_states_json_messages_get_their_ids_when_the_update_is_made() {
    // from_json of the extension prepares the base's part.
    let parsed =
        JournaledUpdate::from_json(json!({"messages": user_message("hi"), "title": "t"})).unwrap();
    let id = &parsed.notebook.messages.as_ref().unwrap()[0]["message_id"];
    assert!(id.is_string(), "the base's messages got an id: {parsed:?}");
    let mut state = Journaled::default();
    state.merge(parsed.clone()).unwrap();
    let once = state.clone();
    state.merge(parsed).unwrap();
    assert_eq!(state, once, "merging the same update twice adds nothing");

    // The base's setters, on the extension's update.
    let set = JournaledUpdate::default().messages(user_message("set"));
    assert!(set.notebook.messages.as_ref().unwrap()[0]["message_id"].is_string());

    // A nested state's part.
    let nested = DeskUpdate::from_json(json!({"notebook": {"shown": user_message("s")}})).unwrap();
    let inner = nested.notebook.as_ref().unwrap();
    assert!(inner.shown.as_ref().unwrap()[0]["message_id"].is_string());
}
