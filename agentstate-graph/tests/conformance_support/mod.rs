//! What the OpenArmature engine conformance tests share (`conformance.rs`, run through
//! [`Graph::stream`](agentstate_graph::Graph::stream), and `conformance_durable.rs`, through
//! durable runs): reading the fixture files, and building a fixture's graph of [`JsonState`]s
//! from its declared state and its nodes' directives.
//!
//! A test can add directives of its own with [`set_directives`]: a function asked first for
//! each node (its name and spec), which returns the node's body or `None` for the directives
//! known here.

#![allow(dead_code)] // each test uses its part

use agentstate::schema::Schema;
use agentstate_graph::json::{JsonState, JsonUpdate};
use agentstate_graph::layer::{NodeExt, RetryPolicy};
use agentstate_graph::parallel::{FanOut, OnEmpty, ParallelBranches};
use agentstate_graph::subgraph::{JsonSubgraph, Projection};
use agentstate_graph::{
    BoxError, BoxNode, CompileError, Context, Graph, GraphBuilder, Node, Routes, END,
};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// A test's own node directives: given a node's name and spec, its body, or `None`.
pub type Directives = Rc<dyn Fn(&str, &Value) -> Option<BoxNode<JsonState>>>;

thread_local! {
    static DIRECTIVES: std::cell::RefCell<Option<Directives>> = const { std::cell::RefCell::new(None) };
}

/// Sets the directives [`body`] asks first, on this thread.
pub fn set_directives(directives: Directives) {
    DIRECTIVES.with(|d| *d.borrow_mut() = Some(directives));
}

pub fn fixture_files(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut files: Vec<(PathBuf, u32)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?;
            let number = name.get(..3)?.parse().ok()?;
            (path.extension()? == "json").then_some((path, number))
        })
        .collect();
    files.sort();
    files
}

/// A fixture's cases: its `cases`, or the fixture itself.
pub fn cases(fixture: &Value) -> Vec<(String, Value)> {
    match fixture.get("cases").and_then(Value::as_array) {
        Some(cases) => cases
            .iter()
            .map(|c| {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
                (format!(" {name}"), c.clone())
            })
            .collect(),
        None => vec![(String::new(), fixture.clone())],
    }
}

/// The subgraph definitions a graph may name: the fixture's `subgraphs` map and `subgraph`, and
/// the graph's own.
pub fn registry(fixture: &Value, graph: &Value) -> BTreeMap<String, Value> {
    let mut found = BTreeMap::new();
    for source in [fixture, graph] {
        if let Some(map) = source.get("subgraphs").and_then(Value::as_object) {
            for (name, def) in map {
                found.insert(name.clone(), def.clone());
            }
        }
        for key in ["subgraph", "subgraph_with_idx"] {
            if let Some(def) = source.get(key).filter(|d| d.is_object()) {
                if let Some(name) = def.get("name").and_then(Value::as_str) {
                    found.insert(name.to_owned(), def.clone());
                }
            }
        }
    }
    found
}

thread_local! {
    /// The running case's `middleware` (a case declares it beside its graph).
    static CASE_MIDDLEWARE: std::cell::RefCell<Option<Value>> = const { std::cell::RefCell::new(None) };
}

/// Sets the running case's `middleware` (a case declares it beside its graph).
pub fn set_case_middleware(middleware: Option<Value>) {
    CASE_MIDDLEWARE.with(|m| *m.borrow_mut() = middleware);
}

pub struct Built {
    pub graph: Graph<JsonState, String>,
    pub schema: Arc<Schema>,
}

pub fn string_map(value: Option<&Value>) -> Option<BTreeMap<String, String>> {
    value.and_then(Value::as_object).map(|m| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect()
    })
}

pub fn string_list(value: Option<&Value>) -> Option<Vec<String>> {
    value.and_then(Value::as_array).map(|items| {
        items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    })
}

#[derive(Debug)]
pub struct Raised(pub String);
impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Raised {}

/// Builds a fixture graph (and, recursively, the subgraphs it names).
pub fn build(def: &Value, subgraphs: &BTreeMap<String, Value>) -> Result<Built, CompileError> {
    let schema = Arc::new(Schema::from_json(
        def.get("state").unwrap_or(&json!({"fields": {}})),
    )?);
    let mut builder: GraphBuilder<JsonState, String> = Graph::builder();
    let empty = Map::new();
    let nodes = def
        .get("nodes")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let middleware = def
        .get("middleware")
        .cloned()
        .or_else(|| CASE_MIDDLEWARE.with(|m| m.borrow().clone()))
        .and_then(|m| m.get("per_node").cloned())
        .unwrap_or(json!({}));
    for (name, spec) in nodes {
        let key = name.clone();
        if let Some(sub) = spec.get("subgraph").and_then(Value::as_str) {
            let sub_def = subgraphs
                .get(sub)
                .unwrap_or_else(|| panic!("subgraph `{sub}` is not defined"));
            let child = build(sub_def, subgraphs)?;
            builder = builder.json_subgraph(
                key,
                &schema,
                JsonSubgraph::new(child.graph, child.schema, projection(spec)),
            );
            continue;
        }
        let mut node = if let Some(fan_out) = spec.get("fan_out") {
            fan_out_node(fan_out, &schema, subgraphs)?
        } else if let Some(branches) = spec.get("parallel_branches") {
            branches_node(branches, &schema, subgraphs)?
        } else {
            body(name, spec)
        };
        for layer in middleware
            .get(name)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            node = apply_middleware(node, layer);
        }
        builder = builder.node(key, node);
    }
    for edge in def
        .get("edges")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let from = edge["from"].as_str().expect("an edge's from").to_owned();
        if let Some(to) = edge.get("to").and_then(Value::as_str) {
            builder = match to {
                "END" => builder.edge(from, END),
                to => builder.edge(from, to.to_owned()),
            };
        } else if let Some(condition) = edge.get("condition") {
            let field = condition["if_field"].as_str().expect("if_field").to_owned();
            let equals = condition["equals"].clone();
            let target = |which: &str| -> Routes<String> {
                match condition[which].as_str().expect("a target") {
                    "END" => END.into(),
                    name => name.to_owned().into(),
                }
            };
            let (then, otherwise) = (target("then"), target("else"));
            builder = builder.route(from, move |s: &JsonState| {
                if s.get(&field) == Some(&equals) {
                    then.clone()
                } else {
                    otherwise.clone()
                }
            });
        }
    }
    if let Some(entry) = def.get("entry").and_then(Value::as_str) {
        builder = builder.entry(entry.to_owned());
    }
    Ok(Built {
        graph: builder.build()?,
        schema,
    })
}

/// The message of the innermost error of a chain (the user's own).
pub fn deepest_message(error: &(dyn std::error::Error + 'static)) -> String {
    let mut error = error;
    while let Some(next) = error.source() {
        error = next;
    }
    error.to_string()
}

/// A `flaky` failure: its message and whether it is transient.
#[derive(Debug)]
pub struct Flaky {
    pub transient: bool,
    pub message: String,
}

impl std::fmt::Display for Flaky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Flaky {}

pub fn fail(spec: &Value, default_message: &str) -> BoxError {
    let transient = spec
        .get("transient")
        .and_then(Value::as_bool)
        .unwrap_or_else(|| {
            // A category alone: OpenArmature's transient provider categories.
            matches!(
                spec.get("category").and_then(Value::as_str),
                Some("provider_unavailable" | "provider_rate_limit" | "provider_model_not_loaded")
            )
        });
    Box::new(Flaky {
        transient,
        message: spec
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or(default_message)
            .to_owned(),
    })
}

/// OpenArmature's default classifier: a transient failure, or a carrier of one.
pub fn transient(error: &BoxError) -> bool {
    let mut error: &(dyn std::error::Error + 'static) = error.as_ref();
    loop {
        if error.downcast_ref::<Flaky>().is_some_and(|f| f.transient) {
            return true;
        }
        match error.source() {
            Some(next) => error = next,
            None => return false,
        }
    }
}

/// `{target: source_field}` of a `success_compute` / `update_from_field`: each target takes the
/// source field's value (times `multiplier`).
pub fn computed(state: &JsonState, spec: &Value) -> Value {
    let multiplier = spec.get("multiplier").and_then(Value::as_i64);
    let mut out = Map::new();
    for (target, source) in spec.as_object().into_iter().flatten() {
        if target == "multiplier" {
            continue;
        }
        let value = match source.as_str() {
            Some(field) => state.get(field).cloned().unwrap_or(Value::Null),
            None => source.clone(),
        };
        let value = match (multiplier, value.as_i64()) {
            (Some(m), Some(v)) => json!(v * m),
            _ => value,
        };
        out.insert(target.clone(), value);
    }
    Value::Object(out)
}

/// A node's body from its directives.
pub fn body(name: &str, spec: &Value) -> BoxNode<JsonState> {
    if let Some(node) = DIRECTIVES
        .with(|d| d.borrow().clone())
        .and_then(|directives| directives(name, spec))
    {
        return node;
    }
    let sleep = spec.get("sleep_ms").and_then(Value::as_u64).unwrap_or(0);
    let update = spec
        .get("update")
        .or_else(|| spec.get("update_pure"))
        .cloned();
    if let Some(message) = spec.get("raises").and_then(Value::as_str) {
        let message = message.to_owned();
        return BoxNode::new(move |_: Arc<JsonState>, _: Context| {
            let error = Raised(message.clone());
            async move { Err::<JsonUpdate, _>(error) }
        });
    }
    if let Some(flaky) = spec.get("flaky") {
        let failures: Vec<Value> = flaky
            .get("failure_sequence")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let success = flaky.get("success_update").cloned().unwrap_or(json!({}));
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        return BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let call = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let result = match failures.get(call) {
                Some(failure) => Err(fail(failure, "flaky")),
                None => Ok(s.update(success.clone())),
            };
            async move { result }
        });
    }
    if let Some(flaky) = spec
        .get("flaky_by_index")
        .or_else(|| spec.get("flaky_instance_only"))
    {
        // Fails when the state's index is `fail_when_idx`, or the first `fail_count_per_*`
        // calls of each instance (told apart by the state as it entered).
        let fail_when = flaky.get("fail_when_idx").and_then(Value::as_i64);
        let fail_count = flaky
            .get("fail_count_per_idx")
            .or_else(|| flaky.get("fail_count_per_instance"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let compute = flaky.get("success_compute").cloned().unwrap_or(json!({}));
        let failure = flaky.clone();
        let seen = Arc::new(std::sync::Mutex::new(BTreeMap::<String, u64>::new()));
        return BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let idx = s.get("idx").and_then(Value::as_i64);
            let calls = {
                let mut seen = seen.lock().unwrap();
                let count = seen.entry(s.to_json().to_string()).or_insert(0);
                *count += 1;
                *count
            };
            let result = if (fail_when.is_some() && idx == fail_when) || calls <= fail_count {
                Err(fail(&failure, &format!("instance {idx:?} failed")))
            } else {
                Ok(s.update(computed(&s, &compute)))
            };
            async move { result }
        });
    }
    if let Some(from) = spec.get("update_from_field") {
        let from = from.clone();
        return BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let update = s.update(computed(&s, &from));
            async move { Ok::<_, Infallible>(update) }
        });
    }
    if let Some(update) = update {
        return BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let update = s.update(update.clone());
            async move {
                if sleep > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(sleep)).await;
                }
                Ok::<_, Infallible>(update)
            }
        });
    }
    panic!("node `{name}` has no directive this adapter knows: {spec}");
}

pub fn retry_policy(layer: &Value) -> RetryPolicy<JsonState> {
    let attempts = layer
        .get("max_attempts")
        .and_then(Value::as_u64)
        .unwrap_or(3) as u32;
    let seconds = layer
        .pointer("/backoff/seconds")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let policy =
        RetryPolicy::new(attempts).backoff_constant(std::time::Duration::from_secs_f64(seconds));
    match layer.pointer("/classifier/type").and_then(Value::as_str) {
        Some("state_aware_max_retries_remaining") => policy.retry_if(|_, s: &JsonState| {
            s.get("max_retries_remaining")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                > 0
        }),
        _ => policy.retry_if(|e, _| transient(e)),
    }
}

/// Wraps a node in a fixture's middleware: `retry`, or `failure_isolation` (a failure becomes
/// the degraded update).
pub fn apply_middleware(node: BoxNode<JsonState>, layer: &Value) -> BoxNode<JsonState> {
    match layer.get("type").and_then(Value::as_str) {
        Some("retry") => BoxNode::new(node.retry(retry_policy(layer))),
        Some("failure_isolation") => {
            let degraded = layer.get("degraded_update").cloned().unwrap_or(json!({}));
            BoxNode::new(move |s: Arc<JsonState>, cx: Context| {
                let attempt = node.call(Arc::clone(&s), cx);
                let degraded = s.update(degraded.clone());
                async move {
                    Ok::<_, Infallible>(match attempt.await {
                        Ok(output) => output,
                        Err(_) => degraded.into(),
                    })
                }
            })
        }
        other => panic!("middleware {other:?} is not known to this adapter"),
    }
}

pub fn projection(spec: &Value) -> Projection {
    // Sessions fixtures put the projection under `mapping`.
    let spec = spec.get("mapping").unwrap_or(spec);
    Projection {
        inputs: string_map(spec.get("inputs")),
        outputs: string_map(spec.get("outputs")),
        projects_in: string_list(spec.get("projects_in")),
        projects_out: string_list(spec.get("projects_out")),
    }
}

/// An int-or-callable of a fan-out (`count`, `concurrency`), read from the parent state.
pub fn resolve(spec: &Value, state: &JsonState) -> Option<i64> {
    match spec {
        Value::Null => None,
        Value::Number(n) => n.as_i64(),
        Value::Object(callable) => {
            let field = callable
                .get("field")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let value = state.get(field).cloned().unwrap_or(Value::Null);
            match callable.get("callable").and_then(Value::as_str) {
                Some("state_field_read") => value.as_i64(),
                Some("queue_chunk") => {
                    let chunk = callable
                        .get("chunk_size")
                        .and_then(Value::as_i64)
                        .unwrap_or(1);
                    // The fixture's harness operation: `max(1, len // chunk_size)`.
                    let len = value.as_array().map_or(0, Vec::len) as i64;
                    Some((len / chunk.max(1)).max(1))
                }
                other => panic!("callable {other:?} is not known to this adapter"),
            }
        }
        other => panic!("{other} is not an int or a callable"),
    }
}

pub fn fan_out_node(
    spec: &Value,
    parent: &Arc<Schema>,
    subgraphs: &BTreeMap<String, Value>,
) -> Result<BoxNode<JsonState>, CompileError> {
    let sub = spec["subgraph"].as_str().expect("a fan-out's subgraph");
    let child = build(&subgraphs[sub], subgraphs)?;
    let field = |name: &str| spec.get(name).and_then(Value::as_str).map(str::to_owned);
    // A sessions fixture's `mapping`: `inputs` (the item is `<fan_out_item>`) and `outputs`
    // (`{parent target: instance field}`).
    let mapping = spec.get("mapping");
    let mut inputs =
        string_map(spec.get("inputs").or_else(|| mapping?.get("inputs"))).unwrap_or_default();
    let mapped_item = inputs
        .iter()
        .find(|(_, from)| from.as_str() == "<fan_out_item>")
        .map(|(to, _)| to.clone());
    inputs.retain(|_, from| from.as_str() != "<fan_out_item>");
    let output = string_map(mapping.and_then(|m| m.get("outputs")))
        .and_then(|outputs| outputs.into_iter().next());
    let items_field = field("items_field");
    let item_field = field("item_field").or(mapped_item);
    // Without one, the instances' item field (a fixture whose instances never finish).
    let collect_field = field("collect_field")
        .or_else(|| output.as_ref().map(|(_, from)| from.clone()))
        .or_else(|| item_field.clone())
        .expect("a collect field");
    let target_field = field("target_field")
        .or_else(|| output.as_ref().map(|(to, _)| to.clone()))
        .expect("a target field");
    let (count_field, errors_field) = (field("count_field"), field("errors_field"));
    let count = spec.get("count").cloned().unwrap_or(Value::Null);
    let child_schema = Arc::clone(&child.schema);
    let instances = move |p: &JsonState| -> Result<Vec<JsonState>, BoxError> {
        let seed = |item: Option<&Value>| {
            let mut values = child_schema.initial_state();
            for (c, pf) in &inputs {
                values.insert(c.clone(), p.get(pf).cloned().unwrap_or(Value::Null));
            }
            if let (Some(item), Some(field)) = (item, &item_field) {
                values.insert(field.clone(), item.clone());
            }
            JsonState::from_values(Arc::clone(&child_schema), values)
        };
        Ok(match &items_field {
            Some(items) => p
                .get(items)
                .and_then(Value::as_array)
                .ok_or_else(|| format!("field `{items}` is not a list"))?
                .iter()
                .map(|item| seed(Some(item)))
                .collect(),
            None => {
                let n = resolve(&count, p).unwrap_or(0);
                if n < 0 {
                    return Err(format!("fan_out_invalid_count: {n}").into());
                }
                (0..n).map(|_| seed(None)).collect()
            }
        })
    };
    let schema = Arc::clone(parent);
    let collect = move |done: Vec<JsonState>| {
        let values: Vec<Value> = done
            .iter()
            .map(|d| d.get(&collect_field).cloned().unwrap_or(Value::Null))
            .collect();
        let mut update = json!({ target_field.clone(): values });
        if let Some(field) = &count_field {
            update[field] = json!(done.len());
        }
        JsonUpdate::new(Arc::clone(&schema), update)
    };
    let mut node = FanOut::try_new(child.graph, instances, collect);
    // OpenArmature's serial mode: one instance at a time, in index order.
    if spec.get("concurrent_mode").and_then(Value::as_str) == Some("serial") {
        node = node.concurrency(Some(1));
    }
    if let Some(concurrency) = spec.get("concurrency").cloned() {
        node = node.concurrency_from(move |p: &JsonState| {
            resolve(&concurrency, p).map(|n| n.max(1) as usize)
        });
    }
    if spec.get("on_empty").and_then(Value::as_str) == Some("noop") {
        node = node.on_empty(OnEmpty::Noop);
    }
    for layer in spec
        .get("instance_middleware")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let attempts = retry_policy(layer).max_attempts();
        let policy = RetryPolicy::new(attempts)
            .backoff_constant(std::time::Duration::ZERO)
            .retry_if(|e, _: &JsonState| transient(e));
        node = node.retry_instances(policy);
    }
    if spec.get("error_policy").and_then(Value::as_str) == Some("collect") {
        let schema = Arc::clone(parent);
        node = node.collect_errors(move |failed| {
            let records: Vec<Value> = failed
                .iter()
                .map(|f| json!({"fan_out_index": f.index.to_string(), "category": f.error.category()}))
                .collect();
            match &errors_field {
                Some(field) => {
                    JsonUpdate::new(Arc::clone(&schema), json!({ field.clone(): records }))
                }
                None => JsonUpdate::default(),
            }
        });
    }
    Ok(BoxNode::new(node))
}

pub fn branches_node(
    spec: &Value,
    parent: &Arc<Schema>,
    subgraphs: &BTreeMap<String, Value>,
) -> Result<BoxNode<JsonState>, CompileError> {
    let mut node = ParallelBranches::new();
    let empty = Map::new();
    let branches = spec
        .get("branches")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (name, branch) in branches {
        let mut work = if let Some(sub) = branch.get("subgraph").and_then(Value::as_str) {
            let child = build(&subgraphs[sub], subgraphs)?;
            let projection = projection(branch);
            projection.check(name, parent, &child.schema)?;
            BoxNode::new(JsonSubgraph::new(child.graph, child.schema, projection))
        } else {
            body(name, &branch["call"])
        };
        for layer in branch
            .get("middleware")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            work = apply_middleware(work, layer);
        }
        node = match branch.pointer("/when/field").and_then(Value::as_str) {
            Some(field) => {
                let field = field.to_owned();
                let truthy = move |p: &JsonState| {
                    !matches!(p.get(&field), None | Some(Value::Null | Value::Bool(false)))
                };
                node.branch_when(name, truthy, work)
            }
            None => node.branch(name, work),
        };
    }
    if spec.get("error_policy").and_then(Value::as_str) == Some("collect") {
        let field = spec
            .get("errors_field")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let schema = Arc::clone(parent);
        node = node.collect_errors(move |failed| {
            let records: Vec<Value> = failed
                .iter()
                .map(|f| json!({"branch_name": f.branch, "category": "node_exception"}))
                .collect();
            match &field {
                Some(field) => {
                    JsonUpdate::new(Arc::clone(&schema), json!({ field.clone(): records }))
                }
                None => JsonUpdate::default(),
            }
        });
    }
    Ok(BoxNode::new(node))
}
