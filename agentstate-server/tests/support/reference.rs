//! The differential harness's graphs for agentstate-server: the same graphs as
//! `tests/reference/graphs.py` for LangGraph's `langgraph dev`, node for node.

use agentstate::message::{Message, Role};
use agentstate::AgentState;
use agentstate_graph::{BoxError, CompileError, Context, Graph, END};
use agentstate_server::{Server, ServerBuilder};
use agentstate_store::{RecordBackend, Store};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// `three`'s, `fail`'s state: a log the nodes append to.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Log {
    #[reducer(append)]
    pub log: Vec<String>,
}

/// `chat`'s state: LangGraph's `add_messages` field.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Chat {
    #[reducer(upsert_messages)]
    pub messages: Vec<Message>,
}

/// `ask`'s state: a log, and the person's answer.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Ask {
    #[reducer(append)]
    pub log: Vec<String>,
    pub answer: Option<serde_json::Value>,
}

/// `slow`'s state: a log, and how long `wait` sleeps (1 s by default).
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Slow {
    #[reducer(append)]
    pub log: Vec<String>,
    pub delay: Option<f64>,
}

/// The error `fail`'s `boom` raises, as Python's `ValueError("boom")`.
#[derive(Debug)]
pub struct ValueError(pub String);

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ValueError {}

fn appends(
    name: &'static str,
) -> impl Fn(Arc<Log>, Context) -> std::future::Ready<Result<LogUpdate, BoxError>> + Clone {
    move |_, _| std::future::ready(Ok(LogUpdate::default().log(vec![name.to_owned()])))
}

/// `a` -> `b` -> `c`, each appending its name to `log`; `a` also writes a custom event.
pub fn three() -> Result<Graph<Log, &'static str>, CompileError> {
    Graph::builder()
        .node("a", |state: Arc<Log>, cx: Context| async move {
            cx.custom("custom", json!({"node": "a", "seen": state.log.len()}));
            Ok::<_, BoxError>(LogUpdate::default().log(vec!["a".to_owned()]))
        })
        .node("b", appends("b"))
        .node("c", appends("c"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
}

/// `reply` answers the last message with `You said: <text>`, written whole.
pub fn chat() -> Result<Graph<Chat, &'static str>, CompileError> {
    Graph::builder()
        .node("reply", |state: Arc<Chat>, _: Context| async move {
            let last = state.messages.last().map(Message::text).unwrap_or_default();
            let answer = Message::text_message(format!("You said: {last}"), Role::Assistant);
            Ok::<_, BoxError>(ChatUpdate::default().messages(vec![answer.into()]))
        })
        .entry("reply")
        .edge("reply", END)
        .build()
}

/// `first` -> `ask` (asks `{"question": "ok?"}`, keeps the answer) -> `last`.
pub fn ask() -> Result<Graph<Ask, &'static str>, CompileError> {
    Graph::builder()
        .node("first", |_: Arc<Ask>, _: Context| async move {
            Ok::<_, BoxError>(AskUpdate::default().log(vec!["first".to_owned()]))
        })
        .node("ask", |_: Arc<Ask>, cx: Context| async move {
            let answer = cx.interrupt(json!({"question": "ok?"}))?;
            Ok::<_, BoxError>(
                AskUpdate::default()
                    .answer(answer)
                    .log(vec!["ask".to_owned()]),
            )
        })
        .node("last", |_: Arc<Ask>, _: Context| async move {
            Ok::<_, BoxError>(AskUpdate::default().log(vec!["last".to_owned()]))
        })
        .entry("first")
        .edge("first", "ask")
        .edge("ask", "last")
        .edge("last", END)
        .build()
}

/// `ok` -> `boom`, which fails with `ValueError("boom")`.
pub fn fail() -> Result<Graph<Log, &'static str>, CompileError> {
    Graph::builder()
        .node("ok", appends("ok"))
        .node("boom", |_: Arc<Log>, _: Context| async move {
            Err::<LogUpdate, _>(ValueError("boom".to_owned()))
        })
        .entry("ok")
        .edge("ok", "boom")
        .edge("boom", END)
        .build()
}

/// `wait` (sleeps `delay` seconds, 1 by default) -> `done`.
pub fn slow() -> Result<Graph<Slow, &'static str>, CompileError> {
    Graph::builder()
        .node("wait", |state: Arc<Slow>, _: Context| async move {
            let delay = state.delay.filter(|d| *d > 0.0).unwrap_or(1.0);
            tokio::time::sleep(Duration::from_secs_f64(delay)).await;
            Ok::<_, BoxError>(SlowUpdate::default().log(vec!["wait".to_owned()]))
        })
        .node("done", |_: Arc<Slow>, _: Context| async move {
            Ok::<_, BoxError>(SlowUpdate::default().log(vec!["done".to_owned()]))
        })
        .entry("wait")
        .edge("wait", "done")
        .edge("done", END)
        .build()
}

/// A server builder with the five graphs, in `langgraph.json`'s order.
pub fn server<B: RecordBackend>(store: &Store<B>) -> ServerBuilder {
    Server::builder(store)
        .assistant("three", three().unwrap().durable(store))
        .assistant("chat", chat().unwrap().durable(store))
        .assistant("ask", ask().unwrap().durable(store))
        .assistant("fail", fail().unwrap().durable(store))
        .assistant("slow", slow().unwrap().durable(store))
}
