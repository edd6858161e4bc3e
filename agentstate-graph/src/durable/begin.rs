//! How a run begins under its thread's lease: warm (its input committed with the lease), or
//! from the thread as its journal says it stands (a new input, a resume, answers), and then
//! driven by the one run loop with the durable commit.

use super::commit::{entry_meta, Durable};
use super::{lock, Answers, DurableError, DurableGraph, DurableState, Outcome};
use crate::event::Outbox;
use crate::graph::RunConfig;
use crate::heartbeat::Heartbeat;
use crate::journal::{JournalEntry, Position};
use crate::name::NodeKey;
use crate::run::{drive, Run};
use agentstate::NodeOutput;
use agentstate_store::backend::Backend;
use agentstate_store::{Lease, StepMeta, StoreError, Thread};
use serde_json::{Map, Value};
use std::sync::Arc;
use tracing::Instrument;

/// How a durable run begins: a new run with an input (and the run's id, if the caller chose
/// it), or the thread's run resumed.
pub(super) enum Begin<U> {
    Input(NodeOutput<U>, Option<String>),
    /// A new run even if the thread's last did not finish (that one is abandoned).
    Supersede(NodeOutput<U>, Option<String>),
    /// A new run (superseding, as `Supersede`) whose first step runs these nodes (indices;
    /// `usize::MAX` for a name the graph does not have), not the entry.
    Goto(NodeOutput<U>, Option<String>, Vec<usize>),
    /// The answers, and an update committed with them (nothing, but for
    /// [`DurableGraph::stream_resume_updating`]).
    Resume(Answers, NodeOutput<U>),
}

/// A run with its lease taken: begun warm (its input committed with the lease, the thread's
/// handle and the run's start at hand), or to begin from the thread as it is.
pub(super) enum Begun<S: agentstate::State, B> {
    Warm(Box<(Thread<S, B>, Position)>),
    Cold(Begin<<S as agentstate::State>::Update>),
}

impl<S, K, B> DurableGraph<S, K, B>
where
    S: DurableState,
    K: NodeKey,
    B: Backend,
{
    /// A new run on a thread this worker ran last, whose run it knows to be over: its input
    /// is committed and the lease taken in one write. `Ok(Err(begin))`: not such a run, or the
    /// thread moved since (another worker wrote): begin it the usual way.
    #[allow(clippy::type_complexity)]
    pub(super) async fn begin_warm(
        &self,
        thread: &str,
        begin: Begin<S::Update>,
    ) -> Result<Result<(Lease<B>, Begun<S, B>), Begin<S::Update>>, DurableError<S>> {
        let Begin::Input(input, id) = begin else {
            return Ok(Err(begin));
        };
        let warm = lock(&self.warm).take(thread);
        let (mut handle, position) = match warm {
            Some((handle, Some(position)))
                if position.started
                    && position.ended()
                    && position.interrupts.is_none()
                    && (id.is_none() || position.run_id != id) =>
            {
                (handle, position)
            }
            Some((handle, position)) => {
                lock(&self.warm).put(thread, handle, position);
                return Ok(Err(Begin::Input(input, id)));
            }
            None => return Ok(Err(Begin::Input(input, id))),
        };
        let run_id = id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let meta = self.input_meta(&run_id);
        match handle
            .merge_leasing(input.clone(), meta, &self.worker, self.lease_ttl)
            .await
        {
            Ok(lease) => {
                let position = Position {
                    started: true,
                    run_id: Some(run_id),
                    ..Position::default()
                };
                Ok(Ok((lease, Begun::Warm(Box::new((handle, position))))))
            }
            // Another worker wrote since: the usual way catches up with it.
            Err(
                StoreError::Conflict { .. }
                | StoreError::Recreated { .. }
                | StoreError::Migrated { .. },
            ) => {
                self.keep(thread, handle, None);
                Ok(Err(Begin::Input(input, id)))
            }
            Err(error) => {
                self.keep(thread, handle, Some(position));
                Err(error.into())
            }
        }
    }

    pub(super) async fn leased(
        &self,
        thread: &str,
        begun: Begun<S, B>,
        lease_slot: &mut Option<Lease<B>>,
        heartbeat: &Heartbeat,
        out: &mut Outbox<S, K>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let lease = lease_slot.as_ref().expect("the run holds its lease");
        let (mut handle, mut position, begin) = match begun {
            Begun::Warm(warm) => (warm.0, warm.1, None),
            Begun::Cold(begin) => {
                let (handle, position) = self.open(thread, lease).await?;
                let position = match position {
                    Some(position) => position,
                    None => self.position(thread).await?,
                };
                (handle, position, Some(begin))
            }
        };
        // Begun warm: the input is committed.
        let Some(begin) = begin else {
            return self
                .drive_leased(thread, handle, position, true, lease_slot, heartbeat, out)
                .await;
        };
        let mut started = false;
        // A run the caller names that is already the thread's: resumed, not started again.
        let begin = match begin {
            Begin::Input(_, Some(id))
            | Begin::Supersede(_, Some(id))
            | Begin::Goto(_, Some(id), _)
                if position.run_id.as_deref() == Some(id.as_str()) =>
            {
                Begin::Resume(Answers::new(), NodeOutput::Nothing)
            }
            begin => begin,
        };
        match begin {
            Begin::Resume(answers, _) if !position.started && answers.is_empty() => {
                // No run was started on the thread (a `start` cut short between creating the
                // thread and its run's input): start it now, as the run it was created for.
                let id = self.start_run(thread).await?;
                self.input(&mut handle, &mut position, NodeOutput::Nothing, id)
                    .await?;
                started = true;
            }
            // The new input is the newest run's start: what the abandoned run left after its
            // last commit (a step in flight, questions, answers) is behind it, never read again.
            Begin::Supersede(input, id) => {
                self.input(&mut handle, &mut position, input, id).await?;
                started = true;
            }
            Begin::Goto(input, id, goto) => {
                if goto.contains(&usize::MAX) {
                    return Err(DurableError::State {
                        thread: thread.to_owned(),
                        reason: "the run goes to a node the graph does not have".to_owned(),
                    });
                }
                let next = self.graph.names(&goto);
                let run_id = id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                let meta = self.input_meta_to(&run_id, next.clone());
                handle.merge(input, meta).await?;
                position = Position {
                    started: true,
                    seq: handle.version(),
                    run_id: Some(run_id),
                    next,
                    ..Position::default()
                };
                // Not `started`: the run takes its first step from `next`, not the entry (or
                // with no nodes, ends below).
            }
            Begin::Input(input, id) => {
                if !position.ended() || position.interrupts.is_some() {
                    return Err(DurableError::State {
                        thread: thread.to_owned(),
                        reason: format!(
                            "its run is not finished (it stands after step {} with {} next); resume it, or fork the thread",
                            position.step,
                            position.next.join(", ")
                        ),
                    });
                }
                self.input(&mut handle, &mut position, input, id).await?;
                started = true;
            }
            Begin::Resume(answers, update) => {
                if answers.is_empty() && !matches!(update, NodeOutput::Nothing) {
                    return Err(DurableError::State {
                        thread: thread.to_owned(),
                        reason:
                            "an update to commit with the answers of a resume came without answers"
                                .to_owned(),
                    });
                }
                if !answers.is_empty() {
                    let given = self.check_answers(thread, &position, answers)?;
                    let entry = JournalEntry::Answers {
                        step: position.step + 1,
                        answers: given.clone(),
                    };
                    let meta =
                        entry_meta(position.run_id.as_deref().unwrap_or_default(), None, &entry);
                    handle.merge(update, meta).await?;
                    position.answers.extend(given);
                } else {
                    let open = position.open();
                    if !open.is_empty() {
                        let outcome = Outcome::Suspended {
                            version: handle.version(),
                            state: handle.shared_state(),
                            interrupts: open,
                        };
                        self.keep(thread, handle, Some(position));
                        return Ok(outcome);
                    }
                }
            }
        }
        // A run resumed (or gone to no node) that has nothing left to run.
        if !started && position.ended() {
            let outcome = Outcome::Finished {
                version: handle.version(),
                state: handle.shared_state(),
            };
            self.keep(thread, handle, Some(position));
            return Ok(outcome);
        }
        self.drive_leased(
            thread, handle, position, started, lease_slot, heartbeat, out,
        )
        .await
    }

    /// Runs the thread's run from `position` under its lease (`started`: from its input).
    #[allow(clippy::too_many_arguments)]
    async fn drive_leased(
        &self,
        thread: &str,
        handle: Thread<S, B>,
        mut position: Position,
        started: bool,
        lease_slot: &mut Option<Lease<B>>,
        heartbeat: &Heartbeat,
        out: &mut Outbox<S, K>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let mut run = Run::new(
            &self.graph,
            RunConfig {
                run_id: position.run_id.clone(),
                ..self.config.clone()
            },
        )
        .on_thread(Some(Arc::from(thread)));
        run.breakpoints(self.before.clone(), self.after.clone());
        if !started {
            let (active, inputs) = self.tasks_at(thread, &position)?;
            let last = self.nodes_at(thread, &position, &position.nodes)?;
            run.resume_at(position.step, active, inputs, last);
        }
        let mut commit = Durable::new(
            thread,
            handle,
            &mut position,
            run.run_id.to_string(),
            self.durability,
            heartbeat,
            lease_slot.take(),
        );
        let span = crate::trace::run(&run.run_id, Some(thread), None);
        let outcome = drive(&mut run, &mut commit, out)
            .instrument(span.clone())
            .await;
        *lease_slot = commit.lease.take();
        if let Err(error) = &outcome {
            crate::trace::failed(&span, error.category());
        }
        if let (Ok(Outcome::Finished { .. }), Some(handle)) = (&outcome, commit.handle.take()) {
            let position = Position {
                started: true,
                seq: handle.version(),
                step: run.step,
                nodes: run.graph().names(&run.last),
                run_id: Some(run.run_id.to_string()),
                ..Position::default()
            };
            self.keep(thread, handle, Some(position));
        } else if let (Ok(_), Some(handle)) = (&outcome, commit.handle.take()) {
            self.keep(thread, handle, None);
        }
        outcome
    }

    /// The metadata of run `run_id`'s input entry.
    fn input_meta(&self, run_id: &str) -> StepMeta {
        let entry_node = self.graph.inner().nodes[self.graph.inner().entry]
            .name
            .to_string();
        self.input_meta_to(run_id, vec![entry_node])
    }

    /// The metadata of run `run_id`'s input entry, its first step running `next`.
    fn input_meta_to(&self, run_id: &str, next: Vec<String>) -> StepMeta {
        let entry = JournalEntry::Input { step: 0, next };
        entry_meta(run_id, Some("__input__"), &entry)
    }

    /// Commits a new run's input, and puts `position` at the run's start.
    async fn input(
        &self,
        handle: &mut Thread<S, B>,
        position: &mut Position,
        input: NodeOutput<S::Update>,
        run_id: Option<String>,
    ) -> Result<(), DurableError<S>> {
        let run_id = run_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let meta = self.input_meta(&run_id);
        handle.merge(input, meta).await?;
        *position = Position {
            started: true,
            run_id: Some(run_id),
            ..Position::default()
        };
        Ok(())
    }

    /// Checks answers against the thread's pending questions; the answers to commit.
    fn check_answers(
        &self,
        thread: &str,
        position: &Position,
        answers: Answers,
    ) -> Result<Map<String, Value>, DurableError<S>> {
        let Some(interrupts) = &position.interrupts else {
            return Err(DurableError::State {
                thread: thread.to_owned(),
                reason: "its run is not suspended: there is nothing to answer".to_owned(),
            });
        };
        // Once every question was answered and the step still did not commit (its run failed
        // on an answer, or was cut short), the answers may be given again: the newest are used.
        let retry = position.failed_last
            && interrupts
                .iter()
                .all(|i| position.answers.contains_key(&i.id));
        let mut given = Map::new();
        for (id, value) in answers.0 {
            if (position.answers.contains_key(&id) && !retry) || given.contains_key(&id) {
                return Err(DurableError::AlreadyAnswered {
                    thread: thread.to_owned(),
                    id,
                });
            }
            if !interrupts.iter().any(|i| i.id == id) {
                let pending: Vec<String> = position.open().into_iter().map(|i| i.id).collect();
                return Err(DurableError::UnknownInterrupt {
                    thread: thread.to_owned(),
                    id,
                    pending: if pending.is_empty() {
                        String::new()
                    } else {
                        format!(" (pending: {})", pending.join(", "))
                    },
                });
            }
            given.insert(id, value);
        }
        Ok(given)
    }

    /// The node indices of `names`, which the journal at `position` names.
    fn nodes_at(
        &self,
        thread: &str,
        position: &Position,
        names: &[String],
    ) -> Result<Vec<usize>, DurableError<S>> {
        names
            .iter()
            .map(|name| {
                self.graph
                    .index_of(name)
                    .ok_or_else(|| DurableError::Journal {
                        thread: thread.to_owned(),
                        seq: position.seq,
                        reason: format!(
                            "the run names node `{name}`, which this graph does not have"
                        ),
                    })
            })
            .collect()
    }

    /// The tasks of the next step of the run at `position`.
    #[allow(clippy::type_complexity)]
    fn tasks_at(
        &self,
        thread: &str,
        position: &Position,
    ) -> Result<(Vec<usize>, Vec<Option<Arc<S>>>), DurableError<S>> {
        let mut active = self.nodes_at(thread, position, &position.next)?;
        let mut inputs: Vec<Option<Arc<S>>> = vec![None; active.len()];
        for send in &position.sends {
            active.extend(self.nodes_at(thread, position, std::slice::from_ref(&send.node))?);
            let input: S =
                serde_json::from_value(send.input.clone()).map_err(|e| DurableError::Journal {
                    thread: thread.to_owned(),
                    seq: position.seq,
                    reason: format!(
                        "the input of a `Send` to `{}` does not read: {e}",
                        send.node
                    ),
                })?;
            inputs.push(Some(Arc::new(input)));
        }
        Ok((active, inputs))
    }
}
