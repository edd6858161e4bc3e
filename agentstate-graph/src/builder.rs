//! Building a graph: nodes, edges, the entry, and the checks that make a [`Graph`].

use crate::error::{CompileError, CompileWarning};
use crate::graph::{Breakpoints, Graph, GraphEdge as Edge, Inner, NodeEntry, RouteFn};
use crate::json::JsonState;
use crate::name::{NodeKey, Routes, Target};
use crate::node::{BoxError, Node};
use crate::subgraph::JsonSubgraph;
use crate::GraphState;
use agentstate::did_you_mean;
use agentstate::schema::Schema;
use std::collections::HashMap;
use std::sync::Arc;

/// LangGraph's default recursion limit, which this crate keeps: a run that needs 25 or more
/// steps stops with a `recursion_limit` error after its 25th.
pub const DEFAULT_RECURSION_LIMIT: usize = 25;

enum EdgeDecl<S, K> {
    Static(Vec<Target<K>>),
    Conditional {
        route: RouteFn<S, K>,
        declared: Option<Vec<Target<K>>>,
    },
    Send {
        send: crate::graph::SendFn<S, K>,
        declared: Option<Vec<Target<K>>>,
    },
}

/// Builds a [`Graph`]: nodes, edges, the entry, and the checks that make a graph. See
/// [`Graph::builder`].
///
/// # Checks
///
/// [`build`](GraphBuilder::build) checks the graph and gives an immutable [`Graph`], with
/// OpenArmature's compile-error categories ([`CompileError::category`]), checked in this order:
/// `duplicate_node`, `no_declared_entry`, `dangling_edge` (an edge, the entry or a declared
/// route target naming a node that was not added, or a variant of a
/// [`node_names!`](crate::node_names) enum without a node), `multiple_outgoing_edges`,
/// `unreachable_node`, then `dangling_edge` again for a node without an outgoing edge.
///
/// Reachability follows static edges and the declared targets of conditional and dynamic
/// fan-out edges ([`route_to`](GraphBuilder::route_to),
/// [`route_send_to`](GraphBuilder::route_send_to)); an edge declared without its targets
/// ([`route`](GraphBuilder::route), [`route_send`](GraphBuilder::route_send)) may reach any
/// node, so no node is reported unreachable once such an edge is reachable.
pub struct GraphBuilder<S, K> {
    nodes: Vec<(K, Arc<dyn Node<S>>)>,
    edges: Vec<(K, EdgeDecl<S, K>)>,
    entry: Option<K>,
    recursion_limit: usize,
    step_timeout: Option<std::time::Duration>,
    /// The nodes runs suspend before, and after.
    before: Vec<K>,
    after: Vec<K>,
    /// The first error found while adding (reported by `build`).
    error: Option<CompileError>,
    warnings: Vec<CompileWarning>,
}

impl<S: GraphState, K: NodeKey> Default for GraphBuilder<S, K> {
    fn default() -> Self {
        GraphBuilder {
            nodes: Vec::new(),
            edges: Vec::new(),
            entry: None,
            recursion_limit: DEFAULT_RECURSION_LIMIT,
            step_timeout: None,
            before: Vec::new(),
            after: Vec::new(),
            error: None,
            warnings: Vec::new(),
        }
    }
}

impl<S: GraphState, K: NodeKey> GraphBuilder<S, K> {
    /// Adds a node.
    pub fn node(mut self, key: K, node: impl Node<S>) -> Self {
        self.nodes.push((key, Arc::new(node)));
        self
    }

    /// Declares the node the run starts at.
    pub fn entry(mut self, key: K) -> Self {
        self.entry = Some(key);
        self
    }

    /// A static edge: after `from`, run `to` (a node or [`END`](crate::END)).
    pub fn edge(mut self, from: K, to: impl Into<Target<K>>) -> Self {
        self.edges.push((from, EdgeDecl::Static(vec![to.into()])));
        self
    }

    /// Static edges to several targets at once: after `from`, all of them run in the next step,
    /// in parallel, and their updates merge at the step's barrier (LangGraph's several
    /// `add_edge` calls from one node; declared at once here, since OpenArmature gives every
    /// node one outgoing edge).
    pub fn edges<T: Into<Target<K>>>(mut self, from: K, to: impl IntoIterator<Item = T>) -> Self {
        let targets = to.into_iter().map(Into::into).collect();
        self.edges.push((from, EdgeDecl::Static(targets)));
        self
    }

    /// A conditional edge: after `from`'s step merged, `route` reads the state and names the
    /// next node(s) or [`END`](crate::END), as [`Routes`] (`.into()` from a key, `END`, or a
    /// `Vec`/array of keys for parallel branches). Its targets are not declared, so a target that is
    /// not a node is a `routing_error` when it is taken (with a [`node_names!`](crate::node_names)
    /// enum, every target is a node).
    pub fn route<F>(self, from: K, route: F) -> Self
    where
        F: Fn(&S) -> Routes<K> + Send + Sync + 'static,
    {
        self.try_route(from, move |state: &S| {
            Ok::<_, std::convert::Infallible>(route(state))
        })
    }

    /// A conditional edge that may fail: its error stops the run as an `edge_exception`.
    pub fn try_route<E, F>(mut self, from: K, route: F) -> Self
    where
        F: Fn(&S) -> Result<Routes<K>, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        let route: RouteFn<S, K> = Arc::new(move |state: &S| route(state).map_err(Into::into));
        self.edges.push((
            from,
            EdgeDecl::Conditional {
                route,
                declared: None,
            },
        ));
        self
    }

    /// A conditional edge with its possible targets declared (LangGraph's path map): building
    /// checks that they are nodes and counts them as reachable; at run time a target outside
    /// them is a `routing_error`.
    pub fn route_to<T, F>(mut self, from: K, targets: impl IntoIterator<Item = T>, route: F) -> Self
    where
        T: Into<Target<K>>,
        F: Fn(&S) -> Routes<K> + Send + Sync + 'static,
    {
        let route: RouteFn<S, K> = Arc::new(move |state: &S| Ok(route(state)));
        let declared = Some(targets.into_iter().map(Into::into).collect());
        self.edges
            .push((from, EdgeDecl::Conditional { route, declared }));
        self
    }

    /// A dynamic fan-out edge (LangGraph's `Send`): after `from`'s step merged, `sends` reads
    /// the state and returns tasks for the next step, each a node with its own input state,
    /// which it reads instead of the graph's state; their updates merge into the graph's state
    /// in the order returned. No task ends this branch (as END). A node that does not exist
    /// is a `routing_error`. To name plain targets too (a node to fall back to when there is
    /// nothing to send), and to declare the nodes the router may name, use
    /// [`route_send_to`](GraphBuilder::route_send_to).
    ///
    /// ```
    /// use agentstate_graph::{Context, Dispatch, Graph, END};
    /// use agentstate::AgentState;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Map { subjects: Vec<String>, subject: String, #[reducer(append)] jokes: Vec<String> }
    ///
    /// let graph = Graph::builder()
    ///     .node("plan", |_: Arc<Map>, _: Context| async { Ok::<_, std::convert::Infallible>(()) })
    ///     .node("joke", |s: Arc<Map>, _: Context| async move {
    ///         Ok::<_, std::convert::Infallible>(MapUpdate::default().jokes(vec![format!("a {} joke", s.subject)]))
    ///     })
    ///     .entry("plan")
    ///     .route_send("plan", |s: &Map| {
    ///         s.subjects.iter().map(|x| Dispatch::to("joke", Map { subject: x.clone(), ..Map::default() })).collect()
    ///     })
    ///     .edge("joke", END)
    ///     .build()?;
    /// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// let state = runtime.block_on(graph.invoke(Map { subjects: vec!["cat".into(), "dog".into()], ..Map::default() }))?;
    /// assert_eq!(state.jokes, ["a cat joke", "a dog joke"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn route_send<F>(mut self, from: K, sends: F) -> Self
    where
        F: Fn(&S) -> Vec<crate::name::Dispatch<K, S>> + Send + Sync + 'static,
    {
        let send: crate::graph::SendFn<S, K> = Arc::new(move |state: &S| Ok(sends(state).into()));
        self.edges.push((
            from,
            EdgeDecl::Send {
                send,
                declared: None,
            },
        ));
        self
    }

    /// A dynamic fan-out edge whose router may also name plain targets (LangGraph's router
    /// returning `Send`s or node names): after `from`'s step merged, `router` reads the state
    /// and returns [`Sends`](crate::Sends): `Send` tasks (each a node with its own input),
    /// nodes that run on the graph's state, [`END`](crate::END), or any mix (so it can fall
    /// back to a named node when there is nothing to send). Plain targets run before the
    /// tasks; nothing at all ends the branch.
    ///
    /// `targets` declares every node the router may name, as a task's node or a plain target
    /// (LangGraph's path map): building checks that they are nodes (`dangling_edge`) and
    /// counts them as reachable from `from`; at run time a node outside them is a
    /// `routing_error`.
    ///
    /// ```
    /// use agentstate_graph::{Context, Dispatch, Graph, Sends, END};
    /// use agentstate::AgentState;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Map { subjects: Vec<String>, subject: String, #[reducer(append)] jokes: Vec<String> }
    ///
    /// let graph = Graph::builder()
    ///     .node("plan", |_: Arc<Map>, _: Context| async { Ok::<_, std::convert::Infallible>(()) })
    ///     .node("joke", |s: Arc<Map>, _: Context| async move {
    ///         Ok::<_, std::convert::Infallible>(MapUpdate::default().jokes(vec![format!("a {} joke", s.subject)]))
    ///     })
    ///     .node("apologize", |_: Arc<Map>, _: Context| async {
    ///         Ok::<_, std::convert::Infallible>(MapUpdate::default().jokes(vec!["no subjects, no jokes".to_owned()]))
    ///     })
    ///     .entry("plan")
    ///     .route_send_to("plan", ["joke", "apologize"], |s: &Map| -> Sends<_, _> {
    ///         if s.subjects.is_empty() {
    ///             return "apologize".into(); // nothing to send: fall back to a node
    ///         }
    ///         s.subjects.iter().map(|x| Dispatch::to("joke", Map { subject: x.clone(), ..Map::default() })).collect()
    ///     })
    ///     .edge("joke", END)
    ///     .edge("apologize", END)
    ///     .build()?;
    /// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// let state = runtime.block_on(graph.invoke(Map { subjects: vec!["cat".into(), "dog".into()], ..Map::default() }))?;
    /// assert_eq!(state.jokes, ["a cat joke", "a dog joke"]);
    /// let state = runtime.block_on(graph.invoke(Map::default()))?;
    /// assert_eq!(state.jokes, ["no subjects, no jokes"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn route_send_to<T, F>(
        mut self,
        from: K,
        targets: impl IntoIterator<Item = T>,
        router: F,
    ) -> Self
    where
        T: Into<Target<K>>,
        F: Fn(&S) -> crate::name::Sends<K, S> + Send + Sync + 'static,
    {
        let send: crate::graph::SendFn<S, K> = Arc::new(move |state: &S| Ok(router(state)));
        let declared = Some(targets.into_iter().map(Into::into).collect());
        self.edges.push((from, EdgeDecl::Send { send, declared }));
        self
    }

    /// Static breakpoints: a durable run suspends before each step that would run one of
    /// `nodes`, with an interrupt per node (id `"{node}:{step}.before@{run_id}"`, payload
    /// `{"breakpoint": "before"}`); resumed with an answer to it (any value), the step runs
    /// (LangGraph's `interrupt_before`). Runs in memory cannot suspend: they fail there with
    /// the interrupt as the node's error. [`DurableGraph::interrupt_before`] adds breakpoints
    /// for one worker's runs.
    ///
    /// [`DurableGraph::interrupt_before`]: crate::durable::DurableGraph::interrupt_before
    pub fn interrupt_before(mut self, nodes: impl IntoIterator<Item = K>) -> Self {
        self.before.extend(nodes);
        self
    }

    /// Static breakpoints after `nodes`: a durable run suspends after each step that ran one
    /// of them, before the next step (interrupt id `"{node}:{step}.after@{run_id}"`, payload
    /// `{"breakpoint": "after"}`), as [`interrupt_before`](GraphBuilder::interrupt_before)
    /// (LangGraph's `interrupt_after`).
    pub fn interrupt_after(mut self, nodes: impl IntoIterator<Item = K>) -> Self {
        self.after.extend(nodes);
        self
    }

    /// How long a step's nodes may run, all of them (none by default; LangGraph's
    /// `step_timeout`): a step still running after `timeout` is cut short (its nodes' futures
    /// dropped, nothing of it merged) and the run fails with `step_timeout`. For one node's
    /// own limit, with retries, wrap it: [`NodeExt::timeout`](crate::layer::NodeExt::timeout).
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::{Context, Graph, END};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Call { answer: String }
    ///
    /// let graph = Graph::builder()
    ///     .node("slow", |_: Arc<Call>, _: Context| async {
    ///         tokio::time::sleep(Duration::from_secs(60)).await;
    ///         Ok::<_, std::convert::Infallible>(CallUpdate::default().answer("late"))
    ///     })
    ///     .entry("slow")
    ///     .edge("slow", END)
    ///     .step_timeout(Duration::from_millis(20))
    ///     .build()?;
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    /// let failed = runtime.block_on(graph.invoke(Call::default())).unwrap_err();
    /// assert_eq!(failed.category(), "step_timeout");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn step_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.step_timeout = Some(timeout);
        self
    }

    /// The default recursion limit of the graph's runs ([`DEFAULT_RECURSION_LIMIT`] unless set):
    /// a run that needs `limit` steps or more stops with a `recursion_limit` error after step
    /// `limit`, whose update is merged (LangGraph's rule).
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = limit;
        self
    }

    /// Checks the graph and compiles it (see [the checks](GraphBuilder#checks)).
    pub fn build(self) -> Result<Graph<S, K>, CompileError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let mut index: HashMap<K, usize> = HashMap::with_capacity(self.nodes.len());
        for (at, (key, _)) in self.nodes.iter().enumerate() {
            if index.insert(key.clone(), at).is_some() {
                return Err(CompileError::DuplicateNode {
                    node: key.name().to_owned(),
                });
            }
        }
        let entry_key = self.entry.ok_or(CompileError::NoDeclaredEntry)?;
        let dangling = |place: String, name: &str| {
            let hint = did_you_mean(name, index.keys().map(|k| k.name()))
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            CompileError::DanglingEdge {
                place,
                target: name.to_owned(),
                hint,
            }
        };
        let entry = *index
            .get(&entry_key)
            .ok_or_else(|| dangling("the entry".to_owned(), entry_key.name()))?;
        if let Some(all) = K::ALL {
            if let Some(missing) = all.iter().find(|k| !index.contains_key(*k)) {
                return Err(dangling(
                    format!("the node enum `{}`", short_type_name::<K>()),
                    missing.name(),
                ));
            }
        }
        let resolve =
            |from: &K, targets: &[Target<K>]| -> Result<Vec<Option<usize>>, CompileError> {
                targets
                    .iter()
                    .map(|t| match t {
                        Target::End => Ok(None),
                        Target::Node(k) => index.get(k).copied().map(Some).ok_or_else(|| {
                            dangling(format!("the edge from `{}`", from.name()), k.name())
                        }),
                    })
                    .collect()
            };
        let mut edges: Vec<Option<Edge<S, K>>> = (0..self.nodes.len()).map(|_| None).collect();
        for (from, decl) in self.edges {
            let at = *index
                .get(&from)
                .ok_or_else(|| dangling("an edge".to_owned(), from.name()))?;
            let edge = match decl {
                EdgeDecl::Static(targets) => Edge::Static(resolve(&from, &targets)?),
                EdgeDecl::Conditional { route, declared } => {
                    let declared = match declared {
                        Some(targets) => Some(resolve(&from, &targets)?),
                        None => None,
                    };
                    Edge::Conditional { route, declared }
                }
                EdgeDecl::Send { send, declared } => {
                    let declared = match declared {
                        Some(targets) => Some(resolve(&from, &targets)?),
                        None => None,
                    };
                    Edge::Send { send, declared }
                }
            };
            if edges[at].is_some() {
                return Err(CompileError::MultipleOutgoingEdges {
                    node: from.name().to_owned(),
                });
            }
            edges[at] = Some(edge);
        }
        let mut breakpoints = Breakpoints {
            before: vec![false; self.nodes.len()],
            after: vec![false; self.nodes.len()],
        };
        for (set, keys, when) in [
            (&mut breakpoints.before, &self.before, "interrupt_before"),
            (&mut breakpoints.after, &self.after, "interrupt_after"),
        ] {
            for key in keys {
                let at = *index
                    .get(key)
                    .ok_or_else(|| dangling(format!("`{when}`"), key.name()))?;
                set[at] = true;
            }
        }
        // Reachability from the entry.
        let mut reached = vec![false; self.nodes.len()];
        let mut stack = vec![entry];
        let mut open_route = false;
        reached[entry] = true;
        while let Some(at) = stack.pop() {
            let next: &[Option<usize>] = match &edges[at] {
                Some(Edge::Static(targets)) => targets,
                Some(
                    Edge::Conditional {
                        declared: Some(targets),
                        ..
                    }
                    | Edge::Send {
                        declared: Some(targets),
                        ..
                    },
                ) => targets,
                Some(
                    Edge::Conditional { declared: None, .. } | Edge::Send { declared: None, .. },
                ) => {
                    open_route = true;
                    &[]
                }
                None => &[],
            };
            for &target in next.iter().flatten() {
                if !reached[target] {
                    reached[target] = true;
                    stack.push(target);
                }
            }
        }
        if !open_route {
            if let Some(at) = reached.iter().position(|r| !r) {
                return Err(CompileError::UnreachableNode {
                    node: self.nodes[at].0.name().to_owned(),
                    entry: entry_key.name().to_owned(),
                });
            }
        }
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for ((key, node), edge) in self.nodes.into_iter().zip(edges) {
            let edge = edge.ok_or_else(|| CompileError::NoOutgoingEdge {
                node: key.name().to_owned(),
            })?;
            nodes.push(NodeEntry {
                name: Arc::from(key.name()),
                key,
                node,
                edge,
            });
        }
        Ok(Graph::from_inner(Inner {
            breakpoints,
            nodes,
            index,
            entry,
            recursion_limit: self.recursion_limit,
            step_timeout: self.step_timeout,
            warnings: self.warnings,
        }))
    }
}

impl<K: NodeKey> GraphBuilder<JsonState, K> {
    /// Adds a subgraph of [`JsonState`]s projected by field name, checking its projection
    /// against `parent`, this graph's schema: a name either schema does not declare is
    /// `mapping_references_undeclared_field`, both projection forms at once
    /// `conflicting_projection_forms` (reported by [`build`](GraphBuilder::build)); a field
    /// projected in and back out through a reducer that is not round-trip idempotent is a
    /// `projection_reducer_round_trip` warning ([`Graph::warnings`]).
    pub fn json_subgraph<KC: NodeKey>(
        mut self,
        key: K,
        parent: &Schema,
        subgraph: JsonSubgraph<KC>,
    ) -> Self {
        match subgraph.check(key.name(), parent) {
            Ok(warnings) => self.warnings.extend(warnings),
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self.node(key, subgraph)
    }
}

fn short_type_name<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    name.rsplit("::").next().unwrap_or(name)
}
