//! # Tutorial
//!
//! Short chapters, each with an example that runs (they are this crate's doctests). The
//! derive's full reference is [`_derive`](crate::_derive).
//!
//! 1. [A state](#1-a-state)
//! 2. [Updates](#2-updates)
//! 3. [Merges are atomic](#3-merges-are-atomic)
//! 4. [Node outputs and tool results](#4-node-outputs-and-tool-results)
//! 5. [Parallel steps and fan-in](#5-parallel-steps-and-fan-in)
//! 6. [Extending AgentFlow's `AgentState`](#6-extending-agentflows-agentstate)
//! 7. [Replay and durable threads](#7-replay-and-durable-threads)
//! 8. [The context window](#8-the-context-window)
//! 9. [Providers](#9-providers)
//! 10. [AG-UI and runtime schemas](#10-ag-ui-and-runtime-schemas)
//!
//! ## 1. A state
//!
//! A state is a struct whose fields each declare, with a *reducer*, how a node's partial update
//! merges into them (`Annotated[list[str], operator.add]` in Python). A field without an
//! attribute is `last_write_wins`. The derive generates the update type, `<Name>Update`, with a
//! setter per field.
//!
//! ```
//! use agentstate::{AgentState, State};
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Research {
//!     #[reducer(append)]
//!     notes: Vec<String>,
//!     #[reducer(bounded_append(max_len = 3))]
//!     recent: Vec<u32>,
//!     title: String,
//! }
//!
//! let mut state = Research::default();
//! state.merge(ResearchUpdate::default().notes(vec!["first".into()]).title("Draft"))?;
//! state.merge(ResearchUpdate::default().notes(vec!["second".into()]).recent(vec![1, 2, 3, 4]))?;
//! assert_eq!(state.notes, ["first", "second"]); // appended
//! assert_eq!(state.recent, [2, 3, 4]); // bounded
//! assert_eq!(state.title, "Draft"); // untouched by the second update
//! # Ok::<(), agentstate::Error>(())
//! ```
//!
//! A reducer that does not fit its field (`append` on a `String`), a misspelled reducer or a bad
//! parameter (`max_len = 0`) does not compile; the error names the field and the reducer.
//!
//! ## 2. Updates
//!
//! An update has one optional entry per field: `None` leaves the field alone. It is built with
//! setters, or read from JSON (an LLM's tool arguments, an HTTP body, a Python node) with
//! [`Update::from_json`](crate::update::Update::from_json) or
//! [`State::apply_json`](crate::State::apply_json): an unknown key is an error with "did you
//! mean" (LangGraph drops it silently), a value that does not fit names the field and its JSON
//! path. `from_json_lenient` / `apply_json_lenient` ignore unknown keys and return them.
//!
//! An *Overwrite* replaces a field's value, bypassing its reducer: the way to clear an
//! `append` list. In JSON it is LangGraph's `{"field": {"__overwrite__": value}}`.
//!
//! `a.then(b)` is one update whose merge equals merging `a` then `b`.
//!
//! ```
//! use agentstate::Update;
//! use agentstate::{AgentState, State};
//! use serde_json::json;
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Cart {
//!     #[reducer(append)]
//!     items: Vec<String>,
//!     confirmed: bool,
//! }
//!
//! let mut cart = Cart::default();
//! cart.apply_json(json!({"items": ["tea"], "confirmed": false}))?;
//!
//! let err = cart.apply_json(json!({"itmes": ["cake"]})).unwrap_err();
//! assert_eq!(err.category(), "state_validation_error");
//! assert_eq!(err.to_string(), "field `itmes` is not a field of this state; did you mean `items`?");
//!
//! let both = CartUpdate::default().items(vec!["cake".into()]).then(CartUpdate::default().confirmed(true))?;
//! cart.merge(both)?;
//! assert_eq!((cart.items.len(), cart.confirmed), (2, true));
//!
//! cart.merge(CartUpdate::default().overwrite_items(vec![]))?; // typed Overwrite
//! assert!(cart.items.is_empty());
//! cart.merge(CartUpdate::from_json(json!({"items": {"__overwrite__": ["water"]}}))?)?;
//! assert_eq!(cart.items, ["water"]);
//! # Ok::<(), agentstate::Error>(())
//! ```
//!
//! ## 3. Merges are atomic
//!
//! [`State::merge`](crate::State::merge) first lets every field's reducer *plan* its part
//! (everything that can fail, reading only), and applies the plans only when all succeeded: a
//! failed merge leaves the state exactly as it was, without cloning it. An
//! [`Error`](crate::Error) is one sentence naming the field and the reducer, and
//! [`category()`](crate::Error::category) gives its OpenArmature category
//! (`conflicting_reducers`, `reducer_configuration_invalid`, `reducer_error`,
//! `state_validation_error`).
//!
//! ```
//! use agentstate::{AgentState, State};
//!
//! fn non_negative(_current: &i64, update: i64) -> Result<i64, String> {
//!     if update < 0 { Err(format!("{update} is negative")) } else { Ok(update) }
//! }
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Account {
//!     #[reducer(append)]
//!     log: Vec<String>,
//!     #[reducer(with = non_negative)]
//!     balance: i64,
//! }
//!
//! # fn main() {
//! let mut account = Account::default();
//! let err = account
//!     .merge(AccountUpdate::default().log(vec!["withdraw 40".into()]).balance(-40))
//!     .unwrap_err();
//! assert_eq!(err.category(), "reducer_error");
//! assert_eq!(err.to_string(), "reducer `non_negative` failed on field `balance`: -40 is negative");
//! assert!(account.log.is_empty(), "nothing of the update was applied");
//! # }
//! ```
//!
//! ## 4. Node outputs and tool results
//!
//! A node returns a [`NodeOutput`](crate::output::NodeOutput): messages, a partial update, a
//! [`ToolResult`](crate::output::ToolResult), several of those, or nothing, each by `.into()`;
//! [`State::apply_output`](crate::State::apply_output) applies it atomically. Messages go into
//! the state's messages field through its reducer (`add_messages` on AgentFlow's
//! `AgentState`), so a tool result's update cannot wipe the conversation and its tool message
//! is always appended. A state of your own names its messages field with
//! `#[agent_state(messages = field)]`.
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::{NodeOutput, ToolResult};
//! use agentstate::{AgentState, State};
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! #[agent_state(messages = history)]
//! pub struct Chat {
//!     #[reducer(add_messages)]
//!     history: Vec<Message>,
//!     lookups: u32,
//! }
//!
//! fn answer(_: &Chat) -> NodeOutput<ChatUpdate> {
//!     vec![Message::text_message("Here is your order.", Role::Assistant)].into()
//! }
//! fn tool(state: &Chat) -> NodeOutput<ChatUpdate> {
//!     let update = ChatUpdate::default().lookups(state.lookups + 1);
//!     ToolResult::new(Message::tool_result("call_1", "in stock"), update).into()
//! }
//!
//! # fn main() -> Result<(), agentstate::Error> {
//! let mut chat = Chat::default();
//! chat.apply_output(tool(&chat))?;
//! chat.apply_output(answer(&chat))?;
//! assert_eq!(chat.history.len(), 2);
//! assert_eq!(chat.history[0].role, Role::Tool);
//! assert_eq!(chat.lookups, 1);
//! # Ok(())
//! # }
//! ```
//!
//! ## 5. Parallel steps and fan-in
//!
//! [`State::merge_parallel`](crate::State::merge_parallel) applies the updates of a step's
//! parallel branches atomically, in branch order, never completion order (LangGraph's
//! semantics). [`FanIn::Strict`](crate::update::FanIn::Strict) also rejects two branches
//! writing one `last_write_wins` field (LangGraph's `INVALID_CONCURRENT_GRAPH_UPDATE`).
//!
//! ```
//! use agentstate::FanIn;
//! use agentstate::{AgentState, State};
//! use std::collections::BTreeMap;
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Trip {
//!     #[reducer(append)]
//!     cities: Vec<String>,
//!     #[reducer(merge)]
//!     forecasts: BTreeMap<String, String>,
//!     summary: String,
//! }
//!
//! let branch = |city: &str, forecast: &str| {
//!     TripUpdate::default()
//!         .cities(vec![city.to_string()])
//!         .forecasts(BTreeMap::from([(city.to_string(), forecast.to_string())]))
//!         .summary(format!("{city} done"))
//! };
//! let mut trip = Trip::default();
//! trip.merge_parallel([branch("Oslo", "dry"), branch("Bergen", "rain")], FanIn::Ordered)?;
//! assert_eq!(trip.cities, ["Oslo", "Bergen"]);
//! assert_eq!(trip.summary, "Bergen done"); // the last branch wins a last_write_wins field
//!
//! let err = trip
//!     .merge_parallel([branch("Rome", "sun"), branch("Paris", "fog")], FanIn::Strict)
//!     .unwrap_err();
//! assert_eq!(err.category(), "state_validation_error");
//! assert_eq!(trip.cities.len(), 2, "nothing of the step was applied");
//! # Ok::<(), agentstate::Error>(())
//! ```
//!
//! ## 6. Extending AgentFlow's `AgentState`
//!
//! [`AgentState`](struct@crate::state::AgentState) is AgentFlow's state (`context` merged with
//! `add_messages`, `context_summary`, `execution_meta`), wire-compatible with it. A state of
//! yours extends it as a Python class would subclass it: the base is a field marked
//! `#[agent_state(base)]` and `#[serde(flatten)]`, the struct derefs to it, and its update takes
//! the base's setters. Add `#[agent_state(deserialize)]` (and derive only serde's `Serialize`)
//! to read the base's keys in the same pass as your own.
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::state::AgentStateUpdateSetters; // the base's setters on OrderStateUpdate
//! use agentstate::{AgentState, State};
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize)]
//! #[agent_state(deserialize)]
//! pub struct OrderState {
//!     #[agent_state(base)]
//!     #[serde(flatten)]
//!     base: agentstate::state::AgentState,
//!     #[reducer(append)]
//!     cart: Vec<String>,
//!     confirmed: bool,
//! }
//!
//! let mut order = OrderState::default();
//! let hello = Message::text_message("Two coffees, please", Role::User);
//! order.merge(OrderStateUpdate::default().context(vec![hello]).cart(vec!["coffee".into(); 2]))?;
//! assert_eq!(order.context.len(), 1); // the base's field, through Deref
//!
//! // The JSON is AgentFlow's, with the extension's fields beside the base's.
//! let json = serde_json::to_value(&order)?;
//! assert_eq!(json["cart"][1], "coffee");
//! assert_eq!(json["context"][0]["role"], "user");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## 7. Replay and durable threads
//!
//! Every merge is a serializable update and merging is deterministic, so the updates a state
//! merged rebuild it exactly: [`Journal`](crate::journal::Journal) records them and replays
//! them.
//!
//! ```
//! use agentstate::Journal;
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//!
//! let mut journal = Journal::new(AgentState::default());
//! journal.merge(AgentStateUpdate::default().context(vec![Message::text_message("hi", Role::User)]))?;
//! let saved = serde_json::to_string(journal.updates()).unwrap();
//!
//! let updates: Vec<AgentStateUpdate> = serde_json::from_str(&saved).unwrap();
//! assert_eq!(&Journal::replay(AgentState::default(), updates)?, journal.state());
//! # Ok::<(), agentstate::Error>(())
//! ```
//!
//! The crate `agentstate-store` keeps such a journal in SQLite or PostgreSQL as a *thread*:
//! appends at the version a writer read (a stale writer gets a conflict and writes nothing),
//! time travel, forks, snapshots, migrations. Its documentation
//! (<https://docs.rs/agentstate-store>, and its `_guide` module) has the running examples;
//! `cargo run --example durable_chat` keeps a chat across runs. A whole graph run kept on such a
//! thread, resumed after a crash, suspended for a person's answer and running its side effects
//! once, is a *durable run*: `agentstate_graph::durable` (feature `store` of `agentstate-graph`,
//! <https://docs.rs/agentstate-graph/latest/agentstate_graph/durable/index.html>), and
//! `cargo run --example approval`.
//!
//! ## 8. The context window
//!
//! A long conversation holds more than a model call can take. A
//! [`ContextIndex`](crate::context::ContextIndex) kept beside the state makes, for each call, a
//! *view* within a budget of tokens, messages or turns: it borrows the messages to send and never
//! rewrites the history, keeps tool calls with their results, and sends the state's summary for
//! what was cut. A [`SummaryPolicy`](crate::context::SummaryPolicy) says when to summarize and
//! how much of the newest history to keep out of it; the
//! [`SummaryRequest`](crate::context::SummaryRequest) it gives lists what to summarize, and the
//! summary (your model call) is recorded as an ordinary update. `view.messages()` is exactly what
//! a call sends: the system messages, the summary, then the history.
//!
//! ```
//! use agentstate::context::{ContextIndex, ContextWindow, Estimate, SummaryPolicy, Threshold};
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate::State;
//!
//! let mut state = AgentState::default();
//! let turns: Vec<Message> = (0..200)
//!     .flat_map(|i| [
//!         Message::text_message(format!("question {i}"), Role::User),
//!         Message::text_message(format!("answer {i}"), Role::Assistant),
//!     ])
//!     .collect();
//! state.merge(AgentStateUpdate::default().context(turns))?;
//!
//! let window = ContextWindow::turns(3);
//! let policy = SummaryPolicy::new()
//!     .trigger(Threshold::Messages(100)) // summarize past 100 unsummarized messages
//!     .keep(Threshold::Messages(6)); // the newest 6 stay out of the summary
//! let mut index = ContextIndex::default();
//! let summary = {
//!     let request = index.summary_request(&state, &window, &policy)?.expect("400 messages");
//!     // Summarize them (here, without a model).
//!     let text = format!("{} earlier messages about questions", request.messages().len());
//!     request.record(text, &Estimate::default(), 500)? // at most 500 tokens
//! };
//! state.merge(summary)?;
//!
//! let view = index.view_state(&state, &window)?;
//! assert_eq!(view.summary(), Some("394 earlier messages about questions"));
//! assert_eq!(view.history_len(), 6);
//! let sent = view.messages(); // the summary (as a system message), then the 6 newest
//! assert_eq!((sent.len(), sent[1].text()), (7, "question 197".to_string()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The [`context`](crate::context) module documents budgets, cut policies (which keep the
//! prompt's prefix stable for provider caches), token counting and calibration.
//!
//! ## 9. Providers
//!
//! [`providers`](crate::providers) turns a [`ModelRequest`](crate::providers::ModelRequest)
//! (model, tools, tool choice, structured output, sampling, reasoning, cache breakpoints) and a
//! conversation into the whole request body of OpenAI Chat, OpenAI Responses, Anthropic or
//! Gemini, with a report of everything a provider could not take as it was, and reads a
//! response back into a [`Message`](crate::message::Message). A parameter a provider lacks is
//! refused with an error rather than dropped. Send the body with the client you use, or call a
//! [`ChatModel`](crate::model::ChatModel): the `client` feature's HTTP clients, or a
//! [`ScriptedModel`](crate::model::ScriptedModel) in tests.
//!
//! ```
//! use agentstate::message::{Message, Role, ToolCall};
//! use agentstate::providers::{Conversation, ModelRequest, Tool};
//! use serde_json::json;
//!
//! let messages = vec![
//!     Message::text_message("Weather in Paris?", Role::User),
//!     Message::text_message("", Role::Assistant)
//!         .with_tool_calls(vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))]),
//!     Message::tool_result("call_1", "Sunny"),
//! ];
//! let request = ModelRequest::builder("gpt-4o")
//!     .tool(Tool::new("get_weather", "The weather in a city.", json!({"type": "object"})))
//!     .build()?;
//! let conversation = Conversation::new(&messages).summary("The user prefers Celsius.");
//! let converted = request.to_openai_chat(conversation)?;
//! assert!(converted.report.is_empty());
//! let body = serde_json::to_value(&converted.request)?;
//! assert_eq!(body["model"], "gpt-4o");
//! assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
//! assert_eq!(body["messages"][0]["role"], "system"); // the summary goes into the system prompt
//! assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["name"], "get_weather");
//! assert_eq!(body["messages"][3]["tool_call_id"], "call_1");
//!
//! // Anthropic requires a maximum of output tokens: refused, not defaulted.
//! assert!(request.to_anthropic(conversation).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## 10. AG-UI and runtime schemas
//!
//! With the feature `ag-ui`, the module `agui` folds an agent run's AG-UI event stream into
//! the chat state a UI renders, exactly as the official TypeScript client does, and turns each
//! merge of a state into the `STATE_DELTA` a front end applies
//! (`cargo run --example agui_stream --features ag-ui`).
//!
//! [`schema`](crate::schema) describes a state's fields at run time, and builds the same
//! description from JSON for configuration-driven agents whose fields are only known then.
