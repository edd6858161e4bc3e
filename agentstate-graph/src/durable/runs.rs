//! The entry points of a durable run: a thread started ([`DurableGraph::start`]), a new run
//! on it ([`DurableGraph::run`]), its run resumed ([`DurableGraph::resume`]), and each of them
//! as a stream of events ([`DurableStream`]).

use super::begin::Begin;
use super::{Answers, DurableError, DurableGraph, DurableState, Outcome};
use crate::event::{Event, EventFilter, Outbox};
use crate::name::NodeKey;
use crate::stream::{Driven, Driver, Next};
use agentstate::NodeOutput;
use agentstate_store::backend::Backend;
use agentstate_store::StoreError;
use futures_core::Stream;
use serde_json::{Map, Value};
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

/// The key of a thread's metadata that names the run [`DurableGraph::start`] created it for,
/// so that a worker that resumes the thread before its run's input was committed starts that
/// run, with its id.
pub const START_RUN_KEY: &str = "agentstate_graph_run";

impl<S, K, B> DurableGraph<S, K, B>
where
    S: DurableState,
    K: NodeKey,
    B: Backend,
{
    /// Creates thread `thread` with `state` and runs the graph on it from its entry. The run's
    /// id is recorded with the thread when it is created, so the start is one run whoever
    /// carries it out: a worker that resumes the thread before this call took its lease starts
    /// that same run. To start a run a caller may retry, give its id:
    /// [`start_as`](DurableGraph::start_as).
    pub async fn start(&self, thread: &str, state: S) -> Result<Outcome<S>, DurableError<S>> {
        self.start_as(thread, &uuid::Uuid::new_v4().to_string(), state)
            .await
    }

    /// [`start`](DurableGraph::start) with the run's id `run_id`, chosen by the caller:
    /// idempotent. If the thread exists and its current run is `run_id`, nothing new starts:
    /// the run is resumed where it stands (after a crash), or its outcome is returned (it
    /// finished, or waits for answers). So a caller that lost the answer (a timeout, a
    /// `thread_leased` while another worker ran it) calls this again safely.
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::durable::Outcome;
    /// use agentstate_graph::{Context, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Job { done: bool }
    ///
    /// static RUNS: AtomicUsize = AtomicUsize::new(0);
    /// let graph = Graph::builder()
    ///     .node("work", |_: Arc<Job>, _: Context| async move {
    ///         RUNS.fetch_add(1, Ordering::SeqCst);
    ///         Ok::<_, std::convert::Infallible>(JobUpdate::default().done(true))
    ///     })
    ///     .entry("work")
    ///     .edge("work", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let durable = graph.durable(&store);
    /// let first = durable.start_as("job-1", "run-1", Job::default()).await?;
    /// let again = durable.start_as("job-1", "run-1", Job::default()).await?; // a retry
    /// assert_eq!(first, again);
    /// assert_eq!(RUNS.load(Ordering::SeqCst), 1);
    /// assert_eq!(durable.run_id("job-1").await?.as_deref(), Some("run-1"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn start_as(
        &self,
        thread: &str,
        run_id: &str,
        state: S,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let mut metadata = Map::new();
        metadata.insert(START_RUN_KEY.to_owned(), Value::from(run_id));
        match self.store.create_with(thread, state, metadata).await {
            Ok(_) => {}
            Err(StoreError::ThreadExists { .. })
                if self.run_id(thread).await?.as_deref() == Some(run_id)
                    || self.start_run(thread).await?.as_deref() == Some(run_id) => {}
            Err(error) => return Err(error.into()),
        }
        self.run_as(thread, run_id, ()).await
    }

    /// The id of thread `thread`'s current run (its last, finished or not), if a run started on
    /// it.
    pub async fn run_id(&self, thread: &str) -> Result<Option<String>, DurableError<S>> {
        Ok(self.position(thread).await?.run_id)
    }

    /// The run [`start`](DurableGraph::start) created thread `thread` for.
    pub(super) async fn start_run(&self, thread: &str) -> Result<Option<String>, DurableError<S>> {
        let info = self.store.info(thread).await?;
        Ok(info
            .metadata
            .get(START_RUN_KEY)
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    /// Starts a new run on thread `thread` from the graph's entry, `input` merged first (a
    /// user's message); the thread's last run must have finished. The input is committed as
    /// the run's first entry, before any node runs (so that the run, and its effects'
    /// idempotency keys, are the same when it is resumed after a crash).
    pub async fn run(
        &self,
        thread: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let input = input.into();
        let run: Driver<'_, _> = Box::pin(async move {
            self.execute(thread, Begin::Input(input, None), &mut Outbox::off())
                .await
        });
        run.await
    }

    /// [`run`](DurableGraph::run) with the run's id `run_id`, chosen by the caller: idempotent.
    /// If the thread's current run is `run_id`, nothing new starts: it is resumed where it
    /// stands, or its outcome is returned (see [`start_as`](DurableGraph::start_as)).
    pub async fn run_as(
        &self,
        thread: &str,
        run_id: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let begin = Begin::Input(input.into(), Some(run_id.to_owned()));
        let run: Driver<'_, _> =
            Box::pin(async move { self.execute(thread, begin, &mut Outbox::off()).await });
        run.await
    }

    /// Waits until thread `thread`'s run `run_id` is no longer in progress (no worker holds
    /// Continues thread `thread`'s run from where it stands: after a crash, the step in flight
    /// runs again (committed steps, and the step's finished tasks, are not). A suspended run
    /// needs answers ([`resume_with`](DurableGraph::resume_with)): without them its pending
    /// questions are returned again; a finished one has nothing to resume (its state is
    /// returned as finished).
    pub async fn resume(&self, thread: &str) -> Result<Outcome<S>, DurableError<S>> {
        self.resume_with(thread, Answers::new()).await
    }

    /// Resumes a suspended run with `answers` (some or all of its interrupts, by id): the
    /// answers are committed, then the step runs again; a node whose question is still
    /// unanswered suspends the run again. An answer already given is refused
    /// (`interrupt_answered`), unless every question of the step was answered and the step
    /// then failed (on an answer that does not fit the state, say: give a better one).
    pub async fn resume_with(
        &self,
        thread: &str,
        answers: Answers,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let run: Driver<'_, _> = Box::pin(async move {
            self.execute(
                thread,
                Begin::Resume(answers, NodeOutput::Nothing),
                &mut Outbox::off(),
            )
            .await
        });
        run.await
    }

    /// [`run`](DurableGraph::run) as a stream of [`Event`]s: the events of a run in memory
    /// ([`Graph::stream`](crate::Graph::stream)), with [`Event::StepCommitted`] after each
    /// commit, and as its last item [`Event::RunFinished`], [`Event::RunSuspended`] or the
    /// run's error. Dropping the stream cancels the run as a crash would (the lease expires;
    /// a resume continues it).
    ///
    /// ```
    /// use agentstate::{AgentState, State};
    /// use agentstate_graph::{Context, Event, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Chat { #[reducer(append)] said: Vec<String> }
    ///
    /// let graph = Graph::builder()
    ///     .node("model", |_: Arc<Chat>, cx: Context| async move {
    ///         cx.text_delta("m1", "Hel");
    ///         cx.text_delta("m1", "lo");
    ///         Ok::<_, std::convert::Infallible>(ChatUpdate::default().said(vec!["Hello".to_owned()]))
    ///     })
    ///     .entry("model")
    ///     .edge("model", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.create("chat-1", Chat::default()).await?;
    /// let durable = graph.durable(&store);
    /// let mut kinds = Vec::new();
    /// let mut run = durable.stream("chat-1", ChatUpdate::default().said(vec!["Hi".to_owned()]));
    /// while let Some(event) = run.next().await {
    ///     kinds.push(event?.kind());
    /// }
    /// // The state it starts from (the input merged) first; the run's one step is committed
    /// // with its end: `step_committed` comes last.
    /// assert_eq!(kinds, ["run_started", "step_finished", "step_started", "node_started",
    ///                    "emitted", "emitted", "node_finished", "step_finished",
    ///                    "step_committed", "run_finished"]);
    /// assert_eq!(store.load::<Chat>("chat-1").await?.state.said, ["Hi", "Hello"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream(
        &self,
        thread: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> DurableStream<S, K> {
        self.streamed(thread, Begin::Input(input.into(), None))
    }

    /// [`stream`](DurableGraph::stream) with the run's id `run_id`, chosen by the caller (a
    /// server's run record names it): the stream's [`Event::RunStarted`] carries it, and so do
    /// the run's journal entries. Idempotent as [`run_as`](DurableGraph::run_as) is.
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::{Context, Event, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Count { n: u32 }
    ///
    /// let graph = Graph::builder()
    ///     .node("add", |s: Arc<Count>, _: Context| async move {
    ///         Ok::<_, std::convert::Infallible>(CountUpdate::default().n(s.n + 1))
    ///     })
    ///     .entry("add")
    ///     .edge("add", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.create("c-1", Count::default()).await?;
    /// let durable = graph.durable(&store);
    /// let mut run = durable.stream_as("c-1", "run-42", CountUpdate::default());
    /// let Some(Ok(Event::RunStarted { run_id })) = run.next().await else { panic!("a start") };
    /// assert_eq!(run_id, "run-42");
    /// while run.next().await.is_some() {}
    /// assert_eq!(durable.run_id("c-1").await?.as_deref(), Some("run-42"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_as(
        &self,
        thread: &str,
        run_id: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> DurableStream<S, K> {
        self.streamed(thread, Begin::Input(input.into(), Some(run_id.to_owned())))
    }

    /// [`stream_as`](DurableGraph::stream_as), but the new run starts even if the thread's last
    /// run did not finish (it was cut short, failed, or waits for answers), as a new input does
    /// in LangGraph: that run is abandoned where it stood. Its committed steps stay in the
    /// state; its step in flight, its questions and their answers are dropped. Idempotent as `stream_as` is. Another worker's
    /// run in progress still refuses it (`thread_leased`): stop that run first.
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::durable::{Answers, Outcome, RunStatus};
    /// use agentstate_graph::{BoxError, Context, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Chat { #[reducer(append)] said: Vec<String> }
    ///
    /// let graph = Graph::builder()
    ///     .node("ask", |_: Arc<Chat>, cx: Context| async move {
    ///         let answer = cx.interrupt(serde_json::json!("sure?"))?;
    ///         Ok::<_, BoxError>(ChatUpdate::default().said(vec![answer.to_string()]))
    ///     })
    ///     .entry("ask")
    ///     .edge("ask", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let durable = graph.durable(&store);
    /// let Outcome::Suspended { .. } = durable.start("c-1", Chat::default()).await? else {
    ///     panic!("the run asks")
    /// };
    /// // A new message instead of an answer: a new run, which asks again.
    /// let mut run = durable.stream_superseding("c-1", "run-2", ChatUpdate::default().said(vec!["hi".into()]));
    /// while run.next().await.is_some() {}
    /// assert_eq!(durable.run_id("c-1").await?.as_deref(), Some("run-2"));
    /// let RunStatus::Suspended { interrupts, .. } = durable.status("c-1").await? else { panic!("asks") };
    /// let done = durable.resume_with("c-1", Answers::new().answer(&interrupts[0].id, true)).await?;
    /// assert_eq!(done.state().said, ["hi", "true"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_superseding(
        &self,
        thread: &str,
        run_id: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> DurableStream<S, K> {
        self.streamed(
            thread,
            Begin::Supersede(input.into(), Some(run_id.to_owned())),
        )
    }

    /// [`stream_superseding`](DurableGraph::stream_superseding), but the run's first step runs
    /// the nodes `goto` instead of the graph's entry (LangGraph's `Command(goto=...)` as a
    /// run's input), `input` merged first. With no nodes the input is merged and the run ends
    /// there, having run none (LangGraph's `Command(update=...)` on a thread whose run
    /// finished). The input is committed with the nodes it goes to, so a run cut short
    /// resumes there. A node the graph does not have is refused when the run starts
    /// (`run_state_invalid`).
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::{Context, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Log { #[reducer(append)] ran: Vec<String> }
    ///
    /// let step = |name: &'static str| move |_: Arc<Log>, _: Context| async move {
    ///     Ok::<_, std::convert::Infallible>(LogUpdate::default().ran(vec![name.to_owned()]))
    /// };
    /// let graph = Graph::builder()
    ///     .node("first", step("first"))
    ///     .node("second", step("second"))
    ///     .entry("first")
    ///     .edge("first", "second")
    ///     .edge("second", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.create("t-1", Log::default()).await?;
    /// let durable = graph.durable(&store);
    /// let input = LogUpdate::default().ran(vec!["input".to_owned()]);
    /// let mut run = durable.stream_goto("t-1", "run-1", input, ["second"]);
    /// while run.next().await.is_some() {}
    /// assert_eq!(store.load::<Log>("t-1").await?.state.ran, ["input", "second"]);
    ///
    /// // No nodes: the update alone.
    /// let mut run = durable.stream_goto("t-1", "run-2", LogUpdate::default().ran(vec!["note".to_owned()]), []);
    /// while run.next().await.is_some() {}
    /// assert_eq!(store.load::<Log>("t-1").await?.state.ran, ["input", "second", "note"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_goto(
        &self,
        thread: &str,
        run_id: &str,
        input: impl Into<NodeOutput<S::Update>>,
        goto: impl IntoIterator<Item = K>,
    ) -> DurableStream<S, K> {
        let goto = self.indices(goto);
        self.streamed(
            thread,
            Begin::Goto(input.into(), Some(run_id.to_owned()), goto),
        )
    }

    /// [`resume_with`](DurableGraph::resume_with) as a stream of [`Event`]s, as
    /// [`stream`](DurableGraph::stream) gives them (`Answers::new()` to resume after a
    /// crash).
    pub fn stream_resume(&self, thread: &str, answers: Answers) -> DurableStream<S, K> {
        self.streamed(thread, Begin::Resume(answers, NodeOutput::Nothing))
    }

    /// [`stream_resume`](DurableGraph::stream_resume) with `update` merged into the state with
    /// the answers, in the same commit, before the suspended step runs again (LangGraph's
    /// `Command(resume=..., update=...)`). Refused, writing nothing, without answers
    /// (`run_state_invalid`) and as the answers alone are.
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::durable::{Answers, Outcome, RunStatus};
    /// use agentstate_graph::{BoxError, Context, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Draft { text: String, sent: Option<String> }
    ///
    /// let graph = Graph::builder()
    ///     .node("send", |s: Arc<Draft>, cx: Context| async move {
    ///         cx.interrupt(serde_json::json!("send it?"))?;
    ///         Ok::<_, BoxError>(DraftUpdate::default().sent(Some(s.text.clone())))
    ///     })
    ///     .entry("send")
    ///     .edge("send", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let durable = graph.durable(&store);
    /// let Outcome::Suspended { interrupts, .. } = durable.start("d-1", Draft { text: "helo".into(), sent: None }).await? else {
    ///     panic!("it asks")
    /// };
    /// // Approved, with the text corrected: the step runs again on the corrected state.
    /// let answers = Answers::new().answer(&interrupts[0].id, true);
    /// let fixed = DraftUpdate::default().text("hello".to_owned());
    /// let mut run = durable.stream_resume_updating("d-1", answers, fixed);
    /// while run.next().await.is_some() {}
    /// assert_eq!(store.load::<Draft>("d-1").await?.state.sent.as_deref(), Some("hello"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_resume_updating(
        &self,
        thread: &str,
        answers: Answers,
        update: impl Into<NodeOutput<S::Update>>,
    ) -> DurableStream<S, K> {
        self.streamed(thread, Begin::Resume(answers, update.into()))
    }

    fn streamed(&self, thread: &str, begin: Begin<S::Update>) -> DurableStream<S, K> {
        let this = self.clone();
        let thread = thread.to_owned();
        DurableStream {
            driven: Driven::new(move |mut out| {
                Box::pin(async move { this.execute(&thread, begin, &mut out).await })
            }),
        }
    }
}

/// A durable run as a stream of [`Event`]s, its last item the run's end or its error; from
/// [`DurableGraph::stream`]. Polling it runs the graph; dropping it cancels the run.
#[must_use = "a stream does nothing unless polled"]
pub struct DurableStream<S: DurableState, K: NodeKey> {
    driven: Driven<S, K, Result<Outcome<S>, DurableError<S>>>,
}

impl<S: DurableState, K: NodeKey> DurableStream<S, K> {
    /// Carries only the events of `filter` (with the run's start and end); see
    /// [`RunStream::only`](crate::RunStream::only). Call it before polling.
    pub fn only(mut self, filter: EventFilter) -> Self {
        self.driven.only(filter);
        self
    }
}

// The stream never pins its fields (the run's future is boxed).
impl<S: DurableState, K: NodeKey> Unpin for DurableStream<S, K> {}

impl<S: DurableState, K: NodeKey> Stream for DurableStream<S, K> {
    type Item = Result<Event<S, K>, DurableError<S>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().driven.poll_next(cx).map(|next| {
            next.map(|next| match next {
                Next::Event(event) => Ok(event),
                Next::End(Ok(Outcome::Finished { state, .. })) => Ok(Event::RunFinished { state }),
                Next::End(Ok(Outcome::Suspended {
                    state, interrupts, ..
                })) => Ok(Event::RunSuspended { state, interrupts }),
                Next::End(Err(error)) => Err(error),
            })
        })
    }
}
