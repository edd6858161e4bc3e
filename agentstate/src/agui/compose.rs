//! [`ComposedReducer`]: the default fold first, then your reducers over its result.

use super::chat::ChatState;
use super::event::Event;
use super::fold::fold;
use std::fmt;

/// A pure step `(ChatState, &Event) -> ChatState`.
pub trait EventReducer {
    /// The state after `event`.
    fn reduce(&self, state: ChatState, event: &Event) -> ChatState;
}

impl<F> EventReducer for F
where
    F: Fn(ChatState, &Event) -> ChatState,
{
    fn reduce(&self, state: ChatState, event: &Event) -> ChatState {
        self(state, event)
    }
}

/// The default AG-UI fold ([`fold`]) as a reducer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefaultReducer;

impl EventReducer for DefaultReducer {
    fn reduce(&self, state: ChatState, event: &Event) -> ChatState {
        fold(state, event)
    }
}

/// Reducers run in order on every event, each over the previous one's result, starting with
/// the default fold.
///
/// Most apps never write a reducer: the default fold handles the whole AG-UI surface. To fold
/// an application-specific `CUSTOM` event into your own data, add a reducer after the default
/// one instead of forking the fold. A reducer is any `Fn(ChatState, &Event) -> ChatState`; it
/// typically keeps its data in [`ChatState::extras_mut`].
///
/// ```
/// use agentstate::agui::{ChatState, ComposedReducer, Event, EventReducer};
/// use serde_json::json;
///
/// // Count the `confetti` CUSTOM events into the app's own data.
/// let reducer = ComposedReducer::new().then(|mut state: ChatState, event: &Event| {
///     if let Event::Custom(custom) = event {
///         if custom.name == "confetti" {
///             let count = state.extras().get("confetti").and_then(|v| v.as_u64()).unwrap_or(0);
///             state.extras_mut().insert("confetti".into(), json!(count + 1));
///         }
///     }
///     state
/// });
/// let events = [
///     Event::run_started("t", "r"),
///     Event::custom("confetti", json!({})),
///     Event::text_start("m"),
///     Event::custom("confetti", json!({})),
/// ];
/// let state = reducer.fold_all(ChatState::new(), &events);
/// assert_eq!(state.extras()["confetti"], json!(2));
/// assert_eq!(state.messages().len(), 1); // the default fold ran too
/// ```
pub struct ComposedReducer {
    reducers: Vec<Box<dyn EventReducer + Send + Sync>>,
}

impl ComposedReducer {
    /// The default fold alone.
    pub fn new() -> Self {
        ComposedReducer {
            reducers: vec![Box::new(DefaultReducer)],
        }
    }

    /// Exactly these reducers, in this order (the default fold only if you include
    /// [`DefaultReducer`]), as the seed's `ComposedReducer([defaultReducer, mine])`.
    pub fn from_reducers(reducers: Vec<Box<dyn EventReducer + Send + Sync>>) -> Self {
        ComposedReducer { reducers }
    }

    /// Adds a reducer that runs after the ones already there.
    pub fn then(mut self, reducer: impl EventReducer + Send + Sync + 'static) -> Self {
        self.reducers.push(Box::new(reducer));
        self
    }

    /// The number of reducers.
    pub fn len(&self) -> usize {
        self.reducers.len()
    }

    /// True when there is no reducer at all (the state then never changes).
    pub fn is_empty(&self) -> bool {
        self.reducers.is_empty()
    }

    /// Folds every event from `initial`.
    pub fn fold_all<'a>(
        &self,
        initial: ChatState,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> ChatState {
        events
            .into_iter()
            .fold(initial, |state, event| self.reduce(state, event))
    }
}

impl Default for ComposedReducer {
    fn default() -> Self {
        ComposedReducer::new()
    }
}

impl fmt::Debug for ComposedReducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ComposedReducer")
            .field("reducers", &self.reducers.len())
            .finish()
    }
}

impl EventReducer for ComposedReducer {
    fn reduce(&self, state: ChatState, event: &Event) -> ChatState {
        self.reducers
            .iter()
            .fold(state, |state, reducer| reducer.reduce(state, event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn user_reducers_run_after_the_default_fold_in_order() {
        let reducer = ComposedReducer::new()
            .then(|mut s: ChatState, _: &Event| {
                // Sees the default fold's result: the message count after this event.
                let n = s.messages().len();
                s.extras_mut().insert("seen".into(), json!(n));
                s
            })
            .then(|mut s: ChatState, _: &Event| {
                let seen = s.extras()["seen"].clone();
                s.extras_mut().insert("second".into(), seen);
                s
            });
        assert_eq!(reducer.len(), 3);
        let state = reducer.fold_all(
            ChatState::new(),
            &[Event::run_started("t", "r"), Event::text_start("m")],
        );
        assert_eq!(state.extras()["seen"], json!(1));
        assert_eq!(state.extras()["second"], json!(1));
    }

    #[test]
    fn from_reducers_runs_exactly_what_it_is_given() {
        let only_custom =
            ComposedReducer::from_reducers(vec![Box::new(|mut s: ChatState, e: &Event| {
                if let Event::Custom(c) = e {
                    s.extras_mut().insert(c.name.clone(), c.value.clone());
                }
                s
            })]);
        let state = only_custom.fold_all(
            ChatState::new(),
            &[Event::run_started("t", "r"), Event::custom("k", json!(7))],
        );
        assert_eq!(state.extras()["k"], json!(7));
        assert!(
            state.run().is_none(),
            "no default fold: RUN_STARTED was not folded"
        );
        assert!(ComposedReducer::from_reducers(Vec::new()).is_empty());
    }
}
