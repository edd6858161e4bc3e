//! Subgraphs: a compiled graph used as a node of another.
//!
//! A typed subgraph ([`Subgraph`]) projects with two functions: the child's initial state from
//! the parent's, and the parent's update from the child's final state. The types check the
//! projection; a `nested` state field is its natural form (`|p| p.inner.clone()` in,
//! `|c| Update::default().inner(..)` out, or an Overwrite of the field).
//!
//! A subgraph of [`JsonState`]s ([`JsonSubgraph`]) projects by field name, as OpenArmature
//! specifies ([`Projection`]): by default nothing goes in (the child starts from its schema's
//! defaults) and every child field whose name is a parent field comes out, merged through the
//! parent's reducer; or explicit `inputs`/`outputs` maps; or declared same-name sets. Building
//! the parent checks the names (`mapping_references_undeclared_field`,
//! `conflicting_projection_forms`) and warns about fields projected in and back out through a
//! reducer that is not round-trip idempotent (`projection_reducer_round_trip`).
//!
//! LangGraph instead passes the parent's whole state in and merges the child's whole final
//! state back, which counts `append` fields the child did not touch twice; this crate follows
//! OpenArmature.
//!
//! A child's run has its own recursion limit (its graph's) and counts as one step of the
//! parent; its failure is the subgraph node's `node_exception`, with the child's [`RunError`]
//! as the source.

use crate::error::{CompileError, CompileWarning, RunError};
use crate::graph::Graph;
use crate::json::{JsonState, JsonUpdate};
use crate::name::NodeKey;
use crate::node::{Context, Node, NodeFuture};
use crate::GraphState;
use agentstate::schema::Schema;
use agentstate::NodeOutput;
use agentstate::State;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

type InputFn<P, C> = Arc<dyn Fn(&P) -> C + Send + Sync>;
type OutputFn<P, C> = Arc<dyn Fn(C) -> <P as State>::Update + Send + Sync>;

/// A typed subgraph node: `input` makes the child's initial state from the parent's, the child
/// runs to its end, and `output` turns its final state into the parent's update.
///
/// ```
/// use agentstate_graph::{subgraph::Subgraph, Context, Graph, END};
/// use agentstate::AgentState;
/// use std::sync::Arc;
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Inner { x: u32 }
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Outer { x: u32, #[reducer(append)] log: Vec<String> }
///
/// let child = Graph::builder()
///     .node("double", |s: Arc<Inner>, _: Context| async move {
///         Ok::<_, std::convert::Infallible>(InnerUpdate::default().x(s.x * 2))
///     })
///     .entry("double")
///     .edge("double", END)
///     .build()?;
/// let parent = Graph::builder()
///     .node("child", Subgraph::new(child, |p: &Outer| Inner { x: p.x }, |c: Inner| {
///         OuterUpdate::default().x(c.x).log(vec!["child".to_owned()])
///     }))
///     .entry("child")
///     .edge("child", END)
///     .build()?;
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// let state = runtime.block_on(parent.invoke(Outer { x: 21, log: vec![] }))?;
/// assert_eq!((state.x, state.log), (42, vec!["child".to_owned()]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Subgraph<P: State, C, KC> {
    graph: Graph<C, KC>,
    input: InputFn<P, C>,
    output: OutputFn<P, C>,
}

impl<P: GraphState, C: GraphState, KC: NodeKey> Subgraph<P, C, KC> {
    /// A subgraph node running `graph`, projecting with `input` and `output`.
    pub fn new(
        graph: Graph<C, KC>,
        input: impl Fn(&P) -> C + Send + Sync + 'static,
        output: impl Fn(C) -> P::Update + Send + Sync + 'static,
    ) -> Self {
        Subgraph {
            graph,
            input: Arc::new(input),
            output: Arc::new(output),
        }
    }
}

impl<P: GraphState, C: GraphState, KC: NodeKey> Node<P> for Subgraph<P, C, KC> {
    fn call(&self, state: Arc<P>, cx: Context) -> NodeFuture<P::Update> {
        let child = (self.input)(&state);
        drop(state);
        let graph = self.graph.clone();
        let output = Arc::clone(&self.output);
        Box::pin(async move {
            match graph.invoke_nested(child, &cx, "sub").await {
                Ok(done) => Ok(NodeOutput::Update(output(done))),
                Err(error) => Err(error.into_node_error()),
            }
        })
    }
}

/// How a [`JsonSubgraph`] projects fields between the parent and the child (OpenArmature's three
/// forms).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projection {
    /// `inputs`: child field -> parent field, copied in at entry.
    pub inputs: Option<BTreeMap<String, String>>,
    /// `outputs`: parent field -> child field, merged out through the parent's reducer.
    pub outputs: Option<BTreeMap<String, String>>,
    /// The declared same-name in-set.
    pub projects_in: Option<Vec<String>>,
    /// The declared same-name out-set.
    pub projects_out: Option<Vec<String>>,
}

impl Projection {
    fn declared_sets(&self) -> bool {
        self.projects_in.is_some() || self.projects_out.is_some()
    }

    /// Checks the projection of subgraph node `node` against both schemas; returns its warnings.
    pub fn check(
        &self,
        node: &str,
        parent: &Schema,
        child: &Schema,
    ) -> Result<Vec<CompileWarning>, CompileError> {
        let maps = self.inputs.is_some() || self.outputs.is_some();
        if maps && self.declared_sets() {
            return Err(CompileError::ConflictingProjectionForms {
                node: node.to_owned(),
            });
        }
        let undeclared =
            |side: &'static str, field: &str| CompileError::MappingReferencesUndeclaredField {
                node: node.to_owned(),
                side,
                field: field.to_owned(),
            };
        let check = |schema: &Schema, side: &'static str, field: &str| {
            schema
                .field(field)
                .map(|_| ())
                .ok_or_else(|| undeclared(side, field))
        };
        for (c, p) in self.inputs.iter().flatten() {
            check(parent, "parent", p)?;
            check(child, "subgraph", c)?;
        }
        for (p, c) in self.outputs.iter().flatten() {
            check(parent, "parent", p)?;
            check(child, "subgraph", c)?;
        }
        for f in self.projects_in.iter().chain(&self.projects_out).flatten() {
            check(parent, "parent", f)?;
            check(child, "subgraph", f)?;
        }
        // Parent fields copied in and merged back out.
        let mut round_trips: Vec<&str> = Vec::new();
        if self.declared_sets() {
            let out = self.projects_out.as_deref().unwrap_or_default();
            for f in self.projects_in.iter().flatten() {
                if out.contains(f) {
                    round_trips.push(f);
                }
            }
        } else if let Some(inputs) = &self.inputs {
            for (c, p) in inputs {
                let back = match &self.outputs {
                    Some(outputs) => outputs.get(p) == Some(c),
                    None => c == p,
                };
                if back {
                    round_trips.push(p);
                }
            }
        }
        Ok(round_trips
            .into_iter()
            .filter_map(|field| {
                let f = parent.field(field)?;
                (!f.round_trip_idempotent).then(|| CompileWarning::ProjectionReducerRoundTrip {
                    node: node.to_owned(),
                    field: field.to_owned(),
                    reducer: f.reducer.name.clone(),
                })
            })
            .collect())
    }

    fn project_in(&self, parent: &JsonState, child: &mut Map<String, Value>) {
        let copy = |child: &mut Map<String, Value>, c: &str, p: &str| {
            if let Some(value) = parent.get(p) {
                child.insert(c.to_owned(), value.clone());
            }
        };
        if self.declared_sets() {
            for f in self.projects_in.iter().flatten() {
                copy(child, f, f);
            }
        } else {
            for (c, p) in self.inputs.iter().flatten() {
                copy(child, c, p);
            }
        }
    }

    fn project_out(&self, parent: &Schema, child: &JsonState) -> Map<String, Value> {
        let take = |c: &str| child.get(c).cloned();
        let mut out = Map::new();
        if self.declared_sets() {
            for f in self.projects_out.iter().flatten() {
                out.extend(take(f).map(|v| (f.clone(), v)));
            }
        } else if let Some(outputs) = &self.outputs {
            for (p, c) in outputs {
                out.extend(take(c).map(|v| (p.clone(), v)));
            }
        } else {
            for (name, value) in child.values() {
                if parent.field(name).is_some() {
                    out.insert(name.clone(), value.clone());
                }
            }
        }
        out
    }
}

/// A subgraph of [`JsonState`]s projected by field name; add it with
/// [`GraphBuilder::json_subgraph`](crate::GraphBuilder::json_subgraph), which checks the
/// projection.
pub struct JsonSubgraph<KC> {
    graph: Graph<JsonState, KC>,
    schema: Arc<Schema>,
    projection: Arc<Projection>,
}

impl<KC: NodeKey> JsonSubgraph<KC> {
    /// Runs `graph`, whose states follow `schema`, projected by `projection`.
    pub fn new(graph: Graph<JsonState, KC>, schema: Arc<Schema>, projection: Projection) -> Self {
        JsonSubgraph {
            graph,
            schema,
            projection: Arc::new(projection),
        }
    }

    pub(crate) fn check(
        &self,
        node: &str,
        parent: &Schema,
    ) -> Result<Vec<CompileWarning>, CompileError> {
        self.projection.check(node, parent, &self.schema)
    }
}

impl<KC: NodeKey> Node<JsonState> for JsonSubgraph<KC> {
    fn call(&self, state: Arc<JsonState>, cx: Context) -> NodeFuture<JsonUpdate> {
        let mut values = self.schema.initial_state();
        self.projection.project_in(&state, &mut values);
        // The projected values are copied in, not merged through the child's reducers.
        let child = JsonState::from_values(Arc::clone(&self.schema), values);
        let parent_schema = Arc::clone(state.schema_ref());
        drop(state);
        let graph = self.graph.clone();
        let projection = Arc::clone(&self.projection);
        Box::pin(async move {
            let done = graph
                .invoke_nested(child, &cx, "sub")
                .await
                .map_err(|e: RunError<JsonState>| e.into_node_error())?;
            let out = projection.project_out(&parent_schema, &done);
            Ok(NodeOutput::Update(JsonUpdate::new(
                parent_schema,
                Value::Object(out),
            )))
        })
    }
}
