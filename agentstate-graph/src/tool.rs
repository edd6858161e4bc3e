//! Typed tools: async functions over an argument type, their definitions for a model request,
//! and a [`ToolSet`] that runs a message's tool calls in parallel.

use crate::effect::{Interrupted, Journal};
use crate::node::{panic_message, BoxError, Context};
use agentstate::message::{ArgumentsError, ContentBlock, Message, ToolCall, ToolResultBlock};
use agentstate::providers::Tool;
use futures_util::{FutureExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use tracing::Instrument;

/// How many tool calls a [`ToolSet`] runs at once unless told otherwise
/// ([`ToolSet::concurrency`]).
pub const DEFAULT_TOOL_CONCURRENCY: usize = 8;

/// The future a [`ToolFn`] returns: the tool's output as JSON, or its error.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, BoxError>> + Send>>;

/// A tool's function, called with its parsed arguments `A` and the node's [`Context`].
///
/// Implemented for every `Fn(A, Context) -> impl Future<Output = Result<O, E>>` with `O:
/// Serialize` (a `String` is sent as it is, anything else as JSON) and `E: Into<BoxError>`:
/// an async function or closure is a tool.
pub trait ToolFn<A>: Send + Sync + 'static {
    /// Calls the tool.
    fn call(&self, args: A, cx: Context) -> ToolFuture;
}

impl<A, F, Fut, O, E> ToolFn<A> for F
where
    F: Fn(A, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Serialize,
    E: Into<BoxError>,
{
    fn call(&self, args: A, cx: Context) -> ToolFuture {
        let future = self(args, cx);
        Box::pin(async move {
            let output = future.await.map_err(Into::into)?;
            serde_json::to_value(output).map_err(|error| {
                BoxError::from(format!("its output does not serialize to JSON: {error}"))
            })
        })
    }
}
type RunFn = dyn Fn(&ToolCall, Context) -> Result<ToolFuture, ArgumentsError> + Send + Sync;
type ErrorText = dyn Fn(&ToolFailure) -> String + Send + Sync;

struct Entry {
    definition: Tool,
    run: Box<RunFn>,
}

/// The tools an agent may call: typed async functions, each with its [`Tool`] definition
/// (name, description, the JSON Schema of its arguments), run by the calls of a model's
/// message.
///
/// A tool is an async function or closure of its arguments and the node's [`Context`]. The
/// arguments are a type that derives `Deserialize` and `schemars::JsonSchema`: its schema is the
/// tool's parameters, and its doc comment the tool's description (or give one:
/// [`tool_described`](ToolSet::tool_described); or the whole definition, for arguments without
/// a derived schema: [`tool_defined`](ToolSet::tool_defined)). It returns `Result<O, E>`: `O`
/// is anything `Serialize` (a `String` is sent as it is, anything else as JSON), `E` any error.
///
/// [`run`](ToolSet::run) runs a message's calls in parallel (at most
/// [`concurrency`](ToolSet::concurrency) at once) and returns one tool-result message per call,
/// in the order of the calls whatever order they finish in. A call that cannot succeed does not
/// stop the run: bad arguments, an unknown tool, the tool's error and its panic each become a
/// failed tool result (`is_error`, status `failed`) whose text the model reads and corrects, in
/// the words of LangGraph's `ToolNode` ([`ToolFailure::default_text`]; replace them with
/// [`error_text`](ToolSet::error_text)).
///
/// **Each tool call runs once in a durable run.** A call is an effect keyed by its call id (not
/// its place in the message): once the tool returned (its output, its error or its panic), the
/// call's result message is journaled, each call as it finishes, whatever order they finish in.
/// When the node runs again (its worker crashed and another took the run over, the step failed
/// and was resumed, a [`RetryPolicy`](crate::layer::RetryPolicy) called it again, a question
/// was answered), a call whose result is journaled is not run: its recorded message is
/// returned. Only a call in flight when its worker crashed (run, its result not journaled yet)
/// runs again (once for that crash), with the same idempotency key
/// ([`Context::idempotency_key`], `{run id}:{step}.{task}/call:{call id}`): pass it to the
/// service that does the work, and the work is done once. A call that did not reach its tool
/// (an unknown tool, bad arguments) or asked a question is not journaled. A result that cannot
/// be journaled (the run's lease was taken over, the database failed) is returned all the same:
/// the step's commit keeps it or fails, and then the call counts as in flight. Outside a
/// durable run (no journal) every call simply runs, each time it is asked for.
///
/// Each call gets the node's context, apart from the others': in a durable run the
/// [`effect`](Context::effect)s a tool asks for are journaled under the call's place in the
/// message, so a call in flight that runs again gets the results its effects recorded; its
/// [`interrupt`](Context::interrupt) asks a person, and the node returns the first question in
/// call order ([`Interrupted`]) once every call has finished. A question is not a failure: it
/// suspends the durable run, which runs the node again when it is resumed with the answer:
/// the calls that finished return their recorded results, the one that asked runs from its
/// start (so keep its side effects before the question in `cx.effect`).
///
/// ```
/// use agentstate::message::{Message, Role, ToolCall};
/// use agentstate_graph::{BoxError, Context, ToolSet};
/// use serde_json::json;
///
/// /// The weather in a city today.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Weather {
///     /// The city's name.
///     city: String,
/// }
///
/// async fn weather(args: Weather, _: Context) -> Result<String, BoxError> {
///     match args.city.as_str() {
///         "Atlantis" => Err(format!("no weather station in {}", args.city).into()),
///         city => Ok(format!("sunny in {city}")),
///     }
/// }
///
/// let tools = ToolSet::new().tool("get_weather", weather);
///
/// // The definition for a model request: the schema and description come from `Weather`.
/// let definition = &tools.tools()[0];
/// assert_eq!(definition.name, "get_weather");
/// assert_eq!(definition.description, "The weather in a city today.");
/// assert_eq!(definition.parameters["required"], json!(["city"]));
///
/// // A model's message with four calls: each gets a result, in call order.
/// let ask = Message::text_message("", Role::Assistant).with_tool_calls(vec![
///     ToolCall::new("c1", "get_weather", json!({"city": "Oslo"})),
///     ToolCall::new("c2", "get_weather", json!({"town": "Oslo"})),
///     ToolCall::new("c3", "get_time", json!({})),
///     ToolCall::new("c4", "get_weather", json!({"city": "Atlantis"})),
/// ]);
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let results = tools.run(ask.tool_calls(), &Context::detached("tools")).await?;
/// let texts: Vec<String> = results.iter().map(Message::text).collect();
/// assert_eq!(texts, [
///     "sunny in Oslo",
///     "Error: the arguments of call `c2` to tool `get_weather` do not fit: missing field `city` \
///      at line 1 column 16\n Please fix your mistakes.",
///     "Error: get_time is not a valid tool, try one of [get_weather].",
///     "Error: tool `get_weather` failed: no weather station in Atlantis\n Please fix your mistakes.",
/// ]);
/// assert!(results[1].tool_results().all(|r| r.is_error));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A name given twice: calls go to the first tool of that name, and [`tools`](ToolSet::tools)
/// lists both, so that a request built from them is refused
/// ([`ModelRequestBuilder::build`](agentstate::providers::ModelRequestBuilder::build): "two
/// tools are named ...").
#[derive(Clone)]
pub struct ToolSet {
    entries: Vec<Arc<Entry>>,
    concurrency: usize,
    error_text: Option<Arc<ErrorText>>,
}

impl Default for ToolSet {
    fn default() -> Self {
        ToolSet::new()
    }
}

impl ToolSet {
    /// An empty set, running up to [`DEFAULT_TOOL_CONCURRENCY`] calls at once.
    pub fn new() -> Self {
        ToolSet {
            entries: Vec::new(),
            concurrency: DEFAULT_TOOL_CONCURRENCY,
            error_text: None,
        }
    }

    /// Adds the tool `name`: `run` called with the arguments parsed into `A`, whose JSON Schema
    /// is the tool's parameters and whose doc comment (the schema's `description`) is the
    /// tool's description (a type without one gives an empty description: prefer
    /// [`tool_described`](ToolSet::tool_described) then). The schema's root `title` and
    /// `description` are taken out of the parameters.
    pub fn tool<A>(self, name: impl Into<String>, run: impl ToolFn<A>) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    {
        self.tool_defined(definition_of::<A>(name.into(), None), run)
    }

    /// Adds the tool `name` with this description; its parameters are `A`'s JSON Schema (its
    /// root `title` and `description` taken out).
    ///
    /// ```
    /// use agentstate_graph::{BoxError, Context, ToolSet};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Order { id: u32 }
    ///
    /// let tools = ToolSet::new().tool_described(
    ///     "cancel_order",
    ///     "Cancels an order that has not shipped.",
    ///     |order: Order, _: Context| async move { Ok::<_, BoxError>(format!("order {} cancelled", order.id)) },
    /// );
    /// assert_eq!(tools.tools()[0].description, "Cancels an order that has not shipped.");
    /// assert_eq!(tools.tools()[0].parameters["properties"]["id"]["type"], "integer");
    /// ```
    pub fn tool_described<A>(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
        run: impl ToolFn<A>,
    ) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    {
        let definition = definition_of::<A>(name.into(), Some(description.into()));
        self.tool_defined(definition, run)
    }

    /// Adds a tool with a definition of your own (a hand-written schema, a strict tool); its
    /// arguments are parsed into `A` (`serde_json::Value` takes any).
    ///
    /// ```
    /// use agentstate::providers::Tool;
    /// use agentstate_graph::{BoxError, Context, ToolSet};
    /// use serde_json::{json, Value};
    ///
    /// let echo = Tool::new("echo", "Says it back.", json!({"type": "object"})).strict(true);
    /// let tools = ToolSet::new().tool_defined(echo, |args: Value, _: Context| async move {
    ///     Ok::<_, BoxError>(args)
    /// });
    /// assert!(tools.tools()[0].strict);
    /// ```
    pub fn tool_defined<A>(mut self, definition: Tool, run: impl ToolFn<A>) -> Self
    where
        A: DeserializeOwned + Send + 'static,
    {
        let run = move |call: &ToolCall, cx: Context| -> Result<ToolFuture, ArgumentsError> {
            Ok(run.call(call.arguments::<A>()?, cx))
        };
        self.entries.push(Arc::new(Entry {
            definition,
            run: Box::new(run),
        }));
        self
    }

    /// Runs at most `limit` calls at once (at least 1: 0 is taken as 1).
    pub fn concurrency(mut self, limit: usize) -> Self {
        self.concurrency = limit.max(1);
        self
    }

    /// The text of a failed call's result, in place of [`ToolFailure::default_text`]
    /// (LangGraph's `handle_tool_errors` given a function).
    ///
    /// ```
    /// use agentstate::message::ToolCall;
    /// use agentstate_graph::{Context, ToolSet};
    ///
    /// let tools = ToolSet::new().error_text(|failure| format!("{} failed ({})", failure.call_id(), failure.category()));
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let result = tools.call(&ToolCall::new("c1", "nope", serde_json::json!({})), &Context::detached("tools")).await.unwrap();
    /// assert_eq!(result.text(), "c1 failed (unknown_tool)");
    /// # });
    /// ```
    pub fn error_text(
        mut self,
        text: impl Fn(&ToolFailure) -> String + Send + Sync + 'static,
    ) -> Self {
        self.error_text = Some(Arc::new(text));
        self
    }

    /// The tools' definitions, in the order they were added: what a
    /// [`ModelRequest`](agentstate::providers::ModelRequest) offers the model
    /// (`ModelRequest::builder(model).tools(set.tools())`).
    pub fn tools(&self) -> Vec<Tool> {
        self.entries.iter().map(|e| e.definition.clone()).collect()
    }

    /// The definition of the tool `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.entry(name).map(|e| &e.definition)
    }

    /// The tools' names, in the order they were added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.definition.name.as_str())
    }

    /// How many tools the set has.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the set has no tool.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&self, name: &str) -> Option<&Arc<Entry>> {
        self.entries.iter().find(|e| e.definition.name == name)
    }

    /// Runs `calls` in parallel (at most [`concurrency`](ToolSet::concurrency) at once), each
    /// with its own part of `cx` (its effects and questions apart from the others'), and
    /// returns their tool-result messages in the order of `calls`. A call that fails gives a
    /// failed result the model can read; the only error is a tool's question
    /// ([`Interrupted`], the first in call order), which the node returns with `?` to suspend
    /// its durable run.
    ///
    /// In a durable run each call is an effect keyed by its call id (see the type's
    /// documentation): a call whose result is journaled is not run again. Calls that share an
    /// id are told apart by their order among those of that id.
    pub async fn run(&self, calls: &[ToolCall], cx: &Context) -> Result<Vec<Message>, Interrupted> {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        // Collected first: a stream holding the closure would make this future `Send` only
        // for some lifetimes, which a node's future cannot be.
        let calls: Vec<_> = calls
            .iter()
            .enumerate()
            .map(|(place, call)| {
                let repeat = seen.entry(call.id()).or_insert(0);
                let once = Once::of(call, *repeat, cx);
                *repeat += 1;
                self.call_once(call, once, cx.nested(&format!("t{place}")))
            })
            .collect();
        let results: Vec<Result<Message, Interrupted>> = futures_util::stream::iter(calls)
            .buffered(self.concurrency)
            .collect()
            .await;
        results.into_iter().collect()
    }

    /// Runs one call with `cx` as it is, and returns its tool-result message (a failed one if
    /// the call failed), or the tool's question. In a durable run the call is an effect keyed
    /// by its id, as in [`run`](ToolSet::run): its recorded result is returned if it has one.
    /// A node that runs several calls itself gives each its own context, as
    /// [`run`](ToolSet::run) does, so that the effects the tools ask for are told apart.
    pub async fn call(&self, call: &ToolCall, cx: &Context) -> Result<Message, Interrupted> {
        self.call_once(call, Once::of(call, 0, cx), cx.clone())
            .await
    }

    /// Runs `call` once: its recorded result if `once` has one, else the tool, whose result
    /// is then journaled. `cx` is the tool's context.
    async fn call_once(
        &self,
        call: &ToolCall,
        once: Once,
        cx: Context,
    ) -> Result<Message, Interrupted> {
        let cx = cx.with_idempotency_key(once.idempotency_key.clone());
        let recorded = once.journal.as_ref().and_then(|j| j.recorded(&once.key));
        let span = crate::trace::tool(&cx, call.name(), call.id(), &once.key, recorded.is_some());
        if let Some((tool, value)) = recorded {
            return Ok(self.replayed(call, &tool, value, &span));
        }
        // Not started once the run lost its thread's lease (its result could not be journaled,
        // and another worker may be running the thread): a failed result, which the step's
        // commit, refused as well, never keeps.
        if let Some(Err(error)) = once.journal.as_ref().map(|j| j.may_start()) {
            crate::trace::failed(&span, "lease_lost");
            let text = format!("tool call `{}` was not started: {error}", call.id());
            let block = ToolResultBlock::failed(call.id(), text);
            return Ok(Message::tool_message(vec![ContentBlock::ToolResult(block)]));
        }
        let outcome = self.execute(call, cx).instrument(span.clone()).await;
        let (failure, ran) = match outcome {
            Ok(output) => {
                let block = ToolResultBlock::completed(call.id(), output);
                let message = Message::tool_message(vec![ContentBlock::ToolResult(block)]);
                return Ok(once.record(call, message, &span).await);
            }
            Err(Failure::Asked(asked)) => return Err(asked),
            Err(Failure::Failed(failure)) => {
                let ran = matches!(
                    failure,
                    ToolFailure::Failed { .. } | ToolFailure::Panicked { .. }
                );
                (failure, ran)
            }
        };
        crate::trace::failed(&span, failure.category());
        let block = ToolResultBlock::failed(call.id(), self.text_of(&failure));
        let message = Message::tool_message(vec![ContentBlock::ToolResult(block)]);
        // A call whose tool did not start (unknown, bad arguments) did nothing to remember.
        Ok(if ran {
            once.record(call, message, &span).await
        } else {
            message
        })
    }

    /// The recorded result of `call` (journaled under the tool `tool`): the message it gave,
    /// or a failed result if the record does not read as one of this call.
    fn replayed(&self, call: &ToolCall, tool: &str, value: Value, span: &tracing::Span) -> Message {
        let reason = match serde_json::from_value::<Message>(value) {
            Ok(message) if tool == call.name() => return message,
            Ok(_) => format!(
                "the journal holds a result of call `{}` to tool `{tool}`, not to this tool",
                call.id()
            ),
            Err(error) => format!(
                "the journaled result of call `{}` does not read: {error}",
                call.id()
            ),
        };
        let failure = ToolFailure::Failed {
            call_id: call.id().to_owned(),
            tool: call.name().to_owned(),
            error: reason.into(),
        };
        crate::trace::failed(span, failure.category());
        let block = ToolResultBlock::failed(call.id(), self.text_of(&failure));
        Message::tool_message(vec![ContentBlock::ToolResult(block)])
    }

    /// The text of a failed call's result.
    fn text_of(&self, failure: &ToolFailure) -> String {
        match &self.error_text {
            Some(text) => text(failure),
            None => failure.default_text(),
        }
    }

    async fn execute(&self, call: &ToolCall, cx: Context) -> Result<Value, Failure> {
        let Some(entry) = self.entry(call.name()) else {
            return Err(Failure::Failed(ToolFailure::UnknownTool {
                call_id: call.id().to_owned(),
                name: call.name().to_owned(),
                available: self.names().map(str::to_owned).collect(),
            }));
        };
        let panicked = |payload: Box<dyn std::any::Any + Send>| {
            Failure::Failed(ToolFailure::Panicked {
                call_id: call.id().to_owned(),
                tool: call.name().to_owned(),
                message: panic_message(payload.as_ref()),
            })
        };
        let future = std::panic::catch_unwind(AssertUnwindSafe(|| (entry.run)(call, cx)))
            .map_err(panicked)?
            .map_err(|error| Failure::Failed(ToolFailure::Arguments(error)))?;
        match AssertUnwindSafe(future).catch_unwind().await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(error)) => match asked(error.as_ref()) {
                Some(question) => Err(Failure::Asked(question)),
                None => Err(Failure::Failed(ToolFailure::Failed {
                    call_id: call.id().to_owned(),
                    tool: call.name().to_owned(),
                    error,
                })),
            },
            Err(payload) => Err(panicked(payload)),
        }
    }
}

/// The definition of a tool whose arguments are `A`: `A`'s schema without its root `title`
/// and `description`, the description given or else the schema's.
fn definition_of<A: schemars::JsonSchema>(name: String, description: Option<String>) -> Tool {
    let mut definition = Tool::of::<A>(name, "");
    if let Value::Object(schema) = &mut definition.parameters {
        schema.remove("title");
        let documented = match schema.remove("description") {
            Some(Value::String(text)) => text,
            _ => String::new(),
        };
        definition.description = description.unwrap_or(documented);
    }
    definition
}

/// Where a tool call's result is kept so that the call runs once: its effect's journal key
/// (by the call's id, not its place) and the idempotency key the tool is given.
struct Once {
    /// The durable run's journal (none outside one: the call simply runs).
    journal: Option<Arc<dyn Journal>>,
    /// The journal key: `{step}.{task}/call:{id}` in a durable run (the node's name in place
    /// of the task outside one), then `#{n}` for the n-th other call of the same id.
    key: String,
    /// `{run id}:{key}`.
    idempotency_key: String,
}

impl Once {
    /// The keys of `call`, the `repeat`-th earlier call of its id, run in the node whose
    /// context is `cx`.
    fn of(call: &ToolCall, repeat: usize, cx: &Context) -> Once {
        let (journal, base) = match cx.scope_base() {
            Some((journal, task)) => (Some(journal), task),
            None => (None, cx.node().to_owned()),
        };
        let mut key = format!("{base}/call:{}", call.id());
        if repeat > 0 {
            key.push_str(&format!("#{repeat}"));
        }
        Once {
            journal,
            idempotency_key: format!("{}:{key}", cx.run_id()),
            key,
        }
    }

    /// Journals `message`, the result of `call`, and returns it. A result that cannot be
    /// journaled (the database failed, the run's lease was taken over) is returned all the
    /// same, its span marked failed: the step's commit then keeps it or fails, and a call
    /// whose result neither kept is in flight (run again once, with the same key).
    async fn record(&self, call: &ToolCall, message: Message, span: &tracing::Span) -> Message {
        let Some(journal) = &self.journal else {
            return message;
        };
        let recorded = match serde_json::to_value(&message) {
            Ok(value) => journal
                .record(self.key.clone(), call.name().to_owned(), value)
                .instrument(span.clone())
                .await
                .map_err(|error| error.to_string()),
            Err(error) => Err(error.to_string()),
        };
        if let Err(error) = recorded {
            crate::trace::failed(span, "effect_journal_failed");
            tracing::warn!(
                target: "agentstate_graph",
                parent: span,
                "the result of tool call `{}` ran but could not be journaled: {error}",
                call.id()
            );
        }
        message
    }
}

/// How a call ended without an output.
enum Failure {
    /// The tool asked a person (not a failure: the node suspends).
    Asked(Interrupted),
    Failed(ToolFailure),
}

/// The question in `error` or its sources, if a tool returned one (`cx.interrupt(..)?`).
fn asked(error: &(dyn std::error::Error + 'static)) -> Option<Interrupted> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(asked) = error.downcast_ref::<Interrupted>() {
            return Some(asked.clone());
        }
        next = error.source();
    }
    None
}

impl fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSet")
            .field("tools", &self.names().collect::<Vec<_>>())
            .field("concurrency", &self.concurrency)
            .finish()
    }
}

/// Why a tool call gave a failed result instead of the tool's output: what
/// [`ToolSet::error_text`] is given.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolFailure {
    /// The model called a tool the set does not have.
    UnknownTool {
        /// The call's id.
        call_id: String,
        /// The name it called.
        name: String,
        /// The set's tools, in order.
        available: Vec<String>,
    },
    /// The call's arguments are not JSON, or do not fit the tool's argument type.
    Arguments(ArgumentsError),
    /// The tool returned an error (or an output that does not serialize).
    Failed {
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// Its error.
        error: BoxError,
    },
    /// The tool panicked (caught: the run goes on).
    Panicked {
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// The panic's message.
        message: String,
    },
}

impl ToolFailure {
    /// The id of the call that failed.
    pub fn call_id(&self) -> &str {
        match self {
            ToolFailure::UnknownTool { call_id, .. }
            | ToolFailure::Failed { call_id, .. }
            | ToolFailure::Panicked { call_id, .. } => call_id,
            ToolFailure::Arguments(error) => &error.call_id,
        }
    }

    /// The category: `unknown_tool`, `tool_arguments_invalid`, `tool_failed` or
    /// `tool_panicked`.
    pub fn category(&self) -> &'static str {
        match self {
            ToolFailure::UnknownTool { .. } => "unknown_tool",
            ToolFailure::Arguments(_) => "tool_arguments_invalid",
            ToolFailure::Failed { .. } => "tool_failed",
            ToolFailure::Panicked { .. } => "tool_panicked",
        }
    }

    /// The result's text for the model, in LangGraph's `ToolNode` words: for an unknown tool
    /// `Error: {name} is not a valid tool, try one of [{tools}].`, otherwise `Error: {this
    /// failure}\n Please fix your mistakes.`.
    pub fn default_text(&self) -> String {
        match self {
            ToolFailure::UnknownTool {
                name, available, ..
            } => format!(
                "Error: {name} is not a valid tool, try one of [{}].",
                available.join(", ")
            ),
            failure => format!("Error: {failure}\n Please fix your mistakes."),
        }
    }
}

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolFailure::UnknownTool { name, call_id, .. } => {
                write!(
                    f,
                    "call `{call_id}` names the tool `{name}`, which the set does not have"
                )
            }
            ToolFailure::Arguments(error) => write!(f, "{error}"),
            ToolFailure::Failed { tool, error, .. } => write!(f, "tool `{tool}` failed: {error}"),
            ToolFailure::Panicked { tool, message, .. } => {
                write!(f, "tool `{tool}` panicked: {message}")
            }
        }
    }
}

impl std::error::Error for ToolFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ToolFailure::Arguments(error) => Some(error),
            ToolFailure::Failed { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }
}
