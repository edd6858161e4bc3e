//! LangGraph's JSON of a thread's checkpoints (its versions), their tasks and interrupts: as
//! the state, the history and the `checkpoints`, `tasks` and `debug` stream modes show them.

use crate::assistant::CheckpointState;
use crate::record::iso8601;
use agentstate_graph::Interrupt;
use serde_json::{json, Value};

/// The id LangGraph gives the task of node `node` that asked at `step`.
pub(crate) fn task_id(node: &str, step: u64) -> String {
    format!("{node}:{step}")
}

/// An interrupt as LangGraph shows it.
pub(crate) fn interrupt_json(interrupt: &Interrupt) -> Value {
    json!({"value": interrupt.payload, "id": interrupt.id})
}

/// `values` with the pending questions under `__interrupt__` (breakpoints are stops, not
/// questions: a run stopped at breakpoints only shows none).
pub(crate) fn with_interrupts(values: &Value, interrupts: &[Interrupt]) -> Value {
    let mut values = values.clone();
    let interrupts = questions(interrupts);
    if interrupts.is_empty() {
        return values;
    }
    if let Value::Object(map) = &mut values {
        map.insert(
            "__interrupt__".into(),
            interrupts.into_iter().map(interrupt_json).collect(),
        );
    }
    values
}

/// The interrupts that are questions, not breakpoints.
pub(crate) fn questions(interrupts: &[Interrupt]) -> Vec<&Interrupt> {
    interrupts.iter().filter(|i| !i.is_breakpoint()).collect()
}

/// A checkpoint's reference: the thread and the version (`None`: no checkpoint yet).
pub(crate) fn checkpoint_json(thread: &str, version: Option<u64>) -> Value {
    json!({
        "thread_id": thread,
        "checkpoint_ns": "",
        "checkpoint_id": version.map(|v| v.to_string()),
        "checkpoint_map": null,
    })
}

/// The tasks of a checkpoint's next step, with the questions they asked.
pub(crate) fn tasks_json(next: &[String], interrupts: &[Interrupt], step: u64) -> Value {
    next.iter()
        .map(|node| {
            let asked: Vec<&Interrupt> =
                interrupts.iter().filter(|i| &i.step_node == node).collect();
            let step = asked.first().map_or(step, |i| i.step);
            json!({
                "id": task_id(node, step),
                "name": node,
                "path": ["__pregel_pull", node],
                "error": null,
                "interrupts": asked.into_iter().map(interrupt_json).collect::<Vec<_>>(),
                "checkpoint": null,
                "state": null,
                "result": null,
            })
        })
        .collect()
}

/// A history entry: a checkpoint with its state, its parent the one before it.
pub(crate) fn history_entry(
    id: &str,
    state: &CheckpointState,
    parent: Option<&CheckpointState>,
) -> Value {
    let c = &state.checkpoint;
    json!({
        "values": state.values,
        "next": c.next,
        "tasks": tasks_json(&c.next, &[], c.step + 1),
        "checkpoint": checkpoint_json(id, Some(c.version)),
        "metadata": {
            "source": if c.step == 0 { "input" } else { "loop" },
            "step": c.step,
            "run_id": c.run_id,
            "writes": null,
            "parents": {},
        },
        "created_at": iso8601(c.time_ms),
        "parent_checkpoint": parent.map(|p| checkpoint_json(id, Some(p.checkpoint.version))),
    })
}

/// A checkpoint as the `checkpoints` and `debug` stream modes show it: its history entry, with
/// its and its parent's config.
pub(crate) fn checkpoint_event(
    id: &str,
    state: &CheckpointState,
    parent: Option<&CheckpointState>,
) -> Value {
    let mut entry = history_entry(id, state, parent);
    let config = |c: &Value| match c {
        Value::Null => Value::Null,
        c => json!({"configurable": {
            "thread_id": c["thread_id"],
            "checkpoint_ns": "",
            "checkpoint_id": c["checkpoint_id"],
        }}),
    };
    let (own, parents) = (
        config(&entry["checkpoint"]),
        config(&entry["parent_checkpoint"]),
    );
    if let Value::Object(map) = &mut entry {
        map.insert("config".into(), own);
        map.insert("parent_config".into(), parents);
    }
    entry
}
