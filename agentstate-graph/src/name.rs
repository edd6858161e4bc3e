//! Node names: the [`NodeKey`] a graph names its nodes with, routing [`Target`]s and [`END`].

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

/// What a graph names its nodes with: an enum declared with [`node_names!`](crate::node_names)
/// (a route to a node that does not exist does not compile, and building the graph checks that
/// every variant has a node), or strings (`&'static str`, `String`, `Arc<str>`) for graphs built
/// from configuration, checked when the graph is built (static edges) or when the route is taken
/// (conditional edges, a `routing_error`).
///
/// Implemented for strings and, through [`node_names!`](crate::node_names), for enums. An enum is a *closed* set
/// of names ([`ALL`](NodeKey::ALL)): building a graph checks that each has a node, so every
/// route the compiler accepts reaches a node.
pub trait NodeKey: Clone + Eq + Hash + Debug + Send + Sync + 'static {
    /// Every name of a closed set (an enum), or `None` for an open one (strings).
    const ALL: Option<&'static [Self]> = None;

    /// The node's name, as events, errors and AG-UI steps show it.
    fn name(&self) -> &str;
}

impl NodeKey for &'static str {
    fn name(&self) -> &str {
        self
    }
}

impl NodeKey for String {
    fn name(&self) -> &str {
        self
    }
}

impl NodeKey for Arc<str> {
    fn name(&self) -> &str {
        self
    }
}

/// Declares an enum of node names: the typed form of a graph's node set.
///
/// Each variant gets its name (the string after `=`); the enum derives `Clone`, `Copy`,
/// `PartialEq`, `Eq`, `Hash` and `Debug` and implements [`NodeKey`] as a closed set.
///
/// ```
/// use agentstate_graph::{node_names, NodeKey};
///
/// node_names! {
///     /// The nodes of a tool-calling agent.
///     pub enum Step {
///         Model = "model",
///         Tools = "tools",
///     }
/// }
/// assert_eq!(Step::Tools.name(), "tools");
/// assert_eq!(Step::ALL, Some(&[Step::Model, Step::Tools][..]));
/// ```
#[macro_export]
macro_rules! node_names {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $label:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $crate::NodeKey for $name {
            const ALL: ::core::option::Option<&'static [Self]> = ::core::option::Option::Some(&[$( $name::$variant ),+]);

            fn name(&self) -> &str {
                match self {
                    $( $name::$variant => $label ),+
                }
            }
        }
    };
}

/// `END`: the routing target that ends a branch of the run. It is a sentinel, not a node name,
/// so a node may be called `"END"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct End;

/// The [`End`] sentinel.
pub const END: End = End;

/// Where an edge goes: a node, or [`END`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target<K> {
    /// The node named so.
    Node(K),
    /// The end of this branch.
    End,
}

impl<K: NodeKey> Target<K> {
    /// The target's name (`END` for the end).
    pub fn name(&self) -> &str {
        match self {
            Target::Node(key) => key.name(),
            Target::End => "END",
        }
    }
}

impl<K> From<End> for Target<K> {
    fn from(End: End) -> Self {
        Target::End
    }
}

impl<K: NodeKey> From<K> for Target<K> {
    fn from(key: K) -> Self {
        Target::Node(key)
    }
}

/// What a conditional edge returns: one target, or several (a fan-out to parallel branches that
/// run in the next step). Build it with `.into()` from a key, [`END`], a [`Target`], or a `Vec`
/// or array of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes<K>(pub(crate) RoutesInner<K>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RoutesInner<K> {
    One(Target<K>),
    Many(Vec<Target<K>>),
}

impl<K> Routes<K> {
    /// The targets, in order.
    pub fn targets(&self) -> &[Target<K>] {
        match &self.0 {
            RoutesInner::One(target) => std::slice::from_ref(target),
            RoutesInner::Many(targets) => targets,
        }
    }
}

impl<K> From<Target<K>> for Routes<K> {
    fn from(target: Target<K>) -> Self {
        Routes(RoutesInner::One(target))
    }
}

impl<K> From<End> for Routes<K> {
    fn from(End: End) -> Self {
        Routes(RoutesInner::One(Target::End))
    }
}

impl<K: NodeKey> From<K> for Routes<K> {
    fn from(key: K) -> Self {
        Routes(RoutesInner::One(Target::Node(key)))
    }
}

impl<K: NodeKey> From<Vec<K>> for Routes<K> {
    fn from(keys: Vec<K>) -> Self {
        Routes(RoutesInner::Many(
            keys.into_iter().map(Target::Node).collect(),
        ))
    }
}

impl<K> From<Vec<Target<K>>> for Routes<K> {
    fn from(targets: Vec<Target<K>>) -> Self {
        Routes(RoutesInner::Many(targets))
    }
}

impl<K: NodeKey, const N: usize> From<[K; N]> for Routes<K> {
    fn from(keys: [K; N]) -> Self {
        Routes(RoutesInner::Many(
            keys.into_iter().map(Target::Node).collect(),
        ))
    }
}

/// A task of a dynamic fan-out (LangGraph's `Send`): run `node` in the next step on `input`
/// instead of the graph's state; see [`route_send`](crate::GraphBuilder::route_send).
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch<K, S> {
    /// The node to run.
    pub node: K,
    /// The state it reads.
    pub input: S,
}

impl<K, S> Dispatch<K, S> {
    /// A task running `node` on `input`.
    pub fn to(node: K, input: S) -> Self {
        Dispatch { node, input }
    }
}

/// What a send-router returns ([`route_send_to`](crate::GraphBuilder::route_send_to)): `Send`
/// tasks ([`Dispatch`]es, each a node with its own input), plain targets (nodes that read the
/// graph's state, or [`END`]), or both, as LangGraph's router returns `Send`s or node names.
/// Nothing at all ends the branch, as `END` does.
///
/// Collect it from [`Dispatch`]es, convert it from a `Vec` of them or from a key, [`END`], a
/// [`Target`] or [`Routes`], or build it with [`send`](Sends::send) and [`to`](Sends::to).
///
/// ```
/// use agentstate_graph::{Dispatch, Sends, Target, END};
///
/// // Fan out over the items, or go to `summarize` when there are none.
/// fn route(items: &[u32]) -> Sends<&'static str, u32> {
///     if items.is_empty() {
///         return "summarize".into();
///     }
///     items.iter().map(|&x| Dispatch::to("square", x)).collect()
/// }
/// assert_eq!(route(&[]).targets(), [Target::Node("summarize")]);
/// assert_eq!(route(&[2, 3]).dispatches().len(), 2);
///
/// let both = Sends::new().send("square", 4).to("audit").to(END);
/// assert_eq!(both.targets(), [Target::Node("audit"), Target::End]);
/// assert!(!both.is_empty() && Sends::<&str, u32>::new().is_empty());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Sends<K, S> {
    targets: Vec<Target<K>>,
    dispatches: Vec<Dispatch<K, S>>,
}

impl<K, S> Default for Sends<K, S> {
    fn default() -> Self {
        Sends {
            targets: Vec::new(),
            dispatches: Vec::new(),
        }
    }
}

impl<K, S> Sends<K, S> {
    /// Nothing yet (as it is, it ends the branch).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a `Send` task: `node` runs in the next step on `input`.
    pub fn send(mut self, node: K, input: S) -> Self {
        self.dispatches.push(Dispatch { node, input });
        self
    }

    /// Adds a plain target: a node that runs in the next step on the graph's state, or
    /// [`END`].
    pub fn to(mut self, target: impl Into<Target<K>>) -> Self {
        self.targets.push(target.into());
        self
    }

    /// The plain targets, in order.
    pub fn targets(&self) -> &[Target<K>] {
        &self.targets
    }

    /// The `Send` tasks, in order.
    pub fn dispatches(&self) -> &[Dispatch<K, S>] {
        &self.dispatches
    }

    /// Whether there is neither a target nor a task (the branch ends).
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty() && self.dispatches.is_empty()
    }

    /// The targets and the tasks.
    pub(crate) fn into_parts(self) -> (Vec<Target<K>>, Vec<Dispatch<K, S>>) {
        (self.targets, self.dispatches)
    }
}

impl<K, S> FromIterator<Dispatch<K, S>> for Sends<K, S> {
    fn from_iter<I: IntoIterator<Item = Dispatch<K, S>>>(iter: I) -> Self {
        Sends {
            targets: Vec::new(),
            dispatches: iter.into_iter().collect(),
        }
    }
}

impl<K, S> From<Vec<Dispatch<K, S>>> for Sends<K, S> {
    fn from(dispatches: Vec<Dispatch<K, S>>) -> Self {
        Sends {
            targets: Vec::new(),
            dispatches,
        }
    }
}

impl<K, S> From<Dispatch<K, S>> for Sends<K, S> {
    fn from(dispatch: Dispatch<K, S>) -> Self {
        Sends {
            targets: Vec::new(),
            dispatches: vec![dispatch],
        }
    }
}

impl<K, S> From<Routes<K>> for Sends<K, S> {
    fn from(routes: Routes<K>) -> Self {
        let targets = match routes.0 {
            RoutesInner::One(target) => vec![target],
            RoutesInner::Many(targets) => targets,
        };
        Sends {
            targets,
            dispatches: Vec::new(),
        }
    }
}

impl<K, S> From<Target<K>> for Sends<K, S> {
    fn from(target: Target<K>) -> Self {
        Sends {
            targets: vec![target],
            dispatches: Vec::new(),
        }
    }
}

impl<K, S> From<End> for Sends<K, S> {
    fn from(End: End) -> Self {
        Target::End.into()
    }
}

impl<K: NodeKey, S> From<K> for Sends<K, S> {
    fn from(key: K) -> Self {
        Target::Node(key).into()
    }
}
