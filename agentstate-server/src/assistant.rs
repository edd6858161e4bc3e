//! The erasure of a typed durable graph behind a trait object that speaks JSON.

use agentstate::Update;
use agentstate_graph::durable::{
    Answers, Checkpoint, DurableError, DurableGraph, DurableState, RunStatus,
};
use agentstate_graph::{Emitted, Event, EventFilter, Interrupt, NodeKey, RunError, RunErrorKind};
use agentstate_store::backend::Backend;
use agentstate_store::StoreError;
use futures_util::{Stream, StreamExt};
use serde_json::{json, Map, Value};
use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future (what [`Assistant`]'s methods return).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A run's events as JSON ([`Assistant::run`]); its last item is [`RunEvent::Finished`],
/// [`RunEvent::Suspended`] or [`RunEvent::Failed`]. Dropping it cancels the run.
pub type RunEvents = Pin<Box<dyn Stream<Item = RunEvent> + Send>>;

/// How a run begins.
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    /// A new run, with the run request's `input` (a JSON update of the state), whatever the
    /// thread's last run left (cut short, failed, waiting for answers: it is abandoned, its
    /// committed steps kept). Without an input (`None` or `null`) on a thread whose run did not
    /// finish, that run continues where it stands instead (a suspended one gives its questions
    /// again).
    Input(Option<Value>),
    /// The thread's suspended run resumed with `command.resume`: either an object whose keys
    /// are all ids of open interrupts (an answer each), or one value that answers every open
    /// interrupt.
    Resume(Value),
}

/// How a run goes, beyond how it begins ([`Start`]): a run request's breakpoints and its
/// `command`'s `update` and `goto`. The default: none of them.
///
/// ```
/// use agentstate_server::RunOptions;
///
/// let options = RunOptions::new().interrupt_before(["approve"]).goto(["draft"]);
/// assert_eq!(options.interrupt_before, ["approve"]);
/// assert_eq!(options.goto.as_deref(), Some(&["draft".to_owned()][..]));
/// assert_eq!(RunOptions::default(), RunOptions::new());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RunOptions {
    /// The run suspends before each step that would run one of these nodes (`interrupt_before`;
    /// `*`: every node), beyond the graph's own breakpoints. A run without `input` goes on
    /// past such a stop.
    pub interrupt_before: Vec<String>,
    /// The run suspends after each step that ran one of these nodes (`interrupt_after`; `*`:
    /// every node).
    pub interrupt_after: Vec<String>,
    /// `command.update`: a JSON update of the state merged as the run's input.
    pub update: Option<Value>,
    /// `command.goto`: the nodes the run's first step runs, instead of where the thread's run
    /// stands (or the entry).
    pub goto: Option<Vec<String>>,
    /// `checkpoint_id`: the run starts from this version of the thread, which is first taken
    /// back there ([`Assistant::rewind`]: the checkpoints after it are removed).
    pub checkpoint: Option<u64>,
}

impl RunOptions {
    /// No breakpoints, no command.
    pub fn new() -> Self {
        RunOptions::default()
    }

    /// Sets [`interrupt_before`](RunOptions::interrupt_before).
    #[must_use]
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`interrupt_after`](RunOptions::interrupt_after).
    #[must_use]
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`update`](RunOptions::update).
    #[must_use]
    pub fn update(mut self, update: Value) -> Self {
        self.update = Some(update);
        self
    }

    /// Sets [`goto`](RunOptions::goto).
    #[must_use]
    pub fn goto<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.goto = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// Sets [`checkpoint`](RunOptions::checkpoint).
    #[must_use]
    pub fn checkpoint(mut self, version: u64) -> Self {
        self.checkpoint = Some(version);
        self
    }

    /// Whether it has a `command.update` or `goto`.
    pub fn commands(&self) -> bool {
        self.update.is_some() || self.goto.is_some()
    }
}

/// What happens in a run, as JSON.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunEvent {
    /// The state the run starts from (its input merged; a resumed run's where it stands), its
    /// first event after its start: LangGraph's first `values`.
    Start {
        /// The state.
        values: Value,
    },
    /// The state after a step (LangGraph's `values`).
    Values(Value),
    /// A node's update (LangGraph's `updates`; `null` for none).
    Update {
        /// The node.
        node: String,
        /// Its update.
        update: Value,
    },
    /// A node's custom event (LangGraph's `custom`).
    Custom {
        /// The node.
        node: String,
        /// The event's name.
        name: String,
        /// Its value.
        value: Value,
    },
    /// A node's task started (LangGraph's `tasks` and `debug` modes).
    TaskStarted {
        /// The node.
        node: String,
        /// The step.
        step: u64,
    },
    /// A step was committed: the thread's version after it is a new checkpoint (LangGraph's
    /// `checkpoints` and `debug` modes).
    Committed {
        /// The step.
        step: u64,
        /// The thread's version after it.
        version: u64,
    },
    /// A piece of a model's text answer (LangGraph's `messages` tuples).
    MessageDelta {
        /// The node.
        node: String,
        /// The step.
        step: u64,
        /// The id of the message being streamed.
        message_id: String,
        /// The text.
        delta: String,
    },
    /// A piece of the arguments of a tool call a model is making (AG-UI's `TOOL_CALL_ARGS`;
    /// the first piece of a call starts it).
    ToolCallDelta {
        /// The node.
        node: String,
        /// The id of the message that makes the call.
        message_id: String,
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        name: String,
        /// A piece of the arguments' JSON text.
        delta: String,
    },
    /// The run suspended, waiting for answers: its last event.
    Suspended {
        /// The state before the suspended step.
        values: Value,
        /// The questions.
        interrupts: Vec<Interrupt>,
    },
    /// The run finished: its last event.
    Finished {
        /// The final state.
        values: Value,
    },
    /// The run failed: its last event.
    Failed(AssistantError),
}

/// A thread's state as an assistant reads it ([`Assistant::snapshot`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The state.
    pub values: Value,
    /// The thread's version (LangGraph's checkpoint id, as a string).
    pub version: u64,
    /// The nodes the thread's run runs next (none: it finished).
    pub next: Vec<String>,
    /// The questions it waits for.
    pub interrupts: Vec<Interrupt>,
}

/// A committed step of a thread's runs ([`Assistant::checkpoints`]), with the state after it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointState {
    /// The step: its version, nodes, next nodes, run and time.
    pub checkpoint: Checkpoint,
    /// The state after it.
    pub values: Value,
}

/// Why an assistant refused or failed: a category (the graph's and store's stable names, as
/// `thread_not_found` or `state_validation_error`) and a sentence naming what was wrong; and
/// how the LangGraph API shows it, as LangGraph shows a Python exception's class and text
/// (`{"error": "ValueError", "message": "boom"}`): [`name`](AssistantError::name) and
/// [`detail`](AssistantError::detail).
///
/// A failed node's error is named by its type: the leading name of its `Debug` form (a
/// derived `Debug`'s type or variant name, `ValueError` for `ValueError("boom")`; `Error` for
/// an error that has none, such as a string made a `BoxError`), and its detail is its own
/// `Display`. A run that took too many steps is LangGraph's `GraphRecursionError`, an update
/// that does not merge its `InvalidUpdateError`; any other error is named by its category.
///
/// ```
/// use agentstate_server::AssistantError;
///
/// let error = AssistantError::new("thread_leased", "thread `t-1` is leased by worker `w-2`");
/// assert_eq!((error.name.as_str(), error.detail.as_str()), ("thread_leased", error.message.as_str()));
/// let shown = error.shown_as("ValueError", "boom");
/// assert_eq!((shown.name.as_str(), shown.detail.as_str()), ("ValueError", "boom"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantError {
    /// The stable category.
    pub category: String,
    /// The sentence.
    pub message: String,
    /// The error's name as the API shows it (its `error`).
    pub name: String,
    /// What the API shows as its `message`.
    pub detail: String,
}

impl AssistantError {
    /// An error of `category` saying `message` (shown by the API as its category and that
    /// sentence).
    pub fn new(category: impl Into<String>, message: impl Into<String>) -> Self {
        let (category, message) = (category.into(), message.into());
        AssistantError {
            name: category.clone(),
            detail: message.clone(),
            category,
            message,
        }
    }

    /// The same error, shown by the API as `name` saying `detail`.
    #[must_use]
    pub fn shown_as(mut self, name: impl Into<String>, detail: impl Into<String>) -> Self {
        self.name = name.into();
        self.detail = detail.into();
        self
    }

    /// The error of a failed run, named as the API shows it.
    fn of_run<S>(error: &RunError<S>) -> Self {
        let plain = AssistantError::new(error.category(), error.to_string());
        match (error.kind(), error.category()) {
            (RunErrorKind::Node { error: node, .. }, "node_exception")
            | (RunErrorKind::Edge { error: node, .. }, "edge_exception") => {
                plain.shown_as(type_name(node.as_ref()), node.to_string())
            }
            // The panic's own message: the run says it panicked (`Job::named`).
            (RunErrorKind::Node { error: node, .. }, "run_panicked") => {
                AssistantError::new("run_panicked", node.to_string())
            }
            (RunErrorKind::RecursionLimit { .. }, _) => {
                let detail = plain.message.clone();
                plain.shown_as("GraphRecursionError", detail)
            }
            // LangGraph's `step_timeout` raises Python's `TimeoutError`.
            (RunErrorKind::StepTimeout { .. }, _) => {
                let detail = plain.message.clone();
                plain.shown_as("TimeoutError", detail)
            }
            (RunErrorKind::Merge { .. } | RunErrorKind::ConcurrentWrite { .. }, _) => {
                let detail = plain.message.clone();
                plain.shown_as("InvalidUpdateError", detail)
            }
            _ => plain,
        }
    }
}

/// The name of an error's type: the leading name of its `Debug` form (a derived `Debug`
/// starts with the type's or the variant's name), `Error` if it has none.
fn type_name(error: &(dyn std::error::Error + 'static)) -> String {
    let debug = format!("{error:?}");
    let name: String = debug
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let rest = &debug[name.len()..];
    let starts_well = name.starts_with(|c: char| c.is_ascii_uppercase());
    let ends_well = rest.is_empty() || rest.starts_with('(') || rest.starts_with(" {");
    if starts_well && ends_well {
        name
    } else {
        "Error".to_owned()
    }
}

impl std::fmt::Display for AssistantError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AssistantError {}

impl<S> From<DurableError<S>> for AssistantError {
    fn from(error: DurableError<S>) -> Self {
        match &error {
            DurableError::Run(run) => AssistantError::of_run(run),
            _ => AssistantError::new(error.category(), error.to_string()),
        }
    }
}

impl From<StoreError> for AssistantError {
    fn from(error: StoreError) -> Self {
        AssistantError::new(error.category(), error.to_string())
    }
}

/// A graph the server serves, its state type erased: states, updates and answers as JSON.
/// Implemented for every [`DurableGraph`] whose state has a `Default` (a new thread's state);
/// implement it to serve something else.
///
/// ```
/// use agentstate::AgentState;
/// use agentstate_graph::{Context, Graph, END};
/// use agentstate_server::{Assistant, RunEvent, RunOptions, Start};
/// use agentstate_store::SqliteStore;
/// use futures_util::StreamExt;
/// use std::sync::Arc;
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Count { n: u32 }
///
/// let graph = Graph::builder()
///     .node("add", |s: Arc<Count>, _: Context| async move {
///         Ok::<_, std::convert::Infallible>(CountUpdate::default().n(s.n + 1))
///     })
///     .entry("add")
///     .edge("add", END)
///     .build()?;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
/// let store = SqliteStore::open_in_memory()?;
/// let assistant: Arc<dyn Assistant> = Arc::new(graph.durable(&store));
/// assistant.ensure_thread("t-1").await?;
/// let input = Start::Input(Some(serde_json::json!({"n": 4})));
/// let mut events = assistant.run("t-1", "run-1", input, RunOptions::new()).await?;
/// let mut last = None;
/// while let Some(event) = events.next().await {
///     last = Some(event);
/// }
/// assert_eq!(last, Some(RunEvent::Finished { values: serde_json::json!({"n": 5}) }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Assistant: Send + Sync + 'static {
    /// The graph's nodes, in the order they were added.
    fn nodes(&self) -> Vec<String>;

    /// The graph's entry node.
    fn entry(&self) -> String;

    /// The graph's edges as drawn (`GET /assistants/{id}/graph`): from a node to a node or,
    /// `None`, to the end, and whether a route picks it. None by default (the graph is drawn
    /// from its entry alone); a `DurableGraph`'s are its graph's
    /// ([`Graph::edges`](agentstate_graph::Graph::edges)).
    fn edges(&self) -> Vec<(String, Option<String>, bool)> {
        Vec::new()
    }

    /// The state's JSON Schema (an object with a property per field).
    fn state_schema(&self) -> Value;

    /// The state's field that holds the conversation (agentstate
    /// [`Message`](agentstate::message::Message)s, merged by `add_messages` or
    /// `upsert_messages`), if it has one: the AG-UI endpoint adds a client's new messages to
    /// it, and the `messages` stream modes and AG-UI stream the messages nodes write to it.
    /// None by default; a `DurableGraph`'s is its state's first such field.
    fn messages_field(&self) -> Option<String> {
        None
    }

    /// A state's or an update's JSON as the server shows it (the LangGraph API's values,
    /// updates, state and history; the AG-UI endpoint's state): its message fields as
    /// LangChain's message dicts, as LangGraph's SDKs and `useStream` read them. As it is by
    /// default; a `DurableGraph` converts the fields its state merges with a messages reducer.
    fn wire_values(&self, values: Value) -> Value {
        values
    }

    /// Creates thread `thread` with a new state if it does not exist; returns its version
    /// (where a run that starts now begins: [`rewind`](Assistant::rewind) takes the thread
    /// back there).
    fn ensure_thread<'a>(&'a self, thread: &'a str) -> BoxFuture<'a, Result<u64, AssistantError>>;

    /// Takes thread `thread` back to its version `version`: what was committed after it is
    /// removed, as if it had never been (the `rollback` of a run, a run from an earlier
    /// checkpoint). Refused while a run holds the thread (`thread_leased`), and below a
    /// version a fork or a compaction needs.
    fn rewind<'a>(
        &'a self,
        thread: &'a str,
        version: u64,
    ) -> BoxFuture<'a, Result<(), AssistantError>>;

    /// Creates thread `new_thread` as an independent copy of thread `thread` (LangGraph's
    /// thread copy): its state at every version, its checkpoints (the same versions, steps,
    /// nodes, runs and times) and where its run stands (waiting for answers, cut short), with
    /// nothing shared, so that a run on either, a rewind or a deletion leaves the other as it
    /// was. Refused for a missing thread (`thread_not_found`) and a taken id (`thread_exists`).
    fn copy<'a>(
        &'a self,
        thread: &'a str,
        new_thread: &'a str,
    ) -> BoxFuture<'a, Result<(), AssistantError>>;

    /// Starts run `run_id` on thread `thread` (which exists), as `start` and `options` say.
    /// Refusals found before the run starts (an input that is not an update of the state, no
    /// interrupt to answer, a breakpoint at a node the graph does not have) are the error;
    /// what happens after is in the events.
    fn run<'a>(
        &'a self,
        thread: &'a str,
        run_id: &'a str,
        start: Start,
        options: RunOptions,
    ) -> BoxFuture<'a, Result<RunEvents, AssistantError>>;

    /// Thread `thread`'s state now, or at version `at`.
    fn snapshot<'a>(
        &'a self,
        thread: &'a str,
        at: Option<u64>,
    ) -> BoxFuture<'a, Result<Snapshot, AssistantError>>;

    /// Applies `values` (a JSON update of the state) to thread `thread` (which exists) as if
    /// node `as_node` had returned it, the thread's run then continuing from that node's edge
    /// (LangGraph's `update_state`); without a node, as the node of the thread's last step.
    /// Returns the thread's version after it.
    fn update<'a>(
        &'a self,
        thread: &'a str,
        values: Value,
        as_node: Option<&'a str>,
    ) -> BoxFuture<'a, Result<u64, AssistantError>>;

    /// Thread `thread`'s committed steps, the newest first, at most `limit`, each with its
    /// state.
    fn checkpoints<'a>(
        &'a self,
        thread: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<CheckpointState>, AssistantError>>;

    /// Thread `thread`'s committed steps, the oldest first, without their states (what the
    /// history and the state number their checkpoints by). By default,
    /// [`checkpoints`](Assistant::checkpoints)' without their states; a `DurableGraph` reads
    /// its journal's entries only.
    fn steps<'a>(
        &'a self,
        thread: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, AssistantError>> {
        Box::pin(async move {
            let mut states = self.checkpoints(thread, usize::MAX).await?;
            states.reverse();
            Ok(states.into_iter().map(|s| s.checkpoint).collect())
        })
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    // A stored state serializes (the store keeps it as JSON); `null` is never reached.
    serde_json::to_value(value).unwrap_or(Value::Null)
}

impl<S, K, B> Assistant for DurableGraph<S, K, B>
where
    S: DurableState + Default,
    K: NodeKey,
    B: Backend,
{
    fn nodes(&self) -> Vec<String> {
        self.graph().nodes().map(|k| k.name().to_owned()).collect()
    }

    fn entry(&self) -> String {
        self.graph().entry().name().to_owned()
    }

    fn edges(&self) -> Vec<(String, Option<String>, bool)> {
        self.graph()
            .edges()
            .into_iter()
            .map(|e| {
                let to = e.to.map(|k| k.name().to_owned());
                (e.from.name().to_owned(), to, e.conditional)
            })
            .collect()
    }

    fn state_schema(&self) -> Value {
        let properties: Map<String, Value> = S::schema()
            .fields()
            .iter()
            .map(|field| {
                let mut property = Map::new();
                property.insert(
                    "description".into(),
                    Value::from(format!("merged by `{}`", field.reducer.name)),
                );
                if let Some(default) = &field.default {
                    property.insert("default".into(), default.clone());
                }
                (field.name.clone(), Value::Object(property))
            })
            .collect();
        json!({"type": "object", "properties": properties})
    }

    fn wire_values(&self, values: Value) -> Value {
        crate::messages::outgoing(values, &crate::messages::message_fields::<S>())
    }

    fn messages_field(&self) -> Option<String> {
        S::schema()
            .fields()
            .iter()
            .find(|field| {
                matches!(
                    field.reducer.name.as_str(),
                    "add_messages" | "upsert_messages"
                )
            })
            .map(|field| field.name.clone())
    }

    fn ensure_thread<'a>(&'a self, thread: &'a str) -> BoxFuture<'a, Result<u64, AssistantError>> {
        Box::pin(async move {
            match self.store().info(thread).await {
                Ok(info) => Ok(info.version),
                Err(StoreError::ThreadNotFound { .. }) => {
                    match self.store().create(thread, S::default()).await {
                        Ok(_) => Ok(0),
                        Err(StoreError::ThreadExists { .. }) => {
                            Ok(self.store().info(thread).await?.version)
                        }
                        Err(error) => Err(error.into()),
                    }
                }
                Err(error) => Err(error.into()),
            }
        })
    }

    fn rewind<'a>(
        &'a self,
        thread: &'a str,
        version: u64,
    ) -> BoxFuture<'a, Result<(), AssistantError>> {
        Box::pin(async move {
            // A run of this worker cut short (its future dropped) left its lease: none of its
            // runs is in progress on the thread while the server rewinds it.
            if let Some(lease) = self.store().lease_info(thread).await? {
                if lease.owner == self.worker_id() {
                    self.store().revoke_lease(thread).await?;
                }
            }
            self.store().rewind(thread, version).await?;
            Ok(())
        })
    }

    fn copy<'a>(
        &'a self,
        thread: &'a str,
        new_thread: &'a str,
    ) -> BoxFuture<'a, Result<(), AssistantError>> {
        Box::pin(async move {
            // The thread's journal holds its runs' whole course: a copy of its rows is a
            // copy of where its run stands.
            self.store().copy(thread, new_thread).await?;
            Ok(())
        })
    }

    fn run<'a>(
        &'a self,
        thread: &'a str,
        run_id: &'a str,
        start: Start,
        options: RunOptions,
    ) -> BoxFuture<'a, Result<RunEvents, AssistantError>> {
        Box::pin(async move {
            let filter = EventFilter::NODE_STARTED
                | EventFilter::NODE_FINISHED
                | EventFilter::STEP_FINISHED
                | EventFilter::STEP_COMMITTED
                | EventFilter::EMITTED;
            let this = with_breakpoints(self, thread, &options)?;
            if let Some(version) = options.checkpoint {
                let head = self.store().info(thread).await?.version;
                if version > head {
                    return Err(AssistantError::new(
                        "checkpoint_not_found",
                        format!("run `{run_id}` starts from checkpoint `{version}` of thread `{thread}`, which has none after `{head}`"),
                    ));
                }
                if version < head {
                    Assistant::rewind(self, thread, version).await?;
                }
            }
            let this = &this;
            let incoming = |value: Value, what: &str| {
                let value =
                    crate::messages::incoming(value, &crate::messages::message_fields::<S>());
                S::Update::from_json(value).map_err(|e| {
                    AssistantError::new(
                        e.category(),
                        format!("the {what} of run `{run_id}` on thread `{thread}` is not an update of its state: {e}"),
                    )
                })
            };
            if let (Start::Resume(value), Some(update), None) =
                (&start, &options.update, &options.goto)
            {
                // The answers, and the update committed with them (LangGraph's
                // `Command(resume=..., update=...)`).
                let answers = answers(thread, this.status(thread).await?, value.clone())?;
                let update = incoming(update.clone(), "`command.update`")?;
                return Ok(events(
                    this.stream_resume_updating(thread, answers, update)
                        .only(filter),
                ));
            }
            if options.commands() {
                let input = match (&start, options.update) {
                    (Start::Resume(_), _) => return Err(AssistantError::new(
                        "run_state_invalid",
                        format!("run `{run_id}` on thread `{thread}` gives both `command.resume` and `command.goto`; this server takes one of them: answer the interrupt, or go to the nodes"),
                    )),
                    (_, Some(update)) => incoming(update, "`command.update`")?,
                    (_, None) => S::Update::default(),
                };
                let goto = match options.goto {
                    Some(goto) => goto,
                    None => pending(this, thread).await?,
                };
                let goto = keys(this, thread, &goto, "`command.goto`")?;
                let stream = this.stream_goto(thread, run_id, input, goto);
                return Ok(events(stream.only(filter)));
            }
            let stream = match start {
                // No input: a run cut short (cancelled, crashed) continues where it stands, a
                // suspended one gives its questions again, as LangGraph's run with a `null`
                // input does; on a thread whose run finished, a new run starts.
                // A run stopped at breakpoints only goes on past them (LangGraph's `input:
                // null` after `interrupt_before`).
                Start::Input(None | Some(Value::Null)) => match this.status(thread).await? {
                    RunStatus::Idle { .. } => {
                        this.stream_superseding(thread, run_id, S::Update::default())
                    }
                    RunStatus::Suspended { interrupts, .. }
                        if interrupts.iter().all(Interrupt::is_breakpoint) =>
                    {
                        let answers = interrupts
                            .iter()
                            .fold(Answers::new(), |a, i| a.answer(&i.id, Value::Null));
                        this.stream_resume(thread, answers)
                    }
                    _ => this.stream_resume(thread, Answers::new()),
                },
                // A new input starts a new run whatever the last one left (LangGraph's).
                Start::Input(Some(value)) => {
                    // Messages in any shape LangGraph's `add_messages` takes.
                    let update = incoming(value, "input")?;
                    this.stream_superseding(thread, run_id, update)
                }
                Start::Resume(value) => {
                    let answers = answers(thread, this.status(thread).await?, value)?;
                    this.stream_resume(thread, answers)
                }
            };
            Ok(events(stream.only(filter)))
        })
    }

    fn snapshot<'a>(
        &'a self,
        thread: &'a str,
        at: Option<u64>,
    ) -> BoxFuture<'a, Result<Snapshot, AssistantError>> {
        Box::pin(async move {
            if let Some(version) = at {
                let values = to_json(&self.state_at(thread, version).await?);
                let next = self
                    .checkpoints(thread)
                    .await?
                    .into_iter()
                    .find(|c| c.version == version)
                    .map(|c| c.next)
                    .unwrap_or_default();
                return Ok(Snapshot {
                    values,
                    version,
                    next,
                    interrupts: Vec::new(),
                });
            }
            let loaded = self.store().load::<S>(thread).await?;
            let (next, interrupts) = match self.status(thread).await? {
                RunStatus::Running { next, .. } => (next, Vec::new()),
                RunStatus::Suspended { interrupts, .. } => {
                    let mut next: Vec<String> = Vec::new();
                    if interrupts
                        .iter()
                        .any(|i| i.payload["breakpoint"] == "after")
                    {
                        // Stopped after a step: the next step's nodes, as it committed them.
                        next = DurableGraph::checkpoints(self, thread)
                            .await?
                            .pop()
                            .map(|c| c.next)
                            .unwrap_or_default();
                    }
                    for i in &interrupts {
                        if i.payload["breakpoint"] != "after" && !next.contains(&i.step_node) {
                            next.push(i.step_node.clone());
                        }
                    }
                    // Breakpoints are stops, not questions (LangGraph shows none for them).
                    let asked = interrupts
                        .into_iter()
                        .filter(|i| !i.is_breakpoint())
                        .collect();
                    (next, asked)
                }
                _ => (Vec::new(), Vec::new()),
            };
            Ok(Snapshot {
                values: to_json(&loaded.state),
                version: loaded.version,
                next,
                interrupts,
            })
        })
    }

    fn update<'a>(
        &'a self,
        thread: &'a str,
        values: Value,
        as_node: Option<&'a str>,
    ) -> BoxFuture<'a, Result<u64, AssistantError>> {
        Box::pin(async move {
            let values = crate::messages::incoming(values, &crate::messages::message_fields::<S>());
            let update = S::Update::from_json(values).map_err(|e| {
                AssistantError::new(
                    e.category(),
                    format!("the values of the update of thread `{thread}` are not an update of its state: {e}"),
                )
            })?;
            let last = DurableGraph::checkpoints(self, thread)
                .await?
                .into_iter()
                .rev()
                .find_map(|c| c.nodes.last().cloned());
            let Some(name) = as_node.map(str::to_owned).or(last) else {
                return Err(AssistantError::new(
                    "run_state_invalid",
                    format!("thread `{thread}` has no step yet, so its update must name the node it is made as (`as_node`)"),
                ));
            };
            let Some(node) = self.graph().nodes().find(|k| k.name() == name).cloned() else {
                return Err(AssistantError::new(
                    "run_state_invalid",
                    format!("the update of thread `{thread}` is made as node `{name}`, which the graph does not have (its nodes: {})", self.nodes().join(", ")),
                ));
            };
            self.update_as(thread, node, update).await?;
            Ok(self.store().info(thread).await?.version)
        })
    }

    fn checkpoints<'a>(
        &'a self,
        thread: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<CheckpointState>, AssistantError>> {
        Box::pin(async move {
            let all = DurableGraph::checkpoints(self, thread).await?;
            let mut states = Vec::new();
            for c in all.into_iter().rev().take(limit) {
                let values = to_json(&self.state_at(thread, c.version).await?);
                states.push(CheckpointState {
                    checkpoint: c,
                    values,
                });
            }
            Ok(states)
        })
    }

    fn steps<'a>(
        &'a self,
        thread: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, AssistantError>> {
        Box::pin(async move { Ok(DurableGraph::checkpoints(self, thread).await?) })
    }
}

/// The graph's nodes named `names` (`*`: every node).
fn keys<S: DurableState + Default, K: NodeKey, B: Backend>(
    graph: &DurableGraph<S, K, B>,
    thread: &str,
    names: &[String],
    what: &str,
) -> Result<Vec<K>, AssistantError> {
    if names.iter().any(|n| n == "*") {
        return Ok(graph.graph().nodes().cloned().collect());
    }
    names
        .iter()
        .map(|name| {
            graph.graph().nodes().find(|k| k.name() == name).cloned().ok_or_else(|| {
                AssistantError::new(
                    "run_state_invalid",
                    format!(
                        "the {what} of a run on thread `{thread}` names node `{name}`, which the graph does not have (its nodes: {})",
                        Assistant::nodes(graph).join(", ")
                    ),
                )
            })
        })
        .collect()
}

/// This graph with the run's breakpoints added (a clone: the same worker).
fn with_breakpoints<S: DurableState + Default, K: NodeKey, B: Backend>(
    graph: &DurableGraph<S, K, B>,
    thread: &str,
    options: &RunOptions,
) -> Result<DurableGraph<S, K, B>, AssistantError> {
    let before = keys(
        graph,
        thread,
        &options.interrupt_before,
        "`interrupt_before`",
    )?;
    let after = keys(graph, thread, &options.interrupt_after, "`interrupt_after`")?;
    Ok(graph
        .clone()
        .interrupt_before(before)
        .interrupt_after(after))
}

/// The nodes thread `thread`'s run runs next: none if it finished, the step it stands
/// before (cut short, or stopped at breakpoints). A run waiting for answers is refused: a
/// command without `resume` does not answer it.
async fn pending<S: DurableState + Default, K: NodeKey, B: Backend>(
    graph: &DurableGraph<S, K, B>,
    thread: &str,
) -> Result<Vec<String>, AssistantError> {
    match graph.status(thread).await? {
        RunStatus::Idle { .. } => Ok(Vec::new()),
        RunStatus::Running { next, .. } => Ok(next),
        RunStatus::Suspended { interrupts, .. }
            if interrupts.iter().all(Interrupt::is_breakpoint) =>
        {
            Ok(Assistant::snapshot(graph, thread, None).await?.next)
        }
        RunStatus::Suspended { interrupts, .. } => Err(AssistantError::new(
            "interrupt_pending",
            format!(
                "thread `{thread}` waits for answers to {}; a command without `resume` cannot go on from there (answer with `command.resume`, or name the nodes with `command.goto`)",
                interrupts.iter().map(|i| format!("`{}`", i.id)).collect::<Vec<_>>().join(", ")
            ),
        )),
        _ => Ok(Vec::new()),
    }
}

/// A durable run's events, erased.
fn events<S: DurableState, K: NodeKey>(
    stream: agentstate_graph::durable::DurableStream<S, K>,
) -> RunEvents {
    Box::pin(stream.filter_map(|event| async move {
        match event {
            Ok(event) => erase(event),
            Err(error) => Some(RunEvent::Failed(error.into())),
        }
    }))
}

/// `command.resume` as answers to thread `thread`'s open interrupts.
fn answers(thread: &str, status: RunStatus, resume: Value) -> Result<Answers, AssistantError> {
    let RunStatus::Suspended { interrupts, .. } = status else {
        return Err(AssistantError::new(
            "interrupt_unknown",
            format!("thread `{thread}` has no interrupt waiting for an answer, so `command.resume` has nothing to answer"),
        ));
    };
    if let Value::Object(map) = &resume {
        if !map.is_empty() && map.keys().all(|k| interrupts.iter().any(|i| &i.id == k)) {
            return Ok(map
                .iter()
                .fold(Answers::new(), |a, (id, v)| a.answer(id, v.clone())));
        }
    }
    Ok(interrupts
        .iter()
        .fold(Answers::new(), |a, i| a.answer(&i.id, resume.clone())))
}

/// A graph event as JSON, if the server streams it.
fn erase<S: DurableState, K: NodeKey>(event: Event<S, K>) -> Option<RunEvent> {
    Some(match event {
        Event::NodeFinished { node, update, .. } => RunEvent::Update {
            node: node.name().to_owned(),
            update: update.map_or(Value::Null, |u| to_json(&*u)),
        },
        // No node made it: the state the run starts from.
        Event::StepFinished { record, state } if record.nodes.is_empty() => RunEvent::Start {
            values: to_json(&*state),
        },
        Event::StepFinished { state, .. } => RunEvent::Values(to_json(&*state)),
        Event::NodeStarted { step, node } => RunEvent::TaskStarted {
            node: node.name().to_owned(),
            step,
        },
        Event::StepCommitted { step, version } => RunEvent::Committed { step, version },
        Event::Emitted {
            step,
            node,
            emitted,
        } => match *emitted {
            Emitted::Custom { name, value } => RunEvent::Custom {
                node: node.to_string(),
                name,
                value,
            },
            Emitted::TextDelta { message_id, delta } => RunEvent::MessageDelta {
                node: node.to_string(),
                step,
                message_id,
                delta,
            },
            Emitted::ToolCallDelta {
                message_id,
                tool_call_id,
                name,
                delta,
            } => RunEvent::ToolCallDelta {
                node: node.to_string(),
                message_id,
                tool_call_id,
                name,
                delta,
            },
            _ => return None,
        },
        Event::RunFinished { state } => RunEvent::Finished {
            values: to_json(&*state),
        },
        Event::RunSuspended { state, interrupts } => RunEvent::Suspended {
            values: to_json(&*state),
            interrupts,
        },
        Event::RunFailed { error } => RunEvent::Failed(AssistantError::of_run(&error)),
        _ => return None,
    })
}
