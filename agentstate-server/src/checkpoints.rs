//! LangGraph's JSON of a thread's checkpoints, their tasks and interrupts: as the state, the
//! history and the `checkpoints`, `tasks` and `debug` stream modes show them.
//!
//! A thread's checkpoints are its committed steps (its versions), and before each run's input
//! the run's input checkpoint, as LangGraph lists them: the state before the input, its next
//! task `__start__`, source `input`. Their steps are numbered across the thread's runs as
//! LangGraph numbers them: a run's input checkpoint one after the last step of the run before
//! (-1 for the thread's first run), the input merged one after it, each step one after the
//! step before.

use crate::assistant::{Assistant, AssistantError};
use crate::metadata::{config_metadata, request_id, run_configurable, run_metadata, task_id};
use crate::record::{iso8601, RunRecord, ThreadRecord};
use crate::records::Records;
use agentstate_graph::durable::Checkpoint;
use agentstate_graph::Interrupt;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use utoipa::ToSchema;

/// An interrupt as LangGraph shows it in a state, a thread and a task.
pub(crate) fn interrupt_json(interrupt: &Interrupt) -> Value {
    json!({"value": interrupt.payload, "id": interrupt.id})
}

/// An interrupt as LangGraph streams it (`__interrupt__` of `values` and `updates`, and of a
/// waited run's result): with its `response_schema`, which this server never sets.
pub(crate) fn streamed_interrupt_json(interrupt: &Interrupt) -> Value {
    json!({"value": interrupt.payload, "id": interrupt.id, "response_schema": null})
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
            interrupts
                .into_iter()
                .map(streamed_interrupt_json)
                .collect(),
        );
    }
    values
}

/// The interrupts that are questions, not breakpoints.
pub(crate) fn questions(interrupts: &[Interrupt]) -> Vec<&Interrupt> {
    interrupts.iter().filter(|i| !i.is_breakpoint()).collect()
}

/// A checkpoint's id: a version of the thread (`"5"`), or the input checkpoint of the run whose
/// input is version `v` (`"5-input"`: the state at the version before it); of the thread's
/// head, or of one of its branches (`"b1-5"`, `"b1-5-input"`: branch 1, the thread's second;
/// see [`branches`](crate::branches)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct CheckpointId {
    /// The branch (its index in the thread's branches); `None`: the thread's head.
    pub(crate) branch: Option<usize>,
    /// The version of the entry it belongs to.
    pub(crate) entry: u64,
    /// The input checkpoint of the run whose input is entry `entry`.
    pub(crate) input: bool,
}

impl CheckpointId {
    /// Version `v` of the thread's head.
    pub(crate) fn version_of_head(v: u64) -> Self {
        CheckpointId {
            branch: None,
            entry: v,
            input: false,
        }
    }

    /// The id a client gives back, if it is one of this server's.
    pub(crate) fn parse(id: &str) -> Option<CheckpointId> {
        let (branch, rest) = match id.strip_prefix('b').and_then(|r| r.split_once('-')) {
            Some((n, rest)) => (Some(n.parse().ok()?), rest),
            None => (None, id),
        };
        let (entry, input) = match rest.strip_suffix("-input") {
            Some(entry) => (entry, true),
            None => (rest, false),
        };
        Some(CheckpointId {
            branch,
            entry: entry.parse().ok()?,
            input,
        })
    }

    /// The version whose state the checkpoint shows.
    pub(crate) fn version(self) -> u64 {
        match self.input {
            true => self.entry.saturating_sub(1),
            false => self.entry,
        }
    }
}

impl std::fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(branch) = self.branch {
            write!(f, "b{branch}-")?;
        }
        write!(f, "{}", self.entry)?;
        if self.input {
            f.write_str("-input")?;
        }
        Ok(())
    }
}

/// The checkpoint a run request starts from (`checkpoint_id`, or `checkpoint.checkpoint_id`),
/// if it names one of this server's.
pub(crate) fn checkpoint_of(kwargs: &Value) -> Option<CheckpointId> {
    let id = match kwargs.get("checkpoint_id") {
        Some(Value::String(id)) => id.as_str(),
        _ => kwargs.get("checkpoint")?.get("checkpoint_id")?.as_str()?,
    };
    CheckpointId::parse(id)
}

/// A checkpoint's address (its fields by name, as a JSON object writes them).
#[derive(Serialize, ToSchema)]
pub(crate) struct CheckpointConfig {
    /// Its id.
    checkpoint_id: String,
    /// Its namespace (`""`: the graph's own).
    checkpoint_ns: String,
    /// Its thread.
    thread_id: String,
}

impl CheckpointConfig {
    /// Checkpoint `id` of thread `thread`.
    pub(crate) fn at(thread: &str, id: CheckpointId) -> Self {
        CheckpointConfig {
            checkpoint_id: id.to_string(),
            checkpoint_ns: String::new(),
            thread_id: thread.to_owned(),
        }
    }
}

/// Checkpoint `id` of thread `thread`'s address, as JSON.
pub(crate) fn checkpoint_json(thread: &str, id: CheckpointId) -> Value {
    serde_json::to_value(CheckpointConfig::at(thread, id)).unwrap_or(Value::Null)
}

/// The tasks of a checkpoint's next step, with the questions they asked.
pub(crate) fn tasks_json(next: &[String], interrupts: &[Interrupt], step: i64) -> Value {
    next.iter()
        .map(|node| {
            let asked: Vec<&Interrupt> =
                interrupts.iter().filter(|i| &i.step_node == node).collect();
            let step = asked.first().map_or(step.max(0) as u64, |i| i.step);
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

/// One of a thread's checkpoints as LangGraph lists them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Point {
    /// Its id.
    pub(crate) id: CheckpointId,
    /// Its step, numbered across the thread's runs.
    pub(crate) step: i64,
    /// `input` (before a run's input) or `loop`.
    pub(crate) source: &'static str,
    /// The run that made it.
    pub(crate) run_id: Option<String>,
    /// The nodes that run next (`__start__` for an input checkpoint).
    pub(crate) next: Vec<String>,
    /// When it was committed.
    pub(crate) time_ms: i64,
}

/// A thread's checkpoints as LangGraph lists them, oldest first, from the committed steps
/// (oldest first) of its head (`branch`: `None`) or of one of its branches.
pub(crate) fn points(steps: Vec<Checkpoint>, branch: Option<usize>) -> Vec<Point> {
    let mut points = Vec::with_capacity(steps.len() * 2);
    let mut last: i64 = -2;
    let id = |entry, input| CheckpointId {
        branch,
        entry,
        input,
    };
    for c in steps {
        if c.step == 0 {
            last += 1;
            points.push(Point {
                id: id(c.version, true),
                step: last,
                source: "input",
                run_id: c.run_id.clone(),
                next: vec!["__start__".to_owned()],
                time_ms: c.time_ms,
            });
        }
        last += 1;
        points.push(Point {
            id: id(c.version, false),
            step: last,
            source: "loop",
            run_id: c.run_id,
            next: c.next,
            time_ms: c.time_ms,
        });
    }
    points
}

/// Store thread `store`'s checkpoints as LangGraph lists them, oldest first (`branch`: which
/// of the thread's timelines it holds).
pub(crate) async fn store_points(
    assistant: &dyn Assistant,
    store: &str,
    branch: Option<usize>,
) -> Result<Vec<Point>, AssistantError> {
    match assistant.steps(store).await {
        Ok(steps) => Ok(points(steps, branch)),
        Err(e) if e.category == "thread_not_found" => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// One of a thread's checkpoints, where its state is read, and its parent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Listed {
    /// The checkpoint.
    pub(crate) point: Point,
    /// The store thread its state is read from (the thread's own, or a branch's).
    pub(crate) store: String,
    /// The checkpoint before it (`None`: the thread's first).
    pub(crate) parent: Option<CheckpointId>,
    /// Whether it is the thread's head: its newest checkpoint, where its run stands.
    pub(crate) head: bool,
    /// The checkpoint after it on its timeline, if there is one: its next tasks ran.
    pub(crate) child: Option<CheckpointId>,
}

/// Thread `thread`'s checkpoints on every branch, the newest first (LangGraph's history): the
/// head's, then each branch's own (after its fork point, whose parent is the checkpoint it
/// forked from), ordered by when they were made.
pub(crate) async fn list(
    assistant: &dyn Assistant,
    thread: &ThreadRecord,
) -> Result<Vec<Listed>, AssistantError> {
    let mut all: Vec<(i64, usize, Listed)> = Vec::new();
    let mut push = |points: Vec<Point>, store: &str, first_parent: Option<CheckpointId>, head| {
        let mut parent = first_parent;
        let last = points.len().checked_sub(1);
        let children: Vec<Option<CheckpointId>> = (0..points.len())
            .map(|i| points.get(i + 1).map(|p| p.id))
            .collect();
        for (i, point) in points.into_iter().enumerate() {
            let id = point.id;
            let listed = Listed {
                head: head && Some(i) == last,
                store: store.to_owned(),
                parent,
                child: children[i],
                point,
            };
            all.push((listed.point.time_ms, all.len(), listed));
            parent = Some(id);
        }
    };
    let main = store_points(assistant, &thread.thread_id, None).await?;
    push(main, &thread.thread_id, None, true);
    for (at, branch) in thread.branches.iter().enumerate() {
        let own: Vec<Point> = store_points(assistant, &branch.store_id, Some(at))
            .await?
            .into_iter()
            .filter(|p| p.id.entry > branch.fork)
            .collect();
        let owner = crate::branches::owner(&thread.branches, branch.parent, branch.fork);
        let forked_from = CheckpointId {
            branch: owner,
            entry: branch.fork,
            input: false,
        };
        push(own, &branch.store_id, Some(forked_from), false);
    }
    all.sort_by_key(|(time, at, _)| std::cmp::Reverse((*time, *at)));
    Ok(all.into_iter().map(|(_, _, listed)| listed).collect())
}

/// Thread `thread`'s head's checkpoints, oldest first, each with its parent.
pub(crate) async fn head(
    assistant: &dyn Assistant,
    thread: &ThreadRecord,
) -> Result<Vec<Listed>, AssistantError> {
    let points = store_points(assistant, &thread.thread_id, None).await?;
    let last = points.len().checked_sub(1);
    let children: Vec<Option<CheckpointId>> = (0..points.len())
        .map(|i| points.get(i + 1).map(|p| p.id))
        .collect();
    let mut parent = None;
    Ok(points
        .into_iter()
        .enumerate()
        .map(|(i, point)| {
            let listed = Listed {
                head: Some(i) == last,
                store: thread.thread_id.clone(),
                parent,
                child: children[i],
                point,
            };
            parent = Some(listed.point.id);
            listed
        })
        .collect())
}

/// What a thread's checkpoints' JSON is made of: the thread, its assistant, the run records
/// (each run's config metadata, read once) and the server's URL.
pub(crate) struct Checkpoints<'a> {
    pub(crate) assistant: &'a dyn Assistant,
    pub(crate) records: &'a dyn Records,
    pub(crate) thread: &'a ThreadRecord,
    pub(crate) api_url: Option<&'a str>,
    runs: HashMap<String, Map<String, Value>>,
}

impl<'a> Checkpoints<'a> {
    /// The checkpoints' JSON of `thread`, served by `assistant`.
    pub(crate) fn new(
        assistant: &'a dyn Assistant,
        records: &'a dyn Records,
        thread: &'a ThreadRecord,
        api_url: Option<&'a str>,
    ) -> Self {
        Checkpoints {
            assistant,
            records,
            thread,
            api_url,
            runs: HashMap::new(),
        }
    }

    /// The metadata of checkpoint `point`: its thread's, its run's config metadata, and where
    /// it stands.
    async fn metadata(&mut self, point: &Point) -> Value {
        let mut metadata = self.thread.metadata.clone();
        if let Some(run_id) = &point.run_id {
            if !self.runs.contains_key(run_id) {
                let run = match self.records.run(run_id).await {
                    Ok(Some(run)) => run,
                    // Deleted (with the thread it was made on, for a copy's checkpoints): as
                    // a run of the thread's graph, asked with no metadata of its own, made it.
                    _ => {
                        let graph = self.thread.graph_id.clone().unwrap_or_default();
                        let assistant = self.thread.metadata.get("assistant_id");
                        let assistant = assistant.and_then(Value::as_str).unwrap_or_default();
                        let mut run =
                            RunRecord::new(run_id, &self.thread.thread_id, &graph, json!({}), 0);
                        run.metadata = run_metadata(None, assistant, &graph);
                        run
                    }
                };
                let config = config_metadata(&run, self.api_url);
                self.runs.insert(run_id.clone(), config);
            }
            metadata.extend(self.runs[run_id].clone());
            metadata.insert("run_id".into(), Value::from(run_id.as_str()));
            metadata.insert("langgraph_request_id".into(), request_id(run_id).into());
        }
        metadata.insert("langgraph_auth_user_id".into(), Value::from(""));
        metadata.insert("user_id".into(), Value::from(""));
        metadata.insert(
            "thread_id".into(),
            Value::from(self.thread.thread_id.as_str()),
        );
        metadata.insert("source".into(), Value::from(point.source));
        metadata.insert("step".into(), Value::from(point.step));
        metadata.insert("parents".into(), json!({}));
        Value::Object(metadata)
    }

    /// The state at checkpoint `listed`, as the API shows it.
    async fn values(&self, listed: &Listed) -> Result<Value, AssistantError> {
        let version = listed.point.id.version();
        match self.assistant.snapshot(&listed.store, Some(version)).await {
            Ok(snapshot) => Ok(self.assistant.wire_values(snapshot.values)),
            // Before the thread's first version: its state as it began.
            Err(_) if version == 0 => Ok(json!({})),
            Err(e) => Err(e),
        }
    }

    /// Checkpoint `listed` as the state and the history show it; `interrupts`: the questions
    /// waiting there (the head's).
    pub(crate) async fn entry(
        &mut self,
        listed: &Listed,
        interrupts: &[Interrupt],
    ) -> Result<Value, AssistantError> {
        let point = &listed.point;
        let thread = self.thread.thread_id.as_str();
        let values = self.values(listed).await?;
        let tasks = match point.id.input {
            true => json!([{
                "id": task_id("__start__", point.id.entry),
                "name": "__start__",
                "path": ["__pregel_pull", "__start__"],
                "error": null,
                "interrupts": [],
                "checkpoint": null,
                "state": null,
                // What `__start__` wrote: the run's input, as its request gave it.
                "result": self.input_of(point).await,
            }]),
            false => {
                let mut tasks = tasks_json(&point.next, interrupts, point.step + 1);
                // A step that ran: its one task's result is what its node wrote, read as the
                // difference between the states before and after it.
                if let (Some(child), [task]) = (
                    listed.child,
                    tasks.as_array_mut().map_or(&mut [][..], |t| &mut t[..]),
                ) {
                    if let Ok(after) = self
                        .assistant
                        .snapshot(&listed.store, Some(child.version()))
                        .await
                    {
                        task["result"] =
                            written(&values, &self.assistant.wire_values(after.values));
                    }
                }
                // The head of a thread whose run failed: its next tasks failed, shown as
                // Python shows the exception (`ValueError('boom')`).
                let failed = self.thread.status == crate::record::ThreadStatus::Error;
                if let (Some(failure), true) = (&self.thread.error, listed.head && failed) {
                    for task in tasks.as_array_mut().into_iter().flatten() {
                        task["error"] = Value::from(format!(
                            "{}({})",
                            failure.error,
                            python_repr(&failure.message)
                        ));
                    }
                }
                tasks
            }
        };
        let parent = listed.parent;
        Ok(json!({
            "values": values,
            "next": point.next,
            "tasks": tasks,
            "checkpoint": checkpoint_json(thread, point.id),
            "checkpoint_id": point.id.to_string(),
            "metadata": self.metadata(point).await,
            "created_at": iso8601(point.time_ms),
            "parent_checkpoint": parent.map(|p| checkpoint_json(thread, p)),
            "parent_checkpoint_id": parent.map(|p| p.to_string()),
            "interrupts": questions(interrupts).into_iter().map(interrupt_json).collect::<Vec<_>>(),
        }))
    }

    /// The input of the run checkpoint `point` belongs to, as its request gave it.
    async fn input_of(&self, point: &Point) -> Value {
        let Some(run_id) = &point.run_id else {
            return Value::Null;
        };
        match self.records.run(run_id).await {
            Ok(Some(run)) => run.kwargs.get("input").cloned().unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    /// Checkpoint `listed` of run `run` as the `checkpoints` and `debug` stream modes show it
    /// (LangGraph's debug checkpoint): its config and its parent's (the run's `configurable`
    /// with the checkpoint), its metadata, its next tasks and its values.
    pub(crate) async fn event(
        &mut self,
        listed: &Listed,
        run: &RunRecord,
    ) -> Result<Value, AssistantError> {
        let point = &listed.point;
        let values = self.values(listed).await?;
        let assistant_id = run.metadata["assistant_id"].as_str().unwrap_or_default();
        let base = run_configurable(run, assistant_id);
        let config = |id: CheckpointId| {
            let mut configurable = base.clone();
            configurable["checkpoint_id"] = Value::from(id.to_string());
            configurable["checkpoint_ns"] = Value::from("");
            json!({"configurable": configurable})
        };
        let tasks: Vec<Value> = point
            .next
            .iter()
            .map(|node| {
                let id = match point.id.input {
                    true => task_id(node, point.id.entry),
                    false => task_id(node, (point.step + 1).max(0) as u64),
                };
                json!({"id": id, "name": node, "interrupts": [], "state": null})
            })
            .collect();
        Ok(json!({
            "config": config(point.id),
            "parent_config": listed.parent.map(config),
            "metadata": {"parents": {}, "source": point.source, "step": point.step},
            "next": point.next,
            "tasks": tasks,
            "values": values,
        }))
    }
}

/// What a step wrote, from the states before and after it: each field that changed, a list
/// that grew by what was added to its end, any other by its new value.
fn written(before: &Value, after: &Value) -> Value {
    let Value::Object(after) = after else {
        return Value::Null;
    };
    let mut wrote = Map::new();
    for (field, now) in after {
        let was = before.get(field);
        if was == Some(now) {
            continue;
        }
        let value = match (was, now) {
            (Some(Value::Array(was)), Value::Array(now)) if now.starts_with(was) => {
                Value::Array(now[was.len()..].to_vec())
            }
            _ => now.clone(),
        };
        wrote.insert(field.clone(), value);
    }
    Value::Object(wrote)
}

/// A string as Python's `repr` writes it: in single quotes, or double quotes when it holds a
/// single quote and no double quote, with backslashes and the chosen quote escaped.
fn python_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// The state of a thread no run made a state for yet, as LangGraph shows it.
pub(crate) fn empty_state() -> Value {
    json!({
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": null,
        "checkpoint_id": null,
        "metadata": null,
        "created_at": null,
        "parent_checkpoint": null,
        "parent_checkpoint_id": null,
        "interrupts": [],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(version: u64, step: u64, run: &str, next: &[&str]) -> Checkpoint {
        Checkpoint {
            version,
            step,
            run_id: Some(run.to_owned()),
            nodes: Vec::new(),
            next: next.iter().map(|n| (*n).to_owned()).collect(),
            time_ms: 0,
        }
    }

    #[test]
    fn each_run_has_an_input_checkpoint_and_steps_are_numbered_across_runs() {
        let listed = points(
            vec![
                step(1, 0, "r1", &["a"]),
                step(2, 1, "r1", &["b"]),
                step(3, 2, "r1", &[]),
                step(4, 0, "r2", &["a"]),
                step(5, 1, "r2", &[]),
            ],
            None,
        );
        let ids: Vec<String> = listed.iter().map(|p| p.id.to_string()).collect();
        assert_eq!(ids, ["1-input", "1", "2", "3", "4-input", "4", "5"]);
        let steps: Vec<i64> = listed.iter().map(|p| p.step).collect();
        assert_eq!(steps, [-1, 0, 1, 2, 3, 4, 5]);
        assert_eq!(listed[0].next, ["__start__"]);
        assert_eq!((listed[0].source, listed[1].source), ("input", "loop"));
    }

    #[test]
    fn a_steps_writes_are_what_changed() {
        let before = json!({"log": ["a"], "answer": "x", "same": 1});
        let after = json!({"log": ["a", "b"], "answer": "y", "same": 1, "new": true});
        assert_eq!(
            written(&before, &after),
            json!({"log": ["b"], "answer": "y", "new": true})
        );
        // A list rewritten, not grown: its new value.
        assert_eq!(
            written(&json!({"log": ["a"]}), &json!({"log": ["b"]})),
            json!({"log": ["b"]})
        );
    }

    #[test]
    fn strings_are_quoted_as_python_quotes_them() {
        assert_eq!(python_repr("boom"), "'boom'");
        assert_eq!(python_repr("it's"), "\"it's\"");
        assert_eq!(python_repr("say \"it's\""), "'say \"it\\'s\"'");
        assert_eq!(python_repr("a\nb"), "'a\\nb'");
    }

    #[test]
    fn checkpoint_ids_read_back() {
        let id = |branch, entry, input| CheckpointId {
            branch,
            entry,
            input,
        };
        for (id, shown) in [
            (id(None, 7, false), "7"),
            (id(None, 7, true), "7-input"),
            (id(Some(2), 7, false), "b2-7"),
            (id(Some(0), 12, true), "b0-12-input"),
        ] {
            assert_eq!(id.to_string(), shown);
            assert_eq!(CheckpointId::parse(shown), Some(id));
        }
        assert_eq!(id(None, 7, true).version(), 6);
        for bad in ["x-input", "nope", "b-7", "bx-7", "b1-", ""] {
            assert_eq!(CheckpointId::parse(bad), None, "{bad}");
        }
    }
}
