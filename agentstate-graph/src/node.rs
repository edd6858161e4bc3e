//! Nodes: async functions of the state that return its update, and their [`Context`].

use crate::effect::{EffectError, Interrupted, Scope};
use agentstate::NodeOutput;
use agentstate::State;
use futures_util::FutureExt;
use serde_json::Value;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use tracing::Instrument;

/// Any error a node or an edge returns.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The future a [`Node`] returns.
pub type NodeFuture<U> = Pin<Box<dyn Future<Output = Result<NodeOutput<U>, BoxError>> + Send>>;

/// A unit of work of a graph: reads the state, returns its output.
///
/// A node reads the state through an `Arc<S>`: shared, never copied, and impossible to mutate.
/// It returns `Result<O, E>` where `O` converts into a [`NodeOutput`] (an update, messages, a
/// tool result, several of those, or `()`), and `E` is any error type; the runner reports it as
/// a `node_exception` with the error as its `source()`.
///
/// ```
/// use agentstate_graph::{Context, Node};
/// use agentstate::{AgentState, State};
/// use std::sync::Arc;
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Counter { n: u32 }
///
/// // An async closure of the state and the context is a node.
/// let increment = |state: Arc<Counter>, _cx: Context| async move {
///     Ok::<_, std::convert::Infallible>(CounterUpdate::default().n(state.n + 1))
/// };
/// fn is_node(_: &impl Node<Counter>) {}
/// is_node(&increment);
/// ```
///
/// Implemented for every `Fn(Arc<S>, Context) -> impl Future<Output = Result<O, E>>` with `O:
/// Into<NodeOutput<S::Update>>` and `E: Into<BoxError>`; implement it yourself for a node that
/// wraps another (a layer, in tower's sense).
pub trait Node<S: State>: Send + Sync + 'static {
    /// Runs the node on `state`.
    fn call(&self, state: Arc<S>, cx: Context) -> NodeFuture<S::Update>;
}

impl<S, F, Fut, O, E> Node<S> for F
where
    S: State,
    F: Fn(Arc<S>, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Into<NodeOutput<S::Update>>,
    E: Into<BoxError>,
{
    fn call(&self, state: Arc<S>, cx: Context) -> NodeFuture<S::Update> {
        let future = self(state, cx);
        Box::pin(async move { future.await.map(Into::into).map_err(Into::into) })
    }
}

/// What a node emits through its [`Context`] while it runs.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Emitted {
    /// A custom event (AG-UI `CUSTOM`).
    Custom {
        /// The event's name.
        name: String,
        /// Its value.
        value: Value,
    },
    /// A piece of a model's text answer (AG-UI `TEXT_MESSAGE_CONTENT`); the first delta of a
    /// message id starts the message.
    TextDelta {
        /// The id of the message being streamed (the id the final message will have).
        message_id: String,
        /// The text.
        delta: String,
    },
    /// A piece of a tool call's arguments (AG-UI `TOOL_CALL_ARGS`); the first delta of a call
    /// starts it.
    ToolCallDelta {
        /// The id of the message that owns the call.
        message_id: String,
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        name: String,
        /// A piece of the arguments' JSON text.
        delta: String,
    },
}

/// Where a node's emissions go: the stream of the run, when it is streamed.
pub(crate) type Sink = Arc<dyn Fn(&Arc<str>, u64, Emitted) + Send + Sync>;

/// What the runner offers a node: the run's id, the step, the node's name, and a way to emit
/// events to the run's stream (ignored when the run is not streamed). Cheap to clone.
#[derive(Clone)]
pub struct Context {
    run_id: Arc<str>,
    node: Arc<str>,
    step: u64,
    sink: Option<Sink>,
    /// The task's place in a durable run (effects and interrupts).
    scope: Option<Arc<Scope>>,
    /// The durable run's thread, for the spans of the node, its effects and its questions.
    thread: Option<Arc<str>>,
    /// The run's recursion limit (none outside a run).
    limit: Option<usize>,
    /// The idempotency key of the tool call this context was given to (none elsewhere).
    tool_key: Option<Arc<str>>,
}

impl Context {
    pub(crate) fn new(run_id: Arc<str>, node: Arc<str>, step: u64, sink: Option<Sink>) -> Self {
        Context {
            run_id,
            node,
            step,
            sink,
            scope: None,
            thread: None,
            limit: None,
            tool_key: None,
        }
    }

    /// This context with its run's recursion limit.
    pub(crate) fn with_recursion_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// This context with the durable run's thread (`gen_ai.conversation.id` of the spans of
    /// the node, its effects and its questions). A nested run's contexts take their parent's.
    pub(crate) fn with_thread(mut self, thread: Option<Arc<str>>) -> Self {
        self.thread = thread;
        self
    }

    /// The durable run's thread, when the run loop gave it.
    pub(crate) fn thread(&self) -> Option<&str> {
        self.thread.as_deref()
    }

    pub(crate) fn with_scope(mut self, scope: Option<Arc<Scope>>) -> Self {
        self.scope = scope;
        self
    }

    /// Where runs nested in this node keep their effects and questions: the durable journal
    /// and this task's key.
    pub(crate) fn scope_base(&self) -> Option<(Arc<dyn crate::effect::Journal>, String)> {
        self.scope
            .as_ref()
            .map(|scope| (Arc::clone(&scope.journal), scope.task.clone()))
    }

    /// This context for a part of the node that runs concurrently with others (a parallel
    /// branch): in a durable run its effects and questions are keyed under `segment`, apart
    /// from the other parts'.
    pub(crate) fn nested(&self, segment: &str) -> Context {
        let mut cx = self.clone();
        if let Some((journal, base)) = self.scope_base() {
            cx.scope = Some(Arc::new(Scope::new(journal, format!("{base}/{segment}"))));
        }
        cx
    }

    /// This context for another attempt of its node ([`Retry`](crate::layer::Retry)): in a
    /// durable run its effects and questions are counted from the first again, so that the
    /// attempt is given what the earlier ones recorded, as a node run again after a crash is.
    pub(crate) fn attempt(&self) -> Context {
        let mut cx = self.clone();
        if let Some((journal, task)) = self.scope_base() {
            cx.scope = Some(Arc::new(Scope::new(journal, task)));
        }
        cx
    }

    /// This context for the tool call whose idempotency key is `key` ([`ToolSet`](crate::ToolSet)).
    pub(crate) fn with_idempotency_key(mut self, key: String) -> Self {
        self.tool_key = Some(Arc::from(key));
        self
    }

    /// Where the node's emissions go (a nested run's nodes emit there too).
    pub(crate) fn sink(&self) -> Option<Sink> {
        self.sink.clone()
    }

    /// Whether the node runs in a durable run (effects are journaled, interrupts suspend the
    /// run).
    pub fn is_durable(&self) -> bool {
        self.scope.is_some()
    }

    /// Runs the side effect `run` once: in a durable run its result is journaled before this
    /// returns, and when the node runs again (resumed after a crash or an interrupt) the
    /// recorded result is returned without running `run`. A node must ask for its effects in
    /// the same order each time it runs; an effect that fails is not recorded (it runs again
    /// next time). Outside a durable run, `run` simply runs.
    ///
    /// `run` is given the effect's idempotency key, the same each time this effect of this
    /// node of this run is asked for: a crash after the effect ran and before its result was
    /// journaled runs it again, so pass the key to the service that does the work (a payment
    /// API's idempotency key, a unique column) and it is done once.
    ///
    /// A run that no longer holds its thread's lease (its worker was paused past it and the
    /// thread taken over, or the run was ended from outside) starts no new effect: this
    /// returns [`EffectError::NotStarted`] (category `lease_lost`) without running `run`.
    ///
    /// ```
    /// use agentstate_graph::{Context, EffectError};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let cx = Context::detached("pay");
    /// let receipt: String = cx
    ///     .effect("charge card", |key| async move {
    ///         // e.g. stripe.charges.create(..., idempotency_key = key)
    ///         Ok::<_, std::io::Error>(format!("receipt for {key}"))
    ///     })
    ///     .await?;
    /// assert_eq!(receipt, "receipt for test:pay/e0");
    /// # Ok::<(), EffectError<std::io::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn effect<T, E, F, Fut>(&self, name: &str, run: F) -> Result<T, EffectError<E>>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let Some(scope) = &self.scope else {
            let key = format!("{}:{}/e0", self.run_id, self.node);
            let span = crate::trace::effect(self, name, &key, false);
            let result = run(key).instrument(span.clone()).await;
            return result.map_err(|error| {
                crate::trace::failed(&span, "effect_failed");
                EffectError::Failed {
                    name: name.to_owned(),
                    error,
                }
            });
        };
        let key = scope.next_effect();
        let json_error = |error| EffectError::Json {
            name: name.to_owned(),
            error,
        };
        if let Some((recorded, value)) = scope.journal.recorded(&key) {
            let _span = crate::trace::effect(self, name, &key, true).entered();
            if recorded != name {
                return Err(EffectError::OutOfOrder {
                    name: name.to_owned(),
                    recorded,
                });
            }
            return serde_json::from_value(value).map_err(json_error);
        }
        // Not started once the run lost its thread's lease: it could not be journaled.
        if let Err(error) = scope.journal.may_start() {
            return Err(EffectError::NotStarted {
                name: name.to_owned(),
                error,
            });
        }
        let span = crate::trace::effect(self, name, &key, false);
        let outcome: Result<T, EffectError<E>> = async {
            let result = run(format!("{}:{key}", self.run_id))
                .await
                .map_err(|error| EffectError::Failed {
                    name: name.to_owned(),
                    error,
                })?;
            let value = serde_json::to_value(&result).map_err(json_error)?;
            scope
                .journal
                .record(key, name.to_owned(), value)
                .await
                .map_err(|error| EffectError::Journal {
                    name: name.to_owned(),
                    error,
                })?;
            Ok(result)
        }
        .instrument(span.clone())
        .await;
        if let Err(error) = &outcome {
            crate::trace::failed(&span, error.category());
        }
        outcome
    }

    /// Asks for a person's answer: returns it if the run was resumed with one for this
    /// interrupt, and otherwise [`Interrupted`] (with a stable id unique to the run, and
    /// `payload`), which the node returns with `?` so that the durable run ends suspended.
    /// Resumed with an answer, the node runs again from its start (its recorded effects are not
    /// repeated) and this call returns the answer. A node may ask several questions, one after
    /// the other.
    ///
    /// Outside a durable run nothing can answer: the node fails with the `Interrupted` error,
    /// and the run with the category `interrupt_outside_durable_run` and a message saying to
    /// run the graph durably (`graph.durable(&store)`, feature `store`).
    ///
    /// ```
    /// use agentstate_graph::Context;
    /// use serde_json::json;
    ///
    /// let cx = Context::detached("approve");
    /// let asked = cx.interrupt(json!({"tool": "refund", "amount": 30})).unwrap_err();
    /// assert_eq!(asked.id, "approve:0.0:0@test");
    /// assert_eq!(asked.payload["amount"], 30);
    /// ```
    pub fn interrupt(&self, payload: impl serde::Serialize) -> Result<Value, Interrupted> {
        let (task, n) = match &self.scope {
            Some(scope) => (scope.task.clone(), scope.next_interrupt()),
            None => (format!("{}.0", self.step), 0),
        };
        // Unique to the run; a thread suspended by an earlier build names it without the run.
        let place = format!("{}:{task}:{n}", self.node);
        let id = format!("{place}@{}", self.run_id);
        let answer = self.scope.as_ref().and_then(|s| {
            let journal = &s.journal;
            journal.answer(&id).or_else(|| journal.answer(&place))
        });
        let _span = crate::trace::interrupt(self, &id, answer.is_some()).entered();
        if let Some(answer) = answer {
            return Ok(answer);
        }
        Err(Interrupted {
            id,
            node: self.node.to_string(),
            task,
            payload: serde_json::to_value(payload).unwrap_or(Value::Null),
        })
    }

    /// The idempotency key of the tool call this context was given to, when a
    /// [`ToolSet`](crate::ToolSet) runs a tool: the same each time that call of that node of
    /// that run runs, whichever place the call has in its message and whichever calls finish
    /// first. In a durable run a tool call runs once (its result is journaled, and a step run
    /// again returns it); only a call in flight when its worker crashed runs a second time, with
    /// this key, so pass it to the service that does the work (a payment API's idempotency key,
    /// a unique column) and the work is done once. `None` outside a tool call (a node's
    /// [`effect`](Context::effect)s are given their own key).
    ///
    /// ```
    /// use agentstate::message::ToolCall;
    /// use agentstate_graph::{BoxError, Context, ToolSet};
    /// use serde_json::{json, Value};
    ///
    /// let tools = ToolSet::new().tool("refund", |_: Value, cx: Context| async move {
    ///     // e.g. payments.refund(..., idempotency_key = key)
    ///     let key = cx.idempotency_key().ok_or("not run as a tool call")?.to_owned();
    ///     Ok::<_, BoxError>(key)
    /// });
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let cx = Context::detached("tools");
    /// assert_eq!(cx.idempotency_key(), None);
    /// let result = tools.call(&ToolCall::new("call_7", "refund", json!({})), &cx).await?;
    /// // Outside a durable run: `{run id}:{node}/call:{call id}`; in one, the step's task is
    /// // in place of the node (`{run id}:{step}.{task}/call:{call id}`).
    /// assert_eq!(result.text(), "test:tools/call:call_7");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn idempotency_key(&self) -> Option<&str> {
        self.tool_key.as_deref()
    }

    /// A context outside any run (for testing a node on its own): run id `"test"`, step 0,
    /// emissions dropped.
    ///
    /// ```
    /// use agentstate_graph::Context;
    /// let cx = Context::detached("model");
    /// assert_eq!((cx.node(), cx.step(), cx.is_streamed()), ("model", 0, false));
    /// ```
    pub fn detached(node: &str) -> Self {
        Context::new(Arc::from("test"), Arc::from(node), 0, None)
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The step the node runs in, from 1.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The run's recursion limit ([`GraphBuilder::recursion_limit`](crate::GraphBuilder::recursion_limit),
    /// or the run's own): a run that needs that many steps or more fails after step `limit`,
    /// so a node at step `s` can tell how many more steps the run may take (`limit - 1 - s`)
    /// and end it gracefully instead. `None` outside a run ([`Context::detached`]).
    ///
    /// ```
    /// use agentstate_graph::Context;
    /// assert_eq!(Context::detached("model").recursion_limit(), None);
    /// ```
    pub fn recursion_limit(&self) -> Option<usize> {
        self.limit
    }

    /// Whether emissions reach a stream (false when the run is invoked without streaming, so a
    /// node may skip building them).
    pub fn is_streamed(&self) -> bool {
        self.sink.is_some()
    }

    /// Emits an event to the run's stream.
    pub fn emit(&self, emitted: Emitted) {
        if let Some(sink) = &self.sink {
            sink(&self.node, self.step, emitted);
        }
    }

    /// Emits a custom event.
    pub fn custom(&self, name: impl Into<String>, value: Value) {
        self.emit(Emitted::Custom {
            name: name.into(),
            value,
        });
    }

    /// Emits a piece of a model's text answer for the message `message_id`.
    pub fn text_delta(&self, message_id: impl Into<String>, delta: impl Into<String>) {
        self.emit(Emitted::TextDelta {
            message_id: message_id.into(),
            delta: delta.into(),
        });
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("run_id", &self.run_id)
            .field("node", &self.node)
            .field("step", &self.step)
            .field("streamed", &self.sink.is_some())
            .field("durable", &self.scope.is_some())
            .field("thread", &self.thread)
            .field("recursion_limit", &self.limit)
            .field("idempotency_key", &self.tool_key)
            .finish()
    }
}

/// A node behind a shared pointer: a node whose type is chosen at run time (graphs built from
/// configuration, layers applied conditionally). Cheap to clone.
pub struct BoxNode<S>(Arc<dyn Node<S>>);

impl<S: State> BoxNode<S> {
    /// Boxes `node`.
    pub fn new(node: impl Node<S>) -> Self {
        BoxNode(Arc::new(node))
    }
}

impl<S> Clone for BoxNode<S> {
    fn clone(&self) -> Self {
        BoxNode(Arc::clone(&self.0))
    }
}

impl<S: State + 'static> Node<S> for BoxNode<S> {
    fn call(&self, state: Arc<S>, cx: Context) -> NodeFuture<S::Update> {
        self.0.call(state, cx)
    }
}

/// A node that panicked, as its error (category `run_panicked`): the panic's message. The run
/// fails as it does on any node's error; the process goes on.
#[derive(Debug)]
pub(crate) struct Panicked {
    message: String,
}

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Panicked {}

/// Calls `node`: its panic, when it is called or while its future runs, is caught and made
/// its error ([`Panicked`]), so that it ends the run, not the caller's task.
pub(crate) fn call_caught<S: State + 'static>(
    node: &dyn Node<S>,
    state: Arc<S>,
    cx: Context,
) -> NodeFuture<S::Update>
where
    S::Update: 'static,
{
    let panicked = |payload: Box<dyn std::any::Any + Send>| -> BoxError {
        Box::new(Panicked {
            message: panic_message(payload.as_ref()),
        })
    };
    match std::panic::catch_unwind(AssertUnwindSafe(|| node.call(state, cx))) {
        Ok(future) => Box::pin(
            AssertUnwindSafe(future)
                .catch_unwind()
                .map(move |result| result.unwrap_or_else(|payload| Err(panicked(payload)))),
        ),
        Err(payload) => {
            let error = panicked(payload);
            Box::pin(async move { Err(error) })
        }
    }
}

/// The message of a panic's payload (a `&str` or a `String`, as `panic!` makes them).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
