//! The step logic, in one place for every kind of run (in memory, nested, durable): a node's
//! result as its update, a step's updates composed into the one update that merges at the
//! barrier (in node order, two writes of a field that keeps one value refused, naming both
//! nodes), and the edges that pick the next step's tasks from the merged state.
//!
//! How the composed update is committed (applied to the run's state, or staged on a stored
//! thread) is the run's [`Commit`](crate::run::Commit); the run loop ([`run`](crate::run))
//! calls these in order.

use crate::error::RunErrorKind;
use crate::graph::{Graph, GraphEdge as Edge, NodeEntry};
use crate::name::NodeKey;
use crate::run::NodeResult;
use crate::GraphState;
use agentstate::{Combine, FanIn};
use std::sync::Arc;

/// The next step's tasks: node indices, and for each the input of its `Send` (`None`: the node
/// reads the state).
pub(crate) type Next<S> = (Vec<usize>, Vec<Option<Arc<S>>>);

/// A step's update as it merges at the barrier.
pub(crate) struct Composed<U> {
    /// The updates of the step's nodes, composed in node order.
    pub(crate) update: U,
    /// The node it came from, when one node wrote (named by a merge error).
    pub(crate) from: Option<usize>,
}

impl<S: GraphState, K: NodeKey> Graph<S, K> {
    /// A node's result as its update: a failure is its `node_exception`, an output that does
    /// not compose (two updates of one field that cannot take both) a `reducer_error`.
    pub(crate) fn node_update(
        &self,
        at: usize,
        result: NodeResult<S::Update>,
    ) -> Result<Option<S::Update>, RunErrorKind> {
        let entry = &self.inner().nodes[at];
        let output = result.map_err(|error| RunErrorKind::Node {
            node: entry.name.to_string(),
            error,
        })?;
        output
            .into_update(S::compose)
            .map_err(|error| RunErrorKind::Merge {
                nodes: vec![entry.name.to_string()],
                error: Box::new(error.from_node(&entry.name)),
            })
    }

    /// A step's updates (in node order) as the one update that merges at the barrier (`None`:
    /// no node wrote). Several compose as parallel writes, once; a field two nodes wrote that
    /// cannot take both is an error naming the field and both nodes.
    pub(crate) fn compose(
        &self,
        active: &[usize],
        updates: Vec<Option<S::Update>>,
    ) -> Result<Option<Composed<S::Update>>, RunErrorKind> {
        let mut written = active
            .iter()
            .zip(updates)
            .filter_map(|(&at, u)| u.map(|u| (at, u)));
        let Some((first_at, first)) = written.next() else {
            return Ok(None);
        };
        let Some(second) = written.next() else {
            return Ok(Some(Composed {
                update: first,
                from: Some(first_at),
            }));
        };
        let written: Vec<(usize, S::Update)> = [(first_at, first), second]
            .into_iter()
            .chain(written)
            .collect();
        Ok(Some(Composed {
            update: combine_parallel::<S, K>(&self.inner().nodes, written)?,
            from: None,
        }))
    }

    /// The error of a step whose composed update does not merge into the state.
    pub(crate) fn merge_error(
        &self,
        active: &[usize],
        from: Option<usize>,
        error: agentstate::Error,
    ) -> RunErrorKind {
        let nodes = &self.inner().nodes;
        RunErrorKind::Merge {
            nodes: active.iter().map(|&i| nodes[i].name.to_string()).collect(),
            error: Box::new(match from {
                Some(at) => error.from_node(&nodes[at].name),
                None => error,
            }),
        }
    }

    /// Whether routing after a step of `active` can fail (a conditional or `Send` edge runs
    /// user code, which may fail or name a node the graph does not have).
    pub(crate) fn routing_may_fail(&self, active: &[usize]) -> bool {
        let nodes = &self.inner().nodes;
        active
            .iter()
            .any(|&at| !matches!(nodes[at].edge, Edge::Static(_)))
    }

    /// The next step's tasks: the targets of the step's nodes' edges, each once, in node
    /// order, then the `Send`s with their inputs, in the order they were returned.
    pub(crate) fn route(&self, state: &S, active: &[usize]) -> Result<Next<S>, RunErrorKind> {
        let inner = self.inner();
        let mut sends: Vec<(usize, Arc<S>)> = Vec::new();
        let mut next: Vec<usize> = Vec::new();
        let mut push = |at: usize| {
            if !next.contains(&at) {
                next.push(at);
            }
        };
        for &at in active {
            let entry = &inner.nodes[at];
            match &entry.edge {
                Edge::Static(targets) => targets.iter().flatten().for_each(|&t| push(t)),
                Edge::Send { send, declared } => {
                    let (targets, dispatches) = send(state)
                        .map_err(|error| RunErrorKind::Edge {
                            node: entry.name.to_string(),
                            error,
                        })?
                        .into_parts();
                    let resolve = |key: &K| {
                        inner
                            .index
                            .get(key)
                            .copied()
                            .filter(|t| declared.as_ref().is_none_or(|d| d.contains(&Some(*t))))
                            .ok_or_else(|| RunErrorKind::Routing {
                                node: entry.name.to_string(),
                                target: key.name().to_owned(),
                            })
                    };
                    for target in &targets {
                        if let crate::name::Target::Node(key) = target {
                            push(resolve(key)?);
                        }
                    }
                    for crate::name::Dispatch { node, input } in dispatches {
                        sends.push((resolve(&node)?, Arc::new(input)));
                    }
                }
                Edge::Conditional { route, declared } => {
                    let routes = route(state).map_err(|error| RunErrorKind::Edge {
                        node: entry.name.to_string(),
                        error,
                    })?;
                    for target in routes.targets() {
                        let crate::name::Target::Node(key) = target else {
                            continue;
                        };
                        let found =
                            inner.index.get(key).copied().filter(|t| {
                                declared.as_ref().is_none_or(|d| d.contains(&Some(*t)))
                            });
                        match found {
                            Some(t) => push(t),
                            None => {
                                return Err(RunErrorKind::Routing {
                                    node: entry.name.to_string(),
                                    target: key.name().to_owned(),
                                })
                            }
                        }
                    }
                }
            }
        }
        if next.len() > 1 {
            next.sort_unstable();
        }
        let mut inputs: Vec<Option<Arc<S>>> = vec![None; next.len()];
        for (at, input) in sends {
            next.push(at);
            inputs.push(Some(input));
        }
        Ok((next, inputs))
    }
}

/// Composes parallel updates in node order; a field two nodes wrote that cannot take both is
/// reported naming both nodes.
fn combine_parallel<S: GraphState, K>(
    nodes: &[NodeEntry<S, K>],
    written: Vec<(usize, S::Update)>,
) -> Result<S::Update, RunErrorKind> {
    let how = Combine::Parallel(FanIn::Strict);
    let mut acc: Option<S::Update> = None;
    for (i, (at, update)) in written.iter().enumerate() {
        let combined = match acc.take() {
            None => Ok(update.clone()),
            Some(prev) => S::compose(prev, update.clone(), how),
        };
        match combined {
            Ok(c) => acc = Some(c),
            Err(error) => {
                // Which earlier node's update clashes with this one.
                let first = written[..i]
                    .iter()
                    .find(|(_, earlier)| S::compose(earlier.clone(), update.clone(), how).is_err());
                let nodes_named = |at: usize| nodes[at].name.to_string();
                return Err(match (first, error.field()) {
                    (Some(&(first, _)), Some(field))
                        if error.category() == "state_validation_error" =>
                    {
                        RunErrorKind::ConcurrentWrite {
                            field: field.to_owned(),
                            first: nodes_named(first),
                            second: nodes_named(*at),
                            error: Box::new(error),
                        }
                    }
                    _ => RunErrorKind::Merge {
                        nodes: written.iter().map(|(at, _)| nodes_named(*at)).collect(),
                        error: Box::new(error.from_node(&nodes[*at].name)),
                    },
                });
            }
        }
    }
    Ok(acc.expect("at least two updates"))
}
