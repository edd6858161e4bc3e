//! The server side: a typed state's merges become STATE_SNAPSHOT / STATE_DELTA events, and
//! folding them on the client reproduces the server's state.
#![cfg(feature = "ag-ui")]

use agentstate::agui::{merge_with_events, state_delta, state_snapshot};
use agentstate::agui::{ChatState, Event, StateStream, StateStreamError};
use agentstate::message::{Message, Role};
use agentstate::reducers::LastWriteWins;
use agentstate::schema::{FieldSchema, Schema};
use agentstate::state::{AgentState, AgentStateUpdate, ExecutionState, ExecutionStatus};
use agentstate::Combine;
use agentstate::{Error, State};
use serde::Serialize;
use serde_json::json;

fn updates() -> Vec<AgentStateUpdate> {
    let mut interrupted = ExecutionState::new("approve");
    interrupted.set_interrupt(
        "approve",
        "needs a human",
        ExecutionStatus::InterruptedBefore,
        None,
    );
    interrupted.advance_step();
    vec![
        AgentStateUpdate::default().context(vec![Message::text_message(
            "Book a flight to Lima",
            Role::User,
        )
        .with_id("u1")]),
        AgentStateUpdate::default()
            .context(vec![
                Message::text_message("Which date?", Role::Assistant).with_id("a1")
            ])
            .context_summary(Some("flight booking".to_owned())),
        AgentStateUpdate::default().execution_meta(interrupted),
        // add_messages drops a known id: this update changes nothing, and its delta is empty.
        AgentStateUpdate::default().context(vec![Message::text_message(
            "Book a flight to Lima",
            Role::User,
        )
        .with_id("u1")]),
        AgentStateUpdate::default().context_summary(None),
    ]
}

#[test]
fn folding_the_streamed_deltas_reproduces_the_server_state() {
    let mut server = StateStream::new(AgentState::default()).unwrap();
    let mut wire = vec![Event::run_started("thread", "run"), server.snapshot()];
    for update in updates() {
        wire.push(server.update(update).unwrap());
    }
    wire.push(Event::run_finished("thread", "run"));

    // Through the wire format, as a front end would receive it.
    let json = serde_json::to_string(&wire).unwrap();
    let mut client = ChatState::new();
    for event in Event::parse_array(&json).unwrap() {
        client.apply(&event);
    }
    assert!(client.errors().is_empty(), "{:?}", client.errors());
    let expected = serde_json::to_value(server.state()).unwrap();
    assert_eq!(client.agent_state(), &expected);
    assert_eq!(server.json(), &expected);
    assert_eq!(expected["context"].as_array().unwrap().len(), 2);
    assert_eq!(expected["execution_meta"]["status"], "interrupted_before");

    // The no-op update produced an empty delta.
    let Event::StateDelta(noop) = &wire[5] else {
        panic!("a delta per update")
    };
    assert!(noop.delta.is_empty());
    // A non-trivial delta is a real patch, not a snapshot in disguise.
    let Event::StateDelta(first) = &wire[2] else {
        panic!("a delta per update")
    };
    assert!(first
        .delta
        .iter()
        .all(|op| op["path"].as_str().unwrap().starts_with("/context")));
}

#[test]
fn a_client_joining_late_catches_up_with_a_snapshot() {
    let mut server = StateStream::new(AgentState::default()).unwrap();
    let mut updates = updates().into_iter();
    for update in updates.by_ref().take(2) {
        server.update(update).unwrap();
    }
    let mut late = ChatState::new();
    late.apply(&Event::run_started("thread", "run"));
    late.apply(&server.snapshot());
    for update in updates {
        late.apply(&server.update(update).unwrap());
    }
    assert!(late.errors().is_empty(), "{:?}", late.errors());
    assert_eq!(
        late.agent_state(),
        &serde_json::to_value(server.into_inner()).unwrap()
    );
}

#[test]
fn merge_with_events_gives_delta_and_snapshot() {
    let mut state = AgentState::default();
    let before = serde_json::to_value(&state).unwrap();
    let events = merge_with_events(
        &mut state,
        AgentStateUpdate::default().context_summary(Some("s".to_owned())),
    )
    .unwrap();
    assert_eq!(
        events.delta,
        Event::state_delta(vec![
            json!({"op": "replace", "path": "/context_summary", "value": "s"})
        ])
    );
    assert_eq!(events.snapshot, state_snapshot(&state).unwrap());
    assert_eq!(
        events.delta,
        state_delta(&before, &serde_json::to_value(&state).unwrap())
    );
}

/// A hand-written state whose merge can fail: a counter that refuses negative updates.
#[derive(Debug, Default, Serialize)]
struct Counter {
    count: i64,
}

impl State for Counter {
    type Update = Option<i64>;
    type Plan = Option<i64>;
    const FIELDS: &'static [&'static str] = &["count"];

    fn plan(&self, update: Option<i64>) -> Result<Option<i64>, Error> {
        match update {
            Some(n) if n < 0 => Err(Error::validation(
                "count",
                format!("expects a non-negative number, got {n}"),
            )),
            other => Ok(other),
        }
    }

    fn apply(&mut self, plan: Option<i64>) {
        if let Some(n) = plan {
            self.count = n;
        }
    }

    fn schema() -> Schema {
        Schema::describe(vec![FieldSchema::of("count", &LastWriteWins)])
    }

    /// Last write wins, one after the other or across parallel branches.
    fn compose(
        first: Option<i64>,
        second: Option<i64>,
        _how: Combine,
    ) -> Result<Option<i64>, Error> {
        Ok(second.or(first))
    }
}

#[test]
fn a_failed_merge_changes_nothing_and_reads_well() {
    let mut server = StateStream::new(Counter::default()).unwrap();
    server.update(Some(3)).unwrap();
    let err = server.update(Some(-1)).unwrap_err();
    assert!(matches!(err, StateStreamError::Update(_)));
    assert_eq!(
        err.to_string(),
        "the update could not be merged: field `count` expects a non-negative number, got -1"
    );
    assert_eq!(server.state().count, 3);
    assert_eq!(server.json(), &json!({"count": 3}));

    let mut counter = Counter::default();
    assert!(merge_with_events(&mut counter, Some(-5)).is_err());
    assert_eq!(counter.count, 0);
}

/// A state declared with the derive macro, as a Rust agent would write it.
mod derived {
    use super::*;
    use agentstate::reducers::HasId;
    use serde::Deserialize;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Todo {
        id: u32,
        title: String,
        done: bool,
    }

    impl HasId for Todo {
        type Id = u32;
        fn id(&self) -> &u32 {
            &self.id
        }
    }

    fn todo(id: u32, title: &str, done: bool) -> Todo {
        Todo {
            id,
            title: title.into(),
            done,
        }
    }

    #[derive(agentstate::AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct Board {
        #[reducer(merge_by_key(key = id))]
        todos: Vec<Todo>,
        #[reducer(bounded_append(max_len = 2))]
        log: Vec<String>,
        title: String,
    }

    #[test]
    fn a_derived_state_streams_to_the_client() {
        let mut server = StateStream::new(Board::default()).unwrap();
        let mut client = ChatState::new();
        client.apply(&Event::run_started("t", "r"));
        client.apply(&server.snapshot());
        for update in [
            BoardUpdate::default()
                .title("Groceries")
                .todos(vec![todo(1, "milk", false), todo(2, "eggs", false)])
                .log(vec!["created".to_string()]),
            BoardUpdate::default()
                .todos(vec![todo(1, "milk", true)])
                .log(vec!["milk done".to_string()]),
            BoardUpdate::default().log(vec!["viewed".to_string()]),
        ] {
            client.apply(&server.update(update).unwrap());
        }
        client.apply(&Event::run_finished("t", "r"));
        assert!(client.errors().is_empty(), "{:?}", client.errors());
        assert_eq!(
            client.agent_state(),
            &json!({
                "todos": [
                    {"id": 1, "title": "milk", "done": true},
                    {"id": 2, "title": "eggs", "done": false}
                ],
                "log": ["milk done", "viewed"],
                "title": "Groceries"
            })
        );
        assert_eq!(
            client.agent_state(),
            &serde_json::to_value(server.state()).unwrap()
        );
    }
}
