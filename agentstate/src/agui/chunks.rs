//! Chunk events (`TEXT_MESSAGE_CHUNK`, `TOOL_CALL_CHUNK`, `REASONING_MESSAGE_CHUNK`) expanded
//! to START / CONTENT / END, as the official client's `transformChunks` does.
//!
//! One chunk stream may be open per *lane*, a lane being the agent the chunks are attributed to
//! (`subagentRunId`; none is the parent agent), so subagents streaming at once do not close
//! each other's messages. A chunk of another kind or id closes its lane's stream (with its END)
//! and opens a new one (with a START); continuation chunks may omit the id (and the tag: an
//! untagged continuation goes to the parent's stream of its kind, or else to the only open
//! stream of its kind); the first chunk may not. A continuation may repeat its opener's role,
//! name, tool name or parent, but not contradict them. A chunk's metadata rides on the START it
//! opens and on its CONTENT; a continuation carrying only metadata becomes an empty CONTENT.
//!
//! Other events close streams before they apply: the explicit message, tool call, reasoning,
//! state, step and `CUSTOM` events close their own lane's; `RUN_*` and `MESSAGES_SNAPSHOT`
//! every lane's; a subagent's `SUBAGENT_FINISHED` / `SUBAGENT_ERROR` its lane's; `RAW`,
//! `ACTIVITY_*`, `REASONING_ENCRYPTED_VALUE` and `SUBAGENT_STARTED` none.

use super::event::*;
use super::message::TextRole;
use super::order::Bracket;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The stream a lane is assembling from chunks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OpenChunk {
    Text {
        id: String,
        role: TextRole,
        name: Option<String>,
        tag: Option<String>,
    },
    Tool {
        id: String,
        name: String,
        parent: Option<String>,
        tag: Option<String>,
    },
    Reasoning {
        id: String,
        tag: Option<String>,
    },
}

impl OpenChunk {
    fn kind(&self) -> Bracket {
        match self {
            OpenChunk::Text { .. } => Bracket::Text,
            OpenChunk::Tool { .. } => Bracket::Tool,
            OpenChunk::Reasoning { .. } => Bracket::Reasoning,
        }
    }

    fn tag(&self) -> &Option<String> {
        match self {
            OpenChunk::Text { tag, .. }
            | OpenChunk::Tool { tag, .. }
            | OpenChunk::Reasoning { tag, .. } => tag,
        }
    }

    fn id(&self) -> &str {
        match self {
            OpenChunk::Text { id, .. }
            | OpenChunk::Tool { id, .. }
            | OpenChunk::Reasoning { id, .. } => id,
        }
    }

    /// The END that closes the stream, attributed to its opener.
    fn end(&self) -> Event {
        match self {
            OpenChunk::Text { id, tag, .. } => Event::TextMessageEnd(TextMessageEndEvent {
                message_id: id.clone(),
                base: tagged(tag),
            }),
            OpenChunk::Tool { id, tag, .. } => Event::ToolCallEnd(ToolCallEndEvent {
                tool_call_id: id.clone(),
                base: tagged(tag),
            }),
            OpenChunk::Reasoning { id, tag } => {
                Event::ReasoningMessageEnd(ReasoningMessageEndEvent {
                    message_id: id.clone(),
                    base: tagged(tag),
                })
            }
        }
    }
}

fn tagged(tag: &Option<String>) -> EventBase {
    EventBase {
        subagent_run_id: tag.clone(),
        ..Default::default()
    }
}

/// A synthesized event's base: the chunk's metadata (and raw event, when `raw`), and `tag`.
fn from_chunk(chunk: &EventBase, tag: Option<String>, raw: bool) -> EventBase {
    EventBase {
        timestamp: None,
        raw_event: if raw { chunk.raw_event.clone() } else { None },
        metadata: chunk.metadata.clone(),
        subagent_run_id: tag,
    }
}

/// The CONTENT (or ARGS) a continuation chunk stands for.
pub(crate) struct Continuation<'e> {
    pub(crate) kind: Bracket,
    pub(crate) id: String,
    pub(crate) delta: &'e str,
    /// The chunk's subagent, or its opener's.
    pub(crate) owner: Option<String>,
    pub(crate) metadata: &'e Option<Map<String, Value>>,
}

/// What to do to the lanes once an expansion is admitted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LaneChange {
    Close(Option<String>),
    Open(Option<String>, OpenChunk),
}

/// The events one event expands to, and what it does to the lanes.
pub(crate) struct Expansion<'a> {
    pub(crate) events: Vec<Cow<'a, Event>>,
    pub(crate) changes: Vec<LaneChange>,
}

/// The open chunk streams, in the order they opened.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Lanes(Vec<(Option<String>, OpenChunk)>);

impl Lanes {
    fn get(&self, lane: &Option<String>) -> Option<&OpenChunk> {
        self.0.iter().find(|(l, _)| l == lane).map(|(_, c)| c)
    }

    /// Applies admitted changes.
    pub(crate) fn commit(&mut self, changes: Vec<LaneChange>) {
        for change in changes {
            match change {
                LaneChange::Close(lane) => self.0.retain(|(l, _)| *l != lane),
                LaneChange::Open(lane, chunk) => {
                    self.0.retain(|(l, _)| *l != lane);
                    self.0.push((lane, chunk));
                }
            }
        }
    }

    /// True when no chunk stream is open.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Forgets every open stream (a run error, a cancellation).
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// A chunk that only continues its agent's open stream with a CONTENT (or ARGS), and
    /// repeats nothing of its opener: the streaming case, applied without building events.
    pub(crate) fn continuation<'e>(&self, event: &'e Event) -> Option<Continuation<'e>> {
        let (kind, id, repeats, delta, base) = match event {
            Event::TextMessageChunk(c) => (
                Bracket::Text,
                c.message_id.as_ref(),
                c.role.is_some() || c.name.is_some(),
                c.delta.as_deref(),
                &c.base,
            ),
            Event::ToolCallChunk(c) => (
                Bracket::Tool,
                c.tool_call_id.as_ref(),
                c.tool_call_name.is_some() || c.parent_message_id.is_some(),
                c.delta.as_deref(),
                &c.base,
            ),
            Event::ReasoningMessageChunk(c) => (
                Bracket::Reasoning,
                c.message_id.as_ref(),
                false,
                c.delta.as_deref(),
                &c.base,
            ),
            _ => return None,
        };
        if repeats || (delta.is_none() && base.raw_event.is_none() && base.metadata.is_none()) {
            return None;
        }
        let tag = &base.subagent_run_id;
        let lane = self.resolve(kind, id, tag, "").ok()?;
        let open = self.get(&lane)?;
        if open.kind() != kind || id.is_some_and(|id| id != open.id()) {
            return None;
        }
        Some(Continuation {
            kind,
            id: open.id().to_owned(),
            delta: delta.unwrap_or(""),
            owner: tag.clone().or_else(|| open.tag().clone()),
            metadata: &base.metadata,
        })
    }

    /// `None` when `event` needs no expansion: it is applied as it is (the common case).
    /// `Err` when a chunk cannot be expanded; nothing changed.
    pub(crate) fn expand<'a>(&self, event: &'a Event) -> Result<Option<Expansion<'a>>, String> {
        let lane_of = |e: &Event| e.base().and_then(|b| b.subagent_run_id.clone());
        let closing: Vec<Option<String>> = match event {
            Event::TextMessageChunk(c) => return self.text_chunk(c).map(Some),
            Event::ToolCallChunk(c) => return self.tool_chunk(c).map(Some),
            Event::ReasoningMessageChunk(c) => return self.reasoning_chunk(c).map(Some),
            _ if self.0.is_empty() => return Ok(None),
            Event::TextMessageStart(_)
            | Event::TextMessageContent(_)
            | Event::TextMessageEnd(_)
            | Event::ToolCallStart(_)
            | Event::ToolCallArgs(_)
            | Event::ToolCallEnd(_)
            | Event::ToolCallResult(_)
            | Event::StateSnapshot(_)
            | Event::StateDelta(_)
            | Event::Custom(_)
            | Event::StepStarted(_)
            | Event::StepFinished(_)
            | Event::ReasoningStart(_)
            | Event::ReasoningMessageStart(_)
            | Event::ReasoningMessageContent(_)
            | Event::ReasoningMessageEnd(_)
            | Event::ReasoningEnd(_) => vec![lane_of(event)],
            Event::RunStarted(_)
            | Event::RunFinished(_)
            | Event::RunError(_)
            | Event::MessagesSnapshot(_) => self.0.iter().map(|(l, _)| l.clone()).collect(),
            Event::SubagentFinished(_) | Event::SubagentError(_) => match lane_of(event) {
                Some(lane) => vec![Some(lane)],
                None => return Ok(None),
            },
            Event::Raw(_)
            | Event::ActivitySnapshot(_)
            | Event::ActivityDelta(_)
            | Event::ReasoningEncryptedValue(_)
            | Event::SubagentStarted(_)
            | Event::Unknown(_) => return Ok(None),
        };
        let mut events = Vec::new();
        let mut changes = Vec::new();
        for lane in closing {
            if let Some(open) = self.get(&lane) {
                events.push(Cow::Owned(open.end()));
                changes.push(LaneChange::Close(lane));
            }
        }
        if events.is_empty() {
            return Ok(None);
        }
        events.push(Cow::Borrowed(event));
        Ok(Some(Expansion { events, changes }))
    }

    /// The lane a chunk belongs to.
    fn resolve(
        &self,
        kind: Bracket,
        id: Option<&String>,
        tag: &Option<String>,
        what: &str,
    ) -> Result<Option<String>, String> {
        if let Some(id) = id {
            let holder = self
                .0
                .iter()
                .find(|(_, c)| c.kind() == kind && c.id() == id);
            return match (holder, tag) {
                (Some((lane, _)), Some(t)) if lane.as_ref() != Some(t) => Err(format!(
                    "{what} `{id}` is being streamed by {}, but the chunk is attributed to subagent `{t}`",
                    lane.as_ref().map_or("the parent agent".to_owned(), |l| format!("subagent `{l}`"))
                )),
                (Some((lane, _)), _) => Ok(lane.clone()),
                (None, _) => Ok(tag.clone()),
            };
        }
        if tag.is_some() {
            return Ok(tag.clone());
        }
        if self.get(&None).is_some_and(|c| c.kind() == kind) {
            return Ok(None);
        }
        let mut candidates = self.0.iter().filter(|(_, c)| c.kind() == kind);
        match (candidates.next(), candidates.next()) {
            (Some((lane, _)), None) => Ok(lane.clone()),
            (Some(_), Some(_)) => Err(format!(
                "it names neither its {what} nor its subagent, and several subagents are streaming one"
            )),
            (None, _) => Ok(None),
        }
    }

    fn text_chunk<'a>(&self, chunk: &TextMessageChunkEvent) -> Result<Expansion<'a>, String> {
        let role = chunk.role.unwrap_or_default();
        self.expand_chunk(
            ChunkParts {
                kind: Bracket::Text,
                what: "text message",
                id_field: "messageId",
                id: chunk.message_id.as_ref(),
                delta: chunk.delta.as_ref(),
                base: &chunk.base,
            },
            |open| match open {
                OpenChunk::Text { id, role, name, .. } => {
                    agree(
                        "text message",
                        id,
                        "role",
                        chunk.role.map(TextRole::as_str),
                        Some(role.as_str()),
                    )?;
                    agree(
                        "text message",
                        id,
                        "name",
                        chunk.name.as_deref(),
                        name.as_deref(),
                    )
                }
                _ => Ok(()),
            },
            |id, base| {
                let start = Event::TextMessageStart(TextMessageStartEvent {
                    message_id: id.clone(),
                    role: Some(role),
                    name: chunk.name.clone(),
                    base,
                });
                let stream = OpenChunk::Text {
                    id: id.clone(),
                    role,
                    name: chunk.name.clone(),
                    tag: chunk.base.subagent_run_id.clone(),
                };
                Ok((start, stream))
            },
            |message_id, delta, base| {
                Event::TextMessageContent(TextMessageContentEvent {
                    message_id,
                    delta,
                    base,
                })
            },
        )
    }

    fn tool_chunk<'a>(&self, chunk: &ToolCallChunkEvent) -> Result<Expansion<'a>, String> {
        self.expand_chunk(
            ChunkParts {
                kind: Bracket::Tool,
                what: "tool call",
                id_field: "toolCallId",
                id: chunk.tool_call_id.as_ref(),
                delta: chunk.delta.as_ref(),
                base: &chunk.base,
            },
            |open| match open {
                OpenChunk::Tool {
                    id, name, parent, ..
                } => {
                    agree(
                        "tool call",
                        id,
                        "toolCallName",
                        chunk.tool_call_name.as_deref(),
                        Some(name),
                    )?;
                    agree(
                        "tool call",
                        id,
                        "parentMessageId",
                        chunk.parent_message_id.as_deref(),
                        parent.as_deref(),
                    )
                }
                _ => Ok(()),
            },
            |id, base| {
                let Some(name) = &chunk.tool_call_name else {
                    return Err(format!(
                        "the first chunk of tool call `{id}` needs a toolCallName"
                    ));
                };
                let start = Event::ToolCallStart(ToolCallStartEvent {
                    tool_call_id: id.clone(),
                    tool_call_name: name.clone(),
                    parent_message_id: chunk.parent_message_id.clone(),
                    base,
                });
                let stream = OpenChunk::Tool {
                    id: id.clone(),
                    name: name.clone(),
                    parent: chunk.parent_message_id.clone(),
                    tag: chunk.base.subagent_run_id.clone(),
                };
                Ok((start, stream))
            },
            |tool_call_id, delta, base| {
                Event::ToolCallArgs(ToolCallArgsEvent {
                    tool_call_id,
                    delta,
                    base,
                })
            },
        )
    }

    fn reasoning_chunk<'a>(
        &self,
        chunk: &ReasoningMessageChunkEvent,
    ) -> Result<Expansion<'a>, String> {
        self.expand_chunk(
            ChunkParts {
                kind: Bracket::Reasoning,
                what: "reasoning message",
                id_field: "messageId",
                id: chunk.message_id.as_ref(),
                delta: chunk.delta.as_ref(),
                base: &chunk.base,
            },
            |_| Ok(()),
            |id, base| {
                let start = Event::ReasoningMessageStart(ReasoningMessageStartEvent {
                    message_id: id.clone(),
                    role: "reasoning".to_owned(),
                    base,
                });
                let stream = OpenChunk::Reasoning {
                    id: id.clone(),
                    tag: chunk.base.subagent_run_id.clone(),
                };
                Ok((start, stream))
            },
            |message_id, delta, base| {
                Event::ReasoningMessageContent(ReasoningMessageContentEvent {
                    message_id,
                    delta,
                    base,
                })
            },
        )
    }

    /// Expands one chunk: continues its lane's stream (`agree` checks what it repeats), or
    /// closes it and opens a new one (`open` builds the START and the stream from the id and
    /// the START's base); then the CONTENT (`content` from the id, delta and base).
    fn expand_chunk<'a>(
        &self,
        chunk: ChunkParts<'_>,
        agree: impl FnOnce(&OpenChunk) -> Result<(), String>,
        open: impl FnOnce(&String, EventBase) -> Result<(Event, OpenChunk), String>,
        content: impl FnOnce(String, String, EventBase) -> Event,
    ) -> Result<Expansion<'a>, String> {
        let tag = &chunk.base.subagent_run_id;
        let lane = self.resolve(chunk.kind, chunk.id, tag, chunk.what)?;
        let mut events = Vec::new();
        let mut changes = Vec::new();
        let current = self.get(&lane);
        let (id, opener_tag) = match current {
            Some(stream)
                if stream.kind() == chunk.kind && chunk.id.is_none_or(|id| id == stream.id()) =>
            {
                agree(stream)?;
                (stream.id().to_owned(), stream.tag().clone())
            }
            _ => {
                let Some(id) = chunk.id else {
                    return Err(format!(
                        "the first chunk of a {} needs a {}",
                        chunk.what, chunk.id_field
                    ));
                };
                let (start, stream) = open(id, from_chunk(chunk.base, tag.clone(), false))?;
                if let Some(previous) = current {
                    events.push(Cow::Owned(previous.end()));
                }
                events.push(Cow::Owned(start));
                changes.push(LaneChange::Open(lane, stream));
                (id.clone(), tag.clone())
            }
        };
        // A CONTENT for a delta or a raw event; for a continuation carrying only metadata, an
        // empty one, so that the metadata still reaches the message.
        if chunk.delta.is_some()
            || chunk.base.raw_event.is_some()
            || (events.is_empty() && chunk.base.metadata.is_some())
        {
            let owner = tag.clone().or(opener_tag);
            let delta = chunk.delta.cloned().unwrap_or_default();
            events.push(Cow::Owned(content(
                id,
                delta,
                from_chunk(chunk.base, owner, true),
            )));
        }
        Ok(Expansion { events, changes })
    }
}

/// What the expansion needs to know of a chunk, whatever its kind.
struct ChunkParts<'c> {
    kind: Bracket,
    what: &'static str,
    id_field: &'static str,
    id: Option<&'c String>,
    delta: Option<&'c String>,
    base: &'c EventBase,
}

/// A continuation may repeat its opener's field, with the same value.
fn agree(
    what: &str,
    id: &str,
    field: &str,
    incoming: Option<&str>,
    established: Option<&str>,
) -> Result<(), String> {
    match incoming {
        Some(value) if Some(value) != established => Err(format!(
            "the chunk's {field} `{value}` contradicts {what} `{id}`'s opening chunk ({})",
            established.map_or("none".to_owned(), |e| format!("`{e}`"))
        )),
        _ => Ok(()),
    }
}
