//! Layers: nodes that wrap a node, in tower's sense. [`Retry`] re-runs a failing node by a
//! [`RetryPolicy`]; [`Timeout`] fails a node that runs too long. Wrap with [`NodeExt`]:
//! `node.timeout(d).retry(policy)` gives each attempt its own timeout.
//!
//! Both need a tokio runtime with its timer enabled (`enable_time`) when they sleep or time out.
//! Dropping the run drops the attempt in flight and the sleep: nothing is merged.
//!
//! ```
//! use agentstate_graph::layer::{NodeExt, RetryPolicy};
//! use agentstate_graph::{Context, Graph, END};
//! use agentstate::AgentState;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Call { answer: String }
//!
//! let calls = Arc::new(AtomicU32::new(0));
//! let seen = Arc::clone(&calls);
//! let flaky = move |_: Arc<Call>, _: Context| {
//!     let attempt = seen.fetch_add(1, Ordering::SeqCst);
//!     async move {
//!         if attempt < 2 { return Err("503 from the provider".into()); }
//!         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(CallUpdate::default().answer("42"))
//!     }
//! };
//! let graph = Graph::builder()
//!     .node("model", flaky.timeout(Duration::from_secs(30)).retry(RetryPolicy::new(3).backoff_constant(Duration::ZERO)))
//!     .entry("model")
//!     .edge("model", END)
//!     .build()?;
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! assert_eq!(runtime.block_on(graph.invoke(Call::default()))?.answer, "42");
//! assert_eq!(calls.load(Ordering::SeqCst), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::node::{BoxError, Context, Node, NodeFuture};
use crate::GraphState;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

type Classifier<S> = Arc<dyn Fn(&BoxError, &S) -> bool + Send + Sync>;

/// How long to wait before a retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Backoff {
    /// The same wait before every retry.
    Constant(Duration),
    /// `base * 2^attempt`, at most `cap`; with `jitter`, a uniformly random wait between zero
    /// and that (OpenArmature's default "full jitter": base 1 s, cap 30 s).
    Exponential {
        /// The first wait.
        base: Duration,
        /// The longest wait.
        cap: Duration,
        /// Whether to draw the wait at random below the exponential one.
        jitter: bool,
    },
}

impl Backoff {
    /// The wait before retry number `attempt + 1` (`attempt` from 0).
    pub fn delay(&self, attempt: u32) -> Duration {
        match *self {
            Backoff::Constant(wait) => wait,
            Backoff::Exponential { base, cap, jitter } => {
                let full = base
                    .checked_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX))
                    .unwrap_or(cap)
                    .min(cap);
                if jitter {
                    // A uniform fraction from a random UUID: no generator to seed or share.
                    let random = (uuid::Uuid::new_v4().as_u128() >> 75) as f64;
                    full.mul_f64(random / (1u64 << 53) as f64)
                } else {
                    full
                }
            }
        }
    }
}

/// When and how often a [`Retry`] re-runs its node.
pub struct RetryPolicy<S> {
    max_attempts: u32,
    backoff: Backoff,
    classifier: Option<Classifier<S>>,
}

impl<S> Clone for RetryPolicy<S> {
    fn clone(&self) -> Self {
        RetryPolicy {
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            classifier: self.classifier.clone(),
        }
    }
}

impl<S> fmt::Debug for RetryPolicy<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .field("classifier", &self.classifier.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl<S> Default for RetryPolicy<S> {
    /// OpenArmature's defaults: 3 attempts, exponential backoff with full jitter (1 s, cap
    /// 30 s); every error retries (a Rust error has no category to classify by: narrow it with
    /// [`retry_if`](RetryPolicy::retry_if)).
    fn default() -> Self {
        RetryPolicy::new(3)
    }
}

impl<S> RetryPolicy<S> {
    /// At most `max_attempts` attempts in all (1: no retry), with the default backoff.
    pub fn new(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts: max_attempts.max(1),
            backoff: Backoff::Exponential {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(30),
                jitter: true,
            },
            classifier: None,
        }
    }

    /// The backoff.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// A constant wait between attempts.
    pub fn backoff_constant(self, wait: Duration) -> Self {
        self.backoff(Backoff::Constant(wait))
    }

    /// Retries only the errors `classifier` accepts; it sees the error and the state the
    /// failed attempt read.
    pub fn retry_if(
        mut self,
        classifier: impl Fn(&BoxError, &S) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.classifier = Some(Arc::new(classifier));
        self
    }

    /// The number of attempts.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Whether attempt `attempt` (from 0), which failed with `error` on `state`, is retried.
    pub(crate) fn should_retry(&self, attempt: u32, error: &BoxError, state: &S) -> bool {
        attempt + 1 < self.max_attempts
            && self
                .classifier
                .as_ref()
                .is_none_or(|classify| classify(error, state))
    }

    /// Sleeps before retry number `attempt + 1`.
    pub(crate) async fn wait(&self, attempt: u32) {
        let wait = self.backoff.delay(attempt);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// A node re-run by a [`RetryPolicy`] when it fails. The last attempt's error is the node's.
/// In a durable run an attempt is given what the earlier ones recorded: the results of their
/// [`effect`](crate::Context::effect)s and of the tool calls a [`ToolSet`](crate::ToolSet)
/// ran, which do not run again.
pub struct Retry<N, S> {
    node: Arc<N>,
    policy: RetryPolicy<S>,
}

impl<S: GraphState, N: Node<S>> Node<S> for Retry<N, S> {
    fn call(&self, state: Arc<S>, cx: Context) -> NodeFuture<S::Update> {
        let node = Arc::clone(&self.node);
        let policy = self.policy.clone();
        Box::pin(async move {
            let mut attempt = 0;
            loop {
                match node.call(Arc::clone(&state), cx.attempt()).await {
                    Ok(output) => return Ok(output),
                    Err(error) => {
                        if !policy.should_retry(attempt, &error, &state) {
                            return Err(error);
                        }
                        policy.wait(attempt).await;
                        attempt += 1;
                    }
                }
            }
        })
    }
}

/// A node that did not finish in time: the error of a [`Timeout`] (a `node_exception`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elapsed {
    /// The timeout.
    pub after: Duration,
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "did not finish within its timeout of {:?}", self.after)
    }
}

impl std::error::Error for Elapsed {}

/// A node failed with [`Elapsed`] when it runs longer than its timeout (and dropped then).
pub struct Timeout<N> {
    node: N,
    after: Duration,
}

impl<S: GraphState, N: Node<S>> Node<S> for Timeout<N> {
    fn call(&self, state: Arc<S>, cx: Context) -> NodeFuture<S::Update> {
        let future = self.node.call(state, cx);
        let after = self.after;
        Box::pin(async move {
            match tokio::time::timeout(after, future).await {
                Ok(result) => result,
                Err(_) => Err(Box::new(Elapsed { after }) as BoxError),
            }
        })
    }
}

/// Wraps a node in a layer.
pub trait NodeExt<S: GraphState>: Node<S> + Sized {
    /// Re-runs the node by `policy` when it fails.
    fn retry(self, policy: RetryPolicy<S>) -> Retry<Self, S> {
        Retry {
            node: Arc::new(self),
            policy,
        }
    }

    /// Fails the node with [`Elapsed`] when it runs longer than `after`.
    fn timeout(self, after: Duration) -> Timeout<Self> {
        Timeout { node: self, after }
    }
}

impl<S: GraphState, N: Node<S>> NodeExt<S> for N {}
