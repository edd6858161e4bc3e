//! The `tracing` spans of runs, steps, node calls, effects, interrupts and tool calls (target
//! `agentstate_graph`, level `INFO`).
//!
//! Fields are named as OpenTelemetry's GenAI semantic conventions name them where one applies
//! (`gen_ai.operation.name`, `gen_ai.agent.name`, `gen_ai.conversation.id` for a durable run's
//! thread, `error.type`), and `agentstate.*` otherwise (`agentstate.run.id`, `agentstate.step`,
//! `agentstate.node`, `agentstate.effect.name`, `agentstate.interrupt.id`, ...); `otel.name`
//! and `otel.status_code` are the names `tracing-opentelemetry` reads for an exported span's
//! name and status. The thread's id is on every span of a durable run, not only its root, as
//! OpenArmature's cross-cutting attributes are.
//!
//! Without a subscriber, or with this target filtered out, a span costs a check of the
//! callsite's cached interest: fields are not evaluated, and a node's future is not wrapped.

use crate::node::{call_caught, Context, Node, NodeFuture};
use std::fmt;
use std::sync::Arc;
use tracing::field::Empty;
use tracing::{info_span, Instrument, Span};

/// The span of a run: the root of its steps' and nodes' spans (GenAI's `invoke_agent`
/// operation). `thread` is the durable run's thread (`gen_ai.conversation.id`), `graph` the
/// graph's name if it has one (`gen_ai.agent.name`). Enter it around the whole run (its
/// future `.instrument(span)`), and mark it [`failed`] if the run fails.
pub(crate) fn run(run_id: &str, thread: Option<&str>, graph: Option<&str>) -> Span {
    let span = info_span!(
        target: "agentstate_graph",
        "agentstate.run",
        otel.name = Empty,
        otel.status_code = Empty,
        error.type = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = Empty,
        gen_ai.conversation.id = Empty,
        agentstate.run.id = run_id,
    );
    if !span.is_disabled() {
        match graph {
            Some(graph) => {
                span.record("otel.name", format_args!("invoke_agent {graph}"));
                span.record("gen_ai.agent.name", graph);
            }
            None => {
                span.record("otel.name", "invoke_agent");
            }
        }
        if let Some(thread) = thread {
            span.record("gen_ai.conversation.id", thread);
        }
    }
    span
}

/// The span of step `step` of a run, running `nodes` (the step's node names, in merge order):
/// a child of the run's span, the parent of the step's node spans (create it, and start the
/// step's nodes, inside the run's span; enter it while the nodes run, and mark it [`failed`]
/// if the step fails).
pub(crate) fn step<N: AsRef<str>>(
    run_id: &str,
    thread: Option<&str>,
    step: u64,
    nodes: &[N],
) -> Span {
    let span = info_span!(
        target: "agentstate_graph",
        "agentstate.step",
        otel.name = Empty,
        otel.status_code = Empty,
        error.type = Empty,
        gen_ai.conversation.id = Empty,
        agentstate.run.id = run_id,
        agentstate.step = step,
        agentstate.nodes = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format_args!("step {step}"));
        span.record("agentstate.nodes", format_args!("{}", Joined(nodes)));
        if let Some(thread) = thread {
            span.record("gen_ai.conversation.id", thread);
        }
    }
    span
}

/// Marks `span` (a run's or a step's) failed, with the error's category (`error.type`).
pub(crate) fn failed(span: &Span, category: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", category);
}

/// Calls `node` with `state` and `cx` inside a span of its own (`agentstate.node`, named after
/// the node): the call and every poll of the future it returns are in the span, which is
/// marked failed (`error.type`: the node error's category) when the node fails, and gets
/// `agentstate.interrupted = true` when it asks a question in a durable run instead (outside
/// one, a question fails the node: `interrupt_outside_durable_run`). A panic of the node is
/// its error (`run_panicked`, see [`call_caught`]). Without a subscriber interested in the
/// span, this is `call_caught(node, state, cx)`.
pub(crate) fn call_node<S: agentstate::State + 'static>(
    node: &dyn Node<S>,
    state: Arc<S>,
    cx: Context,
) -> NodeFuture<S::Update>
where
    S::Update: 'static,
{
    let span = node_span(&cx);
    if span.is_disabled() {
        return call_caught(node, state, cx);
    }
    let durable = cx.is_durable();
    let future = span.in_scope(|| call_caught(node, state, cx));
    let recorded = span.clone();
    Box::pin(
        async move {
            let result = future.await;
            if let Err(error) = &result {
                // A question suspends a durable run; outside one, it fails it.
                if durable && error.is::<crate::effect::Interrupted>() {
                    recorded.record("agentstate.interrupted", true);
                } else {
                    failed(&recorded, crate::error::node_category(error.as_ref()));
                }
            }
            result
        }
        .instrument(span),
    )
}

/// The span of a node's call.
fn node_span(cx: &Context) -> Span {
    let span = info_span!(
        target: "agentstate_graph",
        "agentstate.node",
        otel.name = Empty,
        otel.status_code = Empty,
        error.type = Empty,
        gen_ai.conversation.id = Empty,
        agentstate.run.id = cx.run_id(),
        agentstate.step = cx.step(),
        agentstate.node = cx.node(),
        agentstate.interrupted = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", cx.node());
        if let Some(thread) = cx.thread() {
            span.record("gen_ai.conversation.id", thread);
        }
    }
    span
}

/// The span of an effect of the node whose context is `cx`: `key` is its journal key (its
/// idempotency key outside a durable run), `replayed` whether its recorded result is returned
/// instead of running it.
pub(crate) fn effect(cx: &Context, name: &str, key: &str, replayed: bool) -> Span {
    let span = info_span!(
        target: "agentstate_graph",
        "agentstate.effect",
        otel.name = Empty,
        otel.status_code = Empty,
        error.type = Empty,
        gen_ai.conversation.id = Empty,
        agentstate.run.id = cx.run_id(),
        agentstate.step = cx.step(),
        agentstate.node = cx.node(),
        agentstate.effect.name = name,
        agentstate.effect.key = key,
        agentstate.effect.replayed = replayed,
    );
    if !span.is_disabled() {
        span.record("otel.name", format_args!("effect {name}"));
        if let Some(thread) = cx.thread() {
            span.record("gen_ai.conversation.id", thread);
        }
    }
    span
}

/// The span of a question a node asks ([`Context::interrupt`]): `answered` whether the run
/// was resumed with its answer.
pub(crate) fn interrupt(cx: &Context, id: &str, answered: bool) -> Span {
    let span = info_span!(
        target: "agentstate_graph",
        "agentstate.interrupt",
        otel.name = Empty,
        gen_ai.conversation.id = Empty,
        agentstate.run.id = cx.run_id(),
        agentstate.step = cx.step(),
        agentstate.node = cx.node(),
        agentstate.interrupt.id = id,
        agentstate.interrupt.answered = answered,
        agentstate.durable = cx.is_durable(),
    );
    if !span.is_disabled() {
        span.record("otel.name", format_args!("interrupt {id}"));
        if let Some(thread) = cx.thread() {
            span.record("gen_ai.conversation.id", thread);
        }
    }
    span
}

/// The span of one tool call run by a [`ToolSet`](crate::ToolSet) in the node whose context
/// is `cx` (GenAI's `execute_tool` operation); marked [`failed`] when the call fails. `key` is
/// its effect's journal key, `replayed` whether its recorded result is returned instead of
/// running it.
pub(crate) fn tool(cx: &Context, name: &str, call_id: &str, key: &str, replayed: bool) -> Span {
    let span = info_span!(
        target: "agentstate_graph",
        "agentstate.tool",
        otel.name = Empty,
        otel.status_code = Empty,
        error.type = Empty,
        gen_ai.conversation.id = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        agentstate.run.id = cx.run_id(),
        agentstate.step = cx.step(),
        agentstate.node = cx.node(),
        agentstate.effect.key = key,
        agentstate.effect.replayed = replayed,
    );
    if !span.is_disabled() {
        span.record("otel.name", format_args!("execute_tool {name}"));
        if let Some(thread) = cx.thread() {
            span.record("gen_ai.conversation.id", thread);
        }
    }
    span
}

/// Names joined by commas, written when a span records them.
struct Joined<'a, N>(&'a [N]);

impl<N: AsRef<str>> fmt::Display for Joined<'_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(name.as_ref())?;
        }
        Ok(())
    }
}
