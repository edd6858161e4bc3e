//! The protocol's ordering and attribution rules, as the official client's `verifyEvents`
//! checks them; the fold ignores an event that breaks one.
//!
//! Ordering: the first event is `RUN_STARTED` (or `RUN_ERROR`); after `RUN_ERROR` only
//! `RUN_STARTED`; after `RUN_FINISHED` only `RUN_STARTED` or `RUN_ERROR`; no `RUN_STARTED`
//! while a run is active; `*_CONTENT`, `*_ARGS` and `*_END` need an open `*_START` with the
//! same id, and a `*_START` may not reopen an open id; `STEP_FINISHED` needs its
//! `STEP_STARTED` (steps are per agent: a subagent may run a step of the same name as its
//! parent); `RUN_FINISHED` may not arrive while a step, message, reasoning span, tool call or
//! subagent is open; a subagent starts once per run and finishes once.
//!
//! Attribution (`subagentRunId`): every message, tool call, reasoning message and activity has
//! an owner, the agent (the parent, or a subagent) that opened it, kept for the whole run. An
//! event that continues it (`*_CONTENT`, `*_END`, a reopening `*_START`, `ACTIVITY_DELTA`,
//! `REASONING_ENCRYPTED_VALUE`) may omit its tag but may not name another owner; a tool call
//! belongs to its parent message's owner. `MESSAGES_SNAPSHOT` (authoritatively) and a run's
//! input messages (for ids not yet owned) record the owners of the messages they carry.

use super::chat::RunStatus;
use super::event::*;
use super::message::AguiMessage;
use std::collections::{HashMap, HashSet};

/// The owner of an entity: `None` is the parent agent, `Some` a subagent invocation.
type Owner = Option<String>;

/// Who opened what, per kind of entity (an id is unique only within its kind).
#[derive(Debug, Clone, Default, PartialEq)]
struct Owners {
    message: HashMap<String, Owner>,
    tool_call: HashMap<String, Owner>,
    activity: HashMap<String, Owner>,
    reasoning: HashMap<String, Owner>,
}

/// An entity kind with an open/close bracket (and a chunk shorthand).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bracket {
    Text,
    Tool,
    Reasoning,
}

/// How to take back what [`Order::record`] did, while a chunk's expansion is admitted.
#[derive(Debug, Clone, PartialEq)]
enum Undo {
    Reopen(Bracket, String),
    Close(Bracket, String),
    Disown(Bracket, String),
}

/// The verification state of a stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Order {
    pub(crate) run: RunStatus,
    pub(crate) open_text: Vec<String>,
    pub(crate) open_reasoning: Vec<String>,
    pub(crate) open_spans: Vec<String>,
    pub(crate) open_calls: Vec<String>,
    /// Running steps, outermost first, with the agent that runs each.
    pub(crate) steps: Vec<(Owner, String)>,
    owners: Owners,
    active_subagents: Vec<String>,
    closed_subagents: HashSet<String>,
}

#[cold]
fn not_open(kind: Bracket, id: &str) -> String {
    let (what, start) = match kind {
        Bracket::Text => ("text message", "TEXT_MESSAGE_START"),
        Bracket::Tool => ("tool call", "TOOL_CALL_START"),
        Bracket::Reasoning => ("reasoning message", "REASONING_MESSAGE_START"),
    };
    format!("no {what} `{id}` is open; it needs a {start} first")
}

fn contains(list: &[String], id: &str) -> bool {
    list.iter().any(|x| x == id)
}

pub(crate) fn remove(list: &mut Vec<String>, id: &str) {
    if let Some(i) = list.iter().position(|x| x == id) {
        list.remove(i);
    }
}

fn owner_name(owner: &Owner) -> String {
    match owner {
        Some(s) => format!("subagent `{s}`"),
        None => "the parent agent".to_owned(),
    }
}

/// A continuation's tag against its entity's owner: an absent tag always agrees (and the owner
/// is not even looked up, which keeps untagged streaming to one hash lookup per event).
fn tag_agrees<'o>(
    tag: &Owner,
    owner: impl FnOnce() -> Option<&'o Owner>,
    kind: &str,
    id: &str,
) -> Result<(), String> {
    let Some(t) = tag else {
        return Ok(());
    };
    match (tag, owner()) {
        (_, Some(owner)) if owner.as_deref() != Some(t.as_str()) => Err(format!(
            "it is attributed to subagent `{t}`, but {kind} `{id}` belongs to {}",
            owner_name(owner)
        )),
        _ => Ok(()),
    }
}

fn tag(event: &Event) -> &Owner {
    const NONE: &Owner = &None;
    event.base().map_or(NONE, |b| &b.subagent_run_id)
}

impl Order {
    /// Checks one event and, when it keeps the rules, records it; otherwise says why.
    pub(crate) fn admit_one(&mut self, event: &Event) -> Result<(), String> {
        self.check(event)?;
        self.record(event, None);
        Ok(())
    }

    /// Checks `events` in order, recording each; on the first that breaks a rule, takes back
    /// what the earlier ones recorded and says which and why.
    pub(crate) fn admit<'e>(
        &mut self,
        events: impl IntoIterator<Item = &'e Event>,
    ) -> Result<(), (&'e Event, String)> {
        let mut undo = Vec::new();
        for event in events {
            if let Err(reason) = self.check(event) {
                for step in undo.into_iter().rev() {
                    match step {
                        Undo::Reopen(kind, id) => self.open_mut(kind).push(id),
                        Undo::Close(kind, id) => remove(self.open_mut(kind), &id),
                        Undo::Disown(kind, id) => {
                            self.owners_mut(kind).remove(&id);
                        }
                    }
                }
                return Err((event, reason));
            }
            self.record(event, Some(&mut undo));
        }
        Ok(())
    }

    fn open_mut(&mut self, kind: Bracket) -> &mut Vec<String> {
        match kind {
            Bracket::Text => &mut self.open_text,
            Bracket::Tool => &mut self.open_calls,
            Bracket::Reasoning => &mut self.open_reasoning,
        }
    }

    fn owners_mut(&mut self, kind: Bracket) -> &mut HashMap<String, Owner> {
        match kind {
            Bracket::Text => &mut self.owners.message,
            Bracket::Tool => &mut self.owners.tool_call,
            Bracket::Reasoning => &mut self.owners.reasoning,
        }
    }

    /// Checks a CONTENT / ARGS that continues the open `kind` stream `id`, attributed to
    /// `tag` (what a continuation chunk expands to).
    pub(crate) fn check_continuation(
        &self,
        kind: Bracket,
        id: &str,
        tag: &Owner,
    ) -> Result<(), String> {
        self.check_run(false, false)?;
        self.continues(kind, id, tag)
    }

    /// A continuation or close of `id`: it must be open, and its tag may not name another
    /// owner than its opener.
    #[inline]
    fn continues(&self, kind: Bracket, id: &str, tag: &Owner) -> Result<(), String> {
        let open = match kind {
            Bracket::Text => &self.open_text,
            Bracket::Tool => &self.open_calls,
            Bracket::Reasoning => &self.open_reasoning,
        };
        if !contains(open, id) {
            return Err(not_open(kind, id));
        }
        if tag.is_none() {
            return Ok(());
        }
        let (owners, what) = match kind {
            Bracket::Text => (&self.owners.message, "message"),
            Bracket::Tool => (&self.owners.tool_call, "tool call"),
            Bracket::Reasoning => (&self.owners.reasoning, "reasoning message"),
        };
        tag_agrees(tag, || owners.get(id), what, id)
    }

    /// The run-level rules.
    #[inline]
    fn check_run(&self, starts_run: bool, errors_run: bool) -> Result<(), String> {
        match self.run {
            RunStatus::Errored if !starts_run => {
                return Err(
                    "the run already failed with RUN_ERROR; only RUN_STARTED may follow".to_owned(),
                )
            }
            RunStatus::NotStarted if !starts_run && !errors_run => {
                return Err("no run has started; the first event must be RUN_STARTED".to_owned())
            }
            RunStatus::Finished if !starts_run && !errors_run => {
                return Err(
                    "the run has already finished; a new run must begin with RUN_STARTED"
                        .to_owned(),
                )
            }
            RunStatus::Cancelled if !starts_run && !errors_run => {
                return Err(
                    "the run was cancelled; a new run must begin with RUN_STARTED".to_owned(),
                )
            }
            RunStatus::Active if starts_run => {
                return Err(
                    "a run is already active; it must end with RUN_FINISHED or RUN_ERROR first"
                        .to_owned(),
                )
            }
            _ => {}
        }
        Ok(())
    }

    fn check(&self, event: &Event) -> Result<(), String> {
        self.check_run(
            matches!(event, Event::RunStarted(_)),
            matches!(event, Event::RunError(_)),
        )?;
        let start_twice = |kind: &str, id: &str, end: &str| {
            Err(format!(
                "{kind} `{id}` is already open; it must be closed with {end} first"
            ))
        };
        let not_open = |kind: &str, id: &str, start: &str| {
            Err(format!(
                "no {kind} `{id}` is open; it needs a {start} first"
            ))
        };
        let tag = tag(event);
        let owners = &self.owners;
        match event {
            Event::TextMessageStart(e) => {
                if contains(&self.open_text, &e.message_id) {
                    return start_twice("text message", &e.message_id, "TEXT_MESSAGE_END");
                }
                tag_agrees(
                    tag,
                    || owners.message.get(&e.message_id),
                    "message",
                    &e.message_id,
                )
            }
            Event::TextMessageContent(TextMessageContentEvent { message_id, .. })
            | Event::TextMessageEnd(TextMessageEndEvent { message_id, .. }) => {
                self.continues(Bracket::Text, message_id, tag)
            }
            Event::ToolCallStart(e) => {
                let id = &e.tool_call_id;
                if contains(&self.open_calls, id) {
                    return start_twice("tool call", id, "TOOL_CALL_END");
                }
                let inherited = e
                    .parent_message_id
                    .as_ref()
                    .and_then(|p| owners.message.get(p).map(|o| (p, o)));
                if let (Some(t), Some((parent, owner))) = (tag, inherited) {
                    if owner.as_deref() != Some(t.as_str()) {
                        return Err(format!(
                            "it is attributed to subagent `{t}`, but its parent message `{parent}` belongs to {}; a tool call belongs to the message that carries it",
                            owner_name(owner)
                        ));
                    }
                }
                if let Some(existing) = owners.tool_call.get(id) {
                    tag_agrees(tag, || Some(existing), "tool call", id)?;
                    if let (None, Some((parent, owner))) = (tag, inherited) {
                        if owner != existing {
                            return Err(format!(
                                "tool call `{id}` belongs to {}, but its parent message `{parent}` belongs to {}; a tool call belongs to the message that carries it",
                                owner_name(existing),
                                owner_name(owner)
                            ));
                        }
                    }
                }
                Ok(())
            }
            Event::ToolCallArgs(ToolCallArgsEvent { tool_call_id, .. })
            | Event::ToolCallEnd(ToolCallEndEvent { tool_call_id, .. }) => {
                self.continues(Bracket::Tool, tool_call_id, tag)
            }
            Event::ReasoningStart(e) => {
                if contains(&self.open_spans, &e.message_id) {
                    return start_twice("reasoning span", &e.message_id, "REASONING_END");
                }
                tag_agrees(
                    tag,
                    || owners.reasoning.get(&e.message_id),
                    "reasoning message",
                    &e.message_id,
                )
            }
            Event::ReasoningMessageStart(e) => {
                if contains(&self.open_reasoning, &e.message_id) {
                    return start_twice(
                        "reasoning message",
                        &e.message_id,
                        "REASONING_MESSAGE_END",
                    );
                }
                tag_agrees(
                    tag,
                    || owners.reasoning.get(&e.message_id),
                    "reasoning message",
                    &e.message_id,
                )
            }
            Event::ReasoningEnd(e) => {
                if !contains(&self.open_spans, &e.message_id) {
                    return not_open("reasoning span", &e.message_id, "REASONING_START");
                }
                tag_agrees(
                    tag,
                    || owners.reasoning.get(&e.message_id),
                    "reasoning message",
                    &e.message_id,
                )
            }
            Event::ReasoningMessageContent(ReasoningMessageContentEvent { message_id, .. })
            | Event::ReasoningMessageEnd(ReasoningMessageEndEvent { message_id, .. }) => {
                self.continues(Bracket::Reasoning, message_id, tag)
            }
            Event::ReasoningEncryptedValue(e) => {
                let (owner, kind) = match e.subtype {
                    EncryptedValueSubtype::ToolCall => {
                        (owners.tool_call.get(&e.entity_id), "tool call")
                    }
                    EncryptedValueSubtype::Message => (
                        owners
                            .message
                            .get(&e.entity_id)
                            .or_else(|| owners.reasoning.get(&e.entity_id)),
                        "message",
                    ),
                };
                tag_agrees(tag, || owner, kind, &e.entity_id)
            }
            Event::ActivityDelta(e) => tag_agrees(
                tag,
                || owners.activity.get(&e.message_id),
                "activity",
                &e.message_id,
            ),
            Event::StepStarted(e) => {
                if self
                    .steps
                    .iter()
                    .any(|(o, n)| o == tag && *n == e.step_name)
                {
                    return Err(format!("step `{}` is already running", e.step_name));
                }
                Ok(())
            }
            Event::StepFinished(e) => {
                if self
                    .steps
                    .iter()
                    .any(|(o, n)| o == tag && *n == e.step_name)
                {
                    return Ok(());
                }
                match self.steps.iter().find(|(_, n)| *n == e.step_name) {
                    Some((other, _)) => Err(format!(
                        "step `{}` is running under {}, and only it may finish the step",
                        e.step_name,
                        owner_name(other)
                    )),
                    None => Err(format!("step `{}` was never started", e.step_name)),
                }
            }
            Event::SubagentStarted(e) => {
                let Some(id) = tag else {
                    return Err("it has no subagentRunId".to_owned());
                };
                if contains(&self.active_subagents, id) {
                    return Err(format!("subagent `{id}` is already running"));
                }
                if self.closed_subagents.contains(id) {
                    return Err(format!(
                        "subagent `{id}` already finished in this run; subagent ids are per invocation"
                    ));
                }
                match &e.parent_subagent_run_id {
                    Some(parent)
                        if !contains(&self.active_subagents, parent)
                            && !self.closed_subagents.contains(parent) =>
                    {
                        Err(format!(
                            "its parent subagent `{parent}` was never started in this run"
                        ))
                    }
                    _ => Ok(()),
                }
            }
            Event::SubagentFinished(_) | Event::SubagentError(_) => match tag {
                None => Err("it has no subagentRunId".to_owned()),
                Some(id) if !contains(&self.active_subagents, id) => Err(format!(
                    "no subagent `{id}` is running; it needs a SUBAGENT_STARTED first"
                )),
                Some(_) => Ok(()),
            },
            Event::RunFinished(_) => {
                let steps: Vec<String> = self.steps.iter().map(|(_, n)| n.clone()).collect();
                let open = [
                    ("step", "steps", &steps),
                    ("text message", "text messages", &self.open_text),
                    (
                        "reasoning message",
                        "reasoning messages",
                        &self.open_reasoning,
                    ),
                    ("reasoning span", "reasoning spans", &self.open_spans),
                    ("tool call", "tool calls", &self.open_calls),
                    ("subagent", "subagents", &self.active_subagents),
                ];
                match open.iter().find(|(_, _, ids)| !ids.is_empty()) {
                    Some((one, many, ids)) => Err(format!(
                        "it arrived while {} {} {} still open",
                        if ids.len() == 1 { one } else { many },
                        ids.iter()
                            .map(|id| format!("`{id}`"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        if ids.len() == 1 { "is" } else { "are" }
                    )),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// Records what an admitted event opens, closes and owns.
    fn record(&mut self, event: &Event, undo: Option<&mut Vec<Undo>>) {
        // Streaming (CONTENT, ARGS) records nothing: no lookups, no clones.
        if matches!(
            event,
            Event::TextMessageContent(_)
                | Event::ToolCallArgs(_)
                | Event::ReasoningMessageContent(_)
        ) {
            return;
        }
        let tag = tag(event).clone();
        match event {
            Event::RunStarted(e) => {
                *self = Order {
                    run: RunStatus::Active,
                    ..Order::default()
                };
                if let Some(input) = &e.input {
                    self.seed(&input.messages, false);
                }
            }
            Event::RunFinished(_) => self.run = RunStatus::Finished,
            Event::RunError(_) => self.run = RunStatus::Errored,
            Event::TextMessageStart(e) => self.open(Bracket::Text, &e.message_id, tag, undo),
            Event::TextMessageEnd(e) => self.close(Bracket::Text, &e.message_id, undo),
            Event::ToolCallStart(e) => {
                let owner = match tag {
                    Some(t) => Some(t),
                    None => e
                        .parent_message_id
                        .as_ref()
                        .and_then(|p| self.owners.message.get(p).cloned())
                        .flatten(),
                };
                self.open(Bracket::Tool, &e.tool_call_id, owner, undo);
            }
            Event::ToolCallEnd(e) => self.close(Bracket::Tool, &e.tool_call_id, undo),
            Event::ToolCallResult(e) => {
                self.owners.message.insert(e.message_id.clone(), tag);
            }
            Event::ReasoningStart(e) => {
                self.open_spans.push(e.message_id.clone());
                self.owners
                    .reasoning
                    .entry(e.message_id.clone())
                    .or_insert(tag);
            }
            Event::ReasoningEnd(e) => remove(&mut self.open_spans, &e.message_id),
            Event::ReasoningMessageStart(e) => {
                self.open(Bracket::Reasoning, &e.message_id, tag, undo)
            }
            Event::ReasoningMessageEnd(e) => self.close(Bracket::Reasoning, &e.message_id, undo),
            Event::ActivitySnapshot(e)
                if !self.owners.activity.contains_key(&e.message_id)
                    || e.replace != Some(false) =>
            {
                self.owners.activity.insert(e.message_id.clone(), tag);
            }
            Event::StepStarted(e) => self.steps.push((tag, e.step_name.clone())),
            Event::StepFinished(e) => {
                if let Some(i) = self
                    .steps
                    .iter()
                    .position(|(o, n)| *o == tag && *n == e.step_name)
                {
                    self.steps.remove(i);
                }
            }
            Event::SubagentStarted(_) => self.active_subagents.extend(tag),
            Event::SubagentFinished(_) | Event::SubagentError(_) => {
                if let Some(id) = tag {
                    remove(&mut self.active_subagents, &id);
                    self.closed_subagents.insert(id);
                }
            }
            Event::MessagesSnapshot(e) => self.seed(&e.messages, true),
            _ => {}
        }
    }

    fn open(&mut self, kind: Bracket, id: &str, owner: Owner, mut undo: Option<&mut Vec<Undo>>) {
        self.open_mut(kind).push(id.to_owned());
        if let Some(undo) = undo.as_deref_mut() {
            undo.push(Undo::Close(kind, id.to_owned()));
        }
        if !self.owners_mut(kind).contains_key(id) {
            self.owners_mut(kind).insert(id.to_owned(), owner);
            if let Some(undo) = undo {
                undo.push(Undo::Disown(kind, id.to_owned()));
            }
        }
    }

    fn close(&mut self, kind: Bracket, id: &str, undo: Option<&mut Vec<Undo>>) {
        remove(self.open_mut(kind), id);
        if let Some(undo) = undo {
            undo.push(Undo::Reopen(kind, id.to_owned()));
        }
    }

    /// Records the owners of replayed messages: a snapshot's replace the recorded ones, a run's
    /// input only fills the gaps.
    fn seed(&mut self, messages: &[AguiMessage], authoritative: bool) {
        for message in messages {
            let bucket = match message {
                AguiMessage::Reasoning(_) => &mut self.owners.reasoning,
                AguiMessage::Activity(_) => &mut self.owners.activity,
                _ => &mut self.owners.message,
            };
            let owner = message.subagent_run_id().map(str::to_owned);
            if authoritative || !bucket.contains_key(message.id()) {
                bucket.insert(message.id().to_owned(), owner.clone());
            }
            for call in message.tool_calls() {
                if authoritative || !self.owners.tool_call.contains_key(&call.id) {
                    self.owners.tool_call.insert(call.id.clone(), owner.clone());
                }
            }
        }
    }
}
