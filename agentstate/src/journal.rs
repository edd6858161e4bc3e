//! Replay: a state that records the updates it merged, and rebuilds from them.

use crate::error::Error;
use crate::state::State;

/// A state and the updates merged into it since it was wrapped, in order.
///
/// A checkpoint can then store what changed each step (the updates since the last checkpoint)
/// instead of the whole state; replaying the same updates from the same start always gives an
/// equal state.
///
/// ```
/// use agentstate::Journal;
/// use agentstate::message::{Message, Role};
/// use agentstate::state::{AgentState, AgentStateUpdate};
///
/// let mut journal = Journal::new(AgentState::default());
/// journal.merge(AgentStateUpdate::default().context(vec![Message::text_message("hi", Role::User)]))?;
/// journal.merge(AgentStateUpdate::default().context_summary(Some("greeting".to_string())))?;
///
/// let saved = serde_json::to_string(journal.updates()).unwrap();
/// let updates: Vec<AgentStateUpdate> = serde_json::from_str(&saved).unwrap();
/// let rebuilt = Journal::replay(AgentState::default(), updates)?;
/// assert_eq!(&rebuilt, journal.state());
/// # Ok::<(), agentstate::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Journal<S: State> {
    state: S,
    updates: Vec<S::Update>,
}

impl<S: State> Journal<S>
where
    S::Update: Clone,
{
    /// Starts recording from `state`.
    pub fn new(state: S) -> Self {
        Journal {
            state,
            updates: Vec::new(),
        }
    }

    /// Merges `update` and records it; a failed merge changes nothing and records nothing.
    pub fn merge(&mut self, update: S::Update) -> Result<(), Error> {
        self.state.merge(update.clone())?;
        self.updates.push(update);
        Ok(())
    }

    /// The current state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// Every update merged, in order.
    pub fn updates(&self) -> &[S::Update] {
        &self.updates
    }

    /// The updates merged after the first `checkpoint` ones: what a checkpoint taken then is
    /// missing.
    pub fn since(&self, checkpoint: usize) -> &[S::Update] {
        self.updates.get(checkpoint..).unwrap_or(&[])
    }

    /// The state and the recorded updates.
    pub fn into_parts(self) -> (S, Vec<S::Update>) {
        (self.state, self.updates)
    }

    /// Rebuilds a state by merging `updates` into `initial`, in order.
    pub fn replay(initial: S, updates: impl IntoIterator<Item = S::Update>) -> Result<S, Error> {
        let mut state = initial;
        for update in updates {
            state.merge(update)?;
        }
        Ok(state)
    }
}
